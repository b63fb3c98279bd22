"""``GACA-ALFWorld-v0``: ALFWorld's text games as a Gymnasium env (DESIGN.md contract 1)."""

from __future__ import annotations

import json
import os
import string
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gaca_envs.alfworld.alfred_data import SPLITS
from gaca_envs.alfworld.data import GameRecord, collect_games, ensure_generated, real_data_root, task_type_names
from gaca_envs.alfworld.domain import TaskParams
from gaca_envs.alfworld.engines import ENGINES, Engine, EngineState, make_engine, read_game_file
from gaca_envs.alfworld.solver import NoPlanError, solve
from gaca_envs.anchors import anchor_digest
from gaca_envs.spaces import TextSpace
from gaca_envs.task_env import NOTHING_HAPPENS, EnvSnapshot, TaskEnv, resolve_max_env_steps

TEXT_CHARSET = string.printable
MAX_TEXT = 1 << 16
_TASK_PREFIX = "Your task is to: "


def _record_from_file(game_file: str) -> GameRecord:
    read_game_file(game_file)  # raises GameFileError naming the file if corrupt or unsolvable
    traj_file = Path(game_file).parent / "traj_data.json"
    try:
        traj = json.loads(traj_file.read_text())
        task_type, params = traj["task_type"], traj["pddl_params"]
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(
            f"game file {game_file} needs a traj_data.json with task_type and pddl_params beside it"
        ) from e
    task_id = "/".join(Path(game_file).parent.parts[-3:])
    return GameRecord(task_id, game_file, task_type, params)


def _task_text(intro: str) -> str:
    """The task sentence of a game's intro ("Your task is to: put a clean apple in fridge." -> without the dot)."""
    return intro.rsplit(_TASK_PREFIX, 1)[-1].strip().removesuffix(".") if _TASK_PREFIX in intro else ""


# Kept for callers of the earlier name: ALFWorld's snapshots are the task contract's EnvSnapshot.
ALFWorldSnapshot = EnvSnapshot


class ALFWorldEnv(TaskEnv):
    """ALFWorld's household text games (native or TextWorld engine) with canonical anchor keys.

    **Observation**: the game's text: on reset ALFWorld's intro (room overview and
    "Your task is to: ..."), after a step the feedback ("You arrive at fridge 1. ...").
    **Actions**: ALFWorld commands as text ("go to fridge 1", "take apple 1 from fridge 1",
    ...); surrounding whitespace is ignored as in ALFWorld. Anything not in
    ``info["admissible_actions"]`` is a step answered "Nothing happens." with
    ``info["action_valid"] = False``.
    **Reward**: ``reward_on_success`` at the step that wins, else 0.
    **Episode end**: terminated when the task is solved; truncated after ``max_env_steps`` steps.
    **Info** (reset and every step): the contract keys of DESIGN.md (``task``, ``task_id``,
    ``admissible_actions``, ``anchor_key`` = digest of the sorted dynamic PDDL facts,
    ``anchor_text`` = the observation, ``action_valid``, ``won``, ``score``) plus
    ``task_type``, ``game_file``, ``step`` and, with ``expert=True``, ``expert_action``
    (next command of a plan from the current state, ``""`` once won).

    Games: ``game_files`` if given; else real ALFWorld data from ``data_path`` or
    ``$ALFWORLD_DATA`` (``json_2.1.1/<split>``, ALFWorld's filters); else games generated once
    into the user cache (see :mod:`gaca_envs.alfworld.data`). ``env.unwrapped.task_ids`` lists them.

    Snapshots (native engine): ``env.unwrapped.save_state()`` returns an
    :class:`~gaca_envs.task_env.EnvSnapshot` (``env="alfworld"``, version 2; ``state``: the
    admissible commands played and whether the last step's command was admissible; the game is the
    task id's among the env's own games, never a file path). ``env.reset(options={"snapshot": s})``
    returns any env of this engine and these games to it by replaying the commands, each checked
    admissible; a task the env does not play, a command the game refuses, or an observation other
    than the replay's is refused.

    Version history: v0 (initial; the native engine became the default with identical text and states; the
    episode cap argument became ``max_env_steps``, ``max_steps`` deprecated).

    Args:
        split: ``train``, ``valid_seen`` or ``valid_unseen``.
        data_path: folder holding ``json_2.1.1`` (ALFWorld's or ``gaca-alfworld-generate``'s).
        game_files: explicit ``game.tw-pddl`` files (overrides ``split``/``data_path``).
        task_types: ALFWorld task types to keep: numbers 1-6 (as in ALFWorld's config) or the names
            ``info["task_type"]`` reports (``"pick_and_place_simple"``, ...), or a mix.
        max_env_steps: steps before truncation (default 50, as ALFWorld evaluates); ``max_steps`` is its
            deprecated spelling.
        reward_on_success: reward of the winning step.
        expert: add ``info["expert_action"]``.
        engine: game engine: ``"native"`` (default; :mod:`gaca_envs.alfworld.engines.native`, same text and
            states as TextWorld's, hundreds of times faster, supports :meth:`save_state`) or
            ``"textworld"`` (ALFWorld's stock TextWorld/Fast Downward engine, the reference).
        render_mode: ``None`` or ``"ansi"``.
    """

    prompt = (
        "You are an expert household agent in the ALFRED embodied text environment.",
        "Your task is to: {task}\n{history}You are at step {step} (at most {max_env_steps}). "
        "Current observation: {observation}\nAdmissible actions: {admissible_actions}",
    )

    metadata = {"render_modes": ["ansi"]}
    splits = SPLITS
    bound_to_split = True
    snapshot_kind = "alfworld"
    snapshot_version = 2  # 1 named the game file and carried the engine's facts; 2 names the task and replays
    action_hint = " (an ALFWorld command)"

    def __init__(
        self,
        split: str = "train",
        data_path: str | os.PathLike | None = None,
        game_files: Sequence[str] | None = None,
        task_types: Iterable[int | str] = (1, 2, 3, 4, 5, 6),
        max_env_steps: int | None = None,
        reward_on_success: float = 10.0,
        expert: bool = False,
        engine: str = "native",
        render_mode: str | None = None,
        max_steps: int | None = None,
    ) -> None:
        max_env_steps = resolve_max_env_steps(max_env_steps, max_steps, default=50)
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
        if not isinstance(max_env_steps, int) or max_env_steps < 1:
            raise ValueError(f"max_env_steps must be an int >= 1, got {max_env_steps!r}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(map(repr, ENGINES))}, got {engine!r}")
        self.split = split
        self.max_env_steps = max_env_steps
        self.reward_on_success = float(reward_on_success)
        self.expert = expert
        self.render_mode = render_mode
        self.task_types = task_type_names(task_types)  # names; an unknown value fails here
        self._engine_name = engine
        self._data_path = data_path
        self._records: list[GameRecord] | None = None
        if game_files is not None:
            if not game_files:
                raise ValueError("game_files must list at least one game.tw-pddl file, got an empty list")
            self._records = [_record_from_file(str(f)) for f in game_files]
        elif data_path is not None:
            real_data_root(data_path)  # fail early on a bad folder
        self.observation_space = TextSpace(MAX_TEXT, charset=TEXT_CHARSET)
        self.action_space = TextSpace(256, charset=TEXT_CHARSET)
        self._engine: Engine | None = None
        self._loaded: str | None = None
        self._record: GameRecord | None = None
        self._state: EngineState | None = None
        self._obs = ""
        self._task_text = ""
        self._actions: list[str] = []  # the admissible commands played this episode (what a snapshot replays)
        self._last_action_valid = True
        self._steps = 0
        self._done = True  # no episode until reset() or restore_state()

    # Games ---------------------------------------------------------------------------------
    @property
    def records(self) -> list[GameRecord]:
        """The games this env plays (collected, or generated into the cache, on first use)."""
        if self._records is None:
            root = real_data_root(self._data_path)
            if root is None:
                root = ensure_generated(self.split)
            self._records = collect_games(root, self.split, self.task_types)
            if not self._records:
                raise FileNotFoundError(
                    f"no solvable games of task types {self.task_types} in {root / self.split}; "
                    "generate some with: gaca-alfworld-generate --out DIR --split " + self.split
                )
        return self._records

    def _task_ids_of(self, split: str) -> list[str]:
        """The games' task ids (``split`` is the env's own: an ALFWorld env plays the games of one split)."""
        return [r.task_id for r in self.records]

    def _pick(self, options: dict[str, Any] | None) -> GameRecord:
        options = dict(options or {})
        task_id = options.pop("task_id", None)
        if options:
            raise ValueError(f"reset options may only contain 'task_id' or 'snapshot', got {sorted(options)}")
        if task_id is None:
            return self.records[int(self.np_random.integers(len(self.records)))]
        for record in self.records:
            if record.task_id == task_id:
                return record
        raise ValueError(
            f"unknown task_id {task_id!r}; expected one of env.unwrapped.task_ids ({len(self.records)} tasks, "
            f"e.g. {self.records[0].task_id!r})"
        )

    # Gymnasium API ---------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Starts a game: ``options["task_id"]`` if given, else one drawn with the env's RNG.

        ``options={"snapshot": snapshot}`` instead returns to a :meth:`save_state` snapshot (the
        episode goes on from its step count); through ``gym.make``'s wrappers this is the way to
        restore, since every wrapper sees a reset.

        Raises:
            ValueError: for an unknown task id or option, or a snapshot this env cannot restore.
            TypeError: if ``options["snapshot"]`` is not an :class:`~gaca_envs.task_env.EnvSnapshot`.
        """
        if (restored := self._reset_to_snapshot(seed, options)) is not None:
            return restored
        super().reset(seed=seed)
        record = self._pick(options)
        if self._engine is None:
            self._engine = make_engine(self._engine_name)
        self._load(record)
        self._record = record
        self._state = self._engine.reset()
        self._obs = self._state.observation
        self._task_text = _task_text(self._obs)
        self._actions, self._last_action_valid = [], True
        self._start_episode()
        return self._obs, self._info(action_valid=True)

    def _load(self, record: GameRecord) -> None:
        """Loads ``record``'s game into the engine unless it is the one loaded."""
        if self._loaded != record.game_file:
            self._loaded = None
            self._engine.load(record.game_file)
            self._loaded = record.game_file

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Plays one command (see the class docstring for invalid commands, reward and ends)."""
        self._begin_step(action)
        command = action.strip()
        valid = command in self._state.admissible_commands
        if valid:
            self._state = self._engine.step(command)
            self._obs = self._state.observation
            self._actions.append(command)
        else:
            self._obs = NOTHING_HAPPENS
        self._last_action_valid = valid
        won = self._state.won
        terminated = won
        truncated = self._end_step(terminated)
        reward = self.reward_on_success if won else 0.0
        return self._obs, reward, terminated, truncated, self._info(action_valid=valid)

    def _info(self, action_valid: bool) -> dict[str, Any]:
        assert self._state is not None and self._record is not None
        info = {
            "task": self._task_text,
            "task_id": self._record.task_id,
            "admissible_actions": list(self._state.admissible_commands),
            "anchor_key": anchor_digest("alfworld", self._state.facts),
            "anchor_text": self._obs,
            "action_valid": action_valid,
            "won": self._state.won,
            "score": 1.0 if self._state.won else 0.0,
            "task_type": self._record.task_type,
            "game_file": self._record.game_file,
            "step": self._steps,
        }
        if self.expert:
            plan = [] if self._state.won else self.expert_plan()
            info["expert_action"] = plan[0] if plan else ""
        return info

    def expert_plan(self) -> list[str]:
        """Commands that win the current game from the current state (empty if none is found)."""
        if self._state is None or self._engine is None or self._record is None:
            raise RuntimeError("expert_plan() called before reset()")
        p = self._record.pddl_params
        task = TaskParams(
            task_type=self._record.task_type,
            object_target=p.get("object_target", ""),
            parent_target=p.get("parent_target", ""),
            toggle_target=p.get("toggle_target", ""),
        )
        try:
            return solve(self._engine.static_facts() + self._state.facts, self._engine.entity_names(), task)
        except NoPlanError:
            return []

    # Snapshots: the shared handling is TaskEnv's (save_state, restore_state, reset with a snapshot).
    def _save_episode(self) -> tuple[str, str, dict[str, Any]]:
        """State: the commands the episode played (``actions``, the admissible ones, in order) and
        whether the last step's command was admissible (``last_action_valid``).

        The game is the task id's, within this env's own games: a snapshot names no file. Restoring
        replays the commands from the game's start, so every fact, the observation and the task text
        come from the game itself, never from the snapshot.

        Raises:
            RuntimeError: with an engine that cannot snapshot its state (``engine="textworld"``).
        """
        if not self._engine.supports_snapshots:
            raise RuntimeError(f"save_state() needs engine='native'; this env uses engine={self._engine_name!r}")
        state = {"actions": list(self._actions), "last_action_valid": self._last_action_valid}
        return self._record.task_id, self._obs, state

    def _restore_episode(self, snapshot: EnvSnapshot) -> tuple[str, dict[str, Any]]:
        """Starts the task id's game and replays the snapshot's commands, each checked admissible in turn.

        Raises:
            RuntimeError: with an engine that cannot restore states.
            ValueError: for a task that is not one of this env's games, a command that is not
                admissible where the snapshot plays it (or after the game was won), counts that do
                not add up to ``steps``, or an observation other than the replay's.
        """
        state, steps = snapshot.state, snapshot.steps
        keys = {"actions", "last_action_valid"}
        if set(state) != keys:
            raise ValueError(
                f"ALFWorld snapshot state needs {', '.join(sorted(keys))}, got {sorted(state)!r:.200}; a snapshot "
                "of an older gaca_envs (a game file and facts) does not restore: save the episode again"
            )
        actions, last_valid = state["actions"], state["last_action_valid"]
        if not isinstance(last_valid, bool):
            raise ValueError(f"snapshot state last_action_valid must be a bool, got {last_valid!r:.40}")
        if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
            raise ValueError(f"snapshot state actions must be a list of commands (str), got {actions!r:.80}")
        # Each command is a step; so is an invalid last one. A reset's observation is no command's.
        needed = len(actions) + (0 if last_valid else 1)
        if steps < needed or (steps > 0 and last_valid and not actions) or (steps == 0 and not last_valid):
            raise ValueError(
                f"snapshot state actions ({len(actions)} commands, last_action_valid={last_valid}) do not fit "
                f"steps={steps}: the commands and a last invalid step each take a step"
            )
        record = self._record_of(snapshot.task_id)
        if self._engine is None:
            self._engine = make_engine(self._engine_name)
        if not self._engine.supports_snapshots:
            raise RuntimeError(f"restore_state() needs engine='native'; this env uses engine={self._engine_name!r}")
        self._load(record)
        replay = self._engine.replay(actions)
        engine_state, intro = replay.state, replay.intro
        if replay.stopped_at is not None:
            i = replay.stopped_at
            what = (
                "comes after the game was won: a won episode takes no more steps"
                if replay.why == "won"
                else f"is not an admissible command of task {record.task_id!r} at that point; a snapshot replays "
                "only commands the game accepts"
            )
            raise ValueError(f"snapshot state actions[{i}] ({actions[i]!r:.60}) {what}")
        if engine_state.won and not last_valid:
            raise ValueError("snapshot state last_action_valid is false after the winning command: a won episode ends")
        observation = intro if steps == 0 else (engine_state.observation if last_valid else NOTHING_HAPPENS)
        self._check_observation(snapshot, observation)
        self._record, self._state, self._obs = record, engine_state, observation
        self._task_text = _task_text(intro)
        self._actions, self._last_action_valid = list(actions), last_valid
        return self._obs, self._info(action_valid=True)

    def _record_of(self, task_id: str) -> GameRecord:
        """The game of ``task_id`` among this env's own games.

        Raises:
            ValueError: for a task id the env does not play; the message names the env's split and
                how many tasks it has, nothing about files.
        """
        for record in self.records:
            if record.task_id == task_id:
                return record
        raise ValueError(
            f"snapshot task_id {task_id!r:.80} is not one of this env's {len(self.records)} tasks (split "
            f"{self.split!r}, env.unwrapped.task_ids); restore it into an env built with the data and split that "
            "saved it"
        )

    def _terminal(self) -> bool:
        """A won game ends the episode."""
        return self._state.won

    def render(self) -> str | None:
        """The last observation (``render_mode="ansi"``)."""
        return self._obs if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Releases the engine."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None
            self._loaded = None
