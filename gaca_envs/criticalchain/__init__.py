"""GACA-CriticalChain-v0: a diagnostic long-horizon text env for credit assignment.

Most steps are routine; a few forks decide the outcome, which shows only at the goal. States
recur across rollouts of a task (and within one, through no-op actions), so anchor groups form.
"""

from __future__ import annotations

from gaca_envs.criticalchain.env import NOTHING_HAPPENS, CriticalChainEnv
from gaca_envs.criticalchain.tasks import ChainTask, make_task

__all__ = ["NOTHING_HAPPENS", "ChainTask", "CriticalChainEnv", "make_task"]
