from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quickstart_smoke_writes_curve_and_before_after_summary(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import quickstart_cpu
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    summary = quickstart_cpu.main(
        ["--out", str(tmp_path), "--sft-steps", "2", "--iterations", "1", "--eval-episodes", "1"]
    )
    assert summary["iterations"] == 1 and summary["estimator"] == "gaca"
    for key in ("before", "after"):
        assert summary[key]["episodes"] == 8 and 0.0 <= summary[key]["success_rate"] <= 1.0
    assert (tmp_path / "learning_curve.png").stat().st_size > 1000
    assert json.loads((tmp_path / "summary.json").read_text())["after"] == summary["after"]
    assert (tmp_path / "after_rl" / "model.safetensors").exists()
