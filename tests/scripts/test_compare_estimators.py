from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_smoke_study_writes_curves_table_and_plot(tmp_path):
    out = tmp_path / "study"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "compare_estimators.py"),
            "--out",
            str(out),
            "--smoke",
            "--workers",
            "1",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    data = json.loads((out / "results.json").read_text())
    labels = {r["label"] for r in data["results"] if r["study"] == "main"}
    assert labels == {"GRPO", "GiGPO", "GACA", "NLL reweight"}
    assert all(len(r["curves"]["eval_success"]) == 3 for r in data["results"])  # evaluations at 0, 2, 4
    summary = (out / "summary.md").read_text()
    assert "| GACA | 2 |" in summary and "lambda0=0.5, eta=0.5" in summary
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
