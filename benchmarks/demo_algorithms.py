"""The demo's setting (``make demo``) with each advantage estimator in turn: held-out success
and score before and after, from the same untrained model, seeds and sample budget.

One process per estimator list; each estimator's result is kept as JSON beside the table, and
the table is rebuilt from every result present, so estimators can run in parallel processes:

    python -m benchmarks.demo_algorithms --algos gagpo rloo &
    python -m benchmarks.demo_algorithms --algos grpo gigpo

About 8 minutes per estimator on a 2-core CPU. One seed: a run's held-out interval says how
precisely its policy was measured, not how much another training seed would move it.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "demo_algorithms"
ALGOS = ("gagpo", "gigpo", "grpo", "rloo", "ppo")


def run(algo: str, episodes: int) -> dict:
    from gagpo.demo import demo_config
    from gagpo.trainer import train

    with tempfile.TemporaryDirectory() as out:
        cfg = demo_config(episodes, out)
        cfg.algo, cfg.progress, cfg.tensorboard = algo, False, False
        cfg.critic_lr = cfg.lr  # PPO's critic: a tiny model from scratch learns at the demo's lr
        started = time.perf_counter()
        evals = train(cfg)
        minutes = (time.perf_counter() - started) / 60
    return {"algo": algo, "minutes": minutes, "iterations": cfg.iterations,
            "episodes": cfg.eval_episodes,
            **{k: evals[k]["all"] for k in ("before", "after")}}


def table(results: list[dict]) -> str:
    lines = ["| estimator | success before % [95% CI] | success after % [95% CI] | score after "
             "x100 | mean length after | minutes |", "|---|---|---|---|---|---|"]
    for r in results:
        cells = []
        for key in ("before", "after"):
            lo, hi = r[key]["success_ci95"]
            cells.append(f"{100 * r[key]['success']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]")
        lines.append(f"| {r['algo']} | {cells[0]} | {cells[1]} | {100 * r['after']['score']:.1f} "
                     f"| {r['after']['mean_length']:.1f} | {r['minutes']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=list(ALGOS), choices=ALGOS)
    parser.add_argument("--episodes", type=int, default=300, help="held-out test goals")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for algo in args.algos:
        result = run(algo, args.episodes)
        (args.out / f"{algo}.json").write_text(json.dumps(result, indent=1))
        print(table([result]).splitlines()[-1], flush=True)
    results = [json.loads((args.out / f"{a}.json").read_text()) for a in ALGOS
               if (args.out / f"{a}.json").exists()]
    text = ("# The demo's setting with each estimator\n\n"
            "`python -m benchmarks.demo_algorithms`: the tiny model from scratch, 20 iterations "
            "x 8 tasks x 8 rollouts, reward = score, one seed; held-out: WebShop test goals "
            f"0..{results[0]['episodes'] - 1}.\n\n" + table(results) + "\n")
    (args.out / "README.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
