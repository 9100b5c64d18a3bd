"""A synthetic run folder, written by the trainer's own writer: step tables of WebShop-sized
replies and observations (:func:`gagpo.run_folder.save_step_table`), a ``metrics.jsonl`` of the
trainer's keys and a ``config.json``. ``gagpo view``'s tests open it, and ``python -m
benchmarks.view_speed`` times the viewer on a large one."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np

from gagpo.agents.rollout import StepRow, StepTable
from gagpo.run_folder import save_step_table, write_json

METRIC_KEYS = ("train/success", "train/score", "train/episode_length", "train/invalid_rate",
               "adv/std", "adv/iqr", "loss/kl", "loss/entropy", "loss/clip_frac",
               "rollout/logprob_gap", "perf/gen_tokens_per_s", "perf/update_tokens_per_s",
               "time/generation", "time/env", "time/update")


def synthetic_table(rng: random.Random, steps: int, group_size: int = 8, max_t: int = 15,
                    obs_chars: int = 1200, task_types: tuple[str, ...] = ("beauty", "garden",
                                                                          "electronics")
                    ) -> tuple[StepTable, dict[str, np.ndarray]]:
    """About ``steps`` rows: groups of ``group_size`` rollouts whose first steps share states
    (they branch apart at a random step), replies and observations of realistic size, and the
    trainer's per-row columns (advantage 0 on states no other rollout visited)."""
    rows: list[StepRow] = []
    group = traj = 0
    words = [f"w{i:03d}" for i in range(500)] + ["[SEP]"] * 20  # pages of varied text
    while len(rows) < steps:
        task = f"webshop:{rng.randrange(6000)}"
        task_type = rng.choice(task_types)
        for _ in range(group_size):
            length = rng.randint(2, max_t)
            branch = rng.randint(1, length)
            won = rng.random() < 0.3
            for t in range(length):
                key = f"{task}-{t}" if t < branch else f"{task}-{traj}-{t}"
                action = "search[red shoes]" if t == 0 else f"click[item {rng.randrange(10)}]"
                rows.append(StepRow(
                    group=group, trajectory=traj, t=t, task_id=task, task_type=task_type,
                    state_key=key, request=None,
                    observation=" ".join(rng.choices(words, k=obs_chars // 5)),
                    reply=f"<think>step {t}: I look for the item.</think><action>{action}"
                          "</action>", action=action, well_formed=rng.random() > 0.05,
                    action_valid=rng.random() > 0.1, reward=float(won and t == length - 1),
                    done=t == length - 1, terminated=won and t == length - 1,
                    won=won and t == length - 1, score=float(won), token_ids=[1] * 30,
                    logprobs=[-0.5] * 30))
            traj += 1
        group += 1
    table = StepTable(rows=rows, num_envs=group, group_size=group_size)
    keys = [(r.group, r.state_key) for r in rows]
    sizes = Counter(keys)
    size = np.array([sizes[k] for k in keys], np.float32)
    adv = np.array([0.0 if s == 1 else rng.gauss(0, 1) for s in size], np.float32)
    n = len(rows)
    columns = {"reward": np.array([r.reward for r in rows], np.float32),
               "penalty": np.zeros(n, np.float32), "advantage": adv,
               "return": np.array([r.reward for r in rows], np.float32),
               "value": np.array([rng.random() for _ in rows], np.float32),
               "state_group_size": size}
    return table, columns


def synthetic_run(out: Path, iterations: int, steps: int, seed: int = 0, **kw) -> None:
    """A run folder of ``iterations`` synthetic step tables, metrics and settings."""
    rng = random.Random(seed)
    (out / "steps").mkdir(parents=True, exist_ok=True)
    write_json(out / "config.json", {"algo": "gagpo", "env": "WebShop-v0", "model": "synthetic",
                                     "iterations": iterations, "gamma": 0.95})
    lines = []
    for it in range(1, iterations + 1):
        table, columns = synthetic_table(rng, steps, **kw)
        save_step_table(out / "steps" / f"iter_{it:05d}.npz", table, columns, True)
        metrics = {k: rng.random() for k in METRIC_KEYS}
        if it % 10 == 0 or it == iterations:
            metrics |= {"eval/success": rng.random(), "eval/score": rng.random()}
        lines.append(json.dumps({"iteration": it, **metrics}))
    (out / "metrics.jsonl").write_text("\n".join(lines) + "\n")
