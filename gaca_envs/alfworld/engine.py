"""Game engines behind ``GACA-ALFWorld-v0``: a small interface and the stock TextWorld engine.

An engine loads one ALFWorld game file (``game.tw-pddl``: PDDL domain, problem and grammar),
resets it and applies admissible commands. The env talks to engines only through
:class:`Engine` and :class:`EngineState`, so a faster engine can replace the TextWorld one.

:class:`TextWorldEngine` is ALFWorld's own text engine: TextWorld's ``PddlEnv`` (Fast Downward
for the state and planning) wrapped by ALFWorld's ``AlfredDemangler`` (``apple 1`` instead of
PDDL ids), exactly as ``AlfredTWEnv`` builds it. Library side effects are kept inside:
``alfworld`` is imported without creating ``~/.cache/alfworld`` or changing ``os.environ``, and
Fast Downward's translator, which rebinds ``sys.argv``, runs with ``sys.argv`` restored after.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

# PDDL predicates that make up the true, changing state of an ALFWorld game (DESIGN.md
# contract 1): where the agent is, what it holds, where objects are, and object/receptacle
# status. ``checked``/``examined`` are left out: looking at something changes no state.
DYNAMIC_PREDICATES = frozenset(
    {
        "atlocation",
        "holds",
        "holdsany",
        "inreceptacle",
        "objectatlocation",
        "opened",
        "isclean",
        "ishot",
        "iscool",
        "issliced",
        "istoggled",
        "ison",
    }
)
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
    """The interface the env uses; see :class:`TextWorldEngine` for the reference."""

    name: str

    def load(self, game_file: str) -> None:
        """Loads a ``game.tw-pddl`` file. Raises :class:`GameFileError` naming the file."""

    def reset(self) -> EngineState:
        """Starts the loaded game from its initial state."""

    def step(self, command: str) -> EngineState:
        """Applies one admissible command."""

    def static_facts(self) -> tuple[str, ...]:
        """The loaded game's facts that never change (types, receptacle places, properties)."""

    def entity_names(self) -> Mapping[str, str]:
        """PDDL id -> the name the game text uses (``"apple 1"``)."""

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


@contextlib.contextmanager
def contained_side_effects() -> Iterator[None]:
    """Restores ``sys.argv`` and the ``ALFWORLD_DATA`` variable after library code ran.

    Fast Downward's ``pddl2sas`` rebinds ``sys.argv``; ``import alfworld`` creates the folder
    named by ``ALFWORLD_DATA`` (default ``~/.cache/alfworld``) and sets the variable. While
    inside, an unset ``ALFWORLD_DATA`` points at the temp folder, which exists already.
    """
    saved_argv = sys.argv
    saved_argv_items = list(sys.argv)
    had_data_var = "ALFWORLD_DATA" in os.environ
    if not had_data_var:
        os.environ["ALFWORLD_DATA"] = tempfile.gettempdir()
    try:
        yield
    finally:
        sys.argv = saved_argv
        sys.argv[:] = saved_argv_items
        if not had_data_var:
            os.environ.pop("ALFWORLD_DATA", None)


def _load_textworld() -> tuple[Any, Any, Any]:
    try:
        with contained_side_effects():
            import textworld
            from alfworld.agents.environment.alfred_tw_env import AlfredDemangler
            from textworld.envs.pddl import PddlEnv
    except ImportError as e:
        raise ImportError(
            "the TextWorld engine needs alfworld, textworld and fast-downward-textworld; "
            "install them with: pip install 'gaca[alfworld]'"
        ) from e
    return textworld, PddlEnv, AlfredDemangler


def _fact_strings(facts: list[Any], dynamic: bool) -> tuple[str, ...]:
    return tuple(
        sorted(
            " ".join([fact.name, *(arg.name for arg in fact.arguments)])
            for fact in facts
            if (fact.name in DYNAMIC_PREDICATES) == dynamic
        )
    )


class TextWorldEngine:
    """ALFWorld's stock engine: TextWorld ``PddlEnv`` + ALFWorld's ``AlfredDemangler``.

    The engine is ALFWorld's: observations, admissible commands and ``won`` come from
    TextWorld unchanged.
    """

    name = "textworld"

    def __init__(self) -> None:
        textworld, pddl_env_cls, demangler_cls = _load_textworld()
        infos = textworld.EnvInfos(admissible_commands=True, won=True)
        self._env = demangler_cls(pddl_env_cls(infos), shuffle=False)
        self._game_file: str | None = None
        self._fresh = False  # the state load() built is still the untouched initial state
        self._static: tuple[str, ...] = ()
        self._names: dict[str, str] = {}

    def load(self, game_file: str) -> None:
        """Loads a game file. Raises :class:`GameFileError` naming the file if it is bad."""
        data = read_game_file(game_file)
        try:
            with contained_side_effects(), contextlib.redirect_stdout(io.StringIO()):
                # Pass the parsed data: PddlEnv.load(path) leaves the file open (ResourceWarning).
                self._env.load(data)
        except (Exception, SystemExit) as e:  # the PDDL translator exits on some parse errors
            self._game_file = None
            raise GameFileError(f"cannot load ALFWorld game file {game_file}: {type(e).__name__}: {e}") from e
        self._game_file = game_file
        self._fresh = True

    def _state(self, game_state: Any, observation: str) -> EngineState:
        return EngineState(
            observation=observation,
            admissible_commands=tuple(game_state["admissible_commands"]),
            won=bool(game_state["won"]),
            facts=_fact_strings(game_state["_facts"], dynamic=True),
        )

    def reset(self) -> EngineState:
        """Starts the loaded game from its initial state."""
        if self._game_file is None:
            raise RuntimeError("TextWorldEngine.reset() called before a successful load(game_file)")
        try:
            with contained_side_effects(), contextlib.redirect_stdout(io.StringIO()), self._reuse_loaded_state():
                game_state = self._env.reset()
        except (Exception, SystemExit) as e:
            raise GameFileError(f"cannot start ALFWorld game file {self._game_file}: {type(e).__name__}: {e}") from e
        self._static = _fact_strings(game_state["_facts"], dynamic=False)
        self._names = {k: info.name for k, info in game_state["_entity_infos"].items()}
        return self._state(game_state, game_state.feedback)

    @contextlib.contextmanager
    def _reuse_loaded_state(self) -> Iterator[None]:
        """On the first reset after load, lets ``PddlEnv.reset`` reuse the state ``load`` built.

        ``PddlEnv.load`` and ``PddlEnv.reset`` each translate the PDDL problem twice (about half
        a second each on kitchen-sized games). Right after ``load`` nothing has changed the state
        or Fast Downward's loaded task, so the first reset takes that state instead of
        translating again; the text and state are the same as with a fresh translation.
        """
        import textworld.envs.pddl.pddl as pddl_module

        if not self._fresh:
            yield
            return
        self._fresh = False
        original = pddl_module.pddl_logic
        loaded = self._env.unwrapped._pddl_state
        shim = type("_ReusePddlLogic", (), {"PddlState": staticmethod(lambda *args, **kwargs: loaded)})
        pddl_module.pddl_logic = shim
        try:
            yield
        finally:
            pddl_module.pddl_logic = original

    def step(self, command: str) -> EngineState:
        """Applies one command (callers pass admissible commands; others answer "Nothing happens.")."""
        self._fresh = False
        with contained_side_effects():
            game_state, _, _ = self._env.step(command)
        return self._state(game_state, game_state.feedback)

    def static_facts(self) -> tuple[str, ...]:
        """The facts of the last reset game that no command changes."""
        return self._static

    def entity_names(self) -> Mapping[str, str]:
        """PDDL id -> demangled name, as of the last reset."""
        return dict(self._names)

    def close(self) -> None:
        """Releases the game (the Fast Downward library copy stays loaded until the process ends)."""
        self._game_file = None


ENGINES = ("native", "textworld")


def make_engine(name: str) -> Engine:
    """Builds an engine by name: ``"native"`` (:class:`~gaca_envs.alfworld.native.NativeEngine`,
    the default of the env) or ``"textworld"`` (:class:`TextWorldEngine`, the reference).

    Raises:
        ValueError: for an unknown name.
    """
    if name == "textworld":
        return TextWorldEngine()
    if name == "native":
        from gaca_envs.alfworld.native import NativeEngine

        return NativeEngine()
    raise ValueError(f"engine must be one of {', '.join(map(repr, ENGINES))}, got {name!r}")
