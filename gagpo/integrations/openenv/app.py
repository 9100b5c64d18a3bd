"""The served app: OpenEnv's FastAPI app (production mode: WebSocket sessions, task API,
health, schema, metadata) on a :class:`~gagpo.integrations.openenv.environment.ServedEnv`,
behind the :class:`~gagpo.integrations.openenv.guard.SessionGuard`. Sessions are bounded
(``max_sessions``; one more gets a ``CAPACITY_REACHED`` error and is closed) and expire after
``idle_timeout`` seconds without a message.
"""

from __future__ import annotations

from typing import Any

from gagpo.integrations.openenv.environment import GagpoEnvironment, ServedEnv
from gagpo.integrations.openenv.guard import SessionGuard
from gagpo.integrations.openenv.models import TextAction, TextObservation, TextState

try:
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.types import ConcurrencyConfig
except ImportError as e:  # the extra is not installed
    raise ImportError(
        f"serving over OpenEnv needs the openenv extra: pip install 'gagpo[openenv]' ({e})"
    ) from e

DEFAULT_MAX_SESSIONS = 64
DEFAULT_IDLE_TIMEOUT = 300.0


def _bad_request(request: Any, exc: Exception) -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse(status_code=400, content={"detail": str(exc)})


def build_app(served: ServedEnv, max_sessions: int = DEFAULT_MAX_SESSIONS,
              idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT) -> Any:
    """The ASGI app serving ``served``: OpenEnv's app (production mode: WebSocket sessions,
    task API, health, schema, metadata) behind :class:`SessionGuard`.

    ``app.state.openenv`` is the FastAPI app; ``app.active_sessions()`` counts open sessions.
    """
    if max_sessions < 1:
        raise ValueError(f"max_sessions must be >= 1, not {max_sessions}")
    if idle_timeout is not None and not idle_timeout > 0:
        raise ValueError(f"idle_timeout must be > 0 seconds (or None), not {idle_timeout}")
    # OpenEnv's own reaper frees sessions opened over HTTP (MCP) once idle; the guard closes
    # WebSocket sessions first (the reaper waits a second longer).
    config = ConcurrencyConfig(max_concurrent_envs=max_sessions,
                               session_timeout=None if idle_timeout is None
                               else idle_timeout + 1.0)
    factory = _Factory(served)
    fastapi_app = create_app(factory, TextAction, TextObservation, env_name=served.env_id,
                             concurrency_config=config, state_cls=TextState, mode="production")
    # The task API's inputs pass OpenEnv's request models first (a wrong type gets their 422);
    # what passes them and is still wrong (an unknown split) raises ValueError: a 400.
    fastapi_app.add_exception_handler(ValueError, _bad_request)
    guard = SessionGuard(fastapi_app, idle_timeout)
    guard.served = served  # type: ignore[attr-defined]
    guard.sessions = factory.live  # type: ignore[attr-defined]
    return guard


class _Factory:
    """Makes one :class:`GagpoEnvironment` per session and counts the live ones (made, not yet
    closed): the figure the benchmark checks returns to 0."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    __name__ = "GagpoEnvironment"

    def __init__(self, served: ServedEnv) -> None:
        self.served = served
        self.live: set[int] = set()

    def __call__(self) -> GagpoEnvironment:
        env = GagpoEnvironment(self.served)
        self.live.add(id(env))
        close = env.close

        def close_and_count() -> None:
            self.live.discard(id(env))
            close()

        env.close = close_and_count  # type: ignore[method-assign]
        return env
