"""A plain, loop-based reference of the estimators, written to be read against METHOD.md.

It is slow on purpose: it follows the formulas line by line with Python loops over groups,
trajectories and rows, in float64 Python arithmetic. The tests check the vectorised
:mod:`gaca_train.estimators.advantages` against it on random batches, and
``scripts/bench_advantages.py`` times both.
"""

from __future__ import annotations

import math
from collections import defaultdict

from gaca_train.estimators.options import ESTIMATORS, EstimatorConfig
from gaca_train.estimators.rows import StepRows

__all__ = ["reference_advantages"]


def _mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and unbiased standard deviation (0 for a single value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def _normalise(value: float, mean: float, std: float, how: str, eps: float) -> float:
    return (value - mean) / (std + eps) if how == "mean_std" else value - mean


def _tree_values(
    rows_of_traj: dict[int, list[int]],
    parent_of: dict[int, int],
    step: list[int],
    reward: list[float],
    penalty: list[float],
    gamma: float,
) -> tuple[list[float], list[float], dict[int, float]]:
    """METHOD.md section 7, walking each leaf's path: per row V^E and V^S, per leaf its return R_l.

    R_l pays every penalty on the path; V^S is the mean return-to-go of the env reward minus the row's own penalty.
    """
    n = len(step)
    episode_sums, step_sums, counts = [0.0] * n, [0.0] * n, [0] * n
    leaf_return = {}
    for leaf in rows_of_traj:
        path = list(rows_of_traj[leaf])
        child, ancestor = leaf, parent_of[leaf]
        while ancestor != -1:  # the ancestor's rows before the child's first step
            cut = min(step[k] for k in rows_of_traj[child])
            path += [k for k in rows_of_traj[ancestor] if step[k] < cut]
            child, ancestor = ancestor, parent_of[ancestor]
        path.sort(key=lambda k: step[k])
        leaf_return[leaf] = sum(reward[k] - penalty[k] for k in path)
        running, next_step = 0.0, None
        for k in reversed(path):
            running = reward[k] + (0.0 if next_step is None else gamma ** (next_step - step[k]) * running)
            next_step = step[k]
            step_sums[k] += running - penalty[k]
            episode_sums[k] += leaf_return[leaf]
            counts[k] += 1
    return [e / c for e, c in zip(episode_sums, counts)], [g / c for g, c in zip(step_sums, counts)], leaf_return


def reference_advantages(
    rows: StepRows, estimator: str = "gaca", parent: list[int] | None = None, **options: object
) -> dict[str, list]:
    """Loop-based GRPO / GiGPO / GACA / reweighting, same options as ``compute_advantages``.

    ``parent`` (one trajectory id per row, -1 for a root) makes the groups trees of branching
    rollouts (METHOD.md section 7).

    Returns:
        A dict of per-row lists: ``advantage``, ``episode_advantage``, ``step_advantage``,
        ``returns``, ``has_step_signal`` and ``weight`` (None for GRPO and GiGPO).
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    cfg = EstimatorConfig(**options)
    n = len(rows)
    group = rows.group.tolist()
    traj = rows.traj.tolist()
    step = rows.step.tolist()
    anchor = rows.anchor.tolist()
    valid = rows.valid.tolist()
    nll = [float(u) for u in rows.nll.double().tolist()]
    penalty = [0.0 if v else cfg.invalid_action_penalty for v in valid]
    verl = cfg.preset == "verl-agent"
    # Section 6: returns-to-go of the env reward, then each row's own penalty; episode totals pay
    # every penalty of the trajectory (verl-agent: each row's score pays its own only).
    reward = [float(r) for r in rows.reward.double().tolist()]

    # Rows of each trajectory, in step order.
    rows_of_traj: dict[int, list[int]] = defaultdict(list)
    for k in range(n):
        rows_of_traj[traj[k]].append(k)
    for ks in rows_of_traj.values():
        ks.sort(key=lambda k: step[k])

    # Section 2: discounted return-to-go, walking each trajectory backwards.
    returns = [0.0] * n
    episode_total: dict[int, float] = {}
    for i, ks in rows_of_traj.items():
        running, next_step = 0.0, None
        for k in reversed(ks):
            running = reward[k] + (0.0 if next_step is None else cfg.gamma ** (next_step - step[k]) * running)
            returns[k] = running - penalty[k]
            next_step = step[k]
        episode_total[i] = sum(reward[k] - (0.0 if verl else penalty[k]) for k in ks)

    # Section 1: episode-level advantage.
    episode_adv = [0.0] * n
    episode_return = [episode_total[traj[k]] - (penalty[k] if verl else 0.0) for k in range(n)]
    parents = [-1] * n if parent is None else [int(p) for p in parent]
    if any(p != -1 for p in parents):
        # Section 7: node values over the leaves below each row; baselines over each group's leaves.
        parent_of = {traj[k]: parents[k] for k in range(n)}
        episode_value, returns, leaf_return = _tree_values(rows_of_traj, parent_of, step, reward, penalty, cfg.gamma)
        leaves_of_group: dict[int, list[int]] = defaultdict(list)
        for i, ks in rows_of_traj.items():
            leaves_of_group[group[ks[0]]].append(i)
        for k in range(n):
            leaves = leaves_of_group[group[k]]
            mean, std = _mean_std([leaf_return[i] for i in leaves])
            if len(leaves) >= 2:
                episode_adv[k] = _normalise(episode_value[k], mean, std, cfg.episode_norm, cfg.eps)
    elif verl:
        rows_of_group: dict[int, list[int]] = defaultdict(list)
        for k in range(n):
            rows_of_group[group[k]].append(k)
        for ks in rows_of_group.values():
            mean, std = _mean_std([episode_return[k] for k in ks])
            if len(ks) == 1:
                mean, std = 0.0, 1.0
            for k in ks:
                episode_adv[k] = _normalise(episode_return[k], mean, std, cfg.episode_norm, cfg.eps)
    else:
        trajs_of_group: dict[int, list[int]] = defaultdict(list)
        for i, ks in rows_of_traj.items():
            trajs_of_group[group[ks[0]]].append(i)
        for trajs in trajs_of_group.values():
            mean, std = _mean_std([episode_total[i] for i in trajs])
            for i in trajs:
                a = 0.0 if len(trajs) < 2 else _normalise(episode_total[i], mean, std, cfg.episode_norm, cfg.eps)
                for k in rows_of_traj[i]:
                    episode_adv[k] = a

    # Section 2: anchor groups within each group.
    members: dict[tuple[int, int], list[int]] = defaultdict(list)
    for k in range(n):
        members[(group[k], anchor[k])].append(k)
    step_adv = [0.0] * n
    has_signal = [False] * n
    for ks in members.values():
        if len(ks) < 2:
            continue
        mean, std = _mean_std([returns[k] for k in ks])
        for k in ks:
            step_adv[k] = _normalise(returns[k], mean, std, cfg.step_norm, cfg.eps)
            has_signal[k] = True

    out = {
        "episode_advantage": episode_adv,
        "step_advantage": step_adv,
        "returns": returns,
        "has_step_signal": has_signal,
        "weight": None,
    }
    if estimator == "grpo":
        out["advantage"] = episode_adv
        return out
    if estimator == "gigpo":
        out["advantage"] = [e + cfg.omega * s for e, s in zip(episode_adv, step_adv)]
        return out

    # Section 4: criticality z from the NLL, standardised per group or over the batch.
    z = [0.0] * n
    scopes: dict[int, list[int]] = defaultdict(list)
    for k in range(n):
        scopes[group[k] if cfg.nll_norm == "group" else 0].append(k)
    for ks in scopes.values():
        mean, std = _mean_std([nll[k] for k in ks])
        for k in ks:
            z[k] = (nll[k] - mean) / (std + cfg.eps)

    if estimator == "gaca":
        weight, advantage = [], []
        for k in range(n):
            if not has_signal[k]:
                lam = cfg.lambda0
            elif cfg.modulation == "linear":
                lam = min(max(cfg.lambda0 + cfg.eta * z[k], cfg.lambda_min), cfg.lambda_max)
            else:
                logit0 = math.log(cfg.lambda0 / (1.0 - cfg.lambda0))
                lam = 1.0 / (1.0 + math.exp(-(logit0 + cfg.eta * z[k])))
            weight.append(lam)
            advantage.append(((1.0 - lam) * episode_adv[k] + lam * step_adv[k]) / (1.0 - cfg.lambda0))
        out.update(advantage=advantage, weight=weight)
        return out

    # Section 5: scalar reweighting of GRPO's (or GiGPO's) advantage.
    base = [e + (cfg.omega * s if cfg.reweight_base == "gigpo" else 0.0) for e, s in zip(episode_adv, step_adv)]
    raw = [min(max(1.0 + cfg.eta * z[k], 0.0), cfg.w_max) for k in range(n)]
    weight = [0.0] * n
    rows_in_group: dict[int, list[int]] = defaultdict(list)
    for k in range(n):
        rows_in_group[group[k]].append(k)
    for ks in rows_in_group.values():
        mean_w = sum(raw[k] for k in ks) / len(ks)
        for k in ks:
            weight[k] = raw[k] / mean_w if mean_w > 0 else 1.0
    out.update(advantage=[w * b for w, b in zip(weight, base)], weight=weight)
    return out
