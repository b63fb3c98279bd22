"""Groups that are trees of trajectories (branching rollouts): leaves, paths and node values.

METHOD.md section 7. A continuation j restarts its parent's episode at its first step s_j from an
environment snapshot, so its rows are only its own steps; the parent's rows before s_j are its
prefix. Here every leaf's path (its own rows plus its ancestors' prefix rows) is laid out as
*path rows* (a row index per leaf and step); :mod:`gaca_train.estimators.advantages` computes each leaf's
return R_l and returns-to-go G_l(t) over them (section 2's), and every row's node values V^E and
V^S as segment means over the path rows that pass through it. Vectorised: the only Python loop
is over the depth of the tree.

This module imports torch only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["TrajectoryTree", "path_rows"]

_F64 = torch.float64


@dataclass(frozen=True)
class TrajectoryTree:
    """The trajectories of a batch as a forest, in dense trajectory ids 0..T-1.

    Attributes:
        traj: int64 [R], the row's dense trajectory id.
        parent: int64 [T], the parent's dense id (-1 for a root).
        start: int64 [T], the trajectory's first step s_j.
        depth: the largest number of ancestors of a trajectory.
    """

    traj: torch.Tensor
    parent: torch.Tensor
    start: torch.Tensor
    depth: int

    @classmethod
    def from_rows(
        cls, traj: torch.Tensor, step: torch.Tensor, group: torch.Tensor, parent: torch.Tensor
    ) -> TrajectoryTree:
        """Builds and checks the tree of per-row ``parent`` trajectory ids (-1: a root).

        Raises:
            ValueError: naming the trajectory, for a parent that differs between a trajectory's rows,
                is not a trajectory of the batch, lies in another group, starts after its child, or
                closes a cycle.
        """
        if not isinstance(parent, torch.Tensor) or parent.dtype != torch.int64 or parent.shape != traj.shape:
            raise ValueError(
                f"parent must be an int64 tensor with one trajectory id per row (shape {tuple(traj.shape)}), got "
                f"{getattr(parent, 'dtype', type(parent).__name__)} of shape {tuple(getattr(parent, 'shape', ()))}"
            )
        lo, hi = torch.aminmax(traj)
        if int(hi) - int(lo) < 2 * traj.numel() + 64:  # ids as offsets (no sort), made dense by a cumulative count
            present = torch.bincount(traj - lo, minlength=int(hi) - int(lo) + 1) > 0
            ids = torch.arange(int(lo), int(hi) + 1)[present]
            dense = (torch.cumsum(present, 0) - 1)[traj - lo]
        else:
            ids, dense = torch.unique(traj, return_inverse=True)
        n = ids.numel()
        big = torch.iinfo(torch.int64).max
        per_traj = torch.full((n,), big).scatter_reduce_(0, dense, parent, "amin")
        per_traj_max = torch.full((n,), -big - 1).scatter_reduce_(0, dense, parent, "amax")
        if bool((per_traj != per_traj_max).any()):
            j = int(ids[(per_traj != per_traj_max).nonzero()[0, 0]])
            raise ValueError(f"trajectory {j} has rows with different parents; a trajectory has one parent")
        root = per_traj == -1
        where = torch.searchsorted(ids, per_traj).clamp(max=n - 1)
        unknown = ~root & (ids[where] != per_traj)
        if bool(unknown.any()):
            j = int(unknown.nonzero()[0, 0])
            raise ValueError(
                f"trajectory {int(ids[j])} has parent {int(per_traj[j])}, which is not a trajectory of the batch "
                "(-1 marks a root)"
            )
        parent_dense = torch.where(root, -1, where)
        start = torch.full((n,), big).scatter_reduce_(0, dense, step, "amin")
        traj_group = torch.zeros(n, dtype=torch.int64).scatter_(0, dense, group)
        safe = parent_dense.clamp(min=0)
        for bad, why in (
            (~root & (traj_group[safe] != traj_group), "lies in another group than its parent"),
            (~root & (start[safe] > start), "starts before its parent (a continuation starts at or after it)"),
            (parent_dense == torch.arange(n), "is its own parent"),
        ):
            if bool(bad.any()):
                j = int(bad.nonzero()[0, 0])
                raise ValueError(f"trajectory {int(ids[j])} {why}; parent {int(per_traj[j])}")
        depth, ancestor = 0, parent_dense
        while bool((ancestor >= 0).any()):
            depth += 1
            if depth > n:
                j = int((ancestor >= 0).nonzero()[0, 0])
                raise ValueError(f"trajectory {int(ids[j])} has itself as an ancestor: parents must form a tree")
            ancestor = torch.where(ancestor >= 0, parent_dense[ancestor.clamp(min=0)], -1)
        return cls(dense, parent_dense, start, depth)


def path_rows(tree: TrajectoryTree, step: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every leaf's path (METHOD.md section 7) as path rows: (leaf id, row index) per path row.

    Every trajectory is one leaf (its own episode's end). Its path is its own rows and, for each
    ancestor, the ancestor's rows at steps before the start of the child the path comes from.

    Args:
        tree: the batch's tree.
        step: int64 [R] step indices.

    Returns:
        int64 [P] leaf ids and int64 [P] row indices, P the summed path lengths.
    """
    n = tree.parent.numel()
    count = torch.bincount(tree.traj, minlength=n)
    offset = torch.cumsum(count, 0) - count
    slot = step - tree.start[tree.traj]
    width = int(slot.max()) + 1
    if n * width <= 8 * step.numel() + 4096:
        # Dense [trajectory, slot] layout: rows in (trajectory, step) order without a sort, and the
        # number of a trajectory's rows before a step from a cumulative count along its row.
        cell = tree.traj * width + slot
        occupied = torch.zeros(n * width, dtype=torch.bool).index_fill_(0, cell, True)
        index = torch.zeros(n * width, dtype=torch.int64).index_put_((cell,), torch.arange(step.numel()))
        order = index[occupied]
        before = torch.cumsum(occupied.view(n, width), 1)

        def rows_before(a: torch.Tensor, cut: torch.Tensor) -> torch.Tensor:
            last = (cut - tree.start[a] - 1).clamp(max=width - 1)
            return torch.where(last >= 0, before[a, last.clamp(min=0)], 0)

    else:  # huge step gaps: sort the rows and search the (trajectory, step rank) keys
        order = torch.sort(step, stable=True).indices
        order = order[torch.sort(tree.traj[order], stable=True).indices]
        steps, rank = torch.unique(step, return_inverse=True)
        keys = tree.traj[order] * (steps.numel() + 1) + rank[order]

        def rows_before(a: torch.Tensor, cut: torch.Tensor) -> torch.Tensor:
            return torch.searchsorted(keys, a * (steps.numel() + 1) + torch.searchsorted(steps, cut)) - offset[a]

    leaves = [torch.arange(n)]
    sources = [torch.arange(n)]
    lengths = [count]
    child, ancestor = torch.arange(n), tree.parent
    for _ in range(tree.depth):
        has = ancestor >= 0
        leaf, a, cut = torch.arange(n)[has], ancestor[has], tree.start[child[has]]
        leaves.append(leaf)
        sources.append(a)
        lengths.append(rows_before(a, cut))
        child = torch.where(has, ancestor, child)
        ancestor = torch.where(has, tree.parent[ancestor.clamp(min=0)], -1)
    leaf, source, length = torch.cat(leaves), torch.cat(sources), torch.cat(lengths)
    total = int(length.sum())
    first = torch.repeat_interleave(offset[source], length, output_size=total)
    within = torch.arange(total) - torch.repeat_interleave(torch.cumsum(length, 0) - length, length, output_size=total)
    return torch.repeat_interleave(leaf, length, output_size=total), order[first + within]
