"""LoRA adapters folded into the weights where nothing trains (rollouts and evaluations), an
update's passes without the casts that change no value (:func:`lora_passes_in`, under
autocast), and in float32 an update whose adapted layers each run as one folded product with
the adapters' gradients computed by hand (:func:`folded_lora_update`).

An unmerged LoRA layer runs three products (the frozen weight, then A and B) and a few more
kernel calls for every linear layer of every decoding step, and under autocast its frozen
weight is cast again at every call; on a CPU a rollout of SmolLM2-135M took 1.7x as long as
the same rollout without adapters (``studies/cheaper_iteration/results/iteration_time/``).
Folded, each layer runs one product of ``W + scale * B @ A``: the same function up to rounding.
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
    (so that a LoRA run may start from it, or another folder's adapters load over it). A
    module the folder trained in full (peft's ``modules_to_save``: ``--lora-embeddings``)
    takes its trained copy's place, and tied embeddings are tied again. Returns ``model``."""
    layers = _lora_layers(model)
    if not layers:
        return model
    from peft.utils.other import AuxiliaryTrainingWrapper

    adapted, unwrapped = {id(layer) for layer in layers}, False
    for name, layer in list(model.named_modules()):
        parent, _, child = name.rpartition(".")
        if id(layer) in adapted:
            layer.merge()
            setattr(model.get_submodule(parent), child, layer.get_base_layer())
        elif isinstance(layer, AuxiliaryTrainingWrapper):
            # A module trained in full beside the adapters (--lora-embeddings): its trained
            # copy in its place.
            setattr(model.get_submodule(parent), child,
                    layer.unload_and_optionally_merge_module(merge=True, safe_merge=False,
                                                             adapter_names=None))
            unwrapped = True
    if unwrapped and getattr(model.config, "tie_word_embeddings", False):
        model.tie_weights()  # the trained embedding and its output layer: one matrix again
    del model.peft_config  # what transformers' delete_adapter does once none is left
    model._hf_peft_config_loaded = False
    # Every weight as a model loaded without adapters has it (peft froze all but the
    # adapters): autocast then casts each once per region, not at every call (frozen
    # weights are cast again each time; the tied embedding and output layer included).
    model.requires_grad_(True)
    return model


class _FoldedLoraProduct(torch.autograd.Function):
    """``x @ (W + s B A)^T + bias`` whose gradient reaches the adapters ``A`` and ``B`` as an
    unmerged layer's does: ``dA = s (g B)^T x``, ``dB = s g^T (x A^T)``, ``dx = g (W + s B A)``.
    The folded weight is a constant of the pass (the adapters do not change before the
    optimizer's step); the input's gradient is one product with it, where an unmerged layer
    runs three and adds two."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, folded: torch.Tensor, bias: torch.Tensor | None,
                lora_a: torch.Tensor, lora_b: torch.Tensor, scale: float) -> torch.Tensor:
        down = x @ lora_a.t()  # x A^T, which B's gradient reads
        ctx.save_for_backward(x, down, folded, lora_a, lora_b)
        ctx.scale = scale
        return torch.nn.functional.linear(x, folded, bias)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, down, folded, lora_a, lora_b = ctx.saved_tensors
        flat_grad = grad.reshape(-1, grad.shape[-1])
        grad_down = flat_grad @ lora_b  # g B
        grad_a = (grad_down.t() @ x.reshape(-1, x.shape[-1])) * ctx.scale
        grad_b = (flat_grad.t() @ down.reshape(-1, down.shape[-1])) * ctx.scale
        # No input gradient where nothing below needs one (the first layer's projections
        # read the frozen embeddings), as autograd skips it for peft's frozen product.
        grad_x = grad @ folded if ctx.needs_input_grad[0] else None
        return grad_x, None, None, grad_a, grad_b, None


def _folds(layer: Any) -> str | None:
    """The one adapter of ``layer`` that :func:`folded_lora_update` may fold, None if the
    layer must run as peft runs it (adapters off or merged, several adapters, dropout, a
    variant such as DoRA, a base layer other than ``nn.Linear``)."""
    names = [n for n in layer.active_adapters if n in layer.lora_A]
    if layer.disable_adapters or layer.merged or len(names) != 1:
        return None
    name = names[0]
    if name in getattr(layer, "lora_variant", {}) or layer.use_dora.get(name, False):
        return None
    if not isinstance(layer.lora_dropout[name], torch.nn.Identity):
        return None
    if type(layer.get_base_layer()) is not torch.nn.Linear:
        return None
    return name


class _Fold:
    """A LoRA layer's folded weight ``W + s B A``, folded again whenever an optimizer has
    stepped the adapters in place since (their version counters moved)."""

    def __init__(self, layer: Any, name: str) -> None:
        base = layer.get_base_layer()
        self.weight, self.bias = base.weight, base.bias
        self.lora_a, self.lora_b = layer.lora_A[name].weight, layer.lora_B[name].weight
        self.scale = float(layer.scaling[name])
        self.versions: tuple[int, int] | None = None  # none yet: fold at the first pass
        self.folded = torch.empty(0)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        versions = (self.lora_a._version, self.lora_b._version)
        if versions != self.versions:
            with torch.no_grad():
                self.folded = torch.addmm(self.weight, self.lora_b, self.lora_a,
                                          alpha=self.scale)
            self.versions = versions
        return _FoldedLoraProduct.apply(x, self.folded, self.bias, self.lora_a, self.lora_b,
                                        self.scale)


@contextlib.contextmanager
def folded_lora_update(model: Any) -> Iterator[None]:
    """Inside, each plain LoRA layer of ``model`` (one adapter, no dropout, an ``nn.Linear``
    base) runs as one product with ``W + s B A`` and gives the adapters their exact gradients
    (:class:`_FoldedLoraProduct`): the same log-probs and gradients up to floating-point
    rounding, without peft's two extra products, scaling and sum per layer and pass, and two
    of their backward products. The fold is made again after each optimizer step (the
    adapters' version counters say when). Holds a copy of every adapted weight. In float32:
    under autocast, and with adapters disabled (a KL reference pass), layers run as peft runs
    them. On exit every layer is peft's again (nested, the outer context's layers stay folded
    until it exits). A model without adapters is left as it is."""
    patched = []
    try:
        for layer in _lora_layers(model):
            name = _folds(layer)
            if name is None or "forward" in vars(layer):  # folded already (an outer context)
                continue
            fold, peft_forward = _Fold(layer, name), layer.forward

            def forward(x: torch.Tensor, *args: Any, _layer: Any = layer, _fold: _Fold = fold,
                        _peft: Any = peft_forward, **kwargs: Any) -> torch.Tensor:
                if args or kwargs or _layer.disable_adapters or \
                        torch.is_autocast_enabled(x.device.type):
                    return _peft(x, *args, **kwargs)
                return _fold(x)

            layer.forward = forward  # an instance attribute: nn.Module calls it
            patched.append(layer)
        yield
    finally:
        for layer in patched:
            del layer.forward
