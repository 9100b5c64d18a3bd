"""Trainer overhead: the share of an iteration spent outside generation and the policy update
(forward/backward + optimizer step), from the trainer's own per-iteration timers.

Outside = environments and prompt building/parsing (rollout time minus the policy's time),
rewards, advantages, saving the step table, the atomic checkpoint and metric logging. Target:
under 5%. The first iteration is a warm-up and is left out.

    python -m benchmarks.trainer_overhead [--model tiny] [--mode generate] [--iterations 4]
    python -m benchmarks.trainer_overhead --from-run runs/demo   # the same shares, of a past run

``--from-run`` reads a finished run's ``metrics.jsonl`` (``make demo`` writes one in runs/demo)
instead of training; ``--out DIR`` also writes the report to DIR/report.txt.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.record import command_line, recorded

PARTS = ("generation", "update", "env", "other")


def shares(rows: list[dict], title: str) -> dict[str, float]:
    """Print and return the time of each part, over the iterations after the first."""
    rows = rows[1:] or rows
    total = float(np.sum([r["time/iteration"] for r in rows]))
    parts = {k: float(np.sum([r[f"time/{k}"] for r in rows])) for k in PARTS}
    outside = parts["env"] + parts["other"]
    print(f"trainer overhead: {title}, {len(rows)} timed iterations, {total:.1f} s")
    for k, v in parts.items():
        print(f"  {k:<11}{v:8.2f} s  {100 * v / total:5.1f}%")
    share = outside / total
    print(f"  outside generation and update: {100 * share:.1f}% (target < 5%)")
    # A run's held-out evaluation ends its last iteration and is counted in "other" there.
    last = rows[-1]["time/other"]
    print(f"  other in the last iteration alone: {last:.2f} s ({100 * last / total:.1f}%)")
    return {"overhead_share": share, **parts}


def summarize(report: str) -> dict[str, Any]:
    """The figures of a printed report (what ``benchmarks.figures`` quotes): the timed
    iterations and their seconds, each part's seconds and % (``"parts"``: generation, update,
    env, other), the % outside generation and update, and the other part's seconds and % in the
    last iteration alone.

    Raises:
        ValueError: the report lacks a line this reads.
    """
    head = re.search(r"^trainer overhead: .*, (\d+) timed iterations, ([\d.]+) s$", report, re.M)
    outside = re.search(r"outside generation and update: ([\d.]+)%", report)
    last = re.search(r"other in the last iteration alone: ([\d.]+) s \(([\d.]+)%\)", report)
    if head is None or outside is None or last is None:
        raise ValueError("not a trainer_overhead report: no 'trainer overhead:', 'outside "
                         "generation and update' or 'other in the last iteration' line")
    parts = {m[1]: {"s": float(m[2]), "pct": float(m[3])} for m in re.finditer(
        rf"^  ({'|'.join(PARTS)}) +([\d.]+) s +([\d.]+)%$", report, re.M)}
    return {"iterations": int(head[1]), "seconds": float(head[2]), "parts": parts,
            "outside_pct": float(outside[1]), "last_other_s": float(last[1]),
            "last_other_pct": float(last[2])}


def read_metrics(run_dir: Path) -> list[dict]:
    """The iteration rows of a run's metrics.jsonl."""
    lines = (Path(run_dir) / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if "time/iteration" in r]


def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny")
    p.add_argument("--mode", default="generate", choices=["generate", "score"])
    p.add_argument("--iterations", type=int, default=4)
    p.add_argument("--groups", type=int, default=4)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--from-run", type=Path, default=None,
                   help="read this finished run's metrics.jsonl instead of training")
    p.add_argument("--out", type=Path, default=None,
                   help="also write the report to OUT/report.txt")
    args = p.parse_args(argv)
    with recorded(args.out, command_line("benchmarks.trainer_overhead", argv), summarize):
        if args.from_run is not None:
            return shares(read_metrics(args.from_run), f"the run in {args.from_run}")
        return measure(args)


def measure(args: argparse.Namespace) -> dict[str, float]:
    """Train with the given settings in a temporary folder, then read its timers."""
    import torch

    from gagpo.train_config import TrainConfig
    from gagpo.trainer import train

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(model=args.model, mode=args.mode, iterations=args.iterations,
                          n_groups=args.groups, group_size=args.group_size, max_steps=6,
                          max_new_tokens=args.max_new_tokens, history_length=2,
                          eval_episodes=0, save_every=1, lr=1e-4, tensorboard=True,
                          progress=False, out_dir=out)
        started = time.perf_counter()
        train(cfg)
        wall = time.perf_counter() - started
        rows = read_metrics(Path(out))
    return shares(rows, f"{args.model} ({args.mode}), {args.groups} x {args.group_size} "
                        f"rollouts ({wall:.1f} s wall with set-up)")


if __name__ == "__main__":
    main()
