"""The remote backend of WebShop-v0: a client of the shop's JSON API (``/api/v1``).

The server keeps no session in memory: each answer carries a signed token holding the
session's state, which the client sends back with the next action.

Actions the API refuses to read (lone surrogates, which are not text: 400; a body over the
server's size limit: 413) are answered here as the in-process env answers any bad action:
invalid, the state unchanged, a feedback sentence before the page, reward 0.
"""

from __future__ import annotations

import contextlib
from typing import Any

import requests

from gagpo.envs.base import TextEnv
from gagpo.servers.webshop.limits import MAX_SESSION_STEPS
from gagpo.servers.webshop.observe import with_feedback
from gagpo.servers.webshop.shop import is_text, parse_action, query_problem


class ShopError(RuntimeError):
    """The shop answered with an error (the message is the server's; ``status`` its HTTP
    status, None when the shop could not be reached)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RemoteBackend:
    def __init__(
        self, server_url: str, mode: str, timeout: float = 30.0, request_infos: tuple = (),
        max_steps: int | None = None,
    ) -> None:
        self.base = server_url.rstrip("/")
        self.mode = mode
        self.max_steps = None if max_steps is None else min(max_steps, MAX_SESSION_STEPS)
        """The sessions' step limit: the env's own, so that the shop ends no episode before
        the env does (None: the shop's default; at most the longest it allows)."""
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
            status = r.status_code
            raise ShopError(f"{method} {path}: HTTP {status}, not JSON", status) from None
        if r.status_code >= 400:
            error = body.get("error") if isinstance(body, dict) else body
            raise ShopError(f"{method} {path}: HTTP {r.status_code}: {error}", r.status_code)
        return body

    def start(self, goal: int) -> dict[str, Any]:
        out = self._call(
            "POST", "/api/v1/sessions", {"goal": goal, "observation_mode": self.mode,
             "request_infos": self.request_infos, "max_steps": self.max_steps}
        )
        return self._answer(out)

    def step(self, action: str) -> dict[str, Any]:
        if not is_text(action):  # the API answers 400: JSON carries it, but it is not text
            return self._refused(action, "it holds lone surrogates, which are not text")
        try:
            out = self._session_call("/api/v1/sessions/step", action=action)
        except ShopError as e:
            if e.status != 413:
                raise
            return self._refused(action, f"{len(action)} characters are more than the "
                                 "shop's API takes")
        return self._answer(out)

    def observe(self) -> dict[str, Any]:
        """The current page and infos (the state unchanged)."""
        return self._answer(self._session_call("/api/v1/sessions/observe"))

    def _answer(self, out: dict[str, Any]) -> dict[str, Any]:
        """The shop's answer, its session token kept and its info (the shop's facts and
        ``state_key``) made the contract's."""
        self.state = out.pop("session")
        out["info"] = TextEnv.make_info(**out["info"])
        return out

    def _session_call(self, path: str, **fields: Any) -> dict[str, Any]:
        return self._call(
            "POST", path, {"session": self.state, **fields, "observation_mode": self.mode,
                           "request_infos": self.request_infos},
        )

    def _refused(self, action: str, why: str) -> dict[str, Any]:
        """The answer to an action the API refuses to read: invalid, state unchanged."""
        parsed = parse_action(action)
        # A search gets the shop's own sentence, the one the in-process env gives.
        feedback = query_problem(parsed[1]) if parsed and parsed[0] == "search" else None
        feedback = feedback or f"Invalid action ({why}): use search[query] or click[button]."
        out = self.observe()
        out["observation"] = with_feedback(out["observation"], feedback, self.mode)
        out["reward"] = 0.0
        out["info"].update(action_valid=False, feedback=feedback)
        return out

    def goal(self, index: int):
        raise NotImplementedError("goals are only readable in-process")

    def close(self) -> None:
        if self.state is not None:
            with contextlib.suppress(ShopError):  # closing is best effort: nothing is held
                self._call("POST", "/api/v1/sessions/close", {"session": self.state})
            self.state = None
        self.http.close()
