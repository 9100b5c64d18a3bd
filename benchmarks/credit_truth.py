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

Each figure is given pooled (over the batch's rows, one step of the whole batch's gradient, so
the scale an estimator gives each task matters) and **within each task** (the correlation over
a task's own rows, and the step of its gradient alone, averaged over the tasks: the direction
learning follows inside one task, whatever the other tasks' scales).

The shapes (``--shapes``), each with invalid actions (the state stays, penalty p charged to the
row, reward 0) and truncation at the horizon H:

- ``shop``: a shop with search, results pages, product pages and options; every page but the
  search page has "back to search", and products appear under several queries, so rollouts keep
  meeting again. Score-valued: buying ends the episode with 10 x the product's score in [0, 1].
- ``house``: 5-12 rooms joined at random; take an object in one room, put it in another.
  Revisits over a long horizon (H = 30), a valid no-op ("look"), take/put offered everywhere
  (invalid where they make no sense). Success-valued: 10 on putting it in place.
- ``tree``: a tree of choices (depth 3-4, 3-6 branches); rollouts never meet after they
  diverge. Its leaves end the episode with a score-valued reward in half the tasks and a
  success-valued one in the rest.
- ``alfworld``: ALFWorld early in training: a house of 8-15 rooms, 30-50 steps, an unknown
  command offered everywhere beside take/put, so that about 40% of actions are invalid and most
  groups of 8 see no win.
- ``dag``: layers of pages, each action leading to a random page of the next layer: rollouts
  part and meet again only sometimes; endings score-valued (a full win, a partial score, or
  nothing).

Per shape the report gives what a trainer sees of it (the share of rows in a shared state, the
invalid share, the win rate, the share of groups without a win) beside the same statistics of
recorded real rollouts (:data:`REAL_RUNS`), so a reader sees which shapes the real
environments resemble.

Estimators are called through :func:`gagpo.advantages.compute_advantages` only, with the state
key = the true state id (what ``info["state_key"]`` gives), the env's reward and the penalty as
``penalty`` (the trainer's default target). ``ppo*`` is GAE on the *true* V: a perfect critic,
shown as a ceiling, not a critic-free estimator.

The GAGPO study: every variant of :data:`gagpo.advantages.GAGPO_VARIANTS` at several lambdas
and normalisations is scored on the *tuning* draws (seeds 0..); the study's pick is the one
with the best mean over shapes of its four figures there, and the report's tables are computed
on *held-out* draws (seeds from 1_000_000), which the choice never saw, with the pick, the
default (:data:`gagpo.advantages.DEFAULT_GAGPO_VARIANT`, what users run) and the previous
default each paired against the best critic-free rival of every figure.

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
from gagpo.advantages import (
    DEFAULT_GAGPO_VARIANT,
    GAGPO_VARIANTS,
    PREVIOUS_GAGPO_VARIANT,
    compute_advantages,
    resolved_lam_norm,
)

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


def rooms(rng: np.random.Generator, n_rooms: int, extra_edges: int) -> list[list[int]]:
    """Each room's neighbours: a random spanning tree plus fewer than ``extra_edges`` random
    doors."""
    edges = {(int(rng.integers(r)), r) for r in range(1, n_rooms)}
    for _ in range(int(rng.integers(0, extra_edges))):
        a, c = sorted(rng.choice(n_rooms, 2, replace=False).tolist())
        edges.add((a, c))
    neighbours: list[list[int]] = [[] for _ in range(n_rooms)]
    for a, c in sorted(edges):
        neighbours[a].append(c)
        neighbours[c].append(a)
    return neighbours


def house(rng: np.random.Generator) -> Task:
    """Rooms joined at random; take the object in its room, put it in the target's room."""
    n_rooms = int(rng.integers(5, 13))
    neighbours = rooms(rng, n_rooms, extra_edges=n_rooms)
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


def alfworld(rng: np.random.Generator) -> Task:
    """ALFWorld early in training: 8-15 rooms, take the object in one and put it in another,
    30-50 steps, two invalid commands offered everywhere (a third or more of actions invalid),
    wins rare (most groups of 8 see none)."""
    n_rooms = int(rng.integers(8, 16))
    neighbours = rooms(rng, n_rooms, extra_edges=n_rooms // 2 + 1)
    obj, target = rng.choice(n_rooms, 2, replace=False)
    b = TaskBuilder()
    state = {(room, holding): b.state() for holding in (0, 1) for room in range(n_rooms)}
    for (room, holding), s in state.items():
        for other in neighbours[room]:
            b.add(s, state[(other, holding)])
        b.add(s, s)  # look
        if room == obj and not holding:
            b.add(s, state[(room, 1)])
        elif room == target and holding:
            b.add(s, -1, WIN)
        else:
            b.add_invalid(s)
        b.add_invalid(s)  # a command the game does not know
    return b.build(rng, horizon=int(rng.integers(30, 51)), invalid_bias=0.0)


def dag(rng: np.random.Generator) -> Task:
    """Layers of pages, each action leading to a random page of the next layer: rollouts part
    and meet again only sometimes. The last layer's actions end with a score (a full win in
    some, a partial score in others, nothing in the rest)."""
    layers, width = int(rng.integers(4, 7)), int(rng.integers(6, 13))
    b = TaskBuilder()
    pages = [[b.state() for _ in range(width if level else 1)] for level in range(layers)]
    for level, row in enumerate(pages):
        for s in row:
            for _ in range(int(rng.integers(3, 6))):
                if level < layers - 1:
                    b.add(s, pages[level + 1][int(rng.integers(width))])
                    continue
                u = rng.random()
                b.add(s, -1, WIN if u < 0.15 else WIN * rng.uniform(0, 0.6) if u < 0.45 else 0.0)
            b.add_invalid(s)
    return b.build(rng, horizon=layers + 4, invalid_bias=-0.5)


SHAPES: dict[str, Callable[[np.random.Generator], Task]] = {
    "shop": shop, "house": house, "tree": tree, "alfworld": alfworld, "dag": dag,
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
         eta: float) -> dict[str, tuple[float, ...]]:
    """{estimator name: (correlation, gain, within-task correlation, within-task gain)} on one
    batch, plus ``"truth"`` (the same four for the true advantages) and ``"_stats"``: (share of
    rows whose step group holds another row, invalid share of rows, win rate of the episodes,
    share of tasks whose rollouts never won, share of rows in a state another rollout of the
    task visited).

    Pooled figures are over the batch's rows and one unit step of the whole batch's gradient
    (the tasks' scales matter); within-task ones are each task's own: the correlation over
    its rows and the gain of a unit step of its gradient alone (averaged over the tasks)."""
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

    def gains(adv: np.ndarray) -> tuple[float, float]:
        """(pooled, within-task) mean gain over the tasks."""
        grads = [policy_gradient(t, p, r, adv[bounds[i]:bounds[i + 1]])
                 for i, (t, p, r) in enumerate(zip(tasks, probs, parts, strict=True))]
        sizes = np.array([np.sqrt(float((g * g).sum())) for g in grads])
        norm = float(np.sqrt((sizes**2).sum()))
        pooled = [objective(t, t.probs(t.logits + eta * g / norm)) if norm else v0
                  for t, g, v0 in zip(tasks, grads, j0, strict=True)]
        own = [objective(t, t.probs(t.logits + eta * g / n)) if n else v0
               for t, g, n, v0 in zip(tasks, grads, sizes, j0, strict=True)]
        return float(np.mean(np.array(pooled) - j0)), float(np.mean(np.array(own) - j0))

    def corr(a: np.ndarray, b: np.ndarray) -> float:
        return 0.0 if a.std() == 0 or b.std() == 0 else float(np.corrcoef(a, b)[0, 1])

    def figures_of(adv: np.ndarray) -> tuple[float, float, float, float]:
        pooled, own = gains(adv)
        within = np.mean([corr(adv[bounds[i]:bounds[i + 1]], truth[bounds[i]:bounds[i + 1]])
                          for i in range(n_tasks)])
        return corr(adv, truth), pooled, float(within), own

    out = {"truth": figures_of(truth)}
    for est in estimators:
        out[est.name] = figures_of(est.advantages(batch, true_v))
    _, sizes = np.unique(np.stack([batch["group"], batch["key"]]), axis=1, return_counts=True)
    pairs = np.unique(np.stack([batch["group"], batch["key"]]), axis=1, return_inverse=True)[1]
    shared = float((sizes[pairs.reshape(-1)] > 1).mean())
    won = [np.bincount(r.traj, weights=r.reward >= WIN, minlength=group_size) > 0 for r in parts]
    met = compute_advantages("grpo", **{k: batch[k] for k in ("group", "trajectory", "step",
                                                               "key", "reward")},
                             return_details=True)[1]["met_fraction"]
    out["_stats"] = (shared, float((batch["penalty"] > 0).mean()), float(np.mean(won)),
                     float(np.mean([not w.any() for w in won])), met)
    return out


FIGURES = ("corr", "gain", "task_corr", "task_gain")
"""The four figures, in :func:`draw`'s order: pooled correlation and gain share, and the same
within each task."""
GAINS = ("gain", "task_gain")


@dataclass
class Figures:
    """An estimator's figures on one shape, over draws: pooled and within-task correlation
    (mean, t interval) and gain share (ratio of means, bootstrap interval)."""

    corr: float
    corr_ci: tuple[float, float]
    gain: float
    gain_ci: tuple[float, float]
    task_corr: float
    task_corr_ci: tuple[float, float]
    task_gain: float
    task_gain_ci: tuple[float, float]

    def cells(self, within: bool = False) -> str:
        c, g = ("task_corr", "task_gain") if within else ("corr", "gain")
        (clo, chi), (glo, ghi) = getattr(self, c + "_ci"), getattr(self, g + "_ci")
        return (f"{getattr(self, c):.3f} [{clo:.3f}, {chi:.3f}] | "
                f"{getattr(self, g):.3f} [{glo:.3f}, {ghi:.3f}]")


def figures(draws: list[dict], name: str, rng: np.random.Generator,
            n_boot: int = 2000) -> Figures:
    """Mean correlations (t interval over draws) and gain shares = mean gain / mean true gain
    (percentile bootstrap over draws)."""
    out: dict[str, object] = {}
    idx = rng.integers(0, len(draws), size=(n_boot, len(draws)))
    for k, fig in enumerate(FIGURES):
        x = np.array([d[name][k] for d in draws])
        if fig in GAINS:
            t = np.array([d["truth"][k] for d in draws])
            boot = x[idx].mean(axis=1) / t[idx].mean(axis=1)
            out[fig] = float(x.mean() / t.mean())
            out[fig + "_ci"] = (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)))
        else:
            half = 1.96 * x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else 0.0
            out[fig] = float(x.mean())
            out[fig + "_ci"] = (float(x.mean() - half), float(x.mean() + half))
    return Figures(**out)


def run_draws(shape: str, seeds: range, estimators: list[Estimator], args: argparse.Namespace,
              label: str) -> list[dict]:
    start, out = time.perf_counter(), []
    for i, seed in enumerate(seeds):
        out.append(draw(shape, seed, estimators, args.tasks, args.group_size, args.eta))
        if (i + 1) % max(1, len(seeds) // 5) == 0:
            print(f"  {label} {shape}: {i + 1}/{len(seeds)} draws, "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return out


def choose(tuning: dict[str, list[dict]], candidates: list[Estimator]
           ) -> tuple[Estimator, dict[str, float]]:
    """The GAGPO configuration with the best mean, over shapes and the four figures (pooled and
    within-task correlation and gain share), on the tuning draws."""
    rng = np.random.default_rng(0)
    scores = {}
    for est in candidates:
        figs = [figures(d, est.name, rng, n_boot=1) for d in tuning.values()]
        scores[est.name] = float(np.mean([[getattr(f, x) for x in FIGURES] for f in figs]))
    best = max(candidates, key=lambda e: scores[e.name])
    return best, scores


def paired(draws: list[dict], a: str, b: str, rng: np.random.Generator,
           n_boot: int = 2000) -> dict[str, tuple[float, float, float]]:
    """a - b on the same draws, each figure: correlations (mean difference, t interval) and
    gain shares (difference of the ratios, paired percentile bootstrap over draws)."""
    out = {}
    idx = rng.integers(0, len(draws), size=(n_boot, len(draws)))
    for k, fig in enumerate(FIGURES):
        xa, xb = (np.array([d[x][k] for d in draws]) for x in (a, b))
        if fig in GAINS:
            t = np.array([d["truth"][k] for d in draws])
            boot = (xa[idx].mean(axis=1) - xb[idx].mean(axis=1)) / t[idx].mean(axis=1)
            out[fig] = (float((xa.mean() - xb.mean()) / t.mean()),
                        float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)))
        else:
            r = xa - xb
            half = 1.96 * r.std(ddof=1) / np.sqrt(len(r))
            out[fig] = (float(r.mean()), float(r.mean() - half), float(r.mean() + half))
    return out


def verdicts(results: dict[str, list[dict]], chosen: Estimator, rivals: list[Estimator]
             ) -> dict[str, dict[str, dict]]:
    """Per shape and figure: ``chosen`` against the best rival of that figure, paired on the
    same draws: ``{shape: {figure: {mine, rival, theirs, diff, lo, hi, verdict}}}`` (first:
    the interval is above 0; level: it holds 0; behind: below 0)."""
    rng = np.random.default_rng(2)
    out: dict[str, dict[str, dict]] = {}
    for shape, draws in results.items():
        figs = {e.name: figures(draws, e.name, rng, n_boot=1) for e in rivals}
        mine = figures(draws, chosen.name, rng, n_boot=1)
        out[shape] = {}
        for fig in FIGURES:
            best = max(figs, key=lambda n: getattr(figs[n], fig))
            d, lo, hi = paired(draws, chosen.name, best, rng)[fig]
            out[shape][fig] = {"mine": getattr(mine, fig), "rival": best,
                               "theirs": getattr(figs[best], fig), "diff": d, "lo": lo,
                               "hi": hi,
                               "verdict": "first" if lo > 0 else "level" if hi >= 0 else "behind"}
    return out


def verdict_table(name: str, found: dict[str, dict[str, dict]]) -> str:
    lines = [f"| shape | figure | {name} | best rival | difference [95%] | verdict |",
             "|---|---|---|---|---|---|"]
    for shape, figs in found.items():
        for fig, v in figs.items():
            lines.append(f"| {shape} | {fig} | {v['mine']:.3f} | {v['rival']} "
                         f"{v['theirs']:.3f} | {v['diff']:+.3f} [{v['lo']:+.3f}, "
                         f"{v['hi']:+.3f}] | {v['verdict']} |")
    return "\n".join(lines)


def table(results: dict[str, list[dict]], estimators: list[Estimator],
          within: bool = False) -> str:
    """Correlation | gain share per shape, pooled (or ``within`` each task)."""
    rng = np.random.default_rng(1)
    return figures_table({s: {e.name: figures(d, e.name, rng) for e in estimators}
                          for s, d in results.items()}, [e.name for e in estimators], within)


def figures_table(held: dict[str, dict[str, Figures]], names: list[str],
                  within: bool = False) -> str:
    """The Markdown table of ``held[shape][name]``'s figures for ``names`` (also what
    ``python -m benchmarks.figures`` makes from ``credit_truth.json``)."""
    shapes = list(held)
    head = "| estimator | " + " | ".join(f"{s}: corr | {s}: gain share" for s in shapes) + " |"
    lines = [head, "|---" * (1 + 2 * len(shapes)) + "|"]
    for name in names:
        cells = " | ".join(held[s][name].cells(within) for s in shapes)
        lines.append(f"| {name} | {cells} |")
    return "\n".join(lines)


def shape_stats(results: dict[str, list[dict]]) -> dict[str, dict[str, float]]:
    """Per shape, what a trainer sees of it: the share of rows in a shared state, the invalid
    share, the win rate, the share of groups without a win; and the true gain per draw."""
    out = {}
    for s, d in results.items():
        shared, invalid, win, no_win, met = np.array([x["_stats"] for x in d]).mean(axis=0)
        out[s] = {"shared": float(shared), "met": float(met), "invalid": float(invalid),
                  "win_rate": float(win), "groups_without_a_win": float(no_win),
                  "true_gain": float(np.mean([x["truth"][1] for x in d]))}
    return out


def stats_table(stats: dict[str, dict[str, float]], real: dict[str, dict[str, float]]) -> str:
    lines = ["| shape | rows in a shared state | rows in a state another rollout visited "
             "| invalid rows | win rate | groups without a win | true gain per draw |",
             "|---|---|---|---|---|---|---|"]
    for s, x in stats.items():
        lines.append(f"| {s} | {x['shared']:.1%} | {x['met']:.1%} | {x['invalid']:.1%} | "
                     f"{x['win_rate']:.1%} | {x['groups_without_a_win']:.1%} | "
                     f"{x['true_gain']:.4f} |")
    for s, x in real.items():
        met = f"{x['met']:.1%}" if "met" in x else "not logged"
        lines.append(f"| real: {s} | {x['shared']:.1%} | {met} | {x['invalid']:.1%} | "
                     f"{x['win_rate']:.1%} | - | - |")
    return "\n".join(lines)


REAL_RUNS = {
    "WebShop-v0, SmolLM2-135M GAGPO, 3 seeds x 4 iterations (fair_run)":
        "studies/real_model/results/fair_run/metrics/seeds/gagpo_s*.jsonl",
    "WebShop-v0, SmolLM2-135M GRPO, 3 seeds (fair_run)":
        "studies/real_model/results/fair_run/metrics/seeds/grpo_s*.jsonl",
    "ALFWorld-v0, SmolLM2-135M GAGPO, 6 iterations (alfworld_wins)":
        "studies/real_model/results/alfworld_wins/metrics/alfworld_wins_gagpo.jsonl",
}
"""Recorded training metrics of real rollouts: the same statistics, per iteration, as the
trainer logged them (``state/shared_fraction``, ``train/invalid_rate``, ``train/success``)."""


def real_stats() -> dict[str, dict]:
    """The shapes' statistics on the recorded real runs (mean over their iterations)."""
    root, out = Path(__file__).resolve().parent.parent, {}
    for label, pattern in REAL_RUNS.items():
        rows = [json.loads(line) for path in sorted(root.glob(pattern))
                for line in path.read_text().splitlines() if line.strip()]
        rows = [r for r in rows if "state/shared_fraction" in r]
        if rows:
            out[label] = {"shared": float(np.mean([r["state/shared_fraction"] for r in rows])),
                          "invalid": float(np.mean([r["train/invalid_rate"] for r in rows])),
                          "win_rate": float(np.mean([r["train/success"] for r in rows])),
                          "iterations": len(rows)}
            if all("state/met_fraction" in r for r in rows):  # logged since 2026-12
                out[label]["met"] = float(np.mean([r["state/met_fraction"] for r in rows]))
    return out


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
    p.add_argument("--lams", default="0.35,0.5,0.65,0.8,0.95")
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
    critic_free = [e for e in baselines() if e.method != "ppo"]
    default, previous = (  # what users run, and ran until this study
        Estimator("gagpo", v, lam, norm=norm)
        for v in (DEFAULT_GAGPO_VARIANT, PREVIOUS_GAGPO_VARIANT)
        for lam, norm in [resolved_lam_norm("gagpo", v, None, None)])
    args.out.mkdir(parents=True, exist_ok=True)
    with recorded(args.out, command_line("benchmarks.credit_truth", argv)):
        tuning = {s: run_draws(s, range(args.tune_draws), grid, args, "tuning") for s in shapes}
        chosen, scores = choose(tuning, grid)
        print(f"Chosen on {args.tune_draws} tuning draws per shape: {chosen.name} (score "
              f"{scores[chosen.name]:.3f}: the mean over shapes of its four figures)")
        ranked = sorted(scores, key=scores.get, reverse=True)
        print(f"\nTuning scores, mean over shapes of correlation and gain share, pooled and "
              f"within each task, best 12 of {len(ranked)}:")
        for name in ranked[:12]:
            print(f"  {scores[name]:+.3f}  {name}")
        reported = baselines() + grid
        reported += [e for e in (default, previous) if e.name not in {x.name for x in reported}]
        held = {s: run_draws(s, range(HELD_OUT_SEED, HELD_OUT_SEED + args.draws), reported,
                             args, "held-out") for s in shapes}
        stats, real = shape_stats(held), real_stats()
        print(f"\nShapes ({args.draws} held-out draws each, {args.tasks} tasks x "
              f"{args.group_size} rollouts) and the same statistics on recorded real "
              "rollouts (mean over their iterations):\n")
        print(stats_table(stats, real))
        summary = baselines() + [e for e in grid if e.name == chosen.name or (
            e.lam == chosen.lam and e.norm == chosen.norm and e.gamma == chosen.gamma)]
        for extra in (Estimator("gagpo", "paper"), previous, default):  # the literal reading
            if extra.name in {e.name for e in reported} and extra not in summary:
                summary.insert(len(baselines()), extra)
        for within in (False, True):
            print(f"\nHeld-out summary, {'within each task' if within else 'pooled'}: the "
                  "other estimators, the literal reading at lambda 0.95, the default and the "
                  "previous one, "
                  f"and every variant at the chosen lambda {chosen.lam} and norm {chosen.norm}; "
                  "correlation with the true advantage | gain share (95% intervals)\n")
            print(table(held, summary, within))
        paired_with_rivals = {}
        for est in {e.name: e for e in (chosen, default, previous)}.values():
            paired_with_rivals[est.name] = verdicts(held, est, critic_free)
            print(f"\nHeld-out, paired on the same draws: {est.name} against the best "
                  "critic-free rival of each figure (first: interval above 0; level: it holds "
                  "0; behind: below 0)\n")
            print(verdict_table(est.name, paired_with_rivals[est.name]))
        print("\nHeld-out, every configuration studied, pooled\n")
        print(table(held, reported))
        print("\nHeld-out, every configuration studied, within each task\n")
        print(table(held, reported, within=True))
    # The folder as given (relative when given so), never this machine's absolute path.
    record = {"args": {k: str(v) for k, v in vars(args).items() if k != "out"},
              "chosen": chosen.name, "default": default.name, "previous": previous.name,
              "tuning_scores": scores, "shapes": stats, "real": real,
              "summary": [e.name for e in summary], "verdicts": paired_with_rivals,
              "held_out": {s: {e.name: dataclasses.asdict(figures(d, e.name,
                                                                   np.random.default_rng(1)))
                               for e in reported} for s, d in held.items()}}
    (args.out / "credit_truth.json").write_text(json.dumps(record, indent=1))
    return record


if __name__ == "__main__":
    main()
