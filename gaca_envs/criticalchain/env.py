"""GACA-CriticalChain-v0: a long-horizon text env built to test credit assignment."""

from __future__ import annotations

import string
from typing import Any

from gaca_envs.anchors import anchor_digest
from gaca_envs.criticalchain.tasks import DISTRACTORS, SPLITS, ChainTask, make_task, parse_task_id
from gaca_envs.spaces import TextSpace
from gaca_envs.task_env import NOTHING_HAPPENS, TaskEnv, resolve_max_env_steps, same_json

_CHARSET = frozenset(string.printable)
# Equivalent ways to move on at a routine stage; ``move_phrasings`` of them are offered (default the first 2).
MOVE_VERBS: tuple[str, ...] = (
    "walk to", "go to", "head to", "continue to", "proceed to", "travel to", "make your way to", "set off for",
)  # fmt: skip


def _normalise(action: str) -> str:
    return " ".join(action.strip().lower().split())


class CriticalChainEnv(TaskEnv):
    """Walk a chain of stages; a few forks decide the outcome, which shows only at the end.

    **Task.** Deliver a parcel along ``horizon`` stages to a goal. Most stages are routine: the
    admissible actions are ``move_phrasings`` phrasings of "move on" (two by default; all lead to
    the same next state) plus
    ``num_distractors`` valid actions that change nothing (the state recurs, as loops do in
    ALFWorld). ``num_branches`` stages are forks with ``branch_width`` roads; the road taken is
    not shown in later observations, and only the goal stage reveals whether every fork was
    taken right. With ``hint=True`` the task text names the right signs in order, so a policy
    can learn the rule rather than memorise each task.

    **Observation.** Text: the current stage, place and what is in sight (``Text`` space).

    **Actions.** Text. Anything that is not one of ``info["admissible_actions"]`` (case and
    spacing ignored) is a step that answers ``"Nothing happens."`` with
    ``info["action_valid"] = False``. With probability ``noise`` a "move on" action slips and
    the agent stays where it is.

    **Reward.** ``reward_on_success`` on the step that reaches the goal with every fork right,
    else 0. ``info["score"]`` is 1.0 when won, else 0.0.

    **Episode end.** Terminated on reaching the goal (won or not); truncated after ``max_env_steps``
    steps (default ``2 * horizon``).

    **Anchor key.** Digest of the true state: task id, stage, and the roads taken so far (which
    the observation hides, so ``anchor_text`` merges states that ``anchor_key`` keeps apart).

    **Tasks.** ``"<split>-<index>"`` with split in ``train``/``valid``/``test`` and index below
    ``num_tasks``: ``env.unwrapped.task_ids`` lists the env's split, ``task_ids("valid")``
    another. ``reset(options={"task_id": ...})`` picks one, otherwise a task of ``split`` is drawn
    with the env's seeded generator.

    **Snapshots.** ``env.unwrapped.save_state()`` returns an
    :class:`~gaca_envs.task_env.EnvSnapshot` (``env="criticalchain"``) whose ``state`` is the
    stage, the roads taken and the task-shaping arguments; ``env.reset(options={"snapshot": s})``
    returns to it in any env built with the same arguments. The generator state travels with it,
    so noisy moves after a restore slip exactly as they would have.

    **Version history.** v0: first version (snapshots added within v0: episodes are unchanged; the episode cap
    argument became ``max_env_steps`` within v0, ``max_steps`` deprecated; ``move_phrasings`` added within v0,
    its default 2 keeps episodes and snapshots unchanged).
    """

    prompt = (
        "You are a courier walking a road of stages.",
        "Task: {task}\n{history}Step {step} of at most {max_env_steps}. Now: {observation}\n"
        "Actions: {admissible_actions}",
    )

    metadata = {"render_modes": ["ansi"], "render_fps": 1}
    splits = SPLITS
    snapshot_kind = "criticalchain"

    def __init__(
        self,
        horizon: int = 10,
        num_branches: int = 2,
        branch_width: int = 2,
        num_distractors: int = 2,
        noise: float = 0.0,
        max_env_steps: int | None = None,
        reward_on_success: float = 10.0,
        hint: bool = True,
        num_tasks: int = 1000,
        split: str = "train",
        task_seed: int = 0,
        expert: bool = False,
        render_mode: str | None = None,
        max_steps: int | None = None,
        move_phrasings: int = 2,
    ) -> None:
        """Creates the env; see the class docstring for the meaning of each parameter.

        Raises:
            ValueError: if a parameter is out of range (the message names it and the fix).
        """
        max_env_steps = resolve_max_env_steps(max_env_steps, max_steps, default=None)
        _validate(
            horizon,
            num_branches,
            branch_width,
            num_distractors,
            noise,
            max_env_steps,
            num_tasks,
            split,
            render_mode,
            move_phrasings,
        )
        self.horizon = horizon
        self.num_branches = num_branches
        self.branch_width = branch_width
        self.num_distractors = num_distractors
        self.noise = float(noise)
        self.max_env_steps = 2 * horizon if max_env_steps is None else max_env_steps
        self.reward_on_success = float(reward_on_success)
        self.hint = hint
        self.num_tasks = num_tasks
        self.split = split
        self.task_seed = task_seed
        self.expert = expert
        self.render_mode = render_mode
        self.move_phrasings = move_phrasings
        self._forced_slip: bool | None = None  # step_outcomes decides the slip instead of the generator
        self.observation_space = TextSpace(4096, charset=_CHARSET)
        self.action_space = TextSpace(256, charset=_CHARSET)
        self._task: ChainTask | None = None
        self._stage = 0
        self._roads: list[str] = []
        self._steps = 0
        self._done = True
        self._observation = ""
        self._actions: dict[str, tuple[str, str]] = {}

    def _task_ids_of(self, split: str) -> list[str]:
        """``["<split>-0", ..., "<split>-<num_tasks - 1>"]``."""
        return [f"{split}-{i}" for i in range(self.num_tasks)]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Starts an episode on ``options["task_id"]`` or on a task drawn from ``split``.

        ``options={"snapshot": snapshot}`` instead returns to a :meth:`save_state` snapshot.
        """
        if (restored := self._reset_to_snapshot(seed, options)) is not None:
            return restored
        super().reset(seed=seed)
        task_id = (options or {}).get("task_id")
        if task_id is None:
            task_id = f"{self.split}-{int(self.np_random.integers(self.num_tasks))}"
        elif not isinstance(task_id, str):
            raise TypeError(f"options['task_id'] must be a str like 'train-0', got {type(task_id).__name__}")
        self._task = self._make_task(task_id)
        self._stage, self._roads = 0, []
        self._start_episode()
        self._observation = f"{self._task_text()}\n{self._describe()}"
        return self._observation, self._info(action_valid=True, won=False)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Takes one action; invalid text is a step that answers ``"Nothing happens."``.

        Raises:
            TypeError: if ``action`` is not a str.
            RuntimeError: if called before ``reset`` or after the episode ended.
        """
        self._begin_step(action)
        kind_target = self._actions.get(_normalise(action))
        valid = kind_target is not None
        reward, terminated, won = 0.0, False, False
        if not valid:
            self._observation = NOTHING_HAPPENS
        else:
            kind, target = kind_target
            if kind == "stay":
                self._observation = f"You {target}. Nothing changes.\n{self._describe()}"
            elif kind == "move" and self._slips():
                self._observation = f"You stumble on the way and are still at the {self._place()}.\n{self._describe()}"
            else:
                if kind == "fork":
                    self._roads.append(target)
                self._stage += 1
                if self._stage == self.horizon:
                    terminated = True
                    won = tuple(self._roads) == self._task.correct_signs
                    reward = self.reward_on_success if won else 0.0
                self._observation = self._describe(won=won)
        truncated = self._end_step(terminated)
        return self._observation, reward, terminated, truncated, self._info(action_valid=valid, won=won)

    def _make_task(self, task_id: str) -> ChainTask:
        _, index = parse_task_id(task_id)
        if index >= self.num_tasks:
            raise ValueError(f"task index {index} of {task_id!r} is out of range: num_tasks={self.num_tasks}")
        return make_task(
            task_id,
            seed=self.task_seed,
            horizon=self.horizon,
            num_branches=self.num_branches,
            branch_width=self.branch_width,
        )

    # Snapshots: the shared handling is TaskEnv's (save_state, restore_state, reset with a snapshot).
    def _task_arguments(self) -> dict[str, Any]:
        """The arguments that shape tasks and their texts: a snapshot restores only under the same ones."""
        names = (
            "horizon",
            "num_branches",
            "branch_width",
            "num_distractors",
            "noise",
            "hint",
            "num_tasks",
            "task_seed",
        )
        args = {name: getattr(self, name) for name in names}
        if self.move_phrasings != 2:  # default snapshots keep their v0 form
            args["move_phrasings"] = self.move_phrasings
        return args

    def _save_episode(self) -> tuple[str, str, dict[str, Any]]:
        """State: ``stage`` (0 to ``horizon``), ``roads`` (the signs taken at the forks passed) and ``env_args``."""
        state = {"stage": self._stage, "roads": list(self._roads), "env_args": self._task_arguments()}
        return self._task.task_id, self._observation, state

    def _restore_episode(self, snapshot: Any) -> tuple[str, dict[str, Any]]:
        state = snapshot.state
        if set(state) != {"stage", "roads", "env_args"}:
            raise ValueError(f"CriticalChain snapshot state needs stage, roads and env_args, got {sorted(state)}")
        ours = self._task_arguments()
        theirs = state["env_args"]
        if not same_json(theirs, ours):
            if not isinstance(theirs, dict):
                raise ValueError(f"snapshot state env_args must be a dict of the env's arguments, got {theirs!r:.80}")
            diff = ", ".join(
                f"{k}={theirs.get(k)!r:.40} (this env: {v!r})"
                for k, v in ours.items()
                if not same_json(theirs.get(k), v)
            )
            diff = diff or f"other arguments {sorted(set(theirs) - set(ours))!r:.120}"
            raise ValueError(
                f"snapshot was saved by a CriticalChain env with {diff}; build the env with those arguments"
            )
        try:
            task = self._make_task(snapshot.task_id)
        except ValueError as e:
            raise ValueError(f"snapshot task_id is not a task of this env: {e}") from e
        stage, roads = state["stage"], state["roads"]
        if not isinstance(stage, int) or isinstance(stage, bool) or not 0 <= stage <= self.horizon:
            raise ValueError(f"snapshot state stage must be an int in [0, {self.horizon}], got {stage!r:.40}")
        passed = [i for i, fork in enumerate(task.fork_stages) if fork < stage]
        if (
            not isinstance(roads, list)
            or len(roads) != len(passed)
            or any(road not in task.fork_signs[i] for i, road in zip(passed, roads, strict=False))
        ):
            raise ValueError(
                f"snapshot state roads must be one sign per fork passed ({len(passed)} at stage {stage}) out of "
                f"that fork's signs, got {roads!r:.80}"
            )
        if snapshot.steps < stage:
            raise ValueError(
                f"snapshot field steps={snapshot.steps} is below the stage {stage}: each stage passed takes a step; "
                "restore the snapshot save_state() gave"
            )
        self._task, self._stage, self._roads = task, stage, list(roads)
        won = stage == self.horizon and tuple(roads) == task.correct_signs
        self._check_observation(snapshot, self._observations_of_state(snapshot.steps, won))
        self._observation = snapshot.observation
        return self._observation, self._info(action_valid=True, won=won)

    def _observations_of_state(self, steps: int, won: bool) -> tuple[str, ...]:
        """Every observation the current stage can show after ``steps`` steps (refreshes the admissible actions).

        At step 0 the task and the first stage; at the goal its verdict; elsewhere the stage after
        arriving, after a distractor action, after a slip (with noise), or "Nothing happens.".
        """
        description = self._describe(won=won)
        if steps == 0:
            return (f"{self._task_text()}\n{description}",)
        if self._stage == self.horizon:
            return (description,)
        shown = [NOTHING_HAPPENS] + [
            f"You {target}. Nothing changes.\n{description}"
            for kind, target in self._actions.values()
            if kind == "stay"
        ]
        if self._stage > 0:
            shown.append(description)
        if self.noise > 0 and any(kind == "move" for kind, _ in self._actions.values()):
            shown.append(f"You stumble on the way and are still at the {self._place()}.\n{description}")
        return tuple(shown)

    def _terminal(self) -> bool:
        """The goal stage ends the episode, won or lost."""
        return self._stage == self.horizon

    def _slips(self) -> bool:
        """Whether a move slips this step: drawn with probability ``noise``, or as :meth:`step_outcomes` forces it."""
        if self._forced_slip is not None:
            return self._forced_slip
        return self.noise > 0 and self.np_random.random() < self.noise

    def step_outcomes(self, action: str) -> list[tuple[float, tuple[str, float, bool, bool, dict[str, Any]], Any]]:
        """Every outcome of ``action`` in the current state with its probability; the env is left as it was.

        The env's dynamics as a table, for exact dynamic programming (:mod:`gaca_train.oracle.exact`): a
        move has two outcomes under ``noise`` (on with 1 - noise, a slip with noise), every other action one.

        Returns:
            (probability, the step's 5-tuple, the snapshot after it or None where the episode ended)
            triples; the probabilities sum to 1.
        """
        saved = self.save_state()
        kind_target = self._actions.get(_normalise(action)) if isinstance(action, str) else None
        branches: tuple[tuple[bool | None, float], ...] = ((None, 1.0),)
        if kind_target is not None and kind_target[0] == "move" and self.noise > 0:
            branches = ((False, 1.0 - self.noise), (True, self.noise))
        out = []
        try:
            for slip, probability in branches:
                self._forced_slip = slip
                result = self.step(action)
                out.append((probability, result, None if result[2] or result[3] else self.save_state()))
                self.restore_state(saved)
        finally:
            self._forced_slip = None
        return out

    def render(self) -> str | None:
        """Returns the current observation text in ``"ansi"`` mode."""
        return self._observation if self.render_mode == "ansi" else None

    def _place(self) -> str:
        return self._task.places[self._stage]

    def _task_text(self) -> str:
        task = self._task
        text = f"Deliver the parcel from the {task.places[0]} to the {task.places[-1]}."
        if self.hint and task.correct_signs:
            text += " At the forks, follow the signs " + ", then ".join(task.correct_signs) + "."
        return text

    def _describe(self, won: bool = False) -> str:
        """Text of the current state; also refreshes the admissible action table."""
        task, stage = self._task, self._stage
        self._actions = {}
        if stage == self.horizon:
            if won:
                return f"You reach the {task.places[-1]} and hand over the parcel. Delivered!"
            return f"You reach a {task.places[-1]}, but it is the wrong one: a turn was missed. The parcel is lost."
        head = f"Stage {stage + 1} of {self.horizon}: you are at the {self._place()}."
        if stage in task.fork_stages:
            signs = task.fork_signs[task.fork_stages.index(stage)]
            for sign in signs:
                self._actions[f"take the {sign} road"] = ("fork", sign)
            text = f"{head} The road forks. Signs point to: {', '.join(signs)}."
        else:
            nxt = task.places[stage + 1]
            for verb in MOVE_VERBS[: self.move_phrasings]:
                self._actions[f"{verb} the {nxt}"] = ("move", nxt)
            text = f"{head} The road goes on to the {nxt}."
        for k in range(self.num_distractors):
            distractor = DISTRACTORS[(stage + k) % len(DISTRACTORS)]
            self._actions[distractor] = ("stay", distractor)
        return text

    def _expert_action(self) -> str | None:
        task, stage = self._task, self._stage
        if stage == self.horizon:
            return None
        if stage in task.fork_stages:
            return f"take the {task.correct_signs[task.fork_stages.index(stage)]} road"
        return f"walk to the {task.places[stage + 1]}"

    def _info(self, *, action_valid: bool, won: bool) -> dict[str, Any]:
        task = self._task
        state = [task.task_id, f"stage={self._stage}", "roads=" + ",".join(self._roads)]
        info: dict[str, Any] = {
            "task": self._task_text(),
            "task_id": task.task_id,
            "admissible_actions": sorted(self._actions),
            "anchor_key": anchor_digest("criticalchain", state),
            "anchor_text": self._observation,
            "action_valid": action_valid,
            "won": won,
            "score": 1.0 if won else 0.0,
            "stage": self._stage,
            "fork": self._stage in task.fork_stages,
        }
        if self.expert:
            info["expert_action"] = self._expert_action()
        return info


def _validate(
    horizon: int,
    num_branches: int,
    branch_width: int,
    num_distractors: int,
    noise: float,
    max_env_steps: int | None,
    num_tasks: int,
    split: str,
    render_mode: str | None,
    move_phrasings: int = 2,
) -> None:
    checks = [
        (horizon >= 2, f"horizon must be >= 2, got {horizon}"),
        (
            0 <= num_branches <= horizon - 1,
            f"num_branches must be in [0, horizon - 1] = [0, {horizon - 1}] (stage 1 is never a fork), "
            f"got {num_branches}",
        ),
        (2 <= branch_width <= 10, f"branch_width must be in [2, 10], got {branch_width}"),
        (
            0 <= num_distractors <= len(DISTRACTORS),
            f"num_distractors must be in [0, {len(DISTRACTORS)}], got {num_distractors}",
        ),
        (0.0 <= noise < 1.0, f"noise must be in [0, 1), got {noise}"),
        (max_env_steps is None or max_env_steps >= 1, f"max_env_steps must be >= 1 or None, got {max_env_steps}"),
        (num_tasks >= 1, f"num_tasks must be >= 1, got {num_tasks}"),
        (
            isinstance(move_phrasings, int) and 1 <= move_phrasings <= len(MOVE_VERBS),
            f"move_phrasings must be an int in [1, {len(MOVE_VERBS)}], got {move_phrasings!r}",
        ),
        (split in SPLITS, f"split must be one of {SPLITS}, got {split!r}"),
        (render_mode in (None, "ansi"), f"render_mode must be None or 'ansi', got {render_mode!r}"),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)


__all__ = ["NOTHING_HAPPENS", "CriticalChainEnv"]
