from __future__ import annotations

import json

from gaca_train.experiments import study

# The study runs in this process (its runs in a spawned worker, as from the command line): these tests are about
# what it writes, and a process of its own would only import TRL once more.


def test_smoke_study_writes_curves_table_and_plot(tmp_path, capsys):
    out = tmp_path / "study"
    study.main(["--out", str(out), "--smoke", "--workers", "1"])
    assert "| GACA | 2 |" in capsys.readouterr().out
    data = json.loads((out / "results.json").read_text())
    labels = {r["label"] for r in data["results"] if r["study"] == "main"}
    assert labels == {"GRPO", "GiGPO", "GACA", "NLL reweight"}
    assert all(len(r["curves"]["eval_success"]) == 3 for r in data["results"])  # evaluations at 0, 2, 4
    summary = (out / "summary.md").read_text()
    assert "| GACA | 2 |" in summary and "lambda0=0.5, eta=0.5" in summary
    assert "| GACA − GiGPO | 2 |" in summary  # paired by seed
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _alfworld_smoke(out, *extra):
    study.main(["--setup", "alfworld", "--out", str(out), "--smoke", "--workers", "1", *extra])
    return json.loads((out / "results.json").read_text())


def test_alfworld_smoke_study_trains_every_estimator_from_one_warm_start(tmp_path):
    out = tmp_path / "study"
    data = _alfworld_smoke(out, "--sweep-eta", "1.0")
    runs = data["results"]
    labels = ("GRPO", "GiGPO", "GACA", "NLL reweight", "lambda0=0.5, eta=1.0")
    assert sorted((r["label"], r["fields"]["seed"]) for r in runs) == sorted(
        (label, seed) for label in labels for seed in (0, 1)
    )
    assert {r["fields"]["estimator"] for r in runs} == {"grpo", "gigpo", "gaca", "reweight"}
    sweep = [r for r in runs if r["study"] == "sweep"]
    assert all(r["fields"]["eta"] == 1.0 and r["fields"]["lambda0"] == 0.5 for r in sweep)
    assert len({r["warm"] for r in runs}) == 1  # one shared initialisation
    for r in runs:
        curves = r["curves"]
        assert curves["episodes"] == [0, 4, 8]  # warm start, then after iterations 1 and 2 (2 tasks x 2 rollouts)
        assert len(curves["eval_success"]) == 3 and all(0.0 <= x <= 1.0 for x in curves["eval_success"])
        assert len(curves["rollout_success"]) == 2
    summary = (out / "summary.md").read_text()
    assert "| GiGPO | 2 |" in summary and "held-out" in summary
    assert "| run | first 1 | last 1 | all |" in summary  # rollout success on the training games
    assert "| lambda0=0.5, eta=1.0 | 2 |" in summary and "| lambda0=0.5, eta=1.0 − GiGPO | 2 |" in summary
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not data["meta"]["warm_reused"] and data["meta"]["reused_runs"] == 0

    # A rerun reuses the warm start and every finished run; a changed run setting is run again.
    (out / "runs" / "grpo-1" / "result.json").write_text(
        (out / "runs" / "grpo-1" / "result.json").read_text().replace('"eval_every": 1', '"eval_every": 7')
    )
    again = _alfworld_smoke(out)  # no sweep grid this time: the sweep runs are left out
    assert again["meta"]["warm_reused"] and again["meta"]["reused_runs"] == 7
    assert len(again["results"]) == 8
    first = {(r["label"], r["fields"]["seed"]): r["curves"] for r in runs}
    rerun = [("GRPO", 1)]
    assert all(first[r["label"], r["fields"]["seed"]] == r["curves"] for r in again["results"]
               if (r["label"], r["fields"]["seed"]) not in rerun)  # fmt: skip
    summary = (out / "summary.md").read_text()
    assert "7 of them finished by an earlier invocation" in summary
    (out / "summary.md").unlink()
    study.main(["--out", str(out), "--report-only"])
    assert (out / "summary.md").read_text() == summary  # rebuilt from results.json alone
