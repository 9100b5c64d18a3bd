"""Policy losses for critic-free RL on LLM agents (the log-probs they read are computed in
:mod:`gagpo.logprobs`, the micro-batches cut in :mod:`gagpo.batching`).

One row of a batch is one environment step: an action of ``T`` reply tokens with per-token
log-probs under the current policy (``logp``), the rollout policy (``old_logp``) and a frozen
reference policy (``ref_logp``), a 0/1 ``mask`` over padding and one advantage ``A`` per row,
shared by its tokens. With ``d_t = logp_t - old_logp_t``:

- per-token ratio (PPO, GRPO): ``rho_t = exp(d_t)``;
- action-level ratio (GAGPO, GSPO-style): ``rho = exp(mean_t d_t)`` over the action's tokens,
  the same for every token of the action (the gradient still reaches every token).

The clipped surrogate per token is ``l_t = -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A)``;
with dual clip (Ye et al. 2020) a negative advantage's loss is capped at ``-c A`` so that a huge
ratio cannot blow it up. The KL penalty to the reference uses the low-variance "k3" estimator
``exp(r - l) - (r - l) - 1`` with ``r = ref_logp``, ``l = logp`` (unbiased, always >= 0), and the
entropy bonus subtracts ``entropy_coef * H``. Aggregation:

- ``"token-mean"``: sum over all tokens of the batch / number of tokens (verl's default);
- ``"seq-mean"``: mean over rows of each row's token mean (every action weighs the same).

``denominator`` lets a caller who splits a minibatch into micro-batches (gradient accumulation,
several ranks) pass the whole minibatch's token (or row) count, so that the accumulated gradient
equals that of one big batch exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

RatioLevel = Literal["token", "action"]
Aggregation = Literal["token-mean", "seq-mean"]
RATIO_LEVELS: tuple[str, ...] = ("token", "action")
AGGREGATIONS: tuple[str, ...] = ("token-mean", "seq-mean")


def check_dual_clip(c: float | None) -> None:
    """Raise a ``ValueError`` unless ``c`` is None (off) or a number above 1.

    For a negative advantage the clipped loss at ratio 1 is already ``-A``; a cap ``-c A`` with
    c <= 1 would sit at or below it, so every such action's loss would be the constant cap and
    get no gradient.
    """
    if c is not None and not c > 1.0:  # "not >" also refuses nan
        raise ValueError(f"dual_clip must be above 1 (or None to turn it off), got {c!r}: a "
                         "cap of c <= 1 would flatten the loss of every negative-advantage "
                         "action, which would then get no gradient")


@dataclass(frozen=True)
class LossConfig:
    """The switches of :func:`policy_loss` (verl-agent's defaults)."""

    ratio_level: RatioLevel = "action"
    clip_eps: float = 0.2
    clip_eps_high: float | None = None
    """Upper clip range (``None``: the same as ``clip_eps``; DAPO's clip-higher sets 0.28)."""
    dual_clip: float | None = 3.0
    """c > 1 caps the loss of negative advantages at ``-c A``; None disables it."""
    kl_coef: float = 0.01
    entropy_coef: float = 0.001
    aggregation: Aggregation = "token-mean"

    def __post_init__(self) -> None:
        check_dual_clip(self.dual_clip)


def action_log_ratio(
    logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """``mean_t (logp_t - old_logp_t)`` over each row's unmasked tokens: shape ``[B]``.

    Padding takes no part, whatever it holds: a -inf log-prob there times a mask of 0 would be
    nan, and a nan in one row's mean would reach the whole batch's loss.
    """
    n = mask.sum(-1).clamp(min=1)
    return _real(logp - old_logp, mask).sum(-1) / n


def _real(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``x`` on real tokens, 0 on padding (``where``, not ``x * mask``: ``inf * 0`` is nan)."""
    return torch.where(mask > 0, x, 0.0)


def log_ratio(
    logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor, level: RatioLevel
) -> torch.Tensor:
    """Per-token log ratio ``[B, T]``: per token, or the action's mean broadcast to its tokens."""
    if level == "token":
        return logp - old_logp
    if level == "action":
        return action_log_ratio(logp, old_logp, mask)[:, None].expand_as(logp)
    raise ValueError(f"ratio level must be one of {RATIO_LEVELS}, not {level!r}")


def aggregate(
    x: torch.Tensor, mask: torch.Tensor, how: Aggregation, denominator: float | None = None
) -> torch.Tensor:
    """Reduce per-token values ``[B, T]`` to a scalar (see the module docstring)."""
    if how == "token-mean":
        n = mask.sum() if denominator is None else denominator
        return (x * mask).sum() / max(float(n), 1.0)
    if how == "seq-mean":
        per_row = (x * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        n = mask.shape[0] if denominator is None else denominator
        return per_row.sum() / max(float(n), 1.0)
    raise ValueError(f"aggregation must be one of {AGGREGATIONS}, not {how!r}")


def kl_low_var(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 estimate of KL(pi || pi_ref) per token: ``exp(r - l) - (r - l) - 1``, clamped as in
    verl (a token the reference finds very unlikely must not dominate the batch)."""
    d = torch.clamp(ref_logp - logp, -20.0, 20.0)
    return torch.clamp(torch.exp(d) - d - 1.0, -10.0, 10.0)


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    cfg: LossConfig = LossConfig(),
    *,
    ref_logp: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    denominator: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped surrogate (+ KL, - entropy bonus) of one (micro-)batch and its statistics.

    Args:
        logp, old_logp, mask: ``[B, T]``; ``mask`` is 1 on reply tokens, 0 on padding.
        advantages: ``[B]``, one per action (broadcast to its tokens).
        cfg: ratio level, clip ranges, coefficients, aggregation.
        ref_logp: the reference policy's log-probs (needed when ``cfg.kl_coef > 0``).
        entropy: per-token entropies ``[B, T]`` (needed when ``cfg.entropy_coef > 0``).
        denominator: the token (token-mean) or row (seq-mean) count to divide by.

    Returns:
        ``(loss, stats)``; stats (sums over this batch, for the caller to average): ``pg``,
        ``kl``, ``entropy``, ``clip_frac``, ``ratio`` and ``tokens``.
    """
    mask = mask.to(logp.dtype)
    # Padding's values, whatever they are (-inf, nan), take no part in the loss, its gradient
    # or the statistics: each input reads 0 there.
    logp, old_logp = _real(logp, mask), _real(old_logp, mask)
    ref_logp = None if ref_logp is None else _real(ref_logp, mask)
    entropy = None if entropy is None else _real(entropy, mask)
    A = advantages.to(logp.dtype)[:, None]
    lr = log_ratio(logp, old_logp, mask, cfg.ratio_level)
    # Clamp before exp: a stale or broken row must not produce inf * 0 = nan.
    ratio = torch.exp(torch.clamp(lr, -20.0, 20.0))
    high = cfg.clip_eps if cfg.clip_eps_high is None else cfg.clip_eps_high
    unclipped = -A * ratio
    clipped = -A * torch.clamp(ratio, 1.0 - cfg.clip_eps, 1.0 + high)
    pg = torch.maximum(unclipped, clipped)  # = -min(rho A, clip(rho) A)
    if cfg.dual_clip is not None:
        # Only for A < 0: the loss -rho A grows without bound in rho; cap it at -c A.
        pg = torch.where(A < 0, torch.minimum(pg, -cfg.dual_clip * A), pg)
    loss = aggregate(pg, mask, cfg.aggregation, denominator)
    stats = {
        "pg": float(aggregate(pg.detach(), mask, cfg.aggregation, denominator)),
        "clip_frac": float(((clipped > unclipped).to(mask.dtype) * mask).sum()),
        "ratio": float((ratio.detach() * mask).sum()),
        "tokens": float(mask.sum()),
        "kl": 0.0,
        "entropy": 0.0,
    }
    if cfg.kl_coef > 0:
        if ref_logp is None:
            raise ValueError("kl_coef > 0 needs ref_logp")
        kl = kl_low_var(logp, ref_logp)
        loss = loss + cfg.kl_coef * aggregate(kl, mask, cfg.aggregation, denominator)
        stats["kl"] = float((kl.detach() * mask).sum())
    if entropy is not None:
        if cfg.entropy_coef > 0:
            loss = loss - cfg.entropy_coef * aggregate(entropy, mask, cfg.aggregation, denominator)
        stats["entropy"] = float((entropy.detach() * mask).sum())
    return loss, stats


__all__ = [
    "AGGREGATIONS", "RATIO_LEVELS", "Aggregation", "LossConfig", "RatioLevel",
    "action_log_ratio", "aggregate", "check_dual_clip", "kl_low_var", "log_ratio",
    "policy_loss",
]
