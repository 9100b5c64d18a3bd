"""Log-probs of replies under a model: the forward passes that the policy loss's ratio, KL and
entropy need (:mod:`gagpo.losses` holds the loss itself).

A row is a prompt's token ids and a reply's. :func:`reply_logprobs` runs the model on
``prompt + reply`` and returns ``log softmax(logits / T)`` at each reply token, right-aligned in a
``[B, T]`` tensor with a 0/1 mask over padding, either padded (:func:`pad_batch`: left padding, so
that every reply ends at the right edge) or packed (:func:`pack_replies`: no padding, each
distinct prompt run once for all the rows that share it). :func:`right_align` lays out other
per-token values (the rollout's log-probs) the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gagpo.agents.policies.kv_cache import ATTENTION, PACKED_PROMPT


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
    if len(prompts) != len(replies):
        raise ValueError(f"{len(prompts)} prompts for {len(replies)} replies: a reply needs "
                         "its own prompt (repeat a shared one)")
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
    target = ids[:, ids.shape[1] - T:]  # (not ids[:, -T:]: with T = 0 that is every column)
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
            if getattr(getattr(model, "config", None), "_attn_implementation", None) == ATTENTION:
                kwargs[PACKED_PROMPT] = len(prompt)  # attends split: gagpo_attention
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


def right_align(values: Sequence[Sequence[float]], T: int, device: Any = None) -> torch.Tensor:
    """Per-token values of each reply as a ``[B, T]`` tensor aligned like :func:`reply_logprobs`."""
    out = torch.zeros((len(values), T), dtype=torch.float32)
    for i, v in enumerate(values):
        if len(v):
            out[i, T - len(v):] = torch.tensor(list(v), dtype=torch.float32)
    return out.to(device) if device is not None else out
