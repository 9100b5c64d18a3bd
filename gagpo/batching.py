"""Micro-batches: rows cut into runs whose forward pass stays within a token budget
(gradient accumulation, bounded memory). Pure functions of the rows' lengths and prompts: no
model and no torch here, so that the distributed helpers and the critic use them alike.

- :func:`micro_batches`: consecutive runs of rows whose padded size (rows x longest) fits;
- :func:`packed_micro_batches`: rows as :func:`gagpo.logprobs.reply_logprobs` runs them packed
  (rows sharing a prompt together, the prompt counted once).
"""

from __future__ import annotations

from collections.abc import Sequence


def packed_micro_batches(prompts: Sequence[Sequence[int]], replies: Sequence[Sequence[int]],
                         budget: int, one_prompt_each: bool = False) -> list[list[int]]:
    """Rows in micro-batches of at most ``budget`` tokens as
    :func:`gagpo.logprobs.reply_logprobs` runs them packed: rows sharing a prompt next to each
    other, the prompt counted once. Rows are ordered by prompt length, then prompt, then reply
    length; a micro-batch holds at least one row. ``one_prompt_each``: a micro-batch holds the
    rows of one prompt only, so that it is one forward pass (under FSDP every pass is a
    collective that all ranks must run)."""
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
