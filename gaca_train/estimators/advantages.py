"""Critic-free advantage estimators for multi-step agents: GRPO, GiGPO, GACA and NLL reweighting.

Every formula is METHOD.md's; each function cites the section it computes. The code is
vectorised: ids become segment indices (offsets, or ``torch.unique`` for sparse ids), anchor
groups come from one sort, returns from a doubling scan, and every per-group or per-anchor
statistic is a segment reduction (``index_add_``), so there is no Python loop over rows,
trajectories or groups. Arithmetic is float64; outputs come back in the rewards' dtype.

This module imports torch only (no TRL, no environment).

Example:
    >>> rows = StepRows(group=[0, 0, 0, 0], traj=[0, 0, 1, 1], step=[0, 1, 0, 1],
    ...                 anchor=[7, 8, 7, 9], reward=[0.0, 10.0, 0.0, 0.0],
    ...                 nll=[0.2, 1.5, 0.4, 0.9], valid=[True, True, True, True])
    >>> out = compute_advantages(rows, "gaca")
    >>> out.advantage.shape
    torch.Size([4])
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from gaca_train.estimators.options import ESTIMATORS, EstimatorConfig
from gaca_train.estimators.rows import StepRows, anchor_ids
from gaca_train.estimators.tree import TrajectoryTree, path_rows

__all__ = [
    "ESTIMATORS",
    "Advantages",
    "EstimatorConfig",
    "StepRows",
    "anchor_ids",
    "compute_advantages",
    "discounted_returns",
    "gaca_advantages",
    "gigpo_advantages",
    "grpo_advantages",
    "reweight_advantages",
]

_F64 = torch.float64


@dataclass(frozen=True)
class Advantages:
    """Per-row advantages with the parts they are built from. Every tensor has shape [R].

    Attributes:
        advantage: the estimator's advantage, in the rewards' dtype.
        episode_advantage: A^E, the episode-level (GRPO) part, broadcast to the steps.
        step_advantage: A^S, the anchor-group part (0 where a row has no anchor partner).
        has_step_signal: bool, whether the row's anchor group has two rows or more.
        returns: G, the discounted return-to-go of the row (penalty included); with a tree of
            trajectories, V^S, its mean over the leaves below the row (METHOD.md section 7).
        episode_return: R, the total reward of the row's trajectory (penalty included); with a tree,
            V^E, the mean return of the leaves below the row.
        weight: GACA's lambda_k or reweighting's w_k; None for GRPO and GiGPO.
        criticality: z_k, the standardised NLL; None for GRPO and GiGPO.
        anchor_group: int64 dense id of the row's anchor group (group, anchor).
        nll: the rows' NLL (float64), kept for the diagnostics.
        estimator: the estimator's name.
    """

    advantage: torch.Tensor
    episode_advantage: torch.Tensor
    step_advantage: torch.Tensor
    has_step_signal: torch.Tensor
    returns: torch.Tensor
    episode_return: torch.Tensor
    weight: torch.Tensor | None
    criticality: torch.Tensor | None
    anchor_group: torch.Tensor
    nll: torch.Tensor
    estimator: str

    @cached_property
    def anchor_group_sizes(self) -> torch.Tensor:
        """int64 [S+1]: entry s is the number of anchor groups with s rows (entry 0 is 0)."""
        return torch.bincount(torch.bincount(self.anchor_group))

    @cached_property
    def metrics(self) -> dict[str, float]:
        """Scalar diagnostics, slash-namespaced for logging; computed on first access."""
        adv = self.advantage.to(_F64)
        signal = self.has_step_signal
        sizes = torch.bincount(self.anchor_group).to(_F64)
        m = {
            "advantage/mean": adv.mean().item(),
            "advantage/std": _std(adv),
            "advantage/abs_mean": adv.abs().mean().item(),
            "advantage/episode_abs_mean": self.episode_advantage.to(_F64).abs().mean().item(),
            "advantage/step_abs_mean": self.step_advantage.to(_F64).abs().mean().item(),
            "advantage/step_signal_share": signal.to(_F64).mean().item(),
            "anchor/groups": float(sizes.numel()),
            "anchor/group_size_mean": sizes.mean().item(),
            "anchor/group_size_max": sizes.max().item(),
            "nll/mean": self.nll.mean().item(),
            "nll/std": _std(self.nll),
            "nll/min": self.nll.min().item(),
            "nll/max": self.nll.max().item(),
        }
        # Histogram of anchor-group sizes in power-of-two buckets, as shares of anchor groups.
        for lo, hi in ((1, 1), (2, 3), (4, 7), (8, 15), (16, None)):
            inside = (sizes >= lo) if hi is None else (sizes >= lo) & (sizes <= hi)
            name = f"anchor/size_{lo}" if lo == hi else f"anchor/size_{lo}_{hi or 'up'}"
            m[name] = inside.to(_F64).mean().item()
        if self.weight is not None:
            m["advantage/lambda_mean" if self.estimator == "gaca" else "advantage/weight_mean"] = (
                self.weight.to(_F64).mean().item()
            )
            m["advantage/lambda_std" if self.estimator == "gaca" else "advantage/weight_std"] = _std(
                self.weight.to(_F64)
            )
        if self.criticality is not None:
            gap = (self.step_advantage.to(_F64) - self.episode_advantage.to(_F64)).abs()
            m["advantage/corr_z_gap"] = _pearson(self.criticality.to(_F64)[signal], gap[signal])
        return m


def _std(x: torch.Tensor) -> float:
    return x.std().item() if x.numel() > 1 else 0.0


def _pearson(x: torch.Tensor, y: torch.Tensor) -> float:
    """Pearson correlation; NaN when fewer than two points or a constant input."""
    if x.numel() < 2:
        return float("nan")
    x, y = x - x.mean(), y - y.mean()
    denom = (x.square().sum() * y.square().sum()).sqrt()
    return (x * y).sum().div(denom).item() if denom > 0 else float("nan")


def _dense_ids(ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Factorises arbitrary int64 ids into 0..n-1 (returns inverse index and n)."""
    unique, inverse = torch.unique(ids, return_inverse=True)
    return inverse, unique.numel()


def _segment_ids(ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """A segment index per row for segment reductions, and the number of segments.

    Ids that span few values (the common case: 0..G-1) are used as offsets, which costs no
    sort; some segments may then be empty, which every reduction here tolerates. Sparse ids
    (hashes, large gaps) are factorised with ``torch.unique``.
    """
    lo, hi = torch.aminmax(ids)
    span = int(hi) - int(lo) + 1
    if span <= 2 * ids.numel() + 64:
        return ids - lo, span
    return _dense_ids(ids)


def _pair_segments(group: torch.Tensor, n_groups: int, anchor: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Dense ids 0..S-1 of the (group, anchor) pairs, the anchor groups of METHOD.md section 2.

    One sort of a mixed key (anchor shifted left, group segment in the low bits). Two pairs can
    share a mixed key only if their anchors differ in the shifted-out top bits; that is checked
    and, should it ever happen, the pairs are factorised exactly instead.
    """
    bits = max(1, (n_groups - 1).bit_length())
    mixed = torch.bitwise_left_shift(anchor, bits) | group
    order = torch.argsort(mixed)
    m, a = mixed[order], anchor[order]
    new = m[1:] != m[:-1]
    if bool((~new & (a[1:] != a[:-1])).any()):
        _, inverse = torch.unique(torch.stack([group, anchor], dim=1), dim=0, return_inverse=True)
        return inverse, int(inverse.max()) + 1
    in_order = torch.zeros_like(anchor)
    torch.cumsum(new, 0, out=in_order[1:])
    pairs = torch.empty_like(in_order)
    pairs[order] = in_order
    return pairs, int(in_order[-1]) + 1


def _segment_mean_std(
    values: torch.Tensor, segment: torch.Tensor, n_segments: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-segment mean, unbiased std (0 for a one-element segment) and count, each [n_segments].

    The mean is taken relative to each segment's largest value, so a constant segment gets its
    value back exactly (and a std of exactly 0): identities such as "GACA with equal NLLs is
    GiGPO" then hold to the last bit rather than to rounding.
    """
    count = torch.bincount(segment, minlength=n_segments).to(_F64)
    shift = torch.full((n_segments,), -torch.inf, dtype=_F64).scatter_reduce_(0, segment, values, "amax")
    shift = shift.masked_fill(count == 0, 0.0)
    total = torch.zeros(n_segments, dtype=_F64).index_add_(0, segment, values - shift[segment])
    mean = shift + total / count.clamp(min=1)
    sq = torch.zeros(n_segments, dtype=_F64).index_add_(0, segment, (values - mean[segment]).square())
    std = (sq / (count - 1).clamp(min=1)).sqrt()
    return mean, std, count


def _normalise(
    values: torch.Tensor, mean: torch.Tensor | float, std: torch.Tensor, how: str, eps: float
) -> torch.Tensor:
    centred = values - mean
    return centred / (std + eps) if how == "mean_std" else centred


def discounted_returns(reward: torch.Tensor, traj: torch.Tensor, step: torch.Tensor, gamma: float) -> torch.Tensor:
    """Discounted return-to-go per row (METHOD.md section 2).

    G_{i,t} = sum_{t' >= t} gamma^(t' - t) r_{i,t'} over the rows of trajectory i, the
    exponent taken from the step indices (a gap in the steps is discounted like the steps it
    skips). The rows are laid into a [trajectories, steps] matrix (missing steps hold reward 0)
    and the recurrence G_t = r_t + gamma G_{t+1} is solved by a doubling scan along the steps:
    after the pass with shift s every cell holds the discounted sum of its next 2s cells, so
    ceil(log2 L) vectorised passes cover trajectories of L steps. Coefficients stay in [0, 1]:
    long trajectories cannot overflow. A layout that would be much larger than the batch (huge
    step gaps) is solved the same way over the rows sorted by (trajectory, step) instead.

    Args:
        reward: float [R] rewards.
        traj: int64 [R] trajectory ids.
        step: int64 [R] step indices, unique within a trajectory.
        gamma: discount in [0, 1].

    Returns:
        float64 [R], in the rows' order.
    """
    reward = reward.to(_F64)
    traj, n_traj = _segment_ids(traj)
    first = torch.full((n_traj,), torch.iinfo(torch.int64).max).scatter_reduce_(0, traj, step, "amin")
    slot = step - first[traj]
    width = int(slot.max()) + 1
    if n_traj * width <= 8 * reward.numel() + 4096:
        flat = traj * width + slot
        padded = torch.zeros(n_traj * width, dtype=_F64).index_put_((flat,), reward)
        matrix = padded.view(n_traj, width)
        shift = 1
        while shift < width:
            matrix[:, :-shift] = matrix[:, :-shift] + gamma**shift * matrix[:, shift:]
            shift *= 2
        return padded[flat]
    return _sorted_returns(reward, traj, slot, gamma)


def _sorted_returns(reward: torch.Tensor, traj: torch.Tensor, slot: torch.Tensor, gamma: float) -> torch.Tensor:
    """discounted_returns over rows sorted by (traj, slot): G_k = r_k + gamma^(gap) G_next, a doubling scan."""
    # Two stable sorts rather than one combined key: traj * (max slot + 1) + slot overflows int64
    # once the slots reach about 2**63 / trajectories, and then interleaves trajectories silently.
    order = torch.sort(slot, stable=True).indices
    order = order[torch.sort(traj[order], stable=True).indices]
    t, s = traj[order], slot[order]
    b = reward[order]
    a = torch.zeros_like(b)
    a[:-1] = torch.where(t[1:] == t[:-1], torch.pow(torch.tensor(gamma, dtype=_F64), (s[1:] - s[:-1]).to(_F64)), 0.0)
    longest = int(torch.bincount(traj).max())
    shift = 1
    while shift < longest:  # composes the recurrence over `shift` rows per pass
        b[:-shift] = b[:-shift] + a[:-shift] * b[shift:]
        a[:-shift] = a[:-shift] * a[shift:]
        shift *= 2
    out = torch.empty_like(b)
    out[order] = b
    return out


@dataclass(frozen=True)
class _Parts:
    """The estimator-independent quantities of one batch (sections 1-2 and 6)."""

    group: torch.Tensor  # dense group id per row
    n_groups: int
    episode_advantage: torch.Tensor
    step_advantage: torch.Tensor
    has_step_signal: torch.Tensor
    returns: torch.Tensor
    episode_return: torch.Tensor
    anchor_group: torch.Tensor


def _tree_parts(rows: StepRows, cfg: EstimatorConfig, tree: TrajectoryTree) -> _Parts:
    """A^E and A^S of a batch whose groups are trees (METHOD.md section 7), the penalty of section 6.

    Node values are means over the leaves below a row: V^E of the leaves' returns R_l, V^S of their
    returns-to-go G_l(t) along their paths; the episode baseline and scale are over each group's
    leaves, the anchor groups over the rows (each once) with V^S in place of G.
    """
    group, n_groups = _segment_ids(rows.group)
    penalty = (~rows.valid).to(_F64) * cfg.invalid_action_penalty
    reward = rows.reward.to(_F64)
    leaf, row = path_rows(tree, rows.step)
    n_rows, n_leaves = len(rows), tree.parent.numel()
    # Section 6: a leaf's return pays every penalty on its path; a row's return-to-go only its own.
    leaf_return = torch.zeros(n_leaves, dtype=_F64).index_add_(0, leaf, reward[row] - penalty[row])
    path_returns = discounted_returns(reward[row], leaf, rows.step[row], cfg.gamma)
    leaves_below = torch.bincount(row, minlength=n_rows).to(_F64)
    returns = torch.zeros(n_rows, dtype=_F64).index_add_(0, row, path_returns) / leaves_below - penalty

    leaf_group = torch.zeros(n_leaves, dtype=torch.int64).scatter_(0, tree.traj, group)
    mean, std, count = _segment_mean_std(leaf_return, leaf_group, n_groups)
    # A row's episode value is the mean return of the leaves below it; averaged as offsets from the group's
    # mean, so that a group whose leaves all return the same gets exactly 0 (not a rounding residue / eps).
    centred = leaf_return - mean[leaf_group]
    episode_centred = torch.zeros(n_rows, dtype=_F64).index_add_(0, row, centred[leaf]) / leaves_below
    episode_value = episode_centred + mean[group]
    episode_advantage = _normalise(episode_centred, 0.0, std[group], cfg.episode_norm, cfg.eps)
    episode_advantage = episode_advantage.masked_fill(count[group] < 2, 0.0)  # one leaf: A^E = 0

    step_advantage, has_step_signal, anchor_group = _step_part(returns, group, n_groups, rows.anchor, cfg)
    return _Parts(
        group, n_groups, episode_advantage, step_advantage, has_step_signal, returns, episode_value, anchor_group
    )


def _episode_and_step_parts(rows: StepRows, cfg: EstimatorConfig) -> _Parts:
    """A^E (section 1) and A^S (section 2), the invalid-action penalty (section 6) or the preset's."""
    group, n_groups = _segment_ids(rows.group)
    traj, n_traj = _segment_ids(rows.traj)
    penalty = (~rows.valid).to(_F64) * cfg.invalid_action_penalty
    reward = rows.reward.to(_F64)
    verl = cfg.preset == "verl-agent"
    # Section 6: a row's return-to-go is the discounted env reward minus its own penalty only (a later
    # row's penalty is not discounted into it), so it does not depend on how long before the step cap
    # the row came; the episode return pays every penalty of the trajectory (verl-agent: its own only).
    returns = discounted_returns(reward, rows.traj, rows.step, cfg.gamma) - penalty
    traj_return = torch.zeros(n_traj, dtype=_F64).index_add_(0, traj, reward if verl else reward - penalty)

    if verl:
        # verl-agent: each row carries its episode score minus its own penalty; the group's mean
        # and std are taken over those rows; a group of one row keeps its raw score.
        episode_return = traj_return[traj] - penalty
        mean, std, count = _segment_mean_std(episode_return, group, n_groups)
        single = count == 1
        mean, std = mean.masked_fill(single, 0.0), std.masked_fill(single, 1.0)
        episode_advantage = _normalise(episode_return, mean[group], std[group], cfg.episode_norm, cfg.eps)
    else:
        episode_return = traj_return[traj]
        # One entry per trajectory (trajectory segments may include empty ones: drop them).
        present = torch.bincount(traj, minlength=n_traj) > 0
        traj_group = torch.zeros(n_traj, dtype=torch.int64).scatter_(0, traj, group)[present]
        mean, std, count = _segment_mean_std(traj_return[present], traj_group, n_groups)
        per_traj = torch.zeros(n_traj, dtype=_F64)
        per_traj[present] = _normalise(
            traj_return[present], mean[traj_group], std[traj_group], cfg.episode_norm, cfg.eps
        )
        per_traj[present] = per_traj[present].masked_fill(count[traj_group] < 2, 0.0)  # one trajectory: A^E = 0
        episode_advantage = per_traj[traj]

    step_advantage, has_step_signal, anchor_group = _step_part(returns, group, n_groups, rows.anchor, cfg)
    return _Parts(
        group, n_groups, episode_advantage, step_advantage, has_step_signal, returns, episode_return, anchor_group
    )


def _step_part(
    returns: torch.Tensor, group: torch.Tensor, n_groups: int, anchor: torch.Tensor, cfg: EstimatorConfig
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A^S over the anchor groups (section 2): the step advantage, whether a row has a partner, the anchor group."""
    anchor_group, n_anchor_groups = _pair_segments(group, n_groups, anchor)
    mean, std, count = _segment_mean_std(returns, anchor_group, n_anchor_groups)
    has_step_signal = count[anchor_group] >= 2
    step_advantage = _normalise(returns, mean[anchor_group], std[anchor_group], cfg.step_norm, cfg.eps)
    return step_advantage.masked_fill(~has_step_signal, 0.0), has_step_signal, anchor_group


def _criticality(nll: torch.Tensor, parts: _Parts, cfg: EstimatorConfig) -> torch.Tensor:
    """z_k, the NLL standardised over the row's group or the batch (section 4)."""
    if cfg.nll_norm == "group":
        mean, std, _ = _segment_mean_std(nll, parts.group, parts.n_groups)
        return (nll - mean[parts.group]) / (std[parts.group] + cfg.eps)
    everything = torch.zeros_like(parts.group)
    mean, std, _ = _segment_mean_std(nll, everything, 1)
    return (nll - mean) / (std + cfg.eps)


def _gaca_weight(z: torch.Tensor, has_step_signal: torch.Tensor, cfg: EstimatorConfig) -> torch.Tensor:
    """lambda_k (section 4): linear clip or sigmoid in z; lambda0 where the row has no step signal."""
    if cfg.modulation == "linear":
        lam = (cfg.lambda0 + cfg.eta * z).clamp(cfg.lambda_min, cfg.lambda_max)
    else:
        logit0 = torch.logit(torch.tensor(cfg.lambda0, dtype=_F64))
        lam = torch.sigmoid(logit0 + cfg.eta * z)
    return torch.where(has_step_signal, lam, torch.full_like(lam, cfg.lambda0))


def _reweight_factor(z: torch.Tensor, parts: _Parts, cfg: EstimatorConfig) -> torch.Tensor:
    """w_k = clip(1 + eta z, 0, w_max), renormalised to mean 1 within the group (section 5)."""
    w = (1.0 + cfg.eta * z).clamp(0.0, cfg.w_max)
    total = torch.zeros(parts.n_groups, dtype=_F64).index_add_(0, parts.group, w)
    count = torch.bincount(parts.group, minlength=parts.n_groups).to(_F64)
    group_mean = (total / count)[parts.group]
    # A group whose factors all clip to 0 carries no information to rescale with: keep w = 1.
    return torch.where(group_mean > 0, w / group_mean.clamp(min=torch.finfo(_F64).tiny), torch.ones_like(w))


def compute_advantages(
    rows: StepRows,
    estimator: str = "gaca",
    config: EstimatorConfig | None = None,
    *,
    parent: torch.Tensor | None = None,
    **options: object,
) -> Advantages:
    """Per-row advantages of one batch of step rows.

    Args:
        rows: the batch (R rows), see :class:`StepRows`.
        estimator: ``"grpo"`` (section 1), ``"gigpo"`` (section 3), ``"gaca"`` (section 4) or
            ``"reweight"`` (section 5, scalar NLL reweighting of ``reweight_base``).
        config: the options, an :class:`EstimatorConfig` or a ``GACAConfig``; default ``EstimatorConfig()``.
        parent: int64 [R] (or a list), per row its trajectory's parent trajectory id, -1 for a root: the
            groups are trees of branching rollouts (METHOD.md section 7). None, or every entry -1: no
            branching, and sections 1-5 exactly.
        **options: overrides of ``config``'s fields (``gamma=0.9``, ``preset="verl-agent"``...).

    Returns:
        :class:`Advantages`, every tensor of shape [R] in the rows' order.

    Raises:
        ValueError: for an unknown estimator or an invalid option value.
        TypeError: for an unknown option name.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    unknown = sorted(set(options) - set(EstimatorConfig.option_names()))
    if unknown:
        raise TypeError(
            f"unknown estimator option(s) {unknown}; valid options: {list(EstimatorConfig.option_names())}"
        )
    # A plain EstimatorConfig of the options, also when ``config`` is a GACAConfig (a subclass):
    # dataclasses.replace would rebuild, and re-validate, the whole training config.
    cfg = EstimatorConfig(**{**(config or EstimatorConfig()).to_kwargs(), **options})

    tree = None
    if parent is not None and not isinstance(parent, torch.Tensor):
        parent = torch.tensor(parent, dtype=torch.int64)
    if parent is not None and (parent.shape != rows.traj.shape or parent.dtype != torch.int64):
        raise ValueError(
            f"parent must be int64 with one trajectory id per row (shape {tuple(rows.traj.shape)}), "
            f"got {parent.dtype} of shape {tuple(parent.shape)}"
        )
    if parent is not None and bool((parent != -1).any()):
        if cfg.preset == "verl-agent":
            raise ValueError("preset='verl-agent' takes no tree of trajectories: pass parent=None (no branching)")
        tree = TrajectoryTree.from_rows(rows.traj, rows.step, rows.group, parent)
    # Without a continuation every trajectory is its own leaf: sections 1-2 exactly (section 7's special case).
    parts = _episode_and_step_parts(rows, cfg) if tree is None else _tree_parts(rows, cfg, tree)
    a_e, a_s = parts.episode_advantage, parts.step_advantage
    weight = z = None
    nll = rows.nll.to(_F64, copy=True)  # the result must not share memory with the rows
    if estimator == "grpo":
        advantage = a_e
    elif estimator == "gigpo":
        advantage = a_e + cfg.omega * a_s
    elif estimator == "gaca":
        z = _criticality(nll, parts, cfg)
        weight = _gaca_weight(z, parts.has_step_signal, cfg)
        advantage = ((1.0 - weight) * a_e + weight * a_s) / (1.0 - cfg.lambda0)
    else:
        z = _criticality(nll, parts, cfg)
        weight = _reweight_factor(z, parts, cfg)
        base = a_e if cfg.reweight_base == "grpo" else a_e + cfg.omega * a_s
        advantage = weight * base

    dtype = rows.reward.dtype

    def out(x: torch.Tensor) -> torch.Tensor:
        # copy=True: without it a float64 batch would return tensors that alias one another
        # (GRPO's advantage is its episode advantage), so changing one would change the other.
        return x.to(dtype, copy=True)

    return Advantages(
        advantage=out(advantage),
        episode_advantage=out(a_e),
        step_advantage=out(a_s),
        has_step_signal=parts.has_step_signal,
        returns=out(parts.returns),
        episode_return=out(parts.episode_return),
        weight=None if weight is None else out(weight),
        criticality=None if z is None else out(z),
        anchor_group=parts.anchor_group,
        nll=nll,
        estimator=estimator,
    )


def grpo_advantages(rows: StepRows, **options: object) -> Advantages:
    """GRPO: the episode-level advantage A^E broadcast to every step (METHOD.md section 1)."""
    return compute_advantages(rows, "grpo", **options)


def gigpo_advantages(rows: StepRows, **options: object) -> Advantages:
    """GiGPO: A^E + omega * A^S with a fixed omega (METHOD.md section 3)."""
    return compute_advantages(rows, "gigpo", **options)


def gaca_advantages(rows: StepRows, **options: object) -> Advantages:
    """GACA: [(1 - lambda_k) A^E + lambda_k A^S] / (1 - lambda0), lambda_k from the NLL (section 4)."""
    return compute_advantages(rows, "gaca", **options)


def reweight_advantages(rows: StepRows, **options: object) -> Advantages:
    """Scalar NLL reweighting: w_k * B_k with B the GRPO or GiGPO advantage (METHOD.md section 5)."""
    return compute_advantages(rows, "reweight", **options)
