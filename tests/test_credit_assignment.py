"""benchmarks/credit_assignment.py: the generalising policy's gradient, the critics, the
advantage diagnostics, credit quality's correlation, and the benchmark's quick path."""

from __future__ import annotations

import time

import numpy as np
import pytest

from benchmarks import credit_assignment as ca
from gagpo.advantages import compute_advantages

INSTRUCTION = "i want a red cotton shirt, price lower than 30.00 dollars"


def shop_context(obs: str, key: str = "k", task: str = "0") -> ca.Context:
    return ca.Context(task, key, obs, INSTRUCTION)


RESULTS_PAGE = ("Instruction: [SEP] " + INSTRUCTION + " [SEP] Back to Search [SEP] Page 1 "
                "[SEP] B01 [SEP] Red Cotton Shirt for Men [SEP] $12.0 [SEP] B02 [SEP] Blue "
                "Denim Jacket [SEP] $40.0")
ACTIONS = ["click[back to search]", "click[b01]", "click[b02]"]


def test_describe_names_the_product_behind_an_id() -> None:
    assert ca.describe("click[b01]", RESULTS_PAGE) == "click[b01] red cotton shirt for men"
    assert ca.describe("click[back to search]", RESULTS_PAGE).endswith("page 1")
    assert ca.describe("go to drawer 1", "You see a drawer 1.") == "go to drawer 1"


def test_linear_gradient_matches_finite_differences() -> None:
    policy = ca.HashedLinearSoftmax()
    ctx = shop_context(RESULTS_PAGE)
    touched = np.unique(np.concatenate([ca.action_features(ctx, a)[0] for a in ACTIONS]))
    policy.w[touched] = np.random.default_rng(0).normal(0, 2.0, len(touched))
    for a in range(len(ACTIONS)):
        idx, vals = policy.grad_log_prob(ctx, ACTIONS, a)
        analytic = np.bincount(idx, vals, minlength=ca.BUCKETS)[touched]
        numeric = np.empty(len(touched))
        for k, j in enumerate(touched):
            old, eps = policy.w[j], 1e-6
            policy.w[j] = old + eps
            up = np.log(policy.probs(ctx, ACTIONS)[a])
            policy.w[j] = old - eps
            down = np.log(policy.probs(ctx, ACTIONS)[a])
            policy.w[j] = old
            numeric[k] = (up - down) / (2 * eps)
        np.testing.assert_allclose(analytic, numeric, atol=1e-6)
        assert np.abs(analytic).max() > 1e-3  # the check compared something


def test_linear_update_follows_its_gradient() -> None:
    """update() is w += step * sum_t A_t grad log pi(a_t | s_t), at the rollout's w."""
    policy = ca.HashedLinearSoftmax()
    ctxs = [shop_context(RESULTS_PAGE), shop_context(RESULTS_PAGE + " [SEP] Next >", key="j")]
    taken, adv = [1, 2], np.array([1.5, -0.5])
    expected = np.zeros(ca.BUCKETS)
    for ctx, a, x in zip(ctxs, taken, adv, strict=True):
        i, v = policy.grad_log_prob(ctx, ACTIONS, a)
        expected += 0.3 * x * np.bincount(i, v, minlength=ca.BUCKETS)
    policy.update(ctxs, [ACTIONS, ACTIONS], taken, adv, 0.3)
    np.testing.assert_allclose(policy.w, expected)


def test_credit_at_one_state_moves_similar_states_only_for_the_linear_policy() -> None:
    """Rewarding the matching product on one page raises it on another page of the same kind
    (another state key, other ids and prices) for the linear policy, not for the table."""
    seen = shop_context(RESULTS_PAGE, key="page-a")
    other_page = RESULTS_PAGE.replace("B01", "B07").replace("B02", "B08").replace("$12", "$9")
    other = shop_context(other_page, key="page-b", task="1")
    other_actions = ["click[back to search]", "click[b07]", "click[b08]"]
    for policy, moves in ((ca.HashedLinearSoftmax(), True), (ca.TabularSoftmax(), False)):
        before = policy.probs(other, other_actions)[1]
        policy.update([seen], [ACTIONS], [1], np.array([1.0]), 1.0)
        after = policy.probs(other, other_actions)[1]
        assert bool(after > before + 0.01) == moves, type(policy).__name__


def chain(length: int, reward: float = 10.0) -> dict:
    """One episode through states 0..length-1, the reward at its last step."""
    return {"group": [0] * length, "trajectory": [0] * length, "step": list(range(length)),
            "key": [f"s{t}" for t in range(length)],
            "reward": [0.0] * (length - 1) + [reward]}


def critic_converges(critic: ca.Critic, ctxs: list[ca.Context], iterations: int,
                     step_size: float) -> np.ndarray:
    """Fit the critic to PPO's lambda-return targets of the chain, again and again."""
    table = chain(len(ctxs))
    for _ in range(iterations):
        value = critic.values(ctxs)
        _, details = compute_advantages("ppo", **table, gamma=0.95, lam=0.95, value=value,
                                        return_details=True)
        critic.fit(ctxs, details["value_target"], step_size)
    return critic.values(ctxs)


def test_tabular_critic_converges_to_the_chain_values() -> None:
    ctxs = [ca.Context("0", f"s{t}", f"room {t}", "go") for t in range(5)]
    truth = 10.0 * 0.95 ** np.arange(4, -1, -1)
    np.testing.assert_allclose(critic_converges(ca.TabularCritic(), ctxs, 200, 0.5), truth,
                               atol=1e-6)


def test_linear_critic_converges_to_the_chain_values() -> None:
    words = ["kitchen", "garden", "cellar", "attic", "porch"]
    ctxs = [ca.Context("0", f"s{t}", f"you are in the {w}", "go") for t, w in enumerate(words)]
    truth = 10.0 * 0.95 ** np.arange(4, -1, -1)
    np.testing.assert_allclose(critic_converges(ca.HashedLinearCritic(), ctxs, 3000, 1.0),
                               truth, atol=0.05)


def test_gagpo_zero_share_is_the_singleton_share_on_a_tree() -> None:
    """Three rollouts of one task: A and B share s0 and s1 then part (A wins), C parts at s0.
    The literal GAGPO's credit (before its normalisation) vanishes exactly at the 4 rows in
    states no other rollout visited, and nowhere else; the default GAGPO's nowhere."""
    keys = ["s0", "s1", "s2", "s0", "s1", "s3", "s0", "s4", "s5"]
    batch = {"group": [0] * 9, "trajectory": [0, 0, 0, 1, 1, 1, 2, 2, 2],
             "step": [0, 1, 2] * 3, "key": keys,
             "reward": [0, 0, 10.0, 0, 0, 0, 0, 0, 0]}
    args = ca.Args()
    adv, details = ca.advantages("gagpo:paper", batch, args, None)
    singleton = np.mean(details["state_group_size"] == 1)
    assert singleton == pytest.approx(4 / 9)
    assert ca.zero_share("gagpo:paper", batch, args, None, adv) == pytest.approx(singleton)
    default = ca.advantages("gagpo", batch, args, None)[0]
    assert ca.zero_share("gagpo", batch, args, None, default) == 0.0
    # GRPO's credit is 0 only where the group's returns are equal: not here.
    grpo = ca.advantages("grpo", batch, args, None)[0]
    assert ca.zero_share("grpo", batch, args, None, grpo) == 0.0


def test_spread_and_correlations() -> None:
    iqr, big = ca.spread(np.array([-2.0, -0.5, 0.0, 0.5, 3.0]))
    assert iqr == pytest.approx(1.0) and big == pytest.approx(0.4)
    truth = np.array([0.0, 1.0, 2.0, 3.0])
    assert ca.correlation(truth ** 3, truth, rank=True) == pytest.approx(1.0)
    assert ca.correlation(truth ** 3, truth) < 0.99  # Pearson sees the curvature
    assert ca.correlation(np.zeros(4), truth) == 0.0  # no credit: no information
    assert np.isnan(ca.correlation(truth, np.ones(4)))  # nothing to predict
    np.testing.assert_allclose(ca._ranks(np.array([5.0, 1.0, 5.0])), [1.5, 0.0, 1.5])


def test_quick_run_on_webshop_within_seconds(tmp_path) -> None:
    started = time.perf_counter()
    runs = ca.main(["--env", "WebShop-v0", "--quick", "--policy", "linear", "--methods", "ppo",
                    "--seeds", "1", "--credit-rows", "4", "--credit-rollouts", "2",
                    "--out", str(tmp_path)])
    assert time.perf_counter() - started < 30
    assert [(r["method"], r["policy"]) for r in runs] == [("ppo", "linear")]
    assert len(runs[0]["credit"]) == ca.Args().credit_points
    text = (tmp_path / "credit_assignment.md").read_text()
    assert "| WebShop-v0 | linear | ppo (lr 10) | 1 |" in text
    assert "| WebShop-v0 | linear | gagpo |" in text  # every estimator's credit quality
    assert (tmp_path / "credit_assignment.png").stat().st_size > 0


def test_a_written_report_reads_back_as_records():
    """summarize() reads the success and credit tables of the report main() wrote: what the
    docs' training table is made from."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "benchmarks" / "results" /
            "credit_assignment" / "gagpo_variants" / "webshop" / "credit_assignment.md").read_text()
    d = ca.summarize(text)
    first = d["success"][0]
    assert (first["env"], first["policy"], first["method"], first["lr"], first["seeds"]) == (
        "WebShop-v0", "tabular", "gagpo", 10.0, 20)
    assert first["whole_run"] == [42.0, 1.1] and first["last_quarter"] == [55.5, 1.0]
    assert len(d["success"]) == 6  # 3 methods x 2 policies
    # Every estimator's credit on the same rows, not the shared-state table after it.
    assert {c["estimator"] for c in d["credit"]} == {"gagpo", "gagpo:paper", "gigpo", "grpo",
                                                     "rloo", "ppo"}
    assert d["credit"][0]["pearson"] == [0.23, 0.24]
    with pytest.raises(ValueError, match="not a credit_assignment report"):
        ca.summarize("# something else\n")
