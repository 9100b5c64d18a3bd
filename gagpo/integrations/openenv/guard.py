"""The WebSocket sessions' guard: ASGI middleware around ``/ws`` that closes a session idle
for ``idle_timeout`` seconds (with code :data:`IDLE_CLOSE_CODE`) and answers frames OpenEnv's
loop would fail on (binary frames, JSON that is not an object) with an error message, keeping
the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

IDLE_CLOSE_CODE = 4408
"""WebSocket close code of a session that expired (4000-4999: the application's own)."""


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
