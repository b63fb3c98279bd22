"""The one episode loop: every player (LLM, chat endpoint, tabular, expert, random) plays through :func:`play`.

A *policy* sees the live envs of a turn as :class:`Turn` views and answers one :class:`Decision`
each; :func:`play` steps the envs, keeps each env's history (observation, action as later prompts
show it), and returns the :class:`Transition` of every step in play order with one :class:`Episode`
per env. What a policy needs to remember about a step (token ids and log-probs, table slots, a
demonstration's prompt) travels in ``Decision.data``.

The trainer's rollout (:func:`gaca_train.rollout.run_rollout`), the evaluator's endpoint and baseline
players (:mod:`gaca_train.evaluation`), the tabular study (:mod:`gaca_train.tabular`) and the expert
demonstrations of warm starts (:mod:`gaca_train.experiments.warm_start`) are policies over this loop.

This module imports no torch: a pool is anything with ``num_envs``, ``reset`` and ``step`` as
:class:`~gaca_train.vector.RolloutPool` has them, or a list of envs in an :class:`EnvList`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym

from gaca_train.vector import StepResult

__all__ = ["BaselinePolicy", "Decision", "EnvList", "Episode", "Played", "Policy", "Transition", "Turn", "play"]


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
    """

    action: str | None
    valid: bool = True
    shown: str | None = None
    data: Any = None
    error: str | None = None


@dataclass
class Transition:
    """One step: the env's state before it, the decision, and the env's answer."""

    env_index: int
    step: int
    observation: str
    info: dict[str, Any]
    decision: Decision
    reward: float
    next_info: dict[str, Any]
    terminated: bool
    truncated: bool


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
    """What :func:`play` returns: the steps in play order, the episodes by env slot, env seconds."""

    transitions: list[Transition]
    episodes: list[Episode]
    env_seconds: float


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

    def reset(self, task_ids: Sequence[str], seed: int | Sequence[int] | None = None) -> list[tuple[str, dict]]:
        """Env ``i`` starts ``task_ids[i]``, seeded ``seed + i`` (or ``seed[i]`` for a list)."""
        seeds = _seeds(seed, self.num_envs)
        pairs = zip(self.envs, task_ids, seeds, strict=True)
        return [env.reset(seed=s, options={"task_id": t}) for env, t, s in pairs]

    def step(self, actions: Sequence[str | None]) -> list[StepResult | None]:
        """Steps the envs whose action is not None."""
        out: list[StepResult | None] = []
        for env, action in zip(self.envs, actions, strict=True):
            if action is None:
                out.append(None)
                continue
            obs, reward, terminated, truncated, info = env.step(action)
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
    task_ids: Sequence[str],
    policy: Policy,
    max_steps: int | None,
    *,
    seed: int | Sequence[int] | None = None,
    collective: bool = False,
) -> Played:
    """Plays one episode in every env of ``pool`` (env ``i`` on ``task_ids[i]``) with ``policy``.

    Args:
        pool: :class:`~gaca_train.vector.RolloutPool` or :class:`EnvList`.
        task_ids: one task id per env.
        policy: see :class:`Policy`.
        max_steps: the loop's step limit (None: until every env's own end); an episode cut by it is
            ``truncated``.
        seed: reset seed (env ``i`` gets ``seed + i``, or ``seed[i]`` for a list).
        collective: the policy must be asked every turn even with no live env of its own (distributed
            generation, see :func:`gaca_train.rollout.run_rollout`), until it answers None.
    """
    tic = time.perf_counter()
    first = pool.reset(task_ids, seed=seed)
    env_seconds = time.perf_counter() - tic
    obs = [o for o, _ in first]
    infos = [info for _, info in first]
    history: list[list[tuple[str, str]]] = [[] for _ in task_ids]
    episodes = [Episode(i, t, info=infos[i]) for i, t in enumerate(task_ids)]
    start = getattr(policy, "start", None)
    if start is not None:
        for i in range(len(task_ids)):
            start(i, obs[i], infos[i])
    live = list(range(len(task_ids)))
    transitions: list[Transition] = []
    step = 0
    while max_steps is None or step < max_steps:
        if not live and not collective:
            break
        turns = [Turn(i, step, obs[i], infos[i], history[i]) for i in live]
        decisions = policy.act(turns)
        if decisions is None:
            break
        if not live:
            step += 1
            continue
        actions: list[str | None] = [None] * len(task_ids)
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
            transitions.append(Transition(i, step, obs[i], infos[i], decision, res.reward, res.info, res.terminated,
                                          res.truncated))  # fmt: skip
            history[i].append((obs[i], decision.action if decision.shown is None else decision.shown))
            obs[i], infos[i] = res.observation, res.info
            ep = episodes[i]
            ep.length, ep.info = step + 1, res.info
            ep.won, ep.score = bool(res.info.get("won", False)), float(res.info.get("score", 0.0))
            ep.truncated = bool(res.truncated and not res.terminated)
            if not (res.terminated or res.truncated):
                still.append(i)
        live = still
        step += 1
    for i in live:  # cut off by the loop's step limit rather than by the env
        episodes[i].truncated = True
    return Played(transitions, episodes, env_seconds)
