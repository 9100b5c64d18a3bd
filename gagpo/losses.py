"""Policy losses for critic-free RL on LLM agents, and the log-prob recomputation they need.

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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F

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


# ---------------------------------------------------------------------------------------------
# Log-probs of replies under a model: the quantity the ratio, the KL and the entropy need.


def pad_batch(
    prompts: Sequence[Sequence[int]], replies: Sequence[Sequence[int]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Left-pad ``prompt + reply`` sequences: ``(ids, attention_mask, position_ids, T)``.

    Left padding puts every reply at the right edge, so its tokens are predicted by the last
    ``T = max reply length`` positions (shifted by one) and the vocabulary projection runs on
    those positions only. Positions count real tokens, as the rollout policy's did, so a padded
    row gets the logits it would get alone.
    """
    seqs = [list(p) + list(r) for p, r in zip(prompts, replies, strict=True)]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
        attn[i, width - len(s):] = 1
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    return ids, attn, positions, max(len(r) for r in replies)


def reply_logprobs(
    model: Any,
    prompts: Sequence[Sequence[int]],
    replies: Sequence[Sequence[int]],
    *,
    pad_id: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
    autocast_dtype: torch.dtype | None = None,
    packed: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """log pi(reply token | prompt, earlier reply tokens) as ``log_softmax(logits / T)``.

    Returns ``(logp [B, T], mask [B, T], entropy [B, T] or None)``, reply tokens right-aligned
    (the mask marks them). ``temperature`` must be the one the rollout policy's log-probs used
    (``generate``: the sampling temperature; ``score``: 1).

    ``packed``: no padding, and each distinct prompt run once for all the rows that share it
    (:func:`pack_replies`), one forward pass per distinct prompt; the same values up to
    floating-point rounding. It pays where rows repeat prompts (the copies of a task in the
    same state with the same history) and where padding costs as much as tokens (a CPU).
    """
    if packed:
        return _packed_reply_logprobs(model, prompts, replies, temperature=temperature,
                                      with_entropy=with_entropy, autocast_dtype=autocast_dtype)
    device = next(model.parameters()).device
    ids, attn, positions, T = pad_batch(prompts, replies, pad_id)
    ids, attn, positions = ids.to(device), attn.to(device), positions.to(device)
    kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": attn, "position_ids": positions,
                              "use_cache": False, "logits_to_keep": T + 1}
    with torch.autocast(device.type, dtype=autocast_dtype or torch.bfloat16,
                        enabled=autocast_dtype is not None):
        logits = model(**kwargs).logits
    # Position j predicts token j + 1: the last T + 1 positions' first T predict the reply.
    logits = logits[:, -(T + 1):-1].float()
    if temperature != 1.0:
        logits = logits / temperature
    logp_all = F.log_softmax(logits, dim=-1)
    target = ids[:, -T:]
    logp = logp_all.gather(-1, target[:, :, None])[:, :, 0]
    lengths = torch.tensor([len(r) for r in replies], device=device)
    mask = (torch.arange(T, device=device)[None] >= (T - lengths)[:, None]).float()
    entropy = None
    if with_entropy:
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp * mask, mask, entropy


def pack_replies(prompt: Sequence[int], replies: Sequence[Sequence[int]]
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, list[torch.Tensor]]:
    """One sequence ``prompt + reply_1 + ... + reply_k`` in which each reply sees the prompt and
    its own earlier tokens only, as if it followed the prompt alone.

    Returns ``(ids [1, L], position_ids [1, L], mask, predictors)``: every reply's positions
    continue the prompt's (``P, P + 1, ...``); ``mask`` is a boolean ``[1, 1, L, L]`` attention
    mask (True: may attend), None for a single reply (plain causal attention); ``predictors[k]``
    lists the positions whose logits predict reply ``k``'s tokens, counted from the prompt's
    last position (``P - 1``, which predicts every reply's first token).
    """
    P = len(prompt)
    seq = list(prompt)
    positions = list(range(P))
    predictors = []
    for reply in replies:
        start = len(seq)
        seq += list(reply)
        positions += range(P, P + len(reply))
        # Token j of the reply is predicted by the token before it: the prompt's last for j = 0.
        where = [0, *range(start - P + 1, start - P + len(reply))][:len(reply)]
        predictors.append(torch.tensor(where, dtype=torch.long))
    L = len(seq)
    mask = None
    if len(replies) > 1:
        mask = torch.zeros((L, L), dtype=torch.bool)
        mask[:, :P] = True
        start = P
        for reply in replies:
            n = len(reply)
            mask[start:start + n, start:start + n] = True
            start += n
        mask = torch.tril(mask)[None, None]  # causal within the prompt and each reply
    return (torch.tensor([seq], dtype=torch.long), torch.tensor([positions], dtype=torch.long),
            mask, predictors)


def _packed_reply_logprobs(model: Any, prompts: Sequence[Sequence[int]],
                           replies: Sequence[Sequence[int]], *, temperature: float,
                           with_entropy: bool, autocast_dtype: torch.dtype | None
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """:func:`reply_logprobs` with ``packed=True``: one pass per distinct prompt."""
    device = next(model.parameters()).device
    T = max(len(r) for r in replies)
    rows_of: dict[tuple[int, ...], list[int]] = {}
    for i, p in enumerate(prompts):
        rows_of.setdefault(tuple(p), []).append(i)
    logp_rows: list[torch.Tensor | None] = [None] * len(prompts)
    ent_rows: list[torch.Tensor | None] = [None] * len(prompts)
    for prompt, rows in rows_of.items():
        ids, positions, mask, predictors = pack_replies(prompt, [replies[i] for i in rows])
        kwargs: dict[str, Any] = {"input_ids": ids.to(device),
                                  "position_ids": positions.to(device), "use_cache": False,
                                  # the prompt's last position and every reply token's
                                  "logits_to_keep": ids.shape[1] - len(prompt) + 1}
        if mask is not None:
            kwargs["attention_mask"] = mask.to(device)
        with torch.autocast(device.type, dtype=autocast_dtype or torch.bfloat16,
                            enabled=autocast_dtype is not None):
            logits = model(**kwargs).logits[0]
        for i, where in zip(rows, predictors, strict=True):
            row = logits[where.to(device)].float()
            if temperature != 1.0:
                row = row / temperature
            logp_all = F.log_softmax(row, dim=-1)
            target = torch.tensor(list(replies[i]), dtype=torch.long, device=device)
            logp_rows[i] = logp_all.gather(-1, target[:, None])[:, 0]
            if with_entropy:
                ent_rows[i] = -(logp_all.exp() * logp_all).sum(-1)

    def right_aligned(rows: list) -> torch.Tensor:
        # Left-padded with zeros to T, like the padded pass's masked positions.
        return torch.stack([F.pad(r, (T - r.shape[0], 0)) for r in rows])

    lengths = torch.tensor([len(r) for r in replies], device=device)
    mask = (torch.arange(T, device=device)[None] >= (T - lengths)[:, None]).float()
    logp = right_aligned(logp_rows)
    return logp * mask, mask, right_aligned(ent_rows) if with_entropy else None


def packed_micro_batches(prompts: Sequence[Sequence[int]], replies: Sequence[Sequence[int]],
                         budget: int, one_prompt_each: bool = False) -> list[list[int]]:
    """Rows in micro-batches of at most ``budget`` tokens as :func:`reply_logprobs` runs them
    packed: rows sharing a prompt next to each other, the prompt counted once. Rows are
    ordered by prompt length, then prompt, then reply length; a micro-batch holds at least
    one row. ``one_prompt_each``: a micro-batch holds the rows of one prompt only, so that it
    is one forward pass (under FSDP every pass is a collective that all ranks must run)."""
    order = sorted(range(len(prompts)),
                   key=lambda i: (len(prompts[i]), tuple(prompts[i]), len(replies[i])))
    out: list[list[int]] = []
    cur: list[int] = []
    tokens = 0
    last: tuple[int, ...] | None = None
    for i in order:
        prompt = tuple(prompts[i])
        cost = len(replies[i]) + (0 if cur and prompt == last else len(prompt))
        if cur and (tokens + cost > budget or (one_prompt_each and prompt != last)):
            out.append(cur)
            cur, tokens = [], 0
            cost = len(prompts[i]) + len(replies[i])
        cur.append(i)
        tokens += cost
        last = prompt
    if cur:
        out.append(cur)
    return out


def right_align(values: Sequence[Sequence[float]], T: int, device: Any = None) -> torch.Tensor:
    """Per-token values of each reply as a ``[B, T]`` tensor aligned like :func:`reply_logprobs`."""
    out = torch.zeros((len(values), T), dtype=torch.float32)
    for i, v in enumerate(values):
        if len(v):
            out[i, T - len(v):] = torch.tensor(list(v), dtype=torch.float32)
    return out.to(device) if device is not None else out


def micro_batches(lengths: list[int], budget: int) -> list[list[int]]:
    """Consecutive index runs whose padded size (count x longest) stays within ``budget``."""
    out: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i, n in enumerate(lengths):
        if cur and (len(cur) + 1) * max(longest, n) > budget:
            out.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, n)
    if cur:
        out.append(cur)
    return out
