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
