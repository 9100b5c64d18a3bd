"""The policy interface: prompts (or infos) in, replies with their tokens and log-probs out.

Every policy, a transformers model, an OpenAI-compatible server or a scripted expert, answers
a batch of :class:`Request` with one :class:`Reply` each. Trainers need the reply's token ids
and the log-probabilities the sampling policy gave them; policies that cannot know them
(scripted ones, servers that do not return log-probs) leave both lists empty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

Messages = list[dict[str, str]]

MODES: tuple[str, ...] = ("generate", "score")
"""How a model policy answers: generate a reply, or score the admissible actions and pick one."""


class Request:
    """What a policy is asked for one environment at one step.

    Args:
        messages: the chat prompt (``[{"role": "user", "content": ...}, ...]``), or a function
            that builds it. A built prompt is made on first reading of :attr:`messages` and
            kept: policies that never read it (scripted ones) never pay for it.
        admissible_actions: the environment's admissible actions (scoring and scripted
            policies choose among them).
        info: the environment's last info (scripted policies read ``expert_action`` from it).
    """

    __slots__ = ("_messages", "_build", "admissible_actions", "info")

    def __init__(
        self,
        messages: Messages | Callable[[], Messages],
        admissible_actions: list[str] | None = None,
        info: dict[str, Any] | None = None,
    ) -> None:
        self._messages, self._build = (None, messages) if callable(messages) else (messages, None)
        self.admissible_actions = [] if admissible_actions is None else admissible_actions
        self.info = {} if info is None else info

    @property
    def messages(self) -> Messages:
        """The chat prompt."""
        if self._messages is None:
            self._messages, self._build = self._build(), None
        return self._messages

    def __repr__(self) -> str:
        return (f"Request(messages={self.messages!r}, "
                f"admissible_actions={self.admissible_actions!r}, info={self.info!r})")


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
    """What every policy does (gagpo's policies subclass it, and so inherit its defaults)."""

    needs_expert_action: ClassVar[bool] = False
    """Whether the policy reads ``info["expert_action"]``: whoever makes its environments asks
    them for it (``request_infos=["expert_action"]``)."""

    required_env_kwargs: ClassVar[dict[str, Any]] = {}
    """Arguments the policy's environments must be made with (e.g. an observation mode that
    shows what the policy reads): :func:`gagpo.agents.policies.factory.env_kwargs_for` adds
    them, and refuses other values."""

    def act(self, requests: list[Request]) -> list[Reply]:
        """One reply per request, in order."""
        ...
