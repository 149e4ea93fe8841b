"""The reference means of biased constructions (verify/references/biased_means.py).

* the enumerated SORF row law is a probability law with ``E wwᵀ = I`` (isotropic rows, as every
  row of ``√p·HD₁HD₂HD₃`` restricted to d columns), and its support is exactly the set of rows
  that the construction draws (checked against many draws of ``draw_matrix("sorf")``);
* the per-row estimates of the table equal the mpmath twin's ``φ(x)ᵀφ(y)`` for an explicit W
  (the reference and the registry formula agree term by term);
* the fixed-norm moments equal the declared fixed-norm kernels where those exist
  (``gaussian_fixed_norm``, ``softmax_fixed_norm``): the ₀F₁ route is checked on the maps whose
  mean is known independently;
* power: a target whose construction differs from its claim (SORF rows scaled by ``√d`` instead
  of ``√p``; Gaussian rows claimed as SORF) fails ``check_reference_mean`` at a fixed seed, and
  the correct target passes there.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kernel_verify.impls.random_matrices import draw_matrix
from kernel_verify.impls.registry import get
from kernel_verify.verify.references.biased_means import (
    ROW_FORMULAS,
    ROW_TERMS,
    estimate_range,
    fixed_norm_relu_range,
    not_covered,
    row_moments,
    sorf_row_law,
)
from kernel_verify.verify.references.features import features_mp
from kernel_verify.verify.references.kernels import kernel_mp
from kernel_verify.verify.references.mp import to_float


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5])
def test_sorf_law_is_isotropic_and_covers_the_draws(d):
    rows, prob = sorf_row_law(d)
    assert prob.sum() == 1.0 and (prob > 0).all()
    np.testing.assert_allclose((rows.T * prob) @ rows, np.eye(d), atol=1e-15)
    rng = np.random.default_rng(d)
    for _ in range(50):
        w = draw_matrix("sorf", rng, 8, d)  # float products of H/√p: within 1e-12 of exact
        gap = np.abs(w[:, None, :] - rows[None, :, :]).max(axis=-1).min(axis=-1)
        assert (gap <= 1e-12).all(), "a drawn SORF row is outside the law"


@pytest.mark.parametrize("formula", sorted(ROW_FORMULAS - {"rff_phase"}))
def test_per_row_estimate_matches_the_twin(formula):
    entry = get(f"{formula}[iid]")
    rng = np.random.default_rng(3)
    d, m = 3, 5
    x, y = rng.uniform(-1, 1, d), rng.uniform(-1, 1, d)
    params = entry.draw(rng, d, m, entry.config)
    phi = to_float(features_mp(entry, np.stack([x, y]), params, entry.config, dps=30))
    w = params["W"]
    term = ROW_TERMS[formula]
    c, a, kappa = term.params(entry.config, d)
    h, _, _ = term.terms(w @ x, w @ y, np.einsum("kd,kd->k", w, w), float(x @ x + y @ y) / 2,
                         c, a, kappa)
    assert h.mean() == pytest.approx(float(phi[0] @ phi[1]), rel=1e-12, abs=1e-14)


def test_phase_estimate_averages_to_the_pairs_estimate():
    """rff_phase: ``2cos(P+b)cos(Q+b)`` averaged over b ∈ {0, 2π/3, 4π/3} (exact for the degree-2
    trigonometric polynomial in b) is ``cos(P − Q)``, the table's ``E_b h``."""
    entry = get("rff_phase[iid]")
    rng = np.random.default_rng(4)
    x, y = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
    params = entry.draw(rng, 3, 1, entry.config)
    vals = []
    for b in (0.0, 2 * np.pi / 3, 4 * np.pi / 3):
        phi = entry.numpy_fn(np.stack([x, y]), {**params, "b": np.array([b])}, entry.config)
        vals.append(float(phi[0] @ phi[1]))
    w = params["W"][0]
    assert np.mean(vals) == pytest.approx(np.cos(w @ x - w @ y), abs=1e-14)


@pytest.mark.parametrize(("formula", "kernel"), [
    ("rff_pairs", "gaussian_fixed_norm"), ("rff_phase", "gaussian_fixed_norm"),
    ("softmax_positive", "softmax_fixed_norm"), ("softmax_hyperbolic", "softmax_fixed_norm")])
@pytest.mark.parametrize("d", [2, 3, 5])
def test_fixed_norm_moments_equal_declared_kernels(formula, kernel, d):
    rng = np.random.default_rng(d)
    x, y = rng.uniform(-0.8, 0.8, d), rng.uniform(-0.8, 0.8, d)
    config = {"sigma": 1.0}
    mom = row_moments(formula, "orthogonal_fixed_norm", x, y, config)
    args = {"sigma": 1.0} if kernel == "gaussian_fixed_norm" else {}
    want = float(kernel_mp(kernel, x, y, **args))
    assert abs(mom.mean - want) <= mom.mean_error + 2**-53 * abs(want)
    assert mom.lo <= mom.mean <= mom.hi and mom.variance >= 0


def test_sorf_moments_match_monte_carlo_of_the_construction():
    """Exact enumeration vs 4000 draws of the built-in SORF matrix (Hoeffding at 1e-6)."""
    entry = get("softmax_positive[sorf]")
    x, y = np.array([0.5, -0.3, 0.6]), np.array([0.4, 0.2, 0.7])
    mom = row_moments("softmax_positive", "sorf", x, y, {})
    rng = np.random.default_rng(5)
    est = []
    for _ in range(4000):
        phi = entry.numpy_fn(np.stack([x, y]), entry.draw(rng, 3, 4, entry.config), entry.config)
        est.append(float(phi[0] @ phi[1]))
    lo, hi = estimate_range(mom, 3, 4)
    assert lo <= min(est) and max(est) <= hi
    t = (hi - lo) * np.sqrt(np.log(2 / 1e-6) / (2 * len(est)))
    assert abs(np.mean(est) - mom.mean) <= t


def test_coverage_reasons():
    assert not_covered("softmax_positive", "iid", 3) is not None
    assert not_covered("relu_features", "orthogonal_fixed_norm", 3) is not None
    assert not_covered("gerf", "sorf", 9) is not None  # p = 16: not enumerated
    assert not_covered("gerf", "sorf", 8) is None


def _target(name):
    from kernel_verify.properties.targets import feature_maps
    return next(p.values[0] for p in feature_maps("biased",
                                                  predicate=lambda t: t.name == name))


def _scaled_sqrt_d(rng, d, m, config):
    """SORF rows scaled by √d instead of √p (a plausible slip for d < p)."""
    return {"W": draw_matrix("sorf", rng, m, d) * np.sqrt(d / 4)}


def _gaussian(rng, d, m, config):
    return {"W": rng.standard_normal((m, d))}


@pytest.mark.parametrize(("name", "draw", "x", "y"), [
    # ‖x − y‖ = 4 along (1, 1, 0)/√2: reference mean 0.905, √d-scaled rows 0.593, threshold
    # 0.032 at α = 1e-12 (Bernstein, 500 draws): fails at any α of the budget
    ("rff_pairs[sorf]", _scaled_sqrt_d, [2**0.5, 2**0.5, 0.0], [-(2**0.5), -(2**0.5), 0.0]),
    ("softmax_positive[sorf]", _gaussian, [1.2, 0.0, 0.0], [1.2, 0.0, 0.0]),
])
def test_wrong_construction_fails_the_reference_mean(name, draw, x, y):
    from kernel_verify.properties.unbiased_checks import check_reference_mean
    target = _target(name)
    x, y = np.array(x), np.array(y)
    check_reference_mean(target, x, y, 4, 11)  # the correct construction passes here
    wrong = replace(target, name=f"{name} (wrong draw)", draw=draw)
    with pytest.raises(AssertionError, match="reference mean"):
        check_reference_mean(wrong, x, y, 4, 11)


@pytest.mark.parametrize("formula", ["softmax_positive", "softmax_hyperbolic"])
@pytest.mark.parametrize("d", [2, 3, 5])
def test_fixed_norm_range_holds_and_is_attained(formula, d):
    """The row-law range of fixed-norm rows (every ``‖w‖ = √d``), ``s = x + y``,
    ``N = (‖x‖² + ‖y‖²)/2``, ``r = √d‖s‖``: SM⁺ ``h = e^(−N)·exp(wᵀs) ∈ [e^(−N−r), e^(−N+r)]``,
    SM⁺ₕ ``h = e^(−N)·cosh(wᵀs) ∈ [e^(−N), e^(−N)·cosh r]`` (Cauchy–Schwarz ``|wᵀs| ≤ r``).
    Checked: the closed forms, 20000 sampled rows of the built-in construction stay inside, the
    ends are reached by ``w = ±√d·s/‖s‖`` (and ``w ⟂ s`` for the SM⁺ₕ minimum) within rounding,
    and so no range is narrower; every estimate of the built-in map (m = 2d, two orthogonal
    blocks) stays inside the float64 range of :func:`estimate_range`."""
    rng = np.random.default_rng(10 + d)
    x, y = rng.uniform(-0.8, 0.8, d), rng.uniform(-0.8, 0.8, d)
    mom = row_moments(formula, "orthogonal_fixed_norm", x, y, {})
    s, big_n = x + y, float(x @ x + y @ y) / 2
    r = np.sqrt(d) * np.linalg.norm(s)
    lo, hi = ((np.exp(-big_n - r), np.exp(-big_n + r)) if formula == "softmax_positive"
              else (np.exp(-big_n), np.exp(-big_n) * np.cosh(r)))
    assert mom.lo == pytest.approx(lo, rel=1e-14) and mom.hi == pytest.approx(hi, rel=1e-14)
    term = ROW_TERMS[formula]
    c, a, kappa = term.params({}, d)

    def h(w):
        w = np.atleast_2d(w)
        return term.terms(w @ x, w @ y, np.einsum("kd,kd->k", w, w), big_n, c, a, kappa)[0]

    w = np.concatenate([draw_matrix("orthogonal_fixed_norm", rng, d, d) for _ in range(20000 // d)])
    assert np.allclose(np.linalg.norm(w, axis=1), np.sqrt(d), rtol=1e-14)
    vals = h(w)
    assert mom.lo <= vals.min() and vals.max() <= mom.hi
    top = np.sqrt(d) * s / np.linalg.norm(s)
    assert h(top)[0] == pytest.approx(mom.hi, rel=1e-13)
    if formula == "softmax_positive":
        assert h(-top)[0] == pytest.approx(mom.lo, rel=1e-13)
    else:
        side = rng.standard_normal(d)
        side -= (side @ s) / (s @ s) * s
        assert h(np.sqrt(d) * side / np.linalg.norm(side))[0] == pytest.approx(mom.lo, rel=1e-13)
    entry = get(f"{formula}[orthogonal_fixed_norm]")
    elo, ehi = estimate_range(mom, d, 2 * d)
    for _ in range(2000):
        phi = entry.numpy_fn(np.stack([x, y]), entry.draw(rng, d, 2 * d, entry.config),
                             entry.config)
        assert elo <= float(phi[0] @ phi[1]) <= ehi


@pytest.mark.parametrize("d", [2, 3, 5])
def test_fixed_norm_relu_range_holds_and_is_attained(d):
    """ReLU features with rows of norm √d: ``h = relu(wᵀx)relu(wᵀy) ∈ [0, d(‖x‖‖y‖ + xᵀy)/2]``
    (biased_means module docstring). Checked: 20000 sampled rows of the built-in construction
    stay inside; the top is reached by ``w = √d·(x/‖x‖ + y/‖y‖)/‖…‖`` (the bisector) and 0 by
    ``w = −√d·x/‖x‖``, within rounding; every estimate of the built-in map (m = 2d) stays in the
    float64 range, whose slack is below 1e-12 of the top."""
    rng = np.random.default_rng(20 + d)
    x, y = rng.uniform(-0.8, 0.8, d), rng.uniform(-0.8, 0.8, d)
    lo, hi = fixed_norm_relu_range(x, y, 2 * d)
    top = d * (np.linalg.norm(x) * np.linalg.norm(y) + x @ y) / 2
    assert hi == pytest.approx(top, rel=1e-12) and -1e-12 * top < lo <= 0

    def h(w):
        w = np.atleast_2d(w)
        return np.maximum(w @ x, 0) * np.maximum(w @ y, 0)

    w = np.concatenate([draw_matrix("orthogonal_fixed_norm", rng, d, d) for _ in range(20000 // d)])
    vals = h(w)
    assert lo <= vals.min() and vals.max() <= hi
    bis = x / np.linalg.norm(x) + y / np.linalg.norm(y)
    assert h(np.sqrt(d) * bis / np.linalg.norm(bis))[0] == pytest.approx(top, rel=1e-13)
    assert h(-np.sqrt(d) * x / np.linalg.norm(x))[0] == 0.0
    entry = get("relu_features[orthogonal_fixed_norm]")
    for _ in range(2000):
        phi = entry.numpy_fn(np.stack([x, y]), entry.draw(rng, d, 2 * d, entry.config),
                             entry.config)
        assert lo <= float(phi[0] @ phi[1]) <= hi

