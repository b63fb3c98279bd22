"""scripts/oracle_study.py in its smoke size: every study runs, reports and re-reports from results.json."""

from __future__ import annotations

import json

import pytest

from gaca_train.experiments.oracle_study import ALIGNMENT_SETTINGS, main, study_jobs
from gaca_train.experiments.oracle_study import make_parser as parser

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("study", "runs", "heading", "png"),
    [
        ("estimators", 4, "Monte-Carlo A* against exact A*", "oracle_estimators.png"),
        ("alignment", 6, "| forks-uncertain |", "oracle_alignment.png"),
        ("branching", 12, "Oracle error at branch points", "oracle_branching.png"),
    ],
)
def test_each_study_runs_and_reports(tmp_path, study, runs, heading, png):
    out = tmp_path / study
    summary = main(["--study", study, "--out", str(out), "--smoke", "--seeds", "0", "--workers", "1"])
    data = json.loads((out / "results.json").read_text())
    assert len(data["results"]) == runs
    assert heading in summary and (out / png).stat().st_size > 0
    assert all(r["curves"].get("oracle") for r in data["results"] if r["config"]["oracle_every"])
    again = main(["--study", study, "--out", str(out), "--report-only"])
    assert again == summary == (out / "summary.md").read_text()


def test_the_jobs_hold_equal_what_the_studies_compare():
    args = parser().parse_args(["--study", "branching", "--out", "x"])
    args.seeds = [0, 1]
    jobs = study_jobs(args)
    assert len(jobs) == 2 * 2 * 2 * 3  # seeds x estimators x (independent, branching) x learning rates
    assert sorted({j["config"]["lr"] for j in jobs}) == pytest.approx([0.05 * s for s in (0.77, 1.0, 1.3)])
    assert all(j["config"]["oracle_every"] == (10 if j["lr_scale"] == 1.0 else 0) for j in jobs)
    args.study = "alignment"
    kwargs = {json.dumps(j["config"]["env_kwargs"], sort_keys=True) for j in study_jobs(args)}
    assert len(kwargs) == len(ALIGNMENT_SETTINGS) == 3
