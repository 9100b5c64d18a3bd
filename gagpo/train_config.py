"""The trainer's arguments: one dataclass, each field with its default and a one-line help.

Defaults follow verl-agent (the GiGPO / GAGPO papers' settings) where the papers give
them: 16 groups x 8 rollouts, gamma 0.95, history 2,
temperature 1.0 in training and 0.4 in evaluation, clip 0.2 with dual clip 3, KL 0.01 (low-
variance estimator), entropy 0.001, lr 1e-6, one PPO epoch, token-mean, invalid-action penalty
0.1, reward 10 x success. ``gagpo train --help`` lists them all; ``--config FILE`` (TOML or
JSON, keys as the field names) sets any of them, and flags given on the command line win.

Also here: what a run leaves behind (atomic checkpoints, compressed step tables, metrics to
JSONL / TensorBoard / W&B), so that ``gagpo/trainer.py`` holds only the algorithm.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gagpo.advantages import DEFAULT_LAM


def arg(default: Any, help: str, **kw: Any) -> Any:  # noqa: A002  (argparse's word)
    """A dataclass field carrying its command-line help."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help, **kw})
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class TrainConfig:
    """Everything a training run depends on (saved with every checkpoint)."""

    # --- environment --------------------------------------------------------------------------
    env: str = arg("WebShop-v0", "registered environment id (WebShop-v0, ALFWorld-v0)")
    env_kwargs: dict = arg({}, "extra gymnasium.make() arguments (JSON object)")
    train_split: str = arg("train", "split the training tasks come from")
    eval_split: str | None = arg(None, "held-out split (default: WebShop test, ALFWorld "
                                       "valid_unseen)")
    max_steps: int | None = arg(None, "episode step limit (default: the env's, 15 / 50)")
    backend: str = arg("inprocess", "where envs run", choices=["inprocess", "process", "ray"])
    ray_address: str | None = arg(None, "Ray cluster address for backend=ray (None: local)")
    parallel: str = arg("ddp", "under torchrun: ddp (each rank a whole model, gradients "
                               "all-reduced) or fsdp (parameters, gradients and optimizer "
                               "state sharded, FSDP2)", choices=["ddp", "fsdp"])
    # --- model and policy ---------------------------------------------------------------------
    model: str = arg("tiny", "tiny | smollm2-135m | a Hugging Face id or local folder")
    mode: str = arg("generate", "generate replies, or score the admissible actions",
                    choices=["generate", "score"])
    lora_rank: int = arg(0, "LoRA rank (peft); 0 trains every parameter")
    lora_alpha: float = arg(32.0, "LoRA alpha")
    lora_dropout: float = arg(0.0, "LoRA dropout")
    length_normalize: bool = arg(False, "score mode: rank actions by mean (not summed) token "
                                        "log-prob, so long actions are not penalised")
    bf16: str = arg("auto", "bf16 autocast: auto (CUDA with bf16; CPU with AMX from 50M "
                            "params) | on | off", choices=["auto", "on", "off"])
    generation: str = arg("transformers", "what samples the rollouts' replies: the trained "
                                          "model through transformers, or a vLLM engine "
                                          "(CUDA, generate mode) that gets the trained "
                                          "weights before every rollout",
                          choices=["transformers", "vllm"])
    vllm_gpu_memory: float = arg(0.3, "share of the GPU's memory the vLLM engine may take")
    vllm_kwargs: dict = arg({}, "more vllm.LLM arguments (JSON object), e.g. "
                                "{\"enforce_eager\": true}")
    max_new_tokens: int = arg(256, "reply length limit (generate mode)")
    top_p: float = arg(1.0, "nucleus sampling mass in training rollouts")
    history_length: int = arg(2, "(observation, action) pairs shown in the prompt")
    temperature: float = arg(1.0, "sampling temperature of training rollouts")
    eval_temperature: float = arg(0.4, "sampling temperature of evaluation (0: greedy)")
    # --- rollouts and rewards -----------------------------------------------------------------
    algo: str = arg("gagpo", "advantage estimator", choices=["gagpo", "gigpo", "grpo", "rloo"])
    iterations: int = arg(150, "training iterations (rollout + update)")
    n_groups: int = arg(16, "tasks per iteration (N)")
    group_size: int = arg(8, "rollouts per task (G), from the same initial state")
    reward: str = arg("success", "step reward at the end: success (reward_scale x won) or "
                                 "score (reward_scale x the env's score)",
                      choices=["success", "score"])
    reward_scale: float = arg(10.0, "reward of a won episode (the papers use 10)")
    invalid_penalty: float = arg(0.1, "subtracted from a step whose action was malformed or "
                                      "rejected")
    state_grouping: str = arg("state_key", "what makes two steps share a state: the env's "
                                           "state_key or the observation text (GiGPO)",
                              choices=["state_key", "observation"])
    # --- advantages ---------------------------------------------------------------------------
    gamma: float = arg(0.95, "discount of returns and TD residuals")
    lam: float = arg(DEFAULT_LAM, "GAGPO's GAE lambda (value unknown in the paper)")
    norm: str = arg("mean_std", "group normalisation of advantages",
                    choices=["mean_std", "mean", "none"])
    omega: float = arg(1.0, "GiGPO's weight of the step-level advantage")
    # --- loss ---------------------------------------------------------------------------------
    ratio_level: str | None = arg(None, "importance ratio per token or per action (default: "
                                        "action for gagpo, token otherwise)",
                                  choices=["token", "action"])
    clip_eps: float = arg(0.2, "PPO clip range")
    clip_eps_high: float | None = arg(None, "upper clip range (default: clip_eps)")
    dual_clip: float | None = arg(3.0, "dual-clip constant c for negative advantages (None: off)")
    kl_coef: float = arg(0.01, "weight of the low-variance KL to the reference policy (0: off)")
    entropy_coef: float = arg(0.001, "entropy bonus (0: off)")
    aggregation: str = arg("token-mean", "loss aggregation", choices=["token-mean", "seq-mean"])
    # --- optimisation -------------------------------------------------------------------------
    lr: float = arg(1e-6, "AdamW learning rate")
    weight_decay: float = arg(0.0, "AdamW weight decay")
    max_grad_norm: float = arg(1.0, "gradient clipping (0: off)")
    ppo_epochs: int = arg(1, "passes over each iteration's batch")
    num_minibatches: int = arg(1, "optimizer steps per epoch (the batch split this many ways)")
    micro_batch_tokens: int = arg(16384, "padded tokens per forward/backward (gradient "
                                         "accumulation)")
    recompute_old_logp: bool = arg(False, "recompute log pi_old with the trainer's model "
                                          "(needed when rollouts come from another engine)")
    # --- behaviour-cloning warm start ---------------------------------------------------------
    bc_episodes: int = arg(0, "expert demonstrations (episodes) for a warm start (0: none)")
    bc_teacher: str = arg("expert", "who the warm start imitates: the goal-aware expert (its won "
                                    "episodes), or WebShop's rule baseline (search the "
                                    "instruction, first result, buy; rule_options also clicks "
                                    "options the instruction names), all its episodes",
                          choices=["expert", "rule", "rule_options"])
    bc_epochs: int = arg(1, "passes over the demonstrations")
    bc_lr: float = arg(1e-3, "learning rate of the warm start")
    bc_batch: int = arg(16, "demonstration steps per optimizer step")
    # --- evaluation, logging, checkpoints -----------------------------------------------------
    eval_every: int = arg(10, "evaluate every k iterations (0: only before and after)")
    eval_episodes: int = arg(100, "held-out episodes (the split's first N tasks)")
    eval_batch: int = arg(32, "evaluation episodes played together")
    save_every: int = arg(1, "checkpoint every k iterations (0: only at the end)")
    out_dir: str = arg("runs/gagpo", "folder for metrics, step tables and checkpoints")
    resume: bool = arg(False, "continue from out_dir's last checkpoint")
    seed: int = arg(0, "seed of tasks, sampling and initialisation")
    tensorboard: bool = arg(True, "write TensorBoard events (needs the tensorboard package)")
    wandb: bool = arg(False, "log to Weights & Biases")
    wandb_project: str = arg("gagpo", "W&B project")
    save_observations: bool = arg(False, "keep observation texts in the saved step tables")
    progress: bool = arg(True, "show a progress bar")

    def resolved_ratio_level(self) -> str:
        return self.ratio_level or ("action" if self.algo == "gagpo" else "token")

    def resolved_eval_split(self) -> str:
        if self.eval_split:
            return self.eval_split
        return "valid_unseen" if self.env.lower().startswith("alfworld") else "test"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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
    """One ``--flag`` per field, its help ending with the default."""
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        default = "{}" if f.default is dataclasses.MISSING else f.default
        help_text = f"{f.metadata['help']} (default: {default})"
        kw: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS, "help": help_text}
        if "choices" in f.metadata:
            kw["choices"] = f.metadata["choices"]
        t = str(f.type)
        if t == "bool":
            kw["action"] = argparse.BooleanOptionalAction
        elif t == "dict":
            kw["type"] = json.loads
        elif "int" in t:
            kw["type"] = _parse_optional(int) if "None" in t else int
        elif "float" in t:
            kw["type"] = _parse_optional(float) if "None" in t else float
        elif "None" in t and "choices" not in kw:
            kw["type"] = _parse_optional(str)
        parser.add_argument(flag, **kw)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """File values first (``args.config``), then the flags that were given."""
    values: dict[str, Any] = {}
    if getattr(args, "config", None):
        values.update(load_config_file(args.config))
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    values.update({k: v for k, v in vars(args).items() if k in names})
    return TrainConfig(**values)


# ---------------------------------------------------------------------------------------------
# What a run leaves behind: checkpoints (atomic), step tables, metrics.


def rng_state(policy: Any) -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.get_rng_state(), "policy": policy.generator.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any], policy: Any) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    policy.generator.set_state(state["policy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: Path, **payload: Any) -> None:
    """``torch.save`` to a temporary file, then ``os.replace``: a crash mid-write leaves the
    previous checkpoint intact."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)


def save_step_table(path: Path, rows: list, columns: dict[str, np.ndarray],
                    keep_observations: bool) -> None:
    """One iteration's steps as a compressed ``.npz`` of columns (``np.load`` reads it)."""
    data = {
        "group": np.array([r.group for r in rows], np.int32),
        "trajectory": np.array([r.trajectory for r in rows], np.int32),
        "t": np.array([r.t for r in rows], np.int16),
        "task_id": np.array([r.task_id for r in rows]),
        "state_key": np.array([r.state_key for r in rows]),
        "action": np.array([r.action for r in rows]),
        "well_formed": np.array([r.well_formed for r in rows]),
        "action_valid": np.array([r.action_valid for r in rows]),
        "done": np.array([r.done for r in rows]),
        "won": np.array([r.won for r in rows]),
        "score": np.array([r.score for r in rows], np.float32),
        "n_tokens": np.array([len(r.token_ids) for r in rows], np.int32),
        "logprob_sum": np.array([sum(r.logprobs) for r in rows], np.float32),
        **{k: np.asarray(v, np.float32) for k, v in columns.items()},
    }
    if keep_observations:
        data["observation"] = np.array([r.observation for r in rows])
    tmp = path.with_name(path.stem + ".tmp.npz")
    np.savez_compressed(tmp, **data)
    os.replace(tmp, path)


class MetricLogger:
    """JSONL always; TensorBoard and W&B when asked (rank 0 only)."""

    def __init__(self, cfg: TrainConfig, out: Path, enabled: bool) -> None:
        self.enabled, self.path = enabled, out / "metrics.jsonl"
        self.tb = self.wandb = None
        if not enabled:
            return
        if cfg.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(out / "tensorboard"))
            except ImportError:
                print("tensorboard is not installed: metrics go to metrics.jsonl only")
        if cfg.wandb:
            import wandb  # optional: pip install wandb

            self.wandb = wandb.init(project=cfg.wandb_project, config=cfg.to_dict(),
                                    dir=str(out), resume="allow", id=out.name)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"iteration": step, **metrics}) + "\n")
        flat = {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
        if self.tb is not None:
            for k, v in flat.items():
                self.tb.add_scalar(k, v, step)
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log(flat, step=step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def eval_metrics(summary: dict[str, Any], prefix: str = "eval/") -> dict[str, float]:
    a = summary["all"]
    return {f"{prefix}success": a["success"], f"{prefix}success_lo": a["success_ci95"][0],
            f"{prefix}success_hi": a["success_ci95"][1], f"{prefix}score": a["score"],
            f"{prefix}length": a["mean_length"], f"{prefix}episodes": a["episodes"]}
