"""Policies from a spec: the one place that knows every policy's name and constructor.

``gagpo eval --policy ...``, the trainer's policy, its warm-start teacher and its vLLM rollout
engine are all built here. The constructors are imported on use, so that naming a scripted
policy never imports torch or vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gagpo.agents.policies.base import Policy
from gagpo.common.numbers import check_number


@dataclass
class PolicySpec:
    """What ``--policy`` names and how it samples.

    ``name``: ``expert`` (goal-aware, WebShop and ALFWorld), ``rule`` (WebShop's rule baseline:
    search the instruction, open the first result, buy), ``rule_options`` (the same, also
    choosing the options the instruction names), ``random``, ``openai:<base url>`` (with
    ``server_model``, the served model's name), ``vllm:<model>`` (a vLLM engine in this
    process), or a model run by transformers: ``tiny``, ``smollm2-135m``, a Hugging Face id
    or a local path.
    """

    name: str
    mode: str = "generate"
    temperature: float = 0.4
    top_p: float = 1.0
    max_new_tokens: int = 256
    server_model: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        check_number("temperature", self.temperature, ">= 0")
        check_number("top_p", self.top_p, "in (0, 1]")
        check_number("max_new_tokens", self.max_new_tokens, ">= 1", integer=True)
        check_number("seed", self.seed, integer=True)


def env_kwargs_for(policy: Policy, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``env_kwargs`` with what ``policy`` needs from its environments: its
    :attr:`~Policy.required_env_kwargs`, and ``expert_action`` infos where it reads them.

    Raises:
        ValueError: ``env_kwargs`` sets a required argument to another value.
    """
    kw = dict(env_kwargs)
    for key, value in policy.required_env_kwargs.items():
        if kw.setdefault(key, value) != value:
            raise ValueError(f"{type(policy).__name__} needs its environments made with "
                             f"{key}={value!r}, not {kw[key]!r}")
    if policy.needs_expert_action:
        kw["request_infos"] = ["expert_action"]
    return kw


SCRIPTED = ("expert", "rule", "rule_options", "random")
SAMPLING = {"temperature", "top_p", "max_new_tokens", "seed"}
"""What a spec sets for a vLLM engine, which its further arguments may not set again."""


def runs_transformers(spec: PolicySpec) -> bool:
    """Whether ``spec`` names a model that transformers runs in this process."""
    return spec.name not in SCRIPTED and not spec.name.startswith(("openai:", "vllm:"))


def build_policy(spec: PolicySpec, *, model: Any = None, tokenizer: Any = None,
                 **options: Any) -> Policy:
    """The policy ``spec`` names.

    Args:
        model, tokenizer: a transformers model (and its tokenizer) already in memory, for a
            model-backed spec (the trainer's); None loads ``spec.name``.
        options: further keyword arguments of the policy's constructor (e.g. the trainer's
            ``batch_size``, ``stop``, ``length_normalize``).

    Raises:
        ValueError: an ``openai:`` spec without ``server_model``, or a ``vllm:`` spec not in
            generate mode or given options that its spec sets (:data:`SAMPLING`).
    """
    if spec.name == "expert":
        from gagpo.agents.policies.scripted import ExpertPolicy

        return ExpertPolicy(**options)
    if spec.name in ("rule", "rule_options"):
        from gagpo.agents.policies.scripted import RuleBaselinePolicy

        return RuleBaselinePolicy(options=spec.name == "rule_options", **options)
    if spec.name == "random":
        from gagpo.agents.policies.scripted import RandomPolicy

        return RandomPolicy(seed=spec.seed, **options)
    if spec.name.startswith("openai:"):
        from gagpo.agents.policies.openai_compat import OpenAICompatiblePolicy

        if not spec.server_model:
            raise ValueError("an openai: policy needs --server-model (the served model's name)")
        return OpenAICompatiblePolicy(
            spec.name.removeprefix("openai:"), spec.server_model, temperature=spec.temperature,
            top_p=spec.top_p, max_tokens=spec.max_new_tokens, **options,
        )
    # A ReAct reply is over at its action: what follows is never read, so a model (ours, or a
    # vLLM engine's) stops there.
    options.setdefault("stop", ("</action>",))
    if spec.name.startswith("vllm:"):
        from gagpo.agents.policies.vllm import VLLMPolicy

        if spec.mode != "generate":
            raise ValueError("a vllm: policy generates replies: it needs --mode generate")
        taken = sorted(SAMPLING & options.keys())
        if taken:
            raise ValueError(f"engine arguments {taken} are the policy's own settings: set "
                             "them with their flags (--temperature, --top-p, "
                             "--max-new-tokens, --seed)")
        return VLLMPolicy(spec.name.removeprefix("vllm:"), tokenizer,
                          temperature=spec.temperature, top_p=spec.top_p,
                          max_new_tokens=spec.max_new_tokens, seed=spec.seed, **options)
    from gagpo.agents.policies.hf import TransformersPolicy

    if model is None:
        from gagpo.agents.models import load_model

        model, tokenizer = load_model(spec.name)
    return TransformersPolicy(
        model, tokenizer, mode=spec.mode, temperature=spec.temperature, top_p=spec.top_p,
        max_new_tokens=spec.max_new_tokens, seed=spec.seed, **options,
    )
