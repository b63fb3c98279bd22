"""An adapter that hands a GACA env to plain TRL: ``GRPOTrainer(environment_factory=...)``.

TRL 1.16's ``GRPOTrainer`` takes an ``environment_factory``: a callable that builds one object per
rollout. TRL calls its ``reset(**row)`` with the dataset row (every column, ``prompt`` included)
and appends the returned text to the row's last user message; every public method other than
``reset`` and ``get_reward`` becomes a tool the model may call (its name, type hints and
Google-style docstring make the schema); after the rollout ``get_reward()`` scores it (weight 1,
logged under the class name, here ``rewards/GymToolEnvironment``).

Here the env's actions become the one tool ``act(action)``, which steps the env and answers with
the observation and the admissible actions; the env's reward becomes ``get_reward``. Nothing
raises inside an episode: an action the env does not understand is the env's own step
("Nothing happens."), and a call after the episode ended says so.

    from trl import GRPOConfig, GRPOTrainer
    from gaca_envs.trl import environment_factory, task_dataset

    dataset = task_dataset("GACA-CriticalChain-v0", "train")  # columns prompt, task_id
    trainer = GRPOTrainer(model="Qwen/Qwen3-0.6B", args=GRPOConfig(...), train_dataset=dataset,
                          environment_factory=environment_factory("GACA-CriticalChain-v0"))

This module imports neither TRL nor ``datasets`` at import time (``task_dataset`` imports
``datasets`` when called): importing it loads no torch, like the rest of gaca_envs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from gaca_envs.registration import ENV_SPECS
from gaca_envs.task_env import split_task_ids

if TYPE_CHECKING:
    from datasets import Dataset

REWARDS = ("score", "return")
# The user message each dataset row starts with; TRL appends the first observation to it.
DEFAULT_INSTRUCTION = (
    "You are an agent in a text environment. Reach the goal by calling the `act` tool with one of the "
    "admissible actions at a time."
)


def _check_reward(reward: str) -> None:
    if reward not in REWARDS:
        raise ValueError(f"reward must be one of {', '.join(map(repr, REWARDS))}, got {reward!r}")


class GymToolEnvironment:
    """One GACA env behind TRL's environment interface: ``reset``, the tool ``act``, ``get_reward``.

    TRL turns every public method of this class (besides ``reset`` and ``get_reward``) into a tool,
    so ``act`` is the only one; the rest is private or a property.

    Args:
        env_id: a registered id, e.g. ``"GACA-ALFWorld-v0"``.
        reward: what ``get_reward`` returns: ``"score"``, the contract's task score in [0, 1] at the
            episode's last step (1.0 when an ALFWorld or CriticalChain task is won, WebShop's
            attribute-match reward), or ``"return"``, the sum of the env's step rewards (its
            ``reward_on_success`` scale).
        **env_kwargs: passed to ``gym.make(env_id, ...)``.

    Raises:
        ValueError: for an unknown ``reward``; whatever ``gym.make`` raises for the env.
    """

    def __init__(self, env_id: str, *, reward: str = "score", **env_kwargs: Any) -> None:
        _check_reward(reward)
        self._reward_kind = reward
        self._env = gym.make(env_id, **env_kwargs)
        self._info: dict[str, Any] = {}
        self._return = 0.0
        self._done = True  # no episode yet
        self._truncated = False

    @property
    def env(self) -> gym.Env:
        """The wrapped Gymnasium env (as ``gym.make`` built it)."""
        return self._env

    @property
    def info(self) -> dict[str, Any]:
        """The env's ``info`` after the last reset or step (DESIGN.md contract 1 keys)."""
        return self._info

    @property
    def done(self) -> bool:
        """Whether the episode has ended (terminated or truncated), or none was started."""
        return self._done

    def reset(self, task_id: str | None = None, seed: int | None = None, **row: Any) -> str:
        """Starts an episode; called by TRL with the dataset row's columns as keyword arguments.

        Args:
            task_id: the task to play (a ``task_id`` column, as :func:`task_dataset` makes); None
                lets the env draw one.
            seed: seeds the env's reset when the row has a ``seed`` column.
            **row: the row's other columns (``prompt`` and any more), ignored.

        Returns:
            The first observation, with the task when the observation does not state it, and the
            admissible actions.
        """
        options = None if task_id is None else {"task_id": task_id}
        observation, self._info = self._env.reset(seed=seed, options=options)
        self._return, self._done, self._truncated = 0.0, False, False
        task = self._info.get("task", "")
        if task and task not in observation:
            observation = f"Your task is to: {task}\n{observation}"
        return self._render(observation)

    def act(self, action: str) -> str:
        """Takes one action in the environment and returns what happens.

        Args:
            action: the action to take, one of the admissible actions listed in the last observation.

        Returns:
            The new observation and the actions admissible next, or the outcome once the episode ends.
        """
        if self._done:
            return f"The episode is over ({self._outcome()}); the action {action!r} was not taken."
        # A tool call's arguments are parsed from JSON, so a number or a list may arrive; the env
        # accepts only str, and any other text is its own invalid step.
        observation, reward, terminated, truncated, self._info = self._env.step(str(action))
        self._return += float(reward)
        self._done, self._truncated = terminated or truncated, truncated and not terminated
        if self._done:
            return f"{observation}\n\nThe episode is over ({self._outcome()})."
        return self._render(observation)

    def get_reward(self) -> float:
        """The episode's reward: its final score in [0, 1], or its return (see ``reward``)."""
        if self._reward_kind == "return":
            return self._return
        return float(self._info.get("score", 0.0))

    def _render(self, observation: str) -> str:
        actions = "\n".join(f"- {a}" for a in self._info.get("admissible_actions", []))
        return f"{observation}\n\nAdmissible actions:\n{actions}" if actions else observation

    def _outcome(self) -> str:
        if not self._info:
            return "no episode was started"
        if self._info.get("won"):
            return "task solved"
        return "step limit reached, task not solved" if self._truncated else "task not solved"


def environment_factory(env_id: str, *, reward: str = "score", **env_kwargs: Any) -> Callable[[], GymToolEnvironment]:
    """A factory for ``trl.GRPOTrainer(environment_factory=...)`` that plays the env ``env_id``.

    TRL calls it once per concurrent rollout and reuses the instances across batches; each call
    builds a fresh env with ``gym.make(env_id, **env_kwargs)``.

    Args:
        env_id: a registered id, e.g. ``"GACA-ALFWorld-v0"``.
        reward: ``"score"`` (final task score in [0, 1]) or ``"return"`` (summed env rewards);
            see :class:`GymToolEnvironment`.
        **env_kwargs: the env's keyword arguments (``split``, ``data_path``, ``horizon``, ...).

    Returns:
        A callable without arguments returning a new :class:`GymToolEnvironment`.

    Raises:
        ValueError: for an unknown ``reward``, or an ``env_id`` that is not registered.
    """
    _check_reward(reward)
    if env_id not in gym.registry:
        raise ValueError(f"env_id {env_id!r} is not registered; the GACA ids are {', '.join(ENV_SPECS)}")

    def make() -> GymToolEnvironment:
        return GymToolEnvironment(env_id, reward=reward, **env_kwargs)

    return make


def task_dataset(
    env_id: str,
    split: str | None = None,
    *,
    instruction: str = DEFAULT_INSTRUCTION,
    limit: int | None = None,
    **env_kwargs: Any,
) -> Dataset:
    """A train dataset for ``GRPOTrainer``: one row per task of a split, with its ``task_id``.

    Each row has ``prompt`` (a conversation of one user message, ``instruction``; TRL appends
    the first observation that ``reset`` returns) and ``task_id``, which TRL passes to
    :meth:`GymToolEnvironment.reset`. Build the factory with the same ``split`` and
    ``env_kwargs`` (an ALFWorld env plays only the tasks of the split it was built for).

    Args:
        env_id: a registered id.
        split: the split whose task ids to list (:func:`gaca_envs.task_env.split_task_ids`: an env
            bound to one split, ALFWorld, is built for it). None: the split the env plays with
            ``env_kwargs``.
        instruction: the user message before the observation.
        limit: keep the first ``limit`` task ids (default: all).
        **env_kwargs: passed to ``gym.make`` to build the env that lists the ids.

    Returns:
        A ``datasets.Dataset`` with columns ``prompt`` and ``task_id``.

    Raises:
        ValueError: for a split the env does not have, or ``limit`` < 1.
        ImportError: when the ``datasets`` package is not installed.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1 or None, got {limit}")
    try:
        from datasets import Dataset
    except ImportError as e:
        raise ImportError("task_dataset needs the `datasets` package: pip install datasets (TRL depends on it)") from e
    task_ids = split_task_ids(env_id, env_kwargs, split)[1][:limit]
    prompt = [{"role": "user", "content": instruction + "\n\n"}]
    return Dataset.from_dict({"prompt": [prompt] * len(task_ids), "task_id": task_ids})
