"""The mpmath references: kernels reproduce known values, feature twins agree with the float
implementations within their a-priori error bounds (and the bounds catch a 1e-12 relative error),
log twins are logs of twins, exact attention obeys its identities.

Expected values are derived in each test's docstring; tolerances come from the working precision
(dps = 40 here: results are compared to ~10^-35 relative) or from the error bounds of
:mod:`kernel_verify.verify.references.features`.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import mpmath
import numpy as np
import pytest
import torch

from kernel_verify.impls import registry
from kernel_verify.impls.registry import FeatureMap
from kernel_verify.verify.references.attention import (
    estimator_attention_reference,
    feature_attention_mp,
    kernel_attention_mp,
    softmax_attention_mp,
)
from kernel_verify.verify.references.features import (
    MP_FEATURES,
    feature_error_bound,
    features_mp,
    features_reference,
)
from kernel_verify.verify.references.kernels import gram_mp, gram_reference, kernel_mp, target_gram
from kernel_verify.verify.references.mp import to_mp, working_precision

DPS = 40
TIGHT = mpmath.mpf(10) ** -35  # agreement expected of two exact evaluations at 40 digits
U64, U32 = 2.0**-53, 2.0**-24
ULPS = 1.0  # glibc/SLEEF exp, cos, sin, log are accurate to < 1 ulp for these arguments

RF_ENTRIES = [e for e in registry.all_maps() if e.formula in MP_FEATURES and e.family != ""]
TWINNED = [e for e in RF_ENTRIES if MP_FEATURES[e.formula].error_bound is not None]


def _close(a, b, tol=TIGHT) -> bool:
    return abs(a - b) <= tol * max(1, abs(b))


# ----------------------------------------------------------------------------- kernels


def test_softmax_kernel_at_unit_vector_is_e():
    """SM(e₀, e₀) = exp(1) = e."""
    x = np.array([1.0, 0.0, 0.0])
    with working_precision(DPS):
        assert _close(kernel_mp("softmax", x, x, dps=DPS), mpmath.e)


@pytest.mark.parametrize("sigma", [0.3, 1.0, 7.5])
def test_gaussian_kernel_at_zero_distance_is_one(sigma):
    """exp(−0/(2σ²)) = 1 exactly."""
    x = np.array([0.3, -1.2, 2.0])
    assert kernel_mp("gaussian", x, x, sigma=sigma, dps=DPS) == 1


def test_gaussian_kernel_value():
    """δ = (1, 2), σ = 2: exp(−5/8)."""
    x, y = np.array([1.0, 2.0]), np.array([0.0, 0.0])
    with working_precision(DPS):
        expect = mpmath.exp(mpmath.mpf(-5) / 8)
        assert _close(kernel_mp("gaussian", x, y, sigma=2.0, dps=DPS), expect)


def test_arccos1_known_angles():
    """θ=0: ‖x‖²·π/(2π) = ‖x‖²/2; θ=π/2: ‖x‖‖y‖/(2π); θ=π: 0; a zero vector: 0."""
    x = np.array([0.5, -1.5, 2.0])
    y = np.array([1.5, 0.5, 0.0])  # xᵀy = 0
    with working_precision(DPS):
        assert _close(kernel_mp("arccos1", x, x, dps=DPS), mpmath.mpf(6.5) / 2)
        expect = mpmath.sqrt(6.5) * mpmath.sqrt(2.5) / (2 * mpmath.pi)
        assert _close(kernel_mp("arccos1", x, y, dps=DPS), expect)
        assert kernel_mp("arccos1", x, -x, dps=DPS) == 0
        assert kernel_mp("arccos1", x, 0 * x, dps=DPS) == 0


@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_gaussian_fixed_norm_matches_bessel_and_direct_integral(d):
    """₀F₁(; d/2; −t²/4) equals Γ(d/2)(2/t)^(d/2−1)J_(d/2−1)(t) (docs/math.md §3); so does the
    average of cos(√d·‖z‖·c) over c = θᵀẑ, whose density on [−1, 1] is
    (1−c²)^((d−3)/2)/B(½, (d−1)/2) (d ≥ 2; d = 1: c = ±1); with c = sin φ the integrand
    cos(t sin φ)cos^(d−2)φ is smooth."""
    x = np.array([0.7, -0.2, 0.4, 0.1, 0.9])[:d]
    y = np.array([0.1, 0.3, -0.5, 0.2, 0.0])[:d]
    sigma = 0.8
    with working_precision(DPS):
        ref = kernel_mp("gaussian_fixed_norm", x, y, sigma=sigma, dps=DPS)
        delta = to_mp(x) - to_mp(y)
        z = mpmath.sqrt(mpmath.fsum(delta * delta)) / mpmath.mpf(sigma)
        t = mpmath.sqrt(d) * z
        nu = mpmath.mpf(d) / 2 - 1
        bessel = mpmath.gamma(mpmath.mpf(d) / 2) * (2 / t) ** nu * mpmath.besselj(nu, t)
        assert _close(ref, bessel, mpmath.mpf(10) ** -30)
        if d == 1:
            direct = mpmath.cos(t)
        else:
            norm = mpmath.beta(mpmath.mpf(1) / 2, mpmath.mpf(d - 1) / 2)
            direct = mpmath.quad(
                lambda p: mpmath.cos(t * mpmath.sin(p)) * mpmath.cos(p) ** (d - 2),
                [-mpmath.pi / 2, 0, mpmath.pi / 2],
            ) / norm
        assert _close(ref, direct, mpmath.mpf(10) ** -30)


def test_softmax_fixed_norm_matches_modified_bessel():
    """Λ·₀F₁(; d/2; d‖s‖²/4) = Λ·Γ(d/2)(2/t)^ν I_ν(t), t = √d‖s‖, ν = d/2 − 1 (series of I_ν)."""
    x, y = np.array([0.3, -0.4, 0.2, 0.5]), np.array([0.1, 0.2, -0.6, 0.3])
    d = 4
    with working_precision(DPS):
        ref = kernel_mp("softmax_fixed_norm", x, y, dps=DPS)
        xm, ym = to_mp(x), to_mp(y)
        lam = mpmath.exp(-(mpmath.fsum(xm * xm) + mpmath.fsum(ym * ym)) / 2)
        t = mpmath.sqrt(d * mpmath.fsum((xm + ym) * (xm + ym)))
        nu = mpmath.mpf(d) / 2 - 1
        series = mpmath.gamma(mpmath.mpf(d) / 2) * (2 / t) ** nu * mpmath.besseli(nu, t)
        assert _close(ref, lam * series)


def test_gram_and_target_gram():
    """The Gram matrix is k(Xᵢ, Yⱼ) entry-wise; target_gram uses the entry's kernel and config;
    gram_reference rounds once (|round − exact| ≤ u·|exact|)."""
    rng = np.random.default_rng(11)
    X, Y = rng.standard_normal((3, 2)), rng.standard_normal((2, 2))
    entry = registry.get("rff_pairs[iid]").with_config(sigma=1.7)
    with working_precision(DPS):
        g = target_gram(entry, X, Y, dps=DPS)
        for i in range(3):
            for j in range(2):
                assert g[i, j] == kernel_mp("gaussian", X[i], Y[j], sigma=1.7, dps=DPS)
        rounded = gram_reference("gaussian", X, Y, sigma=1.7, dps=DPS)
        for i in range(3):
            for j in range(2):
                assert abs(mpmath.mpf(rounded[i, j]) - g[i, j]) <= U64 * abs(g[i, j])
        assert gram_mp("softmax", X, Y, dps=DPS).shape == (3, 2)


def test_kernel_errors():
    with pytest.raises(KeyError, match="no_such_kernel"):
        kernel_mp("no_such_kernel", np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="NaN"):
        kernel_mp("softmax", np.array([np.nan, 1.0]), np.ones(2))
    with pytest.raises(ValueError, match="same shape"):
        kernel_mp("softmax", np.ones(2), np.ones(3))


# ----------------------------------------------------------------------------- features


def _inputs(rng: np.random.Generator, d: int, n: int = 3, scale: float = 0.7) -> np.ndarray:
    x = rng.standard_normal((n, d)) * scale
    x[0] = 0.0  # the zero vector is a grid point of every map
    return x


def _positions(entry: FeatureMap, n: int) -> dict:
    return {"positions": np.arange(n)} if entry.has("positional") else {}


def _exact_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got − exact| evaluated in mp (no rounding of the difference), as float64."""
    diff = np.frompyfunc(lambda g, e: abs(mpmath.mpf(float(g)) - e), 2, 1)(got, exact)
    return np.array([float(v) for v in diff.ravel()]).reshape(got.shape)


@pytest.mark.parametrize("entry", TWINNED, ids=lambda e: e.name)
@pytest.mark.parametrize("seed", [1, 2])
def test_numpy_float64_within_error_bound(entry: FeatureMap, seed: int):
    """The float64 NumPy map is within the a-priori bound of the exact twin, element-wise."""
    rng = np.random.default_rng(seed)
    d, m = 5, 6
    params = entry.draw(rng, d, m, entry.config)
    x = _inputs(rng, d)
    pos = _positions(entry, x.shape[-2])
    got = entry.numpy_fn(x, params, entry.config, **pos)
    with working_precision(DPS):
        exact = features_mp(entry, x, params, dps=DPS, **pos)
        err = _exact_error(got, exact)
    bound = feature_error_bound(entry, x, params, None, U64, ULPS, **pos)
    assert err.shape == bound.shape
    assert np.all(err <= bound), f"worst err/bound = {np.max(err / bound)}"


@pytest.mark.parametrize("entry", [e for e in TWINNED if e.matrix == "iid"], ids=lambda e: e.name)
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_float32_within_error_bound(entry: FeatureMap, backend: str):
    """float32 NumPy and torch (CPU) maps are within the bound computed with u = 2⁻²⁴; the exact
    reference takes the float32 inputs, converted exactly."""
    rng = np.random.default_rng(7)
    d, m = 6, 5
    params = entry.draw(rng, d, m, entry.config)
    x = _inputs(rng, d, n=4).astype(np.float32)
    pos = _positions(entry, x.shape[-2])
    if backend == "numpy":
        got = entry.numpy_fn(x, params, entry.config, **pos)
    else:
        got = entry.torch_fn(torch.from_numpy(x), params, entry.config, **pos).numpy()
    assert got.dtype == np.float32
    with working_precision(DPS):
        err = _exact_error(got.astype(np.float64), features_mp(entry, x, params, dps=DPS, **pos))
    bound = feature_error_bound(entry, x, params, None, U32, ULPS, **pos)
    assert np.all(err <= bound), f"worst err/bound = {np.max(err / bound)}"


@pytest.mark.parametrize("entry", [e for e in TWINNED if e.matrix == "iid"], ids=lambda e: e.name)
def test_error_bound_catches_relative_error_1e12(entry: FeatureMap):
    """Power: a float64 result off by a relative 1e-12 exceeds the bound somewhere — the bound is
    ~d·u·(Σ|wⱼxⱼ|)-sized, i.e. ~1e-14 relative at these inputs, 100× below the perturbation."""
    rng = np.random.default_rng(5)
    d, m = 5, 6
    params = entry.draw(rng, d, m, entry.config)
    x = rng.standard_normal((3, d)) * 0.7
    pos = _positions(entry, x.shape[-2])
    got = entry.numpy_fn(x, params, entry.config, **pos) * (1 + 1e-12)
    with working_precision(DPS):
        err = _exact_error(got, features_mp(entry, x, params, dps=DPS, **pos))
    bound = feature_error_bound(entry, x, params, None, U64, ULPS, **pos)
    assert np.any(err > bound)


@pytest.mark.parametrize(
    "entry", [e for e in RF_ENTRIES if e.has("log_features") and e.matrix == "iid"],
    ids=lambda e: e.name,
)
def test_log_twin_is_log_of_twin(entry: FeatureMap):
    """log φ from the log twin equals log of the feature twin to the working precision, and the
    float64 log features are within their own bound."""
    rng = np.random.default_rng(3)
    d, m = 4, 5
    params = entry.draw(rng, d, m, entry.config)
    x = _inputs(rng, d)
    with working_precision(DPS):
        log_phi = features_mp(entry, x, params, log=True, dps=DPS)
        phi = features_mp(entry, x, params, dps=DPS)
        for a, b in zip(log_phi.ravel(), phi.ravel(), strict=True):
            assert abs(a - mpmath.log(b)) <= TIGHT * max(1, abs(a))
        got = entry.log_numpy_fn(x, params, entry.config)
        err = _exact_error(got, log_phi)
    assert np.all(err <= feature_error_bound(entry, x, params, None, U64, ULPS, log=True))


def test_features_reference_is_rounded_once():
    """features_reference = the exact features rounded to nearest float64 (|r − φ| ≤ u|φ|)."""
    entry = registry.get("softmax_trig[iid]")
    rng = np.random.default_rng(9)
    params = entry.draw(rng, 3, 4, entry.config)
    x = rng.standard_normal((2, 3))
    ref = features_reference(entry, x, params, dps=DPS)
    with working_precision(DPS):
        exact = features_mp(entry, x, params, dps=DPS)
        for r, e in zip(ref.ravel(), exact.ravel(), strict=True):
            assert abs(mpmath.mpf(r) - e) <= U64 * abs(e)


def test_missing_twin_and_bad_input():
    base = registry.get("relu_features[iid]")
    # a description the truth has no twin for (a FeatureMap with this formula is rejected at
    # construction, tests/test_protocol_validation.py): a bare structural MapSpec
    fake = SimpleNamespace(name="fake", formula="no_such_formula", kernel="softmax",
                           claims=frozenset(), config={}, has=lambda claim: False)
    with pytest.raises(KeyError, match="no_such_formula"):
        features_mp(fake, np.ones((1, 2)), {})
    params = base.draw(np.random.default_rng(0), 2, 3, base.config)
    with pytest.raises(ValueError, match="NaN"):
        features_mp(base, np.array([[np.nan, 1.0]]), params)
    with pytest.raises(ValueError, match="must have at least 2"):
        features_mp(base, np.ones(2), params)
    with pytest.raises(ValueError, match="shape"):
        features_mp(base, np.ones((1, 3)), params)
    with pytest.raises(ValueError, match="positions"):
        features_mp(base, np.ones((1, 2)), params, positions=np.arange(1))


# ----------------------------------------------------------------------------- attention


def test_softmax_attention_partition_of_unity_and_causality():
    """V = 1 gives outputs 1 (rows of the normalised kernel sum to 1); causal out_i equals the
    non-causal attention over the first i+1 keys; leading dims are looped over."""
    rng = np.random.default_rng(4)
    q, k = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 3))
    v = rng.standard_normal((2, 4, 2))
    with working_precision(DPS):
        ones = softmax_attention_mp(q, k, np.ones((2, 4, 1)), causal=True)
        assert all(abs(o - 1) <= TIGHT for o in ones.ravel())
        causal = softmax_attention_mp(q, k, v, causal=True)
        for i in range(4):
            prefix = softmax_attention_mp(q[1, : i + 1], k[1, : i + 1], v[1, : i + 1])
            for c in range(2):
                assert abs(causal[1, i, c] - prefix[i, c]) <= TIGHT


def test_kernel_and_feature_attention_agree():
    """feature attention = kernel attention with K = φ(q)φ(k)ᵀ (the definition, two code paths:
    the kernel path receives the Gram matrix computed separately here)."""
    rng = np.random.default_rng(6)
    pq, pk = np.abs(rng.standard_normal((3, 5))), np.abs(rng.standard_normal((3, 5)))
    v = rng.standard_normal((3, 2))
    with working_precision(DPS):
        gram = np.array([[mpmath.fsum(to_mp(pq[i]) * to_mp(pk[j])) for j in range(3)]
                         for i in range(3)], dtype=object)
        for causal in (False, True):
            a = feature_attention_mp(pq, pk, v, causal)
            b = kernel_attention_mp(gram, v, causal)
            assert all(abs(s - t) <= TIGHT for s, t in zip(a.ravel(), b.ravel(), strict=True))


def test_estimator_attention_matches_float64_linear_attention():
    """A float64 linear attention built from the float64 SM⁺ features agrees with the exact one.
    Tolerance (docs/math.md §9 ratio bound): each Âᵢⱼ = φ̂(qᵢ)ᵀφ̂(kⱼ) has relative error
    ε ≤ 2ε_φ + γ_(D) (features with relative error ε_φ = max bound/φ, a D-term positive dot
    product), so |ôut − out| ≤ (2ε/(1−ε))·max|v| + γ_(n+1)·max|v| (the final weighted sum)."""
    entry = registry.get("softmax_positive[iid]")
    rng = np.random.default_rng(8)
    d, m, n = 4, 8, 5
    params = entry.draw(rng, d, m, entry.config)
    q, k, v = rng.standard_normal((n, d)), rng.standard_normal((n, d)), rng.standard_normal((n, 2))
    ref = estimator_attention_reference(entry, params, q, k, v, causal=True, dps=DPS)
    s = d**-0.25
    fq = entry.numpy_fn(q * s, params, entry.config)
    fk = entry.numpy_fn(k * s, params, entry.config)
    a = np.tril(fq @ fk.T)
    got = (a @ v) / a.sum(axis=1, keepdims=True)
    eps_phi = max(
        np.max(feature_error_bound(entry, z * s, params, None, U64, ULPS)
               / entry.numpy_fn(z * s, params, entry.config))
        for z in (q, k)
    )
    eps_phi += 2 * U64  # the prescale q·d^(−1/4) is rounded in float64 here (and d^(-1/4) too)
    eps = 2 * eps_phi * (1 + 8 * m * U64) + m * U64 / (1 - m * U64)
    tol = (2 * eps / (1 - eps) + (n + 1) * U64 / (1 - (n + 1) * U64)) * np.max(np.abs(v))
    assert np.max(np.abs(got - ref)) <= tol
    assert tol < 1e-12  # the check is tight enough to be meaningful


def test_attention_zero_denominator_raises():
    with working_precision(DPS), pytest.raises(ValueError, match="denominator"):
        kernel_attention_mp(np.zeros((2, 2)), np.ones((2, 1)))


def test_prescale_is_exact():
    """estimator_attention_reference applies d^(−1/4) in mp: with d = 16 the factor ½ is exact,
    so prescaled inputs equal the float inputs halved."""
    entry = registry.get("softmax_positive[iid]")
    rng = np.random.default_rng(10)
    params = entry.draw(rng, 16, 3, entry.config)
    q, k, v = rng.standard_normal((2, 16)), rng.standard_normal((2, 16)), np.ones((2, 1))
    out = estimator_attention_reference(entry, params, q, k, v, dps=DPS)
    assert math.isclose(float(out[0, 0]), 1.0, rel_tol=0, abs_tol=U64)
    with working_precision(DPS):
        phi_q = features_mp(entry, q / 2, params, dps=DPS)
        phi_k = features_mp(entry, k / 2, params, dps=DPS)
        v2 = rng.standard_normal((2, 1))
        direct = feature_attention_mp(phi_q, phi_k, v2)
    out2 = estimator_attention_reference(entry, params, q, k, v2, dps=DPS)
    assert abs(mpmath.mpf(out2[1, 0]) - direct[1, 0]) <= U64 * abs(direct[1, 0])
