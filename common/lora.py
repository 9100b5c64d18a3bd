"""LoRA adapters folded into the weights where nothing trains (rollouts and evaluations), and
an update's passes without the casts that change no value (:func:`lora_passes_in`).

An unmerged LoRA layer runs three products (the frozen weight, then A and B) and a few more
kernel calls for every linear layer of every decoding step, and under autocast its frozen
weight is cast again at every call; on a CPU a rollout of SmolLM2-135M took 1.7x as long as
the same rollout without adapters (``benchmarks/results/iteration_time/``). Folded, each layer
runs one product of ``W + scale * B @ A``: the same function up to rounding.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


def _lora_layers(model: Any) -> list[Any]:
    # peft's models and transformers' models with loaded adapters carry peft_config: any other
    # model is not searched, and peft not imported, on every load and rollout.
    if not hasattr(model, "peft_config"):
        return []
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:  # no peft: no adapters
        return []
    return [m for m in model.modules() if isinstance(m, LoraLayer)]


@contextlib.contextmanager
def folded_for_sampling(model: Any) -> Iterator[None]:
    """Inside, ``model``'s LoRA layers run their base layer alone, on a new tensor holding the
    frozen weight plus the adapters' product; on exit the frozen weight comes back, the very
    tensor it was (no merge and unmerge, whose rounding would drift the frozen weights over a
    run). A model without adapters is left as it is. For no-gradient passes only: inside,
    every weight requires grad (the folded copies, and the weights LoRA froze outside its
    layers, frozen again on exit), so that autocast caches their casts."""
    layers = [m for m in _lora_layers(model) if not m.merged and not m.disable_adapters]
    if not layers:
        yield
        return
    swapped = []
    # The other frozen parameters too, for the same reason: SmolLM2's tied embedding is its
    # output layer, the largest matrix of all (28M of 135M weights), cast at every decoding
    # step otherwise (20 decoding steps of 16 rows took 1.2-1.7x as long with it frozen).
    thawed = [p for p in model.parameters() if not p.requires_grad]
    try:
        for p in thawed:
            p.requires_grad_(True)
        with torch.no_grad():
            for layer in layers:
                base = layer.get_base_layer()
                weight = base.weight
                folded = weight.detach().clone()
                for name in layer.active_adapters:
                    if name in layer.lora_A:
                        folded += layer.get_delta_weight(name).to(folded.dtype)
                swapped.append((layer, base, weight))
                # requires_grad: autocast keeps one low-precision copy of such a leaf for the
                # whole rollout; a frozen weight is cast again at every call (every decoding
                # step: 1.6x slower decoding of SmolLM2-135M on a CPU). No graph is built
                # under no_grad.
                base.weight = torch.nn.Parameter(folded, requires_grad=True)
                # The base layer alone, on the folded weight (the flag itself: enable_adapters
                # would also change the adapters' requires_grad).
                layer._disable_adapters = True
        yield
    finally:
        for layer, base, weight in swapped:
            base.weight = weight
            layer._disable_adapters = False
        for p in thawed:
            p.requires_grad_(False)


@contextlib.contextmanager
def lora_passes_in(model: Any, dtype: torch.dtype) -> Iterator[None]:
    """Inside, the passes of ``model`` (LoRA, under autocast to ``dtype``: a LoRA update's)
    skip two kinds of cast that change no value; on exit the model is as it was, its frozen
    weights the very tensors they were.

    - Autocast caches its cast of a leaf that requires grad, not of a frozen one: every pass
      cast every frozen weight again. Inside, the frozen weights of the LoRA layers are held in
      ``dtype``, as autocast would have cast them (round to nearest even): 2 bytes a weight
      for the duration.
    - peft casts each LoRA layer's input to its adapters' dtype (float32) before autocast casts
      it back to ``dtype`` for their product: a round trip for the inputs that are already in
      ``dtype`` (the attention's output, the MLP's product), in the backward pass too. Inside,
      peft's cast is off (``peft.helpers.disable_input_dtype_casting``; an older peft
      without it keeps its casts).

    So the passes' log-probs and gradients are the same bit for bit, with fewer copies. A model
    without adapters is left as it is."""
    layers = _lora_layers(model)
    if not layers:
        yield
        return
    try:
        from peft.helpers import disable_input_dtype_casting
    except ImportError:  # an older peft keeps its casts
        disable_input_dtype_casting = None
    swapped = []
    try:
        for layer in layers:
            base = layer.get_base_layer()
            weight = base.weight
            if weight.requires_grad or weight.dtype == dtype:
                continue
            swapped.append((base, weight))
            base.weight = torch.nn.Parameter(weight.detach().to(dtype), requires_grad=False)
        with (disable_input_dtype_casting(model) if disable_input_dtype_casting
              else contextlib.nullcontext()):
            yield
    finally:
        for base, weight in swapped:
            base.weight = weight


def merge_loaded_adapters(model: Any) -> Any:
    """Fold for good the LoRA adapters that transformers attached when it loaded an adapter
    folder (a LoRA run's ``final/``), and put each adapted layer's own layer back in its place:
    a model loaded to play, not to train, runs at the speed of one without adapters, and is one
    (so that a LoRA run may start from it, or another folder's adapters load over it).
    Returns ``model``."""
    layers = _lora_layers(model)
    if not layers:
        return model
    adapted = {id(layer) for layer in layers}
    for name, layer in list(model.named_modules()):
        if id(layer) in adapted:
            layer.merge()
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent), child, layer.get_base_layer())
    del model.peft_config  # what transformers' delete_adapter does once none is left
    model._hf_peft_config_loaded = False
    # Every weight as a model loaded without adapters has it (peft froze all but the
    # adapters): autocast then casts each once per region, not at every call (frozen
    # weights are cast again each time; the tied embedding and output layer included).
    model.requires_grad_(True)
    return model
