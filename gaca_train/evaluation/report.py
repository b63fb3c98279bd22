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

With ``--rollouts-per-task`` > 1 the episodes of one task are not independent evidence: the task is the
unit. Every interval is then clustered by task (success and the step rates: Wilson with the
design effect of episodes clustered in tasks; score and length: the ratio estimator's cluster
variance, t with tasks - 1 degrees of freedom), and the report adds pass@k (the unbiased
estimator of Chen et al. 2021, the chance that at least one of k episodes of a task is won) and
mean@k (the mean over tasks of the task's success rate over its k episodes), each with a t
interval over tasks. :func:`compare` gives the paired difference of two runs on their shared tasks.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
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


def clustered_mean_interval(sums: Sequence[float], sizes: Sequence[int], low: float = -math.inf,
                            high: float = math.inf) -> Interval:  # fmt: skip
    """95% interval of the mean ``sum(sums) / sum(sizes)`` of values gathered in clusters (tasks) of ``sizes``.

    The ratio estimator's variance over clusters, t with clusters - 1 degrees of freedom, clipped to
    [``low``, ``high``]; None with fewer than two clusters. With clusters of one value it is the t
    interval of the mean.
    """
    m, total = len(sizes), sum(sizes)
    if m < 2 or total == 0:
        return None
    mean = sum(sums) / total
    var = sum((y - mean * n) ** 2 for y, n in zip(sums, sizes, strict=True)) / (m - 1) / m / (total / m) ** 2
    half = t975(m - 1) * math.sqrt(var)
    return (max(low, mean - half), min(high, mean + half))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` of ``n`` episodes (``c`` won) drawn without replacement is won."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _by_task(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records grouped by task id (a record without one is a task of its own)."""
    tasks: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for i, r in enumerate(records):
        tasks[str(r["task_id"]) if r.get("task_id") is not None else f"#{i}"].append(r)
    return tasks


def _at_k(tasks: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """pass@k for k = 1, 2, 4, ... up to the fewest episodes of a task (and that number), and mean@k."""
    n_min = min(len(v) for v in tasks.values())
    ks = sorted({2**i for i in range(n_min.bit_length()) if 2**i <= n_min} | {n_min})
    out: dict[str, Any] = {}
    for k in ks:
        values = [pass_at_k(len(v), sum(bool(r["won"]) for r in v), k) for v in tasks.values()]
        out[f"pass@{k}"] = {"value": sum(values) / len(values), "ci95": mean_interval(values, 0.0, 1.0)}
    rates = [sum(bool(r["won"]) for r in v) / len(v) for v in tasks.values()]
    out[f"mean@{n_min}"] = {"value": sum(rates) / len(rates), "ci95": mean_interval(rates, 0.0, 1.0)}
    return out


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
    tasks = _by_task(played)
    repeated = any(len(v) > 1 for v in tasks.values())
    ci95: dict[str, Interval]
    if repeated:  # the task is the unit: every figure clustered by task
        groups = list(tasks.values())
        sizes = [len(v) for v in groups]
        task_steps = [sum(r["length"] for r in v) for v in groups]

        def total(key: str, v: list[dict[str, Any]]) -> float:
            return sum(float(r.get(key, 0)) for r in v)

        ci95 = {
            "success_rate": clustered_rate_interval([sum(bool(r["won"]) for r in v) for v in groups], sizes),
            "score": clustered_mean_interval([total("score", v) for v in groups], sizes, 0.0, 1.0),
            "episode_length": clustered_mean_interval(task_steps, sizes, 0.0, max_length or math.inf),
            "invalid_rate": clustered_rate_interval([int(total("invalid", v)) for v in groups], task_steps),
            "malformed_rate": clustered_rate_interval([int(total("malformed", v)) for v in groups], task_steps),
        }
    else:
        ci95 = {
            "success_rate": wilson(wins, n),
            "score": mean_interval(scores, 0.0, 1.0),
            "episode_length": mean_interval([float(x) for x in lengths], 0.0, max_length or math.inf),
            "invalid_rate": clustered_rate_interval(invalid, lengths),
            "malformed_rate": clustered_rate_interval(malformed, lengths),
        }
    metrics = {
        "episodes": n,
        "tasks": len(tasks),
        "errors": sum(1 for r in records if r.get("error") and not r.get("interrupted")),
        "interrupted": sum(1 for r in records if r.get("interrupted")),
        "success_rate": wins / max(n, 1),
        "score": sum(scores) / max(n, 1),
        "episode_length": sum(lengths) / max(n, 1),
        "invalid_rate": sum(invalid) / steps,
        "malformed_rate": sum(malformed) / steps,
        "ci95": ci95,
    }
    if repeated:
        metrics["at_k"] = _at_k(tasks)
    timed = [r for r in records if "requests" in r]
    if timed:
        requests = sum(r["requests"] for r in timed)
        metrics["requests"] = requests
        for key in ("prompt_tokens", "completion_tokens"):
            metrics[key] = sum((r.get("usage") or {}).get(key, 0) for r in timed)
        seconds = sum(r["latency_s"] for r in timed)
        metrics["latency_s_per_request"] = seconds / max(requests, 1)
        # Completion tokens per second of request time (summed over requests, so not wall-clock with concurrency).
        metrics["completion_tokens_per_s"] = metrics["completion_tokens"] / seconds if seconds > 0 else 0.0
    return metrics


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


def _fmt(value: float, interval: Interval, digits: int = 3) -> str:
    text = f"{value:.{digits}f}"
    return text if interval is None else f"{text} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def markdown(name: str, summary: dict[str, Any]) -> str:
    """The report as Markdown tables: the whole run, then one row per task type (95% intervals in brackets)."""
    columns = "| episodes | success | score | steps | invalid | malformed | errors |"
    rule = "|---|---|---|---|---|---|---|---|"
    lines = [f"| policy {columns}", rule, _row(name, summary)]
    if "by_task_type" in summary:
        lines += ["", f"| task type {columns}", rule]
        lines += [_row(k, v) for k, v in summary["by_task_type"].items()]
    if "at_k" in summary:
        at_k = summary["at_k"]
        lines += ["", "| " + " | ".join(at_k) + " |", "|" + "---|" * len(at_k)]
        lines += ["| " + " | ".join(_fmt(v["value"], v["ci95"]) for v in at_k.values()) + " |"]
    clustered = " clustered by task (" + str(summary.get("tasks")) + " tasks)" if "at_k" in summary else ""
    lines += [
        "",
        "success: episodes won; steps: agent steps per episode; invalid: share of steps the env did not "
        "understand; malformed: share of responses that did not parse; errors: episodes the backend could not "
        f"finish (left out of the other columns). 95% intervals in brackets{clustered}.",
    ]
    if "at_k" in summary:
        lines += ["pass@k: chance that one of k episodes of a task is won; mean@k: mean over tasks of the success "
                  "rate of its k episodes; t intervals over tasks."]  # fmt: skip
    if "requests" in summary:
        lines += [f"requests: {summary['requests']}, tokens: {summary['prompt_tokens']} prompt + "
                  f"{summary['completion_tokens']} completion, {summary['latency_s_per_request']:.3f} s per "
                  f"request, {summary.get('completion_tokens_per_s', 0.0):.1f} completion tokens per "
                  "request-second."]  # fmt: skip
    return "\n".join(lines) + "\n"


def load_run(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run's description and episode records from its ``.json`` report, its ``.jsonl`` log or their prefix.

    Raises:
        ValueError: when no such file exists or it is not an evaluation's output.
    """
    path = Path(path)
    candidates = (
        [path] if path.suffix in (".json", ".jsonl") else [path.with_suffix(".json"), path.with_suffix(".jsonl")]
    )
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise ValueError(f"--compare {path}: no such run (looked for {', '.join(map(str, candidates))})")
    try:
        if found.suffix == ".json":
            report = json.loads(found.read_text())
            return report["settings"], list(report["episodes"])
        lines = found.read_text().splitlines()
        records: dict[tuple[Any, Any], dict[str, Any]] = {}
        for line in lines[1:]:
            if line.strip():
                r = json.loads(line)
                records[(r["task_id"], r["repeat"])] = r
        return json.loads(lines[0])["run"], list(records.values())
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise ValueError(f"--compare {found} is not an evaluation's .json report or .jsonl log ({e})") from e


def compare(records_a: Sequence[dict[str, Any]], records_b: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The paired difference A - B of success rate and score on the tasks both runs finished.

    Per shared task, each run's mean over its finished episodes (repeats averaged); the
    difference's interval is t over tasks (tasks - 1 degrees of freedom), clipped to [-1, 1].

    Returns:
        ``tasks`` (shared), ``only_a`` and ``only_b`` (tasks one run lacks), and for ``success_rate``
        and ``score``: ``a``, ``b``, ``diff`` and ``ci95`` (of ``diff``; None with fewer than two tasks).
    """
    tasks_a = _by_task([r for r in records_a if not r.get("error")])
    tasks_b = _by_task([r for r in records_b if not r.get("error")])
    shared = sorted(set(tasks_a) & set(tasks_b))
    out: dict[str, Any] = {"tasks": len(shared), "only_a": len(set(tasks_a) - set(tasks_b)),
                           "only_b": len(set(tasks_b) - set(tasks_a))}  # fmt: skip
    for key, value in (("success_rate", lambda r: float(bool(r["won"]))), ("score", lambda r: float(r["score"]))):
        a = [sum(map(value, tasks_a[t])) / len(tasks_a[t]) for t in shared]
        b = [sum(map(value, tasks_b[t])) / len(tasks_b[t]) for t in shared]
        diffs = [x - y for x, y in zip(a, b, strict=True)]
        n = max(len(shared), 1)
        out[key] = {"a": sum(a) / n, "b": sum(b) / n, "diff": sum(diffs) / n, "ci95": mean_interval(diffs, -1.0, 1.0)}
    return out


def compare_markdown(name_a: str, name_b: str, result: dict[str, Any]) -> str:
    """The paired comparison as a Markdown table."""
    lines = [f"| figure | A: {name_a} | B: {name_b} | A - B [95%] |", "|---|---|---|---|"]
    for key in ("success_rate", "score"):
        r = result[key]
        lines.append(f"| {key.replace('_rate', '')} | {r['a']:.3f} | {r['b']:.3f} | {_fmt(r['diff'], r['ci95'])} |")
    lines += ["", f"Paired over the {result['tasks']} tasks both runs finished (repeats averaged per task; t "
              f"interval over tasks); {result['only_a']} tasks only in A, {result['only_b']} only in B."]  # fmt: skip
    return "\n".join(lines) + "\n"
