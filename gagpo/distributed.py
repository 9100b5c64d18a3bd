"""Several processes under ``torchrun``: the process group, collectives, and FSDP sharding.

Two ways to spread training over ranks (``--parallel``):

* ``ddp``: every rank holds the whole model and optimizer; gradients are summed over ranks in
  one flat all-reduce after each minibatch (:func:`sync_gradients`).
* ``fsdp``: parameters, gradients and optimizer state are sharded over ranks with PyTorch's
  FSDP2 (``torch.distributed.fsdp.fully_shard``, one unit per decoder layer plus the root);
  gradients are reduce-scattered during backward.

Either way each rank plays its own share of the groups, so ranks run different numbers of
forward passes while generating. Under FSDP every forward is a collective, so rollouts run
inside :func:`full_parameters` (the layers are gathered once and stay gathered: no collective
until they are resharded), and the update gives every rank the same number of micro-batches
(:func:`rank_micro_batches`: padding passes).

What one rank computes with (its device, the autocast dtype, its rank among how many, the
pad token) travels through the trainer's functions as one :class:`Compute`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gagpo.batching import micro_batches

PARALLEL_MODES = ("ddp", "fsdp")


@dataclass(frozen=True)
class Compute:
    """Where and how one rank of a run computes: set once where the run starts
    (:func:`gagpo.trainer.build_run`), then handed whole to the functions that run the model's
    passes and the collectives (the update, the critic, the warm start, the evaluation)."""

    device: torch.device
    """The device the run's models are on (``cuda:<LOCAL_RANK>`` under torchrun on GPUs, else
    ``cpu``)."""
    amp: torch.dtype | None
    """The dtype the passes autocast to, ``torch.bfloat16`` where ``--bf16`` gives it
    (:func:`gagpo.agents.models.bf16_autocast`), or None: no autocast, float32 throughout."""
    rank: int
    """This process's rank, 0 to ``world - 1`` (0 outside torchrun)."""
    world: int
    """The number of ranks (1 outside torchrun): the count that collectives and the division
    of the groups among ranks use."""
    pad_id: int
    """The token id that pads a pass's rows (the tokenizer's pad token, else its EOS); padding
    passes are made of it too."""

    @classmethod
    def local(cls, pad_id: int = 0, amp: torch.dtype | None = None) -> Compute:
        """One process on the CPU: rank 0 of 1, autocast to ``amp`` (None: float32)."""
        return cls(device=torch.device("cpu"), amp=amp, rank=0, world=1, pad_id=pad_id)


_joined = False
"""Whether :func:`setup_distributed` created the process group (and so should leave it)."""


def setup_distributed() -> tuple[int, int, torch.device]:
    """``(rank, world_size, device)``; joins the process group when launched by torchrun."""
    global _joined
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        # torch's default of 2 threads here is 10-25x slower than 1 for small models.
        if "OMP_NUM_THREADS" not in os.environ:
            torch.set_num_threads(1)
    # Under torchrun (which sets WORLD_SIZE) the group exists even for one rank: FSDP needs it.
    if "WORLD_SIZE" in os.environ and not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo")
        _joined = True
    return rank, world, device


def shutdown_distributed() -> None:
    """Leave the process group that :func:`setup_distributed` created, once every rank is
    here; a group the caller made stays. A process that exits with its group alive can abort
    in the backend's threads ("terminate called without an active exception")."""
    global _joined
    if _joined and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
        _joined = False


def _reduce(x: float, world: int, op: Any) -> float:
    if world == 1:
        return x
    t = torch.tensor([x], dtype=torch.float64)
    if torch.distributed.get_backend() == "nccl":
        t = t.cuda()
    torch.distributed.all_reduce(t, op=op)
    return float(t[0])


def all_reduce_sum(x: float, world: int) -> float:
    return _reduce(x, world, torch.distributed.ReduceOp.SUM if world > 1 else None)


def all_reduce_max(x: float, world: int) -> float:
    return _reduce(x, world, torch.distributed.ReduceOp.MAX if world > 1 else None)


def gather_objects(obj: Any, world: int) -> list[Any]:
    """Every rank's ``obj``, in rank order (picklable objects)."""
    if world == 1:
        return [obj]
    out: list[Any] = [None] * world
    torch.distributed.all_gather_object(out, obj)
    return out


def sync_gradients(model: Any, params: list[torch.Tensor], world: int) -> None:
    """DDP: sum gradients over ranks (the loss is already divided by the global count) in one
    flat all-reduce. FSDP reduce-scattered them during backward already."""
    if world == 1 or is_sharded(model):
        return
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    torch.distributed.all_reduce(flat)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p).clone()
        offset += n


def grad_norm_clip(params: list[torch.Tensor], max_norm: float) -> float:
    """Clip the gradients' global norm to ``max_norm``; returns the norm before clipping (over
    all shards under FSDP)."""
    g = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return float(g.full_tensor() if hasattr(g, "full_tensor") else g)  # a DTensor under FSDP


def rank_micro_batches(items: list[int], lengths: list[int], budget: int, world: int,
                       sharded: bool) -> list[list[int] | None]:
    """``items`` cut into micro-batches of at most ``budget`` padded tokens. Under FSDP every
    forward and backward is a collective, so each rank gets as many micro-batches as the
    busiest one: the extra ones are None, run as zero-weight padding passes."""
    return with_padding_passes([[items[j] for j in c] for c in micro_batches(lengths, budget)],
                               world, sharded)


def with_padding_passes(chunks: list[list[int]], world: int, sharded: bool
                        ) -> list[list[int] | None]:
    """``chunks`` (one rank's micro-batches), followed under FSDP by None padding passes up to
    the busiest rank's count: every forward and backward is a collective there."""
    out: list[list[int] | None] = list(chunks)
    if sharded:
        out += [None] * (int(all_reduce_max(float(len(out)), world)) - len(out))
    return out


# ---------------------------------------------------------------------------------------------
# FSDP2.


def _fsdp_modules(model: Any) -> list[Any]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def is_sharded(model: Any) -> bool:
    return bool(_fsdp_modules(model))


def shard_model(model: Any) -> Any:
    """Shard ``model`` in place with FSDP2 (under torchrun: it needs the process group): one
    unit per transformer block (the classes a transformers model lists in
    ``_no_split_modules``), then the root for the rest.

    FSDP averages gradients over ranks; the trainer wants their sum (each rank's loss is
    already divided by the global count), so it multiplies losses by :func:`loss_scale`.
    (A divide factor of 1 would say so directly, but gloo lacks the reduction it needs.)
    """
    from torch.distributed.fsdp import fully_shard

    for block in fsdp_units(model):
        fully_shard(block)
    fully_shard(model)
    return model


def fsdp_units(model: Any) -> list[torch.nn.Module]:
    """The modules :func:`shard_model` shards one by one before the root: ``model``'s
    transformer blocks, the classes its ``_no_split_modules`` names (the base model's, under
    peft). Without them FSDP would gather the whole model at once, losing its memory saving."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft
    block_names = set(getattr(base, "_no_split_modules", None) or [])
    return [m for m in model.modules() if type(m).__name__ in block_names]


def loss_scale(model: Any, world: int) -> float:
    """What to multiply a loss by so that the gradients come out summed over ranks."""
    return float(world) if is_sharded(model) else 1.0


@contextlib.contextmanager
def full_parameters(model: Any) -> Iterator[None]:
    """Gather a sharded model's parameters for the duration of the block, so that each rank
    can run any number of forward passes (generation) without collectives. A no-op for a model
    that is not sharded."""
    modules = _fsdp_modules(model)
    if not modules:
        yield
        return
    for m in modules:
        m.set_reshard_after_forward(False)
        m.unshard()
    try:
        yield
    finally:
        for m in modules:
            m.reshard()
            m.set_reshard_after_forward(True)


def full_state(model: Any, trainable_only: bool = True, clone: bool = True
               ) -> dict[str, torch.Tensor]:
    """Full (unsharded) CPU tensors of the trained parameters: every parameter, or the LoRA
    adapters. A collective under FSDP: every rank must call it, and only rank 0 receives the
    tensors (the others get an empty dict). ``clone=False`` (for a write that reads them at
    once) hands out a whole CPU model's own tensors, detached, instead of copies."""
    names = {n for n, p in model.named_parameters() if p.requires_grad or not trainable_only}
    if is_sharded(model):
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
        )

        state = get_model_state_dict(
            model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        # cpu_offload gathers each tensor into a new CPU tensor already (except, perhaps, on
        # one CPU rank, where it may be the parameter itself): a snapshot clones, a write that
        # reads at once does not.
        return {n: (t.detach().clone() if clone else t.detach())
                for n, t in state.items() if n in names}
    return {n: (p.detach().cpu().clone() if clone else p.detach().cpu())
            for n, p in model.named_parameters() if n in names}


def parameters_sha256(model: Any) -> str:
    """The sha256 of the trained parameters (:func:`full_state`, read in place, in order):
    equal exactly when two models' trained parameters are the same bit for bit. A collective
    under FSDP, where rank 0's digest is the gathered model's."""
    hasher = hashlib.sha256()
    for t in full_state(model, clone=False).values():  # read in place: no copy of the model
        hasher.update(t.contiguous().numpy())
    return hasher.hexdigest()


def state_misfit(model: Any, state: dict[str, Any]) -> str | None:
    """Why ``state`` (from :func:`full_state`) cannot be ``model``'s trained parameters, or
    None: a trained parameter missing, a tensor of another shape, or a name the model lacks (a
    loose ``load_state_dict`` would skip the first and the last without a word)."""
    params = dict(model.named_parameters())
    expected = {n: tuple(p.shape) for n, p in params.items() if p.requires_grad}
    if missing := sorted(expected.keys() - state.keys()):
        return f"{len(missing)} trained parameters missing, e.g. {missing[0]}"
    if foreign := sorted(state.keys() - params.keys()):
        return f"{len(foreign)} tensors the model does not have, e.g. {foreign[0]}"
    for n in sorted(state):
        shape = tuple(getattr(state[n], "shape", ()))
        if shape != tuple(params[n].shape):
            return (f"parameters of another shape, e.g. {n} {shape} where the model has "
                    f"{tuple(params[n].shape)}")
    return None


def load_full_state(model: Any, state: dict[str, torch.Tensor]) -> None:
    """Load full tensors (from :func:`full_state`) into a sharded or whole model; a
    ``ValueError`` saying why if they do not fit a whole model (:func:`state_misfit`). Under
    FSDP rank 0's tensors are the ones loaded (the others may pass an empty dict)."""
    if is_sharded(model):
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
        )

        set_model_state_dict(model, state,
                             options=StateDictOptions(full_state_dict=True, strict=False,
                                                      broadcast_from_rank0=True))
    else:
        if (why := state_misfit(model, state)) is not None:
            raise ValueError(why)
        model.load_state_dict(state, strict=False)  # frozen parameters are not in it


def optimizer_state(model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's state; under FSDP full tensors keyed by parameter name (a collective),
    so that a run can resume on another number of ranks."""
    if is_sharded(model):
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_optimizer_state_dict,
        )

        return get_optimizer_state_dict(
            model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return optimizer.state_dict()


def load_optimizer_state(model: Any, optimizer: torch.optim.Optimizer,
                         state: dict[str, Any]) -> None:
    if is_sharded(model):
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_optimizer_state_dict,
        )

        set_optimizer_state_dict(model, optimizer, state,
                                 options=StateDictOptions(full_state_dict=True,
                                                          broadcast_from_rank0=True))
    else:
        optimizer.load_state_dict(state)


def save_pretrained(model: Any, tokenizer: Any, folder: Path, rank: int) -> None:
    """Write the final model the way transformers reads it (rank 0 writes; a collective under
    FSDP)."""
    state = full_state(model, trainable_only=False, clone=False) if is_sharded(model) else None
    kwargs: dict[str, Any] = {"state_dict": state} if state is not None else {}
    if hasattr(model, "peft_config"):
        # LoRA adapts no embedding (lora_targets), so peft need not look the base model up
        # (by the name the run was given: "tiny" would send it to the Hub) to find out; an
        # embedding trained in full (--lora-embeddings) is saved as modules_to_save anyway.
        kwargs["save_embedding_layers"] = False
    if rank == 0:
        model.save_pretrained(folder, **kwargs)
        tokenizer.save_pretrained(folder)
