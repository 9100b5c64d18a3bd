"""The GAGPO trainer, top to bottom (CleanRL style): one iteration is

    tasks -> N x G group rollouts -> rewards -> advantages (gagpo.advantages)
          -> clipped policy loss on the actions' tokens (gagpo.losses) -> optimizer
          -> metrics (JSONL, TensorBoard, W&B), step table, checkpoint, evaluation.

Runs on one CPU as well as under ``torchrun``: each rank plays its share of the groups (groups
never straddle ranks, so advantages stay local) and gradients are summed over ranks, whole
(``--parallel ddp``) or sharded with the parameters and optimizer state (``--parallel fsdp``);
see :mod:`gagpo.distributed`. ``gagpo train --help`` lists the arguments
(:class:`gagpo.train_config.TrainConfig`).

Elsewhere: the behaviour-cloning warm start (:mod:`gagpo.warm_start`), the vLLM rollout engine
(:mod:`gagpo.vllm_engine`), the evaluation loop (:mod:`gagpo.evaluate`) and the run's folder:
checkpoints, step tables, metrics (:mod:`gagpo.run_folder`).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gagpo import step_credit
from gagpo.agents.models import bf16_autocast, is_large
from gagpo.agents.policies.factory import env_kwargs_for
from gagpo.common.malloc import return_freed_memory
from gagpo.critic import Critic, CriticStats
from gagpo.distributed import (
    Compute,
    all_reduce_max,
    full_state,
    gather_objects,
    is_sharded,
    load_full_state,
    load_optimizer_state,
    optimizer_state,
    parameters_sha256,
    save_pretrained,
    setup_distributed,
    shard_model,
    shutdown_distributed,
)
from gagpo.evaluate import evaluate_model, sampling
from gagpo.passes import Passes
from gagpo.policy_update import (
    UpdateBatch,
    UpdateStats,
    frozen_reference,
    recompute_old_logprobs,
    update,
)
from gagpo.run_folder import (
    MetricLogger,
    earlier_run,
    eval_metrics,
    load_checkpoint,
    prepare_run_folder,
    record_config_changes,
    rng_state,
    save_checkpoint,
    save_step_table,
    set_rng_state,
    write_json,
)
from gagpo.train_config import TrainConfig, check_resume, resume_differences
from gagpo.vllm_engine import make_vllm_engine, sync_engine
from gagpo.warm_start import (
    behaviour_cloning,
    check_teacher_envs,
    expert_demonstrations,
    make_teacher,
)

if TYPE_CHECKING:
    from gagpo.agents.rollout import StepTable

# ---------------------------------------------------------------------------------------------
# Set-up: processes, model, policy.


def checkpointing(cfg: TrainConfig, model: Any) -> bool:
    """Gradient checkpointing: on request, or (auto) for models of 50M+ parameters, whose
    activations on long prompts outgrow a small machine (``python -m benchmarks.update_memory``
    measures one update with and without it)."""
    if cfg.gradient_checkpointing != "auto":
        return cfg.gradient_checkpointing == "on"
    return is_large(model)


def build_model(cfg: TrainConfig, device: torch.device) -> tuple[Any, Any]:
    """The trained model (LoRA-wrapped when ``lora_rank > 0``) and its tokenizer."""
    from gagpo.agents.models import load_model

    model, tokenizer = load_model(cfg.model, device=device)
    if checkpointing(cfg, model):
        # Non-reentrant: it needs no gradient on the inputs, so frozen embeddings (LoRA) work.
        # (transformers 5 renamed the method; 4.x has the old name only.)
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if cfg.lora_rank > 0:
        from peft import LoraConfig, get_peft_model

        saved = embedding_modules(model) if cfg.lora_embeddings else {}
        lora = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha,
                          lora_dropout=cfg.lora_dropout, **lora_targets(model, cfg.lora_layers),
                          **saved)
        model = get_peft_model(model, lora)
        # The adapters' folder names its base as the run was given it: a built-in name
        # ("tiny"), not the cache folder it resolved to here (load_model resolves it again).
        model.peft_config["default"].base_model_name_or_path = cfg.model
    return model, tokenizer


def embedding_modules(model: Any) -> dict[str, Any]:
    """peft's ``modules_to_save`` for the token embeddings and the output layer, trained in
    full beside the adapters: the input embedding's name alone where the model ties the two
    (``ensure_weight_tying`` keeps the trained copies one matrix, as in full fine-tuning), both
    names where it does not."""
    wanted = [model.get_input_embeddings(), model.get_output_embeddings()]
    tied = wanted[1] is None or wanted[1].weight is wanted[0].weight
    if tied:
        wanted = wanted[:1]
    names = [name.rsplit(".", 1)[-1] for module in wanted
             for name, m in model.named_modules() if m is module]
    return {"modules_to_save": names, "ensure_weight_tying": tied}


def lora_targets(model: Any, last_layers: int) -> dict[str, Any]:
    """peft's ``target_modules`` (and ``layers_to_transform``): every linear layer but the
    output layer, in every decoder layer, or in the last ``last_layers`` of them only. Below
    the lowest adapted layer nothing requires a gradient, so the update's forward pass builds
    no graph there and its backward pass stops at that layer."""
    if last_layers == 0:
        return {"target_modules": "all-linear"}
    n = getattr(model.config, "num_hidden_layers", None)
    if n is None:
        raise ValueError(f"--lora-layers: {type(model).__name__}'s config has no "
                         "num_hidden_layers")
    if last_layers > n:
        raise ValueError(f"--lora-layers {last_layers}: the model has {n} decoder layers")
    output = model.get_output_embeddings()
    # peft refuses "all-linear" beside layers_to_transform: the same modules, by name.
    names = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                    if isinstance(module, torch.nn.Linear) and module is not output})
    return {"target_modules": names, "layers_to_transform": list(range(n - last_layers, n))}


POLICY_BATCH = 64
"""Rows of a generation pass (at least the group size; ``--rollout-batch-tokens`` bounds their
cache). Decoding reads every weight once a step whatever the rows, so rows are cheap: on
SmolLM2-135M with 800-token prompts, a 2-core AVX2 CPU (float32) decoded 67 tokens/s at 8
rows, 102 at 16, 145 at 32 and 168 at 64 (``python -m benchmarks.cpu_costs``); a 2-core
AVX512-BF16 CPU (bf16 autocast, 600-token prompts) 50 at 8, 85 at 16 and 90 at 32. Each row
holds its cache: 52 MB for 1,120 positions of SmolLM2-135M in float32."""


def make_policy(model: Any, tokenizer: Any, cfg: TrainConfig, *, temperature: float,
                seed: int, top_p: float = 1.0) -> Any:
    from gagpo.agents.policies.factory import PolicySpec, build_policy

    spec = PolicySpec(cfg.model, mode=cfg.mode, temperature=temperature, top_p=top_p,
                      max_new_tokens=cfg.max_new_tokens, seed=seed)
    return build_policy(spec, model=model, tokenizer=tokenizer,
                        batch_size=max(POLICY_BATCH, cfg.group_size),
                        batch_tokens=cfg.rollout_batch_tokens or None, stop=("</action>",),
                        length_normalize=cfg.length_normalize)


class TimedPolicy:
    """Wraps a policy to count the seconds and tokens spent generating."""

    def __init__(self, policy: Any) -> None:
        self.policy, self.seconds, self.tokens = policy, 0.0, 0

    def act(self, requests: list) -> list:
        start = time.perf_counter()
        replies = self.policy.act(requests)
        self.seconds += time.perf_counter() - start
        self.tokens += sum(len(r.token_ids) for r in replies)
        return replies


def env_kwargs(cfg: TrainConfig, split: str) -> dict[str, Any]:
    kw = dict(cfg.env_kwargs, split=split)
    if cfg.max_steps:  # the env's own limit (it ends the episode) and TimeLimit's (it flags it)
        kw["max_steps"] = kw["max_episode_steps"] = cfg.max_steps
    return kw


def make_vec(cfg: TrainConfig, n_tasks: int, group_size: int, kwargs: dict) -> Any:
    from gagpo.envs.vector import GroupVectorEnv

    return GroupVectorEnv(cfg.env, n_tasks, group_size, backend=cfg.backend, env_kwargs=kwargs,
                          **({"ray_address": cfg.ray_address} if cfg.ray_address else {}))


# ---------------------------------------------------------------------------------------------
# Rewards, advantages and the batch of actions to train on: functions of the step table.


def rewards_and_penalties(table: StepTable, cfg: TrainConfig) -> tuple[np.ndarray, np.ndarray]:
    """What the estimator gets: r_t, and the amount charged to each step alone
    (:func:`gagpo.step_credit.rewards_and_penalties` under the run's settings)."""
    return step_credit.rewards_and_penalties(table, cfg.credit())


def advantages_of(table: StepTable, rewards: np.ndarray, cfg: TrainConfig,
                  penalty: np.ndarray | None = None, values: np.ndarray | None = None
                  ) -> tuple[np.ndarray, dict]:
    """One advantage per step (``cfg.algo``; PPO's on the critic's ``values``), and the
    estimator's details (:func:`gagpo.step_credit.step_advantages`)."""
    return step_credit.step_advantages(table, cfg.credit(), rewards, penalty, values)


def training_batch(table: StepTable, adv: np.ndarray) -> UpdateBatch:
    """The actions to train on: every step whose policy gave its prompt's and reply's tokens,
    with the reply's sampling log-probs and advantage, in row order."""
    prompts, replies = table.column("prompt_token_ids"), table.column("token_ids")
    logprobs = table.column("logprobs")
    idx = [i for i in range(len(table)) if replies[i] and prompts[i]]
    return UpdateBatch(prompt=[prompts[i] for i in idx], reply=[replies[i] for i in idx],
                       old_logp=[logprobs[i] for i in idx], adv=[adv[i] for i in idx])


# ---------------------------------------------------------------------------------------------
# An iteration's metrics, over all ranks.


@dataclass(frozen=True)
class RankStats:
    """One rank's share of an iteration: what the metrics are made of (gathered over ranks)."""

    episodes: list[dict[str, Any]]
    """:meth:`StepTable.episodes` of the rank's rollout (lost episodes included)."""
    advantages: list[float]
    """The advantage of each step (the steps of lost episodes left out, here and below)."""
    steps: int
    shared_steps: int
    """Steps whose step group (same group, same state) holds more than one step."""
    met_steps: int
    """Steps in a state that another trajectory of the group visited."""
    invalid_steps: int
    """Steps whose reply was malformed or whose action the env rejected."""
    update: UpdateStats
    critic: CriticStats | None
    """PPO's critic update (None for the critic-free methods)."""
    logprob_gap: tuple[float, int] | None
    """Sum of |sampler log-prob - trainer log-prob| and tokens compared; None when the
    trainer kept the sampler's log-probs."""


def iteration_metrics(parts: list[RankStats], mine: RankStats, timed: TimedPolicy,
                      t_rollout: float, t_update: float) -> dict[str, float]:
    """The metrics of an iteration: training episodes, advantages and the update over all
    ranks (``parts``); throughput and time of this rank (``mine``)."""
    episodes = [e for p in parts for e in p.episodes]
    all_adv = np.asarray([a for p in parts for a in p.advantages])
    n_rows = max(sum(p.steps for p in parts), 1)
    q75, q25 = np.percentile(all_adv, [75, 25]) if len(all_adv) else (0.0, 0.0)
    metrics = {
        "train/success": float(np.mean([e["won"] for e in episodes])),
        "train/score": float(np.mean([e["score"] for e in episodes])),
        "train/episode_length": float(np.mean([e["length"] for e in episodes])),
        "train/invalid_rate": sum(p.invalid_steps for p in parts) / n_rows,
        "adv/std": float(all_adv.std()), "adv/iqr": float(q75 - q25),
        "adv/abs_mean": float(np.abs(all_adv).mean()) if len(all_adv) else 0.0,
        "state/shared_fraction": sum(p.shared_steps for p in parts) / n_rows,
        "state/met_fraction": sum(p.met_steps for p in parts) / n_rows,
        **{f"loss/{f.name}": float(np.mean([getattr(p.update, f.name) for p in parts]))
           for f in fields(UpdateStats)},
        **({f"critic/{f.name}": float(np.mean([getattr(p.critic, f.name) for p in parts]))
            for f in fields(CriticStats)} if mine.critic is not None else {}),
        "perf/gen_tokens_per_s": timed.tokens / max(timed.seconds, 1e-9),
        "perf/update_tokens_per_s": mine.update.padded_tokens / max(t_update, 1e-9),
        "time/generation": timed.seconds, "time/env": t_rollout - timed.seconds,
        "time/update": t_update, "steps": n_rows,
    }
    if mine.logprob_gap is not None:  # mean |log pi_sampler - log pi_trainer| per reply token
        compared = sum(p.logprob_gap[1] for p in parts)
        metrics["rollout/logprob_gap"] = sum(p.logprob_gap[0] for p in parts) / max(compared, 1)
    return metrics


# ---------------------------------------------------------------------------------------------
# A run's parts: set up once, then restored from its checkpoint or warm-started.


@dataclass
class Run:
    """What one rank of a training run holds from its set-up to its final save."""

    cfg: TrainConfig
    out: Path
    compute: Compute
    """This rank's device, autocast dtype, rank, number of ranks and pad token."""
    passes: Passes
    """How the policy's passes run here (packing, LoRA's cheaper passes, FSDP's padding),
    chosen once when the run starts."""
    model: Any
    """The trained policy's model (sharded under FSDP)."""
    tokenizer: Any
    agent: Any
    """The ReAct agent: prompts and the parsing of replies."""
    policy: Any
    """The model's policy: it samples the rollouts unless the vLLM engine does, and tokenises
    the warm start's demonstrations."""
    engine: Any | None
    """vLLM's engine (``--generation vllm``), else None."""
    ref_model: Any | None
    """The frozen KL reference; None when no update reads one, or under LoRA without a warm
    start, whose reference is the adapter-free base."""
    critic: Critic | None
    """PPO's value model (None for the critic-free methods)."""
    train_tasks: list
    eval_tasks: list
    evals: dict[str, Any] = field(default_factory=dict)
    """The evaluations made so far, by name (``before``, ``bc``, ``after_bc``, ``iter_N``,
    ``after``); a resumed run's include its earlier ones."""

    def evaluate(self, name: str) -> dict[str, Any]:
        """Evaluate the policy on the evaluation tasks; recorded under ``name``."""
        cfg = self.cfg
        eval_kwargs = env_kwargs(cfg, cfg.resolved_eval_split())
        summary = evaluate_model(
            self.model, self.agent, self.eval_tasks, compute=self.compute, engine=self.engine,
            batch=cfg.eval_batch, temperature=cfg.eval_temperature,
            # A private, fixed seed per rank: evaluating never moves the run's random streams.
            seed=cfg.seed + 1_000_003 * (self.compute.rank + 1),
            new_policy=lambda seed: make_policy(self.model, self.tokenizer, cfg,
                                                temperature=cfg.eval_temperature, seed=seed),
            new_vec=lambda n: make_vec(cfg, n, 1, eval_kwargs))
        self.evals[name] = summary
        return summary


def start_processes(cfg: TrainConfig) -> tuple[int, int, torch.device]:
    """``(rank, world, device)``, the process group joined under torchrun, after the checks
    that need no model (the env exists, the warm start's teacher fits the training envs) and
    those of the ranks (FSDP runs under torchrun; the groups divide among the ranks)."""
    from gagpo.envs import env_spec

    env_spec(cfg.env)  # an unknown env fails now, not after the model has loaded
    if cfg.bc_episodes > 0:
        check_teacher_envs(cfg)
    rank, world, device = setup_distributed()
    if cfg.parallel == "fsdp" and not torch.distributed.is_initialized():
        raise ValueError("--parallel fsdp runs under torchrun, e.g. torchrun "
                         "--standalone --nproc_per_node=2 -m gagpo.cli train --parallel fsdp ...")
    if cfg.n_groups % world:
        raise ValueError(f"n_groups ({cfg.n_groups}) must be a multiple of the ranks ({world})")
    if cfg.return_freed_memory:  # before the checkpoint loads: its tensors are freed later
        return_freed_memory()
    return rank, world, device


def open_run_folder(cfg: TrainConfig, out: Path, rank: int, world: int
                    ) -> dict[str, Any] | None:
    """The run's folder made ready (by rank 0); returns the checkpoint's state when
    ``--resume`` goes on from one, None for a new run.

    Raises:
        ValueError: on every rank alike, before anything runs: the folder holds an earlier run
            and neither ``--resume`` nor ``--overwrite`` is given (a mistyped command must not
            delete a run), or the checkpoint's settings differ from ``cfg`` where
            ``--resume-override`` does not allow it.
    """
    ckpt_path = out / "checkpoint.pt"
    state = load_checkpoint(ckpt_path) if cfg.resume and ckpt_path.exists() else None
    if not cfg.resume and not cfg.overwrite and earlier_run(out):
        raise ValueError(
            f"{out} holds an earlier run ({', '.join(earlier_run(out))}): pass --resume to go "
            "on from its checkpoint, --overwrite to replace it, or another --out-dir")
    if state is not None:  # the same run, or a refusal
        start = state["iteration"]
        diffs = resume_differences(state["config"], cfg, len(state["rng"]), world)
        overridden = check_resume(diffs, cfg, start)
        if rank == 0:
            print(f"resuming {out} from its checkpoint: {start} of {cfg.iterations} iterations "
                  "done", flush=True)
            if overridden:
                print(f"--resume-override: going on from iteration {start} with settings "
                      "that differ from the checkpoint's:\n" + "\n".join(overridden))
            record_config_changes(out, start, diffs)
    if rank == 0:
        prepare_run_folder(out, cfg, state)
        taken = cfg.defaults_taken()
        if taken:
            print("unset settings take: " + ", ".join(f"{k} {v}" for k, v in taken.items()),
                  flush=True)
    return state


def build_run(cfg: TrainConfig, out: Path, rank: int, world: int, device: torch.device) -> Run:
    """The run's model and tokenizer, its :class:`Compute` (``rank``, ``world`` and ``device``
    as :func:`start_processes` found them, the autocast dtype ``--bf16`` gives the model, the
    tokenizer's pad token), agent, policy (and vLLM engine), tasks, frozen reference and PPO's
    critic, sharded under FSDP: a run before its weights are restored or warm-started."""
    from gagpo.agents.react import ReActAgent
    from gagpo.envs import split_tasks

    model, tokenizer = build_model(cfg, device)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else \
        tokenizer.eos_token_id
    compute = Compute(device=device, amp=bf16_autocast(cfg.bf16, model, device), rank=rank,
                      world=world, pad_id=pad_id)
    agent = ReActAgent(cfg.env, history_length=cfg.history_length, max_steps=cfg.max_steps,
                       max_prompt_tokens=cfg.max_prompt_tokens,
                       tokenizer=tokenizer if cfg.max_prompt_tokens else None)
    policy = make_policy(model, tokenizer, cfg, temperature=cfg.temperature,
                         seed=cfg.seed + rank, top_p=cfg.top_p)
    # With vLLM the engine samples the rollouts; ``policy`` still tokenises demonstrations.
    # It starts before any environment exists (vLLM's CPU build: see gagpo.agents.policies.vllm).
    engine = make_vllm_engine(cfg, tokenizer, seed=cfg.seed + rank, amp=compute.amp) \
        if cfg.generation == "vllm" else None
    train_tasks = split_tasks(cfg.env, **env_kwargs(cfg, cfg.train_split))
    eval_tasks = split_tasks(cfg.env, **env_kwargs(cfg, cfg.resolved_eval_split())
                             )[:cfg.eval_episodes]
    # The frozen reference is the starting policy: under LoRA without a warm start the
    # adapter-free base (no copy); otherwise a frozen copy, which the warm start overwrites with
    # its result (under LoRA that is base + the warm start's adapter, not the base alone).
    ref_model = None  # (none for a warm start alone: no update would read it)
    if cfg.kl_coef > 0 and cfg.iterations > 0 and (cfg.lora_rank == 0 or cfg.bc_episodes > 0):
        ref_model = frozen_reference(model, None if cfg.parallel == "fsdp" else compute.amp)
    if cfg.parallel == "fsdp":
        shard_model(model)
        if ref_model is not None:
            shard_model(ref_model)
    passes = Passes.choose(model, cfg, compute)
    critic = None  # PPO's value head on its own copy of the backbone (gagpo.critic)
    if cfg.algo == "ppo":
        critic = Critic(*build_model(replace(cfg, model=cfg.critic_model or cfg.model), device),
                        cfg, tokenizer, passes=passes)
    return Run(cfg=cfg, out=out, compute=compute, passes=passes,
               model=model, tokenizer=tokenizer,
               agent=agent, policy=policy, engine=engine, ref_model=ref_model, critic=critic,
               train_tasks=train_tasks, eval_tasks=eval_tasks)


def restore(run: Run, state: dict[str, Any]) -> None:
    """The checkpoint's weights into the run (the model's, the critic's, the warm-started
    reference's) and its evaluations. Each part is dropped from ``state`` once loaded: a
    resumed run holds no second copy."""
    try:
        load_full_state(run.model, state.pop("model"))
    except ValueError as e:  # a checkpoint made for another model, or tampered with
        raise ValueError(f"{run.out / 'checkpoint.pt'} does not fit {run.cfg.model} (lora_rank "
                         f"{run.cfg.lora_rank}): {e}") from None
    if run.critic is not None:
        run.critic.load(state.pop("critic"))
    if run.ref_model is not None and "reference" in state:
        load_full_state(run.ref_model, state.pop("reference"))
    run.evals = state["evals"]


def warm_start(run: Run) -> None:
    """A new run's start: the starting policy evaluated, then (``--bc-episodes``) the
    behaviour-cloning warm start on the teacher's demonstrations, evaluated again. GAGPO's
    reference policy becomes the warm model."""
    cfg, rank, world = run.cfg, run.compute.rank, run.compute.world
    if cfg.eval_episodes > 0:
        run.evaluate("before")
    if cfg.bc_episodes <= 0:
        return
    mine = run.train_tasks[rank:cfg.bc_episodes:world]
    teacher = make_teacher(cfg)
    teacher_kwargs = env_kwargs_for(teacher, env_kwargs(cfg, cfg.train_split))
    with make_vec(cfg, len(mine), 1, teacher_kwargs) as teacher_envs:
        demos = expert_demonstrations(cfg, run.policy, teacher, run.agent, mine, teacher_envs)
    run.model.train()
    nll = behaviour_cloning(run.model, demos, cfg, compute=run.compute)
    run.evals["bc"] = {"demonstration_steps": len(demos), "final_nll": nll}
    if run.ref_model is not None:
        load_full_state(run.ref_model, full_state(run.model, trainable_only=False))
    if cfg.eval_episodes > 0:
        run.evaluate("after_bc")


def same_start_on_every_rank(model: Any, world: int) -> None:
    """Rank 0's parameters on every DDP rank (FSDP's shards exist once)."""
    if world > 1 and not is_sharded(model):
        for p in model.parameters():
            torch.distributed.broadcast(p.data, src=0)


def make_optimizer(model: Any, cfg: TrainConfig) -> torch.optim.Optimizer:
    """AdamW on the trainable parameters (all, or LoRA's adapters and, with
    ``--lora-embeddings``, the embeddings, at ``--embeddings-lr`` where it is given: a matrix
    trained in full may want full fine-tuning's rate, where adapters want a higher one)."""
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if cfg.embeddings_lr is None:  # (TrainConfig refuses it without --lora-embeddings)
        return torch.optim.AdamW([p for _, p in trained], lr=cfg.lr,
                                 weight_decay=cfg.weight_decay)
    full = [p for n, p in trained if ".modules_to_save." in n]
    rest = [p for n, p in trained if ".modules_to_save." not in n]
    return torch.optim.AdamW([{"params": rest}, {"params": full, "lr": cfg.embeddings_lr}],
                             lr=cfg.lr, weight_decay=cfg.weight_decay)


def restore_optimizer_and_streams(run: Run, optimizer: torch.optim.Optimizer,
                                  state: dict[str, Any]) -> None:
    """The checkpoint's optimizer moments (dropped from ``state`` once loaded) and this rank's
    random streams: the policy's sampling and vLLM's count of requests."""
    load_optimizer_state(run.model, optimizer, state.pop("optimizer"))
    rank = run.compute.rank
    if rank < len(state["rng"]):  # else (more ranks, overridden): the seeded streams
        set_rng_state(state["rng"][rank], run.policy)
        if run.engine is not None:
            run.engine.requests_made = state["rng"][rank].get("engine_requests", 0)


# ---------------------------------------------------------------------------------------------
# An iteration's parts: tasks, rollout, update, step table, checkpoint.


def iteration_tasks(cfg: TrainConfig, train_tasks: list, my_groups: list[int], it: int
                    ) -> tuple[list, list[int]]:
    """This rank's groups' tasks and env seeds at iteration ``it``. They depend on (seed,
    iteration) only: a resumed run sees the same."""
    task_rng = np.random.default_rng([cfg.seed, it])
    picks = task_rng.choice(len(train_tasks), size=cfg.n_groups,
                            replace=len(train_tasks) < cfg.n_groups)
    seeds = [int(task_rng.integers(2**31)) for _ in range(cfg.n_groups)]
    return [train_tasks[int(picks[g])] for g in my_groups], [seeds[g] for g in my_groups]


def play(run: Run, vec: Any, tasks: list, seeds: list[int]) -> tuple[StepTable, TimedPolicy]:
    """The current policy's episodes of ``tasks`` (G copies each) in ``vec``; vLLM's engine
    gets the model's weights first."""
    from gagpo.agents.rollout import rollout

    if run.engine is not None:
        sync_engine(run.engine, run.model)
    timed = TimedPolicy(run.engine or run.policy)
    run.model.eval()
    with sampling(run.model, engine=run.engine, amp=run.compute.amp):
        table = rollout(timed, run.agent, vec, tasks, seeds=seeds)
    return table, timed


@dataclass(frozen=True)
class Learned:
    """What an iteration computed from its rollout, and what its update measured."""

    steps: StepTable
    """The rollout's steps, lost episodes left out."""
    rewards: np.ndarray
    penalty: np.ndarray
    values: np.ndarray | None
    """PPO's critic's values of the steps' prompts (None without a critic)."""
    advantages: np.ndarray
    details: dict[str, Any]
    """The estimator's details (:func:`advantages_of`)."""
    update: UpdateStats
    critic: CriticStats | None
    logprob_gap: tuple[float, int] | None
    seconds: float
    """Time spent updating (the policy, its log-probs recomputed, the critic)."""

    def rank_stats(self, table: StepTable) -> RankStats:
        """This rank's share of the metrics; ``table`` is the whole rollout."""
        return RankStats(
            episodes=table.episodes(), advantages=self.advantages.tolist(),
            steps=len(self.steps), shared_steps=int((self.details["state_group_size"] > 1).sum()),
            met_steps=round(self.details["met_fraction"] * len(self.steps)),
            invalid_steps=int((~step_credit.valid_steps(self.steps)).sum()), update=self.update,
            critic=self.critic, logprob_gap=self.logprob_gap)


def learn(run: Run, optimizer: torch.optim.Optimizer, table: StepTable, it: int) -> Learned:
    """Rewards and advantages (pure functions of the steps; lost episodes left out), then the
    policy update (and PPO's critic's; the policy waits out the critic's warm-up)."""
    cfg = run.cfg
    steps = replace(table, rows=[r for r in table.rows if not r.failed])
    rewards, penalty = rewards_and_penalties(steps, cfg)
    prompts = steps.column("prompt_token_ids")
    values = None if run.critic is None else run.critic.values(prompts)
    adv, details = advantages_of(steps, rewards, cfg, penalty, values)
    batch = training_batch(steps, adv)

    t1 = time.perf_counter()
    run.model.train()
    gap = None
    if cfg.recompute_old_logp or run.engine is not None:  # vLLM's numerics are not ours
        batch, gap = recompute_old_logprobs(run.model, batch, cfg, compute=run.compute,
                                            passes=run.passes)
    epoch_seed = cfg.seed * 1_000_003 + it * 101 + run.compute.rank
    critic_stats = None if run.critic is None else run.critic.update(
        prompts, values, details["value_target"], epoch_seed=epoch_seed)
    stats = UpdateStats.skipped() if it < cfg.critic_warmup else update(
        run.model, run.ref_model, optimizer, batch, cfg, compute=run.compute,
        epoch_seed=epoch_seed, passes=run.passes)
    return Learned(steps=steps, rewards=rewards, penalty=penalty, values=values,
                   advantages=adv, details=details, update=stats, critic=critic_stats,
                   logprob_gap=gap, seconds=time.perf_counter() - t1)


def save_steps(run: Run, it: int, learned: Learned) -> None:
    """Iteration ``it``'s step table, with its rewards, advantages and the estimator's
    details, one file per rank."""
    rank, world = run.compute.rank, run.compute.world
    name = f"iter_{it + 1:05d}" + (f"_rank{rank}" if world > 1 else "") + ".npz"
    d = learned.details
    save_step_table(run.out / "steps" / name, learned.steps,
                    {"reward": learned.rewards, "penalty": learned.penalty,
                     "advantage": learned.advantages, "return": d["returns"],
                     "value": d["value"], "state_group_size": d["state_group_size"]}
                    | ({} if learned.values is None else {"critic_value": learned.values}),
                    run.cfg.keeps_observations())


def checkpoint_payload(run: Run, optimizer: torch.optim.Optimizer, rngs: list[dict[str, Any]],
                       iteration: int) -> dict[str, Any]:
    """What a checkpoint holds: the model's and the optimizer's full states, every rank's
    random streams, the iterations done, the settings and the evaluations; the warm-started
    reference and PPO's critic where the run has them. Tensors as they are (no clones): a
    checkpoint must not double the model. Gathering full tensors is a collective under FSDP:
    there every rank builds it."""
    payload = {"model": full_state(run.model, clone=False),
               "optimizer": optimizer_state(run.model, optimizer),
               "rng": rngs, "iteration": iteration, "config": run.cfg.to_dict(),
               "evals": run.evals}
    if run.ref_model is not None and "bc" in run.evals:  # else: rebuilt from cfg.model
        payload["reference"] = full_state(run.ref_model, trainable_only=False, clone=False)
    if run.critic is not None:
        payload["critic"] = run.critic.state()
    return payload


def write_checkpoint(run: Run, optimizer: torch.optim.Optimizer, iteration: int) -> None:
    """The checkpoint after ``iteration`` iterations, written by rank 0 (every rank calls
    this: the random streams are gathered, and under FSDP the tensors too)."""
    rngs = gather_objects(rng_state(run.policy) | (
        {"engine_requests": run.engine.requests_made} if run.engine is not None else {}),
        run.compute.world)
    if run.compute.rank == 0 or is_sharded(run.model):
        payload = checkpoint_payload(run, optimizer, rngs, iteration)
        if run.compute.rank == 0:
            save_checkpoint(run.out / "checkpoint.pt", **payload)


# ---------------------------------------------------------------------------------------------
# The end of a run.


def saves_final(cfg: TrainConfig, start: int, resumed: bool, stopped: bool) -> bool:
    """Whether the run ends by saving its model to ``final/``: the model at the run's last
    iteration, also when a resume found the checkpoint already there (a run stopped early and
    ended with ``--resume --iterations K``); a warm start alone (``--iterations 0
    --bc-episodes N``) too, since later runs start from it (``--model RUN_DIR/final``). A run
    that --max-minutes stopped has none: final/ says the run is complete."""
    return not stopped and ((cfg.iterations > 0 and start <= cfg.iterations)
                            or (not resumed and cfg.bc_episodes > 0))


def finish(run: Run, *, save_final: bool) -> None:
    """The run's end, on every rank: the ranks' parameter digests compared and recorded (DDP
    must leave every rank with the same parameters; under FSDP each shard exists once, and
    rank 0 records the digest of the gathered model), the evaluations written, and the model
    saved to ``final/`` when ``save_final``."""
    digest = parameters_sha256(run.model)
    digests = [digest] if is_sharded(run.model) else gather_objects(digest, run.compute.world)
    if run.compute.rank == 0:
        write_json(run.out / "parameter_digests.json", digests, indent=None)
        if run.evals:
            write_json(run.out / "evals.json", run.evals, indent=1)
        if len(set(digests)) > 1:
            print(f"warning: parameters differ across ranks: {digests}")
    if save_final:
        save_pretrained(run.model, run.tokenizer, run.out / "final", run.compute.rank)


# ---------------------------------------------------------------------------------------------
# The loop.


def train(cfg: TrainConfig) -> dict[str, Any]:
    """Run (or resume) a training run; returns the evaluations made along the way."""
    from tqdm import tqdm

    began = time.perf_counter()  # --max-minutes counts from here
    rank, world, device = start_processes(cfg)
    out = Path(cfg.out_dir)
    state = open_run_folder(cfg, out, rank, world)  # the checkpoint's, or None: a new run
    start = 0 if state is None else state["iteration"]
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    run = build_run(cfg, out, rank, world, device)
    if state is not None:
        restore(run, state)
    else:
        warm_start(run)
    same_start_on_every_rank(run.model, world)
    optimizer = make_optimizer(run.model, cfg)
    if state is not None:
        restore_optimizer_and_streams(run, optimizer, state)

    logger = MetricLogger(cfg, out, enabled=rank == 0, start=start)
    my_groups = list(range(rank, cfg.n_groups, world))
    vec = make_vec(cfg, len(my_groups), cfg.group_size, env_kwargs(cfg, cfg.train_split))
    stopped = False  # by --max-minutes, before the last iteration
    bar = tqdm(total=cfg.iterations, initial=start, desc=f"train {cfg.algo}", unit="it",
               disable=not (cfg.progress and rank == 0))
    try:
        for it in range(start, cfg.iterations):
            t0 = time.perf_counter()
            tasks, seeds = iteration_tasks(cfg, run.train_tasks, my_groups, it)
            table, timed = play(run, vec, tasks, seeds)
            t_rollout = time.perf_counter() - t0
            learned = learn(run, optimizer, table, it)

            # Metrics (over all ranks), the step table, the checkpoint, evaluation.
            mine = learned.rank_stats(table)
            metrics = iteration_metrics(gather_objects(mine, world), mine, timed, t_rollout,
                                        learned.seconds)
            save_steps(run, it, learned)
            if it == start and rank == 0 and (advice := step_credit.estimator_advice(
                    cfg.credit(), metrics["state/met_fraction"])):
                print(advice, flush=True)
            last = it + 1 == cfg.iterations
            # --max-minutes: stop here, checkpoint written, when any rank is past the limit.
            stop = not last and cfg.max_minutes > 0 and all_reduce_max(
                float(time.perf_counter() - began > 60 * cfg.max_minutes), world) > 0
            if cfg.eval_episodes > 0 and (last or (cfg.eval_every and (it + 1) % cfg.eval_every
                                                   == 0)):
                metrics.update(eval_metrics(run.evaluate("after" if last else f"iter_{it + 1}")))
            metrics["time/other"] = time.perf_counter() - t0 - t_rollout - learned.seconds
            metrics["time/iteration"] = time.perf_counter() - t0
            # Logged before the checkpoint: a kill between the two leaves a line that the
            # resume (from an earlier checkpoint) cuts, never a checkpoint missing its line.
            logger.log(it + 1, metrics)
            if last or stop or (cfg.save_every and (it + 1) % cfg.save_every == 0):
                write_checkpoint(run, optimizer, it + 1)
            bar.set_postfix(success=f"{metrics['train/success']:.2f}",
                            len=f"{metrics['train/episode_length']:.1f}")
            bar.update(1)
            if stop:
                stopped = True
                if rank == 0:
                    print(f"stopped after iteration {it + 1} of {cfg.iterations}: "
                          f"--max-minutes {cfg.max_minutes:g} reached; the checkpoint is in "
                          f"{out}, and --resume goes on from it")
                break
    finally:
        bar.close()
        vec.close()
        logger.close()
    finish(run, save_final=saves_final(cfg, start, state is not None, stopped))
    shutdown_distributed()
    return run.evals
