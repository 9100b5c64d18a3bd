"""Ground-truth credit: every estimator's advantages against the exact true advantages, on small
random MDPs where dynamic programming gives Q and V under the sampling policy with no Monte
Carlo noise.

Each draw is a batch like one training iteration: N random tasks of one shape, G rollouts of
each from its start state under a random softmax policy pi (the "sampling policy", one logit per
state and action). Every row (one step of one rollout) has a true advantage

    A*(s_t, a_t) = Q_h(s_t, a_t) - V_h(s_t),    h = H - t steps left before truncation,

of the objective J = E[sum_t gamma^t (r_t - p_t)], p_t the invalid-action penalty: the quantity
the estimators are meant to estimate. Two figures per estimator, both free of any learning rate
or training seed:

- **correlation**: Pearson r of the estimator's per-row advantages with A* over the batch's
  rows (mean over draws, with a 95% interval over draws);
- **gain share**: the exact improvement J(theta + eta u) - J(theta) after one tabular
  policy-gradient step of unit norm, u = g / |g|, g = sum_rows A_row grad log pi(a | s), as a
  share of the same step taken with A* on the same rows (ratio of the means over draws, with a
  95% bootstrap interval over draws). 1 is as good as the truth on these rows; 0 is no
  improvement; below 0 the step makes the policy worse.

The shapes (``--shapes``), each with invalid actions (the state stays, penalty p charged to the
row, reward 0) and truncation at the horizon H:

- ``shop``: a shop with search, results pages, product pages and options; every page but the
  search page has "back to search", and products appear under several queries, so rollouts keep
  meeting again. Score-valued: buying ends the episode with 10 x the product's score in [0, 1].
- ``house``: 5-12 rooms joined at random; take an object in one room, put it in another.
  Revisits over a long horizon (H = 30), a valid no-op ("look"), take/put offered everywhere
  (invalid where they make no sense). Success-valued: 10 on putting it in place.
- ``tree``: a tree of choices (depth 3-4, 3-6 branches); rollouts never meet after they
  diverge. Its leaves end
  the episode with a score-valued reward in half the tasks and a success-valued one in the rest.

Estimators are called through :func:`gagpo.advantages.compute_advantages` only, with the state
key = the true state id (what ``info["state_key"]`` gives), the env's reward and the penalty as
``penalty`` (the trainer's default target). ``ppo*`` is GAE on the *true* V: a perfect critic,
shown as a ceiling, not a critic-free estimator.

The GAGPO study: every variant of :data:`gagpo.advantages.GAGPO_VARIANTS` at several lambdas,
gammas and normalisations is scored on the *tuning* draws (seeds 0..); the default is the one
with the best mean over shapes of (correlation + gain share) / 2 there, and the report's tables
are computed on *held-out* draws (seeds from 1_000_000), which the choice never saw.

    python -m benchmarks.credit_truth [--draws 300] [--tune-draws 150] [--shapes shop,house,tree]
        [--out benchmarks/results/credit_truth] [--quick]

writes ``credit_truth.md`` and ``credit_truth.json`` under ``--out`` and prints the tables.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.record import command_line, recorded
from gagpo.advantages import GAGPO_VARIANTS, compute_advantages

RESULTS = Path(__file__).resolve().parent / "results" / "credit_truth"
HELD_OUT_SEED = 1_000_000
GAMMA = 0.95
"""Discount of the true objective (and the estimators' default)."""
PENALTY = 0.1
"""Invalid-action penalty (the trainer's default)."""
WIN = 10.0
"""Reward of a win (the papers' 10 x success); a score-valued ending gives 10 x score."""


# ---------------------------------------------------------------------------------------------
# Tasks: finite deterministic MDPs with a sampling policy.


@dataclass
class Task:
    """States 0..S-1 (0 the start), up to A actions each, deterministic transitions."""

    next_state: np.ndarray
    """[S, A] next state; -1 ends the episode. An invalid action's next state is its own."""
    reward: np.ndarray
    """[S, A] the env's reward of taking the action (0 for invalid ones)."""
    invalid: np.ndarray
    """[S, A] True where the action is invalid (the state stays, the penalty is charged)."""
    mask: np.ndarray
    """[S, A] True where the state offers the action."""
    logits: np.ndarray
    """[S, A] the sampling policy's logits (-inf where masked)."""
    horizon: int

    def probs(self, logits: np.ndarray | None = None) -> np.ndarray:
        z = self.logits if logits is None else logits
        z = np.where(self.mask, z, -np.inf)
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)


class TaskBuilder:
    """Collects states and actions, then makes a :class:`Task` with random policy logits."""

    def __init__(self) -> None:
        self.actions: list[list[tuple[int, float, bool]]] = []

    def state(self) -> int:
        self.actions.append([])
        return len(self.actions) - 1

    def add(self, s: int, to: int, reward: float = 0.0) -> None:
        """A valid action from ``s`` to ``to`` (-1: the episode ends) with ``reward``."""
        self.actions[s].append((to, reward, False))

    def add_invalid(self, s: int) -> None:
        self.actions[s].append((s, 0.0, True))

    def build(self, rng: np.random.Generator, horizon: int, invalid_bias: float) -> Task:
        S, A = len(self.actions), max(len(a) for a in self.actions)
        nxt, rew = np.full((S, A), -1), np.zeros((S, A))
        inv, mask = np.zeros((S, A), bool), np.zeros((S, A), bool)
        for s, acts in enumerate(self.actions):
            for a, (to, r, bad) in enumerate(acts):
                nxt[s, a], rew[s, a], inv[s, a], mask[s, a] = to, r, bad, True
        logits = rng.normal(size=(S, A)) + np.where(inv, invalid_bias, 0.0)
        return Task(nxt, rew, inv, mask, np.where(mask, logits, -np.inf), horizon)


def shop(rng: np.random.Generator) -> Task:
    """Search -> results (per query) -> product -> options -> buy; "back to search" anywhere."""
    b = TaskBuilder()
    search = b.state()
    n_queries, n_products, n_options = rng.integers(2, 5), rng.integers(5, 10), rng.integers(2, 4)
    goal, goal_option = rng.integers(n_products), rng.integers(n_options)
    # A product's score: the goal with its option 1, the goal otherwise 0.5-0.8, others 0-0.6.
    base = np.where(np.arange(n_products) == goal, rng.uniform(0.5, 0.8), rng.uniform(0, 0.6,
                                                                                       n_products))
    results = [b.state() for _ in range(n_queries)]
    products = [b.state() for _ in range(n_products)]
    options = [[b.state() for _ in range(n_options)] for _ in range(n_products)]
    for q in results:
        b.add(search, q)
    b.add_invalid(search)
    shown = [rng.choice(n_products, size=min(n_products, rng.integers(2, 5)), replace=False)
             for _ in results]
    q = int(rng.integers(n_queries))
    shown[q] = np.union1d(shown[q], [goal])  # some query finds the goal
    for q, items in zip(results, shown, strict=True):
        for j in items:
            b.add(q, products[j])
        b.add(q, search)
        b.add_invalid(q)
    for j in range(n_products):
        for k in range(n_options):
            b.add(products[j], options[j][k])
        b.add(products[j], -1, WIN * base[j] * 0.8)  # bought without choosing an option
        b.add(products[j], search)
        b.add_invalid(products[j])
        for k in range(n_options):
            here = options[j][k]
            for k2 in range(n_options):
                if k2 != k:
                    b.add(here, options[j][k2])
            score = 1.0 if (j == goal and k == goal_option) else base[j]
            b.add(here, -1, WIN * score)
            b.add(here, search)
            b.add_invalid(here)
    return b.build(rng, horizon=15, invalid_bias=-1.0)


def house(rng: np.random.Generator) -> Task:
    """Rooms joined at random; take the object in its room, put it in the target's room."""
    n_rooms = int(rng.integers(5, 13))
    edges = {(int(rng.integers(r)), r) for r in range(1, n_rooms)}  # a random spanning tree
    for _ in range(int(rng.integers(0, n_rooms))):
        a, c = sorted(rng.choice(n_rooms, 2, replace=False).tolist())
        edges.add((a, c))
    neighbours: list[list[int]] = [[] for _ in range(n_rooms)]
    for a, c in sorted(edges):
        neighbours[a].append(c)
        neighbours[c].append(a)
    obj, target = rng.choice(n_rooms, 2, replace=False)
    b = TaskBuilder()
    state = {(room, holding): b.state() for holding in (0, 1) for room in range(n_rooms)}
    for (room, holding), s in state.items():
        for other in neighbours[room]:
            b.add(s, state[(other, holding)])
        b.add(s, s)  # look: valid, changes nothing
        if room == obj and not holding:
            b.add(s, state[(room, 1)])  # take
        else:
            b.add_invalid(s)
        if room == target and holding:
            b.add(s, -1, WIN)  # put: won
        else:
            b.add_invalid(s)
    return b.build(rng, horizon=30, invalid_bias=-0.5)  # state (room 0, empty-handed) is 0


def tree(rng: np.random.Generator) -> Task:
    """A tree of choices, depth 3-4, 3-6 branches; leaves end with a score or a success."""
    depth, branches = int(rng.integers(3, 5)), int(rng.integers(3, 7))
    while branches**depth > 800:
        depth -= 1
    success_valued = rng.random() < 0.5
    b = TaskBuilder()

    def grow(level: int) -> int:
        s = b.state()
        for _ in range(branches):
            if level == depth:
                if success_valued:
                    b.add(s, -1, WIN * float(rng.random() < 0.25))
                else:
                    b.add(s, -1, WIN * float(rng.random() < 0.5) * rng.uniform())
            else:
                b.add(s, grow(level + 1))
        b.add_invalid(s)
        return s

    grow(0)
    return b.build(rng, horizon=depth + 3, invalid_bias=-0.5)


SHAPES: dict[str, Callable[[np.random.Generator], Task]] = {
    "shop": shop, "house": house, "tree": tree,
}


# ---------------------------------------------------------------------------------------------
# Exact values, sampling and the policy-gradient step.


def solve(task: Task, probs: np.ndarray, gamma: float = GAMMA,
          penalty: float = PENALTY) -> tuple[np.ndarray, np.ndarray]:
    """Q_h(s, a) and V_h(s) for h = 0..H steps left: ``(Q [H+1, S, A], V [H+1, S])``.

    Q_h(s, a) = r(s, a) - p [a invalid] + gamma V_{h-1}(s') (0 if the action ends the
    episode), V_h(s) = sum_a pi(a | s) Q_h(s, a), V_0 = 0 (truncated).
    """
    S, A = task.next_state.shape
    Q, V = np.zeros((task.horizon + 1, S, A)), np.zeros((task.horizon + 1, S))
    step_reward = np.where(task.mask, task.reward - penalty * task.invalid, 0.0)
    ends = task.next_state < 0
    nxt = np.maximum(task.next_state, 0)
    for h in range(1, task.horizon + 1):
        Q[h] = step_reward + gamma * np.where(ends, 0.0, V[h - 1][nxt])
        V[h] = (probs * np.where(task.mask, Q[h], 0.0)).sum(axis=1)
    return Q, V


def objective(task: Task, probs: np.ndarray) -> float:
    """J = V_H(start) under ``probs``."""
    return float(solve(task, probs)[1][task.horizon, 0])


@dataclass
class Rows:
    """The rows of one task's G rollouts (one entry per step)."""

    traj: np.ndarray
    t: np.ndarray
    state: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    invalid: np.ndarray


def rollouts(task: Task, probs: np.ndarray, group_size: int, rng: np.random.Generator) -> Rows:
    """G episodes from state 0, every action sampled from ``probs``, at most H steps each."""
    cum = np.cumsum(probs, axis=1)
    s = np.zeros(group_size, np.int64)
    alive = np.ones(group_size, bool)
    out: dict[str, list[np.ndarray]] = {f.name: [] for f in dataclasses.fields(Rows)}
    for t in range(task.horizon):
        idx = np.flatnonzero(alive)
        if not len(idx):
            break
        u = rng.random(len(idx))[:, None]
        a = np.minimum((cum[s[idx]] < u).sum(axis=1), probs.shape[1] - 1)
        a = np.where(task.mask[s[idx], a], a, np.argmax(probs[s[idx]], axis=1))  # rounding
        for name, value in (("traj", idx), ("t", np.full(len(idx), t)), ("state", s[idx]),
                            ("action", a), ("reward", task.reward[s[idx], a]),
                            ("invalid", task.invalid[s[idx], a])):
            out[name].append(value)
        to = task.next_state[s[idx], a]
        alive[idx[to < 0]] = False
        s[idx] = np.where(to < 0, s[idx], to)
    return Rows(**{k: np.concatenate(v) if v else np.zeros(0) for k, v in out.items()})


def true_advantages(task: Task, Q: np.ndarray, V: np.ndarray, rows: Rows) -> np.ndarray:
    h = task.horizon - rows.t
    return Q[h, rows.state, rows.action] - V[h, rows.state]


def policy_gradient(task: Task, probs: np.ndarray, rows: Rows, adv: np.ndarray) -> np.ndarray:
    """sum_rows A_row grad_theta log pi(a | s) for tabular logits theta [S, A]."""
    g = np.zeros_like(probs)
    np.add.at(g, (rows.state, rows.action), adv)
    np.add.at(g, rows.state, -adv[:, None] * probs[rows.state])
    return g


# ---------------------------------------------------------------------------------------------
# Estimators as the study names them.


@dataclass(frozen=True)
class Estimator:
    """One estimator configuration; ``name`` is how the tables show it."""

    method: str
    variant: str | None = None
    lam: float = 0.95
    gamma: float = GAMMA
    norm: str = "mean_std"

    @property
    def name(self) -> str:
        if self.method == "gagpo":
            extra = "" if self.norm == "mean_std" else f" {self.norm}"
            g = "" if self.gamma == GAMMA else f" g={self.gamma}"
            return f"gagpo[{self.variant}] l={self.lam}{g}{extra}"
        if self.method == "ppo":
            return "ppo* (true V)"
        return self.method + ("" if self.norm == "mean_std" else f" {self.norm}")

    def advantages(self, batch: dict[str, np.ndarray], true_v: np.ndarray) -> np.ndarray:
        kwargs = {"gagpo_variant": self.variant} if self.method == "gagpo" else {}
        return compute_advantages(
            self.method, group=batch["group"], trajectory=batch["trajectory"],
            step=batch["step"], key=batch["key"], reward=batch["reward"],
            penalty=batch["penalty"], gamma=self.gamma, lam=self.lam, norm=self.norm,
            value=true_v if self.method == "ppo" else None, **kwargs)


def baselines() -> list[Estimator]:
    """The other estimators: GRPO, RLOO, GiGPO, and PPO on the true values (a ceiling)."""
    return [Estimator("grpo"), Estimator("grpo", norm="mean"), Estimator("rloo"),
            Estimator("gigpo"), Estimator("gigpo", norm="mean"), Estimator("ppo", lam=0.95)]


def gagpo_grid(variants: list[str], lams: list[float], gammas: list[float],
               norms: list[str]) -> list[Estimator]:
    return [Estimator("gagpo", v, lam, gamma, norm) for v in variants for lam in lams
            for gamma in gammas for norm in norms]


# ---------------------------------------------------------------------------------------------
# One draw: N tasks, G rollouts each, every estimator's two figures.


def draw(shape: str, seed: int, estimators: list[Estimator], n_tasks: int, group_size: int,
         eta: float) -> dict[str, tuple[float, float]]:
    """{estimator name: (correlation, gain)} on one batch, plus ``"truth"``: (1, true gain),
    and ``"_stats"``: (shared share of rows, invalid share of rows)."""
    rng = np.random.default_rng([seed, list(SHAPES).index(shape)])
    tasks = [SHAPES[shape](rng) for _ in range(n_tasks)]
    probs = [t.probs() for t in tasks]
    solved = [solve(t, p) for t, p in zip(tasks, probs, strict=True)]
    parts = [rollouts(t, p, group_size, rng) for t, p in zip(tasks, probs, strict=True)]
    batch = {
        "group": np.concatenate([np.full(len(r.t), i) for i, r in enumerate(parts)]),
        "trajectory": np.concatenate([i * group_size + r.traj for i, r in enumerate(parts)]),
        "step": np.concatenate([r.t for r in parts]).astype(np.int64),
        "key": np.concatenate([r.state for r in parts]),
        "reward": np.concatenate([r.reward for r in parts]),
        "penalty": np.concatenate([PENALTY * r.invalid for r in parts]),
    }
    truth = np.concatenate([true_advantages(t, Q, V, r)
                            for t, (Q, V), r in zip(tasks, solved, parts, strict=True)])
    true_v = np.concatenate([V[t.horizon - r.t, r.state]
                             for t, (_, V), r in zip(tasks, solved, parts, strict=True)])
    j0 = np.array([V[t.horizon, 0] for t, (_, V) in zip(tasks, solved, strict=True)])
    bounds = np.cumsum([0] + [len(r.t) for r in parts])

    def gain(adv: np.ndarray) -> float:
        grads = [policy_gradient(t, p, r, adv[bounds[i]:bounds[i + 1]])
                 for i, (t, p, r) in enumerate(zip(tasks, probs, parts, strict=True))]
        norm = np.sqrt(sum(float((g * g).sum()) for g in grads))
        if norm == 0:
            return 0.0
        after = [objective(t, t.probs(t.logits + eta * g / norm))
                 for t, g in zip(tasks, grads, strict=True)]
        return float(np.mean(np.array(after) - j0))

    out = {"truth": (1.0, gain(truth))}
    for est in estimators:
        adv = est.advantages(batch, true_v)
        r = 0.0 if adv.std() == 0 else float(np.corrcoef(adv, truth)[0, 1])
        out[est.name] = (r, gain(adv))
    _, sizes = np.unique(np.stack([batch["group"], batch["key"]]), axis=1, return_counts=True)
    pairs = np.unique(np.stack([batch["group"], batch["key"]]), axis=1, return_inverse=True)[1]
    shared = float((sizes[pairs.reshape(-1)] > 1).mean())
    out["_stats"] = (shared, float((batch["penalty"] > 0).mean()))
    return out


@dataclass
class Figures:
    """An estimator's two figures on one shape, over draws."""

    corr: float
    corr_ci: tuple[float, float]
    gain: float
    gain_ci: tuple[float, float]

    def cells(self) -> str:
        return (f"{self.corr:.3f} [{self.corr_ci[0]:.3f}, {self.corr_ci[1]:.3f}] | "
                f"{self.gain:.3f} [{self.gain_ci[0]:.3f}, {self.gain_ci[1]:.3f}]")


def figures(draws: list[dict], name: str, rng: np.random.Generator,
            n_boot: int = 2000) -> Figures:
    """Mean correlation (t interval over draws) and gain share = mean gain / mean true gain
    (percentile bootstrap over draws)."""
    r = np.array([d[name][0] for d in draws])
    g = np.array([d[name][1] for d in draws])
    t = np.array([d["truth"][1] for d in draws])
    half = 1.96 * r.std(ddof=1) / np.sqrt(len(r)) if len(r) > 1 else 0.0
    idx = rng.integers(0, len(g), size=(n_boot, len(g)))
    boot = g[idx].mean(axis=1) / t[idx].mean(axis=1)
    return Figures(float(r.mean()), (float(r.mean() - half), float(r.mean() + half)),
                   float(g.mean() / t.mean()),
                   (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))))


def run_draws(shape: str, seeds: range, estimators: list[Estimator], args: argparse.Namespace,
              label: str) -> list[dict]:
    start, out = time.perf_counter(), []
    for i, seed in enumerate(seeds):
        out.append(draw(shape, seed, estimators, args.tasks, args.group_size, args.eta))
        if (i + 1) % max(1, len(seeds) // 5) == 0:
            print(f"  {label} {shape}: {i + 1}/{len(seeds)} draws, "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return out


def choose(tuning: dict[str, list[dict]], candidates: list[Estimator]) -> tuple[Estimator, dict]:
    """The GAGPO configuration with the best mean over shapes of (corr + gain share) / 2."""
    rng = np.random.default_rng(0)
    scores = {}
    for est in candidates:
        per_shape = [figures(d, est.name, rng, n_boot=1) for d in tuning.values()]
        scores[est.name] = float(np.mean([(f.corr + f.gain) / 2 for f in per_shape]))
    best = max(candidates, key=lambda e: scores[e.name])
    return best, scores


def paired(draws: list[dict], a: str, b: str, rng: np.random.Generator,
           n_boot: int = 2000) -> dict[str, tuple[float, float, float]]:
    """a - b on the same draws: correlation (mean difference, t interval) and gain share
    (difference of the ratios, paired percentile bootstrap over draws)."""
    r = np.array([d[a][0] - d[b][0] for d in draws])
    ga, gb = (np.array([d[x][1] for d in draws]) for x in (a, b))
    t = np.array([d["truth"][1] for d in draws])
    half = 1.96 * r.std(ddof=1) / np.sqrt(len(r))
    idx = rng.integers(0, len(t), size=(n_boot, len(t)))
    boot = (ga[idx].mean(axis=1) - gb[idx].mean(axis=1)) / t[idx].mean(axis=1)
    diff = (ga.mean() - gb.mean()) / t.mean()
    return {"corr": (float(r.mean()), float(r.mean() - half), float(r.mean() + half)),
            "gain": (float(diff), float(np.percentile(boot, 2.5)),
                     float(np.percentile(boot, 97.5)))}


def verdicts(results: dict[str, list[dict]], chosen: Estimator,
             rivals: list[Estimator]) -> str:
    """Per shape and figure: the chosen GAGPO against the best critic-free rival, paired."""
    rng = np.random.default_rng(2)
    lines = ["| shape | figure | chosen GAGPO | best critic-free rival | chosen - rival [95%] "
             "| verdict |", "|---|---|---|---|---|---|"]
    for shape, draws in results.items():
        figs = {e.name: figures(draws, e.name, rng, n_boot=1) for e in rivals}
        mine = figures(draws, chosen.name, rng, n_boot=1)
        for fig in ("corr", "gain"):
            best = max(figs, key=lambda n: getattr(figs[n], fig))
            d, lo, hi = paired(draws, chosen.name, best, rng)[fig]
            verdict = "first" if lo > 0 else "level" if hi >= 0 else "behind"
            lines.append(f"| {shape} | {fig} | {getattr(mine, fig):.3f} | {best} "
                         f"{getattr(figs[best], fig):.3f} | {d:+.3f} [{lo:+.3f}, {hi:+.3f}] "
                         f"| {verdict} |")
    return "\n".join(lines)


def table(results: dict[str, list[dict]], estimators: list[Estimator]) -> str:
    rng = np.random.default_rng(1)
    shapes = list(results)
    head = "| estimator | " + " | ".join(f"{s}: corr | {s}: gain share" for s in shapes) + " |"
    lines = [head, "|---" * (1 + 2 * len(shapes)) + "|"]
    for est in estimators:
        cells = " | ".join(figures(results[s], est.name, rng).cells() for s in shapes)
        lines.append(f"| {est.name} | {cells} |")
    return "\n".join(lines)


def shape_stats(results: dict[str, list[dict]]) -> str:
    lines = ["| shape | rows in a shared state | invalid rows | true gain per draw |",
             "|---|---|---|---|"]
    for s, d in results.items():
        shared, invalid = np.array([x["_stats"] for x in d]).mean(axis=0)
        lines.append(f"| {s} | {shared:.1%} | {invalid:.1%} | "
                     f"{np.mean([x['truth'][1] for x in d]):.4f} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--draws", type=int, default=300, help="held-out draws per shape")
    p.add_argument("--tune-draws", type=int, default=150, help="tuning draws per shape")
    p.add_argument("--tasks", type=int, default=8, help="tasks N per draw")
    p.add_argument("--group-size", type=int, default=8, help="rollouts G per task")
    p.add_argument("--eta", type=float, default=1.0, help="size of the unit-norm step")
    p.add_argument("--variants", default=",".join(GAGPO_VARIANTS))
    p.add_argument("--lams", default="0.2,0.35,0.5,0.65,0.8,0.95,1.0")
    p.add_argument("--gammas", default=str(GAMMA))
    p.add_argument("--norms", default="mean_std,mean")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--quick", action="store_true", help="20 + 10 draws: a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.draws, args.tune_draws = 20, 10
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    shapes = args.shapes.split(",")
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        raise SystemExit(f"unknown shape(s) {unknown}; known: {list(SHAPES)}")
    grid = gagpo_grid(args.variants.split(","), [float(x) for x in args.lams.split(",")],
                      [float(x) for x in args.gammas.split(",")], args.norms.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    with recorded(args.out, command_line("benchmarks.credit_truth", argv)):
        tuning = {s: run_draws(s, range(args.tune_draws), grid, args, "tuning") for s in shapes}
        chosen, scores = choose(tuning, grid)
        print(f"Chosen on {args.tune_draws} tuning draws per shape: {chosen.name} "
              f"(score {scores[chosen.name]:.3f}; paper at the same lambda: "
              f"{scores.get(dataclasses.replace(chosen, variant='paper').name, float('nan')):.3f})")
        ranked = sorted(scores, key=scores.get, reverse=True)
        print("\nTuning scores, mean over shapes of (corr + gain share) / 2, best 12 of "
              f"{len(ranked)}:")
        for name in ranked[:12]:
            print(f"  {scores[name]:.3f}  {name}")
        reported = baselines() + grid
        held = {s: run_draws(s, range(HELD_OUT_SEED, HELD_OUT_SEED + args.draws), reported,
                             args, "held-out") for s in shapes}
        print(f"\nShapes ({args.draws} held-out draws each, {args.tasks} tasks x "
              f"{args.group_size} rollouts):\n")
        print(shape_stats(held))
        summary = baselines() + [e for e in grid if e.name == chosen.name or (
            e.lam == chosen.lam and e.norm == chosen.norm and e.gamma == chosen.gamma)]
        paper = Estimator("gagpo", "paper")  # the literal reading at the old defaults
        if paper.name in {e.name for e in grid}:
            summary.insert(len(baselines()), paper)
        print(f"\nHeld-out summary: the other estimators, the literal reading at lambda 0.95, "
              f"and every variant at the chosen lambda {chosen.lam} and norm {chosen.norm}; "
              "correlation with the true advantage | gain share (95% intervals)\n")
        print(table(held, summary))
        critic_free = [e for e in baselines() if e.method != "ppo"]
        print(f"\nHeld-out, paired on the same draws: {chosen.name} against the best "
              "critic-free rival of each figure (first: interval above 0; level: it holds 0; "
              "behind: below 0)\n")
        print(verdicts(held, chosen, critic_free))
        print("\nHeld-out, every configuration studied\n")
        print(table(held, reported))
    # The folder as given (relative when given so), never this machine's absolute path.
    record = {"args": {k: str(v) for k, v in vars(args).items() if k != "out"},
              "chosen": chosen.name,
              "tuning_scores": scores,
              "held_out": {s: {e.name: dataclasses.asdict(figures(d, e.name,
                                                                   np.random.default_rng(1)))
                               for e in reported} for s, d in held.items()}}
    (args.out / "credit_truth.json").write_text(json.dumps(record, indent=1))
    return record


if __name__ == "__main__":
    main()
