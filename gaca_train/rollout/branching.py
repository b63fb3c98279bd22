"""Branching rollouts: a group's rollouts as a tree, continued from environment snapshots.

A branching rollout plays each group in two waves through the one episode loop
(:func:`gaca_train.rollout.episodes.play`). Wave 1 plays the group's ``roots`` rollouts from the task's
start and saves the env's snapshot before every step. Then, per group, the ``points`` root steps
that the criterion ranks highest become branch points (``nll``: the policy's NLL of the step's
response, GACA's criticality, ranked within the group, which is ranking by its z; ``entropy``: the
policy's entropy there; ``uniform``: at random). Wave 2 restores each branch point's snapshot in
fresh slots and continues it ``continuations`` times: the env is in the saved state and the agent
sees the saved history, so the first prompt of a continuation is the parent's prompt at that step.
A continuation's rows are its own steps only (its prefix stays the parent's rows, trained once),
and its parent is recorded for the tree estimators (METHOD.md section 7).

Budget ``env_steps`` sizes the continuations so that a group's env steps match the independent
setting's (``rollouts_per_task`` times the roots' mean length): continuations are added to the
branch points in turn while the estimated steps (a continuation's estimate: its parent's steps
after the branch point) are below that, at most ``rollouts_per_task`` continuations per group (the
pool's slots); ``fixed`` plays ``continuations`` per branch point.

Both waves are played on every rank (wave 2 also where a rank has nothing to continue), so a
collective policy's lockstep holds. This module imports no torch.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gaca_train.rollout.episodes import Episode, Policy, Start, Transition, play

__all__ = ["BRANCH_BUDGETS", "BRANCH_CRITERIA", "Branching", "PlayedTree", "play_tree"]

BRANCH_CRITERIA = ("off", "nll", "entropy", "uniform")
BRANCH_BUDGETS = ("env_steps", "fixed")
_WAVE_SEED = 500_009  # wave 2's reset seeds are wave 1's shifted by this


@dataclass(frozen=True)
class Branching:
    """How a group's rollouts branch; see the module docstring.

    Attributes:
        criterion: ``off``, ``nll``, ``entropy`` or ``uniform``.
        roots: root rollouts per group.
        points: branch points per group.
        continuations: continuations per branch point (budget ``fixed``).
        budget: ``env_steps`` or ``fixed``.
    """

    criterion: str = "off"
    roots: int = 4
    points: int = 2
    continuations: int = 2
    budget: str = "env_steps"

    def __post_init__(self) -> None:
        if self.criterion not in BRANCH_CRITERIA:
            raise ValueError(f"branching must be one of {BRANCH_CRITERIA}, got {self.criterion!r}")
        if self.budget not in BRANCH_BUDGETS:
            raise ValueError(f"branch_budget must be one of {BRANCH_BUDGETS}, got {self.budget!r}")
        for name in ("roots", "points", "continuations"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"branch_{name} must be an int >= 1, got {getattr(self, name)!r}")

    def check(self, rollouts_per_task: int) -> None:
        """Raises ValueError if the branching does not fit groups of ``rollouts_per_task`` slots."""
        if self.roots > rollouts_per_task:
            raise ValueError(
                f"branch_roots={self.roots} exceeds rollouts_per_task={rollouts_per_task}: a group's roots play in "
                "its slots; lower branch_roots or raise rollouts_per_task"
            )
        if self.budget == "env_steps" and self.roots == rollouts_per_task:
            raise ValueError(
                f"branch_roots={self.roots} equals rollouts_per_task: the env-step budget leaves no steps for "
                "continuations; lower branch_roots (default: half of rollouts_per_task)"
            )
        if self.budget == "fixed" and self.points * self.continuations > rollouts_per_task:
            raise ValueError(
                f"branch_points * branch_continuations = {self.points * self.continuations} exceeds "
                f"rollouts_per_task={rollouts_per_task}, the slots a group's continuations play in; lower them"
            )


@dataclass
class PlayedTree:
    """A branching rollout's steps, episodes and tree, indexed by trajectory.

    Attributes:
        transitions: every step, ``env_index`` the trajectory (roots first, then continuations).
        episodes: one per trajectory (a continuation's ``length`` counts its prefix).
        parents: per trajectory, its parent trajectory (-1 for a root).
        branch_steps: per trajectory, the step it branched at (0 for a root).
        env_seconds: seconds in the envs (resets, restores, steps and snapshots).
        snapshot_seconds: of those, seconds saving snapshots (wave 1) and restoring them (wave 2's resets).
        snapshots: snapshots saved.
        snapshot_bytes: the largest saved branch-point snapshot, as JSON bytes.
        histories: per trajectory, its final history (a continuation's starts with its prefix's).
    """

    transitions: list[Transition]
    episodes: list[Episode]
    parents: list[int]
    branch_steps: list[int]
    env_seconds: float
    snapshot_seconds: float = 0.0
    snapshots: int = 0
    snapshot_bytes: int = 0
    histories: list[list[tuple[str, str]]] = field(default_factory=list)


def _score(t: Transition, criterion: str, rng: random.Random) -> float:
    if criterion == "uniform":
        return rng.random()
    value = t.decision.nll if criterion == "nll" else t.decision.entropy
    if value is None:
        raise ValueError(
            f"branching criterion {criterion!r} needs the policy's {criterion} per step (Decision.{criterion}); "
            "this policy does not give it: use 'nll' or 'uniform'"
        )
    return float(value)


def _choose_points(candidates: list[Transition], branching: Branching, rng: random.Random) -> list[Transition]:
    """The group's ``points`` highest-scoring root steps (ties at random), not the shared first state if avoidable."""
    later = [t for t in candidates if t.step >= 1] or candidates
    ranked = sorted(later, key=lambda t: (_score(t, branching.criterion, rng), rng.random()), reverse=True)
    return ranked[: branching.points]


def _allot(points: list[Transition], lengths: dict[int, int], slots: int, branching: Branching) -> list[Transition]:
    """One entry per continuation: the branch point it continues (see the module docstring for the budgets)."""
    if branching.budget == "fixed":
        return [p for p in points for _ in range(branching.continuations)]
    roots = list(lengths.values())
    budget = (slots - len(roots)) * sum(roots) / max(len(roots), 1)
    out: list[Transition] = []
    spent = 0.0
    while points and len(out) < slots:
        added = False
        for p in points:
            cost = max(1, lengths[p.env_index] - p.step)  # the parent's remaining steps, the continuation's estimate
            if len(out) < slots and spent < budget:
                out.append(p)
                spent += cost
                added = True
        if not added:
            break
    return out


def play_tree(
    pool: Any,
    task_ids: Sequence[str],
    policy: Policy,
    max_env_steps: int | None,
    branching: Branching,
    *,
    seed: int | Sequence[int] | None = None,
    collective: bool = False,
    rng: random.Random | None = None,
) -> PlayedTree:
    """Plays the groups of ``task_ids`` (equal ids form a group of slots) as branching trees.

    Args:
        pool: the envs, one slot per entry of ``task_ids`` (:class:`~gaca_train.rollout.vector.RolloutPool` or
            :class:`~gaca_train.rollout.episodes.EnvList`); the envs must support snapshots.
        task_ids: one task id per slot; each group's slots hold its roots, then its continuations.
        policy: the episode-loop policy.
        max_env_steps: the episode step limit.
        branching: the branching (criterion not ``off``).
        seed: wave 1's reset seed (see :func:`play`); wave 2 uses it shifted.
        collective: see :func:`play`.
        rng: draws the ``uniform`` criterion's points and breaks ties (default: seeded from ``seed``).

    Returns:
        The :class:`PlayedTree`.
    """
    if branching.criterion == "off":
        raise ValueError("play_tree needs a branching criterion other than 'off'; play independent rollouts with play")
    rng = rng or random.Random(seed if isinstance(seed, int) else 0)
    slots_of: dict[str, list[int]] = {}
    for i, t in enumerate(task_ids):
        slots_of.setdefault(t, []).append(i)
    for slots in slots_of.values():
        branching.check(len(slots))
    roots = {i for slots in slots_of.values() for i in slots[: branching.roots]}
    wave1 = play(pool, [t if i in roots else None for i, t in enumerate(task_ids)], policy, max_env_steps, seed=seed,
                 collective=collective, save_snapshots=True)  # fmt: skip
    snapshots = sum(t.snapshot is not None for t in wave1.transitions)
    # Continuations: per group, its branch points' transitions, each once per continuation, in its slots.
    by_env: dict[int, list[Transition]] = {}
    for t in wave1.transitions:
        by_env.setdefault(t.env_index, []).append(t)
    continued: list[Transition | None] = [None] * len(task_ids)
    for slots in slots_of.values():
        candidates = [t for i in slots[: branching.roots] for t in by_env.get(i, [])]
        lengths = {i: len(by_env.get(i, [])) for i in slots[: branching.roots]}
        points = _choose_points(candidates, branching, rng) if candidates else []
        for slot, point in zip(slots, _allot(points, lengths, len(slots), branching)):
            continued[slot] = point
    starts = [
        None if p is None else Start(p.snapshot, p.step, tuple(wave1.histories[p.env_index][: p.step]))
        for p in continued
    ]
    wave2_seed = [None if s is None else s + _WAVE_SEED for s in _seed_list(seed, len(task_ids))]
    wave2 = play(pool, [None] * len(task_ids), policy, max_env_steps, seed=wave2_seed if seed is not None else None,
                 collective=collective, starts=starts)  # fmt: skip
    return _assemble(roots, wave1, wave2, continued, snapshots)


def _seed_list(seed: int | Sequence[int] | None, n: int) -> list[int | None]:
    if seed is None:
        return [None] * n
    return [seed + i for i in range(n)] if isinstance(seed, int) else [int(s) for s in seed]


def _assemble(roots: set[int], wave1: Any, wave2: Any, continued: list, snapshots: int) -> PlayedTree:
    """Numbers the trajectories (roots in slot order, then continuations) and builds the tree."""
    traj_of_root = {i: k for k, i in enumerate(sorted(roots))}
    cont_slots = [i for i, p in enumerate(continued) if p is not None]
    traj_of_cont = {i: len(roots) + k for k, i in enumerate(cont_slots)}
    transitions = [_renumber(t, traj_of_root[t.env_index]) for t in wave1.transitions]
    transitions += [_renumber(t, traj_of_cont[t.env_index]) for t in wave2.transitions]
    episodes = [_renumber_episode(wave1.episodes[i], traj_of_root[i]) for i in sorted(roots)]
    episodes += [_renumber_episode(wave2.episodes[i], traj_of_cont[i]) for i in cont_slots]
    parents = [-1] * len(roots) + [traj_of_root[continued[i].env_index] for i in cont_slots]
    branch_steps = [0] * len(roots) + [continued[i].step for i in cont_slots]
    sizes = [len(json.dumps(continued[i].snapshot.to_dict())) for i in cont_slots[:8]]
    return PlayedTree(
        transitions=transitions,
        episodes=episodes,
        parents=parents,
        branch_steps=branch_steps,
        env_seconds=wave1.env_seconds + wave2.env_seconds,
        snapshot_seconds=wave1.snapshot_seconds + wave2.reset_seconds,
        snapshots=snapshots,
        snapshot_bytes=max(sizes, default=0),
        histories=[wave1.histories[i] for i in sorted(roots)] + [wave2.histories[i] for i in cont_slots],
    )


def _renumber(t: Transition, traj: int) -> Transition:
    return Transition(traj, t.step, t.observation, t.info, t.decision, t.reward, t.next_info, t.terminated,
                      t.truncated, t.snapshot)  # fmt: skip


def _renumber_episode(e: Episode, traj: int) -> Episode:
    return Episode(traj, e.task_id, e.won, e.score, e.length, e.truncated, e.error, e.info)
