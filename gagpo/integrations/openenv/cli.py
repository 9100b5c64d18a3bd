"""``gagpo serve env``: its flags, and :func:`main`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from gagpo.integrations.openenv.app import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS
from gagpo.integrations.openenv.server import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_PORT, serve


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
