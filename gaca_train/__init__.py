"""GACA training library: credit-assignment estimators, multi-turn rollout and TRL trainer.

Six rooms, from the ground up: :mod:`gaca_train.estimators` < :mod:`gaca_train.rollout` <
:mod:`gaca_train.oracle` < :mod:`gaca_train.training`, with :mod:`gaca_train.evaluation` beside
training (on rollout) and :mod:`gaca_train.experiments` (recipes, studies, benchmarks) on top.
A room imports only rooms below it. The flat modules of earlier versions are aliases of their
new homes (:mod:`gaca_train._compat`).

The top-level names are imported lazily, on first access (a module ``__getattr__``, as TRL and
transformers do), so ``import gaca_train`` alone imports neither torch nor TRL, and
``from gaca_train import compute_advantages`` imports torch only (no TRL, no env)::

    from gaca_train import GACAConfig, GACATrainer  # imports TRL and the envs
    from gaca_train import StepRows, compute_advantages  # torch only
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gaca_train import _compat

__version__ = "0.1.0"

_compat.install()  # the old module names (gaca_train.advantages, gaca_train.config, ...) as aliases

# Public name -> the submodule that defines it.
_EXPORTS: dict[str, str] = {
    "GACATrainer": "gaca_train.training.trainer",
    "GACAConfig": "gaca_train.training.config",
    "EstimatorConfig": "gaca_train.estimators.options",
    "ESTIMATORS": "gaca_train.estimators.options",
    "StepRows": "gaca_train.estimators.rows",
    "anchor_ids": "gaca_train.estimators.rows",
    "Advantages": "gaca_train.estimators.advantages",
    "compute_advantages": "gaca_train.estimators.advantages",
    "grpo_advantages": "gaca_train.estimators.advantages",
    "gigpo_advantages": "gaca_train.estimators.advantages",
    "gaca_advantages": "gaca_train.estimators.advantages",
    "reweight_advantages": "gaca_train.estimators.advantages",
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
    from gaca_train.estimators.advantages import (
        Advantages,
        compute_advantages,
        gaca_advantages,
        gigpo_advantages,
        grpo_advantages,
        reweight_advantages,
    )
    from gaca_train.estimators.options import ESTIMATORS, EstimatorConfig
    from gaca_train.estimators.rows import StepRows, anchor_ids
    from gaca_train.training.config import GACAConfig
    from gaca_train.training.trainer import GACATrainer


def __getattr__(name: str) -> Any:
    """Imports the submodule that defines ``name`` on first access and caches the value here."""
    module = _EXPORTS.get(name)
    if module is None:
        moved = _compat.old_attribute(name)  # gaca_train.advantages and the other old module names
        if moved is None:
            raise AttributeError(f"module 'gaca_train' has no attribute {name!r}")
        return moved
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
