"""Run under ``torchrun --nproc_per_node=2``: one critic update of the tiny model's value model
on fixed rows, split unevenly over the ranks, under ``--parallel`` ddp or fsdp. Rank 0 writes
the updated weights and the update's gradient norm to ``OUT`` (a .pt file), and under ddp each
rank's critic as it was made (:func:`ddp_starts`).
tests/test_ppo.py compares them with one process updating on all the rows."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import torch
from distributed_update import policy
from two_ranks import save_from_rank_0

from gagpo.critic import Critic, ValueModel
from gagpo.distributed import (
    Compute,
    full_state,
    is_sharded,
    load_full_state,
    setup_distributed,
)
from gagpo.passes import Passes
from gagpo.train_config import TrainConfig

PROMPTS = [[5, 6, 7, 8, 9], [11, 12, 13], [20, 21, 22, 23], [30, 31], [33, 34, 35],
           [33, 34, 35]]
"""Six steps' prompts, the last two one prompt (copies of a task in one state)."""
OLD_VALUES = np.array([0.2, -0.1, 0.0, 0.4, 0.1, 0.1])
TARGETS = np.array([1.0, -2.0, 0.5, 3.0, -1.0, 2.0])
RANK_ROWS = ([0, 1, 2, 3], [4, 5])
"""Uneven on purpose: rank 0 cuts its rows into more micro-batches than rank 1, so that under
FSDP rank 1 runs padding passes to keep the collectives matched."""
SGD_LR = 0.05


def config(parallel: str = "ddp") -> TrainConfig:
    # Two epochs: the first moves the head, the second passes gradients into the backbone
    # through it. A clip wide enough that every row's loss has a gradient.
    return TrainConfig(model="tiny", algo="ppo", parallel=parallel, micro_batch_tokens=12,
                       value_clip=100.0, ppo_epochs=2, num_minibatches=1, max_grad_norm=1000.0)


def start_weights() -> dict[str, torch.Tensor]:
    """The value model's starting weights, with a head that reads the state (a zero head, the
    critic's own start, passes no gradient to the backbone)."""
    model = ValueModel(policy()[0])
    g = torch.Generator().manual_seed(13)
    with torch.no_grad():
        model.head.weight.copy_(0.5 * torch.randn(model.head.weight.shape, generator=g))
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def passes(model: Any, tok: Any, cfg: TrainConfig, rank: int, world: int) -> Passes:
    """Rank ``rank`` of ``world`` in float32, on ``model``'s device, padding with ``tok``'s
    pad token, the passes chosen as a run chooses them."""
    return Passes.choose(model, cfg, Compute(device=next(model.parameters()).device, amp=None,
                                             rank=rank, world=world, pad_id=tok.pad_token_id))


def critic(parallel: str, rank: int = 0, world: int = 1) -> Critic:
    """A critic at :func:`start_weights`, stepped by plain SGD (it moves by exactly ``lr``
    times the gradient, so an error in the gradients' scale shows; Adam's first step would
    not)."""
    model, tok = policy()
    cfg = config(parallel)
    out = Critic(model, tok, cfg, tok, passes=passes(model, tok, cfg, rank, world))
    load_full_state(out.model, start_weights())
    out.optimizer = torch.optim.SGD([p for p in out.model.parameters() if p.requires_grad],
                                    lr=SGD_LR)
    return out


def update(c: Critic, rows: list[int]) -> float:
    """The update on ``rows``; its gradient norm (summed over its optimizer steps)."""
    stats = c.update([PROMPTS[i] for i in rows], OLD_VALUES[rows], TARGETS[rows],
                     epoch_seed=0)
    return stats.grad_norm * c.cfg.ppo_epochs * c.cfg.num_minibatches


def ddp_starts(rank: int, world: int) -> list[dict[str, torch.Tensor]]:
    """Each rank makes a DDP critic from a language model of its own, rank 1's moved off rank
    0's (as a random LoRA start would be); what each rank's critic holds once made."""
    model, tok = policy()
    if rank == 1:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.01)
    cfg = config("ddp")
    made = Critic(model, tok, cfg, tok, passes=passes(model, tok, cfg, rank, world))
    held: list[Any] = [None] * world
    torch.distributed.all_gather_object(
        held, {k: v.detach().clone() for k, v in made.model.state_dict().items()})
    return held


def main(parallel: str, out: str) -> None:
    rank, world, _ = setup_distributed()
    starts = ddp_starts(rank, world) if parallel == "ddp" else None
    c = critic(parallel, rank, world)
    # --parallel fsdp shards the critic (its memory split over the ranks), ddp does not.
    assert is_sharded(c.model) == (parallel == "fsdp"), parallel
    grad_norm = update(c, RANK_ROWS[rank])
    state = full_state(c.model)
    save_from_rank_0(rank, {"params": state, "grad_norm": grad_norm, "starts": starts}, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
