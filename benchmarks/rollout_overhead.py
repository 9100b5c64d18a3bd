"""The rollout machinery's overhead over raw env stepping, side by side in one run.

Both sides play the same episodes with the same actions (the env's expert, read from
``info["expert_action"]``) on the same in-process group vector env:

* raw: ``vec.step`` with the expert's actions, nothing else;
* rollout: :func:`agents.rollout.rollout` with :class:`ExpertPolicy` and a
  :class:`ReActAgent`: prompts built, replies parsed, step-table rows recorded.

Overhead = (rollout time - raw time) / raw time. With a model in the loop the policy's time
dwarfs both; this isolates what gagpo adds. WebShop's in-process step costs ~20 us, so the
prompt building that a real agent needs anyway is a visible share there; ALFWorld's ~6 ms steps
hide it.

    python -m benchmarks.rollout_overhead [--env WebShop-v0|ALFWorld-v0|both]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import envs  # noqa: F401
from agents.policies.scripted import ExpertPolicy
from agents.react import ReActAgent
from agents.rollout import rollout
from envs.vector import GroupVectorEnv

SETTINGS = {"WebShop-v0": (8, 8, 9), "ALFWorld-v0": (4, 4, 5)}  # tasks, copies, rounds


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
        # ALFWorld replays the same games: loading a new game (0.5-2.5 s of planner
        # translation) would otherwise land on whichever side meets it first.
        fresh = env_id.startswith("WebShop")
        rounds_tasks = [list(range(r * n, (r + 1) * n)) if fresh else list(range(n))
                        for r in range(rounds)]
        policy, agent = ExpertPolicy(), ReActAgent(env_id)
        raw_round(vec, rounds_tasks[0])  # warm caches on both paths
        rollout(policy, agent, vec, rounds_tasks[0])
        ratios, raw_t, roll_t, steps = [], 0.0, 0.0, 0
        for tasks in rounds_tasks:  # interleaved, so load changes hit both sides alike
            t = time.perf_counter()
            k = raw_round(vec, tasks)
            raw = time.perf_counter() - t
            t = time.perf_counter()
            rollout(policy, agent, vec, tasks)
            roll = time.perf_counter() - t
            ratios.append(roll / raw)
            raw_t, roll_t, steps = raw_t + raw, roll_t + roll, steps + k
    # The median of per-round ratios: a load spike on a shared machine hits one round only.
    overhead = 100 * (float(np.median(ratios)) - 1)
    print(f"{env_id:<12} {n}x{g} envs, {steps} steps: raw {raw_t / steps * 1e3:.3f} ms/step, "
          f"rollout {roll_t / steps * 1e3:.3f} ms/step, overhead {overhead:.1f}% "
          f"(median of {len(ratios)} rounds)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env", default="both", choices=["WebShop-v0", "ALFWorld-v0", "both"])
    args = parser.parse_args(argv)
    for env_id in (SETTINGS if args.env == "both" else [args.env]):
        try:
            measure(env_id)
        except ImportError as e:  # ALFWorld without its extra
            print(f"{env_id}: skipped ({e})")


if __name__ == "__main__":
    main()
