"""GroupVectorEnv throughput: env steps/s of N tasks x G copies of WebShop-v0 driven by the
goal-aware expert, for the three backends side by side in one run (ratios vs in-process).
``--env alfworld``: ALFWorld-v0 with its expert, in-process, the native engine beside the
reference engine (ratio vs the reference).

Each backend plays the same rounds of episodes (round r resets to tasks r*N .. r*N+N-1; one
warm-up round first, as a long run would have warm search caches). Figures: start-up time
(workers built), env steps/s over whole rounds (resets included), and the median time of one
batched step. Ray is skipped when it is not installed.

    python -m benchmarks.vector_bench [--tasks 8] [--group 8] [--rounds 6] [--workers K] [--out DIR]
    python -m benchmarks.vector_bench --env alfworld [--rounds 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import gagpo.envs  # noqa: F401  (registers WebShop-v0)
from benchmarks.record import command_line, recorded
from gagpo.envs.vector import BACKENDS, GroupVectorEnv


def play_round(vec: GroupVectorEnv, tasks: list[int], step_times: list[float]) -> int:
    """One expert episode per env; returns the number of env steps taken."""
    _, infos = vec.reset(tasks)
    last = list(infos)
    steps = 0
    while vec.live.any():
        actions = [last[i]["expert_action"] if vec.live[i] else None
                   for i in range(vec.num_envs)]
        steps += int(vec.live.sum())
        t = time.perf_counter()
        _, _, _, _, infos = vec.step(actions)
        step_times.append(time.perf_counter() - t)
        last = [new if new is not None else old for new, old in zip(infos, last, strict=True)]
    return steps


def bench(backend: str, n_tasks: int, group: int, rounds: int, workers: int | None,
          env_id: str = "WebShop-v0", env_kwargs: dict | None = None) -> dict:
    t = time.perf_counter()
    vec = GroupVectorEnv(env_id, n_tasks, group, backend=backend, num_workers=workers,
                         env_kwargs={"request_infos": ["expert_action"], **(env_kwargs or {})})
    start = time.perf_counter() - t
    try:
        play_round(vec, list(range(n_tasks)), [])  # warm-up
        step_times: list[float] = []
        steps = 0
        t = time.perf_counter()
        for r in range(rounds):
            steps += play_round(vec, list(range(r * n_tasks, (r + 1) * n_tasks)), step_times)
        elapsed = time.perf_counter() - t
        assert not vec.failed.any()
        return {"backend": backend, "workers": vec.num_workers, "start_s": start,
                "steps": steps, "steps_per_s": steps / elapsed,
                "batch_ms": float(np.median(step_times)) * 1e3}
    finally:
        vec.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=8, help="groups N")
    parser.add_argument("--group", type=int, default=8, help="copies G of each task")
    parser.add_argument("--rounds", type=int, default=6, help="timed rounds of episodes")
    parser.add_argument("--workers", type=int, default=None,
                        help="workers of the process and Ray backends (default: CPU count)")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--env", choices=("webshop", "alfworld"), default="webshop",
                        help="alfworld: ALFWorld-v0 in-process, native engine vs reference")
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the report to OUT/report.txt")
    args = parser.parse_args(argv)
    with recorded(args.out, command_line("benchmarks.vector_bench", argv), summarize):
        run(args)


def summarize(report: str) -> dict[str, Any]:
    """The figures of a printed report (what ``benchmarks.figures`` quotes): the env, tasks and
    copies, and per row of the table (a backend, ``inprocess``, ``process``, ``ray``; or with
    ``--env alfworld`` an engine, ``native``, ``reference``) its start-up seconds, env steps/s,
    batched step's median ms and ratio to in-process (to the reference engine; None where the
    report prints ``-``), under ``"backends"`` (``"engines"``).

    Raises:
        ValueError: the report has no ``== GroupVectorEnv`` line or no row.
    """
    head = re.search(r"^== GroupVectorEnv: (\d+) tasks x (\d+) copies = \d+ envs of ([\w-]+)",
                     report, re.M)
    if head is None:
        raise ValueError("not a vector_bench report: no '== GroupVectorEnv: ...' line")
    out: dict[str, Any] = {"env": head[3], "tasks": int(head[1]), "copies": int(head[2])}
    number = r"([\d.,]+)"
    ratio = r"([\d.]+)x|-"
    for m in re.finditer(rf"^(inprocess|process|ray) +(\d+) +{number} +{number} +{number} +"
                         rf"(?:{ratio})$", report, re.M):
        out.setdefault("backends", {})[m[1]] = {
            "workers": int(m[2]), "start_s": float(m[3]),
            "steps_per_s": float(m[4].replace(",", "")), "batch_ms": float(m[5]),
            "ratio": float(m[6]) if m[6] else None}
    for m in re.finditer(rf"^(native|reference) +{number} +{number} +{number} +{number} +"
                         rf"(?:{ratio})$", report, re.M):
        out.setdefault("engines", {})[m[1]] = {
            "start_s": float(m[2]), "steps": int(m[3].replace(",", "")),
            "steps_per_s": float(m[4].replace(",", "")), "batch_ms": float(m[5]),
            "ratio": float(m[6]) if m[6] else None}
    if "backends" not in out and "engines" not in out:
        raise ValueError("not a vector_bench report: no row of backends or engines")
    return out


def run_alfworld(args: argparse.Namespace) -> None:
    """ALFWorld-v0 group rollouts with the expert, in-process: the native engine beside the
    reference engine (the same tasks and rounds; episodes end at the win, resets included)."""
    from gagpo.envs.alfworld import available

    n = args.tasks * args.group
    print(f"== GroupVectorEnv: {args.tasks} tasks x {args.group} copies = {n} envs of "
          f"ALFWorld-v0 (generated games, train split), expert policy, in-process, "
          f"{args.rounds} rounds ==")
    engines = ("native", "reference") if available() else ("native",)
    rows = [{"engine": e, **bench("inprocess", args.tasks, args.group, args.rounds, None,
                                   "ALFWorld-v0", {"engine": e})} for e in engines]
    base = rows[-1]["steps_per_s"] if len(rows) > 1 else None
    print(f"{'engine':<11}{'start s':>9}{'env steps':>11}{'env steps/s':>13}"
          f"{'batch step ms':>15}{'vs reference':>14}")
    for r in rows:
        ratio = f"{r['steps_per_s'] / base:.1f}x" if base else "-"
        print(f"{r['engine']:<11}{r['start_s']:>9.2f}{r['steps']:>11,}{r['steps_per_s']:>13,.0f}"
              f"{r['batch_ms']:>15.2f}{ratio:>14}")


def run(args: argparse.Namespace) -> None:
    """The benchmark proper: every backend, then the table."""
    if args.env == "alfworld":
        run_alfworld(args)
        return
    n = args.tasks * args.group
    print(f"== GroupVectorEnv: {args.tasks} tasks x {args.group} copies = {n} envs of "
          f"WebShop-v0, expert policy, {args.rounds} rounds, {os.cpu_count()} CPUs ==")
    rows = []
    for backend in args.backends.split(","):
        if backend == "ray":
            try:
                import ray  # noqa: F401
            except ImportError:
                print("ray       skipped: not installed (pip install gagpo[ray])")
                continue
        rows.append(bench(backend, args.tasks, args.group, args.rounds, args.workers))
    base = next((r["steps_per_s"] for r in rows if r["backend"] == "inprocess"), None)
    print(f"{'backend':<10}{'workers':>8}{'start s':>9}{'env steps/s':>13}{'batch step ms':>15}"
          f"{'vs in-process':>15}")
    for r in rows:
        ratio = f"{r['steps_per_s'] / base:.2f}x" if base else "-"
        print(f"{r['backend']:<10}{r['workers']:>8}{r['start_s']:>9.2f}{r['steps_per_s']:>13,.0f}"
              f"{r['batch_ms']:>15.2f}{ratio:>15}")


if __name__ == "__main__":
    main()
