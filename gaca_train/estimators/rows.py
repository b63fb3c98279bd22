"""Step rows: the estimators' input (DESIGN.md contract 2).

One row per agent step, flat 1-D tensors of equal length R. A row is identified by its
trajectory id and step index; trajectory ids are global (unique across the batch), and every
trajectory belongs to exactly one group (one task instance played N times).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch

__all__ = ["StepRows", "anchor_ids"]

_INT_FIELDS = ("group", "traj", "step", "anchor")
_FLOAT_FIELDS = ("reward", "nll")


def anchor_ids(keys: Iterable[str]) -> torch.Tensor:
    """Maps string anchor keys to stable 64-bit integer ids.

    The id is the first 8 bytes of the key's BLAKE2b digest read as a signed little-endian
    integer, so it is the same in every process and on every machine (unlike Python's
    ``hash``, which is salted per process).

    Args:
        keys: R anchor keys (e.g. ``info["anchor_key"]`` or, for text anchors,
            ``info["anchor_text"]``).

    Returns:
        int64 tensor of shape [R].

    Raises:
        TypeError: if a key is not a string.
    """
    ids = []
    for i, key in enumerate(keys):
        if not isinstance(key, str):
            raise TypeError(f"anchor key {i} must be a str, got {type(key).__name__}")
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
        ids.append(int.from_bytes(digest, "little", signed=True))
    return torch.tensor(ids, dtype=torch.int64)


_EXPECTED = {"int": "integer ids", "float": "numbers", "bool": "bools"}
_STRING_HINT = {
    "anchor": "hash string anchor keys with gaca_train.estimators.rows.anchor_ids(keys), or build the rows with "
    "StepRows.from_steps and an `anchor_key` per record",
    "valid": "pass True/False per row (e.g. [v == 'True' for v in values])",
}


def _holds_strings(value: Any) -> bool:
    if isinstance(value, (str, bytes)):
        return True
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if kind is not None:  # a NumPy array: strings, bytes or objects
        return kind in "USO" and any(isinstance(v, (str, bytes)) for v in value.ravel().tolist())
    try:
        return any(_holds_strings(v) for v in value)
    except TypeError:  # not iterable
        return False


def _as_tensor(name: str, value: Any, kind: str) -> torch.Tensor:
    """Converts lists and arrays leniently (ints to int64, numbers to float); tensors keep their dtype.

    The result is always a copy, so that a later change to the caller's tensor or array cannot
    reach the rows (``torch.as_tensor`` would share a NumPy array's memory).
    """
    if isinstance(value, torch.Tensor):
        tensor = value.clone()
    else:
        try:
            tensor = torch.tensor(value)
        except (TypeError, ValueError, RuntimeError) as e:
            if _holds_strings(value):  # torch's own message here is "too many dimensions 'str'"
                hint = _STRING_HINT.get(
                    name,
                    "map string ids to integers first (gaca_train.estimators.rows.anchor_ids(ids) gives stable "
                    "64-bit ids)",
                )
                raise TypeError(f"StepRows.{name} must hold {_EXPECTED[kind]}, got strings; {hint}") from e
            raise TypeError(
                f"StepRows.{name} must be a 1-D sequence of {_EXPECTED[kind]}, got {value!r:.80}: {e}"
            ) from e
        if kind == "int" and not tensor.is_floating_point() and tensor.dtype != torch.bool:
            tensor = tensor.to(torch.int64)
        elif kind == "float" and not tensor.is_floating_point():
            tensor = tensor.to(torch.float32)
        elif kind == "bool" and tensor.numel() == 0:
            tensor = tensor.to(torch.bool)
    if tensor.dim() != 1:
        raise ValueError(f"StepRows.{name} must be 1-D, got shape {tuple(tensor.shape)}")
    return tensor


@dataclass(frozen=True)
class StepRows:
    """A batch of agent steps, one row per step (DESIGN.md contract 2).

    Attributes:
        group: int64 [R], the task group of the row (same task id, same initial state).
        traj: int64 [R], the trajectory id; unique across the batch, one group per trajectory.
        step: int64 [R], the step index within the trajectory (>= 0, unique per trajectory).
        anchor: int64 [R], the anchor key of the state before the action, hashed to 64 bits
            (see :func:`anchor_ids`).
        reward: float [R], the environment reward of the step.
        nll: float [R], the negative log-likelihood of the generated response under the
            rollout policy (mean or sum over its tokens).
        valid: bool [R], whether the response parsed into an action.

    Lists and NumPy arrays are converted to tensors, and every field is copied, so changing the
    caller's tensors afterwards does not change the rows. The rows are validated on construction,
    so every estimator can assume a well-formed batch.

    Raises:
        TypeError: naming the field, for strings (hash anchor keys with :func:`anchor_ids`) or
            values that do not convert to a tensor.
        ValueError: naming the field, for an empty batch, unequal lengths, a wrong dtype,
            non-finite rewards or NLLs, negative steps, a duplicate (traj, step) pair or a
            trajectory whose rows lie in two groups.
    """

    group: torch.Tensor
    traj: torch.Tensor
    step: torch.Tensor
    anchor: torch.Tensor
    reward: torch.Tensor
    nll: torch.Tensor
    valid: torch.Tensor

    def __post_init__(self) -> None:
        for name in _INT_FIELDS:
            object.__setattr__(self, name, _as_tensor(name, getattr(self, name), "int"))
        for name in _FLOAT_FIELDS:
            object.__setattr__(self, name, _as_tensor(name, getattr(self, name), "float"))
        object.__setattr__(self, "valid", _as_tensor("valid", self.valid, "bool"))
        self._validate()

    def __len__(self) -> int:
        return self.group.shape[0]

    def _validate(self) -> None:
        n = self.group.shape[0]
        if n == 0:
            raise ValueError("StepRows is empty: group has 0 rows; an estimator needs at least one step row")
        for f in fields(self):
            tensor = getattr(self, f.name)
            if tensor.shape[0] != n:
                raise ValueError(
                    f"StepRows.{f.name} has {tensor.shape[0]} rows but group has {n}; "
                    "every field needs one value per row"
                )
            if tensor.device != self.group.device:
                raise ValueError(f"StepRows.{f.name} is on {tensor.device} but group is on {self.group.device}")
        for name in _INT_FIELDS:
            dtype = getattr(self, name).dtype
            if dtype != torch.int64:
                raise ValueError(f"StepRows.{name} must be int64, got {dtype}")
        for name in _FLOAT_FIELDS:
            tensor = getattr(self, name)
            if not tensor.is_floating_point():
                raise ValueError(f"StepRows.{name} must be a float tensor, got {tensor.dtype}")
            bad = ~torch.isfinite(tensor)
            if bool(bad.any()):
                row = int(bad.nonzero()[0, 0])
                raise ValueError(f"StepRows.{name} must be finite, got {tensor[row].item()} at row {row}")
        if self.valid.dtype != torch.bool:
            raise ValueError(f"StepRows.valid must be bool, got {self.valid.dtype}")
        if bool((self.step < 0).any()):
            row = int((self.step < 0).nonzero()[0, 0])
            raise ValueError(f"StepRows.step must be >= 0, got {self.step[row].item()} at row {row}")
        self._validate_trajectories()

    def _validate_trajectories(self) -> None:
        # Sort rows by (traj, step): duplicates are then neighbours, and so are a trajectory's groups.
        order = torch.sort(self.step, stable=True).indices
        order = order[torch.sort(self.traj[order], stable=True).indices]
        traj, step, group = self.traj[order], self.step[order], self.group[order]
        same_traj = traj[1:] == traj[:-1]
        dup = same_traj & (step[1:] == step[:-1])
        if bool(dup.any()):
            i = int(dup.nonzero()[0, 0])
            raise ValueError(
                f"StepRows has a duplicate (traj, step) pair: traj={traj[i].item()}, step={step[i].item()} "
                "appears twice; each step of a trajectory must be one row"
            )
        split = same_traj & (group[1:] != group[:-1])
        if bool(split.any()):
            i = int(split.nonzero()[0, 0])
            raise ValueError(
                f"StepRows.traj {traj[i].item()} lies in two groups ({group[i].item()} and {group[i + 1].item()}); "
                "trajectory ids must be unique across the batch and each trajectory must belong to one group"
            )

    @classmethod
    def from_steps(cls, steps: Sequence[dict[str, Any]], *, reward_dtype: torch.dtype = torch.float32) -> StepRows:
        """Builds rows from a list of per-step records: the one way every player's steps become rows.

        Args:
            steps: one mapping per step with keys ``group``, ``traj``, ``step``, ``reward``,
                ``nll``, ``valid`` and either ``anchor`` (int) or ``anchor_key`` (str, hashed
                with :func:`anchor_ids`).
            reward_dtype: the rewards' dtype (the tabular study keeps float64).

        Returns:
            The validated rows.

        Raises:
            ValueError: if a record lacks a key, or the rows are invalid (see the class).
        """
        required = ("group", "traj", "step", "reward", "nll", "valid")
        for i, record in enumerate(steps):
            missing = [k for k in required if k not in record]
            if "anchor" not in record and "anchor_key" not in record:
                missing.append("anchor or anchor_key")
            if missing:
                raise ValueError(f"step record {i} lacks {', '.join(missing)}")
        if all("anchor" in record for record in steps):
            anchor = torch.tensor([record["anchor"] for record in steps], dtype=torch.int64)
        else:
            # Mixed records hash their string key; an int anchor is only used when every record has one.
            keys = [record.get("anchor_key") for record in steps]
            if any(key is None for key in keys):
                raise ValueError("step records mix int anchor and str anchor_key; give every record the same kind")
            anchor = anchor_ids(keys)
        return cls(
            group=torch.tensor([r["group"] for r in steps], dtype=torch.int64),
            traj=torch.tensor([r["traj"] for r in steps], dtype=torch.int64),
            step=torch.tensor([r["step"] for r in steps], dtype=torch.int64),
            anchor=anchor,
            reward=torch.tensor([float(r["reward"]) for r in steps], dtype=reward_dtype),
            nll=torch.tensor([float(r["nll"]) for r in steps], dtype=torch.float32),
            valid=torch.tensor([bool(r["valid"]) for r in steps], dtype=torch.bool),
        )

    def permute(self, order: torch.Tensor) -> StepRows:
        """Returns the same rows in another order (``order`` is a permutation of range(R))."""
        return StepRows(**{f.name: getattr(self, f.name)[order] for f in fields(self)})
