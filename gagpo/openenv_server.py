"""Moved to :mod:`gagpo.integrations.openenv` (the adapter, the session guard, the app, the
server and ``gagpo serve env``'s command line are modules of their own there); this module
keeps the names it had."""

from gagpo.integrations.openenv.app import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_SESSIONS,
    build_app,
)
from gagpo.integrations.openenv.cli import build_parser, env_kwargs_of, main
from gagpo.integrations.openenv.environment import (
    SERVER_ONLY_KEYS,
    GagpoEnvironment,
    ServedEnv,
    observation,
)
from gagpo.integrations.openenv.guard import IDLE_CLOSE_CODE, SessionGuard
from gagpo.integrations.openenv.models import TextAction, TextObservation, TextState
from gagpo.integrations.openenv.server import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_PORT,
    RunningServer,
    running_server,
    serve,
)

__all__ = ["DEFAULT_IDLE_TIMEOUT", "DEFAULT_MAX_MESSAGE_BYTES", "DEFAULT_MAX_SESSIONS",
           "DEFAULT_PORT", "IDLE_CLOSE_CODE", "SERVER_ONLY_KEYS", "GagpoEnvironment",
           "RunningServer", "ServedEnv", "SessionGuard", "TextAction", "TextObservation",
           "TextState", "build_app", "build_parser", "env_kwargs_of", "main", "observation",
           "running_server", "serve"]
