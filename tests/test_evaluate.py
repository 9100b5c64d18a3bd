"""Evaluation's numbers (gagpo.evaluate): what a reader of ``gagpo eval``'s table, its
summary.json, the trainer's held-out lines and the demo relies on.

- A success rate's interval is the 95% Wilson score interval (z = 1.959964, no continuity
  correction), checked here against the score test solved independently; a mean score's is
  the normal approximation (sample standard deviation over sqrt(n)).
- Every interval stays within the quantity's range: rates and mean scores within [0, 1] (the
  score's range, ``TextInfo.score``), also where the normal approximation would overshoot.
- Each task type's row is over that type's episodes only, types sorted, then 'all' over every
  episode; success counts won episodes, score averages the env's score, the two kept apart.
- The printed table and held-out lines show exactly those rows' numbers, one line each.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from gagpo.evaluate import (
    bootstrap_interval,
    episode_ratio_interval,
    format_table,
    held_out_lines,
    mean_interval,
    ratio_or_nan,
    summarise,
    wilson,
)

Z = 1.959964


def score_test_bounds(k: int, n: int) -> tuple[float, float]:
    """The 95% Wilson interval solved another way: the p with (p_hat - p)^2 = z^2 p (1-p) / n,
    i.e. the roots of (n + z^2) p^2 - (2 n p_hat + z^2) p + n p_hat^2."""
    p_hat = k / n
    roots = np.roots([n + Z * Z, -(2 * n * p_hat + Z * Z), n * p_hat * p_hat])
    lo, hi = sorted(float(r.real) for r in roots)
    return lo, hi


def episode(task_type: str, won: bool, score: float, length: int, failed: bool = False,
            invalid: int = 0, malformed: int = 0) -> dict:
    """One episode as ``StepTable.episodes`` gives it (the keys summarise reads, and others)."""
    return {"task_type": task_type, "won": won, "score": score, "length": length,
            "failed": failed, "return": 0.0, "invalid_actions": invalid,
            "malformed_replies": malformed}


# Three task types with different counts, rates and scores, given out of order: 'pick' has an
# episode that scored 0.8 without winning and a failed one, 'clean' two failed ones, 'heat' one
# won episode.
EPISODES = [
    episode("pick", True, 1.0, 3),
    episode("clean", False, 0.5, 7, failed=True),
    episode("pick", True, 1.0, 4),
    episode("heat", True, 1.0, 2),
    episode("pick", False, 0.8, 10),
    episode("clean", True, 1.0, 9, failed=True),
    episode("pick", True, 1.0, 5),
    episode("pick", False, 0.0, 10, failed=True),
]


def hand_mean_interval(x: list[float]) -> tuple[float, float, float]:
    """Mean, mean -+ z * (sample standard deviation) / sqrt(n), in plain Python."""
    n = len(x)
    m = sum(x) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in x) / (n - 1))
    return m, m - Z * sd / math.sqrt(n), m + Z * sd / math.sqrt(n)


def clipped_interval(x: list[float]) -> tuple[float, float]:
    """hand_mean_interval's interval within the scores' range, [0, 1]."""
    _, lo, hi = hand_mean_interval(x)
    return max(0.0, lo), min(1.0, hi)


# -- wilson ---------------------------------------------------------------------------------

@pytest.mark.parametrize("k, n", [(0, 1), (1, 1), (0, 10), (5, 10), (10, 10), (3, 7), (1, 20),
                                  (19, 20), (600, 1000), (0, 1000), (1000, 1000),
                                  (12345, 50000)])
def test_wilson_is_the_score_tests_interval_solved_independently(k, n):
    assert wilson(k, n) == pytest.approx(score_test_bounds(k, n), rel=1e-9, abs=1e-12)


def test_wilson_known_values():
    """Published 95% Wilson intervals (also what score_test_bounds gives)."""
    assert score_test_bounds(0, 10)[1] == pytest.approx(0.27753, abs=5e-6)
    assert score_test_bounds(5, 10) == pytest.approx((0.23659, 0.76341), abs=5e-6)
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=5e-6)
    assert wilson(5, 10) == pytest.approx((0.23659, 0.76341), abs=5e-6)
    # No successes: the upper end is z^2 / (n + z^2); all successes: the lower end n / (n + z^2).
    for n in (1, 4, 30, 500):
        assert wilson(0, n)[1] == pytest.approx(Z * Z / (n + Z * Z), rel=1e-12)
        assert wilson(n, n)[0] == pytest.approx(n / (n + Z * Z), rel=1e-12)


def test_wilson_stays_within_0_and_1_and_holds_the_observed_rate():
    """At 0 or n successes the formula's end is 0 or 1 only up to rounding (below 0 at n = 7,
    above 1 at n = 20, 1 - 2e-16 at n = 200): those ends are set, the rest clipped to [0, 1]."""
    for n in [*range(1, 61), 200, 1000]:
        assert wilson(0, n)[0] == 0.0
        assert wilson(n, n)[1] == 1.0  # exactly: a table shows 100.0, never 99.99999
        for k in range(n + 1):
            lo, hi = wilson(k, n)
            assert 0.0 <= lo <= k / n <= hi <= 1.0
            assert (lo < hi) and (k == 0 or lo > 0.0) and (k == n or hi < 1.0)


def test_wilson_of_no_episodes_is_the_point_zero():
    assert wilson(0, 0) == (0.0, 0.0)


# -- mean_interval --------------------------------------------------------------------------

@pytest.mark.parametrize("scores", [[0.2, 0.5, 0.9, 0.4], [0.3, 0.6], [0.25, 0.75, 0.5]])
def test_mean_interval_is_the_normal_approximation_with_the_sample_std(scores):
    m, lo, hi = mean_interval(np.asarray(scores))
    assert (m, lo, hi) == pytest.approx(hand_mean_interval(scores), rel=1e-12)
    assert 0.0 < lo < m < hi < 1.0  # none of these is clipped


def test_mean_interval_known_value():
    """[0.2, 0.5, 0.9, 0.4]: mean 0.5, sample variance 0.26 / 3, half-width 0.288499."""
    m, lo, hi = mean_interval(np.asarray([0.2, 0.5, 0.9, 0.4]))
    assert m == pytest.approx(0.5)
    assert (lo, hi) == pytest.approx((0.5 - 0.288499, 0.5 + 0.288499), abs=1e-6)


def test_mean_interval_of_one_episode_has_zero_width():
    assert mean_interval(np.asarray([0.7])) == (0.7, 0.7, 0.7)


def test_mean_interval_of_no_episodes_is_zero():
    assert mean_interval(np.asarray([], float)) == (0.0, 0.0, 0.0)


def test_mean_score_interval_stays_within_the_scores_range():
    """gagpo eval --policy rule_options (20 episodes) printed [51.4, 104.6] for a type's 5: a
    mean score is in [0, 1] like the scores, so its interval is clipped there; the other end is
    unchanged."""
    mostly_won = [1.0] * 17 + [0.0, 0.1, 0.2]
    m, lo, hi = mean_interval(np.asarray(mostly_won))
    hand = hand_mean_interval(mostly_won)
    assert hand[2] > 1.0  # the approximation overshoots ...
    assert hi == 1.0  # ... the reported interval does not
    assert (m, lo) == pytest.approx(hand[:2], rel=1e-12)

    mostly_lost = [0.0] * 17 + [1.0, 0.9, 0.8]
    m, lo, hi = mean_interval(np.asarray(mostly_lost))
    hand = hand_mean_interval(mostly_lost)
    assert hand[1] < 0.0
    assert lo == 0.0
    assert (m, hi) == pytest.approx((hand[0], hand[2]), rel=1e-12)

    assert mean_interval(np.asarray([1.0] * 5)) == (1.0, 1.0, 1.0)
    assert mean_interval(np.asarray([0.0] * 5)) == (0.0, 0.0, 0.0)


# -- summarise ------------------------------------------------------------------------------

def test_summarise_lists_task_types_sorted_then_all():
    assert list(summarise(EPISODES)) == ["clean", "heat", "pick", "all"]
    assert list(summarise([episode("b", True, 1.0, 1), episode("a", True, 1.0, 1)])) == [
        "a", "b", "all"]


def test_summarise_each_type_over_its_own_episodes():
    """Counts, success, score, mean length and failures of each type's episodes only: the
    types differ in all of them, so pooling or swapping types would show."""
    rows = summarise(EPISODES)
    expected = {  # episodes, success, score, mean length, failed
        "clean": (2, 1 / 2, 0.75, 8.0, 2),
        "heat": (1, 1.0, 1.0, 2.0, 0),
        "pick": (5, 3 / 5, 0.76, 6.4, 1),
        "all": (8, 5 / 8, 0.7875, 6.25, 3),
    }
    for name, (n, success, score, length, failed) in expected.items():
        r = rows[name]
        assert r["episodes"] == n, name
        assert r["success"] == pytest.approx(success), name
        assert r["score"] == pytest.approx(score), name
        assert r["mean_length"] == pytest.approx(length), name
        assert r["failed"] == failed, name


def test_summarise_intervals_are_those_of_the_rows_episodes():
    rows = summarise(EPISODES)
    wins = {"clean": (1, 2), "heat": (1, 1), "pick": (3, 5), "all": (5, 8)}
    for name, (k, n) in wins.items():
        assert rows[name]["success_ci95"] == pytest.approx(score_test_bounds(k, n), abs=1e-12)
    pick = [1.0, 1.0, 0.8, 1.0, 0.0]
    assert rows["pick"]["score_ci95"] == pytest.approx(clipped_interval(pick), rel=1e-12)
    assert rows["clean"]["score_ci95"] == pytest.approx(clipped_interval([0.5, 1.0]), rel=1e-12)
    assert rows["heat"]["score_ci95"] == [1.0, 1.0]  # one episode
    every = [e["score"] for e in EPISODES]
    assert rows["all"]["score_ci95"] == pytest.approx(clipped_interval(every), rel=1e-12)
    lows = [rows[name]["score_ci95"][0] for name in ("clean", "pick", "all")]
    assert len(set(lows)) == 3 and min(lows) > 0.2  # three different intervals, none at 0


def test_summarise_keeps_success_and_score_apart():
    """An episode that scored 0.8 without winning counts 0 toward success and 0.8 toward the
    score; a won one 1 and its score 1.0."""
    rows = summarise([episode("t", False, 0.8, 4), episode("t", True, 1.0, 2)])
    assert rows["t"]["success"] == 0.5 and rows["all"]["success"] == 0.5
    assert rows["t"]["score"] == pytest.approx(0.9)
    assert rows["t"]["failed"] == 0 and rows["t"]["mean_length"] == 3.0
    alone = summarise([episode("t", False, 0.8, 4)])["t"]
    assert (alone["success"], alone["score"], alone["success_ci95"][0]) == (0.0, 0.8, 0.0)
    assert alone["score_ci95"] == [0.8, 0.8]


def test_summarise_of_no_episodes_is_an_all_row_of_zeros():
    assert summarise([]) == {"all": {
        "episodes": 0, "success": 0.0, "success_ci95": [0.0, 0.0], "score": 0.0,
        "score_ci95": [0.0, 0.0], "mean_length": 0.0, "failed": 0, "well_formed": 0.0,
        "well_formed_ci95": [0.0, 0.0], "admissible": 0.0, "admissible_ci95": [0.0, 0.0]}}


def test_summarise_reply_rates_are_over_the_steps_of_each_type():
    """Well-formed and admissible shares count steps, not episodes: a long episode's bad
    replies weigh by their number. A malformed reply is also an inadmissible action."""
    rows = summarise([episode("a", False, 0.0, 10, invalid=6, malformed=4),
                      episode("a", True, 1.0, 2),
                      episode("b", True, 1.0, 4, invalid=1)])
    assert rows["a"]["well_formed"] == pytest.approx(8 / 12)
    assert rows["a"]["admissible"] == pytest.approx(6 / 12)
    assert rows["b"]["well_formed"] == 1.0 and rows["b"]["admissible"] == 0.75
    assert rows["all"]["well_formed"] == pytest.approx(12 / 16)
    assert rows["all"]["admissible"] == pytest.approx(9 / 16)
    one = summarise([episode("c", True, 1.0, 1)])["all"]  # one step, well formed
    assert (one["well_formed"], one["admissible"]) == (1.0, 1.0)


def test_summarise_step_rate_intervals_resample_episodes_not_steps():
    """The steps of one episode move together, so the intervals of the step rates resample
    whole episodes: episodes that all have the same rate leave no doubt about it (an interval
    over their 40 steps as independent trials would be [0.60, 0.86]), and a rate made of one
    bad episode and a good one spans both."""
    same = summarise([episode("a", True, 1.0, 4, invalid=1) for _ in range(10)])["all"]
    assert same["admissible"] == 0.75 and same["admissible_ci95"] == [0.75, 0.75]
    assert score_test_bounds(30, 40) == pytest.approx((0.598, 0.858), abs=1e-3)
    mixed = summarise([episode("a", False, 0.0, 10, invalid=10),
                       episode("a", True, 1.0, 10)])["all"]
    lo, hi = mixed["admissible_ci95"]
    assert mixed["admissible"] == 0.5 and lo == 0.0 and hi == 1.0
    assert summarise([episode("a", False, 0.0, 10, invalid=10),
                      episode("a", True, 1.0, 10)])["all"] == mixed  # one seed, one interval
    rows = summarise([episode("a", False, 0.0, 10, invalid=6, malformed=4),
                      episode("a", True, 1.0, 2), episode("b", True, 1.0, 4, invalid=1)])
    assert rows["all"]["admissible_ci95"] == list(episode_ratio_interval(
        [4, 2, 3], [10, 2, 4], n_boot=10_000, seed=0))  # gagpo compare's, the same way


def _binomial_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def test_the_step_rate_interval_is_the_2_5_and_97_5_percentiles_over_resampled_episodes():
    """16 one-step episodes, 8 good and 8 bad: a resample of 16 episodes holds X ~
    Binomial(16, 1/2) good ones, so its rate is X / 16 exactly, and the interval's ends are
    X's 2.5% and 97.5% quantiles, 4/16 and 12/16 (P(X <= 3) = 0.011 < 0.025 < P(X <= 4) =
    0.038): a 90% interval would be [5/16, 11/16], a 98% one [3/16, 13/16]. Far from any
    jump of the distribution, so the same for any seed."""
    assert _binomial_cdf(3, 16) < 0.015 and 0.035 < _binomial_cdf(4, 16) < 0.05 < \
        _binomial_cdf(5, 16)
    good, steps = [1] * 8 + [0] * 8, [1] * 16
    for seed in (0, 1):
        assert episode_ratio_interval(good, steps, n_boot=10_000, seed=seed) == (0.25, 0.75)
    rows = summarise([episode("a", True, 1.0, 1, malformed=i % 2, invalid=i % 2)
                      for i in range(16)])
    assert rows["all"]["well_formed_ci95"] == rows["all"]["admissible_ci95"] == [0.25, 0.75]


def test_the_step_rate_interval_resamples_each_episodes_good_steps_with_its_length():
    """8 one-step good episodes and 8 three-step bad ones: a resample with X good episodes
    has the rate X / (X + 3 (16 - X)), pairing each episode's good steps with its own length,
    so the interval is [4/40, 12/24]; averaging the episodes' own rates would give [0.25,
    0.75], and drawing good steps and lengths apart another interval."""
    good, steps = [1] * 8 + [0] * 8, [1] * 8 + [3] * 8
    lo, hi = episode_ratio_interval(good, steps, n_boot=10_000, seed=0)
    assert (lo, hi) == pytest.approx((4 / 40, 12 / 24), abs=1e-12)
    rows = summarise([episode("a", True, 1.0, 1)] * 8
                     + [episode("a", False, 0.0, 3, invalid=3)] * 8)
    assert rows["all"]["admissible"] == pytest.approx(8 / 32)
    assert rows["all"]["admissible_ci95"] == pytest.approx([0.1, 0.5], abs=1e-12)
    assert rows["all"]["well_formed_ci95"] == [1.0, 1.0]


def test_step_rate_intervals_of_one_episode_or_equal_episodes_have_zero_width():
    assert episode_ratio_interval([3], [4], n_boot=1000, seed=0) == (0.75, 0.75)
    assert episode_ratio_interval([3] * 7, [4] * 7, n_boot=1000, seed=3) == (0.75, 0.75)
    one = summarise([episode("a", True, 1.0, 4, invalid=1, malformed=2)])["all"]
    assert (one["admissible_ci95"], one["well_formed_ci95"]) == ([0.75, 0.75], [0.5, 0.5])
    with pytest.raises(ValueError, match="^a bootstrap needs at least one unit$"):
        episode_ratio_interval([], [], n_boot=1000, seed=0)


def test_resamples_with_no_step_are_left_out_of_the_interval():
    """An episode of no steps (lost at once) has no rate: a resample of only such episodes
    has none either (NaN) and is left out; every other resample here has the rate 1/2."""
    assert episode_ratio_interval([0, 1], [0, 2], n_boot=1000, seed=0) == (0.5, 0.5)


def test_bootstrap_draws_n_boot_resamples_of_n_units_each_with_every_unit_possible():
    """Each resample draws its n units uniformly from all n, with replacement (the first
    unit drawn takes the values 0..2 alike: the interval of its index is [0, 2]), and there
    are n_boot of them, also when many units make it draw them in chunks."""
    assert bootstrap_interval(3, lambda idx: idx[:, 0], n_boot=2000, seed=0) == (0.0, 2.0)
    shapes = []

    def statistic(idx):
        shapes.append(idx.shape)
        return idx.mean(axis=1)

    bootstrap_interval(400_000, statistic, n_boot=12, seed=0)  # 5 resamples a chunk
    assert len(shapes) > 1 and {s[1] for s in shapes} == {400_000}
    assert sum(s[0] for s in shapes) == 12


def test_the_interval_ends_are_the_2_5_and_97_5_percentiles_of_n_boot_values():
    """A statistic that numbers the resamples 0, 1, 2, ... (across the chunks): their 2.5% and
    97.5% percentiles, interpolated as numpy does, are the interval; 10,000 of them."""
    drawn = []

    def numbered(idx):
        first = sum(drawn)
        drawn.append(len(idx))
        return np.arange(first, first + len(idx), dtype=float)

    for n in (5, 400_000):  # one chunk; 5 resamples a chunk
        drawn.clear()
        lo, hi = bootstrap_interval(n, numbered, n_boot=10_000 if n == 5 else 40, seed=0)
        total = sum(drawn)
        assert (lo, hi) == pytest.approx(tuple(np.percentile(np.arange(total), [2.5, 97.5])))
    drawn.clear()
    assert bootstrap_interval(5, numbered, n_boot=10_000, seed=0) == pytest.approx(
        (249.975, 9749.025))


def test_one_seed_one_interval_and_another_seed_another():
    """The interval is a function of its seed (so a report is reproducible), and the seed is
    used: another one draws other resamples. summarise's intervals are
    :func:`episode_ratio_interval`'s with 10,000 resamples from seed 0."""
    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 15, size=40)
    bad = np.minimum(rng.integers(0, 6, size=40), lengths)
    eps = [episode("a", True, 1.0, int(n), invalid=int(b)) for n, b in zip(lengths, bad,
                                                                            strict=True)]
    good = lengths - bad

    def interval(**kw):
        return episode_ratio_interval(good, lengths, **({"n_boot": 10_000, "seed": 0} | kw))

    assert interval() == interval()
    assert interval(seed=1) != interval()
    assert interval(n_boot=10_001) != interval()
    assert summarise(eps)["all"]["admissible_ci95"] == list(interval())


def test_ratio_or_nan_divides_where_there_is_a_denominator_and_is_nan_elsewhere():
    got = ratio_or_nan(np.array([3.0, 1.0, 0.0, 2.0]), np.array([4.0, 1.0, 0.0, 0.0]))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [0.75, 1.0, np.nan, np.nan])


def test_a_one_step_episode_has_its_rate_as_its_interval():
    one = summarise([episode("a", True, 1.0, 1)])["all"]
    assert (one["admissible"], one["admissible_ci95"]) == (1.0, [1.0, 1.0])
    bad = summarise([episode("a", False, 0.0, 1, invalid=1, malformed=1)])["all"]
    assert (bad["well_formed_ci95"], bad["admissible_ci95"]) == ([0.0, 0.0], [0.0, 0.0])


def test_summarise_intervals_stay_within_0_and_1():
    """20 episodes mostly won with score 1.0, a few low scores: the normal interval's upper
    end is above 1."""
    episodes = [episode("t", True, 1.0, 3)] * 17 + [
        episode("t", False, s, 15) for s in (0.0, 0.1, 0.2)]
    for r in summarise(episodes).values():
        assert 0.0 <= r["score_ci95"][0] <= r["score"] <= r["score_ci95"][1] == 1.0
        assert 0.0 <= r["success_ci95"][0] <= r["success"] <= r["success_ci95"][1] <= 1.0


# -- format_table and held_out_lines -------------------------------------------------------

NUMBER = re.compile(r"-?\d+\.\d")


def test_format_table_prints_each_rows_numbers_one_line_per_row():
    rows = summarise(EPISODES)
    for scale, score in ((100.0, "score x100"), (1.0, "score"), (10.0, "score x10")):
        lines = format_table("Some title", rows, score_scale=scale).split("\n")
        assert lines[0] == "Some title"
        # The header names the columns above them, as printed (the README quotes it), the
        # score's scale as the numbers below have it.
        assert lines[1] == ("task type" + " " * 25 + "    n  success % [95% CI]      "
                            + f"{score} [95% CI]".ljust(24))
        assert len(lines) == 2 + len(rows)
        for line, (name, r) in zip(lines[2:], rows.items(), strict=True):
            assert line[:34].rstrip() == name
            assert int(line[34:39]) == r["episodes"]
            printed = [float(v) for v in NUMBER.findall(line[39:])]
            expected = [100 * r["success"], *(100 * v for v in r["success_ci95"]),
                        scale * r["score"], *(scale * v for v in r["score_ci95"])]
            assert printed == pytest.approx(expected, abs=0.05 + 1e-9), (scale, line)


def test_format_table_of_the_issues_run_prints_no_score_above_100():
    episodes = [episode("t", True, 1.0, 3)] * 17 + [
        episode("t", False, s, 15) for s in (0.0, 0.1, 0.2)]
    for line in format_table("t", summarise(episodes), 100.0).split("\n")[2:]:
        assert max(float(v) for v in NUMBER.findall(line)) == 100.0


def summary_of(won: int, lost: int, lost_score: float, length: int) -> dict:
    return summarise([episode("t", True, 1.0, length)] * won
                     + [episode("t", False, lost_score, length + 2)] * lost)


LINE = re.compile(r"  (.+?) +success +([\d.]+)% \[ *([\d.]+), *([\d.]+)\] +score +([\d.]+) +"
                  r"mean length +([\d.]+)")


def test_held_out_lines_one_per_evaluation_in_order_skipping_the_warm_starts_record():
    evals = {
        "before": summary_of(1, 9, 0.2, 10),
        "bc": {"demonstration_steps": 40, "final_nll": 0.31},  # no "all": not an evaluation
        "after_bc": summary_of(4, 6, 0.5, 8),
        "iter_10": summary_of(6, 4, 0.4, 6),
        "seconds": 12.5,
        "after": summary_of(9, 1, 0.0, 4),
    }
    lines = held_out_lines(evals)
    assert len(lines) == 4
    names = ["before training", "after the warm start", "after iteration 10", "after training"]
    for line, name, key in zip(lines, names, ["before", "after_bc", "iter_10", "after"],
                               strict=True):
        match = LINE.fullmatch(line)
        assert match, line
        a = evals[key]["all"]
        assert match[1] == name
        printed = [float(v) for v in match.groups()[1:]]
        expected = [100 * a["success"], *(100 * v for v in a["success_ci95"]),
                    100 * a["score"], a["mean_length"]]
        assert printed == pytest.approx(expected, abs=0.05 + 1e-9), line


def test_held_out_lines_take_the_callers_names():
    evals = {"before": summary_of(1, 1, 0.0, 3), "after": summary_of(2, 0, 0.0, 3)}
    lines = held_out_lines(evals, {"before": "untrained"})
    assert [LINE.fullmatch(s)[1] for s in lines] == ["untrained", "after training"]
    assert held_out_lines({}) == [] and held_out_lines({"bc": {"final_nll": 0.1}}) == []


@pytest.mark.parametrize("name", ["openai:some-model", "expert"])
def test_a_prompt_budget_is_refused_where_no_tokenizer_counts_it(name):
    """``--max-prompt-tokens`` counts a model's tokens: a served model or a scripted policy has
    no tokenizer here, so the budget is refused before anything runs (a vllm: policy has one)."""
    from gagpo.agents.policies.factory import PolicySpec
    from gagpo.evaluate import evaluate

    with pytest.raises(ValueError, match="has no tokenizer here"):
        evaluate("WebShop-v0", PolicySpec(name), episodes=1, max_prompt_tokens=100,
                 progress=False)
