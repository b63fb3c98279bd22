"""The interface between ``GACA-ALFWorld-v0`` and its game engines; imports no engine.

An engine loads one ALFWorld game file (``game.tw-pddl``: PDDL domain, problem and grammar),
resets it and applies admissible commands. The env talks to engines only through
:class:`Engine` and :class:`EngineState`; engines report bad game files as
:class:`GameFileError` and read them with :func:`read_game_file`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

GAME_FILE_KEYS = ("pddl_domain", "grammar", "pddl_problem")


class GameFileError(ValueError):
    """A game file that cannot be loaded or played (corrupt, not ALFWorld's format, unsolvable)."""


@dataclass(frozen=True)
class EngineState:
    """What an engine reports after a reset or a step.

    Attributes:
        observation: the game's text (the intro on reset, the feedback after a step).
        admissible_commands: commands the game accepts now, sorted as ALFWorld sorts them.
        won: whether the goal holds.
        facts: the sorted dynamic PDDL facts (``"inreceptacle apple_bar_... fridge_bar_..."``).
    """

    observation: str
    admissible_commands: tuple[str, ...]
    won: bool
    facts: tuple[str, ...]


class Engine(Protocol):
    """The interface the env uses; :class:`~gaca_envs.alfworld.engines.textworld.TextWorldEngine` is the reference.

    Attributes:
        name: the engine's name in :data:`~gaca_envs.alfworld.engines.ENGINES`.
        supports_snapshots: whether :meth:`get_state` / :meth:`set_state` work; when false they raise
            ``RuntimeError``.
    """

    name: str
    supports_snapshots: bool

    def load(self, game_file: str) -> None:
        """Loads a ``game.tw-pddl`` file. Raises :class:`GameFileError` naming the file."""

    def reset(self) -> EngineState:
        """Starts the loaded game from its initial state."""

    def step(self, command: str) -> EngineState:
        """Applies one command (a command that is not admissible answers "Nothing happens.")."""

    def static_facts(self) -> tuple[str, ...]:
        """The loaded game's facts that never change (types, receptacle places, properties)."""

    def entity_names(self) -> Mapping[str, str]:
        """PDDL id -> the name the game text uses (``"apple 1"``)."""

    def get_state(self) -> Any:
        """A small, picklable snapshot of the current game state, for :meth:`set_state`.

        Raises:
            RuntimeError: before a reset, or if the engine does not support snapshots.
        """

    def set_state(self, state: Any) -> EngineState:
        """Restores a :meth:`get_state` snapshot taken in the loaded game (the observation is empty).

        Raises:
            RuntimeError: before a load, or if the engine does not support snapshots.
        """

    def close(self) -> None:
        """Frees the engine's resources."""


def read_game_file(path: str) -> dict[str, Any]:
    """Reads and checks a ``game.tw-pddl`` file.

    Raises:
        GameFileError: naming the file, if it is not JSON with ALFWorld's keys, or is marked unsolvable.
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise GameFileError(f"cannot read ALFWorld game file {path}: {e}") from e
    missing = [k for k in GAME_FILE_KEYS if not isinstance(data, dict) or not isinstance(data.get(k), str)]
    if missing:
        raise GameFileError(
            f"ALFWorld game file {path} lacks {', '.join(missing)}; expected a JSON object with "
            f"{', '.join(GAME_FILE_KEYS)} as written by alfworld-generate or gaca-alfworld-generate"
        )
    if data.get("solvable") is False:
        raise GameFileError(
            f'ALFWorld game file {path} is marked unsolvable ("solvable": false); remove it or regenerate it'
        )
    return data
