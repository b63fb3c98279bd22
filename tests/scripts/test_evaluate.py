from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gaca_train.tiny import save_tiny_model
from tests.gaca_train.tiny_setup import ENV_KWARGS, tiny_model_and_tokenizer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def evaluate():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import evaluate
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return evaluate


def test_expert_baseline_solves_everything_and_random_rarely(tmp_path, evaluate):
    common = [
        "--env-kwargs",
        json.dumps({"horizon": 5, "num_branches": 2}),
        "--num-episodes",
        "30",
        "--max-steps",
        "10",
    ]
    expert = evaluate.main([*common, "--policy", "expert", "--out", str(tmp_path / "expert")])
    random = evaluate.main([*common, "--policy", "random", "--out", str(tmp_path / "random")])
    assert expert["summary"]["success_rate"] == 1.0 and expert["summary"]["episode_length"] == 5.0
    assert random["summary"]["success_rate"] < 0.5
    saved = json.loads((tmp_path / "expert.json").read_text())
    assert saved["summary"]["episodes"] == 30 and len(saved["episodes"]) == 30
    table = (tmp_path / "random.md").read_text()
    assert table.startswith("| policy | episodes | success |") and "| random | 30 |" in table


def test_model_policy_plays_in_batches(tmp_path, evaluate):
    model, tokenizer = tiny_model_and_tokenizer()
    path = save_tiny_model(model, tokenizer, tmp_path / "tiny")
    report = evaluate.main(
        ["--model", str(path), "--env-kwargs", json.dumps(ENV_KWARGS), "--split", "train", "--num-episodes", "2",
         "--batch-size", "1", "--max-steps", "3", "--max-new-tokens", "4", "--greedy", "--out", str(tmp_path / "m")]
    )  # fmt: skip
    assert [e["task_id"] for e in report["episodes"]] == ["train-0", "train-1"]
    assert all(e["length"] == 3 and e["malformed"] == 3 for e in report["episodes"])  # untrained: never in format
    assert report["summary"]["success_rate"] == 0.0


def test_summary_reports_success_per_task_type(evaluate):
    records = [
        {"won": True, "score": 1.0, "length": 3, "invalid": 0, "task_type": "heat"},
        {"won": False, "score": 0.0, "length": 5, "invalid": 1, "task_type": "heat"},
        {"won": True, "score": 1.0, "length": 2, "invalid": 0, "task_type": "cool"},
    ]
    summary = evaluate.summarise(records)
    assert summary["success_by_task_type"] == {"cool": 1.0, "heat": 0.5}
    assert summary["invalid_rate"] == 0.1 and summary["episode_length"] == 10 / 3
    assert "| heat | 0.500 |" in evaluate.markdown("x", summary)


@pytest.mark.slow
def test_expert_and_random_on_generated_alfworld_games_report_task_types(tmp_path, evaluate):
    pytest.importorskip("textworld", reason="needs the alfworld extra (make test installs it)")
    from gaca_envs.alfworld.generate import generate

    data = tmp_path / "alfworld"
    generate(data, 2, seed=6, split="train")
    common = ["--env", "GACA-ALFWorld-v0", "--env-kwargs", json.dumps({"data_path": str(data)}), "--split", "train",
              "--num-episodes", "2", "--max-steps", "50"]  # fmt: skip
    expert = evaluate.main([*common, "--policy", "expert", "--out", str(tmp_path / "expert")])
    assert expert["summary"]["success_rate"] == 1.0
    assert sum(expert["summary"]["success_by_task_type"].values()) == 2.0  # two games of two task types
    assert "| task type | success |" in (tmp_path / "expert.md").read_text()
