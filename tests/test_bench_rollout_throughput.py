"""``python -m benchmarks.rollout_throughput`` on the tiny model: both paths answer the same
prompts, the shared one prefills fewer, and the report is recorded."""

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
                 "ceiling for any prefill saving",
                 "speed-up (today / shared):", "where the time went"):
        assert line in printed and line in report
    rows = {line.split()[0]: line.split() for line in printed.splitlines()
            if line.startswith(("today ", "shared "))}
    today_prefills, shared_prefills = int(rows["today"][4]), int(rows["shared"][4])
    assert today_prefills == 12 and shared_prefills <= today_prefills - 4
