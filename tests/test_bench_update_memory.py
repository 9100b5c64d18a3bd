"""``python -m benchmarks.update_memory`` on the tiny model and a recorded rollout's prompts:
each setting runs in its own process and reports its seconds, memory and the tokens its passes
ran on; packed passes run a prompt shared by copies once."""

import gzip
import json

import pytest

from benchmarks import update_memory


def _calls(path):
    shared, other = list(range(10, 40)), list(range(50, 70))
    calls = [{"messages": [], "prompt_token_ids": [shared, shared, shared, other]},
             {"messages": [], "prompt_token_ids": [other + [7], shared + [8]]}]
    path.write_bytes(gzip.compress("\n".join(json.dumps(c) for c in calls).encode()))
    return path


def test_update_memory_measures_padded_and_packed_passes_on_recorded_prompts(tmp_path, capsys):
    calls = _calls(tmp_path / "calls.jsonl.gz")
    out = tmp_path / "report"
    update_memory.main(["--model", "tiny", "--calls", str(calls), "--reply", "4",
                        "--settings", "off,256,glibc,fp32,off", "off,256,glibc,fp32,on",
                        "--out", str(out)])
    printed = capsys.readouterr().out
    report = (out / "report.txt").read_text()
    body = [line for line in report.splitlines() if not line.startswith(("$", "#"))]
    assert body and all(line in printed for line in body)
    assert "6 rows, 4 distinct prompts, 186 tokens without padding or sharing" in printed
    rows = [line.split() for line in printed.splitlines() if line.startswith("  off ")]
    assert [r[4] for r in rows] == ["off", "on"]
    padded, packed = (float(r[9].replace(",", "")) for r in rows)
    # Padded: micro-batches of like lengths padded to their longest. Packed: the shared
    # prompt (30 tokens, 4 rows) and the other (20, twice with a token more once) run once
    # each, every reply's 4 tokens besides: 30 + 20 + 21 + 31 + 6 x 4.
    assert packed == 126 < padded


@pytest.mark.parametrize("setting", ["on,256", "on,256,glibc,fp32,maybe", "on,x,glibc"])
def test_update_memory_refuses_a_malformed_setting(setting, tmp_path):
    with pytest.raises(SystemExit, match="a setting is CKPT,TOKENS,HEAP"):
        update_memory.main(["--model", "tiny", "--settings", setting])


def test_update_memory_refuses_a_file_that_is_not_calls(tmp_path):
    bad = tmp_path / "calls.jsonl"
    bad.write_text('{"messages": []}\n')
    with pytest.raises(SystemExit, match="line 1 is not a call"):
        update_memory.main(["--model", "tiny", "--calls", str(bad)])
