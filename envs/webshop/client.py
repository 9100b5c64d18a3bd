"""The remote backend of WebShop-v0: a client of the shop's JSON API (``/api/v1``).

The server keeps no session in memory: each answer carries a signed token holding the
session's state, which the client sends back with the next action.
"""

from __future__ import annotations

import contextlib
from typing import Any

import requests


class ShopError(RuntimeError):
    """The shop answered with an error (the message is the server's)."""


class RemoteBackend:
    def __init__(
        self, server_url: str, mode: str, timeout: float = 30.0, request_infos: tuple = ()
    ) -> None:
        self.base = server_url.rstrip("/")
        self.mode = mode
        self.request_infos = list(request_infos)
        self.timeout = timeout
        self.http = requests.Session()
        self.state: str | None = None  # the session token
        self._info = self._call("GET", "/api/v1/info")

    @property
    def num_goals(self) -> int:
        return int(self._info["goals"])

    def _call(self, method: str, path: str, payload: dict | None = None) -> dict[str, Any]:
        try:
            r = self.http.request(method, self.base + path, json=payload, timeout=self.timeout)
        except requests.RequestException as e:
            raise ShopError(f"cannot reach the shop at {self.base}: {e}") from e
        try:
            body = r.json()
        except ValueError:
            raise ShopError(f"{method} {path}: HTTP {r.status_code}, not JSON") from None
        if r.status_code >= 400:
            raise ShopError(f"{method} {path}: HTTP {r.status_code}: {body.get('error')}")
        return body

    def start(self, goal: int) -> dict[str, Any]:
        out = self._call(
            "POST", "/api/v1/sessions", {"goal": goal, "observation_mode": self.mode,
             "request_infos": self.request_infos}
        )
        self.state = out.pop("session")
        return out

    def step(self, action: str) -> dict[str, Any]:
        out = self._call(
            "POST",
            "/api/v1/sessions/step",
            {"session": self.state, "action": action, "observation_mode": self.mode,
             "request_infos": self.request_infos},
        )
        self.state = out.pop("session")
        return out

    def goal(self, index: int):
        raise NotImplementedError("goals are only readable in-process")

    def close(self) -> None:
        if self.state is not None:
            with contextlib.suppress(ShopError):  # closing is best effort: nothing is held
                self._call("POST", "/api/v1/sessions/close", {"session": self.state})
            self.state = None
        self.http.close()
