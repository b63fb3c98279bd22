from __future__ import annotations

import dataclasses

import pytest

from gaca_train.estimators.options import ESTIMATORS, EstimatorConfig
from gaca_train.training.config import ESTIMATOR_FIELDS, GACAConfig
from tests.gaca_train.tiny_setup import tiny_config


def test_estimator_options_are_inherited_not_redeclared():
    # One source per field: GACAConfig declares none of the estimator options itself, and its
    # dataclass fields are EstimatorConfig's (same default, same help).
    assert issubclass(GACAConfig, EstimatorConfig)
    own = {f.name: f for f in dataclasses.fields(GACAConfig)}
    for f in dataclasses.fields(EstimatorConfig):
        assert f.name not in GACAConfig.__annotations__, f.name
        assert own[f.name] is f, f.name
        assert own[f.name].metadata["help"]
    assert EstimatorConfig.option_names() == ESTIMATOR_FIELDS


def test_trl_parser_reads_the_estimator_options_from_the_command_line(tmp_path):
    from trl import TrlParser

    (args,) = TrlParser((GACAConfig,)).parse_args_and_config(
        ["--output_dir", str(tmp_path), "--use_cpu", "--bf16", "false", "--report_to", "none"]
        + ["--tasks_per_iteration", "2", "--gamma", "0.9", "--eta", "0", "--preset", "verl-agent"]
    )
    assert (args.gamma, args.eta, args.preset, args.lambda0) == (0.9, 0.0, "verl-agent", 0.5)
    assert args.estimator_kwargs() == {
        "estimator": "gaca",
        **EstimatorConfig(gamma=0.9, eta=0.0, preset="verl-agent").to_kwargs(),
    }


def test_estimator_kwargs_round_trip_into_estimator_config(tmp_path):
    args = tiny_config(tmp_path, estimator="reweight", eta=0.5, w_max=2.0, preset="verl-agent")
    kwargs = args.estimator_kwargs()
    assert kwargs.pop("estimator") == "reweight"
    assert EstimatorConfig(**kwargs) == EstimatorConfig(eta=0.5, w_max=2.0, preset="verl-agent")


def test_a_training_config_is_an_estimator_config(tmp_path):
    from gaca_train.estimators.advantages import compute_advantages
    from tests.gaca_train.batches import two_trajectory_batch

    args = tiny_config(tmp_path, eta=1.0, gamma=0.5, episode_norm="mean")
    rows = two_trajectory_batch(nll=[1.5, 1.0, 0.5, 1.0])
    expected = compute_advantages(rows, **args.estimator_kwargs()).advantage
    assert compute_advantages(rows, "gaca", config=args).advantage.equal(expected)
    assert compute_advantages(rows, "gaca", config=args, eta=0.0).advantage.equal(
        compute_advantages(rows, "gaca", eta=0.0, gamma=0.5, episode_norm="mean").advantage
    )


def test_groups_map_onto_trl_batch_fields(tmp_path):
    # One TRL step = one iteration: the rank's batch is all its episodes, one generation per step.
    args = tiny_config(tmp_path, tasks_per_iteration=3, rollouts_per_task=4, mini_batch_rows=16)
    assert args.num_generations == 4
    assert args.per_device_train_batch_size == 12
    assert args.generation_batch_size == 12
    assert args.steps_per_generation == 1 and args.gradient_accumulation_steps == 1


def test_ranks_split_the_groups_and_nothing_else(tmp_path, monkeypatch):
    # WORLD_SIZE is read before TRL's own set-up; the check runs before any env or model exists.
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(
        ValueError, match=r"tasks_per_iteration \(2\) must be a multiple of the number of processes \(3\)"
    ):
        tiny_config(tmp_path)


def test_report_to_a_backend_that_is_not_installed_fails_at_once(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ValueError, match="report_to='wandb' but the 'wandb' package is not installed"):
        tiny_config(tmp_path, report_to="wandb")
    assert tiny_config(tmp_path, report_to="tensorboard").report_to == ["tensorboard"]  # in the train extra


def test_env_kwargs_from_json_string(tmp_path):
    args = tiny_config(tmp_path, env_kwargs='{"horizon": 5, "noise": 0.1}')
    assert args.env_kwargs == {"horizon": 5, "noise": 0.1}


def test_preset_none_string_from_cli(tmp_path):
    assert tiny_config(tmp_path, preset="none").preset is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"estimator": "ppo"}, f"estimator must be one of {ESTIMATORS}, got 'ppo'"),
        ({"anchor": "hash"}, "anchor must be one of ('state', 'text'), got 'hash'"),
        ({"vector_env": "ray"}, "vector_env must be one of ('async', 'sync'), got 'ray'"),
        ({"nll_reduction": "max"}, "nll_reduction must be one of ('mean', 'sum'), got 'max'"),
        ({"action_list_style": "bullets"}, "action_list_style must be one of ('quoted', 'plain'), got 'bullets'"),
        ({"rollouts_per_task": 1}, "rollouts_per_task must be >= 2 (group-relative advantages need a group), got 1"),
        ({"max_env_steps": 0}, "max_env_steps must be >= 1, got 0"),
        ({"history_length": -1}, "history_length must be >= 0, got -1"),
        ({"max_tasks": 0}, "max_tasks must be >= 1 or None, got 0"),
        ({"task_ids": []}, "task_ids must be None or a non-empty list of task ids, got []"),
        ({"eta": -0.3}, "eta must be >= 0, got -0.3"),
        ({"lambda0": 1.0}, "lambda0 must be in [0, 1) (the blend divides by 1 - lambda0), got 1.0"),
        ({"modulation": "cubic"}, "modulation must be one of ('linear', 'sigmoid'), got 'cubic'"),
        ({"env_kwargs": "{horizon: 5"}, "env_kwargs must be a JSON object string, got '{horizon: 5'"),
        ({"prompt_template": "Task {task} {nope}"}, "prompt_template must be a str.format template using only"),
        ({"gradient_accumulation_steps": 4}, "gradient_accumulation_steps must stay 1, got 4"),
        ({"steps_per_generation": 2}, "steps_per_generation and generation_batch_size are derived by GACAConfig"),
        ({"num_iterations": 2}, "num_iterations must stay 1, got 2; set ppo_epochs instead"),
        ({"ppo_epochs": 0}, "ppo_epochs must be >= 1, got 0"),
        ({"mini_batch_rows": 0}, "mini_batch_rows must be >= 1 or None, got 0"),
        (
            {"micro_batch_tokens": 100, "max_prompt_length": 96},
            "micro_batch_tokens (100) is smaller than one row at full length: max_prompt_length + "
            "max_completion_length = 104",
        ),
    ],
)
def test_validation_errors_name_field_value_and_fix(tmp_path, overrides, message):
    with pytest.raises(ValueError) as info:
        tiny_config(tmp_path, **overrides)
    assert message in str(info.value)
