"""The oracle: true step advantages, measured (Monte-Carlo from snapshots) or computed (exactly), and metrics.

On rollout: :mod:`~gaca_train.oracle.monte_carlo` (``estimate_advantages``: A* from continuations of
restored snapshots), :mod:`~gaca_train.oracle.exact` (exact values of small tabular envs) and
:mod:`~gaca_train.oracle.metrics` (how well an estimator's advantages agree with A*).

This package took the name of the former ``gaca_train.oracle`` module, whose public names it
re-exports from ``monte_carlo`` on first use.
"""

from gaca_train._compat import lazy_exports

_EXPORTS = dict.fromkeys(("ForcedFirst", "OracleConfig", "OracleEstimates", "OracleTarget",
                          "estimate_advantages", "pick_rows"), "gaca_train.oracle.monte_carlo")  # fmt: skip
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
