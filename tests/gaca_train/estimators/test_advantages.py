"""The vectorised estimators against METHOD.md: reference loop, identities, hand-computed cases."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gaca_train.estimators.advantages import (
    compute_advantages,
    discounted_returns,
    gaca_advantages,
    gigpo_advantages,
    grpo_advantages,
    reweight_advantages,
)
from gaca_train.estimators.options import ESTIMATORS, EstimatorConfig
from gaca_train.estimators.reference import reference_advantages
from gaca_train.estimators.rows import StepRows
from tests.gaca_train.batches import step_batches, two_trajectory_batch

HYPOTHESIS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

option_sets = st.fixed_dictionaries(
    {
        "gamma": st.sampled_from([0.0, 0.5, 0.95, 1.0]),
        "omega": st.sampled_from([0.0, 0.5, 1.0, 2.0]),
        "lambda0": st.sampled_from([0.1, 0.5, 0.8]),
        "eta": st.sampled_from([0.0, 0.25, 1.0, 5.0]),
        "modulation": st.sampled_from(["linear", "sigmoid"]),
        "episode_norm": st.sampled_from(["mean_std", "mean"]),
        "step_norm": st.sampled_from(["mean_std", "mean"]),
        "nll_norm": st.sampled_from(["group", "batch"]),
        "invalid_action_penalty": st.sampled_from([0.0, 0.1, 1.0]),
        "reweight_base": st.sampled_from(["grpo", "gigpo"]),
        "w_max": st.sampled_from([1.5, 3.0]),
        "preset": st.sampled_from([None, "verl-agent"]),
    }
)


def assert_close(actual: torch.Tensor, expected, atol: float = 1e-9) -> None:
    expected = torch.as_tensor(expected, dtype=torch.float64)
    torch.testing.assert_close(actual.to(torch.float64), expected, atol=atol, rtol=1e-9)


def as64(rows: StepRows) -> StepRows:
    return StepRows(
        group=rows.group,
        traj=rows.traj,
        step=rows.step,
        anchor=rows.anchor,
        reward=rows.reward.double(),
        nll=rows.nll.double(),
        valid=rows.valid,
    )


# ---------------------------------------------------------------------------------------------
# Vectorised == reference loop


@HYPOTHESIS
@given(rows=step_batches(), estimator=st.sampled_from(ESTIMATORS), options=option_sets)
def test_vectorised_equals_reference(rows, estimator, options):
    rows = as64(rows)
    out = compute_advantages(rows, estimator, **options)
    ref = reference_advantages(rows, estimator, **options)
    # Large z-scores divide by (std + eps) with std near 0; compare with a tolerance relative to scale.
    for name in ("episode_advantage", "step_advantage", "returns", "advantage"):
        expected = torch.tensor(ref[name], dtype=torch.float64)
        torch.testing.assert_close(getattr(out, name), expected, atol=1e-7, rtol=1e-7, msg=name)
    assert out.has_step_signal.tolist() == ref["has_step_signal"]
    if ref["weight"] is None:
        assert out.weight is None
    else:
        torch.testing.assert_close(out.weight, torch.tensor(ref["weight"], dtype=torch.float64), atol=1e-9, rtol=1e-9)


# ---------------------------------------------------------------------------------------------
# METHOD.md identities, each its own test


@HYPOTHESIS
@given(rows=step_batches(), lambda0=st.sampled_from([0.0, 0.2, 0.5, 0.75]), options=option_sets)
def test_gaca_with_eta_zero_is_gigpo_with_matching_omega(rows, lambda0, options):
    options = {**options, "lambda0": lambda0, "eta": 0.0, "modulation": "linear"}
    gaca = gaca_advantages(as64(rows), **options)
    gigpo = gigpo_advantages(as64(rows), **{**options, "omega": lambda0 / (1.0 - lambda0)})
    assert_close(gaca.advantage, gigpo.advantage)


def test_gaca_default_lambda0_is_gigpo_omega_one():
    rows = as64(two_trajectory_batch(nll=[0.3, 2.0, 1.1, 0.7]))
    assert_close(gaca_advantages(rows, eta=0.0).advantage, gigpo_advantages(rows, omega=1.0).advantage)


@HYPOTHESIS
@given(rows=step_batches(), options=option_sets)
def test_gigpo_with_omega_zero_is_grpo(rows, options):
    rows = as64(rows)
    assert_close(
        gigpo_advantages(rows, **{**options, "omega": 0.0}).advantage, grpo_advantages(rows, **options).advantage
    )


@HYPOTHESIS
@given(rows=step_batches(), options=option_sets, nll=st.floats(0.0, 5.0))
def test_gaca_with_equal_nll_is_gigpo(rows, options, nll):
    rows = as64(rows)
    flat = StepRows(**{**vars_of(rows), "nll": torch.full_like(rows.nll, nll)})
    omega = options["lambda0"] / (1.0 - options["lambda0"])
    assert_close(
        gaca_advantages(flat, **options).advantage, gigpo_advantages(flat, **{**options, "omega": omega}).advantage
    )


@HYPOTHESIS
@given(rows=step_batches(), estimator=st.sampled_from(ESTIMATORS), options=option_sets, data=st.data())
def test_order_invariance(rows, estimator, options, data):
    rows = as64(rows)
    order = torch.tensor(data.draw(st.permutations(range(len(rows)))), dtype=torch.int64)
    base = compute_advantages(rows, estimator, **options)
    permuted = compute_advantages(rows.permute(order), estimator, **options)
    torch.testing.assert_close(permuted.advantage, base.advantage[order], atol=1e-9, rtol=1e-9)


def vars_of(rows: StepRows) -> dict[str, torch.Tensor]:
    return {name: getattr(rows, name) for name in ("group", "traj", "step", "anchor", "reward", "nll", "valid")}


# ---------------------------------------------------------------------------------------------
# Hand-computed cases (two_trajectory_batch, gamma = 0.5, "mean" norms unless said)
#
# Returns-to-go: G_A0 = 0 + 0.5 * 10 = 5, G_A1 = 10, G_B0 = G_B1 = 0.
# Episode: R_A = 10, R_B = 0, group mean 5 -> A^E = [5, 5, -5, -5].
# Anchor s0 holds A0 (G = 5) and B0 (G = 0), mean 2.5 -> A^S = [2.5, 0, -2.5, 0]; s1, s2 alone.

MEAN = {"gamma": 0.5, "episode_norm": "mean", "step_norm": "mean"}


def test_hand_grpo_and_gigpo():
    rows = two_trajectory_batch()
    out = grpo_advantages(rows, **MEAN)
    assert_close(out.returns, [5.0, 10.0, 0.0, 0.0])
    assert_close(out.advantage, [5.0, 5.0, -5.0, -5.0])
    assert_close(out.step_advantage, [2.5, 0.0, -2.5, 0.0])
    assert out.has_step_signal.tolist() == [True, False, True, False]
    # GiGPO, omega = 1: A^E + A^S.
    assert_close(gigpo_advantages(rows, **MEAN).advantage, [7.5, 5.0, -7.5, -5.0])
    # omega = 2: [5 + 5, 5, -5 - 5, -5].
    assert_close(gigpo_advantages(rows, omega=2.0, **MEAN).advantage, [10.0, 5.0, -10.0, -5.0])


def test_hand_mean_std_norms():
    rows = two_trajectory_batch()
    out = gigpo_advantages(rows, gamma=0.5)
    # Episode: std of {10, 0} (unbiased) = sqrt(50); A^E_A = 5 / (sqrt(50) + 1e-6).
    # Step: std of {5, 0} = sqrt(12.5); A^S_A0 = 2.5 / (sqrt(12.5) + 1e-6).
    ae = 5.0 / (math.sqrt(50.0) + 1e-6)
    as_ = 2.5 / (math.sqrt(12.5) + 1e-6)
    assert_close(out.advantage, [ae + as_, ae, -ae - as_, -ae])


def test_hand_gaca_linear():
    # NLL [1.5, 1, 0.5, 1]: group mean 1, unbiased std sqrt(0.5 / 3), z = [+-sqrt(1.5), 0].
    # eta = 1 saturates: lambda_A0 = clip(0.5 + 1.22) = 1, lambda_B0 = clip(0.5 - 1.22) = 0;
    # A1, B1 have no anchor partner: lambda0 = 0.5.
    # A_A0 = (0 * 5 + 1 * 2.5) / 0.5 = 5;  A_B0 = (1 * -5 + 0 * -2.5) / 0.5 = -10;
    # A_A1 = (0.5 * 5 + 0.5 * 0) / 0.5 = 5; A_B1 = -5.
    rows = two_trajectory_batch(nll=[1.5, 1.0, 0.5, 1.0])
    out = gaca_advantages(rows, eta=1.0, **MEAN)
    assert_close(out.weight, [1.0, 0.5, 0.0, 0.5])
    assert_close(out.advantage, [5.0, 5.0, -10.0, -5.0])
    z = math.sqrt(1.5)
    assert_close(out.criticality, [z, 0.0, -z, 0.0], atol=1e-5)  # eps = 1e-6 in the denominator


def test_hand_gaca_sigmoid():
    # lambda = sigmoid(logit(0.5) + 0.5 z) = sigmoid(+-0.5 sqrt(1.5)) on A0 / B0.
    rows = two_trajectory_batch(nll=[1.5, 1.0, 0.5, 1.0])
    out = gaca_advantages(rows, eta=0.5, modulation="sigmoid", **MEAN)
    z = math.sqrt(1.5) / (1 + 1e-6 / math.sqrt(0.5 / 3))
    lam_a0 = 1 / (1 + math.exp(-0.5 * z))
    lam_b0 = 1 - lam_a0
    assert_close(out.weight, [lam_a0, 0.5, lam_b0, 0.5])
    expected = [
        ((1 - lam_a0) * 5 + lam_a0 * 2.5) / 0.5,
        5.0,
        ((1 - lam_b0) * -5 + lam_b0 * -2.5) / 0.5,
        -5.0,
    ]
    assert_close(out.advantage, expected)


def test_hand_reweight():
    # z = [s, 0, -s, 0] with s = sqrt(1.5); eta = 0.5 -> raw w = [1 + s/2, 1, 1 - s/2, 1];
    # w_max = 1.5 clips the first to 1.5; group mean of w = (1.5 + 1 + (1 - s/2) + 1) / 4;
    # A = w / mean(w) * A^E with A^E = [5, 5, -5, -5].
    rows = two_trajectory_batch(nll=[1.5, 1.0, 0.5, 1.0])
    out = reweight_advantages(rows, eta=0.5, w_max=1.5, **MEAN)
    s = math.sqrt(1.5) / (1 + 1e-6 / math.sqrt(0.5 / 3))
    raw = [1.5, 1.0, 1 - s / 2, 1.0]
    mean = sum(raw) / 4
    assert_close(out.weight, [w / mean for w in raw])
    assert_close(out.advantage, [w / mean * a for w, a in zip(raw, [5, 5, -5, -5])])
    assert out.weight.mean().item() == pytest.approx(1.0)
    # Reweighting GiGPO instead: base [7.5, 5, -7.5, -5].
    out = reweight_advantages(rows, eta=0.5, w_max=1.5, reweight_base="gigpo", **MEAN)
    assert_close(out.advantage, [w / mean * a for w, a in zip(raw, [7.5, 5, -7.5, -5])])


def test_hand_invalid_action_penalty():
    # B1 invalid, penalty 0.1: R_B = -0.1, group mean 4.95 -> A^E = [5.05, 5.05, -5.05, -5.05].
    # The penalty is B1's own: G_B0 = 0 + 0.5 * 0 = 0, G_B1 = 0 - 0.1; anchor s0 {5, 0}, mean 2.5 -> A^S_A0 = 2.5.
    rows = two_trajectory_batch(valid=[True, True, True, False])
    out = gigpo_advantages(rows, **MEAN)
    assert_close(out.returns, [5.0, 10.0, 0.0, -0.1])
    assert_close(out.advantage, [7.55, 5.05, -7.55, -5.05])


def test_issue_degenerate_batch_gets_no_advantage():
    # Every response malformed, the state never moves: before, G = [-0.195, -0.1] per trajectory put
    # +-0.866 into the anchor group from time-to-truncation alone; now every row's G is -0.1.
    rows = StepRows(group=[0] * 4, traj=[0, 0, 1, 1], step=[0, 1, 0, 1], anchor=[7] * 4, reward=[0.0] * 4,
                    nll=[3.0, 4.0, 2.0, 5.0], valid=[False] * 4)  # fmt: skip
    for estimator in ESTIMATORS:
        out = compute_advantages(rows, estimator, invalid_action_penalty=0.1)
        assert out.advantage.abs().max().item() == 0.0, estimator


@st.composite
def degenerate_groups(draw: st.DrawFn) -> tuple[StepRows, list[int] | None]:
    """Groups where no action changes the state or the reward: one anchor per group, env reward 0, every row
    of a group equally valid, every episode cut at the same step cap; with or without branching trees."""
    n_groups = draw(st.integers(1, 3))
    length = draw(st.integers(1, 6))
    group, traj, step, anchor, valid, parent = [], [], [], [], [], []
    next_traj = 0
    tree = draw(st.booleans())
    for g in range(n_groups):
        ok = draw(st.booleans())
        roots = list(range(next_traj, next_traj + draw(st.integers(2, 4))))  # a group: two rollouts or more
        next_traj += len(roots)
        trajs = [(t, -1, 0) for t in roots]
        if tree:
            for _ in range(draw(st.integers(0, 3))):
                p, _, start = trajs[draw(st.integers(0, len(trajs) - 1))]
                trajs.append((next_traj, p, draw(st.integers(start, length - 1))))
                next_traj += 1
        for t, p, start in trajs:
            for s in range(start, length):
                group.append(g), traj.append(t), step.append(s), anchor.append(1000 + g)
                valid.append(ok), parent.append(p)
    nll = draw(st.lists(st.floats(0.0, 5.0), min_size=len(group), max_size=len(group)))
    rows = StepRows(group=group, traj=traj, step=step, anchor=anchor, reward=[0.0] * len(group), nll=nll,
                    valid=valid)  # fmt: skip
    return rows, (parent if tree else None)


@HYPOTHESIS
@given(batch=degenerate_groups(), estimator=st.sampled_from(ESTIMATORS), options=option_sets)
def test_no_change_no_advantage(batch, estimator, options):
    # docs/method.md section 6's invariant, every estimator and preset, with and without trees.
    rows, parent = batch
    if parent is not None and options["preset"] == "verl-agent":
        options = {**options, "preset": None}  # the preset takes no tree
    out = compute_advantages(rows, estimator, parent=parent, **options)
    assert out.advantage.abs().max().item() == 0.0


def test_hand_verl_agent_preset():
    # Episode score per row, penalty charged to the row: [10, 10, 0, -0.1]; mean over the rows 4.975
    # -> A^E = [5.025, 5.025, -4.975, -5.075]. Returns from raw rewards, then the penalty:
    # [5, 10, 0, -0.1]; anchor s0 {5, 0} -> A^S = [2.5, 0, -2.5, 0].
    rows = two_trajectory_batch(valid=[True, True, True, False])
    out = gigpo_advantages(rows, preset="verl-agent", **MEAN)
    assert_close(out.episode_advantage, [5.025, 5.025, -4.975, -5.075])
    assert_close(out.returns, [5.0, 10.0, 0.0, -0.1])
    assert_close(out.advantage, [7.525, 5.025, -7.475, -5.075])


def test_verl_agent_singleton_group_keeps_raw_score():
    # A group of one row: mean 0, std 1 -> A^E = R (mean norm) or R / (1 + eps) (mean_std).
    rows = StepRows(group=[0], traj=[0], step=[0], anchor=[1], reward=torch.tensor([3.0], dtype=torch.float64),
                    nll=[1.0], valid=[True])  # fmt: skip
    assert_close(grpo_advantages(rows, preset="verl-agent", episode_norm="mean").advantage, [3.0])
    assert_close(grpo_advantages(rows, preset="verl-agent").advantage, [3.0 / (1 + 1e-6)])
    # Without the preset, a group of one trajectory has no episode signal.
    assert_close(grpo_advantages(rows).advantage, [0.0])


def test_loop_puts_rows_of_one_trajectory_in_one_anchor_group():
    # A loop: trajectory 0 visits anchor 9 at steps 0 and 2. Rewards [0, 0, 1], gamma 0.5:
    # G = [0.25, 0.5, 1]; anchor 9 holds G 0.25 and 1, mean 0.625 -> A^S = [-0.375, 0, 0.375].
    rows = StepRows(
        group=[0, 0, 0], traj=[0, 0, 0], step=[0, 1, 2], anchor=[9, 4, 9], reward=[0.0, 0.0, 1.0],
        nll=[1.0, 1.0, 1.0], valid=[True, True, True],
    )  # fmt: skip
    out = gigpo_advantages(rows, **MEAN)
    assert_close(out.returns, [0.25, 0.5, 1.0])
    assert_close(out.step_advantage, [-0.375, 0.0, 0.375])


def test_discounted_returns_with_gaps_and_long_trajectories():
    # Steps 0, 2, 3 with rewards 1, 0, 4 and gamma 0.5: G_3 = 4, G_2 = 0 + 0.5 * 4 = 2,
    # G_0 = 1 + 0.5^2 * 2 = 1.5 (the gap of two steps is discounted twice).
    out = discounted_returns(
        torch.tensor([4.0, 1.0, 0.0]), torch.tensor([0, 0, 0]), torch.tensor([3, 0, 2]), gamma=0.5
    )
    assert_close(out, [4.0, 1.5, 2.0])
    # 20,000 steps with gamma 0.5: gamma^20000 underflows, the scan must not produce inf/nan.
    n = 20_000
    reward = torch.zeros(n, dtype=torch.float64)
    reward[-1] = 1.0
    g = discounted_returns(reward, torch.zeros(n, dtype=torch.int64), torch.arange(n), gamma=0.5)
    assert torch.isfinite(g).all()
    assert g[-1].item() == 1.0 and g[-2].item() == 0.5 and g[0].item() == 0.0


# ---------------------------------------------------------------------------------------------
# dtypes, devices, diagnostics


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_output_dtype_follows_rewards(dtype, estimator):
    rows = two_trajectory_batch(nll=[1.5, 1.0, 0.5, 1.0])
    rows = StepRows(**{**vars_of(rows), "reward": rows.reward.to(dtype)})
    out = compute_advantages(rows, estimator, **MEAN)
    assert out.advantage.dtype == dtype
    assert out.advantage.device.type == "cpu"
    ref = compute_advantages(as64(rows), estimator, **MEAN).advantage
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(out.advantage.double(), ref, atol=tol * 10, rtol=tol)


def test_metrics_report_the_diagnostics():
    rows = two_trajectory_batch(nll=[1.5, 1.0, 0.5, 1.0])
    m = gaca_advantages(rows, eta=1.0, **MEAN).metrics
    assert m["advantage/step_signal_share"] == 0.5
    # Anchor groups: {A0, B0}, {A1}, {B1} -> sizes 2, 1, 1.
    assert m["anchor/groups"] == 3.0
    assert m["anchor/size_1"] == pytest.approx(2 / 3)
    assert m["anchor/size_2_3"] == pytest.approx(1 / 3)
    assert m["anchor/group_size_max"] == 2.0
    assert m["advantage/lambda_mean"] == pytest.approx(0.5)  # weights [1, 0.5, 0, 0.5]
    assert m["nll/mean"] == pytest.approx(1.0)
    # Both rows with step signal have |A^S - A^E| = 2.5: the correlation is undefined.
    assert math.isnan(m["advantage/corr_z_gap"])
    assert "advantage/lambda_mean" not in grpo_advantages(rows).metrics
    out = gaca_advantages(rows)
    assert out.anchor_group_sizes.tolist() == [0, 2, 1]


def test_corr_z_gap_uses_rows_with_step_signal():
    g = torch.Generator().manual_seed(0)
    n = 60
    rows = StepRows(
        group=torch.arange(n) // 20, traj=torch.arange(n) // 5, step=torch.arange(n) % 5,
        anchor=torch.randint(0, 40, (n,), generator=g), reward=torch.randint(0, 2, (n,), generator=g).double(),
        nll=torch.rand(n, generator=g, dtype=torch.float64), valid=torch.ones(n, dtype=torch.bool),
    )  # fmt: skip
    out = gaca_advantages(rows)
    mask = out.has_step_signal
    assert 0 < int(mask.sum()) < n
    gap = (out.step_advantage - out.episode_advantage).abs()[mask]
    expected = torch.corrcoef(torch.stack([out.criticality[mask], gap]))[0, 1].item()
    assert out.metrics["advantage/corr_z_gap"] == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# Bad input


def good_columns() -> dict[str, list]:
    return dict(
        group=[0, 0], traj=[0, 1], step=[0, 0], anchor=[1, 1], reward=[0.0, 1.0], nll=[1.0, 2.0], valid=[True, True]
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"reward": [0.0]}, r"StepRows.reward has 1 rows but group has 2"),
        ({"reward": [float("nan"), 1.0]}, r"StepRows.reward must be finite, got nan at row 0"),
        ({"nll": [1.0, float("inf")]}, r"StepRows.nll must be finite, got inf at row 1"),
        ({"step": [0, -1]}, r"StepRows.step must be >= 0, got -1 at row 1"),
        ({"traj": [0, 0]}, r"duplicate \(traj, step\) pair: traj=0, step=0"),
        ({"group": [0, 1], "traj": [0, 0], "step": [0, 1]}, r"StepRows.traj 0 lies in two groups \(0 and 1\)"),
        ({"group": [[0, 0]]}, r"StepRows.group must be 1-D, got shape \(1, 2\)"),
    ],
)
def test_bad_rows_name_the_field(change, message):
    with pytest.raises(ValueError, match=message):
        StepRows(**{**good_columns(), **change})


def test_empty_batch_is_an_error():
    empty = {k: [] for k in good_columns()}
    with pytest.raises(ValueError, match="StepRows is empty"):
        StepRows(**empty)


def test_wrong_dtypes_are_errors():
    cols = good_columns()
    with pytest.raises(ValueError, match="StepRows.anchor must be int64, got torch.float32"):
        StepRows(**{**cols, "anchor": torch.tensor([1.0, 1.0])})
    with pytest.raises(ValueError, match="StepRows.reward must be a float tensor, got torch.int64"):
        StepRows(**{**cols, "reward": torch.tensor([0, 1])})
    with pytest.raises(ValueError, match="StepRows.valid must be bool, got torch.int64"):
        StepRows(**{**cols, "valid": torch.tensor([1, 1])})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"eta": -0.3}, r"eta must be >= 0, got -0.3"),
        ({"gamma": 1.5}, r"gamma must be in \[0, 1\], got 1.5"),
        ({"lambda0": 1.0}, r"lambda0 must be in \[0, 1\)"),
        ({"lambda0": 0.0, "modulation": "sigmoid"}, r"lambda0 must be > 0 with modulation='sigmoid'"),
        ({"lambda_min": 0.6}, r"need 0 <= lambda_min <= lambda0 <= lambda_max <= 1"),
        ({"modulation": "cubic"}, r"modulation must be one of \('linear', 'sigmoid'\), got 'cubic'"),
        ({"preset": "verl"}, r"preset must be one of \(None, 'verl-agent'\), got 'verl'"),
        ({"eps": 0.0}, r"eps must be > 0, got 0.0"),
        ({"omega": float("nan")}, r"omega must be a finite number, got nan"),
    ],
)
def test_bad_options_are_clear_errors(options, message):
    with pytest.raises(ValueError, match=message):
        EstimatorConfig(**options)
    with pytest.raises(ValueError, match=message):
        compute_advantages(two_trajectory_batch(), "gaca", **options)


def test_unknown_estimator_and_option():
    with pytest.raises(
        ValueError, match=r"estimator must be one of \('grpo', 'gigpo', 'gaca', 'reweight'\), got 'ppo'"
    ):
        compute_advantages(two_trajectory_batch(), "ppo")
    with pytest.raises(TypeError, match=r"unknown estimator option\(s\) \['lamda0'\]"):
        compute_advantages(two_trajectory_batch(), "gaca", lamda0=0.5)


def test_config_object_and_overrides_compose():
    rows = two_trajectory_batch(nll=[1.5, 1.0, 0.5, 1.0])
    cfg = EstimatorConfig(gamma=0.5, episode_norm="mean", step_norm="mean", eta=1.0)
    via_config = compute_advantages(rows, "gaca", config=cfg)
    assert_close(via_config.advantage, [5.0, 5.0, -10.0, -5.0])
    assert_close(compute_advantages(rows, "gaca", config=cfg, eta=0.0).advantage, [7.5, 5.0, -7.5, -5.0])
    assert cfg.to_kwargs()["eta"] == 1.0


# ---------------------------------------------------------------------------------------------
# Slow paths: sparse ids, huge step gaps, anchors that collide in the mixed sort key


@HYPOTHESIS
@given(rows=step_batches(max_groups=3, max_trajs=3, max_len=4), estimator=st.sampled_from(ESTIMATORS), data=st.data())
def test_sparse_ids_and_huge_step_gaps_take_the_exact_slow_paths(rows, estimator, data):
    # Spread ids and steps far apart: group/traj ids are factorised with unique, returns are
    # computed over sorted rows instead of the [trajectory, step] matrix.
    scale = data.draw(st.sampled_from([10**6, 10**12]))
    spread = StepRows(**{**vars_of(as64(rows)), "group": rows.group * scale, "traj": rows.traj * scale,
                         "step": rows.step * scale})  # fmt: skip
    out = compute_advantages(spread, estimator, gamma=1.0)
    ref = reference_advantages(spread, estimator, gamma=1.0)
    torch.testing.assert_close(
        out.advantage, torch.tensor(ref["advantage"], dtype=torch.float64), atol=1e-7, rtol=1e-7
    )


def test_anchors_colliding_in_the_sort_key_stay_apart():
    # Four groups use the two low bits of the mixed key; anchors 5 and 5 + 2**62 then share a
    # mixed key (the top bits are shifted out) but are different anchor groups.
    rows = StepRows(
        group=[0, 0, 1, 2, 3], traj=[0, 1, 2, 3, 4], step=[0, 0, 0, 0, 0],
        anchor=[5, 5 + 2**62, 5, 5, 5], reward=torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0], dtype=torch.float64),
        nll=[1.0] * 5, valid=[True] * 5,
    )  # fmt: skip
    out = gigpo_advantages(rows)
    assert out.has_step_signal.tolist() == [False] * 5
    assert len(set(out.anchor_group.tolist())) == 5
