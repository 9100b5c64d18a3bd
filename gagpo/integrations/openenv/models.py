"""The wire of ``gagpo serve env``: OpenEnv's typed action, observation and state of a gagpo
environment (all a client needs besides :mod:`~gagpo.integrations.openenv.client`; no
environment code).
"""

from __future__ import annotations

from typing import Any

try:
    from openenv.core.env_server.types import Action, Observation, State
    from pydantic import Field
except ImportError as e:  # the extra is not installed
    raise ImportError(
        f"OpenEnv's client and models need the openenv extra: pip install 'gagpo[openenv]' ({e})"
    ) from e


class TextAction(Action):
    """One text command of the environment (what ``env.step`` takes)."""

    command: str = Field(..., description="the command, e.g. 'search[red shoes]' or "
                                          "'go to fridge 1'")


class TextObservation(Observation):
    """What ``reset`` and ``step`` return: the text and the env contract's infos."""

    text: str = Field(..., description="the observation text")
    admissible_actions: list[str] = Field(default_factory=list,
                                          description="actions that do something now")
    won: bool = Field(default=False, description="whether the task is accomplished")
    score: float = Field(default=0.0, description="the environment's own score of the episode")
    state_key: str = Field(default="", description="equal for two copies of one task exactly "
                                                   "when their true states are equal")
    action_valid: bool = Field(default=True, description="whether the last action was valid")
    task_id: str = Field(default="", description="stable id of the task")
    task_type: str = Field(default="", description="the task's kind")
    instruction: str = Field(default="", description="the task's instruction")
    terminated: bool = Field(default=False, description="the env ended the episode")
    truncated: bool = Field(default=False, description="the step limit ended the episode")
    info: dict[str, Any] = Field(default_factory=dict,
                                 description="the environment's own info keys")


class TextState(State):
    """The session's episode and what the environment declares."""

    env_id: str = ""
    task_id: str | None = None
    split: str = ""
    splits: list[str] = Field(default_factory=list)
    max_steps: int | None = None
    report_label: str = ""
    max_action_chars: int = 0


__all__ = ["TextAction", "TextObservation", "TextState"]
