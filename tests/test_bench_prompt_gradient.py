"""``python -m benchmarks.prompt_gradient``: holding the prompt out of the graph computes the same
log-probs; it changes no gradient where the prompt is one token (nothing to hold) nor that of
the final norm (which only the reply's predicting positions reach), and loses part of a decoder
layer's where the prompt is long; the command records what it prints."""

import json
import random

import pytest
import torch

from benchmarks import prompt_gradient
from gagpo.agents.models import load_model

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    model, tok = load_model("tiny", device="cpu")
    model.train()
    return model, tok


def rows(prompt_lengths, seed=0):
    rng = random.Random(seed)
    return [{"prompt_token_ids": [rng.randrange(3, 900) for _ in range(n)],
             "token_ids": [rng.randrange(3, 900) for _ in range(6)]} for n in prompt_lengths]


def test_the_prompt_held_pass_computes_the_trainers_log_probs(tiny):
    model, tok = tiny
    for row in rows([1, 2, 40]):
        with torch.no_grad():
            true = prompt_gradient.true_logprobs(model, row["prompt_token_ids"],
                                                 row["token_ids"], tok.pad_token_id)
            held = prompt_gradient.held_prompt_logprobs(model, row["prompt_token_ids"],
                                                        row["token_ids"])
        assert torch.allclose(true, held, atol=1e-5)


def test_a_one_token_prompt_has_nothing_to_hold(tiny):
    model, tok = tiny
    steps = rows([1, 1])
    true, _, _ = prompt_gradient.gradient(model, steps, [1.0, -0.7], held=False,
                                          pad_id=tok.pad_token_id)
    held, _, _ = prompt_gradient.gradient(model, steps, [1.0, -0.7], held=True,
                                          pad_id=tok.pad_token_id)
    for cos, ratio in prompt_gradient.agreement(true, held).values():
        assert cos == pytest.approx(1.0, abs=1e-5) and ratio == pytest.approx(1.0, abs=1e-5)


def test_a_long_prompt_carries_part_of_the_decoder_layers_gradient(tiny):
    model, tok = tiny
    steps = rows([60, 45, 30])
    adv = [1.0, -0.8, 0.6]
    true, _, _ = prompt_gradient.gradient(model, steps, adv, held=False,
                                          pad_id=tok.pad_token_id)
    held, _, _ = prompt_gradient.gradient(model, steps, adv, held=True,
                                          pad_id=tok.pad_token_id)
    found = prompt_gradient.agreement(true, held)
    assert found["final norm and output"][0] == pytest.approx(1.0, abs=1e-5)
    assert found["layer 00"][0] < 0.99 and found["all"][0] < 0.99
    # The prompt's tokens' embeddings get no gradient held, but the last one's.
    assert found["embedding"][0] < 0.99


def test_the_command_prints_and_records_its_figures(tmp_path, capsys):
    path = tmp_path / "trajectories.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows([1, 30, 20, 12])))
    prompt_gradient.main(["--model", "tiny", "--trajectories", str(path), "--rows", "3",
                          "--out", str(tmp_path / "report")])
    out = capsys.readouterr().out
    assert "tiny: 3 steps of trajectories.jsonl (seed 0)" in out
    gap = float(out.split("largest difference between the passes ")[1].split()[0])
    assert gap < 1e-4
    lines = [line.split() for line in out.splitlines() if line.startswith("  ")]
    assert [line[0] for line in lines[:2]] == ["all", "embedding"]
    assert {" ".join(line[:2]) for line in lines} >= {"layer 00", "layer 01"}
    report = (tmp_path / "report" / "report.txt").read_text()
    assert "python -m benchmarks.prompt_gradient --model tiny" in report
    assert out.splitlines()[-2] in report and "layer 01" in out.splitlines()[-2]
    with pytest.raises(SystemExit, match="--rows must be >= 0"):
        prompt_gradient.main(["--model", "tiny", "--trajectories", str(path), "--rows", "-1"])
