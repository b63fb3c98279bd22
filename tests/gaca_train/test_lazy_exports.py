"""``gaca_train``'s top-level names are imported lazily: the package alone imports no torch or TRL."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import gaca_train

HEAVY = ("torch", "trl", "transformers", "gymnasium", "gaca_envs")


def modules_after(code: str) -> dict[str, bool]:
    """Which heavy modules ``code`` leaves in sys.modules, run in a fresh interpreter."""
    probe = f"import sys, json; {code}; print(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_import_gaca_train_imports_no_torch_and_no_trl():
    assert not any(modules_after("import gaca_train; gaca_train.__version__").values())


def test_estimator_names_import_torch_only():
    loaded = modules_after("from gaca_train import StepRows, compute_advantages, EstimatorConfig")
    assert loaded == {"torch": True, "trl": False, "transformers": False, "gymnasium": False, "gaca_envs": False}


def test_trainer_and_config_import_from_the_top_level():
    from gaca_train import GACAConfig, GACATrainer
    from gaca_train.training.config import GACAConfig as config_class
    from gaca_train.training.trainer import GACATrainer as trainer_class

    assert GACATrainer is trainer_class and GACAConfig is config_class


def test_every_export_resolves_and_is_listed():
    assert set(gaca_train.__all__) == {"__version__", *gaca_train._EXPORTS}
    for name in gaca_train.__all__:
        assert getattr(gaca_train, name) is not None, name
        assert name in dir(gaca_train), name
    with pytest.raises(AttributeError, match="module 'gaca_train' has no attribute 'GACATrainr'"):
        gaca_train.GACATrainr  # noqa: B018
