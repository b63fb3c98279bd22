"""The estimator study's pure parts: options, jobs and the statistics of its report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from gaca_train.experiments.study import ESTIMATOR_RUNS, parse_args, tabular_jobs
from gaca_train.experiments.study_report import mean_ci, paired_rows

ROOT = Path(__file__).resolve().parents[3]


def _result(label: str, seed: int, success: list[float]) -> dict:
    return {"study": "main", "label": label, "config": {"seed": seed}, "curves": {"eval_success": success}}


def test_paired_rows_difference_runs_with_the_same_seed():
    results = [
        _result("GRPO", 0, [0.1, 0.2]),
        _result("GRPO", 1, [0.1, 0.5]),
        _result("GiGPO", 1, [0.1, 0.8]),  # order in the list must not matter, only the seed
        _result("GiGPO", 0, [0.1, 0.3]),
        _result("GACA", 0, [0.1, 0.1]),  # seed 1 missing: one pair only
    ]
    rows = paired_rows(results)
    # GiGPO - GRPO final: +0.1 (seed 0), +0.3 (seed 1) -> mean +0.2, t(1) = 12.706, sd 0.1414 / sqrt 2
    assert rows[0] == "| GiGPO − GRPO | 2 | +0.200 ± 1.271 | 2/2 | +0.100 ± 0.635 |"
    assert rows[1] == "| GACA − GRPO | 1 | -0.100 ± 0.000 | 0/1 | -0.050 ± 0.000 |"
    assert rows[-1].startswith("| GACA − GiGPO | 1 | -0.200 ")
    assert not any(r.startswith("| NLL reweight") for r in rows)  # no runs, no row


def test_mean_ci_per_evaluation_point():
    # Two seeds: point 0 (0, 1) -> mean 0.5, sd sqrt(0.5), half 12.706 * sqrt(0.5) / sqrt(2) = 6.353; point 1 equal.
    mean, half = mean_ci(np.array([[0.0, 0.5], [1.0, 0.5]]))
    assert mean.tolist() == [0.5, 0.5] and half == pytest.approx([6.353, 0.0])
    mean, half = mean_ci(np.array([[0.25, 0.75]]))  # one seed: no interval
    assert mean.tolist() == [0.25, 0.75] and half.tolist() == [0.0, 0.0]


def test_smoke_options_and_one_tabular_job_per_estimator_sweep_point_and_seed():
    args = parse_args(["--smoke", "--workers", "1"])
    assert (args.seeds, args.iterations, args.eval_every) == (2, 4, 2)
    assert (args.sweep_lambda0, args.sweep_eta) == ([0.5], [0.5])
    jobs = tabular_jobs(args)
    assert len(jobs) == 2 * (len(ESTIMATOR_RUNS) + 1)
    assert {j["label"] for j in jobs if j["study"] == "sweep"} == {"lambda0=0.5, eta=0.5"}
    assert sorted({j["config"]["seed"] for j in jobs}) == [0, 1]
    # ALFWorld: the sweep is opt-in, and a grid on one axis puts the other at METHOD.md's default.
    assert parse_args(["--setup", "alfworld"]).sweep_eta == []
    alfworld = parse_args(["--setup", "alfworld", "--sweep-eta", "1.0"])
    assert (alfworld.sweep_lambda0, alfworld.sweep_eta) == ([0.5], [1.0])
    # The ALFWorld study runs the quickstart's own iterations (its YAML's max_steps), as make demo does.
    qs = yaml.safe_load((ROOT / "configs" / "quickstart_cpu_alfworld.yaml").read_text())
    assert (
        alfworld.iterations == qs["max_steps"]
        and parse_args(["--setup", "alfworld", "--iterations", "5"]).iterations == 5
    )


def test_branching_study_pairs_each_estimator_with_its_branching_run_and_reports_coverage(tmp_path):
    from gaca_train.experiments.study import branching_jobs, main

    args = parse_args(["--smoke", "--branching", "nll", "uniform", "--out", str(tmp_path), "--workers", "1"])
    jobs = branching_jobs(args)
    labels = [j["label"] for j in jobs if j["config"]["seed"] == 0]
    assert labels == ["GRPO", "GRPO + branching", "GiGPO", "GiGPO + branching", "GACA", "GACA + branching",
                      "GiGPO + branching (uniform)", "GACA + branching (uniform)"]  # fmt: skip
    assert {j["config"]["branching"] for j in jobs} == {"off", "nll", "uniform"}
    assert parse_args(["--branching"]).branching == ["nll", "entropy", "uniform"]
    summary = main(["--smoke", "--branching", "nll", "uniform", "--out", str(tmp_path), "--workers", "1"])
    assert "| GiGPO + branching − GiGPO | 2 |" in summary
    assert "| GACA + branching (uniform) − GACA + branching | 2 |" in summary
    assert "env steps / GiGPO's" in summary and "branch points |" in summary
    # Every branching run's rows at branch points have a partner (the parent's row and its continuations).
    coverage = [line for line in summary.splitlines() if line.startswith("| GiGPO + branching |")][-1]
    assert coverage.split(" | ")[-1].startswith("1.00 / ")
    independent = [line for line in summary.splitlines() if line.startswith("| GiGPO |")][-1]
    assert independent.endswith("| - |")  # no branch points without branching
    assert (tmp_path / "curves.png").exists() and (tmp_path / "summary.md").read_text() == summary


def test_coverage_setup_measures_partnered_rows_by_step_on_both_room_kinds(tmp_path):
    from gaca_train.experiments.study import main

    args = ["--setup", "coverage", "--out", str(tmp_path), "--coverage-games", "1", "--coverage-rollouts", "3"]
    summary = main(args)
    rows = [line for line in summary.splitlines() if line.startswith("| easy") or line.startswith("| real")]
    assert [r.split(" | ")[0] for r in rows] == [
        "| easy rooms, 10 steps, p_expert 0.0",
        "| easy rooms, 10 steps, p_expert 0.5",
        "| real rooms, 50 steps, p_expert 0.0",
        "| real rooms, 50 steps, p_expert 0.5",
    ]
    # Every rollout of a game starts in the same state: step 0 always has partners, in a group of the 3 rollouts
    # (or more, when a rollout comes back to its start).
    assert all(float(r.split(" | ")[1].split(" / ")[0]) == 1.0 for r in rows)
    assert all(float(r.split(" | ")[1].split(" / ")[1]) >= 3.0 for r in rows)
    assert rows[2].count(" - ") < rows[0].count(" - ")  # the 50-step horizon reaches the later step bands
