"""benchmarks/real_model.py: every stage's command is one the CLI accepts, with the settings
the run means (a typo in a flag would only show hours into the run), and the report reads
finished stages and leaves the others marked as not run."""

import json
import random
import sys
from pathlib import Path

import pytest

from benchmarks.real_model import (
    ALFWORLD,
    GPU,
    ROOMY,
    WEBSHOP,
    Settings,
    env_stages,
    over_budget,
    over_invocations,
    report,
    stages,
    table,
)
from benchmarks.view_speed import synthetic_table
from gagpo.cli import build_parser
from gagpo.run_folder import save_step_table
from gagpo.train_config import RESUME_MAY_CHANGE, config_from_args


@pytest.mark.parametrize("settings", [Settings(), GPU], ids=["cpu", "gpu"])
@pytest.mark.parametrize("run", [WEBSHOP, ALFWORLD], ids=["webshop", "alfworld"])
def test_every_stage_command_parses_to_the_intended_settings(tmp_path, settings, run):
    parser = build_parser()
    p = run.prefix
    by_name = {st.name: st for st in env_stages(tmp_path, settings, run)}
    baselines = [p + b for b in run.baselines]
    assert list(by_name)[:len(baselines) + 2] == [*baselines, p + "warm_start", p + "warm_eval"]
    assert list(by_name)[-1] == p + "untrained"  # the costliest evaluation goes last
    tasks = settings.goals if run is WEBSHOP else settings.alfworld_games
    for st in by_name.values():
        args = parser.parse_args(st.command[1:])
        assert args.env == run.env
        if st.command[1] == "eval":
            assert (args.split, args.episodes) == (run.eval_split, tasks)
            assert args.env_arg == [f"max_steps={run.max_steps}",
                                    f"max_episode_steps={run.max_steps}"]
            assert args.policy.startswith("vllm:") == (settings.vllm and args.policy not in
                                                        run.baselines)
            continue
        cfg = config_from_args(args)
        assert cfg.mode == "generate" and cfg.eval_episodes == 0 and cfg.resume
        assert cfg.max_steps == run.max_steps
        if st.name == p + "warm_start":
            bc = settings.bc_episodes if run is WEBSHOP else settings.alfworld_bc_episodes
            assert (cfg.iterations, cfg.bc_episodes) == (0, bc)
            assert cfg.bc_teacher == "expert" and cfg.out_dir == str(tmp_path / (p + "warm_start"))
        elif st.name.startswith("memory_"):  # the recipe's memory: GAGPO, 1 then 2 iterations
            assert run is WEBSHOP and cfg.algo == "gagpo"
            assert cfg.iterations == int(st.name[-1]) and cfg.rollout_batch_tokens == 8192
            assert cfg.out_dir == str(tmp_path / "memory_check")
            assert cfg.model == str(tmp_path / "warm_start" / "final")
        else:  # every estimator starts from the warm start's model, with one budget and seed
            assert p + cfg.algo == st.name
            assert cfg.rollout_batch_tokens == run.rollout_batch_tokens
            assert cfg.model == str(tmp_path / (p + "warm_start") / "final")
            assert (cfg.iterations, cfg.n_groups, cfg.group_size, cfg.seed) == (
                settings.iterations, settings.n_groups, settings.group_size, 0)
            assert cfg.generation == ("vllm" if settings.vllm else "transformers")
            assert cfg.reward == ("score" if run is WEBSHOP else "success")
    # Each estimator's evaluation plays the model that estimator trained.
    for algo in run.estimators:
        command = by_name[f"{p}{algo}_eval"].command
        assert command[command.index("--policy") + 1].endswith(f"{p}{algo}/final")


def test_the_two_environments_stages_and_folders_are_apart(tmp_path):
    """WebShop's stages keep the first run's names (its recorded folders resume), ALFWorld's
    are prefixed, and no two stages write one folder."""
    every = stages(tmp_path, Settings())
    names = [st.name for st in every]
    assert names[:4] == ["expert", "rule", "warm_start", "warm_eval"]
    assert len(set(names)) == len(names)
    # (the memory stages excepted: the second resumes the first's run)
    apart = [st.done_file.parent for st in every if not st.name.startswith("memory_")]
    assert len(set(apart)) == len(apart)
    memory = [st.done_file for st in every if st.name.startswith("memory_")]
    assert len(memory) == len(set(memory)) == 2 and memory[0].parent == memory[1].parent
    assert all(st.name.startswith("alfworld_") == ("ALFWorld-v0" in st.command)
               for st in every)


RULE_ROW = {"episodes": 200, "success": 0.14, "success_ci95": [0.1, 0.19], "score": 0.54,
           "score_ci95": [0.5, 0.58], "mean_length": 3.0, "failed": 0, "well_formed": 1.0,
           "well_formed_ci95": [0.99, 1.0], "admissible": 1.0, "admissible_ci95": [0.99, 1.0]}


def test_report_reads_finished_evaluations_only(tmp_path):
    folder = tmp_path / "eval_rule"
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps({"by_type": {"all": RULE_ROW},
                                                     "seconds": 6}))
    lines = table(tmp_path).splitlines()
    rule = next(line for line in lines if line.startswith("| rule baseline"))
    assert rule == ("| rule baseline | 200 | 100.0 [99.0, 100.0] | 100.0 [99.0, 100.0] | "
                    "14.0 [10.0, 19.0] | 54.0 [50.0, 58.0] | 3.00 | 0.1 |")
    assert sum("not run yet" in line for line in lines) == 6
    # each estimator's row names it as its paper does, GiGPO included
    pending = [line.split(" | ")[0] for line in lines if "not run yet" in line]
    assert "| SmolLM2, warm start + GiGPO" in pending and "| SmolLM2, warm start + GRPO" in pending


def test_a_report_keeps_its_rows_and_curves_once_the_runs_are_gone(tmp_path, monkeypatch):
    """The weights and run folders stay on the machine that trained them; the report's own
    copies of each summary and each run's metrics draw the same table and curves without
    them, and a later report from another, emptier work folder keeps those rows."""
    work, out = tmp_path / "work", tmp_path / "out"
    (work / "eval_rule").mkdir(parents=True)
    (work / "eval_rule" / "summary.json").write_text(
        json.dumps({"by_type": {"all": RULE_ROW}, "seconds": 6}))
    episodes = '{"task_id": "webshop:0", "won": true, "score": 1.0, "length": 3}\n'
    (work / "eval_rule" / "episodes.jsonl").write_text(episodes)
    (work / "gigpo" / "steps").mkdir(parents=True)
    logged = [{"iteration": i, "train/success": 0.1 * i, "train/score": 0.3} for i in (1, 2)]
    (work / "gigpo" / "metrics.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in logged))
    # Iteration 1's step table: the format rate, which the metrics do not log, comes from it.
    table, cols = synthetic_table(random.Random(0), 20, group_size=4, max_t=3)
    for i, row in enumerate(table.rows):
        row.well_formed = i % 4 != 0
    save_step_table(work / "gigpo" / "steps" / "iter_00001.npz", table, cols, False)
    monkeypatch.setattr(sys, "argv", ["real_model", "--stages", "gigpo"])
    first = report(work, out, Settings(), {})
    assert (out / "evals" / "eval_rule.json").exists()
    assert (out / "evals" / "eval_rule" / "episodes.jsonl").read_text() == episodes
    kept = [json.loads(line) for line in
            (out / "metrics" / "gigpo.jsonl").read_text().splitlines()]
    assert [line["iteration"] for line in kept] == [1, 2]
    share = sum(row.well_formed for row in table.rows) / len(table.rows)
    assert 0.7 < share < 0.8 and kept[0]["steps/well_formed"] == pytest.approx(share)
    assert "steps/well_formed" not in kept[1]  # no step table: no figure made up
    (out / "curves.png").unlink()

    assert report(work, out, Settings(), {}) == first  # the same invocation: one entry
    monkeypatch.setattr(sys, "argv", ["real_model", "--report-only"])
    again = report(tmp_path / "elsewhere", out, Settings(), {})
    assert again == first and "| rule baseline | 200 |" in again
    assert (out / "curves.png").exists()  # drawn from the kept metrics
    assert not (out / "curves_alfworld.png").exists()  # no ALFWorld run logged anything
    # each invocation's machine and command line kept, not only the last one's
    logged = (out / "machine.txt").read_text()
    assert logged.count("\nlast updated ") == 2 and "--stages gigpo\n" in logged


def test_a_time_budget_starts_no_stage_that_would_not_end_within_it(tmp_path):
    """--max-minutes: a training stage starts whatever is left (it stops at a checkpoint and
    resumes); an evaluation, which runs whole, starts only if its recorded minutes fit."""
    by_name = {st.name: st for st in stages(tmp_path, Settings())}
    recorded = {"warm_eval": {"minutes": 53.0}, "gigpo": {"minutes": 175.6}}
    assert over_budget(by_name["warm_eval"], 60, recorded) is None
    assert over_budget(by_name["warm_eval"], 40, recorded) == (
        "it took 53 min last time, 40 min are left")
    assert over_budget(by_name["gigpo"], 40, recorded) is None  # resumable
    assert over_budget(by_name["grpo_eval"], 1, recorded) is None  # no record: it may start
    for name in ("gigpo", "warm_eval", "grpo_eval"):
        assert over_budget(by_name[name], 0, recorded) == "the budget is spent"


def test_a_resumed_training_stage_records_its_minutes_over_every_invocation():
    """stages.json: a training stage stopped at a checkpoint and resumed costs the minutes of
    all the invocations that ran it (ALFWorld's second GAGPO run recorded 63.1 of its 76.3);
    a stage that ran whole, or ran again after it had finished, costs its own."""
    stopped = {"minutes": 63.1, "peak_rss_gb": 6.4, "iteration_minutes": 61.0,
               "status": "stopped after iteration 5 (--max-minutes); not done"}
    again = {"minutes": 13.2, "peak_rss_gb": 6.2, "iteration_minutes": 74.9,
             "flags_added": "--max-minutes 80.00"}
    both = over_invocations(again, stopped)
    assert both == {"minutes": 76.3, "peak_rss_gb": 6.4, "iteration_minutes": 74.9,
                    "flags_added": "--max-minutes 80.00", "invocations": 2}
    stopped_twice = over_invocations({**again, "status": stopped["status"]}, stopped)
    assert over_invocations(again, stopped_twice)["invocations"] == 3
    assert over_invocations(again, stopped_twice)["minutes"] == round(63.1 + 13.2 + 13.2, 2)
    assert over_invocations(again, None) == again
    assert over_invocations(again, {"minutes": 50.0, "peak_rss_gb": 7.0}) == again


def test_roomy_training_changes_memory_and_time_only(tmp_path):
    """--roomy adds flags after each training stage's own; they must leave the run's result
    alone (settings a resume may change), or a run switched halfway would be another run."""
    from benchmarks.real_model import FEWER_LAYERS, ONE_PASS_LORA

    # The other LoRA recipes' stages: each is named by its folder.
    lora_recipes = tuple(f"{folder}_" for folder in (*FEWER_LAYERS, *ONE_PASS_LORA))
    parser = build_parser()
    for st in stages(tmp_path, Settings()):
        if st.command[1] != "train":
            continue
        plain = config_from_args(parser.parse_args(st.command[1:])).to_dict()
        roomy = config_from_args(parser.parse_args([*st.command[1:], *ROOMY])).to_dict()
        changed = {k for k in plain if plain[k] != roomy[k]}
        # The fair comparison's recipe (CHEAP) runs roomy already; so do ALFWorld's second
        # run of GAGPO and the seeds of the other LoRA recipes, which share it.
        already = plain["gradient_checkpointing"] == "off" and not plain["return_freed_memory"]
        assert changed == (set() if already else {"gradient_checkpointing",
                                                  "return_freed_memory"}), st.name
        assert already == (st.name.startswith(("seeds_", *lora_recipes))
                           or st.name == "alfworld_wins_gagpo")
        assert changed <= set(RESUME_MAY_CHANGE)


def test_runs_recorded_from_one_warm_start_take_no_rows_from_another(tmp_path):
    """The weights stay on the machine that trained them, so a later piece trains the warm
    start again: the estimators' rows compare only if it has the same parameters, bit for bit.
    A stage that starts from a warm start with another digest than the one --out recorded is
    refused before it runs; stages that do not start from it are not."""
    from benchmarks.real_model import main, warm_start_clash

    work, out = tmp_path / "work", tmp_path / "out"
    out.mkdir()
    recorded = {"warm_start": {"minutes": 6.6, "parameters_sha256": "a" * 64}}
    (out / "stages.json").write_text(json.dumps(recorded))
    (work / "warm_start" / "final").mkdir(parents=True)
    (work / "warm_start" / "final" / "config.json").write_text("{}")
    by_name = {st.name: st for st in stages(work, Settings())}
    (work / "warm_start" / "parameter_digests.json").write_text(json.dumps(["b" * 64]))
    for name in ("warm_start", "warm_eval", "gigpo", "memory_1"):
        assert "bbbbbbbbbbbbbbbb..." in warm_start_clash(by_name[name], work, recorded), name
    for name in ("rule", "gigpo_eval", "untrained", "alfworld_warm_eval"):
        assert warm_start_clash(by_name[name], work, recorded) is None, name
    with pytest.raises(SystemExit, match="gigpo: not started: .* holds other parameters"):
        main(["--work", str(work), "--out", str(out), "--stages", "gigpo", "--max-minutes", "0"])
    assert json.loads((out / "stages.json").read_text()) == recorded  # nothing written
    (work / "warm_start" / "parameter_digests.json").write_text(json.dumps(["a" * 64]))
    assert all(warm_start_clash(st, work, recorded) is None for st in by_name.values())
    # A digest noted by its first hex digits only.
    assert warm_start_clash(by_name["gigpo"], work, {"warm_start": {"parameters_sha256": "aaaa"}}
                            ) is None
    assert warm_start_clash(by_name["gigpo"], work, {"warm_start": {"parameters_sha256": "ab"}})
    # No digest recorded (a run from before the driver kept them): nothing to compare.
    assert warm_start_clash(by_name["gigpo"], work, {}) is None


def test_a_warm_start_recorded_under_another_arithmetic_is_refused_before_it_trains(tmp_path):
    """bf16 autocast (a CPU with native bf16 products) and float32 (one without) give other
    parameters from the same command: where --work holds no warm start and the recorded one
    ran under the other arithmetic, the stage is refused at once, not after training it."""
    from benchmarks.real_model import Stage, main, run_stage, warm_start_clash
    from gagpo.common.cpu import arithmetic

    here = arithmetic()
    other = "float32" if here == "bf16 autocast" else "bf16 autocast"
    work, out = tmp_path / "work", tmp_path / "out"
    out.mkdir()
    recorded = {"warm_start": {"parameters_sha256": "a" * 64, "arithmetic": other}}
    (out / "stages.json").write_text(json.dumps(recorded))
    by_name = {st.name: st for st in stages(work, Settings())}
    for name in ("warm_start", "gigpo", "seeds_gagpo_s1", "two_thirds_lora_gagpo_s1"):
        clash = warm_start_clash(by_name[name], work, recorded, here)
        assert f"trained under {other}" in clash and f"runs {here}" in clash, name
        assert warm_start_clash(by_name[name], work, recorded, other) is None, name
        assert warm_start_clash(by_name[name], work, recorded) is None, name  # not known here
    assert warm_start_clash(by_name["rule"], work, recorded, here) is None
    no_field = {"warm_start": {"parameters_sha256": "a" * 64}}
    assert warm_start_clash(by_name["warm_start"], work, no_field, here) is None
    with pytest.raises(SystemExit, match=f"warm_start: not started: .*trained under {other}"):
        # No budget: were the refusal gone, the driver would stop at once, not train.
        main(["--work", str(work), "--out", str(out), "--stages", "warm_start,gigpo",
              "--max-minutes", "0"])
    assert not (work / "logs").exists()  # nothing ran
    # A warm start already here: its digest decides, whatever the arithmetic.
    (work / "warm_start").mkdir(parents=True)
    (work / "warm_start" / "parameter_digests.json").write_text(json.dumps(["a" * 64]))
    assert warm_start_clash(by_name["gigpo"], work, recorded, here) is None
    # A training stage's record names the arithmetic it ran under.
    folder = tmp_path / "run"
    quick = Stage("quick", ["gagpo", "train", "--help", "--out-dir", str(folder)], folder)
    assert run_stage(quick, tmp_path / "logs", here=here)["arithmetic"] == here
    assert "arithmetic" not in run_stage(quick, tmp_path / "logs")


def test_the_cpu_flags_decide_the_arithmetic(tmp_path):
    from gagpo.common.cpu import arithmetic, native_bf16

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nflags : fpu sse2 avx2 avx512f avx512_bf16 fma\n")
    assert native_bf16(cpuinfo) and arithmetic(cpuinfo) == "bf16 autocast"
    cpuinfo.write_text("processor : 0\nflags : fpu sse2 avx2 avx512f fma\n")
    assert not native_bf16(cpuinfo) and arithmetic(cpuinfo) == "float32"
    assert arithmetic(tmp_path / "missing") == "float32"


def test_the_fair_comparison_differs_in_estimator_and_seed_only(tmp_path):
    from benchmarks.real_model import CHEAP, FAIR, seed_stages

    s = Settings()
    train = [st for st in seed_stages(tmp_path, s) if st.command[1] == "train"]
    assert [st.name for st in train] == [f"seeds_{a}_s{k}" for k in range(s.seeds)
                                         for a in s.seed_estimators]

    def without(cmd, *flags):
        out = list(cmd)
        for flag in flags:
            i = out.index(flag)
            del out[i:i + 2]
        return out

    base = without(train[0].command, "--algo", "--seed", "--out-dir")
    assert all(without(st.command, "--algo", "--seed", "--out-dir") == base for st in train)
    assert base[-len(FAIR + CHEAP):] == FAIR + CHEAP  # last: they win over the recipe's own
    assert "--kl-coef" in base[:-len(FAIR + CHEAP)]  # the recipe's own, which CHEAP overrides
    evals = [st.command for st in seed_stages(tmp_path, s) if st.command[1] == "eval"]
    assert len({tuple(without(c, "--policy", "--out")) for c in evals}) == 1  # same goals


def test_the_fewer_layer_seeds_differ_from_the_fair_comparisons_gagpo_in_their_flags_only(
        tmp_path):
    from benchmarks.real_model import FEWER_LAYERS, HALF_LORA, fewer_layers_stages, seed_stages

    s = Settings()
    assert FEWER_LAYERS["half_lora"] == HALF_LORA == ["--lora-layers", "15"]
    assert FEWER_LAYERS["two_thirds_lora"] == ["--lora-layers", "20"]
    fair = {st.name.removeprefix("seeds_"): st for st in seed_stages(tmp_path, s)}
    stages_ = fewer_layers_stages(tmp_path, s)
    for folder, flags in FEWER_LAYERS.items():
        mine = {st.name.removeprefix(f"{folder}_"): st for st in stages_
                if st.name.startswith(f"{folder}_")}
        assert sorted(mine) == sorted(n for n in fair if n.startswith("gagpo_"))
        for name, stage in mine.items():
            cmd, base = stage.command, fair[name].command
            out = "--out-dir" if cmd[1] == "train" else "--out"
            i, j = cmd.index(out), base.index(out)
            assert cmd[i + 1] != base[j + 1] and folder in cmd[i + 1]  # a folder of its own
            rest = cmd[:i] + cmd[i + 2:]
            if cmd[1] == "train":
                assert rest == base[:j] + base[j + 2:] + flags
            else:  # the same goals, seed and temperature: paired with the fair comparison's
                assert folder in cmd[cmd.index("--policy") + 1]
                k, m = rest.index("--policy"), base.index("--policy")
                assert rest[:k] + rest[k + 2:] == (base[:m] + base[m + 2:j] + base[j + 2:])


def test_the_fair_comparisons_table_pairs_the_seeds_on_the_goals(tmp_path):
    from benchmarks.real_model import seeds_table

    def write(folder: Path, wins: list[bool]) -> None:
        folder.mkdir(parents=True)
        (folder / "episodes.jsonl").write_text("".join(
            json.dumps({"task_id": f"webshop:{i}", "task_type": "t", "won": w,
                        "score": 1.0 if w else 0.5, "length": 4, "malformed_replies": 0,
                        "invalid_actions": 1}) + "\n" for i, w in enumerate(wins)))

    s = Settings(goals=4)
    assert seeds_table(tmp_path, s) == ""
    write(tmp_path / "eval_warm_start", [False, False, False, False])
    write(tmp_path / "seeds" / "eval_gagpo_s0", [True, True, False, False])
    write(tmp_path / "seeds" / "eval_gagpo_s1", [True, False, False, False])
    write(tmp_path / "seeds" / "eval_grpo_s0", [False, False, False, True])
    text = seeds_table(tmp_path, s)
    assert "| GAGPO | 0 | 50.0 | 75.0 |" in text and "| GAGPO | 1 | 25.0 | 62.5 |" in text
    assert "| GRPO | 0 | 25.0 | 62.5 |" in text
    # GAGPO pooled over its 2 seeds against the warm start: per goal 1, 0.5, 0, 0 -> +37.5.
    assert "A = warm start, B = GAGPO (2 seeds)" in text
    assert "| success % | 0.0 | 37.5 | +37.5 [" in text
    # GRPO against GAGPO on the one seed both finished: -25 + 25 on goals 0, 1, 3.
    assert "A = GRPO (1 seed), B = GAGPO (1 seed)" in text
    assert "| success % | 25.0 | 50.0 | +25.0 [" in text
    # Seed by seed: each seed against the warm start, and the one seed both finished; no
    # interval over one seed.
    assert "GAGPO - warm start, seed by seed" in text and "| across 2 seeds | +37.5 [" in text
    assert "| 0 | +25.0 [" in text and "| across 1 seed | +25.0 [n/a] | +12.5 [n/a] |" in text
    # A second GRPO seed: GAGPO - GRPO is +25 then -25 (success), +12.5 then -12.5 (score), so
    # across the two seeds the mean is 0 and the t interval +-t(0.975, 1) * 25 (or 12.5).
    write(tmp_path / "seeds" / "eval_grpo_s1", [True, True, False, False])
    text = seeds_table(tmp_path, s)
    assert "| 1 | -25.0 [" in text
    assert ("| across 2 seeds | +0.0 [-317.7, +317.7], p = 1.000 | +0.0 [-158.8, +158.8], "
            "p = 1.000 |") in text


def write_evaluation(folder: Path, wins: list[bool], invalid: int) -> None:
    """An evaluation's records as ``gagpo eval`` writes them: one 4-step episode a goal, a win
    scoring 1 and a loss 0.5, ``invalid`` of each episode's steps not admissible."""
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"by_type": {}, "seconds": 1}))
    (folder / "episodes.jsonl").write_text("".join(
        json.dumps({"task_id": f"webshop:{i}", "task_type": "t", "won": w,
                    "score": 1.0 if w else 0.5, "length": 4, "malformed_replies": 0,
                    "invalid_actions": invalid}) + "\n" for i, w in enumerate(wins)))


def test_lora_on_fewer_layers_keeps_its_own_records_beside_every_layers_and_pairs_them(
        tmp_path, monkeypatch):
    """seeds/eval_gagpo_s0 and two_thirds_lora/eval_gagpo_s0 share a folder name: one --out
    holding both recipes (a study run whole on one machine) must keep both evaluations and
    both runs' metrics, and its table must pair each seed with its partner on the goals."""
    from benchmarks.real_model import fewer_layers_table, seeds_table

    write = write_evaluation

    def metrics(folder: Path, score: float) -> None:
        folder.mkdir(parents=True)
        (folder / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "train/score": score})
                                              + "\n")

    work, out, s = tmp_path / "work", tmp_path / "out", Settings(goals=4)
    assert fewer_layers_table(work, s) == ""
    write(work / "seeds" / "eval_gagpo_s0", [True, True, False, False], invalid=1)
    write(work / "two_thirds_lora" / "eval_gagpo_s0", [True, False, False, False], invalid=2)
    metrics(work / "seeds" / "gagpo_s0", 0.4)
    metrics(work / "two_thirds_lora" / "gagpo_s0", 0.3)
    monkeypatch.setattr(sys, "argv", ["real_model"])
    first = report(work, out, s, {})
    for folder in ("seeds/eval_gagpo_s0", "two_thirds_lora/eval_gagpo_s0"):
        assert ((out / "evals" / folder / "episodes.jsonl").read_bytes()
                == (work / folder / "episodes.jsonl").read_bytes()), folder
        assert (out / "evals" / f"{folder}.json").exists()
    assert json.loads((out / "metrics" / "seeds" / "gagpo_s0.jsonl").read_text())[
        "train/score"] == 0.4
    assert json.loads((out / "metrics" / "two_thirds_lora" / "gagpo_s0.jsonl").read_text())[
        "train/score"] == 0.3
    # Each run's own figures (admissible: 3 of 4 steps, then 2 of 4), then the pairing:
    # goal 1 won by every layer only, so -25 points of success, -12.5 of score.
    table = fewer_layers_table(work, s)
    assert "LoRA on the upper 20 layers (`two_thirds_lora`, `--lora-layers 20`)" in table
    assert "| every layer | 0 | 50.0 | 75.0 | 75.0 |" in table
    assert "| LoRA on the upper 20 layers | 0 | 25.0 | 62.5 | 50.0 |" in table
    assert ("A = every layer (1 seed), B = LoRA on the upper 20 layers (1 seed)" in table
            and "| success % | 50.0 | 25.0 | -25.0 [" in table)
    assert "| across 1 seed | -25.0 [n/a] | -12.5 [n/a] |" in table
    assert "upper 15" not in table  # half_lora has no seed here
    assert table in first
    # Once the runs are gone, the kept records draw the same report.
    assert report(tmp_path / "elsewhere", out, s, {}) == first
    # A record under the folder's name alone could be either recipe's: read as neither.
    flat = tmp_path / "flat"
    write(flat / "evals" / "eval_gagpo_s0", [True, False, False, False], invalid=0)
    assert seeds_table(tmp_path / "none", s, flat) == ""
    assert fewer_layers_table(tmp_path / "none", s, flat) == ""
    # The committed fair comparison draws its own seeds' table from its records.
    fair = Path(__file__).resolve().parents[1] / "benchmarks/results/real_model/fair_run"
    kept = seeds_table(tmp_path / "none", Settings(), fair)
    assert "| GAGPO | 0 | 12.5 | 49.4 |" in kept and "| GRPO | 2 | 16.0 | 50.0 |" in kept


def test_alfworlds_second_run_teaches_longer_and_counts_wins_where_rl_will_see_them(tmp_path):
    """The second ALFWorld run: the warm start makes more passes over the same expert
    episodes; its wins are counted on the training games at the rollouts' temperature and on
    the held-out games; GAGPO trains from it under the fair comparison's recipe; the table
    reports the wins of GAGPO's training groups from its metrics."""
    from benchmarks.real_model import CHEAP, FAIR, alfworld_win_stages, wins_table

    s = Settings()
    parser = build_parser()
    by_name = {st.name: st for st in alfworld_win_stages(tmp_path, s)}
    assert list(by_name) == ["alfworld_wins_warm_start", "alfworld_wins_warm_train",
                             "alfworld_wins_warm_eval", "alfworld_wins_gagpo",
                             "alfworld_wins_gagpo_eval"]
    assert set(by_name) <= {st.name for st in stages(tmp_path, s)}
    warm = tmp_path / "alfworld_wins_warm_start"
    cfg = config_from_args(parser.parse_args(by_name["alfworld_wins_warm_start"].command[1:]))
    assert (cfg.env, cfg.iterations, cfg.bc_episodes, cfg.bc_epochs, cfg.out_dir) == (
        "ALFWorld-v0", 0, s.alfworld_bc_episodes, s.alfworld_win_bc_epochs, str(warm))
    assert s.alfworld_win_bc_epochs > s.bc_epochs
    train = parser.parse_args(by_name["alfworld_wins_warm_train"].command[1:])
    assert (train.split, train.episodes, train.temperature, train.policy) == (
        "train", s.alfworld_bc_episodes, 1.0, str(warm / "final"))
    held = parser.parse_args(by_name["alfworld_wins_warm_eval"].command[1:])
    assert (held.split, held.episodes, held.temperature) == (
        ALFWORLD.eval_split, s.alfworld_games, 0.4)
    rl = by_name["alfworld_wins_gagpo"].command
    assert rl[-len(FAIR + CHEAP):] == FAIR + CHEAP
    cfg = config_from_args(parser.parse_args(rl[1:]))
    assert (cfg.algo, cfg.model, cfg.lora_rank, cfg.reward, cfg.temperature) == (
        "gagpo", str(warm / "final"), 16, "success", 1.0)
    final = parser.parse_args(by_name["alfworld_wins_gagpo_eval"].command[1:])
    assert final.policy == str(tmp_path / "alfworld_wins_gagpo" / "final")
    assert final.split == ALFWORLD.eval_split

    assert wins_table(tmp_path, s) == ""
    folder = tmp_path / "alfworld_wins_eval_warm_start_train"
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps({"by_type": {"all": {
        **RULE_ROW, "episodes": 48, "success": 0.25, "success_ci95": [0.15, 0.39]}},
        "seconds": 60}))
    run = tmp_path / "alfworld_wins_gagpo"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"iteration": i + 1, "train/success": w / 16}) + "\n"
        for i, w in enumerate([3, 0, 5])))
    text = wins_table(tmp_path, s)
    assert "| warm start, training games, temperature 1.0 | 48 | 25.0 [15.0, 39.0] |" in text
    assert "| warm start + GAGPO, valid_unseen games | not run yet |" in text
    assert "iterations 1-3: 3, 0, 5." in text


def _beside_the_fair_seeds(tmp_path, s: Settings, folder: str, recipe_stages) -> tuple[dict, dict]:
    """The fair comparison's stages and ``folder``'s among ``recipe_stages``, each keyed by its
    name without the folder's prefix (``gagpo_s0``, ``gagpo_s0_eval``), so that a recipe's seed
    pairs with the fair comparison's of the same name."""
    from benchmarks.real_model import seed_stages

    fair = {st.name.removeprefix("seeds_"): st for st in seed_stages(tmp_path, s)}
    mine = {st.name.removeprefix(f"{folder}_"): st for st in recipe_stages
            if st.name.startswith(f"{folder}_")}
    return fair, mine


def test_todays_recipe_seeds_are_the_fair_comparisons_gagpo_fully_fine_tuned(tmp_path):
    """The learning a cheaper recipe must equal: the same warm start, seed, settings and goals
    as the fair comparison's GAGPO, without LoRA (CHEAP), which is the iteration benchmark's
    ``today`` recipe."""
    from benchmarks.iteration_time import RECIPES
    from benchmarks.real_model import (
        CHEAP,
        FAIR,
        FULL_FINE_TUNING,
        full_fine_tuning_stages,
        train_command,
    )

    s = Settings()
    fair, mine = _beside_the_fair_seeds(tmp_path, s, FULL_FINE_TUNING,
                                        full_fine_tuning_stages(tmp_path, s))
    assert sorted(mine) == sorted(n for n in fair if n.startswith("gagpo_"))
    assert {st.name for st in stages(tmp_path, s)} >= {st.name for st in mine.values()}
    for name, stage in mine.items():
        cmd, base = stage.command, fair[name].command
        out = "--out-dir" if cmd[1] == "train" else "--out"
        i, j = cmd.index(out), base.index(out)
        assert cmd[i + 1] == str(tmp_path / FULL_FINE_TUNING / Path(base[j + 1]).name)
        if cmd[1] == "train":
            assert cmd[:i] + cmd[i + 2:] == base[:j] + base[j + 2:-len(CHEAP)]
            seed = int(cmd[cmd.index("--seed") + 1])
            model = cmd[cmd.index("--model") + 1]
            assert cmd == train_command(model, Path(cmd[i + 1]), s, seed=seed,
                                        iterations=s.iterations) + FAIR + RECIPES["today"]
        else:  # the same goals, seed and temperature as every other recipe's evaluation
            k, m = cmd.index("--policy"), base.index("--policy")
            assert cmd[k + 1] == str(tmp_path / FULL_FINE_TUNING / name.removesuffix("_eval")
                                     / "final")
            assert cmd[:k] + cmd[k + 2:i] + cmd[i + 2:] == base[:m] + base[m + 2:j] + base[j + 2:]


def test_every_lora_recipe_pairs_with_full_fine_tuning_on_the_seeds_both_finished(tmp_path):
    """Whether a cheaper iteration learns as much: each LoRA recipe's seeds against today's
    recipe's (full fine-tuning) on the same goals, in the report once both sides of a seed
    are evaluated, from the kept records once the runs are gone."""
    from benchmarks.real_model import full_fine_tuning_table

    work, s = tmp_path / "work", Settings(goals=4)
    write_evaluation(work / "seeds" / "eval_gagpo_s0", [True, True, False, False], invalid=1)
    write_evaluation(work / "two_thirds_lora" / "eval_gagpo_s0", [True, False, False, False],
                     invalid=2)
    assert full_fine_tuning_table(work, s) == ""  # no full fine-tuning seed yet
    write_evaluation(work / "full_fine_tuning" / "eval_gagpo_s1", [True] * 4, invalid=0)
    assert full_fine_tuning_table(work, s) == ""  # seed 1 has no LoRA partner
    write_evaluation(work / "full_fine_tuning" / "eval_gagpo_s0", [False, True, True, False],
                     invalid=0)
    table = full_fine_tuning_table(work, s)
    every, two_thirds = table.split("LoRA on the upper 20 layers (`two_thirds_lora`")
    assert every.startswith("LoRA on every layer (`seeds`, `--lora-rank 16 ")
    assert "against today's recipe (full fine-tuning, `--aggregation token-mean" in every
    assert "| full fine-tuning | 0 | 50.0 | 75.0 | 100.0 |" in every
    assert "| LoRA on every layer | 0 | 50.0 | 75.0 | 75.0 |" in every
    # every layer wins goal 0 and loses goal 2: level; two thirds loses goals 1 and 2.
    assert "| across 1 seed | +0.0 [n/a] | +0.0 [n/a] |" in every
    assert " --lora-layers 20`) against today's recipe" in two_thirds
    assert "| LoRA on the upper 20 layers | 0 | 25.0 | 62.5 | 50.0 |" in two_thirds
    assert "| across 1 seed | -25.0 [n/a] | -12.5 [n/a] |" in two_thirds
    assert "upper 15" not in table
    out = tmp_path / "out"
    assert table in report(work, out, s, {})
    assert full_fine_tuning_table(tmp_path / "gone", s, out) == table


@pytest.mark.parametrize(("folder", "lr"), [("lora_lr3e4_one_pass", "3e-4"),
                                            ("lora_lr2e4_one_pass", "2e-4")])
def test_one_pass_lora_is_the_fair_comparisons_lora_at_another_rate_in_one_decoding_pass(
        tmp_path, folder, lr):
    """Each one-pass LoRA recipe trains what its README says (the flags given last win, as the
    trainer's own parser reads them), the iteration benchmark times that same work (the rate
    changes none), and the report pairs its seeds with today's recipe's."""
    from benchmarks.iteration_time import RECIPES
    from benchmarks.real_model import (
        ONE_PASS_LORA,
        full_fine_tuning_table,
        one_pass_lora_stages,
    )

    s = Settings()
    fair, mine = _beside_the_fair_seeds(tmp_path, s, folder, one_pass_lora_stages(tmp_path, s))
    assert sorted(mine) == sorted(n for n in fair if n.startswith("gagpo_"))
    assert {st.name for st in stages(tmp_path, s)} >= {st.name for st in mine.values()}
    parser = build_parser()
    # The benchmark's lora-brisk is this work: the same flags, the last learning rate apart.
    timed = list(RECIPES["lora-brisk"])
    timed[len(timed) - timed[::-1].index("--lr")] = lr
    for name, stage in mine.items():
        if stage.command[1] != "train":
            assert stage.command[stage.command.index("--policy") + 1] == str(
                tmp_path / folder / name.removesuffix("_eval") / "final")
            continue
        cfg = config_from_args(parser.parse_args(stage.command[1:])).to_dict()
        base = config_from_args(parser.parse_args(fair[name].command[1:])).to_dict()
        assert (cfg["lr"], cfg["rollout_batch_tokens"]) == (float(lr), 0)
        assert (base["lr"], base["rollout_batch_tokens"]) == (1e-4, 8192)
        assert (cfg["lora_rank"], cfg["kl_coef"], cfg["gradient_checkpointing"]) == (16, 0.0,
                                                                                     "off")
        differ = {k for k, v in cfg.items() if base[k] != v}
        assert differ == {"lr", "rollout_batch_tokens", "out_dir"}
        assert stage.command[-len(timed):] == timed
    assert list(ONE_PASS_LORA)[0] == "lora_lr3e4_one_pass"  # its stages keep their places
    work = tmp_path / "work"
    write_evaluation(work / "full_fine_tuning" / "eval_gagpo_s0", [True, True, False, False],
                     invalid=0)
    write_evaluation(work / folder / "eval_gagpo_s0", [True, True, True, False], invalid=1)
    table = full_fine_tuning_table(work, Settings(goals=4))
    assert table.startswith(f"LoRA on every layer at lr {lr}, one pass (`{folder}`, ")
    assert f"| LoRA on every layer at lr {lr}, one pass | 0 | 75.0 |" in table
    assert "| across 1 seed | +25.0 [n/a] |" in table


def _recipe_config(tmp_path: Path, name: str) -> dict:
    """The settings the trainer reads from the iteration benchmark's command for ``name``."""
    from benchmarks.iteration_time import RECIPES
    from benchmarks.real_model import FAIR, train_command

    cmd = train_command("warm", tmp_path / name, Settings(), seed=0, iterations=1) + FAIR \
        + RECIPES[name]
    return config_from_args(build_parser().parse_args(cmd[1:])).to_dict()


def test_the_unfolded_lora_recipe_is_lora_brisk_with_peft_s_layers_only(tmp_path):
    """The iteration benchmark's ``lora-brisk-unfolded`` times the fold's saving: the trainer
    reads its command as ``lora-brisk``'s with ``--fold-lora off``, and ``lora-brisk`` folds."""
    folded, unfolded = (_recipe_config(tmp_path, n) for n in ("lora-brisk", "lora-brisk-unfolded"))
    assert (folded["fold_lora"], unfolded["fold_lora"]) == ("auto", "off")
    assert folded["lora_rank"] == 16
    differ = {k for k in folded if folded[k] != unfolded[k]}
    assert differ == {"fold_lora", "out_dir"}


def test_the_kl_lora_recipe_is_lora_in_one_pass_with_todays_kl_term(tmp_path, capsys):
    """The iteration benchmark's ``lora-kl`` times keeping today's KL term with LoRA: the
    trainer reads it as ``lora-brisk`` at the fair comparison's LoRA rate with ``today``'s KL
    weight, nothing else, and ``--bf16 off`` reaches every recipe's command."""
    from benchmarks.iteration_time import RECIPES, run_recipe

    kl, brisk, today = (_recipe_config(tmp_path, n) for n in ("lora-kl", "lora-brisk", "today"))
    assert (kl["kl_coef"], kl["lr"], kl["lora_rank"]) == (today["kl_coef"], 1e-4, 16)
    assert kl["kl_coef"] > 0 == brisk["kl_coef"]
    assert {k for k in kl if kl[k] != brisk[k]} == {"kl_coef", "lr", "out_dir"}
    with pytest.raises(SystemExit, match="failed"):  # no such model: the child fails fast
        run_recipe("lora-kl", RECIPES["lora-kl"], str(tmp_path / "none"), tmp_path / "w", 1,
                   0, bf16="off")
    assert capsys.readouterr().out.rstrip().endswith("--kl-coef 0.01 --bf16 off")


def test_the_embeddings_recipe_is_the_fair_comparisons_lora_with_the_embedding_trained(tmp_path):
    """``lora_embeddings_one_pass`` trains what its docstring says: the fair comparison's LoRA
    (same rate) in one decoding pass with the tied embedding trained in full at today's rate;
    the iteration benchmark's ``lora-embeddings`` times the same settings; the report names
    both rates."""
    from benchmarks.iteration_time import RECIPES
    from benchmarks.real_model import (
        EMBEDDINGS_LORA,
        FAIR,
        full_fine_tuning_table,
        one_pass_lora_stages,
        train_command,
    )

    s = Settings()
    fair, mine = _beside_the_fair_seeds(tmp_path, s, EMBEDDINGS_LORA,
                                        one_pass_lora_stages(tmp_path, s))
    assert sorted(mine) == sorted(n for n in fair if n.startswith("gagpo_"))
    parser = build_parser()
    for name, stage in mine.items():
        if stage.command[1] != "train":
            continue
        cfg = config_from_args(parser.parse_args(stage.command[1:])).to_dict()
        base = config_from_args(parser.parse_args(fair[name].command[1:])).to_dict()
        assert {k for k in cfg if cfg[k] != base[k]} == {
            "rollout_batch_tokens", "lora_embeddings", "embeddings_lr", "out_dir"}
        assert (cfg["lr"], cfg["embeddings_lr"], cfg["lora_embeddings"]) == (1e-4, 1e-5, True)
        timed = config_from_args(parser.parse_args(
            (train_command("warm", tmp_path / "t", s, seed=cfg["seed"], iterations=1) + FAIR
             + RECIPES["lora-embeddings"])[1:])).to_dict()
        assert {k for k in cfg if cfg[k] != timed[k]} <= {"model", "out_dir", "iterations"}
    work = tmp_path / "work"
    write_evaluation(work / "full_fine_tuning" / "eval_gagpo_s0", [True, False], invalid=0)
    write_evaluation(work / EMBEDDINGS_LORA / "eval_gagpo_s0", [True, True], invalid=0)
    assert ("| LoRA on every layer at lr 1e-4, embeddings at lr 1e-5, one pass | 0 |"
            in full_fine_tuning_table(work, Settings(goals=2)))
