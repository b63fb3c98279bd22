"""The estimator study's pure parts: options, jobs and the statistics of its report."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from gaca_train.experiments import study
from gaca_train.experiments.study import ALFWORLD_ITERATIONS, ESTIMATOR_RUNS, parse_args, tabular_jobs
from gaca_train.experiments.study_report import alfworld_report, mean_ci, paired_rows

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
    assert (args.seeds, args.iterations, args.eval_every) == ([0, 1], 4, 2)
    assert (args.sweep_lambda0, args.sweep_eta) == ([0.5], [0.5])
    jobs = tabular_jobs(args)
    assert len(jobs) == 2 * (len(ESTIMATOR_RUNS) + 1)
    assert {j["label"] for j in jobs if j["study"] == "sweep"} == {"lambda0=0.5, eta=0.5"}
    assert sorted({j["config"]["seed"] for j in jobs}) == [0, 1]
    # ALFWorld: the sweep is opt-in, and a grid on one axis puts the other at METHOD.md's default.
    assert parse_args(["--setup", "alfworld"]).sweep_eta == []
    alfworld = parse_args(["--setup", "alfworld", "--sweep-eta", "1.0"])
    assert (alfworld.sweep_lambda0, alfworld.sweep_eta) == ([0.5], [1.0])
    # The ALFWorld study trains the quickstart's YAML for 72 iterations, longer than make demo's.
    qs = yaml.safe_load((ROOT / "configs" / "quickstart_cpu_alfworld.yaml").read_text())
    assert alfworld.iterations == ALFWORLD_ITERATIONS == 72 and qs["max_steps"] < alfworld.iterations
    assert parse_args(["--setup", "alfworld", "--iterations", "5"]).iterations == 5


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
        f"| {setting}, p_expert {p}{kind}"
        for setting in ("easy rooms, 10 steps", "real rooms, 50 steps")
        for p in ("0.0", "0.5")
        for kind in ("", ", branching")
    ]
    # Every rollout of a game starts in the same state: step 0 always has partners, in a group of the 3 rollouts
    # (or more, when a rollout comes back to its start); a branching group's roots share it too.
    independent = [r for r in rows if "branching" not in r]
    assert all(float(r.split(" | ")[1].split(" / ")[0]) == 1.0 for r in rows)
    assert all(float(r.split(" | ")[1].split(" / ")[1]) >= 3.0 for r in independent)
    assert independent[2].count(" - ") < independent[0].count(" - ")  # the 50-step horizon reaches later bands
    # At a branch point the continuation and its parent stand in the same state: every such row has a partner.
    for r in rows:
        at_branch = r.rstrip(" |").split(" | ")[-1]
        assert (at_branch == "-") if "branching" not in r else float(at_branch.split(" / ")[0]) == 1.0


def test_seeds_are_a_range_a_list_or_one_seed_and_the_jobs_use_those_seeds():
    assert parse_args([]).seeds == [0, 1, 2, 3, 4]  # the default, 0-4: the seeds of the earlier default count 5
    assert parse_args(["--seeds", "2-4"]).seeds == [2, 3, 4]
    args = parse_args(["--seeds", "2,7", "--workers", "1"])
    assert args.seeds == [2, 7]
    assert sorted({j["config"]["seed"] for j in tabular_jobs(args)}) == [2, 7]
    branching = parse_args(["--seeds", "4-5", "--branching", "nll", "--workers", "1"])
    assert sorted({j["config"]["seed"] for j in study.branching_jobs(branching)}) == [4, 5]


def test_a_bare_seed_count_still_means_0_to_n_minus_1_with_a_warning():
    message = r"--seeds 3 \(a count\) is deprecated .*; use --seeds 0-2 \(the same seeds\)"
    with pytest.warns(FutureWarning, match=message):
        assert parse_args(["--seeds", "3"]).seeds == [0, 1, 2]
    assert parse_args(["--seeds", "0"]).seeds == [0]  # 0 seeds was never a study: it is the seed 0


@pytest.mark.parametrize("text", ["0-", "a,b", "4-1", "-2", ""])
def test_bad_seeds_exit_with_the_accepted_forms(text, capsys):
    with pytest.raises(SystemExit) as e:
        parse_args(["--seeds", text])
    assert e.value.code == 2
    assert "--seeds" in capsys.readouterr().err


def test_eval_rollouts_per_task_and_its_deprecated_spelling():
    assert parse_args(["--setup", "alfworld", "--eval-rollouts-per-task", "3"]).eval_rollouts_per_task == 3
    with pytest.warns(FutureWarning, match="--eval-episodes is deprecated .*; use --eval-rollouts-per-task"):
        assert parse_args(["--setup", "alfworld", "--eval-episodes", "4"]).eval_rollouts_per_task == 4


def _alfworld_job(tmp_path: Path) -> tuple:
    from gaca_train.experiments import quickstart

    args = parse_args(["--setup", "alfworld", "--out", str(tmp_path), "--seeds", "0-1", "--workers", "1"])
    overrides = {"max_steps": args.iterations, "seed": 0}
    fields, env_kwargs = quickstart.load_config(ROOT / "configs" / "quickstart_cpu_alfworld.yaml", tmp_path, overrides)
    env_kwargs["data_path"] = str(tmp_path / "games")
    fields["env_kwargs"] = json.dumps(env_kwargs)
    return args, fields, env_kwargs


def _old_spelling(fields: dict, env_kwargs: dict) -> tuple[dict, dict]:
    """The job's settings as the previous release spelled them: env kwarg max_steps, template field {max_steps}."""
    old_kwargs = {("max_steps" if k == "max_env_steps" else k): v for k, v in env_kwargs.items()}
    template = fields["prompt_template"].replace("{max_env_steps}", "{max_steps}")
    return {**fields, "env_kwargs": json.dumps(old_kwargs), "prompt_template": template}, old_kwargs


def test_runs_saved_with_the_old_spellings_are_reused_and_other_changes_are_not(tmp_path):
    args, fields, env_kwargs = _alfworld_job(tmp_path)
    jobs = study.alfworld_jobs(args, fields, env_kwargs, before=0.1)
    assert sorted({j["fields"]["seed"] for j in jobs}) == [0, 1]
    job = jobs[0]
    assert "{max_env_steps}" in job["fields"]["prompt_template"] and "max_env_steps" in job["env_kwargs"]
    old_fields, old_kwargs = _old_spelling(job["fields"], job["env_kwargs"])
    saved = {**job, "fields": old_fields, "env_kwargs": old_kwargs, "curves": {"eval_success": [0.1]}, "seconds": 1.0}
    os.makedirs(job["out"])
    result_path = Path(job["out"]) / "result.json"
    result_path.write_text(json.dumps(saved))
    assert study.finished_result(job) == json.loads(json.dumps(saved))
    # A real difference still makes the run new: another episode cap, another evaluation size.
    capped = {**old_kwargs, "max_steps": 11}
    result_path.write_text(json.dumps({**saved, "env_kwargs": capped}))
    assert study.finished_result(job) is None
    result_path.write_text(json.dumps({**saved, "eval_episodes": 3}))
    assert study.finished_result(job) is None


def test_a_warm_start_saved_with_the_old_spellings_is_reused(tmp_path):
    args, fields, env_kwargs = _alfworld_job(tmp_path)
    old_fields, _ = _old_spelling(fields, env_kwargs)
    key = {"train_games": args.train_games, "eval_games": args.eval_games, "sft_steps": args.sft_steps}
    key["fields"] = {k: v for k, v in sorted(old_fields.items()) if k not in ("output_dir", "max_steps", "seed")}
    warm = tmp_path / "warm"
    (warm / "model").mkdir(parents=True)
    (warm / "model" / "config.json").write_text("{}")
    (warm / "warm.json").write_text(json.dumps({"key": key, "sft_pairs": 5, "before": 0.25, "seconds": 1.0}))
    # Reused: nothing is trained (qargs=None would fail if a warm start were made).
    info = study.shared_warm_start(args, fields, env_kwargs, None)
    assert info["reused"] is True and info["before"] == 0.25


def test_the_report_reads_results_written_with_the_old_option_names(tmp_path):
    args, fields, env_kwargs = _alfworld_job(tmp_path)
    job = study.alfworld_jobs(args, fields, env_kwargs, before=0.1)[0]
    curves = {"episodes": [0, 64], "eval_success": [0.1, 0.3], "rollout_success": [0.2]}
    results = [{**job, "label": label, "fields": {**job["fields"], "seed": seed}, "curves": curves, "seconds": 1.0}
               for label in ("GRPO", "GACA") for seed in (0, 1)]  # fmt: skip
    old_args = {**vars(args), "seeds": 2, "eval_episodes": 2}
    del old_args["eval_rollouts_per_task"]
    new_args = {**vars(args), "eval_rollouts_per_task": 2}
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = alfworld_report(tmp_path / "old", {"args": old_args, "results": results})
    new = alfworld_report(tmp_path / "new", {"args": new_args, "results": results})
    assert old == new and "2 seeds" in old and f"{args.eval_games * 2} sampled episodes" in old


def test_alfworld_jobs_run_the_chosen_estimators_and_branch_only_the_chosen_ones(tmp_path):
    from gaca_train.experiments.study import alfworld_jobs

    argv = ["--setup", "alfworld", "--out", str(tmp_path), "--seeds", "0-1", "--estimators", "grpo", "gigpo", "gaca"]
    args = parse_args([*argv, "--branching", "nll", "--branch-estimators", "gigpo"])
    fields = {"rollouts_per_task": 8, "tasks_per_iteration": 8, "seed": 0}
    jobs = alfworld_jobs(args, fields, {}, before=0.1)
    assert [j["label"] for j in jobs if j["fields"]["seed"] == 1] == ["GRPO", "GiGPO", "GACA", "GiGPO + branching"]
    branched = [j for j in jobs if j["label"] == "GiGPO + branching"]
    assert all(j["fields"]["branching"] == "nll" and j["fields"]["estimator"] == "gigpo" for j in branched)
    assert all("branching" not in j["fields"] for j in jobs if j["label"] != "GiGPO + branching")
    # Without --branch-estimators every chosen estimator (reweight has no branching run) also branches.
    jobs = alfworld_jobs(parse_args([*argv, "--branching", "nll"]), fields, {}, before=0.1)
    assert len({j["label"] for j in jobs}) == 6
    # reweight, which has no branching run, still runs independent beside them, into the same run folders.
    jobs = alfworld_jobs(parse_args([*argv, "reweight", "--branching", "nll"]), fields, {}, before=0.1)
    seed1 = [j for j in jobs if j["fields"]["seed"] == 1]
    assert [j["label"] for j in seed1] == [
        "GRPO", "GiGPO", "GACA", "NLL reweight", "GRPO + branching", "GiGPO + branching", "GACA + branching"
    ]  # fmt: skip
    reweight = next(j for j in seed1 if j["label"] == "NLL reweight")
    assert "branching" not in reweight["fields"] and reweight["out"].endswith("reweight-1")
