"""A transformers model as a policy: batched sampling, or scoring the admissible actions.

Log-probabilities. In ``generate`` mode each reply token's log-prob is
``log_softmax(logits / temperature)`` at that position, the distribution a PPO-style trainer
recomputes from raw logits on the same tokens. Top-p truncation shapes which tokens are drawn
but is NOT applied to the reported log-probs (the truncated distribution has zeros, and
recomputing it needs the whole sorted vocabulary). With ``temperature=0`` decoding is greedy and
the log-probs are those of the raw model (temperature 1). In ``score`` mode the log-probs are
always the raw model's (temperature 1) and sum to the chosen candidate's score.

Token ids. The reply's tokens exclude the prompt and padding and end with the first end-of-
sequence token when one was generated (it is part of what the policy did; the text leaves it
out). The prompt's ids come back in ``Reply.prompt_token_ids``.

Shared prefill. A rollout asks for the G copies of a task together, and their first prompts are
identical (as are later ones of copies in one state with one history). With ``share_prefill``
(the default), identical prompts in one :meth:`TransformersPolicy.act` batch are packed into the
same forward passes (:func:`pack_identical`), each distinct prompt is prefilled once, and its
cache is copied for every request that asked it; each copy then samples its own reply. Every
reply is drawn from the distribution it would be drawn from alone, and its log-probs are the
same plain-forward-pass log-probs. ``share_prefill=False`` (one pass per ``batch_size``
requests in request order, each prompt prefilled for itself) draws the same replies for one
seed: each request's tokens come from uniforms drawn for it in request order before the
requests are split into passes (:meth:`TransformersPolicy.reply_uniforms`), so neither sharing
nor ``batch_size`` nor ``batch_tokens`` changes what a seed samples (up to floating-point
rounding of logits computed in batches of other shapes). :attr:`TransformersPolicy.stats`
counts what was prefilled and the time spent prefilling and decoding.

Prefill alone. On a CPU (``prefill_alone``, with the fast decoding) each distinct prompt of a
pass is prefilled by itself, unpadded, and the caches are joined, left-padded, to decode the
replies together: the same logits as one padded pass, without computing the padding or
attending under a padding mask (slower than causal attention on a CPU).

Shared starts. Distinct prompts of one task still begin alike: the copies of a task in
different states share the instructions, the task and the history up to where they parted.
Prefilled alone, a start shared by several distinct prompts (``MIN_SHARED_START`` tokens or
more) is computed once and its cache copied for each prompt, whose own tokens continue it
(:func:`prefill_plan`, a prefix tree): the same logits up to floating-point rounding. It is
off by default (``share_starts=False``): on a CPU a pass that continues a cache attends under an
explicit mask, which skips none of the causal blocks, and measured on SmolLM2-135M (bf16, one
thread) a 1,056-token prompt's last 897 tokens cost as much after its 159-token start as the
whole prompt did (1.6-2.1 s against 1.8-1.9); over the recorded 8 x 8 rollout, 13% fewer
prompt tokens computed gave 210 s of prefill against 216
(``benchmarks/results/rollout_throughput/8x8_bf16_starts``). It pays only where the shared
starts are long.
"""

from __future__ import annotations

import copy
import itertools
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F

from gagpo.agents.parser import fill_template, is_template
from gagpo.agents.policies.base import MODES, Policy, Reply, Request
from gagpo.agents.policies.kv_cache import (
    cache_keyword,
    forward_parameters,
    gagpo_attention,
    new_cache,
    returned_cache,
)
from gagpo.agents.prompts import chat_prompt_ids
from gagpo.common.numbers import check_number

Mode = Literal["generate", "score"]


MIN_SHARED_START = 32
"""Tokens that distinct prompts must share at their start to be prefilled once for all of
them: a shorter start is not worth a forward pass of its own."""


@dataclass(frozen=True)
class PrefillPass:
    """One forward pass of a prefill: tokens ``[start, end)`` of ``prompts[source]``, after
    the cache of pass ``parent`` (which holds their first ``start`` tokens; None: none)."""

    parent: int | None
    source: int
    start: int
    end: int
    completes: int | None
    """The prompt whose last logits this pass gives (None: a start that others continue)."""


def common_start(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens ``a`` and ``b`` share at their start."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def prefill_plan(prompts: Sequence[Sequence[int]], min_shared: int = MIN_SHARED_START
                 ) -> list[PrefillPass]:
    """Forward passes that prefill distinct ``prompts`` computing each start of at least
    ``min_shared`` tokens that several of them share once: the nodes of a prefix tree, each
    pass after its parent and each subtree whole (depth first, so that a cache is dropped
    once its last child has copied it). Every prompt keeps at least its last token for a
    pass of its own, which gives its logits."""
    passes: list[PrefillPass] = []

    def split(indices: list[int], base: int, parent: int | None) -> None:
        # Sorted, prompts that share a start past ``base`` are neighbours.
        order = sorted(indices, key=lambda i: prompts[i][base:])
        k = 0
        while k < len(order):
            shared, j = len(prompts[order[k]]), k
            while j + 1 < len(order):
                common = common_start(prompts[order[j]], prompts[order[j + 1]])
                if common - base < min_shared:
                    break
                shared, j = min(shared, common), j + 1
            group = order[k:j + 1]
            shared = min([shared] + [len(prompts[i]) - 1 for i in group])
            if len(group) > 1 and shared - base >= min_shared:
                passes.append(PrefillPass(parent, group[0], base, shared, None))
                split(group, shared, len(passes) - 1)
            else:
                passes.extend(PrefillPass(parent, i, base, len(prompts[i]), i) for i in group)
            k = j + 1

    split(list(range(len(prompts))), 0, None)
    return passes


def trie_tokens(prompts: Sequence[Sequence[int]]) -> int:
    """Tokens a prefix cache over these prompts would prefill: the nodes of their trie (each
    prompt's tokens less its longest common prefix with its neighbour in sorted order), the
    floor below :func:`prefill_plan`'s passes."""
    ordered = sorted(tuple(p) for p in prompts)
    return sum(len(p) for p in ordered) - sum(
        common_start(a, b) for a, b in itertools.pairwise(ordered))


def _chunks(n: int, size: int) -> list[range]:
    return [range(i, min(i + size, n)) for i in range(0, n, size)]


def pack_identical(prompts: Sequence[Sequence[int]], size: int, tokens: int | None = None,
                   reserve: int = 0) -> list[list[int]]:
    """Indices of ``prompts`` in batches of at most ``size``, as few batches as request order
    would make, identical prompts together where that allows.

    With ``tokens``, a batch also holds at most that many cache positions: its rows x (its
    longest prompt + ``reserve``, the reply's room), which bounds the decoding cache and the
    prefill's activations, whatever the prompts' lengths (a prompt longer than the budget
    still gets a batch of its own).

    Identical prompts form groups (a group larger than a batch is cut into pieces); groups are
    packed whole, longest prompt first (then largest group first), into the first batch with
    room: prompts of like lengths share a batch, so little of it is left padding, which is
    computed like any token. When that would take more batches than cutting the same order
    into full batches, the groups are laid end to end and cut instead: a group may then
    straddle two batches and is prefilled in each, which costs less than a batch more of
    decoding.
    """
    rows = batch_rows(size, tokens, reserve)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(tuple(p), []).append(i)
    pieces = [g[k:k + rows(len(prompts[g[0]]))] for g in groups.values()
              for k in range(0, len(g), rows(len(prompts[g[0]])))]
    # Stable: ties keep their first appearance's order.
    pieces.sort(key=lambda piece: (len(prompts[piece[0]]), len(piece)), reverse=True)
    batches: list[list[int]] = []
    for piece in pieces:  # a batch's first prompt is its longest: pieces come longest first
        for batch in batches:
            if len(batch) + len(piece) <= rows(len(prompts[batch[0]])):
                batch.extend(piece)
                break
        else:
            batches.append(list(piece))
    cut = cut_in_order([i for piece in pieces for i in piece], prompts, rows)
    return cut if len(batches) > len(cut) else batches


def batch_rows(size: int, tokens: int | None = None, reserve: int = 0) -> Callable[[int], int]:
    """How many rows a batch whose longest prompt has ``n`` tokens may hold: ``size``, and with
    ``tokens`` no more than fit ``n + reserve`` cache positions each (at least one)."""
    def rows(n: int) -> int:
        return size if tokens is None else max(1, min(size, tokens // (n + reserve)))
    return rows


def cut_in_order(order: Sequence[int], prompts: Sequence[Sequence[int]],
                 rows: Callable[[int], int]) -> list[list[int]]:
    """``order`` cut into consecutive batches, each as full as ``rows(its longest prompt's
    length)`` allows."""
    batches: list[list[int]] = []
    longest = 0  # the last batch's longest prompt
    for i in order:
        if batches and len(batches[-1]) < rows(max(longest, len(prompts[i]))):
            batches[-1].append(i)
            longest = max(longest, len(prompts[i]))
        else:
            batches.append([i])
            longest = len(prompts[i])
    return batches


def draw(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """One index per row of ``probs`` (rows, n: non-negative weights, each row's sum positive),
    drawn with probability weight / row sum from that row's uniform in [0, 1) (``uniforms``,
    shape (rows,)); a zero weight is never drawn.

    By the inverse of each row's cumulative sum: the first index whose cumulative sum rises past
    the uniform times the row's total (a binary search). ``torch.multinomial`` draws one sample
    through an exponential variate per weight (the Gumbel-max trick), which on a CPU took 15.6
    ms a decoding step for 16 rows of SmolLM2's 49,152-token vocabulary against 0.48 ms for
    this, a tenth of the step's 140 ms (``benchmarks/results/cpu_costs/bf16/``)."""
    cumulative = probs.cumsum(dim=-1)
    total = cumulative[:, -1:]
    u = uniforms.to(cumulative.dtype).view(-1, 1) * total
    # Below the total, so that the search lands on an index whose cumulative sum rose past u:
    # a positive weight. (torch's uniforms stop 2^-24 short of 1, so the product already
    # rounds below the total; the bound keeps that true of any finer generator.)
    u = torch.minimum(u, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(cumulative, u, right=True)[:, 0]


def _left_padded(rows: list[torch.Tensor], width: int) -> torch.Tensor:
    """Cached keys or values of single prompts, (1, heads, length, dim) each, as one batch
    (rows, heads, width, dim) with each row's positions at its right end (zeros before)."""
    first = rows[0]  # one model under one autocast: every row has its dtype
    out = first.new_zeros((len(rows), first.shape[1], width, first.shape[3]))
    for i, r in enumerate(rows):
        out[i, :, width - r.shape[2]:] = r[0]
    return out


@dataclass
class GenerationStats:
    """What generate mode did since the policy was made (or ``stats`` was replaced)."""

    prompts: int = 0
    """Prompts answered: one per reply."""
    prefills: int = 0
    """Prompts actually prefilled (identical prompts in one forward pass count once)."""
    shared_prompts: int = 0
    """Prompts answered from a prefill that served more than one of them."""
    prompt_tokens: int = 0
    """Tokens of every prompt answered."""
    prefill_tokens: int = 0
    """Tokens prefilled, padding excluded (prefilled alone, a start that several distinct
    prompts share counts once)."""
    padded_tokens: int = 0
    """Positions the prefill passes computed: rows x the batch's longest prompt."""
    new_tokens: int = 0
    """Reply tokens sampled."""
    prefill_seconds: float = 0.0
    """Wall time in prefill forward passes (and copying their caches)."""
    decode_seconds: float = 0.0
    """Wall time in the token-by-token loop: forward passes, sampling, stop checks."""


class TransformersPolicy(Policy):
    """A causal LM answering :class:`Request` batches.

    Args:
        model: a transformers causal LM (its device is used unless ``device`` is given).
        tokenizer: its tokenizer; prompts are formatted with its chat template.
        mode: ``"generate"`` samples replies; ``"score"`` picks an admissible action by the
            model's log-likelihood of the reply ``reply_template`` filled with it.
        temperature: sampling temperature; 0 decodes greedily (generate) or takes the argmax
            (score). In score mode, > 0 samples a candidate from softmax(scores / temperature).
        top_p: nucleus sampling mass (generate mode).
        max_new_tokens: reply length limit (generate mode).
        batch_size: prompts per forward pass (generate) or candidates per pass (score).
        batch_tokens: in generate mode, at most this many cache positions per pass as well:
            rows x (the pass's longest prompt + ``max_new_tokens``). It bounds the memory of
            the decoding cache and of the prefill whatever the prompts' lengths (16 rows of
            1,000-token prompts hold 0.8 GB of cache for SmolLM2-135M); None: ``batch_size``
            alone.
        seed: seeds a private generator, so sampling is reproducible and leaves torch's
            global RNG alone; None uses the global RNG. In generate mode each request of an
            :meth:`act` call draws its reply's tokens from uniforms drawn for it in request
            order (:meth:`reply_uniforms`), so the replies of one seed do not depend on how
            requests are batched (``batch_size``, ``batch_tokens``, ``share_prefill``).
        stop: strings that end a reply once generated (e.g. ``("</action>",)``); the token
            that completes one is kept.
        reply_template: the scored reply; ``{action}`` is replaced by each candidate.
            WebShop's ``search[<query>]`` template is scored as ``search[<instruction>]``.
        length_normalize: score candidates by their mean token log-prob instead of the sum.
        share_prefill: in generate mode, prefill identical prompts of one :meth:`act` batch
            once and sample each request's reply from a copy of that cache (see the module
            docstring); False prefills every prompt for itself, in request order.
        fast_decode: decode into a cache with room reserved for the reply, attending in float32
            under autocast (:mod:`gagpo.agents.policies.kv_cache`); False decodes with
            transformers' own cache and attention (what benchmarks compare against).
        prefill_alone: prefill each distinct prompt in a forward pass of its own, unpadded,
            and join their caches (left-padded) for decoding them together. None (default):
            on a CPU with ``fast_decode``. On a CPU a padded batch of prompts of unlike
            lengths computes its padding like tokens and attends under a mask, slower than
            plain causal attention: 16 prompts of 600-1,000 tokens prefilled at 313 tokens/s
            in one padded pass and 564 one by one (SmolLM2-135M, float32, 2 threads;
            ``python -m benchmarks.cpu_costs``).
        share_starts: prefilling alone, compute once a start that several distinct prompts
            share (see the module docstring: no faster on the prompts measured); False, the
            default, prefills each prompt whole.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        mode: Mode = "generate",
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 256,
        batch_size: int = 8,
        batch_tokens: int | None = None,
        seed: int | None = None,
        device: torch.device | str | None = None,
        stop: Sequence[str] = (),
        reply_template: str = "<think></think><action>{action}</action>",
        length_normalize: bool = False,
        share_prefill: bool = True,
        fast_decode: bool = True,
        prefill_alone: bool | None = None,
        share_starts: bool = False,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        check_number("top_p", top_p, "in (0, 1]")
        check_number("temperature", temperature, ">= 0")
        check_number("batch_size", batch_size, ">= 1", integer=True)
        if batch_tokens is not None:
            check_number("batch_tokens", batch_tokens, ">= 1", integer=True)
        check_number("max_new_tokens", max_new_tokens, ">= 1", integer=True)
        self.model = model
        self.tokenizer = tokenizer
        self.mode = mode
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.stop = tuple(stop)
        self.reply_template = reply_template
        self.length_normalize = length_normalize
        self.share_prefill = share_prefill
        self.fast_decode = fast_decode
        self.stats = GenerationStats()
        if device is not None:
            model.to(device)
        self.device = next(model.parameters()).device
        if prefill_alone is None:
            prefill_alone = fast_decode and self.device.type == "cpu"
        # Joining caches needs per-layer caches (transformers >= 4.56).
        self.prefill_alone = prefill_alone and new_cache(0) is not None
        self.share_starts = share_starts
        self.generator: torch.Generator | None = None
        if seed is not None:
            self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.pad_id = tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = tokenizer.eos_token_id
        self.eos_ids = self._eos_ids()
        self._cache_kw = cache_keyword(model)
        self._keep_last = "logits_to_keep" in forward_parameters(model)

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        config_eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        if isinstance(config_eos, int):
            ids.add(config_eos)
        elif config_eos:
            ids.update(int(i) for i in config_eos)
        return ids

    # --- tokens -------------------------------------------------------------------------------

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The chat-formatted prompt's token ids, ending where the assistant's reply starts."""
        return chat_prompt_ids(self.tokenizer, messages)

    def _forward(self, ids, mask, positions, cache=None, last_only: bool = False):
        kwargs: dict[str, Any] = {
            "input_ids": ids,
            "attention_mask": mask,
            "position_ids": positions,
            "use_cache": True,
        }
        if cache is not None:
            kwargs[self._cache_kw] = cache
        if last_only and self._keep_last:
            kwargs["logits_to_keep"] = 1  # a long prompt's full logits would be vocab x length
        out = self.model(**kwargs)
        return out.logits, returned_cache(out)

    # --- acting -------------------------------------------------------------------------------

    def act(self, requests: list[Request]) -> list[Reply]:
        """One reply per request, in order."""
        if self.mode == "score":
            return [self._score_one(r) for r in requests]
        prompts = [self.prompt_ids(r.messages) for r in requests]
        if self.share_prefill:
            batches = pack_identical(prompts, self.batch_size, self.batch_tokens,
                                     self.max_new_tokens)
        else:
            batches = cut_in_order(range(len(prompts)), prompts, batch_rows(
                self.batch_size, self.batch_tokens, self.max_new_tokens))
        uniforms = self.reply_uniforms(len(prompts))
        replies: list[Reply | None] = [None] * len(requests)
        for batch in batches:
            generated = self.generate_ids([prompts[i] for i in batch],
                                          None if uniforms is None else uniforms[batch])
            for i, (ids, logprobs) in zip(batch, generated, strict=True):
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                replies[i] = Reply(text, ids, logprobs, prompt_token_ids=prompts[i])
        return replies  # type: ignore[return-value]  # every index is in one batch

    def _sync(self) -> None:
        """Wait for queued device work, so that a timing covers it (a no-op on CPU)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def reply_uniforms(self, n: int) -> torch.Tensor | None:
        """The uniforms in [0, 1) that ``n`` replies' tokens are drawn from, (n,
        max_new_tokens), row i for the i-th request, drawn in request order from the policy's
        generator (None when decoding greedily): token t of reply i is the first index whose
        cumulative probability passes ``uniforms[i, t]`` (:func:`draw`). Drawn for the whole
        :meth:`act` call before it is split into passes, so a reply depends on its request and
        the seed, not on the rows it was decoded beside."""
        if self.temperature == 0:
            return None
        return torch.rand((n, self.max_new_tokens), generator=self.generator,
                          device=self.device)

    @torch.no_grad()
    def generate_ids(self, prompts: list[list[int]], uniforms: torch.Tensor | None = None
                     ) -> list[tuple[list[int], list[float]]]:
        """Sample a reply for each prompt (token ids) in one left-padded batch; returns each
        reply's token ids and their log-probs (see the module docstring). With
        ``share_prefill``, identical prompts are prefilled once and their cache copied.
        ``uniforms``: what each reply's tokens are drawn from (:meth:`reply_uniforms`); None
        draws them for these prompts."""
        n = len(prompts)
        if n == 0:
            return []
        if any(not p for p in prompts):
            raise ValueError("empty prompt")
        if self.temperature == 0:
            uniforms = None
        elif uniforms is None:
            uniforms = self.reply_uniforms(n)
        elif uniforms.shape != (n, self.max_new_tokens):
            raise ValueError(f"uniforms of shape {tuple(uniforms.shape)} for {n} prompts of "
                             f"{self.max_new_tokens} new tokens")
        started = time.perf_counter()
        if self.share_prefill:
            first: dict[tuple[int, ...], int] = {}
            source = [first.setdefault(tuple(p), len(first)) for p in prompts]
            unique = [list(p) for p in first]
        else:
            source, unique = list(range(n)), prompts
        width = max(len(p) for p in unique)
        ids = torch.full((len(unique), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(unique), width), dtype=torch.long)
        for i, p in enumerate(unique):
            ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p):] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        # Left padding shifts each row: positions count real tokens only, so a padded row
        # sees the same positions (hence the same logits) as it would alone.
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        # A cache with room for the replies (no copy of the whole cache per token), and decode
        # attention that stays fast under bf16 (see gagpo.agents.policies.kv_cache).
        if not self.fast_decode:
            return self._decode(prompts, unique, source, ids, mask, positions, started, None,
                                uniforms)
        with gagpo_attention(self.model):
            return self._decode(prompts, unique, source, ids, mask, positions, started,
                                new_cache(self.max_new_tokens), uniforms)

    def _decode(self, prompts: list[list[int]], unique: list[list[int]], source: list[int],
                ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
                started: float, cache: Any, uniforms: torch.Tensor | None
                ) -> list[tuple[list[int], list[float]]]:
        n = len(prompts)
        if self.prefill_alone:
            logits, cache, computed = self._prefill_alone(unique, cache)
        else:
            logits, cache = self._forward(ids, mask, positions, cache, last_only=True)
            logits = logits[:, -1].float()
            computed = sum(len(p) for p in unique)
        if len(unique) < n:  # one row per prompt again: each copy gets its own cache rows
            index = torch.tensor(source, device=self.device)
            cache.reorder_cache(index)
            logits, mask, positions = logits[index], mask[index], positions[index]
        self._sync()
        decoding = time.perf_counter()
        stats = self.stats
        stats.prompts += n
        stats.prefills += len(unique)
        stats.shared_prompts += sum(c for c in Counter(source).values() if c > 1)
        stats.prompt_tokens += sum(len(p) for p in prompts)
        stats.prefill_tokens += computed
        stats.padded_tokens += computed if self.prefill_alone else ids.numel()
        stats.prefill_seconds += decoding - started
        next_pos = positions[:, -1:] + 1
        out_ids: list[list[int]] = [[] for _ in range(n)]
        out_lps: list[list[float]] = [[] for _ in range(n)]
        rows = list(range(n))  # original index of each row still in the batch
        alive = [True] * n  # whether that row's reply goes on
        for step in range(self.max_new_tokens):
            tokens, logprobs = self._next_tokens(
                logits, None if uniforms is None else uniforms[rows, step])
            for r, (tok, lp) in enumerate(zip(tokens.tolist(), logprobs.tolist(), strict=True)):
                if not alive[r]:
                    continue
                i = rows[r]
                out_ids[i].append(tok)
                out_lps[i].append(lp)
                alive[r] = tok not in self.eos_ids and not self._hit_stop(out_ids[i])
            keep = [r for r, a in enumerate(alive) if a]
            if not keep or step == self.max_new_tokens - 1:
                break
            # Finished rows leave the batch and its cache. Each removal copies the cache, so
            # the fast path waits until half the rows are done, decoding the others' tokens
            # for nothing meanwhile (a row costs little next to reading the weights).
            finished = len(rows) - len(keep)
            if finished >= (max(1, len(rows) // 2) if self.fast_decode else 1):
                index = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(index)
                tokens, mask, next_pos = tokens[index], mask[index], next_pos[index]
                rows, alive = [rows[r] for r in keep], [True] * len(keep)
            mask = torch.cat([mask, mask.new_ones((len(rows), 1))], dim=1)
            logits, cache = self._forward(tokens[:, None], mask, next_pos, cache)
            logits = logits[:, -1].float()
            next_pos = next_pos + 1
        self._sync()
        stats.new_tokens += sum(len(o) for o in out_ids)
        stats.decode_seconds += time.perf_counter() - decoding
        return list(zip(out_ids, out_lps, strict=True))

    def _prefill_alone(self, unique: list[list[int]], cache: Any
                       ) -> tuple[torch.Tensor, Any, int]:
        """Each prompt's last logits, one cache holding every prompt's keys and values,
        left-padded to the longest (the rows of the padded batch they replace), and the tokens
        computed: the passes of :func:`prefill_plan` (with ``share_starts``), each unpadded,
        with no mask, continuing a copy of its parent's cache."""
        width = max(len(p) for p in unique)
        if cache is None:  # transformers' own cache (``fast_decode=False``)
            from transformers import DynamicCache

            cache = DynamicCache()
        plan = prefill_plan(unique) if self.share_starts else [
            PrefillPass(None, i, 0, len(p), i) for i, p in enumerate(unique)]
        children = Counter(step.parent for step in plan)
        starts: dict[int, Any] = {}  # caches of shared starts that children still need
        last: list[Any] = [None] * len(unique)
        layers: list[Any] = [None] * len(unique)  # per prompt, per layer: (keys, values)
        for k, step in enumerate(plan):
            # A continuing pass keeps room for its own tokens: the start is copied once.
            own = new_cache(0 if step.parent is None else step.end - step.start)
            if step.parent is not None:
                for index, layer in enumerate(starts[step.parent].layers):
                    own.update(layer.keys, layer.values, index)  # a copy
                children[step.parent] -= 1
                if not children[step.parent]:
                    del starts[step.parent]
            ids = torch.tensor([unique[step.source][step.start:step.end]], dtype=torch.long,
                               device=self.device)
            positions = torch.arange(step.start, step.end, device=self.device)[None]
            mask = torch.ones((1, step.end), dtype=torch.long, device=self.device)
            logits, own = self._forward(ids, mask, positions, own, last_only=True)
            if step.completes is None:
                starts[k] = own
            else:
                last[step.completes] = logits[0, -1].float()
                layers[step.completes] = [(layer.keys, layer.values) for layer in own.layers]
        for index in range(len(layers[0])):
            keys = [row[index][0] for row in layers]
            values = [row[index][1] for row in layers]
            for row in layers:  # each layer's prompt caches go once joined: one copy at a time
                row[index] = None
            cache.update(_left_padded(keys, width), _left_padded(values, width), index)
            del keys, values
        return torch.stack(last), cache, sum(step.end - step.start for step in plan)

    def _next_tokens(self, logits: torch.Tensor, uniforms: torch.Tensor | None
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """The next token of each row and its log-prob under log_softmax(logits / T), drawn
        from the row's uniform (None: greedy)."""
        if uniforms is None:
            logp = F.log_softmax(logits, dim=-1)
            tokens = logits.argmax(dim=-1)
        else:
            logp = F.log_softmax(logits / self.temperature, dim=-1)
            probs = logp.exp()
            if self.top_p < 1.0:
                sorted_p, order = probs.sort(dim=-1, descending=True)
                # Drop a token when the mass before it already reaches top_p (the first stays).
                drop = (sorted_p.cumsum(dim=-1) - sorted_p) >= self.top_p
                sorted_p = sorted_p.masked_fill(drop, 0.0)
                probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
            tokens = draw(probs, uniforms)
        return tokens, logp.gather(-1, tokens[:, None])[:, 0]

    def _hit_stop(self, ids: list[int]) -> bool:
        if not self.stop:
            return False
        # Decoding only the tail keeps this O(1) per token; 8 tokens per character is ample.
        longest = max(len(s) for s in self.stop)
        tail = self.tokenizer.decode(ids[-(8 * longest):], skip_special_tokens=True)
        return any(s in tail for s in self.stop)

    # --- scoring ------------------------------------------------------------------------------

    def candidates(self, request: Request) -> list[str]:
        """The actions scored for ``request``: the admissible ones, a ``<query>`` template
        filled with the instruction (dropped when there is none)."""
        instruction = str(request.info.get("instruction", "")).strip()
        out: list[str] = []
        for action in request.admissible_actions:
            if is_template(action):
                if instruction:
                    out.append(fill_template(action, instruction))
            else:
                out.append(action)
        return out

    @torch.no_grad()
    def score_candidates(
        self, prompt: list[int], replies: list[list[int]]
    ) -> list[list[float]]:
        """Per-token log-probs (temperature 1) of each reply after ``prompt``.

        The prompt is run once; its cache is copied for each batch of candidates, which are
        right-padded (padding after a sequence cannot change its causal logits).
        """
        p = torch.tensor([prompt], dtype=torch.long, device=self.device)
        ones = torch.ones_like(p)
        positions = torch.arange(len(prompt), device=self.device)[None]
        first_logits, base_cache = self._forward(p, ones, positions, last_only=True)
        first = F.log_softmax(first_logits[0, -1].float(), dim=-1)
        out: list[list[float]] = []
        for chunk in _chunks(len(replies), self.batch_size):
            batch = [replies[i] for i in chunk]
            lps = [[float(first[r[0]])] for r in batch]
            width = max(len(r) for r in batch) - 1  # the last token is never an input
            if width > 0:
                ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
                for j, r in enumerate(batch):
                    ids[j, : len(r) - 1] = torch.tensor(r[:-1], dtype=torch.long)
                ids = ids.to(self.device)
                cache = copy.deepcopy(base_cache)
                cache.batch_repeat_interleave(len(batch))
                mask = torch.ones(
                    (len(batch), len(prompt) + width), dtype=torch.long, device=self.device
                )
                positions = torch.arange(width, device=self.device) + len(prompt)
                positions = positions[None].expand(len(batch), -1)
                logits, _ = self._forward(ids, mask, positions, cache)
                logp = F.log_softmax(logits.float(), dim=-1)
                for j, r in enumerate(batch):
                    target = torch.tensor(r[1:], dtype=torch.long, device=self.device)
                    lps[j] += logp[j, : len(r) - 1].gather(-1, target[:, None])[:, 0].tolist()
            out.extend(lps)
        return out

    def _score_one(self, request: Request) -> Reply:
        prompt = self.prompt_ids(request.messages)
        actions = self.candidates(request)
        if not actions:  # nothing to choose from: an empty reply (the parser finds no action)
            return Reply("", [], [], prompt_token_ids=prompt)
        texts = [self.reply_template.replace("{action}", a) for a in actions]
        eos = self.tokenizer.eos_token_id
        replies = [
            list(self.tokenizer(t, add_special_tokens=False)["input_ids"])
            + ([eos] if eos is not None else [])
            for t in texts
        ]
        token_lps = self.score_candidates(prompt, replies)
        scores = torch.tensor(
            [sum(lp) / (len(lp) if self.length_normalize else 1) for lp in token_lps],
            dtype=torch.float64,
        )
        if self.temperature == 0:
            k = int(scores.argmax())
        else:
            # On the generator's device: a CUDA generator cannot draw from a CPU tensor. A few
            # candidates: multinomial costs nothing here (``draw`` is for vocabularies), and
            # keeps the draws that the recorded score-mode runs (the demo's) made.
            probs = torch.softmax(scores / self.temperature, dim=0).float().to(self.device)
            k = int(torch.multinomial(probs, 1, generator=self.generator))
        return Reply(texts[k], replies[k], token_lps[k], prompt_token_ids=prompt)
