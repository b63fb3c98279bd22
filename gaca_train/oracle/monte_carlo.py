"""Oracle advantages: the true advantage of the actions a policy took, measured from env snapshots.

For a row k of a rollout (state s before step t, action a taken there) and the current policy pi,
A*_k = Q(s, a) - V(s): Q is the expected return from s when a is taken first and pi acts after,
V the expected return when pi acts from s. Both are estimated by Monte Carlo: the env snapshot
saved before step t is restored together with the agent's history up to t (so every continuation's
first prompt is the row's own prompt), and ``continuations`` episodes are played to their end
for each: in the Q continuations the first decision is the row's recorded decision, in the V
continuations the policy samples it. Every continuation is reseeded apart, so env randomness after
the restore is resampled too. The continuations play through the one episode loop
(:func:`gaca_train.rollout.episodes.play`), so any pool (:class:`~gaca_train.rollout.episodes.EnvList`,
:class:`~gaca_train.rollout.vector.RolloutPool`, remote envs) and any policy (tabular, the trainer's LLM
policy on either generation backend) works.

Returns are the objective the episode return R_i of docs/method.md section 6 measures: the env reward
minus ``invalid_action_penalty`` for every response from step t on that failed the format check,
discounted by ``gamma`` (1.0, the default, is the episode objective).

Noise: each estimate comes with ``variance``, s_Q^2 / M + s_V^2 / M with the unbiased sample
variances, an unbiased estimate of Var(A*hat - A*); the metrics of :mod:`gaca_train.oracle.metrics`
subtract it, so their error is unbiased for the error against the true A*.

Rows are picked stratified by NLL decile and by step (:func:`pick_rows`), so the rare high-NLL
steps and the late steps are measured as well as the common ones. This module imports no torch.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gaca_train.rollout.episodes import Decision, Policy, Start, Transition, Turn, play

__all__ = [
    "ForcedFirst",
    "OracleConfig",
    "OracleEstimates",
    "OracleTarget",
    "estimate_advantages",
    "pick_rows",
]


@dataclass(frozen=True)
class OracleConfig:
    """How much the oracle measures, and how often.

    Attributes:
        rows: rows measured per oracle pass.
        continuations: M, continuations per row for Q and again for V (2 M episodes a row).
        every: iterations between passes in training (0: never).
        gamma: discount of the oracle's returns (1.0: the undiscounted episode return).
        step_bins: step strata of :func:`pick_rows` (quantile bins of the eligible rows' steps).
        seed: seeds the row picks and the continuations' env resets.
    """

    rows: int = 32
    continuations: int = 8
    every: int = 10
    gamma: float = 1.0
    step_bins: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        for name, low in (("rows", 1), ("continuations", 2), ("every", 0), ("step_bins", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"oracle_{name} must be an int >= {low}, got {value!r}")
        if not (isinstance(self.gamma, (int, float)) and 0.0 <= self.gamma <= 1.0):
            raise ValueError(f"oracle_gamma must be in [0, 1], got {self.gamma!r}")


@dataclass(frozen=True)
class OracleTarget:
    """One row to measure: where its episode was, what the agent had seen, and what it did.

    Attributes:
        row: the row's index in the caller's batch.
        snapshot: the env's snapshot before the row's step (``Transition.snapshot``).
        step: the row's step.
        history: the (observation, action as shown) pairs before the step.
        decision: the row's recorded decision; the Q continuations take it first.
    """

    row: int
    snapshot: Any
    step: int
    history: tuple[tuple[str, str], ...]
    decision: Decision

    @classmethod
    def from_transition(cls, row: int, t: Transition, history: Sequence[tuple[str, str]]) -> OracleTarget:
        """The target of a played transition saved with ``save_snapshots``; ``history`` is its episode's."""
        if t.snapshot is None:
            raise ValueError(f"row {row} has no snapshot: play its rollout with save_snapshots=True")
        forced = Decision(t.decision.action, valid=t.decision.valid, shown=t.decision.shown, nll=t.decision.nll)
        return cls(row, t.snapshot, t.step, tuple(history[: t.step]), forced)


@dataclass
class OracleEstimates:
    """Per target (in the order given): Monte-Carlo Q, V, A* = Q - V and the variance of A*hat.

    Attributes:
        rows: the targets' row indices.
        q, v, advantage: means over the continuations.
        variance: s_Q^2 / M + s_V^2 / M (unbiased for Var(A*hat)).
        q_returns, v_returns: every continuation's return, per target.
        env_steps: env steps the continuations played.
        seconds: wall time of the estimate.
    """

    rows: list[int]
    q: list[float]
    v: list[float]
    advantage: list[float]
    variance: list[float]
    q_returns: list[list[float]] = field(default_factory=list)
    v_returns: list[list[float]] = field(default_factory=list)
    env_steps: int = 0
    seconds: float = 0.0

    def interval(self, z: float = 1.96) -> list[tuple[float, float]]:
        """Normal intervals A*hat -+ z * se (see :meth:`interval_bounded` for returns of known range)."""
        return [(a - z * math.sqrt(v), a + z * math.sqrt(v)) for a, v in zip(self.advantage, self.variance)]

    def interval_bounded(self, low: float, high: float, z: float = 1.96) -> list[tuple[float, float]]:
        """Intervals for returns known to lie in [low, high], safe when every continuation agreed.

        Each mean's variance is at least the Bhatia-Davis bound (mu - low)(high - mu) of a variable of
        that range, evaluated at the mean with one pseudo-return at each end (the Agresti-Coull
        adjustment), which for two-valued returns (win or not) is the Agresti-Coull interval.
        """
        out = []
        for a, qs, vs in zip(self.advantage, self.q_returns, self.v_returns):
            var = sum(_bounded_variance(x, low, high) / len(x) for x in (qs, vs))
            out.append((a - z * math.sqrt(var), a + z * math.sqrt(var)))
        return out


def _bounded_variance(x: list[float], low: float, high: float) -> float:
    mu = (sum(x) + low + high) / (len(x) + 2)
    return max(_sample_variance(x), (mu - low) * (high - mu))


def _sample_variance(x: Sequence[float]) -> float:
    if len(x) < 2:
        return 0.0
    m = sum(x) / len(x)
    return sum((v - m) ** 2 for v in x) / (len(x) - 1)


def pick_rows(
    nll: Sequence[float],
    step: Sequence[int],
    n: int,
    rng: random.Random,
    *,
    eligible: Sequence[bool] | None = None,
    deciles: int = 10,
    step_bins: int = 4,
) -> dict[int, float]:
    """``n`` rows stratified by NLL decile and step bin, each with the weight that maps the sample back to the batch.

    Strata are (NLL decile, step bin) cells over the eligible rows, deciles by rank of the NLL (ties
    broken at random), step bins by rank of the step. The cells are visited in turn (each round in a
    random order), one row drawn without replacement from each cell that has rows left, until ``n``
    rows are picked or none are left. A row's weight is its cell's eligible rows over the rows picked
    from the cell (the inverse of its chance of being picked): a cell of 40 rows of which 2 were picked
    gives each weight 20, so weighted means over the picks estimate means over all eligible rows, where
    plain means weigh every cell about equally.

    Args:
        nll: per row its NLL.
        step: per row its step.
        n: rows to pick.
        rng: the draws' generator.
        eligible: per row whether it can be measured (e.g. has a snapshot); default every row.
        deciles: NLL strata.
        step_bins: step strata.

    Returns:
        Picked row index -> weight, in increasing row order.
    """
    rows = [i for i in range(len(nll)) if eligible is None or eligible[i]]
    if not rows or n <= 0:
        return {}
    by_nll = sorted(rows, key=lambda i: (nll[i], rng.random()))
    by_step = sorted(rows, key=lambda i: (step[i], rng.random()))
    decile = {i: r * deciles // len(rows) for r, i in enumerate(by_nll)}
    # Rows of one step share a bin: the bin of the step's first row in step order.
    first_rank: dict[int, int] = {}
    for r, i in enumerate(by_step):
        first_rank.setdefault(step[i], r)
    step_bin = {i: first_rank[step[i]] * step_bins // len(rows) for i in rows}
    cells: dict[tuple[int, int], list[int]] = {}
    for i in rows:
        cells.setdefault((decile[i], step_bin[i]), []).append(i)
    for members in cells.values():
        rng.shuffle(members)
    size = {key: len(members) for key, members in cells.items()}
    picked: dict[int, tuple[int, int]] = {}
    while len(picked) < n and cells:
        keys = list(cells)
        rng.shuffle(keys)
        for key in keys:
            if len(picked) == n:
                break
            picked[cells[key].pop()] = key
            if not cells[key]:
                del cells[key]
    taken: dict[tuple[int, int], int] = {}
    for key in picked.values():
        taken[key] = taken.get(key, 0) + 1
    return {row: size[picked[row]] / taken[picked[row]] for row in sorted(picked)}


class ForcedFirst:
    """A policy whose first decision in some env slots is given: the Q continuations' first action.

    Turns of a slot in ``forced`` get that decision once; every other turn goes to ``inner``. With a
    collective inner policy (distributed generation) ``inner.act`` is called every turn, also with no
    turn of its own, so the ranks' lockstep holds.
    """

    def __init__(self, inner: Policy, forced: dict[int, Decision], collective: bool = False) -> None:
        self.inner, self.forced, self.collective = inner, dict(forced), collective
        start = getattr(inner, "start", None)
        if start is not None:
            self.start = start

    def act(self, turns: list[Turn]) -> list[Decision] | None:  # noqa: D102
        out: list[Decision | None] = [None] * len(turns)
        rest, where = [], []
        for j, t in enumerate(turns):
            decision = self.forced.pop(t.env_index, None)
            if decision is not None:
                out[j] = decision
            else:
                rest.append(t)
                where.append(j)
        if rest or self.collective:
            answers = self.inner.act(rest)
            if answers is None:
                if rest or not turns:
                    return None
            else:
                for j, answer in zip(where, answers, strict=True):
                    out[j] = answer
        return out  # type: ignore[return-value]


def estimate_advantages(
    pool: Any,
    targets: Sequence[OracleTarget],
    policy: Policy,
    max_env_steps: int | None,
    *,
    continuations: int = 8,
    gamma: float = 1.0,
    invalid_action_penalty: float = 0.0,
    seed: int = 0,
    collective: bool = False,
) -> OracleEstimates:
    """Monte-Carlo Q, V and A* = Q - V of every target (see the module docstring).

    The 2 M continuations of the targets fill the pool's slots (one chunk after another when they
    do not fit), slot order: for each target its M V continuations, then its M Q continuations.

    Args:
        pool: any pool of :func:`~gaca_train.rollout.episodes.play` whose envs restore the targets' snapshots.
        targets: the rows to measure.
        policy: the current policy (an episode-loop policy that samples).
        max_env_steps: the episode step limit, as in training (a continuation counts its prefix).
        continuations: M per target for Q and for V.
        gamma: discount of the returns from the target's step on.
        invalid_action_penalty: charged for every decision whose ``valid`` is False.
        seed: continuation ``c`` of the whole pass is reset with ``seed + c`` after the restore.
        collective: see :func:`~gaca_train.rollout.episodes.play` (distributed generation); every rank must then
            call this with the same number of targets.

    Returns:
        :class:`OracleEstimates`.
    """
    tic = time.perf_counter()
    m = continuations
    # V slots first: every chunk then opens with slots the policy plays, so a distributed policy renders a
    # prompt of its own on the first turn (its lockstep padding) even where every Q continuation ends at once.
    jobs = [(k, kind) for k in range(len(targets)) for kind in ("v", "q") for _ in range(m)]
    returns: dict[str, list[list[float]]] = {"q": [[] for _ in targets], "v": [[] for _ in targets]}
    env_steps = 0
    width = pool.num_envs
    for first in range(0, len(jobs), width):
        chunk = jobs[first : first + width]
        starts: list[Start | None] = [None] * width
        forced: dict[int, Decision] = {}
        for slot, (k, kind) in enumerate(chunk):
            target = targets[k]
            starts[slot] = Start(target.snapshot, target.step, target.history)
            if kind == "q":
                forced[slot] = target.decision
        seeds = [seed + first + slot for slot in range(width)]
        played = play(pool, [None] * width, ForcedFirst(policy, forced, collective), max_env_steps, seed=seeds,
                      collective=collective, starts=starts)  # fmt: skip
        total = [0.0] * width
        for t in played.transitions:
            k = chunk[t.env_index][0]
            cost = 0.0 if t.decision.valid else invalid_action_penalty
            total[t.env_index] += gamma ** (t.step - targets[k].step) * (t.reward - cost)
        env_steps += len(played.transitions)
        for slot, (k, kind) in enumerate(chunk):
            returns[kind][k].append(total[slot])
    q = [sum(x) / len(x) for x in returns["q"]]
    v = [sum(x) / len(x) for x in returns["v"]]
    variance = [_sample_variance(a) / m + _sample_variance(b) / m for a, b in zip(returns["q"], returns["v"])]
    return OracleEstimates(
        rows=[t.row for t in targets],
        q=q,
        v=v,
        advantage=[a - b for a, b in zip(q, v)],
        variance=variance,
        q_returns=returns["q"],
        v_returns=returns["v"],
        env_steps=env_steps,
        seconds=time.perf_counter() - tic,
    )
