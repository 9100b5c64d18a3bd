"""The ground-truth credit benchmark's exact values and gain figure (benchmarks/credit_truth.py)."""

import numpy as np
import pytest

from benchmarks import credit_truth as ct


def two_action_task() -> ct.Task:
    """One state: a0 wins (10) and ends, a1 is invalid (stays, penalty 0.1); horizon 2."""
    return ct.Task(next_state=np.array([[-1, 0]]), reward=np.array([[10.0, 0.0]]),
                   invalid=np.array([[False, True]]), mask=np.array([[True, True]]),
                   logits=np.zeros((1, 2)), horizon=2)


def test_exact_values_of_a_hand_solved_task():
    task = two_action_task()
    Q, V = ct.solve(task, task.probs())
    v1 = 0.5 * 10 + 0.5 * -0.1  # one step left: win or be charged
    q_invalid = -0.1 + 0.95 * v1
    v2 = 0.5 * 10 + 0.5 * q_invalid
    assert V[1, 0] == pytest.approx(v1) and V[2, 0] == pytest.approx(v2)
    rows = ct.Rows(traj=np.array([0, 1]), t=np.array([0, 0]), state=np.array([0, 0]),
                   action=np.array([0, 1]), reward=np.array([10.0, 0.0]),
                   invalid=np.array([False, True]))
    np.testing.assert_allclose(ct.true_advantages(task, Q, V, rows),
                               [10 - v2, q_invalid - v2])


def test_a_step_with_the_true_advantages_improves_and_negated_ones_worsen():
    task = two_action_task()
    probs = task.probs()
    Q, V = ct.solve(task, probs)
    rows = ct.Rows(traj=np.array([0, 1]), t=np.array([0, 0]), state=np.array([0, 0]),
                   action=np.array([0, 1]), reward=np.array([10.0, 0.0]),
                   invalid=np.array([False, True]))
    truth = ct.true_advantages(task, Q, V, rows)
    j0 = ct.objective(task, probs)
    for sign in (1, -1):
        g = ct.policy_gradient(task, probs, rows, sign * truth)
        after = ct.objective(task, task.probs(task.logits + g / np.linalg.norm(g)))
        assert (after - j0) * sign > 0


def test_one_draw_scores_the_truth_as_one_and_every_estimator():
    out = ct.draw("tree", 0, ct.baselines()[:2], n_tasks=2, group_size=4, eta=1.0)
    assert out["truth"][0] == 1.0 and out["truth"][1] > 0
    assert set(out) >= {"grpo", "grpo mean", "_stats"}


def test_within_task_figures_are_each_tasks_own():
    """A draw of one task: the within-task figures are the pooled ones (one task's rows, one
    task's step); with more tasks they differ, and the truth scores 1 on both correlations."""
    est = ct.baselines()[:1]
    one = ct.draw("house", 3, est, n_tasks=1, group_size=4, eta=1.0)
    assert one["grpo"][0] == pytest.approx(one["grpo"][2])
    assert one["grpo"][1] == pytest.approx(one["grpo"][3])
    many = ct.draw("house", 3, est, n_tasks=4, group_size=4, eta=1.0)
    assert many["truth"][0] == many["truth"][2] == pytest.approx(1.0)
    assert many["truth"][3] > 0 and many["grpo"][1] != pytest.approx(many["grpo"][3])


def test_the_alfworld_shape_is_the_rare_win_regime_it_stands_for():
    """Most groups of 8 never win, a third or more of the actions are invalid, 30-50 steps."""
    rng = np.random.default_rng(0)
    tasks = [ct.alfworld(rng) for _ in range(30)]
    assert all(30 <= t.horizon <= 50 for t in tasks)
    out = [ct.draw("alfworld", s, [], n_tasks=4, group_size=8, eta=1.0) for s in range(6)]
    stats = ct.shape_stats({"alfworld": out})["alfworld"]
    assert stats["invalid"] >= 1 / 3 and stats["groups_without_a_win"] > 0.5
    assert stats["win_rate"] < 0.15


def test_real_rollout_statistics_are_read_from_the_recorded_runs():
    real = ct.real_stats()
    assert len(real) == len(ct.REAL_RUNS)
    for x in real.values():
        assert 0 < x["shared"] <= 1 and 0 <= x["invalid"] <= 1 and 0 <= x["win_rate"] <= 1
        assert x["iterations"] >= 1
