"""One real GACATrainer iteration on GACA-ALFWorld-v0 (a generated game, a tiny local model)."""

from __future__ import annotations

import pytest
import torch

from gaca_train.experiments.tiny import build_tiny_model, build_tokenizer
from gaca_train.rollout.prompts import prompt_templates
from gaca_train.training.trainer import GACATrainer
from tests.gaca_train.tiny_setup import tiny_config

pytest.importorskip("textworld", reason="needs the alfworld extra (make test installs it)")


@pytest.fixture(scope="module")
def alfworld_data(tmp_path_factory):
    from gaca_envs.alfworld.generate import generate

    out = tmp_path_factory.mktemp("alfworld_trainer")
    generate(out, 1, seed=6, split="train")
    return out


@pytest.mark.slow
def test_one_gaca_iteration_on_alfworld(tmp_path, alfworld_data):
    import gymnasium as gym

    env_kwargs = {"data_path": str(alfworld_data), "split": "train", "max_env_steps": 3}
    env = gym.make("GACA-ALFWorld-v0", **env_kwargs)
    obs, info = env.reset(seed=0)
    corpus = [obs, info["task"], " ".join(info["admissible_actions"]), *(" ".join(t) for t in prompt_templates())]
    env.close()
    tokenizer = build_tokenizer(corpus)
    model = build_tiny_model(tokenizer)
    args = tiny_config(tmp_path, env_id="GACA-ALFWorld-v0", env_kwargs=env_kwargs, tasks_per_iteration=1,
                       max_env_steps=3, estimator="gaca")  # fmt: skip
    trainer = GACATrainer(model=model, args=args, processing_class=tokenizer)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer.train()
    logs = trainer.state.log_history[0]
    assert torch.isfinite(torch.tensor(logs["loss"]))
    assert logs["rollout/steps"] == 6.0  # 2 rollouts x 3 steps: a random model does not solve the game
    steps = trainer.last_rollout.steps
    assert steps[0].anchor_key == steps[1].anchor_key  # the group starts in one state
    # A random model's responses are all malformed and no action changes the state or the reward, so every
    # row gets zero advantage (docs/method.md section 6) and the update leaves the weights as they were.
    assert logs["rollout/invalid_rate"] == 1.0 and logs["advantage/abs_mean"] == 0.0
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())
