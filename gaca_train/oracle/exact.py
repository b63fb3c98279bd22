"""Exact Q and V of an observation-only policy, by dynamic programming over an env's outcome table.

For envs that list every outcome of an action with its probability (``env.unwrapped.step_outcomes``,
as GACA-CriticalChain-v0 does) and a policy whose action probabilities depend on the observation and
the admissible actions only (the tabular policy of :mod:`gaca_train.experiments.tabular`), the values are sums
over a finite tree of states:

    V(s) = sum_a pi(a | o(s)) Q(s, a),   Q(s, a) = sum_{s'} P(s' | s, a) [r + gamma V(s')]   (V = 0 at an end)

States are keyed by the env's anchor key, its step count (the step cap ends episodes) and the
observation (what the policy sees), and their values are memoised, so a pass visits each distinct
state once. Used to check the Monte-Carlo oracle (:mod:`gaca_train.oracle.monte_carlo`) exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["ExactValues"]

Distribution = Callable[[str, list[str]], np.ndarray]


class ExactValues:
    """Memoised exact values of one policy in one env.

    Args:
        env: an unwrapped env with ``restore_state`` and ``step_outcomes``.
        distribution: ``(observation, admissible actions) -> probabilities`` of the policy.
        gamma: discount.

    Raises:
        TypeError: if the env has no outcome table.
    """

    def __init__(self, env: Any, distribution: Distribution, gamma: float = 1.0) -> None:
        if not hasattr(env, "step_outcomes"):
            raise TypeError(f"{type(env).__name__} has no step_outcomes: exact values need the env's outcome table")
        self.env, self.distribution, self.gamma = env, distribution, gamma
        self._values: dict[tuple[str, int, str], float] = {}

    def q_and_v(self, snapshot: Any, action: str) -> tuple[float, float]:
        """Q(s, action) and V(s) of the state saved in ``snapshot``."""
        observation, info = self.env.restore_state(snapshot)
        return self._q(snapshot, action), self._value(snapshot, observation, info)

    def _value(self, snapshot: Any, observation: str, info: dict[str, Any]) -> float:
        key = (info["anchor_key"], snapshot.steps, observation)
        if key not in self._values:
            actions = list(info["admissible_actions"])
            probs = self.distribution(observation, actions)
            self._values[key] = float(sum(p * self._q(snapshot, a) for p, a in zip(probs, actions) if p > 0))
        return self._values[key]

    def _q(self, snapshot: Any, action: str) -> float:
        self.env.restore_state(snapshot)
        total = 0.0
        for probability, (obs, reward, _, _, info), after in self.env.step_outcomes(action):
            value = 0.0 if after is None else self._value(after, obs, info)
            total += probability * (reward + self.gamma * value)
        return total
