"""The server app: OpenEnv's :class:`HTTPEnvServer` serving a GACA env, with sessions over HTTP too.

OpenEnv's server gives ``/ws`` (one session per WebSocket: the path OpenEnv's ``EnvClient`` and
the Gymnasium client take), ``/schema``, ``/health`` and ``/metadata``, its session cap
(``max_sessions``: past it a new session gets a "Server at capacity" error, and no live episode
is evicted) and its idle-session reaper. Its HTTP ``/reset`` and ``/step`` build a fresh env per
request, which a multi-step text env cannot use, so this app replaces them with session routes:
``POST /reset`` opens a session (or resets the one named by ``session_id``) and answers its
``session_id``; ``POST /step``, ``GET /state`` and ``POST /close`` name it. ``GET /gaca/info``
describes the served env for the Gymnasium client (spaces, prompt, split, task ids).

Every bad request gets a 4xx JSON answer ``{"error": message}``: malformed JSON (400), an unknown
session (404), a body over ``max_request_bytes`` (413), fields of the wrong shape or range (422, e.g.
``seed: "abc"``), what the env refuses (a bad task id or snapshot, 400; a step after the episode
ended, 409). A full server answers 503 ("busy"). An unexpected failure answers 500 with its message,
never a traceback. A ``/reset`` that fails leaves no session behind.

**Limits.** Env work runs in one bounded worker pool per server process (``env_threads``), off the
event loop (:class:`~gaca_server.environment.GACAEnvironment`). HTTP sessions expire after
``idle_timeout_s`` like WebSocket ones, and at most ``max_http_sessions`` live at once: a new one past
that (or on a full server) closes the least recently used HTTP session, so stateless OpenEnv clients
(``POST /reset`` again and again, never ``/close``) cannot fill the server. WebSocket sessions are
never evicted.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from openenv.core.env_server import ConcurrencyConfig, HTTPEnvServer, SessionCapacityError
from openenv.core.env_server.serialization import serialize_observation
from openenv.core.env_server.types import SchemaResponse
from pydantic import ValidationError
from starlette.routing import Route
from starlette.websockets import WebSocketDisconnect

from gaca_envs.data_source import generated_data_reason
from gaca_envs.registration import ENV_SPECS
from gaca_envs.signing import resolve_key
from gaca_server.environment import GACAEnvironment, InvalidField
from gaca_server.models import (
    ENV_THREADS,
    MAX_ACTION_CHARS,
    MAX_HTTP_SESSIONS,
    GACAAction,
    GACAObservation,
    GACAState,
)
from gaca_server.pool import WorkerPool

logger = logging.getLogger("gaca_server")
# OpenEnv's stateless HTTP routes this app replaces with session routes (and /schema, with GACAState).
_REPLACED = {"/reset", "/step", "/state", "/schema"}
MAX_REQUEST_BYTES = 4 << 20


class SessionKwargs:
    """The ``gym.make`` kwargs of each new session: the served kwargs plus per-session resources.

    A WebShop env served in-process gets its own Flask app (its own shop sessions, so two sessions
    on one goal never meet) over one :class:`webshop_server.Shop` (catalog and search index) that
    the server loads once.
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any]) -> None:
        self.env_kwargs = dict(env_kwargs)
        self._shop: Any = None
        self._shop_config: Any = None
        base = env_id.split(":")[-1]
        in_process = "server_url" not in env_kwargs and "app" not in env_kwargs
        if base in ("GACA-WebShop-v0", "GACA-WebShop-v1") and in_process:
            from gaca_envs.webshop.env import shop_config_for
            from webshop_server import Shop, ShopConfig

            config = shop_config_for(base, env_kwargs.get("shop_config"))
            self._shop_config = ShopConfig(**config) if isinstance(config, dict) else config
            self._shop = Shop.from_config(self._shop_config)

    def __call__(self) -> dict[str, Any]:
        if self._shop is None:
            return dict(self.env_kwargs)
        from webshop_server import create_app

        kwargs = {k: v for k, v in self.env_kwargs.items() if k != "shop_config"}
        return {**kwargs, "app": create_app(self._shop_config, shop=self._shop)}


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


def _env_error(e: Exception) -> JSONResponse:
    """The 4xx answer to an error the env raised (its message names the field and the fix)."""
    if isinstance(e, InvalidField):
        return _error(422, str(e))
    if isinstance(e, RuntimeError):
        return _error(409, str(e))
    return _error(400, str(e))


def _validation_message(e: ValidationError | RequestValidationError) -> str:
    parts = []
    for err in e.errors():
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(parts)


class RequestGuard:
    """ASGI middleware: an HTTP request body over ``limit`` bytes gets 413 before any route reads it.

    It also ends quietly a WebSocket whose client left: OpenEnv's ``/ws`` closes the socket after a
    disconnect and Starlette raises for that, which would log a traceback per departed client.
    """

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "websocket":
            with contextlib.suppress(WebSocketDisconnect):
                await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._too_large(scope, receive, send)
            return
        seen = 0

        async def bounded_receive() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _BodyTooLarge
            return message

        try:
            await self.app(scope, bounded_receive, send)
        except _BodyTooLarge:
            await self._too_large(scope, receive, send)

    async def _too_large(self, scope: dict, receive: Callable, send: Callable) -> None:
        response = _error(413, f"request body over {self.limit} bytes (gaca-env-server --max-request-bytes)")
        await response(scope, receive, send)


class _BodyTooLarge(Exception):
    pass


def server_info(env_id: str, env_kwargs: dict[str, Any], env: gym.Env) -> dict[str, Any]:
    """What ``GET /gaca/info`` answers: the env id and kwargs, spaces, prompt, split and task ids."""
    unwrapped = env.unwrapped

    def space(s: Any) -> dict[str, Any]:
        return {
            "min_length": s.min_length,
            "max_length": s.max_length,
            "any_unicode": getattr(s, "any_unicode", False),
            "charset": "".join(sorted(s.character_set)),
        }

    task_ids = getattr(unwrapped, "task_ids", None)
    by_split = {}
    if task_ids is not None and not getattr(unwrapped, "bound_to_split", False):
        by_split = {split: list(task_ids(split)) for split in getattr(unwrapped, "splits", ())}
    return {
        "env_id": env_id,
        "env_kwargs": json.loads(json.dumps(env_kwargs, default=repr)),
        "observation_space": space(env.observation_space),
        "action_space": space(env.action_space),
        "prompt": list(getattr(unwrapped, "prompt", ("", ""))),
        "max_env_steps": getattr(unwrapped, "max_env_steps", None),
        # The episode cap under its previous name, for clients of the previous release.
        "max_steps": getattr(unwrapped, "max_env_steps", None),
        "split": getattr(unwrapped, "split", None),
        "splits": list(getattr(unwrapped, "splits", ())),
        "bound_to_split": bool(getattr(unwrapped, "bound_to_split", False)),
        "task_ids": list(task_ids) if task_ids is not None else [],
        "task_ids_by_split": by_split,
        "snapshot_kind": getattr(unwrapped, "snapshot_kind", ""),
        "generated_data_reason": generated_data_reason(env_id, env_kwargs),
    }


def create_server_app(
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    *,
    max_sessions: int = 256,
    idle_timeout_s: float | None = 600.0,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    max_action_chars: int = MAX_ACTION_CHARS,
    snapshot_key: str | bytes | None = None,
    trust_snapshots: bool = False,
    env_threads: int = ENV_THREADS,
    max_http_sessions: int = MAX_HTTP_SESSIONS,
) -> FastAPI:
    """The FastAPI app serving ``gym.make(env_id, **env_kwargs)``, one env per session.

    Args:
        env_id: a registered GACA id.
        env_kwargs: ``gym.make`` keyword arguments of every session's env (JSON values).
        max_sessions: sessions at once (WebSockets and HTTP sessions together); past it a new one is refused.
        idle_timeout_s: seconds without a message after which a session is closed (None: never).
        max_request_bytes: largest HTTP request body.
        max_action_chars: longest action a step accepts.
        snapshot_key: the key that signs the snapshots the server hands out (HMAC-SHA256); a snapshot without
            its signature, or altered, is refused. None: ``$GACA_SNAPSHOT_KEY``, else a random key of this
            process (snapshots then restore on this process only; give processes that must share them one key).
        trust_snapshots: also restore unsigned snapshots (trusted use only; signed ones are still checked).
        env_threads: worker threads that run the envs' resets and steps, off the event loop; an env that
            blocks holds one of them and only its own session.
        max_http_sessions: HTTP sessions at once; a new one past it (or on a full server) closes the least
            recently used HTTP session (never a WebSocket's).

    Raises:
        ValueError: for an unregistered ``env_id`` or a bad limit; whatever the env raises for ``env_kwargs``
            (one env is built here, so a bad argument fails at start-up).
    """
    import gaca_envs  # noqa: F401  (registers the GACA env ids)

    if env_id not in gym.registry or env_id == "GACA-Remote-v0":
        ids = ", ".join(i for i in ENV_SPECS if i != "GACA-Remote-v0")
        raise ValueError(f"env {env_id!r} is not a servable env id; choose one of {ids}")
    if max_sessions < 1:
        raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
    if idle_timeout_s is not None and idle_timeout_s <= 0:
        raise ValueError(f"idle_timeout_s must be > 0 or None, got {idle_timeout_s}")
    if env_threads < 1:
        raise ValueError(f"env_threads must be >= 1, got {env_threads}")
    if max_http_sessions < 1:
        raise ValueError(f"max_http_sessions must be >= 1, got {max_http_sessions}")
    env_kwargs = dict(env_kwargs or {})
    session_kwargs = SessionKwargs(env_id, env_kwargs)
    probe = gym.make(env_id, **session_kwargs())
    try:
        info = server_info(env_id, env_kwargs, probe)
    finally:
        probe.close()
    pool = WorkerPool(env_threads)
    # One key for all the sessions of this process: a snapshot of one session restores in any other.
    environment = functools.partial(
        GACAEnvironment, snapshot_key=resolve_key(snapshot_key), trust_snapshots=trust_snapshots
    )
    server = HTTPEnvServer(
        functools.partial(environment, env_id, session_kwargs, max_action_chars, pool),
        GACAAction,
        GACAObservation,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s),
    )
    app = FastAPI(title=f"gaca-env-server: {env_id}", version=gaca_envs.__version__)
    server.register_routes(app)
    app.router.routes[:] = [r for r in app.router.routes if not (isinstance(r, Route) and r.path in _REPLACED)]
    http_sessions = HTTPSessions(server, max_http_sessions, idle_timeout_s)
    _add_session_routes(app, server, http_sessions, info)
    app.state.gaca_server = server
    app.state.gaca_info = info
    app.state.gaca_http_sessions = http_sessions
    # Blocked workers are not waited for: a stuck env must not stall the shutdown either.
    app.router.on_shutdown.append(lambda: pool.shutdown(wait=False, cancel_futures=True))

    @app.get("/schema", tags=["Schema"], summary="JSON schemas of the action, observation and state")
    async def schema() -> SchemaResponse:
        return SchemaResponse(
            action=GACAAction.model_json_schema(),
            observation=GACAObservation.model_json_schema(),
            state=GACAState.model_json_schema(),
        )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, e: RequestValidationError) -> JSONResponse:
        return _error(422, _validation_message(e))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, e: Exception) -> JSONResponse:
        logger.exception("unexpected error on %s", request.url.path)
        return _error(500, f"internal error: {type(e).__name__}: {e}")

    app.add_middleware(RequestGuard, limit=max_request_bytes)
    return app


async def _json_body(request: Request) -> dict[str, Any] | JSONResponse:
    body = await request.body()
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        return _error(400, f"request body is not valid JSON: {e}")
    if not isinstance(data, dict):
        return _error(400, f"request body must be a JSON object, got {type(data).__name__}")
    return data


class HTTPSessions:
    """The server's HTTP sessions in least-recently-used order, capped at ``limit``; WebSocket ones are not here.

    A new HTTP session past ``limit``, or on a full server, closes the least recently used HTTP session
    first, and one idle over ``idle_timeout_s`` is closed whenever a new one opens (OpenEnv's reaper
    closes idle sessions too, every ``max(T/4, 5)`` s). The ids of the last 1,024 evicted sessions are
    kept to say so to their clients.
    """

    def __init__(self, server: HTTPEnvServer, limit: int, idle_timeout_s: float | None) -> None:
        self.server, self.limit, self.idle_timeout_s = server, limit, idle_timeout_s
        self.used: collections.OrderedDict[str, float] = collections.OrderedDict()
        self.evicted: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._lock = asyncio.Lock()

    async def open(self) -> str:
        """A new HTTP session's id, after closing what the limits say to close.

        Raises:
            SessionCapacityError: if the server is full of WebSocket sessions.
        """
        async with self._lock:
            now = time.monotonic()
            for session_id in [s for s in self.used if s not in self.server._sessions]:
                del self.used[session_id]  # closed by the reaper
            for session_id, last in list(self.used.items()):
                if self.idle_timeout_s is not None and now - last > self.idle_timeout_s:
                    await self._close(session_id, f"idle for over {self.idle_timeout_s:g} s (--idle-timeout)")
            while self.used and (
                len(self.used) >= self.limit or self.server.active_sessions >= self.server.max_concurrent_envs
            ):
                oldest = next(iter(self.used))
                await self._close(
                    oldest,
                    f"evicted as the least recently used of {self.limit} HTTP sessions (--max-http-sessions) or on a "
                    "full server (--max-sessions) to open a new one; use the WebSocket /ws for long sessions",
                )
            session_id, _ = await self.server._create_session()
            self.used[session_id] = now
            return session_id

    @property
    def count(self) -> int:
        """HTTP sessions open now (those the reaper closed are not counted)."""
        return sum(1 for session_id in self.used if session_id in self.server._sessions)

    def touch(self, session_id: str) -> None:
        """Marks ``session_id`` as just used (if it is an HTTP session)."""
        if session_id in self.used:
            self.used[session_id] = time.monotonic()
            self.used.move_to_end(session_id)
        self.server._update_session_activity(session_id)

    async def close(self, session_id: str, why: str | None = None) -> None:
        """Closes ``session_id`` (``why``: what its client hears of it later; None: closed by the client)."""
        async with self._lock:
            await self._close(session_id, why)

    async def _close(self, session_id: str, why: str | None) -> None:
        self.used.pop(session_id, None)
        if why is not None:
            self.evicted[session_id] = why
            while len(self.evicted) > 1024:
                self.evicted.popitem(last=False)
        await self.server._destroy_session(session_id)


def _add_session_routes(app: FastAPI, server: HTTPEnvServer, http: HTTPSessions, info: dict[str, Any]) -> None:
    """``/reset``, ``/step``, ``/state``, ``/close`` over session ids, and ``/gaca/info``."""

    def session(session_id: Any) -> Any:
        if not isinstance(session_id, str) or not session_id:
            return _error(422, f"session_id must be the non-empty string /reset answered, got {session_id!r:.80}")
        env = server._sessions.get(session_id)
        if env is None:
            why = http.evicted.get(session_id, "it was closed, timed out or never opened")
            return _error(404, f"unknown session_id {session_id[:80]!r}: {why}")
        return env

    async def named_session(request: Request) -> tuple[dict[str, Any], Any] | JSONResponse:
        """The request's JSON body and the session its ``session_id`` names, or the 4xx answer."""
        data = await _json_body(request)
        if isinstance(data, JSONResponse):
            return data
        env = session(data.get("session_id"))
        return env if isinstance(env, JSONResponse) else (data, env)

    @app.post("/reset", tags=["Environment Control"], summary="Open a session (or reset one) and start an episode")
    async def reset(request: Request) -> Any:
        data = await _json_body(request)
        if isinstance(data, JSONResponse):
            return data
        session_id, created = data.pop("session_id", None), False
        if session_id is None:
            try:
                session_id = await http.open()
            except SessionCapacityError as e:
                return _error(503, f"busy: {e}", active_sessions=e.active_sessions, max_sessions=e.max_sessions)
            created = True
        env = session(session_id)
        if isinstance(env, JSONResponse):
            return env
        opened = False
        try:
            observation = await env.reset_async(**data)
            opened = True
        except (ValueError, TypeError, RuntimeError) as e:
            return _env_error(e)
        finally:
            if created and not opened:  # nobody was told its id: a failed reset leaves no session behind
                await http.close(session_id)
        http.touch(session_id)
        return {**serialize_observation(observation), "session_id": session_id}

    @app.post("/step", tags=["Environment Control"], summary="Take one action in a session")
    async def step(request: Request) -> Any:
        found = await named_session(request)
        if isinstance(found, JSONResponse):
            return found
        data, env = found
        try:
            action = GACAAction.model_validate(data.get("action"))
        except ValidationError as e:
            return _error(422, _validation_message(e).replace("invalid request: ", "invalid request: action."))
        http.touch(data["session_id"])
        try:
            observation = await env.step_async(action)
        except (ValueError, TypeError, RuntimeError) as e:
            return _env_error(e)
        http.touch(data["session_id"])
        server._update_session_activity(data["session_id"], increment_step=True)
        return serialize_observation(observation)

    @app.get("/state", tags=["State Management"], summary="A session's episode and its snapshot")
    async def state(session_id: str | None = None) -> Any:
        env = session(session_id)
        if isinstance(env, JSONResponse):
            return env
        http.touch(session_id)
        try:
            return (await env.state_async()).model_dump()
        except (ValueError, TypeError, RuntimeError) as e:
            return _env_error(e)

    @app.post("/close", tags=["Environment Control"], summary="Close a session")
    async def close(request: Request) -> Any:
        found = await named_session(request)
        if isinstance(found, JSONResponse):
            return found
        await http.close(found[0]["session_id"])
        return {"session_id": found[0]["session_id"], "closed": True}

    @app.get("/gaca/info", tags=["Environment Info"], summary="The served env: id, kwargs, spaces, prompt, tasks")
    async def gaca_info() -> dict[str, Any]:
        return {
            **info,
            "active_sessions": server.active_sessions,
            "max_sessions": server.max_concurrent_envs,
            "http_sessions": http.count,
            "max_http_sessions": http.limit,
        }
