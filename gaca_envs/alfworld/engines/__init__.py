"""Game engines behind ``GACA-ALFWorld-v0`` and the factory that builds one by name.

- :mod:`.base`: the :class:`Engine` protocol, :class:`EngineState`, :class:`GameFileError` and
  :func:`read_game_file`; it imports no engine, and every engine imports it.
- :mod:`.native`: :class:`~.native.NativeEngine`, ALFWorld simulated in Python (the env's default).
- :mod:`.textworld`: :class:`~.textworld.TextWorldEngine`, ALFWorld's stock TextWorld engine (the reference).

Importing this package loads neither engine; :func:`make_engine` imports the one it builds.
"""

from __future__ import annotations

from gaca_envs.alfworld.engines.base import Engine, EngineState, GameFileError, read_game_file

__all__ = ["ENGINES", "Engine", "EngineState", "GameFileError", "make_engine", "read_game_file"]

ENGINES = ("native", "textworld")


def make_engine(name: str) -> Engine:
    """Builds an engine by name: ``"native"`` (:class:`~.native.NativeEngine`, the default of the
    env) or ``"textworld"`` (:class:`~.textworld.TextWorldEngine`, the reference).

    Raises:
        ValueError: for an unknown name.
        ImportError: for ``"textworld"`` without the ``alfworld`` extra installed.
    """
    if name == "textworld":
        from gaca_envs.alfworld.engines.textworld import TextWorldEngine

        return TextWorldEngine()
    if name == "native":
        from gaca_envs.alfworld.engines.native import NativeEngine

        return NativeEngine()
    raise ValueError(f"engine must be one of {', '.join(map(repr, ENGINES))}, got {name!r}")
