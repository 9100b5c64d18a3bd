"""PPO's learned critic: a value head on a copy of the policy's backbone (or on the backbone of
``--critic-model``), estimating V(s_t) at each step's prompt, as verl-agent's PPO does for
multi-turn agents.

    V(s_t) = w . h_t + b,   h_t = the backbone's last hidden state at the prompt's last token

The backbone is the language model without its vocabulary projection; the prompt is the one the
policy acted on, so the critic sees the state as the policy does. The head starts at zero
(V = 0 everywhere): the first advantages are GAE on no baseline at all, and the critic's own
learning rate and warm-up iterations (``--critic-lr``, ``--critic-warmup``) let it catch up
before the policy relies on it.

The advantages are :func:`gagpo.advantages.compute_advantages` ``("ppo", value=V)``: GAE(gamma,
lambda) over each trajectory's step rewards on these values. The critic then regresses on the
lambda-returns R = A^GAE + V_old with PPO's clipped value loss (verl's ``cliprange_value``)::

    L = 1/2 * max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2),   averaged over rows

which keeps one iteration from moving a value further than ``c`` from the one the advantages
used. LoRA (its own adapters, same rank), gradient checkpointing, DDP and FSDP apply to the
critic as to the policy; its weights and optimizer are part of every checkpoint. Where the
policy's passes are packed (``--pack-prompts``), the critic's run each distinct prompt once for
all the rows that share it (the copies of a task in one state with one history): their values
are one value, and their losses' gradients add up through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gagpo.batching import micro_batches, packed_micro_batches
from gagpo.distributed import (
    full_parameters,
    full_state,
    load_full_state,
    load_optimizer_state,
    loss_scale,
    optimizer_state,
    shard_model,
)
from gagpo.logprobs import pad_batch
from gagpo.policy_update import optimizer_steps

if TYPE_CHECKING:
    from gagpo.passes import Passes
    from gagpo.train_config import TrainConfig


@dataclass(frozen=True)
class CriticStats:
    """What one critic update measured; the trainer logs each field as ``critic/<name>``."""

    value_loss: float
    """Clipped value loss, mean over rows (over the update's passes)."""
    clip_frac: float
    """Share of rows whose clipped term was the larger one."""
    explained_variance: float
    """1 - Var(R - V_old) / Var(R) on this iteration's rows: 1 when the values the advantages
    used predicted the returns, 0 when no better than their mean, below 0 when worse."""
    value_mean: float
    """Mean V_old: the critic's estimate, beside the mean return it tracks."""
    grad_norm: float
    """Gradient norm before clipping, mean over the optimizer steps."""


def value_loss(v: torch.Tensor, v_old: torch.Tensor, target: torch.Tensor, clip: float
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped value loss per row, ``1/2 max((v - R)^2, (v_clipped - R)^2)``, and whether
    the clipped term was the larger (per row)."""
    v_clipped = v_old + torch.clamp(v - v_old, -clip, clip)
    plain, clipped = (v - target) ** 2, (v_clipped - target) ** 2
    return 0.5 * torch.maximum(plain, clipped), clipped > plain


class ValueModel(torch.nn.Module):
    """A causal language model's backbone with a scalar head read at the last token."""

    def __init__(self, lm: Any) -> None:
        super().__init__()
        self.backbone = lm.get_decoder()  # (under LoRA: with the adapters peft put in it)
        self.head = torch.nn.Linear(lm.config.hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)
        # FSDP shards one unit per transformer block (gagpo.distributed.fsdp_units).
        self._no_split_modules = list(getattr(lm, "_no_split_modules", None) or [])

    def forward(self, prompts: Sequence[Sequence[int]], *, pad_id: int,
                amp: torch.dtype | None) -> torch.Tensor:
        """V of each prompt, ``[B]`` float32 (prompts left-padded: the last position is every
        prompt's last token)."""
        device = self.head.weight.device
        ids, attn, positions, _ = pad_batch(prompts, [[] for _ in prompts], pad_id)
        with torch.autocast(device.type, dtype=amp or torch.bfloat16, enabled=amp is not None):
            hidden = self.backbone(input_ids=ids.to(device), attention_mask=attn.to(device),
                                   position_ids=positions.to(device),
                                   use_cache=False).last_hidden_state[:, -1]
        return self.head(hidden.float()).squeeze(-1)


class Critic:
    """The value model, its optimizer, and what the trainer asks of them; its passes run as
    the policy's do (``passes``: the policy's pad token, autocast and ranks, and whether its
    passes are packed, in which case each distinct prompt runs once here too)."""

    def __init__(self, lm: Any, lm_tokenizer: Any, cfg: TrainConfig, tokenizer: Any, *,
                 passes: Passes) -> None:
        if lm_tokenizer.get_vocab() != tokenizer.get_vocab():
            raise ValueError(f"--critic-model {cfg.critic_model!r} tokenises text differently "
                             f"from --model {cfg.model!r}: the critic reads the policy's prompt "
                             "tokens, so it needs the policy's tokenizer")
        self.cfg, self.compute, self._dedup = cfg, passes.compute, passes.packed
        compute = passes.compute
        self.model = ValueModel(lm)
        if cfg.parallel == "fsdp":
            shard_model(self.model)
        elif compute.world > 1:  # the same start on every DDP rank
            for p in self.model.parameters():
                torch.distributed.broadcast(p.data, src=0)
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=cfg.critic_lr,
                                           weight_decay=cfg.weight_decay)

    def _chunks(self, prompts: Sequence[Sequence[int]], rows: list[int]) -> list[list[int]]:
        """``rows`` in micro-batches of at most ``micro_batch_tokens`` prompt tokens: padded
        (sorted by length), or with a prompt shared by rows counted once."""
        if self._dedup:
            part = [prompts[i] for i in rows]
            cut = packed_micro_batches(part, [[] for _ in part], self.cfg.micro_batch_tokens)
        else:
            order = sorted(range(len(rows)), key=lambda j: len(prompts[rows[j]]))
            cut = [[order[j] for j in c] for c in micro_batches(
                [len(prompts[rows[j]]) for j in order], self.cfg.micro_batch_tokens)]
        return [[rows[j] for j in c] for c in cut]

    def _forward(self, prompts: list[Sequence[int]]) -> torch.Tensor:
        """V of each prompt, ``[B]``: one pass, over the distinct prompts where deduplicating."""
        pad_id, amp = self.compute.pad_id, self.compute.amp
        if not self._dedup:
            return self.model(prompts, pad_id=pad_id, amp=amp)
        first: dict[tuple[int, ...], int] = {}
        where = [first.setdefault(tuple(p), len(first)) for p in prompts]
        v = self.model([list(p) for p in first], pad_id=pad_id, amp=amp)
        return v[torch.tensor(where, device=v.device)]

    @torch.no_grad()
    def values(self, prompts: Sequence[Sequence[int]]) -> np.ndarray:
        """V(s_t) of each step's prompt (0 for a step whose policy gave no prompt tokens)."""
        self.model.eval()
        out = np.zeros(len(prompts))
        rows = [i for i in range(len(prompts)) if len(prompts[i])]
        with full_parameters(self.model):
            for idx in self._chunks(prompts, rows):
                v = self._forward([prompts[i] for i in idx])
                out[idx] = v.double().cpu().numpy()
        return out

    def update(self, prompts: Sequence[Sequence[int]], old_values: np.ndarray,
               targets: np.ndarray, *, epoch_seed: int) -> CriticStats:
        """The critic's passes over the iteration's steps (those with prompt tokens), towards
        ``targets`` with the clipped value loss."""
        rows = [i for i in range(len(prompts)) if len(prompts[i])]
        scale = loss_scale(self.model, self.compute.world)
        totals = {"loss": 0.0, "clipped": 0.0, "rows": 0.0}
        self.model.train()

        def micro_step(idx: list[int] | None, denom: float) -> None:
            if idx is None:  # a padding pass: same collectives, no gradient
                chosen, inputs = [], [[self.compute.pad_id]]
            else:
                chosen = [rows[j] for j in idx]
                inputs = [prompts[i] for i in chosen]
            v = self._forward(inputs)
            old = torch.tensor(old_values[chosen] if chosen else [0.0], dtype=torch.float32,
                               device=v.device)
            target = torch.tensor(targets[chosen] if chosen else [0.0], dtype=torch.float32,
                                  device=v.device)
            loss, clipped = value_loss(v, old, target, self.cfg.value_clip)
            (loss.sum() / max(denom, 1.0) * (0.0 if idx is None else 1.0) * scale).backward()
            if idx is not None:
                totals["loss"] += float(loss.detach().sum())
                totals["clipped"] += float(clipped.sum())
                totals["rows"] += len(chosen)

        def dedup_split(mb: list[int]) -> list[list[int]]:  # mb: positions in rows
            where = {rows[j]: j for j in mb}
            return [[where[i] for i in c] for c in self._chunks(prompts, [rows[j] for j in mb])]

        grad_norm = optimizer_steps(
            self.model, self.optimizer, [len(prompts[i]) for i in rows], self.cfg,
            compute=self.compute, epoch_seed=epoch_seed, count=len, micro_step=micro_step,
            split=dedup_split if self._dedup else None)
        used_old, used_target = old_values[rows], targets[rows]
        var = float(np.var(used_target)) if rows else 0.0
        explained = 1.0 - float(np.var(used_target - used_old)) / var if var > 0 else 0.0
        n = max(totals["rows"], 1.0)
        return CriticStats(value_loss=totals["loss"] / n, clip_frac=totals["clipped"] / n,
                           explained_variance=explained,
                           value_mean=float(np.mean(used_old)) if rows else 0.0,
                           grad_norm=grad_norm / (self.cfg.ppo_epochs * self.cfg.num_minibatches))

    def state(self) -> dict[str, Any]:
        """Weights (the trained ones: all, or the LoRA adapters and the head) and optimizer
        state, for a checkpoint written at once (a whole model's tensors are its own, not
        copies); a collective under FSDP, as the policy's."""
        return {"model": full_state(self.model, clone=False),
                "optimizer": optimizer_state(self.model, self.optimizer)}

    def load(self, state: dict[str, Any]) -> None:
        load_full_state(self.model, state["model"])
        load_optimizer_state(self.model, self.optimizer, state["optimizer"])
