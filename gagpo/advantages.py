"""Advantage estimators for multi-turn agents: the critic-free GAGPO, GiGPO, GRPO and RLOO, and
PPO's GAE on a learned critic's values.

Pure functions of a step table: one row per environment step, given as equal-length arrays
(rows in any order)::

    group       the task group the row belongs to (N groups of G rollouts of one task)
    trajectory  the episode the row belongs to (any hashable id; one group per trajectory)
    step        the step number t inside the episode (orders the rows of a trajectory)
    key         the state key s_t of the state the action was taken in (any hashable)
    reward      the reward r_t of the step
    penalty     (optional) an amount charged to this step alone, outside r_t (see below)
    value       (PPO only) a learned critic's estimate V(s_t) of the row's state

Ids (group, trajectory, key) may be of any hashable type, mixed: two ids are the same when
Python finds them equal, so ``1`` and ``"1"`` are different ids (``1``, ``1.0`` and ``True`` are
one), and tuples of different lengths are fine.

Only the order of ``step`` inside a trajectory matters (the next row in step order is the next
step; numbers need not be contiguous). :func:`compute_advantages` returns one advantage per
row, in the caller's order::

    from gagpo.advantages import compute_advantages

    adv = compute_advantages("gagpo", group=g, trajectory=traj, step=t, key=keys, reward=r)
    adv, details = compute_advantages("gigpo", ..., return_details=True)

The formulas (the project's spec, ``algorithms.md``), with G_t = sum_{k>=t} gamma^(k-t) r_k the
discounted return of a row and R = sum_t r_t the (undiscounted) return of its episode:

``grpo``   A_i = normalise(R_i) over the group's trajectories, broadcast to every step.
``rloo``   A_i = R_i - mean_{j != i} R_j over the group's trajectories (0 for a group of one).
``gigpo``  A = A_E + omega * A_S: A_E as GRPO; A_S = normalise(G_t) within the step group
           (rows of one group with the same key; revisits inside one trajectory join it);
           a step group of one row gets A_S = 0.
``gagpo``  V(s) = mean of G_t over the group's rows with key s (the grouped value proxy);
           delta_t = r_t + gamma * V(s_{t+1}) - V(s_t), with V = 0 after the last step;
           A_t = delta_t + gamma * lam * A_{t+1}; then A is normalised over the group's rows.
           That is the literal reading (``gagpo_variant="paper"``). The default variant,
           ``"shared-2-flat"``, gives a state that fewer than two other trajectories of the
           group visited the value of the trajectory's last state that had one, carried
           forward (V_t = V_{t-1} - r_{t-1}), so a rollout that left the others still gets its
           outcome and a value pooled with one other rollout is not trusted; charges the
           penalty after normalising; and uses lam = 0.5 and ``norm="mean"`` unless told
           otherwise. :class:`GagpoVariant` lists the knobs, ``docs/algorithms.md`` the study
           that chose them.
``ppo``    the same GAE on a learned critic's V(s_t) (``value``), one estimate per row, with no
           grouping; A is normalised over the whole batch (verl's PPO whitens the batch's
           advantages), and the critic's regression target is the lambda-return A_t + V(s_t)
           taken before normalisation (``details["value_target"]``).

``normalise`` is ``(x - mean) / (std + epsilon)`` (``norm="mean_std"``), ``x - mean``
(``"mean"``) or ``x`` (``"none"``), with the statistics of the group the value belongs to.
``std`` is the unbiased sample standard deviation (ddof = 1, as ``torch.std`` in the verl /
verl-agent reference code); a group of one value normalises to 0 under ``"mean"`` and
``"mean_std"`` (the reference code keeps the raw value there instead). RLOO ignores ``norm``:
its leave-one-out baseline is the whole definition.

Episode-level statistics (GRPO, GiGPO's A_E) are taken over trajectories, one value each
(``episode_stats="trajectory"``, the GiGPO paper's formula). ``episode_stats="rows"``
reproduces verl-agent's GiGPO and GRPO code, which gives every step row its episode's score
and takes mean and std over the group's rows (so long episodes weigh more). RLOO's baseline is
over trajectories either way.

An invalid-action penalty reaches the estimators in one of two ways (:data:`PENALTY_TARGETS`):
folded into r_t by the caller (``"return"``: it then lowers G of every earlier step of the
episode, its return R and the grouped values V(s)), or passed as ``penalty`` (``"step"``, as
verl-agent does): charged to the offending row alone. Each estimator subtracts it from that
row's own value before the value is normalised over rows: the row's episode score R - p under
``episode_stats="rows"``, GiGPO's step return G_t - p, the literal GAGPO's A_t - p (GAGPO's
other variants subtract it after normalising, as below). Where the statistics
are over trajectories (GRPO and GiGPO's episode term under ``"trajectory"``, RLOO), the rows
hold no value of their own to normalise, so p is subtracted from the row's episode term after
normalisation (dividing it by a std of penalty-free returns, which is 0 when all returns are
equal, would blow it up).

Adding an estimator is one function::

    @register_estimator("my_method")
    def my_method(steps: Steps, opts: Options) -> np.ndarray:
        return steps.returns(opts.gamma) - ...   # one value per row, in ``steps`` order

Everything is vectorised with numpy: segment statistics use ``np.bincount``, and the two
backward recursions (G_t and GAE) loop over the horizon (the longest episode, 15 or 50 steps),
each iteration updating every trajectory at once; there is no loop over rows or trajectories.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np

__all__ = [
    "DEFAULT_EPISODE_STATS",
    "DEFAULT_EPSILON",
    "DEFAULT_GAGPO_VARIANT",
    "DEFAULT_GAMMA",
    "DEFAULT_LAM",
    "DEFAULT_NORM",
    "DEFAULT_OMEGA",
    "DEFAULT_PENALTY_TARGET",
    "ESTIMATORS",
    "EPISODE_STATS",
    "GAGPO_VARIANTS",
    "GagpoVariant",
    "PREVIOUS_GAGPO_VARIANT",
    "NORMS",
    "Options",
    "PENALTY_TARGETS",
    "Steps",
    "compute_advantages",
    "register_estimator",
    "resolved_lam_norm",
    "state_groups",
]

DEFAULT_GAMMA = 0.95
"""Discount of G_t (verl-agent's GiGPO default)."""
DEFAULT_LAM = 0.95
"""GAE lambda of GAGPO. The paper's value is not known; 0.95 (PPO's usual value) sits between
its two reported-worse extremes, lam = 1 (G_t - V(s_t)) and lam = 0 (delta_t alone)."""
DEFAULT_EPSILON = 1e-6
"""Added to the standard deviation in ``"mean_std"`` normalisation."""

DEFAULT_OMEGA = 1.0
"""GiGPO's weight of the step-level advantage: A = A_E + omega * A_S."""

Norm = Literal["mean_std", "mean", "none"]
NORMS: tuple[str, ...] = ("mean_std", "mean", "none")
DEFAULT_NORM: Norm = "mean_std"
EpisodeStats = Literal["trajectory", "rows"]
EPISODE_STATS: tuple[str, ...] = ("trajectory", "rows")
"""Statistics of the episode-level term: over the group's trajectories (one value each, as the
GiGPO paper writes it) or over its step rows (as verl-agent computes it)."""
DEFAULT_EPISODE_STATS: EpisodeStats = "trajectory"
PENALTY_TARGETS: tuple[str, ...] = ("step", "return")
"""Where a trainer charges the invalid-action penalty: to the offending step alone (passed as
``penalty``; verl-agent's choice) or folded into r_t, and so into every earlier step's return
and the episode return (see the module docstring)."""
DEFAULT_PENALTY_TARGET = "step"


@dataclass(frozen=True)
class GagpoVariant:
    """One reading of GAGPO: which grouped value V(s) its TD errors use, what a row whose state
    nobody else visited gets, where the invalid-action penalty enters, and an optional episode
    term. ``docs/algorithms.md`` gives the formulas and the ground-truth study behind the
    default."""

    value: Literal["group", "others"] = "group"
    """V(s_t): the mean G over the group's rows in s_t (``"group"``, the row itself included:
    the paper's proxy), or over the rows of the group's other trajectories in s_t
    (``"others"``, leave-one-out: a row's baseline never holds its own outcome)."""
    unshared: Literal["own", "ancestor"] = "own"
    """A row in a state that no other trajectory of its group visited. ``"own"``: V is the
    mean of its own trajectory's G there (its own G_t when visited once), so its TD error is 0
    and, after a rollout leaves the shared states, nothing it does gets outcome credit (the
    literal reading). ``"ancestor"``: the value of the trajectory's last state that another
    trajectory visited (its first state at least), carried forward by
    V_t = (V_{t-1} - r_{t-1}) / gamma, so such rows get their outcome against the value of
    the state where the rollout left the others."""
    bootstrap_unshared: bool = False
    """With ``"ancestor"``: whether GAE still bootstraps (lambda < 1) into a row with no value
    of its own. False: lambda = 1 there (the carried value is a guess, not an estimate), so
    A_t = G_t - V_t along such a run."""
    penalty: Literal["in_norm", "after_norm"] = "in_norm"
    """Where a row's penalty p enters: ``"in_norm"``, normalise(A - p) (the literal reading:
    in a group whose returns are all equal the penalty is the only spread, and normalising
    blows it up to unit size); ``"after_norm"``, normalise(A) - p, as GRPO's trajectory path."""
    episode_weight: float = 0.0
    """Weight of GRPO's episode term normalise(R) added to every row (0: none, the paper)."""
    min_others: int = 1
    """With ``"ancestor"``: how many other trajectories of the group must have visited a state
    for its grouped value to count (fewer: the carried value is used). 1: any."""
    carry: Literal["td", "flat"] = "td"
    """With ``"ancestor"``: how the value is carried into rows without one. ``"td"``:
    V_t = (V_{t-1} - r_{t-1}) / gamma (consistent with the TD relation: an on-track rollout);
    ``"flat"``: V_t = V_{t-1} - r_{t-1} (no growth along a path that left the others)."""
    lam: float | None = None
    """The variant's GAE lambda where the caller gives none (None: :data:`DEFAULT_LAM`)."""
    norm: Norm | None = None
    """The variant's normalisation where the caller gives none (None: :data:`DEFAULT_NORM`)."""


GAGPO_VARIANTS: dict[str, GagpoVariant] = {
    "paper": GagpoVariant(),
    "penalty-after": GagpoVariant(penalty="after_norm"),
    "episode": GagpoVariant(penalty="after_norm", episode_weight=1.0),
    "ancestor": GagpoVariant(unshared="ancestor", penalty="after_norm"),
    "ancestor-td": GagpoVariant(unshared="ancestor", bootstrap_unshared=True,
                                penalty="after_norm", lam=0.5, norm="mean"),
    "others": GagpoVariant(value="others", unshared="ancestor", penalty="after_norm"),
    "ancestor-flat": GagpoVariant(unshared="ancestor", bootstrap_unshared=True, carry="flat",
                                  penalty="after_norm", lam=0.5, norm="mean"),
    "shared-2": GagpoVariant(unshared="ancestor", bootstrap_unshared=True, min_others=2,
                             penalty="after_norm", lam=0.5, norm="mean"),
    "shared-2-flat": GagpoVariant(unshared="ancestor", bootstrap_unshared=True, min_others=2,
                                  carry="flat", penalty="after_norm", lam=0.5, norm="mean"),
}
"""GAGPO's named variants (``--gagpo-variant``). ``"paper"`` is the literal reading of the
paper's abstract; the others change one or two of :class:`GagpoVariant`'s knobs each."""
DEFAULT_GAGPO_VARIANT = "shared-2-flat"
"""Chosen on ground truth (``benchmarks/credit_truth.py``): of every variant at lambda
0.35-0.95 and both normalisations, the best mean over five MDP shapes of the correlation with
the exact true advantages and the exact one-step policy gain, pooled and within each task, on
draws the reported tables do not use; its lambda (0.5) and normalisation (``"mean"``) came
with it. Until 2026-12 the default was ``"ancestor-td"`` (:data:`PREVIOUS_GAGPO_VARIANT`),
chosen the same way on three shapes and pooled figures."""
PREVIOUS_GAGPO_VARIANT = "ancestor-td"
"""The default before the second ground-truth study (``make demo``'s record ran it)."""


@dataclass(frozen=True)
class Options:
    """The estimators' hyper-parameters (see :func:`compute_advantages`)."""

    gamma: float = DEFAULT_GAMMA
    lam: float = DEFAULT_LAM
    norm: Norm = DEFAULT_NORM
    omega: float = DEFAULT_OMEGA
    epsilon: float = DEFAULT_EPSILON
    episode_stats: EpisodeStats = DEFAULT_EPISODE_STATS
    gagpo_variant: str = DEFAULT_GAGPO_VARIANT


# ---------------------------------------------------------------------------------------------
# Segment operations: statistics of x per id, and the backward recursion y_t = x_t + c y_{t+1}.


def segment_mean(x: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Mean of ``x`` over the rows of each id 0..max(ids) (ids with no rows get 0)."""
    return np.bincount(ids, weights=x) / np.maximum(np.bincount(ids), 1)


def normalise(x: np.ndarray, ids: np.ndarray, norm: str, epsilon: float) -> np.ndarray:
    """``x`` normalised within each id: (x - mean) / (std + epsilon), x - mean, or x.

    std has ddof = 1; a segment of one value normalises to 0 (its deviation is 0).
    """
    if norm == "none":
        return x.astype(np.float64, copy=True)
    counts = np.bincount(ids)
    dev = x - segment_mean(x, ids)[ids]
    if norm == "mean":
        return dev
    var = np.bincount(ids, weights=dev * dev) / np.maximum(counts - 1, 1)
    return dev / (np.sqrt(var)[ids] + epsilon)


def _uniform_array(values: Any) -> np.ndarray | None:
    """``values`` as a 1-d array of numbers or of one string type, or None when numpy would
    change which values are equal (``[1, "1"]`` becomes two equal strings) or cannot hold them
    (tuples of different lengths)."""
    if isinstance(values, np.ndarray):
        arr = values
    else:
        try:
            arr = np.asarray(values)
        except ValueError:  # ragged: tuples of different lengths
            return None
    if arr.ndim != 1:
        return None
    if arr.dtype.kind in "biuf":  # numbers compare as Python compares them
        return arr
    if arr.dtype.kind in "US":  # strings: only when every value was one (no coerced numbers)
        kind, nul = (str, "\0") if arr.dtype.kind == "U" else (bytes, b"\0")
        # numpy drops trailing NULs: "a" and "a\0" would become one id.
        if isinstance(values, np.ndarray) or all(
            isinstance(v, kind) and not v.endswith(nul) for v in values
        ):
            return arr
    return None


def _factorise(values: Any, what: str) -> np.ndarray:
    """Integer ids 0..k-1 for the distinct values: equal ids for values Python finds equal.

    Numbers, or strings all of one type, go through numpy's unique (fast); anything else
    (tuples, mixed types) is hashed.
    """
    arr = _uniform_array(values)
    if arr is not None:
        return np.unique(arr, return_inverse=True)[1].reshape(-1)
    seen: dict[Any, int] = {}
    try:
        return np.fromiter((seen.setdefault(v, len(seen)) for v in values), np.int64)
    except TypeError as e:
        raise ValueError(f"{what} must hold hashable values: {e}") from None


def _pair_ids(group_ids: np.ndarray, key_ids: np.ndarray) -> np.ndarray:
    """Step-group ids 0..k-1: one per (group, key) pair that occurs."""
    pair = group_ids.astype(np.int64) * (int(key_ids.max(initial=-1)) + 1) + key_ids
    return np.unique(pair, return_inverse=True)[1].reshape(-1)


# ---------------------------------------------------------------------------------------------
# The step table, validated, sorted by (trajectory, step) and with integer ids.


class Steps:
    """The rows sorted by (trajectory, step), with dense integer ids; what estimators read.

    Attributes (arrays over the sorted rows unless said otherwise):
        order: position of each sorted row in the caller's arrays.
        reward: r_t.
        group: group id 0..n_groups-1.
        traj: trajectory id 0..n_traj-1; the rows of a trajectory are contiguous, in step order.
        state: step-group id 0..n_states-1 (same group and same key).
        penalty: the amount charged to the row alone (0 where none; see the module docstring).
        value: a learned critic's V(s_t) (None when the caller gave none; PPO needs it).
        last: whether the row is its trajectory's last step.
        steps_left: number of steps after this one in its trajectory (0 on the last step).
        position: number of steps before this one in its trajectory (0 on the first step).
        traj_group: group id of each trajectory (over trajectories).
    """

    def __init__(self, *, group: Any, trajectory: Any, step: Any, key: Any, reward: Any,
                 penalty: Any = None, value: Any = None) -> None:
        columns = {"group": group, "trajectory": trajectory, "step": step, "key": key,
                   "reward": reward}
        lengths = {name: len(col) for name, col in columns.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"group, trajectory, step, key and reward must have equal lengths, "
                             f"got {lengths}")
        n = lengths["reward"]
        step_arr = np.asarray(step)
        if step_arr.ndim != 1 or (n and step_arr.dtype.kind not in "iu"):
            raise ValueError(f"step must be a 1-d array of integers, got dtype {step_arr.dtype}")
        reward_arr = np.asarray(reward, dtype=np.float64)
        if reward_arr.ndim != 1 or not np.isfinite(reward_arr).all():
            raise ValueError("reward must be a 1-d array of finite numbers")
        penalty_arr = np.zeros(n) if penalty is None else np.asarray(penalty, dtype=np.float64)
        if penalty_arr.shape != (n,) or not np.isfinite(penalty_arr).all():
            raise ValueError(f"penalty must be None or a 1-d array of {n} finite numbers (one "
                             f"per row), got shape {penalty_arr.shape}")
        value_arr = None if value is None else np.asarray(value, dtype=np.float64)
        if value_arr is not None and (value_arr.shape != (n,) or not np.isfinite(value_arr).all()):
            raise ValueError(f"value must be None or a 1-d array of {n} finite numbers (one "
                             f"per row), got shape {value_arr.shape}")
        traj_raw = _factorise(trajectory, "trajectory")
        group_raw = _factorise(group, "group")
        key_raw = _factorise(key, "key")

        self.order = np.lexsort((step_arr, traj_raw))
        traj_sorted, step_sorted = traj_raw[self.order], step_arr[self.order]
        new_traj = np.r_[True, traj_sorted[1:] != traj_sorted[:-1]] if n else np.zeros(0, bool)
        dup = ~new_traj[1:] & (step_sorted[1:] == step_sorted[:-1])
        if dup.any():
            i = self.order[np.flatnonzero(dup)[0] + 1]
            raise ValueError(f"duplicate (trajectory, step): {trajectory[i]!r}, {step[i]!r} "
                             "appears more than once")

        self.n = n
        self.reward = reward_arr[self.order]
        self.penalty = penalty_arr[self.order]
        self.value = None if value_arr is None else value_arr[self.order]
        self.traj = np.cumsum(new_traj) - 1
        self.group = group_raw[self.order]
        self.n_traj = int(self.traj[-1]) + 1 if n else 0
        starts = np.flatnonzero(new_traj)
        self.traj_group = self.group[starts]
        if (self.group != self.traj_group[self.traj]).any():
            bad = self.order[np.flatnonzero(self.group != self.traj_group[self.traj])[0]]
            raise ValueError(f"trajectory {trajectory[bad]!r} has rows in more than one group")
        self.last = np.r_[new_traj[1:], True] if n else np.zeros(0, bool)
        ends = np.r_[starts[1:], n] - 1  # index of each trajectory's last row
        self.steps_left = ends[self.traj] - np.arange(n)
        self.position = np.arange(n) - starts[self.traj] if n else np.zeros(0, np.int64)
        self.state = _pair_ids(group_raw, key_raw)[self.order]

    # -- per-row quantities every estimator may need ----------------------------------------

    def returns(self, gamma: float) -> np.ndarray:
        """G_t = r_t + gamma * G_{t+1} (G = 0 after the last step)."""
        return self.backward(self.reward, gamma)

    @cached_property
    def episode_return(self) -> np.ndarray:
        """R = sum_t r_t of each trajectory (over trajectories)."""
        return np.bincount(self.traj, weights=self.reward, minlength=self.n_traj)

    @cached_property
    def state_traj(self) -> np.ndarray:
        """Dense id of each row's (step group, trajectory) pair: a trajectory's visits to a
        state."""
        return np.unique(self.state.astype(np.int64) * self.n_traj + self.traj,
                         return_inverse=True)[1].reshape(-1)

    @cached_property
    def others_count(self) -> np.ndarray:
        """Number of the group's other trajectories that visited each row's state."""
        pair = self.state_traj
        state_of_pair = np.zeros(pair.max(initial=-1) + 1, np.int64)
        state_of_pair[pair] = self.state
        trajectories = np.bincount(state_of_pair, minlength=self.state.max(initial=-1) + 1)
        return trajectories[self.state] - 1

    @cached_property
    def state_size(self) -> np.ndarray:
        """Number of rows in each row's step group."""
        return np.bincount(self.state)[self.state]

    def state_value(self, gamma: float) -> np.ndarray:
        """GAGPO's grouped value proxy V(s_t): mean G_t over the rows of the row's step group."""
        return segment_mean(self.returns(gamma), self.state)[self.state]

    def backward(self, x: np.ndarray, c: float | np.ndarray) -> np.ndarray:
        """y_t = x_t + c_t * y_{t+1} within each trajectory, y = 0 after its last step
        (``c`` one number, or one per row).

        Loops over the horizon, not over rows: pass k updates every row with k steps left at
        once, reading the row after it (already done in pass k - 1).
        """
        y = np.zeros(self.n)
        c = np.broadcast_to(np.asarray(c, dtype=np.float64), (self.n,))
        rows_by_steps_left = np.argsort(self.steps_left, kind="stable")
        bounds = np.cumsum(np.bincount(self.steps_left))[:-1]
        for k, rows in enumerate(np.split(rows_by_steps_left, bounds)):
            y[rows] = x[rows] if k == 0 else x[rows] + c[rows] * y[rows + 1]
        return y

    def forward(self, x: np.ndarray, keep: np.ndarray, gamma: float) -> np.ndarray:
        """y_t = x_t where ``keep``, else (y_{t-1} - r_{t-1}) / gamma: a value carried forward
        along the trajectory from its last kept row, consistent with the TD relation
        V(s_{t-1}) = r_{t-1} + gamma * V(s_t) (at gamma = 0, y_{t-1} itself). A trajectory's
        first row is always kept.

        Loops over the horizon like :meth:`backward`, pass k updating every k-th row at once.
        """
        y = np.asarray(x, dtype=np.float64).copy()
        rows_by_position = np.argsort(self.position, kind="stable")
        bounds = np.cumsum(np.bincount(self.position))[:-1]
        for k, rows in enumerate(np.split(rows_by_position, bounds)):
            if k:
                carry = rows[~keep[rows]]
                y[carry] = (y[carry - 1] - self.reward[carry - 1]) / gamma if gamma else \
                    y[carry - 1]  # gamma = 0: no relation to invert; the value stays
        return y

    def unsort(self, x: np.ndarray) -> np.ndarray:
        """Values over the sorted rows, put back in the caller's row order."""
        out = np.empty_like(x)
        out[self.order] = x
        return out


# ---------------------------------------------------------------------------------------------
# The estimators: one function each, registered by name.

Estimator = Callable[[Steps, Options], np.ndarray]
ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(name: str) -> Callable[[Estimator], Estimator]:
    """Decorator: make ``fn(steps, opts) -> advantages over steps' rows`` a method by name."""

    def decorate(fn: Estimator) -> Estimator:
        if name in ESTIMATORS:
            raise ValueError(f"an estimator named {name!r} is already registered")
        ESTIMATORS[name] = fn
        return fn

    return decorate


def episode_advantage(steps: Steps, opts: Options) -> np.ndarray:
    """normalise(R) over the group's trajectories (or step rows), broadcast to every row; a
    row's penalty lowers its own value (see the module docstring)."""
    R = steps.episode_return
    if opts.episode_stats == "rows":  # verl-agent: one score per step row, R - p
        return normalise(R[steps.traj] - steps.penalty, steps.group, opts.norm, opts.epsilon)
    return normalise(R, steps.traj_group, opts.norm, opts.epsilon)[steps.traj] - steps.penalty


@register_estimator("grpo")
def grpo(steps: Steps, opts: Options) -> np.ndarray:
    """A_i = normalise(R_i) within the group, the same for every step of episode i."""
    return episode_advantage(steps, opts)


@register_estimator("rloo")
def rloo(steps: Steps, opts: Options) -> np.ndarray:
    """A_i = R_i - mean_{j != i} R_j = (n R_i - sum_j R_j) / (n - 1); 0 for a group of one."""
    R, g = steps.episode_return, steps.traj_group
    n = np.bincount(g)[g]
    total = np.bincount(g, weights=R)[g]
    A = np.where(n > 1, (n * R - total) / np.maximum(n - 1, 1), 0.0)
    return A[steps.traj] - steps.penalty


@register_estimator("gigpo")
def gigpo(steps: Steps, opts: Options) -> np.ndarray:
    """A = A_E + omega * A_S; A_S = normalise(G_t) in the step group, 0 for a group of one."""
    A_E = episode_advantage(steps, opts)
    G = steps.returns(opts.gamma) - steps.penalty
    A_S = normalise(G, steps.state, opts.norm, opts.epsilon)
    A_S = np.where(steps.state_size > 1, A_S, 0.0)
    return A_E + opts.omega * A_S


def gae(steps: Steps, V: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    """Generalised advantage estimation on values ``V`` (over the sorted rows):
    delta_t = r_t + gamma * V_{t+1} - V_t with V = 0 after a trajectory's last step, and
    A_t = delta_t + gamma * lam * A_{t+1}."""
    V_next = np.where(steps.last, 0.0, np.roll(V, -1))  # the next row is s_{t+1}
    delta = steps.reward + gamma * V_next - V
    return steps.backward(delta, gamma * lam)


def others_value(steps: Steps, G: np.ndarray) -> np.ndarray:
    """Leave-one-out grouped value: mean G_t over the rows of the group's *other* trajectories
    in the row's state (0 where none)."""
    pair = steps.state_traj
    total, count = np.bincount(steps.state, weights=G)[steps.state], steps.state_size
    own_total = np.bincount(pair, weights=G)[pair]
    others = count - np.bincount(pair)[pair]
    return (total - own_total) / np.maximum(others, 1)


@register_estimator("gagpo")
def gagpo(steps: Steps, opts: Options) -> np.ndarray:
    """GAE on a grouped value of the states, normalised over the group's rows; the variant
    (:data:`GAGPO_VARIANTS`) says which value, where rows with no shared state get theirs, where
    the penalty enters and whether an episode term is added (see :class:`GagpoVariant`)."""
    v = GAGPO_VARIANTS[opts.gagpo_variant]
    G = steps.returns(opts.gamma)
    seen_by_others = steps.others_count >= v.min_others
    if v.value == "group":
        V = segment_mean(G, steps.state)[steps.state]
    else:
        V = np.where(seen_by_others, others_value(steps, G), G)
    if v.unshared == "own":  # V = G_t where no other row (trajectory) has the state: no credit
        lam = np.full(steps.n, opts.lam)
    else:
        # Only another trajectory's visit gives a state a value of its own (a revisit by the
        # row's own trajectory, after an invalid action say, holds only its own outcome). The
        # first state is shared by the whole group: back-offs start from it.
        has_value = seen_by_others | (steps.position == 0)
        V = steps.forward(V, has_value, opts.gamma if v.carry == "td" else 1.0)
        # Into a row with no value of its own, bootstrap nothing: lambda = 1 there.
        lam = np.where(np.r_[has_value[1:], True] | steps.last, opts.lam,
                       opts.lam if v.bootstrap_unshared else 1.0)
    V_next = np.where(steps.last, 0.0, np.roll(V, -1))
    A = steps.backward(steps.reward + opts.gamma * V_next - V, opts.gamma * lam)
    if v.penalty == "in_norm":
        A = normalise(A - steps.penalty, steps.group, opts.norm, opts.epsilon)
    else:
        A = normalise(A, steps.group, opts.norm, opts.epsilon) - steps.penalty
    if v.episode_weight:
        R = normalise(steps.episode_return, steps.traj_group, opts.norm, opts.epsilon)
        A = A + v.episode_weight * R[steps.traj]
    return A


@register_estimator("ppo")
def ppo(steps: Steps, opts: Options) -> np.ndarray:
    """GAE on a learned critic's V(s_t), normalised over the whole batch."""
    if steps.value is None:
        raise ValueError("ppo needs value: a learned critic's V(s_t), one per row")
    A = gae(steps, steps.value, opts.gamma, opts.lam) - steps.penalty
    return normalise(A, np.zeros(steps.n, np.int64), opts.norm, opts.epsilon)


# ---------------------------------------------------------------------------------------------
# The public entry points.


def resolved_lam_norm(method: str, gagpo_variant: str, lam: float | None,
                      norm: str | None) -> tuple[float, str]:
    """The lambda and normalisation a call uses: the caller's, else GAGPO's variant's own (for
    ``method == "gagpo"``), else :data:`DEFAULT_LAM` and :data:`DEFAULT_NORM`."""
    variant = GAGPO_VARIANTS[gagpo_variant] if method == "gagpo" else GagpoVariant()
    if lam is None:
        lam = DEFAULT_LAM if variant.lam is None else variant.lam
    if norm is None:
        norm = DEFAULT_NORM if variant.norm is None else variant.norm
    return lam, norm


def compute_advantages(
    method: str,
    *,
    group: Sequence[Any] | np.ndarray,
    trajectory: Sequence[Any] | np.ndarray,
    step: Sequence[int] | np.ndarray,
    key: Sequence[Any] | np.ndarray,
    reward: Sequence[float] | np.ndarray,
    gamma: float = DEFAULT_GAMMA,
    lam: float | None = None,
    norm: Norm | None = None,
    omega: float = DEFAULT_OMEGA,
    epsilon: float = DEFAULT_EPSILON,
    episode_stats: EpisodeStats = DEFAULT_EPISODE_STATS,
    gagpo_variant: str = DEFAULT_GAGPO_VARIANT,
    penalty: Sequence[float] | np.ndarray | None = None,
    value: Sequence[float] | np.ndarray | None = None,
    return_details: bool = False,
) -> np.ndarray | tuple[np.ndarray, dict[str, Any]]:
    """One advantage per step row, for ``method`` in :data:`ESTIMATORS`.

    Args:
        method: ``"gagpo"``, ``"gigpo"``, ``"grpo"``, ``"rloo"`` or a registered name.
        group, trajectory, step, key, reward: the step table, one entry per row (equal
            lengths, rows in any order; ``(trajectory, step)`` unique). ``group``,
            ``trajectory`` and ``key`` hold ids of any hashable type, mixed types and tuples
            of different lengths included; ids are equal when Python finds them equal (``1``
            and ``"1"`` are two ids).
        gamma: discount of G_t (and of GAGPO's TD residual).
        lam: GAE lambda of GAGPO and PPO (None: the GAGPO variant's own, else
            :data:`DEFAULT_LAM`).
        norm: group normalisation, ``"mean_std"``, ``"mean"`` or ``"none"`` (not used by RLOO;
            None: the GAGPO variant's own, else :data:`DEFAULT_NORM`).
        omega: weight of GiGPO's step advantage.
        epsilon: added to the std in ``"mean_std"``.
        episode_stats: episode-level statistics over ``"trajectory"`` (one value each) or over
            the group's step ``"rows"`` (verl-agent's GiGPO and GRPO code).
        gagpo_variant: which reading of GAGPO, a name in :data:`GAGPO_VARIANTS`.
        penalty: per-row amounts charged to that row alone (the ``"step"`` target of
            :data:`PENALTY_TARGETS`); None: none. Not part of ``reward``, G_t or R.
        value: per-row V(s_t) of a learned critic; ``"ppo"`` needs it, the others ignore it.
        return_details: also return a dict of what trainers log (see below).

    Returns:
        ``advantages`` (float64, the caller's row order), or ``(advantages, details)`` with
        ``details``: ``"returns"`` G_t per row, ``"value"`` V(s_t) per row (GAGPO's grouped
        value proxy, computed whatever the method), ``"state_group_size"`` per row,
        ``"shared_fraction"``, the share of rows whose step group has more than one row,
        ``"met_fraction"``, the share of rows in a state another trajectory of the group
        visited (a revisit by the row's own trajectory does not count), and,
        when ``value`` is given, ``"value_target"``: the critic's regression target, the
        lambda-return GAE(V) + V per row (no penalty, no normalisation).

    Raises:
        ValueError: unknown method, norm or episode_stats; unequal lengths; duplicate
            ``(trajectory, step)``; a trajectory spread over several groups; bad dtypes;
            unhashable ids; a penalty of the wrong length or not finite.
    """
    if method not in ESTIMATORS:
        raise ValueError(f"unknown method {method!r}; known: {sorted(ESTIMATORS)}")
    if gagpo_variant not in GAGPO_VARIANTS:
        raise ValueError(f"unknown gagpo_variant {gagpo_variant!r}; known: "
                         f"{sorted(GAGPO_VARIANTS)}")
    lam, norm = resolved_lam_norm(method, gagpo_variant, lam, norm)
    if norm not in NORMS:
        raise ValueError(f"unknown norm {norm!r}; known: {list(NORMS)}")
    if episode_stats not in EPISODE_STATS:
        raise ValueError(f"unknown episode_stats {episode_stats!r}; known: {list(EPISODE_STATS)}")
    steps = Steps(group=group, trajectory=trajectory, step=step, key=key, reward=reward,
                  penalty=penalty, value=value)
    opts = Options(gamma=gamma, lam=lam, norm=norm, omega=omega, epsilon=epsilon,
                   episode_stats=episode_stats, gagpo_variant=gagpo_variant)
    advantages = steps.unsort(np.asarray(ESTIMATORS[method](steps, opts), dtype=np.float64))
    if not return_details:
        return advantages
    details = {
        "returns": steps.unsort(steps.returns(gamma)),
        "value": steps.unsort(steps.state_value(gamma)),
        "state_group_size": steps.unsort(steps.state_size),
        "shared_fraction": float((steps.state_size > 1).mean()) if steps.n else 0.0,
        "met_fraction": float((steps.others_count > 0).mean()) if steps.n else 0.0,
    }
    if steps.value is not None:
        details["value_target"] = steps.unsort(gae(steps, steps.value, gamma, lam) + steps.value)
    return advantages, details


def state_groups(
    group: Sequence[Any] | np.ndarray, key: Sequence[Any] | np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """Step groups of rows (same group, same key): ``(ids, sizes, shared_fraction)``.

    ``ids`` numbers the step groups 0..k-1 per row, ``sizes`` is each row's step-group size and
    ``shared_fraction`` the share of rows whose step group holds more than one row.
    """
    if len(group) != len(key):
        raise ValueError(f"group and key must have equal lengths, got {len(group)}, {len(key)}")
    ids = _pair_ids(_factorise(group, "group"), _factorise(key, "key"))
    sizes = np.bincount(ids)[ids] if len(ids) else np.zeros(0, np.int64)
    return ids, sizes, float((sizes > 1).mean()) if len(ids) else 0.0
