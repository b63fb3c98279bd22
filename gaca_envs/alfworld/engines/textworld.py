"""ALFWorld's stock engine: TextWorld's ``PddlEnv`` wrapped by ALFWorld's ``AlfredDemangler``.

:class:`TextWorldEngine` is built exactly as ``AlfredTWEnv`` builds it (Fast Downward for the
state and planning; ``apple 1`` instead of PDDL ids). Library side effects are kept inside:
``alfworld`` is imported without creating ``~/.cache/alfworld`` or changing ``os.environ``, and
Fast Downward's translator, which rebinds ``sys.argv``, runs with ``sys.argv`` restored after.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

from gaca_envs.alfworld.domain import DYNAMIC_PREDICATES
from gaca_envs.alfworld.engines.base import EngineState, GameFileError, read_game_file


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
    supports_snapshots = False

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

    def get_state(self) -> Any:
        """Not supported: TextWorld keeps the state inside Fast Downward's library.

        Raises:
            RuntimeError: always; the native engine supports snapshots.
        """
        raise RuntimeError("TextWorldEngine cannot snapshot its state; use the native engine (engine='native')")

    def set_state(self, state: Any) -> EngineState:
        """Not supported (see :meth:`get_state`).

        Raises:
            RuntimeError: always; the native engine supports snapshots.
        """
        raise RuntimeError("TextWorldEngine cannot restore a state; use the native engine (engine='native')")

    def close(self) -> None:
        """Releases the game (the Fast Downward library copy stays loaded until the process ends)."""
        self._game_file = None
