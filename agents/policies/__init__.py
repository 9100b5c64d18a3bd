"""Policies: one interface (:class:`~gagpo.agents.policies.base.Policy`), several back ends.

``TransformersPolicy`` (gagpo.agents.policies.hf), ``VLLMPolicy`` (gagpo.agents.policies.vllm),
``OpenAICompatiblePolicy`` (gagpo.agents.policies.openai_compat), ``ExpertPolicy`` and
``RandomPolicy`` (gagpo.agents.policies.scripted). They are imported on first use, so that importing
this package does not import torch. ``build_policy`` (gagpo.agents.policies.factory) builds the
one a ``PolicySpec`` names.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from gagpo.agents.policies.base import Policy, Reply, Request

_LAZY = {
    "TransformersPolicy": "gagpo.agents.policies.hf",
    "VLLMPolicy": "gagpo.agents.policies.vllm",
    "OpenAICompatiblePolicy": "gagpo.agents.policies.openai_compat",
    "ExpertPolicy": "gagpo.agents.policies.scripted",
    "RandomPolicy": "gagpo.agents.policies.scripted",
    "PolicySpec": "gagpo.agents.policies.factory",
    "build_policy": "gagpo.agents.policies.factory",
}

__all__ = ["Policy", "Reply", "Request", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
