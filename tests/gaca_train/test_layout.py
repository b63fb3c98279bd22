"""gaca_train's rooms: old flat module names are aliases of the moved modules; every name the docs give resolves.

This is the one test that imports the old names (pytest turns their DeprecationWarning into an error elsewhere).
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import gaca_train
from gaca_train._compat import ALIASES_REMOVED_IN, MOVED, REPLACED

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


def _import_old(name: str):
    with pytest.warns(DeprecationWarning, match=re.escape(f"{name} moved to {MOVED[name]}")) as record:
        module = importlib.import_module(name)
    assert ALIASES_REMOVED_IN in str(record[0].message)
    return module


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_name_is_the_moved_module_itself_with_a_warning_naming_the_new_path(old):
    sys.modules.pop(old, None)
    module = _import_old(old)
    assert module is importlib.import_module(MOVED[old])
    assert module.__name__ == MOVED[old] and module.__spec__.name == MOVED[old]  # its own spec, not the alias's


def test_monkeypatching_the_old_name_patches_the_real_module(monkeypatch):
    sys.modules.pop("gaca_train.advantages", None)
    old = _import_old("gaca_train.advantages")
    from gaca_train.estimators import advantages

    monkeypatch.setattr(old, "grpo_advantages", "patched")
    assert advantages.grpo_advantages == "patched"


def test_attribute_access_to_an_old_name_resolves_through_the_alias():
    sys.modules.pop("gaca_train.tiny", None)
    vars(gaca_train).pop("tiny", None)
    with pytest.warns(DeprecationWarning, match="gaca_train.tiny moved to gaca_train.experiments.tiny"):
        module = gaca_train.tiny
    assert module is importlib.import_module("gaca_train.experiments.tiny")


def test_a_training_args_file_pickled_before_the_move_loads_as_the_new_config():
    # Saved by TRL's Trainer (torch.save of the config) when GACAConfig lived in gaca_train.config.
    import torch

    from gaca_train.training.config import GACAConfig

    raw = (DATA / "training_args_flat_layout.bin").read_bytes()
    assert b"gaca_train.config" in raw and b"gaca_train.training" not in raw
    sys.modules.pop("gaca_train.config", None)
    with pytest.warns(DeprecationWarning, match="gaca_train.config moved to gaca_train.training.config"):
        config = torch.load(DATA / "training_args_flat_layout.bin", weights_only=False)
    assert type(config) is GACAConfig
    assert (config.estimator, config.eta, config.env_id) == ("gaca", 2.0, "GACA-CriticalChain-v0")


@pytest.mark.parametrize("package", sorted(REPLACED))
def test_a_package_that_took_an_old_module_name_reexports_its_names_without_a_warning(package):
    module = importlib.import_module(package)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):  # defined where the map says
                assert value.__module__ in (*REPLACED[package], f"{package}.vector"), (name, value.__module__)
            assert name in dir(module)
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        module.nothing_here  # noqa: B018


def _loaded_after(code: str) -> list[str]:
    heavy = "sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules)"
    probe = f"import sys, json\n{code}\nprint(json.dumps({heavy}))"
    out = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", probe], cwd=ROOT,
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_rooms_import_no_torch_until_a_name_is_used():
    assert (
        _loaded_after("import gaca_train.rollout, gaca_train.oracle, gaca_train.evaluation, gaca_train.training") == []
    )
    assert _loaded_after("import gaca_train.rollout.vector, gaca_train.rollout.prompts, gaca_train.estimators") == []
    assert _loaded_after("from gaca_train.rollout import PromptBuilder, parse_response") == []
    # An endpoint-only evaluation: its backend and its players.
    endpoint_only = (
        "from gaca_train.evaluation.backends import endpoint_backend\nfrom gaca_train.evaluation import play_chat_jobs"
    )
    assert _loaded_after(endpoint_only) == []
    assert "torch" in _loaded_after("from gaca_train.rollout import run_rollout")  # the check sees torch arrive


def test_a_subprocess_worker_of_the_rollout_pool_starts_without_torch():
    # The workers' memory maps show whether libtorch was loaded into them; the parent's sys.modules too.
    code = """
from gaca_train.rollout.vector import RolloutPool
pool = RolloutPool("GACA-CriticalChain-v0", 2, {"num_tasks": 2}, mode="async")
try:
    first = pool.reset(["train-0", "train-1"], seed=0)
    assert first[0][0] and first[1][0], first
    maps = [open(f"/proc/{p.pid}/maps").read() for p in pool.envs.processes]
    assert len(maps) == 2 and all("libc" in m for m in maps)
    print("workers with libtorch:", sum("libtorch" in m for m in maps), file=sys.stderr)
    assert not any("libtorch" in m for m in maps)
finally:
    pool.close()
"""
    assert _loaded_after(code) == []


def _documented_names() -> tuple[set[str], set[str]]:
    """Dotted ``gaca_train.…`` names and ``gaca_train/….py`` paths that README.md and docs/*.md mention."""
    dotted, paths = set(), set()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        dotted |= {m.rstrip(".") for m in re.findall(r"\bgaca_train(?:\.[A-Za-z_][A-Za-z0-9_]*)+", text)}
        paths |= set(re.findall(r"(?<![\w/])gaca_train/[A-Za-z0-9_/]+\.py\b", text))
    return dotted, paths


def _resolve(name: str) -> object:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            value = getattr(value, attr)
        return value
    raise ModuleNotFoundError(name)


def test_every_gaca_train_name_and_path_the_docs_mention_resolves_at_its_new_home():
    dotted, paths = _documented_names()
    assert len(dotted) > 10 and len(paths) > 3  # the docs do name modules; the reader finds them
    old = sorted(n for n in dotted if any(n == o or n.startswith(f"{o}.") for o in MOVED))
    assert old == []  # the docs speak of the new homes
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for name in sorted(dotted):
            _resolve(name)
    assert sorted(p for p in paths if not (ROOT / p).is_file()) == []
