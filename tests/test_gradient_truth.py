"""The gradient truth (verify/references/gradients.py, docs/math.md §14) checked against itself
by independent routes: closed-form Jacobians against high-precision central differences of the
mp twins; closed-form kernel gradients against differences of the mp kernels; exact attention
gradients against central differences of exact mp attention (``L = Σ G⊙o``). The numeric route
errs by ≤ 1e-60 relative (module docstring of the truth), so agreement is asserted to 1e-25
relative to the largest entry (after rounding both to float64 it is exact up to 2 ulps)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from kernel_verify.impls.registry import all_maps
from kernel_verify.verify.gradient_bounds import BACKWARD_RULES, feature_vjp_bound
from kernel_verify.verify.references.attention import softmax_attention_mp
from kernel_verify.verify.references.features import features_mp
from kernel_verify.verify.references.gradients import (
    CLOSED_JACOBIANS,
    feature_attention_grads_mp,
    feature_jacobian_mp,
    kernel_grad_closed_mp,
    kernel_grad_mp,
    softmax_attention_grads_mp,
)
from kernel_verify.verify.references.mp import to_mp, working_precision


def _one_per_formula():
    seen = {}
    for e in all_maps():
        seen.setdefault(e.formula, e)
    return list(seen.values())


def _close(a: np.ndarray, b: np.ndarray, rel: float = 1e-25) -> None:
    diff = max((abs(x - y) for x, y in zip(a.ravel(), b.ravel(), strict=True)), default=0)
    scale = max((abs(x) for x in b.ravel()), default=0) or 1
    assert diff <= rel * scale, f"differ by {mpmath.nstr(diff, 5)} (scale {scale})"


@pytest.mark.parametrize("entry", [e for e in _one_per_formula() if e.formula in CLOSED_JACOBIANS],
                         ids=lambda e: e.formula)
def test_closed_jacobian_equals_high_precision_difference(entry):
    rng = np.random.default_rng(4)
    d, m = 3, max(3, entry.min_m)
    params = entry.draw(rng, d, m, entry.config)
    x = 0.8 * rng.standard_normal((2, d))
    with working_precision(60):
        for log in (False, True) if entry.has("log_features") else (False,):
            closed = feature_jacobian_mp(entry, x, params, log=log, dps=60)
            numeric = feature_jacobian_mp(entry, x, params, log=log, numeric=True, dps=60)
            _close(closed, numeric)


@pytest.mark.parametrize(("kernel", "kp"), [("softmax", {}), ("gaussian", {"sigma": 1.3}),
                                            ("linear", {}), ("taylor", {"order": 2}),
                                            ("taylor", {"order": 3})])
def test_kernel_gradient_closed_forms(kernel, kp):
    rng = np.random.default_rng(5)
    x, y = 0.7 * rng.standard_normal(3), 0.7 * rng.standard_normal(3)
    with working_precision(60):
        _close(kernel_grad_closed_mp(kernel, x, y, **kp), kernel_grad_mp(kernel, x, y, **kp))


def test_positive_feature_gradient_sum_is_the_kernel_gradient_form():
    """docs/math.md §14: ∇ₓ φ(x)ᵀφ(y) = Σ_i φ_i(x)φ_i(y)(w_i − x) for positive features."""
    entry = next(e for e in all_maps() if e.formula == "softmax_positive")
    rng = np.random.default_rng(6)
    params = entry.draw(rng, 3, 5, entry.config)
    x, y = 0.5 * rng.standard_normal((1, 3)), 0.5 * rng.standard_normal((1, 3))
    with working_precision(50):
        fx, fy = features_mp(entry, x, params), features_mp(entry, y, params)
        jac = feature_jacobian_mp(entry, x, params)
        grad = np.einsum("nf,nfd->nd", fy, jac)[0]
        w = to_mp(params["W"])
        direct = sum(fx[0, i] * fy[0, i] * (w[i] - to_mp(x)[0]) for i in range(w.shape[0]))
        _close(grad, direct)


def _numeric_attention_grads(fn, arrays, g, h):
    grads = []
    for idx in range(3):
        gr = np.empty(arrays[idx].shape, dtype=object)
        for pos in np.ndindex(arrays[idx].shape):
            plus = [a.copy() for a in arrays]
            minus = [a.copy() for a in arrays]
            plus[idx][pos] += h
            minus[idx][pos] -= h
            gr[pos] = ((fn(*plus) - fn(*minus)) * g).sum() / (2 * h)
        grads.append(gr)
    return grads


@pytest.mark.parametrize("causal", [False, True])
def test_softmax_attention_gradients_equal_differences(causal):
    rng = np.random.default_rng(7)
    q, k, v, g = (rng.standard_normal((3, 2)) for _ in range(4))
    with working_precision(90):
        exact = softmax_attention_grads_mp(q, k, v, g, causal=causal, dps=90)
        arrays = [to_mp(a) for a in (q, k, v)]
        numeric = _numeric_attention_grads(
            lambda a, b, c: softmax_attention_mp(a, b, c, causal=causal), arrays, to_mp(g),
            mpmath.mpf(10) ** -35)
        for e, n in zip(exact, numeric, strict=True):
            _close(e, n)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("formula", ["softmax_positive", "rff_pairs"])
def test_feature_attention_gradients_equal_differences(formula, causal):
    entry = next(e for e in all_maps() if e.formula == formula)
    rng = np.random.default_rng(8)
    params = entry.draw(rng, 2, 3, entry.config)
    q, k = np.abs(rng.standard_normal((3, 2))), np.abs(rng.standard_normal((3, 2)))
    k[0] = q[0]
    v, g = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    with working_precision(90):
        exact = feature_attention_grads_mp(entry, params, q, k, v, g, causal=causal, dps=90)

        def att(a, b, c):
            s = mpmath.power(2, mpmath.mpf(-0.25)) if entry.attention_prescale else 1
            fq, fk = features_mp(entry, a * s, params, dps=90), features_mp(entry, b * s, params,
                                                                            dps=90)
            kk = fq @ fk.T
            if causal:
                for i in range(3):
                    for j in range(i + 1, 3):
                        kk[i, j] = mpmath.mpf(0)
            return (kk @ c) / kk.sum(axis=-1)[:, None]

        arrays = [to_mp(a) for a in (q, k, v)]
        numeric = _numeric_attention_grads(att, arrays, to_mp(g), mpmath.mpf(10) ** -35)
        for e, n in zip(exact, numeric, strict=True):
            _close(e, n)


def test_every_backward_rule_has_a_closed_jacobian():
    """The bounds are stated for the closed forms' chain-rule terms."""
    assert set(BACKWARD_RULES) <= set(CLOSED_JACOBIANS)


def test_vjp_bound_is_zero_free_and_grows_with_u():
    entry = next(e for e in all_maps() if e.formula == "softmax_positive")
    rng = np.random.default_rng(9)
    params = entry.draw(rng, 3, 4, entry.config)
    x, g = rng.standard_normal((2, 3)), np.abs(rng.standard_normal((2, 4)))
    b64 = feature_vjp_bound(entry, x, params, None, g, 2.0**-53, 1.0)
    b32 = feature_vjp_bound(entry, x, params, None, g, 2.0**-24, 4.0)
    assert np.all(b64 > 0) and np.all(b32 > 1e6 * b64)
    with pytest.raises(KeyError, match="no derived backward bound"):
        feature_vjp_bound(next(e for e in all_maps() if e.formula == "taylor"), x, {}, None, g,
                          2.0**-53, 1.0)


def test_positive_gradient_moments_match_monte_carlo():
    """The closed forms of verify.gradient_stats against 400 000 draws (fixed seed, so the test
    is deterministic): mean within 5 standard errors, variance within 5 % (its standard error
    at these norms is < 1 %)."""
    from kernel_verify.verify.gradient_stats import positive_gradient_moments

    rng = np.random.default_rng(10)
    x, y = np.array([0.5, -0.3, 0.2]), np.array([0.1, 0.4, -0.2])
    w = rng.standard_normal((400_000, 3))
    s = x + y
    t = np.exp(w @ s - (x @ x + y @ y) / 2)[:, None] * (w - x)
    mean, var = positive_gradient_moments(x, y)
    assert np.all(np.abs(t.mean(axis=0) - mean) <= 5 * np.sqrt(var / len(w)))
    assert np.allclose(t.var(axis=0), var, rtol=0.05)
    assert np.allclose(mean, np.exp(x @ y) * y)


def test_median_of_means_test_rejects_a_biased_gradient_and_passes_the_right_one():
    from kernel_verify.verify.gradient_stats import draws_for_alpha, median_of_means_test

    assert draws_for_alpha(1e-6) == 111
    rng = np.random.default_rng(11)
    draws = rng.standard_normal((111, 2)) * 0.1
    assert median_of_means_test(draws, np.zeros(2), np.full(2, 0.1), 1e-6).ok
    assert not median_of_means_test(draws + 0.5, np.zeros(2), np.full(2, 0.1), 1e-6).ok
    with pytest.raises(ValueError, match="needs"):
        median_of_means_test(draws[:10], np.zeros(2), np.full(2, 0.1), 1e-6)


def test_gradient_mean_test_has_the_catoni_threshold_and_more_power_than_the_median():
    """At B = ⌈8 ln(1/α)⌉ draws the known-variance test's threshold is √(2L/(B − 2L))·σ
    (L = log(2/α)), under 2σ; it passes draws at the mean, rejects a shift of σ that the 2σ
    median rule passes, and a σ = 0 component must sit exactly at its mean."""
    from kernel_verify.verify.gradient_stats import (
        draws_for_alpha,
        gradient_mean_test,
        median_of_means_test,
    )

    alpha = 1e-6
    b = draws_for_alpha(alpha)
    big_l = math.log(2 / alpha)
    sigma = np.array([0.1, 0.2])
    draws = np.random.default_rng(5).standard_normal((b, 2)) * sigma
    res = gradient_mean_test(draws, np.zeros(2), sigma, alpha)
    assert res.ok and res.method == "Catoni"
    assert res.threshold == pytest.approx(sigma * math.sqrt(2 * big_l / (b - 2 * big_l)))
    shifted = draws + sigma  # one σ of a draw off
    assert median_of_means_test(shifted, np.zeros(2), sigma, alpha).ok
    assert not gradient_mean_test(shifted, np.zeros(2), sigma, alpha).ok
    flat = np.zeros((b, 1))
    assert gradient_mean_test(flat, np.zeros(1), np.zeros(1), alpha).ok
    assert not gradient_mean_test(flat + 1e-9, np.zeros(1), np.zeros(1), alpha).ok
