"""benchmarks/real_model.py: every stage's command is one the CLI accepts, with the settings
the run means (a typo in a flag would only show hours into the run), and the report reads
finished stages and leaves the others marked as not run."""

import json

import pytest

from benchmarks.real_model import ESTIMATORS, GPU, Settings, stages, table
from gagpo.cli import build_parser
from gagpo.train_config import config_from_args


@pytest.mark.parametrize("settings", [Settings(), GPU], ids=["cpu", "gpu"])
def test_every_stage_command_parses_to_the_intended_settings(tmp_path, settings):
    parser = build_parser()
    by_name = {st.name: st for st in stages(tmp_path, settings)}
    assert list(by_name)[:4] == ["expert", "rule", "warm_start", "warm_eval"]
    assert list(by_name)[-1] == "untrained"  # the costliest evaluation goes last
    for st in by_name.values():
        args = parser.parse_args(st.command[1:])
        if st.command[1] == "eval":
            assert (args.split, args.episodes) == ("test", settings.goals)
            assert args.policy.startswith("vllm:") == (settings.vllm and args.policy not in
                                                        ("expert", "rule"))
            continue
        cfg = config_from_args(args)
        assert cfg.mode == "generate" and cfg.eval_episodes == 0 and cfg.resume
        if st.name == "warm_start":
            assert (cfg.iterations, cfg.bc_episodes) == (0, settings.bc_episodes)
            assert cfg.bc_teacher == "expert"
        else:  # every estimator starts from the warm start's model, with one budget and seed
            assert cfg.algo == st.name and cfg.model == str(tmp_path / "warm_start" / "final")
            assert (cfg.iterations, cfg.n_groups, cfg.group_size, cfg.seed) == (
                settings.iterations, settings.n_groups, settings.group_size, 0)
            assert cfg.generation == ("vllm" if settings.vllm else "transformers")
    # Each estimator's evaluation plays the model that estimator trained.
    for algo in ESTIMATORS:
        assert by_name[f"{algo}_eval"].command[by_name[f"{algo}_eval"].command.index(
            "--policy") + 1].endswith(f"{algo}/final")


def test_report_reads_finished_evaluations_only(tmp_path):
    folder = tmp_path / "eval_rule"
    folder.mkdir()
    row = {"episodes": 200, "success": 0.14, "success_ci95": [0.1, 0.19], "score": 0.54,
           "score_ci95": [0.5, 0.58], "mean_length": 3.0, "failed": 0, "well_formed": 1.0,
           "well_formed_ci95": [0.99, 1.0], "admissible": 1.0, "admissible_ci95": [0.99, 1.0]}
    (folder / "summary.json").write_text(json.dumps({"by_type": {"all": row}, "seconds": 6}))
    lines = table(tmp_path).splitlines()
    rule = next(line for line in lines if line.startswith("| rule baseline"))
    assert rule == ("| rule baseline | 200 | 100.0 [99.0, 100.0] | 100.0 [99.0, 100.0] | "
                    "14.0 [10.0, 19.0] | 54.0 [50.0, 58.0] | 3.00 | 0.1 |")
    assert sum("not run yet" in line for line in lines) == 6
