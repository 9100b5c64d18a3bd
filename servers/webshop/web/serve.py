"""Serve the shop with waitress, a production WSGI server (never Flask's debug server).

``gagpo serve webshop`` calls :func:`main`. One process with ``threads`` worker threads is
plenty for one machine; for more, run the app under any WSGI server with several workers
(``create_app`` keeps no per-session state, so workers need no coordination: processes of one
user on one machine share the token secret kept in the cache folder, and several machines
share one given with ``--secret`` or ``$GAGPO_WEBSHOP_SECRET``).

Connections: waitress reads requests on one event loop and runs them on ``threads`` worker
threads. A connection that sends part of a request and waits holds no thread but counts
against ``connection_limit``; idle ones are closed after ``channel_timeout`` seconds. The
defaults (1000 connections, 30 s, the poll() loop, which has no 1024-descriptor ceiling) keep
the shop answering while a few hundred such connections sit open. In front of an untrusted
network, put a reverse proxy with its own limits before it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from gagpo.common.addresses import is_loopback
from gagpo.common.numbers import check_number
from gagpo.servers.webshop.web.tokens import MIN_SECRET_CHARS, SECRET_ENV

DEFAULT_THREADS = 8
DEFAULT_CONNECTION_LIMIT = 1000
DEFAULT_CHANNEL_TIMEOUT = 30
MAX_REQUEST_BODY = 1 << 20
"""Bodies waitress reads at most (the app itself takes 256 kB and answers a JSON 413 above)."""


class ServeError(ValueError):
    """A setting that makes serving unsafe or impossible (the command exits with status 2)."""



def url_host(host: str) -> str:
    """``host`` as a URL writes it: IPv6 addresses in brackets, once."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def check_secret(host: str, secret: str | None) -> str | None:
    """Refuse unsafe combinations (:class:`ServeError`); return a warning to print, or None.

    ``secret`` is the explicitly given one (``--secret`` or ``$GAGPO_WEBSHOP_SECRET``). On a
    non-loopback address one is required: the default key lives on this machine only, and an
    exposed shop is better served with a secret its operator chose and can rotate."""
    if secret is not None and len(secret) < MIN_SECRET_CHARS:
        raise ServeError(
            f"the token secret must be at least {MIN_SECRET_CHARS} characters "
            '(for instance: python -c "import secrets; print(secrets.token_hex(32))")'
        )
    if is_loopback(host):
        return None
    if secret is None:
        raise ServeError(
            f"refusing to serve on {host}, which other machines can reach, without an explicit "
            f"token secret: set ${SECRET_ENV} (or pass --secret) to a long random string"
        )
    return (
        f"warning: serving on {host}, reachable from other machines. Anyone who can connect "
        "can play episodes and replay their session tokens; scores that clients report are "
        "theirs to claim (see the README on replay)."
    )


def _raise_open_files_limit(needed: int) -> None:
    """Lift this process's soft limit on open files towards ``needed`` (up to the hard limit),
    so that the connection limit, not the descriptor limit, decides."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def serve(
    host: str = "127.0.0.1",
    port: int = 3000,
    catalog: str | None = None,
    goals: str = "human",
    num_products: int | None = None,
    threads: int = DEFAULT_THREADS,
    *,
    secret: str | None = None,
    expert_infos: bool = True,
    connection_limit: int = DEFAULT_CONNECTION_LIMIT,
    channel_timeout: int = DEFAULT_CHANNEL_TIMEOUT,
) -> None:
    """Build the shop and serve it until interrupted (blocks).

    ``secret`` None takes ``$GAGPO_WEBSHOP_SECRET``, else this machine's key file; a
    non-loopback ``host`` needs one of the first two (:func:`check_secret`)."""
    import waitress

    from gagpo.servers.webshop.web.app import create_app

    secret = secret or os.environ.get(SECRET_ENV) or None
    warning = check_secret(host, secret)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    app = create_app(
        catalog=catalog,
        goals=goals,
        num_products=num_products,
        secret=secret,
        expert_infos=expert_infos,
    )
    shop = app.extensions["gagpo_webshop"]
    shown = url_host(host)
    print(
        f"WebShop: {len(shop.catalog)} products, {len(shop.goals)} {goals} goals\n"
        f"  pages: http://{shown}:{port}/fixed_0\n"
        f"  API:   http://{shown}:{port}/api/v1/info",
        flush=True,
    )
    _raise_open_files_limit(connection_limit + 256)
    waitress.serve(
        app,
        host=host,
        port=port,
        threads=threads,
        connection_limit=connection_limit,
        channel_timeout=channel_timeout,
        # Waitress's own bound is 1 GB per request, spooled to temporary files before the
        # app (which refuses over MAX_CONTENT_LENGTH) sees it. Bodies a little over the app's
        # limit still get its JSON 413; far larger ones waitress refuses (413, plain text).
        max_request_body_size=MAX_REQUEST_BODY,
        # Idle connections are looked for this often (waitress's default is every 30 s).
        cleanup_interval=max(1, min(10, channel_timeout // 3)),
        asyncore_use_poll=True,
        ident="gagpo-webshop",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gagpo serve webshop",
        description="Serve the WebShop pages (for people and browsers) and its JSON API.",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; any other address "
        f"needs --secret or ${SECRET_ENV})",
    )
    p.add_argument("--port", type=int, default=3000, help="TCP port (default 3000)")
    p.add_argument(
        "--catalog",
        default=None,
        help="folder of the original WebShop data files (default: the embedded generated catalog)",
    )
    p.add_argument(
        "--goals", choices=("human", "synthetic"), default="human", help="goal kind (default human)"
    )
    p.add_argument(
        "--num-products",
        type=int,
        default=None,
        help="keep the first N products / size of the generated catalog",
    )
    p.add_argument(
        "--secret",
        default=None,
        help=f"key that signs session tokens (at least {MIN_SECRET_CHARS} characters; the same "
        f"on every machine serving one shop). ${SECRET_ENV} does the same without showing it "
        "in the process list. Default: a random key kept in the cache folder",
    )
    p.add_argument(
        "--no-expert-infos",
        dest="expert_infos",
        action="store_false",
        help="refuse (403) API requests for expert_action, the goal-aware expert's next move",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=DEFAULT_THREADS,
        help=f"worker threads running requests (default {DEFAULT_THREADS})",
    )
    p.add_argument(
        "--connection-limit",
        type=int,
        default=DEFAULT_CONNECTION_LIMIT,
        help="open connections at most; more wait to be accepted "
        f"(default {DEFAULT_CONNECTION_LIMIT})",
    )
    p.add_argument(
        "--channel-timeout",
        type=int,
        default=DEFAULT_CHANNEL_TIMEOUT,
        help="seconds after which a connection with no activity and no request running is "
        f"closed (default {DEFAULT_CHANNEL_TIMEOUT})",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    problems = []
    if not 0 <= args.port <= 65535:
        problems.append(f"--port must be in [0, 65535], not {args.port}")
    for flag, value in (("--threads", args.threads), ("--connection-limit", args.connection_limit),
                        ("--channel-timeout", args.channel_timeout)):
        try:
            check_number(flag, value, ">= 1", integer=True)
        except ValueError as e:
            problems.append(str(e))
    if problems:
        print("\n".join(f"gagpo serve webshop: {p}" for p in problems), file=sys.stderr)
        return 2
    try:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the normal way to stop
            serve(
                host=args.host,
                port=args.port,
                catalog=args.catalog,
                goals=args.goals,
                num_products=args.num_products,
                threads=args.threads,
                secret=args.secret,
                expert_infos=args.expert_infos,
                connection_limit=args.connection_limit,
                channel_timeout=args.channel_timeout,
            )
    except (ServeError, OSError) as e:  # OSError: the port taken, the key file refused...
        print(f"gagpo serve webshop: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
