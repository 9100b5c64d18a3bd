"""A real language model learns to shop: SmolLM2-135M-Instruct on WebShop-v0, on a CPU.

The run goes in stages, each a ``gagpo`` command whose output folder says when it is done, so
that an interrupted run goes on where it stopped (a stage half done starts over, except
training, which resumes from its last checkpoint):

1. baselines on the held-out goals: the expert (knows the goal), WebShop's rule baseline;
2. the untrained model on the same goals;
3. the warm start: behaviour cloning on the expert's won episodes of training goals, its
   replies written with short thoughts that say why it acts (``gagpo train --iterations 0
   --bc-episodes N``; the model lands in ``warm_start/final``);
4. the warm-started model on the held-out goals;
5. reinforcement learning from that checkpoint (``--model warm_start/final``), one run per
   estimator (GAGPO first, then GiGPO and GRPO with the same budget and seed), each then
   evaluated on the held-out goals.

Every evaluation plays the first ``--goals`` goals of WebShop's test split (never trained on),
at the trainer's evaluation temperature, and is summarised from its trajectories: well-formed
reply rate, admissible-action rate, success and score with 95% intervals, mean episode length.

    python -m benchmarks.real_model --work runs/real_model --out benchmarks/results/real_model
    python -m benchmarks.real_model --stages baselines,warm_start   # some stages only
    python -m benchmarks.real_model --report-only                   # the table from what is done

``--out`` receives the table (``table.md``), the curves of the RL runs (``curves.png``), the
commands each stage ran and their logs' last lines; the weights stay in ``--work``. The CPU
settings below are chosen to fit a 2-core, 24 GB machine; ``--iterations`` and ``--goals``
scale the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.record import machine

MODEL = "smollm2-135m"
ENV = "WebShop-v0"
MAX_STEPS = 10
"""Episode limit everywhere (the expert needs 6.5 steps on average when it searches with the
request's words, as its demonstrations do)."""
HISTORY = 2
MAX_PROMPT_TOKENS = 1024
"""History is dropped oldest first beyond this; a results page alone is about 950 tokens."""
MAX_NEW_TOKENS = 96
EVAL_TEMPERATURE = 0.4
SEED = 0
ESTIMATORS = ("gagpo", "gigpo", "grpo")


@dataclass
class Settings:
    goals: int = 200
    bc_episodes: int = 24
    bc_epochs: int = 1
    bc_lr: float = 1e-4
    iterations: int = 6
    """8 were planned; GAGPO's run stopped at 6 for time (about 15-20 minutes an iteration on
    a 2-core CPU shared with other work), and the other estimators get the same budget."""
    n_groups: int = 4
    group_size: int = 4
    lr: float = 1e-5
    eval_batch: int = 50
    bc_memory: list[str] = field(default_factory=lambda: [
        # Two rows per pass, activations kept: the recorded warm start ran so, and peaked at
        # 8.4 GB RSS (benchmarks/results/real_model/stages.json).
        "--gradient-checkpointing", "off", "--micro-batch-tokens", "2048"])
    rl_memory: list[str] = field(default_factory=lambda: [
        # Layers recomputed in the backward pass, 4,096 padded tokens per pass: the update
        # (the KL reference's copy included) stays near 4 GB (benchmarks/update_memory).
        "--gradient-checkpointing", "on", "--micro-batch-tokens", "4096"])
    vllm: bool = False
    """Sample rollouts and play evaluations with vLLM (a CUDA machine)."""


GPU = Settings(goals=200, bc_episodes=64, bc_epochs=2, iterations=4, n_groups=8, group_size=8,
               eval_batch=100, bc_memory=["--micro-batch-tokens", "32768"],
               rl_memory=["--micro-batch-tokens", "32768"], vllm=True)
"""``--gpu``: the same stages at the scale of one GPU (``scripts/gpu_checks.sh`` runs them)."""


def _model_flags(prompt_budget: bool = True) -> list[str]:
    """A model's reply and prompt settings (a vLLM policy in ``gagpo eval`` counts no prompt
    budget of ours: it takes none)."""
    budget = ["--max-prompt-tokens", str(MAX_PROMPT_TOKENS)] if prompt_budget else []
    return ["--max-new-tokens", str(MAX_NEW_TOKENS), "--history-length", str(HISTORY), *budget]


def eval_command(policy: str, out: Path, s: Settings) -> list[str]:
    if s.vllm and policy not in ("expert", "rule"):
        policy = f"vllm:{policy}"
    cmd = ["gagpo", "eval", "--env", ENV, "--policy", policy, "--split", "test",
           "--episodes", str(s.goals), "--batch", str(s.eval_batch), "--seed", str(SEED),
           "--temperature", str(EVAL_TEMPERATURE), "--env-arg", f"max_steps={MAX_STEPS}",
           "--env-arg", f"max_episode_steps={MAX_STEPS}", "--out", str(out)]
    if policy not in ("expert", "rule"):
        cmd += _model_flags(prompt_budget=not policy.startswith("vllm:"))
    return cmd


def train_command(model: str, out: Path, s: Settings, *, algo: str = "gagpo",
                  warm_start: bool = False) -> list[str]:
    cmd = ["gagpo", "train", "--env", ENV, "--model", model, "--mode", "generate",
           "--algo", algo, "--max-steps", str(MAX_STEPS), "--temperature", "1.0",
           "--eval-temperature", str(EVAL_TEMPERATURE), "--eval-episodes", "0",
           *(s.bc_memory if warm_start else s.rl_memory), "--seed", str(SEED),
           "--out-dir", str(out),
           "--no-progress", "--resume", *_model_flags()]
    if warm_start:
        return cmd + ["--iterations", "0", "--bc-episodes", str(s.bc_episodes),
                      "--bc-epochs", str(s.bc_epochs), "--bc-lr", str(s.bc_lr), "--bc-batch",
                      "8"]
    return cmd + ["--iterations", str(s.iterations), "--n-groups", str(s.n_groups),
                  "--group-size", str(s.group_size), "--lr", str(s.lr), "--reward", "score",
                  "--kl-coef", "0.01", "--save-every", "1",
                  *(["--generation", "vllm"] if s.vllm else [])]


@dataclass
class Stage:
    name: str
    command: list[str]
    done_file: Path
    """Exists once the stage has finished."""
    metrics: Path | None = None
    """A training stage's ``metrics.jsonl``: its iterations' own times, which add up across
    the processes of a resumed run (the stage's wall time is only the last process's)."""


def stages(work: Path, s: Settings) -> list[Stage]:
    warm = work / "warm_start"
    out = [
        Stage("expert", eval_command("expert", work / "eval_expert", s),
              work / "eval_expert" / "summary.json"),
        Stage("rule", eval_command("rule", work / "eval_rule", s),
              work / "eval_rule" / "summary.json"),
        Stage("warm_start", train_command(MODEL, warm, s, warm_start=True),
              warm / "final" / "config.json"),
        Stage("warm_eval", eval_command(str(warm / "final"), work / "eval_warm_start", s),
              work / "eval_warm_start" / "summary.json"),
    ]
    for algo in ESTIMATORS:
        run = work / algo
        out += [Stage(algo, train_command(str(warm / "final"), run, s, algo=algo),
                      run / "final" / "config.json", run / "metrics.jsonl"),
                Stage(f"{algo}_eval", eval_command(str(run / "final"), work / f"eval_{algo}", s),
                      work / f"eval_{algo}" / "summary.json")]
    out.append(Stage("untrained", eval_command(MODEL, work / "eval_untrained", s),
                     work / "eval_untrained" / "summary.json"))
    return out


def run_stage(stage: Stage, log_dir: Path) -> dict[str, float]:
    """Run one stage's command (its output to ``log_dir/<name>.log``); returns its minutes
    and its process's peak resident memory."""
    log_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "gagpo.cli", *stage.command[1:]]
    print(f"== {stage.name}: {shlex.join(stage.command)}", flush=True)
    started = time.perf_counter()
    with open(log_dir / f"{stage.name}.log", "a") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        proc.returncode = os.waitstatus_to_exitcode(status)
    minutes = (time.perf_counter() - started) / 60
    if proc.returncode != 0:
        raise SystemExit(f"stage {stage.name} failed (exit {proc.returncode}): see "
                         f"{log_dir / (stage.name + '.log')}")
    peak = usage.ru_maxrss / 2**20  # KiB on Linux
    print(f"   done in {minutes:.1f} min, peak RSS {peak:.2f} GB", flush=True)
    cost = {"minutes": round(minutes, 2), "peak_rss_gb": round(peak, 2)}
    if stage.metrics is not None and stage.metrics.exists():
        rows = [json.loads(line) for line in stage.metrics.read_text().splitlines() if line]
        cost["iteration_minutes"] = round(sum(r["time/iteration"] for r in rows) / 60, 2)
    return cost


# --- the report ----------------------------------------------------------------------------------


def eval_figures(folder: Path) -> dict[str, Any] | None:
    """One evaluation's overall row as ``gagpo eval`` summarised it, with its time (None if it
    has not run)."""
    path = folder / "summary.json"
    if not path.exists():
        return None
    summary = json.loads(path.read_text())
    return summary["by_type"]["all"] | {"seconds": summary["seconds"]}


ROWS = (("expert (knows the goal)", "eval_expert"), ("rule baseline", "eval_rule"),
        ("SmolLM2, untrained", "eval_untrained"), ("SmolLM2, warm start", "eval_warm_start"),
        *((f"SmolLM2, warm start + {a.upper()}", f"eval_{a}") for a in ESTIMATORS))


def table(work: Path) -> str:
    def pct(f: dict, key: str) -> str:
        lo, hi = f[f"{key}_ci95"]
        return f"{100 * f[key]:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"

    lines = ["| policy | goals | well-formed % | admissible % | success % | score x100 | "
             "mean length | eval min |", "|---|---|---|---|---|---|---|---|"]
    for label, folder in ROWS:
        f = eval_figures(work / folder)
        if f is None:
            lines.append(f"| {label} | not run yet | | | | | | |")
            continue
        lines.append(f"| {label} | {f['episodes']} | {pct(f, 'well_formed')} | "
                     f"{pct(f, 'admissible')} | {pct(f, 'success')} | {pct(f, 'score')} | "
                     f"{f['mean_length']:.2f} | {f['seconds'] / 60:.1f} |")
    return "\n".join(lines)


CURVES = (("train/success", "train success"), ("train/score", "train score"),
          ("train/invalid_rate", "invalid-action rate"), ("loss/kl", "KL to the warm start"),
          ("loss/entropy", "entropy (nats/token)"))


def curves(work: Path, png: Path) -> bool:
    """The RL runs' training curves as a PNG; False when no run has logged an iteration."""
    runs = {}
    for algo in ESTIMATORS:
        path = work / algo / "metrics.jsonl"
        if path.exists():
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            if rows:
                runs[algo] = rows
    if not runs:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CURVES), figsize=(4 * len(CURVES), 3.2))
    for ax, (key, title) in zip(axes, CURVES, strict=True):
        for algo, rows in runs.items():
            points = [(r["iteration"], r[key]) for r in rows if key in r]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", label=algo.upper())
        ax.set_title(title)
        ax.set_xlabel("iteration")
    axes[0].legend()
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return True


def report(work: Path, out: Path, s: Settings, costs: dict[str, dict[str, float]]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    text = table(work)
    (out / "table.md").write_text(text + "\n")
    curves(work, out / "curves.png")
    path = out / "stages.json"  # each stage's minutes and peak RSS, as its last run measured
    known = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps(known | costs, indent=1) + "\n")
    commands = "\n".join(f"# {st.name}\n{shlex.join(st.command)}" for st in stages(work, s))
    (out / "commands.sh").write_text(commands + "\n")
    (out / "machine.txt").write_text(
        f"{machine()}\nlast updated {time.strftime('%Y-%m-%d %H:%M %Z')} by "
        f"python -m benchmarks.real_model {' '.join(sys.argv[1:])}\n")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("runs/real_model"),
                        help="where the runs and evaluations go (weights included)")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the table, curves, commands and stage times")
    parser.add_argument("--stages", default=None,
                        help="comma-separated stage names (default: every stage, in order)")
    parser.add_argument("--goals", type=int, default=None, help="held-out goals (default 200)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="RL iterations per estimator (default: 6; 4 with --gpu)")
    parser.add_argument("--bc-episodes", type=int, default=None,
                        help="expert episodes of the warm start (default: 24; 64 with --gpu)")
    parser.add_argument("--gpu", action="store_true",
                        help="one GPU's scale, vLLM sampling (the defaults fit a 2-core CPU)")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    base = GPU if args.gpu else Settings()
    s = replace(base, goals=args.goals or base.goals,
                iterations=args.iterations or base.iterations,
                bc_episodes=args.bc_episodes or base.bc_episodes)
    todo = stages(args.work, s)
    names = [st.name for st in todo]
    if args.stages:
        wanted = args.stages.split(",")
        unknown = [w for w in wanted if w not in names]
        if unknown:
            parser.error(f"unknown stages {unknown}; choose from {names}")
        todo = [st for st in todo if st.name in wanted]
    costs: dict[str, dict[str, float]] = {}
    if not args.report_only:
        for st in todo:
            if st.done_file.exists():
                print(f"== {st.name}: done ({st.done_file})", flush=True)
                continue
            costs[st.name] = run_stage(st, args.work / "logs")
            if args.out:
                report(args.work, args.out, s, costs)
    text = report(args.work, args.out, s, costs) if args.out else table(args.work)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
