"""The rollout's step table: one row per step, trustworthy log-probs, identical across
backends; and `gagpo eval` on top of it."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gagpo.agents.policies.scripted import ExpertPolicy, RandomPolicy
from gagpo.agents.react import ReActAgent
from gagpo.agents.rollout import StepTable, rollout
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
