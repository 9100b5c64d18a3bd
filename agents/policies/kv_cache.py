"""Decoding on a CPU without the two costs that dominate transformers' defaults.

Measured on SmolLM2-135M, 8-64 rows of 600-token prompts, 2-core AVX512-BF16 CPU
(``benchmarks/rollout_throughput.py`` has the end-to-end figures):

* :func:`new_cache` (:class:`ReservedLayer`). ``DynamicCache`` appends each new token's keys
  and values with ``torch.cat``, which copies the whole cache at every step: 37% of a decode
  step at 16 rows, and the reason a batch of 64 rows decoded no faster than 8. These layers
  write into buffers sized once for the prompt plus the reply (``reserve``) and hand attention
  a view; the cached values are bit for bit those ``DynamicCache`` holds.
* :func:`gagpo_attention`. Under bf16 autocast on a CPU, SDPA casts the whole cache to bf16
  at every step, and PyTorch's CPU flash kernel is slow in bf16 for one query token: attention
  was 60% of a bf16 decode step, which took twice the float32 one. While it is active, one
  query token on a CPU attends with autocast off, in float32 under autocast (the cache keeps
  float32 keys and values, so nothing is cast); the weights' products stay in bf16, where they
  are twice as fast, and prompts (many query tokens) and training passes still run SDPA under
  autocast. In every precision, the query heads that share a key/value head attend together,
  so the cache is never repeated per query head: transformers 5.19 repeats it at every step
  (5.24 no longer does), and on it the trainer's decoding of one benchmark rollout took 295 s
  with the repeat against 125 s without (float32, AVX2 CPU, 2 threads;
  ``benchmarks/results/rollout_throughput/vllm``). The update runs under it too: a training
  pass of one prompt and several packed replies (:data:`PACKED_PROMPT`) attends split, the
  prompt's rows causally with no mask and only the replies' rows under it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)

try:  # transformers >= 4.56: caches made of per-layer objects
    from transformers.cache_utils import Cache, DynamicLayer
except ImportError:  # older: DynamicCache as it is
    Cache = DynamicLayer = None  # type: ignore[assignment,misc]

ATTENTION = "gagpo_sdpa"
"""The attention implementation :func:`gagpo_attention` registers and switches to."""

PACKED_PROMPT = "packed_prompt_length"
"""The forward-pass keyword that tells :data:`ATTENTION` a sequence is one prompt followed by
packed replies (:func:`gagpo.logprobs.pack_replies`): the prompt's length."""


if DynamicLayer is not None:

    class ReservedLayer(DynamicLayer):  # type: ignore[misc,valid-type]
        """A ``DynamicLayer`` that grows into preallocated buffers instead of concatenating.

        ``keys``/``values`` are views of the first ``length`` positions of ``_keys``/``_values``
        (batch, heads, capacity, head_dim); a write past the capacity reallocates with room for
        ``reserve`` more positions. Both are kept in the wider of the two dtypes first given:
        under bf16 autocast the keys come out of the rotary embedding in float32 and the values
        in bf16, and :func:`gagpo_attention` wants both in float32 (bf16 values widen exactly).
        """

        def __init__(self, reserve: int = 0) -> None:
            super().__init__()
            self.reserve = reserve

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
                   **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                self.length = 0
                dtype = torch.promote_types(key_states.dtype, value_states.dtype)
                self._keys = self._values = key_states[:, :, :0].to(dtype)
            start, end = self.length, self.length + key_states.shape[-2]
            if end > self._keys.shape[-2]:
                self._keys = self._grow(self._keys, end + self.reserve)
                self._values = self._grow(self._values, end + self.reserve)
            self._keys[:, :, start:end] = key_states
            self._values[:, :, start:end] = value_states
            self.length = end
            self._expose()
            return self.keys, self.values

        def _grow(self, buffer: torch.Tensor, capacity: int) -> torch.Tensor:
            shape = list(buffer.shape)
            shape[-2] = capacity
            grown = buffer.new_empty(shape)
            grown[:, :, :self.length] = buffer[:, :, :self.length]
            return grown

        def _expose(self) -> None:
            self.keys = self._keys[:, :, :self.length]
            self.values = self._values[:, :, :self.length]

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            if self.is_initialized:
                self._keys, self._values = self._keys[indices], self._values[indices]
                self._expose()

        def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
            self.batch_select_indices(beam_idx.to(self._keys.device))

        def batch_repeat_interleave(self, repeats: int) -> None:
            if self.is_initialized:
                self._keys = self._keys.repeat_interleave(repeats, dim=0)
                self._values = self._values.repeat_interleave(repeats, dim=0)
                self._expose()

        def crop(self, tokens_to_remove: int) -> None:
            if tokens_to_remove > 0:
                raise ValueError("crop takes a negative number of tokens to remove")
            if self.is_initialized and tokens_to_remove:
                self.length = max(0, self.length + tokens_to_remove)
                self._expose()

        def reset(self) -> None:
            self.length = 0
            super().reset()


def new_cache(reserve: int) -> Any:
    """An empty cache whose layers keep room for ``reserve`` positions past what they are first
    given (the reply), or None where transformers is too old for one (the model then makes its
    own ``DynamicCache``)."""
    if DynamicLayer is None:
        return None
    return Cache(layer_class_to_replicate=functools.partial(ReservedLayer, reserve))


def forward_parameters(model: Any) -> Mapping[str, inspect.Parameter]:
    """The arguments ``model``'s forward pass takes, read on the model that runs it: peft's
    ``PeftModel`` takes ``*args, **kwargs`` and hands them to its base model, so its own
    signature names none (read there, a LoRA run's rollouts computed the whole vocabulary's
    logits at every prompt position: a 700-token prefill of SmolLM2-135M took 10% longer)."""
    get_base_model = getattr(model, "get_base_model", None)
    runs = get_base_model() if callable(get_base_model) else model
    return inspect.signature(runs.forward).parameters


def cache_keyword(model: Any) -> str:
    """The name under which ``model``'s forward pass takes a cache: transformers 5 renamed
    ``past_key_values`` to ``cache`` (and warns about the old name)."""
    return "cache" if "cache" in forward_parameters(model) else "past_key_values"


def returned_cache(output: Any) -> Any:
    """The cache a forward pass returned, under either name (see :func:`cache_keyword`; reading
    the old one warns), or None."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else getattr(output, "past_key_values", None)


def _gagpo_sdpa(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                value: torch.Tensor, attention_mask: torch.Tensor | None,
                **kwargs: Any) -> tuple[torch.Tensor, None]:
    """SDPA; for one query token on a CPU, SDPA over the key/value heads (no repeated cache), in
    float32 with autocast off where autocast is on (GPUs have fast bf16 kernels for it). Given
    :data:`PACKED_PROMPT` (a prompt of that length, then replies that each see it and
    themselves), the prompt's rows attend causally with no mask, so the flash kernel skips the
    blocks above the diagonal, and only the replies' rows attend under the mask (a pass of 4
    replies after a 1,000-token prompt: 47 ms a layer forward and backward against 63)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    prompt = kwargs.pop(PACKED_PROMPT, None)
    if (prompt is not None and attention_mask is not None
            and query.shape[2] == key.shape[2] > prompt > 0):
        head, _ = sdpa_attention_forward(module, query[:, :, :prompt], key[:, :, :prompt],
                                         value[:, :, :prompt], None, **kwargs)
        tail, _ = sdpa_attention_forward(module, query[:, :, prompt:], key, value,
                                         attention_mask[:, :, prompt:], **kwargs)
        return torch.cat([head, tail], dim=1), None  # (batch, positions, heads, dim)
    device = query.device.type
    plain = not kwargs.get("softcap") and kwargs.get("position_bias") is None \
        and not kwargs.get("dropout")
    if query.shape[2] == 1 and device == "cpu" and plain:
        # The query heads that share a key/value head attend together, as that head's
        # "positions": no copy of the cache per query head (older transformers repeat it).
        batch, heads, _, dim = query.shape
        kv_heads = key.shape[1]
        dtype = torch.float32 if torch.is_autocast_enabled(device) else query.dtype
        q = query.to(dtype).reshape(batch, kv_heads, heads // kv_heads, dim)
        mask = None if attention_mask is None else attention_mask[:, :, -1:, : key.shape[-2]]
        with torch.autocast(device, enabled=False):
            out = F.scaled_dot_product_attention(q, key.to(dtype), value.to(dtype),
                                                 attn_mask=mask, scale=kwargs.get("scaling"))
        return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous(), None
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


_registered = False


def _register() -> bool:
    global _registered
    if not _registered:
        try:
            from transformers import AttentionInterface
            from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
        except ImportError:
            return False
        AttentionInterface.register(ATTENTION, _gagpo_sdpa)
        ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION, sdpa_mask)
        _registered = True
    return True


@contextlib.contextmanager
def gagpo_attention(model: Any) -> Iterator[bool]:
    """Within the block, ``model`` (an SDPA model) attends with :func:`_gagpo_sdpa`: in
    float32 when it decodes one token under autocast, and split where a forward pass is given
    :data:`PACKED_PROMPT`; any other model is left as it is. Yields whether it switched (only
    then may a pass be given :data:`PACKED_PROMPT`)."""
    config = getattr(model, "config", None)
    current = getattr(config, "_attn_implementation", None)
    if current != "sdpa" or not hasattr(model, "set_attn_implementation") or not _register():
        yield False
        return
    try:
        model.set_attn_implementation(ATTENTION)
    except (ValueError, ImportError) as e:  # a model class that refuses custom attention
        log.debug("decoding with SDPA: %s", e)
        yield False
        return
    try:
        yield True
    finally:
        model.set_attn_implementation(current)
