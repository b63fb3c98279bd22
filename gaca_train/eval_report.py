"""The evaluation report: success, score, steps, invalid-action and malformed-response rates with 95% intervals.

Each episode record (see :mod:`gaca_train.evaluation`) carries ``won``, ``score``, ``length`` (agent
steps), ``invalid`` (steps the env answered as not understood, ``info["action_valid"] = False``),
``malformed`` (responses that did not parse as ``<think>..</think><action>..</action>``), an optional
``task_type`` and an optional ``error`` (the episode could not be played to its end, e.g. the
endpoint kept failing). Errored episodes are counted apart (``errors``) and left out of every
other figure: they measure the endpoint, not the policy.

Intervals (95%, two-sided):

- success rate: Wilson's score interval over episodes;
- score and episode length: mean +- t(0.975, n - 1) * sd / sqrt(n), clipped to the possible values
  (score in [0, 1], length >= 0);
- invalid and malformed rates (per step, pooled over episodes): Wilson's interval with the number
  of steps shrunk by the design effect of steps clustered in episodes (Kish), so that episodes
  that are invalid throughout do not pass for independent evidence. With no between-episode
  excess variance this is Wilson over steps.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

Z95 = 1.959963984540054
# t(0.975, df) for df = 1..30; beyond, Cornish-Fisher's expansion to 1/df^2 (error < 0.001).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
         2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052,
         2.048, 2.045, 2.042)  # fmt: skip
Interval = tuple[float, float] | None


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (df >= 1)."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    return Z95 + (Z95**3 + Z95) / (4 * df) + (5 * Z95**5 + 16 * Z95**3 + 3 * Z95) / (96 * df**2)


def wilson(successes: float, n: float) -> Interval:
    """Wilson's 95% score interval of a proportion ``successes / n``; None when ``n`` is 0."""
    if n <= 0:
        return None
    p = successes / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mean_interval(values: Sequence[float], low: float = -math.inf, high: float = math.inf) -> Interval:
    """The t interval of the mean of ``values``, clipped to [``low``, ``high``]; None with fewer than two values."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
    return (max(low, mean - half), min(high, mean + half))


def clustered_rate_interval(counts: Sequence[int], sizes: Sequence[int]) -> Interval:
    """95% interval of the pooled rate ``sum(counts) / sum(sizes)`` of events in episodes of ``sizes`` steps.

    Wilson's interval on ``sum(sizes) / deff`` steps, where the design effect ``deff >= 1`` is the
    ratio of the ratio estimator's cluster variance to the binomial variance. None with no steps.
    """
    total = sum(sizes)
    if total == 0:
        return None
    rate = sum(counts) / total
    m = len(sizes)
    deff = 1.0
    if m >= 2 and 0.0 < rate < 1.0:
        mean_size = total / m
        cluster_var = sum((c - rate * s) ** 2 for c, s in zip(counts, sizes, strict=True)) / (m - 1) / m / mean_size**2
        deff = max(1.0, cluster_var / (rate * (1 - rate) / total))
    return wilson(rate * total / deff, total / deff)


def _metrics(records: Sequence[dict[str, Any]], max_length: int | None = None) -> dict[str, Any]:
    """Point estimates and intervals of the non-errored ``records`` (episode lengths at most ``max_length``)."""
    played = [r for r in records if not r.get("error")]
    n = len(played)
    lengths = [r["length"] for r in played]
    invalid = [r.get("invalid", 0) for r in played]
    malformed = [r.get("malformed", 0) for r in played]
    steps = max(sum(lengths), 1)
    wins = sum(bool(r["won"]) for r in played)
    scores = [float(r["score"]) for r in played]
    return {
        "episodes": n,
        "errors": len(records) - n,
        "success_rate": wins / max(n, 1),
        "score": sum(scores) / max(n, 1),
        "episode_length": sum(lengths) / max(n, 1),
        "invalid_rate": sum(invalid) / steps,
        "malformed_rate": sum(malformed) / steps,
        "ci95": {
            "success_rate": wilson(wins, n),
            "score": mean_interval(scores, 0.0, 1.0),
            "episode_length": mean_interval([float(x) for x in lengths], 0.0, max_length or math.inf),
            "invalid_rate": clustered_rate_interval(invalid, lengths),
            "malformed_rate": clustered_rate_interval(malformed, lengths),
        },
    }


def summarise(records: Sequence[dict[str, Any]], max_length: int | None = None) -> dict[str, Any]:
    """The report over all ``records`` and per task type.

    ``max_length`` (the step limit) bounds the episode-length interval, as ``[0, 1]`` bounds the score's.

    Returns:
        ``episodes`` (played to the end), ``errors``, ``success_rate``, ``score``, ``episode_length``,
        ``invalid_rate``, ``malformed_rate``, ``ci95`` (each figure's interval as ``[low, high]`` or
        None), and, when records have a ``task_type``, ``by_task_type`` (the same per type) and
        ``success_by_task_type`` (type -> success rate).
    """
    summary = _metrics(records, max_length)
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("task_type") is not None:
            by_type[str(r["task_type"])].append(r)
    if by_type:
        summary["by_task_type"] = {k: _metrics(v, max_length) for k, v in sorted(by_type.items())}
        summary["success_by_task_type"] = {k: v["success_rate"] for k, v in summary["by_task_type"].items()}
    return summary


def _cell(metrics: dict[str, Any], key: str, digits: int = 3) -> str:
    value = f"{metrics[key]:.{digits}f}"
    interval = metrics["ci95"][key]
    return value if interval is None else f"{value} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def _row(first: str, metrics: dict[str, Any]) -> str:
    cells = [
        first,
        str(metrics["episodes"]),
        _cell(metrics, "success_rate"),
        _cell(metrics, "score"),
        _cell(metrics, "episode_length", 1),
        _cell(metrics, "invalid_rate"),
        _cell(metrics, "malformed_rate"),
        str(metrics["errors"]),
    ]
    return "| " + " | ".join(cells) + " |"


def markdown(name: str, summary: dict[str, Any]) -> str:
    """The report as Markdown tables: the whole run, then one row per task type (95% intervals in brackets)."""
    columns = "| episodes | success | score | steps | invalid | malformed | errors |"
    rule = "|---|---|---|---|---|---|---|---|"
    lines = [f"| policy {columns}", rule, _row(name, summary)]
    if "by_task_type" in summary:
        lines += ["", f"| task type {columns}", rule]
        lines += [_row(k, v) for k, v in summary["by_task_type"].items()]
    lines += [
        "",
        "success: episodes won; steps: agent steps per episode; invalid: share of steps the env did not "
        "understand; malformed: share of responses that did not parse; errors: episodes the backend could not "
        "finish (left out of the other columns). 95% intervals in brackets.",
    ]
    return "\n".join(lines) + "\n"
