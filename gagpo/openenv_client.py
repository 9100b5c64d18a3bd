"""The wire of ``gagpo serve env``: OpenEnv's typed action, observation and state of a gagpo
environment, and :class:`GagpoEnvClient`, OpenEnv's ``EnvClient`` for them.

The models are all a client needs (no environment code): ``pip install 'gagpo[openenv]'`` on
the trainer's side, then::

    from gagpo.openenv_client import GagpoEnvClient

    with GagpoEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(task=0, seed=0)            # or split="test", index=0
        obs = result.observation                      # TextObservation
        result = env.step("search[shampoo for dry hair]")
        print(obs.admissible_actions, result.observation.state_key, result.observation.score)

OpenEnv's ``GenericEnvClient`` works unchanged as well, with plain dicts:
``env.step({"command": "search[...]"})``.
"""

from __future__ import annotations

from typing import Any

try:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
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



class GagpoEnvClient(EnvClient[TextAction, TextObservation, TextState]):
    """OpenEnv's ``EnvClient`` for a ``gagpo serve env`` server: ``step`` takes a
    :class:`TextAction` or the command as a string; results carry :class:`TextObservation`."""

    def _step_payload(self, action: TextAction | str) -> dict[str, Any]:
        if isinstance(action, str):
            return {"command": action}
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[TextObservation]:
        fields = dict(payload.get("observation") or {})
        fields.update(reward=payload.get("reward"), done=bool(payload.get("done", False)))
        if payload.get("metadata"):
            fields["metadata"] = payload["metadata"]
        obs = TextObservation(**fields)
        return StepResult(observation=obs, reward=payload.get("reward"), done=obs.done)

    def _parse_state(self, payload: dict[str, Any]) -> TextState:
        return TextState(**payload)


__all__ = ["GagpoEnvClient", "TextAction", "TextObservation", "TextState"]
