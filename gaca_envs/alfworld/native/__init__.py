"""A native ALFWorld engine: TextWorld's text and rules without TextWorld (see :mod:`.engine`)."""

from gaca_envs.alfworld.native.engine import NativeEngine, NativeState

__all__ = ["NativeEngine", "NativeState"]
