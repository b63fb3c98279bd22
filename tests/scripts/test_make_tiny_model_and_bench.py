from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from gaca_train.experiments import bench_trainer
from gaca_train.experiments.tiny import torch_threads

ROOT = Path(__file__).resolve().parents[2]


def test_make_tiny_model_saves_a_model_autotokenizer_loads_with_its_words(tmp_path):
    out = tmp_path / "tiny"
    env_kwargs = json.dumps({"horizon": 3, "num_branches": 1, "num_tasks": 2})
    command = [sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), "--out", str(out),
               "--env-kwargs", env_kwargs, "--num-tasks", "2", "--max-env-steps", "4", "--hidden-size", "32",
               "--sft-steps", "2", "--fork-noise", "0.5", "--cpu"]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    ids = tokenizer("<think> </think> <action> look around </action>")["input_ids"]
    tokens = ["<think>", "</think>", "<action>", "look", "around", "</action>"]
    assert tokenizer.convert_ids_to_tokens(ids) == tokens
    assert tokenizer.unk_token_id not in ids
    assert model.config.vocab_size == len(tokenizer) and tokenizer.chat_template


def test_make_tiny_model_takes_max_steps_as_a_deprecated_alias(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_tiny_model", ROOT / "scripts" / "make_tiny_model.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    common = ["--env-kwargs", json.dumps({"horizon": 3, "num_branches": 1, "num_tasks": 2}), "--num-tasks", "2",
              "--hidden-size", "16"]  # fmt: skip
    script.main([*common, "--max-env-steps", "37", "--out", str(tmp_path / "new")])
    with pytest.warns(FutureWarning, match="--max-steps is deprecated and will be removed in the next release; "
                      "use --max-env-steps"):  # fmt: skip
        script.main([*common, "--max-steps", "37", "--out", str(tmp_path / "old")])
    new, old = (AutoTokenizer.from_pretrained(tmp_path / name) for name in ("new", "old"))
    assert "37" in new.get_vocab()  # the step limit is rendered in the prompts the vocabulary is read from
    assert new.get_vocab() == old.get_vocab()


@pytest.mark.slow
def test_bench_trainer_parts_add_up_to_the_iteration():
    args = argparse.Namespace(
        iterations=1, tasks=2, rollouts=2, mini_batch_rows=5, horizon=3, max_env_steps=3,
        max_completion_length=4, hidden_size=16, num_layers=1, vector_env="sync", threads=1, branching="off",
        oracle_every=0, oracle_rows=16, oracle_continuations=4,
    )  # fmt: skip
    with torch_threads(2):
        parts = bench_trainer.run(args, micro_batch_tokens=64)  # at args.threads = 1
        # The process gets its 2 threads back: later work in it (a test suite) does not run at 1 thread.
        assert torch.get_num_threads() == 2
    names = ("generation", "env", "advantage", "train", "other")
    assert all(parts[n] >= 0 for n in names)
    assert abs(sum(parts[n] for n in names) - parts["iteration"]) < 1e-9
    assert parts["rows_per_iteration"] == 12  # 4 episodes x 3 steps: the untrained model never finishes
    assert parts["updates"] == 3  # ceil(12 / 5)
    assert parts["micro_batches"] >= 1 and parts["update_tokens_per_s"] > 0 and parts["peak_rss_mb"] > 0
