"""README.md's commands and snippets run as written on a fresh clone (those that take under a minute).

Substitutions stand in for the internet and the GPU: the plain-TRL snippet gets a local tiny model with
a tool-calling chat template instead of a Hub id, ``use_cpu=True`` (TRL's config turns bf16 on, which
needs a GPU), and ``$ALFWORLD_DATA`` pointing at games generated in ALFWorld's layout; it is run up to
the trainer's construction (the training itself is covered by
tests/gaca_envs/test_trl_adapter.py). The shell commands run exactly as the README prints them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _python_blocks() -> dict[str, str]:
    """The README's python blocks, keyed by what they import (estimators, envs, trl)."""
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    keyed = {}
    for block in blocks:
        key = "trl" if "from trl import" in block else "envs" if "import gymnasium" in block else "estimators"
        keyed[key] = block
    return keyed


def _run(code: str, env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env
    )


def test_readme_has_the_three_snippets():
    assert set(_python_blocks()) == {"estimators", "envs", "trl"}


def test_estimator_snippet_runs():
    result = _run(_python_blocks()["estimators"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "tensor(" in result.stdout


@pytest.mark.slow
def test_env_snippet_runs():
    result = _run(_python_blocks()["envs"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "True" in result.stdout or "False" in result.stdout  # info["action_valid"] printed last


@pytest.mark.slow
def test_plain_trl_snippet_builds_its_trainer(tmp_path):
    from gaca_envs.alfworld.generate import generate
    from gaca_train.experiments.tiny import build_bpe_tokenizer, build_tiny_model, save_tiny_model

    generate(tmp_path / "alfworld", 8, seed=0, split="train", difficulty="easy", engine="native")
    from trl.chat_template_utils import qwen2_5_chat_template

    tokenizer = build_bpe_tokenizer(["go to the desk 1", "take the mug", "<tool_call>", "</tool_call>"])
    tokenizer.chat_template = qwen2_5_chat_template
    model_dir = save_tiny_model(build_tiny_model(tokenizer), tokenizer, tmp_path / "model")
    snippet = _python_blocks()["trl"]
    assert snippet.count('"Qwen/Qwen3-0.6B"') == 1 and snippet.rstrip().endswith("trainer.train()")
    code = snippet.replace('"Qwen/Qwen3-0.6B"', repr(str(model_dir))).rstrip().removesuffix("trainer.train()")
    assert code.count("GRPOConfig(") == 1
    code = code.replace("GRPOConfig(", "GRPOConfig(use_cpu=True, output_dir=" + repr(str(tmp_path / "out")) + ", ")
    code = textwrap.dedent(code) + "\nprint(type(trainer).__name__, trainer.args.max_completion_length)\n"
    env = {**os.environ, "ALFWORLD_DATA": str(tmp_path / "alfworld")}
    result = _run(code, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "GRPOTrainer 20480"


@pytest.mark.parametrize(
    "command",
    [
        "python scripts/plan_memory.py --config configs/alfworld_gaca.yaml --gpu-mem-gb 80",
        "python scripts/train.py --config configs/alfworld_gaca.yaml --dry_run true --allow_generated_data true",
    ],
)
def test_readme_shell_commands_run_as_written(command, tmp_path):
    assert command in README
    # A fresh machine: no Hugging Face cache, no network (a proxy on a closed local port says so at once).
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HTTPS_PROXY": "http://127.0.0.1:9"}
    env.pop("HF_HUB_OFFLINE", None)
    argv = command.split()
    result = subprocess.run(
        [sys.executable, *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "fits a 80 GiB GPU" in result.stdout
