"""A real language model learns to shop: SmolLM2-135M-Instruct on WebShop-v0 (and ALFWorld-v0),
on a CPU.

The run goes in stages, each a ``gagpo`` command whose output folder says when it is done, so
that an interrupted run goes on where it stopped (a stage half done starts over, except
training, which resumes from its last checkpoint). For each environment:

1. baselines on the held-out tasks: the expert (knows the goal), and on WebShop its rule
   baseline;
2. the warm start: behaviour cloning on the expert's won episodes of training tasks, its
   replies written with short thoughts that say why it acts (``gagpo train --iterations 0
   --bc-episodes N``; the model lands in ``warm_start/final``), then its evaluation;
3. reinforcement learning from that checkpoint (``--model warm_start/final``), one run per
   estimator (on WebShop GAGPO, then GiGPO and GRPO with the same budget and seed; on ALFWorld
   GAGPO), each then evaluated on the held-out tasks;
4. on WebShop, the recipe's memory: two GAGPO iterations from the warm start at its settings,
   the first in a fresh process, the second resumed (``memory_1``, ``memory_2``), for each
   process's peak RSS;
5. the untrained model on the same tasks (last: its episodes run to the step limit);
6. the fair comparison (``seeds_*``): GAGPO and GRPO from the same warm start with identical
   settings but the estimator, three seeds each, every model evaluated on the same held-out
   goals, its episodes kept for ``gagpo compare``'s paired tests;
7. ALFWorld's second run (``alfworld_wins_*``): a warm start of more passes, its wins on the
   training games (what RL's groups start from) and held-out games, then the default GAGPO
   from it under the fair comparison's recipe, with the wins of its training groups;
8. LoRA on fewer layers (``half_lora_*``, ``two_thirds_lora_*``): the fair comparison's GAGPO
   with adapters on the upper layers only, seed by seed, on the same goals, to pair with
   ``seeds_gagpo``;
9. today's recipe (``full_fine_tuning_*``): the fair comparison's GAGPO with full fine-tuning
   instead of LoRA, seed by seed on the same goals: the learning the cheaper recipes must equal.

WebShop's stages come first and keep the first run's names (``warm_start``, ``gagpo_eval``);
ALFWorld's carry the prefix ``alfworld_``. Every evaluation plays the first tasks of a split
never trained on (WebShop's test goals, ALFWorld's ``valid_unseen`` games) at the trainer's
evaluation temperature, and is summarised from its trajectories: well-formed reply rate,
admissible-action rate, success and score with 95% intervals, mean episode length.

    python -m studies.real_model.real_model --work runs/real_model --out studies/real_model/results
    python -m studies.real_model.real_model --stages expert,rule,warm_start   # some stages only
    python -m studies.real_model.real_model --report-only     # the tables from what is done
    python -m studies.real_model.real_model --max-minutes 90  # a time-limited piece; again to go on

``--out`` receives the tables (``table.md``), the curves of the RL runs (``curves.png``,
``curves_alfworld.png``), the commands of every stage, each stage's time and peak memory
(``stages.json``; a training stage's record also names its parameters' digest and the CPU's
arithmetic, bf16 autocast or float32, which a later piece must share to add to it), and
copies of every finished evaluation's summary (``evals/``) and every training run's metrics
(``metrics/``), from which the table and curves are drawn where ``--work`` lacks them; the
weights stay in ``--work``. The CPU settings below are chosen to fit a 2-core, 24 GB machine;
``--iterations`` and ``--goals`` scale the run.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.record import machine, run_child
from gagpo.common.cpu import arithmetic
from gagpo.evaluate import EPISODES_FILE

MODEL = "smollm2-135m"
HISTORY = 2
MAX_PROMPT_TOKENS = 1024
"""History is dropped oldest first beyond this; a WebShop results page alone is about 950
tokens."""
MAX_NEW_TOKENS = 96
EVAL_TEMPERATURE = 0.4
SEED = 0
ESTIMATORS = ("gagpo", "gigpo", "grpo")
ESTIMATOR_NAMES = {"gagpo": "GAGPO", "gigpo": "GiGPO", "grpo": "GRPO"}
"""How the tables and plots write each ``--algo``."""
ROLLOUT_BATCH_TOKENS = 8192
"""Cache positions per generation pass: 7 rows of 1,000-token prompts instead of 16, a decoding
cache of 0.35 GB instead of 0.8 for SmolLM2-135M (float32 keys and values, 46 kB a position)."""


@dataclass(frozen=True)
class EnvRun:
    """One environment's part of the run: where its tasks come from and how long an episode
    may last."""

    env: str
    prefix: str
    """Its stages' and folders' prefix (WebShop's is empty: the first run's names)."""
    eval_split: str
    max_steps: int
    baselines: tuple[str, ...]
    estimators: tuple[str, ...]
    rollout_batch_tokens: int = ROLLOUT_BATCH_TOKENS
    """The RL runs' ``--rollout-batch-tokens`` (0: none)."""


WEBSHOP = EnvRun("WebShop-v0", "", "test", 10, ("expert", "rule"), ESTIMATORS,
                 rollout_batch_tokens=0)
"""10 steps: the expert needs 6.5 on average when it searches with the request's words, as its
demonstrations do. Its RL runs began before ``--rollout-batch-tokens`` existed, and a resume
must keep the setting (it decides which random draws fall to which reply), so they go on
without it; the ``memory`` stages measure the recipe with it."""
ALFWORLD = EnvRun("ALFWorld-v0", "alfworld_", "valid_unseen", 20, ("expert",), ("gagpo",))
"""20 steps (ALFWorld's own limit is 50): the expert needs 6.1 on average on the generated
``valid_unseen`` games, and a CPU pays for every step a failing episode plays. GAGPO only:
its episodes are long, and the estimators are compared on WebShop."""
MAX_STEPS = WEBSHOP.max_steps


@dataclass
class Settings:
    goals: int = 200
    alfworld_games: int = 24
    """ALFWorld's held-out games (the generated ``valid_unseen`` split holds 24)."""
    bc_episodes: int = 24
    alfworld_bc_episodes: int = 48
    """The expert's episodes on ALFWorld's training games (the generated split holds 48;
    6 steps each on average, against 6.5 on WebShop)."""
    alfworld_win_bc_epochs: int = 4
    """Passes over those episodes of the second ALFWorld warm start (the first made one)."""
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
        # Layers recomputed in the backward pass, 2,048 padded tokens per pass, freed blocks
        # returned to the system: the settings under 4 GB (benchmarks/update_memory). The
        # first WebShop and ALFWorld warm starts ran with activations kept ("off") and glibc's
        # heap, and peaked at 8.4 and 9.5 GB (stages.json); the recomputed activations are the
        # kept ones, so only memory and time differ.
        "--gradient-checkpointing", "on", "--micro-batch-tokens", "2048",
        "--return-freed-memory"])
    rl_memory: list[str] = field(default_factory=lambda: [
        # The same for reinforcement learning. The recorded GAGPO run used 4,096 tokens a pass
        # and glibc's heap (4.4 GB in benchmarks/update_memory): the same sums, cut into fewer
        # passes.
        "--gradient-checkpointing", "on", "--micro-batch-tokens", "2048",
        "--return-freed-memory"])
    vllm: bool = False
    """Sample rollouts and play evaluations with vLLM (a CUDA machine)."""
    seeds: int = 3
    """Seeds of the fair comparison (:func:`seed_stages`)."""
    seed_estimators: tuple[str, ...] = ("gagpo", "grpo")
    """Its estimators, each trained from the warm start once per seed."""


GPU = Settings(goals=200, bc_episodes=64, bc_epochs=2, iterations=4, n_groups=8, group_size=8,
               eval_batch=100, bc_memory=["--micro-batch-tokens", "32768"],
               rl_memory=["--micro-batch-tokens", "32768"], vllm=True)
"""``--gpu``: the same stages at the scale of one GPU (``scripts/gpu_checks.sh`` runs them)."""


def _model_flags() -> list[str]:
    """A model's reply and prompt settings, the same in training and evaluation (a vLLM policy
    included: prompts over the budget it was trained with change what it does)."""
    return ["--max-new-tokens", str(MAX_NEW_TOKENS), "--history-length", str(HISTORY),
            "--max-prompt-tokens", str(MAX_PROMPT_TOKENS)]


def eval_command(policy: str, out: Path, s: Settings, run: EnvRun = WEBSHOP, *,
                 split: str | None = None, episodes: int | None = None,
                 temperature: float = EVAL_TEMPERATURE) -> list[str]:
    """``gagpo eval`` of ``policy`` on the first tasks of ``run``'s held-out split (or
    ``split``: ``episodes`` of them)."""
    if s.vllm and policy not in run.baselines:
        policy = f"vllm:{policy}"
    if episodes is None:
        episodes = s.goals if run is WEBSHOP else s.alfworld_games
    cmd = ["gagpo", "eval", "--env", run.env, "--policy", policy,
           "--split", split or run.eval_split,
           "--episodes", str(episodes), "--batch", str(min(s.eval_batch, episodes)),
           "--seed", str(SEED), "--temperature", str(temperature),
           "--env-arg", f"max_steps={run.max_steps}",
           "--env-arg", f"max_episode_steps={run.max_steps}", "--out", str(out)]
    if policy not in run.baselines:
        cmd += _model_flags()
    return cmd


def train_command(model: str, out: Path, s: Settings, *, algo: str = "gagpo",
                  warm_start: bool = False, run: EnvRun = WEBSHOP,
                  iterations: int | None = None, rollout_batch_tokens: int | None = None,
                  seed: int = SEED) -> list[str]:
    cmd = ["gagpo", "train", "--env", run.env, "--model", model, "--mode", "generate",
           "--algo", algo, "--max-steps", str(run.max_steps), "--temperature", "1.0",
           "--eval-temperature", str(EVAL_TEMPERATURE), "--eval-episodes", "0",
           *(s.bc_memory if warm_start else s.rl_memory), "--seed", str(seed),
           "--out-dir", str(out),
           "--no-progress", "--resume", *_model_flags()]
    if warm_start:
        episodes = s.bc_episodes if run is WEBSHOP else s.alfworld_bc_episodes
        return cmd + ["--iterations", "0", "--bc-episodes", str(episodes),
                      "--bc-epochs", str(s.bc_epochs), "--bc-lr", str(s.bc_lr), "--bc-batch",
                      "8"]
    reward = ["--reward", "score"] if run is WEBSHOP else []  # ALFWorld's is its win
    budget = run.rollout_batch_tokens if rollout_batch_tokens is None else rollout_batch_tokens
    if budget:
        cmd += ["--rollout-batch-tokens", str(budget)]
    return cmd + ["--iterations", str(iterations or s.iterations), "--n-groups", str(s.n_groups),
                  "--group-size", str(s.group_size), "--lr", str(s.lr), *reward,
                  "--kl-coef", "0.01", "--save-every", "1",
                  *(["--generation", "vllm"] if s.vllm else [])]


ROOMY = ["--gradient-checkpointing", "off", "--no-return-freed-memory"]
"""``--roomy``: settings that change a training run's memory and time, never its result
(``RESUME_MAY_CHANGE``), added after the stage's own (the last of a flag wins)."""


@dataclass
class Stage:
    name: str
    command: list[str]
    done_file: Path
    """Exists once the stage has finished."""
    metrics: Path | None = None
    """A training stage's ``metrics.jsonl``: its iterations' own times, which add up across
    the processes of a resumed run (the stage's wall time is only the last process's)."""


def env_stages(work: Path, s: Settings, run: EnvRun) -> list[Stage]:
    """One environment's stages: its baselines, the warm start and its evaluation, each
    estimator from the warm start and its evaluation, and the untrained model (the costliest
    evaluation: an untrained model's episodes run to the step limit) last."""
    p = run.prefix
    warm = work / f"{p}warm_start"

    def evaluation(name: str, policy: str, folder: str) -> Stage:
        return Stage(name, eval_command(policy, work / folder, s, run),
                     work / folder / "summary.json")

    out = [evaluation(f"{p}{b}", b, f"{p}eval_{b}") for b in run.baselines]
    out += [Stage(f"{p}warm_start", train_command(MODEL, warm, s, warm_start=True, run=run),
                  warm / "final" / "config.json"),
            evaluation(f"{p}warm_eval", str(warm / "final"), f"{p}eval_warm_start")]
    for algo in run.estimators:
        folder = work / f"{p}{algo}"
        out += [Stage(f"{p}{algo}", train_command(str(warm / "final"), folder, s, algo=algo,
                                                  run=run),
                      folder / "final" / "config.json", folder / "metrics.jsonl"),
                evaluation(f"{p}{algo}_eval", str(folder / "final"), f"{p}eval_{algo}")]
    if run is WEBSHOP:
        # The recipe's memory, measured: GAGPO's first iteration in a fresh process, then its
        # second in a resumed one (AdamW's moments and a checkpoint loaded), each process's
        # peak RSS recorded; at the recipe's settings, the rollout budget included.
        folder = work / "memory_check"
        for it in (1, 2):
            out.append(Stage(f"memory_{it}", train_command(
                str(warm / "final"), folder, s, run=run, iterations=it,
                rollout_batch_tokens=ROLLOUT_BATCH_TOKENS),
                folder / "steps" / f"iter_{it:05d}.npz", folder / "metrics.jsonl"))
    out.append(evaluation(f"{p}untrained", MODEL, f"{p}eval_untrained"))
    return out


FAIR = ["--aggregation", "token-mean", "--rollout-batch-tokens", str(ROLLOUT_BATCH_TOKENS)]
"""What the first runs did not share: GAGPO averaged its loss per action, the others per
token, and only the later runs capped a generation pass's cache. The fair comparison gives
every estimator the same loss aggregation and sampling (flags given last win)."""

LORA = ["--lora-rank", "16", "--lora-alpha", "32", "--lr", "1e-4", "--kl-coef", "0"]
"""The fair comparison's cheaper update: LoRA of rank 16 on every linear layer (alpha 32, a
scale of 2) at ten times full fine-tuning's learning rate, as LoRA's optimal rate is about ten
times full fine-tuning's (Thinking Machines, "LoRA Without Regret", 2025, which also finds
rank 1 enough for policy-gradient RL), and no KL term: the first runs' KL to the warm start
stayed under 0.01 a token, at a weight of 0.01 a hundredth of the policy loss. Frozen weights
get no gradient and the KL term's reference pass goes; with checkpointing off (:data:`ROOMY`)
one iteration took 445 s against today's recipe's 863, and 395 s against 751 on the episodes
of a later draw (``studies/cheaper_iteration/iteration_time.py``)."""
HALF_LORA = ["--lora-layers", "15"]
"""LoRA on the upper 15 of SmolLM2-135M's 30 decoder layers only (``--lora-layers``): below
them the update's forward pass builds no graph and its backward pass stops, a third less update
time on a recorded WebShop batch (53.5 s against 78.9 s for 46 rows). It changes what is
trained: on its first seed it learned less than :data:`CHEAP` (a lower held-out score,
paired; ``studies/real_model/results/half_lora/``), so it is not the fair comparison's
recipe."""
TWO_THIRDS_LORA = ["--lora-layers", "20"]
"""LoRA on the upper 20 of the 30 decoder layers: the update's backward pass stops above the
lowest 10 (55.4 s against 72.8 s on a recorded batch of 46 rows). A milder change than
:data:`HALF_LORA`, for the 2x iteration at equal learning; its learning is compared seed by
seed with the fair comparison's GAGPO (``studies/real_model/results/two_thirds_lora/``).
Its rollouts keep the fair comparison's cache cap: with every row in one decoding pass (no cap)
a rollout decoded faster a token, but under bf16 autocast passes of other shapes round logits
apart and a seed plays other episodes (92 steps against 83), so no side-by-side of the same
work (``studies/cheaper_iteration/results/iteration_time/uncapped/``)."""


CHEAP = [*LORA, *ROOMY]
"""The fair comparison's recipe on top of :data:`FAIR`: LoRA (:data:`LORA`), its rollouts
sampled with the adapters folded into the weights (``gagpo.common.lora``), activations kept
(LoRA's optimizer state and gradients are small). It keeps :data:`FAIR`'s cache cap. Every
rollout row in one generation pass (``--rollout-batch-tokens 0``) looked slower in a run that
sampled through unfolded adapters (165 s against 145,
``studies/cheaper_iteration/results/iteration_time/one_pass/``); with the adapters folded it
took 19% less a step, but played other episodes under bf16 autocast, so no same-work comparison
(``studies/cheaper_iteration/results/iteration_time/uncapped/``)."""


def seed_stages(work: Path, s: Settings) -> list[Stage]:
    """The fair comparison on WebShop: each of ``s.seed_estimators`` from the same warm start,
    once per seed, with identical settings but ``--algo`` and ``--seed`` (:data:`FAIR`,
    :data:`CHEAP`), each
    evaluated on the same held-out goals at the same evaluation seed; seed by seed, so that a
    stopped run leaves whole pairs."""
    return seeded_runs(work, s, s.seed_estimators, "seeds", "seeds_", FAIR + CHEAP)


def seeded_runs(work: Path, s: Settings, algos: Sequence[str], folder: str, prefix: str,
                flags: list[str]) -> list[Stage]:
    """Each of ``algos`` from the WebShop warm start once per seed, with ``flags`` last, in
    ``work/folder``, each evaluated on the same held-out goals at the same evaluation seed;
    seed by seed, so that a stopped run leaves whole pairs. Stages ``<prefix><algo>_s<k>``
    and ``..._eval``."""
    warm = work / "warm_start" / "final"
    out = []
    for seed in range(s.seeds):
        for algo in algos:
            name = f"{algo}_s{seed}"
            run = work / folder / name
            cmd = train_command(str(warm), run, s, algo=algo, seed=seed) + flags
            # final/ holds LoRA's adapters (adapter_config.json, read by gagpo eval as a
            # model); the tokenizer is written last.
            out += [Stage(f"{prefix}{name}", cmd, run / "final" / "tokenizer_config.json",
                          run / "metrics.jsonl"),
                    Stage(f"{prefix}{name}_eval",
                          eval_command(str(run / "final"), work / folder / f"eval_{name}", s),
                          work / folder / f"eval_{name}" / "summary.json")]
    return out


WINS = "alfworld_wins_"
"""The prefix of ALFWorld's second run (:func:`alfworld_win_stages`)."""


def alfworld_win_stages(work: Path, s: Settings) -> list[Stage]:
    """ALFWorld's second run, for RL that sees wins. The first warm start (one pass over the
    expert's 48 training episodes) won 1 of 24 held-out games, and GAGPO's groups from it won
    1 of their 96 episodes in six iterations; so a warm start of ``s.alfworld_win_bc_epochs``
    passes, its wins on the training games at the rollouts' temperature (1.0: what RL's groups
    start from) and on the held-out games, then the default GAGPO from it under the fair
    comparison's recipe (:data:`FAIR`, :data:`CHEAP`; its metrics log the wins in training
    groups), evaluated on the held-out games."""
    warm = work / f"{WINS}warm_start"
    rl = work / f"{WINS}gagpo"
    teach = train_command(MODEL, warm, s, warm_start=True, run=ALFWORLD) + [
        "--bc-epochs", str(s.alfworld_win_bc_epochs)]
    train_games = eval_command(str(warm / "final"), work / f"{WINS}eval_warm_start_train", s,
                               ALFWORLD, split="train", episodes=s.alfworld_bc_episodes,
                               temperature=1.0)
    return [
        Stage(f"{WINS}warm_start", teach, warm / "final" / "config.json"),
        Stage(f"{WINS}warm_train", train_games,
              work / f"{WINS}eval_warm_start_train" / "summary.json"),
        Stage(f"{WINS}warm_eval", eval_command(str(warm / "final"),
                                               work / f"{WINS}eval_warm_start", s, ALFWORLD),
              work / f"{WINS}eval_warm_start" / "summary.json"),
        Stage(f"{WINS}gagpo", train_command(str(warm / "final"), rl, s, run=ALFWORLD)
              + FAIR + CHEAP, rl / "final" / "tokenizer_config.json", rl / "metrics.jsonl"),
        Stage(f"{WINS}gagpo_eval", eval_command(str(rl / "final"), work / f"{WINS}eval_gagpo",
                                                s, ALFWORLD),
              work / f"{WINS}eval_gagpo" / "summary.json"),
    ]


FEWER_LAYERS: dict[str, list[str]] = {"half_lora": HALF_LORA, "two_thirds_lora": TWO_THIRDS_LORA}
"""Cheaper recipes whose learning is compared with the fair comparison's GAGPO seed by seed:
each one's folder (its stages' prefix: ``<folder>_gagpo_s<k>``) and the flags it adds to
:data:`FAIR` and :data:`CHEAP`."""


def fewer_layers_stages(work: Path, s: Settings) -> list[Stage]:
    """Whether LoRA on fewer layers (:data:`FEWER_LAYERS`: less update time) learns as much:
    the default GAGPO of the fair comparison, seed by seed, with the recipe's flags its only
    other ones, evaluated on the same goals, so that each seed pairs with
    ``seeds_gagpo_s<k>`` on every goal (``gagpo compare``)."""
    return [stage for folder, flags in FEWER_LAYERS.items()
            for stage in seeded_runs(work, s, ["gagpo"], folder, f"{folder}_",
                                     FAIR + CHEAP + flags)]


FULL_FINE_TUNING = "full_fine_tuning"
"""The folder (and stage prefix) of the default GAGPO under today's recipe: full fine-tuning at
the recipe's own learning rate with its KL term to the warm start, :data:`FAIR` its only added
flags, as ``studies.cheaper_iteration.iteration_time``'s ``today``. Every cheaper recipe (LoRA
on every layer, on fewer layers) was measured against it for cost; these seeds are the learning
it must equal, from the same warm start on the same goals."""


def full_fine_tuning_stages(work: Path, s: Settings) -> list[Stage]:
    """Today's recipe (:data:`FULL_FINE_TUNING`), seed by seed, evaluated on the fair
    comparison's goals so that each seed pairs with every LoRA recipe's."""
    return seeded_runs(work, s, ["gagpo"], FULL_FINE_TUNING, f"{FULL_FINE_TUNING}_", FAIR)


BRISK_LORA = "lora_lr3e4_one_pass"
"""The folder (and stage prefix) of LoRA on every layer at a higher learning rate, its rollout
rows in one generation pass (:data:`BRISK_LORA_FLAGS` on top of :data:`FAIR` and
:data:`CHEAP`)."""
BRISK_LORA_FLAGS = ["--lr", "3e-4", "--rollout-batch-tokens", "0"]
"""What :data:`BRISK_LORA` adds to the fair comparison's LoRA. On the float32 seed 0, LoRA at
lr 1e-4 was level with full fine-tuning in held-out success and score but not in admissible
actions (81.7% against 90.9%), and in training its invalid share stayed at 0.35-0.42 while full
fine-tuning's fell to 0.24-0.29: LoRA moved less. LoRA's B matrices start at zero, so a short
run wants a larger multiplier over full fine-tuning's rate than the usual ten ("LoRA Without
Regret"); 3e-4 is thirty times today's 1e-5. Every row in one decoding pass (no cache cap)
takes less generation time a step; in float32 a seed draws each reply's tokens from its own
uniforms whatever the batching (``TransformersPolicy``), so it plays the capped recipe's
episodes (its seed 0's first iteration did, step for step). Seed 0 learned admissible actions
(96.1% held out) but lost score (31.5 against full fine-tuning's 45.2): it paged through
results (``next >`` at 49% of its steps), an always-admissible step the penalty favours
(``studies/real_model/results/two_thirds_lora_float32/``), and its iteration was 1.93x
cheaper than today's, not 2x
(``studies/cheaper_iteration/results/iteration_time/float32_brisk/``). Not a recipe to use."""
MIDDLE_LORA = "lora_lr2e4_one_pass"
"""The folder (and stage prefix) of LoRA on every layer at lr 2e-4 in one generation pass
(:data:`MIDDLE_LORA_FLAGS` on top of :data:`FAIR` and :data:`CHEAP`)."""
MIDDLE_LORA_FLAGS = ["--lr", "2e-4", "--rollout-batch-tokens", "0"]
"""What :data:`MIDDLE_LORA` adds to the fair comparison's LoRA: a rate between the two tried.
On the float32 seed 0 the LoRA recipes bracketed full fine-tuning: at 1e-4 level in score but
short in admissible actions (its inadmissible steps mostly ``click[buy]``, ``openProduct``,
``openResult``, which full fine-tuning unlearned), at 3e-4 ahead in admissible actions but
short in score (it paged). A third rate chosen on those goals, so judged on new seeds as well
(``studies/real_model/results/two_thirds_lora_float32/``). Its iteration costs what
``lora-brisk``'s does (a learning rate changes no iteration's work)."""
EMBEDDINGS_LORA = "lora_embeddings_one_pass"
"""The folder (and stage prefix) of LoRA on every layer with the token embeddings (SmolLM2's
output layer too: they are tied) trained in full, in one generation pass
(:data:`EMBEDDINGS_LORA_FLAGS` on top of :data:`FAIR` and :data:`CHEAP`)."""
EMBEDDINGS_LORA_FLAGS = ["--lr", "1e-4", "--rollout-batch-tokens", "0", "--lora-embeddings",
                         "--embeddings-lr", "1e-5"]
"""What :data:`EMBEDDINGS_LORA` adds to the fair comparison's LoRA. At lr 1e-4 and 2e-4 LoRA's
held-out gap to full fine-tuning was in admissible actions, mostly ``click[buy]`` where the
button is ``buy now``: after ``click[buy`` one next-token choice (``]`` or `` now``), which
the output layer makes, and LoRA's ``all-linear`` leaves the output layer (SmolLM2's tied
embedding, 28M of 135M weights) frozen where full fine-tuning moves it. So the embedding
trains in full at today's rate (1e-5, as full fine-tuning moves it) and the adapters at
LoRA's 1e-4. Its weight gradient runs on reply positions only (logits are computed there),
so the iteration should cost about what ``lora-brisk``'s does
(``studies.cheaper_iteration.iteration_time``'s ``lora-embeddings`` measures it). Seed 0 refuted
it: it wrote ``click[buy]`` in 104 of the 200 held-out episodes (LoRA at 1e-4 without it: 46)
and lost score (-7.9 [-12.2, -3.6]) and admissible actions (70.0%) against full fine-tuning
(``studies/real_model/results/two_thirds_lora_float32/``). Not a recipe to use."""
ONE_PASS_LORA: dict[str, list[str]] = {BRISK_LORA: BRISK_LORA_FLAGS,
                                        MIDDLE_LORA: MIDDLE_LORA_FLAGS,
                                        EMBEDDINGS_LORA: EMBEDDINGS_LORA_FLAGS}
"""LoRA on every layer at other learning rates in one generation pass: each one's folder
(its stages' prefix) and the flags it adds to :data:`FAIR` and :data:`CHEAP`."""


def one_pass_lora_stages(work: Path, s: Settings) -> list[Stage]:
    """Each recipe of :data:`ONE_PASS_LORA`, seed by seed, evaluated on the fair comparison's
    goals so that each seed pairs with today's recipe's (:func:`full_fine_tuning_table`)."""
    return [stage for folder, flags in ONE_PASS_LORA.items()
            for stage in seeded_runs(work, s, ["gagpo"], folder, f"{folder}_",
                                     FAIR + CHEAP + flags)]


def stages(work: Path, s: Settings) -> list[Stage]:
    """Every stage: WebShop's, ALFWorld's, the fair comparison's, ALFWorld's second run, the
    seeds of LoRA on fewer layers, those of today's recipe (full fine-tuning), then those of
    LoRA at other learning rates in one decoding pass."""
    return (env_stages(work, s, WEBSHOP) + env_stages(work, s, ALFWORLD) + seed_stages(work, s)
            + alfworld_win_stages(work, s) + fewer_layers_stages(work, s)
            + full_fine_tuning_stages(work, s) + one_pass_lora_stages(work, s))


NOT_DONE = "not done"
"""How a training stage's record in ``stages.json`` ends its status when ``--max-minutes``
stopped it at a checkpoint (:func:`run_stage`), which :func:`over_invocations` looks for."""


def run_stage(stage: Stage, log_dir: Path, extra: Sequence[str] = (),
              here: str | None = None) -> dict[str, Any]:
    """Run one stage's command, with ``extra`` flags (its output to ``log_dir/<name>.log``);
    returns its minutes and its process's peak resident memory, and for a training stage its
    parameters' digest and ``here``, the arithmetic it ran under (None: not recorded)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "gagpo.cli", *stage.command[1:], *extra]
    print(f"== {stage.name}: {shlex.join([*stage.command, *extra])}", flush=True)
    started = time.perf_counter()
    returncode, usage = run_child(cmd, log_dir / f"{stage.name}.log")
    minutes = (time.perf_counter() - started) / 60
    if returncode != 0:
        raise SystemExit(f"stage {stage.name} failed (exit {returncode}): see "
                         f"{log_dir / (stage.name + '.log')}")
    peak = usage.ru_maxrss / 2**20  # KiB on Linux
    print(f"   done in {minutes:.1f} min, peak RSS {peak:.2f} GB", flush=True)
    cost: dict[str, Any] = {"minutes": round(minutes, 2), "peak_rss_gb": round(peak, 2)}
    if extra:
        cost["flags_added"] = shlex.join(extra)
    if stage.command[1] == "train":
        folder = Path(stage.command[stage.command.index("--out-dir") + 1])
        if (digest := trained_digest(folder)) is not None:
            cost["parameters_sha256"] = digest
        if here is not None:
            cost["arithmetic"] = here
    if stage.metrics is not None and stage.metrics.exists():
        rows = [json.loads(line) for line in stage.metrics.read_text().splitlines() if line]
        cost["iteration_minutes"] = round(sum(r["time/iteration"] for r in rows) / 60, 2)
        if not stage.done_file.exists():  # stopped at a checkpoint by --max-minutes
            cost["status"] = f"stopped after iteration {len(rows)} (--max-minutes); {NOT_DONE}"
    return cost


def over_invocations(cost: dict[str, Any], earlier: dict[str, Any] | None) -> dict[str, Any]:
    """A stage's cost as ``stages.json`` records it: this invocation's ``cost``, or for a
    training stage that an earlier invocation stopped at a checkpoint (``earlier``, its
    record) and this one resumed, the minutes summed over both, the higher peak, and how many
    invocations ran it. Its ``iteration_minutes`` come from its metrics, which every
    invocation appends to."""
    if not earlier or not str(earlier.get("status", "")).endswith(NOT_DONE):
        return cost
    return cost | {"minutes": round(earlier["minutes"] + cost["minutes"], 2),
                   "peak_rss_gb": max(earlier["peak_rss_gb"], cost["peak_rss_gb"]),
                   "invocations": earlier.get("invocations", 1) + 1}


def trained_digest(folder: Path) -> str | None:
    """The sha256 of a training run's parameters as its trainer recorded them when its last
    process ended (``parameter_digests.json``, rank 0's; a run stopped by ``--max-minutes``
    records its checkpoint's), or None if no process has ended."""
    path = folder / "parameter_digests.json"
    return json.loads(path.read_text())[0] if path.exists() else None


def warm_start_clash(stage: Stage, work: Path, recorded: dict[str, Any],
                     here: str | None = None) -> str | None:
    """Why ``stage`` must not add to the runs recorded in ``--out``, or None: its warm start
    (the stage itself, once run, or the one it starts from) has other parameters than the warm
    start those runs started from. The weights stay on the machine that trained them, so a
    later piece on another machine trains the warm start again; only the same parameters, bit
    for bit, keep the estimators' rows comparable. A recorded digest may be a prefix (a run
    that noted only its first hex digits).

    ``here`` is this machine's arithmetic (:func:`gagpo.common.cpu.arithmetic`): where
    ``--work`` holds no warm start yet and the recorded one ran under another arithmetic
    (its record's ``arithmetic``), training it here could not give the same parameters, so the
    stage is refused before it runs rather than after."""
    for name in (f"{r.prefix}warm_start" for r in (WEBSHOP, ALFWORLD)):
        if stage.name != name and str(work / name / "final") not in stage.command:
            continue
        want = recorded.get(name, {}).get("parameters_sha256")
        have = trained_digest(work / name)
        then = recorded.get(name, {}).get("arithmetic")
        if have is None and here is not None and then is not None and then != here:
            return (f"the recorded runs' warm start ({name}) was trained under {then}, and "
                    f"this machine's CPU runs {here}: a warm start trained here would have "
                    "other parameters; run these stages on a machine of that arithmetic, or "
                    "give them another --out")
        if want is not None and have is not None and not have.startswith(want):
            return (f"{work / name} holds other parameters (sha256 {have[:16]}...) than the "
                    f"warm start the recorded runs started from ({want[:16]}...): runs from it "
                    "would not compare with theirs; give them another --out, or a --work "
                    "holding that warm start")
    return None


def over_budget(stage: Stage, left: float, recorded: dict[str, Any]) -> str | None:
    """Why ``stage`` should not start with ``left`` minutes of the budget, or None. A
    training stage stops at a checkpoint in time (``gagpo train --max-minutes``) and resumes;
    any other stage runs whole, so it starts only if its last recorded minutes fit."""
    if left <= 0:
        return "the budget is spent"
    last = recorded.get(stage.name, {}).get("minutes")
    if stage.metrics is None and isinstance(last, (int, float)) and last > left:
        return f"it took {last:.0f} min last time, {left:.0f} min are left"
    return None


# --- the report ----------------------------------------------------------------------------------


def eval_figures(folder: Path, records: Path | None = None) -> dict[str, Any] | None:
    """One evaluation's overall row as ``gagpo eval`` summarised it, with its time: from its
    folder, else from the copy a report kept in ``records`` (None if neither exists)."""
    path = folder / "summary.json"
    if not path.exists() and records is not None:
        path = records / "evals" / f"{folder.name}.json"
    if not path.exists():
        return None
    summary = json.loads(path.read_text())
    return summary["by_type"]["all"] | {"seconds": summary["seconds"]}


BASELINE_LABELS = {"expert": "expert (knows the goal)", "rule": "rule baseline"}


def rows(run: EnvRun) -> list[tuple[str, str]]:
    """The table's rows of one environment: (label, evaluation folder)."""
    p = run.prefix
    return [*((BASELINE_LABELS[b], f"{p}eval_{b}") for b in run.baselines),
            ("SmolLM2, untrained", f"{p}eval_untrained"),
            ("SmolLM2, warm start", f"{p}eval_warm_start"),
            *((f"SmolLM2, warm start + {ESTIMATOR_NAMES[a]}", f"{p}eval_{a}")
              for a in run.estimators)]


def table(work: Path, run: EnvRun = WEBSHOP, records: Path | None = None) -> str:
    def pct(f: dict, key: str) -> str:
        lo, hi = f[f"{key}_ci95"]
        return f"{100 * f[key]:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"

    tasks = "goals" if run is WEBSHOP else "games"
    lines = [f"| policy | {tasks} | well-formed % | admissible % | success % | score x100 | "
             "mean length | eval min |", "|---|---|---|---|---|---|---|---|"]
    for label, folder in rows(run):
        f = eval_figures(work / folder, records)
        if f is None:
            lines.append(f"| {label} | not run yet | | | | | | |")
            continue
        lines.append(f"| {label} | {f['episodes']} | {pct(f, 'well_formed')} | "
                     f"{pct(f, 'admissible')} | {pct(f, 'success')} | {pct(f, 'score')} | "
                     f"{f['mean_length']:.2f} | {f['seconds'] / 60:.1f} |")
    return "\n".join(lines)


def tables(work: Path, records: Path | None = None, s: Settings | None = None) -> str:
    """Both environments' tables, WebShop's first, then the fair comparison's, ALFWorld's
    second run's, LoRA on fewer layers' and the LoRA recipes against full fine-tuning (once
    they have a finished stage)."""
    s = s or Settings()
    text = (f"WebShop-v0, {WEBSHOP.eval_split} goals, at most {WEBSHOP.max_steps} steps:\n\n"
            f"{table(work, WEBSHOP, records)}\n\nALFWorld-v0, {ALFWORLD.eval_split} games, at "
            f"most {ALFWORLD.max_steps} steps:\n\n{table(work, ALFWORLD, records)}")
    more = [seeds_table(work, s, records), wins_table(work, s, records),
            fewer_layers_table(work, s, records), full_fine_tuning_table(work, s, records)]
    return "\n\n".join([text, *(t for t in more if t)])


def wins_table(work: Path, s: Settings, records: Path | None = None) -> str:
    """ALFWorld's second run (:func:`alfworld_win_stages`): the warm start's wins on the
    training games and the held-out ones, the wins in GAGPO's training groups iteration by
    iteration, and GAGPO's held-out wins. Empty before any of it has finished."""
    rows_ = [("warm start, training games, temperature 1.0", f"{WINS}eval_warm_start_train"),
             (f"warm start, {ALFWORLD.eval_split} games", f"{WINS}eval_warm_start"),
             (f"warm start + GAGPO, {ALFWORLD.eval_split} games", f"{WINS}eval_gagpo")]
    found = [(label, eval_figures(work / folder, records)) for label, folder in rows_]
    logged = run_metrics(work / f"{WINS}gagpo", records)
    if not logged and all(f is None for _, f in found):
        return ""
    lines = [f"ALFWorld-v0, second run: a warm start of {s.alfworld_win_bc_epochs} passes over "
             f"the expert's {s.alfworld_bc_episodes} training episodes, then the default GAGPO "
             f"(`{shlex.join(FAIR + CHEAP)}`):", "",
             "| policy | games | success % | admissible % | mean length |", "|---|---|---|---|---|"]
    for label, f in found:
        if f is None:
            lines.append(f"| {label} | not run yet | | | |")
            continue
        lo, hi = f["success_ci95"]
        lines.append(f"| {label} | {f['episodes']} | {100 * f['success']:.1f} [{100 * lo:.1f}, "
                     f"{100 * hi:.1f}] | {100 * f['admissible']:.1f} | {f['mean_length']:.2f} |")
    if logged:
        rollouts = s.n_groups * s.group_size
        wins = ", ".join(f"{round(r['train/success'] * rollouts)}" for r in logged)
        lines += ["", f"Wins in GAGPO's training groups ({rollouts} rollouts an iteration), "
                      f"iterations 1-{len(logged)}: {wins}."]
    return "\n".join(lines)


def _evaluation(work: Path, folder: str, label: str, records: Path | None):
    """An evaluation's episodes (:func:`gagpo.compare.load_evaluation`) from its ``folder``
    in ``work``, else from the copy kept in ``records`` (``evals/<folder>``); None when
    neither has them."""
    from gagpo.compare import load_evaluation

    for path in (work / folder, *(() if records is None else (records / "evals" / folder,))):
        if (path / EPISODES_FILE).exists():
            return load_evaluation(path, label)
    return None


def seeds_table(work: Path, s: Settings, records: Path | None = None) -> str:
    """The fair comparison's table (success and score per estimator and seed) and its paired
    comparisons on the held-out goals (gagpo compare): each estimator against the warm start,
    and every estimator against the first, pooled over the seeds both finished. Empty before
    any of its evaluations has finished."""
    from gagpo.compare import compare, format_markdown, pooled

    done: dict[str, dict[int, Any]] = {}
    for algo in s.seed_estimators:
        for seed in range(s.seeds):
            ev = _evaluation(work, f"seeds/eval_{algo}_s{seed}",
                             f"{ESTIMATOR_NAMES[algo]} seed {seed}", records)
            if ev is not None:
                done.setdefault(algo, {})[seed] = ev
    if not done:
        return ""
    lines = [f"Fair comparison: each estimator from the same warm start, identical settings "
             f"(`{shlex.join(FAIR + CHEAP)}`), seeds 0-{s.seeds - 1}, on the same {s.goals} "
             "held-out goals:", "", "| estimator | seed | success % | score x100 |",
             "|---|---|---|---|"]
    for algo, evs in done.items():
        for seed, ev in sorted(evs.items()):
            won = [e.won for e in ev.episodes]
            score = [e.score for e in ev.episodes]
            lines.append(f"| {ESTIMATOR_NAMES[algo]} | {seed} | "
                         f"{100 * sum(won) / len(won):.1f} | {100 * sum(score) / len(score):.1f} |")
    warm = _evaluation(work, "eval_warm_start", "warm start", records)
    first = s.seed_estimators[0]
    for algo, evs in done.items():
        side = pooled(f"{ESTIMATOR_NAMES[algo]} ({_seeds(len(evs))})", list(evs.values()))
        if warm is not None:
            lines += ["", format_markdown(compare(warm, side)), "",
                      seed_by_seed({k: compare(warm, ev) for k, ev in evs.items()},
                                   "warm start", ESTIMATOR_NAMES[algo])]
        common = sorted(set(evs) & set(done.get(first, {})))
        if algo != first and common:
            rival = pooled(f"{ESTIMATOR_NAMES[first]} ({_seeds(len(common))})",
                           [done[first][k] for k in common])
            mine = pooled(f"{ESTIMATOR_NAMES[algo]} ({_seeds(len(common))})",
                          [evs[k] for k in common])
            lines += ["", format_markdown(compare(mine, rival)), "",
                      seed_by_seed({k: compare(evs[k], done[first][k]) for k in common},
                                   ESTIMATOR_NAMES[algo], ESTIMATOR_NAMES[first])]
    return "\n".join(lines)


def fewer_layers_table(work: Path, s: Settings, records: Path | None = None) -> str:
    """Each recipe of :data:`FEWER_LAYERS` against LoRA on every layer (the fair comparison's
    GAGPO) on the seeds both finished (:func:`recipe_pairs`). Empty before any seed of a
    recipe has a partner."""
    return recipe_pairs(work, s, records, "every layer", "seeds",
                        "LoRA on every layer, the default GAGPO",
                        [(_upper_layers(flags), folder, flags)
                         for folder, flags in FEWER_LAYERS.items()])


def full_fine_tuning_table(work: Path, s: Settings, records: Path | None = None) -> str:
    """Every LoRA recipe (every layer, :data:`FEWER_LAYERS`, :data:`ONE_PASS_LORA`) against
    today's recipe (:data:`FULL_FINE_TUNING`) on the seeds both finished (:func:`recipe_pairs`):
    whether a cheaper iteration learns as much. Empty before any seed of a recipe has a
    partner."""
    return recipe_pairs(work, s, records, "full fine-tuning", FULL_FINE_TUNING,
                        f"today's recipe (full fine-tuning, `{shlex.join(FAIR)}`), the "
                        "default GAGPO",
                        [("LoRA on every layer", "seeds", CHEAP),
                         *((_upper_layers(flags), folder, CHEAP + flags)
                           for folder, flags in FEWER_LAYERS.items()),
                         *((_one_pass(flags), folder, CHEAP + flags)
                           for folder, flags in ONE_PASS_LORA.items())])


def _upper_layers(flags: list[str]) -> str:
    return f"LoRA on the upper {flags[flags.index('--lora-layers') + 1]} layers"


def _one_pass(flags: list[str]) -> str:
    name = f"LoRA on every layer at lr {flags[flags.index('--lr') + 1]}"
    if "--lora-embeddings" in flags:
        name += f", embeddings at lr {flags[flags.index('--embeddings-lr') + 1]}"
    return name + ", one pass"


def recipe_pairs(work: Path, s: Settings, records: Path | None, base: str, base_folder: str,
                 base_description: str, recipes: Sequence[tuple[str, str, list[str]]]) -> str:
    """Each of ``recipes`` (name, folder, the flags it adds to the base's) against the
    default GAGPO's seeds in ``base_folder`` (``eval_gagpo_s<k>``), on the seeds both
    finished: each run's success, score and admissible share on the goals of its pair, then
    the recipe - the base pooled over those seeds and seed by seed, paired on the goals (gagpo
    compare; one comparison per seed serves both). Recipes with no paired seed are left out."""
    from gagpo.compare import compare, format_markdown, pooled

    ours = {k: ev for k in range(s.seeds) if (ev := _evaluation(
        work, f"{base_folder}/eval_gagpo_s{k}", f"{base}, seed {k}", records)) is not None}
    lines: list[str] = []
    for name, folder, flags in recipes:
        mine = {k: ev for k in ours if (ev := _evaluation(
            work, f"{folder}/eval_gagpo_s{k}", f"{name}, seed {k}", records)) is not None}
        if not mine:
            continue
        lines += [f"{name} (`{folder}`, `{shlex.join(flags)}`) against {base_description} "
                  f"from the same warm start, same seeds, on the same {s.goals} goals:", "",
                  "| recipe | seed | success % | score x100 | admissible % |",
                  "|---|---|---|---|---|"]
        pairs = {k: compare(ours[k], mine[k]) for k in sorted(mine)}
        for k, r in pairs.items():  # each side's figures on the goals of the pair
            for label, side in ((base, "a"), (name, "b")):
                lines.append(f"| {label} | {k} | {100 * r['success'][side]:.1f} | "
                             f"{100 * r['score'][side]:.1f} | "
                             f"{100 * r['admissible'][side]['rate']:.1f} |")
        both = list(pairs)
        lines += ["", format_markdown(compare(
            pooled(f"{base} ({_seeds(len(both))})", [ours[k] for k in both]),
            pooled(f"{name} ({_seeds(len(both))})", [mine[k] for k in both]))), "",
            seed_by_seed(pairs, base, name), ""]
    return "\n".join(lines).rstrip()


def _seeds(n: int) -> str:
    return f"{n} seed" if n == 1 else f"{n} seeds"


def seed_by_seed(results: dict[int, dict[str, Any]], a: str, b: str) -> str:
    """B - A seed by seed (each seed's two runs compared on the same goals), then across seeds:
    the mean of the per-seed differences with a t interval over the seeds. The pooled table
    above resamples goals only, so it says how these runs differ; the interval over seeds also
    counts how much a training run varies with its seed, which is what "estimator B beats A"
    needs (with 3 seeds: t(0.975, 2) = 4.30, so only a large, steady difference clears 0)."""
    from gagpo.compare import paired_t

    def cell(mean: float, lo: float | None, hi: float | None) -> str:
        if lo is None or hi is None:  # one goal, or one seed: no interval
            return f"{100 * mean:+.1f} [n/a]"
        return f"{100 * mean:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"

    lines = [f"{b} - {a}, seed by seed (each seed compared on the same goals, 95% paired t "
             "interval over goals), then across seeds (mean of the per-seed differences, 95% "
             "t interval over seeds):", "", "| seed | success % | score x100 |", "|---|---|---|"]
    for k, r in sorted(results.items()):
        lines.append("| " + " | ".join([str(k), *(cell(r[m]["diff"], *r[m]["t_ci95"])
                                                  for m in ("success", "score"))]) + " |")
    across = []
    for key in ("success", "score"):
        t = paired_t([r[key]["diff"] for r in results.values()])
        across.append(cell(t.mean, t.lo, t.hi) + ("" if t.p is None else f", p = {t.p:.3f}"))
    lines.append(f"| across {_seeds(len(results))} | {across[0]} | {across[1]} |")
    return "\n".join(lines)


CURVES = (("train/success", "train success"), ("train/score", "train score"),
          ("steps/well_formed", "well-formed reply rate"),
          ("train/invalid_rate", "malformed or rejected steps"),
          ("loss/kl", "KL to the warm start"), ("loss/entropy", "entropy (nats/token)"))


def logged_iterations(folder: Path) -> list[dict[str, Any]]:
    """A training run's ``metrics.jsonl`` lines, each with ``steps/well_formed``: the share
    of its iteration's steps whose reply was well formed (the format rate, which the metrics
    do not log), from the run's step tables as ``gagpo view`` reads them."""
    from gagpo.run_folder import step_tables
    from gagpo.viewer.data import iteration_stats

    path = folder / "metrics.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    tables = step_tables(folder)
    for line in lines:
        stats = iteration_stats(tables[line["iteration"]]) \
            if line.get("iteration") in tables else None
        if stats is not None and not math.isnan(stats["malformed"]):
            line["steps/well_formed"] = 1.0 - stats["malformed"]
    return lines


def run_metrics(folder: Path, records: Path | None = None) -> list[dict[str, Any]]:
    """A training run's logged iterations (:func:`logged_iterations`) from its folder, else
    from the copy a report kept in ``records`` (``metrics/<folder name>.jsonl``: the runs read
    here sit at the top of work); [] if neither exists."""
    if (folder / "metrics.jsonl").exists():
        return logged_iterations(folder)
    kept = None if records is None else records / "metrics" / f"{folder.name}.jsonl"
    if kept is None or not kept.exists():
        return []
    return [json.loads(line) for line in kept.read_text().splitlines() if line.strip()]


def curves(work: Path, png: Path, run: EnvRun = WEBSHOP, records: Path | None = None) -> bool:
    """One environment's RL runs' training curves as a PNG (each run's metrics from its folder,
    else from the copy a report kept in ``records``); False when no run has logged an
    iteration."""
    runs = {}
    for algo in run.estimators:
        lines = run_metrics(work / f"{run.prefix}{algo}", records)
        if lines:
            runs[algo] = lines
    if not runs:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(CURVES) // 2, figsize=(4 * len(CURVES) // 2, 6.4))
    for ax, (key, title) in zip(axes.flat, CURVES, strict=True):
        for algo, logged in runs.items():
            points = [(r["iteration"], r[key]) for r in logged if key in r]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", label=ESTIMATOR_NAMES[algo])
        ax.set_title(title)
        ax.set_xlabel("iteration")
    axes.flat[0].legend()
    fig.suptitle(run.env)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return True


def keep_records(work: Path, out: Path, s: Settings) -> None:
    """Copy every finished evaluation's summary (``out/evals/<folder>.json``) and episodes
    (``out/evals/<folder>/episodes.jsonl``, for ``gagpo compare``), and every
    training stage's metrics (``out/metrics/<folder>.jsonl``, with the format rate from its
    step tables: :func:`logged_iterations`) into ``out``, each named by its folder's path in
    ``work`` (``seeds/eval_gagpo_s0``), so that the table and the curves
    can be drawn again once ``work`` (weights and all) is gone, and a later report from
    another ``work`` keeps the rows it did not rerun."""
    for st in stages(work, s):
        if st.command[1] == "eval" and st.done_file.exists():
            # Named by the folder's path in work: seeds/eval_gagpo_s0 and
            # two_thirds_lora/eval_gagpo_s0 are two evaluations.
            folder = st.done_file.parent.relative_to(work).as_posix()
            target = out / "evals" / f"{folder}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(st.done_file.read_bytes())
            # Its episodes, one line each: what gagpo compare pairs, goal by goal.
            episodes = st.done_file.parent / EPISODES_FILE
            if episodes.exists():
                kept = out / "evals" / folder / EPISODES_FILE
                kept.parent.mkdir(parents=True, exist_ok=True)
                kept.write_bytes(episodes.read_bytes())
        elif st.metrics is not None and st.metrics.exists():
            folder = st.metrics.parent.relative_to(work).as_posix()
            target = out / "metrics" / f"{folder}.jsonl"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("".join(json.dumps(line) + "\n"
                                      for line in logged_iterations(st.metrics.parent)))


def report(work: Path, out: Path, s: Settings, costs: dict[str, dict[str, Any]]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    keep_records(work, out, s)
    text = tables(work, out, s)
    (out / "table.md").write_text(text + "\n")
    curves(work, out / "curves.png", WEBSHOP, out)
    curves(work, out / "curves_alfworld.png", ALFWORLD, out)
    path = out / "stages.json"  # each stage's minutes and peak RSS (over_invocations)
    known = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps(known | costs, indent=1) + "\n")
    commands = "\n".join(f"# {st.name}\n{shlex.join(st.command)}" for st in stages(work, s))
    (out / "commands.sh").write_text(commands + "\n")
    log_invocation(out / "machine.txt")
    return text


def log_invocation(path: Path) -> None:
    """Add this invocation (its machine, time and command line) to ``path``, keeping earlier
    ones: a folder's stages often run on several machines, one invocation each. A report of
    the same command line as the last entry's (a driver reports after every stage) updates
    that entry's time instead."""
    here = machine()
    command = f"by python -m studies.real_model.real_model {' '.join(sys.argv[1:])}"
    entries = path.read_text().splitlines() if path.exists() else []
    if len(entries) >= 2 and entries[-1].endswith(command) and entries[-2] == here:
        entries = entries[:-2]
    entries += [here, f"last updated {time.strftime('%Y-%m-%d %H:%M %Z')} {command}"]
    path.write_text("\n".join(entries) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("runs/real_model"),
                        help="where the runs and evaluations go (weights included)")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the table, curves, commands and stage times")
    parser.add_argument("--stages", default=None,
                        help="comma-separated stage names, run in the driver's order (a "
                             "warm start before the runs from it) whatever order they are "
                             "given in (default: every stage)")
    parser.add_argument("--goals", type=int, default=None, help="held-out goals (default 200)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="RL iterations per estimator (default: 6; 4 with --gpu)")
    parser.add_argument("--bc-episodes", type=int, default=None,
                        help="expert episodes of the warm start (default: 24; 64 with --gpu)")
    parser.add_argument("--gpu", action="store_true",
                        help="one GPU's scale, vLLM sampling (the defaults fit a 2-core CPU)")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="this invocation's time budget: a training stage stops at an "
                             "iteration checkpoint once it is spent (gagpo train "
                             "--max-minutes), and another stage starts only if its minutes "
                             "recorded in --out's stages.json fit in what is left; run the "
                             "same command again to go on")
    parser.add_argument("--roomy", action="store_true",
                        help="train without the recipe's memory settings (gradient "
                             "checkpointing off, glibc's own heap): the same parameters (a "
                             "resume may switch them), faster updates, a higher peak; for a "
                             "machine with memory to spare (the memory stages measure the "
                             "recipe itself)")
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
    costs: dict[str, dict[str, Any]] = {}
    recorded = {}
    if args.out and (args.out / "stages.json").exists():
        recorded = json.loads((args.out / "stages.json").read_text())
    here = None if args.gpu else arithmetic()
    began = time.perf_counter()
    if not args.report_only:
        for st in todo:
            if st.done_file.exists():
                print(f"== {st.name}: done ({st.done_file})", flush=True)
                continue
            if (clash := warm_start_clash(st, args.work, recorded, here)) is not None:
                raise SystemExit(f"== {st.name}: not started: {clash}")
            extra: list[str] = []
            if args.max_minutes is not None:
                left = args.max_minutes - (time.perf_counter() - began) / 60
                why = over_budget(st, left, recorded)
                if why is not None:
                    print(f"== {st.name}: not started: {why} (--max-minutes "
                          f"{args.max_minutes:g}); run again to go on", flush=True)
                    break
                if st.command[1] == "train":
                    extra = ["--max-minutes", f"{left:.2f}"]
            if args.roomy and st.command[1] == "train" and not st.name.startswith("memory_"):
                extra += ROOMY
            costs[st.name] = over_invocations(run_stage(st, args.work / "logs", extra, here),
                                              recorded.get(st.name))
            if (clash := warm_start_clash(st, args.work, recorded)) is not None:
                raise SystemExit(f"== {st.name}: not recorded: {clash}")
            if args.out:
                report(args.work, args.out, s, costs)
            if not st.done_file.exists():
                print(f"== {st.name}: stopped at a checkpoint by --max-minutes; run again to "
                      "go on", flush=True)
                break
    text = report(args.work, args.out, s, costs) if args.out else tables(args.work, None, s)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
