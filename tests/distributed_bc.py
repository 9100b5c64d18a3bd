"""Run under ``torchrun --nproc_per_node=2``: the behaviour-cloning warm start of the tiny
model on fixed demonstrations, split unevenly over the ranks, under ``--parallel`` ddp or fsdp.
Rank 0 writes the cloned parameters and the returned NLL to ``OUT`` (a .pt file).
tests/test_trainer.py compares them with one process cloning on every demonstration."""

from __future__ import annotations

import sys

from two_ranks import save_from_rank_0

from gagpo.distributed import Compute, full_state, setup_distributed, shard_model
from gagpo.train_config import TrainConfig
from gagpo.warm_start import behaviour_cloning


def demonstrations(eos: int) -> list[tuple[list[int], list[int]]]:
    """Six (prompt, reply) pairs of several lengths, each reply ending with EOS."""
    return [([5, 6, 7, 8, 9], [40, 41, eos]), ([11, 12, 13], [43, eos]),
            ([20, 21, 22, 23], [45, 46, 47, eos]), ([30, 31], [49, eos]),
            ([33, 34, 35], [51, 52, eos]), ([50], [53, 54, 55, eos])]


def config() -> TrainConfig:
    # One optimizer step per epoch holds every demonstration; a small micro-batch budget cuts
    # each rank's share into a different number of passes (FSDP pads the shorter side).
    return TrainConfig(bc_lr=1e-2, bc_batch=6, bc_epochs=2, micro_batch_tokens=12, seed=0)


def main(parallel: str, out: str) -> None:
    from gagpo.agents.models import load_model

    rank, world, device = setup_distributed()
    model, tok = load_model("tiny")
    demos = demonstrations(tok.eos_token_id)
    mine = demos[:4] if rank == 0 else demos[4:]  # uneven on purpose
    if parallel == "fsdp":
        shard_model(model)
    model.train()
    compute = Compute(device=device, amp=None, rank=rank, world=world,
                      pad_id=tok.pad_token_id)
    nll = behaviour_cloning(model, mine, config(), compute=compute)
    state = full_state(model)
    save_from_rank_0(rank, {"params": state, "nll": nll}, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
