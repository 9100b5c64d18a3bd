"""The `gagpo` command line routes to its subcommands and rejects bad arguments clearly."""

import pytest

from gagpo.cli import main


def test_serve_webshop_forwards_to_the_shops_own_options(capsys):
    assert main(["serve", "webshop", "--port", "70000", "--threads", "0",
                 "--channel-timeout", "-1"]) == 2
    assert capsys.readouterr().err == (
        "gagpo serve webshop: --port must be in [0, 65535], not 70000\n"
        "gagpo serve webshop: --threads must be >= 1, not 0\n"
        "gagpo serve webshop: --channel-timeout must be >= 1, not -1\n")
    with pytest.raises(SystemExit) as e:
        main(["serve", "webshop", "--help"])
    assert e.value.code == 0
    assert "--num-products" in capsys.readouterr().out


def test_unknown_arguments_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as e:
        main(["eval", "--env", "WebShop-v0", "--policy", "expert", "--bogus"])
    assert e.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_bad_env_arg_is_a_clear_error(capsys):
    assert main(["eval", "--env", "WebShop-v0", "--policy", "expert", "--env-arg", "oops"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_train_resume_with_other_settings_is_refused_with_the_differences(tmp_path, capsys):
    base = ["train", "--model", "tiny", "--n-groups", "2", "--group-size", "2", "--max-steps",
            "3", "--max-new-tokens", "8", "--history-length", "0", "--eval-episodes", "0",
            "--no-tensorboard", "--no-progress", "--out-dir", str(tmp_path)]
    assert main([*base, "--iterations", "1"]) == 0
    # The settings left unset that depend on others, with what the run took for each.
    assert "unset settings take: lam 0.5, norm mean, ratio_level action, aggregation " \
        "seq-mean, eval_split test\n" in capsys.readouterr().out
    assert main([*base, "--iterations", "2", "--resume", "--lr", "0.5", "--group-size",
                 "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gagpo: error: --resume: these settings differ")
    assert "  lr: checkpoint 1e-06, now 0.5\n" in err
    assert "  group_size: checkpoint 2, now 4\n" in err and "--resume-override" in err
    assert main([*base, "--iterations", "2", "--resume", "--lr", "0.5",
                 "--resume-override"]) == 0
    assert "lr: checkpoint 1e-06, now 0.5" in capsys.readouterr().out
    assert (tmp_path / "config_changes.jsonl").exists()


def test_dual_clip_of_one_or_less_is_a_clear_error_before_anything_runs(tmp_path, capsys):
    assert main(["train", "--dual-clip", "1", "--out-dir", str(tmp_path)]) == 2
    assert "dual_clip must be above 1" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # refused before the run folder was touched


def test_algorithm_choices_come_from_the_registries(capsys):
    from gagpo.advantages import EPISODE_STATS, ESTIMATORS, NORMS, PENALTY_TARGETS
    from gagpo.losses import AGGREGATIONS, RATIO_LEVELS

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    usage = " ".join(capsys.readouterr().out.split())
    for flag, choices in [("--algo", sorted(ESTIMATORS)), ("--norm", NORMS),
                          ("--episode-stats", EPISODE_STATS),
                          ("--invalid-penalty-target", PENALTY_TARGETS),
                          ("--ratio-level", RATIO_LEVELS), ("--aggregation", AGGREGATIONS)]:
        assert f"{flag} {{{','.join(choices)}}}" in usage, flag
    with pytest.raises(SystemExit) as e:
        main(["train", "--episode-stats", "episodes"])
    assert e.value.code == 2 and "invalid choice: 'episodes'" in capsys.readouterr().err


def test_the_recipes_cpu_flags_are_the_demos_settings():
    """docs/recipes.md gives the demo's run as flags: they must set what demo_config does."""
    import re
    import shlex
    from pathlib import Path

    from gagpo.cli import build_parser
    from gagpo.demo import demo_config
    from gagpo.train_config import config_from_args

    text = (Path(__file__).resolve().parents[1] / "docs" / "recipes.md").read_text()
    block = re.search(r"## On one CPU.*?```bash\n(.*?)```", text, re.S).group(1)
    argv = shlex.split(block.replace("\\\n", " "))
    assert argv[:2] == ["gagpo", "train"]
    cfg = config_from_args(build_parser().parse_args(argv[1:]))
    want = demo_config(out_dir=cfg.out_dir).to_dict()
    assert cfg.to_dict() == want


@pytest.mark.parametrize("flags, message", [
    (["--lr", "nan"], "lr must be a finite number, not nan"),
    (["--lr", "-1"], "lr must be > 0, not -1.0"),
    (["--group-size", "0"], "group_size must be >= 1, not 0"),
    (["--clip-eps", "2"], "clip_eps must be in (0, 1), not 2.0"),
    (["--gamma", "1.5"], "gamma must be in [0, 1], not 1.5"),
    (["--max-steps", "0"], "max_steps must be >= 1, not 0"),
    (["--entropy-coef", "inf"], "entropy_coef must be a finite number, not inf"),
    (["--entropy-coef", "-1"], "entropy_coef must be >= 0, not -1.0"),
    (["--env", "NoSuch-v0"], "no environment 'NoSuch-v0'"),
    (["--lora-layers", "2"], "--lora-layers places LoRA adapters: it needs --lora-rank > 0"),
    (["--lora-embeddings"], "--lora-embeddings trains the embeddings beside LoRA adapters"),
    (["--lora-rank", "4", "--embeddings-lr", "1e-5"],
     "--embeddings-lr is the rate of --lora-embeddings: give both"),
])
def test_train_refuses_settings_out_of_range_before_anything_runs(tmp_path, capsys, flags,
                                                                  message):
    assert main(["train", *flags, "--out-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"gagpo: error: {message}")
    assert not any(tmp_path.iterdir())


def test_a_config_file_gets_the_same_checks_as_the_flags(tmp_path, capsys):
    """A JSON or TOML value of the wrong kind is named, not cast or left to fail mid-run."""
    for text, message in [('{"lr": "1e-3"}', "lr must be a number, not '1e-3'"),
                          ('{"group_size": 8.0}', "group_size must be an integer, not 8.0"),
                          ('{"seed": true}', "seed must be an integer, not True"),
                          ('{"env_kwargs": [1]}', "env_kwargs must be a JSON object (keys and "
                                                  "values), not [1]")]:
        config = tmp_path / "run.json"
        config.write_text(text)
        assert main(["train", "--config", str(config), "--out-dir", str(tmp_path / "r")]) == 2
        assert capsys.readouterr().err == f"gagpo: error: {message}\n"


@pytest.mark.parametrize("flags, message", [
    (["--env", "NoSuch-v0"], "no environment 'NoSuch-v0' (Environment `NoSuch` doesn't exist.); "
                             "gagpo registers WebShop-v0 and ALFWorld-v0"),
    (["--env", "no_such_module:X-v0"], "no environment 'no_such_module:X-v0' (No module "),
    (["--episodes", "-1"], "episodes must be >= 1, not -1"),
    (["--batch", "0"], "batch must be >= 1, not 0"),
    (["--temperature", "nan"], "temperature must be a finite number, not nan"),
    (["--top-p", "0"], "top_p must be in (0, 1], not 0.0"),
    (["--env-arg", "bogus=1"], "WebShop-v0 does not take the arguments {'bogus': 1"),
    (["--policy", "/no/such/model"], "no model '/no/such/model': not one of the built-in "),
    (["--batch-tokens", "0"], "batch_tokens must be >= 1, not 0"),
    (["--policy", "rule", "--batch-tokens", "4096"],
     "--batch-tokens bounds a transformers model's passes: 'rule' runs none here"),
    (["--policy", "rule", "--vllm-kwargs", '{"enforce_eager": true}'],
     "--vllm-kwargs configure a vllm: policy's engine: 'rule' is not one"),
    (["--policy", "vllm:tiny", "--vllm-kwargs", '{"seed": 1, "temperature": 0}'],
     "engine arguments ['seed', 'temperature'] are the policy's own settings: set them with "
     "their flags"),
])
def test_eval_refuses_bad_settings_with_the_reason(capsys, flags, message):
    """Each of these once ran anyway (``--episodes -1`` played all but the last task) or ended
    in a traceback."""
    args = {"--env": "WebShop-v0", "--policy": "tiny"}
    args.update(dict(zip(flags[::2], flags[1::2], strict=True)))
    assert main(["eval", *[x for kv in args.items() for x in kv]]) == 2
    # The last line: a model policy is loaded (with its progress bar) before any env is made.
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"gagpo: error: {message}")


def test_a_warm_start_teacher_that_needs_other_pages_is_refused_before_anything_runs(
        tmp_path, capsys):
    """rule_options reads chosen options off text_rich pages: its demonstrations on them would
    teach a policy that trains on plain text pages."""
    assert main(["train", "--bc-episodes", "2", "--bc-teacher", "rule_options", "--out-dir",
                 str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "gagpo: error: --bc-teacher rule_options needs the training environments made with "
        "{'observation_mode': 'text_rich'}: pass --env-kwargs "
        "'{\"observation_mode\": \"text_rich\"}'\n")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("value, message", [
    ("[1]", "not a JSON object ({\"key\": value, ...}): '[1]'"),
    ("{bad", "not JSON (Expecting property name enclosed in double quotes"),
])
def test_json_flags_must_be_json_objects(tmp_path, capsys, value, message):
    """A list once reached the trainer and failed mid-start with a TypeError traceback."""
    with pytest.raises(SystemExit) as e:
        main(["train", "--env-kwargs", value, "--out-dir", str(tmp_path)])
    assert e.value.code == 2
    assert f"argument --env-kwargs: {message}" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["eval", "--env", "WebShop-v0", "--policy", "vllm:tiny", "--vllm-kwargs", value])
    assert e.value.code == 2
    assert f"argument --vllm-kwargs: {message}" in capsys.readouterr().err


def test_view_on_a_port_in_use_is_a_clear_error(tmp_path, capsys):
    """``gagpo view`` on a port another server holds: one line saying so, exit 2, no
    traceback (as the other commands refuse what they cannot do)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["view", "--root", str(tmp_path), "--port", str(port)]) == 2
    out = capsys.readouterr()
    assert out.err.startswith(f"gagpo: error: gagpo view cannot listen on 127.0.0.1:{port}: "
                              f"port {port} is in use")
    assert "--port" in out.err and "Traceback" not in out.err + out.out
    assert "gagpo view:" not in out.out  # no banner for a server that never listened


def test_a_run_whose_rollouts_never_meet_is_told_what_the_study_recommends(tmp_path, capsys):
    """One rollout per group: no step shares a state with another, the tree-like regime where
    the ground-truth study found GiGPO ahead; gagpo train says so once, and not for GiGPO."""
    from gagpo.step_credit import PARTED_BELOW

    base = ["train", "--model", "tiny", "--n-groups", "2", "--group-size", "1", "--max-steps",
            "3", "--max-new-tokens", "8", "--history-length", "0", "--eval-episodes", "0",
            "--iterations", "2", "--no-tensorboard", "--no-progress"]
    assert main([*base, "--out-dir", str(tmp_path / "gagpo")]) == 0
    out = capsys.readouterr().out
    assert out.count("consider --algo gigpo") == 1
    assert f"(below {PARTED_BELOW:.0%}; docs/algorithms.md)" in out
    assert main([*base, "--algo", "gigpo", "--out-dir", str(tmp_path / "gigpo")]) == 0
    assert "consider --algo" not in capsys.readouterr().out
