"""Credit assignment: GAGPO, GiGPO, GRPO, RLOO and PPO side by side, same policy, same budget.

The estimators do not care what the policy is, so the policies here are the smallest ones that
can learn, trained by plain policy gradient on each estimator's advantages A_t (one update per
iteration, on the iteration's own samples, the same rule for every method):

    theta += lr / G * sum_t A_t * grad log pi(a_t | s_t)

Two policies (``--policy``), each a softmax over the state's admissible actions:

- ``tabular``: one logit per (task, state key, action), all 0 at the start. Credit given at one
  state moves nothing else.
- ``linear``: logits w . phi(s, a), w = 0 at the start, phi hashed features (2^18 buckets) of
  the observation, the instruction and the action text: state tokens crossed with action
  tokens, the action's own unigrams and bigrams, and the share of the action's tokens found in
  the instruction. An action that names a segment of the observation (WebShop's
  ``click[<asin>]``) is described by that segment and the one after it (the product's title),
  as a language model reads it in context. Credit given at one state moves the choice at every
  state with similar text, as in a language model.

PPO gets a critic of the policy's kind: ``tabular``, V per (task, state key); ``linear``, a
value head v . psi(s) on the hashed state tokens. V(s_t) is read before the update, the
advantages are GAE(gamma, lam) on it (``compute_advantages("ppo", value=V)``, normalised over
the batch), and after the update the critic takes one step of size ``critic_lr`` towards the
lambda-return (``details["value_target"]``): per state for the table (TD(lambda)), by gradient
on the squared error for the value head. Every run trains such a critic (it costs little), so
that PPO's advantage can be measured on every run's batches (below); only PPO's runs use it.

An iteration resets N tasks drawn from a fixed pool of training tasks, G copies each
(:class:`gagpo.envs.vector.GroupVectorEnv`), samples every action at temperature 1 and rewards
10 x won at the last step (the papers' outcome reward). WebShop's ``search[<query>]``
template is played as ``search[<instruction>]``. Every method gets the same budget (training
episodes = iterations x N x G) and the same seeds. Success is that of the sampled policy on the
training tasks, read off the training rollouts themselves (no extra samples), averaged over
windows of ``window`` iterations.

Diagnostics, per iteration, of the advantages each run trains on: the share of rows with no
credit of their own (advantage exactly 0; for GAGPO and PPO before their normalisation, an
affine map of the whole group or batch, so for GAGPO the rows after which the trajectory only
visits states no other rollout of its group visited), the share of rows in such singleton
states, the advantages' interquartile range and the share of |A| > 1 (which the GAGPO paper
reports). Also the share of steps whose state is shared in its group, keyed on
``info["state_key"]`` vs on the observation text (GiGPO's key).

Credit quality, independent of learning: in the first ``credit_seeds`` seeds of each reported
cell, at ``credit_points`` iterations spread over the run (the first, the last, evenly between),
``credit_rows`` rows of the batch are drawn and their true advantage Q(s, a) - V(s) under the
current policy is estimated from ``credit_rollouts`` extra rollouts each for Q (take a, then
follow pi) and V (follow pi from s), with the discounted return (gamma) of the 10 x won reward.
Each rollout re-creates the state by resetting the row's task with its seed and replaying the
row's action prefix (the envs are deterministic given the task and the actions). Every
estimator's advantage of the same batch is then correlated (Pearson, Spearman) with it, so the
estimators are compared on identical rows; a run's correlation pools its checkpoints' rows.

ALFWorld episodes are long (up to 50 steps; a uniform policy wins ~3%), so its pool is the 2
train games with the shortest expert plans, all played every iteration. ``--iterations`` etc.
apply to every env.

    python -m benchmarks.credit_assignment [--env WebShop-v0|ALFWorld-v0|both]
        [--policy tabular|linear|both] [--methods gagpo,ppo] [--lrs 3,10,30 --sweep-seeds 4]
        [--quick]

writes ``credit_assignment.{png,md}`` under ``--out`` (default ``benchmarks/results/
credit_assignment/``) and prints the tables. Cost on one core: a WebShop run (40 iterations)
about 3-4 s, an ALFWorld run (24 iterations) 4-10 s; a run that measures credit quality adds
about 1 s on WebShop and 10-15 s on ALFWorld (its replays and play-outs are up to 50 steps).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
import time
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import gymnasium as gym
import numpy as np

import gagpo.envs  # noqa: F401  (registers the environments)
from gagpo.advantages import GAGPO_VARIANTS, compute_advantages, state_groups
from gagpo.envs.vector import GroupVectorEnv

METHODS = ("gagpo", "gagpo:paper", "gigpo", "grpo", "rloo", "ppo")
"""The methods run by default. ``gagpo`` is the default variant; ``gagpo:<variant>`` names
another (gagpo.advantages.GAGPO_VARIANTS; ``gagpo:paper`` is the literal reading)."""


def known_methods() -> tuple[str, ...]:
    """What ``--methods`` accepts: :data:`METHODS` and ``gagpo:<variant>`` for every variant."""
    return tuple(dict.fromkeys([*METHODS, *(f"gagpo:{v}" for v in GAGPO_VARIANTS)]))
POLICIES = ("tabular", "linear")
ENVS = ("WebShop-v0", "ALFWorld-v0")
RESULTS = Path(__file__).resolve().parent / "results" / "credit_assignment"
SWEEP_SEED_BASE = 10_000  # --sweep-seeds use seeds 10_000.. so the reported seeds are fresh


@dataclass
class Args:
    env: str = "both"
    """WebShop-v0, ALFWorld-v0 or both"""
    policy: str = "both"
    """tabular, linear or both"""
    seeds: int = 3
    """reported seeds per cell (the same seeds for every method)"""
    iterations: int | None = None
    """training iterations (env default: ENV_DEFAULTS); budget = iterations x N x G episodes"""
    n_tasks: int | None = None
    """tasks N (groups) per iteration, drawn from the pool without replacement"""
    pool: int | None = None
    """number of training tasks"""
    window: int | None = None
    """iterations per point of the success curve"""
    group_size: int = 8
    """rollouts G of each task per iteration"""
    lr: float = 10.0
    """policy-gradient step size when no --lrs sweep is given"""
    methods: str = ",".join(METHODS)
    """comma-separated estimators to run (default: all five)"""
    lrs: str = ""
    """comma-separated step sizes to sweep (e.g. 3,10,30): every method runs at each, and is
    reported at its own best (highest whole-run success). The estimators' advantages differ in
    scale, which plain policy gradient turns into a different effective step size; a
    per-method best removes that from the comparison"""
    sweep_seeds: int = 0
    """seeds of the sweep (10_000..): the best lr is then rerun on the --seeds reported seeds,
    so the reported numbers are not those the lr was picked on. 0: the sweep runs the reported
    seeds and reports its best lr's runs"""
    critic_lr: float = 0.5
    """step size of the critic towards its lambda-return target (PPO)"""
    credit_seeds: int = 2
    """reported seeds of each cell that measure credit quality (true advantages)"""
    credit_points: int = 3
    """iterations per run at which credit quality is measured"""
    credit_rows: int = 16
    """rows drawn per measurement"""
    credit_rollouts: int = 8
    """extra rollouts per row for Q(s, a), and as many for V(s)"""
    gamma: float = 0.95
    """discount of G_t (verl-agent's)"""
    lam: float | None = None
    """GAE lambda of GAGPO and PPO (None: each one's default, gagpo.advantages.
    resolved_lam_norm)"""
    win_reward: float = 10.0
    """reward of a won episode, given at its last step"""
    backend: str = "inprocess"
    """GroupVectorEnv backend (inprocess, process, ray)"""
    out: Path = RESULTS
    """folder for the PNG and the markdown table"""


ENV_DEFAULTS: dict[str, dict[str, int]] = {
    "WebShop-v0": {"iterations": 40, "n_tasks": 8, "pool": 16, "window": 5},
    "ALFWorld-v0": {"iterations": 24, "n_tasks": 2, "pool": 2, "window": 3},
}
QUICK: dict[str, dict[str, int]] = {
    "WebShop-v0": {"iterations": 6, "n_tasks": 4, "pool": 8, "window": 2},
    "ALFWorld-v0": {"iterations": 1, "n_tasks": 2, "pool": 2, "window": 1},
}
QUICK_ARGS = {"credit_seeds": 1, "credit_rows": 4, "credit_rollouts": 2}
"""--quick's credit measurement (flags given still win): ALFWorld's replays are long."""


class Context(NamedTuple):
    """What a policy sees at a step: the task, the state key, the observation, the
    instruction."""

    task: str
    key: str
    obs: str
    instruction: str


# ---------------------------------------------------------------------------------------------
# Policies and critics. A policy maps (context, admissible actions) to probabilities and takes a
# policy-gradient step; a critic maps contexts to values and takes a step towards targets.


class Policy(Protocol):
    def probs(self, ctx: Context, actions: list[str]) -> np.ndarray: ...

    def update(self, ctxs: list[Context], choices: list[list[str]], taken: list[int],
               advantages: np.ndarray, step_size: float) -> None: ...


class Critic(Protocol):
    def values(self, ctxs: list[Context]) -> np.ndarray: ...

    def fit(self, ctxs: list[Context], targets: np.ndarray, step_size: float) -> None: ...


def _softmax(z: np.ndarray) -> np.ndarray:
    p = np.exp(z - z.max())
    return p / p.sum()


class TabularSoftmax:
    """pi(a | s) = softmax over the admissible actions of theta[s][a] (0 for unseen ones),
    s = (task, state key)."""

    def __init__(self) -> None:
        self.theta: dict[tuple[str, str], dict[str, float]] = {}

    def probs(self, ctx: Context, actions: list[str]) -> np.ndarray:
        logits = self.theta.get((ctx.task, ctx.key), {})
        return _softmax(np.array([logits.get(a, 0.0) for a in actions]))

    def update(self, ctxs: list[Context], choices: list[list[str]], taken: list[int],
               advantages: np.ndarray, step_size: float) -> None:
        """theta[s] += step_size * sum_t A_t * grad log pi(a_t | s_t), at the rollout's theta:
        d log pi(a | s) / d theta[s][b] = 1[b = a] - pi(b | s)."""
        grads = []
        for ctx, actions, a, adv in zip(ctxs, choices, taken, advantages, strict=True):
            g = -adv * self.probs(ctx, actions)
            g[a] += adv
            grads.append(((ctx.task, ctx.key), actions, g))
        for s, actions, g in grads:
            logits = self.theta.setdefault(s, {})
            for b, gb in zip(actions, g, strict=True):
                logits[b] = logits.get(b, 0.0) + step_size * gb


class TabularCritic:
    """V per (task, state key), 0 at the start; each fit moves V(s) by step_size towards the
    mean target of the rows in s (with lambda-return targets: TD(lambda))."""

    def __init__(self) -> None:
        self.v: dict[tuple[str, str], float] = {}

    def values(self, ctxs: list[Context]) -> np.ndarray:
        return np.array([self.v.get((c.task, c.key), 0.0) for c in ctxs])

    def fit(self, ctxs: list[Context], targets: np.ndarray, step_size: float) -> None:
        sums: dict[tuple[str, str], list[float]] = {}
        for c, y in zip(ctxs, targets, strict=True):
            sums.setdefault((c.task, c.key), []).append(float(y))
        for s, ys in sums.items():
            old = self.v.get(s, 0.0)
            self.v[s] = old + step_size * (np.mean(ys) - old)


# -- hashed features ----------------------------------------------------------------------------

BUCKETS = 1 << 18
OVERLAP = 0  # bucket 0 holds the instruction-overlap feature (hashes avoid it)
MAX_OBS_TOKENS = 48  # observation tokens beyond the instruction's (WebShop pages are long)
_TOKEN = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=1 << 16)
def _hash(text: str) -> int:
    """A stable hash (Python's own is salted per process), never bucket 0."""
    return 1 + zlib.crc32(text.encode()) % (BUCKETS - 1)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def describe(action: str, obs: str) -> str:
    """The action's text, and where its argument names a segment of the observation (a
    ``[SEP]``-separated list, WebShop's product ids), that segment's successor (the title)."""
    m = re.fullmatch(r"\w+\[(.*)\]", action)
    if m is None:
        return action
    segments = [s.strip().lower() for s in obs.split("[SEP]")]
    arg = m.group(1).strip().lower()
    for i, seg in enumerate(segments[:-1]):
        if seg == arg:
            return f"{action} {segments[i + 1]}"
    return action


@lru_cache(maxsize=1 << 14)
def state_tokens(obs: str, instruction: str) -> tuple[str, ...]:
    """The instruction's distinct tokens, then up to MAX_OBS_TOKENS more of the observation."""
    words = list(dict.fromkeys(tokens(instruction)))
    seen = set(words)
    extra = [t for t in dict.fromkeys(tokens(obs)) if t not in seen]
    return tuple(words + extra[:MAX_OBS_TOKENS])


@lru_cache(maxsize=1 << 16)
def action_features(ctx: Context, action: str) -> tuple[np.ndarray, np.ndarray]:
    """phi(s, a) as (bucket indices, values): state tokens x action unigrams, the action's
    unigrams and bigrams, each entry 1/sqrt(count) (so ||phi|| is about 1 whatever the text
    length), and bucket 0: the share of the action's unigrams found in the instruction."""
    words = tokens(describe(action, ctx.obs))
    uni = list(dict.fromkeys(words))
    pairs = zip(words[:-1], words[1:], strict=True)
    names = [f"a:{u}" for u in uni] + [f"b:{x} {y}" for x, y in pairs]
    names += [f"x:{s}|{u}" for s in state_tokens(ctx.obs, ctx.instruction) for u in uni]
    idx = np.fromiter((_hash(n) for n in names), np.int64, len(names))
    vals = np.full(len(idx), 1.0 / math.sqrt(max(len(idx), 1)))
    instr = set(tokens(ctx.instruction))
    overlap = sum(u in instr for u in uni) / max(len(uni), 1)
    return np.r_[OVERLAP, idx], np.r_[overlap, vals]


@lru_cache(maxsize=1 << 14)
def state_features(obs: str, instruction: str) -> tuple[np.ndarray, np.ndarray]:
    """psi(s) of the value head: a bias and the hashed state tokens, each 1/sqrt(count)."""
    names = ["bias"] + [f"s:{t}" for t in state_tokens(obs, instruction)]
    idx = np.fromiter((_hash(n) for n in names), np.int64, len(names))
    return idx, np.full(len(idx), 1.0 / math.sqrt(len(idx)))


class HashedLinearSoftmax:
    """pi(a | s) = softmax over the admissible actions of w . phi(s, a), w = 0 at the start."""

    def __init__(self) -> None:
        self.w = np.zeros(BUCKETS)

    def logits(self, ctx: Context, actions: list[str]) -> np.ndarray:
        feats = [action_features(ctx, a) for a in actions]
        return np.array([self.w[i] @ v for i, v in feats])

    def probs(self, ctx: Context, actions: list[str]) -> np.ndarray:
        return _softmax(self.logits(ctx, actions))

    def grad_log_prob(self, ctx: Context, actions: list[str],
                      a: int) -> tuple[np.ndarray, np.ndarray]:
        """d log pi(a | s) / dw = phi(s, a) - sum_b pi(b | s) phi(s, b), as (indices, values)
        (indices may repeat: they add up)."""
        p = self.probs(ctx, actions)
        coef = -p
        coef[a] += 1.0
        feats = [action_features(ctx, b) for b in actions]
        idx = np.concatenate([i for i, _ in feats])
        vals = np.concatenate([c * v for c, (_, v) in zip(coef, feats, strict=True)])
        return idx, vals

    def update(self, ctxs: list[Context], choices: list[list[str]], taken: list[int],
               advantages: np.ndarray, step_size: float) -> None:
        """w += step_size * sum_t A_t * grad log pi(a_t | s_t), all gradients at the rollout's
        w (rows with A_t = 0 contribute nothing and are skipped)."""
        parts_i, parts_v = [], []
        for ctx, actions, a, adv in zip(ctxs, choices, taken, advantages, strict=True):
            if adv != 0.0:
                i, v = self.grad_log_prob(ctx, actions, a)
                parts_i.append(i)
                parts_v.append(adv * v)
        if parts_i:
            self.w += step_size * np.bincount(np.concatenate(parts_i),
                                              np.concatenate(parts_v), minlength=BUCKETS)


class HashedLinearCritic:
    """The linear policy's critic: a value head V(s) = v . psi(s) on the hashed state tokens;
    each fit is one gradient step on the mean squared error to the targets."""

    def __init__(self) -> None:
        self.v = np.zeros(BUCKETS)

    def values(self, ctxs: list[Context]) -> np.ndarray:
        out = np.empty(len(ctxs))
        for k, c in enumerate(ctxs):
            i, x = state_features(c.obs, c.instruction)
            out[k] = self.v[i] @ x
        return out

    def fit(self, ctxs: list[Context], targets: np.ndarray, step_size: float) -> None:
        err = np.asarray(targets) - self.values(ctxs)
        feats = [state_features(c.obs, c.instruction) for c in ctxs]
        idx = np.concatenate([i for i, _ in feats])
        vals = np.concatenate([e * x for e, (_, x) in zip(err, feats, strict=True)])
        self.v += step_size / max(len(ctxs), 1) * np.bincount(idx, vals, minlength=BUCKETS)


def make_learners(kind: str) -> tuple[Policy, Critic]:
    """A fresh policy and critic of one kind (``tabular`` or ``linear``)."""
    if kind == "tabular":
        return TabularSoftmax(), TabularCritic()
    if kind == "linear":
        return HashedLinearSoftmax(), HashedLinearCritic()
    raise ValueError(f"unknown policy {kind!r}; known: {', '.join(POLICIES)}")


def admissible(info: dict[str, Any]) -> list[str]:
    """The state's admissible actions, WebShop's search template filled with the instruction."""
    return [f"search[{info['instruction']}]" if a == "search[<query>]" else a
            for a in info["admissible_actions"]]


def context(info: dict[str, Any], obs: str) -> Context:
    return Context(str(info["task_id"]), str(info["state_key"]), obs, str(info["instruction"]))


# ---------------------------------------------------------------------------------------------
# Rollouts: one episode per env of the vector env, recorded as a step table.

ROW_FIELDS = ("group", "trajectory", "step", "key", "obs", "ctx", "choices", "taken", "action",
              "task", "reward")


def rollout(vec: GroupVectorEnv, policy: Policy, tasks: list, rng: np.random.Generator,
            win_reward: float) -> dict[str, Any]:
    """Play tasks[i] in group i (G copies each, env seed i: GroupVectorEnv's default); the step
    table and each episode's outcome."""
    obs, infos = vec.reset(tasks)
    n = vec.num_envs
    t = np.zeros(n, dtype=int)
    won = np.zeros(n, dtype=bool)
    table: dict[str, list] = {k: [] for k in ROW_FIELDS}
    while vec.live.any():
        actions: list[str | None] = [None] * n
        rows = {}
        for i in np.flatnonzero(vec.live):
            ctx = context(infos[i], obs[i])
            choices = admissible(infos[i])
            a = int(rng.choice(len(choices), p=policy.probs(ctx, choices)))
            actions[i] = choices[a]
            group = i // vec.group_size
            rows[i] = (group, i, t[i], ctx.key, obs[i], ctx, choices, a, choices[a], tasks[group])
        new_obs, _, terminated, truncated, new_infos = vec.step(actions)
        for i, row in rows.items():
            won[i] = (terminated[i] or truncated[i]) and bool(new_infos[i].get("won", False))
            for k, v in zip(ROW_FIELDS, (*row, win_reward * won[i]), strict=True):
                table[k].append(v)
            obs[i], infos[i] = new_obs[i], new_infos[i]
            t[i] += 1
    return {**table, "won": won}


def advantages(method: str, batch: dict[str, Any], args: Args, value: np.ndarray,
               **kw: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """``method``'s advantages of the batch (and details), the critic's V for PPO."""
    name, _, variant = method.partition(":")
    if variant:
        kw["gagpo_variant"] = variant
    return compute_advantages(
        name, group=batch["group"], trajectory=batch["trajectory"], step=batch["step"],
        key=batch["key"], reward=batch["reward"], gamma=args.gamma, lam=args.lam,
        value=value, return_details=True, **kw)


# ---------------------------------------------------------------------------------------------
# Diagnostics of the advantages, and credit quality against the true advantage.


def zero_share(method: str, batch: dict[str, Any], args: Args, value: np.ndarray,
               adv: np.ndarray) -> float:
    """Share of rows with no credit of their own: advantage exactly 0 (|A| < 1e-9). GAGPO and
    PPO normalise their credit afterwards by an affine map of the whole group / batch, which
    would move a 0 to the group's shift, so theirs is read before it (``norm="none"``)."""
    if method.partition(":")[0] in ("gagpo", "ppo"):
        adv = advantages(method, batch, args, value, norm="none")[0]
    return float(np.mean(np.abs(adv) < 1e-9)) if len(adv) else 0.0


def spread(adv: np.ndarray) -> tuple[float, float]:
    """The advantages' interquartile range and share of |A| > 1."""
    q1, q3 = np.percentile(adv, [25, 75])
    return float(q3 - q1), float(np.mean(np.abs(adv) > 1))


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1, ties sharing their mean rank (for Spearman's correlation)."""
    _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    starts = np.cumsum(counts) - counts
    return (starts + (counts - 1) / 2)[inv]


def correlation(est: np.ndarray, truth: np.ndarray, rank: bool = False) -> float:
    """Pearson (or Spearman, on ranks) correlation; nan when the truth is constant (nothing to
    predict), 0 when the estimate is (no credit information)."""
    est, truth = np.asarray(est, float), np.asarray(truth, float)
    if rank:
        est, truth = _ranks(est), _ranks(truth)
    if len(truth) < 3 or np.ptp(truth) < 1e-12:
        return math.nan
    if np.ptp(est) < 1e-12:
        return 0.0
    return float(np.corrcoef(est, truth)[0, 1])


def prefix(batch: dict[str, Any], row: int) -> list[str]:
    """The actions of the row's trajectory before it (the table holds rows in time order)."""
    traj = batch["trajectory"][row]
    return [batch["action"][r] for r in range(row) if batch["trajectory"][r] == traj]


def play_out(env: gym.Env, policy: Policy, row: tuple[Any, int, list[str], str],
             first: str | None, rng: np.random.Generator, args: Args) -> float:
    """Discounted return (gamma) from a row's state: reset its task with its seed, replay its
    action prefix, take ``first`` (or a sample of pi), then follow pi to the episode's end.
    ``row`` is (task, seed, prefix, state key); a replay that misses the key raises."""
    task, seed, actions, key = row
    obs, info = env.reset(seed=int(seed), options={"task": task})
    for a in actions:
        obs, _, terminated, truncated, info = env.step(a)
    if info["state_key"] != key:
        raise RuntimeError(f"replaying {actions} reached {info['state_key']!r}, not {key!r}")
    k, done = 0, False
    while not done:
        choices = admissible(info)
        if k == 0 and first is not None:
            a = first
        else:
            a = choices[int(rng.choice(len(choices), p=policy.probs(context(info, obs), choices)))]
        obs, _, terminated, truncated, info = env.step(a)
        done = terminated or truncated
        k += 1
    won = bool(info.get("won", False))
    return args.gamma ** (k - 1) * args.win_reward * won


def true_advantages(env: gym.Env, policy: Policy, batch: dict[str, Any], rows: np.ndarray,
                    rng: np.random.Generator, args: Args) -> np.ndarray:
    """Q(s_t, a_t) - V(s_t) of each row under ``policy``, each a mean of credit_rollouts."""
    out = np.empty(len(rows))
    for k, r in enumerate(rows):
        row = (batch["task"][r], batch["group"][r], prefix(batch, r), batch["key"][r])
        m = args.credit_rollouts
        q = np.mean([play_out(env, policy, row, batch["action"][r], rng, args) for _ in range(m)])
        v = np.mean([play_out(env, policy, row, None, rng, args) for _ in range(m)])
        out[k] = q - v
    return out


def measure_credit(env: gym.Env, policy: Policy, batch: dict[str, Any], value: np.ndarray,
                   rng: np.random.Generator, args: Args) -> dict[str, Any]:
    """Every estimator's advantage of ``credit_rows`` random rows of the batch, and the rows'
    true advantages (before the batch's update)."""
    n = len(batch["reward"])
    rows = np.sort(rng.choice(n, min(args.credit_rows, n), replace=False))
    truth = true_advantages(env, policy, batch, rows, rng, args)
    measured = dict.fromkeys([*METHODS, *_choices(args.methods, known_methods(), "methods")])
    est = {m: advantages(m, batch, args, value)[0][rows] for m in measured}
    return {"truth": truth, "est": est}


# ---------------------------------------------------------------------------------------------
# One training run, then all of them.


def credit_iterations(iterations: int, points: int) -> set[int]:
    """``points`` iterations spread from the first to the last."""
    return {int(round(x)) for x in np.linspace(0, iterations - 1, min(points, iterations))}


def train(env_id: str, method: str, policy_kind: str, seed: int, args: Args,
          cfg: dict[str, int], pool: list, credit: bool = False) -> dict[str, Any]:
    """Train a fresh policy on ``method``'s advantages; its success curve, diagnostics and
    (``credit``) credit-quality measurements."""
    rng = np.random.default_rng(seed)
    credit_rng = np.random.default_rng([seed, 1])  # extra rollouts leave training's rng alone
    policy, critic = make_learners(policy_kind)
    checkpoints = credit_iterations(cfg["iterations"], args.credit_points) if credit else set()
    probe = gym.make(env_id) if checkpoints else None
    log: dict[str, list] = {k: [] for k in ("won", "steps", "shared_key", "shared_obs", "zero",
                                            "singleton", "iqr", "big")}
    measured: list[dict] = []
    with GroupVectorEnv(env_id, cfg["n_tasks"], args.group_size, backend=args.backend) as vec:
        for it in range(cfg["iterations"]):
            if cfg["n_tasks"] == len(pool):  # every task every iteration, each env keeps its own
                tasks = list(pool)
            else:
                tasks = [pool[j] for j in rng.choice(len(pool), cfg["n_tasks"], replace=False)]
            batch = rollout(vec, policy, tasks, rng, args.win_reward)
            value = critic.values(batch["ctx"])
            adv, details = advantages(method, batch, args, value)
            if it in checkpoints:
                measured.append(measure_credit(probe, policy, batch, value, credit_rng, args))
            policy.update(batch["ctx"], batch["choices"], batch["taken"], adv,
                          args.lr / args.group_size)
            critic.fit(batch["ctx"], details["value_target"], args.critic_lr)
            log["won"].append(batch["won"].mean())
            log["steps"].append(len(batch["reward"]))
            log["shared_key"].append(state_groups(batch["group"], batch["key"])[2])
            log["shared_obs"].append(state_groups(batch["group"], batch["obs"])[2])
            log["zero"].append(zero_share(method, batch, args, value, adv))
            log["singleton"].append(float(np.mean(details["state_group_size"] == 1)))
            iqr, big = spread(adv)
            log["iqr"].append(iqr)
            log["big"].append(big)
    if probe is not None:
        probe.close()
    w = cfg["window"]
    n_points = len(log["won"]) // w
    episodes = vec.num_envs * w * np.arange(1, n_points + 1)
    success = np.array(log["won"][: n_points * w]).reshape(n_points, w).mean(axis=1)
    return {"env": env_id, "method": method, "policy": policy_kind, "seed": seed, "lr": args.lr,
            "episodes": episodes, "success": success, "episodes_per_iter": vec.num_envs,
            "group_size": args.group_size, "credit": measured,
            **{k: np.array(v) for k, v in log.items()}}


def train_pool(env_id: str, size: int) -> list:
    """WebShop: the first ``size`` train goals. ALFWorld: the ``size`` train games with the
    shortest expert plans (the only ones a uniform policy wins often enough to start from)."""
    env = gym.make(env_id)
    try:
        base = env.unwrapped
        tasks = list(base.split_tasks("train"))
        if hasattr(base, "games"):
            games = base.games("train")
            tasks.sort(key=lambda i: (len(games[i].walkthrough()), i))
        return tasks[:size]
    finally:
        env.close()


def available(env_id: str) -> str | None:
    """None if ``gym.make(env_id)`` works, else why not."""
    try:
        gym.make(env_id).close()
    except Exception as e:  # any failure means: skip this env, and say why
        return f"{type(e).__name__}: {e}"
    return None


# ---------------------------------------------------------------------------------------------
# Reporting: markdown tables and a PNG of success vs training episodes (mean +- s.e.).


def _mean_se(x: Any) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=float)
    se = x.std(axis=0, ddof=1) / math.sqrt(len(x)) if len(x) > 1 else np.zeros(x.shape[1:])
    return x.mean(axis=0), se


def _pct(x: Any) -> str:
    m, s = _mean_se(x)
    return f"{100 * m:.1f} ± {100 * s:.1f}"


def _num(x: Any) -> str:
    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    if len(x) == 0:
        return "-"
    m, s = _mean_se(x)
    return f"{m:.2f} ± {s:.2f}" if len(x) > 1 else f"{m:.2f}"


def _cells(runs: list[dict]) -> list[tuple[str, str, str, list[dict]]]:
    """(env, policy, method, runs) of every cell present, in a fixed order."""
    out = []
    for env_id in dict.fromkeys(r["env"] for r in runs):
        for kind in POLICIES:
            for method in dict.fromkeys(r["method"] for r in runs):
                rs = [r for r in runs if (r["env"], r["policy"], r["method"])
                      == (env_id, kind, method)]
                if rs:
                    out.append((env_id, kind, method, rs))
    return out


def success_table(runs: list[dict]) -> str:
    """Per cell: success over the first, middle and last quarter of the budget, the mean over
    the whole run (area under the curve), episode length."""
    lines = ["| env | policy | method | seeds | success, 1st quarter | 2nd-3rd quarter "
             "| last quarter | whole run (AUC) | steps/episode, last quarter |",
             "|---|---|---|---|---|---|---|---|---|"]
    for env_id, kind, method, rs in _cells(runs):
        won = np.stack([r["won"] for r in rs])  # seeds x iterations
        q = max(1, won.shape[1] // 4)
        length = [r["steps"][-q:].sum() / (q * r["episodes_per_iter"]) for r in rs]
        lines.append(
            f"| {env_id} | {kind} | {method} (lr {rs[0]['lr']:g}) | {len(rs)} "
            f"| {_pct(won[:, :q].mean(1))} "
            f"| {_pct(won[:, q:-q].mean(1)) if won.shape[1] > 2 * q else '-'} "
            f"| {_pct(won[:, -q:].mean(1))} | {_pct(won.mean(1))} | {np.mean(length):.2f} |")
    return "\n".join(lines)


def diagnostics_table(runs: list[dict]) -> str:
    """Per cell, over every iteration of every run: the advantage diagnostics."""
    lines = ["| env | policy | method | A = 0 (no own credit) | rows in singleton states "
             "| IQR of A | share of abs(A) > 1 |", "|---|---|---|---|---|---|---|"]
    for env_id, kind, method, rs in _cells(runs):
        cols = [_pct([r[k].mean() for r in rs]) for k in ("zero", "singleton")]
        lines.append(f"| {env_id} | {kind} | {method} | {cols[0]}% | {cols[1]}% "
                     f"| {_num([r['iqr'].mean() for r in rs])} "
                     f"| {_pct([r['big'].mean() for r in rs])}% |")
    return "\n".join(lines)


def run_correlations(run: dict, rank: bool) -> dict[str, float]:
    """Each estimator's correlation with the true advantage over the run's measured rows."""
    if not run["credit"]:
        return {}
    truth = np.concatenate([c["truth"] for c in run["credit"]])
    return {m: correlation(np.concatenate([c["est"][m] for c in run["credit"]]), truth, rank)
            for m in run["credit"][0]["est"]}


def credit_table(runs: list[dict]) -> str:
    """Per (env, policy, estimator): correlation with the true advantage, mean ± s.e. over the
    measured runs (of every training method: the estimators see the same rows)."""
    lines = ["| env | policy | estimator | Pearson r | Spearman rho | runs (rows) |",
             "|---|---|---|---|---|---|"]
    for env_id in dict.fromkeys(r["env"] for r in runs):
        for kind in POLICIES:
            rs = [r for r in runs if (r["env"], r["policy"]) == (env_id, kind) and r["credit"]]
            if not rs:
                continue
            pear = [run_correlations(r, False) for r in rs]
            spear = [run_correlations(r, True) for r in rs]
            n_rows = sum(len(c["truth"]) for r in rs for c in r["credit"])
            for m in pear[0]:
                p = [c[m] for c in pear if not math.isnan(c[m])]
                lines.append(f"| {env_id} | {kind} | {m} | {_num(p)} "
                             f"| {_num([c[m] for c in spear])} | {len(p)} ({n_rows}) |")
    return "\n".join(lines)


def shared_table(runs: list[dict]) -> str:
    lines = ["Share of steps whose state is shared in its group (step group > 1 row), "
             "keyed on state_key vs on the observation text:", "",
             "| env | policy | key | first iteration (uniform policy) | last quarter |",
             "|---|---|---|---|---|"]
    for env_id in dict.fromkeys(r["env"] for r in runs):
        for kind in POLICIES:
            rs = [r for r in runs if (r["env"], r["policy"]) == (env_id, kind)]
            if not rs:
                continue
            q = max(1, len(rs[0]["won"]) // 4)
            for name, col in (("state_key", "shared_key"), ("observation", "shared_obs")):
                first = np.mean([r[col][0] for r in rs])
                last = np.mean([r[col][-q:].mean() for r in rs])
                lines.append(f"| {env_id} | {kind} | {name} | {100 * first:.1f}% "
                             f"| {100 * last:.1f}% |")
    return "\n".join(lines)


def sweep_table(runs: list[dict]) -> str:
    """Whole-run success of every (env, policy, method, lr), mean ± s.e. over seeds."""
    lrs = sorted({r["lr"] for r in runs})
    lines = ["| env | policy | method | " + " | ".join(f"lr {lr:g}" for lr in lrs) + " |",
             "|---|---|---|" + "---|" * len(lrs)]
    for env_id, kind, method, rs in _cells(runs):
        cells = []
        for lr in lrs:
            mine = [r for r in rs if r["lr"] == lr]
            cells.append(_pct([r["won"].mean() for r in mine]) if mine else "-")
        lines.append(f"| {env_id} | {kind} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best_lrs(runs: list[dict]) -> dict[tuple[str, str, str], float]:
    """Each (env, policy, method)'s lr of highest mean whole-run success."""
    best = {}
    for env_id, kind, method, rs in _cells(runs):
        best[(env_id, kind, method)] = max(
            sorted({r["lr"] for r in rs}),
            key=lambda x: np.mean([r["won"].mean() for r in rs if r["lr"] == x]))
    return best


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = list(dict.fromkeys((r["env"], r["policy"]) for r in runs))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, (env_id, kind) in zip(axes[0], panels, strict=True):
        for _, _, method, rs in _cells([r for r in runs if (r["env"], r["policy"])
                                        == (env_id, kind)]):
            m, s = _mean_se(np.stack([r["success"] for r in rs]))
            x = rs[0]["episodes"]
            ax.plot(x, 100 * m, marker=".", label=f"{method}, lr {rs[0]['lr']:g} "
                                                  f"({len(rs)} seeds)")
            ax.fill_between(x, 100 * (m - s), 100 * (m + s), alpha=0.2)
        ax.set_title(f"{env_id}: {kind} softmax, G = {rs[0]['group_size']}")
        ax.set_xlabel("training episodes")
        ax.set_ylabel("success of the training rollouts (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> tuple[Args, bool]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for f in dataclasses.fields(Args):
        kind = (int if f.type in ("int | None", "int") else
                float if f.type == "float | None" else type(f.default))
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=None,
                            help=f"(default: {f.default})")
    parser.add_argument("--quick", action="store_true", help="a short run, about a minute")
    ns = vars(parser.parse_args(argv))
    quick = ns.pop("quick")
    given = {k: v for k, v in ns.items() if v is not None}
    return Args(**({**QUICK_ARGS, **given} if quick else given)), quick


def _choices(text: str, known: tuple[str, ...], what: str) -> list[str]:
    chosen = list(known) if text == "both" else [x.strip() for x in text.split(",") if x.strip()]
    if unknown := set(chosen) - set(known):
        raise SystemExit(f"unknown {what} {sorted(unknown)}; known: {', '.join(known)}")
    return chosen


def env_config(env_id: str, args: Args, quick: bool) -> tuple[dict[str, int], list, str]:
    """The env's run settings (defaults, then flags), its task pool and a line saying both."""
    cfg = {**(QUICK if quick else ENV_DEFAULTS)[env_id],
           **{k: getattr(args, k) for k in ("iterations", "n_tasks", "pool", "window")
              if getattr(args, k) is not None}}
    pool = train_pool(env_id, cfg["pool"])
    cfg["n_tasks"] = min(cfg["n_tasks"], len(pool))
    budget = cfg["iterations"] * cfg["n_tasks"] * args.group_size
    note = (f"{env_id}: {budget:,} training episodes per run ({cfg['iterations']} iterations x "
            f"N = {cfg['n_tasks']} tasks x G = {args.group_size}), pool of {len(pool)} train "
            f"tasks, success window {cfg['window']} it.")
    return cfg, pool, note


def run_cell(env_id: str, kind: str, method: str, lr: float, seeds: list[int], args: Args,
             cfg: dict[str, int], pool: list, credit: bool) -> list[dict]:
    """Train one (env, policy, method, lr) on each seed, printing a line per run."""
    runs = []
    for j, seed in enumerate(seeds):
        t = time.perf_counter()
        run = train(env_id, method, kind, seed, dataclasses.replace(args, lr=lr), cfg, pool,
                    credit=credit and j < args.credit_seeds)
        run["seconds"] = time.perf_counter() - t
        runs.append(run)
        print(f"  {kind:7s} {method:5s} lr {lr:g} seed {seed}: success "
              f"{100 * run['won'][0]:.1f}% -> {100 * run['won'][-1]:.1f}% (first -> last "
              f"iteration), {run['steps'].sum():,} env steps, {run['seconds']:.1f}s", flush=True)
    return runs


def summarize(report_text: str) -> dict[str, list[dict[str, Any]]]:
    """The success and credit-quality tables of a written ``credit_assignment.md``, as
    records: ``{"success": [{env, policy, method, lr, seeds, last_quarter, whole_run}],
    "credit": [{env, policy, estimator, pearson, spearman}]}``, each figure a ``[mean, s.e.]``
    pair in % (success) or as r (credit)."""
    def pair(cell: str) -> list[float] | None:  # "m ± s", "m" (one run) or "-" (none)
        if cell == "-":
            return None
        mean, _, se = cell.replace("%", "").partition(" ± ")
        return [float(mean), float(se) if se else float("nan")]

    out: dict[str, list[dict[str, Any]]] = {"success": [], "credit": []}
    header = ""
    for line in report_text.splitlines():
        if line.startswith("| env "):
            header = line
        if not line.startswith("| ") or line.startswith(("| env ", "|---")):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if "whole run (AUC)" in header:
            method, _, lr = cells[2].partition(" (lr ")
            out["success"].append({"env": cells[0], "policy": cells[1], "method": method,
                                   "lr": float(lr.rstrip(")")), "seeds": int(cells[3]),
                                   "last_quarter": pair(cells[6]), "whole_run": pair(cells[7])})
        elif "Pearson r" in header:
            out["credit"].append({"env": cells[0], "policy": cells[1], "estimator": cells[2],
                                  "pearson": pair(cells[3]), "spearman": pair(cells[4])})
    if not out["success"]:
        raise ValueError("not a credit_assignment report: no success table")
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    args, quick = parse_args(argv)
    lrs = [float(x) for x in args.lrs.split(",") if x.strip()] or [args.lr]
    methods = _choices(args.methods, known_methods(), "methods")
    kinds = _choices(args.policy, POLICIES, "policies")
    env_ids = _choices(args.env, ENVS, "envs")
    reported = list(range(args.seeds))
    sweep_on = [SWEEP_SEED_BASE + s for s in range(args.sweep_seeds)] or reported
    runs: list[dict] = []
    swept: list[dict] = []
    notes: list[str] = []
    started = time.perf_counter()
    for env_id in env_ids:
        if (reason := available(env_id)) is not None:
            notes.append(f"{env_id} skipped: gym.make({env_id!r}) failed ({reason})")
            print(notes[-1])
            continue
        cfg, pool, note = env_config(env_id, args, quick)
        notes.append(note)
        print(note, flush=True)
        for kind in kinds:
            t = time.perf_counter()
            for method in methods:
                cell = [r for lr in lrs for r in run_cell(
                    env_id, kind, method, lr, sweep_on, args, cfg, pool,
                    credit=len(lrs) == 1 or not args.sweep_seeds)]
                swept += cell
                if len(lrs) > 1 and args.sweep_seeds:
                    lr = best_lrs(cell)[(env_id, kind, method)]
                    print(f"  {kind} {method}: best lr {lr:g}; its reported seeds", flush=True)
                    cell = run_cell(env_id, kind, method, lr, reported, args, cfg, pool, True)
                elif len(lrs) > 1:
                    lr = best_lrs(cell)[(env_id, kind, method)]
                    cell = [r for r in cell if r["lr"] == lr]
                runs += cell
            notes.append(f"{env_id}, {kind} policy: {(time.perf_counter() - t) / 60:.1f} min "
                         f"for all its runs")
    if not runs:
        print("nothing ran")
        return runs
    command = " ".join(["python -m benchmarks.credit_assignment",
                        *(sys.argv[1:] if argv is None else argv)])
    text = report(args, lrs, runs, swept, [f"command: `{command}`", *notes],
                  time.perf_counter() - started)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "credit_assignment.md").write_text(text + "\n", encoding="utf-8")
    plot(runs, args.out / "credit_assignment.png")
    print(text)
    print(f"wrote {args.out / 'credit_assignment.png'} and {args.out / 'credit_assignment.md'}")
    return runs


def report(args: Args, lrs: list[float], runs: list[dict], swept: list[dict], notes: list[str],
           seconds: float) -> str:
    """The markdown report: settings, success, diagnostics, credit quality, the sweep."""
    if len(lrs) == 1:
        lr_text = f"lr = {args.lr:g}"
    else:
        lr_text = ("lr per cell: the best of " + ", ".join(f"{lr:g}" for lr in lrs)
                   + " by whole-run success" + (f" on {args.sweep_seeds} sweep seeds, then "
                                                "rerun on the reported seeds"
                                                if args.sweep_seeds else ""))
    header = [f"Policies: {', '.join(dict.fromkeys(r['policy'] for r in runs))} softmax; "
              f"{lr_text}; critic lr {args.critic_lr:g}; gamma = {args.gamma}, lam "
              f"{args.lam if args.lam is not None else 'and norm: each estimator default'}, "
              f"reward {args.win_reward:g} x won; mean ± s.e. over seeds. Success: the sampled "
              "(temperature 1) training rollouts.",
              f"Credit quality: the first {args.credit_seeds} reported seeds of each cell, at "
              f"{args.credit_points} iterations per run, {args.credit_rows} rows each, "
              f"{args.credit_rollouts} + {args.credit_rollouts} extra rollouts per row.",
              f"Total time {seconds / 60:.1f} min."]
    sections = ["\n".join(header + [f"- {n}" for n in notes]),
                "## Success\n\n" + success_table(runs),
                "## Advantage diagnostics (mean over iterations, then ± s.e. over seeds)\n\n"
                + diagnostics_table(runs),
                "## Credit quality: correlation of each estimator's advantage with the true "
                "advantage (mean ± s.e. over runs)\n\n" + credit_table(runs),
                shared_table(runs)]
    if len(lrs) > 1:
        sections.append("## Learning-rate sweep, whole-run success"
                        + (f" ({args.sweep_seeds} sweep seeds)" if args.sweep_seeds else "")
                        + "\n\n" + sweep_table(swept))
    return "\n\n".join(sections)


if __name__ == "__main__":
    main()
