"""The one episode loop: every player (LLM, chat endpoint, tabular, expert, random) plays through :func:`play`.

A *policy* sees the live envs of a turn as :class:`Turn` views and answers one :class:`Decision`
each; :func:`play` steps the envs, keeps each env's history (observation, action as later prompts
show it), and returns the :class:`Transition` of every step in play order with one :class:`Episode`
per env. What a policy needs to remember about a step (token ids and log-probs, table slots, a
demonstration's prompt) travels in ``Decision.data``.

The trainer's rollout (:func:`gaca_train.rollout.policy.run_rollout`), the evaluator's endpoint and baseline
players (:mod:`gaca_train.evaluation`), the tabular study (:mod:`gaca_train.experiments.tabular`) and the expert
demonstrations of warm starts (:mod:`gaca_train.experiments.warm_start`) are policies over this loop.

This module imports no torch: a pool is anything with ``num_envs``, ``reset`` and ``step`` as
:class:`~gaca_train.rollout.vector.RolloutPool` has them, or a list of envs in an :class:`EnvList`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym

from gaca_train.rollout.vector import StepResult

__all__ = [
    "BaselinePolicy",
    "Decision",
    "EnvList",
    "Episode",
    "Played",
    "Policy",
    "Start",
    "Transition",
    "Turn",
    "play",
]


@dataclass
class Turn:
    """What a policy sees of one live env: its slot, step (0-based), observation, info and history."""

    env_index: int
    step: int
    observation: str
    info: dict[str, Any]
    history: list[tuple[str, str]]  # (observation, action as shown), oldest first


@dataclass
class Decision:
    """A policy's answer for one env.

    Attributes:
        action: the text sent to the env; None ends the episode here without a step (``error`` says why).
        valid: whether the response was well-formed (the run's format check).
        shown: the action as later prompts show it in the history (None: ``action``).
        data: whatever the policy keeps with the step (e.g. token ids and log-probs).
        error: why the episode ended without a step (with ``action`` None).
        nll: the response's negative log-likelihood under the policy, where the policy knows it (the
            ``nll`` criterion of branching rollouts ranks steps by it).
        entropy: the policy's entropy at this step, where the policy knows it (the ``entropy`` criterion).
    """

    action: str | None
    valid: bool = True
    shown: str | None = None
    data: Any = None
    error: str | None = None
    nll: float | None = None
    entropy: float | None = None


@dataclass
class Transition:
    """One step: the env's state before it, the decision, and the env's answer.

    ``snapshot`` is the env's snapshot before the step (``EnvSnapshot``) when :func:`play` was asked to
    save them (branching rollouts restore it), else None.
    """

    env_index: int
    step: int
    observation: str
    info: dict[str, Any]
    decision: Decision
    reward: float
    next_info: dict[str, Any]
    terminated: bool
    truncated: bool
    snapshot: Any = None


@dataclass(frozen=True)
class Start:
    """Where an env's episode starts when it continues another one (a branch of a branching rollout).

    Attributes:
        snapshot: the ``EnvSnapshot`` restored before the first turn.
        step: the episode step the snapshot was saved at (the first turn's step).
        history: the (observation, action as shown) pairs of the steps before it, as the saved
            episode's prompts showed them; with the restored observation, the first prompt is the
            saved episode's prompt at that step.
    """

    snapshot: Any
    step: int
    history: tuple[tuple[str, str], ...]


@dataclass
class Episode:
    """One env's episode: its outcome after the last step (``info`` is the last info)."""

    env_index: int
    task_id: str
    won: bool = False
    score: float = 0.0
    length: int = 0
    truncated: bool = False
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Played:
    """What :func:`play` returns: the steps in play order, the episodes by env slot, env seconds.

    ``histories`` holds each env's final history (observation, action as shown), indexed by step;
    ``reset_seconds`` the first reset's (or restore's) share of ``env_seconds`` and ``snapshot_seconds``
    the snapshots' (with ``save_snapshots``).
    """

    transitions: list[Transition]
    episodes: list[Episode]
    env_seconds: float
    histories: list[list[tuple[str, str]]] = field(default_factory=list)
    reset_seconds: float = 0.0
    snapshot_seconds: float = 0.0


class Policy(Protocol):
    """Answers a turn's live envs. ``start`` (optional) sees each env's first observation.

    ``act`` returns one decision per turn view, or None to stop the rollout (a collective policy
    whose ranks have no live env left).
    """

    def act(self, turns: list[Turn]) -> list[Decision] | None: ...  # noqa: D102


class BaselinePolicy:
    """Uniform over the admissible actions (``"random"``, "look" if none) or ``info["expert_action"]`` (``"expert"``).

    Args:
        kind: ``"random"`` or ``"expert"``.
        rng: the random player's generator.
        env_name: names the env in the error when an expert action is missing.
    """

    def __init__(self, kind: str, rng: random.Random | None = None, env_name: str = "the env") -> None:
        self.kind, self.rng, self.env_name = kind, rng or random.Random(0), env_name

    def act(self, turns: list[Turn]) -> list[Decision]:  # noqa: D102
        decisions = []
        for t in turns:
            if self.kind == "expert":
                if "expert_action" not in t.info:
                    raise ValueError(
                        f"--policy expert needs info['expert_action']; {self.env_name} did not give one "
                        "(pass --env-kwargs '{\"expert\": true}' if the env supports it)"
                    )
                decisions.append(Decision(t.info["expert_action"]))
            else:
                admissible = t.info["admissible_actions"]
                decisions.append(Decision(self.rng.choice(admissible) if admissible else "look"))
        return decisions


class EnvList:
    """A pool over plain Gymnasium envs, stepped one after another in this process."""

    def __init__(self, envs: Sequence[gym.Env]) -> None:
        self.envs = list(envs)
        self.num_envs = len(self.envs)
        self._running = [False] * self.num_envs

    def reset(
        self,
        task_ids: Sequence[str | None],
        seed: int | Sequence[int] | None = None,
        snapshots: Sequence[Any] | None = None,
    ) -> list[tuple[str, dict] | None]:
        """Env ``i`` starts ``task_ids[i]``, seeded ``seed + i`` (or ``seed[i]`` for a list).

        ``snapshots[i]``, where given, is restored instead (the seed reseeds after the restore); an env
        with neither a task id nor a snapshot stays idle (None).
        """
        seeds = _seeds(seed, self.num_envs)
        snapshots = list(snapshots) if snapshots is not None else [None] * self.num_envs
        self._running = [t is not None or snap is not None for t, snap in zip(task_ids, snapshots, strict=True)]
        out: list[tuple[str, dict] | None] = []
        for env, t, s, snap in zip(self.envs, task_ids, seeds, snapshots, strict=True):
            if snap is not None:
                out.append(env.reset(seed=s, options={"snapshot": snap}))
            else:
                out.append(None if t is None else env.reset(seed=s, options={"task_id": t}))
        return out

    def save_states(self) -> list[Any]:
        """Per env, the snapshot of its running episode (``env.unwrapped.save_state()``), None where it ended."""
        return [env.unwrapped.save_state() if run else None for env, run in zip(self.envs, self._running, strict=True)]

    def step(self, actions: Sequence[str | None]) -> list[StepResult | None]:
        """Steps the envs whose action is not None."""
        out: list[StepResult | None] = []
        for i, (env, action) in enumerate(zip(self.envs, actions, strict=True)):
            if action is None:
                out.append(None)
                continue
            obs, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                self._running[i] = False
            out.append(StepResult(obs, float(reward), bool(terminated), bool(truncated), info))
        return out


def _seeds(seed: int | Sequence[int] | None, n: int) -> list[int | None]:
    if seed is None:
        return [None] * n
    if isinstance(seed, int):
        return [seed + i for i in range(n)]
    return [int(s) for s in seed]


def play(
    pool: Any,
    task_ids: Sequence[str | None],
    policy: Policy,
    max_env_steps: int | None,
    *,
    seed: int | Sequence[int] | None = None,
    collective: bool = False,
    starts: Sequence[Start | None] | None = None,
    save_snapshots: bool = False,
) -> Played:
    """Plays one episode in every env of ``pool`` (env ``i`` on ``task_ids[i]``) with ``policy``.

    Args:
        pool: :class:`~gaca_train.rollout.vector.RolloutPool` or :class:`EnvList`.
        task_ids: one task id per env; None (with no start) leaves the env idle: no episode, no turn.
        policy: see :class:`Policy`.
        max_env_steps: the episode step limit (None: until every env's own end); an episode cut by it is
            ``truncated``.
        seed: reset seed (env ``i`` gets ``seed + i``, or ``seed[i]`` for a list).
        collective: the policy must be asked every turn even with no live env of its own (distributed
            generation, see :func:`gaca_train.rollout.policy.run_rollout`), until it answers None.
        starts: per env, a :class:`Start` to continue a saved episode from (its snapshot restored, its
            history shown), or None to start ``task_ids[i]`` afresh.
        save_snapshots: record each step's snapshot before the action in ``Transition.snapshot``
            (``pool.save_states()`` once a turn).
    """
    n = len(task_ids)
    starts = list(starts) if starts is not None else [None] * n
    tic = time.perf_counter()
    snapshots = [None if s is None else s.snapshot for s in starts]
    first = pool.reset(task_ids, seed=seed, snapshots=snapshots) if any(snapshots) else pool.reset(task_ids, seed=seed)
    env_seconds = reset_seconds = time.perf_counter() - tic
    obs = ["" if f is None else f[0] for f in first]
    infos: list[dict[str, Any]] = [{} if f is None else f[1] for f in first]
    history: list[list[tuple[str, str]]] = [[] if s is None else list(s.history) for s in starts]
    offset = [0 if s is None else s.step for s in starts]
    episodes = [
        Episode(i, str(infos[i].get("task_id", t or "")), length=offset[i], info=infos[i])
        for i, t in enumerate(task_ids)
    ]
    live = [i for i in range(n) if first[i] is not None]
    start = getattr(policy, "start", None)
    if start is not None:
        for i in live:
            start(i, obs[i], infos[i])
    tic = time.perf_counter()
    saved = pool.save_states() if save_snapshots and live else [None] * n
    snapshot_seconds = time.perf_counter() - tic
    env_seconds += snapshot_seconds
    transitions: list[Transition] = []
    turn = 0
    while max_env_steps is None or turn < max_env_steps:
        if max_env_steps is not None:
            for i in [i for i in live if offset[i] + turn >= max_env_steps]:  # a continuation's limit comes first
                episodes[i].truncated = True
            live = [i for i in live if offset[i] + turn < max_env_steps]
        if not live and not collective:
            break
        turns = [Turn(i, offset[i] + turn, obs[i], infos[i], history[i]) for i in live]
        decisions = policy.act(turns)
        if decisions is None:
            break
        if not live:
            turn += 1
            continue
        actions: list[str | None] = [None] * n
        for i, decision in zip(live, decisions, strict=True):
            actions[i] = decision.action
            if decision.action is None:
                episodes[i].error = decision.error
        tic = time.perf_counter()
        results = pool.step(actions)
        env_seconds += time.perf_counter() - tic
        still = []
        for i, decision in zip(live, decisions, strict=True):
            res = results[i]
            if res is None:  # the policy ended this episode without a step
                continue
            step = offset[i] + turn
            transitions.append(Transition(i, step, obs[i], infos[i], decision, res.reward, res.info, res.terminated,
                                          res.truncated, saved[i]))  # fmt: skip
            history[i].append((obs[i], decision.action if decision.shown is None else decision.shown))
            obs[i], infos[i] = res.observation, res.info
            ep = episodes[i]
            ep.length, ep.info = step + 1, res.info
            ep.won, ep.score = bool(res.info.get("won", False)), float(res.info.get("score", 0.0))
            ep.truncated = bool(res.truncated and not res.terminated)
            if not (res.terminated or res.truncated):
                still.append(i)
        live = still
        turn += 1
        if save_snapshots and live:
            tic = time.perf_counter()
            saved = pool.save_states()
            snapshot_seconds += time.perf_counter() - tic
            env_seconds += time.perf_counter() - tic
    for i in live:  # cut off by the loop's step limit rather than by the env
        episodes[i].truncated = True
    return Played(transitions, episodes, env_seconds, history, reset_seconds, snapshot_seconds)
