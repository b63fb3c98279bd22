"""configs/verl_agent/ against verl-agent's example scripts (examples/{grpo,gigpo}_trainer/run_*.sh).

The expected values are copied by hand from the scripts and from verl's ppo_trainer.yaml defaults
(docs/training.md, "verl-agent settings", names the snapshots read).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Setting: (ALFWorld value, WebShop value), from the scripts (and verl's defaults where the scripts are silent).
VERL_AGENT = {
    "tasks_per_iteration": (16, 16),  # data.train_batch_size
    "rollouts_per_task": (8, 8),  # env.rollout.n
    "max_env_steps": (50, 15),  # env.max_steps (verl-agent's name)
    "max_prompt_length": (2048, 4096),  # data.max_prompt_length
    "max_completion_length": (512, 512),  # data.max_response_length
    "mini_batch_rows": (256 * 8, 64 * 8),  # actor.ppo_mini_batch_size x group size
    "learning_rate": (1e-6, 1e-6),
    "beta": (0.01, 0.01),  # kl_loss_coef
    "invalid_action_penalty": (0.1, 0.1),
    "temperature": (1.0, 1.0),
    "eval_temperature": (0.4, 0.4),  # val_kwargs.temperature
    "eval_steps": (5, 5),  # trainer.test_freq
    "eval_on_start": (True, True),  # trainer.val_before_train
    "eval_max_tasks": (128, 256),  # ALFWorld: data.val_batch_size; WebShop: the 2 x val_data_size test goals prepared
    "max_steps": (150, 150),  # trainer.total_epochs over train_data_size tasks
    "history_length": (2, 2),  # env.history_length
    "entropy_coef": (0.001, 0.001),  # actor.entropy_coeff (verl default)
    "weight_decay": (0.01, 0.01),  # actor.optim.weight_decay (verl default)
    "max_grad_norm": (1.0, 1.0),  # actor.grad_clip (verl default)
    "epsilon": (0.2, 0.2),  # clip_ratio_low (verl default)
    "epsilon_high": (0.2, 0.2),  # clip_ratio_high (verl default)
    "ppo_epochs": (1, 1),
}
GIGPO_MODE = {"alfworld": "mean_std", "webshop": "mean"}  # algorithm.gigpo.mode: mean_std_norm / mean_norm


@pytest.mark.parametrize("env", ["alfworld", "webshop"])
@pytest.mark.parametrize("estimator", ["grpo", "gigpo", "gaca"])
def test_verl_agent_configs_carry_the_scripts_settings(train_parser, env, estimator):
    path = ROOT / "configs" / "verl_agent" / f"{env}_{estimator}.yaml"
    cpu = ["--use_cpu", "true", "--bf16", "false"]
    _, args, model = train_parser.parse_args_and_config(args=["--config", str(path), *cpu])
    column = 0 if env == "alfworld" else 1
    for name, values in VERL_AGENT.items():
        assert getattr(args, name) == values[column], name
    assert model.model_name_or_path == "Qwen/Qwen2.5-1.5B-Instruct" and args.estimator == estimator
    assert args.preset == "verl-agent" and args.format_check == "verl-agent" and args.anchor == "text"
    assert args.system_prompt == "" and args.lr_scheduler_type == "constant" and args.loss_type == "dapo"
    assert args.eval_strategy == "steps" and args.allow_generated_data is False
    assert args.eval_splits == (["valid_seen"] if env == "alfworld" else ["test"])
    assert args.vllm_importance_sampling_correction is False  # verl-agent corrects nothing for vLLM's log-probs
    if env == "webshop":  # env.webshop.use_small=True, env.webshop.human_goals=False
        shop = args.env_kwargs["shop_config"]
        assert shop == {"catalog": "$WEBSHOP_DATA", "catalog_files": "small", "human_goals": False}
    assert args.hidden_actions == (["help"] if env == "alfworld" else None)
    if estimator == "grpo":
        assert args.episode_norm == "mean_std"  # norm_adv_by_std_in_grpo=True
    else:
        assert args.episode_norm == args.step_norm == GIGPO_MODE[env] and args.omega == 1.0 and args.gamma == 0.95
