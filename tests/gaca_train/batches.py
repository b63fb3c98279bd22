"""Shared batch builders for the estimator tests: hypothesis strategies and a hand-made batch."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from gaca_train.estimators.rows import StepRows


@st.composite
def step_batches(draw: st.DrawFn, max_groups: int = 4, max_trajs: int = 4, max_len: int = 6) -> StepRows:
    """Random batches: group sizes from 1, ragged lengths, loops, ties, gaps, zero rewards.

    Anchors come from a small pool, so they repeat across trajectories and within one
    (loops); rewards come from a few values, so ties and zero-variance groups are common.
    Ids are arbitrary int64 values and the rows are shuffled.
    """
    n_groups = draw(st.integers(1, max_groups))
    anchor_pool = draw(st.integers(1, 6))
    reward_values = draw(st.sampled_from([[0.0], [0.0, 10.0], [0.0, 1.0, -1.0, 0.5], [0.0, 0.0, 0.0, 3.25]]))
    group_ids = draw(st.lists(st.integers(-(2**40), 2**40), min_size=n_groups, max_size=n_groups, unique=True))
    cols: dict[str, list] = {k: [] for k in ("group", "traj", "step", "anchor", "reward", "nll", "valid")}
    next_traj = draw(st.integers(-1000, 1000))
    for g in group_ids:
        for _ in range(draw(st.integers(1, max_trajs))):
            length = draw(st.integers(1, max_len))
            gaps = draw(st.booleans())
            steps = (
                sorted(draw(st.sets(st.integers(0, 3 * max_len), min_size=length, max_size=length)))
                if gaps
                else list(range(length))
            )
            for t in steps:
                cols["group"].append(g)
                cols["traj"].append(next_traj)
                cols["step"].append(t)
                cols["anchor"].append(draw(st.integers(0, anchor_pool - 1)) * 7919 - 3)
                cols["reward"].append(draw(st.sampled_from(reward_values)))
                cols["nll"].append(draw(st.sampled_from([0.5, 1.0, 2.25]) | st.floats(0.0, 8.0)))
                cols["valid"].append(draw(st.booleans()) or draw(st.booleans()))
            next_traj += draw(st.integers(1, 50))
    rows = StepRows(**cols)
    order = torch.tensor(draw(st.permutations(range(len(rows)))), dtype=torch.int64)
    return rows.permute(order)


def two_trajectory_batch(nll: list[float] | None = None, valid: list[bool] | None = None) -> StepRows:
    """One group, two trajectories of two steps, rows ordered A0, A1, B0, B1.

    Trajectory A: anchors s0 -> s1, rewards 0, 10 (success). Trajectory B: anchors s0 -> s2,
    rewards 0, 0. Both start in anchor s0, so (A0, B0) is the only anchor group of two.
    Rewards and NLLs are float64 so that hand-computed values compare to 1e-9.
    """
    return StepRows(
        group=[5, 5, 5, 5],
        traj=[1, 1, 2, 2],
        step=[0, 1, 0, 1],
        anchor=[100, 101, 100, 102],
        reward=torch.tensor([0.0, 10.0, 0.0, 0.0], dtype=torch.float64),
        nll=torch.tensor(nll or [1.0, 1.0, 1.0, 1.0], dtype=torch.float64),
        valid=valid or [True, True, True, True],
    )


@st.composite
def tree_batches(draw: st.DrawFn, max_groups: int = 3, max_roots: int = 3, max_len: int = 6) -> tuple[StepRows, list]:
    """Random groups that are trees of branching rollouts (METHOD.md section 7): rows and per-row parents.

    Each group has root trajectories, then continuations of a root or of an earlier continuation
    (nested trees), each starting at a step of its parent (its first row shares the parent's anchor
    there) and running on with its own steps; some groups have no continuation. Rows are shuffled.
    """
    cols: dict[str, list] = {k: [] for k in ("group", "traj", "step", "anchor", "reward", "nll", "valid")}
    parent: list[int] = []
    reward_values = draw(st.sampled_from([[0.0, 10.0], [0.0, 1.0, -1.0, 0.5]]))
    next_traj = draw(st.integers(-100, 100))
    for g in range(draw(st.integers(1, max_groups))):
        trajs: dict[int, list[tuple[int, int]]] = {}  # trajectory -> (step, anchor) rows

        def add(steps: list[int], anchors: list[int], par: int, group: int = g, trajs: dict = trajs) -> None:
            nonlocal next_traj
            trajs[next_traj] = list(zip(steps, anchors))
            for t, a in zip(steps, anchors):
                cols["group"].append(group)
                cols["traj"].append(next_traj)
                cols["step"].append(t)
                cols["anchor"].append(a)
                cols["reward"].append(draw(st.sampled_from(reward_values)))
                cols["nll"].append(draw(st.floats(0.0, 8.0)))
                cols["valid"].append(draw(st.booleans()) or draw(st.booleans()))
                parent.append(par)
            next_traj += draw(st.integers(1, 9))

        for _ in range(draw(st.integers(1, max_roots))):
            length = draw(st.integers(1, max_len))
            add(list(range(length)), [draw(st.integers(0, 4)) for _ in range(length)], -1)
        for _ in range(draw(st.integers(0, 4))):
            par = draw(st.sampled_from(sorted(trajs)))
            branch_step, anchor = draw(st.sampled_from(trajs[par]))
            length = draw(st.integers(1, max_len))
            gap = draw(st.integers(1, 2))
            steps = [branch_step + gap * k for k in range(length)]
            add(steps, [anchor] + [draw(st.integers(0, 6)) for _ in range(length - 1)], par)
    rows = StepRows(**cols)
    order = draw(st.permutations(range(len(rows))))
    return rows.permute(torch.tensor(order, dtype=torch.int64)), [parent[k] for k in order]
