"""A gagpo environment served elsewhere, over OpenEnv's protocol, as a local gymnasium env.

``gagpo serve env --env WebShop-v0`` (or any OpenEnv server of a gagpo env) serves sessions at
``ws://host:port/ws``; :class:`RemoteEnv` plays one of them and keeps the contract of
:mod:`gagpo.envs.base` (the same observations, rewards, ends and infos as the env in process),
so ``GroupVectorEnv`` and the trainer play environments served on other machines::

    import gymnasium as gym
    from gagpo.envs.vector import GroupVectorEnv

    env = gym.make("gagpo.envs.remote:Remote-v0", url="http://127.0.0.1:8000")
    vec = GroupVectorEnv("gagpo.envs.remote:Remote-v0", n_tasks=8, group_size=4,
                         env_kwargs={"url": "http://127.0.0.1:8000"})

The env learns what the served env declares (splits, ``max_steps``, ``report_label``) from the
session's state, and its tasks from OpenEnv's task API. It needs only ``websockets`` (which the
``openenv`` extra installs), no environment code. A session the server closed (idle expiry, a
restart) raises on ``step``; the next ``reset`` opens a new one.
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Collection
from typing import Any

from gymnasium.envs.registration import register, registry

from gagpo.envs.base import INFO_KEYS, TextEnv, Transition, text_space

ENV_ID = "Remote-v0"


class RemoteEnvError(RuntimeError):
    """The server answered with an error, or the session is gone."""


class RemoteEnv(TextEnv):
    """One OpenEnv session of a served gagpo env (``url``: ``http://`` or ``ws://``, with or
    without the ``/ws`` path). ``timeout``: seconds to wait for one answer."""

    def __init__(self, url: str, timeout: float = 60.0, render_mode: str | None = None,
                 max_message_bytes: int = 1 << 24) -> None:
        super().__init__(render_mode=render_mode)
        base = url.rstrip("/")
        if base.endswith("/ws"):
            base = base[: -len("/ws")]
        scheme, sep, rest = base.partition("://")
        if not sep or scheme not in ("http", "https", "ws", "wss"):
            raise ValueError(f"url must start with http://, https://, ws:// or wss://, not "
                             f"{url!r}")
        secure = scheme in ("https", "wss")
        self.http_url = f"{'https' if secure else 'http'}://{rest}"
        self.ws_url = f"{'wss' if secure else 'ws'}://{rest}/ws"
        self.timeout = float(timeout)
        self.max_message_bytes = max_message_bytes
        self._ws: Any = None
        self._seed: int | None = None
        self._connect()
        state = self._call({"type": "state"}, "state")
        self.env_id: str = state["env_id"]
        self._splits: list[str] = list(state["splits"])
        self.split = state["split"]
        self.max_steps = state["max_steps"]
        self.report_label = f"{state['report_label']} (served at {self.http_url})"
        self.max_action_length = int(state.get("max_action_chars") or self.max_action_length)
        self.observation_space = text_space(self.max_observation_length)
        self.action_space = text_space(self.max_action_length)
        self._tasks: dict[str, list[Any]] = {}

    # -- the transport -------------------------------------------------------------------------

    def _connect(self) -> None:
        from websockets.sync.client import connect

        try:
            # entered as a context manager, as websockets asks; _drop() exits it
            self._ws = connect(self.ws_url, open_timeout=self.timeout,
                               max_size=self.max_message_bytes, close_timeout=2).__enter__()
        except (OSError, TimeoutError) as e:
            raise RemoteEnvError(f"cannot reach the env server at {self.ws_url}: {e}") from e

    def _call(self, message: dict[str, Any], expect: str) -> Any:
        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            raise RemoteEnvError("the session is closed: call reset() to open a new one")
        try:
            self._ws.send(json.dumps(message))
            answer = json.loads(self._ws.recv(timeout=self.timeout))
        except ConnectionClosed as e:
            last = self._last_words()
            self._drop()
            why = f"code {e.rcvd.code}: {e.rcvd.reason}" if e.rcvd else "no close frame"
            if last:  # e.g. the refusal of a server at its session limit
                why = f"{why}; it said: {last}"
            raise RemoteEnvError(f"the env server closed the session ({why}); reset() opens "
                                 "a new one") from e
        except TimeoutError as e:  # the answer may still come: this session is unusable
            self._drop()
            raise RemoteEnvError(f"no answer from {self.ws_url} in {self.timeout:g} s") from e
        if answer.get("type") == "error":
            data = answer.get("data") or {}
            raise RemoteEnvError(f"the env server refused {message.get('type')}: "
                                 f"{data.get('message')} ({data.get('code')})")
        if answer.get("type") != expect:
            raise RemoteEnvError(f"expected a {expect!r} answer, got {answer.get('type')!r}")
        return answer.get("data") or {}

    def _last_words(self) -> str | None:
        """The error message a closed connection left unread, if any."""
        try:
            data = json.loads(self._ws.recv(timeout=0)).get("data") or {}
        except Exception:  # nothing left, or not ours to parse
            return None
        return f"{data.get('message')} ({data.get('code')})"

    def _drop(self) -> None:
        if self._ws is not None:
            ws, self._ws = self._ws, None
            ws.__exit__(None, None, None)

    # -- what the env declares -----------------------------------------------------------------

    @property
    def splits(self) -> Collection[str]:
        return tuple(self._splits)

    def split_tasks(self, split: str | None = None) -> list[Any]:
        """The tasks of ``split`` (default: the env's), as ``reset``'s ``task`` takes them
        (read once from the server's task API)."""
        split = split or self.split
        if split not in self._tasks:
            path = f"/{urllib.parse.quote(self.env_id)}/tasks"
            req = urllib.request.Request(self.http_url + path,
                                         data=json.dumps({"split": split}).encode(),
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    tasks = json.load(r)["tasks"]
            except urllib.error.HTTPError as e:
                raise ValueError(f"the env server refused the tasks of {split!r}: "
                                 f"{e.read().decode(errors='replace')[:300]}") from e
            self._tasks[split] = [t["task"] for t in tasks]
        return self._tasks[split]

    # -- the episode ---------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._seed = seed
        return super().reset(seed=seed, options=options)

    def _reset(self, task: Any, split: str) -> tuple[str, dict[str, Any]]:
        if self._ws is None:
            self._connect()
        data: dict[str, Any] = {"split": split}
        if task is not None:
            data["task"] = task.item() if hasattr(task, "item") else task
        if self._seed is not None:  # None: the session's env goes on with its own generator
            data["seed"] = self._seed
        try:
            obs, _, _, _, info = self._transition(
                self._call({"type": "reset", "data": data}, "observation"))
        except RemoteEnvError as e:
            raise ValueError(str(e)) from e
        return obs, info

    def _step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        obs, reward, terminated, _, info = self._transition(
            self._call({"type": "step", "data": {"command": action}}, "observation"))
        return obs, reward, terminated, info

    def step(self, action: str) -> Transition:
        if self._last_info is not None and self._ended is not None:
            # After the end the served env answers (its own words for the no-op).
            out = self._transition(self._call(
                {"type": "step", "data": {"command": str(action)}}, "observation"))
            self._last_observation = out[0]
            return out
        return super().step(action)

    @staticmethod
    def _transition(data: dict[str, Any]) -> Transition:
        o = data.get("observation") or {}
        info = {k: o[k] for k in INFO_KEYS}
        info.update(o.get("info") or {})
        reward = data.get("reward")
        return (o["text"], 0.0 if reward is None else float(reward), bool(o["terminated"]),
                bool(o["truncated"]), info)

    def close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):  # the server may be gone: best effort
                self._ws.send(json.dumps({"type": "close"}))
            self._drop()
        super().close()


if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="gagpo.envs.remote:RemoteEnv")

__all__ = ["ENV_ID", "RemoteEnv", "RemoteEnvError"]
