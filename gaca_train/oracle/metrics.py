"""Estimator quality against oracle advantages, and the paper's theory as numbers (docs/method.md section 8).

Given a batch of step rows, the estimator options, and for some of its rows an oracle advantage
A*hat (with the variance of its Monte-Carlo noise, :mod:`gaca_train.oracle.monte_carlo`), this module computes
every estimator on the whole batch and measures each one on the oracle's rows:

* **scale**: A* is put on the estimators' scale by dividing by its group's standard deviation of
  episode returns (the GRPO scale, the one A^E divides by); a group whose returns are all equal
  takes the batch's root-mean-square of the other groups' scales (1 if there are none);
* **quality**: Pearson and Spearman correlation, sign agreement on the rows whose A*hat is clear of
  0 (|A*hat| > 1.96 se), the risk E[(A - A*)^2] estimated without bias as
  mean((A - A*hat)^2) - mean(var), and the scale-free error 1 - E[A A*]^2 / (E[A^2] E[A*^2]) (the risk
  left after the best scalar c in c A; with E[A*^2] estimated without bias the same way);
* **the mixture's exact risk decomposition**: GACA = A_0 + m D with A_0 = GiGPO(lambda0 / (1 - lambda0)),
  D = (A^S - A^E) / (1 - lambda0) and m = lambda - lambda0 the modulation actually applied (clipping
  included), so R_GACA = R_0 - 2 E[m D (A* - A_0)] + E[m^2 D^2] exactly;
* **directional alignment**: rho = E[z D (A* - A_0)], kappa = E[z^2 D^2] (z D taken as 0 on rows without an
  anchor partner, whose lambda stays lambda0); dR/deta at eta = 0 is
  -2 rho (times lambda0 (1 - lambda0) for the sigmoid), so a small eta > 0 beats fixed mixing iff
  rho > 0; eta* = rho / kappa and the gain rho^2 / kappa;
* **error projection**: the reweighting direction u_w = (z - mean_g z) A_0 (the derivative of
  section 5's (1 + eta z) A_0 renormalised within the group) against the mixing direction
  u_m = z D: each direction's best gain (the squared projection of the error A* - A_0 on it) and the
  gain of both together, so "what mixing adds beyond reweighting" is gain(both) - gain(u_w).

Every expectation is a weighted mean over the oracle's rows, each row weighted by the batch rows it
stands for (:func:`~gaca_train.oracle.monte_carlo.pick_rows`: the stratified picks over-sample small cells), so it
estimates the mean over the batch's measurable rows; given the rows, the estimates that involve A*hat
linearly are unbiased because its noise is independent of the batch (fresh continuations).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gaca_train.estimators.advantages import Advantages, compute_advantages
from gaca_train.estimators.options import ESTIMATORS, EstimatorConfig
from gaca_train.estimators.rows import StepRows
from gaca_train.oracle.monte_carlo import OracleConfig, OracleEstimates, OracleTarget, estimate_advantages, pick_rows

__all__ = [
    "OraclePass",
    "OracleRows",
    "alignment",
    "branch_point_rows",
    "run_oracle_pass",
    "mixture_decomposition",
    "oracle_rows",
    "quality",
    "summary_metrics",
]

_F64 = torch.float64
CLEAR_Z = 1.96


def _t(x: Any) -> torch.Tensor:
    return torch.as_tensor(x, dtype=_F64)


def _weights(weight: Any, k: int) -> torch.Tensor:
    """Row weights normalised to mean 1 (None: every row 1)."""
    if weight is None:
        return torch.ones(k, dtype=_F64)
    w = _t(weight)
    return w * (k / w.sum()) if k and float(w.sum()) > 0 else torch.ones(k, dtype=_F64)


def _pearson(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor | None = None) -> float:
    if x.numel() < 2:
        return float("nan")
    w = torch.ones_like(x) if w is None else w
    x, y = x - (w * x).mean() / w.mean(), y - (w * y).mean() / w.mean()
    denom = ((w * x.square()).sum() * (w * y.square()).sum()).sqrt()
    return float((w * x * y).sum() / denom) if denom > 0 else float("nan")


def _ranks(x: torch.Tensor) -> torch.Tensor:
    """Average ranks (ties share their mean rank), as Spearman's correlation needs."""
    order = torch.argsort(x, stable=True)
    ranks = torch.empty_like(x)
    ranks[order] = torch.arange(x.numel(), dtype=_F64)
    values, inverse = torch.unique(x, return_inverse=True)
    total = torch.zeros(values.numel(), dtype=_F64).index_add_(0, inverse, ranks)
    count = torch.bincount(inverse, minlength=values.numel()).to(_F64)
    return (total / count)[inverse]


def quality(estimate: Any, a_star: Any, variance: Any, weight: Any = None) -> dict[str, float]:
    """One estimator's quality against A*hat on the same rows (already on one scale).

    Args:
        estimate: [K] the estimator's advantages.
        a_star: [K] the oracle's A*hat.
        variance: [K] the unbiased variance of each A*hat (0 for an exact A*).
        weight: [K] each row's weight in the means (:func:`~gaca_train.oracle.monte_carlo.pick_rows`: the batch's rows
            it stands for); None: equal weights. Spearman ranks the rows unweighted, then correlates with the weights.

    Returns:
        ``pearson``, ``spearman``, ``sign`` (agreement on the rows with A != 0 and |A*hat| > 1.96 se),
        ``sign_rows`` (how many), ``risk`` (unbiased E[(A - A*)^2]), ``nmse`` (scale-free error),
        ``scale`` (the best c in c A), ``rows``.
    """
    a, s, var = _t(estimate), _t(a_star), _t(variance)
    k = a.numel()
    out = {"rows": float(k)}
    if k == 0:
        names = ("pearson", "spearman", "sign", "sign_rows", "risk", "nmse", "scale")
        return {**out, **dict.fromkeys(names, math.nan)}
    w = _weights(weight, k)
    clear = (s.abs() > CLEAR_Z * var.sqrt()) & (a != 0)
    out["pearson"] = _pearson(a, s, w)
    out["spearman"] = _pearson(_ranks(a), _ranks(s), w)
    agree = (torch.sign(a) == torch.sign(s)).to(_F64)
    out["sign"] = float((w * agree)[clear].sum() / w[clear].sum()) if clear.any() else math.nan
    out["sign_rows"] = float(clear.sum())
    out["risk"] = float((w * ((a - s).square() - var)).mean())
    a2, cross, s2 = float((w * a.square()).mean()), float((w * a * s).mean()), float((w * (s.square() - var)).mean())
    out["scale"] = cross / a2 if a2 > 0 else math.nan
    out["nmse"] = 1.0 - cross**2 / (a2 * s2) if a2 > 0 and s2 > 0 else math.nan
    return out


def mixture_decomposition(
    episode_advantage: Any,
    step_advantage: Any,
    weight: Any,
    a_star: Any,
    variance: Any,
    lambda0: float,
    row_weight: Any = None,
) -> dict[str, float]:
    """The exact risk decomposition of the implemented GACA mixture (docs/method.md section 8.1).

    ``weight`` is GACA's lambda per row; ``row_weight`` each row's weight in the means (as in :func:`quality`).

    Returns:
        ``risk_fixed`` (R_0, of A_0 = GiGPO(lambda0 / (1 - lambda0))), ``cross`` (E[m D (A* - A_0)]),
        ``quad`` (E[m^2 D^2]) and ``risk_gaca`` = R_0 - 2 cross + quad, which equals the directly
        measured risk of GACA's advantage to rounding.
    """
    a_e, a_s, lam, s, var = (_t(x) for x in (episode_advantage, step_advantage, weight, a_star, variance))
    a0 = a_e + lambda0 / (1.0 - lambda0) * a_s
    d = (a_s - a_e) / (1.0 - lambda0)
    m = lam - lambda0
    e0 = s - a0
    w = _weights(row_weight, s.numel())
    risk_fixed = float((w * (e0.square() - var)).mean())
    cross = float((w * m * d * e0).mean())
    quad = float((w * (m * d).square()).mean())
    return {"risk_fixed": risk_fixed, "cross": cross, "quad": quad, "risk_gaca": risk_fixed - 2 * cross + quad}


def alignment(
    episode_advantage: Any,
    step_advantage: Any,
    has_step_signal: Any,
    z: Any,
    z_group_mean: Any,
    a_star: Any,
    variance: Any,
    lambda0: float,
    modulation: str = "linear",
    row_weight: Any = None,
) -> dict[str, float]:
    """Directional alignment and the error projection of mixing against scalar reweighting (section 8.2-8.3).

    Args:
        episode_advantage, step_advantage: [K] A^E and A^S of the rows.
        has_step_signal: [K] bool, whether the row has an anchor partner (GACA modulates only those rows).
        z: [K] the standardised NLL.
        z_group_mean: [K] the mean z over each row's group (all its rows, not only the oracle's).
        a_star, variance: [K] A*hat and its noise variance.
        lambda0: GACA's base weight.
        modulation: ``linear`` or ``sigmoid`` (scales dR/deta at 0 and the best eta by lambda0 (1 - lambda0)).
        row_weight: each row's weight in the means (as in :func:`quality`).

    Returns:
        ``rho``, ``kappa``, ``slope`` (dR/deta at 0), ``eta_star``, ``gain`` (best reduction along z D),
        ``cos`` (cosine of the error with z D), ``rho_reweight``, ``kappa_reweight``, ``gain_reweight``,
        ``cos_reweight``, ``gain_both`` (both directions together), ``mixing_adds`` (gain_both - gain_reweight),
        ``error`` (E[(A* - A_0)^2], unbiased).
    """
    a_e, a_s, zz, zg, s, var = (_t(x) for x in (episode_advantage, step_advantage, z, z_group_mean, a_star, variance))
    a0 = a_e + lambda0 / (1.0 - lambda0) * a_s
    e0 = s - a0
    u_mix = torch.where(torch.as_tensor(has_step_signal), zz * (a_s - a_e) / (1.0 - lambda0), 0.0)
    u_rw = (zz - zg) * a0
    w = _weights(row_weight, s.numel())
    error = float((w * (e0.square() - var)).mean())
    rho, kappa = float((w * u_mix * e0).mean()), float((w * u_mix.square()).mean())
    rho_rw, kappa_rw = float((w * u_rw * e0).mean()), float((w * u_rw.square()).mean())
    cross = float((w * u_mix * u_rw).mean())
    # The sigmoid moves lambda by lambda0 (1 - lambda0) z per unit of eta near 0: slope and best eta rescale.
    scale = lambda0 * (1.0 - lambda0) if modulation == "sigmoid" else 1.0

    def gain(r: float, k: float) -> float:
        return r * r / k if k > 0 else 0.0

    def cos(r: float, k: float) -> float:
        return r / math.sqrt(k * error) if k > 0 and error > 0 else math.nan

    det = kappa * kappa_rw - cross * cross
    if det > 1e-12 * max(kappa * kappa_rw, 1e-300):
        both = (kappa_rw * rho * rho - 2 * cross * rho * rho_rw + kappa * rho_rw * rho_rw) / det
    else:  # collinear (or a zero direction): the span is one direction
        both = max(gain(rho, kappa), gain(rho_rw, kappa_rw))
    return {
        "rho": rho,
        "kappa": kappa,
        "slope": -2.0 * rho * scale,
        "eta_star": rho / (kappa * scale) if kappa > 0 else math.nan,
        "gain": gain(rho, kappa),
        "cos": cos(rho, kappa),
        "rho_reweight": rho_rw,
        "kappa_reweight": kappa_rw,
        "gain_reweight": gain(rho_rw, kappa_rw),
        "cos_reweight": cos(rho_rw, kappa_rw),
        "gain_both": both,
        "mixing_adds": both - gain(rho_rw, kappa_rw),
        "error": error,
    }


@dataclass
class OracleRows:
    """The oracle's rows with everything the reports need, one entry per measured row.

    Attributes:
        row: the row's index in the batch.
        step, nll, z, z_group_mean: the row's step, NLL, standardised NLL and its group's mean z.
        at_branch: whether the row is at a branch point of a branching rollout.
        scale: the group's return scale (A* is divided by it).
        a_star, variance: the scaled A*hat and its scaled noise variance.
        episode_advantage, step_advantage, weight: the batch's A^E, A^S and GACA's lambda.
        has_step_signal: whether the row has an anchor partner.
        pick_weight: the batch rows each measured row stands for (its weight in every mean); None: equal.
        estimates: per estimator name, its advantage on the rows.
    """

    row: torch.Tensor
    step: torch.Tensor
    nll: torch.Tensor
    z: torch.Tensor
    z_group_mean: torch.Tensor
    at_branch: torch.Tensor
    scale: torch.Tensor
    a_star: torch.Tensor
    variance: torch.Tensor
    episode_advantage: torch.Tensor
    step_advantage: torch.Tensor
    has_step_signal: torch.Tensor
    weight: torch.Tensor
    estimates: dict[str, torch.Tensor]
    pick_weight: torch.Tensor | None = None

    def to_records(self) -> list[dict[str, Any]]:
        """One JSON-ready dict per row (the studies pool them over iterations and seeds)."""
        names = ("row", "step", "nll", "z", "z_group_mean", "at_branch", "scale", "a_star", "variance",
                 "episode_advantage", "step_advantage", "has_step_signal", "weight")  # fmt: skip
        cols = {n: getattr(self, n).tolist() for n in names}
        cols["pick_weight"] = [1.0] * len(self.row) if self.pick_weight is None else self.pick_weight.tolist()
        cols.update({f"est_{k}": v.tolist() for k, v in self.estimates.items()})
        return [dict(zip(cols, values)) for values in zip(*cols.values())]


def _return_scale(rows: StepRows, out: Advantages) -> torch.Tensor:
    """Per row, its group's std over trajectories of the episode return (pooled fallback for std 0)."""
    traj, inverse = torch.unique(rows.traj, return_inverse=True)
    last = torch.full((traj.numel(),), -1, dtype=torch.int64).scatter_reduce_(0, inverse, rows.step, "amax")
    is_last = rows.step == last[inverse]
    ret, grp = out.episode_return.to(_F64)[is_last], rows.group[is_last]
    groups, g_inv = torch.unique(grp, return_inverse=True)
    n = torch.bincount(g_inv, minlength=groups.numel()).to(_F64)
    mean = torch.zeros(groups.numel(), dtype=_F64).index_add_(0, g_inv, ret) / n
    sq = torch.zeros(groups.numel(), dtype=_F64).index_add_(0, g_inv, (ret - mean[g_inv]).square())
    std = (sq / (n - 1).clamp(min=1)).sqrt()
    positive = std > 0
    pooled = float(std[positive].square().mean().sqrt()) if positive.any() else 1.0
    std = torch.where(positive, std, torch.full_like(std, pooled))
    return std[torch.searchsorted(groups, rows.group)]


def oracle_rows(
    rows: StepRows,
    config: EstimatorConfig | None,
    picked: list[int],
    a_star: list[float],
    variance: list[float],
    *,
    parent: Any = None,
    at_branch: Any = None,
    estimators: tuple[str, ...] = ESTIMATORS,
    pick_weight: Any = None,
) -> OracleRows:
    """Every estimator on the batch, A* on their scale, and the parts the theory needs, on the picked rows.

    Args:
        rows: the iteration's batch.
        config: the estimator options (a GACAConfig works); GACA's parts use them.
        picked: the oracle's row indices.
        a_star, variance: per picked row, A*hat (in env return units) and its noise variance.
        parent: the batch's per-row parents for branching trees (see ``compute_advantages``).
        at_branch: [R] bool per batch row, whether it is at a branch point (default: none).
        estimators: which estimators to compute.
        pick_weight: per picked row, the batch rows it stands for (:func:`~gaca_train.oracle.monte_carlo.pick_rows`).
    """
    cfg = EstimatorConfig(**(config or EstimatorConfig()).to_kwargs())
    idx = torch.as_tensor(picked, dtype=torch.int64)
    outs = {name: compute_advantages(rows, name, cfg, parent=parent) for name in estimators}
    gaca = outs.get("gaca") or compute_advantages(rows, "gaca", cfg, parent=parent)
    z = gaca.criticality.to(_F64)
    group, g_inv = torch.unique(rows.group, return_inverse=True)
    z_mean = torch.zeros(group.numel(), dtype=_F64).index_add_(0, g_inv, z) / torch.bincount(g_inv).to(_F64)
    # A* on the scale A^E divides by: the group's return std for episode_norm "mean_std", none for "mean".
    scale = _return_scale(rows, gaca) if cfg.episode_norm == "mean_std" else torch.ones(len(rows), dtype=_F64)
    branch = torch.zeros(len(rows), dtype=torch.bool) if at_branch is None else torch.as_tensor(at_branch)
    s = scale[idx]
    return OracleRows(
        row=idx,
        step=rows.step[idx],
        nll=rows.nll.to(_F64)[idx],
        z=z[idx],
        z_group_mean=z_mean[g_inv][idx],
        at_branch=branch[idx],
        scale=s,
        a_star=_t(a_star) / s,
        variance=_t(variance) / s.square(),
        episode_advantage=gaca.episode_advantage.to(_F64)[idx],
        step_advantage=gaca.step_advantage.to(_F64)[idx],
        has_step_signal=gaca.has_step_signal[idx],
        weight=gaca.weight.to(_F64)[idx],
        estimates={name: out.advantage.to(_F64)[idx] for name, out in outs.items()},
        pick_weight=None if pick_weight is None else _t(pick_weight),
    )


def summary_metrics(o: OracleRows, config: EstimatorConfig | None = None) -> dict[str, float]:
    """The ``oracle/*`` metrics of one pass: quality per estimator, the decomposition and the alignment."""
    cfg = config or EstimatorConfig()
    m: dict[str, float] = {"oracle/rows": float(o.row.numel()), "oracle/se_mean": float(o.variance.sqrt().mean())}
    w = o.pick_weight
    for name, est in o.estimates.items():
        for key, value in quality(est, o.a_star, o.variance, w).items():
            if key != "rows":
                m[f"oracle/{name}/{key}"] = value
    dec = mixture_decomposition(o.episode_advantage, o.step_advantage, o.weight, o.a_star, o.variance, cfg.lambda0, w)
    m.update({f"oracle/decomposition/{k}": v for k, v in dec.items()})
    al = alignment(o.episode_advantage, o.step_advantage, o.has_step_signal, o.z, o.z_group_mean, o.a_star,
                   o.variance, cfg.lambda0, cfg.modulation, w)  # fmt: skip
    m.update({f"oracle/alignment/{k}": v for k, v in al.items()})
    return m


def branch_point_rows(rows: StepRows, parent: Sequence[int]) -> torch.Tensor:
    """bool [R]: rows at a branch point, a continuation's first row and its parent's row at that step."""
    parent_t = torch.as_tensor(list(parent), dtype=torch.int64)
    first = torch.full((int(rows.traj.max()) + 1,), torch.iinfo(torch.int64).max).scatter_reduce_(
        0, rows.traj, rows.step, "amin"
    )
    continuation_start = (parent_t >= 0) & (rows.step == first[rows.traj])
    branch_key = set(zip(parent_t[continuation_start].tolist(), rows.step[continuation_start].tolist()))
    at_parent = torch.tensor([(int(j), int(t)) in branch_key for j, t in zip(rows.traj, rows.step)], dtype=torch.bool)
    return continuation_start | at_parent


@dataclass
class OraclePass:
    """One oracle pass: its ``oracle/*`` metrics, the measured rows, and the raw Monte-Carlo estimates."""

    metrics: dict[str, float]
    rows: OracleRows
    estimates: OracleEstimates
    targets: list[OracleTarget]


def run_oracle_pass(
    pool: Any,
    transitions: Sequence[Any],
    histories: Sequence[Sequence[tuple[str, str]]],
    rows: StepRows,
    policy: Any,
    options: EstimatorConfig,
    oracle: OracleConfig,
    *,
    max_env_steps: int | None,
    iteration: int = 0,
    parent: Sequence[int] | None = None,
    reward_scale: float = 1.0,
    min_over_ranks: Callable[[int], int] | None = None,
    prefer: Sequence[bool] | None = None,
) -> OraclePass:
    """Picks rows of one rollout, measures their A* by Monte Carlo and scores every estimator on them.

    Args:
        pool: the rollout's pool (its envs restore the rows' snapshots).
        transitions: the rollout's transitions in row order, played with ``save_snapshots``.
        histories: per episode slot (``Transition.env_index``), its history.
        rows: the batch's step rows, one per transition (same order).
        policy: the current policy, sampling.
        options: the estimator options (a ``GACAConfig`` works).
        oracle: the oracle's budget.
        max_env_steps: the rollout's step limit.
        iteration: the training iteration (seeds the picks and the continuations).
        parent: per row its trajectory's parent for branching trees (None: independent rollouts).
        reward_scale: the training reward scale (A* is scaled like the rows' rewards).
        min_over_ranks: in a distributed run, the smallest of a count over the ranks (every rank must measure
            the same number of rows, for the lockstep of collective generation); None: one process.
        prefer: per row, whether to measure it first: up to half of the rows are picked among these (e.g. the
            branch points of a branching rollout), the rest among all.
    """
    rng = random.Random(oracle.seed * 1_000_003 + iteration)
    eligible = [t.snapshot is not None for t in transitions]
    n = min(oracle.rows, sum(eligible))
    if min_over_ranks is not None:
        n = min_over_ranks(n)
    nll = rows.nll.tolist()
    step = rows.step.tolist()
    weights: dict[int, float] = {}
    if prefer is not None:  # the preferred rows and the others are two strata, each weighted by its own cells
        wanted = [e and p for e, p in zip(eligible, prefer, strict=True)]
        weights = pick_rows(nll, step, n // 2, rng, eligible=wanted, step_bins=oracle.step_bins)
        eligible = [e and not w for e, w in zip(eligible, wanted, strict=True)]
    weights.update(pick_rows(nll, step, n - len(weights), rng, eligible=eligible, step_bins=oracle.step_bins))
    picked = sorted(weights)
    targets = [OracleTarget.from_transition(k, transitions[k], histories[transitions[k].env_index]) for k in picked]
    cfg = EstimatorConfig(**options.to_kwargs())
    est = estimate_advantages(pool, targets, policy, max_env_steps, continuations=oracle.continuations,
                              gamma=oracle.gamma, invalid_action_penalty=cfg.invalid_action_penalty / reward_scale,
                              seed=rng.randrange(2**31), collective=min_over_ranks is not None)  # fmt: skip
    has_tree = parent is not None and any(p >= 0 for p in parent)
    o = oracle_rows(
        rows,
        cfg,
        picked,
        [a * reward_scale for a in est.advantage],
        [v * reward_scale**2 for v in est.variance],
        parent=list(parent) if has_tree else None,
        at_branch=branch_point_rows(rows, parent) if has_tree else None,
        pick_weight=[weights[k] for k in picked],
    )
    metrics = summary_metrics(o, cfg)
    metrics.update({"oracle/seconds": est.seconds, "oracle/env_steps": float(est.env_steps)})
    return OraclePass(metrics, o, est, targets)
