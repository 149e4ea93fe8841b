"""Variance of random-feature estimators: exact inequalities of the theory (no statistics) and the
measured variance of each implementation against the exact one (statistical).

Exact-number checks (``verify.moments``, 30 digits; both sides exact, compared with a slack of
``1e-20`` times the scale ``Var + mean²`` — a variance is a second moment minus the squared
mean, so its absolute accuracy at 30 digits is ~``10^-30·mean²``):

* hyperbolic vs positive (docs/math.md §2):
  ``Var(SM⁺ₕ) = ½(1 − e^(−‖s‖²))·Var(SM⁺) ≤ Var(SM⁺)`` at equal m
  (closed forms and Gauss–Hermite quadrature agree on both sides);
* ORF vs iid: SM⁺ with ``m ≤ d`` satisfies Performer Thm 2, ``Var_ORF ≤ Var_iid −
  (1 − 1/m)·(2/(d+2))·(SM − Λ)²`` (docs/math.md §3); RFF pairs: ``C < 0`` (so ORF < iid) for
  ``‖δ‖/σ ≤ 2`` and ``d ≥ 3`` — at ``‖δ‖/σ ≈ 3``, ``d ≥ 6`` C turns positive (measured with the
  exact C while this file was written), so the claim is restricted to the range where it holds;
* simplex vs ORF vs iid (docs/math.md §19): SM⁺ and GERF satisfy ``Var_simplex ≤ Var_ORF ≤
  Var_iid`` (the covariance is increasing in the rows' cosine; no such claim for the hyperbolic
  and trigonometric maps, where simplex rows measure worse than ORF);
* RFF pairs vs random phase at equal output size ``D = 2m``: ``(1−k²)²/D ≤ (½ + ½(1−k²)²)/D``;
* GERF at ``A*`` vs SM⁺ (``A = 0``): ``V₁(A*) ≤ V₁(0)``, and ``A*`` is a local minimum of ``V₁``.

Implementation checks (statistical, :func:`kernel_verify.verify.stats.variance_test` at
``α = properties.alpha.per_assertion()``): the sample variance of the target's estimates
(independent draws, known exact mean) equals the exact variance — bounded maps through their
proven range (see ``test_feature_unbiased``). For unbounded maps a variance test needs the exact
fourth central moment ``μ₄``: :mod:`kernel_verify.verify.moments.fourth` gives it for iid rows
(``(μ₄(h) + 3(m−1)V₁²)/m³``), and the test is median of means with ``Var((X − μ)²) = μ₄ − σ⁴``
(derived false-alarm rate). Orthogonal unbounded maps have no exact μ₄ and are skipped with that
reason. With orthogonal rows the exact ORF variance is used, so an implementation whose rows are
not Haar-orthogonal with independent χ_d norms has a different variance.

The fourth-moment test runs on every iid map with a declared formula, bounded ones too: the
range-based test of a bounded map has little power at large m, where ``R ≫ σ²`` (RFF pairs at m =
64 with m/2 distinct rows passed it). Power of the fourth-moment test, 2000 draws, α = 1e-5,
two-sided (threshold ``t`` relative to the exact variance, computed with
:func:`kernel_verify.verify.stats.median_of_means_threshold` at ``‖x + y‖ ≤ 0.6``):
``t/σ² ≈ 0.40–0.45`` at m = 64 (the black-box default) for the positive, hyperbolic, trigonometric,
GERF and relu estimators, 0.4–0.8 at m = 4 — an estimator whose variance is 1.5× the exact one (e.g.
m/2 distinct rows behind m outputs) or 0.5× (more rows than it says) is detected.
"""

from __future__ import annotations

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_verify.impls.registry import get
from kernel_verify.properties.alpha import per_assertion
from kernel_verify.properties.checks.estimates import (
    VARIANCE_DRAWS,
    estimates,
    exact_fourth_moment,
    exact_variance,
    feature_m,
    range_bound,
    row_construction,
)
from kernel_verify.properties.kernel_scale import to_kernel_scale
from kernel_verify.properties.strategies import point_pair, points, unit_vectors
from kernel_verify.properties.targets import feature_maps
from kernel_verify.properties.unbiased_checks import kernel_value
from kernel_verify.verify.moments import exact_moments, gerf_per_feature_variance, optimal_gerf_a_mp
from kernel_verify.verify.references.mp import to_mp
from kernel_verify.verify.stats import variance_test

FEW = max(3, settings.default.max_examples // 5)
#: Relative slack of the exact inequalities, derived from the precision of the compared values
#: (relative to ``E h² = Var + mean²``, which every comparison below passes as its scale:
#: ``|a| + |b| + mean² ≥ E h²``). :mod:`kernel_verify.verify.moments` evaluates at ``dps + 10``
#: digits and returns at ``dps = 30`` (mpmath keeps 103 bits at 30 digits: unit roundoff
#: ``U30 = 2⁻¹⁰³``); its series and quadratures stop once two orders agree to
#: ``10^-(dps+3)`` of their scale, the loosest check (a cancelled imaginary part) at
#: ``QUAD = 10^-dps`` (their stated accuracy; the closed forms at 40 digits err by ~10⁻³⁸). A
#: returned mean, second moment or variance (``E h² − mean²``: the cancellation is bounded by
#: ``E h²``) is therefore within ``(QUAD + 2·U30)·E h²`` of its exact value. Each side of a
#: comparison combines at most 2 such values with at most 8 roundings at 30 digits (each
#: ``≤ U30`` relative to a magnitude ``≤ E h²``: the gain of Theorem 2, the ratio of the
#: hyperbolic identity, the phase gap), so both sides together differ from the exact inequality
#: by at most ``2·(2·(QUAD + 2·U30) + 8·U30) = 4·QUAD + 24·U30 ≈ 6.4e-30``. (Measured: the
#: hyperbolic identity and the phase gap hold to ≤ 5e-32 of ``E h²`` over 25 random points each,
#: both methods. An inequality broken by a wrong formula is off by ≳ 1e-6 relative. Was the
#: literal ``1e-20``.)
_U30 = mpmath.mpf(2) ** -103
_QUAD = mpmath.mpf(10) ** -30
SLACK = 4 * _QUAD + 24 * _U30
DRAWS = VARIANCE_DRAWS

seeds = st.integers(0, 2**32 - 1)


def leq(a, b, what: str, scale=0) -> None:
    """``a ≤ b`` up to the working precision (evaluated at 30 digits; ``scale`` = mean²)."""
    with mpmath.workdps(30):
        assert a <= b + SLACK * (abs(a) + abs(b) + scale), f"{what}: {a} > {b}"


# ----------------------------------------------------------------------- exact inequalities
@settings(max_examples=FEW)
@given(d=st.integers(1, 6), m=st.integers(1, 8),
       nx=st.floats(0.05, 1.5), ny=st.floats(0.05, 1.5), data=st.data())
def test_hyperbolic_variance_is_half_one_minus_exp_of_positive(d, m, nx, ny, data):
    x, y = data.draw(point_pair(d, nx, ny), label="x, y")
    with mpmath.workdps(30):
        s2 = sum(v * v for v in to_mp(x) + to_mp(y))
        for method in ("closed", "quadrature"):
            pos = exact_moments("softmax_positive", x, y, {}, m, method=method)
            hyp = exact_moments("softmax_hyperbolic", x, y, {}, m, method=method)
            ratio = (1 - mpmath.exp(-s2)) / 2
            # variances are second moment − mean²: absolute accuracy ~10^-30·mean²
            scale = pos.variance + pos.mean**2
            assert abs(hyp.variance - ratio * pos.variance) <= SLACK * scale, (
                f"{method}: Var(SM⁺ₕ) = {hyp.variance} ≠ ½(1 − e^(−‖s‖²))·Var(SM⁺) = "
                f"{ratio * pos.variance} (x={x.tolist()}, y={y.tolist()})")
            leq(hyp.variance, pos.variance, "Var(SM⁺ₕ) ≤ Var(SM⁺)", pos.mean**2)


@settings(max_examples=FEW)
@given(d=st.integers(2, 6), m=st.integers(1, 6), data=st.data(),
       nx=st.floats(0.05, 1.2), ny=st.floats(0.05, 1.2))
def test_orthogonal_positive_features_satisfy_performer_theorem_2(d, m, nx, ny, data):
    m = min(m, d)  # the theorem is for one block, m ≤ d
    x, y = data.draw(point_pair(d, nx, ny), label="x, y")
    iid = exact_moments("softmax_positive", x, y, {}, m, matrix="iid")
    orf = exact_moments("softmax_positive", x, y, {}, m, matrix="orthogonal")
    with mpmath.workdps(30):
        xm, ym = to_mp(x), to_mp(y)
        sm = mpmath.exp(sum(a * b for a, b in zip(xm, ym, strict=True)))
        lam = mpmath.exp(-(sum(a * a for a in xm) + sum(b * b for b in ym)) / 2)
        gain = (1 - mpmath.mpf(1) / m) * mpmath.mpf(2) / (d + 2) * (sm - lam) ** 2
        leq(orf.variance, iid.variance - gain,
            f"Performer Thm 2 (m={m}, x={x.tolist()}, y={y.tolist()})", sm**2)


@settings(max_examples=FEW)
@given(formula=st.sampled_from(["softmax_positive", "gerf"]), d=st.integers(2, 8),
       m=st.integers(2, 12), data=st.data(), nx=st.floats(0.05, 1.0), ny=st.floats(0.05, 1.0))
def test_simplex_positive_features_beat_orthogonal_and_iid(formula, d, m, data, nx, ny):
    """SimRFs ≤ ORF ≤ iid for positive features (Reid et al. 2023; docs/math.md §19), exactly:
    given the norms, ``E[h(w₁)h(w₂)]`` is a strictly increasing function of the directions'
    cosine for SM⁺ and GERF (their product depends on ``(w₁ + w₂)ᵀs``, whose rotation average
    ``₀F₁(; d/2; ‖w₁ + w₂‖²‖s‖²/4)`` grows with ``‖w₁ + w₂‖²``), so the simplex covariance
    (cosine −1/(d−1)) is below the ORF one (cosine 0), and the ORF one is below 0 (Performer
    Thm 2). Not a claim for the hyperbolic or trigonometric maps, where §19 measures the reverse."""
    x, y = data.draw(point_pair(d, nx, ny), label="x, y")
    cfg = dict(get(f"{formula}[iid]").config)  # the registry's parameters (GERF: A = -0.1)
    iid = exact_moments(formula, x, y, cfg, m, matrix="iid")
    orf = exact_moments(formula, x, y, cfg, m, matrix="orthogonal")
    simplex = exact_moments(formula, x, y, cfg, m, matrix="simplex")
    scale = iid.mean**2
    leq(simplex.covariance, orf.covariance, f"C_simplex ≤ C_ORF ({formula}, d={d})", scale)
    leq(orf.covariance, 0, f"C_ORF ≤ 0 ({formula}, d={d})", scale)
    leq(simplex.variance, orf.variance,
        f"Var_simplex ≤ Var_ORF ({formula}, d={d}, m={m}, x={x.tolist()}, y={y.tolist()})", scale)
    leq(orf.variance, iid.variance, f"Var_ORF ≤ Var_iid ({formula}, d={d}, m={m})", scale)


@settings(max_examples=FEW)
@given(d=st.integers(3, 8), blocks=st.integers(1, 2), z=st.floats(0.05, 2.0), data=st.data())
def test_orthogonal_rff_has_lower_variance_than_iid(d, blocks, z, data):
    delta = z * data.draw(unit_vectors(d), label="δ/‖δ‖")
    x = data.draw(points((d,)), label="x")
    y = x - delta
    m = blocks * d
    iid = exact_moments("rff_pairs", x, y, {"sigma": 1.0}, m, matrix="iid")
    orf = exact_moments("rff_pairs", x, y, {"sigma": 1.0}, m, matrix="orthogonal")
    assert orf.covariance < 0, f"C = {orf.covariance} ≥ 0 at ‖δ‖ = {z}, d = {d}"
    leq(orf.variance, iid.variance, f"ORF ≤ iid for RFF (d={d}, m={m}, z={z})", iid.mean**2)


@settings(max_examples=FEW)
@given(d=st.integers(1, 6), m=st.integers(1, 16), sigma=st.floats(0.3, 3.0), data=st.data(),
       nx=st.floats(0.0, 3.0), ny=st.floats(0.0, 3.0))
def test_rff_pairs_beat_random_phase_at_equal_output_size(d, m, sigma, nx, ny, data):
    x, y = data.draw(point_pair(d, max(nx, 1e-3), max(ny, 1e-3)), label="x, y")
    cfg = {"sigma": sigma}
    pairs = exact_moments("rff_pairs", x, y, cfg, m)  # 2m outputs
    phase = exact_moments("rff_phase", x, y, cfg, 2 * m)  # 2m outputs
    leq(pairs.variance, phase.variance, "Var(pairs, m) ≤ Var(phase, 2m)", pairs.mean**2)
    with mpmath.workdps(30):
        # the gap is exactly (½ + ½(1−k²)² − (1−k²)²)/(2m) = (1 − (1−k²)²)/(4m) ≥ 0
        # (docs/math.md §1)
        k = pairs.mean
        gap = (1 - (1 - k * k) ** 2) / (4 * m)
        # the scale of the cancellation is E h² = Var + mean² ≤ Var + 1: the mean is the
        # Gaussian kernel, |k| ≤ 1, so mean² ≤ 1 — the "+ 1" below (derived; see SLACK)
        assert abs((phase.variance - pairs.variance) - gap) <= SLACK * (phase.variance + 1)


@settings(max_examples=FEW)
@given(d=st.integers(1, 6), nx=st.floats(0.05, 1.5), ny=st.floats(0.05, 1.5), data=st.data())
def test_gerf_at_optimal_a_beats_positive_features(d, nx, ny, data):
    x, y = data.draw(point_pair(d, nx, ny), label="x, y")
    with mpmath.workdps(30):
        xm, ym = to_mp(x), to_mp(y)
        a_star = optimal_gerf_a_mp(xm, ym)
        v_star = gerf_per_feature_variance(a_star, xm, ym)
        v_zero = gerf_per_feature_variance(0, xm, ym)
        # the scale of the cancellation: E h² = V₁ + SM², SM = exp(xᵀy) the mean (see SLACK)
        sm2 = mpmath.exp(2 * sum(a * b for a, b in zip(xm, ym, strict=True)))
        leq(v_star, v_zero, f"V₁(A*) ≤ V₁(0) = Var(SM⁺), A* = {a_star}", sm2)
        h = mpmath.mpf(10) ** -4
        for a in (a_star - h, a_star + h):
            leq(v_star, gerf_per_feature_variance(a, xm, ym), f"A* is a minimum (A = {a})", sm2)


# ------------------------------------------------------------- implementation, statistical
BOUNDED_WITH_VARIANCE = feature_maps("unbiased", "bounded")


@pytest.mark.statistical(assertions=1)
@pytest.mark.parametrize("target", BOUNDED_WITH_VARIANCE)
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(2, 5), m=st.integers(2, 6), z=st.floats(0.5, 2.0),
       data=st.data())
def test_sample_variance_matches_exact_variance(target, seed, d, m, z, data):
    """Measured variance of φ(x)ᵀφ(y) over independent draws = the exact (iid or ORF) one.
    x and the direction of x − y are drawn by Hypothesis; the estimates are the seed's
    independent parameter draws. Points and distance at the declared kernel's scale
    (``properties/kernel_scale.py``)."""
    x = to_kernel_scale(target, d, seed, data.draw(points((d,)), label="x"))
    y = x - to_kernel_scale(target, d, seed,
                            z * data.draw(unit_vectors(d), label="(x − y)/‖x − y‖"))
    m = feature_m(target, min(m, d) if target.has("orthogonal") else m)
    var = exact_variance(target, x, y, m)
    if var is None:
        hint = ("the suite has no exact variance for this formula and construction" if
                target.formula is not None and target.matrix in ("iid", "orthogonal") else
                "declare formula=, matrix='iid'|'orthogonal' and config= on the target to add "
                "this test")
        pytest.skip(f"{target.name}: no exact variance for formula {target.formula!r} with "
                    f"matrix {target.matrix!r} ({hint})")
    bounds = range_bound(target, d, m)
    samples = estimates(target, x, y, m, seed, DRAWS)
    variance_test(samples, kernel_value(target, target.kernel, x, y), var,
                  alpha=per_assertion(), bounds=bounds,
                  label=f"{target.name}: Var φ(x)ᵀφ(y) (m={m})", seed=seed,
                  repro=f"estimates(target, x={x.tolist()}, y={y.tolist()}, m={m}, "
                  f"seed={seed}, draws={DRAWS})").check()


#: Input norms of the unbounded variance test: ``‖x + y‖ ≤ 0.8`` keeps the kurtosis of the
#: log-normal-type estimators moderate, so the test has power (module docstring).
SMALL_NORMS = st.floats(0.1, 0.4)


def _iid_with_formula(t) -> bool:
    return (not t.has("positional") and row_construction(t) == "iid"
            and t.formula is not None)


@pytest.mark.statistical(assertions=1)
@pytest.mark.parametrize("target", feature_maps("unbiased", predicate=_iid_with_formula))
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(2, 5), m=st.integers(2, 8), nx=SMALL_NORMS, ny=SMALL_NORMS,
       data=st.data())
def test_iid_variance_matches_exact_variance_by_fourth_moment(target, seed, d, m, nx, ny, data):
    """Var φ(x)ᵀφ(y) = the exact iid variance: median of means on ``(X − μ)²`` with the exact
    fourth central moment (module docstring). The only variance test of unbounded estimators
    (positive, hyperbolic, trigonometric, GERF, relu); for bounded ones (RFF) it complements the
    range-based test, which has little power at large m (the range R ≫ σ²). Detects an m that is
    not what the map says. Norms at the declared kernel's scale
    (``properties/kernel_scale.py``)."""
    x, y = (to_kernel_scale(target, d, seed, p)
            for p in data.draw(point_pair(d, nx, ny), label="x, y (unit scale)"))
    m = feature_m(target, m)
    moments = exact_fourth_moment(target, x, y, m)
    if moments is None:
        pytest.skip(f"{target.name}: no exact fourth moment for formula {target.formula!r} with "
                    f"matrix {target.matrix!r} (iid rows of a verify.moments formula only)")
    mu4, var = moments
    samples = estimates(target, x, y, m, seed, DRAWS)
    result = variance_test(
        samples, kernel_value(target, target.kernel, x, y), var, alpha=per_assertion(),
        fourth_central_moment=mu4,
        label=f"{target.name}: Var φ(x)ᵀφ(y) = {var:.4g} (m={m}, iid rows, exact μ₄)",
        seed=seed, repro=f"estimates(target, x={x.tolist()}, y={y.tolist()}, m={m}, "
        f"seed={seed}, draws={DRAWS})")
    if not result.ok and float(result.statistic.mean()) < var:
        # below the iid variance: coupled rows (orthogonal blocks, antithetic pairs, QMC)
        raise AssertionError(
            result.explain() + "\nThe variance is BELOW the iid one: the rows are probably not "
            f"independent (orthogonal blocks, antithetic ±w, quasi-Monte Carlo). If so, declare "
            f"that construction (matrix='orthogonal', ...) instead of matrix={target.matrix!r}")
    result.check()
