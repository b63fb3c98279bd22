"""One real GACATrainer iteration on GACA-WebShop-v0 (in-process shop, a tiny local model)."""

from __future__ import annotations

import pytest
import torch

from gaca_train.experiments.tiny import build_tiny_model, build_tokenizer
from gaca_train.rollout.prompts import prompt_templates
from gaca_train.training.trainer import GACATrainer, resolve_task_ids
from tests.gaca_train.tiny_setup import tiny_config

pytest.importorskip("flask", reason="needs the webshop extra (make test installs it)")


@pytest.mark.slow
def test_one_gaca_iteration_on_webshop(tmp_path):
    import gymnasium as gym

    env_kwargs = {"split": "test", "max_env_steps": 3}
    env = gym.make("GACA-WebShop-v0", **env_kwargs)
    obs, info = env.reset(options={"task_id": "fixed_0"})
    corpus = [obs, info["task"], " ".join(info["admissible_actions"]), *(" ".join(t) for t in prompt_templates())]
    env.close()
    tokenizer = build_tokenizer(corpus)
    model = build_tiny_model(tokenizer)
    args = tiny_config(tmp_path, env_id="GACA-WebShop-v0", env_kwargs=env_kwargs, task_split="test", max_tasks=1,
                       tasks_per_iteration=1, max_env_steps=3, estimator="gaca",
                       allow_generated_data=True)  # fmt: skip
    assert resolve_task_ids(args) == ["fixed_0"]
    trainer = GACATrainer(model=model, args=args, processing_class=tokenizer)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer.train()
    logs = trainer.state.log_history[0]
    assert torch.isfinite(torch.tensor(logs["loss"]))
    assert logs["rollout/steps"] == 6.0 and logs["rollout/success_rate"] == 0.0
    assert {e.task_id for e in trainer.last_rollout.episodes} == {"fixed_0"}
    assert trainer.last_rollout.steps[0].anchor_key == trainer.last_rollout.steps[1].anchor_key
    # A random model's responses are all malformed and no action changes the state or the reward, so every
    # row gets zero advantage (docs/method.md section 6) and the update leaves the weights as they were.
    assert logs["rollout/invalid_rate"] == 1.0 and logs["advantage/abs_mean"] == 0.0
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())
