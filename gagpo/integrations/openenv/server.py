"""Running the app: :func:`running_server` serves an env from a thread of this process while
a block runs (tests, benchmarks, examples), :func:`serve` until interrupted (``gagpo serve
env``). A frame over ``max_message_bytes`` closes its connection (1009).
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gagpo.common.addresses import is_loopback, listen_error
from gagpo.integrations.openenv.app import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS, build_app
from gagpo.integrations.openenv.environment import ServedEnv

DEFAULT_PORT = 8000
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20


def _uvicorn_config(app: Any, max_message_bytes: int, **kwargs: Any) -> Any:
    import uvicorn

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        await app(scope, receive, send)

    # uvicorn calls the app it is given with no arguments to see whether it is a factory, and
    # guesses its ASGI version from its __call__: an app object whose __call__ is wrapped (a
    # tracer, a profiler, mutmut's trampolines) passes for a factory and for ASGI 2. A function
    # of three arguments is neither; the version is said, not guessed.
    return uvicorn.Config(asgi, ws_max_size=max_message_bytes, log_level="warning",
                          access_log=False, lifespan="on", interface="asgi3", **kwargs)


@dataclass
class RunningServer:
    """A server started by :func:`running_server`: its URL (``http://host:port``) and app."""

    url: str
    app: Any
    server: Any

    @property
    def ws_url(self) -> str:
        return "ws" + self.url[len("http"):]

    def active_sessions(self) -> int:
        """Sessions whose environment exists (made and not yet closed)."""
        return len(self.app.sessions)


def _bound_socket(command: str, host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (``port`` 0: a free one), which uvicorn then listens
    on; a port in use or an address not this machine's is ``command``'s clear ValueError
    (:func:`gagpo.common.addresses.listen_error`)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise listen_error(command, host, port, e) from None
    return sock


@contextlib.contextmanager
def running_server(env_id: str, env_kwargs: dict[str, Any] | None = None, *,
                   host: str = "127.0.0.1", port: int = 0,
                   max_sessions: int = DEFAULT_MAX_SESSIONS,
                   idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
                   max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                   max_action_chars: int | None = None) -> Iterator[RunningServer]:
    """Serve ``env_id`` from a thread of this process while the block runs (``port`` 0: a free
    one, bound before the server starts, so no other process can take it in between)."""
    import uvicorn

    sock = _bound_socket("running_server", host, port)
    served = ServedEnv(env_id, dict(env_kwargs or {}), max_action_chars)
    app = build_app(served, max_sessions, idle_timeout)
    server = uvicorn.Server(_uvicorn_config(app, max_message_bytes))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name=f"openenv-{env_id}")
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError(f"the OpenEnv server for {env_id} did not start")
        time.sleep(0.01)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    try:
        yield RunningServer(f"http://{shown}:{bound}", app, server)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def serve(env_id: str, env_kwargs: dict[str, Any] | None = None, *, host: str = "127.0.0.1",
          port: int = DEFAULT_PORT, max_sessions: int = DEFAULT_MAX_SESSIONS,
          idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
          max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
          max_action_chars: int | None = None, allow_remote: bool = False) -> None:
    """Serve ``env_id`` until interrupted (blocks). A host other machines can reach needs
    ``allow_remote``: sessions carry no credentials, so anyone who can connect can play."""
    import uvicorn

    if not is_loopback(host):
        if not allow_remote:
            raise ValueError(
                f"refusing to serve on {host}, which other machines can reach: sessions have "
                "no credentials. Pass --allow-remote to do it anyway (behind a reverse proxy "
                "with its own limits), or keep the default 127.0.0.1")
        print(f"warning: serving on {host}, reachable from other machines; anyone who can "
              "connect can open sessions (up to --max-sessions)", file=sys.stderr, flush=True)
    sock = _bound_socket("gagpo serve env", host, port)  # a taken port fails before the env loads
    served = ServedEnv(env_id, dict(env_kwargs or {}), max_action_chars)
    app = build_app(served, max_sessions, idle_timeout)
    shown = f"[{host}]" if ":" in host else host
    total = sum(len(served.tasks(s)) for s in served.splits)
    print(f"{env_id} over OpenEnv ({served.report_label}; {total} tasks in "
          f"{', '.join(served.splits)}): ws://{shown}:{port}/ws\n"
          f"  up to {max_sessions} sessions, idle ones closed after {idle_timeout} s; "
          f"tasks: http://{shown}:{port}/{env_id}/splits", flush=True)
    try:
        uvicorn.Server(_uvicorn_config(app, max_message_bytes)).run(sockets=[sock])
    finally:
        sock.close()
