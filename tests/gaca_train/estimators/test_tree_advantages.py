"""Estimators over trees of branching rollouts (METHOD.md section 7): reference loop, identities, hand cases."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gaca_train.estimators.advantages import _episode_and_step_parts, _tree_parts, compute_advantages
from gaca_train.estimators.options import ESTIMATORS, EstimatorConfig
from gaca_train.estimators.reference import reference_advantages
from gaca_train.estimators.rows import StepRows
from gaca_train.estimators.tree import TrajectoryTree
from tests.gaca_train.batches import step_batches, tree_batches
from tests.gaca_train.estimators.test_advantages import option_sets

HYPOTHESIS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# The options of the estimator tests, without the verl-agent preset (it takes no tree).
tree_options = option_sets.map(lambda options: {**options, "preset": None})


@HYPOTHESIS
@given(batch=tree_batches(), estimator=st.sampled_from(ESTIMATORS), options=tree_options)
def test_tree_vectorised_equals_reference(batch, estimator, options):
    rows, parent = batch
    out = compute_advantages(rows, estimator, parent=torch.tensor(parent), **options)
    ref = reference_advantages(rows, estimator, parent=parent, **options)
    for name in ("episode_advantage", "step_advantage", "returns", "advantage"):
        expected = torch.tensor(ref[name], dtype=torch.float64)
        torch.testing.assert_close(getattr(out, name).double(), expected, atol=1e-5, rtol=1e-5, msg=name)
    assert out.has_step_signal.tolist() == ref["has_step_signal"]


@HYPOTHESIS
@given(rows=step_batches(), estimator=st.sampled_from(ESTIMATORS), options=tree_options)
def test_branching_off_is_bit_identical(rows, estimator, options):
    today = compute_advantages(rows, estimator, **options)
    for parent in (None, torch.full((len(rows),), -1, dtype=torch.int64), [-1] * len(rows)):
        out = compute_advantages(rows, estimator, parent=parent, **options)
        for name in ("advantage", "episode_advantage", "step_advantage", "returns", "episode_return"):
            assert torch.equal(getattr(out, name), getattr(today, name)), name


@HYPOTHESIS
@given(rows=step_batches(), options=tree_options)
def test_tree_formulas_without_continuations_are_sections_1_and_2(rows, options):
    # Section 7's special case, through the tree code itself: every trajectory a root and its own leaf.
    cfg = EstimatorConfig(**options)
    tree = TrajectoryTree.from_rows(rows.traj, rows.step, rows.group, torch.full_like(rows.traj, -1))
    flat, as_tree = _episode_and_step_parts(rows, cfg), _tree_parts(rows, cfg, tree)
    for name in ("episode_advantage", "step_advantage", "returns", "episode_return"):
        torch.testing.assert_close(getattr(as_tree, name), getattr(flat, name), atol=1e-7, rtol=1e-7, msg=name)


@HYPOTHESIS
@given(batch=tree_batches(), estimator=st.sampled_from(ESTIMATORS), options=tree_options, data=st.data())
def test_tree_order_invariance(batch, estimator, options, data):
    rows, parent = batch
    order = torch.tensor(data.draw(st.permutations(range(len(rows)))), dtype=torch.int64)
    base = compute_advantages(rows, estimator, parent=torch.tensor(parent), **options)
    permuted = compute_advantages(rows.permute(order), estimator, parent=torch.tensor(parent)[order], **options)
    torch.testing.assert_close(permuted.advantage, base.advantage[order], atol=1e-9, rtol=1e-9)


@HYPOTHESIS
@given(batch=tree_batches(), options=tree_options)
def test_tree_identities(batch, options):
    rows, parent = batch
    parent = torch.tensor(parent)
    gaca = compute_advantages(rows, "gaca", parent=parent, **{**options, "eta": 0.0, "modulation": "linear"})
    omega = options["lambda0"] / (1.0 - options["lambda0"])
    gigpo = compute_advantages(rows, "gigpo", parent=parent, **{**options, "omega": omega})
    torch.testing.assert_close(gaca.advantage, gigpo.advantage, atol=1e-4, rtol=1e-5)
    grpo = compute_advantages(rows, "grpo", parent=parent, **options)
    gigpo0 = compute_advantages(rows, "gigpo", parent=parent, **{**options, "omega": 0.0})
    torch.testing.assert_close(gigpo0.advantage, grpo.advantage, atol=0, rtol=0)


def hand_tree() -> tuple[StepRows, list[int]]:
    """Root A (s0 s1 s2, rewards 0 0 0), root D (s0 s4, 0 0), B continues A at step 1 (s1 s3, 0 10).

    Rows in order A0 A1 A2 B1 B2 D0 D1; B's prefix is A0.
    """
    rows = StepRows(
        group=[0] * 7,
        traj=[1, 1, 1, 2, 2, 3, 3],
        step=[0, 1, 2, 1, 2, 0, 1],
        anchor=[10, 11, 12, 11, 13, 10, 14],
        reward=torch.tensor([0.0, 0.0, 0.0, 0.0, 10.0, 0.0, 0.0], dtype=torch.float64),
        nll=torch.ones(7, dtype=torch.float64),
        valid=[True] * 7,
    )
    return rows, [-1, -1, -1, 1, 1, -1, -1]


def test_hand_tree_node_values_and_advantages():
    rows, parent = hand_tree()
    out = compute_advantages(rows, "gigpo", parent=parent, gamma=0.5, episode_norm="mean", step_norm="mean")
    # Leaves A, B, D return 0, 10 (A0 + B1 + B2), 0: baseline 10/3.
    # V^E: A0 has leaves A and B below it, (0 + 10) / 2 = 5; A1, A2 only A (B left A before step 1): 0;
    # B1, B2: 10; D0, D1: 0. A^E = V^E - 10/3.
    torch.testing.assert_close(out.episode_return, torch.tensor([5.0, 0, 0, 10, 10, 0, 0], dtype=torch.float64))
    a_e = [5 - 10 / 3, -10 / 3, -10 / 3, 20 / 3, 20 / 3, -10 / 3, -10 / 3]
    torch.testing.assert_close(out.episode_advantage, torch.tensor(a_e, dtype=torch.float64))
    # V^S (gamma 0.5): A0 = mean(G_A(0) = 0, G_B(0) = 0.25 * 10) = 1.25; B1 = 5, B2 = 10; the rest 0.
    torch.testing.assert_close(out.returns, torch.tensor([1.25, 0, 0, 5, 10, 0, 0], dtype=torch.float64))
    # Anchor groups: s0 {A0, D0} mean 0.625; s1 {A1, B1} (the branch point) mean 2.5; the rest alone.
    a_s = [0.625, -2.5, 0, 2.5, 0, -0.625, 0]
    torch.testing.assert_close(out.step_advantage, torch.tensor(a_s, dtype=torch.float64))
    assert out.has_step_signal.tolist() == [True, True, False, True, False, True, False]
    torch.testing.assert_close(out.advantage, torch.tensor(a_e, dtype=torch.float64) + torch.tensor(a_s))


def test_hand_tree_mean_std_episode_level():
    rows, parent = hand_tree()
    out = compute_advantages(rows, "grpo", parent=parent)
    # Leaves 0, 10, 0: mean 10/3, unbiased std sqrt(((10/3)^2 * 2 + (20/3)^2) / 2) = sqrt(100/3).
    std = (100 / 3) ** 0.5 + 1e-6
    expected = torch.tensor([5 - 10 / 3, -10 / 3, -10 / 3, 20 / 3, 20 / 3, -10 / 3, -10 / 3]) / std
    torch.testing.assert_close(out.advantage, expected.double())


def test_one_root_and_its_continuation_are_two_leaves_sharing_the_prefix():
    reward = torch.tensor([0.0, 10.0, 0.0], dtype=torch.float64)
    rows = StepRows(group=[0, 0, 0], traj=[0, 0, 1], step=[0, 1, 1], anchor=[1, 2, 2], reward=reward, nll=[1.0] * 3,
                    valid=[True] * 3)  # fmt: skip
    out = compute_advantages(rows, "gigpo", parent=[-1, -1, 0], step_norm="mean", episode_norm="mean")
    # Leaves: trajectory 0 (R 10) and 1 (R 0, its path is row 0 then its own row): baseline 5. Row 0 is
    # below both leaves (V^E 5, A^E 0); the branch state (anchor 2) holds rows 1 and 2: G 10 and 0.
    torch.testing.assert_close(out.episode_advantage, torch.tensor([0.0, 5.0, -5.0], dtype=torch.float64))
    torch.testing.assert_close(out.step_advantage, torch.tensor([0.0, 5.0, -5.0], dtype=torch.float64))


@pytest.mark.parametrize(
    ("parent", "message"),
    [
        ([-1, -1, 7, 7, -1, -1], "trajectory 2 has parent 7, which is not a trajectory of the batch"),
        ([-1, -1, 1, -1, -1, -1], "trajectory 2 has rows with different parents"),
        ([-1, -1, 3, 3, -1, -1], "trajectory 2 lies in another group than its parent; parent 3"),
        ([-1, -1, 2, 2, -1, -1], "trajectory 2 is its own parent"),
        ([2, 2, -1, -1, -1, -1], "trajectory 1 starts before its parent"),
        ([-1, -1, -1], r"parent must be int64 with one trajectory id per row \(shape \(6,\)\)"),
    ],
)
def test_bad_parents_are_clear_errors(parent, message):
    rows = StepRows(group=[0, 0, 0, 0, 1, 1], traj=[1, 1, 2, 2, 3, 3], step=[0, 1, 1, 2, 0, 1],
                    anchor=[1, 2, 2, 3, 1, 2], reward=[0.0] * 6, nll=[1.0] * 6, valid=[True] * 6)  # fmt: skip
    with pytest.raises(ValueError, match=message):
        compute_advantages(rows, "gaca", parent=parent)


def test_a_cycle_of_parents_is_an_error():
    rows = StepRows(group=[0] * 4, traj=[1, 1, 2, 2], step=[0, 1, 0, 1], anchor=[1, 2, 1, 3], reward=[0.0] * 4,
                    nll=[1.0] * 4, valid=[True] * 4)  # fmt: skip
    with pytest.raises(ValueError, match="trajectory 1 has itself as an ancestor: parents must form a tree"):
        compute_advantages(rows, "gaca", parent=[2, 2, 1, 1])


def test_verl_agent_preset_takes_no_tree():
    rows, parent = hand_tree()
    with pytest.raises(ValueError, match="preset='verl-agent' takes no tree"):
        compute_advantages(rows, "gigpo", parent=parent, preset="verl-agent")
