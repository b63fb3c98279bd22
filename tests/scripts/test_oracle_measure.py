"""scripts/oracle.py: a saved checkpoint and a served model measured against oracle advantages."""

from __future__ import annotations

import json

import pytest
import yaml

from gaca_train.experiments.oracle_measure import main, parse_args
from gaca_train.experiments.tiny import save_tiny_model
from tests.gaca_train.tiny_setup import ENV_KWARGS, tiny_model_and_tokenizer
from tests.scripts.chat_server import ChatServer

pytestmark = pytest.mark.slow


def _config(tmp_path) -> str:
    path = tmp_path / "config.yaml"
    fields = {"env_id": "GACA-CriticalChain-v0", "env_kwargs": json.dumps(ENV_KWARGS), "max_env_steps": 4,
              "max_completion_length": 8, "temperature": 1.0, "estimator": "gaca", "eta": 0.5}  # fmt: skip
    path.write_text(yaml.safe_dump(fields))
    return str(path)


def test_a_saved_checkpoint_is_measured_on_every_estimator(tmp_path):
    model, tokenizer = tiny_model_and_tokenizer(seed=0)
    save_tiny_model(model, tokenizer, tmp_path / "ckpt")
    out = str(tmp_path / "o")
    report = main(["--model", str(tmp_path / "ckpt"), "--config", _config(tmp_path), "--tasks", "2",
                   "--rollouts-per-task", "2", "--rows", "5", "--continuations", "2", "--out", out])  # fmt: skip
    saved = json.loads((tmp_path / "o" / "oracle.json").read_text())  # strict JSON: an undefined value is null
    assert saved["metrics"]["oracle/rows"] == 5 and set(saved["metrics"]) == set(report["metrics"])
    assert {f"oracle/{e}/risk" for e in ("grpo", "gigpo", "gaca", "reweight")} <= set(saved["metrics"])
    assert len(saved["records"]) == 5 and saved["episodes"] == 4
    assert all(r["variance"] >= 0 for r in saved["records"])


def test_a_served_model_is_measured_with_its_token_logprobs(tmp_path):
    with ChatServer(models=("agent",)) as server:
        report = main(["--base-url", server.base_url, "--served-model", "agent", "--config", _config(tmp_path),
                       "--tasks", "2", "--rollouts-per-task", "2", "--rows", "4", "--continuations", "2",
                       "--out", str(tmp_path / "o")])  # fmt: skip
        asked = [r for r in server.requests if r["path"] == "/v1/chat/completions"]
    assert report["metrics"]["oracle/rows"] == 4
    assert asked and all(r["logprobs"] is True and r["temperature"] == 1.0 for r in asked)
    assert all(r["nll"] > 0 for r in report["records"])  # the scripted server's log-probs, -0.1 to -2.0 a word


def test_a_server_without_logprobs_is_refused_with_the_reason(tmp_path):
    with ChatServer(models=("agent",)) as server:
        server._server.logprobs = False  # a server that ignores logprobs=true
        with pytest.raises(RuntimeError, match="returned no token log-probs"):
            main(["--base-url", server.base_url, "--served-model", "agent", "--config", _config(tmp_path),
                  "--tasks", "1", "--rollouts-per-task", "2", "--out", str(tmp_path / "o")])  # fmt: skip


def test_bad_budgets_are_one_line_errors(capsys):
    with pytest.raises(SystemExit) as e:
        parse_args(["--model", "m", "--out", "o", "--continuations", "1"])
    assert e.value.code == 2 and "--continuations must be at least 2" in capsys.readouterr().err
