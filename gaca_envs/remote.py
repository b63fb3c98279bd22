"""``GACA-Remote-v0``: a GACA env played on a ``gaca-env-server`` (OpenEnv), as a Gymnasium env.

    env = gym.make("GACA-Remote-v0", url="http://10.0.0.5:8000", env_id="GACA-ALFWorld-v0")

The server (``gaca-env-server --env GACA-ALFWorld-v0 ...``, package ``gaca_server``) runs the
env; this client holds one session on it over OpenEnv's ``/ws`` WebSocket protocol and answers
``reset`` and ``step`` with the observations and info the env gives locally (DESIGN.md contract 1):
an episode played here equals, step by step, one played in-process with the server's env kwargs.
``env.unwrapped`` offers what the trainer and ``gaca_envs.trl`` read from a local env:
``prompt``, ``max_env_steps``, ``split``, ``bound_to_split``, ``task_ids``, ``save_state()`` and
``reset(options={"snapshot": ...})``.

**Errors.** What the env refuses raises what it raises locally (ValueError for a bad task id or
snapshot, RuntimeError for a step after the episode ended), with the env's message. A lost
connection or a server that dies mid-episode raises :class:`ConnectionError` naming the episode:
nothing is reset behind the caller's back; the next ``reset`` connects again. A full server
raises :class:`EnvServerError` ("busy"). A server that does not answer raises within its time-out
plus a second: :class:`ConnectionError` after ``connect_timeout_s`` when no session opens,
:class:`TimeoutError` after ``step_timeout_s`` for a reset, step or state (the connection is then
cut, not closed politely: a frozen server would not answer the close either). Needs the
``websockets`` package (extra ``server``).

Version history: v0 (initial).
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import gymnasium as gym

from gaca_envs.anchors import INFO_KEYS
from gaca_envs.spaces import TextSpace
from gaca_envs.task_env import EnvSnapshot, TaskEnv, TaskIds, deprecated_max_steps, resolve_max_env_steps

_RAISES = {"ValueError: ": ValueError, "TypeError: ": TypeError, "RuntimeError: ": RuntimeError}
_SESSION_CLOSED = "SessionClosed: "
# Seconds a polite close waits for the server's answer (websockets waits 10 by default); past it the socket is cut.
CLOSE_TIMEOUT_S = 1.0


class EnvServerError(RuntimeError):
    """The env server refused a request for a reason of its own (busy, a malformed message)."""


def fetch_server_info(url: str, timeout_s: float = 10.0) -> dict[str, Any]:
    """``GET {url}/gaca/info``: the served env id, kwargs, spaces, prompt, split and task ids.

    Raises:
        ConnectionError: if no GACA env server answers at ``url`` (the message says how to start one).
    """
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/gaca/info", timeout=timeout_s) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise ConnectionError(
            f"no GACA env server answers at {url} ({e}); start one with "
            "`gaca-env-server --env GACA-ALFWorld-v0 --port 8000` (pip install 'gaca[server]')"
        ) from e


class RemoteEnv(gym.Env[str, str]):
    """A GACA env on a ``gaca-env-server``; see the module docstring.

    **Observation**, **actions**, **reward**, **episode end** and **info**: the served env's.

    Args:
        url: the server's base URL, e.g. ``"http://127.0.0.1:8000"``.
        env_id: the env id expected on the server (None: whatever it serves); another id is an error.
        connect_timeout_s: seconds to reach the server (its ``/gaca/info`` answer, then the session's handshake).
        step_timeout_s: seconds to wait for one reset, step or state answer; past it :class:`TimeoutError`
            is raised within a second and the session is dropped.
        render_mode: None or ``"ansi"`` (the last observation).
        **env_kwargs: kwargs the served env must have been built with (the server's, or the env's
            ``split``); a difference is an error, since the server, not this client, builds the env.

    Raises:
        ConnectionError: if no server answers at ``url``.
        ValueError: for another env id or env kwargs than the server's.
    """

    metadata = {"render_modes": ["ansi"]}
    max_steps = deprecated_max_steps

    def __init__(
        self,
        url: str,
        env_id: str | None = None,
        *,
        connect_timeout_s: float = 10.0,
        step_timeout_s: float = 120.0,
        render_mode: str | None = None,
        **env_kwargs: Any,
    ) -> None:
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("http", "https", "ws", "wss") or not parsed.netloc:
            raise ValueError(f"url must be the env server's http:// address, e.g. http://127.0.0.1:8000, got {url!r}")
        scheme = {"http": "http", "ws": "http", "https": "https", "wss": "https"}[parsed.scheme]
        self.url = f"{scheme}://{parsed.netloc}{parsed.path.rstrip('/')}"
        self.connect_timeout_s, self.step_timeout_s = connect_timeout_s, step_timeout_s
        self.render_mode = render_mode
        if "max_steps" in env_kwargs:
            old = env_kwargs.pop("max_steps")
            env_kwargs["max_env_steps"] = resolve_max_env_steps(env_kwargs.pop("max_env_steps", None), old, None)
        self.server_info = info = fetch_server_info(self.url, connect_timeout_s)
        self.env_id = info["env_id"]
        if env_id is not None and env_id.split(":")[-1] != self.env_id:
            raise ValueError(f"the server at {self.url} serves {self.env_id}, not env_id={env_id!r}")
        self._check_kwargs(env_kwargs)
        self.observation_space = _space(info["observation_space"])
        self.action_space = _space(info["action_space"])
        self.prompt = tuple(info["prompt"]) if info.get("prompt") else TaskEnv.prompt
        # A server of the previous release sends the episode cap as max_steps only.
        self.max_env_steps = info["max_env_steps"] if "max_env_steps" in info else info["max_steps"]
        self.split = info["split"]
        self.splits, self.bound_to_split = tuple(info["splits"]), info["bound_to_split"]
        self.snapshot_kind = info["snapshot_kind"]
        self._ws: Any = None
        self._observation = ""
        self._task_id: str | None = None
        self._steps = 0
        self._in_episode = False
        self._refused = False  # a snapshot refused here: steps are refused until a reset, as by a local env

    def _check_kwargs(self, env_kwargs: dict[str, Any]) -> None:
        served = dict(self.server_info["env_kwargs"])
        if "max_steps" in served and "max_env_steps" not in served:  # a server started with the old spelling
            served["max_env_steps"] = served.pop("max_steps")
        for key, value in env_kwargs.items():
            if key == "split" and "split" not in served:
                if value != self.server_info["split"]:
                    raise ValueError(
                        f"the server at {self.url} plays split {self.server_info['split']!r}, not split={value!r}; "
                        f"start a server with split={value}"
                    )
                continue
            mine = json.loads(json.dumps(value, default=repr))
            if key not in served or served[key] != mine:
                raise ValueError(
                    f"env kwarg {key}={mine!r:.200} differs from the server's "
                    f"({served.get(key, 'not set')!r:.200}; it serves {self.env_id} with {served!r:.300}): "
                    f"the server builds the env, so start it with {key}={json.dumps(mine)[:200]}"
                )

    @property
    def task_ids(self) -> TaskIds:
        """The served env's task ids (a list, callable as ``task_ids(split)`` like a local env's)."""
        by_split = self.server_info.get("task_ids_by_split") or {}
        of_split = None if self.bound_to_split else (lambda split: list(by_split.get(split, [])))
        return TaskIds(list(self.server_info["task_ids"]), self.split, self.splits, of_split)

    # Connection ------------------------------------------------------------------------------
    def _connect(self) -> None:
        try:
            from websockets.sync.client import connect
        except ImportError as e:
            raise ImportError("GACA-Remote-v0 needs the websockets package: pip install 'gaca[server]'") from e
        ws_url = "ws" + self.url[len("http") :] + "/ws"
        try:
            # Entered as a context manager (websockets 17 warns otherwise); _drop closes it.
            connection = connect(ws_url, open_timeout=self.connect_timeout_s, close_timeout=CLOSE_TIMEOUT_S,
                                 max_size=None, compression=None)  # fmt: skip
            self._ws = connection.__enter__()
        except Exception as e:  # any failure to connect is one error to the caller
            raise ConnectionError(f"cannot open a session on the env server at {self.url}: {e}") from e

    def _drop(self, cut: bool = False) -> None:
        """Closes the session's connection: politely (within :data:`CLOSE_TIMEOUT_S`), or with ``cut`` at once."""
        if self._ws is not None:
            with contextlib.suppress(Exception):  # closing a broken connection may fail; it is gone either way
                if cut and hasattr(self._ws, "close_socket"):
                    self._ws.close_socket()
                else:
                    self._ws.close()
            self._ws = None

    def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        """Sends one message on the session and returns the answer's ``data``.

        Raises:
            ConnectionError: if the connection is lost (mid-episode, named), TimeoutError past ``step_timeout_s``.
            ValueError, TypeError, RuntimeError: what the env raised; EnvServerError: what the server refused.
        """
        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            self._connect()
        try:
            self._ws.send(json.dumps(message))
            answer = json.loads(self._ws.recv(timeout=self.step_timeout_s))
        except TimeoutError as e:
            self._drop(cut=True)  # a server that did not answer in time would not answer a close either
            raise TimeoutError(
                f"the env server at {self.url} did not answer a {message['type']} within {self.step_timeout_s} s"
                f"{self._where()}; the session is dropped"
            ) from e
        except (ConnectionClosed, OSError) as e:
            # A server that refuses a session (busy) answers with an error and closes at once: read it.
            answer = self._last_words()
            self._drop()
            if answer is None:
                raise ConnectionError(
                    f"lost the connection to the env server at {self.url}{self._where()}: {e}"
                ) from e
        if answer.get("type") == "error":
            data = answer.get("data") or {}
            text = str(data.get("message", "unknown error"))
            for prefix, kind in _RAISES.items():
                if text.startswith(prefix):
                    raise kind(text[len(prefix) :])
            if data.get("code") == "CAPACITY_REACHED":
                self._drop()
                raise EnvServerError(f"env server at {self.url} is busy: {text}")
            raise EnvServerError(f"env server at {self.url}: {text} (code {data.get('code', 'unknown')})")
        return answer.get("data") or {}

    def _last_words(self) -> dict[str, Any] | None:
        """A message the server sent before it closed the connection, if any."""
        try:
            return json.loads(self._ws.recv(timeout=0))
        except Exception:  # closed with nothing left to read
            return None

    def _where(self) -> str:
        if not self._in_episode:
            return ""
        return (
            f" during an episode of task {self._task_id!r} at step {self._steps}; the episode is lost and nothing "
            "was reset: call reset() to start a new one (or reset(options={'snapshot': s}) from a saved snapshot)"
        )

    # Gymnasium API ---------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Starts an episode on the server: ``options={"task_id": ...}`` or ``{"snapshot": ...}`` as locally.

        Raises:
            ValueError: for options other than task_id or snapshot, or what the env refuses.
        """
        super().reset(seed=seed)
        options = dict(options or {})
        snapshot = self._snapshot_to_send(options) if "snapshot" in options else None
        unknown = sorted(set(options) - {"task_id", "snapshot"})
        if unknown:
            raise ValueError(f"reset options of GACA-Remote-v0 are task_id and snapshot; got {unknown}")
        data: dict[str, Any] = {"seed": seed, **options}
        if snapshot is not None:
            data["snapshot"] = snapshot
        self._in_episode = False
        try:
            result = self._call({"type": "reset", "data": data})
        except RuntimeError as e:
            if _SESSION_CLOSED not in str(e):
                raise
            self._drop()  # the server closed the idle session: a reset starts afresh anyway
            result = self._call({"type": "reset", "data": data})
        observation, _, _, _, info = self._unpack(result)
        self._task_id, self._steps, self._in_episode, self._refused = info.get("task_id"), 0, True, False
        return observation, info

    def _snapshot_to_send(self, options: dict[str, Any]) -> dict[str, Any]:
        """The ``snapshot`` option as the server takes it (an ``EnvSnapshot``, or its ``to_dict()`` form).

        Refused here as a local env refuses it, with the same error and message, and then, as
        there, the env needs a reset: ``None`` or another type is a TypeError (never a random new
        task), a malformed dict or other options next to it a ValueError.
        """
        try:
            if len(options) > 1:
                raise ValueError(f"reset options with 'snapshot' may contain nothing else, got {sorted(options)}")
            snapshot = options["snapshot"]
            if isinstance(snapshot, dict):
                snapshot = EnvSnapshot.from_dict(snapshot)
            if not isinstance(snapshot, EnvSnapshot):
                raise TypeError(f"snapshot must come from save_state(), got {type(snapshot).__name__}")
        except (TypeError, ValueError):
            self._refused, self._in_episode = True, False
            raise
        return snapshot.to_dict()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Takes ``action`` on the server (a non-str action raises TypeError here, as locally)."""
        if not isinstance(action, str):
            raise TypeError(f"action must be a str, got {type(action).__name__}: {action!r:.80}")
        if self._refused:
            raise RuntimeError("step() called before reset() or after the episode ended; call env.reset() first")
        result = self._call({"type": "step", "data": {"action": action}})
        self._steps += 1
        out = self._unpack(result)
        if out[2] or out[3]:
            self._in_episode = False
        return out

    def _unpack(self, result: dict[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        fields = result.get("observation") or {}
        info = {key: fields[key] for key in INFO_KEYS if key in fields}
        info.update(fields.get("info") or {})
        self._observation = fields.get("observation", "")
        reward = result.get("reward")
        return (
            self._observation,
            0.0 if reward is None else float(reward),
            bool(fields.get("terminated")),
            bool(fields.get("truncated")),
            info,
        )

    def save_state(self) -> EnvSnapshot:
        """The server's snapshot of the episode (``EnvSnapshot``), for ``reset(options={"snapshot": ...})``.

        Raises:
            RuntimeError: before the first reset, or for an env without snapshots.
        """
        if self._ws is None:
            raise RuntimeError("save_state() called before reset(); call env.reset() first")
        state = self._call({"type": "state"})
        if state.get("snapshot") is None:
            raise RuntimeError(f"the served {self.env_id} has no snapshot of this session (no episode, or no support)")
        return EnvSnapshot.from_dict(state["snapshot"])

    def render(self) -> str | None:
        """The last observation with ``render_mode="ansi"``."""
        return self._observation if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Closes the session (the server frees its env when the WebSocket closes)."""
        self._drop()
        super().close()


def _space(spec: dict[str, Any]) -> TextSpace:
    kwargs: dict[str, Any] = {"min_length": spec["min_length"], "any_unicode": spec["any_unicode"]}
    if spec.get("charset"):
        kwargs["charset"] = spec["charset"]
    return TextSpace(spec["max_length"], **kwargs)
