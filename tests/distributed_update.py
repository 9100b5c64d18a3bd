"""Run under ``torchrun --nproc_per_node=2``: one policy update of the tiny model on a fixed
batch, split unevenly over the ranks, under ``--parallel`` ddp or fsdp. Rank 0 writes the
updated parameters and the update's gradient norm to ``OUT`` (a .pt file).
tests/test_trainer.py compares them with one process updating on the whole batch."""

from __future__ import annotations

import sys

import torch
from two_ranks import save_from_rank_0

from gagpo.distributed import Compute, full_state, setup_distributed, shard_model
from gagpo.train_config import TrainConfig
from gagpo.trainer import update


def fixed_batch() -> dict:
    """Six replies with advantages of both signs, the last two to one prompt (copies of a
    task in one state: packed passes run it once); old log-probs are filled in by the
    caller."""
    prompts = [[5, 6, 7, 8, 9], [11, 12, 13], [20, 21, 22, 23], [30, 31], [33, 34, 35],
               [33, 34, 35]]
    replies = [[40, 41, 42], [43, 44], [45, 46, 47, 48], [49], [51, 52], [53, 54, 55]]
    return {"prompt": prompts, "reply": replies, "adv": [1.0, -1.0, 0.5, -0.5, 2.0, -2.0]}


SGD_LR = 0.05


def config() -> TrainConfig:
    # A small micro-batch budget: several micro-batches per rank, different counts per rank.
    # Clipping runs but does not bind: clipped to a fixed norm, gradients of any scale would
    # move the parameters alike. The KL weight is large, and the reference far from the
    # policy (see reference()), so that a padding pass counted as a real one (its KL term is
    # not zero) moves the parameters beyond the comparison's tolerance.
    return TrainConfig(lr=3e-3, kl_coef=0.5, entropy_coef=0.001, micro_batch_tokens=12,
                       ratio_level="action", max_grad_norm=1000.0)


def policy():
    """The tiny model and its tokenizer, its pad token embedded as a real model's is (the tiny
    model's embeds to zeros, and a zero input leaves every layer's output at zero: a padding
    pass would then have no gradient whatever its weight)."""
    from gagpo.agents.models import load_model

    model, tok = load_model("tiny")
    g = torch.Generator().manual_seed(12)
    with torch.no_grad():
        row = model.get_input_embeddings().weight[tok.pad_token_id]
        row.copy_(torch.randn(row.shape, generator=g))
    return model, tok


def reference(model):
    """The KL reference: a frozen copy of ``model`` moved by fixed noise (a policy after some
    updates), so that the KL term has a gradient from the first step."""
    import copy

    ref = copy.deepcopy(model).eval().requires_grad_(False)
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return ref


def optimizer(params) -> torch.optim.Optimizer:
    """Plain SGD: the parameters move by exactly ``lr`` times the gradient, so any error in the
    gradients' scale shows. (Adam's first step is about ``lr * sign(grad)``, blind to a
    gradient scaled by a constant such as the number of ranks.)"""
    return torch.optim.SGD(params, lr=SGD_LR)


def with_old_logprobs(model, batch: dict, pad_id: int) -> dict:
    from gagpo.logprobs import reply_logprobs

    with torch.no_grad():
        logp, mask, _ = reply_logprobs(model, batch["prompt"], batch["reply"], pad_id=pad_id)
    batch["old_logp"] = [logp[i, mask.shape[1] - len(r):].tolist()
                         for i, r in enumerate(batch["reply"])]
    return batch


def subset(batch: dict, rows: list[int]) -> dict:
    return {k: [v[i] for i in rows] for k, v in batch.items()}


def main(parallel: str, out: str) -> None:
    rank, world, device = setup_distributed()
    model, tok = policy()
    ref = reference(model)
    batch = with_old_logprobs(model, fixed_batch(), tok.pad_token_id)
    mine = subset(batch, [0, 1, 2, 3] if rank == 0 else [4, 5])  # uneven on purpose
    if parallel == "fsdp":
        shard_model(model)
        shard_model(ref)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = optimizer(params)
    # Rank 0 cuts its rows into more micro-batches than rank 1 (whose two rows share a
    # prompt: one packed pass on a CPU): under FSDP rank 1 runs padding passes to keep the
    # collectives matched.
    compute = Compute(device=device, amp=None, rank=rank, world=world,
                      pad_id=tok.pad_token_id)
    stats = update(model, ref, opt, mine, config(), compute=compute, epoch_seed=0)
    state = full_state(model)
    save_from_rank_0(rank, {"params": state, "grad_norm": stats.grad_norm}, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
