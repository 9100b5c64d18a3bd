"""``python -m benchmarks.rollout_throughput`` on the tiny model: both paths answer the same
prompts, the fast one prefills fewer, both record the log-probs a forward pass gives, and the
report is recorded."""

import torch

from benchmarks import rollout_throughput

torch.set_num_threads(1)


def test_rollout_throughput_compares_both_paths_on_the_same_prompts(tmp_path, capsys):
    out = tmp_path / "rollout_throughput"
    figures = rollout_throughput.main(["--model", "tiny", "--tasks", "2", "--copies", "3",
                                       "--max-new-tokens", "4", "--max-steps", "2",
                                       "--out", str(out)])
    captured = capsys.readouterr()
    printed = captured.out
    assert figures is not None and figures["ratio"] > 0
    # Progress goes to stderr, one line a policy call, and stays out of the report.
    progress = [line for line in captured.err.splitlines() if line.startswith("call ")]
    assert progress and progress[0].startswith("call 1: 6 prompts; seconds so far: today ")
    assert "call 1:" not in (out / "report.txt").read_text()
    assert figures["bound_ratio_free_decode"] > figures["bound_ratio"] > 0
    # The copies' first prompts (2 tasks x 3 copies) at least come from a shared prefill.
    assert figures["shared_share"] >= 6 / 12
    report = (out / "report.txt").read_text()
    assert report.startswith("$ ") and "benchmarks.rollout_throughput --model tiny" in report
    import transformers  # a report names the versions its figures depend on

    assert f"libraries: torch {torch.__version__}, transformers {transformers.__version__}\n" \
        in report
    for line in ("prompt tokens (chat template included): mean", "served from a shared prefill",
                 "speed-up (today / fast):", "where the time went", "bound: prefilling only",
                 "recorded log-probs vs one forward pass"):
        assert line in printed and line in report
    rows = {line.split()[0]: line.split() for line in printed.splitlines()
            if line.startswith(("today ", "fast "))}
    today_prefills, fast_prefills = int(rows["today"][4]), int(rows["fast"][4])
    assert today_prefills == 12 and fast_prefills <= today_prefills - 4
    # The tiny model runs in float32 on both sides (too small for bf16): same numerics.
    assert figures["today_logprob_gap_max"] < 1e-4 and figures["fast_logprob_gap_max"] < 1e-4


def test_recorded_calls_are_answered_again_without_the_envs(tmp_path, capsys):
    """``--save-calls`` then ``--replay``: the same prompts, call for call (what a comparison
    across venvs needs); prompts that tokenize otherwise than recorded are refused."""
    import gzip
    import json

    import pytest

    calls = tmp_path / "calls.jsonl.gz"
    played = rollout_throughput.main(["--model", "tiny", "--tasks", "1", "--copies", "2",
                                      "--max-new-tokens", "4", "--max-steps", "2",
                                      "--save-calls", str(calls)])
    recorded = [json.loads(line) for line in gzip.decompress(calls.read_bytes()).splitlines()]
    assert recorded and all(len(c["messages"]) == len(c["prompt_token_ids"]) for c in recorded)
    capsys.readouterr()
    replayed = rollout_throughput.main(["--model", "tiny", "--max-new-tokens", "4",
                                        "--replay", str(calls)])
    printed = capsys.readouterr().out
    prompts = sum(len(c["messages"]) for c in recorded)
    assert f"replayed: {prompts} prompts in {len(recorded)} policy calls" in printed
    assert f"the prompts of {calls}" in printed
    assert played["trie_tokens"] == replayed["trie_tokens"]  # the same prompts, token for token
    recorded[0]["prompt_token_ids"][0] = recorded[0]["prompt_token_ids"][0][1:]
    calls = calls.with_suffix("")  # plain JSON lines too
    calls.write_text("".join(json.dumps(c) + "\n" for c in recorded))
    with pytest.raises(SystemExit, match="call 1's prompts tokenize differently"):
        rollout_throughput.main(["--model", "tiny", "--max-new-tokens", "4", "--replay",
                                 str(calls)])
    calls.write_text("not json\n")
    with pytest.raises(SystemExit, match="line 1 is not a call"):
        rollout_throughput.main(["--model", "tiny", "--replay", str(calls)])


def test_sides_name_what_is_measured_against_todays_path():
    """``--sides``: today's path is always the baseline; the others come in one order, and a
    name the benchmark does not know is a usage error, not a silent default."""
    import argparse

    import pytest

    assert rollout_throughput.sides_list("vllm") == ["today", "vllm"]
    assert rollout_throughput.sides_list("vllm, fast,today") == ["today", "fast", "vllm"]
    for bad in ("", "today", "fast,sglang"):
        with pytest.raises(argparse.ArgumentTypeError, match="comma-separated list"):
            rollout_throughput.sides_list(bad)


def test_the_papers_model_shape_is_qwen25_15b_sized():
    """``--like qwen2.5-1.5b`` (the GPU checks' throughput run) builds a model of that size:
    1.5B parameters with Qwen2.5's 151,936-token vocabulary, as many with another tokenizer's
    (counted on the meta device: no memory)."""
    from transformers import AutoModelForCausalLM

    from gagpo.agents.models import load_model

    class Qwen25Vocabulary:  # Qwen2.5's tokenizer sizes, without downloading it
        eos_token_id, pad_token_id = 151645, 151643

        def __len__(self):
            return 151936

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(
            rollout_throughput.shape_config("qwen2.5-1.5b", Qwen25Vocabulary()))
    assert 1.54e9 < sum(p.numel() for p in model.parameters()) < 1.55e9  # Qwen2.5-1.5B: 1.54B
    tok = load_model("tiny")[1]
    config = rollout_throughput.shape_config("qwen2.5-1.5b", tok)
    assert config.vocab_size == len(tok) and config.num_key_value_heads == 2
