"""The task contract every GACA env honours, and the episode bookkeeping they share.

:class:`TaskEnv` is the base of the ALFWorld, WebShop and CriticalChain envs. It owns what was
written three times: the step counter, the guard against stepping a finished (or never started)
episode, the type check of actions, the truncation at ``max_steps``, and the answer to an
action the env does not understand (:data:`NOTHING_HAPPENS`, ALFWorld's words). Each env lists
its splits and the task ids of a split the same way, ``env.unwrapped.task_ids(split)``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

# What ALFWorld (TextWorld) answers to a command it does not accept; every env that answers an
# invalid action with a text uses these words.
NOTHING_HAPPENS = "Nothing happens."


class TaskEnv(gym.Env[str, str]):
    """A text env over named tasks, grouped in splits (DESIGN.md contract 1).

    Subclasses set :attr:`splits`, :attr:`split` and :attr:`max_steps`, implement
    :meth:`task_ids`, call :meth:`_start_episode` in ``reset`` and, in ``step``,
    :meth:`_begin_step` first and :meth:`_end_step` once they know whether the step terminated.

    Attributes:
        splits: the env's split names.
        split: the split ``reset`` draws from when no task id is given.
        bound_to_split: whether the env plays only its own split's tasks (then ``task_ids`` of
            another split is an error, and a caller builds another env with ``split=...``).
        max_steps: steps after which an episode is truncated (the env's horizon).
        action_hint: words after "action must be a str" in the error for a non-string action.
        prompt: the env's prompt for an LLM agent, (system prompt, user template); the template is a
            ``str.format`` string over task, step, max_steps, history, observation and
            admissible_actions (the trainer appends its answer format, see gaca_train.rollout).
    """

    splits: tuple[str, ...] = ()
    bound_to_split: bool = False  # True: the env plays only the tasks of its own ``split`` (ALFWorld)
    prompt: tuple[str, str] = (
        "You are an agent acting in a text environment.",
        "Your task: {task}\n{history}Step {step} of at most {max_steps}. Current observation: {observation}\n"
        "Admissible actions: {admissible_actions}",
    )
    split: str
    max_steps: int
    action_hint: str = ""
    _steps: int = 0
    _done: bool = True  # no episode yet

    def task_ids(self, split: str | None = None) -> list[str]:
        """The task ids of ``split`` (default: the env's own) that ``reset(options={"task_id": ...})`` accepts.

        Raises:
            ValueError: for a split the env does not have (or, for an env bound to one split, another one).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement task_ids(split)")

    def _check_split(self, split: str | None) -> str:
        """``split`` (or the env's own when None), checked against :attr:`splits`."""
        split = self.split if split is None else split
        if split not in self.splits:
            raise ValueError(f"split must be one of {', '.join(self.splits)}, got {split!r}")
        return split

    def _start_episode(self) -> None:
        """Resets the step counter; the episode accepts steps."""
        self._steps, self._done = 0, False

    def _begin_step(self, action: Any) -> None:
        """Checks a step may be taken with ``action`` and counts it.

        Raises:
            TypeError: if ``action`` is not a str.
            RuntimeError: before the first reset, or after the episode ended.
        """
        if not isinstance(action, str):
            raise TypeError(f"action must be a str{self.action_hint}, got {type(action).__name__}: {action!r:.80}")
        if self._done:
            raise RuntimeError("step() called before reset() or after the episode ended; call env.reset() first")
        self._steps += 1

    def _end_step(self, terminated: bool) -> bool:
        """Whether the step is truncated (``max_steps`` reached without terminating); ends the episode if either."""
        truncated = not terminated and self._steps >= self.max_steps
        self._done = terminated or truncated
        return truncated


class SplitTaskIds(list):
    """The task ids of an env bound to one split: a list, and callable as ``task_ids(split)``.

    ALFWorld's ``env.task_ids`` has long been a list property; this keeps that form working for
    existing callers while the env offers the contract's ``task_ids(split)`` like the others.
    """

    def __init__(self, ids: list[str], split: str, splits: tuple[str, ...]) -> None:
        super().__init__(ids)
        self.split, self.splits = split, splits

    def __call__(self, split: str | None = None) -> list[str]:
        """The ids when ``split`` is the env's split (or None).

        Raises:
            ValueError: for an unknown split, or another split than the env's.
        """
        if split is not None and split not in self.splits:
            raise ValueError(f"split must be one of {', '.join(self.splits)}, got {split!r}")
        if split is not None and split != self.split:
            raise ValueError(
                f"this env was built for split {self.split!r} and plays only its tasks, not those of {split!r}; "
                f'build one with split="{split}"'
            )
        return list(self)


def split_task_ids(env_id: str, env_kwargs: dict[str, Any], split: str | None) -> tuple[dict[str, Any], list[str]]:
    """The env kwargs that play ``split`` and its task ids (``env.unwrapped.task_ids(split)``).

    An env bound to one split (:attr:`TaskEnv.bound_to_split`, ALFWorld) gets ``split`` in its
    kwargs, replacing any other; other envs keep their kwargs. ``split=None``: the split the env
    plays with ``env_kwargs``.

    Raises:
        ValueError: if the env offers no task ids for ``split`` (or has no such split).
    """
    kwargs = dict(env_kwargs)
    env = gym.make(env_id, **kwargs)
    try:
        unwrapped = env.unwrapped
        if split is not None and getattr(unwrapped, "bound_to_split", False) and unwrapped.split != split:
            env.close()
            kwargs["split"] = split
            env = gym.make(env_id, **kwargs)
        ids = list(env.unwrapped.task_ids(split))
    finally:
        env.close()
    if not ids:
        raise ValueError(f"{env_id} offers no task ids for split {split!r}")
    return kwargs, ids
