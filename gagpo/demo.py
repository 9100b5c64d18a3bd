"""``make demo`` until the trainer lands: scripted policies on WebShop-v0's test goals.

Runs the goal-aware expert, the WebShop paper's rule baseline and a random policy on the
embedded catalog and prints score (100 x mean reward) and success rate (reward == 1) with 95%
confidence intervals, beside the original paper's figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import gymnasium as gym
import numpy as np
from tqdm import tqdm

import envs  # noqa: F401  (registers the environments)
from envs.webshop.expert import expert_action, random_action, rule_baseline_action


def run_episodes(
    env: gym.Env, policy: Callable[[dict, gym.Env], str | None], goals: range, desc: str
) -> np.ndarray:
    """Final reward of one episode per goal."""
    rewards = []
    for g in tqdm(goals, desc=desc, unit="ep", leave=False):
        _, info = env.reset(options={"task": g})
        reward, done, truncated = 0.0, False, False
        while not (done or truncated):
            action = policy(info, env)
            if action is None:
                break
            _, reward, done, truncated, info = env.step(action)
        rewards.append(reward if done else 0.0)
    return np.asarray(rewards, dtype=float)


def mean_ci(x: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its normal-approximation 95% interval."""
    if len(x) < 2:
        return float(x.mean()) if len(x) else 0.0, 0.0
    return float(x.mean()), 1.96 * float(x.std(ddof=1)) / math.sqrt(len(x))


def policies(seed: int = 0) -> dict[str, Callable]:
    rng = np.random.default_rng(seed)

    def expert(info, env):
        inner = env.unwrapped._backend
        return expert_action(inner.shop, inner.state)

    return {
        "expert": expert,
        "rule baseline": lambda info, env: rule_baseline_action(info),
        "random": lambda info, env: random_action(info, rng),
    }


def run_demo(episodes: int = 500) -> dict[str, dict[str, float]]:
    env = gym.make("WebShop-v0")
    goals = range(min(episodes, 500))
    print(f"WebShop-v0, embedded catalog, test goals 0..{len(goals) - 1}")
    rows = {}
    for name, policy in policies().items():
        r = run_episodes(env, policy, goals, name)
        score, score_ci = mean_ci(100 * r)
        success, success_ci = mean_ci(100 * (r == 1.0))
        rows[name] = {"score": score, "success": success}
        print(f"  {name:<14} score {score:5.1f} ± {score_ci:4.1f}   "
              f"success {success:5.1f}% ± {success_ci:4.1f}")
    print("  original paper: rule baseline 45.6 / 9.6%, human expert 82.1 / 59.6%")
    env.close()
    return rows
