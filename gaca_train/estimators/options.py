"""Estimator options: one validated dataclass shared by the library, the trainer and the scripts.

Every field is a METHOD.md option; where a value is our choice rather than the paper's, its
help text says so. The trainer's ``GACAConfig`` inherits these fields (TRL's parser reads them from there).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["ESTIMATORS", "EstimatorConfig"]

ESTIMATORS: tuple[str, ...] = ("grpo", "gigpo", "gaca", "reweight")
_CHOICES: dict[str, tuple[Any, ...]] = {
    "modulation": ("linear", "sigmoid"),
    "episode_norm": ("mean_std", "mean"),
    "step_norm": ("mean_std", "mean"),
    "nll_norm": ("group", "batch"),
    "reweight_base": ("grpo", "gigpo"),
    "preset": (None, "verl-agent"),
}


@dataclass
class EstimatorConfig:
    """Options of the advantage estimators (METHOD.md sections 1-6 and the presets).

    Raises:
        ValueError: from ``__post_init__``, naming the field, the value and what is expected.
    """

    gamma: float = field(default=0.95, metadata={"help": "Discount of the step-level return-to-go, in [0, 1]."})
    omega: float = field(default=1.0, metadata={"help": "GiGPO's fixed weight of the step-level advantage, >= 0."})
    lambda0: float = field(
        default=0.5,
        metadata={
            "help": "GACA's base weight of the step-level signal, in [0, 1); eta = 0 is GiGPO(lambda0/(1-lambda0))."
        },
    )
    eta: float = field(default=0.25, metadata={"help": "Slope of the weight in the standardised NLL z, >= 0."})
    modulation: str = field(
        default="linear",
        metadata={"help": "'linear': clip(lambda0 + eta z); 'sigmoid': sigmoid(logit(lambda0) + eta z)."},
    )
    lambda_min: float = field(default=0.0, metadata={"help": "Lower clip of the linear weight, in [0, lambda0]."})
    lambda_max: float = field(default=1.0, metadata={"help": "Upper clip of the linear weight, in [lambda0, 1]."})
    episode_norm: str = field(
        default="mean_std", metadata={"help": "Episode-level normalisation: 'mean_std' (z-score) or 'mean'."}
    )
    step_norm: str = field(default="mean_std", metadata={"help": "Anchor-group normalisation: 'mean_std' or 'mean'."})
    nll_norm: str = field(
        default="group", metadata={"help": "Standardise the NLL over the rows of the row's group or of the batch."}
    )
    eps: float = field(default=1e-6, metadata={"help": "Added to every standard deviation, > 0."})
    invalid_action_penalty: float = field(
        default=0.1, metadata={"help": "Subtracted from the reward of a row whose response did not parse, >= 0."}
    )
    reweight_base: str = field(
        default="grpo", metadata={"help": "The advantage that scalar NLL reweighting rescales: 'grpo' or 'gigpo'."}
    )
    w_max: float = field(
        default=3.0, metadata={"help": "Upper clip of the reweighting factor 1 + eta z (our choice), > 0."}
    )
    preset: str | None = field(
        default=None,
        metadata={"help": "'verl-agent' reproduces the public GiGPO implementation's numbers (METHOD.md)."},
    )

    def __post_init__(self) -> None:
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                raise ValueError(f"{name} must be one of {choices}, got {value!r}")
        for f in fields(EstimatorConfig):  # not fields(self): GACAConfig inherits these options
            if f.name in _CHOICES:
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool):  # bool is an int to Python, but gamma=True is a mistake
                raise ValueError(f"{f.name} must be a finite number, not a bool, got {value!r}")
            if not (isinstance(value, numbers.Real) and math.isfinite(value)):
                raise ValueError(f"{f.name} must be a finite number, got {value!r}")
            setattr(self, f.name, float(value))  # NumPy scalars become plain floats
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
        for name in ("omega", "eta", "invalid_action_penalty"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.eps <= 0:
            raise ValueError(f"eps must be > 0, got {self.eps}")
        if self.w_max <= 0:
            raise ValueError(f"w_max must be > 0, got {self.w_max}")
        if not 0.0 <= self.lambda0 < 1.0:
            raise ValueError(f"lambda0 must be in [0, 1) (the blend divides by 1 - lambda0), got {self.lambda0}")
        if self.modulation == "sigmoid" and self.lambda0 == 0.0:
            raise ValueError("lambda0 must be > 0 with modulation='sigmoid' (logit(0) is -inf), got 0.0")
        if not 0.0 <= self.lambda_min <= self.lambda0 <= self.lambda_max <= 1.0:
            raise ValueError(
                "need 0 <= lambda_min <= lambda0 <= lambda_max <= 1, got "
                f"lambda_min={self.lambda_min}, lambda0={self.lambda0}, lambda_max={self.lambda_max}"
            )

    def to_kwargs(self) -> dict[str, Any]:
        """The options as keyword arguments of :func:`gaca_train.estimators.advantages.compute_advantages`."""
        return {name: getattr(self, name) for name in EstimatorConfig.option_names()}

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        """Names of every estimator option, in declaration order (a subclass's own fields excluded)."""
        return tuple(f.name for f in fields(EstimatorConfig))
