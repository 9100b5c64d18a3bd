"""OpenEnv's ``EnvClient`` for ``gagpo serve env``: :class:`GagpoEnvClient`, on the typed
action, observation and state of :mod:`~gagpo.integrations.openenv.models`.

This module and its models are all a client needs (no environment code):
``pip install 'gagpo[openenv]'`` on the trainer's side, then::

    from gagpo.integrations.openenv import GagpoEnvClient

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

from gagpo.integrations.openenv.models import TextAction, TextObservation, TextState

try:
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
except ImportError as e:  # the extra is not installed
    raise ImportError(
        f"OpenEnv's client and models need the openenv extra: pip install 'gagpo[openenv]' ({e})"
    ) from e


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
