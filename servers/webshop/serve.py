"""Serve the shop with waitress, a production WSGI server (never Flask's debug server).

``gagpo serve webshop`` calls :func:`main`. One process with ``threads`` worker threads is
plenty for one machine; for more, run the app under any WSGI server with several workers
(``create_app`` keeps no per-session state, so workers and hosts need no coordination as long
as they share ``$GAGPO_WEBSHOP_SECRET`` or the catalog).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence

from servers.webshop.app import create_app


def serve(
    host: str = "127.0.0.1",
    port: int = 3000,
    catalog: str | None = None,
    goals: str = "human",
    num_products: int | None = None,
    threads: int = 8,
) -> None:
    """Build the shop and serve it until interrupted (blocks)."""
    import waitress

    app = create_app(catalog=catalog, goals=goals, num_products=num_products)
    shop = app.extensions["gagpo_webshop"]
    shown = f"[{host}]" if ":" in host else host
    print(
        f"WebShop: {len(shop.catalog)} products, {len(shop.goals)} {goals} goals\n"
        f"  pages: http://{shown}:{port}/fixed_0\n"
        f"  API:   http://{shown}:{port}/api/v1/info",
        flush=True,
    )
    waitress.serve(app, host=host, port=port, threads=threads, ident="gagpo-webshop")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gagpo serve webshop",
        description="Serve the WebShop pages (for people and browsers) and its JSON API.",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only)",
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
    p.add_argument("--threads", type=int, default=8, help="waitress worker threads (default 8)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not 0 <= args.port <= 65535:
        print(f"invalid port {args.port}", file=sys.stderr)
        return 2
    if args.threads < 1:
        print("--threads must be at least 1", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the normal way to stop
        serve(
            host=args.host,
            port=args.port,
            catalog=args.catalog,
            goals=args.goals,
            num_products=args.num_products,
            threads=args.threads,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
