"""Mutation testing of the modules whose correctness users cannot see (``make mutate``).

Each target below is a module (or a few functions of one) that users never look at directly but
whose mistakes quietly corrupt results: the reward, the state keys, the advantages, the losses,
the action parser, the vector env's failure handling, session tokens and URL parsing. mutmut
(3.x) plants one small bug at a time in a copy of the code (``mutants/``) and runs the tests
that reach the mutated function; a mutant that no test notices "survives".

Targets run one at a time, each in a fresh ``mutants/`` tree with only its own files mutated
and only its own test files selected (mutmut further narrows that to the tests that call the
mutated function), with one mutmut worker. The table gives, per target, the mutants killed
(a test failed or timed out) out of all generated; then the kill rate counting the surviving
mutants listed in ``benchmarks/results/mutation/equivalent.md`` as equivalent (they behave
exactly like the original, so no test can kill them) out of the total.

    python -m tools.mutation                   # every target
    python -m tools.mutation reward parser     # some targets
    python -m tools.mutation --list            # the targets
    python -m tools.mutation --summary out.md  # also write the table and survivors there
    python -m tools.mutation --from-reports    # the table of the last runs, rerunning none
    python -m tools.mutation --max-minutes 30 vector-failures  # stop a long target early
    python -m tools.mutation --survivors tokens  # only the last run's survivors, untested

A target stopped early (``--max-minutes``) reports the mutants it tested, out of how many it
had, as its error line; the row counts only the tested ones.

This script reads the project's ``[tool.mutmut]`` settings (pyproject.toml) and replaces, per
target, which files are mutated and which tests are selected. (A plain ``mutmut run`` names
mutants after the folders, ``envs.vector...``, while the tests import ``gagpo.envs.vector``, so
it would run none of the layers' mutants; this script names them after the import namespace.)
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
REPORT = MUTANTS / "report"
"""Per-target results and logs; kept when a target's fresh tree replaces the previous one."""
EQUIVALENT = ROOT / "benchmarks" / "results" / "mutation" / "equivalent.md"
GOAL = 0.90

# mutmut's exit-code classes (mutmut.stats.status_by_exit_code): 1 and 3 are test failures,
# the timeout codes are mutants that made a test run forever (also a detection).
_KILLED = {1, 3}
_TIMEOUT = {36, -24, 24, 152, 255}


@dataclass(frozen=True)
class Target:
    """One row of the table."""

    name: str
    files: tuple[str, ...]
    """Source files mutated (relative to the repository root)."""
    tests: tuple[str, ...]
    """Test files (or node ids) selected for this target."""
    functions: tuple[str, ...] = ()
    """mutmut function keys (``module.x_func``, ``module.xǁClassǁmethod``) to test; empty
    means every function of ``files``."""
    subprocess_tests: tuple[str, ...] = ()
    """Tests whose work runs in child processes (torchrun's ranks), which mutmut's selection
    (the tests seen calling a function in process) never picks: after mutmut, each surviving
    mutant is run against these too, and a failure kills it."""

    def patterns(self) -> list[str]:
        """mutmut's mutant-name filters for this target."""
        if self.functions:
            return [f"{f}__mutmut_*" for f in self.functions]
        return [f"{_module(f)}.*" for f in self.files]

    def selects(self, mutant: str) -> bool:
        """Whether a mutant name belongs to this target."""
        if self.functions:
            return mutant.partition("__mutmut_")[0] in self.functions
        return any(mutant.startswith(_module(f) + ".") for f in self.files)


@cache
def _packages() -> dict[str, str]:
    """Top-level folder -> the package it is imported as (pyproject's package-dir: envs/ is
    ``gagpo.envs``)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    with open(ROOT / "pyproject.toml", "rb") as f:
        package_dir = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    return {folder: package for package, folder in package_dir.items()}


def _module(path: str) -> str:
    """The module a source file is imported as: ``envs/vector.py`` -> ``gagpo.envs.vector``."""
    folder, _, rest = path.removesuffix(".py").partition("/")
    return ".".join([_packages().get(folder, folder), *rest.split("/")])


def _name_mutants_by_import(mm: types.ModuleType) -> None:
    """Make mutmut name a mutant after the module the tests import (``gagpo.envs.vector.x_…``)
    instead of after its file's path (``envs.vector.x_…``).

    The trampoline in the mutated code runs a mutant only when the module part of its name is
    the function's ``__module__``; with names taken from paths, the folders imported under
    ``gagpo`` would never run a mutant (mutmut stops on the mismatch). mutmut has no setting for
    a package directory other than ``src/``, so its one naming function is wrapped where it is
    used (the mutant-testing workers are forks of this process and inherit it).
    """
    from mutmut.mutation import file_mutation
    from mutmut.utils.format_utils import get_mutant_name

    def imported_name(relative_source_path: Path, mutant_method_name: str) -> str:
        name = get_mutant_name(relative_source_path, mutant_method_name)
        head, _, tail = name.partition(".")
        package = _packages().get(head)
        return f"{package}.{tail}" if package and package != head else name

    mm.get_mutant_name = imported_name
    file_mutation.get_mutant_name = imported_name


TARGETS: tuple[Target, ...] = (
    Target(
        "reward",
        ("servers/webshop/reward.py",),
        ("tests/test_reward.py",),
    ),
    Target(
        "state keys",
        (
            "envs/base.py",
            "envs/alfworld/state.py",
            "common/digest.py",
            "servers/webshop/shop.py",
        ),
        (
            "tests/test_state_keys.py",
            "tests/test_webshop_env.py::test_equal_state_keys_exactly_when_the_whole_states_are_equal",
            "tests/test_alfworld_env.py::test_equal_state_keys_exactly_when_the_engine_states_are_equal",
            "tests/test_alfworld_env.py::test_state_key_comes_from_the_world_not_the_text",
            "tests/test_alfworld_env.py::test_same_task_and_seed_give_the_same_start_and_key",
        ),
        (
            "gagpo.envs.base.x_make_state_key",
            "gagpo.envs.alfworld.state.x_world_facts",
            "gagpo.envs.alfworld.state.x_state_key",
            "gagpo.envs.alfworld.state.x_world_state_key",
            "gagpo.common.digest.x_digest",
            "gagpo.servers.webshop.shop.xǁStateǁkey_parts",
        ),
    ),
    Target(
        "advantages",
        ("gagpo/advantages.py",),
        ("tests/test_advantages.py",),
    ),
    Target(
        "losses",
        ("gagpo/losses.py", "gagpo/logprobs.py", "gagpo/batching.py"),
        ("tests/test_losses.py",),
        # reply_logprobs (and its packed pass) is left out: each of its tests runs a model
        # forward, which makes it the one function whose mutants take minutes each on a small
        # CPU machine. The packed layout and its micro-batches are in.
        (
            "gagpo.losses.x_action_log_ratio",
            "gagpo.losses.x__real",
            "gagpo.losses.x_log_ratio",
            "gagpo.losses.x_aggregate",
            "gagpo.losses.x_kl_low_var",
            "gagpo.losses.x_policy_loss",
            "gagpo.logprobs.x_pad_batch",
            "gagpo.logprobs.x_right_align",
            "gagpo.batching.x_micro_batches",
            "gagpo.logprobs.x_pack_replies",
            "gagpo.batching.x_packed_micro_batches",
        ),
    ),
    Target(
        "parser",
        ("agents/parser.py",),
        ("tests/test_agents_parser.py",),
    ),
    Target(
        "vector failures",
        ("envs/vector.py",),
        # Ray's actors take seconds to start for each mutant; the process backend's failure
        # handling is the one under test here (Ray's has the same tests in tests/test_vector.py).
        # A mutant that leaves a worker hanging fails its test after a minute (each takes a few
        # seconds), not after the project's five.
        ("tests/test_vector.py", "tests/test_vector_failures.py", "-k", "not ray",
         "--timeout=60"),
        (
            "gagpo.envs.vector.x__env_error",
            "gagpo.envs.vector.x__build_timeout",
            "gagpo.envs.vector.xǁ_ProcessWorkersǁcollect",
            "gagpo.envs.vector.xǁ_ProcessWorkersǁ_death",
            "gagpo.envs.vector.xǁ_ProcessWorkersǁ_kill",
            "gagpo.envs.vector.xǁ_ProcessWorkersǁrestart",
            "gagpo.envs.vector.xǁGroupVectorEnvǁreset",
            "gagpo.envs.vector.xǁGroupVectorEnvǁstep",
            "gagpo.envs.vector.xǁGroupVectorEnvǁ_fail",
        ),
    ),
    Target(
        "tokens",
        ("servers/webshop/web/tokens.py",),
        ("tests/test_tokens.py", "tests/test_token_reasons.py"),
    ),
    Target(
        "trainer update",
        ("gagpo/trainer.py", "gagpo/step_credit.py", "gagpo/policy_update.py"),
        (
            "tests/test_training_behaviour.py",
            "tests/test_trainer.py::test_one_update_raises_positive_and_lowers_negative_actions",
            "tests/test_trainer.py::test_rewards_success_score_and_invalid_penalty",
            "tests/test_trainer.py::test_invalid_penalty_goes_to_the_step_by_default_or_into_the_return",
            "tests/test_trainer.py::test_the_update_uses_the_resolved_aggregation",
            "tests/test_trainer.py::test_step_tables_record_the_penalty_where_it_went",
        ),
        # The path from the step table to the optimizer; train()'s loop (its wiring is what
        # the end-to-end tests check) is left out: each of its mutants costs a training run.
        (
            "gagpo.step_credit.x_valid_steps",
            "gagpo.step_credit.x_rewards_and_penalties",
            "gagpo.step_credit.x_step_advantages",
            "gagpo.trainer.x_rewards_and_penalties",
            "gagpo.trainer.x_advantages_of",
            "gagpo.trainer.x_training_batch",
            "gagpo.policy_update.x_optimizer_steps",
            "gagpo.policy_update.x_update",
            "gagpo.policy_update.x_recompute_old_logprobs",
        ),
        # The update's gradient summed over ranks, FSDP's padding passes: 2 gloo ranks.
        subprocess_tests=(
            "tests/test_trainer.py::test_two_ranks_update_like_one_process_on_the_whole_batch",
        ),
    ),
    Target(
        "step rows",
        ("agents/rollout.py",),
        ("tests/test_rollout.py",),
        (
            "gagpo.agents.rollout.x_rollout",
            "gagpo.agents.rollout.xǁStepTableǁcolumn",
            "gagpo.agents.rollout.xǁStepTableǁepisodes",
            "gagpo.agents.rollout.xǁStepRowǁto_dict",
        ),
    ),
    Target(
        "evaluation",
        ("gagpo/evaluate.py",),
        ("tests/test_evaluate.py",),
        (
            "gagpo.evaluate.x_wilson",
            "gagpo.evaluate.x_mean_interval",
            "gagpo.evaluate.x_bootstrap_interval",
            "gagpo.evaluate.x_ratio_or_nan",
            "gagpo.evaluate.x_episode_ratio_interval",
            "gagpo.evaluate.x_summarise",
            "gagpo.evaluate.x_format_table",
            "gagpo.evaluate.x_held_out_lines",
        ),
    ),
    Target(
        "warm start",
        ("gagpo/warm_start.py",),
        ("tests/test_warm_start.py",),
        # Behaviour cloning over ranks (FSDP, a different number of demonstrations per rank).
        subprocess_tests=(
            "tests/test_trainer.py::test_torchrun_fsdp_with_lora_score_mode_and_warm_start",
            "tests/test_trainer.py::test_bc_over_two_ranks_equals_one_process",
        ),
    ),
    Target(
        "run folder",
        ("gagpo/run_folder.py",),
        ("tests/test_resume_rules.py",),
        (
            "gagpo.run_folder.x_earlier_run",
            "gagpo.run_folder.x_prepare_run_folder",
            "gagpo.run_folder.x_record_config_changes",
            "gagpo.run_folder.x__iteration_of",
            "gagpo.run_folder.x_cut_run",
        ),
    ),
    Target(
        "resume rules",
        ("gagpo/train_config.py",),
        ("tests/test_resume_rules.py",),
        (
            "gagpo.train_config.x_resume_differences",
            "gagpo.train_config.x_check_resume",
        ),
    ),
    Target(
        "URL parsing",
        ("servers/webshop/web/pages_view.py",),
        ("tests/test_url_parsing.py",),
        (
            "gagpo.servers.webshop.web.pages_view.x__literal",
            "gagpo.servers.webshop.web.pages_view.x__keywords",
            "gagpo.servers.webshop.web.pages_view.x__check_query",
            "gagpo.servers.webshop.web.pages_view.x__page_num",
            "gagpo.servers.webshop.web.pages_view.x__options",
        ),
    ),
    # The code that landed with PPO's critic, OpenEnv serving, the TRL adapters, export and
    # the viewer. (mutmut leaves decorated functions alone: Critic.values (@torch.no_grad),
    # the properties, running_server (@contextmanager) are not mutated.)
    Target(
        "critic",
        ("gagpo/critic.py",),
        # The FSDP run of PPO (tests/test_trainer.py, torchrun) is left out: minutes a mutant.
        # The two-rank update (padding passes, the loss's scale) runs on the survivors only.
        ("tests/test_ppo.py", "-k", "not two_ranks"),
        subprocess_tests=(
            "tests/test_ppo.py::test_critic_over_two_ranks_updates_like_one_process_on_all_rows",
        ),
    ),
    Target(
        "OpenEnv server and client",
        ("gagpo/integrations/openenv/environment.py", "gagpo/integrations/openenv/guard.py",
         "gagpo/integrations/openenv/app.py", "gagpo/integrations/openenv/client.py"),
        # The two tests that run the code in child processes (a `gagpo serve env` process;
        # remote envs in vector-env worker processes), whose calls mutmut's selection cannot
        # see, are left out of its passes; the second runs on the survivors. So is the static
        # check of the Space folder (OpenEnv's CLI on files, no code of the target).
        ("tests/test_openenv_server.py", "tests/test_openenv_limits.py",
         "tests/test_openenv_remote.py", "-k",
         "not serve_env_serves and not group_vector_env_plays_served and not space_folder"),
        # What a session sees; serve/main/the argument parser start servers in a process of
        # their own (one test, on loopback) and are left out.
        (
            "gagpo.integrations.openenv.environment.xǁServedEnvǁ__post_init__",
            "gagpo.integrations.openenv.environment.xǁServedEnvǁtasks",
            "gagpo.integrations.openenv.environment.x__plain",
            "gagpo.integrations.openenv.environment.x_observation",
            "gagpo.integrations.openenv.environment.xǁGagpoEnvironmentǁ__init__",
            "gagpo.integrations.openenv.environment.xǁGagpoEnvironmentǁreset",
            "gagpo.integrations.openenv.environment.xǁGagpoEnvironmentǁ_task_at",
            "gagpo.integrations.openenv.environment.xǁGagpoEnvironmentǁstep",
            "gagpo.integrations.openenv.environment.xǁGagpoEnvironmentǁclose",
            "gagpo.integrations.openenv.environment.xǁGagpoEnvironmentǁlist_splits",
            "gagpo.integrations.openenv.environment.xǁGagpoEnvironmentǁnum_tasks",
            "gagpo.integrations.openenv.environment.xǁGagpoEnvironmentǁ_task",
            "gagpo.integrations.openenv.environment.xǁGagpoEnvironmentǁlist_tasks",
            "gagpo.integrations.openenv.environment.xǁGagpoEnvironmentǁget_task",
            "gagpo.integrations.openenv.environment.xǁGagpoEnvironmentǁget_task_range",
            "gagpo.integrations.openenv.guard.x__error",
            "gagpo.integrations.openenv.guard.x__frame_problem",
            "gagpo.integrations.openenv.guard.xǁSessionGuardǁ__call__",
            "gagpo.integrations.openenv.app.x_build_app",
            "gagpo.integrations.openenv.app.xǁ_Factoryǁ__call__",
            "gagpo.integrations.openenv.client.xǁGagpoEnvClientǁ_step_payload",
            "gagpo.integrations.openenv.client.xǁGagpoEnvClientǁ_parse_result",
            "gagpo.integrations.openenv.client.xǁGagpoEnvClientǁ_parse_state",
        ),
        # On the survivors also every test of a served env: mutmut ties what a module-scoped
        # fixture runs (the server's ServedEnv, its app) to the module's first test only.
        subprocess_tests=(
            "tests/test_openenv_remote.py::test_group_vector_env_plays_served_envs_as_it_plays_local_ones",
            "tests/test_openenv_server.py", "tests/test_openenv_limits.py", "-k",
            "not serve_env_serves and not space_folder",
        ),
    ),
    Target(
        "TRL adapters",
        ("gagpo/integrations/trl.py",),
        # The example's GRPOTrainer run (a warm start and two steps) is left out: minutes a
        # mutant; GRPOTrainer's reward path is in. So is the test of the tools' names: mutmut
        # puts each mutant in the class as a method of its own, which it sees as more tools.
        ("tests/test_trl_envs.py", "-k", "not trl_example and not named_and_documented"),
    ),
    Target(
        "export and checkpoint reader",
        ("gagpo/export.py", "gagpo/run_folder.py"),
        ("tests/test_export.py",),
        ("gagpo.export.x_export_checkpoint", "gagpo.run_folder.x_load_checkpoint"),
    ),
    Target(
        "viewer data",
        ("gagpo/viewer/data.py",),
        ("tests/test_viewer.py",),
    ),
    Target(
        # ALFWorld's files come from a pinned wheel: a tampered or half-fetched one must never
        # be used.
        "wheel files",
        ("common/wheel_files.py",),
        ("tests/test_wheel_files.py",),
    ),
    Target(
        # Several ranks' step tables joined into one run, and cut back on a resume.
        "ranks' step tables",
        ("gagpo/run_folder.py",),
        # torchrun's ranks run in child processes mutmut cannot see (and take minutes each):
        # the joins and cuts they rely on are tested in this process.
        ("tests/test_rank_tables.py", "tests/test_trainer.py", "-k",
         "(rank or cut or resume or step_table) and not torchrun and not two_ranks and not vllm"),
        ("gagpo.run_folder.x_read_step_table", "gagpo.run_folder.x_step_tables",
         "gagpo.run_folder.x_cut_run", "gagpo.run_folder.x__iteration_of"),
    ),
    Target(
        # LoRA's cheaper passes: the fold and the cast cache must give the model back as it was.
        "LoRA passes",
        ("common/lora.py",),
        ("tests/test_lora.py",),
    ),
    Target(
        # Packed passes and micro-batches: the same log-probs as padded ones, row for row.
        "packed passes",
        ("gagpo/logprobs.py", "gagpo/batching.py"),
        ("tests/test_losses.py", "tests/test_update_batch.py",
         "tests/test_kv_cache.py::test_packed_replies_attend_split_with_the_same_logprobs_and_gradients"),
    ),
    Target(
        # A checkpoint that does not fit the model must be refused, by resume and export alike.
        "checkpoint fit",
        ("gagpo/distributed.py",),
        ("tests/test_export.py",),
        ("gagpo.distributed.x_state_misfit", "gagpo.distributed.x_load_full_state"),
        # A sharded model loads in torchrun's ranks (child processes), as FSDP's resume does.
        subprocess_tests=(
            "tests/test_export.py::test_a_sharded_model_loads_rank_0s_full_tensors_on_every_rank",
        ),
    ),
    Target(
        # The shop's HTTP API: sessions, their step limit, and bad requests' 400s.
        "shop API",
        ("servers/webshop/web/api_view.py",),
        ("tests/test_api.py", "tests/test_tokens.py"),
    ),
    Target(
        # gagpo view's shop pages: each recorded step replayed on the run's own shop.
        "viewer shop pages",
        ("gagpo/viewer/shop.py",),
        ("tests/test_viewer_shop.py",),
    ),
    Target(
        # "B beats A" in the README rests on these intervals and tests.
        "paired comparison",
        ("gagpo/compare.py",),
        # The locale test runs gagpo compare in a child process (mutmut's stats run fails
        # there); it runs on the survivors.
        ("tests/test_compare.py", "-k", "not whatever_the_locale"),
        subprocess_tests=(
            "tests/test_compare.py::test_records_in_any_script_read_the_same_whatever_the_locale",
        ),
    ),
)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _fresh_tree() -> None:
    """Empty ``mutants/`` except the report folder: a mutated file left from another target
    would otherwise pass for this target's (mutmut trusts modification times)."""
    if MUTANTS.exists():
        for child in MUTANTS.iterdir():
            if child == REPORT:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    REPORT.mkdir(parents=True, exist_ok=True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # mutmut stops its workers on this and keeps what it measured


def _run_one(target: Target, max_seconds: float | None = None, survivors: bool = False) -> None:
    """Run mutmut on one target (in this process: mutmut changes sys.path and forks workers)
    and write its results to ``mutants/report/<slug>.json``; after ``max_seconds`` the run
    stops as on Ctrl-C, and only the mutants tested by then are reported. A target with
    ``subprocess_tests`` is reported twice: with mutmut's verdicts, then with the child-process
    pass's, so that stopping that pass loses nothing ``--survivors`` cannot go on from.

    With ``survivors``, only the mutants that survived the target's last report (equivalents
    aside), and those a stopped last run left untested, are run, against the tests as they are
    now; their verdicts replace or join the last report's.
    """
    os.chdir(ROOT)
    from mutmut.mutation.data import SourceFileMutationData

    path = REPORT / f"{_slug(target.name)}.json"
    previous = json.loads(path.read_text()) if survivors else None
    patterns = target.patterns()
    if previous is not None:
        equivalent = equivalent_mutants()
        patterns = [n for n, c in previous["exit_codes"].items()
                    if c not in _KILLED and c not in _TIMEOUT and n not in equivalent]
        for f in target.files:  # the last run's tree, before it is replaced
            data = SourceFileMutationData(path=Path(f))
            data.load()
            patterns += [k for k, v in data.exit_code_by_key.items()
                         if v is None and target.selects(k) and k not in previous["exit_codes"]]
        if not patterns:
            return
    _fresh_tree()
    import mutmut.__main__ as mm  # noqa: F401  (sets the fork start method mutmut needs)
    from mutmut import configuration
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    _name_mutants_by_import(mm)
    cfg = configuration._load_config()
    configuration._config = dataclasses.replace(
        cfg,
        only_mutate=list(target.files),
        pytest_add_cli_args_test_selection=list(target.tests),
        # Worker processes started by "spawn" (the vector env's) import this process's main
        # module, this one (tools/), from inside mutants/; some tests import benchmarks, and
        # the paired comparison's read the frozen studies' evaluations.
        also_copy=[*cfg.also_copy, Path("tools"), Path("benchmarks"), Path("studies")],
    )
    started = time.monotonic()
    commit = _git_commit()  # the code and tests copied into mutants/ now
    error = None
    if max_seconds:
        signal.signal(signal.SIGALRM, _interrupt)
        signal.setitimer(signal.ITIMER_REAL, max_seconds)
    try:
        mm._run(patterns, max_children=1)
    except SystemExit as e:  # mutmut exits on a failed clean run or no covering test
        if e.code not in (0, None):
            error = f"mutmut stopped with exit code {e.code}"
    except KeyboardInterrupt:  # the time limit struck outside mutmut's mutant loop
        error = "stopped by the time limit"
    signal.setitimer(signal.ITIMER_REAL, 0)
    results: dict[str, int | None] = {}
    for f in target.files:
        data = SourceFileMutationData(path=Path(f))
        data.load()
        results.update({k: v for k, v in data.exit_code_by_key.items() if target.selects(k)})
    if previous is not None:  # the new verdicts over the last report's
        results = {**previous["exit_codes"], **{k: results.get(k) for k in patterns}}

    def write(results: dict[str, int | None], error: str | None) -> None:
        untested = [k for k, v in results.items() if v is None]
        if untested:  # a stopped run: a mutant never run is no survivor
            error = (f"stopped after {len(results) - len(untested)} of {len(results)} mutants"
                     + (f" ({error})" if error else ""))
            results = {k: v for k, v in results.items() if v is not None}
        diffs = {}
        for name, code in results.items():
            if code not in _KILLED and code not in _TIMEOUT:
                try:
                    diffs[name] = get_diff_for_mutant(name, path=_file_of(target, name))
                except Exception as e:  # a diff is a convenience; the verdict stands without it
                    diffs[name] = f"(no diff: {e})"
        out = {
            "target": target.name,
            "files": list(target.files),
            "tests": list(target.tests),
            "exit_codes": results,
            "diffs": diffs,
            "seconds": (round(time.monotonic() - started, 1)
                        + (previous or {}).get("seconds", 0)),
            "error": error,
            "commit": commit if previous is None else f"{previous['commit']}, survivors {commit}",
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        }
        path.write_text(json.dumps(out, indent=1))

    if target.subprocess_tests:
        # mutmut's verdicts first: a stop in the child-process pass (minutes a survivor) keeps
        # them, and --survivors goes on from there.
        write(results, "the child-process tests had not run on the survivors"
              + (f"; {error}" if error else ""))
        results.update(_run_subprocess_tests(target, results))
    write(results, error)


def _run_subprocess_tests(target: Target, results: dict[str, int | None]) -> dict[str, int]:
    """Run ``target.subprocess_tests`` on each surviving mutant not listed as equivalent (they
    take minutes a mutant; mutmut's trampolines pick the mutant named by ``MUTANT_UNDER_TEST``
    in the child processes too); returns the verdicts that change: 1 for a failing test, 36
    (mutmut's timeout code) for one over 15 minutes."""
    changed = {}
    equivalent = equivalent_mutants()
    survivors = [k for k, v in results.items() if v is not None and v not in _KILLED
                 and v not in _TIMEOUT and k not in equivalent]
    for n, name in enumerate(survivors, start=1):
        env = dict(os.environ, MUTANT_UNDER_TEST=name, OMP_NUM_THREADS="1")
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                 *target.subprocess_tests], cwd=MUTANTS, env=env, capture_output=True,
                timeout=900, check=False)
            code = 1 if proc.returncode != 0 else None
        except subprocess.TimeoutExpired:
            code = 36
        print(f"subprocess tests {n}/{len(survivors)}: {name}: "
              f"{'killed' if code else 'survived'}", flush=True)
        if code:
            changed[name] = code
    return changed


def _git_commit() -> str:
    """The checked-out commit (the tests and code a target ran against)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head


def _file_of(target: Target, mutant: str) -> str:
    for f in target.files:
        if mutant.startswith(_module(f) + "."):
            return f
    return target.files[0]


def equivalent_mutants(path: Path = EQUIVALENT) -> set[str]:
    """Mutant names listed as equivalent: each ``### <name>`` heading of the file."""
    if not path.exists():
        return set()
    return set(re.findall(r"^###\s+`?([^\s`]+)`?\s*$", path.read_text(), flags=re.M))


@dataclass
class Row:
    target: str
    total: int
    killed: int
    equivalent: int
    survivors: dict[str, str]
    """Surviving (or untested) mutants not listed as equivalent, with their diffs."""
    seconds: float
    error: str | None
    commit: str = "?"
    omp_num_threads: str | None = None

    @property
    def rate(self) -> float:
        return self.killed / self.total if self.total else 0.0

    @property
    def rate_with_equivalent(self) -> float:
        return (self.killed + self.equivalent) / self.total if self.total else 0.0


def summarise(report: dict, equivalent: set[str]) -> Row:
    codes = report["exit_codes"]
    killed = sum(1 for c in codes.values() if c in _KILLED or c in _TIMEOUT)
    alive = [n for n, c in codes.items() if c not in _KILLED and c not in _TIMEOUT]
    eq = [n for n in alive if n in equivalent]
    survivors = {n: report["diffs"].get(n, "") for n in alive if n not in equivalent}
    return Row(
        report["target"],
        len(codes),
        killed,
        len(eq),
        survivors,
        report["seconds"],
        report["error"],
        report.get("commit", "?"),
        report.get("omp_num_threads"),
    )


def render(rows: list[Row], command: str) -> str:
    """The table, then each survivor's diff (markdown)."""
    # Imported here, not at the top: benchmarks.record imports gagpo, and a gagpo imported
    # before mutmut's run is the checkout's, so the tests would run unmutated code.
    from benchmarks.record import machine

    lines = [
        f"Command: `{command}`  ",
        f"Machine: {machine()}  ",
        f"mutmut {_mutmut_version()}, one worker, "
        f"OMP_NUM_THREADS={', '.join(sorted({str(r.omp_num_threads) for r in rows}))}",
        "",
        "| target | mutants | killed | kill rate | equivalent | kill rate, equivalents aside "
        "| survivors | time | commit |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.target} | {r.total} | {r.killed} | {100 * r.rate:.1f}% | {r.equivalent} "
            f"| {100 * r.rate_with_equivalent:.1f}% | {len(r.survivors)} | {r.seconds:.0f} s "
            f"| {r.commit} |"
        )
    total = sum(r.total for r in rows)
    killed = sum(r.killed for r in rows)
    eq = sum(r.equivalent for r in rows)
    if total:
        lines.append(
            f"| **all** | {total} | {killed} | {100 * killed / total:.1f}% | {eq} "
            f"| {100 * (killed + eq) / total:.1f}% | {sum(len(r.survivors) for r in rows)} "
            f"| {sum(r.seconds for r in rows):.0f} s | |"
        )
    for r in rows:
        if r.error:
            lines += ["", f"**{r.target}: {r.error}** (see mutants/report/{_slug(r.target)}.log)"]
    for r in rows:
        if not r.survivors:
            continue
        lines += ["", f"## Survivors: {r.target}", ""]
        for name, diff in sorted(r.survivors.items(), key=lambda kv: _natural(kv[0])):
            lines += [f"### {name}", "", "```diff", diff.strip(), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def _natural(name: str) -> tuple:
    head, _, n = name.rpartition("__mutmut_")
    return (head, int(n) if n.isdigit() else 0)


def _mutmut_version() -> str:
    from importlib.metadata import version

    return version("mutmut")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", help="target names (default: all); see --list")
    parser.add_argument("--list", action="store_true", help="list the targets and exit")
    parser.add_argument("--summary", type=Path, help="also write the markdown summary here")
    parser.add_argument("--from-reports", action="store_true",
                        help="render the last runs' results (mutants/report/) without running")
    parser.add_argument("--max-minutes", type=float,
                        help="stop each target after this long and report the mutants tested")
    parser.add_argument("--survivors", action="store_true",
                        help="run only the last run's surviving and untested mutants")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one target here
    args = parser.parse_args(argv)
    by_slug = {_slug(t.name): t for t in TARGETS}
    if args.list:
        for t in TARGETS:
            print(f"{_slug(t.name):16} {', '.join(t.files)}  <- {', '.join(t.tests)}")
        return 0
    if not args.from_reports and importlib.util.find_spec("mutmut") is None:
        parser.error("mutmut is not installed: pip install 'mutmut>=3.8,<4' (make mutate does)")
    if args.one:
        _run_one(by_slug[args.one], args.max_minutes and 60 * args.max_minutes, args.survivors)
        return 0
    unknown = [n for n in args.targets if _slug(n) not in by_slug]
    if unknown:
        parser.error(f"unknown targets {unknown}; choose from {sorted(by_slug)}")
    chosen = [by_slug[_slug(n)] for n in args.targets] or list(TARGETS)
    REPORT.mkdir(parents=True, exist_ok=True)
    equivalent = equivalent_mutants()
    rows = []
    for target in chosen:
        slug = _slug(target.name)
        print(f"== {target.name}: {', '.join(target.files)}", flush=True)
        log = REPORT / f"{slug}.log"
        result = REPORT / f"{slug}.json"
        if args.survivors and not result.exists():
            parser.error(f"--survivors: no last run of {target.name} ({result} is missing)")
        if not args.from_reports:
            if not args.survivors:
                result.unlink(missing_ok=True)
            # A process per target: mutmut keeps global state and edits sys.path.
            with open(log, "w") as out:
                extra = [] if args.max_minutes is None else ["--max-minutes", str(args.max_minutes)]
                extra += ["--survivors"] if args.survivors else []
                subprocess.run(
                    [sys.executable, "-m", "tools.mutation", "--one", slug, *extra],
                    cwd=ROOT,
                    # One thread per BLAS/torch op: timings (and so mutmut's timeouts) do not
                    # depend on the machine's core count.
                    env={"OMP_NUM_THREADS": "1", **os.environ},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    check=False,
                )
        if not result.exists():
            report = {
                "target": target.name,
                "exit_codes": {},
                "diffs": {},
                "seconds": 0.0,
                "error": f"no result (see {log.relative_to(ROOT)})",
            }
        else:
            report = json.loads(result.read_text())
        row = summarise(report, equivalent)
        rows.append(row)
        print(
            f"   {row.killed}/{row.total} killed ({100 * row.rate:.1f}%), "
            f"{row.equivalent} equivalent, {len(row.survivors)} surviving, {row.seconds:.0f} s",
            flush=True,
        )
    command = "python -m tools.mutation " + " ".join(args.targets)
    if args.from_reports:
        command = "python -m tools.mutation <target>, one target at a time (see the times)"
    text = render(rows, command.strip())
    print()
    print(text)
    if args.summary:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        args.summary.write_text(text)
    below = [r.target for r in rows if r.rate_with_equivalent < GOAL]
    if below:
        print(f"below {100 * GOAL:.0f}% killed: {', '.join(below)}")
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
