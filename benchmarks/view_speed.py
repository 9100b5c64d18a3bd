"""How fast ``gagpo view`` opens a large run: 200 iterations of 1,000 steps each.

The run is synthetic but written by the trainer's own writer
(:func:`gagpo.run_folder.save_step_table`, with replies and observations of WebShop's size)
plus a ``metrics.jsonl`` of the trainer's keys. The viewer's app is then asked, in this
process, for the run page (cold: no table read before; then warm) and for task groups of
several iterations, each timed, with the process's peak memory (ru_maxrss) before and after.
Targets (the issue): run page < 1 s, a group < 0.5 s, memory bounded (tables read lazily).

    python -m benchmarks.view_speed [--iterations 200] [--steps 1000] [--out REPORT.md]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import tempfile
import time
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


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(run: Path) -> dict[str, float]:
    """Seconds for the run page (cold and warm) and for groups of several iterations, and peak
    memory (MB) before and after."""
    from gagpo.viewer.app import create_app

    client = create_app([run]).test_client()
    out = {"rss_before_mb": _rss_mb()}
    t = time.perf_counter()
    assert client.get(f"/run?r={run.name}").status_code == 200
    out["run_page_cold_s"] = time.perf_counter() - t
    t = time.perf_counter()
    assert client.get(f"/run?r={run.name}").status_code == 200
    out["run_page_warm_s"] = time.perf_counter() - t
    iterations = sorted(int(p.name[5:10]) for p in (run / "steps").glob("iter_*.npz"))
    times = []
    for it in iterations[:: max(1, len(iterations) // 10)]:
        for group in (0, 3):
            t = time.perf_counter()
            r = client.get(f"/run/{run.name}/iter/{it}?group={group}")
            times.append(time.perf_counter() - t)
            assert r.status_code == 200 and b'class="rollouts"' in r.data
    out["group_max_s"], out["group_median_s"] = max(times), float(np.median(times))
    out["groups_timed"] = len(times)
    out["rss_after_mb"] = _rss_mb()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--out", default=None, help="write the report (markdown) here")
    args = p.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="view-speed-"))
    try:
        run = folder / "big-run"
        t = time.perf_counter()
        synthetic_run(run, args.iterations, args.steps)
        written = time.perf_counter() - t
        size_mb = sum(f.stat().st_size for f in (run / "steps").iterdir()) / 2**20
        m = measure(run)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ok = m["run_page_cold_s"] < 1 and m["group_max_s"] < 0.5
    report = "\n".join([
        "# gagpo view on a large run",
        "",
        f"`python -m benchmarks.view_speed --iterations {args.iterations} --steps "
        f"{args.steps}`: a synthetic run written by `run_folder.save_step_table` "
        f"({args.iterations} step tables of about {args.steps} steps, replies and ~1.2 kB "
        f"observations kept; {size_mb:.0f} MB on disk, written in {written:.0f} s), opened "
        "by the viewer's app in one process (Flask test client, no network).",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| run page, first open (every table's columns read once) | "
        f"{m['run_page_cold_s']:.3f} s | < 1 s |",
        f"| run page, reload | {m['run_page_warm_s']:.3f} s | |",
        f"| one task group (G columns), slowest of {m['groups_timed']} | "
        f"{m['group_max_s']:.3f} s | < 0.5 s |",
        f"| one task group, median | {m['group_median_s']:.3f} s | |",
        f"| peak memory before / after | {m['rss_before_mb']:.0f} / "
        f"{m['rss_after_mb']:.0f} MB | bounded |",
        "",
        f"Targets met: {'yes' if ok else 'NO'}.",
    ])
    print(report)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(report + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
