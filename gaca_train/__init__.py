"""GACA training library: credit-assignment estimators, multi-turn rollout and TRL trainer.

``import gaca_train`` and ``import gaca_train.advantages`` import torch only: no TRL and no env.
"""

from __future__ import annotations

__version__ = "0.1.0"
