"""The policy interface: prompts (or infos) in, replies with their tokens and log-probs out.

Every policy, a transformers model, an OpenAI-compatible server or a scripted expert, answers
a batch of :class:`Request` with one :class:`Reply` each. Trainers need the reply's token ids
and the log-probabilities the sampling policy gave them; policies that cannot know them
(scripted ones, servers that do not return log-probs) leave both lists empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class Request:
    """What a policy is asked for one environment at one step."""

    messages: list[dict[str, str]]
    """The chat prompt (``[{"role": "user", "content": ...}, ...]``)."""
    admissible_actions: list[str] = field(default_factory=list)
    """The environment's admissible actions (scoring and scripted policies choose among them)."""
    info: dict[str, Any] = field(default_factory=dict)
    """The environment's last info (scripted policies read ``expert_action`` from it)."""


@dataclass
class Reply:
    text: str
    """The full reply, e.g. ``<think>...</think><action>click[buy now]</action>``."""
    token_ids: list[int] = field(default_factory=list)
    """Token ids of the reply (generated or scored), empty if unknown."""
    logprobs: list[float] = field(default_factory=list)
    """log pi(token) of each reply token under the policy that produced it, empty if unknown."""
    prompt_token_ids: list[int] | None = None
    """The prompt's token ids, when the policy tokenised it."""


@runtime_checkable
class Policy(Protocol):
    def act(self, requests: list[Request]) -> list[Reply]:
        """One reply per request, in order."""
        ...
