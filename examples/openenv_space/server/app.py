"""The Space's app: ``gagpo serve env`` for ``$GAGPO_ENV`` (WebShop-v0 by default).

Settings from the environment: GAGPO_ENV, GAGPO_MAX_SESSIONS (64), GAGPO_IDLE_TIMEOUT (300 s),
GAGPO_ENV_ARGS (a JSON object of gym.make arguments, e.g. {"goals": "synthetic"}).
``uvicorn server.app:app`` serves ``app``; ``python -m server.app`` runs :func:`main`.
"""

import json
import os
from collections.abc import Callable
from typing import Any

from gagpo.integrations.openenv.app import build_app
from gagpo.integrations.openenv.environment import ServedEnv
from gagpo.integrations.openenv.server import serve


def _setting(name: str, default: str, parse: Callable[[str], Any]) -> Any:
    """A setting from the environment; a value that does not parse names its variable."""
    text = os.environ.get(name, default)
    try:
        value = parse(text)
    except ValueError as e:
        raise ValueError(f"{name}={text!r} does not parse: {e}") from None
    if parse is json.loads and not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object of gym.make arguments, not {text!r}")
    return value


ENV_ID = os.environ.get("GAGPO_ENV", "WebShop-v0")
ENV_ARGS = _setting("GAGPO_ENV_ARGS", "{}", json.loads)
MAX_SESSIONS = _setting("GAGPO_MAX_SESSIONS", "64", int)
IDLE_TIMEOUT = _setting("GAGPO_IDLE_TIMEOUT", "300", float)

app = build_app(ServedEnv(ENV_ID, ENV_ARGS), MAX_SESSIONS, IDLE_TIMEOUT)


def main(host: str = "0.0.0.0", port: int = 8000) -> None:
    """Serve on all interfaces (a Space's container); outside one, prefer gagpo serve env."""
    serve(ENV_ID, ENV_ARGS, host=host, port=int(os.environ.get("PORT", port)),
          max_sessions=MAX_SESSIONS, idle_timeout=IDLE_TIMEOUT,
          allow_remote=host not in ("127.0.0.1", "localhost"))


if __name__ == "__main__":
    main()
