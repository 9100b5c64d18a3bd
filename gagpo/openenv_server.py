"""Serve any registered gagpo environment over OpenEnv's protocol (``gagpo serve env``).

OpenEnv (the ``openenv`` package, ``pip install 'gagpo[openenv]'``) is the protocol other
trainers read environments through: a FastAPI app whose WebSocket ``/ws`` holds one session per
connection (messages ``{"type": "reset"|"step"|"state"|"close", "data": {...}}``), typed
pydantic actions and observations, a task API (``/{env}/splits``, ``/tasks``, ``/num_tasks``,
``/task``) and OpenEnv's ``EnvClient`` on the other side. This module builds that app on the env
contract only (:mod:`gagpo.envs.base`): any id ``gymnasium.make`` knows, made with the given
keyword arguments, one instance per session.

- Actions are the env's text commands: ``{"command": "search[red shoes]"}``.
- Observations carry the text and the contract's infos: ``admissible_actions``, ``won``,
  ``score``, ``state_key``, ``action_valid``, ``task_id``, ``task_type``, ``instruction``; the
  env's own info keys (``page``, ``feedback``, ``expert_action``...) travel in ``info``, and
  ``terminated``/``truncated`` beside OpenEnv's ``done``; paths of the server's file system
  (ALFWorld's ``gamefile``) do not leave it.
- ``reset`` takes ``task`` (the env's index or id), ``split``, ``seed`` and, as OpenEnv's task
  API has it, ``index`` (the position in ``split``): G sessions reset with one task and one
  seed start identical.

Sessions are bounded (``max_sessions``; one more gets a ``CAPACITY_REACHED`` error and is
closed), end on the client's ``close`` or disconnect, and expire after ``idle_timeout``
seconds without a message (the server closes the socket with code 4408). Hostile input gets an
error message and the session goes on: malformed JSON, JSON that is not an object, binary
frames, unknown types, wrong field types, actions over ``max_action_chars``; frames over
``max_message_bytes`` close the connection (1009). Only the WebSocket sessions play: the app
runs in OpenEnv's production mode, without the stateless HTTP ``/reset`` and ``/step``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import operator
import socket
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

import gagpo.envs  # noqa: F401  (registers the environments)
from gagpo.common.addresses import is_loopback
from gagpo.envs import probe
from gagpo.envs.base import INFO_KEYS
from gagpo.openenv_client import TextAction, TextObservation, TextState

try:
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import ConcurrencyConfig
except ImportError as e:  # the extra is not installed
    raise ImportError(
        f"serving over OpenEnv needs the openenv extra: pip install 'gagpo[openenv]' ({e})"
    ) from e

DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 64
DEFAULT_IDLE_TIMEOUT = 300.0
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20
IDLE_CLOSE_CODE = 4408
"""WebSocket close code of a session that expired (4000-4999: the application's own)."""


@dataclass
class ServedEnv:
    """What one server serves: ``gym.make(env_id, **env_kwargs)`` per session, and what the
    env declares (read once, from one probe instance: sessions and the task API share it)."""

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    max_action_chars: int | None = None
    """Longest command taken (default: the env's action space's ``max_length``)."""

    def __post_init__(self) -> None:
        with probe(self.env_id, **self.env_kwargs) as env:
            self.splits: list[str] = list(env.splits)
            self.split: str = env.split
            self.max_steps: int | None = env.max_steps
            self.report_label: str = env.report_label
            self._tasks = {s: list(env.split_tasks(s)) for s in self.splits}
            if self.max_action_chars is None:
                self.max_action_chars = int(env.action_space.max_length)
        self.create_lock = threading.Lock()
        self.resets = 0
        """Episodes started, all sessions together (for tests and benchmarks)."""
        self.steps = 0
        """Steps played, all sessions together (for tests and benchmarks)."""

    def tasks(self, split: Any) -> list[Any]:
        """The tasks of ``split``, in order, as ``reset``'s ``task`` takes them."""
        if split not in self._tasks:
            raise ValueError(f"unknown split {split!r}: {self.env_id} has {self.splits}")
        return self._tasks[split]

    def make(self) -> gym.Env:
        with self.create_lock:  # envs share catalogs and caches that load on first use
            return gym.make(self.env_id, **self.env_kwargs)


def _plain(value: Any) -> Any:
    """``value`` as JSON has it (NumPy scalars and arrays, tuples; anything else as text)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


SERVER_ONLY_KEYS = frozenset({"gamefile"})
"""Info keys that stay on the server: ALFWorld's ``gamefile`` is a path of the server's file
system (``task_id`` names the game to a client)."""


def observation(text: str, info: dict[str, Any], reward: float | None = None,
                terminated: bool = False, truncated: bool = False) -> TextObservation:
    """A :class:`TextObservation` of one reset or step of a gagpo env."""
    extra = {k: v for k, v in info.items() if k not in INFO_KEYS and k not in SERVER_ONLY_KEYS}
    return TextObservation(
        text=text, **{k: info[k] for k in INFO_KEYS}, reward=reward,
        done=bool(terminated or truncated), terminated=bool(terminated),
        truncated=bool(truncated), info=json.loads(json.dumps(extra, default=_plain)),
    )


class GagpoEnvironment(Environment[TextAction, TextObservation, TextState]):
    """One session's environment: a gagpo env behind OpenEnv's ``Environment``.

    The gagpo env is made on the first ``reset`` (the task API and OpenEnv's probes build
    instances they never play). The task API lists the served env's splits and tasks."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, served: ServedEnv) -> None:
        super().__init__()
        self.served = served
        self._env: gym.Env | None = None
        self._state = TextState(env_id=served.env_id, split=served.split,
                                splits=served.splits, max_steps=served.max_steps,
                                report_label=served.report_label,
                                max_action_chars=served.max_action_chars or 0)

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              **kwargs: Any) -> TextObservation:
        """Start an episode: ``task`` (the env's index or id) or ``index`` (position in
        ``split``), ``split``, ``seed``; unknown keys are refused, not ignored."""
        unknown = sorted(set(kwargs) - {"task", "split", "index"})
        if unknown:
            raise ValueError(f"reset takes seed, episode_id, task, index and split; "
                             f"not {unknown}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                                 or seed < 0):
            raise ValueError(f"seed must be an integer >= 0 or null, not {seed!r:.60}")
        task, split = kwargs.get("task"), kwargs.get("split")
        if "index" in kwargs:
            if task is not None:
                raise ValueError("give task or index, not both")
            task = self._task_at(split if split is not None else self.served.split,
                                 kwargs["index"])
        options = {k: v for k, v in (("task", task), ("split", split)) if v is not None}
        if self._env is None:
            self._env = self.served.make()
        obs, info = self._env.reset(seed=seed, options=options)
        self.served.resets += 1
        self._state = self._state.model_copy(update={
            "episode_id": episode_id, "step_count": 0, "task_id": info["task_id"],
            "split": split or self.served.split})
        return observation(obs, info)

    def _task_at(self, split: Any, index: Any) -> Any:
        tasks = self.served.tasks(split)
        if isinstance(index, bool) or not isinstance(index, int):
            raise ValueError(f"index must be an integer, not {index!r:.60}")
        if not 0 <= index < len(tasks):
            raise ValueError(f"index {index} is out of range 0..{len(tasks) - 1} of "
                             f"split {split!r}")
        return tasks[index]

    def step(self, action: TextAction, timeout_s: float | None = None,
             **kwargs: Any) -> TextObservation:
        if self._env is None:
            raise RuntimeError("call reset before step")
        limit = self.served.max_action_chars
        if limit is not None and len(action.command) > limit:
            raise ValueError(f"the command has {len(action.command)} characters; this server "
                             f"takes at most {limit}")
        obs, reward, terminated, truncated, info = self._env.step(action.command)
        self._state.step_count += 1
        self.served.steps += 1
        return observation(obs, info, float(reward), terminated, truncated)

    @property
    def state(self) -> TextState:
        return self._state

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None

    # -- OpenEnv's task API --------------------------------------------------------------------

    def list_splits(self) -> list[str]:
        return list(self.served.splits)

    def num_tasks(self, split: str) -> int:
        return len(self.served.tasks(split))

    def _task(self, split: str, index: int) -> dict[str, Any]:
        return {"split": split, "index": index, "task": self.served.tasks(split)[index]}

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [self._task(split, i) for i in range(self.num_tasks(split))]

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        n = self.num_tasks(split)
        if not 0 <= operator.index(index) < n:
            raise IndexError(index)
        return self._task(split, index)

    def get_task_range(self, split: str, start: int | None = None,
                       stop: int | None = None) -> list[dict[str, Any]]:
        return [self._task(split, i) for i in range(self.num_tasks(split))[start:stop]]


# -- hardening of the WebSocket sessions ------------------------------------------------------


def _error(message: str, code: str) -> dict[str, Any]:
    return {"type": "websocket.send",
            "text": json.dumps({"type": "error", "data": {"message": message, "code": code}})}


def _frame_problem(message: dict[str, Any]) -> str | None:
    """Why a received frame cannot be a protocol message (None: hand it to OpenEnv)."""
    text = message.get("text")
    if text is None:
        return ("binary frames are not accepted: send JSON text such as "
                '{"type": "reset", "data": {"task": 0}}')
    if text.lstrip()[:1] == "{":
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None  # OpenEnv answers INVALID_JSON itself
    return (f"a message must be a JSON object such as {{\"type\": \"step\", \"data\": "
            f"{{\"command\": ...}}}}, not a JSON {type(value).__name__}")


class SessionGuard:
    """ASGI middleware around ``/ws``: closes a session idle for ``idle_timeout`` seconds (a
    client that vanished costs nothing after it) and answers frames OpenEnv's loop would fail
    on (binary frames, JSON that is not an object) with an error, keeping the session."""

    def __init__(self, app: Any, idle_timeout: float | None) -> None:
        self.app = app
        self.idle_timeout = idle_timeout
        self.expired = 0
        """Sessions closed for idleness (for tests and benchmarks)."""

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket" or scope.get("path") != "/ws":
            await self.app(scope, receive, send)
            return
        closed = False

        async def guarded_send(message: dict) -> None:
            if not closed:  # after an expiry the socket is gone: drop the app's last words
                await send(message)

        async def guarded_receive() -> dict:
            nonlocal closed
            while True:
                try:
                    message = await asyncio.wait_for(receive(), self.idle_timeout)
                except asyncio.TimeoutError:
                    if not closed:
                        closed = True
                        self.expired += 1
                        with contextlib.suppress(Exception):
                            await send({"type": "websocket.close", "code": IDLE_CLOSE_CODE,
                                        "reason": f"idle for {self.idle_timeout:g} s: "
                                                  "session closed"})
                    return {"type": "websocket.disconnect", "code": IDLE_CLOSE_CODE}
                if message["type"] == "websocket.receive":
                    problem = _frame_problem(message)
                    if problem is not None:
                        await send(_error(problem, "INVALID_MESSAGE"))
                        continue
                return message

        await self.app(scope, guarded_receive, guarded_send)


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
    fastapi_app.add_exception_handler(ValueError, _bad_request)
    fastapi_app.add_exception_handler(TypeError, _bad_request)
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


# -- serving ----------------------------------------------------------------------------------



def _uvicorn_config(app: Any, max_message_bytes: int, **kwargs: Any) -> Any:
    import uvicorn

    return uvicorn.Config(app, ws_max_size=max_message_bytes, log_level="warning",
                          access_log=False, lifespan="on", **kwargs)


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

    served = ServedEnv(env_id, dict(env_kwargs or {}), max_action_chars)
    app = build_app(served, max_sessions, idle_timeout)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
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
    served = ServedEnv(env_id, dict(env_kwargs or {}), max_action_chars)
    app = build_app(served, max_sessions, idle_timeout)
    shown = f"[{host}]" if ":" in host else host
    total = sum(len(served.tasks(s)) for s in served.splits)
    print(f"{env_id} over OpenEnv ({served.report_label}; {total} tasks in "
          f"{', '.join(served.splits)}): ws://{shown}:{port}/ws\n"
          f"  up to {max_sessions} sessions, idle ones closed after {idle_timeout} s; "
          f"tasks: http://{shown}:{port}/{env_id}/splits", flush=True)
    uvicorn.Server(_uvicorn_config(app, max_message_bytes, host=host, port=port)).run()


def _parse_value(text: str) -> Any:
    """An ``--env-arg`` value: JSON when it parses (numbers, true, lists), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gagpo serve env",
        description="Serve a gagpo environment over OpenEnv (WebSocket sessions at /ws, the "
                    "task API, /health, /schema) for OpenEnv's EnvClient, TRL and others.")
    p.add_argument("--env", required=True, help="a registered env id: WebShop-v0, ALFWorld-v0")
    p.add_argument("--env-arg", action="append", metavar="KEY=VALUE", default=[],
                   help="gymnasium.make() argument (repeatable; values parse as JSON when they "
                        "can), e.g. goals=synthetic or observation_mode=text_rich")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; any other "
                        "needs --allow-remote)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"TCP port (default {DEFAULT_PORT})")
    p.add_argument("--allow-remote", action="store_true",
                   help="serve on an address other machines can reach")
    p.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS,
                   help=f"concurrent sessions (default {DEFAULT_MAX_SESSIONS}); one more is "
                        "refused with CAPACITY_REACHED")
    p.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT,
                   help=f"seconds without a message after which a session is closed (default "
                        f"{DEFAULT_IDLE_TIMEOUT:g})")
    p.add_argument("--max-message-bytes", type=int, default=DEFAULT_MAX_MESSAGE_BYTES,
                   help="largest WebSocket frame; larger ones close the connection (1009)")
    p.add_argument("--max-action-chars", type=int, default=None,
                   help="longest command (default: the env's action space)")
    return p


def env_kwargs_of(items: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` items as ``gym.make`` keyword arguments."""
    kwargs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not key or not sep:
            raise ValueError(f"--env-arg takes KEY=VALUE, not {item!r}")
        kwargs[key] = _parse_value(value)
    return kwargs


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    serve(args.env, env_kwargs_of(args.env_arg), host=args.host, port=args.port,
          max_sessions=args.max_sessions, idle_timeout=args.idle_timeout,
          max_message_bytes=args.max_message_bytes, max_action_chars=args.max_action_chars,
          allow_remote=args.allow_remote)
    return 0


__all__ = ["GagpoEnvironment", "RunningServer", "ServedEnv", "SessionGuard", "TextAction",
           "TextObservation", "TextState", "build_app", "main", "observation", "running_server",
           "serve"]
