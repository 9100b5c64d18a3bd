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
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gagpo.advantages import compute_advantages
from gagpo.agents.models import bf16_autocast, is_large
from gagpo.agents.policies.factory import env_kwargs_for
from gagpo.common.malloc import return_freed_memory
from gagpo.critic import Critic, CriticStats
from gagpo.distributed import (
    all_reduce_max,
    full_parameters,
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
from gagpo.evaluate import evaluate_model
from gagpo.policy_update import (
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

        lora = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha,
                          lora_dropout=cfg.lora_dropout, target_modules="all-linear")
        model = get_peft_model(model, lora)
    return model, tokenizer


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


def valid_actions(table: StepTable) -> np.ndarray:
    """Per step: the reply was well formed and the env accepted its action."""
    return table.column("well_formed", bool) & table.column("action_valid", bool)


def env_rewards(table: StepTable, cfg: TrainConfig) -> np.ndarray:
    """``reward_scale`` x success (or x the env's score) on an episode's last step, else 0."""
    end = table.column("won" if cfg.reward == "success" else "score", np.float64)
    return np.where(table.column("done", bool), cfg.reward_scale * end, 0.0)


def invalid_penalties(table: StepTable, cfg: TrainConfig) -> np.ndarray:
    """``invalid_penalty`` on steps whose action was malformed or rejected, else 0."""
    return np.where(valid_actions(table), 0.0, cfg.invalid_penalty)


def step_rewards(table: StepTable, cfg: TrainConfig) -> np.ndarray:
    """r_t with the penalty folded in (``--invalid-penalty-target return``): the env's reward
    minus ``invalid_penalty`` on steps whose action was malformed or rejected."""
    return env_rewards(table, cfg) - invalid_penalties(table, cfg)


def rewards_and_penalties(table: StepTable, cfg: TrainConfig) -> tuple[np.ndarray, np.ndarray]:
    """What the estimator gets: r_t, and the amount charged to each step alone (the penalty
    under ``--invalid-penalty-target step``; 0 under ``return``, where r_t holds it)."""
    if cfg.invalid_penalty_target == "return":
        return step_rewards(table, cfg), np.zeros(len(table))
    return env_rewards(table, cfg), invalid_penalties(table, cfg)


def advantages_of(table: StepTable, rewards: np.ndarray, cfg: TrainConfig,
                  penalty: np.ndarray | None = None, values: np.ndarray | None = None
                  ) -> tuple[np.ndarray, dict]:
    """One advantage per step (``cfg.algo``; PPO's on the critic's ``values``), and the
    estimator's details (returns, grouped values, step-group sizes, the critic's targets)."""
    # object: state keys and observations compared as Python compares the texts.
    keys = table.column("state_key" if cfg.state_grouping == "state_key" else "observation",
                        object)
    lam, norm = cfg.resolved_lam_norm()
    return compute_advantages(
        cfg.algo, group=table.column("group"), trajectory=table.column("trajectory"),
        step=table.column("t", np.int64), key=keys, reward=rewards,
        gamma=cfg.gamma, lam=lam, norm=norm, omega=cfg.omega,
        episode_stats=cfg.episode_stats, gagpo_variant=cfg.gagpo_variant, penalty=penalty,
        value=values, return_details=True)


def training_batch(table: StepTable, adv: np.ndarray) -> dict[str, list]:
    """The actions to train on: every step whose policy gave its prompt's and reply's tokens,
    with the reply's sampling log-probs (a copy: the update may replace them) and advantage."""
    prompts, replies = table.column("prompt_token_ids"), table.column("token_ids")
    logprobs = table.column("logprobs")
    idx = [i for i in range(len(table)) if replies[i] and prompts[i]]
    return {"prompt": [prompts[i] for i in idx], "reply": [replies[i] for i in idx],
            "old_logp": [list(logprobs[i]) for i in idx], "adv": [float(adv[i]) for i in idx]}


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
# The loop.


def train(cfg: TrainConfig) -> dict[str, Any]:
    """Run (or resume) a training run; returns the evaluations made along the way."""
    from tqdm import tqdm

    from gagpo.agents.react import ReActAgent
    from gagpo.agents.rollout import rollout
    from gagpo.envs import env_spec, split_tasks

    began = time.perf_counter()  # --max-minutes counts from here
    env_spec(cfg.env)  # an unknown env fails now, not after the model has loaded
    if cfg.bc_episodes > 0:
        check_teacher_envs(cfg)
    rank, world, device = setup_distributed()
    if cfg.parallel == "fsdp" and not torch.distributed.is_initialized():
        raise ValueError("--parallel fsdp runs under torchrun, e.g. torchrun "
                         "--standalone --nproc_per_node=2 -m gagpo.cli train --parallel fsdp ...")
    if cfg.n_groups % world:
        raise ValueError(f"n_groups ({cfg.n_groups}) must be a multiple of the ranks ({world})")
    out = Path(cfg.out_dir)
    ckpt_path = out / "checkpoint.pt"
    if cfg.return_freed_memory:  # before the checkpoint loads: its tensors are freed below
        return_freed_memory()
    state = load_checkpoint(ckpt_path) if cfg.resume and ckpt_path.exists() else None
    if not cfg.resume and not cfg.overwrite and earlier_run(out):
        # On every rank alike, before anything runs: a mistyped command must not delete a run.
        raise ValueError(
            f"{out} holds an earlier run ({', '.join(earlier_run(out))}): pass --resume to go "
            "on from its checkpoint, --overwrite to replace it, or another --out-dir")
    start = 0 if state is None else state["iteration"]
    if state is not None:  # the same run, or a refusal (on every rank alike)
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
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)

    model, tokenizer = build_model(cfg, device)
    amp = bf16_autocast(cfg.bf16, model, device)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else \
        tokenizer.eos_token_id
    agent = ReActAgent(cfg.env, history_length=cfg.history_length, max_steps=cfg.max_steps,
                       max_prompt_tokens=cfg.max_prompt_tokens,
                       tokenizer=tokenizer if cfg.max_prompt_tokens else None)
    policy = make_policy(model, tokenizer, cfg, temperature=cfg.temperature,
                         seed=cfg.seed + rank, top_p=cfg.top_p)
    # With vLLM the engine samples the rollouts; ``policy`` still tokenises demonstrations.
    # It starts before any environment exists (vLLM's CPU build: see gagpo.agents.policies.vllm).
    engine = make_vllm_engine(cfg, tokenizer, seed=cfg.seed + rank, amp=amp) \
        if cfg.generation == "vllm" else None
    train_tasks = split_tasks(cfg.env, **env_kwargs(cfg, cfg.train_split))
    eval_tasks = split_tasks(cfg.env, **env_kwargs(cfg, cfg.resolved_eval_split())
                             )[:cfg.eval_episodes]
    evals: dict[str, Any] = {}

    def run_eval(name: str) -> dict[str, Any]:
        eval_kwargs = env_kwargs(cfg, cfg.resolved_eval_split())
        summary = evaluate_model(
            model, agent, eval_tasks, rank=rank, world=world, amp=amp, engine=engine,
            batch=cfg.eval_batch, temperature=cfg.eval_temperature,
            # A private, fixed seed per rank: evaluating never moves the run's random streams.
            seed=cfg.seed + 1_000_003 * (rank + 1),
            new_policy=lambda seed: make_policy(model, tokenizer, cfg,
                                                temperature=cfg.eval_temperature, seed=seed),
            new_vec=lambda n: make_vec(cfg, n, 1, eval_kwargs))
        evals[name] = summary
        return summary

    # The frozen reference is the starting policy: under LoRA without a warm start the
    # adapter-free base (no copy); otherwise a frozen copy, which the warm start overwrites with
    # its result (under LoRA that is base + the warm start's adapter, not the base alone).
    ref_model = None  # (none for a warm start alone: no update would read it)
    if cfg.kl_coef > 0 and cfg.iterations > 0 and (cfg.lora_rank == 0 or cfg.bc_episodes > 0):
        ref_model = frozen_reference(model, None if cfg.parallel == "fsdp" else amp)
    critic = None  # PPO's value head on its own copy of the backbone (gagpo.critic)
    if cfg.algo == "ppo":
        critic = Critic(*build_model(replace(cfg, model=cfg.critic_model or cfg.model), device),
                        cfg, tokenizer, world=world)
    if cfg.parallel == "fsdp":
        shard_model(model)
        if ref_model is not None:
            shard_model(ref_model)
    if state is not None:  # each part dropped once loaded: a resumed run holds no second copy
        load_full_state(model, state.pop("model"))
        if critic is not None:
            critic.load(state.pop("critic"))
        if ref_model is not None and "reference" in state:
            load_full_state(ref_model, state.pop("reference"))
        evals = state["evals"]
    else:
        if cfg.eval_episodes > 0:
            run_eval("before")
        if cfg.bc_episodes > 0:  # warm start; GAGPO's reference policy is the warm model
            mine = train_tasks[rank:cfg.bc_episodes:world]
            teacher = make_teacher(cfg)
            teacher_kwargs = env_kwargs_for(teacher, env_kwargs(cfg, cfg.train_split))
            with make_vec(cfg, len(mine), 1, teacher_kwargs) as teacher_envs:
                demos = expert_demonstrations(cfg, policy, teacher, agent, mine, teacher_envs)
            model.train()
            nll = behaviour_cloning(model, demos, cfg, world=world, amp=amp, pad_id=pad_id,
                                    rank=rank)
            evals["bc"] = {"demonstration_steps": len(demos), "final_nll": nll}
            if ref_model is not None:
                load_full_state(ref_model, full_state(model, trainable_only=False))
            if cfg.eval_episodes > 0:
                run_eval("after_bc")
    if world > 1 and not is_sharded(model):  # the same start on every DDP rank
        for p in model.parameters():
            torch.distributed.broadcast(p.data, src=0)

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    if state is not None:
        load_optimizer_state(model, optimizer, state.pop("optimizer"))
        if rank < len(state["rng"]):  # else (more ranks, overridden): the seeded streams
            set_rng_state(state["rng"][rank], policy)
            if engine is not None:
                engine.requests_made = state["rng"][rank].get("engine_requests", 0)
    logger = MetricLogger(cfg, out, enabled=rank == 0, start=start)
    my_groups = list(range(rank, cfg.n_groups, world))
    vec = make_vec(cfg, len(my_groups), cfg.group_size, env_kwargs(cfg, cfg.train_split))
    stopped = False  # by --max-minutes, before the last iteration
    bar = tqdm(total=cfg.iterations, initial=start, desc=f"train {cfg.algo}", unit="it",
               disable=not (cfg.progress and rank == 0))
    try:
        for it in range(start, cfg.iterations):
            t0 = time.perf_counter()
            # Tasks and env seeds depend on (seed, iteration) only: a resumed run sees the same.
            task_rng = np.random.default_rng([cfg.seed, it])
            picks = task_rng.choice(len(train_tasks), size=cfg.n_groups,
                                    replace=len(train_tasks) < cfg.n_groups)
            tasks = [train_tasks[int(picks[g])] for g in my_groups]
            seeds = [int(task_rng.integers(2**31)) for _ in range(cfg.n_groups)]
            if engine is not None:
                sync_engine(engine, model)
            timed = TimedPolicy(engine or policy)
            model.eval()
            with torch.no_grad(), full_parameters(model), \
                    torch.autocast(device.type, dtype=amp or torch.bfloat16,
                                   enabled=amp is not None):
                table = rollout(timed, agent, vec, tasks, seeds=[seeds[g] for g in my_groups])
            t_rollout = time.perf_counter() - t0

            # Rewards and advantages (pure functions of the steps; lost episodes left out).
            steps = replace(table, rows=[r for r in table.rows if not r.failed])
            rewards, penalty = rewards_and_penalties(steps, cfg)
            prompts = steps.column("prompt_token_ids")
            values = None if critic is None else critic.values(prompts, amp=amp, pad_id=pad_id)
            adv, details = advantages_of(steps, rewards, cfg, penalty, values)
            batch = training_batch(steps, adv)

            # The policy update (and PPO's critic's; the policy waits out its warm-up).
            t1 = time.perf_counter()
            model.train()
            gap = None
            if cfg.recompute_old_logp or engine is not None:  # vLLM's numerics are not ours
                gap = recompute_old_logprobs(model, batch, cfg, amp, pad_id)
            epoch_seed = cfg.seed * 1_000_003 + it * 101 + rank
            critic_stats = None if critic is None else critic.update(
                prompts, values, details["value_target"], epoch_seed=epoch_seed, amp=amp,
                pad_id=pad_id)
            stats = UpdateStats.skipped() if it < cfg.critic_warmup else update(
                model, ref_model, optimizer, batch, cfg, world=world, epoch_seed=epoch_seed,
                amp=amp, pad_id=pad_id)
            t_update = time.perf_counter() - t1

            # Metrics (over all ranks), the step table, the checkpoint, evaluation.
            mine = RankStats(
                episodes=table.episodes(), advantages=adv.tolist(), steps=len(steps),
                shared_steps=int((details["state_group_size"] > 1).sum()),
                invalid_steps=int((~valid_actions(steps)).sum()), update=stats,
                critic=critic_stats, logprob_gap=gap)
            metrics = iteration_metrics(gather_objects(mine, world), mine, timed, t_rollout,
                                        t_update)
            name = f"iter_{it + 1:05d}" + (f"_rank{rank}" if world > 1 else "") + ".npz"
            save_step_table(out / "steps" / name, steps,
                            {"reward": rewards, "penalty": penalty, "advantage": adv,
                             "return": details["returns"],
                             "value": details["value"],
                             "state_group_size": details["state_group_size"]}
                            | ({} if values is None else {"critic_value": values}),
                            cfg.keeps_observations())
            last = it + 1 == cfg.iterations
            # --max-minutes: stop here, checkpoint written, when any rank is past the limit.
            stop = not last and cfg.max_minutes > 0 and all_reduce_max(
                float(time.perf_counter() - began > 60 * cfg.max_minutes), world) > 0
            if cfg.eval_episodes > 0 and (last or (cfg.eval_every and (it + 1) % cfg.eval_every
                                                   == 0)):
                metrics.update(eval_metrics(run_eval("after" if last else f"iter_{it + 1}")))
            metrics["time/other"] = time.perf_counter() - t0 - t_rollout - t_update
            metrics["time/iteration"] = time.perf_counter() - t0
            # Logged before the checkpoint: a kill between the two leaves a line that the
            # resume (from an earlier checkpoint) cuts, never a checkpoint missing its line.
            logger.log(it + 1, metrics)
            rngs = gather_objects(rng_state(policy) | (
                {"engine_requests": engine.requests_made} if engine is not None else {}), world)
            # Gathering full tensors is a collective under FSDP: every rank takes part.
            if (last or stop or (cfg.save_every and (it + 1) % cfg.save_every == 0)) and \
                    (rank == 0 or is_sharded(model)):
                # Tensors as they are (no clones): a checkpoint must not double the model.
                payload = {"model": full_state(model, clone=False),
                           "optimizer": optimizer_state(model, optimizer),
                           "rng": rngs, "iteration": it + 1, "config": cfg.to_dict(),
                           "evals": evals}
                if ref_model is not None and "bc" in evals:  # else: rebuilt from cfg.model
                    payload["reference"] = full_state(ref_model, trainable_only=False,
                                                      clone=False)
                if critic is not None:
                    payload["critic"] = critic.state()
                if rank == 0:
                    save_checkpoint(ckpt_path, **payload)
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
    # DDP must leave every rank with the same parameters: check, and record it. (Under FSDP
    # each shard exists once; rank 0 records the digest of the gathered model.)
    digest = parameters_sha256(model)
    digests = [digest] if is_sharded(model) else gather_objects(digest, world)
    if rank == 0:
        write_json(out / "parameter_digests.json", digests, indent=None)
        if evals:
            write_json(out / "evals.json", evals, indent=1)
        if len(set(digests)) > 1:
            print(f"warning: parameters differ across ranks: {digests}")
    # The model at the run's last iteration: also when a resume found the checkpoint already
    # there (a run stopped early and ended with ``--resume --iterations K``). A warm start alone
    # (``--iterations 0 --bc-episodes N``) is saved too: later runs start from it
    # (``--model RUN_DIR/final``).
    # A run that --max-minutes stopped has none: final/ says the run is complete.
    if not stopped and ((cfg.iterations > 0 and start <= cfg.iterations)
                        or (state is None and cfg.bc_episodes > 0)):
        save_pretrained(model, tokenizer, out / "final", rank)
    shutdown_distributed()
    return evals
