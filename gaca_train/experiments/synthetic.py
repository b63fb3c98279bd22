"""A synthetic ALFWorld-sized batch of step rows, for the estimator benchmark and demo.

Anchors repeat as in real rollouts: every trajectory of a group starts in the same state, and
at each step a trajectory stays on the group's "routine" path with probability 0.6 (a state all
its siblings share at that step) or moves to one of 40 other states of its task (so states recur
across rollouts and, in loops, within one). Half the trajectories succeed (reward 10 on their
last step), the NLL is exponential(1) per step and 5% of the steps are invalid.
"""

from __future__ import annotations

import torch

from gaca_train.estimators.rows import StepRows


def synthetic_batch(groups: int, trajs: int, steps: int, seed: int = 0) -> StepRows:
    """A batch of ``groups * trajs * steps`` step rows, trajectory-major (see the module docstring).

    Args:
        groups: task groups.
        trajs: trajectories (rollouts) per group.
        steps: steps per trajectory (every trajectory runs to the end).
        seed: seed of the batch's own ``torch.Generator``; the global RNG is left alone.

    Returns:
        The rows; each field has shape ``(groups * trajs * steps,)``.
    """
    g = torch.Generator().manual_seed(seed)
    n_traj = groups * trajs
    group = torch.arange(n_traj).repeat_interleave(steps) // trajs
    traj = torch.arange(n_traj).repeat_interleave(steps)
    step = torch.arange(steps).repeat(n_traj)
    routine = torch.rand(n_traj * steps, generator=g) < 0.6
    off_path = torch.randint(0, 40, (n_traj * steps,), generator=g)
    local_state = torch.where(routine, step, steps + off_path)
    local_state[step == 0] = 0  # every rollout of a task starts in the same state
    anchor = group * 1_000_003 + local_state
    success = torch.rand(n_traj, generator=g) < 0.5
    reward = torch.zeros(n_traj * steps)
    reward[steps - 1 :: steps] = success.float() * 10.0
    nll = torch.empty(n_traj * steps).exponential_(1.0, generator=g)
    valid = torch.rand(n_traj * steps, generator=g) < 0.95
    return StepRows(group=group, traj=traj, step=step, anchor=anchor, reward=reward, nll=nll, valid=valid)
