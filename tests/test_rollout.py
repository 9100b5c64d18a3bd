"""The rollout's step table: one row per step, trustworthy log-probs, identical across
backends; and `gagpo eval` on top of it."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gagpo.agents.policies.base import Policy, Reply, Request
from gagpo.agents.policies.scripted import ExpertPolicy, RandomPolicy
from gagpo.agents.react import ReActAgent
from gagpo.agents.rollout import COLUMNS, StepRow, StepTable, rollout
from gagpo.envs.vector import GroupVectorEnv

torch.set_num_threads(1)
EXPERT = {"request_infos": ["expert_action"]}


def test_step_table_of_expert_groups():
    with GroupVectorEnv("WebShop-v0", 3, 2, env_kwargs=EXPERT) as vec:
        table = rollout(ExpertPolicy(), ReActAgent("WebShop-v0"), vec, [0, 1, 2])
    episodes = table.episodes()
    assert len(episodes) == 6 and all(e["won"] and not e["failed"] for e in episodes)
    for e in episodes:
        rows = [r for r in table.rows if r.trajectory == e["trajectory"]]
        assert [r.t for r in rows] == list(range(len(rows)))
        assert rows[-1].done and not any(r.done for r in rows[:-1])
        assert rows[0].observation.startswith("WebShop [SEP] Instruction:")
        assert all(r.group == e["trajectory"] // 2 and r.well_formed for r in rows)
    # The two copies of a group took the same path through the same states.
    for g in range(3):
        a, b = ([(r.state_key, r.action) for r in table.rows if r.trajectory == 2 * g + k]
                for k in (0, 1))
        assert a == b


def test_prompts_carry_history_and_actions():
    with GroupVectorEnv("WebShop-v0", 1, 1, env_kwargs=EXPERT) as vec:
        table = rollout(ExpertPolicy(), ReActAgent("WebShop-v0", history_length=2), vec, [4])
    second = table.rows[1].prompt[-1]["content"]
    assert table.rows[0].action in second and table.rows[1].observation in second


def test_tiny_model_rollout_logprobs_equal_a_forward_pass():
    from gagpo.agents.models import load_model
    from gagpo.agents.policies.hf import TransformersPolicy

    model, tok = load_model("tiny")
    policy = TransformersPolicy(model, tok, temperature=1.0, max_new_tokens=12, seed=0)
    with GroupVectorEnv("WebShop-v0", 2, 2) as vec:
        table = rollout(policy, ReActAgent("WebShop-v0"), vec, [0, 1])
    assert len(table) > 0
    # The copies of a task share their first prompt: it is prefilled once for both.
    assert policy.stats.prompts == len(table) and policy.stats.shared_prompts >= 4
    for row in table.rows[:6]:
        assert row.token_ids and len(row.token_ids) == len(row.logprobs)
        ids = torch.tensor([row.prompt_token_ids + row.token_ids])
        with torch.no_grad():
            logits = model(ids).logits[0, len(row.prompt_token_ids) - 1:-1]
        direct = F.log_softmax(logits.float(), -1).gather(
            1, torch.tensor(row.token_ids)[:, None])[:, 0]
        np.testing.assert_allclose(row.logprobs, direct.numpy(), atol=1e-4)


def test_columns_hold_one_entry_per_row_in_row_order():
    with GroupVectorEnv("WebShop-v0", 2, 1, env_kwargs=EXPERT) as vec:
        table = rollout(ExpertPolicy(), ReActAgent("WebShop-v0"), vec, [0, 1])
    n = len(table)
    won = table.column("won")
    assert won.dtype == bool and won.tolist() == [r.won for r in table.rows] and won.sum() == 2
    t = table.column("t", np.int16)
    assert t.dtype == np.int16 and t.tolist() == [r.t for r in table.rows]
    keys = table.column("state_key")
    assert keys.dtype.kind == "U" and keys.tolist() == [r.state_key for r in table.rows]
    assert table.column("state_key", object)[0] is table.rows[0].state_key
    # List-valued columns hold each row's list, even when all have one length (the expert
    # exposes no tokens: every list is empty, which numpy would make a 2-d array of).
    ids = table.column("token_ids")
    assert ids.shape == (n,) and ids.dtype == object and all(x == [] for x in ids)
    assert table.column("prompt")[1] == table.rows[1].prompt
    assert StepTable([], num_envs=0, group_size=1).column("group", np.int32).dtype == np.int32
    with pytest.raises(KeyError, match="no column 'step'"):
        table.column("step")


def test_play_in_batches_reuses_envs_of_one_size_and_closes_them():
    from gagpo.evaluate import play_in_batches

    made, finished = [], []

    def new_vec(n: int) -> GroupVectorEnv:
        made.append(GroupVectorEnv("WebShop-v0", n, 1, env_kwargs=EXPERT))
        return made[-1]

    played = [(start, [r.task_id for r in table.rows if r.t == 0])
              for start, table in play_in_batches(ExpertPolicy(), ReActAgent("WebShop-v0"),
                                                  [3, 4, 5, 6, 7], batch=2, new_vec=new_vec,
                                                  on_step=finished.append)]
    assert [start for start, _ in played] == [0, 2, 4]
    assert [len(ids) for _, ids in played] == [2, 2, 1]
    assert [vec.n_tasks for vec in made] == [2, 1]  # the second batch of 2 reused the first's
    for vec in made:
        with pytest.raises(RuntimeError, match="closed"):
            vec.reset([0] * vec.n_tasks)
    assert finished[-1] == 5 and finished == sorted(finished)


def test_gagpo_eval_writes_summary_and_trajectories(tmp_path, capsys):
    from gagpo.cli import main

    assert main(["eval", "--env", "WebShop-v0", "--policy", "random", "--split", "test",
                 "--episodes", "12", "--batch", "5", "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "success % [95% CI]" in table and "all" in table
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["episodes"] == 12 and summary["by_type"]["all"]["episodes"] == 12
    lo, hi = summary["by_type"]["all"]["success_ci95"]
    assert 0.0 <= lo <= summary["by_type"]["all"]["success"] <= hi <= 1.0
    rows = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert {r["task_index"] for r in rows} == set(range(12))
    assert all(r["task_type"] in {"beauty", "food", "fashion", "furniture", "electronics"}
               for r in rows)


@pytest.mark.parametrize("backend", ["process", "ray"])
def test_backends_give_identical_step_tables(backend):
    if backend == "ray":
        pytest.importorskip("ray")
    tables = []
    for b in ("inprocess", backend):
        with GroupVectorEnv("WebShop-v0", 2, 3, backend=b, num_workers=2,
                            env_kwargs=EXPERT) as vec:
            tables.append(rollout(RandomPolicy(seed=5), ReActAgent("WebShop-v0"), vec, [7, 8]))
    assert [r.to_dict() for r in tables[0].rows] == [r.to_dict() for r in tables[1].rows]


sys.path.insert(0, str(Path(__file__).parent))
import corridor  # noqa: E402  (registers Corridor-v0)


class _LampRule(Policy):
    """Plays Corridor-v0 by what its prompt shows: under dim lamps one invalid action first
    (so the win comes on the last allowed step), under cold ones only invalid actions (the
    step limit truncates), under warm ones the losing action; else straight to the win."""

    def act(self, requests: list[Request]) -> list[Reply]:
        out = []
        for request in requests:
            prompt = request.messages[-1]["content"]
            now = prompt.rsplit("What you observe now (step ", 1)[1]
            step = int(now.split(")", 1)[0]) - 1
            # (after an invalid action the lamps show in the history only)
            lamps = prompt.rsplit("The lamps are ", 1)[1].split(".", 1)[0]
            action = {"cold": "dance", "warm": corridor.BACK}.get(
                lamps, "dance" if lamps == "dim" and step == 0 else corridor.FORWARD)
            out.append(Reply(f"<think>{lamps}</think><action>{action}</action>"))
        return out


def test_step_rows_record_the_state_each_action_was_taken_in():
    """Row t holds the observation and state key the prompt showed (the reset's at t = 0),
    the env's answer to the action (reward, flags, won), ``done`` on the last step of every
    episode (won on the last allowed step, truncated, lost); later prompts pair each earlier
    action with the observation it answered. Checked against the same actions replayed on a
    fresh env."""
    import gymnasium as gym


    env_id, kwargs = "corridor:Corridor-v0", {"max_steps": 3}
    probe = gym.make(env_id, **kwargs)
    seeds = {}
    for seed in range(200):  # one seed per kind of episode the rule plays
        obs = probe.reset(seed=seed, options={"task": 0})[0]  # (the task draws no number)
        lamps = obs.split("The lamps are ")[1].rstrip(".")
        seeds.setdefault(lamps, seed)
    kinds = ["dim", "cold", "warm", "bright"]
    tasks, group_seeds = [0, 1, 2, 3], [seeds[k] for k in kinds]
    with GroupVectorEnv(env_id, 4, 2, env_kwargs=kwargs) as vec:
        table = rollout(_LampRule(), ReActAgent(env_id, history_length=2, max_steps=3), vec, tasks,
                        seeds=group_seeds)
    lengths = {}
    for trajectory in range(8):
        rows = [r for r in table.rows if r.trajectory == trajectory]
        group = trajectory // 2
        obs, info = probe.reset(seed=group_seeds[group], options={"task": tasks[group]})
        for t, row in enumerate(rows):
            assert (row.group, row.t, row.task_id) == (group, t, info["task_id"])
            assert (row.observation, row.state_key) == (obs, info["state_key"])
            prompt = row.prompt[-1]["content"]
            assert f"(step {t + 1}):\n{obs}\n" in prompt
            for k in range(max(0, t - 2), t):  # the history window: (observation, action)
                assert (f"[step {k + 1}] observation: {rows[k].observation}\n"
                        f"[step {k + 1}] action: {rows[k].action}") in prompt
            obs, reward, terminated, truncated, info = probe.step(row.action)
            assert (row.reward, row.terminated, row.done) == (reward, terminated,
                                                              terminated or truncated)
            assert (row.won, row.action_valid, row.score) == (info["won"], info["action_valid"],
                                                              info["score"])
        assert rows[-1].done and not any(r.done for r in rows[:-1])
        lengths[trajectory] = (len(rows), rows[-1].terminated, rows[-1].won)
    assert [lengths[2 * g] for g in range(4)] == [(3, True, True), (3, False, False),
                                                  (1, True, False), (2, True, True)]
    assert [e["length"] for e in table.episodes()] == [3, 3, 3, 3, 1, 1, 2, 2]
    assert [e["return"] for e in table.episodes()] == [1.0, 1.0, 0, 0, 0, 0, 1.0, 1.0]
    assert [e["invalid_actions"] for e in table.episodes()] == [1, 1, 3, 3, 0, 0, 0, 0]


def test_episode_summaries_and_json_rows():
    """One summary per trajectory, in trajectory order, whatever order the rows came in: its
    group and task, its length, the sum of its rewards, the last step's score and won, lost
    to a dead worker if any of its rows was, its rejected actions and its actions in step
    order; ``to_dict`` holds every column and the prompt's messages."""
    def row(trajectory, t, reward, score, won, valid=True, failed=False):
        return StepRow(group=trajectory // 2, trajectory=trajectory, t=t,
                       task_id=f"task-{trajectory // 2}", task_type="kind",
                       state_key="k", observation="o",
                       request=Request([{"role": "user", "content": f"p{trajectory}{t}"}]),
                       reply="r", action=f"act {trajectory}.{t}", well_formed=True,
                       action_valid=valid,
                       reward=reward, done=False, terminated=False, won=won, score=score,
                       failed=failed)

    rows = [row(1, 0, 0.5, 0.2, False), row(0, 1, -0.5, 0.4, False, failed=True),
            row(1, 1, 0.25, 0.9, True), row(0, 0, 1.0, 0.1, False, valid=False),
            row(2, 0, 0.0, 0.0, False)]
    table = StepTable(rows=rows, num_envs=3, group_size=2)
    common = {"task_type": "kind", "malformed_replies": 0}
    assert table.episodes() == [
        {"trajectory": 0, "group": 0, "task_id": "task-0", "length": 2, "return": 0.5,
         "score": 0.4, "won": False, "failed": True, "invalid_actions": 1,
         "actions": ["act 0.0", "act 0.1"], **common},
        {"trajectory": 1, "group": 0, "task_id": "task-0", "length": 2, "return": 0.75,
         "score": 0.9, "won": True, "failed": False, "invalid_actions": 0,
         "actions": ["act 1.0", "act 1.1"], **common},
        {"trajectory": 2, "group": 1, "task_id": "task-1", "length": 1, "return": 0.0,
         "score": 0.0, "won": False, "failed": False, "invalid_actions": 0,
         "actions": ["act 2.0"], **common},
    ]
    d = rows[0].to_dict()
    assert d["prompt"] == [{"role": "user", "content": "p10"}] and "request" not in d
    assert set(d) == {*(c for c in COLUMNS if c != "request")}


class _Crashing(corridor.Corridor):
    """Corridor-v0 whose env raises on ``crash``: the vector env fails that episode."""

    def _step(self, action: str):
        if action == "crash":
            raise RuntimeError("the env broke")
        return super()._step(action)


class _CrashSecond(Policy):
    """Env 1 sends ``crash`` on its second step; every other step takes the right door."""

    def __init__(self) -> None:
        self.calls = 0

    def act(self, requests: list[Request]) -> list[Reply]:
        self.calls += 1
        return [Reply(f"<think></think><action>"
                      f"{'crash' if self.calls == 2 and k == 1 else corridor.FORWARD}</action>")
                for k in range(len(requests))]


def test_an_episode_lost_to_its_env_is_failed_whole_and_scores_nothing():
    """Every row of an episode whose env failed is marked failed (the trainer drops them);
    the failed step itself is not accepted, not won and scores 0, and keeps the task and state
    the prompt showed."""
    import gymnasium as gym

    gym.register("CorridorCrash-v0", entry_point=_Crashing, disable_env_checker=True)
    try:
        with GroupVectorEnv("CorridorCrash-v0", 1, 2) as vec, pytest.warns(RuntimeWarning):
            table = rollout(_CrashSecond(), ReActAgent("CorridorCrash-v0", history_length=0),
                            vec, [0], seeds=[3])
    finally:
        gym.registry.pop("CorridorCrash-v0")
    lost = [r for r in table.rows if r.trajectory == 1]
    kept = [r for r in table.rows if r.trajectory == 0]
    assert [r.failed for r in lost] == [True, True] and not any(r.failed for r in kept)
    last = lost[-1]
    assert (last.action_valid, last.won, last.score, last.done) == (False, False, 0.0, True)
    assert (last.task_id, last.state_key) == (lost[0].task_id, kept[1].state_key)
    assert kept[-1].won and [e["failed"] for e in table.episodes()] == [False, True]
    assert table.num_envs == 2 and table.group_size == 2
    assert kept[0].reply == f"<think></think><action>{corridor.FORWARD}</action>"


class _Mute(Policy):
    def act(self, requests: list[Request]) -> list[Reply]:
        return [Reply("<think></think><action>take 3</action>")]


def test_a_policy_that_answers_too_few_requests_is_named():
    with GroupVectorEnv("corridor:Corridor-v0", 1, 2) as vec, pytest.raises(
            RuntimeError, match=r"^the policy gave 1 replies to 2$"):
        rollout(_Mute(), ReActAgent("corridor:Corridor-v0"), vec, [0])
