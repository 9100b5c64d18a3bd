"""Serve any registered gagpo environment over OpenEnv's protocol (``gagpo serve env``), and
connect to one.

OpenEnv (the ``openenv`` package, ``pip install 'gagpo[openenv]'``) is the protocol other
trainers read environments through: a FastAPI app whose WebSocket ``/ws`` holds one session per
connection (messages ``{"type": "reset"|"step"|"state"|"close", "data": {...}}``), typed
pydantic actions and observations, a task API (``/{env}/splits``, ``/tasks``, ``/num_tasks``,
``/task``) and OpenEnv's ``EnvClient`` on the other side. This package builds that app on the
env contract only (:mod:`gagpo.envs.base`): any id ``gymnasium.make`` knows, made with the given
keyword arguments, one instance per session.

Actions, observations and ``reset``'s arguments: :mod:`.environment` (the adapter).

Sessions are bounded (``max_sessions``; one more gets a ``CAPACITY_REACHED`` error and is
closed), end on the client's ``close`` or disconnect, and expire after ``idle_timeout``
seconds without a message (the server closes the socket with code 4408). Hostile input gets an
error message and the session goes on: malformed JSON, JSON that is not an object, binary
frames, unknown types, wrong field types, actions over ``max_action_chars``; frames over
``max_message_bytes`` close the connection (1009). Only the WebSocket sessions play: the app
runs in OpenEnv's production mode, without the stateless HTTP ``/reset`` and ``/step``.

Laid out as OpenEnv's own environments are: :mod:`~gagpo.integrations.openenv.models` (the
typed action, observation and state), :mod:`~gagpo.integrations.openenv.client` (the
``EnvClient``), :mod:`~gagpo.integrations.openenv.environment` (the adapter: a gagpo env behind
OpenEnv's ``Environment``), :mod:`~gagpo.integrations.openenv.app` (the app, behind
:mod:`~gagpo.integrations.openenv.guard`'s session guard),
:mod:`~gagpo.integrations.openenv.server` (serving it: in a thread, or until interrupted) and
:mod:`~gagpo.integrations.openenv.cli` (``gagpo serve env``). The names below import from here,
each from its module on first use (the client's import loads none of the server's modules).
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "TextAction": "models", "TextObservation": "models", "TextState": "models",
    "GagpoEnvClient": "client",
    "ServedEnv": "environment", "GagpoEnvironment": "environment", "observation": "environment",
    "SessionGuard": "guard", "IDLE_CLOSE_CODE": "guard",
    "build_app": "app", "DEFAULT_MAX_SESSIONS": "app", "DEFAULT_IDLE_TIMEOUT": "app",
    "RunningServer": "server", "running_server": "server", "serve": "server",
    "DEFAULT_PORT": "server", "DEFAULT_MAX_MESSAGE_BYTES": "server",
    "main": "cli",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
