"""A GACA env behind OpenEnv's :class:`~openenv.core.env_server.interfaces.Environment` interface.

One instance per session: the server's factory builds a fresh ``gym.make(env_id, **env_kwargs)``
for every WebSocket (or HTTP session id), so sessions share nothing but what the kwargs inject
(WebShop's in-process shop, built once per server process).

Errors keep the env's own type in their message (``"ValueError: task_id ..."``), so the
Gymnasium client raises what the local env would; OpenEnv's clients see the message. A reset
field of the wrong type or range (``seed="abc"``, ``seed=-1``) raises :class:`InvalidField`
(a ValueError, HTTP 422) before the env sees it.

**Off the event loop.** Given an ``executor`` (the server's bounded worker pool), ``reset_async``
and ``step_async`` run the env's work in it, one call at a time per session: an env that blocks
(a slow file, a stuck step) holds one worker and its own session, never the server's event loop,
``/health`` or the other sessions.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

import gymnasium as gym
import gymnasium.error
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

import gaca_envs  # noqa: F401  (registers the GACA env ids)
from gaca_envs.anchors import INFO_KEYS
from gaca_envs.signing import is_signed, resolve_key, sign, verify
from gaca_envs.task_env import EnvSnapshot
from gaca_server.models import MAX_ACTION_CHARS, GACAAction, GACAObservation, GACAState

# The start of the message a session answers once the server closed it (idle time-out, shutdown);
# the Gymnasium client reconnects on a reset that gets it.
SESSION_CLOSED = "SessionClosed: "
# The largest reset seed taken (NumPy's seeding takes any non-negative int; this bounds the work a client can ask).
MAX_SEED = 2**64 - 1
_T = TypeVar("_T")
_TYPED = (ValueError, TypeError, RuntimeError)


class InvalidField(ValueError):
    """A request field of the wrong type or range (``seed="abc"``): HTTP 422, and no session is left behind."""


def _typed_errors(method: Callable[..., _T]) -> Callable[..., _T]:
    """Re-raises the env's ValueError, TypeError and RuntimeError with their type name leading the message.

    Gymnasium's own ``gymnasium.error.Error`` (e.g. a seed NumPy refuses) becomes a ValueError.
    """

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> _T:
        try:
            return method(*args, **kwargs)
        except (*_TYPED, gymnasium.error.Error) as e:
            name = next((kind.__name__ for kind in _TYPED if isinstance(e, kind)), "ValueError")
            if str(e).startswith((f"{name}: ", SESSION_CLOSED)):
                raise
            kind = type(e) if isinstance(e, _TYPED) else ValueError
            raise kind(f"{name}: {e}") from e

    return wrapper


def check_reset_fields(seed: Any, task_id: Any, snapshot: Any, episode_id: Any, env_id: Any) -> None:
    """Checks the types and ranges of a reset's fields, as they come from a client's JSON.

    Raises:
        InvalidField: naming the field, the value and what is expected.
    """
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED):
        raise InvalidField(f"seed must be an integer in [0, 2**64 - 1] or null, got {seed!r:.80}")
    for name, value in (("task_id", task_id), ("episode_id", episode_id), ("env_id", env_id)):
        if value is not None and not isinstance(value, str):
            raise InvalidField(f"{name} must be a string or null, got {type(value).__name__} {value!r:.80}")
    if snapshot is not None and not isinstance(snapshot, dict):
        raise InvalidField(
            f"snapshot must be an object (the snapshot /state answered) or null, got {type(snapshot).__name__}"
        )


class GACAEnvironment(Environment[GACAAction, GACAObservation, GACAState]):
    """``gym.make(env_id, **env_kwargs)`` as an OpenEnv environment.

    ``reset(seed=, task_id=, snapshot=, episode_id=, env_id=)`` starts an episode (``snapshot``:
    an ``EnvSnapshot.to_dict()`` value, as ``state`` returns it); ``step(GACAAction)`` takes one
    action; ``state`` reports the episode with its snapshot. Observations carry the info contract
    (:class:`~gaca_server.models.GACAObservation`).

    Args:
        env_id: a registered GACA id.
        env_kwargs: ``gym.make`` keyword arguments, or a callable returning them for each new
            session (:class:`gaca_server.app.SessionKwargs`: per-session resources).
        max_action_chars: the longest action a step accepts.
        snapshot_key: the key that signs the snapshots ``state`` hands out and checks those ``reset``
            takes (HMAC-SHA256, :mod:`gaca_envs.signing`); None: ``$GACA_SNAPSHOT_KEY``, else a random
            key of this instance. A server passes one key to all its sessions, so that a snapshot
            restores in any of them (``create_server_app(snapshot_key=...)``).
        trust_snapshots: also restore unsigned snapshots (trusted in-process use); a signed one is
            still checked. Default False: a snapshot without this server's signature is refused.
        executor: the server's worker pool that ``reset_async`` and ``step_async`` run the env in (None:
            on the calling event loop, for trusted in-process use only).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, Any] | Callable[[], dict[str, Any]],
        max_action_chars: int = MAX_ACTION_CHARS,
        executor: Executor | None = None,
        *,
        snapshot_key: str | bytes | None = None,
        trust_snapshots: bool = False,
    ) -> None:
        super().__init__()
        self.env_id = env_id
        # Snapshots leave the server signed with this key and come back checked against it (gaca_envs.signing).
        self._snapshot_key = resolve_key(snapshot_key)
        self._trust_snapshots = trust_snapshots
        self.max_action_chars = max_action_chars
        self._executor = executor
        self._one_at_a_time: asyncio.Lock | None = None
        self.env = gym.make(env_id, **(env_kwargs() if callable(env_kwargs) else env_kwargs))
        self._episode_id: str | None = None
        self._task_id: str | None = None
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(
                f"{SESSION_CLOSED}the server closed this session (idle time-out or shutdown); the episode is lost. "
                "Connect again and reset"
            )

    @_typed_errors
    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        snapshot: dict[str, Any] | None = None,
        env_id: str | None = None,
        **unknown: Any,
    ) -> GACAObservation:
        """Starts an episode on ``task_id`` (or the env's draw), or returns to ``snapshot``.

        Raises:
            InvalidField: for a field of the wrong type or range (a seed that is not a non-negative integer).
            ValueError: for an unknown argument, another env id than the served one, both a task id
                and a snapshot, a snapshot that is not a valid ``EnvSnapshot.to_dict()`` value, or
                whatever the env refuses.
        """
        self._check_open()
        if snapshot is not None:
            self._discard_episode()  # whatever is refused below, the session's old episode is over (as in-process)
        check_reset_fields(seed, task_id, snapshot, episode_id, env_id)
        if unknown:
            raise ValueError(
                f"reset takes seed, task_id, snapshot, episode_id and env_id; got unknown {', '.join(sorted(unknown))}"
            )
        if env_id is not None and env_id != self.env_id:
            raise ValueError(f"this server serves {self.env_id}, not env_id={env_id!r}; connect to a server of it")
        if task_id is not None and snapshot is not None:
            raise ValueError("pass task_id or snapshot, not both (a snapshot holds its task)")
        options: dict[str, Any] = {}
        if task_id is not None:
            options["task_id"] = task_id
        if snapshot is not None:
            options["snapshot"] = self._accept_snapshot(snapshot)
        observation, info = self.env.reset(seed=seed, options=options or None)
        self._episode_id = episode_id or uuid.uuid4().hex
        self._task_id = info.get("task_id")
        return self._observation(observation, info, None, False, False)

    def _accept_snapshot(self, snapshot: dict[str, Any]) -> EnvSnapshot:
        """The snapshot a client sent: its shape checked as in-process, then its signature (unsigned ones pass only
        with ``trust_snapshots``).

        Raises:
            ValueError: for a dict that is not a snapshot (naming the field), or a missing or wrong signature.
        """
        parsed = EnvSnapshot.from_dict(snapshot)
        if is_signed(snapshot) or not self._trust_snapshots:
            verify(snapshot, self._snapshot_key)
        return parsed

    def _discard_episode(self) -> None:
        """Ends the session's episode without a result: its next step is refused until a reset succeeds."""
        discard = getattr(self.env.unwrapped, "discard_episode", None)
        if discard is not None:
            discard()
        self._episode_id = self._task_id = None

    @_typed_errors
    def step(self, action: GACAAction, timeout_s: float | None = None, **kwargs: Any) -> GACAObservation:
        """Takes ``action.action`` in the env.

        Raises:
            ValueError: for an action longer than ``max_action_chars``.
            RuntimeError: before a reset or after the episode ended (the env's own error).
        """
        self._check_open()
        if len(action.action) > self.max_action_chars:
            raise ValueError(
                f"action has {len(action.action)} characters; this server accepts at most {self.max_action_chars} "
                "(gaca-env-server --max-action-chars)"
            )
        observation, reward, terminated, truncated, info = self.env.step(action.action)
        return self._observation(observation, info, float(reward), bool(terminated), bool(truncated))

    # OpenEnv runs ``reset`` and ``step`` in a thread per session unless ``*_async`` are overridden: one
    # thread per session, as many as sessions. These run them in the server's bounded pool instead, one
    # call at a time per session (an HTTP client may send two at once), so an env that blocks holds one
    # worker and its own session. The GIL still serialises the envs' pure-Python steps: more processes
    # (``--workers``), not threads, add throughput.
    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GACAObservation:
        """:meth:`reset`, run in the server's worker pool (on the event loop without one)."""
        return await self._off_loop(functools.partial(self.reset, seed=seed, episode_id=episode_id, **kwargs))

    async def step_async(self, action: GACAAction, timeout_s: float | None = None, **kwargs: Any) -> GACAObservation:
        """:meth:`step`, run in the server's worker pool (on the event loop without one)."""
        return await self._off_loop(functools.partial(self.step, action, timeout_s=timeout_s, **kwargs))

    async def state_async(self) -> GACAState:
        """:attr:`state`, run in the server's worker pool (on the event loop without one)."""
        return await self._off_loop(lambda: self.state)

    async def _off_loop(self, call: Callable[[], _T]) -> _T:
        if self._executor is None:
            return call()
        if self._one_at_a_time is None:
            self._one_at_a_time = asyncio.Lock()
        async with self._one_at_a_time:
            return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def _observation(
        self, observation: str, info: dict[str, Any], reward: float | None, terminated: bool, truncated: bool
    ) -> GACAObservation:
        contract = {key: info[key] for key in INFO_KEYS if key in info}
        rest = {key: value for key, value in info.items() if key not in INFO_KEYS}
        return GACAObservation(
            observation=observation,
            reward=reward,
            done=terminated or truncated,
            terminated=terminated,
            truncated=truncated,
            info=rest,
            **contract,
        )

    @property
    def state(self) -> GACAState:
        """The episode id, steps taken, task id and the episode's snapshot (None before a reset)."""
        unwrapped = self.env.unwrapped
        snapshot = None
        if not self._closed and getattr(unwrapped, "snapshot_kind", "") and getattr(unwrapped, "_started", False):
            snapshot = sign(unwrapped.save_state().to_dict(), self._snapshot_key)
        return GACAState(
            episode_id=self._episode_id,
            step_count=int(getattr(unwrapped, "_steps", 0)),
            env_id=self.env_id,
            task_id=self._task_id,
            snapshot=snapshot,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        """The served env id and its class's first docstring line."""
        doc = (type(self.env.unwrapped).__doc__ or "").strip().splitlines()
        return EnvironmentMetadata(
            name=self.env_id, description=doc[0] if doc else self.env_id, version=gaca_envs.__version__
        )

    def close(self) -> None:
        """Closes the env; later calls of this session answer that it was closed."""
        if not self._closed:
            self._closed = True
            self.env.close()
