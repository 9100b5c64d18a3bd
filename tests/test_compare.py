"""``gagpo compare`` (gagpo.compare): what a reader of its table relies on.

- B - A of success and score is the mean of per-goal differences on the goals both sides
  played (a goal played several times on one side averaged first); its 95% t interval is
  mean -+ t(0.975, n-1) * sd / sqrt(n), checked against a hand computation and t tables.
- The paired bootstrap interval resamples goals, covers the true difference about 95% of the
  time, and one seed gives one interval.
- The exact sign test's p-value is the two-sided binomial(n, 1/2) tail of the discordant goals.
- A step rate's interval resamples whole episodes: where an episode's steps move together it is
  much wider than a Wilson interval over steps (too narrow there), and close to it where steps
  are independent.
- Goals in only one evaluation are counted and left out; no common goal is an error.
- ``gagpo compare`` on two real ``gagpo eval --out`` folders prints the markdown table with the
  numbers ``gagpo eval`` itself reports; a side may pool several evaluations (seeds), each goal's
  plays averaged; unusable inputs exit 2 with a message, no traceback.
"""

from __future__ import annotations

import collections
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gagpo.compare import (
    ACTIONS_SHOWN,
    Episode,
    Evaluation,
    PairedT,
    compare,
    episode_ratio_interval,
    load_evaluation,
    paired_bootstrap_mean,
    paired_t,
    sign_test,
)
from gagpo.evaluate import wilson

ROOT = Path(__file__).resolve().parents[1]
REAL_EVALS = ROOT / "studies" / "real_model" / "results" / "bf16_run" / "evals"

# Student's t 0.975 quantiles from printed tables.
T_TABLE = {1: 12.7062, 4: 2.7764, 9: 2.2622, 29: 2.0452}


def ep(goal: str, won: bool = False, score: float = 0.0, steps: int = 4,
       well_formed: int | None = None, admissible: int | None = None) -> Episode:
    return Episode(goal=goal, task_type="t", won=won, score=score, steps=steps,
                   well_formed=steps if well_formed is None else well_formed,
                   admissible=steps if admissible is None else admissible)


def side(label: str, episodes: list[Episode]) -> Evaluation:
    return Evaluation(label, Path(label), tuple(episodes), {})


def test_the_paired_t_test_p_value_matches_the_tables():
    # Ten differences shifted so that mean / se is t(0.975, 9) = 2.2622: p is 0.05.
    d0 = np.array([0.3, -1.2, 0.8, 2.0, -0.4, 1.1, 0.0, 0.6, -0.9, 1.5])
    se = d0.std(ddof=1) / math.sqrt(10)
    assert paired_t(d0 - d0.mean() + T_TABLE[9] * se).p == pytest.approx(0.05, abs=1e-4)
    assert paired_t(d0 - d0.mean()).p == pytest.approx(1.0)


def test_paired_difference_and_t_interval_by_hand():
    # Five goals. Scores: A 0.2 0.5 1.0 0.0 0.6, B 0.4 0.5 1.0 0.5 1.0: d = .2 0 0 .5 .4.
    # mean .22; squared deviations .0004 .0484 .0484 .0784 .0324 sum to .208; sd = sqrt(.052)
    # = .228035; se = sd / sqrt(5) = .101980; half width t(0.975, 4) * se = 2.776445 * .101980
    # = .283142.
    a_won, b_won = [0, 1, 0, 0, 1], [1, 1, 0, 1, 0]
    a_score, b_score = [0.2, 0.5, 1.0, 0.0, 0.6], [0.4, 0.5, 1.0, 0.5, 1.0]
    a = side("A", [ep(f"g{i}", bool(a_won[i]), a_score[i]) for i in range(5)])
    b = side("B", [ep(f"g{i}", bool(b_won[i]), b_score[i]) for i in range(5)])
    r = compare(a, b, n_boot=1000)
    sc = r["score"]
    assert sc["a"] == pytest.approx(0.46) and sc["b"] == pytest.approx(0.68)
    assert sc["diff"] == pytest.approx(0.22)
    assert sc["t_ci95"] == pytest.approx([0.22 - 0.283142, 0.22 + 0.283142], abs=2e-6)
    # t = .22 / .101980 = 2.1573 on 4 degrees of freedom: between the tables' 0.10 (2.132)
    # and 0.05 (2.776) two-sided points.
    assert 0.05 < sc["t_p"] < 0.10
    # Success: d = 1 0 0 1 -1, mean .2, squared deviations .64 .04 .04 .64 1.44 sum to 2.8,
    # sd = sqrt(.7); half width 2.776445 * sqrt(.7 / 5) = 1.038851.
    s = r["success"]
    assert s["diff"] == pytest.approx(0.2)
    assert s["t_ci95"] == pytest.approx([0.2 - 1.038851, 0.2 + 1.038851], abs=2e-6)
    assert s["sign_test"] == {"b_better": 2, "a_better": 1, "ties": 2, "p": 1.0}
    # And the plain-Python formula agrees on other data.
    d = [0.3, -0.1, 0.25, 0.4, 0.0, 0.15, 0.2, -0.05, 0.1, 0.35]
    half = T_TABLE[9] * statistics.stdev(d) / math.sqrt(len(d))
    t = paired_t(d)
    assert (t.lo, t.hi) == pytest.approx((statistics.mean(d) - half, statistics.mean(d) + half),
                                         abs=1e-4)


def test_paired_t_of_one_two_or_no_differences():
    """One seed or one goal has a mean and no interval; two have the widest t interval
    (t(0.975, 1) = 12.7062); none is an error, not a nan."""
    with pytest.raises(ValueError, match="^paired_t needs at least one difference$"):
        paired_t([])
    assert paired_t([0.3]) == PairedT(0.3, None, None, None)
    # Identical differences (every goal moved by the same amount): a zero-width interval, and
    # a p of 0 (the difference is certain) or 1 (there is none), not a nan from sd = 0.
    assert paired_t([0.5, 0.5, 0.5]) == PairedT(0.5, 0.5, 0.5, 0.0)
    assert paired_t([0.0, 0.0]) == PairedT(0.0, 0.0, 0.0, 1.0)
    # d = .1, .3: mean .2, sd = sqrt(.02) = .141421, se = .1; t = 2 on 1 degree of freedom,
    # two-sided p = 1 - 2 atan(2) / pi = .295167.
    t = paired_t([0.1, 0.3])
    assert t.mean == pytest.approx(0.2)
    assert (t.lo, t.hi) == pytest.approx((0.2 - T_TABLE[1] * 0.1, 0.2 + T_TABLE[1] * 0.1),
                                         abs=1e-4)
    assert t.p == pytest.approx(1 - 2 * math.atan(2) / math.pi)


def test_sign_test_is_the_exact_binomial_tail():
    # 8 goals only B won, 1 only A won: n = 9, P(X <= 1) = (1 + 9) / 512, doubled.
    assert sign_test(8, 1) == pytest.approx(20 / 512)
    assert sign_test(1, 8) == pytest.approx(20 / 512)
    assert sign_test(0, 6) == pytest.approx(2 / 64)
    assert sign_test(5, 5) == 1.0 and sign_test(0, 0) == 1.0
    # Through a comparison: 8 + 1 discordant goals and 3 ties (2 won by both, 1 by neither).
    a = [ep(f"b{i}", False) for i in range(8)] + [ep("a0", True)] + \
        [ep("t0", True), ep("t1", True), ep("t2", False)]
    b = [ep(f"b{i}", True) for i in range(8)] + [ep("a0", False)] + \
        [ep("t0", True), ep("t1", True), ep("t2", False)]
    st = compare(side("A", a), side("B", b), n_boot=200)["success"]["sign_test"]
    assert st == {"b_better": 8, "a_better": 1, "ties": 3, "p": pytest.approx(20 / 512)}


def test_paired_bootstrap_covers_the_true_difference_and_is_reproducible():
    rng = np.random.default_rng(11)
    true_diff, n_goals, trials, covered = 0.1, 60, 200, 0
    for k in range(trials):
        difficulty = rng.uniform(0, 1, n_goals)  # shared by both sides: pairing cancels it
        a = np.clip(difficulty + rng.normal(0, 0.1, n_goals), 0, None)
        b = a + true_diff + rng.normal(0, 0.2, n_goals)
        lo, hi = paired_bootstrap_mean(b - a, n_boot=1000, seed=k)
        covered += lo <= true_diff <= hi
    assert 0.88 <= covered / trials <= 0.99  # a 95% interval, with bootstrap's small-n lean
    d = rng.normal(true_diff, 0.2, 300)
    one = paired_bootstrap_mean(d, n_boot=2000, seed=5)
    assert one == paired_bootstrap_mean(d, n_boot=2000, seed=5)
    assert one != paired_bootstrap_mean(d, n_boot=2000, seed=6)
    assert one[0] < true_diff < one[1]
    t = paired_t(d)  # on 300 goals the bootstrap and t intervals nearly agree
    assert one == pytest.approx((t.lo, t.hi), abs=0.005)


def test_episode_bootstrap_is_wider_than_wilson_over_steps_when_steps_move_together():
    # 60 episodes of 20 steps: in each, every action is admissible or none is (30 and 30). The
    # 1200 steps are really 60 independent draws: the interval must be about sqrt(20) wider
    # than a Wilson interval that treats the steps as independent.
    steps = 20
    correlated = [ep(f"g{i}", steps=steps, admissible=steps if i % 2 else 0) for i in range(60)]
    r = compare(side("A", correlated), side("B", correlated), n_boot=4000, seed=1)["admissible"]
    lo, hi = r["a"]["ci95"]
    w_lo, w_hi = wilson(600, 1200)
    assert r["a"]["rate"] == 0.5 and r["a"]["wilson_over_steps_ci95"] == [w_lo, w_hi]
    assert lo < 0.5 < hi
    assert (hi - lo) > 3 * (w_hi - w_lo)
    # Independent steps (each admissible with probability 1/2): the two agree.
    rng = np.random.default_rng(3)
    good = rng.binomial(steps, 0.5, 60)
    e_lo, e_hi = episode_ratio_interval(good, np.full(60, steps), n_boot=4000, seed=1)
    i_lo, i_hi = wilson(int(good.sum()), 60 * steps)
    assert 0.7 < (e_hi - e_lo) / (i_hi - i_lo) < 1.4


def test_rate_difference_is_paired_over_goals():
    # Goal i's episodes are long on both sides (a hard goal); B's malformed replies are fewer.
    a = [ep(f"g{i}", steps=2 + i % 7, well_formed=(2 + i % 7) - 1) for i in range(40)]
    b = [ep(f"g{i}", steps=2 + i % 7, well_formed=2 + i % 7) for i in range(40)]
    r = compare(side("A", a), side("B", b), n_boot=2000)["well_formed"]
    steps = sum(2 + i % 7 for i in range(40))
    assert r["a"]["rate"] == pytest.approx((steps - 40) / steps)
    assert r["b"]["rate"] == 1.0 and r["b"]["ci95"] == [1.0, 1.0]
    assert r["diff"] == pytest.approx(40 / steps)
    lo, hi = r["bootstrap_ci95"]
    assert 0 < lo < r["diff"] < hi
    # One seed, one interval: the comparison's seed decides every bootstrap.
    for seed, same in ((0, True), (1, False)):
        again = compare(side("A", a), side("B", b), n_boot=2000, seed=seed)["well_formed"]
        assert (again["bootstrap_ci95"] == r["bootstrap_ci95"]) == same
        assert (again["a"]["ci95"] == r["a"]["ci95"]) == same


def test_admissible_difference_is_paired_over_goals_with_each_goals_steps_summed():
    """The admissible share's B - A gets its paired bootstrap over goals like the well-formed
    one: a goal's admissible steps summed over its plays. Every goal moved by the same step
    counts gives every resample the same difference: a zero-width interval at it."""
    from gagpo.compare import format_markdown

    # A: each goal once, 2 of 4 steps admissible (50%). B: each goal twice, 4 and 2 of 4
    # admissible: 6 of 8 (75%), on every goal.
    a = [ep(f"g{i}", steps=4, admissible=2) for i in range(10)]
    b = [ep(f"g{i}", steps=4, admissible=n) for i in range(10) for n in (4, 2)]
    r = compare(side("A", a), side("B", b), n_boot=500)
    admissible = r["admissible"]
    assert (admissible["a"]["rate"], admissible["b"]["rate"], admissible["diff"]) == (
        0.5, 0.75, 0.25)
    assert admissible["bootstrap_ci95"] == [0.25, 0.25]
    row = next(line for line in format_markdown(r).splitlines()
               if line.startswith("| admissible actions % |"))
    assert row.endswith("| +25.0 [+25.0, +25.0] | bootstrap over goals; 40 and 80 steps |")


def test_one_common_goal_gives_a_difference_without_a_t_interval():
    """One goal (a smoke run, say) is a comparison with a mean and no t interval: n/a in the
    table, not an error."""
    from gagpo.compare import format_markdown

    r = compare(side("A", [ep("g1", score=0.2)]), side("B", [ep("g1", True, 0.9)]), n_boot=200)
    assert r["score"]["diff"] == pytest.approx(0.7)
    assert (r["score"]["t_ci95"], r["score"]["t_p"]) == ([None, None], None)
    assert "| score x100 | 20.0 | 90.0 | +70.0 [n/a, n/a], bootstrap [+70.0, +70.0] | p n/a" \
        in format_markdown(r)


def test_compare_refuses_bad_settings_and_names_goals_it_cannot_pair_in_full():
    a = side("A", [ep(f"a{i}") for i in range(5)])
    b = side("B", [ep(f"b{i}") for i in range(5)])
    one = Evaluation("C", Path("C"), (ep("a0"),), {"split": "test"})
    for kwargs, message in (({"seed": -1}, "seed must be >= 0, not -1"),
                            ({"seed": 1.5}, "seed must be an integer, not 1.5"),
                            ({"n_boot": 0}, "bootstrap must be >= 1, not 0"),
                            ({"n_boot": 150.5}, "bootstrap must be an integer, not 150.5"),
                            ({"n_boot": 99}, "bootstrap must be >= 100 resamples for a 95% "
                                             "interval, not 99")):
        with pytest.raises(ValueError) as refused:
            compare(a, one, **kwargs)
        assert str(refused.value) == message
    at_least = compare(a, one, n_boot=100)  # the smallest bootstrap taken
    assert (at_least["bootstrap"], at_least["meta"]) == (100, [{}, {"split": "test"}])
    with pytest.raises(ValueError) as apart:
        compare(a, b, n_boot=100)
    assert str(apart.value) == (
        "A and B share no goal (A has 5, e.g. ['a0', 'a1', 'a2']; B has 5, e.g. ['b0', 'b1', "
        "'b2']): a paired comparison needs two evaluations of the same split")


def test_compare_draws_10000_resamples_from_seed_0_unless_told():
    """Called without a seed or a bootstrap size (as the real-model study's tables call it), a
    comparison draws 10,000 resamples from seed 0, and its result and table say so."""
    from gagpo.compare import format_markdown

    rng = np.random.default_rng(4)
    a = side("A", [ep(f"g{i}", score=float(x)) for i, x in enumerate(rng.uniform(0, 1, 12))])
    b = side("B", [ep(f"g{i}", score=float(x)) for i, x in enumerate(rng.uniform(0, 1, 12))])
    plain = compare(a, b)
    assert (plain["seed"], plain["bootstrap"]) == (0, 10_000)
    assert plain == compare(a, b, seed=0, n_boot=10_000)
    assert "(10000 resamples, seed 0)" in format_markdown(plain)


def test_goals_in_one_side_only_are_left_out_and_repeats_averaged():
    a = [ep(f"g{i}", won=i % 2 == 0, score=i / 10) for i in range(10)]  # g0..g9
    b = [ep(f"g{i}", won=True, score=1.0) for i in range(3, 13)]  # g3..g12
    b.append(ep("g3", won=False, score=0.0))  # g3 twice in B: success .5, score .5
    r = compare(side("A", a), side("B", b), n_boot=500)
    assert r["goals"] == {"common": 7, "only_a": 3, "only_b": 3, "repeated_a": 0,
                          "repeated_b": 1}
    assert r["episodes"] == [7, 8]
    # Common goals g3..g9: A won g4 g6 g8 (3 of 7); B's per-goal success 0.5, then 1 x 6.
    assert r["success"]["a"] == pytest.approx(3 / 7)
    assert r["success"]["b"] == pytest.approx(6.5 / 7)
    assert r["success"]["diff"] == pytest.approx(3.5 / 7)
    assert r["score"]["a"] == pytest.approx(sum(range(3, 10)) / 70)
    assert r["score"]["b"] == pytest.approx(6.5 / 7)
    # g3: A lost, B half won: B better; g5, g7, g9 B better; g4 g6 g8 tie (won on both).
    assert r["success"]["sign_test"]["b_better"] == 4
    assert r["success"]["sign_test"]["a_better"] == 0
    json.dumps(r)  # JSON-ready


def test_no_common_goal_is_an_error():
    with pytest.raises(ValueError, match="share no goal"):
        compare(side("A", [ep("x")]), side("B", [ep("y")]))


# ---------------------------------------------------------------------------------------------
# The command, on what gagpo eval really writes


def gagpo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gagpo.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def evals(tmp_path_factory) -> dict[str, Path]:
    """Two policies' evaluations of WebShop's first 10 test goals, and the rule policy's of
    the train split, written by gagpo eval --out."""
    from gagpo.cli import main

    root = tmp_path_factory.mktemp("evals")
    for name, policy, split in (("random", "random", "test"), ("rule", "rule", "test"),
                                ("rule_train", "rule", "train")):
        assert main(["eval", "--env", "WebShop-v0", "--policy", policy, "--split", split,
                     "--episodes", "10", "--batch", "10", "--out", str(root / name)]) == 0
    return {name: root / name for name in ("random", "rule", "rule_train")}


def test_cli_prints_the_table_with_gagpo_evals_own_numbers(evals, tmp_path, capsys):
    from gagpo.cli import main

    out = tmp_path / "cmp" / "random_vs_rule.json"
    assert main(["compare", str(evals["random"]), str(evals["rule"] / "summary.json"),
                 "--out", str(out), "--seed", "3", "--bootstrap", "500",
                 "--labels", "random,rule"]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["goals"] == {"common": 10, "only_a": 0, "only_b": 0, "repeated_a": 0,
                               "repeated_b": 0}
    assert result["labels"] == ["random", "rule"] and result["seed"] == 3
    # Each side's success, score and step rates are those gagpo eval reported for it.
    for i, name in enumerate(("random", "rule")):
        written = json.loads((evals[name] / "summary.json").read_text())
        assert written["env_kwargs"]["split"] == "test"  # what the viewer rebuilds it from
        summary = written["by_type"]["all"]
        key = "ab"[i]
        assert result["success"][key] == pytest.approx(summary["success"])
        assert result["score"][key] == pytest.approx(summary["score"])
        for rate in ("well_formed", "admissible"):
            assert result[rate][key]["rate"] == pytest.approx(summary[rate])
    # gagpo eval's step-rate intervals are compare's, at eval's seed and resamples: whole
    # episodes resampled.
    same = compare(load_evaluation(evals["random"]), load_evaluation(evals["rule"]), seed=0,
                   n_boot=10_000)
    for i, name in enumerate(("random", "rule")):
        summary = json.loads((evals[name] / "summary.json").read_text())["by_type"]["all"]
        for rate in ("well_formed", "admissible"):
            assert same[rate]["ab"[i]]["ci95"] == pytest.approx(summary[f"{rate}_ci95"])
    blocks = printed.strip().split("\n\n")
    table = next(b for b in blocks if b.startswith("| metric")).splitlines()
    assert table[0] == "| metric | A: random | B: rule | B - A [95% CI] | p or note |"
    assert [row.split(" | ")[0] for row in table[2:]] == [
        "| success %", "| score x100", "| well-formed replies %", "| admissible actions %"]
    s = result["success"]
    assert table[2].startswith(f"| success % | {100 * s['a']:.1f} | {100 * s['b']:.1f} | "
                               f"{100 * s['diff']:+.1f} [")
    assert f"B better on {s['sign_test']['b_better']} goals" in table[2]
    # The actions each side took most often, counted over every step gagpo eval recorded.
    steps = {n: [json.loads(line) for line in (evals[n] / "trajectories.jsonl").open()]
             for n in ("random", "rule")}
    taken = {n: collections.Counter(r["action"] for r in rows) for n, rows in steps.items()}
    actions = result["actions"]
    assert actions["steps"] == [len(steps["random"]), len(steps["rule"])]
    assert len(actions["top"]) == ACTIONS_SHOWN
    for row in actions["top"]:
        assert row["counts"] == [taken["random"][row["action"]], taken["rule"][row["action"]]]
    share = {a: taken["random"][a] / len(steps["random"]) + taken["rule"][a] / len(steps["rule"])
             for a in taken["random"] | taken["rule"]}
    assert [row["action"] for row in actions["top"]] == sorted(
        share, key=lambda a: (-share[a], a))[:ACTIONS_SHOWN]
    listed = next(b for b in blocks if b.startswith("| action")).splitlines()
    first = actions["top"][0]
    assert listed[0] == "| action | A: random | B: rule |"
    assert listed[2] == (f"| `{first['action']}` | {first['counts'][0]} "
                         f"({100 * first['counts'][0] / len(steps['random']):.1f}%) | "
                         f"{first['counts'][1]} "
                         f"({100 * first['counts'][1] / len(steps['rule']):.1f}%) |")
    # The folder and its summary.json name its episodes.jsonl; its trajectories.jsonl, every
    # step, holds the same episodes: one seed, one result whichever file is read.
    assert result["sources"] == [str(evals[n] / "episodes.jsonl") for n in ("random", "rule")]
    again = tmp_path / "again.json"
    assert main(["compare", str(evals["random"] / "trajectories.jsonl"),
                 str(evals["rule"] / "trajectories.jsonl"), "--out", str(again), "--seed", "3",
                 "--bootstrap", "500", "--labels", "random,rule"]) == 0
    from_steps = json.loads(again.read_text())
    assert from_steps.pop("sources") == [str(evals[n] / "trajectories.jsonl")
                                         for n in ("random", "rule")]
    result.pop("sources")
    assert from_steps == result


def test_a_side_pools_several_evaluations_of_the_same_goals(evals, tmp_path, capsys):
    """EVAL,EVAL as one side (a recipe's seeds): each goal's plays are averaged before the goals
    are paired, so pooling the random and rule policies against random gives half of rule -
    random on every goal; a folder whose name holds a comma is still one evaluation."""
    from gagpo.cli import main

    def run(a: str, b: str) -> dict:
        out = tmp_path / f"cmp{len(list(tmp_path.glob('cmp*')))}.json"
        assert main(["compare", a, b, "--out", str(out), "--bootstrap", "500"]) == 0
        return json.loads(out.read_text())

    alone = run(str(evals["random"]), str(evals["rule"]))
    both = run(str(evals["random"]), f"{evals['random']},{evals['rule']}")
    printed = capsys.readouterr().out
    assert both["goals"]["common"] == 10 and both["goals"]["repeated_b"] == 10
    assert both["episodes"] == [10, 20]
    for metric in ("success", "score"):
        assert both[metric]["diff"] == pytest.approx(alone[metric]["diff"] / 2)
        assert both[metric]["b"] == pytest.approx((alone[metric]["a"] + alone[metric]["b"]) / 2)
    assert both["labels"] == ["random", "random+rule"]
    assert "| metric | A: random | B: random+rule |" in printed
    comma = tmp_path / "rule,copy"
    shutil.copytree(evals["rule"], comma)
    assert run(str(evals["random"]), str(comma))["score"] == alone["score"]


def test_a_pooled_side_lies_where_its_evaluations_lie_and_plays_one_split():
    from gagpo.compare import pooled

    test = {"env": "WebShop-v0", "split": "test", "policy": {"name": "s0"}}
    s0 = Evaluation("s0", Path("evals/seeds/eval_s0/episodes.jsonl"), (ep("g0", True),), test)
    s1 = Evaluation("s1", Path("evals/seeds/eval_s1/episodes.jsonl"), (ep("g0"),),
                    test | {"policy": {"name": "s1"}})
    both = pooled("both", [s0, s1])
    assert both.source == Path("evals/seeds") and both.meta == test and both.label == "both"
    assert both.episodes == s0.episodes + s1.episodes
    assert pooled("one", [s0]).source == s0.source
    # A side without a summary (no meta) takes its partner's env and split.
    bare = Evaluation("bare", Path("elsewhere/episodes.jsonl"), (ep("g0"),), {})
    assert pooled("mixed", [bare, s1]).meta == s1.meta
    absolute = Evaluation("abs", Path("evals/seeds/eval_s2/episodes.jsonl").resolve(),
                          (ep("g0"),), test)
    assert pooled("mixed", [s0, absolute]).source == Path("evals/seeds").resolve()
    train = Evaluation("train", Path("evals/train/episodes.jsonl"), (ep("g0"),),
                       test | {"split": "train"})
    with pytest.raises(ValueError, match="^cannot pool evaluations of different environments "
                                         r"or splits \(WebShop-v0 test, WebShop-v0 train\): a "
                                         "side's evaluations must play the same goals$"):
        pooled("two splits", [s0, train])
    with pytest.raises(ValueError, match="^no evaluations to pool$"):
        pooled("none", [])
    # Sides with no summary at all pool to an empty one (the table then names no split).
    assert pooled("bare", [bare, bare]).meta == {}


def test_the_markdown_table_prints_each_figure_where_a_reader_looks_for_it():
    """Every number of a comparison in its cell, signed where it is a difference, with its
    interval; p-values to three places, below 0.001 as such, n/a where there is none."""
    from gagpo.compare import format_markdown

    def rate(a: float, b: float) -> dict:
        return {"a": {"rate": a, "ci95": [a - 0.05, a + 0.05], "steps": 70},
                "b": {"rate": b, "ci95": [b - 0.04, b + 0.03], "steps": 81},
                "diff": b - a, "bootstrap_ci95": [b - a - 0.1, b - a + 0.02]}

    result = {
        "labels": ["warm", "rl"], "goals": {"common": 7, "only_a": 2, "only_b": 0},
        "episodes": [7, 9], "bootstrap": 500, "seed": 3,
        "success": {"a": 0.125, "b": 0.25, "diff": 0.125, "t_ci95": [-0.0251, 0.2751],
                    "bootstrap_ci95": [0.0, 0.25],
                    "sign_test": {"p": 0.0004, "b_better": 9, "a_better": 0}},
        "score": {"a": 0.5, "b": 0.4, "diff": -0.1, "t_ci95": [None, None],
                  "bootstrap_ci95": [-0.2, -0.05], "t_p": None},
        "well_formed": rate(0.9, 0.95), "admissible": rate(0.8, 0.7),
    }
    assert format_markdown(result).splitlines() == [
        "A = warm, B = rl: 7 common goals (7 and 9 episodes; 2 goals only in A and 0 only in "
        "B left out). B - A: mean of per-goal differences, 95% paired t interval, then paired "
        "bootstrap over goals (500 resamples, seed 3); step rates' A and B intervals resample "
        "whole episodes.",
        "",
        "| metric | A: warm | B: rl | B - A [95% CI] | p or note |",
        "|---|---|---|---|---|",
        "| success % | 12.5 | 25.0 | +12.5 [-2.5, +27.5], bootstrap [+0.0, +25.0] | p < 0.001 "
        "(exact sign test: B better on 9 goals, A on 0) |",
        "| score x100 | 50.0 | 40.0 | -10.0 [n/a, n/a], bootstrap [-20.0, -5.0] | p n/a "
        "(paired t test) |",
        "| well-formed replies % | 90.0 [85.0, 95.0] | 95.0 [91.0, 98.0] | +5.0 [-5.0, +7.0] | "
        "bootstrap over goals; 70 and 81 steps |",
        "| admissible actions % | 80.0 [75.0, 85.0] | 70.0 [66.0, 73.0] | -10.0 [-20.0, -8.0] | "
        "bootstrap over goals; 70 and 81 steps |",
    ]
    result["goals"]["only_a"] = 0
    result["success"]["sign_test"]["p"] = 0.001
    result["score"]["t_p"] = 0.0123
    text = format_markdown(result)
    assert "(7 and 9 episodes). B - A" in text and "| p = 0.001 (exact sign test" in text
    assert "| p = 0.012 (paired t test) |" in text


def test_an_episodes_file_gives_each_episodes_counts_and_its_summary_the_sides_split(tmp_path):
    folder = tmp_path / "eval_rl"
    folder.mkdir()
    records = [
        {"task_id": "webshop:3", "task_type": "beauty", "won": True, "score": 1.0, "length": 5,
         "malformed_replies": 1, "invalid_actions": 2},
        {"task_id": "webshop:4", "won": False, "score": 0.25, "length": 10,
         "malformed_replies": 0, "invalid_actions": 7},
    ]
    lines = [json.dumps(r) for r in records]
    # A blank line, then a last line torn by a stop while it was written: skipped.
    (folder / "episodes.jsonl").write_text(lines[0] + "\n\n" + lines[1] + "\n"
                                           + '{"task_id": "webshop:5", "won"')
    (folder / "summary.json").write_text(json.dumps(
        {"env": "WebShop-v0", "split": "test", "policy": {"name": "runs/rl/final"}}))
    ev = load_evaluation(folder)
    assert ev.label == "eval_rl" and ev.source == folder / "episodes.jsonl"
    assert ev.episodes == (
        Episode("webshop:3", "beauty", True, 1.0, steps=5, well_formed=4, admissible=3),
        Episode("webshop:4", "", False, 0.25, steps=10, well_formed=10, admissible=3))
    assert ev.meta == {"env": "WebShop-v0", "split": "test", "policy": "runs/rl/final"}
    # A bad line before the last loses an episode: an error that says where.
    (folder / "episodes.jsonl").write_text(lines[0] + "\n{oops\n" + lines[1] + "\n")
    with pytest.raises(ValueError, match=r"episodes.jsonl, line 2: not an episode record"):
        load_evaluation(folder)


def test_a_bad_record_is_refused_with_its_line_and_what_was_wrong_with_it(tmp_path):
    """A line that is not an episode record is named with the error that said so: a field
    missing by name, a count that is not a number, a line that is not JSON."""
    folder = tmp_path / "eval"
    folder.mkdir()
    good = {"task_id": "g1", "won": False, "score": 0.0, "length": 3, "malformed_replies": 0,
            "invalid_actions": 0}
    for bad, error in (
        (json.dumps({k: v for k, v in good.items() if k != "score"}), "KeyError: 'score'"),
        (json.dumps(good | {"length": "three"}),
         "ValueError: invalid literal for int() with base 10: 'three'"),
        ("{oops", "JSONDecodeError: Expecting property name enclosed in double quotes: line 1 "
                  "column 2 (char 1)"),
    ):
        (folder / "episodes.jsonl").write_text(bad + "\n" + json.dumps(good) + "\n")
        with pytest.raises(ValueError) as refused:
            load_evaluation(folder)
        assert str(refused.value) == (f"{folder / 'episodes.jsonl'}, line 1: not an episode "
                                      f"record ({error})")


def test_an_episodes_file_without_a_whole_record_is_refused_by_name(tmp_path):
    """An empty episodes.jsonl (an evaluation stopped before its first episode ended), blank
    lines, or one torn line: no episodes, an error naming the file, not an empty side."""
    folder = tmp_path / "eval"
    folder.mkdir()
    for text in ("", "\n\n", '{"task_id": "g1", "won"'):
        (folder / "episodes.jsonl").write_text(text)
        with pytest.raises(ValueError) as refused:
            load_evaluation(folder)
        assert str(refused.value) == f"{folder / 'episodes.jsonl'} holds no episode records"


def test_records_in_any_script_read_the_same_whatever_the_locale(tmp_path):
    """gagpo eval writes its records in UTF-8, goals and actions as the env words them, accents
    and all; gagpo compare reads them as UTF-8 under any locale: here the C locale's ASCII with
    Python's UTF-8 mode off, where the locale's encoding would not decode them."""
    actions = ["search[crème brûlée]", "click[buy now]"]
    for name, won in (("a", False), ("b", True)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "episodes.jsonl").write_text("".join(
            json.dumps({"task_id": f"café:{i}", "won": won, "score": 0.5, "length": 2,
                        "malformed_replies": 0, "invalid_actions": 0, "actions": actions},
                       ensure_ascii=False) + "\n" for i in range(2)), encoding="utf-8")
    ascii_locale = os.environ | {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0",
                                 "PYTHONCOERCECLOCALE": "0", "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run([sys.executable, "-m", "gagpo.cli", "compare", str(tmp_path / "a"),
                           str(tmp_path / "b"), "--bootstrap", "200"], capture_output=True,
                          encoding="utf-8", cwd=ROOT, env=ascii_locale, timeout=120)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    assert printed[0].startswith("A = a, B = b: 2 common goals (2 and 2 episodes).")
    assert "| `search[crème brûlée]` | 2 (50.0%) | 2 (50.0%) |" in printed


def test_actions_are_counted_where_both_sides_name_them(tmp_path):
    """Records that name their actions (gagpo eval's since they were kept) are counted; an
    older side without them leaves the count out, not a table of zeros; a record whose actions
    do not match its length is refused."""
    from gagpo.compare import format_markdown

    pages = ("click[next >]",) * 3 + ("click[buy now]",)
    buys = ("search[red shoes]", "click[b01]", "click[buy now]", "click[buy now]")
    a = side("A", [replace(ep("g1"), actions=buys), replace(ep("g2"), actions=buys)])
    b = side("B", [replace(ep("g1"), actions=pages), replace(ep("g2"), actions=buys)])
    result = compare(a, b, n_boot=200)
    assert result["actions"] == {"steps": [8, 8], "top": [
        {"action": "click[buy now]", "counts": [4, 3]},
        {"action": "click[b01]", "counts": [2, 1]},  # level with next >: ties by name
        {"action": "click[next >]", "counts": [0, 3]},
        {"action": "search[red shoes]", "counts": [2, 1]}]}
    text = format_markdown(result)
    assert "| `click[next >]` | 0 (0.0%) | 3 (37.5%) |" in text
    # The table under its own header; a reply's | or ` would break the row or the code span.
    odd = side("B", [replace(ep("g1"), actions=("search[a|b]", "search[`x`]")),
                     replace(ep("g2"), actions=buys)])
    lines = format_markdown(compare(a, odd, n_boot=200)).splitlines()
    at = lines.index("The actions taken most often (steps, and their share of each side's 8 "
                     "and 6 steps):")
    assert lines[at + 2:at + 4] == ["| action | A: A | B: B |", "|---|---|---|"]
    assert "| `search[a\\|b]` | 0 (0.0%) | 1 (16.7%) |" in lines
    assert "| `search['x']` | 0 (0.0%) | 1 (16.7%) |" in lines
    older = side("B", [ep("g1"), ep("g2")])
    assert compare(a, older, n_boot=200)["actions"] is None
    assert "| action" not in format_markdown(compare(a, older, n_boot=200))
    folder = tmp_path / "eval"
    folder.mkdir()
    record = {"task_id": "g1", "won": False, "score": 0.0, "length": 3, "malformed_replies": 0,
              "invalid_actions": 0, "actions": list(buys)}
    (folder / "episodes.jsonl").write_text(json.dumps(record) + "\n" + json.dumps(record)
                                           + "\n")
    with pytest.raises(ValueError, match=r"line 1: not an episode record .*4 actions for 3"):
        load_evaluation(folder)
    record |= {"actions": "abc"}  # as many characters as steps: still not a list of actions
    (folder / "episodes.jsonl").write_text(json.dumps(record) + "\n" + json.dumps(record)
                                           + "\n")
    with pytest.raises(ValueError, match=r"line 1: not an episode record .*a str, not a list"):
        load_evaluation(folder)


def test_trajectories_give_the_same_episodes_as_the_episodes_file(evals, tmp_path):
    """An evaluation written before episodes.jsonl existed is read from its steps: the same
    goals, task types and counts; steps without their flags are refused, not counted."""
    steps = tmp_path / "steps_only"
    steps.mkdir()
    shutil.copy(evals["random"] / "trajectories.jsonl", steps / "trajectories.jsonl")
    from_steps = load_evaluation(steps).episodes
    assert from_steps == load_evaluation(evals["random"]).episodes
    assert {e.task_type for e in from_steps} - {""}  # real task types, not blanks
    rows = [json.loads(line) for line in (steps / "trajectories.jsonl").read_text().splitlines()]
    for flag in ("action_valid", "well_formed"):
        broken = [dict(r) for r in rows]
        del broken[0][flag]
        (steps / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in broken))
        with pytest.raises(ValueError, match="lack the well_formed or action_valid flags"):
            load_evaluation(steps)


def test_run_compare_names_single_sides_as_asked_and_keeps_its_documented_defaults(evals,
                                                                                  capsys):
    from gagpo.compare import run_compare

    named = run_compare(evals["random"], evals["rule"], n_boot=200, labels=["before", "after"])
    assert named["labels"] == ["before", "after"]
    assert "A = before, B = after: 10 common goals" in capsys.readouterr().out
    plain = run_compare(evals["random"], evals["rule"])
    assert (plain["labels"], plain["seed"], plain["bootstrap"]) == (["random", "rule"], 0,
                                                                    10_000)


def _write_eval(folder: Path, goals: list[str], split: str) -> Path:
    """An evaluation folder as gagpo eval --out writes it: one episode per goal named."""
    folder.mkdir(parents=True)
    (folder / "episodes.jsonl").write_text("".join(
        json.dumps({"task_id": g, "won": False, "score": 0.5, "length": 3,
                    "malformed_replies": 0, "invalid_actions": 1}) + "\n" for g in goals))
    (folder / "summary.json").write_text(json.dumps({"env": "WebShop-v0", "split": split}))
    return folder


def test_run_compare_says_what_it_left_out_averaged_or_paired_across_splits(tmp_path, capsys):
    """The notes above the table: goals of one side only, goals played several times, sides
    of other splits; two folders of one name become A and B; the JSON lands where asked."""
    from gagpo.compare import run_compare

    a = _write_eval(tmp_path / "x" / "eval", ["g1", "g1", "g2", "g3"], "test")
    b = _write_eval(tmp_path / "y" / "eval", ["g1", "g2"], "train")
    out = tmp_path / "deep" / "er" / "result.json"
    result = run_compare(a, b, out=out, n_boot=200)
    printed = capsys.readouterr().out.splitlines()
    assert printed[:3] == [
        "note: 1 goals only in A and 0 only in B are left out: compared on the 2 common goals",
        "note: 1 goals were played several times in A: their episodes are averaged per goal",
        "note: A is WebShop-v0 test, B is WebShop-v0 train"]
    assert printed[3].startswith("A = A, B = B: 2 common goals (3 and 2 episodes;")
    assert result["labels"] == ["A", "B"]
    assert result["sources"] == [str(a / "episodes.jsonl"), str(b / "episodes.jsonl")]
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    run_compare(b, _write_eval(tmp_path / "z" / "other", ["g2", "g1"], "train"), n_boot=200)
    assert not [line for line in capsys.readouterr().out.splitlines()
                if line.startswith("note:")]  # same goals, once each, one split
    single = _write_eval(tmp_path / "one", ["g9"], "test")  # a file of one line
    assert [e.goal for e in load_evaluation(single).episodes] == ["g9"]


def _notes(capsys) -> list[str]:
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]


def test_run_compare_notes_goals_played_several_times_in_b(tmp_path, capsys):
    from gagpo.compare import run_compare

    a = _write_eval(tmp_path / "once", ["g1", "g2"], "test")
    b = _write_eval(tmp_path / "twice", ["g1", "g2", "g2", "g1", "g1"], "test")
    assert run_compare(a, b, n_boot=200)["goals"]["repeated_b"] == 2
    assert _notes(capsys) == ["note: 2 goals were played several times in B: their episodes "
                              "are averaged per goal"]


def test_run_compare_notes_sides_of_different_environments_on_one_split(tmp_path, capsys):
    """Two sides named the same split of different environments are not the same goals: the
    note names both environments."""
    from gagpo.compare import run_compare

    a = _write_eval(tmp_path / "shop", ["g1", "g2"], "test")
    b = _write_eval(tmp_path / "household", ["g1", "g2"], "test")
    (b / "summary.json").write_text(json.dumps({"env": "ALFWorld-v0", "split": "test"}))
    run_compare(a, b, n_boot=200)
    assert _notes(capsys) == ["note: A is WebShop-v0 test, B is ALFWorld-v0 test"]


def test_an_evaluation_without_its_summary_compares_with_no_env_or_split(tmp_path, capsys):
    """Episodes sent on without the summary.json beside them still compare: that side has no
    env, split or policy (an empty meta in the JSON), and no note pairs its split with the
    other's."""
    from gagpo.compare import run_compare

    bare = _write_eval(tmp_path / "bare", ["g1", "g2"], "test")
    (bare / "summary.json").unlink()
    full = _write_eval(tmp_path / "full", ["g1", "g2"], "train")
    assert load_evaluation(bare).meta == {}
    out = tmp_path / "cmp.json"
    result = run_compare(bare, full, out=out, n_boot=200)
    assert _notes(capsys) == []
    meta = [{}, {"env": "WebShop-v0", "split": "train", "policy": None}]
    assert result["meta"] == meta and json.loads(out.read_text())["meta"] == meta


def test_run_compare_refuses_labels_other_than_two_names_and_quotes_them():
    from gagpo.compare import run_compare

    for labels, given in ((["a", "b", "c"], "'a,b,c'"), (["before", " "], "'before, '")):
        with pytest.raises(ValueError) as refused:
            run_compare("nowhere_a", "nowhere_b", labels=labels)
        assert str(refused.value) == f"--labels takes two names, A,B, not {given}"


def test_cli_errors_exit_2_with_a_message(evals, tmp_path, capsys):
    from gagpo.cli import main

    summary_only = tmp_path / "summary_only"
    summary_only.mkdir()
    shutil.copy(evals["rule"] / "summary.json", summary_only / "summary.json")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "trajectories.jsonl").write_text("")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"rows": [1, 2]}))
    nested = tmp_path / "nested.json"  # objects in an object, none a held-out summary
    nested.write_text(json.dumps({"rows": {"n": 2}}))
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    trained = tmp_path / "trained"
    trained.mkdir()
    shutil.copy(ROOT / "benchmarks/results/demo/evals.json", trained / "evals.json")
    cases = [
        ((str(tmp_path / "nowhere"), str(evals["rule"])), "no such file or folder"),
        ((str(evals["rule"]), str(evals["rule_train"])), "share no goal"),
        # A committed evaluation: gagpo eval's summary, copied without its trajectories.
        ((str(REAL_EVALS / "eval_grpo.json"), str(evals["rule"])), "eval_grpo.json has no "
         "per-episode records (it is a gagpo eval summary: rates per task type only); gagpo "
         "compare pairs episodes by goal and reads the trajectories.jsonl that gagpo eval "
         "--out DIR writes beside its summary.json"),
        ((str(summary_only), str(evals["rule"])), "summary.json has no per-episode records"),
        ((str(ROOT / "benchmarks/results/demo/evals.json"), str(evals["rule"])),
         "(it is a training run's held-out summaries; the trainer keeps no episodes of them: "
         "evaluate its checkpoint with gagpo export, then gagpo eval --out)"),
        ((str(other), str(evals["rule"])), "(it is not an evaluation gagpo writes)"),
        ((str(nested), str(evals["rule"])), "(it is not an evaluation gagpo writes)"),
        ((str(nothing), str(evals["rule"])), "holds no evaluation: gagpo compare reads the "
         "episodes.jsonl or trajectories.jsonl that gagpo eval --out DIR writes"),
        ((str(trained), str(evals["rule"])), "evals.json has no per-episode records (it is a "
         "training run's held-out summaries"),
        ((str(empty), str(evals["rule"])), "holds no episode records"),
        ((f"{evals['rule']},,{evals['random']}", str(evals["rule"])), "an empty path"),
        ((f"{evals['rule']},{tmp_path / 'nowhere'}", str(evals["rule"])),
         "no such file or folder"),
        ((str(evals["random"]), str(evals["rule"]), "--labels", "onlyone"), "--labels"),
        ((str(evals["random"]), str(evals["rule"]), "--bootstrap", "10"), "bootstrap"),
    ]
    for args, message in cases:
        assert main(["compare", *args]) == 2, args  # an uncaught exception would fail here
        err = capsys.readouterr().err
        assert err.startswith("gagpo: error:") and message in err, (args, err)
    # The installed command: a message on stderr, no traceback.
    done = gagpo("compare", str(REAL_EVALS / "eval_grpo.json"), str(REAL_EVALS / "eval_gagpo.json"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "eval_grpo.json has no per-episode records" in done.stderr
