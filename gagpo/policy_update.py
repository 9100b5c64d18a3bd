"""The policy update: PPO-style passes over an iteration's actions (gagpo.losses's clipped
surrogate, KL to a frozen reference, entropy bonus), micro-batched to a token budget and summed
over ranks; and the recomputation of the rollout's log-probs with the trained model's numerics.

:func:`optimizer_steps` is the loop every update of the trainer runs (the policy's here, the
critic's in :mod:`gagpo.critic`): ``ppo_epochs`` passes of ``num_minibatches`` optimizer steps,
each minibatch cut into micro-batches (gradient accumulation) of at most ``micro_batch_tokens``
padded tokens. The update trains on an :class:`UpdateBatch`, which nothing changes in place:
:func:`recompute_old_logprobs` returns a new one.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gagpo.batching import micro_batches
from gagpo.distributed import (
    Compute,
    all_reduce_sum,
    full_parameters,
    grad_norm_clip,
    is_sharded,
    sync_gradients,
    with_padding_passes,
)
from gagpo.logprobs import right_align
from gagpo.losses import LossConfig, policy_loss
from gagpo.passes import Passes

if TYPE_CHECKING:
    from gagpo.train_config import TrainConfig


def optimizer_steps(model: Any, optimizer: torch.optim.Optimizer, lengths: list[int],
                    cfg: TrainConfig, *, compute: Compute, epoch_seed: int,
                    count: Callable[[list[int]], float],
                    micro_step: Callable[[list[int] | None, float], None],
                    split: Callable[[list[int]], list[list[int]]] | None = None) -> float:
    """``ppo_epochs`` passes of ``num_minibatches`` optimizer steps over items of the given
    ``lengths`` (padded tokens each), in an order seeded by ``epoch_seed + epoch``.

    Each minibatch, sorted by length, is dealt to this rank's micro-batches of at most
    ``micro_batch_tokens`` padded tokens (or as ``split(minibatch)`` cuts it); ``micro_step(idx,
    denominator)`` runs one forward and backward pass on items ``idx`` (None: a padding pass,
    which must run the same collectives with no gradient), with ``denominator`` the global
    ``count(minibatch)`` over all ``compute.world`` ranks, which its loss divides by. Gradients
    are then summed over ranks, clipped to ``max_grad_norm`` and applied, and freed at the end
    (room for the next rollouts' cache). Returns the sum of the steps' gradient norms before
    clipping.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    sharded, world = is_sharded(model), compute.world
    grad_norm = 0.0
    for epoch in range(cfg.ppo_epochs):
        order = torch.randperm(len(lengths),
                               generator=torch.Generator().manual_seed(epoch_seed + epoch))
        for mb in np.array_split(order.numpy(), cfg.num_minibatches):
            mb = sorted(mb, key=lambda i: lengths[i])
            denom = all_reduce_sum(float(count(mb)), world)
            optimizer.zero_grad(set_to_none=True)
            chunks = split(mb) if split is not None else [
                [mb[j] for j in c] for c in micro_batches([lengths[i] for i in mb],
                                                          cfg.micro_batch_tokens)]
            for idx in with_padding_passes(chunks, world, sharded):
                micro_step(idx, denom)
            sync_gradients(model, params, world)
            if cfg.max_grad_norm > 0:
                grad_norm += grad_norm_clip(params, cfg.max_grad_norm)
            optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return grad_norm


@dataclass(frozen=True)
class UpdateBatch:
    """The actions an update trains on, one row per environment step (the same number of rows
    in each field; the sequences are tuples, so that no holder can change them in place)."""

    prompt: tuple[tuple[int, ...], ...]
    """The prompt's token ids."""
    reply: tuple[tuple[int, ...], ...]
    """The reply's token ids: the action, whose tokens are trained on."""
    old_logp: tuple[tuple[float, ...], ...]
    """The reply tokens' log-probs under the rollout policy (one per reply token)."""
    adv: tuple[float, ...]
    """The action's advantage, shared by its tokens."""

    def __post_init__(self) -> None:
        rows = {len(self.prompt), len(self.reply), len(self.old_logp), len(self.adv)}
        if len(rows) > 1:
            raise ValueError(f"an update batch's fields have different row counts: {rows}")
        # Frozen, and deeply: lists given in are copied into tuples once.
        for name in ("prompt", "reply", "old_logp"):
            object.__setattr__(self, name, tuple(tuple(r) for r in getattr(self, name)))
        object.__setattr__(self, "adv", tuple(float(a) for a in self.adv))

    def __len__(self) -> int:
        return len(self.adv)

    @classmethod
    def of(cls, batch: UpdateBatch | Mapping[str, Sequence]) -> UpdateBatch:
        """``batch`` itself, or the batch of a mapping with the fields' names as keys."""
        if isinstance(batch, cls):
            return batch
        return cls(**{f.name: batch[f.name] for f in fields(cls)})

    def with_old_logp(self, old_logp: Sequence[Sequence[float]]) -> UpdateBatch:
        """The same actions with other rollout log-probs."""
        return replace(self, old_logp=old_logp)


@dataclass(frozen=True)
class UpdateStats:
    """What one :func:`update` measured; the trainer logs each field as ``loss/<name>``."""

    pg_loss: float
    """Clipped policy-gradient loss, per token."""
    kl: float
    """Low-variance KL to the reference policy, per token."""
    entropy: float
    """Entropy of the policy, per token."""
    clip_frac: float
    """Share of tokens whose ratio was clipped."""
    ratio_mean: float
    """Mean importance ratio pi / pi_old, per token."""
    grad_norm: float
    """Gradient norm before clipping, mean over the optimizer steps."""
    padded_tokens: float
    """Tokens the forward passes ran on: padding included, a prompt shared by rows once
    where the passes are packed."""

    @classmethod
    def skipped(cls) -> UpdateStats:
        """An update that did not run (the policy waiting out PPO's critic warm-up)."""
        return cls(*[0.0] * len(fields(cls)))


def frozen_reference(model: Any, amp: torch.dtype | None) -> Any:
    """A frozen copy of ``model``: the KL reference policy.

    Under autocast (``amp``) its ``nn.Linear`` weights are kept in the autocast dtype: autocast
    casts them to it for every product anyway, so the reference's log-probs are bit-identical
    to a float32 copy's, in half the memory (212 of SmolLM2-135M's 540 MB). A weight tied to
    the input embeddings stays float32 (the embedding lookup reads it uncast), and so do the
    norms. LoRA-wrapped models are copied as they are (PEFT casts inputs of its own)."""
    ref = copy.deepcopy(model).eval().requires_grad_(False)
    if amp is None or hasattr(ref, "peft_config"):
        return ref
    tied = {id(ref.get_input_embeddings().weight)} if hasattr(ref, "get_input_embeddings") \
        else set()
    for module in ref.modules():
        if type(module) is torch.nn.Linear and id(module.weight) not in tied:
            module.to(amp)
    return ref


@contextlib.contextmanager
def reference_weights(model: Any, ref_model: Any | None):
    """The frozen reference policy: the base model under LoRA (adapters off), else a copy."""
    if ref_model is not None:
        yield ref_model
    else:
        with model.disable_adapter():
            yield model


def sampling_temperature(cfg: TrainConfig) -> float:
    """The temperature of the rollout's log-probs: generated ones are log_softmax(logits / T);
    score-mode ones are the raw model's."""
    return cfg.temperature if cfg.mode == "generate" and cfg.temperature > 0 else 1.0


def update(model: Any, ref_model: Any | None, optimizer: torch.optim.Optimizer,
           batch: UpdateBatch | Mapping[str, Sequence], cfg: TrainConfig, *, compute: Compute,
           epoch_seed: int, passes: Passes | None = None) -> UpdateStats:
    """The policy's :func:`optimizer_steps` on ``batch`` (prompts, replies, old log-probs,
    advantages; an :class:`UpdateBatch` or a mapping of its fields), with the clipped surrogate
    of :func:`gagpo.losses.policy_loss`. ``passes``: how the passes run (the run's; None: as
    :meth:`gagpo.passes.Passes.choose` chooses for ``model``), gradients summed over
    ``compute.world`` ranks."""
    batch = UpdateBatch.of(batch)
    short = [i for i, (lp, r) in enumerate(zip(batch.old_logp, batch.reply, strict=True))
             if len(lp) != len(r)]
    if short:  # right-aligned, each token's ratio would be taken against another's log-prob
        raise ValueError(f"old_logp of row {short[0]} has {len(batch.old_logp[short[0]])} "
                         f"log-probs for a reply of {len(batch.reply[short[0]])} tokens "
                         f"({len(short)} such rows): one per reply token")
    passes = passes or Passes.choose(model, cfg, compute)
    loss_cfg = LossConfig(ratio_level=cfg.resolved_ratio_level(), clip_eps=cfg.clip_eps,
                          clip_eps_high=cfg.clip_eps_high, dual_clip=cfg.dual_clip,
                          kl_coef=cfg.kl_coef, entropy_coef=cfg.entropy_coef,
                          aggregation=cfg.resolved_aggregation())
    temp = sampling_temperature(cfg)
    scale = passes.loss_scale(model)
    totals: dict[str, float] = {}

    def count(mb: list[int]) -> float:
        """The denominator of the mean: the minibatch's reply tokens, or its actions."""
        if loss_cfg.aggregation == "token-mean":
            return sum(len(batch.reply[i]) for i in mb)
        return len(mb)

    def micro_step(idx: list[int] | None, denom: float) -> None:
        weight = 0.0 if idx is None else 1.0  # None: a padding pass, same collectives
        if idx is None:
            (prompts, replies), olds, advs = passes.padding_rows(), [[0.0]], [0.0]
        else:
            prompts, replies = [batch.prompt[i] for i in idx], [batch.reply[i] for i in idx]
            olds, advs = [batch.old_logp[i] for i in idx], [batch.adv[i] for i in idx]
        logp, mask, ent = passes.logprobs(model, prompts, replies, temperature=temp,
                                          with_entropy=True)
        old = right_align(olds, mask.shape[1], logp.device)
        ref = None
        if cfg.kl_coef > 0:
            with torch.no_grad(), reference_weights(model, ref_model) as ref_net:
                ref = passes.logprobs(ref_net, prompts, replies, temperature=temp)[0]
        adv = torch.tensor(advs, device=logp.device)
        loss, stats = policy_loss(logp, old, adv, mask, loss_cfg, ref_logp=ref, entropy=ent,
                                  denominator=denom)
        # No averaging over ranks anywhere: each rank's loss is already over the global
        # denominator, so summing gradients over ranks gives the global mean's.
        (loss * weight * scale).backward()
        if idx is None:
            return
        stats["passed_tokens"] = passes.tokens(prompts, replies)
        for k, v in stats.items():
            totals[k] = totals.get(k, 0.0) + (v * denom if k == "pg" else v)

    lengths = [len(p) + len(r) for p, r in zip(batch.prompt, batch.reply, strict=True)]
    with passes.training(model):
        grad_norm = optimizer_steps(
            model, optimizer, lengths, cfg, compute=compute, epoch_seed=epoch_seed,
            count=count, micro_step=micro_step,
            split=lambda mb: passes.split(batch.prompt, batch.reply, mb))
    steps = cfg.ppo_epochs * cfg.num_minibatches
    tok = max(totals.get("tokens", 0.0), 1.0)
    return UpdateStats(pg_loss=totals.get("pg", 0.0) / tok, kl=totals.get("kl", 0.0) / tok,
                       entropy=totals.get("entropy", 0.0) / tok,
                       clip_frac=totals.get("clip_frac", 0.0) / tok,
                       ratio_mean=totals.get("ratio", 0.0) / tok,
                       grad_norm=grad_norm / steps,
                       padded_tokens=totals.get("passed_tokens", 0.0))


def recompute_old_logprobs(model: Any, batch: UpdateBatch | Mapping[str, Sequence],
                           cfg: TrainConfig, *, compute: Compute, passes: Passes | None = None
                           ) -> tuple[UpdateBatch, tuple[float, int]]:
    """``batch`` with the sampler's log-probs replaced by the trained model's own, at the
    sampling temperature (a new batch: ``batch`` is left as it is), and ``(sum of |sampler -
    recomputed|, tokens compared)``: how far the sampler's numerics (vLLM's kernels, another
    dtype) are from the trainer's."""
    batch = UpdateBatch.of(batch)
    passes = passes or Passes.choose(model, cfg, compute)
    temp = sampling_temperature(cfg)
    # Inside full_parameters a pass is no collective: ranks may run different numbers.
    chunks = passes.split(batch.prompt, batch.reply, range(len(batch)), collective=False)
    gap, compared = 0.0, 0
    recomputed: list[Sequence[float]] = list(batch.old_logp)
    with torch.no_grad(), full_parameters(model):
        for idx in chunks:
            replies = [batch.reply[i] for i in idx]
            logp, mask, _ = passes.logprobs(model, [batch.prompt[i] for i in idx], replies,
                                            temperature=temp)
            for j, i in enumerate(idx):
                mine = logp[j, mask.shape[1] - len(replies[j]):].tolist()
                sampled = batch.old_logp[i]
                if len(sampled) == len(mine):
                    gap += sum(abs(a - b) for a, b in zip(sampled, mine, strict=True))
                    compared += len(mine)
                recomputed[i] = mine
    return batch.with_old_logp(recomputed), (gap, compared)
