"""The rollout's step table: one row per step, trustworthy log-probs, identical across
backends; and `gagpo eval` on top of it."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gagpo.agents.policies.scripted import ExpertPolicy, RandomPolicy
from gagpo.agents.react import ReActAgent
from gagpo.agents.rollout import rollout
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
