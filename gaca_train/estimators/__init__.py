"""Credit-assignment estimators: GRPO, GiGPO, GACA and NLL reweighting over flat step rows.

The ground floor of gaca_train: it imports nothing else of gaca_train, and torch only.
:mod:`~gaca_train.estimators.advantages` (the estimators, docs/method.md's formulas),
:mod:`~gaca_train.estimators.rows` (``StepRows``, anchor ids), :mod:`~gaca_train.estimators.options`
(``EstimatorConfig``), :mod:`~gaca_train.estimators.tree` (tree-shaped rollouts) and
:mod:`~gaca_train.estimators.reference` (a plain-Python reference of every formula).
The names below load on first use, so importing the package imports no torch.
"""

from gaca_train._compat import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("ESTIMATORS", "EstimatorConfig"), "gaca_train.estimators.options"),
    **dict.fromkeys(("StepRows", "anchor_ids"), "gaca_train.estimators.rows"),
    **dict.fromkeys(("Advantages", "compute_advantages", "discounted_returns", "gaca_advantages", "gigpo_advantages",
                     "grpo_advantages", "reweight_advantages"), "gaca_train.estimators.advantages"),
    **dict.fromkeys(("TrajectoryTree", "path_rows"), "gaca_train.estimators.tree"),
    "reference_advantages": "gaca_train.estimators.reference",
}  # fmt: skip
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
