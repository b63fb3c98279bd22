"""Benchmark: vectorised estimators vs the loop reference on an ALFWorld-sized batch.

The batch is 128 groups x 8 trajectories x 50 steps (51,200 rows) of
:func:`gaca_train.experiments.synthetic.synthetic_batch`, whose anchors repeat as in real rollouts.

Usage:
    python scripts/bench_advantages.py [--groups 128 --trajs 8 --steps 50 --repeats 30 --threads 1]

Prints a Markdown table of median times; the figures in docs/BENCHMARKS.md come from it. The
tree rows time the estimators over groups that are trees of branching rollouts (METHOD.md section
7) on a batch of about the same number of rows: in each group half the trajectories are roots and
each other one continues a root from its middle step (so the groups are scaled up by 4/3).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

from gaca_train.estimators.advantages import compute_advantages
from gaca_train.estimators.options import ESTIMATORS
from gaca_train.estimators.reference import reference_advantages
from gaca_train.estimators.rows import StepRows
from gaca_train.experiments.synthetic import synthetic_batch


def branched_batch(groups: int, trajs: int, steps: int) -> tuple[StepRows, torch.Tensor]:
    """A synthetic batch whose groups are trees: trajectory i >= trajs/2 continues i - trajs/2 from step steps/2."""
    rows = synthetic_batch(groups, trajs, steps)
    local = rows.traj % trajs
    roots = trajs // 2
    is_continuation = local >= roots
    branch = steps // 2
    keep = ~is_continuation | (rows.step >= branch)
    parent = torch.where(is_continuation, rows.traj - roots, -1)
    anchor = rows.anchor.clone()
    # A continuation's first state is its parent's state at the branch step.
    first = is_continuation & (rows.step == branch)
    anchor[first] = rows.anchor[first.nonzero().squeeze(1) - roots * steps]
    cols = {name: getattr(rows, name)[keep] for name in ("group", "traj", "step", "reward", "nll", "valid")}
    return StepRows(anchor=anchor[keep], **cols), parent[keep]


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=128, help="task groups of the batch (default: %(default)s)")
    parser.add_argument("--trajs", type=int, default=8, help="rollouts per group (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=50, help="steps per rollout (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=30, help="timed calls of each vectorised estimator")
    parser.add_argument("--reference-repeats", type=int, default=3, help="timed calls of the loop reference")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1 = one core)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    build = time.perf_counter()
    rows = synthetic_batch(args.groups, args.trajs, args.steps)
    build = time.perf_counter() - build
    raw = {name: getattr(rows, name) for name in ("group", "traj", "step", "anchor", "reward", "nll", "valid")}
    validate = median_seconds(lambda: StepRows(**raw), args.repeats)

    results = {}
    for estimator in ESTIMATORS:
        results[estimator] = median_seconds(lambda e=estimator: compute_advantages(rows, e), args.repeats)
    with_metrics = median_seconds(lambda: compute_advantages(rows, "gaca").metrics, args.repeats)
    reference = median_seconds(lambda: reference_advantages(rows, "gaca"), args.reference_repeats)
    tree_rows, parent = branched_batch(args.groups * 4 // 3, args.trajs, args.steps)
    tree = {e: median_seconds(lambda e=e: compute_advantages(tree_rows, e, parent=parent), args.repeats)
            for e in ESTIMATORS}  # fmt: skip

    out = compute_advantages(rows, "gaca")
    print(f"# Advantage estimators: {len(rows):,} rows ({args.groups} groups x {args.trajs} x {args.steps} steps)")
    print(f"torch {torch.__version__}, {args.threads} thread(s), {platform.processor() or platform.machine()}")
    print(f"rows with step signal: {out.metrics['advantage/step_signal_share']:.1%}, "
          f"mean anchor-group size {out.metrics['anchor/group_size_mean']:.2f}")  # fmt: skip
    print()
    print("| what | median ms |")
    print("|---|---|")
    for estimator, seconds in results.items():
        print(f"| `compute_advantages(rows, {estimator!r})` | {seconds * 1e3:.2f} |")
    print(f"| GACA + `.metrics` | {with_metrics * 1e3:.2f} |")
    print(f"| `StepRows(...)` validation | {validate * 1e3:.2f} |")
    print(f"| loop reference, GACA | {reference * 1e3:.0f} |")
    for estimator, seconds in tree.items():
        print(f"| tree ({len(tree_rows):,} rows, half continuations): {estimator!r} | {seconds * 1e3:.2f} |")
    print()
    print(f"speed-up of vectorised GACA over the reference: {reference / results['gaca']:.0f}x")
    print(f"(batch built in {build:.2f} s)")
    if args.json:
        with open(args.json, "w") as f:
            figures = {f"{e}_ms": s * 1e3 for e, s in results.items()}
            figures.update(reference_ms=reference * 1e3, validate_ms=validate * 1e3, rows=len(rows))
            figures.update({f"tree_{e}_ms": s * 1e3 for e, s in tree.items()}, tree_rows=len(tree_rows))
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
