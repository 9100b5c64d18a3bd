"""Policies from a spec (gagpo.agents.policies.factory), for ``gagpo eval`` and the trainer alike,
and the one place that knows which policies need ``expert_action`` infos: the policy itself."""

from __future__ import annotations

import pytest

from gagpo.agents.policies.base import Policy, Request
from gagpo.agents.policies.factory import PolicySpec, build_policy
from gagpo.agents.policies.scripted import ExpertPolicy, RandomPolicy, RuleBaselinePolicy


def test_scripted_specs_and_who_needs_expert_infos():
    expert = build_policy(PolicySpec("expert"))
    assert isinstance(expert, ExpertPolicy) and expert.needs_expert_action
    a, b = (build_policy(PolicySpec("random", seed=7)) for _ in range(2))
    assert isinstance(a, RandomPolicy) and not a.needs_expert_action
    requests = [Request([], ["click[a]", "click[b]", "click[c]"]) for _ in range(8)]
    assert [r.text for r in a.act(requests)] == [r.text for r in b.act(requests)]
    assert not RuleBaselinePolicy().needs_expert_action
    assert all(isinstance(p, Policy) for p in (expert, a, RuleBaselinePolicy()))


def test_server_specs_are_checked_before_anything_starts():
    with pytest.raises(ValueError, match="needs --server-model"):
        build_policy(PolicySpec("openai:http://127.0.0.1:9"))
    with pytest.raises(ValueError, match="needs --mode generate"):
        build_policy(PolicySpec("vllm:some/model", mode="score"))
    served = build_policy(PolicySpec("openai:http://127.0.0.1:9", server_model="m",
                                     temperature=0.3, max_new_tokens=12))
    assert (served.url, served.model, served.temperature, served.max_tokens) == (
        "http://127.0.0.1:9/v1/chat/completions", "m", 0.3, 12)
    assert not served.needs_expert_action


def test_a_model_spec_loads_it_or_takes_the_trainers_model_and_options():
    from gagpo.agents.policies.hf import TransformersPolicy

    spec = PolicySpec("tiny", mode="score", temperature=0.7, max_new_tokens=9, seed=1)
    loaded = build_policy(spec)
    assert isinstance(loaded, TransformersPolicy) and not loaded.needs_expert_action
    assert (loaded.mode, loaded.temperature, loaded.max_new_tokens) == ("score", 0.7, 9)
    given = build_policy(spec, model=loaded.model, tokenizer=loaded.tokenizer, batch_size=3,
                         stop=("</action>",), length_normalize=True)
    assert given.model is loaded.model and given.tokenizer is loaded.tokenizer
    assert (given.batch_size, given.stop, given.length_normalize) == (3, ("</action>",), True)


def test_eval_asks_the_env_for_what_the_policy_needs(tmp_path):
    """``gagpo eval --policy expert`` gets ``expert_action`` infos because the expert says it
    needs them: it wins every goal it plays."""
    from gagpo.evaluate import evaluate

    summary = evaluate("WebShop-v0", PolicySpec("expert"), split="test", episodes=3, batch=3,
                       out=tmp_path, progress=False)
    assert summary["episodes"] == 3 and summary["label"].startswith("WebShop")
    assert summary["by_type"]["all"]["failed"] == 0
    assert summary["by_type"]["all"]["score"] > 0.5


def test_eval_prompts_state_the_envs_own_step_limit(tmp_path):
    """An env made with ``max_steps=2`` ends episodes after 2 steps, and the prompts say so."""
    import json

    from gagpo.evaluate import evaluate

    summary = evaluate("WebShop-v0", PolicySpec("expert"), split="test", episodes=2, batch=2,
                       env_kwargs={"max_steps": 2}, out=tmp_path, progress=False)
    rows = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").open()]
    assert summary["by_type"]["all"]["mean_length"] == 2.0
    later = [r["prompt"][-1]["content"] for r in rows if r["t"] > 0]
    assert later and all("(at most 2 are allowed)" in p for p in later)
