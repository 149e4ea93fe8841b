"""Exact estimator moments: closed forms (docs/math.md §1, §2, §4) against the independent 2-D
quadrature (docs/math.md §0), the ORF covariance by two methods, and the variance-reduction claims
of docs/math.md §3–§4.

Agreement thresholds: both methods claim 30 correct digits (dps = 30), so they must agree to
10^-25 relative — 5 digits of slack for the rounding of the final subtraction Var = E h² − (E h)²
(whose cancellation costs log10(E h²/Var) ≤ 4 digits on these inputs). Values that are exactly 0
(relu at θ = π) are compared absolutely: the quadrature's accuracy is 10^-(dps+3) of the
integrand's scale (≤ 1 on this grid), so |difference| ≤ 10^-30.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_verify.impls import registry
from kernel_verify.impls.numpy.random_features import optimal_gerf_a
from kernel_verify.verify.moments import (
    MOMENT_FORMULAS,
    QuadratureError,
    exact_moments,
    gerf_per_feature_variance,
    optimal_gerf_a_mp,
)
from kernel_verify.verify.moments.gauss_hermite import (
    expect_bivariate,
    hermite_rule,
    normal_exp_quadratic,
)
from kernel_verify.verify.moments.orf import (
    chi_mgf,
    orf_variance,
    orthogonal_covariance,
    orthogonal_covariance_quadrature,
    orthogonal_pair_count,
)
from kernel_verify.verify.references.kernels import kernel_mp
from kernel_verify.verify.references.mp import to_mp

DPS = 30
AGREE = mpmath.mpf(10) ** -25

CONFIGS = {"rff_pairs": {"sigma": 0.8}, "rff_phase": {"sigma": 1.3}, "gerf": {"A": -0.07},
           "random_maclaurin": {"p": 2.5}, "sderf": {"alpha": -0.08, "beta": -0.2},
           "darkformer": {"init_seed": 0, "spread": 0.5}}

# A deterministic grid: generic, equal, opposite, parallel, orthogonal and zero vectors, d = 1..5.
_R = np.random.default_rng(2024)
CASES = [
    ("generic5", _R.standard_normal(5) * 0.4, _R.standard_normal(5) * 0.4),
    ("equal3", np.array([0.3, -0.5, 0.2]), np.array([0.3, -0.5, 0.2])),
    ("opposite2", np.array([0.6, 0.1]), np.array([-0.6, -0.1])),
    ("parallel4", np.array([0.1, 0.2, -0.3, 0.4]), np.array([0.2, 0.4, -0.6, 0.8])),
    ("orthogonal2", np.array([0.7, 0.0]), np.array([0.0, -0.5])),
    ("zero3", np.zeros(3), np.array([0.4, -0.2, 0.1])),
    ("d1", np.array([0.9]), np.array([-0.35])),
]


def _rel(a, b):
    with mpmath.workdps(DPS + 10):
        return abs(a - b) / max(abs(b), mpmath.mpf(10) ** -40)


@pytest.mark.parametrize("formula", sorted(MOMENT_FORMULAS))
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_closed_form_equals_quadrature(formula, case):
    """Mean and per-frequency variance: closed form = 2-D reduction, to 25 digits."""
    _, x, y = case
    cfg = CONFIGS.get(formula, {})
    closed = exact_moments(formula, x, y, cfg, 1, method="closed", dps=DPS)
    quad = exact_moments(formula, x, y, cfg, 1, method="quadrature", dps=DPS)
    floor = mpmath.mpf(10) ** -30
    with mpmath.workdps(DPS + 10):
        assert abs(closed.mean - quad.mean) <= max(AGREE * abs(closed.mean), floor)
        v_c, v_q = closed.per_feature_variance, quad.per_feature_variance
        assert abs(v_c - v_q) <= max(AGREE * abs(v_c), floor)


@pytest.mark.parametrize("entry", [e for e in registry.all_maps() if e.matrix == "iid"
                                   and e.formula in MOMENT_FORMULAS], ids=lambda e: e.name)
def test_mean_is_target_kernel(entry):
    """Unbiased entries: the exact mean equals the reference of the entry's target kernel."""
    x, y = np.array([0.3, -0.2, 0.5]), np.array([-0.1, 0.4, 0.2])
    mom = exact_moments(entry, x, y, None, 3, dps=DPS)
    with mpmath.workdps(DPS):
        k = kernel_mp(entry.kernel, x, y, dps=DPS, **entry.kernel_args(3))
        assert _rel(mom.mean, k) <= AGREE


def test_iid_variance_and_api():
    """Var = V₁/m for iid rows; ORF with m = 1 has no pairs (= iid); as_float rounds; the
    unsupported constructions raise."""
    x, y = np.array([0.3, -0.2, 0.5]), np.array([-0.1, 0.4, 0.2])
    one = exact_moments("softmax_positive", x, y, {}, 1)
    seven = exact_moments("softmax_positive", x, y, {}, 7)
    with mpmath.workdps(DPS):
        assert _rel(seven.variance, one.variance / 7) < AGREE
    orf1 = exact_moments("softmax_positive", x, y, {}, 1, matrix="orthogonal")
    assert _rel(orf1.variance, one.variance) < AGREE
    assert isinstance(seven.as_float().variance, float)
    with pytest.raises(NotImplementedError, match="dependent"):
        exact_moments(registry.get("rff_pairs[fastfood]"), x, y, None, 4)
    with pytest.raises(NotImplementedError, match="relu"):
        exact_moments(registry.get("relu_features[orthogonal]"), x, y, None, 2)
    with pytest.raises(ValueError, match="NaN"):
        exact_moments("rff_pairs", np.array([np.nan, 0, 0]), y, {"sigma": 1.0}, 2)
    with pytest.raises(ValueError, match="m must be"):
        exact_moments("rff_pairs", x, y, {"sigma": 1.0}, 0)


# ----------------------------------------------------------------------------- quadrature rules


@pytest.mark.parametrize("order", [1, 5, 16])
def test_hermite_rule_moments(order):
    """Σwᵢ = 1 and Σwᵢgᵢ^(2k) = (2k−1)!! (N(0,1) moments) for 2k < 2·order; odd moments 0."""
    nodes, weights = hermite_rule(order, DPS)
    with mpmath.workdps(DPS):
        for power in range(2 * order):
            got = mpmath.fsum(w * g**power for g, w in zip(nodes, weights, strict=True))
            expect = 0 if power % 2 else mpmath.fac2(power - 1)
            assert abs(got - expect) <= AGREE * max(1, expect)


def test_gauss_hermite_raises_outside_domain():
    """Never an unconverged number: |α| = 40 needs more than MAX_ORDER nodes; e ≥ ½ diverges."""
    with pytest.raises(QuadratureError, match="outside the supported domain"):
        normal_exp_quadratic(40, 0, DPS)
    with pytest.raises(ValueError, match="diverges"):
        normal_exp_quadratic(1, 0.5, DPS)


def test_generic_bivariate_rule():
    """E[u²v²] = ‖x‖²‖y‖² + 2(xᵀy)² (Isserlis) by the generic 2-D product rule."""
    x, y = to_mp(np.array([0.5, -0.25])), to_mp(np.array([0.75, 0.5]))
    with mpmath.workdps(DPS):
        got = expect_bivariate(lambda u, v: u * u * v * v, x, y, DPS)
        expect = mpmath.mpf(0.3125) * mpmath.mpf(0.8125) + 2 * mpmath.mpf(0.25) ** 2
        assert _rel(got, expect) <= AGREE


@pytest.mark.parametrize("d,c,e", [(3, 1.5, 0.0), (4, 1j * 2.0, 0.0), (6, -0.7, -0.2)])
def test_chi_mgf_matches_direct_integral(d, c, e):
    """E exp(c r + e r²), r ~ χ_d, against mpmath.quad over the χ_d density
    r^(d−1)e^(−r²/2)/(2^(d/2−1)Γ(d/2))."""
    with mpmath.workdps(DPS):
        norm = 2 ** (mpmath.mpf(d) / 2 - 1) * mpmath.gamma(mpmath.mpf(d) / 2)
        c_mp, e_mp = mpmath.mpmathify(c), mpmath.mpf(e)
        direct = mpmath.quad(
            lambda r: r ** (d - 1) * mpmath.exp(-r * r / 2 + c_mp * r + e_mp * r * r),
            [0, 5, 10, mpmath.inf],
        ) / norm
        assert abs(chi_mgf(c_mp, d, e_mp) - direct) <= mpmath.mpf(10) ** -20 * abs(direct)


# ----------------------------------------------------------------------------- ORF


@pytest.mark.parametrize("formula,d", [("rff_pairs", 2), ("softmax_positive", 3)])
def test_orf_covariance_series_equals_disk_quadrature(formula, d):
    """The moment series and the direct quadrature of the disk law (docs/math.md §3) agree to 20
    digits."""
    rng = np.random.default_rng(d)
    x, y = rng.standard_normal(d) * 0.4, rng.standard_normal(d) * 0.4
    cfg = CONFIGS.get(formula, {})
    with mpmath.workdps(DPS):
        xm, ym = to_mp(x), to_mp(y)
        mean = exact_moments(formula, x, y, cfg, 1).mean
        series = orthogonal_covariance(formula, xm, ym, cfg, mean, 24)
        quad = orthogonal_covariance_quadrature(formula, xm, ym, cfg, mean, 24)
        assert abs(series - quad) <= mpmath.mpf(10) ** -20 * (abs(mean) ** 2 + abs(series))


def test_orf_pair_count_and_variance_formula():
    """One block (m ≤ d): V₁/m + (1−1/m)C; B full blocks (m = Bd): V₁/m + ((d−1)/m)C
    (docs/math.md §3)."""
    assert orthogonal_pair_count(3, 5) == 6
    assert orthogonal_pair_count(10, 5) == 40
    v1, c = mpmath.mpf(2), mpmath.mpf(-0.25)
    with mpmath.workdps(DPS):
        assert _rel(orf_variance(v1, c, 3, 5), v1 / 3 + (1 - mpmath.mpf(1) / 3) * c) < AGREE
        assert _rel(orf_variance(v1, c, 10, 5), v1 / 10 + mpmath.mpf(4) / 10 * c) < AGREE


@pytest.mark.parametrize("d", [8, 32])
@pytest.mark.parametrize("z", [0.5, 1.0, 2.0])
def test_rff_orthogonal_covariance_negative_and_yu_asymptotic(d, z):
    """RFF: C < 0 (ORF beats iid), and C·2d/(−e^(−z²)z⁴) → 1 as d grows (Yu et al. 2016 Thm 1,
    [recall]): its distance from 1 at d shrinks at least like 1/d, checked as
    |ratio(d) − 1| ≤ |ratio(d/4) − 1|/2 (a strict weakening of 4× for an O(1/d) term)."""
    def ratio(dim):
        x = np.zeros(dim)
        x[0] = z
        mom = exact_moments("rff_pairs", x, np.zeros(dim), {"sigma": 1.0}, dim,
                            matrix="orthogonal")
        with mpmath.workdps(DPS):
            approx = -mpmath.exp(-mpmath.mpf(z) ** 2) * mpmath.mpf(z) ** 4 / (2 * dim)
            return mom.covariance, mom.covariance / approx

    cov, r = ratio(d)
    assert cov < 0
    _, r_small = ratio(d // 4)
    assert abs(r - 1) <= abs(r_small - 1) / 2


def test_performer_theorem2_with_exact_covariance():
    """MSE(SM⁺ ORF) ≤ MSE(SM⁺ iid) − (1 − 1/m)(2/(d+2))(SM − Λ)² for m ≤ d (Performer Thm 2,
    recalled; docs/math.md §3) — 12 seeded cases, exact numbers."""
    rng = np.random.default_rng(77)
    for _ in range(12):
        d = int(rng.integers(3, 9))
        m = int(rng.integers(2, d + 1))
        x, y = rng.standard_normal(d) * 0.5, rng.standard_normal(d) * 0.5
        iid = exact_moments("softmax_positive", x, y, {}, m)
        orf = exact_moments("softmax_positive", x, y, {}, m, matrix="orthogonal")
        with mpmath.workdps(DPS):
            xm, ym = to_mp(x), to_mp(y)
            sm = mpmath.exp(mpmath.fsum(xm * ym))
            lam = mpmath.exp(-(mpmath.fsum(xm * xm) + mpmath.fsum(ym * ym)) / 2)
            gap = (1 - mpmath.mpf(1) / m) * 2 / mpmath.mpf(d + 2) * (sm - lam) ** 2
            assert orf.variance <= iid.variance - gap
            assert orf.covariance < 0


# ----------------------------------------------------------------------------- GERF optimum


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gerf_optimal_a_minimises_exact_variance(seed):
    """A* (docs/math.md §4) minimises the closed-form V₁(A) on A < 1/8: V₁(A*) ≤ V₁(A) on a grid;
    the quadrature variance at A* equals the closed form; the float64 A* of impls agrees."""
    rng = np.random.default_rng(seed)
    d = 4
    x, y = rng.standard_normal(d) * 0.6, rng.standard_normal(d) * 0.6
    with mpmath.workdps(DPS):
        xm, ym = to_mp(x), to_mp(y)
        a_star = optimal_gerf_a_mp(xm, ym)
        best = gerf_per_feature_variance(a_star, xm, ym)
        for a in np.linspace(-2.0, 0.12, 60):
            assert best <= gerf_per_feature_variance(float(a), xm, ym)
        for h in (mpmath.mpf(10) ** -4, -mpmath.mpf(10) ** -4):
            assert best <= gerf_per_feature_variance(a_star + h, xm, ym)
        s2 = float(mpmath.fsum((xm + ym) ** 2))
        assert abs(optimal_gerf_a(s2, d) - float(a_star)) <= 1e-14 * (1 + abs(float(a_star)))
    a64 = float(a_star)
    quad = exact_moments("gerf", x, y, {"A": a64}, 1, method="quadrature")
    closed = exact_moments("gerf", x, y, {"A": a64}, 1, method="closed")
    assert _rel(quad.per_feature_variance, closed.per_feature_variance) <= AGREE


# ------------------------------------------------------------------ fourth central moments
def _one_dim_mu4(h, scale2: float) -> float:
    """``E(h(t) − Eh)⁴`` for ``t ~ N(0, scale2)`` by mpmath.quad (independent of the
    exponential-sum reduction)."""
    import mpmath

    with mpmath.workdps(30):
        dens = lambda t: mpmath.exp(-t * t / (2 * scale2)) / mpmath.sqrt(2 * mpmath.pi * scale2)  # noqa: E731
        raw = [mpmath.quad(lambda t, k=k: h(t) ** k * dens(t), [-mpmath.inf, 0, mpmath.inf])
               for k in (1, 2, 3, 4)]
        e1, e2, e3, e4 = raw
        return float(e4 - 4 * e1 * e3 + 6 * e1**2 * e2 - 3 * e1**4)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(1, 4), m=st.integers(1, 9))
def test_fourth_moment_closed_forms_match_quadrature(seed, d, m):
    from kernel_verify.verify.moments import fourth_central_moment

    rng = np.random.default_rng(seed)
    x, y = 0.5 * rng.standard_normal(d), 0.5 * rng.standard_normal(d)
    for formula, cfg in (("softmax_positive", {}), ("softmax_hyperbolic", {}),
                         ("darkformer", {"init_seed": seed % 7, "spread": 0.5})):
        q = fourth_central_moment(formula, x, y, cfg, m)
        c = fourth_central_moment(formula, x, y, cfg, m, method="closed")
        for a, b in zip(q, c, strict=True):
            assert abs(a - b) <= 1e-20 * abs(b), (formula, a, b)
        assert abs(q[1] - exact_moments(formula, x, y, cfg, m).variance) <= 1e-20 * q[1]



def test_fourth_moment_of_one_row_matches_a_one_dimensional_integral():
    import mpmath

    from kernel_verify.verify.moments import fourth_central_moment

    x, y = np.array([0.3, -0.2]), np.array([0.1, 0.4])
    delta2, s2 = float(np.sum((x - y) ** 2)), float(np.sum((x + y) ** 2))
    c = float(np.exp(-(x @ x + y @ y) / 2))
    cases = {"rff_pairs": (lambda t: mpmath.cos(t), delta2),
             "softmax_positive": (lambda t: c * mpmath.exp(t), s2),
             "softmax_hyperbolic": (lambda t: c * mpmath.cosh(t), s2)}
    for formula, (h, scale2) in cases.items():
        mu4, _ = fourth_central_moment(formula, x, y, {"sigma": 1.0}, 1)
        expect = _one_dim_mu4(h, scale2)
        assert abs(float(mu4) - expect) <= 1e-12 * abs(expect), (formula, mu4, expect)


def test_relu_fourth_moment_at_x_equal_y_is_the_gaussian_moment():
    """At y = x, h = relu(u)² with u ~ N(0, ‖x‖²): ``E hᵏ = E relu(u)^(2k) = ‖x‖^(2k)·(2k − 1)!!/2``
    (half the Gaussian moment of order 2k)."""
    import mpmath

    from kernel_verify.verify.moments.fourth import raw_moments
    from kernel_verify.verify.references.mp import to_mp

    x = np.array([0.6, -0.8, 0.5])
    n2 = float(x @ x)
    raw = raw_moments("relu_features", to_mp(x), to_mp(x), {}, 30)
    for k, value in enumerate(raw, 1):
        expect = n2**k * float(mpmath.fac2(2 * k - 1)) / 2
        assert abs(float(value) - expect) <= 1e-14 * expect, (k, value, expect)


def test_fourth_moment_rejects_bad_input():
    from kernel_verify.verify.moments import fourth_central_moment

    x = np.zeros(2)
    with pytest.raises(KeyError, match="no exact fourth moment"):
        fourth_central_moment("cosformer", x, x, {}, 4)
    with pytest.raises(ValueError, match="m"):
        fourth_central_moment("softmax_positive", x, x, {}, 0)
    with pytest.raises(ValueError, match="method"):
        fourth_central_moment("softmax_positive", x, x, {}, 4, method="mc")
