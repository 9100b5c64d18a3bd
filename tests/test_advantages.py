"""Advantage estimators (gagpo.advantages): hand-computed tables, invariances, a slow reference.

The expected numbers below were worked out by hand (arithmetic in the comments), not produced by
the code under test. Normalisation uses the unbiased std (ddof = 1) plus epsilon = 1e-6, hence
the relative tolerance.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest

from gagpo.advantages import (
    ESTIMATORS,
    GAGPO_VARIANTS,
    compute_advantages,
    register_estimator,
    state_groups,
)

RTOL, ATOL = 1e-5, 1e-6

# The hand table: 12 rows, two groups (keys are per group: "s0" of group 1 is not "s0" of 0).
#   group 0, traj 0: (s0, r=0) (s1, 0) (s2, 1)    R = 1   G (gamma 0.5) = [0.25, 0.5, 1]
#   group 0, traj 1: (s0, 0)   (s1, 0)            R = 0   G = [0, 0]
#   group 0, traj 2: (s0, 0)   (s3, 0) (s2, 1)    R = 1   G = [0.25, 0.5, 1]
#   group 1, traj 3: (s0, 0)   (s1, 2)            R = 2   G = [1, 2]
#   group 1, traj 4: (s0, 0)   (s2, 0)            R = 0   G = [0, 0]
TABLE = {
    "group":      [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1],
    "trajectory": [0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4],
    "step":       [0, 1, 2, 0, 1, 0, 1, 2, 0, 1, 0, 1],
    "key":  ["s0", "s1", "s2", "s0", "s1", "s0", "s3", "s2", "s0", "s1", "s0", "s2"],
    "reward":     [0, 0, 1, 0, 0, 0, 0, 1, 0, 2, 0, 0],
}
S2, S3 = math.sqrt(2), math.sqrt(3)


def critic(table: dict) -> dict:
    """A made-up critic's V(s_t) per row (any fixed numbers do): what ``ppo`` needs."""
    return {"value": [0.1 * (i % 5) - 0.2 for i in range(len(table["reward"]))]}


def adv(method: str, table: dict = TABLE, **kw) -> np.ndarray:
    """``method``'s advantages; GAGPO as the paper's literal reading at lambda 0.95 and
    mean_std unless the test names a variant (the hand tables below were written for it)."""
    if method == "ppo" and "value" not in kw:
        kw.update(critic(table))
    if method == "gagpo":
        kw.setdefault("gagpo_variant", "paper")
    return compute_advantages(method, **table, **kw)


def close(actual, expected) -> None:
    np.testing.assert_allclose(actual, np.asarray(expected, dtype=float), rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------------------------------------
# Each estimator on the hand table.


def test_grpo_hand_table():
    # group 0: R = [1, 0, 1], mean 2/3, var = (1/9 + 4/9 + 1/9) / 2 = 1/3, std = 1/sqrt(3)
    #   -> (1/3) * sqrt(3) = 1/sqrt(3); (-2/3) * sqrt(3) = -2/sqrt(3)
    # group 1: R = [2, 0], mean 1, var = (1 + 1) / 1 = 2 -> +-1/sqrt(2)
    a, b, c, d = 1 / S3, -2 / S3, 1 / S2, -1 / S2
    close(adv("grpo"), [a, a, a, b, b, a, a, a, c, c, d, d])
    # "mean": R - mean
    close(adv("grpo", norm="mean"), [1 / 3] * 3 + [-2 / 3] * 2 + [1 / 3] * 3 + [1, 1, -1, -1])
    close(adv("grpo", norm="none"), [1, 1, 1, 0, 0, 1, 1, 1, 2, 2, 0, 0])


def test_grpo_row_statistics_reproduce_reference_code():
    # episode_stats="rows": group 0 has 8 rows with R = 1,1,1,0,0,1,1,1 -> mean 6/8 = 0.75,
    # deviations 0.25 (x6), -0.75 (x2), sum of squares 6/16 + 2 * 9/16 = 1.5, var = 1.5 / 7
    std0 = math.sqrt(1.5 / 7)
    a, b = 0.25 / std0, -0.75 / std0
    # group 1: rows R = 2, 2, 0, 0 -> mean 1, sum of squares 4, var 4/3
    c = 1 / math.sqrt(4 / 3)
    close(adv("grpo", episode_stats="rows"), [a, a, a, b, b, a, a, a, c, c, -c, -c])
    close(adv("grpo", norm="mean", episode_stats="rows"),
          [0.25] * 3 + [-0.75] * 2 + [0.25] * 3 + [1, 1, -1, -1])


def test_rloo_hand_table():
    # group 0: 1 - (0+1)/2 = 0.5; 0 - (1+1)/2 = -1; 1 - (1+0)/2 = 0.5. group 1: 2 - 0, 0 - 2
    expected = [0.5] * 3 + [-1] * 2 + [0.5] * 3 + [2, 2, -2, -2]
    for norm in ("mean_std", "mean", "none"):  # RLOO ignores norm
        close(adv("rloo", norm=norm), expected)


def test_gigpo_hand_table_mean():
    # A_E (mean) = R - group mean: group 0 [1/3, -2/3, 1/3], group 1 [1, -1]
    # step groups, G with gamma 0.5 (mean of each, deviations):
    #   g0 s0: G [0.25, 0, 0.25], mean 1/6 -> [1/12, -1/6, 1/12]
    #   g0 s1: G [0.5, 0] -> [0.25, -0.25];   g0 s2: G [1, 1] -> [0, 0];  g0 s3: size 1 -> 0
    #   g1 s0: G [1, 0] -> [0.5, -0.5];       g1 s1, g1 s2: size 1 -> 0
    expected = [1 / 3 + 1 / 12, 1 / 3 + 0.25, 1 / 3,
                -2 / 3 - 1 / 6, -2 / 3 - 0.25,
                1 / 3 + 1 / 12, 1 / 3, 1 / 3,
                1 + 0.5, 1, -1 - 0.5, -1]
    close(adv("gigpo", norm="mean", gamma=0.5), expected)
    # omega scales only the step part
    omega_half = [1 / 3 + 1 / 24, 1 / 3 + 0.125, 1 / 3, -2 / 3 - 1 / 12, -2 / 3 - 0.125,
                  1 / 3 + 1 / 24, 1 / 3, 1 / 3, 1.25, 1, -1.25, -1]
    close(adv("gigpo", norm="mean", gamma=0.5, omega=0.5), omega_half)


def test_gigpo_hand_table_mean_std():
    # A_E: as GRPO, [1/sqrt3, -2/sqrt3, 1/sqrt3] and [1/sqrt2, -1/sqrt2]
    # A_S: g0 s0 deviations [1/12, -1/6, 1/12], var (1/144 + 4/144 + 1/144) / 2 = 1/48,
    #      std = 1/sqrt(48) -> [1/sqrt3, -2/sqrt3, 1/sqrt3];
    #      g0 s1 deviations +-0.25, var 0.125 -> +-1/sqrt2; g0 s2: zero spread -> 0
    #      g1 s0 deviations +-0.5, var 0.5 -> +-1/sqrt2
    e0, e1, e2 = 1 / S3, -2 / S3, 1 / S3
    f, h = 1 / S2, -1 / S2
    expected = [e0 + 1 / S3, e0 + 1 / S2, e0,
                e1 - 2 / S3, e1 - 1 / S2,
                e2 + 1 / S3, e2, e2,
                f + 1 / S2, f, h - 1 / S2, h]
    close(adv("gigpo", gamma=0.5), expected)


def test_gigpo_singleton_step_group_is_zero_even_without_norm():
    # norm "none": A = R + G_t in shared step groups, R alone in size-1 ones.
    # traj 2 step 1 (g0 s3) and traj 3 step 1 / traj 4 step 1 (g1 s1, s2) are singletons.
    expected = [1 + 0.25, 1 + 0.5, 1 + 1, 0 + 0, 0 + 0, 1 + 0.25, 1, 1 + 1, 2 + 1, 2, 0 + 0, 0]
    close(adv("gigpo", norm="none", gamma=0.5), expected)


# GAGPO on the hand table, gamma = 0.5:
#   V: g0 s0 = mean(0.25, 0, 0.25) = 1/6, g0 s1 = mean(0.5, 0) = 0.25, g0 s2 = 1, g0 s3 = 0.5
#      g1 s0 = mean(1, 0) = 0.5, g1 s1 = 2, g1 s2 = 0
#   delta_t = r_t + 0.5 V(s_{t+1}) - V(s_t):
#      traj 0: 0.125 - 1/6 = -1/24, 0.5 - 0.25 = 0.25, 1 - 1 = 0
#      traj 1: -1/24, 0 - 0.25 = -0.25
#      traj 2: 0.25 - 1/6 = 1/12, 0.5 - 0.5 = 0, 1 - 1 = 0
#      traj 3: 1 - 0.5 = 0.5, 2 - 2 = 0;   traj 4: 0 - 0.5 = -0.5, 0 - 0 = 0
DELTA = [-1 / 24, 0.25, 0, -1 / 24, -0.25, 1 / 12, 0, 0, 0.5, 0, -0.5, 0]
# G_t - V(s_t): traj 0: 0.25 - 1/6 = 1/12, 0.5 - 0.25, 0; traj 1: -1/6, -0.25;
#   traj 2: 1/12, 0, 0; traj 3: 0.5, 0; traj 4: -0.5, 0
G_MINUS_V = [1 / 12, 0.25, 0, -1 / 6, -0.25, 1 / 12, 0, 0, 0.5, 0, -0.5, 0]


def test_gagpo_hand_table_gae():
    # lam = 0.5, gamma * lam = 0.25, A_t = delta_t + 0.25 A_{t+1}:
    #   traj 0: A2 = 0, A1 = 0.25, A0 = -1/24 + 1/16 = 1/48
    #   traj 1: A1 = -0.25, A0 = -1/24 - 1/16 = -5/48;  traj 2: [1/12, 0, 0]
    #   traj 3: [0.5, 0];  traj 4: [-0.5, 0]
    raw = [1 / 48, 0.25, 0, -5 / 48, -0.25, 1 / 12, 0, 0, 0.5, 0, -0.5, 0]
    close(adv("gagpo", gamma=0.5, lam=0.5, norm="none"), raw)
    # both groups' raw values have mean 0 (group 0 in 48ths: 1+12-5-12+4 = 0)
    close(adv("gagpo", gamma=0.5, lam=0.5, norm="mean"), raw)
    # mean_std: group 0 in 48ths [1, 12, 0, -5, -12, 4, 0, 0], sum of squares 330,
    #   var = 330 / 7 / 48^2 -> x / std = n48 / sqrt(330 / 7)
    #   group 1 [0.5, 0, -0.5, 0], var = 0.5 / 3 -> 0.5 / sqrt(1/6) = sqrt(6) / 2
    g0 = np.array([1, 12, 0, -5, -12, 4, 0, 0]) / math.sqrt(330 / 7)
    r6 = math.sqrt(6) / 2
    close(adv("gagpo", gamma=0.5, lam=0.5), [*g0, r6, 0, -r6, 0])


def test_gagpo_lambda_one_is_return_minus_value():
    close(adv("gagpo", gamma=0.5, lam=1.0, norm="none"), G_MINUS_V)


def test_gagpo_lambda_zero_is_td_residual():
    close(adv("gagpo", gamma=0.5, lam=0.0, norm="none"), DELTA)


def test_gagpo_value_of_initial_state_is_group_mean_return():
    # gamma = 1: G_0 = R, so V(s_0) = mean R = 2/3 (group 0) and 1 (group 1); at t = 0, with
    # lam = 1, A_0 = R - mean R: GRPO's "mean" advantage.
    _, details = adv("gagpo", gamma=1.0, return_details=True)
    v0 = details["value"][np.asarray(TABLE["step"]) == 0]
    close(v0, [2 / 3, 2 / 3, 2 / 3, 1, 1])
    a = adv("gagpo", gamma=1.0, lam=1.0, norm="none")
    close(a[np.asarray(TABLE["step"]) == 0], [1 / 3, -2 / 3, 1 / 3, 1, -1])
    # gamma = 0.5: V(s_0) is the group mean of G_0: (0.25 + 0 + 0.25) / 3 = 1/6 and 1/2
    _, details = adv("gagpo", gamma=0.5, return_details=True)
    close(details["value"][np.asarray(TABLE["step"]) == 0], [1 / 6] * 3 + [0.5] * 2)


def test_gagpo_singleton_chains_give_zero():
    # every key seen once: V(s_t) = G_t, so delta_t = r_t + gamma G_{t+1} - G_t = 0 everywhere
    table = {"group": [0] * 5, "trajectory": [0, 0, 0, 1, 1], "step": [0, 1, 2, 0, 1],
             "key": ["a", "b", "c", "d", "e"], "reward": [0.3, -1, 2, 5, 1]}
    for lam in (0.0, 0.5, 1.0):
        close(adv("gagpo", table, lam=lam, norm="none"), [0] * 5)
        close(adv("gagpo", table, lam=lam), [0] * 5)


def test_details_state_groups_and_values():
    # step groups: g0 s0 (3 rows), s1 (2), s2 (2), s3 (1); g1 s0 (2), s1 (1), s2 (1)
    sizes = [3, 2, 2, 3, 2, 3, 1, 2, 2, 1, 2, 1]
    _, details = adv("grpo", gamma=0.5, return_details=True)
    close(details["state_group_size"], sizes)
    assert details["shared_fraction"] == pytest.approx(9 / 12)
    close(details["returns"], [0.25, 0.5, 1, 0, 0, 0.25, 0.5, 1, 1, 2, 0, 0])
    close(details["value"], [1 / 6, 0.25, 1, 1 / 6, 0.25, 1 / 6, 0.5, 1, 0.5, 2, 0.5, 0])
    ids, sizes2, shared = state_groups(TABLE["group"], TABLE["key"])
    close(sizes2, sizes)
    assert shared == pytest.approx(0.75)
    assert ids[0] == ids[3] == ids[5] and ids[0] != ids[8]  # "s0" of group 0 != "s0" of 1


def test_groups_of_one_trajectory_get_zero():
    table = {"group": [7, 7], "trajectory": ["a", "a"], "step": [0, 1], "key": ["x", "y"],
             "reward": [1.0, 3.0]}
    for method in ("grpo", "rloo"):
        close(adv(method, table), [0, 0])
    close(adv("grpo", table, norm="none"), [4, 4])


# ---------------------------------------------------------------------------------------------
# Invariances.


@pytest.mark.parametrize("method", ["gagpo", "gigpo", "grpo"])
def test_scale_invariance_under_mean_std(method):
    rng = np.random.default_rng(0)
    table = random_table(rng)
    scaled = {**table, "reward": list(np.asarray(table["reward"]) * 37.5)}
    np.testing.assert_allclose(adv(method, scaled), adv(method, table), atol=1e-4)


def test_rloo_is_linear_in_rewards():
    table = random_table(np.random.default_rng(1))
    scaled = {**table, "reward": list(np.asarray(table["reward"]) * 3.0)}
    np.testing.assert_allclose(adv("rloo", scaled), 3.0 * adv("rloo", table), atol=1e-9)


@pytest.mark.parametrize("method", sorted(["gagpo", "gigpo", "grpo", "rloo"]))
def test_row_order_invariance(method):
    rng = np.random.default_rng(2)
    table = random_table(rng)
    perm = rng.permutation(len(table["reward"]))
    permuted = {name: [col[i] for i in perm] for name, col in table.items()}
    np.testing.assert_allclose(adv(method, permuted), adv(method, table)[perm], atol=1e-12)


@pytest.mark.parametrize("method", ["gagpo", "gigpo", "ppo"])
def test_details_come_back_in_the_callers_row_order(method):
    """Every per-row detail is the row's own when rows are given shuffled: the hand table's G_t
    (gamma 0.5), grouped values and step-group sizes, written out, then permuted."""
    returns = [0.25, 0.5, 1, 0, 0, 0.25, 0.5, 1, 1, 2, 0, 0]
    # V(s) = mean G over the group's rows in s: group 0 s0 (0.25, 0, 0.25), s1 (0.5, 0),
    # s2 (1, 1), s3 0.5 alone; group 1 s0 (1, 0), s1 2, s2 0.
    value = [1 / 6, 0.25, 1, 1 / 6, 0.25, 1 / 6, 0.5, 1, 0.5, 2, 0.5, 0]
    sizes = [3, 2, 2, 3, 2, 3, 1, 2, 2, 1, 2, 1]
    perm = np.random.default_rng(5).permutation(12)
    shuffled = {name: [col[i] for i in perm] for name, col in TABLE.items()}
    values = np.asarray(critic(TABLE)["value"])
    kw = {"value": values[perm]} if method == "ppo" else {}
    _, details = adv(method, shuffled, gamma=0.5, return_details=True, **kw)
    close(details["returns"], np.asarray(returns)[perm])
    close(details["value"], np.asarray(value)[perm])
    np.testing.assert_array_equal(details["state_group_size"], np.asarray(sizes)[perm])
    if method == "ppo":  # the critic's target, GAE(V) + V, is each row's own too
        _, plain = adv(method, TABLE, gamma=0.5, return_details=True, value=values)
        close(details["value_target"], plain["value_target"][perm])


def test_only_the_order_of_steps_matters():
    gappy = {**TABLE, "step": [3 * s + 10 for s in TABLE["step"]]}
    for method in ESTIMATORS:
        close(adv(method, gappy, gamma=0.5), adv(method, gamma=0.5))


def test_key_types_do_not_matter():
    as_ints = {**TABLE, "key": [int(k[1]) for k in TABLE["key"]]}
    as_tuples = {**TABLE, "key": [("room", k) for k in TABLE["key"]],
                 "trajectory": [f"traj-{t}" for t in TABLE["trajectory"]]}
    for method in ESTIMATORS:
        close(adv(method, as_ints), adv(method))
        close(adv(method, as_tuples), adv(method))


# ---------------------------------------------------------------------------------------------
# A slow reference (plain Python loops, straight from the formulas) on random tables.


def random_table(rng: np.random.Generator) -> dict[str, list]:
    """1-4 groups of 1-5 trajectories of 1-6 steps; few keys, so that states are shared."""
    rows = []
    traj_ids = rng.permutation(1000)
    n_traj = 0
    for g in range(int(rng.integers(1, 5))):
        n_keys = int(rng.integers(1, 6))
        for _ in range(int(rng.integers(1, 6))):
            tid = int(traj_ids[n_traj])
            n_traj += 1
            for t in range(int(rng.integers(1, 7))):
                r = float(rng.choice([0.0, 0.0, 1.0, 10.0, rng.normal()]))
                rows.append((f"g{g}", tid, t, f"k{rng.integers(n_keys)}", r))
    order = rng.permutation(len(rows))
    cols = list(zip(*[rows[i] for i in order], strict=True))
    return dict(zip(["group", "trajectory", "step", "key", "reward"], map(list, cols),
                    strict=True))


def slow_normalise(values: dict, groups: dict, norm: str, eps: float = 1e-6) -> dict:
    """values: id -> x; groups: id -> group label. Returns id -> normalised x."""
    members = defaultdict(list)
    for i, g in groups.items():
        members[g].append(values[i])
    out = {}
    for i, g in groups.items():
        xs = members[g]
        mean = sum(xs) / len(xs)
        std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0
        out[i] = {"none": values[i], "mean": values[i] - mean,
                  "mean_std": (values[i] - mean) / (std + eps)}[norm]
    return out


def slow_advantages(method, table, gamma, lam, norm, omega, episode_stats) -> list[float]:
    rows = list(zip(table["group"], table["trajectory"], table["step"], table["key"],
                    table["reward"], strict=True))
    trajs = defaultdict(list)  # trajectory -> row indices in step order
    for i in sorted(range(len(rows)), key=lambda i: rows[i][2]):
        trajs[rows[i][1]].append(i)
    G = {}
    for idx in trajs.values():
        running = 0.0
        for i in reversed(idx):
            running = rows[i][4] + gamma * running
            G[i] = running
    R = {tr: sum(rows[i][4] for i in idx) for tr, idx in trajs.items()}
    traj_group = {tr: rows[idx[0]][0] for tr, idx in trajs.items()}
    row_ids = range(len(rows))

    def episode(norm_):
        if episode_stats == "rows":
            return slow_normalise({i: R[rows[i][1]] for i in row_ids},
                                  {i: rows[i][0] for i in row_ids}, norm_)
        per_traj = slow_normalise(R, traj_group, norm_)
        return {i: per_traj[rows[i][1]] for i in row_ids}

    state = {i: (rows[i][0], rows[i][3]) for i in row_ids}
    if method == "grpo":
        out = episode(norm)
    elif method == "rloo":
        out = {}
        for i in row_ids:
            others = [R[tr] for tr, g in traj_group.items() if g == rows[i][0]
                      and tr != rows[i][1]]
            out[i] = R[rows[i][1]] - sum(others) / len(others) if others else 0.0
    elif method == "gigpo":
        a_e = episode(norm)
        a_s = slow_normalise(G, state, norm)
        size = defaultdict(int)
        for s in state.values():
            size[s] += 1
        out = {i: a_e[i] + omega * (a_s[i] if size[state[i]] > 1 else 0.0) for i in row_ids}
    else:  # gagpo
        total, count = defaultdict(float), defaultdict(int)
        for i in row_ids:
            total[state[i]] += G[i]
            count[state[i]] += 1
        V = {s: total[s] / count[s] for s in total}
        A = {}
        for idx in trajs.values():
            running = 0.0
            for pos in reversed(range(len(idx))):
                i = idx[pos]
                v_next = V[state[idx[pos + 1]]] if pos + 1 < len(idx) else 0.0
                delta = rows[i][4] + gamma * v_next - V[state[i]]
                running = delta + gamma * lam * running
                A[i] = running
        out = slow_normalise(A, {i: rows[i][0] for i in row_ids}, norm)
    return [out[i] for i in row_ids]


def test_vectorised_matches_slow_reference_on_random_tables():
    rng = np.random.default_rng(12345)
    for _ in range(200):
        table = random_table(rng)
        gamma = float(rng.choice([1.0, 0.95, rng.uniform(0.5, 1.0)]))
        lam = float(rng.choice([0.0, 1.0, rng.uniform()]))
        omega = float(rng.uniform(0, 2))
        for method in ("gagpo", "gigpo", "grpo", "rloo"):
            for norm in ("mean_std", "mean", "none"):
                for stats in ("trajectory", "rows"):
                    got = adv(method, table, gamma=gamma, lam=lam, norm=norm, omega=omega,
                              episode_stats=stats)
                    want = slow_advantages(method, table, gamma, lam, norm, omega, stats)
                    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-7,
                                               err_msg=f"{method} {norm} {stats}")


# ---------------------------------------------------------------------------------------------
# Registry and bad inputs.


def test_registering_an_estimator_is_one_function():
    @register_estimator("test_mc_return")
    def mc_return(steps, opts):
        return steps.returns(opts.gamma)

    try:
        close(adv("test_mc_return", gamma=0.5), [0.25, 0.5, 1, 0, 0, 0.25, 0.5, 1, 1, 2, 0, 0])
        with pytest.raises(ValueError, match="already registered"):
            register_estimator("test_mc_return")(mc_return)
    finally:
        del ESTIMATORS["test_mc_return"]


def test_a_registered_estimators_advantages_come_back_as_float64():
    @register_estimator("test_float32")
    def as_float32(steps, opts):
        return steps.returns(opts.gamma).astype(np.float32)

    try:
        a = adv("test_float32", gamma=0.5)
        assert a.dtype == np.float64
        close(a, [0.25, 0.5, 1, 0, 0, 0.25, 0.5, 1, 1, 2, 0, 0])
    finally:
        del ESTIMATORS["test_float32"]


def test_unknown_method_norm_or_stats():
    with pytest.raises(ValueError, match="unknown method 'reinforce'.*gagpo"):
        adv("reinforce")
    with pytest.raises(ValueError, match="unknown norm 'zscore'"):
        adv("gagpo", norm="zscore")
    with pytest.raises(ValueError, match="unknown episode_stats"):
        adv("grpo", episode_stats="tokens")


def test_unequal_lengths():
    with pytest.raises(ValueError, match="equal lengths.*'reward': 11"):
        adv("grpo", {**TABLE, "reward": TABLE["reward"][:-1]})
    with pytest.raises(ValueError, match="equal lengths"):
        state_groups([0, 0], ["a"])


def test_duplicate_trajectory_step():
    table = {**TABLE, "step": [0, 1, 1, 0, 1, 0, 1, 2, 0, 1, 0, 1]}
    with pytest.raises(ValueError, match=r"duplicate \(trajectory, step\): 0, 1"):
        adv("gagpo", table)


def test_trajectory_in_two_groups_and_bad_dtypes():
    with pytest.raises(ValueError, match="more than one group"):
        adv("grpo", {**TABLE, "group": [0, 0, 1, *TABLE["group"][3:]]})
    with pytest.raises(ValueError, match="step must be"):
        adv("grpo", {**TABLE, "step": [float(s) for s in TABLE["step"]]})
    with pytest.raises(ValueError, match="finite"):
        adv("grpo", {**TABLE, "reward": [math.nan, *TABLE["reward"][1:]]})


def test_empty_table():
    empty = {name: [] for name in TABLE}
    for method in ESTIMATORS:
        assert adv(method, empty).shape == (0,)


def test_errors_name_the_column_at_fault():
    """A caller building the step table learns which column is wrong, not just that one is."""
    with pytest.raises(ValueError, match=r"\{'group': 12, 'trajectory': 12, 'step': 12, "
                                         r"'key': 12, 'reward': 11\}"):
        adv("grpo", {**TABLE, "reward": TABLE["reward"][:-1]})
    for column in ("group", "trajectory", "key"):
        bad = {**TABLE, column: [[v] for v in TABLE[column]]}  # lists are not hashable
        with pytest.raises(ValueError, match=f"^{column} must hold hashable values"):
            adv("gagpo", bad)
    for column in ("group", "key"):
        args = {"group": TABLE["group"], "key": TABLE["key"]}
        args[column] = [[v] for v in args[column]]
        with pytest.raises(ValueError, match=f"^{column} must hold hashable values"):
            state_groups(**args)
    with pytest.raises(ValueError, match="^reward must be a 1-d array of finite numbers$"):
        adv("grpo", {**TABLE, "reward": [math.inf, *TABLE["reward"][1:]]})
    table = {**TABLE, "step": [0, 1, 1, 0, 1, 0, 1, 2, 0, 1, 0, 1]}
    with pytest.raises(ValueError, match=r"appears more than once$"):
        adv("gagpo", table)


def test_state_groups_of_an_empty_table():
    ids, sizes, shared = state_groups([], [])
    assert ids.shape == sizes.shape == (0,)
    assert shared == 0.0
    # Sizes are counts, whatever the table's length (they fill integer columns downstream).
    assert sizes.dtype == state_groups([0], ["s"])[1].dtype == np.int64


def test_epsilon_is_used():
    # Group 0's returns 1, 0, 1 (mean 2/3, std 1/sqrt(3)); epsilon = 1 is added to the std.
    a = adv("grpo", epsilon=1.0)
    close(a[0], (1 / 3) / (1 / S3 + 1.0))


def test_details_of_an_empty_table():
    _, details = adv("gigpo", {name: [] for name in TABLE}, return_details=True)
    assert details["shared_fraction"] == 0.0
    assert details["met_fraction"] == 0.0  # no steps: nothing met, and no nan


def test_the_trajectory_spread_over_groups_is_named():
    group = list(TABLE["group"])
    group[6] = 1  # the middle row of trajectory 2
    with pytest.raises(ValueError, match="^trajectory 2 has rows in more than one group$"):
        adv("grpo", {**TABLE, "group": group})


# ---------------------------------------------------------------------------------------------
# verl-agent's statistics over step rows, and the penalty charged to one step.


def verl_agent_reference(method: str, table: dict, penalty: list[float], gamma: float,
                         norm: str, omega: float = 1.0, eps: float = 1e-6) -> list[float]:
    """GiGPO / GRPO as verl-agent computes them, written here from its description: every step
    row carries its episode's return minus that row's own penalty (the env's rewards summed,
    then the invalid-action penalty taken off the offending row only), and mean / std (ddof 1)
    run over all rows of the row's group. GiGPO's step term is the row's discounted return G_t,
    minus its own penalty too, normalised within its step group (a group of one gets 0)."""
    n = len(table["reward"])
    by_traj = defaultdict(list)
    for i in range(n):
        by_traj[table["trajectory"][i]].append(i)
    R, G = {}, [0.0] * n
    for tr, idx in by_traj.items():
        idx.sort(key=lambda i: table["step"][i])
        R[tr] = sum(table["reward"][i] for i in idx)
        running = 0.0
        for i in reversed(idx):
            running = table["reward"][i] + gamma * running
            G[i] = running

    def group_norm(score: list[float], label: list) -> list[float]:
        members = defaultdict(list)
        for i in range(n):
            members[label[i]].append(score[i])
        out = []
        for i in range(n):
            xs = members[label[i]]
            mean = sum(xs) / len(xs)
            std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) \
                if len(xs) > 1 else 1.0  # a lone row: x - x = 0 whatever std is
            out.append(score[i] - mean if norm == "mean" else (score[i] - mean) / (std + eps))
        return out

    episode = group_norm([R[table["trajectory"][i]] - penalty[i] for i in range(n)],
                         table["group"])
    if method == "grpo":
        return episode
    step_group = [(table["group"][i], table["key"][i]) for i in range(n)]
    sizes = defaultdict(int)
    for s in step_group:
        sizes[s] += 1
    step = group_norm([G[i] - penalty[i] for i in range(n)], step_group)
    return [episode[i] + omega * (step[i] if sizes[step_group[i]] > 1 else 0.0)
            for i in range(n)]


def ppo_reference(table: dict, value: list[float], penalty: list[float], gamma: float,
                  lam: float) -> tuple[list[float], list[float]]:
    """PPO's GAE, one trajectory at a time from its last step back, then whitened over the
    batch: ``(advantages, lambda-returns)`` in the table's row order."""
    n = len(table["reward"])
    raw, target = [0.0] * n, [0.0] * n
    for traj in set(table["trajectory"]):
        rows = sorted((i for i in range(n) if table["trajectory"][i] == traj),
                      key=lambda i: table["step"][i])
        next_value, next_adv = 0.0, 0.0
        for i in reversed(rows):
            delta = table["reward"][i] + gamma * next_value - value[i]
            next_adv = delta + gamma * lam * next_adv
            next_value = value[i]
            raw[i], target[i] = next_adv - penalty[i], next_adv + value[i]
    mean = sum(raw) / n
    std = math.sqrt(sum((a - mean) ** 2 for a in raw) / (n - 1)) if n > 1 else 0.0
    return [(a - mean) / (std + 1e-6) for a in raw], target


def test_ppo_gae_matches_a_reference_loop():
    rng = np.random.default_rng(5)
    for _ in range(30):
        table = random_table(rng)
        n = len(table["reward"])
        value = rng.normal(size=n).tolist()
        penalty = [float(rng.choice([0.0, 0.0, 0.1])) for _ in range(n)]
        got, details = compute_advantages("ppo", **table, gamma=0.9, lam=0.8, value=value,
                                          penalty=penalty, return_details=True)
        want, target = ppo_reference(table, value, penalty, 0.9, 0.8)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(details["value_target"], target, rtol=1e-9, atol=1e-9)


def test_ppo_with_lambda_one_is_the_return_minus_the_critic():
    """lam = 1, unnormalised: A_t = G_t - V(s_t), whatever the critic says of later states."""
    value = critic(TABLE)["value"]
    a, details = compute_advantages("ppo", **TABLE, value=value, gamma=0.5, lam=1.0,
                                    norm="none", return_details=True)
    close(a, details["returns"] - np.asarray(value))
    close(details["value_target"], details["returns"])


def test_ppo_needs_one_value_per_row():
    with pytest.raises(ValueError, match="ppo needs value"):
        compute_advantages("ppo", **TABLE)
    with pytest.raises(ValueError, match="value must be None or a 1-d array of 12"):
        adv("ppo", value=[0.0] * 11)
    with pytest.raises(ValueError, match="value must be"):
        adv("ppo", value=[math.nan] * 12)


@pytest.mark.parametrize("method", ["gigpo", "grpo"])
@pytest.mark.parametrize("norm", ["mean_std", "mean"])
def test_rows_stats_and_step_penalty_reproduce_verl_agent(method, norm):
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(40):
        table = random_table(rng)
        sizes = defaultdict(int)
        for g in table["group"]:
            sizes[g] += 1
        if min(sizes.values()) < 2:  # verl-agent keeps a lone row's raw score; we give 0
            continue
        penalty = [float(rng.choice([0.0, 0.0, 0.1, 0.5])) for _ in table["reward"]]
        got = compute_advantages(method, **table, gamma=0.9, norm=norm, omega=0.7,
                                 episode_stats="rows", penalty=penalty)
        want = verl_agent_reference(method, table, penalty, 0.9, norm, omega=0.7)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
        checked += 1
    assert checked >= 10


def test_step_penalty_lowers_only_the_offending_row():
    # Row 1 (traj 0, step 1) is penalised 0.5. Without normalisation each estimator's
    # advantage drops by exactly 0.5 there (GiGPO: twice, its step group "s1" being shared:
    # once in the episode term, once in the step term) and nowhere else.
    p = [0.0] * 12
    p[1] = 0.5
    for method, drop in [("grpo", 0.5), ("rloo", 0.5), ("gagpo", 0.5), ("gigpo", 1.0)]:
        base = adv(method, norm="none", gamma=0.5, lam=0.5)
        got = adv(method, norm="none", gamma=0.5, lam=0.5, penalty=p)
        close(got - base, [-drop if i == 1 else 0.0 for i in range(12)])
    # Folded into the reward (the "return" target) instead, it reaches the earlier step 0 and
    # every row of the trajectory through R.
    folded = dict(TABLE, reward=[r - q for r, q in zip(TABLE["reward"], p, strict=True)])
    moved = adv("gagpo", folded, norm="none", gamma=0.5, lam=0.5) - \
        adv("gagpo", norm="none", gamma=0.5, lam=0.5)
    assert moved[0] != 0.0 and moved[1] != 0.0
    moved = adv("grpo", folded, norm="none") - adv("grpo", norm="none")
    close(moved, [-0.5] * 3 + [0.0] * 9)


def test_step_penalty_under_row_statistics_is_normalised_with_the_rows():
    # grpo, "rows", norm "mean": group 0 row scores R - p = [1, 0.5, 1, 0, 0, 1, 1, 1], mean
    # 5.5/8 = 0.6875; group 1 untouched: [2, 2, 0, 0] - 1.
    p = [0.0, 0.5] + [0.0] * 10
    got = adv("grpo", norm="mean", episode_stats="rows", penalty=p)
    m = 5.5 / 8
    close(got, [1 - m, 0.5 - m, 1 - m, -m, -m, 1 - m, 1 - m, 1 - m, 1, 1, -1, -1])


def test_a_zero_penalty_changes_nothing_bit_for_bit():
    rng = np.random.default_rng(11)
    for _ in range(10):
        table = random_table(rng)
        for method in ESTIMATORS:
            for stats in ("trajectory", "rows"):
                a = adv(method, table, episode_stats=stats)
                b = adv(method, table, episode_stats=stats,
                        penalty=np.zeros(len(table["reward"])))
                assert a.tobytes() == b.tobytes()


def test_bad_penalty_is_a_clear_error():
    with pytest.raises(ValueError, match="penalty must be None or a 1-d array of 12"):
        adv("gagpo", penalty=[0.1] * 11)
    with pytest.raises(ValueError, match="finite"):
        adv("gagpo", penalty=[float("nan")] + [0.0] * 11)


# ---------------------------------------------------------------------------------------------
# Ids of any hashable type.


def test_ids_of_any_hashable_type_mixed_and_ragged():
    # The hand table with odd ids: trajectories are tuples of different lengths, group 1 is
    # the string "1" beside the int 0, keys mix strings, ints and tuples.
    traj_ids = {0: (0,), 1: (1, "b"), 2: ("c", 2, None), 3: (), 4: 4}
    key_ids = {"s0": "s0", "s1": 1, "s2": (2, "x"), "s3": (3,)}
    odd = dict(TABLE, group=[0] * 8 + ["1"] * 4,
               trajectory=[traj_ids[t] for t in TABLE["trajectory"]],
               key=[key_ids[k] for k in TABLE["key"]])
    for method in ESTIMATORS:
        for stats in ("trajectory", "rows"):
            a = adv(method, episode_stats=stats)
            b = adv(method, odd, episode_stats=stats)
            assert a.tobytes() == b.tobytes(), method
    ids, sizes, _ = state_groups(odd["group"], odd["key"])
    assert sizes.tolist() == state_groups(TABLE["group"], TABLE["key"])[1].tolist()


def test_one_and_the_string_one_are_different_ids():
    table = {"group": [1, "1"], "trajectory": [1, "1"], "step": [0, 0], "key": ["s", "s"],
             "reward": [1.0, 0.0]}
    # Two groups of one trajectory each: nothing to compare, advantage 0 (one group: +-0.707).
    close(compute_advantages("grpo", **table), [0.0, 0.0])
    close(compute_advantages("grpo", **dict(table, group=[1, 1])), [1 / S2, -1 / S2])
    # Keys 1 and "1" in one group are two states; 1 and 1.0 are one, as Python has them.
    assert state_groups([0, 0], [1, "1"])[1].tolist() == [1, 1]
    assert state_groups([0, 0], [1, 1.0])[1].tolist() == [2, 2]
    assert state_groups([0, 0], [b"a", "a"])[1].tolist() == [1, 1]


def test_a_trailing_nul_makes_another_id():
    """numpy's string arrays drop trailing NULs; Python finds "a" and "a\0" different."""
    assert state_groups([0, 0], ["a", "a\0"])[1].tolist() == [1, 1]
    assert state_groups([0, 0], [b"a", b"a\0"])[1].tolist() == [1, 1]
    assert state_groups([0, 0], ["a\0", "a\0\0"])[1].tolist() == [1, 1]
    assert state_groups(["g", "g\0"], ["a", "a"])[1].tolist() == [1, 1]
    # Two trajectories (not one with its step 0 twice), in one group: advantages +-0.707.
    table = {"group": [0, 0], "trajectory": ["t", "t\0"], "step": [0, 0], "key": ["s", "s"],
             "reward": [1.0, 0.0]}
    close(compute_advantages("grpo", **table), [1 / S2, -1 / S2])


def test_numpy_columns_number_the_ids_as_lists_do():
    """The columns may be numpy arrays: integer, string and object arrays of ids (an object
    array may mix 0 and "1", which numpy cannot sort) give the lists' advantages."""
    arrays = {name: np.asarray(col) for name, col in TABLE.items()}
    mixed = np.empty(12, dtype=object)
    mixed[:] = [0] * 8 + ["1"] * 4
    for method in ESTIMATORS:
        close(adv(method, arrays), adv(method))
        close(adv(method, dict(arrays, group=mixed)), adv(method))
    expected = state_groups(TABLE["group"], TABLE["key"])[1].tolist()
    assert state_groups(arrays["group"], arrays["key"])[1].tolist() == expected
    assert state_groups(mixed, arrays["key"])[1].tolist() == expected


# ---------------------------------------------------------------------------------------------
# GAGPO's variants (docs/algorithms.md): a slow reference, hand tables and the two mechanisms
# the variants exist to fix.


def slow_gagpo(table: dict, variant: str, gamma: float, lam: float, norm: str) -> list[float]:
    """Every knob of GagpoVariant, straight from its docstring, one row at a time."""
    v = GAGPO_VARIANTS[variant]
    n = len(table["reward"])
    rows = range(n)
    group, traj, key = table["group"], table["trajectory"], table["key"]
    r, p = table["reward"], table.get("penalty") or [0.0] * n
    by_traj = defaultdict(list)
    for i in sorted(rows, key=lambda i: table["step"][i]):
        by_traj[traj[i]].append(i)
    G = {}
    for idx in by_traj.values():
        running = 0.0
        for i in reversed(idx):
            running = r[i] + gamma * running
            G[i] = running
    state = {i: (group[i], key[i]) for i in rows}
    same = {i: [j for j in rows if state[j] == state[i]] for i in rows}
    others = {i: [j for j in same[i] if traj[j] != traj[i]] for i in rows}
    V = {}
    for i in rows:
        pool = same[i] if v.value == "group" else (others[i] or [i])
        V[i] = sum(G[j] for j in pool) / len(pool)
    coef = {i: lam for i in rows}  # lambda into row i
    if v.unshared == "ancestor":
        for idx in by_traj.values():
            for pos, i in enumerate(idx):
                if pos and len({traj[j] for j in others[i]}) < v.min_others:
                    prev = idx[pos - 1]
                    g = gamma if v.carry == "td" else 1.0
                    # gamma = 0 ties no value to the next: the carried value stays.
                    V[i] = (V[prev] - r[prev]) / g if g else V[prev]
                    coef[i] = lam if v.bootstrap_unshared else 1.0
    A = {}
    for idx in by_traj.values():
        running, nxt = 0.0, None
        for i in reversed(idx):
            v_next = V[nxt] if nxt is not None else 0.0
            running = r[i] + gamma * v_next - V[i] + (gamma * coef[nxt] * running
                                                       if nxt is not None else 0.0)
            A[i], nxt = running, i
    groups = {i: group[i] for i in rows}
    if v.penalty == "in_norm":
        out = slow_normalise({i: A[i] - p[i] for i in rows}, groups, norm)
    else:
        out = {i: a - p[i] for i, a in slow_normalise(A, groups, norm).items()}
    if v.episode_weight:
        R = {t: sum(r[i] for i in idx) for t, idx in by_traj.items()}
        ep = slow_normalise(R, {t: group[idx[0]] for t, idx in by_traj.items()}, norm)
        out = {i: out[i] + v.episode_weight * ep[traj[i]] for i in rows}
    return [out[i] for i in rows]


@pytest.mark.parametrize("variant", sorted(GAGPO_VARIANTS))
def test_every_gagpo_variant_matches_the_slow_reference(variant):
    rng = np.random.default_rng(7)
    for _ in range(60):
        table = random_table(rng)
        table["penalty"] = [float(rng.choice([0.0, 0.0, 0.1, 0.5])) for _ in table["reward"]]
        gamma = float(rng.choice([1.0, 0.95, 0.0, rng.uniform(0.5, 1.0)]))
        lam = float(rng.choice([0.0, 1.0, rng.uniform()]))
        for norm in ("mean_std", "mean", "none"):
            got = compute_advantages("gagpo", **table, gamma=gamma, lam=lam, norm=norm,
                                     gagpo_variant=variant)
            np.testing.assert_allclose(got, slow_gagpo(table, variant, gamma, lam, norm),
                                       rtol=1e-7, atol=1e-7, err_msg=f"{variant} {norm}")


# Three rollouts of one task: the first wins through A, the second leaves the others at once
# and loses through B and C (states no one else saw), the third loses through A.
#   traj 0: (s0, 0) (A, 10)    G (gamma 0.95) = [9.5, 10]
#   traj 1: (s0, 0) (B, 0) (C, 0)               [0, 0, 0]
#   traj 2: (s0, 0) (A, 0)                      [0, 0]
LEAVER = {"group": [0] * 7, "trajectory": [0, 0, 1, 1, 1, 2, 2], "step": [0, 1, 0, 1, 2, 0, 1],
          "key": ["s0", "A", "s0", "B", "C", "s0", "A"], "reward": [0, 10, 0, 0, 0, 0, 0]}


def leaver(variant: str) -> np.ndarray:
    return compute_advantages("gagpo", **LEAVER, gamma=0.95, lam=0.95, norm="none",
                              gagpo_variant=variant)


def test_the_literal_reading_gives_a_lone_rollout_no_credit():
    # V(B) = G(B), V(C) = G(C): the TD errors of traj 1 after s0 are 0.
    v0, vA = 9.5 / 3, 5.0
    close(leaver("paper"), [0.95 * vA - v0 + 0.95 * 0.95 * (10 - vA), 10 - vA,
                            0 - v0, 0, 0, 0.95 * vA - v0 + 0.95 * 0.95 * (0 - vA), 0 - vA])


def test_ancestor_carries_the_shared_value_into_lone_states():
    # B and C have no value of their own: V(B) = V(s0) / 0.95, V(C) = V(s0) / 0.95^2, and
    # lambda = 1 into them, so A = G - V there: the loss is charged to every step of traj 1.
    v0 = 9.5 / 3
    a = leaver("ancestor")
    close(a[2:5], [-v0, -v0 / 0.95, -v0 / 0.95**2])
    close(a[[0, 1, 5, 6]], leaver("paper")[[0, 1, 5, 6]])  # shared rows: as before
    # ancestor-td bootstraps into them with lambda 0.95: delta = 0 until C, whose
    # delta = 0 - V(C) reaches B and s0 discounted by gamma * lambda.
    d = 0.95 * 0.95
    close(leaver("ancestor-td")[2:5], [d * d * -v0 / 0.95**2, d * -v0 / 0.95**2,
                                       -v0 / 0.95**2])


def test_a_flat_carry_holds_the_shared_value_along_a_lone_run():
    # ancestor-flat: V(B) = V(C) = V(s0) (no growth by 1 / gamma per step), so each step of
    # the lone run costs (1 - gamma) V(s0) and its last step the whole V(s0); lambda 0.95.
    v0, d = 9.5 / 3, 0.95 * 0.95
    a_c = -v0
    a_b = (0.95 - 1) * v0 + d * a_c
    a_s0 = (0.95 - 1) * v0 + d * a_b
    close(leaver("ancestor-flat")[2:5], [a_s0, a_b, a_c])
    close(leaver("ancestor-flat")[[0, 1, 5, 6]], leaver("ancestor-td")[[0, 1, 5, 6]])


def test_a_state_two_rollouts_share_needs_a_third_under_shared_2():
    # A is visited by traj 0 and 2 only: one other trajectory each, short of min_others = 2,
    # so V(A) is carried from s0 (V(s0) / 0.95) instead of their mean G (5), for both.
    v0, d = 9.5 / 3, 0.95 * 0.95
    a = leaver("shared-2")
    close(a[[0, 1]], [d * (10 - v0 / 0.95), 10 - v0 / 0.95])
    close(a[[5, 6]], [d * (0 - v0 / 0.95), 0 - v0 / 0.95])
    close(a[2:5], leaver("ancestor-td")[2:5])  # B and C: no other trajectory either way
    # Carried flat, V(A) = V(s0): the step into A now costs (1 - gamma) V(s0) too.
    close(leaver("shared-2-flat")[[0, 1]], [(0.95 - 1) * v0 + d * (10 - v0), 10 - v0])


def test_met_fraction_counts_states_another_trajectory_visited_not_revisits():
    # LEAVER: s0 (3 trajectories) and A (traj 0 and 2) are met; B and C only by traj 1.
    details = compute_advantages("gagpo", **LEAVER, return_details=True)[1]
    assert details["met_fraction"] == pytest.approx(5 / 7)
    # traj 1 stays in C for two more steps (invalid actions): its step group grows, its
    # states are still nobody else's.
    table = {k: list(v) for k, v in LEAVER.items()}
    for k, v in (("group", 0), ("trajectory", 1), ("key", "C"), ("reward", 0)):
        table[k] += [v, v]
    table["step"] += [3, 4]
    details = compute_advantages("gagpo", **table, return_details=True)[1]
    assert details["met_fraction"] == pytest.approx(5 / 9)
    assert details["shared_fraction"] == pytest.approx(8 / 9)


def test_others_leaves_the_rows_own_outcome_out_of_its_baseline():
    # V(s0) for traj 0 = mean G of traj 1 and 2 = 0; V(A) for traj 0 = G of traj 2 = 0.
    a = leaver("others")
    close(a[1], 10.0)
    close(a[6], -10.0)  # traj 2 at A: its baseline is traj 0's 10
    close(a[0], 0.95 * 0.0 - 0.0 + 0.95 * 0.95 * 10.0)


def lost_group(variant: str, norm: str | None = None) -> np.ndarray:
    """A group with no win: 4 rollouts of 3 steps, equal returns (0), 3 invalid steps."""
    table = {"group": [0] * 12, "trajectory": [t for t in range(4) for _ in range(3)],
             "step": [0, 1, 2] * 4, "key": ["s0", "s1", "s2"] * 4, "reward": [0.0] * 12,
             "penalty": [0.1, 0, 0, 0, 0.1, 0, 0, 0, 0.1, 0, 0, 0]}
    return compute_advantages("gagpo", **table, gagpo_variant=variant, norm=norm)


def test_the_penalty_normalised_with_the_outcome_pays_every_valid_step():
    # The literal reading: the penalty is the group's only spread, and mean_std divides by it.
    # Rows: 9 at 0, 3 at -0.1; mean -0.025, sample variance (9 * 0.025^2 + 3 * 0.075^2) / 11.
    a = lost_group("paper", "mean_std")
    valid = np.asarray([0.1, 0, 0, 0, 0.1, 0, 0, 0, 0.1, 0, 0, 0]) == 0
    close(a[valid], [0.025 / (math.sqrt(0.0225 / 11) + 1e-6)] * 9)  # about sqrt(f / (1 - f))
    assert a[valid][0] > 0.5  # a valid step earns as much as a win would elsewhere


def test_the_default_charges_the_penalty_alone_when_nothing_was_won():
    for norm in (None, "mean_std", "mean"):
        a = lost_group("ancestor-td", norm)
        close(a, [-0.1, 0, 0, 0, -0.1, 0, 0, 0, -0.1, 0, 0, 0])


def test_the_default_gagpo_is_the_documented_variant_with_its_lambda_and_norm():
    from gagpo.advantages import DEFAULT_GAGPO_VARIANT, resolved_lam_norm

    v = GAGPO_VARIANTS[DEFAULT_GAGPO_VARIANT]
    assert DEFAULT_GAGPO_VARIANT != "paper" and v.unshared == "ancestor"
    assert v.penalty == "after_norm"
    assert resolved_lam_norm("gagpo", DEFAULT_GAGPO_VARIANT, None, None) == (v.lam, v.norm)
    assert resolved_lam_norm("gagpo", "paper", None, None) == (0.95, "mean_std")
    assert resolved_lam_norm("ppo", DEFAULT_GAGPO_VARIANT, None, None) == (0.95, "mean_std")
    assert resolved_lam_norm("gagpo", DEFAULT_GAGPO_VARIANT, 0.3, "none") == (0.3, "none")
    default = compute_advantages("gagpo", **LEAVER)
    named = compute_advantages("gagpo", **LEAVER, gagpo_variant=DEFAULT_GAGPO_VARIANT,
                               lam=v.lam, norm=v.norm)
    close(default, named)


def test_an_unknown_variant_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown gagpo_variant 'literal'.*paper"):
        compute_advantages("gagpo", **LEAVER, gagpo_variant="literal")
