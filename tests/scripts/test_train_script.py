from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gaca_train.experiments import train
from gaca_train.experiments.tiny import save_tiny_model
from tests.gaca_train.tiny_setup import ENV_KWARGS, tiny_model_and_tokenizer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tiny_model_dir(tmp_path):
    model, tokenizer = tiny_model_and_tokenizer()
    return save_tiny_model(model, tokenizer, tmp_path / "tiny")


def _write_config(tmp_path, model_dir, **overrides):
    config = {
        "model_name_or_path": str(model_dir),
        "output_dir": str(tmp_path / "run"),
        "env_id": "GACA-CriticalChain-v0",
        "env_kwargs": json.dumps(ENV_KWARGS),
        "vector_env": "sync",
        "estimator": "gaca",
        "tasks_per_iteration": 2,
        "rollouts_per_task": 2,
        "max_env_steps": 4,
        "max_completion_length": 6,
        "max_steps": 1,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": 1,
        "report_to": "none",
        "bf16": False,
        "gradient_checkpointing": False,
        "use_cpu": True,
        "disable_tqdm": True,
    }
    config.update(overrides)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_yaml_config_with_cli_override_trains_and_saves(tmp_path, tiny_model_dir):
    config = _write_config(tmp_path, tiny_model_dir)
    script_args, training_args, model_args = train.make_parser().parse_args_and_config(
        args=["--config", str(config), "--estimator", "gigpo", "--omega", "0.5"]
    )
    assert training_args.estimator == "gigpo" and training_args.omega == 0.5  # CLI beats YAML
    assert training_args.env_kwargs == ENV_KWARGS and model_args.model_name_or_path == str(tiny_model_dir)
    train.main(script_args, training_args, model_args)
    assert (tmp_path / "run" / "model.safetensors").exists()
    state = json.loads((tmp_path / "run" / "checkpoint-1" / "trainer_state.json").read_text())
    assert "loss" in state["log_history"][0] and "rollout/success_rate" in state["log_history"][0]


@pytest.mark.slow
def test_two_cpu_processes_split_the_groups(tmp_path, tiny_model_dir):
    # 2 tasks x 2 rollouts over 2 ranks: each rank plays one group (2 episodes of 4 steps, 8 rows).
    config = _write_config(tmp_path, tiny_model_dir)
    with socket.socket() as probe:  # a free loopback port for the rendezvous
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", port,
               str(ROOT / "scripts" / "train.py"), "--config", str(config)]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    state = json.loads((tmp_path / "run" / "checkpoint-1" / "trainer_state.json").read_text())
    logs = state["log_history"][0]
    assert logs["rollout/steps"] == 8.0  # per rank: one group, not both
    assert logs["train/rows"] == 16.0  # rows of the iteration over both ranks
    assert logs["train/updates"] == 1.0
    assert (tmp_path / "run" / "model.safetensors").exists()
