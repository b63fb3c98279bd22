from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAPER = {"tasks_per_iteration": 16, "rollouts_per_task": 8, "learning_rate": 1e-6, "beta": 0.01, "gamma": 0.95,
         "history_length": 2, "temperature": 1.0}  # fmt: skip


@pytest.mark.parametrize("env", ["alfworld", "webshop"])
@pytest.mark.parametrize("estimator", ["grpo", "gigpo", "gaca"])
def test_paper_configs_parse_with_the_papers_settings(train_parser, env, estimator):
    path = ROOT / "configs" / f"{env}_{estimator}.yaml"
    cpu = ["--use_cpu", "true", "--bf16", "false"]
    _, args, model = train_parser.parse_args_and_config(args=["--config", str(path), *cpu])
    assert args.estimator == estimator and model.model_name_or_path == "Qwen/Qwen2.5-1.5B-Instruct"
    assert args.env_id == {"alfworld": "GACA-ALFWorld-v0", "webshop": "GACA-WebShop-v1"}[env]
    assert args.max_env_steps == {"alfworld": 50, "webshop": 15}[env]
    for name, value in PAPER.items():
        assert getattr(args, name) == value, name
    assert args.num_generations == 8 and args.generation_batch_size == 128


def test_quickstart_config_parses(train_parser):
    path = ROOT / "configs" / "quickstart_cpu.yaml"
    _, args, model = train_parser.parse_args_and_config(args=["--config", str(path)])
    assert args.env_id == "GACA-CriticalChain-v0" and args.env_kwargs["num_tasks"] == 8
    assert model.model_name_or_path == "outputs/tiny-criticalchain"


def test_alfworld_quickstart_config_parses(train_parser):
    path = ROOT / "configs" / "quickstart_cpu_alfworld.yaml"
    _, args, model = train_parser.parse_args_and_config(args=["--config", str(path)])
    assert args.env_id == "GACA-ALFWorld-v0" and args.env_kwargs["engine"] == "native"
    assert args.max_env_steps == args.env_kwargs["max_env_steps"] == 10
    assert model.model_name_or_path == "outputs/tiny-alfworld"
