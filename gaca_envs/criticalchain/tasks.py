"""Deterministic task generation for GACA-CriticalChain-v0.

A task is a chain of ``horizon`` stages walked in order. Most stages are routine (walk on to the
next place); ``num_branches`` of them are forks where the agent picks one of ``branch_width``
roads, exactly one of which is right. The pick changes nothing visible: only the final stage
tells whether every fork was taken correctly. Everything a task needs is drawn from a seed
derived with hashlib from the task id, so a task id means the same task on every machine.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import numpy as np

PLACES: tuple[str, ...] = (
    "bridge", "mill", "tower", "market", "chapel", "well", "orchard", "harbour", "quarry", "forge",
    "garden", "gate", "library", "stable", "bakery", "lighthouse", "barn", "square", "inn", "fountain",
    "granary", "cellar", "archway", "watchpost", "pier", "meadow", "smithy", "ferry", "cloister", "kiln",
)  # fmt: skip
SIGNS: tuple[str, ...] = (
    "amber", "coral", "teal", "violet", "olive", "crimson", "ivory", "indigo", "saffron", "slate",
)  # fmt: skip
# Valid actions that leave the state as it is: they cost a step and make the state recur.
DISTRACTORS: tuple[str, ...] = (
    "look around", "check the map", "wait", "rest for a moment", "count your coins", "tie your boots",
)  # fmt: skip
SPLITS: tuple[str, ...] = ("train", "valid", "test")


@dataclass(frozen=True)
class ChainTask:
    """One task instance: which stages are forks, their roads and the right road at each.

    Attributes:
        task_id: the id the task was generated from (``"<split>-<index>"``).
        places: ``horizon + 1`` place names; stage ``s`` is at ``places[s]``, the goal at the last.
        fork_stages: sorted stage indices that are forks.
        fork_signs: per fork, the ``branch_width`` road signs offered, in display order.
        correct_signs: per fork, the sign of the right road.
    """

    task_id: str
    places: tuple[str, ...]
    fork_stages: tuple[int, ...]
    fork_signs: tuple[tuple[str, ...], ...]
    correct_signs: tuple[str, ...]

    @property
    def horizon(self) -> int:
        """Number of stages to walk before the goal."""
        return len(self.places) - 1


def parse_task_id(task_id: str) -> tuple[str, int]:
    """Splits ``"<split>-<index>"`` into its parts.

    Raises:
        ValueError: if the id is not of that form or the split is unknown.
    """
    split, sep, index = task_id.rpartition("-")
    if not sep or split not in SPLITS or not index.isdigit():
        raise ValueError(
            f"task_id must look like '<split>-<index>' with split in {SPLITS} and a non-negative integer index, "
            f"got {task_id!r}; e.g. 'train-0'"
        )
    return split, int(index)


@functools.lru_cache(maxsize=4096)  # a pure function of its arguments; restores rebuild the task often
def make_task(task_id: str, *, seed: int, horizon: int, num_branches: int, branch_width: int) -> ChainTask:
    """Builds the task for ``task_id``, deterministically from ``seed`` and the id.

    Args:
        task_id: ``"<split>-<index>"``.
        seed: base seed of the task family; the same seed and id give the same task everywhere.
        horizon: number of stages before the goal (>= 1).
        num_branches: number of fork stages (0 <= num_branches <= horizon).
        branch_width: roads per fork (2 <= branch_width <= len(SIGNS)).

    Returns:
        The task.
    """
    parse_task_id(task_id)
    digest = hashlib.blake2b(f"criticalchain|{seed}|{task_id}".encode(), digest_size=8).digest()
    rng = np.random.default_rng(int.from_bytes(digest, "little"))
    place_idx = rng.choice(len(PLACES), size=horizon + 1, replace=horizon + 1 > len(PLACES))
    places = tuple(PLACES[i] for i in place_idx)
    # The first stage is never a fork, so every episode opens with a routine step.
    fork_stages = tuple(sorted(int(s) + 1 for s in rng.choice(horizon - 1, size=num_branches, replace=False)))
    fork_signs = []
    correct = []
    for _ in fork_stages:
        signs = tuple(SIGNS[i] for i in rng.choice(len(SIGNS), size=branch_width, replace=False))
        fork_signs.append(signs)
        correct.append(signs[int(rng.integers(branch_width))])
    return ChainTask(task_id, places, fork_stages, tuple(fork_signs), tuple(correct))
