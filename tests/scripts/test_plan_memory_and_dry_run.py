from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gaca_train.memory import ARCHITECTURES, plan_memory
from gaca_train.startup import check_model_source

ROOT = Path(__file__).resolve().parents[2]


def _plan_memory(*argv: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "scripts" / "plan_memory.py"), *argv]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_parameter_counts_match_the_published_sizes():
    sizes = {name: arch.num_parameters / 1e9 for name, arch in ARCHITECTURES.items()}
    assert sizes["Qwen/Qwen2.5-1.5B-Instruct"] == pytest.approx(1.54, abs=0.01)
    assert sizes["Qwen/Qwen2.5-7B-Instruct"] == pytest.approx(7.62, abs=0.01)


def test_episode_sized_micro_batches_would_not_fit_and_token_budgets_do():
    arch = ARCHITECTURES["Qwen/Qwen2.5-1.5B-Instruct"]
    # The old schedule: every step of 8 episodes in one forward, 400 rows of 2k tokens, 513 completion tokens.
    old = plan_memory(arch, micro_batch_tokens=400 * 2048, completion_tokens=400 * 513, gradient_checkpointing=True)
    assert old["logits"] > 80 and old["total"] > 80
    new = plan_memory(arch, micro_batch_tokens=16384, completion_tokens=8192, gradient_checkpointing=True)
    assert new["total"] < 40
    no_ckpt = plan_memory(arch, micro_batch_tokens=16384, completion_tokens=8192, gradient_checkpointing=False)
    assert no_ckpt["activations"] > 10 * new["activations"]


@pytest.mark.parametrize("env", ["alfworld", "webshop"])
@pytest.mark.parametrize(
    "extra", [[], ["--model", "Qwen/Qwen2.5-7B-Instruct", "--lora-rank", "64"],
              ["--model", "Qwen/Qwen2.5-7B-Instruct", "--zero3-gpus", "8"]],
)  # fmt: skip
def test_paper_configs_fit_an_80_gb_gpu(env, extra):
    result = _plan_memory("--config", str(ROOT / "configs" / f"{env}_gaca.yaml"), "--gpu-mem-gb", "80", *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fits a 80 GiB GPU" in result.stdout


def test_full_fine_tune_of_7b_on_one_gpu_does_not_fit():
    result = _plan_memory(
        "--config", str(ROOT / "configs" / "alfworld_gaca.yaml"), "--model", "Qwen/Qwen2.5-7B-Instruct"
    )
    assert result.returncode == 1 and "does NOT fit" in result.stdout


def test_model_source_errors_name_the_path(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"model_name_or_path='\./missing-model': no such local folder"):
        check_model_source("./missing-model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="is a folder without config.json"):
        check_model_source(str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="not in the Hugging Face cache and HF_HUB_OFFLINE is set"):
        check_model_source("some-org/some-model-never-cached")


def _dry_run(config: str, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    train, path = str(ROOT / "scripts" / "train.py"), str(ROOT / "configs" / f"{config}.yaml")
    command = [sys.executable, train, "--config", path, "--dry_run", "true", *extra]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)


def _real_data(tmp_path, config: str) -> tuple[list[str], dict]:
    """Command-line flags and environment that point a paper config at (stand-in) real data folders."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"}
    if "alfworld" in config:
        (tmp_path / "json_2.1.1").mkdir(exist_ok=True)
        return [], {**env, "ALFWORLD_DATA": str(tmp_path)}
    return ["--env_kwargs", json.dumps({"shop_config": {"catalog": str(tmp_path)}})], env


@pytest.mark.parametrize("config", ["alfworld_gaca", "webshop_gaca", "alfworld_grpo", "webshop_gigpo"])
def test_paper_configs_pass_every_start_up_check_in_a_dry_run(tmp_path, config):
    extra, env = _real_data(tmp_path, config)
    result = _dry_run(config, *extra, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "start-up checks passed; 128 episodes per iteration (16 tasks x 8 rollouts)" in result.stdout
    rows = 512 if "webshop" in config else 2048
    assert f"mini-batches of {rows} rows" in result.stdout and "at most 16384 padded tokens" in result.stdout


@pytest.mark.parametrize("config", ["alfworld_gaca", "webshop_gaca"])
def test_paper_configs_without_real_data_stop_at_start_up(config):
    import os

    result = _dry_run(config, env={k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"})
    assert result.returncode != 0
    assert "set allow_generated_data: true to use the generated data knowingly" in result.stderr


def test_dry_run_stops_on_a_missing_local_model(tmp_path):
    extra, env = _real_data(tmp_path, "alfworld_gaca")
    result = _dry_run("alfworld_gaca", "--model_name_or_path", "./no-such-model", *extra, env=env)
    assert result.returncode != 0 and "'./no-such-model': no such local folder" in result.stderr


@pytest.mark.slow
def test_gpu_smoke_script_runs_end_to_end_on_the_cpu_with_a_tiny_model(tmp_path):
    # The GPU figures need a GPU; --tiny runs the same pipeline (games, local model, 2 iterations) on the CPU.
    command = [sys.executable, str(ROOT / "scripts" / "gpu_smoke.py"), "--tiny", "--out", str(tmp_path),
               "--max-completion-length", "8", "--micro-batch-tokens", "1024"]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_smoke.json").read_text())
    assert len(report["iteration_seconds"]) == 2 and report["rows_per_iteration"] == [160.0, 160.0]
    assert all(u == 3 for u in report["updates_per_iteration"])  # ceil(160 / 64)
    assert all(t > 0 for t in report["rollout_tokens_per_s"] + report["update_tokens_per_s"])
