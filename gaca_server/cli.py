"""``gaca-env-server``: serve a registered GACA env over OpenEnv (HTTP + WebSocket) with uvicorn.

Examples::

    gaca-env-server --env GACA-ALFWorld-v0 --port 8000
    gaca-env-server --env GACA-ALFWorld-v0 --port 8000 data_path=/data/alfworld split=valid_seen
    gaca-env-server --env GACA-WebShop-v0 --workers 4 --max-sessions 128 'shop_config={"n_products": 1000}'

Env kwargs are ``KEY=VALUE`` words after the options; a VALUE that parses as JSON is taken as
JSON (``max_env_steps=30``, ``shop_config={...}``), any other as a string (``data_path=/data``),
except one that starts like a JSON object or list (``{``, ``[``): that must parse. A bad option
or kwarg, or an env that cannot be built with the kwargs, ends the command with one line and exit
status 2, as argparse does.
The server listens on 127.0.0.1 unless ``--host`` says otherwise. ``--workers N`` runs N
processes (each its own sessions and ``--max-sessions``); a WebSocket session stays on its
process, an HTTP session id only on the process that opened it, so HTTP sessions need one worker.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from collections.abc import Sequence
from typing import Any

from gaca_server.models import ENV_THREADS, MAX_ACTION_CHARS, MAX_HTTP_SESSIONS

_CONFIG_VARIABLE = "GACA_ENV_SERVER_CONFIG"


def parse_env_kwargs(words: Sequence[str]) -> dict[str, Any]:
    """``["max_env_steps=30", "data_path=/d"]`` -> ``{"max_env_steps": 30, "data_path": "/d"}`` (JSON where it parses).

    Raises:
        ValueError: for a word without ``=`` or with an empty key, or a VALUE that starts like a JSON
            object or list (``{``, ``[``) but does not parse.
    """
    kwargs: dict[str, Any] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"env kwargs are KEY=VALUE words (e.g. max_env_steps=30), got {word!r}")
        try:
            kwargs[key] = json.loads(value)
        except ValueError as e:
            if value.lstrip().startswith(("{", "[")):
                raise ValueError(
                    f"env kwarg {key}: {value!r:.80} is not valid JSON ({e}); quote keys and strings, e.g. "
                    f"'{key}={{\"n_products\": 5}}'"
                ) from e
            kwargs[key] = value
    return kwargs


def _port(text: str) -> int:
    """An argparse type: a TCP port, 1-65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer port, got {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port in 1-65535, got {port}")
    return port


def _seconds(text: str) -> float:
    """An argparse type: seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command-line options."""
    p = argparse.ArgumentParser(
        prog="gaca-env-server",
        description="Serve a GACA env over OpenEnv (reset/step/state over HTTP sessions and /ws WebSockets).",
    )
    p.add_argument("--env", required=True, help="registered env id, e.g. GACA-ALFWorld-v0")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s))")
    p.add_argument("--port", type=_port, default=8000, help="port, 1-65535 (default: %(default)s)")
    p.add_argument("--workers", type=int, default=1, help="server processes (default: %(default)s)")
    p.add_argument(
        "--max-sessions", type=int, default=256, help="sessions at once per process; more are refused (busy)"
    )
    p.add_argument(
        "--idle-timeout", type=_seconds, default=600.0, help="idle seconds before a session closes (0: never)"
    )
    p.add_argument("--max-request-bytes", type=int, default=4 << 20, help="largest HTTP body or WebSocket message")
    p.add_argument("--max-action-chars", type=int, default=MAX_ACTION_CHARS, help="longest action a step accepts")
    p.add_argument(
        "--env-threads",
        type=int,
        default=ENV_THREADS,
        help="worker threads per process that run env resets and steps off the event loop (default: %(default)s)",
    )
    p.add_argument(
        "--max-http-sessions",
        type=int,
        default=MAX_HTTP_SESSIONS,
        help="HTTP sessions per process; a new one past it closes the least recently used (default: %(default)s)",
    )
    p.add_argument(
        "--trust-snapshots",
        action="store_true",
        help="also restore unsigned snapshots (trusted clients only); the signing key is $GACA_SNAPSHOT_KEY, else "
        "one random key per server, shared by its --workers",
    )
    p.add_argument("--access-log", action="store_true", help="log every request")
    p.add_argument("env_kwargs", nargs="*", metavar="KEY=VALUE", help="gym.make keyword arguments of the env")
    return p


def app_from_environment() -> Any:
    """The app of the configuration in ``$GACA_ENV_SERVER_CONFIG`` (how uvicorn's worker processes build it)."""
    _skip_gradio()
    from gaca_server.app import create_server_app

    config = json.loads(os.environ[_CONFIG_VARIABLE])
    return create_server_app(config.pop("env_id"), config.pop("env_kwargs"), **config)


def _skip_gradio() -> None:
    """Keeps openenv-core from importing Gradio (half the start-up): this server never mounts its web UI."""
    sys.modules.setdefault("gradio", None)  # type: ignore[arg-type]  (None: "not installed" to the import system)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the server until interrupted; returns the exit status (2 for bad arguments)."""
    _skip_gradio()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        env_kwargs = parse_env_kwargs(args.env_kwargs)
    except ValueError as e:
        parser.error(str(e))
    for name in (
        "workers",
        "max_sessions",
        "max_request_bytes",
        "max_action_chars",
        "env_threads",
        "max_http_sessions",
    ):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    import gymnasium as gym

    from gaca_envs.registration import ENV_SPECS, register_envs

    register_envs()
    servable = [i for i in ENV_SPECS if i != "GACA-Remote-v0"]
    if args.env not in gym.registry or args.env == "GACA-Remote-v0":
        parser.error(f"env {args.env!r} is not a servable env id; choose one of {', '.join(servable)}")
    import uvicorn

    from gaca_envs.signing import KEY_ENV_VAR
    from gaca_server.app import create_server_app

    config = {
        "env_id": args.env,
        "env_kwargs": env_kwargs,
        "max_sessions": args.max_sessions,
        "idle_timeout_s": args.idle_timeout or None,
        "max_request_bytes": args.max_request_bytes,
        "max_action_chars": args.max_action_chars,
        "env_threads": args.env_threads,
        "max_http_sessions": args.max_http_sessions,
        "trust_snapshots": args.trust_snapshots,
    }
    if args.workers > 1 and not os.environ.get(KEY_ENV_VAR):
        # One key for every worker process, so a snapshot one worker signed restores on another.
        config["snapshot_key"] = secrets.token_hex(32)
    try:
        # Built here even with several workers: a bad env id or kwarg stops the command with its message.
        app = create_server_app(config["env_id"], dict(env_kwargs), **{k: config[k] for k in list(config)[2:]})
    except (ValueError, TypeError, OSError) as e:
        print(f"gaca-env-server: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001  (any failure to build the env from the command line's kwargs)
        kwargs = json.dumps(env_kwargs, default=repr)[:300]
        print(
            f"gaca-env-server: error: cannot build {args.env} with {kwargs}: {type(e).__name__}: {_one_line(e)}",
            file=sys.stderr,
        )
        return 2
    options = {
        "host": args.host,
        "port": args.port,
        "ws_max_size": args.max_request_bytes,
        "access_log": args.access_log,
        "log_level": "info",
    }
    if args.workers > 1:
        os.environ[_CONFIG_VARIABLE] = json.dumps(config)
        # Each worker imports the server and builds its app (seconds on a loaded machine): a longer
        # health-check wait than uvicorn's 5 s keeps the supervisor from restarting them meanwhile.
        uvicorn.run(
            "gaca_server.cli:app_from_environment",
            factory=True,
            workers=args.workers,
            timeout_worker_healthcheck=120,
            **options,
        )
    else:
        uvicorn.run(app, **options)
    return 0


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:1000]


if __name__ == "__main__":
    sys.exit(main())
