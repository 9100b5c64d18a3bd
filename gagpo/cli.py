"""The ``gagpo`` command line: ``gagpo serve webshop``, ``gagpo demo``."""

from __future__ import annotations

import argparse
import sys


def _serve(args: argparse.Namespace) -> int:
    from servers.webshop.serve import serve

    serve(
        host=args.host,
        port=args.port,
        catalog=args.catalog,
        goals=args.goals,
        num_products=args.num_products,
        threads=args.threads,
    )
    return 0


def _demo(args: argparse.Namespace) -> int:
    from gagpo.demo import run_demo

    run_demo(episodes=args.episodes)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gagpo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve an environment for people and programs")
    serve_sub = serve.add_subparsers(dest="env", required=True)
    shop = serve_sub.add_parser("webshop", help="the WebShop shop (HTML pages and a JSON API)")
    shop.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    shop.add_argument("--port", type=int, default=3000)
    shop.add_argument("--catalog", default=None,
                      help="folder of the original WebShop data files (default: embedded)")
    shop.add_argument("--goals", choices=["human", "synthetic"], default="human")
    shop.add_argument("--num-products", type=int, default=None,
                      help="first N products of --catalog, or the generated catalog's size")
    shop.add_argument("--threads", type=int, default=8, help="server worker threads")
    shop.set_defaults(func=_serve)

    demo = sub.add_parser("demo", help="the main job on the embedded defaults")
    demo.add_argument("--episodes", type=int, default=500)
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except (FileNotFoundError, ValueError) as e:
        print(f"gagpo: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
