"""Training: ``GACAConfig`` and ``GACATrainer`` (TRL's GRPOTrainer with multi-turn rollouts), and what they need.

On the oracle and rollout: :mod:`~gaca_train.training.config`, :mod:`~gaca_train.training.trainer`,
:mod:`~gaca_train.training.startup` (checks before a run), :mod:`~gaca_train.training.batching`
and :mod:`~gaca_train.training.packing` (micro-batches, prefix sharing),
:mod:`~gaca_train.training.precision`, :mod:`~gaca_train.training.memory` (the memory plan) and
:mod:`~gaca_train.training.flops`. The names below load on first use (TRL only then).
"""

from gaca_train._compat import lazy_exports

_EXPORTS = {"GACAConfig": "gaca_train.training.config", "GACATrainer": "gaca_train.training.trainer"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
