"""The behaviour-cloning warm start (``--bc-episodes``): before reinforcement learning, the
model imitates a scripted teacher, the goal-aware expert (its won episodes) or WebShop's rule
baseline (all its episodes), by maximising log pi(teacher reply | prompt).
"""

from __future__ import annotations

import json
from typing import Any

import torch
from tqdm import tqdm

from gagpo.agents.policies.base import Policy
from gagpo.distributed import (
    Compute,
    all_reduce_max,
    all_reduce_sum,
    grad_norm_clip,
    sync_gradients,
)
from gagpo.passes import Passes
from gagpo.train_config import TrainConfig

Demonstration = tuple[list[int], list[int]]
"""``(prompt token ids, reply token ids)`` of one teacher step."""


def make_teacher(cfg: TrainConfig) -> Policy:
    """The scripted teacher ``--bc-teacher`` names: the goal-aware expert (it reads
    ``expert_action`` from the infos: see ``Policy.needs_expert_action``) or the rule baseline
    (``rule_options``: it also picks options)."""
    from gagpo.agents.policies.factory import PolicySpec, build_policy

    if cfg.bc_teacher == "expert":
        # The expert knows the goal product's title; a policy never sees it, so a search
        # that names it teaches nothing a model can repeat. Its demonstrations search the
        # request's own words (in score mode also the only search the policy can score).
        return build_policy(PolicySpec("expert"), search_with_instruction=True)
    return build_policy(PolicySpec(cfg.bc_teacher))  # "rule" or "rule_options"


def check_teacher_envs(cfg: TrainConfig) -> None:
    """Refuse a teacher that needs its environments made otherwise than the training ones
    (``rule_options`` reads chosen options off text_rich pages): its demonstrations' prompts
    would show pages the trained policy never sees.

    Raises:
        ValueError: naming the ``--env-kwargs`` that would make them agree.
    """
    needed = make_teacher(cfg).required_env_kwargs
    missing = {k: v for k, v in needed.items() if cfg.env_kwargs.get(k) != v}
    if missing:
        raise ValueError(f"--bc-teacher {cfg.bc_teacher} needs the training environments made "
                         f"with {missing}: pass --env-kwargs "
                         f"'{json.dumps({**cfg.env_kwargs, **missing})}'")


def expert_demonstrations(cfg: TrainConfig, policy: Any, teacher: Policy, agent: Any,
                          tasks: list, vec: Any) -> list[Demonstration]:
    """``teacher`` plays one episode of each of ``tasks`` in ``vec`` (one env per task, made
    with ``expert_action`` in the infos when the teacher needs it); every step of its episodes
    (the expert's: only its won ones, since it knows the goal) becomes a demonstration, the
    reply written as the policy writes it (score mode: ``reply_template`` filled, then EOS)."""
    from gagpo.agents.rollout import rollout

    tok = policy.tokenizer
    expert = cfg.bc_teacher == "expert"
    table = rollout(teacher, agent, vec, tasks)
    won = {e["trajectory"] for e in table.episodes() if e["won"] or not expert}
    demos = []
    for row in table.rows:
        if row.trajectory in won:
            text = policy.reply_template.replace("{action}", row.action) \
                if cfg.mode == "score" else row.reply
            ids = list(tok(text, add_special_tokens=False)["input_ids"]) + [tok.eos_token_id]
            demos.append((policy.prompt_ids(row.prompt), ids))
    return demos


def behaviour_cloning(model: Any, demos: list[Demonstration], cfg: TrainConfig, *,
                      compute: Compute) -> float:
    """Maximise log pi(expert reply | prompt), token-mean, ``bc_epochs`` passes (padded with
    ``compute.pad_id``, under ``compute.amp`` autocast; each of ``compute.world`` ranks on its
    own ``demos``, the progress bar on rank 0's); returns the last batch's mean negative
    log-likelihood (over all ranks' demonstrations)."""
    world = compute.world
    params = [p for p in model.parameters() if p.requires_grad]
    passes = Passes.choose(model, cfg, compute)
    scale = passes.loss_scale(model)
    prompts, replies = [d[0] for d in demos], [d[1] for d in demos]
    opt = torch.optim.AdamW(params, lr=cfg.bc_lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(cfg.seed + 7)
    nll = float("nan")
    # Ranks hold different numbers of demonstrations; all take as many optimizer steps.
    steps = int(all_reduce_max(float(-(-len(demos) // cfg.bc_batch)), world))
    bar = tqdm(total=cfg.bc_epochs * steps, desc="warm start", unit="step",
               disable=not (cfg.progress and compute.rank == 0))
    for _ in range(cfg.bc_epochs):
        order = torch.randperm(len(demos), generator=gen).tolist()
        for step in range(steps):
            idx = order[step * cfg.bc_batch:(step + 1) * cfg.bc_batch]
            denom = all_reduce_sum(float(sum(len(demos[i][1]) for i in idx)), world)
            opt.zero_grad(set_to_none=True)
            subs = passes.with_padding(passes.split(prompts, replies, idx))
            total = 0.0
            for sub in subs:
                rows = passes.padding_rows() if sub is None else (
                    [prompts[i] for i in sub], [replies[i] for i in sub])
                logp, mask, _ = passes.logprobs(model, *rows)
                loss = -(logp * mask).sum() / max(denom, 1.0)
                (loss * (sub is not None) * scale).backward()
                total += float(loss.detach()) if sub is not None else 0.0
            sync_gradients(model, params, world)
            grad_norm_clip(params, 1.0)
            opt.step()
            nll = all_reduce_sum(total, world)  # each rank holds its share of the mean
            bar.set_postfix(nll=f"{nll:.3f}")
            bar.update(1)
    bar.close()
    opt.zero_grad(set_to_none=True)  # the reinforcement-learning update makes its own
    return nll
