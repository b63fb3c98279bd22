"""GACA training library: credit-assignment estimators, multi-turn rollout and TRL trainer.

The top-level names are imported lazily, on first access (a module ``__getattr__``, as TRL and
transformers do), so ``import gaca_train`` alone imports neither torch nor TRL, and
``from gaca_train import compute_advantages`` imports torch only (no TRL, no env)::

    from gaca_train import GACAConfig, GACATrainer  # imports TRL and the envs
    from gaca_train import StepRows, compute_advantages  # torch only
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> the submodule that defines it.
_EXPORTS: dict[str, str] = {
    "GACATrainer": "gaca_train.trainer",
    "GACAConfig": "gaca_train.config",
    "EstimatorConfig": "gaca_train.options",
    "ESTIMATORS": "gaca_train.options",
    "StepRows": "gaca_train.rows",
    "anchor_ids": "gaca_train.rows",
    "Advantages": "gaca_train.advantages",
    "compute_advantages": "gaca_train.advantages",
    "grpo_advantages": "gaca_train.advantages",
    "gigpo_advantages": "gaca_train.advantages",
    "gaca_advantages": "gaca_train.advantages",
    "reweight_advantages": "gaca_train.advantages",
}

__all__ = [
    "ESTIMATORS",
    "Advantages",
    "EstimatorConfig",
    "GACAConfig",
    "GACATrainer",
    "StepRows",
    "__version__",
    "anchor_ids",
    "compute_advantages",
    "gaca_advantages",
    "gigpo_advantages",
    "grpo_advantages",
    "reweight_advantages",
]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names come from __getattr__
    from gaca_train.advantages import (
        Advantages,
        compute_advantages,
        gaca_advantages,
        gigpo_advantages,
        grpo_advantages,
        reweight_advantages,
    )
    from gaca_train.config import GACAConfig
    from gaca_train.options import ESTIMATORS, EstimatorConfig
    from gaca_train.rows import StepRows, anchor_ids
    from gaca_train.trainer import GACATrainer


def __getattr__(name: str) -> Any:
    """Imports the submodule that defines ``name`` on first access and caches the value here."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gaca_train' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
