"""How a run's forward and backward passes run on its machine: the speed paths, behind one door.

:class:`Passes` is chosen once where the run starts (:meth:`Passes.choose`) and handed to the
update (:mod:`gagpo.policy_update`), the warm start (:mod:`gagpo.warm_start`) and the critic
(:mod:`gagpo.critic`), which call it and branch on none of what it chose:

- **packing** (``--pack-prompts``; auto: on a CPU): a prompt that several rows share runs once,
  their replies after it under a block mask (:func:`gagpo.agents.policies.kv_cache.
  gagpo_attention`), with no padding; micro-batches count such a prompt once. The same
  log-probs and gradients as padded passes, up to rounding (tested).
- **LoRA in one CPU process**: under autocast the frozen weights' casts made once, not at every
  pass (:func:`gagpo.common.lora.lora_passes_in`); in float32 each adapted layer run as one
  product with its adapters folded in (``--fold-lora``, :func:`gagpo.common.lora.
  folded_lora_update`). Elsewhere none: on a GPU the copies would take the memory
  checkpointing saves, and DDP and FSDP keep the parameters they were given.
- **FSDP**: every forward and backward is a collective, so a packed micro-batch holds one
  prompt, and each rank runs as many micro-batches as the busiest one (the extra ones are
  padding passes of one pad token, with no gradient).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from gagpo.agents.policies.kv_cache import gagpo_attention
from gagpo.batching import micro_batches, packed_micro_batches
from gagpo.common.lora import folded_lora_update, lora_passes_in
from gagpo.distributed import Compute, is_sharded, loss_scale, with_padding_passes
from gagpo.logprobs import reply_logprobs

if TYPE_CHECKING:
    from gagpo.train_config import TrainConfig


def packs_prompts(cfg: TrainConfig, model: Any) -> bool:
    """Whether passes are packed (``--pack-prompts``; auto: where the model is on a CPU)."""
    if cfg.pack_prompts != "auto":
        return cfg.pack_prompts == "on"
    return next(model.parameters()).device.type == "cpu"


def lora_update_passes(model: Any, cfg: TrainConfig, compute: Compute
                       ) -> contextlib.AbstractContextManager:
    """A LoRA update's passes made cheaper without changing their values beyond rounding, in
    one process (``compute.world`` 1) on a CPU: under ``compute.amp`` autocast without the
    casts that change no value (every pass cast each frozen weight again), in float32 with
    each adapted layer run as one product with its adapters folded in (``--fold-lora``).
    Elsewhere (and for a model without adapters) a no-op."""
    if compute.world > 1 or next(model.parameters()).device.type != "cpu":
        return contextlib.nullcontext()
    if compute.amp is not None:
        return lora_passes_in(model, compute.amp)
    return folded_lora_update(model) if cfg.fold_lora == "auto" else contextlib.nullcontext()


@dataclass(frozen=True)
class Passes:
    """The passes of one run's model on this rank (see the module docstring)."""

    compute: Compute
    """Device, autocast, rank, world and pad id."""
    packed: bool
    """A prompt shared by rows runs once, their replies under a block mask."""
    sharded: bool
    """The model is sharded with FSDP: every pass is a collective."""
    budget: int
    """Tokens a micro-batch may hold (``--micro-batch-tokens``): padded rows x longest row, or
    packed, each distinct prompt once plus every reply."""
    cfg: Any
    """The run's settings (``--fold-lora`` is read where the update's passes start)."""

    @classmethod
    def choose(cls, model: Any, cfg: TrainConfig, compute: Compute) -> Passes:
        """The passes for ``model`` (already sharded, if it is to be) under ``cfg``."""
        return cls(compute=compute, packed=packs_prompts(cfg, model),
                   sharded=is_sharded(model), budget=cfg.micro_batch_tokens, cfg=cfg)

    def logprobs(self, model: Any, prompts: Sequence[Sequence[int]],
                 replies: Sequence[Sequence[int]], *, temperature: float = 1.0,
                 with_entropy: bool = False
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """:func:`gagpo.logprobs.reply_logprobs` of ``model`` on these rows, as chosen."""
        return reply_logprobs(model, prompts, replies, pad_id=self.compute.pad_id,
                              temperature=temperature, with_entropy=with_entropy,
                              autocast_dtype=self.compute.amp, packed=self.packed)

    def split(self, prompts: Sequence[Sequence[int]], replies: Sequence[Sequence[int]],
              items: Sequence[int], *, collective: bool = True) -> list[list[int]]:
        """``items`` (rows of ``prompts``/``replies``) in micro-batches within the budget, this
        rank's only (:meth:`with_padding` adds the padding passes). ``collective``: the passes
        are collectives (not inside ``full_parameters``), so under FSDP a packed micro-batch
        holds one prompt."""
        items = list(items)
        if self.packed:
            cut = packed_micro_batches([prompts[i] for i in items], [replies[i] for i in items],
                                       self.budget,
                                       one_prompt_each=self.sharded and collective)
        else:
            cut = micro_batches([len(prompts[i]) + len(replies[i]) for i in items], self.budget)
        return [[items[j] for j in c] for c in cut]

    def with_padding(self, chunks: list[list[int]]) -> list[list[int] | None]:
        """``chunks`` and, under FSDP, None padding passes up to the busiest rank's count."""
        return with_padding_passes(chunks, self.compute.world, self.sharded)

    def padding_rows(self) -> tuple[list[list[int]], list[list[int]]]:
        """A padding pass's one row: one pad token of prompt and of reply."""
        pad = self.compute.pad_id
        return [[pad]], [[pad]]

    def tokens(self, prompts: Sequence[Sequence[int]], replies: Sequence[Sequence[int]]) -> int:
        """Tokens a pass on these rows runs on: rows x (longest prompt + longest reply)
        padded; each distinct prompt once plus every reply, packed."""
        if self.packed:
            return sum(len(r) for r in replies) + sum(len(p) for p in {tuple(p)
                                                                       for p in prompts})
        return len(prompts) * (max(len(r) for r in replies) + max(len(p) for p in prompts))

    def loss_scale(self, model: Any) -> float:
        """What each loss is multiplied by so that gradients are summed over ranks (FSDP
        averages them)."""
        return loss_scale(model, self.compute.world)

    @contextlib.contextmanager
    def training(self, model: Any) -> Iterator[None]:
        """Around an update's passes: LoRA's cheaper passes where they apply, and the
        attention that runs packed passes split (prompt causal, replies under the mask),
        forward and backward."""
        with lora_update_passes(model, self.cfg, self.compute), gagpo_attention(model):
            yield
