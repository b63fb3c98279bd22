"""Estimator inputs at the edges: huge step indices, strings, option types, copies (issue 17)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gaca_train.estimators.advantages import compute_advantages, discounted_returns, grpo_advantages
from gaca_train.estimators.options import ESTIMATORS, EstimatorConfig
from gaca_train.estimators.reference import reference_advantages
from gaca_train.estimators.rows import StepRows
from tests.gaca_train.batches import two_trajectory_batch


def columns() -> dict[str, list]:
    return dict(
        group=[0, 0], traj=[0, 1], step=[0, 0], anchor=[1, 1], reward=[0.0, 1.0], nll=[1.0, 2.0], valid=[True, True]
    )


# ---------------------------------------------------------------------------------------------
# Step indices near the top of int64


@pytest.mark.parametrize("top", [2**62 - 1, 2**63 - 1])
def test_huge_step_indices_keep_trajectories_apart(top):
    # Five trajectories and a step of ~2**62 take the sorted path. A combined sort key
    # traj * (max slot + 1) + slot wraps around at 2**63 and interleaved trajectory 4 with 0.
    traj = torch.tensor([0, 0, 0, 1, 2, 3, 4, 4, 4])
    step = torch.tensor([0, 2, top, 0, 0, 0, 1, 2, 3])
    reward = torch.arange(1.0, 10.0, dtype=torch.float64)
    # gamma = 0.5. Trajectory 0: G(2) = 2 + 0.5**(top - 2) * 3 = 2 (to float64), G(0) = 1 + 0.25 * 2 = 1.5,
    # G(top) = 3. Trajectory 4: G(3) = 9, G(2) = 8 + 0.5 * 9 = 12.5, G(1) = 7 + 0.5 * 12.5 = 13.25.
    expected = torch.tensor([1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 13.25, 12.5, 9.0], dtype=torch.float64)
    torch.testing.assert_close(discounted_returns(reward, traj, step, 0.5), expected)
    rows = StepRows(group=[0] * 9, traj=traj, step=step, anchor=list(range(9)), reward=reward, nll=[1.0] * 9,
                    valid=[True] * 9)  # fmt: skip
    for estimator in ESTIMATORS:
        out = compute_advantages(rows, estimator, gamma=0.5)
        ref = reference_advantages(rows, estimator, gamma=0.5)
        torch.testing.assert_close(out.returns, torch.tensor(ref["returns"], dtype=torch.float64))
        torch.testing.assert_close(out.advantage, torch.tensor(ref["advantage"], dtype=torch.float64))


# ---------------------------------------------------------------------------------------------
# Strings where ids or flags belong


@pytest.mark.parametrize("as_array", [False, True])
@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "group",
            r"StepRows.group must hold integer ids, got strings; map string ids to integers first "
            r"\(gaca_train.estimators.rows.anchor_ids\(ids\) gives stable 64-bit ids\)",
        ),
        (
            "anchor",
            r"StepRows.anchor must hold integer ids, got strings; hash string anchor keys with "
            r"gaca_train.estimators.rows.anchor_ids\(keys\)",
        ),
        ("traj", r"StepRows.traj must hold integer ids, got strings"),
        ("valid", r"StepRows.valid must hold bools, got strings; pass True/False per row"),
        ("reward", r"StepRows.reward must hold numbers, got strings"),
    ],
)
def test_strings_name_the_field_and_the_fix(name, message, as_array):
    value = ["a", "b"] if name != "valid" else ["True", "False"]
    with pytest.raises(TypeError, match=message):
        StepRows(**{**columns(), name: np.array(value) if as_array else value})


def test_values_that_do_not_convert_name_the_field():
    with pytest.raises(TypeError, match=r"StepRows.nll must be a 1-D sequence of numbers, got \[1.0, None\]"):
        StepRows(**{**columns(), "nll": [1.0, None]})


# ---------------------------------------------------------------------------------------------
# Option types


@pytest.mark.parametrize("value", [np.float32(0.5), np.float64(0.5), np.int64(1), 1, 0.5])
def test_real_numbers_are_accepted_as_plain_floats(value):
    cfg = EstimatorConfig(gamma=value)
    assert type(cfg.gamma) is float and cfg.gamma == float(value)
    rows = two_trajectory_batch()
    same = compute_advantages(rows, "gaca", gamma=float(value)).advantage
    assert torch.equal(compute_advantages(rows, "gaca", gamma=value).advantage, same)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"gamma": True}, "gamma must be a finite number, not a bool, got True"),
        ({"eta": np.bool_(False)}, "eta must be a finite number, got np.False_"),
        ({"omega": "1.0"}, "omega must be a finite number, got '1.0'"),
    ],
)
def test_bools_and_strings_are_not_numbers(options, message):
    with pytest.raises(ValueError, match=message):
        EstimatorConfig(**options)
    with pytest.raises(ValueError, match=message):
        compute_advantages(two_trajectory_batch(), "gaca", **options)


# ---------------------------------------------------------------------------------------------
# The rows and the results own their memory


@pytest.mark.parametrize("kind", ["tensor", "numpy"])
def test_changing_the_inputs_afterwards_does_not_change_the_rows(kind):
    reward = np.array([0.0, 1.0]) if kind == "numpy" else torch.tensor([0.0, 1.0], dtype=torch.float64)
    anchor = np.array([1, 1]) if kind == "numpy" else torch.tensor([1, 1])
    rows = StepRows(**{**columns(), "reward": reward, "anchor": anchor})
    before = grpo_advantages(rows).advantage.clone()
    reward[1] = 5.0
    anchor[1] = 2
    assert rows.reward.tolist() == [0.0, 1.0] and rows.anchor.tolist() == [1, 1]
    torch.testing.assert_close(grpo_advantages(rows).advantage, before)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_results_share_no_memory_with_the_rows_or_each_other(estimator):
    rows = StepRows(**{**columns(), "reward": torch.tensor([0.0, 1.0], dtype=torch.float64),
                       "nll": torch.tensor([1.0, 2.0], dtype=torch.float64)})  # fmt: skip
    out = compute_advantages(rows, estimator)
    tensors = [t for t in vars(out).values() if isinstance(t, torch.Tensor)]
    tensors += [rows.reward, rows.nll]
    pointers = [t.untyped_storage().data_ptr() for t in tensors]
    assert len(set(pointers)) == len(pointers)
