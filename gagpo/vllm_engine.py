"""``--generation vllm``: a vLLM engine samples the training rollouts, and the trainer keeps it
in step with the trained model.

Before every rollout the trainer pushes its current weights into the engine
(:func:`sync_engine`: LoRA adapters merged in, FSDP shards gathered), and the held-out
evaluation borrows the engine at its own temperature and seed (:func:`engine_settings`)
without moving the training stream. The engine's log-probs come from other kernels than the
trainer's, so the trainer recomputes them before the update and logs the gap.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from gagpo.distributed import full_parameters
from gagpo.train_config import TrainConfig


def make_vllm_engine(cfg: TrainConfig, tokenizer: Any, *, seed: int,
                     amp: torch.dtype | None = None) -> Any:
    """The vLLM policy that samples training rollouts (``--generation vllm``).

    The engine computes in the trainer's precision (bf16 under autocast, else float32), unless
    ``--vllm-kwargs`` names a ``dtype``: vLLM's own ``"auto"`` would run a float32 checkpoint
    in half precision, and every sampled log-prob would then drift from the trainer's.
    """
    if cfg.mode != "generate":
        raise ValueError("--generation vllm samples replies: it needs --mode generate")
    from gagpo.agents.policies.factory import PolicySpec, build_policy

    spec = PolicySpec(f"vllm:{cfg.model}", temperature=cfg.temperature, top_p=cfg.top_p,
                      max_new_tokens=cfg.max_new_tokens, seed=seed)
    kwargs = {"dtype": amp or torch.float32, **cfg.vllm_kwargs}
    # Replies stop at </action> (the factory's default, which --vllm-kwargs may override).
    return build_policy(spec, tokenizer=tokenizer,
                        gpu_memory_utilization=cfg.vllm_gpu_memory, **kwargs)


@contextlib.contextmanager
def merged_weights(model: Any) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """The trained model's weights under their transformers names, LoRA adapters merged in
    (and taken out again on exit), FSDP shards gathered: what an inference engine loads."""
    with full_parameters(model), torch.no_grad():
        if not hasattr(model, "merge_adapter"):
            yield list(model.named_parameters())
            return
        model.merge_adapter()
        try:
            yield [(name.replace(".base_layer", ""), p)
                   for name, p in model.get_base_model().named_parameters() if "lora_" not in name]
        finally:
            model.unmerge_adapter()


def sync_engine(engine: Any, model: Any) -> None:
    """Push the trained model's current weights into the rollout engine."""
    with merged_weights(model) as weights:
        engine.load_weights(weights)


@contextlib.contextmanager
def engine_settings(engine: Any, temperature: float, seed: int) -> Iterator[Any]:
    """Evaluate with the rollout engine without moving its random stream."""
    saved = engine.temperature, engine.seed, engine.requests_made
    engine.temperature, engine.seed, engine.requests_made = temperature, seed, 0
    try:
        yield engine
    finally:
        engine.temperature, engine.seed, engine.requests_made = saved
