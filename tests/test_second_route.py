"""Every reference of ``verify/`` checked by an independent second route (issue #35), at
Hypothesis-generated points (generic coordinates, with random coordinates of ``x − y`` set to
zero, and the mirror images of ``x − y``; :func:`tests.second_route.pairs`).

=========================  ============================================  =========================
reference                  second route                                  tolerance, false alarm
=========================  ============================================  =========================
kernel values, random       Monte Carlo of the spectral / latent           empirical Bernstein
(gaussian, fixed-norm,      representation in NumPy (``E cos ωᵀδ``,        (proven range) or median
spectral mixture, GMM-PRF,  ``E Λe^{ωᵀs}``, ``E relu·relu``), 200 000      of means (proven
generative, softmax,        draws, at the point and at a mirror image      variance bound); α of
arccos1)                    of ``x − y``                                   the run's budget each
kernel values, exact        rational arithmetic (``fractions``) of an      10⁻²⁵ relative (the mp
(linear, polynomial,        expanded form: binomial expansion, index       value's rounding at 30
square, relu, DPFP, cosine  sums, ``k²`` for cosine, the Taylor series     digits); no false alarm
(squared), Taylor)          at square d
kernel values, elu+1,       an independent mp evaluation of the explicit   10⁻²⁵ relative
Hedgehog, cosFormer,        finite map (softmax by ``eᶻ/Σeᶻ``, the cos
Fastfood                    addition formula, Fastfood by butterflies)
kernel gradients            central differences of the value at           ``h²M₃/6 + ε/h`` (M₃ a
(``kernel_grad_mp``)        ``h = 10⁻³`` (a step 10³² times the            derived bound on the
                            reference's), where ``M₃`` is derived          third derivative, ε the
                                                                           value's accuracy)
kernel gradients            Monte Carlo of the gradient integrand          as for values, per
                            (``−sin(ωᵀδ)ω``, ``Λe^{ωᵀs}(ω − x)``, …)       component
generative gradient         the rule applied to ``−sin(gᵀδ)g``            10⁻¹⁵ (both validated
                            (``generative_grad_mp``)                      to 10⁻¹⁸·B)
feature Jacobians           closed forms vs high-precision differences    10⁻²⁵ relative
exact moments V₁, C         Monte Carlo of ``h²`` (iid) and of            as for values
                            ``h(w₁)h(w₂)`` for two orthogonal rows
quadrature rules            the Gaussian moments (exact below degree       10⁻²⁵
                            2n) and a rule of higher order
=========================  ============================================  =========================

Statistical checks are ``@pytest.mark.statistical``: each runs at the per-assertion ``α`` of the
run-wide budget (:mod:`kernel_verify.properties.alpha`; ``α_total = 10⁻³`` over every statistical
assertion collected, Bonferroni), and never above ``α_total/`` :data:`MODULE_ASSERTIONS` (an upper
bound on this module's statistical assertions, for a run of ``tests/`` alone, where the
property suite's collection hook that counts them is not loaded), so all of them together raise
a false alarm on correct references with probability ≤ ``α_total``. A failure names the
reference, the route and the point.
"""

from __future__ import annotations

import math
import zlib

import mpmath
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from kernel_verify.impls.registry import all_maps
from kernel_verify.properties import alpha
from kernel_verify.verify.moments.estimators import per_frequency_moments
from kernel_verify.verify.moments.orf import orthogonal_covariance
from kernel_verify.verify.references.gradients import (
    CLOSED_JACOBIANS,
    feature_jacobian_mp,
    kernel_grad_mp,
)
from kernel_verify.verify.references.kernels import kernel_mp
from kernel_verify.verify.references.kernels_catalogue import (
    GENERATIVE_ABS_TOL,
    mp_fastfood_matrix,
)
from kernel_verify.verify.references.mp import to_mp, working_precision
from kernel_verify.verify.references.quadrature import gauss_legendre, hermite_rule
from tests.second_route import (
    check_bounded,
    check_unbounded,
    empirical_bernstein,
    fwht,
    gradient_samples,
    mirror,
    pairs,
    point_text,
    rational_kernel,
    record,
    third_derivative_bound,
    value_samples,
)

DEFAULT_X = np.array([0.8, 0, 0, 0, 0, 0, 0, 0.0])
DEFAULT_Y = np.array([0.3, 0.6 * math.sin(math.pi / 3), 0, 0, 0, 0, 0, 0])  # the report's pair


#: Upper bound on this module's statistical assertions per run (examples incl. explicit ones ×
#: assertions: 8 kernels × 5 × 2 values, 8 × 4 × 4 gradient components, 2 × 4 × 2 moments,
#: 4 × 4 reference means).
MODULE_ASSERTIONS = 8 * 5 * 2 + 8 * 4 * 4 + 2 * 4 * 2 + 4 * 4


def _alpha() -> float:
    """The per-assertion level (module docstring)."""
    return min(alpha.per_assertion(), alpha.budget().total / MODULE_ASSERTIONS)


def _entry_of(kernel: str):
    return next(e for e in all_maps() if e.kernel == kernel)


def kernel_params(kernel: str, d: int) -> dict:
    if kernel in ("gaussian_fixed_norm",):
        return {"sigma": 1.3}
    if kernel in ("softmax_fixed_norm", "arccos1", "softmax"):
        return {}
    if kernel == "gaussian":
        return {"sigma": 1.3}
    return _entry_of(kernel).kernel_args(d)


def _ref(kernel, x, y, kp) -> float:
    return float(kernel_mp(kernel, x, y, dps=30, **kp))


def _seed(x: np.ndarray, salt: int) -> int:
    """A seed fixed by the point (crc32 of its bytes: the same on every run and process)."""
    return (zlib.crc32(x.tobytes()) + salt) % 2**32


# ----------------------------------------------------------------------- kernel values by MC
MC_KERNELS = ("gaussian", "gaussian_fixed_norm", "spectral_mixture", "generative", "softmax",
              "softmax_fixed_norm", "gmm_prf", "arccos1")


@pytest.mark.statistical(assertions=2)
@pytest.mark.parametrize("kernel", MC_KERNELS)
@settings(max_examples=4)
@given(point=pairs(dims=(2, 3, 4), scale=0.6), flips=st.lists(st.booleans(), min_size=4,
                                                              max_size=4))
@example(point=(DEFAULT_X * 0.75, DEFAULT_Y * 0.75), flips=[False, True, True, True])
def test_kernel_value_matches_monte_carlo_of_its_representation(kernel, point, flips):
    """``k(x, y)`` of the mp reference against the mean of 200 000 draws of its representation,
    at the point and at the mirror image of ``x − y`` (signs of the ``flips`` coordinates
    reversed; a cache that confused the two fails here). Tolerance: empirical Bernstein for a
    proven range, median of means for a proven variance bound (tests/second_route.py), each at the
    run's per-assertion α."""
    x, y = point
    d = len(x)
    kp = kernel_params(kernel, d)
    a = _alpha()
    flips_arr = np.zeros(d, dtype=bool)
    flips_arr[: min(d, len(flips))] = flips[:d]
    if not flips_arr.any():
        flips_arr[-1] = True
    for i, (px, py) in enumerate(((x, y), mirror(x, y, flips_arr))):
        exact = _ref(kernel, px, py, kp)
        samples, (kind, size) = value_samples(kernel, px, py, kp,
                                              np.random.default_rng(_seed(px, 35 + i)))
        label = f"{kernel} value vs Monte Carlo at {point_text(px, py)}"
        if kind == "bounded":
            check_bounded(label, samples, exact, size, a)
        else:
            check_unbounded(label, samples, exact, size, a)


# ------------------------------------------------------------ exact kernels: rational route
RATIONAL_KERNELS = ("linear", "polynomial", "square_dot", "relu_dot", "dpfp", "cosine", "taylor")


@pytest.mark.parametrize("kernel", RATIONAL_KERNELS)
@settings(max_examples=10)
@given(point=pairs(dims=(4,), scale=2.0))
def test_exact_kernel_matches_rational_arithmetic(kernel, point):
    """The mp value (30 digits) against exact rational arithmetic of an expanded form
    (tests/second_route.py ``rational_kernel``): equal to 10⁻²⁵ relative to ``max(1, |k|)``
    (the mp value's rounding is ≤ 10⁻²⁸ relative for these sums of ≤ 64 terms)."""
    x, y = point
    kp = kernel_params(kernel, 4)
    if kernel == "polynomial":
        kp = {**kp, "p": 3}
    exact = rational_kernel(kernel, x, y, kp)
    with working_precision(30):
        value = kernel_mp(kernel, x, y, dps=30, **kp)
        if kernel == "cosine":
            sq, sign = exact
            got, want = value * value, mpmath.mpf(sq.numerator) / sq.denominator
            assert (value > 0) - (value < 0) == sign, f"cosine sign at {point_text(x, y)}"
        else:
            got, want = value, mpmath.mpf(exact.numerator) / exact.denominator
        err = abs(got - want)
    record(f"{kernel} value", "rational arithmetic", float(err / max(1, abs(want))), 1e-25)
    assert err <= 1e-25 * max(1, abs(want)), (
        f"{kernel} value vs rational arithmetic at {point_text(x, y)}: mp {mpmath.nstr(got, 20)}"
        f" vs exact {mpmath.nstr(want, 20)}")


@settings(max_examples=10)
@given(point=pairs(dims=(2, 3, 4), scale=2.0), pos=st.tuples(st.integers(0, 256),
                                                            st.integers(0, 256)))
def test_finite_maps_match_an_independent_mp_evaluation(point, pos):
    """elu+1 (``Σ f(x_i)f(y_i)``, f by branches), Hedgehog (softmax as ``e^z/Σe^z``, not
    through log-softmax), cosFormer (``relu(x)ᵀrelu(y)(cos a cos b + sin a sin b)``, the
    addition formula its features use) and the learned Fastfood kernel (its matrix applied to
    ``δ`` by butterflies instead of the dense Hadamard product), all at 40 digits: equal to 10⁻²⁵
    relative to ``max(1, |k|)``."""
    x, y = point
    d = len(x)
    with working_precision(40):
        xm, ym = to_mp(x), to_mp(y)

        def f(v):
            return v + 1 if v > 0 else mpmath.exp(v)

        routes = {"elu_plus_one": (mpmath.fsum(f(a) * f(b) for a, b in zip(xm, ym, strict=True)),
                                   {})}
        kp = kernel_params("hedgehog", d)
        w, b = to_mp(kp["W"]), to_mp(kp["b"])

        def soft(z):
            e = [mpmath.exp(v) for v in z]
            total = mpmath.fsum(e)
            return [v / total for v in e]

        zx, zy = w @ xm + b, w @ ym + b
        routes["hedgehog"] = (mpmath.fsum(p * q for p, q in zip(
            soft(zx) + soft(-zx), soft(zy) + soft(-zy), strict=True)), kp)
        big_m = kernel_params("cosformer", d)["M"]
        i, j = pos
        ai, aj = mpmath.pi * i / (2 * big_m), mpmath.pi * j / (2 * big_m)
        relu = mpmath.fsum((a if a > 0 else 0) * (c if c > 0 else 0)
                           for a, c in zip(xm, ym, strict=True))
        routes["cosformer"] = (relu * (mpmath.cos(ai) * mpmath.cos(aj)
                                       + mpmath.sin(ai) * mpmath.sin(aj)),
                               {"M": big_m, "i": i, "j": j})
        kp = kernel_params("fastfood_learned", d)
        two = [np.atleast_2d(kp[k]) for k in ("S", "G", "B", "perm")]
        p = two[0].shape[-1]
        vec = np.array([*(xm - ym), *[mpmath.mpf(0)] * (p - d)], dtype=object) / kp["sigma"]
        rows = []
        for s_, g_, b_, perm in zip(*two, strict=True):
            u = fwht(to_mp(b_) * vec)[[int(t) for t in perm]]
            rows.extend(to_mp(s_) * fwht(to_mp(g_) * u) / mpmath.sqrt(p))
        routes["fastfood_learned"] = (mpmath.fsum(mpmath.cos(t) for t in rows) / len(rows), kp)
        for kernel, (want, params) in routes.items():
            got = kernel_mp(kernel, x, y, dps=40, **params)
            record(f"{kernel} value", "independent mp evaluation",
                   float(abs(got - want) / max(1, abs(want))), 1e-25)
            assert abs(got - want) <= 1e-25 * max(1, abs(want)), (
                f"{kernel} value vs independent evaluation at {point_text(x, y)}"
                f"{f' i = {i}, j = {j}' if kernel == 'cosformer' else ''}: "
                f"{mpmath.nstr(got, 20)} vs {mpmath.nstr(want, 20)}")


# ---------------------------------------------------------------------------- kernel gradients
H_STEP = 1e-3
DIFF_KERNELS = ("gaussian", "gaussian_fixed_norm", "spectral_mixture", "generative",
                "fastfood_learned", "softmax", "linear", "polynomial", "taylor", "square_dot",
                "relu_dot", "dpfp", "elu_plus_one", "cosformer")
#: kernels whose value is piecewise along ``x_j`` with a kink at ``x_j = 0``
KINKED = ("relu_dot", "dpfp", "elu_plus_one", "cosformer")


def _fastfood_m3(kp, d) -> np.ndarray:
    rows = mp_fastfood_matrix(*(np.atleast_2d(kp[k]) for k in ("S", "G", "B", "perm")), d)
    w = np.abs(np.array([[float(v) for v in r] for r in rows])) / kp["sigma"]
    return (w**3).max(axis=0)


@pytest.mark.parametrize("kernel", DIFF_KERNELS)
@settings(max_examples=3)
@given(point=pairs(dims=(2, 3), scale=0.6))
@example(point=(DEFAULT_X[:3] * 0.75, DEFAULT_Y[:3] * 0.75))
def test_kernel_gradient_matches_differences_at_a_moderate_step(kernel, point):
    """``kernel_grad_mp`` (step 10⁻³⁵ at 110 digits) against ``(k(x + h e_j) − k(x − h e_j))/2h``
    at ``h = 10⁻³`` from values at 30 digits: they differ by at most ``h²M₃,j/6`` (Taylor, M₃ the
    derived third-derivative bound of tests/second_route.py ``third_derivative_bound``) plus
    ``ε/h`` (ε the value's accuracy: 10⁻²⁸·max(1, |k|) at 30 digits, the validated 10⁻¹⁸ for
    the generative quadrature) plus the reference's own error (same ε over its step, 10⁻¹⁵ at
    most). Piecewise kernels are exact polynomials of degree ≤ 2 along ``x_j`` away from
    ``x_j = 0``: components whose stencil straddles 0 are skipped. No statistics: no false
    alarm."""
    x, y = point
    d = len(x)
    kp = kernel_params(kernel, d)
    if kernel == "cosformer":
        kp = {**kp, "i": 3, "j": 200}
    if kernel in ("polynomial", "taylor"):
        kp = {**kp, "p": 3} if kernel == "polynomial" else {**kp, "order": 3}
    m3 = _fastfood_m3(kp, d) if kernel == "fastfood_learned" else third_derivative_bound(
        kernel, x, y, kp, H_STEP)
    eps = GENERATIVE_ABS_TOL if kernel == "generative" else 1e-28 * max(1, abs(_ref(kernel, x, y,
                                                                                    kp)))
    with working_precision(30):
        ref = kernel_grad_mp(kernel, x, y, **kp) if kernel != "generative" else kernel_grad_mp(
            kernel, x, y, digits=12, **kp)
        for j in range(d):
            if kernel in KINKED and abs(x[j]) <= H_STEP:
                continue
            plus, minus = to_mp(x), to_mp(x)
            plus[j] += mpmath.mpf(H_STEP)
            minus[j] -= mpmath.mpf(H_STEP)
            diff = (kernel_mp(kernel, plus, to_mp(y), dps=30, **kp)
                    - kernel_mp(kernel, minus, to_mp(y), dps=30, **kp)) / (2 * H_STEP)
            # (1 + 1e-9): the bound evaluated in float64 (the remainder is attained exactly for a
            # cubic, e.g. the polynomial kernel with p = 3)
            tol = (H_STEP**2 * m3[j] / 6 * (1 + 1e-9) + eps / H_STEP
                   + 1e-15 * (kernel == "generative") + 1e-25)
            err = float(abs(diff - ref[j]))
            record(f"{kernel} gradient", f"central differences h = {H_STEP}", err, tol)
            assert err <= tol, (
                f"{kernel} gradient component {j}: kernel_grad_mp {float(ref[j]):.10g} vs central "
                f"difference at h = {H_STEP} {float(diff):.10g}, |diff| {err:.3g} > {tol:.3g} at "
                f"{point_text(x, y)}")


MC_GRAD_KERNELS = ("gaussian", "gaussian_fixed_norm", "spectral_mixture", "generative", "softmax",
                   "softmax_fixed_norm", "gmm_prf", "arccos1")


@pytest.mark.statistical(assertions=4)
@pytest.mark.parametrize("kernel", MC_GRAD_KERNELS)
@settings(max_examples=3)
@given(point=pairs(dims=(2, 3, 4), scale=0.6))
@example(point=(DEFAULT_X * 0.75, DEFAULT_Y * 0.75))
def test_kernel_gradient_matches_monte_carlo_of_the_integrand(kernel, point):
    """``∇ₓk`` of ``kernel_grad_mp`` against the mean of 200 000 draws of the gradient of the
    representation's integrand (tests/second_route.py ``gradient_samples``), per component:
    empirical Bernstein (proven range) or median of means (proven second-moment bound), α of
    the run's budget split over the components (``assertions=4`` ≥ d per example)."""
    x, y = point
    d = len(x)
    kp = kernel_params(kernel, d)
    a = _alpha() * 4 / d
    with working_precision(30):
        ref = [float(v) for v in (kernel_grad_mp(kernel, x, y, digits=12, **kp))]
    samples, (kind, size) = gradient_samples(kernel, x, y, kp,
                                             np.random.default_rng(_seed(x, 77)))
    for j in range(d):
        label = (f"{kernel} gradient component {j} (kernel_grad_mp {ref[j]:.6g}) vs Monte Carlo "
                 f"of the gradient integrand at {point_text(x, y)}")
        if kind == "bounded":
            check_bounded(label, samples[:, j], ref[j], float(size[j]), a)
        else:
            check_unbounded(label, samples[:, j], ref[j], float(size[j]), a)


# --------------------------------------------------------------------------- feature Jacobians
def _one_per_formula():
    seen = {}
    for e in all_maps():
        seen.setdefault(e.formula, e)
    return [e for e in seen.values() if e.formula in CLOSED_JACOBIANS]


@pytest.mark.parametrize("entry", _one_per_formula(), ids=lambda e: e.formula)
@settings(max_examples=3)
@given(point=pairs(dims=(2, 3), scale=1.0), seed=st.integers(0, 2**31 - 1))
def test_closed_jacobian_matches_differences_at_generated_points(entry, point, seed):
    """Closed-form Jacobians against central differences of the features' mp twins (step
    10⁻³⁵ at 110 digits; error ≤ 10⁻⁶⁰ relative by the gradients module's derivation), at
    generated points and parameter draws: equal to 10⁻²⁵ relative to the largest entry. Points
    where a piecewise map's argument (a coordinate, or ``wᵀx`` for ReLU features) lies within
    10⁻⁶ of its kink are not drawn (no derivative there)."""
    x, y = point
    d = len(x)
    params = entry.draw(np.random.default_rng(seed), d, max(3, entry.min_m), entry.config)
    pts = np.stack([x, y])
    if entry.formula in ("relu", "elu_plus_one"):
        assume(np.abs(pts).min() > 1e-6)
    if entry.formula == "relu_features":
        assume(np.abs(pts @ params["W"].T).min() > 1e-6)
    with working_precision(40):
        for log in (False, True) if entry.has("log_features") else (False,):
            closed = feature_jacobian_mp(entry, pts, params, log=log, dps=40)
            numeric = feature_jacobian_mp(entry, pts, params, log=log, numeric=True, dps=40)
            diff = max(abs(a - b) for a, b in zip(closed.ravel(), numeric.ravel(), strict=True))
            scale = max(abs(b) for b in numeric.ravel()) or 1
            record(f"{entry.formula} Jacobian", "high-precision differences",
                   float(diff / scale), 1e-25)
            assert diff <= 1e-25 * scale, (
                f"{entry.formula} Jacobian (log={log}) closed vs differences: "
                f"{mpmath.nstr(diff, 5)} (scale {mpmath.nstr(scale, 5)}) at {point_text(x, y)}, "
                f"params seed {seed}")


# ------------------------------------------------------------------------------- exact moments
def _h_samples(formula, x, y, w, sigma):
    """Per-frequency terms ``h(w)`` of the estimators (docs/math.md §1–§2): RFF pairs
    ``cos(wᵀδ/σ)``; positive features ``Λe^{wᵀs}``."""
    if formula == "rff_pairs":
        return np.cos(w @ (x - y) / sigma)
    return math.exp(-(x @ x + y @ y) / 2) * np.exp(w @ (x + y))


def _orthogonal_pair(rng, n, d):
    """Two rows of an orthogonal random-feature block: a Haar pair of orthonormal directions
    (Gram–Schmidt of two Gaussian vectors) times independent χ_d norms."""
    g1, g2 = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    q1 = g1 / np.linalg.norm(g1, axis=1, keepdims=True)
    g2 = g2 - (g2 * q1).sum(axis=1, keepdims=True) * q1
    q2 = g2 / np.linalg.norm(g2, axis=1, keepdims=True)
    r1 = np.linalg.norm(rng.standard_normal((n, d)), axis=1, keepdims=True)
    r2 = np.linalg.norm(rng.standard_normal((n, d)), axis=1, keepdims=True)
    return q1 * r1, q2 * r2


@pytest.mark.statistical(assertions=2)
@pytest.mark.parametrize("formula", ["rff_pairs", "softmax_positive"])
@settings(max_examples=3)
@given(point=pairs(dims=(2, 3, 4), scale=0.5))
def test_exact_moments_match_monte_carlo(formula, point):
    """The per-frequency second moment ``V₁ + (E h)²`` (iid rows) and the covariance ``C`` of
    two orthogonal rows (the one quantity of the ORF variance with a single analytic route in
    verify/moments) against Monte Carlo of ``h²`` and of ``h(w₁)h(w₂)``. RFF: ``h ∈ [−1, 1]``,
    empirical Bernstein; positive features: median of means with ``Var ≤ E h⁴ =
    Λ⁴e^{8‖s‖²}`` (Cauchy–Schwarz for the product of two rows with the same marginal)."""
    x, y = point
    d = len(x)
    sigma = 1.3
    config = {"sigma": sigma} if formula == "rff_pairs" else {}
    a = _alpha()
    with mpmath.workdps(30):
        mean, v1 = per_frequency_moments(formula, to_mp(x), to_mp(y), config, "closed", 30)
        cov = orthogonal_covariance(formula, to_mp(x), to_mp(y), config, mean, 30)
    mean, v1, cov = float(mean), float(v1), float(cov)
    rng = np.random.default_rng(_seed(x, 5))
    w = rng.standard_normal((200_000, d))
    h2 = _h_samples(formula, x, y, w, sigma) ** 2
    w1, w2 = _orthogonal_pair(rng, 200_000, d)
    prod = _h_samples(formula, x, y, w1, sigma) * _h_samples(formula, x, y, w2, sigma)
    where = f"at {point_text(x, y)}"
    if formula == "rff_pairs":
        check_bounded(f"{formula} E h² = V₁ + mean² {where}", h2, v1 + mean**2, 1.0, a)
        check_bounded(f"{formula} orthogonal C + mean² {where}", prod, cov + mean**2, 2.0, a)
    else:
        s = x + y
        h4 = math.exp(-2 * (x @ x + y @ y)) * math.exp(8 * s @ s)
        check_unbounded(f"{formula} E h² = V₁ + mean² {where}", h2, v1 + mean**2, h4, a)
        check_unbounded(f"{formula} orthogonal C + mean² {where}", prod, cov + mean**2, h4, a)


# ---------------------------------------------------------------------------- quadrature rules
@settings(max_examples=10)
@given(a=st.floats(0.05, 2.0), order=st.sampled_from([16, 24, 32]))
def test_quadrature_rules_match_exact_moments_and_a_higher_order(a, order):
    """Gauss–Hermite (N(0, 1)) of order n integrates ``g^{2k}`` exactly for ``2k < 2n``
    (``(2k − 1)!!``) and agrees with the rule of order ``n + 16`` on ``E cos(ag)``; Gauss–Legendre
    integrates ``t^{2k}`` to ``2/(2k + 1)`` and agrees with order ``n + 16`` on ``∫e^{at}``.
    Moments to 10⁻²⁵ relative (40 digits); the two orders within the sum of their truncation
    bounds (Gauss–Hermite, N(0, 1) weight: ``n!/(2n)!·max|f^{(2n)}|``, ``≤ n!a^{2n}/(2n)!`` for
    ``cos(ag)``; Gauss–Legendre: ``2^{2n+1}(n!)⁴/((2n + 1)((2n)!)³)·max|f^{(2n)}|``,
    ``max ≤ a^{2n}e^a`` for ``e^{at}``) plus 10⁻³⁰. No statistics: no false alarm."""
    with mpmath.workdps(40):
        av = mpmath.mpf(a)
        fac = mpmath.factorial

        def gh_bound(n):
            return fac(n) * av ** (2 * n) / fac(2 * n)

        def gl_bound(n):
            return (2 ** (2 * n + 1) * fac(n) ** 4 / ((2 * n + 1) * fac(2 * n) ** 3)
                    * av ** (2 * n) * mpmath.exp(av))

        for rule, moment, fn, bound in (
            (hermite_rule, lambda k: mpmath.fac2(2 * k - 1), lambda t: mpmath.cos(av * t),
             gh_bound),
            (gauss_legendre, lambda k: mpmath.mpf(2) / (2 * k + 1), lambda t: mpmath.exp(av * t),
             gl_bound),
        ):
            nodes, weights = rule(order, 40)
            for k in (0, 1, order // 2, order - 1):
                got = mpmath.fsum(w * t ** (2 * k) for t, w in zip(nodes, weights, strict=True))
                record(f"{rule.__name__}", "exact Gaussian/Legendre moments",
                       float(abs(got - moment(k)) / moment(k)), 1e-25)
                assert abs(got - moment(k)) <= 1e-25 * moment(k), (rule.__name__, order, k)
            hi_nodes, hi_weights = rule(order + 16, 40)
            low = mpmath.fsum(w * fn(t) for t, w in zip(nodes, weights, strict=True))
            high = mpmath.fsum(w * fn(t) for t, w in zip(hi_nodes, hi_weights, strict=True))
            tol = bound(order) + bound(order + 16) + mpmath.mpf(10) ** -30
            record(f"{rule.__name__}", "order n + 16", float(abs(low - high)), float(tol))
            assert abs(low - high) <= tol, (
                f"{rule.__name__} order {order} vs {order + 16} on a = {a}: "
                f"{mpmath.nstr(low - high, 5)} > {mpmath.nstr(tol, 5)}")


# ------------------------------------------------------- reference means of biased estimators
def _rows_direct(rng, n: int, d: int, matrix: str) -> np.ndarray:
    """Rows of the construction itself, sampled in NumPy: SORF row ``i`` (uniform) of
    ``√p·(HD₁)(HD₂)(HD₃)`` (``H = H₊/√p``, Sylvester; first d columns), or a row of a
    fixed-norm orthogonal block (uniform on the sphere of radius √d)."""
    if matrix == "orthogonal_fixed_norm":
        g = rng.standard_normal((n, d))
        return g / np.linalg.norm(g, axis=1, keepdims=True) * math.sqrt(d)
    p = 1 << max(0, (d - 1).bit_length())
    h = np.array([[1.0]])
    while h.shape[0] < p:
        h = np.block([[h, h], [h, -h]])
    signs = [rng.choice((-1.0, 1.0), size=(n, p)) for _ in range(3)]
    row = h[rng.integers(0, p, n)] * signs[0]
    row = (row @ h) * signs[1]
    row = (row @ h) * signs[2]
    return row[:, :d] / p


@pytest.mark.statistical(assertions=1)
@pytest.mark.parametrize("matrix", ["sorf", "orthogonal_fixed_norm"])
@pytest.mark.parametrize("formula", ["rff_pairs", "softmax_positive"])
@settings(max_examples=3)
@given(point=pairs(dims=(2, 3, 4), scale=0.5))
def test_reference_mean_of_a_biased_construction_matches_its_rows(formula, matrix, point):
    """``verify.references.biased_means.row_moments(...).mean`` (SORF: the exact enumeration of
    one row's law; fixed-norm: the ₀F₁ series) against the mean of ``h`` over 200 000 rows
    built by the construction itself (``_rows_direct``), within ``mean_error`` plus the
    empirical-Bernstein half-width on the proven range of ``h`` (``‖w‖ ≤ √p``: RFF in
    ``[−1, 1]``, positive features in ``e^{−N}e^{±√p‖s‖}``)."""
    from kernel_verify.verify.references.biased_means import row_moments

    x, y = point
    d = len(x)
    sigma = 1.3
    config = {"sigma": sigma} if formula == "rff_pairs" else {}
    ref = row_moments(formula, matrix, x, y, config)
    w = _rows_direct(np.random.default_rng(_seed(x, 9)), 200_000, d, matrix)
    radius = math.sqrt(1 << max(0, (d - 1).bit_length())) if matrix == "sorf" else math.sqrt(d)
    if formula == "rff_pairs":
        h, width = np.cos(w @ (x - y) / sigma), 2.0
    else:
        n_half = (x @ x + y @ y) / 2
        r = radius * float(np.linalg.norm(x + y))
        h = math.exp(-n_half) * np.exp(w @ (x + y))
        width = math.exp(-n_half) * (math.exp(r) - math.exp(-r))
    label = f"{formula}[{matrix}] reference mean vs rows of the construction at {point_text(x, y)}"
    err = abs(float(h.mean()) - ref.mean)
    tol = ref.mean_error + empirical_bernstein(h, width, _alpha())
    record(label.split(" at ")[0], "Monte Carlo of the rows, empirical Bernstein", err, tol)
    assert err <= tol, f"{label}: Monte Carlo {h.mean():.6g} vs reference {ref.mean:.6g}"
