"""The text space of every GACA env, including what ``AsyncVectorEnv``'s shared memory needs.

Gymnasium's own ``Text`` space breaks ``AsyncVectorEnv(..., shared_memory=True)`` (the default):
the vector env reads the shared buffer into a tuple of strings once, when it is built, and
returns those stale strings (``'000...'``) on every later reset and step. :class:`TextSpace`
registers its own shared-memory functions with Gymnasium: the buffer holds each string as
Unicode code points with its length, and the vector env's observations are a live view of it
(read on access; a plain tuple of strings when the vector env copies, its default). So the
default path returns the envs' real observations, Unicode included.
"""

from __future__ import annotations

import multiprocessing as mp
import string
from collections.abc import Sequence
from multiprocessing.sharedctypes import SynchronizedArray
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils.shared_memory import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

PRINTABLE = string.printable


class TextSpace(spaces.Text):
    """Gymnasium's ``Text`` space, usable through ``AsyncVectorEnv``'s shared memory.

    Args:
        max_length: the longest string.
        min_length: the shortest string.
        charset: the characters :meth:`sample` draws from (and, unless ``any_unicode``, the only
            ones :meth:`contains` accepts).
        any_unicode: accept strings with any Unicode character (web pages); sampling still draws
            from ``charset``.
        seed: the space's seed.
    """

    def __init__(
        self,
        max_length: int,
        *,
        min_length: int = 1,
        charset: str | frozenset[str] = PRINTABLE,
        any_unicode: bool = False,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        super().__init__(max_length, min_length=min_length, charset=charset, seed=seed)
        self.any_unicode = any_unicode

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a str of allowed length (and, unless ``any_unicode``, of the charset)."""
        if self.any_unicode:
            return isinstance(x, str) and self.min_length <= len(x) <= self.max_length
        return super().contains(x)

    def __repr__(self) -> str:
        return f"TextSpace({self.min_length}, {self.max_length}, any_unicode={self.any_unicode})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TextSpace) and super().__eq__(other) and self.any_unicode == other.any_unicode


class SharedTexts(Sequence):
    """A live view of the strings in a shared buffer (row ``i``: length, then code points)."""

    def __init__(self, buffer: SynchronizedArray, n: int, max_length: int) -> None:
        self._rows = np.frombuffer(buffer.get_obj(), dtype=np.int32).reshape(n, max_length + 1)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        row = self._rows[index]
        return row[1 : 1 + int(row[0])].tobytes().decode("utf-32-le")

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: Any) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, Sequence) else NotImplemented

    def __repr__(self) -> str:
        return f"SharedTexts({tuple(self)!r})"


@create_shared_memory.register(TextSpace)
def _create(space: TextSpace, n: int = 1, ctx: ModuleType = mp) -> SynchronizedArray:
    return ctx.Array(np.dtype(np.int32).char, n * (space.max_length + 1))


@read_from_shared_memory.register(TextSpace)
def _read(space: TextSpace, shared_memory: SynchronizedArray, n: int = 1) -> SharedTexts:
    return SharedTexts(shared_memory, n, space.max_length)


@write_to_shared_memory.register(TextSpace)
def _write(space: TextSpace, index: int, value: str, shared_memory: SynchronizedArray) -> None:
    if not isinstance(value, str) or len(value) > space.max_length:
        raise ValueError(
            f"observation must be a str of at most {space.max_length} characters for the shared buffer, "
            f"got {type(value).__name__} of length {len(value) if isinstance(value, str) else '-'}"
        )
    size = space.max_length + 1
    row = np.frombuffer(shared_memory.get_obj(), dtype=np.int32)[index * size : (index + 1) * size]
    codes = np.frombuffer(value.encode("utf-32-le"), dtype=np.int32)
    row[0] = len(codes)
    row[1 : 1 + len(codes)] = codes
