"""The trainer's arguments: one dataclass, each field with its default and a one-line help.

Defaults follow verl-agent (the GiGPO / GAGPO papers' settings) where the papers give
them: 16 groups x 8 rollouts, gamma 0.95, history 2,
temperature 1.0 in training and 0.4 in evaluation, clip 0.2 with dual clip 3, KL 0.01 (low-
variance estimator), entropy 0.001, lr 1e-6, one PPO epoch, invalid-action penalty 0.1 charged
to the offending step alone, reward 10 x success. GAGPO's update aggregates per action
(seq-mean: each action weighs the same, whatever its length), the others per token
(token-mean, verl's default). ``gagpo train --help`` lists them all; ``--config FILE`` (TOML or
JSON, keys as the field names) sets any of them, and flags given on the command line win.

What a run leaves in its folder (checkpoints, step tables, metrics) is :mod:`gagpo.run_folder`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from gagpo.advantages import (
    DEFAULT_EPISODE_STATS,
    DEFAULT_GAGPO_VARIANT,
    DEFAULT_GAMMA,
    DEFAULT_LAM,
    DEFAULT_NORM,
    DEFAULT_OMEGA,
    DEFAULT_PENALTY_TARGET,
    EPISODE_STATS,
    ESTIMATORS,
    GAGPO_VARIANTS,
    NORMS,
    PENALTY_TARGETS,
)
from gagpo.agents.policies.base import MODES
from gagpo.common.flags import json_object
from gagpo.common.numbers import check_number
from gagpo.distributed import PARALLEL_MODES
from gagpo.envs.vector import BACKENDS
from gagpo.losses import AGGREGATIONS, RATIO_LEVELS, LossConfig, check_dual_clip
from gagpo.step_credit import CreditSettings

_LOSS = LossConfig()  # the loss's defaults are the trainer's


OBSERVATION_STEPS_AUTO = 2_000_000
"""``save_observations=auto`` keeps observations for runs of at most this many steps (about
a few hundred MB of text before compression)."""


def arg(default: Any, help: str, **kw: Any) -> Any:  # noqa: A002  (argparse's word)
    """A dataclass field carrying its command-line help (and, for numbers, ``valid``: the
    name of its range in :data:`gagpo.common.numbers.RANGES`)."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help, **kw})
    return field(default=default, metadata={"help": help, **kw})


def check_lora_options(cfg: TrainConfig) -> None:
    """Refuse LoRA options given without what they modify, before a run folder is written."""
    if cfg.lora_layers and not cfg.lora_rank:
        raise ValueError("--lora-layers places LoRA adapters: it needs --lora-rank > 0")
    if cfg.embeddings_lr is not None and not cfg.lora_embeddings:
        raise ValueError("--embeddings-lr is the rate of --lora-embeddings: give both")
    if cfg.lora_embeddings and not cfg.lora_rank:
        raise ValueError("--lora-embeddings trains the embeddings beside LoRA adapters: it "
                         "needs --lora-rank > 0 (without LoRA every parameter trains)")


@dataclass
class EnvironmentSettings:
    """The environment the run trains on, and its tasks."""

    title: ClassVar[str] = "environment"
    """The group's heading in ``gagpo train --help``."""

    env: str = arg("WebShop-v0", "registered environment id (WebShop-v0, ALFWorld-v0)")
    env_kwargs: dict = arg({}, "extra gymnasium.make() arguments (JSON object)")
    train_split: str = arg("train", "split the training tasks come from")
    eval_split: str | None = arg(None, "held-out split (default: WebShop test, ALFWorld "
                                       "valid_unseen)")
    max_steps: int | None = arg(None, "episode step limit (default: the env's own, its "
                                 "registered max_episode_steps)", valid=">= 1")


@dataclass
class ModelSettings:
    """The policy's model and its LoRA adapters."""

    title: ClassVar[str] = "model and LoRA"
    """The group's heading in ``gagpo train --help``."""

    model: str = arg("tiny", "tiny | smollm2-135m | a Hugging Face id or local folder")
    mode: str = arg("generate", "generate replies, or score the admissible actions",
                    choices=list(MODES))
    lora_rank: int = arg(0, "LoRA rank (peft); 0 trains every parameter", valid=">= 0")
    lora_alpha: float = arg(32.0, "LoRA alpha", valid="> 0")
    lora_dropout: float = arg(0.0, "LoRA dropout", valid="in [0, 1)")
    lora_layers: int = arg(0, "LoRA adapters on the last N decoder layers only: the layers "
                              "below them run forward without a graph and get no backward "
                              "pass (0: every layer)", valid=">= 0")
    lora_embeddings: bool = arg(False, "with --lora-rank: also train the token embeddings and "
                                       "the output layer in full, as full fine-tuning does (one "
                                       "matrix where the model ties them; peft's "
                                       "modules_to_save, kept in the adapter folder)")
    length_normalize: bool = arg(False, "score mode: rank actions by mean (not summed) token "
                                        "log-prob, so long actions are not penalised")


@dataclass
class GenerationSettings:
    """How the rollouts' replies are sampled and their prompts built."""

    title: ClassVar[str] = "generation"
    """The group's heading in ``gagpo train --help``."""

    generation: str = arg("transformers", "what samples the rollouts' replies: the trained "
                                          "model through transformers, or a vLLM engine "
                                          "(CUDA, generate mode) that gets the trained "
                                          "weights before every rollout",
                          choices=["transformers", "vllm"])
    vllm_gpu_memory: float = arg(0.3, "share of the GPU's memory the vLLM engine may take",
                                 valid="in (0, 1]")
    vllm_kwargs: dict = arg({}, "more vllm.LLM arguments (JSON object), e.g. "
                                "{\"enforce_eager\": true}")
    max_new_tokens: int = arg(256, "reply length limit (generate mode)", valid=">= 1")
    top_p: float = arg(1.0, "nucleus sampling mass in training rollouts", valid="in (0, 1]")
    history_length: int = arg(2, "(observation, action) pairs shown in the prompt", valid=">= 0")
    max_prompt_tokens: int | None = arg(None, "cap on the chat-formatted prompt in tokens: "
                                              "history dropped oldest first (the task, the "
                                              "page and its actions always stay)",
                                        valid=">= 1")
    temperature: float = arg(1.0, "sampling temperature of training rollouts", valid=">= 0")
    eval_temperature: float = arg(0.4, "sampling temperature of evaluation (0: greedy)",
                                  valid=">= 0")


@dataclass
class RolloutSettings:
    """Rollouts, rewards and advantages: what the update is asked to reinforce
    (:meth:`TrainConfig.credit` gives the credit's part as
    :class:`gagpo.step_credit.CreditSettings`)."""

    title: ClassVar[str] = "rollouts, rewards and advantages"
    """The group's heading in ``gagpo train --help``."""

    algo: str = arg("gagpo", "advantage estimator", choices=sorted(ESTIMATORS))
    n_groups: int = arg(16, "tasks per iteration (N)", valid=">= 1")
    group_size: int = arg(8, "rollouts per task (G), from the same initial state", valid=">= 1")
    reward: str = arg("success", "step reward at the end: success (reward_scale x won) or "
                                 "score (reward_scale x the env's score)",
                      choices=["success", "score"])
    reward_scale: float = arg(10.0, "reward of a won episode (the papers use 10)", valid="> 0")
    invalid_penalty: float = arg(0.1, "subtracted from a step whose action was malformed or "
                                      "rejected", valid=">= 0")
    invalid_penalty_target: str = arg(
        DEFAULT_PENALTY_TARGET,
        "where the invalid penalty goes: step (that step alone, as verl-agent: its episode score "
        "and step return, or GAGPO's advantage) or return (folded into its reward, so it also "
        "lowers every earlier step's return and the episode's)",
        choices=list(PENALTY_TARGETS))
    state_grouping: str = arg("state_key", "what makes two steps share a state: the env's "
                                           "state_key or the observation text (GiGPO)",
                              choices=["state_key", "observation"])
    gamma: float = arg(DEFAULT_GAMMA, "discount of returns and TD residuals", valid="in [0, 1]")
    gagpo_variant: str = arg(DEFAULT_GAGPO_VARIANT, "which reading of GAGPO (paper: the "
                             "literal one; docs/algorithms.md compares them)",
                             choices=sorted(GAGPO_VARIANTS))
    lam: float | None = arg(None, f"GAE lambda of GAGPO and PPO (default: the GAGPO variant's "
                                  f"own, else {DEFAULT_LAM})", valid="in [0, 1]")
    norm: str | None = arg(None, f"group normalisation of advantages (default: the GAGPO "
                                 f"variant's own, else {DEFAULT_NORM})", choices=list(NORMS))
    omega: float = arg(DEFAULT_OMEGA, "GiGPO's weight of the step-level advantage", valid=">= 0")
    episode_stats: str = arg(
        DEFAULT_EPISODE_STATS,
        "mean and std of the episode-level term (GRPO, GiGPO) over the group's trajectories (the "
        "GiGPO paper) or over its step rows (verl-agent's code)",
        choices=list(EPISODE_STATS))


@dataclass
class UpdateSettings:
    """The update: the loss, the optimizer and PPO's learned critic."""

    title: ClassVar[str] = "update"
    """The group's heading in ``gagpo train --help``."""

    critic_model: str | None = arg(None, "the critic's backbone: a model name or folder with the "
                                         "policy's tokenizer (default: a copy of --model)")
    critic_lr: float = arg(1e-5, "the critic's AdamW learning rate", valid="> 0")
    critic_warmup: int = arg(0, "first iterations that train the critic alone, the policy "
                                "waiting for values worth using", valid=">= 0")
    value_clip: float = arg(0.5, "clipped value loss: a value moves at most this far from the "
                                 "rollout's in one iteration", valid="> 0")
    ratio_level: str | None = arg(None, "importance ratio per token or per action (default: "
                                        "action for gagpo, token otherwise)",
                                  choices=list(RATIO_LEVELS))
    clip_eps: float = arg(_LOSS.clip_eps, "PPO clip range", valid="in (0, 1)")
    clip_eps_high: float | None = arg(_LOSS.clip_eps_high,
                                      "upper clip range (default: clip_eps)", valid="> 0")
    dual_clip: float | None = arg(_LOSS.dual_clip, "dual-clip constant c > 1 for negative "
                                                   "advantages (None: off)")
    kl_coef: float = arg(_LOSS.kl_coef, "weight of the low-variance KL to the reference policy "
                                        "(0: off)", valid=">= 0")
    entropy_coef: float = arg(_LOSS.entropy_coef, "entropy bonus (0: off)", valid=">= 0")
    aggregation: str | None = arg(None, "loss aggregation: token-mean (every token weighs the "
                                        "same) or seq-mean (every action does) (default: "
                                        "seq-mean for gagpo, token-mean otherwise)",
                                  choices=list(AGGREGATIONS))
    lr: float = arg(1e-6, "AdamW learning rate", valid="> 0")
    embeddings_lr: float | None = arg(None, "with --lora-embeddings: the embeddings' AdamW "
                                            "learning rate (default: --lr)", valid="> 0")
    weight_decay: float = arg(0.0, "AdamW weight decay", valid=">= 0")
    max_grad_norm: float = arg(1.0, "gradient clipping (0: off)", valid=">= 0")
    ppo_epochs: int = arg(1, "passes over each iteration's batch", valid=">= 1")
    num_minibatches: int = arg(1, "optimizer steps per epoch (the batch split this many ways)",
                               valid=">= 1")
    recompute_old_logp: bool = arg(False, "recompute log pi_old with the trainer's model "
                                          "(needed when rollouts come from another engine)")


@dataclass
class WarmStartSettings:
    """The behaviour-cloning warm start before the first iteration."""

    title: ClassVar[str] = "warm start"
    """The group's heading in ``gagpo train --help``."""

    bc_episodes: int = arg(0, "expert demonstrations (episodes) for a warm start (0: none)",
                           valid=">= 0")
    bc_teacher: str = arg("expert", "who the warm start imitates: the goal-aware expert (its won "
                                    "episodes), or WebShop's rule baseline (search the "
                                    "instruction, first result, buy; rule_options also clicks "
                                    "options the instruction names, and needs env_kwargs "
                                    "observation_mode text_rich), all its episodes",
                          choices=["expert", "rule", "rule_options"])
    bc_epochs: int = arg(1, "passes over the demonstrations", valid=">= 1")
    bc_lr: float = arg(1e-3, "learning rate of the warm start", valid="> 0")
    bc_batch: int = arg(16, "demonstration steps per optimizer step", valid=">= 1")


@dataclass
class PerformanceSettings:
    """Where and how fast the run computes: what each changes besides time and
    memory is said in its help (``RESUME_MAY_CHANGE`` lists those a resumed run may change)."""

    title: ClassVar[str] = "performance"
    """The group's heading in ``gagpo train --help``."""

    backend: str = arg("inprocess", "where envs run", choices=list(BACKENDS))
    ray_address: str | None = arg(None, "Ray cluster address for backend=ray (None: local)")
    parallel: str = arg("ddp", "under torchrun: ddp (each rank a whole model, gradients "
                               "all-reduced) or fsdp (parameters, gradients and optimizer "
                               "state sharded, FSDP2)", choices=list(PARALLEL_MODES))
    bf16: str = arg("auto", "bf16 autocast: auto (CUDA with bf16; CPUs with AMX or "
                            "AVX512-BF16, for models of 50M+ params) | on | off",
                    choices=["auto", "on", "off"])
    gradient_checkpointing: str = arg(
        "auto", "recompute each layer's activations in the backward pass instead of keeping "
        "them (less memory on long prompts, slower updates): auto (models "
        "of 50M+ parameters) | on | off", choices=["auto", "on", "off"])
    micro_batch_tokens: int = arg(16384, "tokens per forward/backward (gradient "
                                         "accumulation): padded, or a shared prompt counted "
                                         "once where --pack-prompts packs them", valid=">= 1")
    pack_prompts: str = arg(
        "auto", "the update's forward passes without padding, each distinct prompt run once "
        "for all the rows that share it (copies of a task in one state with one history): the "
        "same log-probs up to rounding, on fewer tokens (PPO's critic: each distinct prompt "
        "once): auto (on a CPU, where padding costs as much as tokens) | on | off",
        choices=["auto", "on", "off"])
    fold_lora: str = arg(
        "auto", "the update's LoRA layers as one product each with the adapters folded into "
        "the weight, their gradients computed by hand (the same log-probs and gradients up to "
        "rounding, two products fewer per layer, a copy of the adapted weights held during "
        "the update): auto (on a CPU in one process without autocast) | off",
        choices=["auto", "off"])
    rollout_batch_tokens: int = arg(0, "cache positions per generation pass of the "
                                       "transformers policy: rows x (longest prompt + "
                                       "max_new_tokens); bounds the decoding cache's memory "
                                       "(16 rows of 1,000-token prompts hold 0.8 GB for "
                                       "SmolLM2-135M) (0: rows only)", valid=">= 0")
    return_freed_memory: bool = arg(False, "glibc: serve blocks of 1 MiB and more by mmap, so "
                                           "that freed activations go back to the system: a "
                                           "lower peak on a CPU (SmolLM2-135M's update: 4.21 "
                                           "-> 3.35 GB) for 1.36x the update's CPU time "
                                           "(benchmarks/update_memory)")


@dataclass
class RunSettings:
    """The run itself: its length, seed, evaluations, checkpoints, folder and logs."""

    title: ClassVar[str] = "run"
    """The group's heading in ``gagpo train --help``."""

    iterations: int = arg(150, "training iterations (rollout + update)", valid=">= 0")
    seed: int = arg(0, "seed of tasks, sampling and initialisation", valid=">= 0")
    eval_every: int = arg(10, "evaluate every k iterations (0: only before and after)",
                          valid=">= 0")
    eval_episodes: int = arg(100, "held-out episodes (the split's first N tasks)", valid=">= 0")
    eval_batch: int = arg(32, "evaluation episodes played together", valid=">= 1")
    save_every: int = arg(1, "checkpoint every k iterations (0: only at the end)", valid=">= 0")
    max_minutes: float = arg(0.0, "stop after the first iteration that ends past this many "
                                  "minutes of the process, its checkpoint written and no "
                                  "final/ model: --resume goes on from there (a job with a "
                                  "time limit) (0: no limit)", valid=">= 0")
    out_dir: str = arg("runs/gagpo", "folder for metrics, step tables and checkpoints")
    resume: bool = arg(False, "continue from out_dir's last checkpoint; every setting must be "
                              "the checkpoint's but iterations, out_dir, save_every, "
                              "max_minutes, the logging ones and backend / ray_address")
    resume_override: bool = arg(False, "resume even where settings differ from the "
                                       "checkpoint's; the differences are printed and recorded "
                                       "in out_dir/config_changes.jsonl")
    overwrite: bool = arg(False, "start a new run in an out_dir that holds an earlier one "
                                 "(its checkpoint, metrics and step tables are deleted); "
                                 "without it, or --resume, that is refused")
    tensorboard: bool = arg(True, "write TensorBoard events (needs the tensorboard package)")
    wandb: bool = arg(False, "log to Weights & Biases")
    wandb_project: str = arg("gagpo", "W&B project")
    save_observations: str = arg(
        "auto", "keep observation texts in the saved step tables (replies are always kept): "
        f"auto = when a run has at most {OBSERVATION_STEPS_AUTO:,} steps (iterations x groups x "
        "G x step limit)", choices=["auto", "on", "off"], nargs="?", const="on")
    progress: bool = arg(True, "show a progress bar")


@dataclass
class TrainConfig(RunSettings, PerformanceSettings, WarmStartSettings, UpdateSettings,
                  RolloutSettings, GenerationSettings, ModelSettings, EnvironmentSettings):
    # Bases in reverse: a dataclass lists its bases' fields from the last base to the first,
    # so the flags and config.json keep the groups' order (SETTING_GROUPS).
    """Everything a training run depends on (saved with every checkpoint): the settings of
    :data:`SETTING_GROUPS`, one flat namespace (``cfg.lr``, ``--lr``, ``lr = ...`` in a TOML
    file), each group a dataclass of its own."""

    def __post_init__(self) -> None:
        """Refuse bad algorithm settings now, not after the first rollouts (flags are checked
        by argparse too; this also covers ``--config`` files and callers)."""
        for name in ("algo", "gagpo_variant", "norm", "episode_stats", "invalid_penalty_target",
                     "ratio_level", "aggregation"):
            value = getattr(self, name)
            choices = list(ESTIMATORS) if name == "algo" else _FIELDS[name].metadata["choices"]
            if value is not None and value not in choices:
                raise ValueError(f"{name} must be one of {choices}, not {value!r}")
        check_dual_clip(self.dual_clip)
        check_lora_options(self)
        if isinstance(self.save_observations, bool):  # settings written before "auto"
            self.save_observations = "on" if self.save_observations else "off"
        if self.save_observations not in ("auto", "on", "off"):
            raise ValueError(f"save_observations must be auto, on or off, not "
                             f"{self.save_observations!r}")
        for f in dataclasses.fields(self):
            if str(f.type) == "dict" and not isinstance(getattr(self, f.name), dict):
                raise ValueError(f"{f.name} must be a JSON object (keys and values), not "
                                 f"{getattr(self, f.name)!r}")
            if "valid" in f.metadata:
                check_number(f.name, getattr(self, f.name), f.metadata["valid"],
                             integer=str(f.type).startswith("int"), optional="None" in str(f.type))

    def keeps_observations(self) -> bool:
        """Whether step tables keep observation texts: ``on``, or ``auto`` for a run of at
        most :data:`OBSERVATION_STEPS_AUTO` steps (ALFWorld's 50-step limit when unset)."""
        bound = self.iterations * self.n_groups * self.group_size * (self.max_steps or 50)
        return self.save_observations == "on" or (
            self.save_observations == "auto" and bound <= OBSERVATION_STEPS_AUTO)

    def credit(self) -> CreditSettings:
        """The settings that turn this run's step tables into advantages (the same rule
        verl's trainer uses: :mod:`gagpo.step_credit`)."""
        return CreditSettings(**{f.name: getattr(self, f.name)
                                 for f in dataclasses.fields(CreditSettings)})

    def resolved_ratio_level(self) -> str:
        """GAGPO's ratio is per action (its method); the per-token estimators' per token."""
        return self.ratio_level or ("action" if self.algo == "gagpo" else "token")

    def resolved_aggregation(self) -> str:
        """GAGPO's update weighs each action the same (its action-level ratio, aggregated per
        action, as the method describes); the per-token estimators weigh each token (verl)."""
        return self.aggregation or ("seq-mean" if self.algo == "gagpo" else "token-mean")

    def resolved_eval_split(self) -> str:
        if self.eval_split:
            return self.eval_split
        return "valid_unseen" if self.env.lower().startswith("alfworld") else "test"

    def defaults_taken(self) -> dict[str, Any]:
        """The settings left unset whose value depends on others, and the value this run
        takes for each (``gagpo train`` prints them as it starts): what runs, beside what the
        user wrote (``config.json`` keeps the latter, so that a resume resolves them again)."""
        lam, norm = self.credit().lam_norm()
        taken = {"lam": lam, "norm": norm, "ratio_level": self.resolved_ratio_level(),
                 "aggregation": self.resolved_aggregation(),
                 "eval_split": self.resolved_eval_split()}
        return {k: v for k, v in taken.items() if getattr(self, k) is None}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}

SETTING_GROUPS: tuple[type, ...] = (EnvironmentSettings, ModelSettings, GenerationSettings,
                                    RolloutSettings, UpdateSettings, WarmStartSettings,
                                    PerformanceSettings, RunSettings)
"""TrainConfig's groups, in the order ``gagpo train --help`` lists them."""


def group_of(name: str) -> type:
    """The group (one of :data:`SETTING_GROUPS`) that defines setting ``name``."""
    for group in SETTING_GROUPS:
        if name in group.__dataclass_fields__:
            return group
    raise KeyError(f"no setting {name!r}")


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Field values from a TOML or JSON file (unknown keys are an error)."""
    path = Path(path)
    text = path.read_text()
    if path.suffix == ".json":
        values = json.loads(text)
    else:
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib

        values = tomllib.loads(text)
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = set(values) - known
    if unknown:
        raise ValueError(f"{path}: unknown settings {sorted(unknown)}")
    return values


def _parse_optional(kind: type):
    def parse(text: str):
        return None if text.lower() in ("none", "null") else kind(text)
    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One ``--flag`` per field, its help ending with the default, listed by group."""
    sections = {g: parser.add_argument_group(g.title) for g in SETTING_GROUPS}
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        default = "{}" if f.default is dataclasses.MISSING else f.default
        valid = f.metadata.get("valid", "finite")
        help_text = f"{f.metadata['help']} (default: {default}" + \
            (")" if valid == "finite" else f"; {valid})")
        kw: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS, "help": help_text}
        kw.update({k: f.metadata[k] for k in ("choices", "nargs", "const") if k in f.metadata})
        t = str(f.type)
        if t == "bool":
            kw["action"] = argparse.BooleanOptionalAction
        elif t == "dict":
            kw["type"] = json_object
        elif "int" in t:
            kw["type"] = _parse_optional(int) if "None" in t else int
        elif "float" in t:
            kw["type"] = _parse_optional(float) if "None" in t else float
        elif "None" in t and "choices" not in kw:
            kw["type"] = _parse_optional(str)
        sections[group_of(f.name)].add_argument(flag, **kw)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """File values first (``args.config``), then the flags that were given."""
    values: dict[str, Any] = {}
    if getattr(args, "config", None):
        values.update(load_config_file(args.config))
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    values.update({k: v for k, v in vars(args).items() if k in names})
    return TrainConfig(**values)


# ---------------------------------------------------------------------------------------------
# Resuming: the same run as the checkpoint's, or a refusal.

#: The settings a resumed run may change without ``--resume-override``, each with the reason it
#: leaves the run's result alone. Every other setting (learning rate, groups, seed, reward,
#: algorithm, model, evaluation, ...) must equal the checkpoint's, and so must the number of
#: ranks (reported as ``ranks``): ranks deal the groups and own the sampling streams, so
#: another number of them trains on other rollouts.
RESUME_MAY_CHANGE: dict[str, str] = {
    "resume": "how this process starts",
    "resume_override": "how this process starts",
    "overwrite": "how this process starts",
    "out_dir": "the run's folder may have moved",
    "iterations": "where the run ends: tasks and env seeds depend on (seed, iteration) only, so "
                  "a run extended (or stopped earlier) trains as one that had that many "
                  "iterations from the start",
    "save_every": "when checkpoints are written",
    "max_minutes": "where this process stops: a run stopped by it and resumed trains as one "
                   "that was not",
    "progress": "the progress bar",
    "tensorboard": "where the metrics are also sent",
    "wandb": "where the metrics are also sent",
    "wandb_project": "where the metrics are also sent",
    "save_observations": "whether step tables keep the observation texts",
    "gradient_checkpointing": "memory only: the backward pass recomputes the very activations "
                              "it would have kept",
    "return_freed_memory": "memory only: where freed blocks go",
    "backend": "where environments run (the transcripts are the same)",
    "ray_address": "where environments run (the transcripts are the same)",
}


#: What runs did before a setting existed, where today's default differs: a checkpoint that
#: predates the setting is compared as having this value.
BEFORE_IT_EXISTED: dict[str, Any] = {"invalid_penalty_target": "return",
                                     "gagpo_variant": "paper", "fold_lora": "off"}


def resume_differences(saved: dict[str, Any], cfg: TrainConfig, saved_ranks: int,
                       ranks: int) -> dict[str, tuple[Any, Any]]:
    """``{name: (checkpoint's value, new value)}`` for every setting in which ``cfg`` differs
    from a checkpoint's settings ``saved``, plus ``ranks`` when the number of processes does.
    A setting the checkpoint predates counts as having its default, or the value runs had
    before it existed (:data:`BEFORE_IT_EXISTED`). ``fold_lora`` does not count in a run
    without LoRA adapters, where it changes nothing."""
    defaults = TrainConfig().to_dict() | BEFORE_IT_EXISTED
    diffs = {name: (saved.get(name, defaults[name]), value)
             for name, value in cfg.to_dict().items() if saved.get(name, defaults[name]) != value}
    if not cfg.lora_rank and not saved.get("lora_rank", 0):
        diffs.pop("fold_lora", None)  # no adapters: nothing is folded either way
    if saved_ranks != ranks:
        diffs["ranks"] = (saved_ranks, ranks)
    return diffs


def check_resume(diffs: dict[str, tuple[Any, Any]], cfg: TrainConfig, iteration: int
                 ) -> list[str]:
    """The differences that are not in :data:`RESUME_MAY_CHANGE` as lines ``name: checkpoint
    X, now Y``; a ``ValueError`` listing them unless ``cfg.resume_override``."""
    lines = [f"  {name}: checkpoint {old!r}, now {new!r}"
             for name, (old, new) in diffs.items() if name not in RESUME_MAY_CHANGE]
    if lines and not cfg.resume_override:
        raise ValueError(
            f"--resume: these settings differ from those of the checkpoint in {cfg.out_dir} "
            f"(iteration {iteration}), and would change the run's result:\n"
            + "\n".join(lines) + "\nResume with the checkpoint's settings, or pass "
            "--resume-override to go on with the new ones (the differences are then recorded "
            "in config_changes.jsonl).")
    return lines
