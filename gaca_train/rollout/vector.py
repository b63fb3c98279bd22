"""A pool of envs over Gymnasium's vector envs, for group rollouts of whole episodes.

A rollout resets every env of the pool to an assigned task id (N envs per task form a group),
then steps only the envs whose episode is still running. Gymnasium's vector envs step all
sub-envs at once and reset finished ones themselves, so each sub-env is wrapped in a
:class:`RolloutSlot` that (1) resets to the task id set on it with ``set_attr``, and (2) once its
episode ended, answers further steps (action ``None``) and the vector env's automatic resets
from a cache, without touching the real env. Infos travel whole, boxed, under ``info["step_info"]``.

This module imports gymnasium and gaca_envs only (no torch), so subprocess workers start light.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

_START = "gaca_rollout_start"


@dataclass(frozen=True)
class InfoBox:
    """Carries an env's info dict through a vector env unbatched (vector envs split dicts by key)."""

    info: dict[str, Any]


class RolloutSlot(gym.Wrapper):
    """Wraps one env of a rollout pool; see the module docstring.

    Attributes:
        task_id: the task the next real reset starts (set by the pool with ``set_attr``).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.task_id: str | None = None
        self.snapshot: Any = None  # an EnvSnapshot: the next rollout start restores it (a branch's start)
        self.idle = False  # the next rollout start leaves this env alone (a slot a branching wave does not use)
        self._last: tuple[Any, float, bool, bool, dict[str, Any]] | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        options = dict(options or {})
        start = options.pop(_START, False)
        if start and self.idle:  # a slot this rollout does not use: no episode, no snapshot
            self._last = ("", 0.0, True, False, {"step_info": InfoBox({})})
            return self._last[0], self._last[4]
        if not start:
            # An automatic reset by the vector env after the episode ended: stay idle.
            if self._last is None:
                raise RuntimeError("RolloutSlot was reset before its first rollout start; use RolloutPool.reset")
            return self._last[0], self._last[4]
        if self.snapshot is not None:
            options = {"snapshot": self.snapshot}  # a snapshot's reset takes no other option
        elif self.task_id is not None:
            options["task_id"] = self.task_id
        obs, info = self.env.reset(seed=seed, options=options)
        self._last = (obs, 0.0, False, False, {"step_info": InfoBox(info)})
        return obs, {"step_info": InfoBox(info)}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if action is None:
            if self._last is None:
                raise RuntimeError("RolloutSlot stepped before its first rollout start; use RolloutPool.reset")
            obs, _, _, _, info = self._last
            # Not terminated: a vector env would otherwise turn the slot's next real step into an automatic reset.
            return obs, 0.0, False, False, info
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._last = (obs, float(reward), bool(terminated), bool(truncated), {"step_info": InfoBox(info)})
        return self._last

    def save_snapshot(self) -> Any:
        """The env's snapshot (``env.unwrapped.save_state()``) while its episode runs; None once it ended."""
        if self._last is None or self._last[2] or self._last[3]:
            return None
        return self.env.unwrapped.save_state()


def make_slot_env(env_id: str, env_kwargs: dict[str, Any]) -> RolloutSlot:
    """Builds ``gym.make(env_id, **env_kwargs)`` wrapped in a :class:`RolloutSlot`.

    ``gaca_envs`` is imported first so that GACA ids resolve in fresh subprocesses too.
    """
    import gaca_envs  # noqa: F401  (registers the GACA env ids)

    return RolloutSlot(gym.make(env_id, **env_kwargs))


@dataclass
class StepResult:
    """One env's answer to a pool step."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class RolloutPool:
    """``num_envs`` envs of one id in a Gymnasium vector env (subprocesses or in-process).

    Args:
        env_id: Gymnasium id, e.g. ``"GACA-CriticalChain-v0"``.
        num_envs: pool size (the number of episodes a rollout plays at once).
        env_kwargs: keyword arguments of ``gym.make``.
        mode: ``"async"`` (``AsyncVectorEnv``, one subprocess per env, started with forkserver) or
            ``"sync"`` (``SyncVectorEnv``, in this process).
        server_urls: ``gaca-env-server`` URLs: the envs are ``GACA-Remote-v0`` sessions spread over
            them round-robin (``env_kwargs`` must be the servers'); None: the envs run here.
        server_timeout_s: seconds a remote env waits for one answer of its server (``step_timeout_s``);
            None: GACA-Remote-v0's default.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        env_kwargs: dict[str, Any] | None = None,
        mode: str = "async",
        server_urls: Sequence[str] | None = None,
        server_timeout_s: float | None = None,
    ):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        fns = [functools.partial(make_slot_env, env_id, dict(env_kwargs or {})) for _ in range(num_envs)]
        if server_urls:  # env i plays on server i mod len(server_urls); the server builds it from its own kwargs
            urls = [server_urls[i % len(server_urls)] for i in range(num_envs)]
            remote = {**(env_kwargs or {}), "env_id": env_id}
            if server_timeout_s is not None:
                remote["step_timeout_s"] = server_timeout_s
            fns = [functools.partial(make_slot_env, "GACA-Remote-v0", {**remote, "url": url}) for url in urls]
        if mode == "async":
            self.envs = gym.vector.AsyncVectorEnv(
                fns, shared_memory=False, context="forkserver", autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP
            )
        elif mode == "sync":
            self.envs = gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
        else:
            raise ValueError(f"mode must be 'async' or 'sync', got {mode!r}")
        self.num_envs = num_envs
        self.env_id = env_id

    def reset(
        self, task_ids: Sequence[str | None], seed: int | None = None, snapshots: Sequence[Any] | None = None
    ) -> list[tuple[str, dict[str, Any]] | None]:
        """Starts an episode in every env: env ``i`` on ``task_ids[i]`` (seeded ``seed + i``).

        Args:
            task_ids: one task id per env; None leaves the env idle (no reset, no episode).
            seed: reset seed (env ``i`` gets ``seed + i``); with a snapshot it reseeds after the restore.
            snapshots: per env an ``EnvSnapshot`` to restore instead of starting the task (a branch), or None.

        Returns:
            Per env, the first observation and info (the snapshot's, for a restore); None for an idle env.
        """
        if len(task_ids) != self.num_envs:
            raise ValueError(f"task_ids must have one id per env ({self.num_envs}), got {len(task_ids)}")
        snapshots = list(snapshots) if snapshots is not None else [None] * self.num_envs
        idle = [t is None and s is None for t, s in zip(task_ids, snapshots, strict=True)]
        self.envs.set_attr("task_id", list(task_ids))
        self.envs.set_attr("snapshot", snapshots)
        self.envs.set_attr("idle", idle)
        obs, infos = self.envs.reset(seed=seed, options={_START: True})
        if isinstance(self.envs, gym.vector.AsyncVectorEnv):
            # Gymnasium's async worker keeps its "reset at the next step" flag through a reset (it clears it
            # only with shared memory), so an env whose last episode ended on its final step would answer
            # the new episode's first action with a reset. One step of no actions clears every flag.
            self.envs.step(tuple([None] * self.num_envs))
        return [None if idle[i] else (obs[i], infos["step_info"][i].info) for i in range(self.num_envs)]

    def save_states(self) -> list[Any]:
        """Per env, the snapshot of its running episode (``env.unwrapped.save_state()``), None where it ended."""
        return list(self.envs.call("save_snapshot"))

    def step(self, actions: Sequence[str | None]) -> list[StepResult | None]:
        """Steps every env whose action is not None; envs given None stay as they are.

        Returns:
            Per env, its :class:`StepResult`, or None where the action was None.
        """
        obs, rewards, terminated, truncated, infos = self.envs.step(tuple(actions))
        return [
            None
            if action is None
            else StepResult(
                obs[i], float(rewards[i]), bool(terminated[i]), bool(truncated[i]), infos["step_info"][i].info
            )
            for i, action in enumerate(actions)
        ]

    def close(self) -> None:
        """Closes the vector env and its subprocesses."""
        self.envs.close()
