"""The oracle through remote envs: a training iteration on a gaca-env-server measures what it measures in-process."""

from __future__ import annotations

import math

import pytest

from gaca_train.training.trainer import GACATrainer
from tests.gaca_server.servers import running_server
from tests.gaca_train.tiny_setup import ENV_KWARGS, tiny_config, tiny_model_and_tokenizer

pytestmark = pytest.mark.slow


def _oracle(tmp_path, **overrides):
    model, tokenizer = tiny_model_and_tokenizer(seed=0)
    config = tiny_config(tmp_path, oracle_every=1, oracle_rows=4, oracle_continuations=2, **overrides)
    trainer = GACATrainer(model=model, args=config, processing_class=tokenizer)
    trainer.train()
    done = trainer.last_oracle
    return done.estimates.q_returns, done.estimates.v_returns, done.metrics


def test_the_oracle_on_a_server_measures_what_it_measures_in_process(tmp_path):
    # Snapshots are saved by the server's sessions (signed), restored into other sessions of the same server.
    with running_server("GACA-CriticalChain-v0", ENV_KWARGS) as server:
        remote = _oracle(tmp_path / "remote", env_server_urls=[server.url])
    local = _oracle(tmp_path / "local")
    assert remote[:2] == local[:2]
    assert set(remote[2]) == set(local[2])
    same = [k for k in local[2] if k != "oracle/seconds"]
    assert all(remote[2][k] == local[2][k] or (math.isnan(remote[2][k]) and math.isnan(local[2][k])) for k in same)
