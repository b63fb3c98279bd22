"""Credit-assignment study: GRPO vs GiGPO vs GACA vs NLL reweighting, several seeds each.

Set-up "diagnostic" (this script): a tabular softmax policy (``gaca_train.tabular``; the
chosen action's -log pi plays the NLL's role) trained by on-policy policy gradient on
GACA-CriticalChain-v0, from the same initialisation (theta = 0) and with the same sample budget
for every estimator. Only the advantage differs between runs.

Outputs in --out: ``results.json`` (every curve), ``curves.png`` (greedy success vs training
episodes, mean and 95% t-interval over seeds), ``summary.md`` (final success and area under
the curve with intervals, and the GACA lambda0 x eta sweep).

Usage:
    python scripts/compare_estimators.py --out runs/compare            # full study (~10-20 min, 2 cores)
    python scripts/compare_estimators.py --out runs/smoke --smoke      # seconds, for CI
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

# Two-sided 95% Student t quantiles for df = 1..30 (larger df use 1.96).
_T95 = [
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
]

DIAGNOSTIC_ENV = {
    "horizon": 10,
    "num_branches": 3,
    "branch_width": 3,
    "num_distractors": 2,
    "noise": 0.1,
    "hint": False,
}
ESTIMATOR_RUNS = {
    "GRPO": ("grpo", {}),
    "GiGPO": ("gigpo", {}),
    "GACA": ("gaca", {}),
    "NLL reweight": ("reweight", {}),
}


def _run(job: dict) -> dict:
    import gaca_envs  # noqa: F401  (registers the env ids in the worker process)
    from gaca_train.tabular import StudyConfig, train_tabular

    start = time.perf_counter()
    curves = train_tabular(StudyConfig(**job["config"]))
    return {**job, "curves": curves, "seconds": time.perf_counter() - start}


def mean_ci(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over axis 0 and the half-width of its 95% t-interval (0 for a single seed)."""
    n = values.shape[0]
    mean = values.mean(axis=0)
    if n < 2:
        return mean, np.zeros_like(mean)
    t = _T95[n - 2] if n - 1 <= len(_T95) else 1.96
    return mean, t * values.std(axis=0, ddof=1) / math.sqrt(n)


def _jobs(args: argparse.Namespace) -> list[dict]:
    base = {
        "env_kwargs": DIAGNOSTIC_ENV,
        "task_pool": args.task_pool,
        "iterations": args.iterations,
        "tasks_per_iteration": 8,
        "rollouts_per_task": 8,
        "lr": args.lr,
        "eval_every": args.eval_every,
    }
    jobs = []
    for seed in range(args.seeds):
        for label, (estimator, options) in ESTIMATOR_RUNS.items():
            cfg = {**base, "estimator": estimator, "estimator_options": options, "seed": seed}
            jobs.append({"study": "main", "label": label, "config": cfg})
        for lambda0, eta in itertools.product(args.sweep_lambda0, args.sweep_eta):
            cfg = {**base, "estimator": "gaca", "estimator_options": {"lambda0": lambda0, "eta": eta}, "seed": seed}
            jobs.append({"study": "sweep", "label": f"lambda0={lambda0}, eta={eta}", "config": cfg})
    return jobs


def _table(results: list[dict], study: str) -> tuple[list[str], dict[str, dict[str, np.ndarray]]]:
    by_label: dict[str, list[dict]] = {}
    for r in results:
        if r["study"] == study:
            by_label.setdefault(r["label"], []).append(r)
    rows, stats = [], {}
    for label, runs in by_label.items():
        success = np.array([r["curves"]["eval_success"] for r in runs])
        final, final_ci = mean_ci(success[:, -1])
        auc, auc_ci = mean_ci(success.mean(axis=1))
        stats[label] = {"success": success, "episodes": np.array(runs[0]["curves"]["episodes"])}
        rows.append(f"| {label} | {len(runs)} | {final:.3f} ± {final_ci:.3f} | {auc:.3f} ± {auc_ci:.3f} |")
    return rows, stats


def _plot(stats: dict[str, dict[str, np.ndarray]], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for label, s in stats.items():
        mean, ci = mean_ci(s["success"])
        ax.plot(s["episodes"], mean, label=label)
        ax.fill_between(s["episodes"], mean - ci, mean + ci, alpha=0.2)
    ax.set_xlabel("training episodes")
    ax.set_ylabel("greedy success on the task pool")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/compare")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--task-pool", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--sweep-lambda0", type=float, nargs="*", default=[0.3, 0.5, 0.7])
    parser.add_argument("--sweep-eta", type=float, nargs="*", default=[0.0, 0.25, 0.5, 1.0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--smoke", action="store_true", help="2 seeds, 4 iterations, one sweep point (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.seeds, args.iterations, args.eval_every = 2, 4, 2
        args.sweep_lambda0, args.sweep_eta = [0.5], [0.5]
    os.makedirs(args.out, exist_ok=True)

    jobs = _jobs(args)
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(_run, jobs))
    wall = time.perf_counter() - start

    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"args": vars(args), "env_kwargs": DIAGNOSTIC_ENV, "results": results}, f)
    header = ["| run | seeds | final success | area under curve |", "|---|---|---|---|"]
    main_rows, main_stats = _table(results, "main")
    sweep_rows, _ = _table(results, "sweep")
    episodes = args.iterations * 8 * 8
    title = (
        f"CriticalChain (h={DIAGNOSTIC_ENV['horizon']}, {DIAGNOSTIC_ENV['num_branches']} forks), {args.seeds} seeds"
    )
    _plot(main_stats, os.path.join(args.out, "curves.png"), title)
    lines = [
        f"# Credit-assignment study: {title}",
        "",
        f"Tabular softmax policy, {args.iterations} iterations x 8 tasks x 8 rollouts = {episodes} episodes per run, "
        f"lr {args.lr}, task pool {args.task_pool}. Mean ± 95% t-interval over seeds; area under the curve is the "
        "mean greedy success over the evaluation points.",
        "",
        *header,
        *main_rows,
        "",
        "GACA sweep:",
        "",
        *header,
        *sweep_rows,
        "",
        f"{len(jobs)} runs in {wall:.0f} s with {args.workers} worker(s).",
    ]
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
