"""One WebShop RL iteration's time under today's recipe and a cheaper one, side by side.

Each recipe is :mod:`studies.real_model.real_model`'s training command for the fair comparison (its
``Settings``, ``FAIR``) with the recipe's flags added last (the last of a flag wins). Every
recipe trains ``--iterations`` from the same ``--model`` (a warm start) with the same seed, each
in a fresh process, one after the other, so that iteration 1 of every recipe samples the same
episodes: its update runs on the same batch. The report gives, per recipe, the trainer's own
times (generation, update, the whole iteration), the tokens the update ran, the process's CPU
seconds and peak memory, the ratios to the first recipe, and what each iteration learned (train
score, the policy loss, the KL to the warm start where the recipe computes it).

Recipes (:data:`RECIPES`):

* ``today``: the fair comparison's recipe as it was (full fine-tuning at lr 1e-5, a KL term to
  the warm start at 0.01 with a frozen copy as reference, gradient checkpointing on, 2,048
  tokens a pass): the memory settings that keep the update under 4 GB.
* ``roomy``: today's with checkpointing off and glibc's heap (``real_model --roomy``, how the
  recorded runs ran on a machine with memory to spare): the same result, another cost.
* ``lora`` (``real_model.CHEAP``, the fair comparison's recipe): LoRA of rank 16 on every
  linear layer at lr 1e-4, no KL term, gradient checkpointing off. Each saving is a pass not
  run: the frozen weights get no gradient (the backward pass computes activation gradients
  only), the KL term's reference pass goes, and checkpointing's second forward pass goes. Why
  it learns as much: :data:`studies.real_model.real_model.LORA`.
* ``lora-one-pass``: ``lora`` with every rollout row in one generation pass (no
  ``--rollout-batch-tokens`` cap): more padding in each prefill, a slower rollout on a CPU.
* ``lora-big-passes``: ``lora`` with 8,192 tokens an update pass instead of 2,048 (LoRA's
  activations and gradients leave the memory for it): the same sums in fewer, larger products.
* ``lora-small-passes``: ``lora`` with 1,024 tokens an update pass: more, smaller products.
* ``lora-half``: ``lora`` with adapters on the upper half of the decoder layers only
  (:data:`studies.real_model.real_model.HALF_LORA`): no backward pass below them. It trains fewer
  layers, so its learning is compared apart (seeds, held-out goals).
* ``lora-two-thirds``: ``lora`` with adapters on the upper 20 of the 30 layers
  (:data:`studies.real_model.real_model.TWO_THIRDS_LORA`); its learning too is compared apart.
* ``lora-brisk``: ``lora`` at lr 3e-4 with every rollout row in one generation pass
  (:data:`studies.real_model.real_model.BRISK_LORA_FLAGS`); the learning rate leaves an iteration's
  cost alone, so its time is ``lora-one-pass``'s; its learning is compared apart.
* ``lora-brisk-unfolded``: ``lora-brisk`` with peft's own layers in the update (``--fold-lora
  off``), as every LoRA recipe ran before the fold existed: the fold's saving, side by side.
* ``lora-embeddings``: ``lora-one-pass`` with the tied token embedding (the output layer)
  trained in full (:data:`studies.real_model.real_model.EMBEDDINGS_LORA_FLAGS`): what training that
  matrix beside the adapters costs; its learning is compared apart.
* ``lora-kl``: ``lora-one-pass`` with today's KL term kept (``--kl-coef 0.01``; the reference
  is the model with its adapters off, one more forward pass an update): what keeping the one
  term every LoRA recipe drops costs.

In float32 on a CPU every other LoRA recipe's update runs each adapted layer as one product
with its adapters folded in (``--fold-lora auto``, the default since 743a6c9): the same
log-probs and gradients up to rounding.

    python -m studies.cheaper_iteration.iteration_time --model runs/real_model/warm_start/final
    python -m studies.cheaper_iteration.iteration_time --model DIR --recipes today,lora \\
        --iterations 2 --work runs/iteration_time \\
        --out studies/cheaper_iteration/results/iteration_time

``--bf16 off`` runs every recipe in float32 where ``auto`` would pick bf16 autocast (a CPU
with bf16 products): the arithmetic of a CPU without them, where the fold applies.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.record import command_line, recorded, run_child
from studies.real_model.real_model import (
    BRISK_LORA_FLAGS,
    CHEAP,
    EMBEDDINGS_LORA_FLAGS,
    FAIR,
    HALF_LORA,
    ROOMY,
    TWO_THIRDS_LORA,
    Settings,
    train_command,
)

RECIPES: dict[str, list[str]] = {
    "today": [],
    "roomy": ROOMY,
    "lora": CHEAP,
    "lora-one-pass": [*CHEAP, "--rollout-batch-tokens", "0"],
    "lora-big-passes": [*CHEAP, "--micro-batch-tokens", "8192"],
    "lora-small-passes": [*CHEAP, "--micro-batch-tokens", "1024"],
    "lora-half": [*CHEAP, *HALF_LORA],
    "lora-two-thirds": [*CHEAP, *TWO_THIRDS_LORA],
    "lora-brisk": [*CHEAP, *BRISK_LORA_FLAGS],
    "lora-brisk-unfolded": [*CHEAP, *BRISK_LORA_FLAGS, "--fold-lora", "off"],
    "lora-embeddings": [*CHEAP, *EMBEDDINGS_LORA_FLAGS],
    "lora-kl": [*CHEAP, "--rollout-batch-tokens", "0", "--kl-coef", "0.01"],
}


@dataclass
class RecipeRun:
    name: str
    command: list[str]
    wall_s: float
    cpu_s: float
    peak_rss_gb: float
    rows: list[dict]
    """The run's ``metrics.jsonl``, one dict per iteration."""

    def total(self, key: str) -> float:
        return sum(r.get(key, 0.0) for r in self.rows)


def run_recipe(name: str, flags: list[str], model: str, work: Path, iterations: int,
               seed: int, bf16: str = "auto") -> RecipeRun:
    """Train ``iterations`` with one recipe in a fresh process (its log in ``work/name.log``)."""
    out = work / name
    if out.exists():
        raise SystemExit(f"{out} exists: give another --work, or remove it")
    s = Settings()
    cmd = train_command(model, out, s, seed=seed, iterations=iterations) + FAIR + flags
    if bf16 != "auto":
        cmd += ["--bf16", bf16]
    argv = [sys.executable, "-m", "gagpo.cli", *cmd[1:]]
    print(f"== {name}: {shlex.join(cmd)}", flush=True)
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    returncode, usage = run_child(argv, work / f"{name}.log", append=False)
    if returncode != 0:
        raise SystemExit(f"recipe {name} failed: see {work / (name + '.log')}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()
            if line.strip()]
    return RecipeRun(name, cmd, time.perf_counter() - started, usage.ru_utime + usage.ru_stime,
                     usage.ru_maxrss / 2**20, rows)


def report(runs: list[RecipeRun]) -> str:
    """The side-by-side tables: cost per recipe (ratios to the first), then what each
    iteration learned."""
    base = runs[0]
    lines = ["Cost of the RL iterations, per recipe (minutes summed over its iterations; "
             f"ratio: {base.name}'s / the recipe's):", "",
             "| recipe | iterations | generation min | update min | iteration min | "
             "update tokens | update tok/s | process CPU min | peak RSS GB | iteration x | "
             "update x |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        gen, upd, it = (r.total(k) / 60 for k in ("time/generation", "time/update",
                                                   "time/iteration"))
        tokens = r.total("loss/padded_tokens")
        lines.append(
            f"| {r.name} | {len(r.rows)} | {gen:.2f} | {upd:.2f} | {it:.2f} | {tokens:,.0f} | "
            f"{tokens / max(upd * 60, 1e-9):.0f} | {r.cpu_s / 60:.1f} | {r.peak_rss_gb:.2f} | "
            f"{base.total('time/iteration') / max(r.total('time/iteration'), 1e-9):.2f} | "
            f"{base.total('time/update') / max(r.total('time/update'), 1e-9):.2f} |")
    lines += ["", "Per iteration (iteration 1 of every recipe samples the same episodes):", "",
              "| recipe | iteration | steps | train score | train success | invalid rate | "
              "pg loss | KL | entropy | grad norm | generation s | update s |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        for row in r.rows:
            lines.append(
                f"| {r.name} | {row['iteration']} | {row.get('steps', 0)} | "
                f"{row['train/score']:.3f} | {row['train/success']:.3f} | "
                f"{row['train/invalid_rate']:.3f} | {row['loss/pg_loss']:.4f} | "
                f"{row['loss/kl']:.4f} | {row['loss/entropy']:.3f} | "
                f"{row['loss/grad_norm']:.3f} | {row['time/generation']:.0f} | "
                f"{row['time/update']:.0f} |")
    lines += ["", "Commands (OMP threads as the header says):", ""]
    lines += [f"    {shlex.join(r.command)}" for r in runs]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True,
                        help="the starting model of every recipe (a warm start's folder)")
    parser.add_argument("--recipes", default=",".join(RECIPES),
                        help=f"comma-separated, the first is the baseline (from {list(RECIPES)})")
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path("runs/iteration_time"),
                        help="where the runs go (one folder per recipe; must not exist)")
    parser.add_argument("--out", type=Path, help="also write the report to OUT/report.txt")
    parser.add_argument("--bf16", choices=["auto", "off"], default="auto",
                        help="off: every recipe in float32, whatever the CPU (default: the "
                             "trainer's auto)")
    args = parser.parse_args(argv)
    names = [n for n in args.recipes.split(",") if n]
    if unknown := [n for n in names if n not in RECIPES]:
        parser.error(f"unknown recipes {unknown}; choose from {list(RECIPES)}")
    if args.iterations < 1:
        parser.error("--iterations must be >= 1")
    if not Path(args.model).exists() and "/" in args.model:
        parser.error(f"--model {args.model}: no such folder")
    with recorded(args.out, command_line("studies.cheaper_iteration.iteration_time", argv)):
        runs = [run_recipe(n, RECIPES[n], args.model, args.work, args.iterations, args.seed,
                           args.bf16) for n in names]
        print(report(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
