"""The task contract every GACA env honours, and the episode bookkeeping they share.

:class:`TaskEnv` is the base of the ALFWorld, WebShop and CriticalChain envs. It owns what was
written three times: the step counter, the guard against stepping a finished (or never started)
episode, the type check of actions, the truncation at ``max_env_steps``, the answer to an action the
env does not understand (:data:`NOTHING_HAPPENS`, ALFWorld's words), the task ids of a split
(:attr:`TaskEnv.task_ids`), and episode snapshots (:class:`EnvSnapshot`, ``save_state`` /
``reset(options={"snapshot": ...})``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import gymnasium as gym
import numpy as np

# What ALFWorld (TextWorld) answers to a command it does not accept; every env that answers an
# invalid action with a text uses these words.
NOTHING_HAPPENS = "Nothing happens."

MAX_STEPS_DEPRECATED = "`max_steps` is deprecated, use `max_env_steps`; it will be removed in the next release"


def resolve_max_env_steps(max_env_steps: int | None, max_steps: int | None, default: int | None) -> int | None:
    """An env's episode cap from its ``max_env_steps`` argument, or from the deprecated ``max_steps`` spelling.

    Every env constructor takes ``max_env_steps`` and, for one release, ``max_steps`` (same meaning,
    a ``FutureWarning``).

    Args:
        max_env_steps: the value given as ``max_env_steps`` (None: not given).
        max_steps: the value given as the deprecated ``max_steps`` (None: not given).
        default: the env's cap when neither is given.

    Returns:
        The cap (``default`` when neither is given).

    Raises:
        ValueError: if both spellings are given.
    """
    if max_steps is None:
        return default if max_env_steps is None else max_env_steps
    if max_env_steps is not None:
        raise ValueError(
            f"max_env_steps={max_env_steps!r} and max_steps={max_steps!r} were both given; max_steps is the "
            "deprecated spelling of max_env_steps: pass max_env_steps only"
        )
    warnings.warn(MAX_STEPS_DEPRECATED, FutureWarning, stacklevel=3)
    return max_steps


def _deprecated_max_steps(self: Any) -> int:
    warnings.warn(MAX_STEPS_DEPRECATED, FutureWarning, stacklevel=2)
    return self.max_env_steps


# ``env.unwrapped.max_steps``: the episode cap under its old name, readable for one release.
deprecated_max_steps = property(_deprecated_max_steps, doc=f"Deprecated: {MAX_STEPS_DEPRECATED}.")


@dataclass(frozen=True)
class EnvSnapshot:
    """An episode saved by ``env.unwrapped.save_state()``; ``env.reset(options={"snapshot": s})`` returns to it.

    A plain value: every field is a JSON type (``state`` and ``rng`` are dicts of JSON types), so
    a snapshot pickles, and ``json.dumps(s.to_dict())`` / ``EnvSnapshot.from_dict(json.loads(text))``
    carry it between processes and machines. It holds what the env needs to go on exactly as the
    saved episode would have: the same observations, info, anchors and rewards for the same
    actions (and, through ``rng``, the same random draws: noisy moves, the task a later
    ``reset()`` without a task id picks).

    Attributes:
        env: which env saved it (the env's :attr:`TaskEnv.snapshot_kind`: ``"alfworld"``,
            ``"webshop"``, ``"criticalchain"``); an env restores only its own kind.
        version: the format version of that env's snapshots (:attr:`TaskEnv.snapshot_version`).
        task_id: the episode's task id.
        steps: steps taken in the episode.
        done: whether the episode had ended (a restored ended episode accepts no step).
        observation: the observation when saved.
        state: the env's own episode state (documented by each env's ``save_state``).
        rng: the env's random generator state (``np.random.Generator.bit_generator.state``), or
            None when the env had drawn nothing yet.
        signature: the HMAC a ``gaca-env-server`` adds to the snapshots it issues
            (:mod:`gaca_envs.signing`), or None. An env in-process trusts its caller and ignores
            it; a server refuses a snapshot whose signature is missing or does not match. Not
            part of the snapshot's value: two snapshots of one state compare equal signed or not.
    """

    env: str
    version: int
    task_id: str
    steps: int
    done: bool
    observation: str
    state: dict[str, Any]
    rng: dict[str, Any] | None = None
    signature: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        checks = (
            ("env", str),
            ("version", int),
            ("task_id", str),
            ("steps", int),
            ("done", bool),
            ("observation", str),
            ("state", dict),
            ("rng", (dict, type(None))),
            ("signature", (str, type(None))),
        )
        for name, expected in checks:
            value = getattr(self, name)
            if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                kinds = (
                    f"a {expected[0].__name__} or None"
                    if isinstance(expected, tuple)
                    else ("an int" if expected is int else f"a {expected.__name__}")
                )
                raise ValueError(f"snapshot field {name} must be {kinds}, got {type(value).__name__}: {value!r:.60}")
        if self.steps < 0:
            raise ValueError(f"snapshot field steps must be >= 0, got {self.steps}")

    def to_dict(self) -> dict[str, Any]:
        """The snapshot as a dict of JSON types (``json.dumps`` writes it as it is); ``signature`` only if set."""
        data = asdict(self)
        if data["signature"] is None:
            del data["signature"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnvSnapshot:
        """The snapshot a :meth:`to_dict` dict (for instance read back from JSON) describes.

        Raises:
            ValueError: if ``data`` is not a dict with exactly the snapshot's fields, of their types.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a snapshot dict must be a mapping, got {type(data).__name__}")
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in data and n not in ("rng", "signature")]
        extra = sorted(str(k) for k in data if k not in names)
        if missing or extra:
            raise ValueError(
                f"a snapshot dict has the fields {', '.join(names)}; missing {missing or 'none'}, "
                f"unexpected {extra or 'none'}"
            )
        return cls(**data)


class TaskIds(list):
    """The task ids of an env's own split: a list, and callable as ``task_ids(split)`` for any split.

    ``env.unwrapped.task_ids`` is this on every env: ``task_ids[0]`` and ``len(task_ids)`` read the
    env's own split; ``task_ids("valid")`` lists another split (an env bound to one split, as
    ALFWorld is, refuses another split and says how to build an env for it).

    Args:
        ids: the ids of ``split``.
        split: the env's split.
        splits: every split the env has.
        of_split: the ids of another split; None for an env bound to ``split``.
    """

    def __init__(
        self,
        ids: list[str],
        split: str,
        splits: tuple[str, ...],
        of_split: Callable[[str], list[str]] | None = None,
    ) -> None:
        super().__init__(ids)
        self.split, self.splits, self._of_split = split, splits, of_split

    def __call__(self, split: str | None = None) -> list[str]:
        """The ids of ``split`` (default: the env's own).

        Raises:
            ValueError: for an unknown split, or another split than its own for an env bound to one split.
        """
        if split is None or split == self.split:
            return list(self)
        if split not in self.splits:
            raise ValueError(f"split must be one of {', '.join(self.splits)}, got {split!r}")
        if self._of_split is None:
            raise ValueError(
                f"this env was built for split {self.split!r} and plays only its tasks, not those of {split!r}; "
                f'build one with split="{split}"'
            )
        return self._of_split(split)


class TaskEnv(gym.Env[str, str]):
    """A text env over named tasks, grouped in splits (DESIGN.md contract 1).

    Subclasses set :attr:`splits`, :attr:`split` and :attr:`max_env_steps`, implement
    :meth:`_task_ids_of`, call :meth:`_start_episode` in ``reset`` and, in ``step``,
    :meth:`_begin_step` first and :meth:`_end_step` once they know whether the step terminated.

    **Snapshots.** An env that sets :attr:`snapshot_kind` and implements :meth:`_save_episode`
    and :meth:`_restore_episode` supports ``snap = env.unwrapped.save_state()`` (an
    :class:`EnvSnapshot`) and ``env.reset(options={"snapshot": snap})``, which goes through
    every ``gym.make`` wrapper (a reset is what they expect); its ``reset`` starts with
    ``if (restored := self._reset_to_snapshot(seed, options)) is not None: return restored``.
    :meth:`restore_state` does the same on the unwrapped env. The snapshot restores into this
    env, or into a fresh one built with the same arguments in any process.

    Attributes:
        splits: the env's split names.
        split: the split ``reset`` draws from when no task id is given.
        bound_to_split: whether the env plays only its own split's tasks (then ``task_ids`` of
            another split is an error, and a caller builds another env with ``split=...``).
        max_env_steps: steps after which an episode is truncated (the env's horizon); ``max_steps`` is its
            deprecated spelling (readable for one release, with a ``FutureWarning``).
        action_hint: words after "action must be a str" in the error for a non-string action.
        prompt: the env's prompt for an LLM agent, (system prompt, user template); the template is a
            ``str.format`` string over task, step, max_env_steps, history, observation and
            admissible_actions (the trainer appends its answer format, see gaca_train.rollout);
            ``{max_steps}`` still fills with the episode cap.
        snapshot_kind: the ``env`` field of the env's snapshots; empty: the env has none.
        snapshot_version: the format version of the env's snapshots.
    """

    splits: tuple[str, ...] = ()
    bound_to_split: bool = False  # True: the env plays only the tasks of its own ``split`` (ALFWorld)
    prompt: tuple[str, str] = (
        "You are an agent acting in a text environment.",
        "Your task: {task}\n{history}Step {step} of at most {max_env_steps}. Current observation: {observation}\n"
        "Admissible actions: {admissible_actions}",
    )
    split: str
    max_env_steps: int
    max_steps = deprecated_max_steps
    action_hint: str = ""
    snapshot_kind: str = ""
    snapshot_version: int = 1
    _steps: int = 0
    _done: bool = True  # no episode yet
    _started: bool = False  # an episode was started or restored (save_state has something to save)

    @property
    def task_ids(self) -> TaskIds:
        """The task ids of the env's split that ``reset(options={"task_id": ...})`` accepts.

        A list (``env.unwrapped.task_ids[0]``), also callable: ``task_ids(split)`` lists the ids of
        ``split`` (see :class:`TaskIds`).

        Raises:
            ValueError: (when called) for a split the env does not have, or, for an env bound to one
                split, another one.
        """
        of_split = None if self.bound_to_split else self._task_ids_of
        return TaskIds(self._task_ids_of(self.split), self.split, self.splits, of_split)

    def _task_ids_of(self, split: str) -> list[str]:
        """The task ids of ``split`` (one of :attr:`splits`)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _task_ids_of(split) for task_ids")

    def _check_split(self, split: str | None) -> str:
        """``split`` (or the env's own when None), checked against :attr:`splits`."""
        split = self.split if split is None else split
        if split not in self.splits:
            raise ValueError(f"split must be one of {', '.join(self.splits)}, got {split!r}")
        return split

    def _start_episode(self) -> None:
        """Resets the step counter; the episode accepts steps."""
        self._steps, self._done, self._started = 0, False, True

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
        """Whether the step is truncated (``max_env_steps`` reached, not terminated); ends the episode if either."""
        truncated = not terminated and self._steps >= self.max_env_steps
        self._done = terminated or truncated
        return truncated

    # Snapshots -------------------------------------------------------------------------------
    def save_state(self) -> EnvSnapshot:
        """A snapshot of the current episode, for ``reset(options={"snapshot": ...})`` or :meth:`restore_state`.

        Lets researchers branch rollouts from any step: save once, restore as often as wanted, in
        this env or a fresh one built with the same arguments (in any process).

        Raises:
            RuntimeError: before the first reset, or if the env cannot snapshot its episodes.
        """
        if not self.snapshot_kind:
            raise RuntimeError(f"{type(self).__name__} does not support snapshots")
        if not self._started:
            raise RuntimeError("save_state() called before reset(); call env.reset() first")
        task_id, observation, state = self._save_episode()
        rng = None if self._np_random is None else self._np_random.bit_generator.state
        return EnvSnapshot(
            self.snapshot_kind, self.snapshot_version, task_id, self._steps, self._done, observation, state, rng
        )

    def restore_state(self, snapshot: EnvSnapshot) -> tuple[str, dict[str, Any]]:
        """Returns the env to a :meth:`save_state` snapshot; works on a fresh env too (no reset needed).

        Through ``gym.make``'s wrappers use ``env.reset(options={"snapshot": snapshot})`` instead,
        which the wrappers see (the order enforcer, a caller's ``TimeLimit``).

        The snapshot is checked, not trusted: its kind and version, ``steps`` within
        ``[0, max_env_steps]``, its generator state, the env's own state (each env's
        ``_restore_episode``: the task is one of the env's, the state is one the task can be in, the
        observation is the one the state shows), and ``done`` against the state (an episode ends
        exactly when the state is terminal or ``steps`` reached ``max_env_steps``). Any refusal
        leaves the env needing a reset: the episode that ran before is gone, and ``step`` raises
        until the next successful reset or restore.

        Returns:
            The snapshot's observation and info (``action_valid`` True, as after a reset).

        Raises:
            TypeError: if ``snapshot`` is not an :class:`EnvSnapshot` (a dict read from JSON goes
                through :meth:`EnvSnapshot.from_dict` first).
            ValueError: for a snapshot of another env, another format version, or a state this env
                cannot restore (the message says which field and why).
        """
        # Whatever happens below, the episode that ran before is over: a refused snapshot leaves nothing to step.
        self.discard_episode()
        if not isinstance(snapshot, EnvSnapshot):
            hint = (
                "; a snapshot read from JSON restores as EnvSnapshot.from_dict(value)"
                if isinstance(snapshot, dict)
                else ""
            )
            raise TypeError(f"snapshot must come from save_state(), got {type(snapshot).__name__}{hint}")
        if snapshot.env != self.snapshot_kind:
            raise ValueError(
                f"snapshot was saved by a {snapshot.env!r:.40} env; this {type(self).__name__} restores only "
                f"{self.snapshot_kind!r} snapshots"
            )
        if snapshot.version != self.snapshot_version:
            raise ValueError(
                f"snapshot format version {snapshot.version} is not the version this {type(self).__name__} reads "
                f"({self.snapshot_version}); save the episode again with this version of gaca_envs"
            )
        if not 0 <= snapshot.steps <= self.max_env_steps:
            raise ValueError(
                f"snapshot field steps must be in [0, max_env_steps={self.max_env_steps}], got {snapshot.steps}; "
                "restore it into an env built with the arguments that saved it"
            )
        rng = _generator_from_state(snapshot.rng) if snapshot.rng is not None else None
        self._steps, self._done = snapshot.steps, snapshot.done
        try:
            observation, info = self._restore_episode(snapshot)
            ends = self._terminal() or snapshot.steps >= self.max_env_steps
        except Exception as e:
            self.discard_episode()
            if isinstance(e, (KeyError, TypeError, IndexError, AttributeError)):
                raise ValueError(
                    f"snapshot state of task {snapshot.task_id!r:.80} does not fit this {type(self).__name__} "
                    f"({type(e).__name__}: {e!s:.200}); restore it into an env built with the arguments that saved it"
                ) from e
            raise
        if snapshot.done != ends:
            self.discard_episode()
            why = "its state is terminal" if self._terminal() else f"steps reached max_env_steps={self.max_env_steps}"
            raise ValueError(
                f"snapshot field done is {snapshot.done} but the episode "
                + (f"has ended ({why})" if ends else f"goes on (a state that is not terminal, steps={snapshot.steps})")
                + f"; done must be {ends}: restore the snapshot save_state() gave, unchanged"
            )
        self._started = True
        if rng is not None:
            self._np_random = rng
        return observation, info

    def discard_episode(self) -> None:
        """Drops the current episode: ``step`` raises and ``save_state`` refuses until the next reset.

        What a refused snapshot leaves behind; a server calls it when it refuses a snapshot before
        the env sees it (a bad signature), so that the session's old episode does not go on.
        """
        self._done, self._started = True, False

    def _reset_to_snapshot(
        self, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[str, dict[str, Any]] | None:
        """``restore_state(options["snapshot"])`` when the reset options hold a snapshot, else None.

        Without a seed the env's generator goes on from the snapshot's state (the restored episode
        draws as the saved one would have); a seed reseeds it after the restore, so branches
        restored from one snapshot with different seeds (``vector_env.reset(seed=0, options=...)``
        gives each env its own) draw differently, and reproducibly.

        Raises:
            ValueError: if the options hold more than the snapshot (the env then needs a reset, as
                after any refused snapshot).
        """
        if not options or "snapshot" not in options:
            return None
        if len(options) > 1:
            self.discard_episode()
            raise ValueError(f"reset options with 'snapshot' may contain nothing else, got {sorted(options)}")
        restored = self.restore_state(options["snapshot"])
        if seed is not None:
            gym.Env.reset(self, seed=seed)
        return restored

    def _terminal(self) -> bool:
        """Whether the current (just restored) state ends the episode: won, or an end the env defines."""
        raise NotImplementedError(f"{type(self).__name__} must implement _terminal for snapshots")

    def _check_observation(self, snapshot: EnvSnapshot, shown: str | tuple[str, ...]) -> None:
        """Refuses a snapshot whose observation is not one the restored state shows.

        Args:
            snapshot: the snapshot being restored.
            shown: the observation the state gives, or every one it may give (an env whose
                observation depends on a mode, or on which of a few actions led there).

        Raises:
            ValueError: naming the field; the message quotes only the snapshot's own text.
        """
        if snapshot.observation not in ((shown,) if isinstance(shown, str) else shown):
            raise ValueError(
                f"snapshot field observation ({snapshot.observation!r:.60}) is not what its state shows: an "
                "observation is derived from the state and cannot be edited; restore the snapshot save_state() gave"
            )

    def _save_episode(self) -> tuple[str, str, dict[str, Any]]:
        """The episode's task id, observation and env state (a dict of JSON types)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _save_episode for snapshots")

    def _restore_episode(self, snapshot: EnvSnapshot) -> tuple[str, dict[str, Any]]:
        """Restores the env's own state from ``snapshot`` (step count and end already restored).

        Returns:
            The observation and info (``action_valid`` True).

        Raises:
            ValueError: for a state the env cannot restore, naming the field.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement _restore_episode for snapshots")


def same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values are equal with their types: ``True`` is not ``1``, and ``1`` is not ``1.0``.

    Snapshot checks compare with it, so a value of another JSON type is refused rather than taken
    as equal (Python's ``True == 1 == 1.0``).
    """
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _generator_from_state(state: dict[str, Any]) -> np.random.Generator:
    """A numpy generator in the bit generator state ``state`` (as ``bit_generator.state`` gives it).

    Raises:
        ValueError: if ``state`` is not the state of one of numpy's bit generators.
    """
    name = state.get("bit_generator")
    if not isinstance(name, str) or name not in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"):
        raise ValueError(f"snapshot rng must be a numpy bit generator state, got bit_generator={name!r:.40}")
    generator = np.random.Generator(getattr(np.random, name)())
    try:
        generator.bit_generator.state = state
    except Exception as e:  # numpy raises TypeError, ValueError, KeyError or OverflowError for a bad state
        raise ValueError(f"snapshot rng is not a valid {name} state ({type(e).__name__}: {e!s:.120})") from e
    return generator


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
