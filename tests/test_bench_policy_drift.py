"""``python -m benchmarks.policy_drift``: a policy trained to favour one token after a given
text is reported as having moved on that token, with the trainer's KL; a policy against
itself has moved nowhere; a file that is not an evaluation's steps is refused clearly."""

import json
import shutil

import pytest
import torch

from benchmarks import policy_drift
from gagpo.agents.models import load_model, model_folder
from gagpo.losses import reply_logprobs

torch.set_num_threads(1)

REPLY = "<think>I buy it</think><action>click[buy now]</action>"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """The tiny model, and a copy trained until one token of a reply (``buy``) is likely where
    it was not."""
    root = tmp_path_factory.mktemp("drift")
    model, tok = load_model("tiny", device="cpu")
    for name in ("reference", "trained"):
        shutil.copytree(model_folder("tiny"), root / name)
    prompt = tok("pick a product", add_special_tokens=False)["input_ids"]
    reply = tok(REPLY, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    moved = reply.index(tok("buy", add_special_tokens=False)["input_ids"][0])
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(30):
        logp, _, _ = reply_logprobs(model, [prompt], [reply], pad_id=tok.pad_token_id)
        loss = -logp[0, -len(reply) + moved]  # that one token only
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.save_pretrained(root / "trained")
    before = reply[max(0, moved - policy_drift.CONTEXT_TOKENS):moved]
    (root / "expected.txt").write_text(f"  {tok.decode(reply[moved:moved + 1])!r} after "
                                       f"{tok.decode(before)!r}: 3, ")
    rows = [{"prompt_token_ids": prompt, "token_ids": reply, "reply": REPLY}] * 3
    rows.append({"prompt_token_ids": prompt, "token_ids": [], "reply": ""})  # a failed step
    (root / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def run(folders, policy, capsys, *extra):
    policy_drift.main(["--policy", str(folders / policy), "--reference",
                       str(folders / "reference"), "--trajectories",
                       str(folders / "trajectories.jsonl"), *extra])
    return capsys.readouterr().out


def test_the_token_a_policy_was_trained_on_is_the_one_reported_moved(folders, capsys):
    out = run(folders, "trained", capsys, "--top", "1", "--out", str(folders / "report"))
    assert "replies: 3 steps of trajectories.jsonl, 42 tokens" in out  # 13 + EOS, thrice
    kl = float(out.split("per-token KL (k3, as the trainer's loss): ")[1].split(";")[0])
    assert kl > 0.01
    top = out.split("most moved")[1].splitlines()[1]
    assert top.startswith((folders / "expected.txt").read_text())
    policy_lp, reference_lp = (float(x) for x in top.split(": 3, ")[1].split(" / "))
    assert policy_lp > -0.5 and reference_lp < policy_lp - 1
    report = (folders / "report" / "report.txt").read_text()
    assert report.startswith("$ ") and "python -m benchmarks.policy_drift --policy " in report
    assert top in report.splitlines()


def test_a_policy_against_itself_has_not_moved(folders, capsys):
    out = run(folders, "reference", capsys)
    assert "per-token KL (k3, as the trainer's loss): 0.0000; mean log-ratio +0.0000" in out
    assert "more than 1 nat: 0 (0.0%)" in out
    assert "most moved" not in out


def test_a_file_that_is_not_an_evaluations_steps_is_refused(folders, tmp_path, capsys):
    bad = tmp_path / "trajectories.jsonl"
    bad.write_text('{"reply": "no ids"}\n')
    with pytest.raises(SystemExit, match="line 1 is not a step with prompt_token_ids"):
        policy_drift.main(["--policy", str(folders / "trained"), "--reference",
                           str(folders / "reference"), "--trajectories", str(bad)])
