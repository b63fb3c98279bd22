"""GACATrainer with its rollout envs on a gaca-env-server (GACAConfig.env_server_urls): one real iteration."""

from __future__ import annotations

import pytest
import requests

from gaca_train.training.trainer import GACATrainer
from tests.gaca_server.servers import running_server
from tests.gaca_train.tiny_setup import ENV_KWARGS, tiny_config, tiny_model_and_tokenizer

pytestmark = pytest.mark.slow


def _train(tmp_path, **overrides):
    model, tokenizer = tiny_model_and_tokenizer(seed=0)
    trainer = GACATrainer(model=model, args=tiny_config(tmp_path, **overrides), processing_class=tokenizer)
    trainer.train()
    steps = [
        (s.env_index, s.step, s.anchor_key, s.anchor_text, s.reward, s.response) for s in trainer.last_rollout.steps
    ]
    return steps, trainer.state.log_history[0]


@pytest.mark.parametrize("branching", ["off", "nll"])
def test_a_training_iteration_on_a_server_plays_what_it_plays_in_process(tmp_path, branching):
    # (RolloutPool spreading its envs over several servers: tests/gaca_server/test_server.py.)
    # With branching, continuations restore the server's snapshots (saved and restored through /state and reset).
    options = {"branching": branching, "branch_roots": 1, "branch_budget": "fixed", "branch_continuations": 1}
    with running_server("GACA-CriticalChain-v0", ENV_KWARGS) as server:
        remote, logs = _train(tmp_path / "remote", env_server_urls=[server.url], **options)
        sessions = requests.get(f"{server.url}/gaca/info", timeout=10).json()["active_sessions"]
        # The pool's four envs were sessions on the server (uvicorn logs each WebSocket it accepts).
        opened = server.output().count('"WebSocket /ws" [accepted]')
    local, local_logs = _train(tmp_path / "local", **options)
    assert remote == local and len(local) >= 4  # the same model, seeds and envs: the same episodes
    assert "loss" in logs and logs["rollout/steps"] == len(local)
    assert opened == 4
    assert sessions == 0  # the trainer closed its pool's sessions after training
    if branching == "nll":  # continuations were played, from snapshots of the server's sessions
        assert logs["branch/snapshots"] > 0 and logs["branch/snapshots"] == local_logs["branch/snapshots"]
