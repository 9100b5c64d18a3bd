"""``gagpo export``: a run's checkpoint as a model folder that evaluation and training read,
with the parameters the trainer had, for runs that finished and runs that are not done."""

import contextlib
import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from test_trainer import _params, _tiny_cfg
from two_ranks import TWO_RANKS, run_two_ranks

from gagpo.agents.models import load_model
from gagpo.cli import main
from gagpo.run_folder import load_checkpoint
from gagpo.trainer import train

torch.set_num_threads(1)


def _loaded(folder) -> dict[str, torch.Tensor]:
    return {n: p.detach() for n, p in load_model(str(folder))[0].named_parameters()}


def test_export_of_a_finished_run_is_its_final_model(tmp_path, capsys):
    run = tmp_path / "run"
    train(_tiny_cfg(run, iterations=2))
    assert main(["export", str(run), "--out", str(tmp_path / "exported")]) == 0
    assert "after iteration 2" in capsys.readouterr().out
    record = json.loads((tmp_path / "exported" / "exported_from.json").read_text())
    assert record["iteration"] == 2 and record["model"] == "tiny"
    # the digest a finished run records of its parameters, and the same tensors as final/
    assert [record["parameters_sha256"]] == json.loads(
        (run / "parameter_digests.json").read_text())
    final, exported = _loaded(run / "final"), _loaded(tmp_path / "exported")
    assert final.keys() == exported.keys()
    assert all(torch.equal(final[k], exported[k]) for k in final)
    # ... and evaluation plays it.
    assert main(["eval", "--env", "WebShop-v0", "--policy", str(tmp_path / "exported"),
                 "--episodes", "1", "--batch", "1", "--max-new-tokens", "8",
                 "--env-arg", "max_steps=2", "--out", str(tmp_path / "eval")]) == 0
    assert (tmp_path / "eval" / "summary.json").exists()


def test_export_of_a_run_that_max_minutes_stopped(tmp_path, capsys):
    """The case export exists for: no final/, only the checkpoint after iteration 1."""
    run = tmp_path / "run"
    train(_tiny_cfg(run, iterations=3, max_minutes=1e-6))
    assert not (run / "final").exists()
    assert main(["export", str(run), "--out", str(tmp_path / "exported")]) == 0
    assert json.loads((tmp_path / "exported" / "exported_from.json").read_text())[
        "iteration"] == 1
    saved, exported = _params(run), _loaded(tmp_path / "exported")
    assert all(torch.equal(saved[k], exported[k]) for k in saved)
    # the run moved away from the model it started from
    start = _loaded("tiny")
    assert any(not torch.equal(start[k], exported[k]) for k in saved)


def test_export_refuses_a_folder_without_checkpoint_and_a_non_empty_out(tmp_path, capsys):
    (tmp_path / "empty_run").mkdir()
    assert main(["export", str(tmp_path / "empty_run"), "--out", str(tmp_path / "x")]) == 2
    assert "holds no checkpoint.pt" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    run = tmp_path / "run"
    train(_tiny_cfg(run, iterations=1))
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    assert main(["export", str(run), "--out", str(taken)]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert [p.name for p in taken.iterdir()] == ["notes.txt"]


def test_export_refuses_a_damaged_checkpoint(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(b"not a checkpoint")
    assert main(["export", str(run), "--out", str(tmp_path / "x")]) == 2
    assert "is not a checkpoint torch can read" in capsys.readouterr().err
    torch.save({"weights": 1}, run / "checkpoint.pt")
    assert main(["export", str(run), "--out", str(tmp_path / "x")]) == 2
    assert "is not a gagpo training checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_resume_from_a_damaged_checkpoint_is_refused_before_the_run_changes(tmp_path, capsys):
    # The same reader as export's: `gagpo train --resume` names the file instead of a traceback,
    # and leaves the run's folder as it was.
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(b"not a checkpoint")
    (run / "metrics.jsonl").write_text('{"iteration": 1}\n')
    assert main(["train", "--env", "WebShop-v0", "--model", "tiny", "--iterations", "1",
                 "--out-dir", str(run), "--resume", "--no-progress"]) == 2
    assert "checkpoint.pt is not a checkpoint torch can read" in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.pt", "metrics.jsonl"]
    assert (run / "metrics.jsonl").read_text() == '{"iteration": 1}\n'


# ---------------------------------------------------------------------------------------------
# Which checkpoints are taken: checkpoints made to be wrong, from a real run's.


@pytest.fixture(scope="module")
def real_checkpoint(tmp_path_factory) -> dict:
    run = tmp_path_factory.mktemp("real") / "run"
    train(_tiny_cfg(run, iterations=1))
    return torch.load(run / "checkpoint.pt", weights_only=False)


def _run_with(tmp_path, payload) -> Path:
    run = tmp_path / "made"
    run.mkdir()
    torch.save(payload, run / "checkpoint.pt")
    return run


@pytest.mark.parametrize("what, payload", [
    ("a bare state dict", lambda real: dict(real["model"])),
    ("model and optimizer only", lambda real: {"model": real["model"],
                                               "optimizer": real["optimizer"]}),
    ("no iteration", lambda real: {k: v for k, v in real.items() if k != "iteration"}),
    ("no config", lambda real: {k: v for k, v in real.items() if k != "config"}),
    ("no model", lambda real: {k: v for k, v in real.items() if k != "model"}),
    ("a list", lambda real: [real]),
    ("a tensor", lambda real: torch.zeros(3)),
])
def test_a_foreign_checkpoint_is_refused_by_the_reader_and_by_export(
        tmp_path, capsys, real_checkpoint, what, payload):
    run = _run_with(tmp_path, payload(real_checkpoint))
    with pytest.raises(ValueError, match=r"checkpoint\.pt is not a gagpo training checkpoint"):
        load_checkpoint(run / "checkpoint.pt")
    assert main(["export", str(run), "--out", str(tmp_path / "x")]) == 2, what
    assert (f"{run / 'checkpoint.pt'} is not a gagpo training checkpoint (it lacks the model, "
            "config or iteration)") in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_the_reader_gives_back_a_real_checkpoint_whole(tmp_path, real_checkpoint):
    run = _run_with(tmp_path, real_checkpoint)
    state = load_checkpoint(run / "checkpoint.pt")
    assert state.keys() == real_checkpoint.keys() and state["iteration"] == 1
    assert all(torch.equal(state["model"][k], v) for k, v in real_checkpoint["model"].items())


def _changed(real: dict, *, model=None, **config) -> dict:
    return {**real, "model": dict(real["model"]) if model is None else model,
            "config": {**real["config"], **config}}


@pytest.mark.parametrize("what", ["config says LoRA", "a parameter missing",
                                  "a parameter of another shape", "LoRA weights, no LoRA",
                                  "a parameter that is no tensor", "a tensor the model lacks"])
def test_export_refuses_a_checkpoint_whose_weights_do_not_fit_its_model(
        tmp_path, capsys, real_checkpoint, what):
    """The weights must load into the model the checkpoint's settings build: every trained
    parameter there, each of its shape. A clear error (exit 2) naming the checkpoint, and no
    model folder written, rather than a traceback or a model of other weights."""
    weights = real_checkpoint["model"]
    name = sorted(weights)[0]
    if what == "config says LoRA":
        payload = _changed(real_checkpoint, lora_rank=4)
    elif what == "a parameter missing":
        payload = _changed(real_checkpoint, model={k: v for k, v in weights.items()
                                                   if k != name})
    elif what == "a parameter of another shape":
        payload = _changed(real_checkpoint, model={**weights, name: weights[name][:-1]})
    elif what == "a parameter that is no tensor":
        payload = _changed(real_checkpoint, model={**weights, name: weights[name].tolist()})
    elif what == "a tensor the model lacks":
        payload = _changed(real_checkpoint, model={**weights, "lm_head.bias": weights[name]})
    else:
        payload = _changed(real_checkpoint, model={
            k.replace(".weight", ".lora_A.default.weight"): v[:4] for k, v in weights.items()
            if k.endswith("proj.weight")})
    run = _run_with(tmp_path, payload)
    assert main(["export", str(run), "--out", str(tmp_path / "x")]) == 2, what
    err = capsys.readouterr().err
    assert "checkpoint.pt does not fit tiny" in err, err
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())
    if what == "a parameter of another shape":  # both shapes named
        shape = tuple(weights[name].shape)
        assert (f"e.g. {name} {(shape[0] - 1, *shape[1:])} where the model has {shape}"
                in err), err
    if what == "a parameter that is no tensor":
        assert f"e.g. {name} () where the model has" in err, err
    if what == "a tensor the model lacks":
        assert "1 tensors the model does not have, e.g. lm_head.bias" in err, err


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("resumable") / "run"
    train(_tiny_cfg(run, iterations=1))
    return run


@pytest.mark.parametrize("what", ["a parameter missing", "a parameter of another shape",
                                  "a tensor the model lacks"])
def test_resume_refuses_a_checkpoint_whose_weights_do_not_fit(tmp_path, real_run, what):
    """``--resume`` loads the checkpoint's weights into the model its settings build: a
    checkpoint that does not fit is refused with what is wrong, before any iteration runs,
    rather than a run that goes on from the untrained weights it silently kept (a loose
    load skips missing and unknown names)."""
    run = tmp_path / "run"
    shutil.copytree(real_run, run)
    state = torch.load(run / "checkpoint.pt", weights_only=False)
    weights = state["model"]
    name = sorted(weights)[0]
    if what == "a parameter missing":
        del weights[name]
    elif what == "a parameter of another shape":
        weights[name] = weights[name][:-1]
    else:
        weights["model.extra.weight"] = weights[name]
    torch.save(state, run / "checkpoint.pt")
    before = (run / "metrics.jsonl").read_text()
    with pytest.raises(ValueError, match=r"checkpoint\.pt does not fit tiny \(lora_rank 0\): "
                       + {"a parameter missing": r"1 trained parameters missing, e\.g\. ",
                          "a parameter of another shape": r"parameters of another shape",
                          "a tensor the model lacks": r"1 tensors the model does not have"
                          }[what]):
        train(_tiny_cfg(run, iterations=2, resume=True))
    assert (run / "metrics.jsonl").read_text() == before  # nothing trained


def _with_last_misfit(weights: dict) -> tuple[dict, str, tuple, tuple]:
    """``weights`` with the last (sorted) non-square matrix transposed: as many values, in
    the shape another model's (other head counts) would have, where only a whole-model
    check of every tensor's shape sees it."""
    name = [n for n in sorted(weights) if weights[n].ndim == 2
            and weights[n].shape[0] != weights[n].shape[1]][-1]
    assert name == "model.layers.1.self_attn.v_proj.weight"  # not the first one checked
    shape = tuple(weights[name].shape)
    return {**weights, name: weights[name].t().contiguous()}, name, shape[::-1], shape


def test_export_and_resume_refuse_another_shape_of_the_same_size_in_the_last_parameter(
        tmp_path, capsys, real_checkpoint, real_run):
    """Both readers of a checkpoint refuse it, each with the same clear message, when the
    shape of any of its tensors differs from the model's (here the last one checked, of as
    many values): no traceback, no model folder, nothing trained."""
    weights, name, wrong, right = _with_last_misfit(real_checkpoint["model"])
    why = f"parameters of another shape, e.g. {name} {wrong} where the model has {right}"
    made = _run_with(tmp_path, _changed(real_checkpoint, model=weights))
    assert main(["export", str(made), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert f"checkpoint.pt does not fit tiny (lora_rank 0): {why}" in err, err
    assert not (tmp_path / "x").exists()

    run = tmp_path / "run"
    shutil.copytree(real_run, run)
    state = torch.load(run / "checkpoint.pt", weights_only=False)
    state["model"] = _with_last_misfit(state["model"])[0]
    torch.save(state, run / "checkpoint.pt")
    before = (run / "metrics.jsonl").read_text()
    with pytest.raises(ValueError, match=r"checkpoint\.pt does not fit tiny \(lora_rank 0\): "
                       + re.escape(why) + "$"):
        train(_tiny_cfg(run, iterations=2, resume=True))
    assert (run / "metrics.jsonl").read_text() == before


def test_state_misfit_checks_every_trained_tensor_and_only_those():
    """On a small model of its own (the frozen bias stands for a LoRA run's base weights,
    which its checkpoint leaves out): the trained parameters with their shapes fit; a
    missing trained one, any tensor of another shape (the last one too, or one of as many
    values), or a name the model lacks does not, and load_full_state then loads nothing."""
    from gagpo.distributed import load_full_state, state_misfit

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    model[1].bias.requires_grad_(False)
    trained = {n: p.detach().clone() + 1 for n, p in model.named_parameters()
               if p.requires_grad}
    assert sorted(trained) == ["0.bias", "0.weight", "1.weight"]
    assert state_misfit(model, trained) is None
    load_full_state(model, trained)
    assert all(torch.equal(p, trained[n]) for n, p in model.named_parameters() if n in trained)
    bad = {
        "0.bias": "1 trained parameters missing, e.g. 0.bias",
        "1.weight transposed": "parameters of another shape, e.g. 1.weight (4, 2) where the "
                               "model has (2, 4)",
        "1.bias of another shape": "parameters of another shape, e.g. 1.bias (3,) where the "
                                   "model has (2,)",
        "2.weight": "1 tensors the model does not have, e.g. 2.weight",
    }
    for what, why in bad.items():
        state = dict(trained)
        if what == "0.bias":
            del state["0.bias"]
        elif what == "1.weight transposed":
            state["1.weight"] = state["1.weight"].t()
        elif what == "1.bias of another shape":
            state["1.bias"] = torch.zeros(3)
        else:
            state["2.weight"] = torch.zeros(1)
        assert state_misfit(model, state) == why, what
        before = [p.detach().clone() for p in model.parameters()]
        with pytest.raises(ValueError, match="^" + re.escape(why) + "$"):
            load_full_state(model, state)
        assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@contextlib.contextmanager
def saving_as_a_gpu_does():
    """``torch.save`` tags every tensor's storage ``cuda:0``, as a checkpoint a GPU run wrote
    has it (through torch's own registry of location tags, ahead of its CPU tagger). Loaded
    as it is on a machine without CUDA, such a file fails; on one with CUDA it lands on GPU 0."""
    from torch import serialization

    entry = (0, lambda storage: "cuda:0", lambda storage, location: None)
    serialization._package_registry.insert(0, entry)
    try:
        yield
    finally:
        serialization._package_registry.remove(entry)


def _written_on_a_gpu(run: Path) -> None:
    state = torch.load(run / "checkpoint.pt", weights_only=False)
    with saving_as_a_gpu_does():
        torch.save(state, run / "checkpoint.pt")
    if not torch.cuda.is_available():  # the file really is a GPU's
        with pytest.raises(RuntimeError, match="CUDA"):
            torch.load(run / "checkpoint.pt", weights_only=False)


@pytest.mark.parametrize("where", ["here", "on a GPU"])
def test_resume_of_an_intact_checkpoint_goes_on(tmp_path, real_run, where):
    """The check above refuses only what does not fit: the same run's own checkpoint
    resumes (LoRA's adapters-only checkpoints are checked in test_trainer's resume tests),
    also when a GPU wrote it: its tensors are read onto the CPU, then into the model."""
    run = tmp_path / "run"
    shutil.copytree(real_run, run)
    if where == "on a GPU":
        _written_on_a_gpu(run)
        state = load_checkpoint(run / "checkpoint.pt")
        assert {t.device.type for t in state["model"].values()} == {"cpu"}
    train(_tiny_cfg(run, iterations=2, resume=True))
    assert [json.loads(x)["iteration"] for x in
            (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]


def test_export_of_a_checkpoint_a_gpu_wrote_is_the_same_model(tmp_path, real_run):
    """``gagpo export`` on a machine without the GPU that wrote the checkpoint: the same
    weights as the export of the same checkpoint written here."""
    gpu = tmp_path / "gpu"
    shutil.copytree(real_run, gpu)
    _written_on_a_gpu(gpu)
    assert main(["export", str(real_run), "--out", str(tmp_path / "a")]) == 0
    assert main(["export", str(gpu), "--out", str(tmp_path / "b")]) == 0
    a, b = _loaded(tmp_path / "a"), _loaded(tmp_path / "b")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_reader_asks_for_the_model_config_and_iteration_only(tmp_path, real_checkpoint):
    run = _run_with(tmp_path, {k: real_checkpoint[k] for k in ("model", "config", "iteration")})
    assert load_checkpoint(run / "checkpoint.pt")["iteration"] == 1


def test_export_writes_into_a_new_or_empty_folder_only_and_records_the_run(
        tmp_path, capsys, real_checkpoint):
    run = _run_with(tmp_path, real_checkpoint)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["export", str(run), "--out", str(empty)]) == 0
    record = json.loads((empty / "exported_from.json").read_text())
    assert record["run"] == str(run) and record["iteration"] == 1
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    capsys.readouterr()
    assert main(["export", str(run), "--out", str(a_file)]) == 2
    assert f"{a_file} exists and is not an empty folder" in capsys.readouterr().err
    assert a_file.read_text() == "mine"
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    assert main(["export", str(nothing), "--out", str(tmp_path / "y")]) == 2
    assert (f"{nothing} holds no checkpoint.pt (a run writes one after each --save-every "
            "iterations)") in capsys.readouterr().err


def test_export_of_a_lora_run_that_trains_its_embeddings_is_its_final_model(tmp_path, capsys):
    """``--lora-embeddings`` decides the model a checkpoint loads into: the export builds it
    (the trained embedding copy is among the checkpoint's weights) and writes what final/
    holds."""
    run = tmp_path / "run"
    train(_tiny_cfg(run, iterations=1, lora_rank=4, lora_embeddings=True))
    assert main(["export", str(run), "--out", str(tmp_path / "exported")]) == 0, \
        capsys.readouterr().err
    record = json.loads((tmp_path / "exported" / "exported_from.json").read_text())
    assert record["lora_embeddings"] is True
    final, exported = _loaded(run / "final"), _loaded(tmp_path / "exported")
    assert final.keys() == exported.keys()
    assert all(torch.equal(final[k], exported[k]) for k in final)
    start = _loaded("tiny")
    name = "model.embed_tokens.weight"
    assert not torch.equal(start[name], exported[name])  # the run moved the embedding


@TWO_RANKS
def test_a_sharded_model_loads_rank_0s_full_tensors_on_every_rank(tmp_path):
    """A resume under FSDP: rank 0 holds the checkpoint's full tensors and the other rank
    none; after :func:`load_full_state` the gathered model is the checkpoint, every shard of
    it (a rank left with its own weights, or tensors loaded as shards, would show here)."""
    saved = run_two_ranks("distributed_load.py", "fsdp", tmp_path)
    wanted, got = saved["wanted"], saved["got"]
    assert got.keys() == wanted.keys() and len(got) > 0
    for name, tensor in wanted.items():
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=0, msg=name)

