"""Helpers shared by every env: the canonical anchor key and the contract's info keys.

An anchor key is a digest of the environment's true state in a canonical form (DESIGN.md
contract 1). It must be stable across processes and machines, so it is built with hashlib
from a canonical text serialisation, never with Python's ``hash``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

# Keys every env puts in ``info`` on reset and on every step (DESIGN.md contract 1).
INFO_KEYS: tuple[str, ...] = (
    "task",
    "task_id",
    "admissible_actions",
    "anchor_key",
    "anchor_text",
    "action_valid",
    "won",
    "score",
)


def anchor_digest(kind: str, parts: Iterable[str]) -> str:
    """Digest of a canonical state description.

    Args:
        kind: the env family (e.g. ``"alfworld"``), so that states of two envs never collide.
        parts: the canonical facts of the state. The caller decides their order; for an
            unordered set of facts pass ``sorted(facts)``.

    Returns:
        A 32-character lowercase hex string (BLAKE2b, 16-byte digest).

    Raises:
        ValueError: if a part contains a newline, which would make the serialisation ambiguous.
    """
    h = hashlib.blake2b(digest_size=16)
    h.update(kind.encode("utf-8"))
    for part in parts:
        if "\n" in part:
            raise ValueError(f"anchor parts must not contain newlines, got {part!r}")
        h.update(b"\n")
        h.update(part.encode("utf-8"))
    return h.hexdigest()
