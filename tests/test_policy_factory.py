"""Policies from a spec (gagpo.agents.policies.factory), for ``gagpo eval`` and the trainer alike,
and the one place that knows which policies need ``expert_action`` infos: the policy itself."""

from __future__ import annotations

import pytest

from gagpo.agents.policies.base import Policy, Request
from gagpo.agents.policies.factory import PolicySpec, build_policy, env_kwargs_for
from gagpo.agents.policies.scripted import ExpertPolicy, RandomPolicy, RuleBaselinePolicy


def test_scripted_specs_and_who_needs_expert_infos():
    expert = build_policy(PolicySpec("expert"))
    assert isinstance(expert, ExpertPolicy) and expert.needs_expert_action
    a, b = (build_policy(PolicySpec("random", seed=7)) for _ in range(2))
    assert isinstance(a, RandomPolicy) and not a.needs_expert_action
    requests = [Request([], ["click[a]", "click[b]", "click[c]"]) for _ in range(8)]
    assert [r.text for r in a.act(requests)] == [r.text for r in b.act(requests)]
    rule, rule_options = build_policy(PolicySpec("rule")), build_policy(PolicySpec("rule_options"))
    assert isinstance(rule, RuleBaselinePolicy) and isinstance(rule_options, RuleBaselinePolicy)
    assert (rule.options, rule_options.options) == (False, True)
    assert not rule.needs_expert_action
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


def test_a_vllm_engine_stops_at_the_action_as_the_transformers_policy_does(monkeypatch):
    """``gagpo eval --policy vllm:...`` once sampled past ``</action>`` to the token limit (the
    trainer's engine stopped there): its replies cost more and read no differently. The engine
    itself is vLLM's (tests/test_agents_vllm.py); here, what the factory hands it."""
    import gagpo.agents.policies.vllm as vllm_policy

    made: list[tuple[str, dict]] = []
    monkeypatch.setattr(vllm_policy, "VLLMPolicy",
                        lambda model, tokenizer, **kw: made.append((model, kw)) or "engine")
    spec = PolicySpec("vllm:some/model", temperature=0.4, max_new_tokens=12, seed=3)
    assert build_policy(spec, enforce_eager=True) == "engine"
    assert build_policy(spec, stop=("\n",)) == "engine"
    (model, first), (_, second) = made
    assert model == "some/model"
    assert first == {"stop": ("</action>",), "enforce_eager": True, "temperature": 0.4,
                     "top_p": 1.0, "max_new_tokens": 12, "seed": 3}
    assert second["stop"] == ("\n",)  # a caller's own stop strings win


def test_gagpo_eval_runs_a_vllm_engine_in_the_precision_bf16_names(monkeypatch):
    """vLLM's own dtype "auto" runs a float32 checkpoint in half precision, so ``gagpo eval
    --policy vllm:...`` sampled in another precision than the trainer computes in: the engine
    now gets ``--bf16``'s (float32 where a transformers policy would run float32), unless
    ``--vllm-kwargs`` names a dtype. What the factory hands vLLM; the engine is
    tests/test_agents_vllm.py's."""
    import torch

    import gagpo.agents.policies.vllm as vllm_policy
    from gagpo.agents.models import bf16_autocast, default_device
    from gagpo.evaluate import evaluate

    class Built(Exception):
        pass

    dtypes = []

    def engine(model, tokenizer, **kw):
        dtypes.append(kw["dtype"])
        raise Built  # no engine: what it was given is the point

    monkeypatch.setattr(vllm_policy, "VLLMPolicy", engine)
    for bf16, engine_kwargs in (("off", None), ("on", None), ("auto", None),
                                ("on", {"dtype": "float16"})):
        with pytest.raises(Built):
            evaluate("WebShop-v0", PolicySpec("vllm:some/model"), episodes=1, bf16=bf16,
                     engine_kwargs=engine_kwargs, progress=False)
    auto = bf16_autocast("auto", None, default_device()) or torch.float32
    assert dtypes == [torch.float32, torch.bfloat16, auto, "float16"]


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


def test_the_rule_baseline_refuses_an_env_that_is_not_webshop():
    """ALFWorld's infos have no page: the rule would click "buy now" until the step limit."""
    with pytest.raises(ValueError, match="plays WebShop only"):
        build_policy(PolicySpec("rule")).act([Request([], ["look"], {"won": False})])


def test_env_kwargs_for_adds_what_a_policy_needs_and_refuses_what_contradicts_it():
    rule_options = build_policy(PolicySpec("rule_options"))
    assert env_kwargs_for(rule_options, {"split": "test"}) == {
        "split": "test", "observation_mode": "text_rich"}
    with pytest.raises(ValueError, match="needs its environments made with "
                                         "observation_mode='text_rich', not 'text'"):
        env_kwargs_for(rule_options, {"observation_mode": "text"})
    assert env_kwargs_for(build_policy(PolicySpec("rule")), {}) == {}
    assert env_kwargs_for(build_policy(PolicySpec("expert")), {}) == {
        "request_infos": ["expert_action"]}


def test_eval_of_rule_options_sees_the_options_it_chose(tmp_path):
    """On plain text pages the rule cannot tell an option is chosen and clicks it until the
    step limit; gagpo eval makes its envs text_rich, so it picks each option once and buys."""
    import json

    from gagpo.evaluate import evaluate

    summary = evaluate("WebShop-v0", PolicySpec("rule_options"), split="test", episodes=20,
                       batch=20, out=tmp_path, progress=False)
    rows = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").open()]
    assert all(r["action"] == "click[buy now]" for r in rows if r["terminated"])
    assert sum(r["terminated"] for r in rows) == 20  # every episode bought, none ran out
    picked = [r["action"] for r in rows if r["action"].startswith("click[")
              and "You have clicked" in r["observation"]]
    assert picked  # options were chosen, and the page said so
    assert summary["by_type"]["all"]["mean_length"] < 8


def test_policies_refuse_nan_and_out_of_range_sampling_settings():
    """``temperature < 0`` alone let nan through, to fail inside sampling."""
    from gagpo.agents.models import load_model
    from gagpo.agents.policies.hf import TransformersPolicy

    model, tok = load_model("tiny")
    for kw, message in [({"temperature": float("nan")}, "temperature must be a finite number"),
                        ({"top_p": 0.0}, r"top_p must be in \(0, 1\], not 0.0"),
                        ({"batch_size": 0}, "batch_size must be >= 1, not 0"),
                        ({"max_new_tokens": 2.5}, "max_new_tokens must be an integer")]:
        with pytest.raises(ValueError, match=message):
            TransformersPolicy(model, tok, **kw)
