"""``webshop-server``: serve WebShop over HTTP.

One worker runs Werkzeug's threaded server (never in debug mode); ``--workers N`` (N > 1) runs
gunicorn with N processes forked after the catalog and index are loaded once (``preload_app``),
so they share them copy-on-write. Access logging is off unless ``--access-log`` is given.

Examples::

    webshop-server --port 3000
    webshop-server --catalog data/ --workers 4 --port 3000
    webshop-server --write-goals goals.json        # publish the goal list and exit
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import typing
from collections.abc import Sequence

from webshop_server.app import create_app
from webshop_server.goals import write_goals
from webshop_server.shop import Shop, ShopConfig

logger = logging.getLogger("webshop_server")


# Older spellings that keep working next to the generated ``--field-name`` option.
_ALIASES: dict[str, tuple[str, ...]] = {"session_ttl_s": ("--session-ttl",)}


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """Adds one ``--field-name`` option per :class:`ShopConfig` field: its type, default and help.

    The options are generated from the dataclass, so a new ShopConfig field reaches the command
    line without a second declaration. A bool field gets ``--name`` / ``--no-name``; an optional
    one (``str | None``) takes its inner type and defaults to None.
    """
    hints = typing.get_type_hints(ShopConfig)
    group = parser.add_argument_group("shop", "ShopConfig fields (webshop_server.shop.ShopConfig)")
    for f in dataclasses.fields(ShopConfig):
        kind = hints[f.name]
        inner = [t for t in typing.get_args(kind) if t is not type(None)]
        if inner:  # X | None
            (kind,) = inner
        names = (f"--{f.name.replace('_', '-')}", *_ALIASES.get(f.name, ()))
        help_text = f"{f.metadata.get('help', '')} (default: %(default)s)"
        if kind is bool:
            group.add_argument(
                *names, action=argparse.BooleanOptionalAction, default=f.default, dest=f.name, help=help_text
            )
        else:
            group.add_argument(*names, type=kind, default=f.default, dest=f.name, help=help_text)


def build_parser() -> argparse.ArgumentParser:
    """The command-line options: the shop's (generated from ShopConfig) and the server's."""
    p = argparse.ArgumentParser(prog="webshop-server", description="Serve the self-hosted WebShop.")
    add_config_options(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=3000, help="port (default 3000)")
    p.add_argument("--workers", type=int, default=1, help="worker processes; >1 uses gunicorn (default 1)")
    p.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker (default 4)")
    p.add_argument("--access-log", action="store_true", help="log every request (off by default)")
    p.add_argument("--write-goals", metavar="PATH", default=None, help="write the goal list to PATH and exit")
    return p


def config_from_args(args: argparse.Namespace) -> ShopConfig:
    """The shop config the arguments describe (validated)."""
    return ShopConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ShopConfig)})


def serve_gunicorn(app, host: str, port: int, workers: int, threads: int, access_log: bool) -> None:
    """Runs ``app`` (already loaded) under gunicorn with ``workers`` forked processes."""
    from gunicorn.app.base import BaseApplication

    class _Server(BaseApplication):
        def load_config(self) -> None:
            settings = {
                "bind": f"{host}:{port}",
                "workers": workers,
                "threads": threads,
                "worker_class": "gthread",
                "preload_app": True,
                "accesslog": "-" if access_log else None,
                "errorlog": "-",
                "loglevel": "warning",
                "limit_request_line": 8190,
                "graceful_timeout": 5,
            }
            for key, value in settings.items():
                self.cfg.set(key, value)

        def load(self):
            return app

    _Server().run()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``webshop-server``; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s webshop-server %(levelname)s %(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    if args.workers < 1 or not 0 < args.port < 65536:
        print(f"webshop-server: --workers must be >= 1 and --port in 1..65535, got {args.workers}, {args.port}",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        config = config_from_args(args)
        shop = Shop.from_config(config)
    except (ValueError, FileNotFoundError) as e:
        print(f"webshop-server: {e}", file=sys.stderr)
        return 2
    if args.write_goals:
        write_goals(args.write_goals, shop.goals, shop.catalog.source)
        logger.info("wrote %d goals to %s", len(shop.goals), args.write_goals)
        return 0
    app = create_app(config, shop=shop)
    logger.info(
        "serving %d products, %d goals from %s on http://%s:%d (%d worker%s)",
        len(shop.catalog), len(shop.goals), shop.catalog.source, args.host, args.port, args.workers,
        "s" if args.workers > 1 else "",
    )  # fmt: skip
    if args.workers > 1:
        serve_gunicorn(app, args.host, args.port, args.workers, args.threads, args.access_log)
        return 0
    from werkzeug.serving import run_simple

    if not args.access_log:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
    run_simple(args.host, args.port, app, threaded=True, use_reloader=False, use_debugger=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
