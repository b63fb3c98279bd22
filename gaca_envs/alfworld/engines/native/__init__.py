"""A native ALFWorld engine: TextWorld's text and rules without TextWorld (see :mod:`.engine`).

Modules: :mod:`.engine` (the engine), :mod:`.actions` (the domain's operators and effects),
:mod:`.goal` (the goal test), :mod:`.grammar` (TextWorld's text grammar), :mod:`.pddl_reader`
(reads PDDL; :mod:`gaca_envs.alfworld.pddl_writer` writes it).
"""

from gaca_envs.alfworld.engines.native.engine import NativeEngine, NativeState

__all__ = ["NativeEngine", "NativeState"]
