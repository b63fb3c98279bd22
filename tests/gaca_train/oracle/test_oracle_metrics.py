"""The oracle's quality metrics and the paper's quantities (docs/method.md section 8), checked exactly.

Each quantity is computed on random batches where the truth A* is given, and compared with the
same thing measured directly: the estimators recomputed at other eta (compute_advantages), the
risks as plain means, the projections as least squares.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gaca_train.estimators.advantages import compute_advantages
from gaca_train.estimators.options import EstimatorConfig
from gaca_train.estimators.rows import StepRows
from gaca_train.oracle.metrics import alignment, mixture_decomposition, oracle_rows, quality, summary_metrics
from tests.gaca_train.batches import step_batches

HYPOTHESIS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _truth(rows, seed: int) -> tuple[list[int], torch.Tensor]:
    """Every row picked, with an arbitrary true A* (already on the estimators' scale)."""
    gen = torch.Generator().manual_seed(seed)
    return list(range(len(rows))), torch.randn(len(rows), generator=gen, dtype=torch.float64)


def _risk(estimate: torch.Tensor, truth: torch.Tensor) -> float:
    return float((estimate.double() - truth).square().mean())


def as64(rows: StepRows) -> StepRows:
    return StepRows(group=rows.group, traj=rows.traj, step=rows.step, anchor=rows.anchor, reward=rows.reward.double(),
                    nll=rows.nll.double(), valid=rows.valid)  # fmt: skip


def _parts(rows, **options):
    out = compute_advantages(rows, "gaca", **options)
    z = out.criticality.double()
    return out.episode_advantage.double(), out.step_advantage.double(), out.weight.double(), z, out.has_step_signal


@HYPOTHESIS
@given(rows=step_batches(), seed=st.integers(0, 10_000), eta=st.sampled_from([0.25, 1.0, 5.0]),
       modulation=st.sampled_from(["linear", "sigmoid"]), lambda0=st.sampled_from([0.2, 0.5, 0.8]))  # fmt: skip
def test_risk_decomposition_is_exact_for_the_implemented_mixture(rows, seed, eta, modulation, lambda0):
    rows = as64(rows)
    # R_GACA = R_0 - 2 E[m D (A* - A_0)] + E[m^2 D^2], clipping included; with noise both sides subtract E[var].
    _, truth = _truth(rows, seed)
    options = {"eta": eta, "modulation": modulation, "lambda0": lambda0}
    a_e, a_s, lam, _, _ = _parts(rows, **options)
    variance = torch.rand(len(rows), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    dec = mixture_decomposition(a_e, a_s, lam, truth, variance, lambda0)
    direct = _risk(compute_advantages(rows, "gaca", **options).advantage, truth) - float(variance.mean())
    fixed = _risk(compute_advantages(rows, "gigpo", omega=lambda0 / (1 - lambda0)).advantage, truth)
    assert dec["risk_gaca"] == pytest.approx(direct, rel=1e-9, abs=1e-9)
    assert dec["risk_fixed"] == pytest.approx(fixed - float(variance.mean()), rel=1e-9, abs=1e-9)


@HYPOTHESIS
@given(rows=step_batches(), seed=st.integers(0, 10_000))
def test_risk_is_quadratic_in_eta_with_the_alignment_as_slope(rows, seed):
    rows = as64(rows)
    # Linear modulation, lambda0 = 0.5, eta small enough that no lambda clips: R(eta) = R(0) - 2 eta rho + eta^2 kappa.
    _, truth = _truth(rows, seed)
    a_e, a_s, _, z, sig = _parts(rows)
    zero = torch.zeros(len(rows), dtype=torch.float64)
    al = alignment(a_e, a_s, sig, z, zero, truth, zero, 0.5)
    r0 = _risk(compute_advantages(rows, "gaca", eta=0.0).advantage, truth)
    for eta in (0.5 / (1 + float(z.abs().max())) / 2, 1e-3):
        measured = _risk(compute_advantages(rows, "gaca", eta=eta).advantage, truth)
        assert measured == pytest.approx(r0 - 2 * eta * al["rho"] + eta**2 * al["kappa"], rel=1e-9, abs=1e-9)
    assert al["slope"] == pytest.approx(-2 * al["rho"])
    if al["kappa"] > 0:  # eta* minimises the quadratic: its gain is R(0) - R(eta*)
        assert al["gain"] == pytest.approx(al["rho"] ** 2 / al["kappa"])


def test_sigmoid_slope_is_scaled_by_lambda0_times_one_minus_lambda0():
    rows = _random_batch(3)
    truth = torch.linspace(-1, 1, len(rows), dtype=torch.float64)
    a_e, a_s, _, z, sig = _parts(rows, modulation="sigmoid", lambda0=0.3)
    zero = torch.zeros(len(rows), dtype=torch.float64)
    al = alignment(a_e, a_s, sig, z, zero, truth, zero, 0.3, "sigmoid")
    h = 1e-6
    r = [_risk(compute_advantages(rows, "gaca", eta=e, modulation="sigmoid", lambda0=0.3).advantage, truth)
         for e in (0.0, h)]  # fmt: skip
    assert (r[1] - r[0]) / h == pytest.approx(al["slope"], rel=1e-3, abs=1e-6)
    assert al["slope"] == pytest.approx(-2 * al["rho"] * 0.3 * 0.7)
    # The best eta of the local quadratic R(0) + slope eta + kappa (0.3 * 0.7)^2 eta^2.
    assert al["eta_star"] == pytest.approx(al["rho"] / (al["kappa"] * 0.3 * 0.7))


def test_reweighting_slope_is_its_alignment():
    # Section 5 on the base A_0 = GiGPO(omega = 1): (1 + eta z) A_0 renormalised within the group; at eta -> 0 its
    # risk falls at 2 E[(z - mean_g z) A_0 (A* - A_0)], for either NLL normalisation.
    rows = _random_batch(7)
    truth = torch.linspace(-2, 2, len(rows), dtype=torch.float64).flip(0)
    for nll_norm in ("group", "batch"):
        a_e, a_s, _, z, sig = _parts(rows, nll_norm=nll_norm)
        group = rows.group
        z_mean = torch.stack([z[group == g].mean() for g in group])
        zero = torch.zeros(len(rows), dtype=torch.float64)
        al = alignment(a_e, a_s, sig, z, z_mean, truth, zero, 0.5)
        h = 1e-6
        r = [_risk(compute_advantages(rows, "reweight", eta=e, reweight_base="gigpo", nll_norm=nll_norm).advantage,
                   truth) for e in (0.0, h)]  # fmt: skip
        assert (r[1] - r[0]) / h == pytest.approx(-2 * al["rho_reweight"], rel=1e-3, abs=1e-6)


def test_projection_gains_are_least_squares_fits():
    rows = _random_batch(11)
    a_e, a_s, _, z, sig = _parts(rows)
    z_mean = torch.stack([z[rows.group == g].mean() for g in rows.group])
    a0 = a_e + a_s
    u_mix, u_rw = torch.where(sig, z * (a_s - a_e) / 0.5, 0.0), (z - z_mean) * a0
    gen = torch.Generator().manual_seed(0)
    error = 0.7 * u_mix - 0.2 * u_rw + 0.3 * torch.randn(len(rows), generator=gen, dtype=torch.float64)
    zero = torch.zeros(len(rows), dtype=torch.float64)
    al = alignment(a_e, a_s, sig, z, z_mean, a0 + error, zero, 0.5)
    n = len(rows)

    def explained(*directions: torch.Tensor) -> float:  # E[e^2] - min_c E[(e - sum c u)^2]
        basis = torch.stack(directions, dim=1)
        coef = torch.linalg.lstsq(basis, error.unsqueeze(1)).solution
        return float(error.square().sum() - (error.unsqueeze(1) - basis @ coef).square().sum()) / n

    assert al["gain"] == pytest.approx(explained(u_mix), rel=1e-9)
    assert al["gain_reweight"] == pytest.approx(explained(u_rw), rel=1e-9)
    assert al["gain_both"] == pytest.approx(explained(u_mix, u_rw), rel=1e-9)
    assert al["mixing_adds"] == pytest.approx(explained(u_mix, u_rw) - explained(u_rw), rel=1e-9)
    assert al["error"] == pytest.approx(float(error.square().mean()))


def test_noise_corrected_risk_and_alignment_are_unbiased():
    # A*hat = A* + e, e ~ N(0, var) with var known: the means over many draws land on the noiseless values.
    rows = _random_batch(5)
    gen = torch.Generator().manual_seed(1)
    truth = torch.randn(len(rows), generator=gen, dtype=torch.float64)
    variance = 0.5 + torch.rand(len(rows), generator=gen, dtype=torch.float64)
    a_e, a_s, lam, z, sig = _parts(rows)
    zero = torch.zeros(len(rows), dtype=torch.float64)
    clean = alignment(a_e, a_s, sig, z, zero, truth, zero, 0.5)
    estimate = compute_advantages(rows, "gigpo").advantage.double()
    clean_risk = quality(estimate, truth, zero)["risk"]
    risks, rhos = [], []
    for _ in range(4000):
        noisy = truth + variance.sqrt() * torch.randn(len(rows), generator=gen, dtype=torch.float64)
        risks.append(quality(estimate, noisy, variance)["risk"])
        rhos.append(alignment(a_e, a_s, sig, z, zero, noisy, variance, 0.5)["rho"])
    for values, target in ((risks, clean_risk), (rhos, clean["rho"])):
        mean, se = np.mean(values), np.std(values) / math.sqrt(len(values))
        assert abs(mean - target) < 4 * se, (mean, target, se)
    # Without the correction the risk is biased up by E[var].
    assert np.mean(risks) + float(variance.mean()) > clean_risk + 10 * np.std(risks) / math.sqrt(len(risks))


def test_row_weights_count_a_row_as_the_rows_it_stands_for():
    # Weight 2 on a row is the same as the row twice, in every quantity.
    rows = _random_batch(4)
    a_e, a_s, lam, z, sig = _parts(rows)
    truth = torch.linspace(-1, 1, len(rows), dtype=torch.float64)
    var = torch.full((len(rows),), 0.01, dtype=torch.float64)
    weight = torch.ones(len(rows), dtype=torch.float64)
    weight[:5] = 2.0
    twice = torch.cat([torch.arange(len(rows)), torch.arange(5)])
    est = compute_advantages(rows, "gigpo").advantage.double()
    for key, value in quality(est, truth, var, weight).items():
        if key not in ("rows", "sign_rows", "spearman"):
            assert value == pytest.approx(quality(est[twice], truth[twice], var[twice])[key], nan_ok=True), key
    dec = mixture_decomposition(a_e, a_s, lam, truth, var, 0.5, weight)
    assert dec == pytest.approx(
        mixture_decomposition(a_e[twice], a_s[twice], lam[twice], truth[twice], var[twice], 0.5)
    )
    zero = torch.zeros(len(rows), dtype=torch.float64)
    al = alignment(a_e, a_s, sig, z, zero, truth, var, 0.5, row_weight=weight)
    ref = alignment(a_e[twice], a_s[twice], sig[twice], z[twice], zero[twice], truth[twice], var[twice], 0.5)
    assert al == pytest.approx(ref, nan_ok=True)


def test_quality_of_a_perfect_and_a_reversed_estimator():
    truth = torch.tensor([2.0, -1.0, 0.5, -3.0, 1.0], dtype=torch.float64)
    zero = torch.zeros(5, dtype=torch.float64)
    perfect = quality(truth / 4, truth, zero)
    assert perfect["pearson"] == pytest.approx(1.0) and perfect["spearman"] == pytest.approx(1.0)
    assert perfect["sign"] == 1.0 and perfect["nmse"] == pytest.approx(0.0, abs=1e-12)
    assert perfect["scale"] == pytest.approx(4.0)
    reversed_ = quality(-truth, truth, zero)
    assert reversed_["sign"] == 0.0 and reversed_["spearman"] == pytest.approx(-1.0)
    assert reversed_["risk"] == pytest.approx(float((2 * truth).square().mean()))
    # Rows whose A*hat is within 1.96 se of 0 do not count for the sign.
    unclear = quality(truth, truth, torch.full((5,), 1.0, dtype=torch.float64))
    assert unclear["sign_rows"] == 2.0  # |2.0| and |-3.0| exceed 1.96


def test_oracle_rows_put_a_star_on_the_group_return_scale_and_log_every_estimator():
    rows = _random_batch(2)
    picked = [0, 3, 5]
    out = oracle_rows(rows, EstimatorConfig(), picked, [1.0, -2.0, 0.5], [0.1, 0.2, 0.0])
    ret = compute_advantages(rows, "grpo").episode_return.double()
    for k, row in enumerate(picked):
        g = rows.group[row]
        per_traj = {int(t): float(ret[i]) for i, t in enumerate(rows.traj) if rows.group[i] == g}
        std = float(np.std(list(per_traj.values()), ddof=1))
        assert float(out.scale[k]) == pytest.approx(std)
    assert out.a_star.tolist() == pytest.approx([a / float(s) for a, s in zip([1.0, -2.0, 0.5], out.scale)])
    metrics = summary_metrics(out)
    assert {f"oracle/{e}/risk" for e in ("grpo", "gigpo", "gaca", "reweight")} <= set(metrics)
    assert "oracle/alignment/rho" in metrics and "oracle/decomposition/risk_gaca" in metrics


def _random_batch(seed: int):
    """Three groups of four 5-step trajectories over a few anchors, terminal rewards 0 or 10, random NLLs."""
    rng = np.random.default_rng(seed)
    cols: dict[str, list] = {k: [] for k in ("group", "traj", "step", "anchor", "reward", "nll", "valid")}
    for g in range(3):
        for i in range(4):
            for t in range(5):
                cols["group"].append(g)
                cols["traj"].append(4 * g + i)
                cols["step"].append(t)
                cols["anchor"].append(int(rng.integers(3)) + 10 * t)
                cols["reward"].append(10.0 * float(rng.random() < 0.5) if t == 4 else 0.0)
                cols["nll"].append(float(rng.gamma(2.0)))
                cols["valid"].append(True)
    cols["reward"] = torch.tensor(cols["reward"], dtype=torch.float64)
    return StepRows(**cols)
