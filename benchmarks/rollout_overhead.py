"""The rollout machinery's overhead over raw env stepping, side by side in one run.

Both sides play the same episodes with the same actions (the env's expert, read from
``info["expert_action"]``) on the same in-process group vector env:

* raw: ``vec.step`` with the expert's actions, nothing else;
* rollout: :func:`gagpo.agents.rollout.rollout` with :class:`ExpertPolicy` and a
  :class:`ReActAgent`: prompts built, replies parsed, step-table rows recorded.

Overhead = (rollout time - raw time) / raw time, in CPU time of this process (the in-process
backend runs everything here), so that other load on a shared machine does not land on one
side; each side goes first in turn, on tasks both have played once. With a model in the loop
the policy's time dwarfs both; this isolates what gagpo adds. WebShop's in-process step costs
~40-60 us, so a few microseconds of Python per step are a visible share there. ALFWorld's native
engine steps in ~0.1-0.2 ms and resets a played game in ~1 ms, which the short expert episodes
measured here (about 4 steps on the default generated train games) spread over few steps, so the
same Python is a smaller share there.

    python -m benchmarks.rollout_overhead [--env WebShop-v0|ALFWorld-v0|both] [--out DIR]
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np

import gagpo.envs  # noqa: F401
from benchmarks.record import command_line, recorded
from gagpo.agents.policies.scripted import ExpertPolicy
from gagpo.agents.react import ReActAgent
from gagpo.agents.rollout import rollout
from gagpo.envs.vector import GroupVectorEnv

# tasks, copies, rounds: both engines step in well under a millisecond, so both get enough
# rounds for a median that one load spike does not move.
SETTINGS = {"WebShop-v0": (8, 8, 25), "ALFWorld-v0": (8, 8, 25)}


def raw_round(vec: GroupVectorEnv, tasks: list[int]) -> int:
    _, infos = vec.reset(tasks)
    last, steps = list(infos), 0
    while vec.live.any():
        actions = [last[i]["expert_action"] if vec.live[i] else None for i in range(vec.num_envs)]
        steps += int(vec.live.sum())
        _, _, _, _, infos = vec.step(actions)
        last = [new if new is not None else old for new, old in zip(infos, last, strict=True)]
    return steps


def measure(env_id: str) -> None:
    n, g, rounds = SETTINGS[env_id]
    with GroupVectorEnv(env_id, n, g, env_kwargs={"request_infos": ["expert_action"]}) as vec:
        # ALFWorld replays the same games: its train split may hold fewer games than rounds x
        # tasks. Either way a game's first load (~15 ms on the native engine) is paid in the
        # warm-up below, not on whichever side meets it first.
        fresh = env_id.startswith("WebShop")
        rounds_tasks = [list(range(r * n, (r + 1) * n)) if fresh else list(range(n))
                        for r in range(rounds)]
        policy, agent = ExpertPolicy(), ReActAgent(env_id)
        for tasks in rounds_tasks:  # a task's first episode warms caches on both paths
            raw_round(vec, tasks)
        rollout(policy, agent, vec, rounds_tasks[0])
        ratios, raw_t, roll_t, steps = [], 0.0, 0.0, 0
        for r, tasks in enumerate(rounds_tasks):  # interleaved, each side first in turn
            times = {}
            for side in (("raw", "rollout") if r % 2 == 0 else ("rollout", "raw")):
                t = time.process_time()
                if side == "raw":
                    k = raw_round(vec, tasks)
                else:
                    rollout(policy, agent, vec, tasks)
                times[side] = time.process_time() - t
            raw, roll = times["raw"], times["rollout"]
            ratios.append(roll / raw)
            raw_t, roll_t, steps = raw_t + raw, roll_t + roll, steps + k
    # The median of per-round ratios: a load spike on a shared machine hits one round only.
    overhead = 100 * (float(np.median(ratios)) - 1)
    print(f"{env_id:<12} {n}x{g} envs, {steps} steps: raw {raw_t / steps * 1e3:.3f} ms/step, "
          f"rollout {roll_t / steps * 1e3:.3f} ms/step, overhead {overhead:.1f}% "
          f"(median of {len(ratios)} rounds)")


def summarize(report: str) -> dict[str, dict[str, float]]:
    """The figures of a printed report (what ``benchmarks.figures`` quotes): per env
    (``"WebShop-v0"``, ``"ALFWorld-v0"``) the steps played, the raw and the rollout side's CPU
    ms per step, the overhead in % (the median of the rounds' ratios) and the rounds.

    Raises:
        ValueError: the report has no env's line.
    """
    out = {m[1]: {"steps": int(m[2]), "raw_ms": float(m[3]), "rollout_ms": float(m[4]),
                  "overhead_pct": float(m[5]), "rounds": int(m[6])}
           for m in re.finditer(r"^(\S+) +\d+x\d+ envs, (\d+) steps: raw ([\d.]+) ms/step, "
                                r"rollout ([\d.]+) ms/step, overhead (-?[\d.]+)% \(median of "
                                r"(\d+) rounds\)", report, re.M)}
    if not out:
        raise ValueError("not a rollout_overhead report: no '... steps: raw ... ms/step' line")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env", default="both", choices=["WebShop-v0", "ALFWorld-v0", "both"])
    parser.add_argument("--out", type=Path, default=None,
                        help="also write the report to OUT/report.txt")
    args = parser.parse_args(argv)
    with recorded(args.out, command_line("benchmarks.rollout_overhead", argv), summarize):
        for env_id in (SETTINGS if args.env == "both" else [args.env]):
            try:
                measure(env_id)
            except ImportError as e:  # ALFWorld without its extra
                print(f"{env_id}: skipped ({e})")


if __name__ == "__main__":
    main()
