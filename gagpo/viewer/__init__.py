"""``gagpo view``: a run's learning curves and its rollouts, step credit included, in a
browser (:mod:`gagpo.viewer.app`). Reads run folders as the trainer writes them; imports
nothing of the trainer's loop, the policies or torch."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(prog="gagpo view", description=__doc__)
    p.add_argument("run_dirs", nargs="*", metavar="RUN_DIR",
                   help="run folders (gagpo train --out-dir) or evaluation folders (gagpo eval "
                        "--out) to show; several overlay their curves. Default: every run "
                        "under --root")
    p.add_argument("--root", default="runs", help="where to look for runs when none is named")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: this machine only)")
    p.add_argument("--port", type=int, default=3100)
    p.add_argument("--shop", default=None, metavar="URL",
                   help="a live shop (gagpo serve webshop) that WebShop steps' links open. "
                        "Default: the viewer renders those pages itself, from each run's "
                        "catalog and goals")
    p.add_argument("--threads", type=int, default=4)
    return p


def main(argv: Sequence[str] | None = None, args: argparse.Namespace | None = None) -> int:
    """Serve the viewer with waitress until interrupted.

    Raises:
        ValueError: it cannot listen on ``--host``/``--port`` (the port in use...); ``gagpo
            view`` prints it and exits 2.
    """
    from waitress.server import create_server

    from gagpo.common.addresses import listen_error
    from gagpo.viewer.app import create_app

    args = args or build_parser().parse_args(argv)
    app = create_app(args.run_dirs or None, root=args.root, shop_url=args.shop)
    try:
        server = create_server(app, host=args.host, port=args.port, threads=args.threads,
                               ident="gagpo-view")
    except OSError as e:
        raise listen_error("gagpo view", args.host, args.port, e) from None
    host = f"[{args.host}]" if ":" in args.host else args.host
    what = ", ".join(args.run_dirs) if args.run_dirs else f"the runs under {args.root}/"
    print(f"gagpo view: {what} at http://{host}:{args.port}/ (Ctrl-C stops)", flush=True)
    try:
        server.run()
    finally:
        server.close()
    return 0
