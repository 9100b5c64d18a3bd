"""Resuming: which settings a resume may change (gagpo.train_config's RESUME_MAY_CHANGE,
resume_differences, check_resume), decided here for every TrainConfig field, and what the run's
folder holds after a resume or a fresh start (gagpo.run_folder), at function level: no
training."""

import dataclasses
import json
from pathlib import Path

import pytest

from gagpo.common.numbers import RANGES
from gagpo.run_folder import (
    _iteration_of,
    cut_run,
    earlier_run,
    prepare_run_folder,
    record_config_changes,
)
from gagpo.train_config import (
    BEFORE_IT_EXISTED,
    RESUME_MAY_CHANGE,
    TrainConfig,
    check_resume,
    resume_differences,
)

FIELDS = [f.name for f in dataclasses.fields(TrainConfig)]

#: The settings a resume may change without changing the run's result: how the process
#: starts, where the run ends, where it is kept and where its metrics go, where envs run.
MAY_CHANGE = {"resume", "resume_override", "overwrite", "out_dir", "iterations", "save_every",
              "max_minutes",
              "progress", "tensorboard", "wandb", "wandb_project", "save_observations",
              "backend", "ray_address", "gradient_checkpointing", "return_freed_memory"}

#: Every other setting changes what the run trains on or how: a resume must keep it.
MUST_MATCH = {
    "env", "env_kwargs", "train_split", "eval_split", "max_steps", "parallel",
    "model", "mode", "lora_rank", "lora_alpha", "lora_dropout", "lora_layers", "lora_embeddings",
    "length_normalize", "bf16",
    "generation", "vllm_gpu_memory", "vllm_kwargs", "max_new_tokens", "top_p",
    "history_length", "max_prompt_tokens", "temperature", "eval_temperature",
    "algo", "n_groups", "group_size", "reward", "reward_scale", "invalid_penalty",
    "invalid_penalty_target", "state_grouping",
    "gagpo_variant", "gamma", "lam", "norm", "omega", "episode_stats",
    "critic_model", "critic_lr", "critic_warmup", "value_clip",
    "ratio_level", "clip_eps", "clip_eps_high", "dual_clip", "kl_coef", "entropy_coef",
    "aggregation",
    "lr", "embeddings_lr", "weight_decay", "max_grad_norm", "ppo_epochs", "num_minibatches",
    "micro_batch_tokens", "pack_prompts", "fold_lora", "rollout_batch_tokens", "recompute_old_logp",
    "bc_episodes", "bc_teacher", "bc_epochs", "bc_lr", "bc_batch",
    "eval_every", "eval_episodes", "eval_batch", "seed",
}


def test_the_table_decides_every_setting_and_agrees_with_resume_may_change():
    """A new TrainConfig field fails here until this table says whether a resume may change
    it."""
    assert not MAY_CHANGE & MUST_MATCH
    assert sorted(MAY_CHANGE | MUST_MATCH) == sorted(FIELDS)
    assert set(RESUME_MAY_CHANGE) == MAY_CHANGE
    assert all(isinstance(why, str) and why for why in RESUME_MAY_CHANGE.values())


def _default(f: dataclasses.Field):
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def other_value(f: dataclasses.Field):
    """A valid value of field ``f`` other than its default (from its type, ``choices`` and
    ``valid`` range)."""
    default, kind = _default(f), str(f.type)
    if "choices" in f.metadata:
        return next(c for c in f.metadata["choices"] if c != default)
    if kind == "bool":
        return not default
    if kind == "dict":
        return {"changed": 1}
    if "int" in kind:
        candidates = [5] if default is None else [default + 1]
    elif "float" in kind:
        base = 1.0 if default is None else default
        candidates = [base / 2, base + 0.5, 0.5, 2.0]
    else:
        return "changed" if default is None else default + "-changed"
    valid = RANGES[f.metadata.get("valid", "finite")]
    return next(c for c in candidates
                if c != default and valid(c) and (f.name != "dual_clip" or c > 1))


def _line(name: str, old, new) -> str:
    return f"  {name}: checkpoint {old!r}, now {new!r}"


LORA_BASE = {"fold_lora": {"lora_rank": 8}, "lora_layers": {"lora_rank": 8},
             "lora_embeddings": {"lora_rank": 8},
             "embeddings_lr": {"lora_rank": 8, "lora_embeddings": True}}
"""The run each LoRA setting is changed in: what :class:`TrainConfig` needs beside it."""


@pytest.mark.parametrize("name", FIELDS)
def test_each_setting_a_resume_changes_is_accepted_or_refused_by_name(name):
    f = next(f for f in dataclasses.fields(TrainConfig) if f.name == name)
    old, new = _default(f), other_value(f)
    assert new != old
    # Settings that modify LoRA are refused without it (--fold-lora counts in a LoRA run only:
    # test_a_checkpoint_that_predates_a_setting...), so they change a LoRA run here.
    base = LORA_BASE.get(name, {})
    saved = TrainConfig(**base).to_dict()
    cfg = TrainConfig(**base, **{name: new})  # valid: the config accepts it
    diffs = resume_differences(saved, cfg, 1, 1)
    assert diffs == {name: (old, new)}
    if name in MAY_CHANGE:
        assert check_resume(diffs, cfg, 3) == []
        return
    assert name in MUST_MATCH
    with pytest.raises(ValueError) as refused:
        check_resume(diffs, cfg, 3)
    message = str(refused.value)
    assert _line(name, old, new) in message.splitlines()
    assert f"checkpoint in {cfg.out_dir} (iteration 3)" in message
    # ... and says both ways on, with where an override is recorded.
    assert message.endswith(
        "\nResume with the checkpoint's settings, or pass --resume-override to go on with the "
        "new ones (the differences are then recorded in config_changes.jsonl).")

    # Overridden: the refused setting comes back as a line, and nothing is raised.
    cfg = TrainConfig(**base, **{name: new, "resume_override": True})
    diffs = resume_differences(saved, cfg, 1, 1)
    assert diffs == {name: (old, new), "resume_override": (False, True)}
    assert check_resume(diffs, cfg, 3) == [_line(name, old, new)]


def test_all_changes_at_once_refuse_exactly_the_settings_outside_the_table():
    saved = TrainConfig().to_dict()
    changed = {f.name: other_value(f) for f in dataclasses.fields(TrainConfig)}
    cfg = TrainConfig(**{**changed, "resume_override": False})
    diffs = resume_differences(saved, cfg, 1, 1)
    assert set(diffs) == set(FIELDS) - {"resume_override"}
    with pytest.raises(ValueError) as refused:
        check_resume(diffs, cfg, 7)
    lines = [x for x in str(refused.value).splitlines() if x.startswith("  ")]
    assert lines == [_line(n, *diffs[n]) for n in FIELDS if n in MUST_MATCH]

    cfg = TrainConfig(**changed)  # resume_override=True
    diffs = resume_differences(saved, cfg, 1, 1)
    assert check_resume(diffs, cfg, 7) == lines


def test_settings_within_the_table_alone_are_accepted_without_override():
    cfg = TrainConfig(resume=True, iterations=300, out_dir="moved", save_every=5,
                      tensorboard=False, wandb=True, wandb_project="p", progress=False,
                      save_observations=True, backend="ray", ray_address="head:6379",
                      overwrite=True, gradient_checkpointing="on", return_freed_memory=True,
                      max_minutes=30)
    diffs = resume_differences(TrainConfig().to_dict(), cfg, 2, 2)
    assert set(diffs) == MAY_CHANGE - {"resume_override"}
    assert check_resume(diffs, cfg, 3) == []
    assert resume_differences(cfg.to_dict(), cfg, 4, 4) == {}


def test_another_number_of_ranks_is_a_refused_difference():
    cfg = TrainConfig()
    saved = cfg.to_dict()
    assert resume_differences(saved, cfg, 3, 3) == {}
    for saved_ranks, ranks in ((2, 1), (1, 4)):
        diffs = resume_differences(saved, cfg, saved_ranks, ranks)
        assert diffs == {"ranks": (saved_ranks, ranks)}
        with pytest.raises(ValueError) as refused:
            check_resume(diffs, cfg, 3)
        assert _line("ranks", saved_ranks, ranks) in str(refused.value).splitlines()
        overriding = TrainConfig(resume_override=True)
        assert check_resume(diffs, overriding, 3) == [_line("ranks", saved_ranks, ranks)]


def test_a_checkpoint_that_predates_a_setting_compares_as_its_default_or_earlier_value():
    then = {"invalid_penalty_target": "return", "gagpo_variant": "paper", "fold_lora": "off"}
    assert then == BEFORE_IT_EXISTED
    assert TrainConfig().invalid_penalty_target != "return"  # else the entry would be moot
    assert TrainConfig().gagpo_variant != "paper"
    assert TrainConfig().fold_lora != "off"  # a LoRA run's update ran peft's layers then
    old = TrainConfig().to_dict()
    for name in ("lr", "parallel", "env_kwargs", *then):
        del old[name]
    assert resume_differences(old, TrainConfig(**then), 1, 1) == {}
    # Without adapters --fold-lora changes nothing: an older full fine-tuning run resumes.
    assert resume_differences(old, TrainConfig(), 1, 1) == {
        "invalid_penalty_target": ("return", "step"), "gagpo_variant": ("paper", "shared-2-flat")}
    old_lora = {**old, "lora_rank": 8}
    assert resume_differences(old_lora, TrainConfig(lora_rank=8), 1, 1) == {
        "invalid_penalty_target": ("return", "step"), "gagpo_variant": ("paper", "shared-2-flat"),
        "fold_lora": ("off", "auto")}
    assert resume_differences(old_lora, TrainConfig(lora_rank=8, **then), 1, 1) == {}
    assert resume_differences(old, TrainConfig(lr=2e-3, env_kwargs={"a": 1}, **then), 1, 1) == {
        "lr": (1e-6, 2e-3), "env_kwargs": ({}, {"a": 1})}
    # A checkpoint that has the setting is compared with its own value.
    has_it = {**TrainConfig().to_dict(), "invalid_penalty_target": "step"}
    assert resume_differences(has_it, TrainConfig(), 1, 1) == {}
    has_it["invalid_penalty_target"] = "return"
    assert resume_differences(has_it, TrainConfig(), 1, 1) == {
        "invalid_penalty_target": ("return", "step")}


# --- the run's folder ---------------------------------------------------------------------------


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _logged_run(out: Path, iterations: int, ranks: int = 1) -> None:
    """What ``iterations`` logged iterations leave: metrics lines, step tables (content does
    not matter here), a checkpoint, evaluations and a torn temporary file."""
    (out / "steps").mkdir(parents=True, exist_ok=True)
    with open(out / "metrics.jsonl", "w") as f:
        for it in range(1, iterations + 1):
            f.write(json.dumps({"iteration": it, "train/success": it / 10}) + "\n")
    for it in range(1, iterations + 1):
        names = [f"iter_{it:05d}.npz"] if ranks == 1 else \
            [f"iter_{it:05d}_rank{r}.npz" for r in range(ranks)]
        for name in names:
            (out / "steps" / name).write_bytes(b"table")
    (out / "checkpoint.pt").write_bytes(b"ckpt")
    (out / "evals.json").write_text(json.dumps({"before": {"success": 0.0}}))


def _steps(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "steps").iterdir())


def test_a_resume_override_keeps_the_first_config_and_records_the_changes(tmp_path, capsys):
    first = TrainConfig(out_dir=str(tmp_path), lr=1e-3, seed=3, iterations=5)
    prepare_run_folder(tmp_path, first, None)
    original = (tmp_path / "config.json").read_text()
    assert json.loads(original) == first.to_dict()
    _logged_run(tmp_path, 5)
    state = {"iteration": 3, "config": first.to_dict(),
             "evals": {"before": {"success": 0.25}, "iter_2": {"success": 0.5}}}

    cfg = TrainConfig(out_dir=str(tmp_path), lr=2e-3, seed=4, iterations=8, resume=True,
                      resume_override=True, tensorboard=False)
    diffs = resume_differences(state["config"], cfg, 1, 1)
    assert check_resume(diffs, cfg, 3) == [_line("lr", 1e-3, 2e-3), _line("seed", 3, 4)]
    record_config_changes(tmp_path, 3, diffs)
    prepare_run_folder(tmp_path, cfg, state)

    assert (tmp_path / "config.json").read_text() == original  # the run's first settings
    [change] = _lines(tmp_path / "config_changes.jsonl")
    assert set(change) == {"resumed_from_iteration", "time", "changes", "overridden"}
    assert change["resumed_from_iteration"] == 3
    assert change["changes"] == {"lr": {"checkpoint": 1e-3, "new": 2e-3},
                                 "seed": {"checkpoint": 3, "new": 4},
                                 "iterations": {"checkpoint": 5, "new": 8},
                                 "tensorboard": {"checkpoint": True, "new": False}}
    assert change["overridden"] == ["lr", "seed"]
    assert [m["iteration"] for m in _lines(tmp_path / "metrics.jsonl")] == [1, 2, 3]
    assert _steps(tmp_path) == [f"iter_{k:05d}.npz" for k in (1, 2, 3)]
    assert json.loads((tmp_path / "evals.json").read_text()) == state["evals"]
    assert (tmp_path / "checkpoint.pt").exists()
    assert "holds an earlier run" not in capsys.readouterr().out


def test_config_changes_are_appended_one_line_per_resume(tmp_path):
    # Only how the process started differs: nothing to record.
    record_config_changes(tmp_path, 2, {"resume": (False, True), "resume_override":
                                        (False, True), "overwrite": (True, False)})
    assert not (tmp_path / "config_changes.jsonl").exists()

    record_config_changes(tmp_path, 2, {"resume": (False, True), "iterations": (2, 4)})
    record_config_changes(tmp_path, 4, {"algo": ("gagpo", "grpo"), "ranks": (2, 1),
                                        "lr": (1e-6, 1e-5), "out_dir": ("a", "b"),
                                        "resume_override": (False, True)})
    first, second = _lines(tmp_path / "config_changes.jsonl")
    assert first["resumed_from_iteration"] == 2 and first["overridden"] == []
    assert first["changes"] == {"iterations": {"checkpoint": 2, "new": 4}}
    assert second["resumed_from_iteration"] == 4
    assert second["overridden"] == ["algo", "lr", "ranks"]  # sorted; out_dir may change
    assert second["changes"] == {"algo": {"checkpoint": "gagpo", "new": "grpo"},
                                 "ranks": {"checkpoint": 2, "new": 1},
                                 "lr": {"checkpoint": 1e-6, "new": 1e-5},
                                 "out_dir": {"checkpoint": "a", "new": "b"}}


def test_a_resume_cuts_what_was_logged_past_the_checkpoint(tmp_path, capsys):
    _logged_run(tmp_path, 5, ranks=2)
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"iteration": 6, "train/succ')  # torn by a kill
    (tmp_path / "checkpoint.pt.tmp").write_bytes(b"half")
    (tmp_path / "steps" / "iter_00002_rank0.npz.tmp").write_bytes(b"half")
    (tmp_path / "steps" / "notes.txt").write_text("not a step table")
    cfg = TrainConfig(out_dir=str(tmp_path), resume=True, lr=5.0)
    state = {"iteration": 3, "config": TrainConfig().to_dict(), "evals": {}}
    prepare_run_folder(tmp_path, cfg, state)

    assert [m["iteration"] for m in _lines(tmp_path / "metrics.jsonl")] == [1, 2, 3]
    assert _steps(tmp_path) == ["iter_00001_rank0.npz", "iter_00001_rank1.npz",
                                "iter_00002_rank0.npz", "iter_00002_rank1.npz",
                                "iter_00003_rank0.npz", "iter_00003_rank1.npz", "notes.txt"]
    assert not list(tmp_path.glob("*.tmp"))
    assert not (tmp_path / "evals.json").exists()  # the checkpoint had no evaluations
    assert (tmp_path / "checkpoint.pt").exists()
    # No config.json (a run from before it was written): the checkpoint's settings, not cfg's.
    assert json.loads((tmp_path / "config.json").read_text()) == state["config"]
    assert "note:" not in capsys.readouterr().out


def test_cut_run_keeps_lines_and_step_tables_up_to_the_iteration(tmp_path):
    _logged_run(tmp_path, 4)
    metrics = tmp_path / "metrics.jsonl"
    with open(metrics, "a") as f:
        f.write("not json\n" + json.dumps({"no": "iteration"}) + "\n")
    text = metrics.read_text().splitlines(keepends=True)
    assert cut_run(tmp_path, 2) == 4  # iterations 3 and 4, and the two unreadable lines
    assert metrics.read_text() == "".join(text[:2])
    assert _steps(tmp_path) == ["iter_00001.npz", "iter_00002.npz"]
    assert cut_run(tmp_path, 2) == 0
    assert metrics.read_text() == "".join(text[:2])
    assert cut_run(tmp_path, 0) == 2
    # Nothing left: no empty file either (it would stand for an earlier run: see below).
    assert not metrics.exists() and _steps(tmp_path) == []
    assert cut_run(tmp_path, 0) == 0


def test_iteration_of_a_step_table():
    assert _iteration_of(Path("steps/iter_00012.npz")) == 12
    assert _iteration_of(Path("steps/iter_00012_rank3.npz")) == 12
    assert _iteration_of(Path("iter_12.npz")) == 12
    assert _iteration_of(Path("iter_00012.npz.tmp")) == 12
    for name in ("notes.txt", "iter_x.npz", "iteration_3.npz", "iter_.npz"):
        assert _iteration_of(Path(name)) is None


def test_a_fresh_start_replaces_an_earlier_run(tmp_path, capsys):
    _logged_run(tmp_path, 3)
    (tmp_path / "config.json").write_text(json.dumps(TrainConfig(lr=1.0).to_dict()))
    (tmp_path / "config_changes.jsonl").write_text('{"resumed_from_iteration": 1}\n')
    (tmp_path / "tensorboard").mkdir()
    cfg = TrainConfig(out_dir=str(tmp_path), overwrite=True, lr=5e-4)
    prepare_run_folder(tmp_path, cfg, None)

    out = capsys.readouterr().out
    assert f"{tmp_path} holds an earlier run (checkpoint.pt, metrics.jsonl, step tables)" in out
    assert "no checkpoint" not in out
    for name in ("checkpoint.pt", "evals.json", "config_changes.jsonl"):
        assert not (tmp_path / name).exists(), name
    assert not (tmp_path / "metrics.jsonl").exists()  # not an empty file: see below
    assert _steps(tmp_path) == []
    assert json.loads((tmp_path / "config.json").read_text()) == cfg.to_dict()
    # A run that replaced an earlier one and stopped before its first iteration (killed,
    # failed, --iterations 0) left nothing to lose: the next run needs no --overwrite.
    assert earlier_run(tmp_path) == []
    prepare_run_folder(tmp_path, TrainConfig(out_dir=str(tmp_path)), None)
    assert not (tmp_path / "metrics.jsonl").exists()


def test_a_resume_that_finds_no_checkpoint_starts_the_run(tmp_path, capsys):
    out = tmp_path / "new"
    cfg = TrainConfig(out_dir=str(out), resume=True)
    prepare_run_folder(out, cfg, None)
    assert "holds no checkpoint: --resume starts from iteration 0" in capsys.readouterr().out
    assert (out / "steps").is_dir() and _steps(out) == []
    assert json.loads((out / "config.json").read_text()) == cfg.to_dict()
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "steps"]

    # A run that stopped before its first iteration left config.json alone: nothing to lose.
    prepare_run_folder(out, TrainConfig(out_dir=str(out), lr=3e-3), None)
    assert "earlier run" not in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["lr"] == 3e-3


def test_earlier_run_lists_what_an_earlier_runs_iterations_left(tmp_path):
    assert earlier_run(tmp_path) == []
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "evals.json").write_text("{}")
    (tmp_path / "steps").mkdir()
    assert earlier_run(tmp_path) == []  # settings, evaluations, an empty steps folder
    (tmp_path / "steps" / "iter_00001.npz").write_bytes(b"table")
    assert earlier_run(tmp_path) == ["step tables"]
    (tmp_path / "metrics.jsonl").write_text("")
    assert earlier_run(tmp_path) == ["metrics.jsonl", "step tables"]
    (tmp_path / "checkpoint.pt").write_bytes(b"ckpt")
    assert earlier_run(tmp_path) == ["checkpoint.pt", "metrics.jsonl", "step tables"]
    (tmp_path / "steps" / "iter_00001.npz").unlink()
    assert earlier_run(tmp_path) == ["checkpoint.pt", "metrics.jsonl"]


def test_a_resumed_run_folder_reads_as_the_uninterrupted_runs(tmp_path):
    """What a resume rewrites it writes as the run itself does: ``evals.json`` in the trainer's
    layout (one-space indent, as ``train`` writes it at the end); a checkpoint without evals and
    no evals file, or a folder missing any of the files a fresh start deletes, is no error."""
    evals = {"before": {"all": {"success": 0.25}}, "bc": {"final_nll": 1.5}}
    cfg = TrainConfig(out_dir=str(tmp_path), resume=True)
    (tmp_path / "config.json").write_text('{"first": true}')
    prepare_run_folder(tmp_path, cfg, {"iteration": 2, "evals": evals,
                                       "config": cfg.to_dict()})
    assert (tmp_path / "evals.json").read_text() == json.dumps(evals, indent=1)
    assert (tmp_path / "config.json").read_text() == '{"first": true}'  # the first settings

    (tmp_path / "evals.json").unlink()
    prepare_run_folder(tmp_path, cfg, {"iteration": 2, "evals": {}, "config": cfg.to_dict()})
    assert not (tmp_path / "evals.json").exists()

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "metrics.jsonl").write_text('{"iteration": 1}\n')  # no checkpoint, no evals
    prepare_run_folder(fresh, TrainConfig(out_dir=str(fresh), overwrite=True), None)
    assert json.loads((fresh / "config.json").read_text())["overwrite"] is True


def test_config_changes_carry_a_timestamp_and_any_value(tmp_path):
    """Each resume's line says when (ISO 8601 with the UTC offset) and records every value,
    even one JSON cannot hold (as its repr) rather than failing the resume."""
    import datetime

    record_config_changes(tmp_path, 4, {"lr": (1e-3, 2e-3), "out_dir": (Path("a"), Path("b"))})
    [line] = [json.loads(x) for x in (tmp_path / "config_changes.jsonl").read_text().splitlines()]
    stamp = datetime.datetime.strptime(line["time"], "%Y-%m-%dT%H:%M:%S%z")
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs((now - stamp).total_seconds()) < 120
    assert line["changes"]["out_dir"] == {"checkpoint": repr(Path("a")), "new": repr(Path("b"))}


def test_only_step_table_names_have_an_iteration():
    assert _iteration_of(Path("iter_00012_rank1.npz")) == 12
    assert _iteration_of(Path("iter_x1.npz")) is None
    assert _iteration_of(Path("notes.npz")) is None


def test_the_settings_are_grouped_and_every_setting_is_in_one_group():
    """TrainConfig is its groups' union: each setting defined once, in one group, the flags
    and config.json keys those of the groups' fields (nothing renamed, nothing added)."""
    from gagpo.train_config import SETTING_GROUPS, TrainConfig, group_of

    names = [f.name for g in SETTING_GROUPS for f in dataclasses.fields(g)]
    assert len(names) == len(set(names))
    assert set(names) == {f.name for f in dataclasses.fields(TrainConfig)}
    assert set(TrainConfig().to_dict()) == set(names)
    assert group_of("lr").title == "update" and group_of("bf16").title == "performance"
    assert group_of("lora_rank").title == "model and LoRA"
    with pytest.raises(KeyError):
        group_of("nope")
