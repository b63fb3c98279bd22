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
import logging
import sys
from collections.abc import Sequence

from webshop_server.app import create_app
from webshop_server.goals import write_goals
from webshop_server.shop import Shop, ShopConfig

logger = logging.getLogger("webshop_server")


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    p = argparse.ArgumentParser(prog="webshop-server", description="Serve the self-hosted WebShop.")
    p.add_argument("--catalog", default="embedded", help="'embedded' (default) or a folder of original data files")
    p.add_argument("--n-products", type=int, default=1000, help="size of the embedded catalog (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the embedded catalog and its goals")
    p.add_argument(
        "--goals-file", default=None, help="serve this file's goals (from --write-goals, or the original's goal list)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=3000, help="port (default 3000)")
    p.add_argument("--workers", type=int, default=1, help="worker processes; >1 uses gunicorn (default 1)")
    p.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker (default 4)")
    p.add_argument("--cache-dir", default=None, help="search index cache folder ('' disables caching)")
    p.add_argument("--session-ttl", type=float, default=600.0, help="idle seconds before a session expires")
    p.add_argument("--show-attrs", action="store_true", help="show the Attributes button on item pages")
    p.add_argument("--access-log", action="store_true", help="log every request (off by default)")
    p.add_argument("--write-goals", metavar="PATH", default=None, help="write the goal list to PATH and exit")
    return p


def config_from_args(args: argparse.Namespace) -> ShopConfig:
    """The shop config the arguments describe (validated)."""
    return ShopConfig(
        catalog=args.catalog,
        n_products=args.n_products,
        seed=args.seed,
        goals_file=args.goals_file,
        cache_dir=args.cache_dir,
        session_ttl_s=args.session_ttl,
        show_attrs=args.show_attrs,
    )


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
