"""Run under ``torchrun --nproc_per_node=2``: a checkpoint's full tensors loaded into the tiny
model sharded by FSDP (:func:`gagpo.distributed.load_full_state`), rank 0 holding them and the
other rank an empty dict, as a resume does. Rank 0 writes the tensors it meant to load and the
gathered model's to ``OUT`` (a .pt file); tests/test_export.py compares them."""

from __future__ import annotations

import sys
from datetime import timedelta

import torch
from two_ranks import save_from_rank_0

from gagpo.distributed import full_state, load_full_state, setup_distributed, shard_model


def main(parallel: str, out: str) -> None:
    from gagpo.agents.models import load_model

    # A load whose ranks disagree hangs in a collective: fail within minutes, not gloo's 30.
    torch.distributed.init_process_group("gloo", timeout=timedelta(seconds=120))
    rank, _, _ = setup_distributed()
    model, _ = load_model("tiny")
    torch.manual_seed(7)  # the checkpoint: the model's own weights moved, the same on each rank
    wanted = {n: p.detach() + 0.25 * torch.randn_like(p) for n, p in model.named_parameters()}
    expected = {n: t.clone() for n, t in wanted.items()}  # loading may replace the dict's values
    if parallel == "fsdp":
        shard_model(model)
    load_full_state(model, wanted if rank == 0 else {})
    got = full_state(model)
    save_from_rank_0(rank, {"wanted": expected, "got": got}, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
