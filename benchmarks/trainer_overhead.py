"""Trainer overhead: the share of an iteration spent outside generation and the policy update
(forward/backward + optimizer step), from the trainer's own per-iteration timers.

Outside = environments and prompt building/parsing (rollout time minus the policy's time),
rewards, advantages, saving the step table, the atomic checkpoint and metric logging. Target:
under 5%. The first iteration is a warm-up and is left out.

    python -m benchmarks.trainer_overhead [--model tiny] [--mode generate] [--iterations 4]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> dict[str, float]:
    import torch

    from gagpo.train_config import TrainConfig
    from gagpo.trainer import train

    torch.set_num_threads(1)
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="tiny")
    p.add_argument("--mode", default="generate", choices=["generate", "score"])
    p.add_argument("--iterations", type=int, default=4)
    p.add_argument("--groups", type=int, default=4)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=32)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(model=args.model, mode=args.mode, iterations=args.iterations,
                          n_groups=args.groups, group_size=args.group_size, max_steps=6,
                          max_new_tokens=args.max_new_tokens, history_length=2,
                          eval_episodes=0, save_every=1, lr=1e-4, tensorboard=True,
                          progress=False, out_dir=out)
        started = time.perf_counter()
        train(cfg)
        wall = time.perf_counter() - started
        rows = [json.loads(x) for x in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    rows = rows[1:] or rows
    total = float(np.sum([r["time/iteration"] for r in rows]))
    parts = {k: float(np.sum([r[f"time/{k}"] for r in rows])) for k in
             ("generation", "update", "env", "other")}
    outside = parts["env"] + parts["other"]
    print(f"trainer overhead: {args.model} ({args.mode}), {args.groups} x {args.group_size} "
          f"rollouts, {len(rows)} timed iterations, {total:.1f} s ({wall:.1f} s wall with "
          f"set-up)")
    for k, v in parts.items():
        print(f"  {k:<11}{v:8.2f} s  {100 * v / total:5.1f}%")
    share = outside / total
    print(f"  outside generation and update: {100 * share:.1f}% (target < 5%)")
    return {"overhead_share": share, **parts}


if __name__ == "__main__":
    main()
