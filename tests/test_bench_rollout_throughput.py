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
    printed = capsys.readouterr().out
    assert figures is not None and figures["ratio"] > 0
    # The copies' first prompts (2 tasks x 3 copies) at least come from a shared prefill.
    assert figures["shared_share"] >= 6 / 12
    report = (out / "report.txt").read_text()
    assert report.startswith("$ ") and "benchmarks.rollout_throughput --model tiny" in report
    for line in ("prompt tokens (chat template included): mean", "served from a shared prefill",
                 "speed-up (today / fast):", "where the time went",
                 "recorded log-probs vs one forward pass"):
        assert line in printed and line in report
    rows = {line.split()[0]: line.split() for line in printed.splitlines()
            if line.startswith(("today ", "fast "))}
    today_prefills, fast_prefills = int(rows["today"][4]), int(rows["fast"][4])
    assert today_prefills == 12 and fast_prefills <= today_prefills - 4
    # The tiny model runs in float32 on both sides (too small for bf16): same numerics.
    assert figures["today_logprob_gap_max"] < 1e-4 and figures["fast_logprob_gap_max"] < 1e-4
