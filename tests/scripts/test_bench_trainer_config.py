"""``bench_trainer.py --config``: times a training YAML's own set-up with a local model."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from gaca_train.experiments import bench_trainer
from gaca_train.experiments.tiny import build_tiny_model, build_tokenizer, save_tiny_model

ROOT = Path(__file__).resolve().parents[2]


def _args(**overrides) -> argparse.Namespace:
    values = dict(
        iterations=1, tasks=2, rollouts=2, mini_batch_rows=None, horizon=3, max_env_steps=3, max_completion_length=4,
        hidden_size=16, num_layers=1, vector_env="sync", threads=1, branching="off", env_kwargs="{}",
        config=str(ROOT / "configs" / "quickstart_cpu.yaml"), model=None, oracle_every=0, oracle_rows=16,
        oracle_continuations=4,
    )  # fmt: skip
    values.update(overrides)
    return argparse.Namespace(**values)


@pytest.mark.slow
def test_config_run_uses_the_yaml_batches_and_reports_snapshots_when_branching(tmp_path):
    env_kwargs = {"horizon": 3, "num_branches": 1, "num_tasks": 8, "num_distractors": 1}
    tokenizer = build_tokenizer(bench_trainer._corpus(env_kwargs))
    save_tiny_model(build_tiny_model(tokenizer, hidden_size=16, num_layers=1), tokenizer, tmp_path / "model")
    parts = bench_trainer.run(_args(model=str(tmp_path / "model"), branching="nll"), micro_batch_tokens=None)
    names = ("generation", "env", "advantage", "train", "other")
    assert abs(sum(parts[n] for n in names) - parts["iteration"]) < 1e-9
    # the YAML's 4 tasks x 8 rollouts, at most its 6 steps each (not the CriticalChain bench's 2 x 2 x 3)
    assert 32 <= parts["rows_per_iteration"] <= 4 * 8 * 6
    assert parts["updates"] >= 2  # mini_batch_rows: 32 of the YAML
    assert parts["snapshots_per_iteration"] > 0 and 0 < parts["snapshot"] < parts["env"] + 1e-9


def test_config_run_without_a_local_model_folder_names_the_fix(tmp_path):
    with pytest.raises(SystemExit, match="not a local model folder"):
        bench_trainer.run(_args(model=str(tmp_path / "missing")), micro_batch_tokens=None)


@pytest.mark.slow
def test_the_oracle_is_timed_apart_from_the_iterations():
    # Passes at iterations 0, 1, 2 (every 1): the timed iterations 1-2 leave them out, their seconds are reported.
    parts = bench_trainer.run(_args(config=None, iterations=2, oracle_every=1, oracle_rows=2, oracle_continuations=2),
                              micro_batch_tokens=None)  # fmt: skip
    assert parts["oracle"] > 0
    assert parts["oracle_share"] == pytest.approx(parts["oracle"] / (parts["iteration"] + parts["oracle"]))
    names = ("generation", "env", "advantage", "train", "other")
    assert abs(sum(parts[n] for n in names) - parts["iteration"]) < 1e-9


@pytest.mark.slow
def test_compare_times_the_padded_layout_and_generate_against_the_defaults_on_equal_work(tmp_path, capsys):
    out = tmp_path / "bench.json"
    bench_trainer.main(["--iterations", "1", "--tasks", "2", "--rollouts", "4", "--horizon", "3", "--max-env-steps",
                        "3", "--max-completion-length", "6", "--hidden-size", "16", "--num-layers", "1", "--threads",
                        "1", "--micro-batch-tokens", "4096", "--compare", "--json", str(out)])  # fmt: skip
    results = json.loads(out.read_text())
    assert results["matmul_gflop_per_s"]["peak"] > 0
    now, before = results["4096/current"]["median"], results["4096/before"]["median"]
    for parts in (now, before):
        assert parts["generation_row_tokens"] > 0 and parts["train_row_tokens"] > 0
        for phase in ("generation", "train"):
            assert parts[f"{phase}_gflop_per_s"] == pytest.approx(parts[f"{phase}_gflops"] / parts[phase])
    # 4 rollouts of a task start from one prompt: the packed update and the lean sampler compute it once.
    assert now["train_computed_tokens"] < before["train_computed_tokens"]
    assert now["generation_computed_tokens"] < before["generation_computed_tokens"]
    printed = capsys.readouterr().out
    assert "current / before (medians): iteration" in printed and "of matmul peak" in printed


def test_profile_lists_the_last_iterations_top_operators_by_cpu_time(tmp_path, capsys):
    out = tmp_path / "bench.json"
    bench_trainer.main(["--iterations", "1", "--tasks", "2", "--rollouts", "2", "--horizon", "3", "--max-env-steps",
                        "2", "--max-completion-length", "4", "--hidden-size", "16", "--num-layers", "1", "--threads",
                        "1", "--micro-batch-tokens", "4096", "--profile", "5", "--json", str(out)])  # fmt: skip
    rows = json.loads(out.read_text())["4096/current"]["runs"][0]["profile"]
    assert len(rows) == 5 and all(r["seconds"] > 0 for r in rows)
    shares = [r["share"] for r in rows]
    assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1
    assert all(r["op"] for r in rows)
    assert f"profile, current: {rows[0]['op']}" in capsys.readouterr().out
