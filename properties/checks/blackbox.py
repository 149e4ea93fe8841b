"""Checks of a feature map through its outputs only, shared by the property suite
(``properties/test_blackbox_maps.py``) and ``kernel-verify calibrate``.

* :func:`estimates`: i.i.d. estimates ``φ(x)ᵀφ(y)``, one independent draw (seed) each;
* :func:`fourth_difference_noise`: the float64-accuracy statistic. Along a random unit direction
  ``e``, ``Δ⁴F = F(x+2he) − 4F(x+he) + 6F(x) − 4F(x−he) + F(x−2he) = h⁴∂⁴φ + O(h⁶)`` plus at most
  ``16ε·max|F|`` of rounding (ε the relative error of each feature). Returned: the median over
  features and points of ``|Δ⁴F|/max|F|``, over the features whose ``max|F|`` exceeds
  ``2⁻⁴⁰`` of the largest feature's (smaller ones may be round-off of an exact zero).
  Float32 evaluation gives ``≈ 1e-7``; a smooth float64
  map ``≲ 1e-12`` at ``h = 2⁻¹²``. The level :data:`NOISE_LEVEL` = 1e-10 rests on a model
  assumption (the median feature has ``|∂⁴φ| ≤ 2.8e4·|φ|`` at ``‖x‖ ≤ 1``), so its false-alarm
  rate is measured, not derived;
* :func:`pilot_mean_test`: the known-variance mean test (``verify.stats.mean_test``: Catoni's
  M-estimator at the sizes here) with the variance
  ``V = 4·s²`` from an independent 200-draw pilot — the mean test for an unbiased map that
  declares no estimator family (no exact variance, no proven range). Model assumption: the
  estimator's variance is at most 4× the pilot's sample variance; measured false-alarm rate.
"""

from __future__ import annotations

import numpy as np

from kernel_verify.properties.checks.estimates import estimates as shared_estimates
from kernel_verify.properties.checks.estimates import feature_pairs
from kernel_verify.properties.formulas import record
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.verify.seeds import child_seeds
from kernel_verify.verify.seeds import rng as seeded_rng
from kernel_verify.verify.stats import StatResult, mean_test
from kernel_verify.verify.tolerance import U64, gamma, reference_rounding

#: Finite-difference step and rejection level of the float64-accuracy check.
STEP = 2.0**-12
NOISE_LEVEL = 1e-10
#: Features smaller than this fraction of the largest are left out of the statistic (see
#: :func:`fourth_difference_noise`).
NEGLIGIBLE_FEATURE = 2.0**-40
#: Assumption-based mean test: pilot size, variance inflation, main sample size.
PILOT, INFLATION, DRAWS = 200, 4.0, 500
#: Relative error of each feature of a correct float64 map: the stated assumption of the
#: black-box checks (properties/test_blackbox_maps.py, "float64 accuracy").
FEATURE_REL_ERROR = 1e-12


def estimates(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, seed: int,
              draws: int, m: int | None = None) -> np.ndarray:
    """``draws`` i.i.d. estimates ``φ(x)ᵀφ(y)``, each from an independent draw (the one sampler
    of :func:`kernel_verify.properties.checks.estimates.estimates`, in this module's argument
    order)."""
    return shared_estimates(target, x, y, m, seed, draws)


def fourth_difference_noise(target: FeatureMapTarget, seed: int, d: int, norm: float,
                            points: int = 3, length: float = 1.0,
                            step_length: float | None = None) -> float:
    """The float64-accuracy statistic (module docstring). Its points and directions are a
    statistical sample (the level's false-alarm rate is measured over them by ``kernel-verify
    calibrate``), drawn from the seed's stream ``"fourth_difference.points"`` — not from
    ``default_rng(seed)``, the stream the target's own parameter draw uses. ``length``: the
    declared kernel's length (``properties/kernel_scale.py``): point norm and step are scaled
    by it, so a map of bandwidth ℓ is differenced as a unit map is (``∂⁴`` grows as ``ℓ⁻⁴``).
    ``step_length`` (default ``length``): the step's own length, where the features oscillate
    faster than the kernel decays (:func:`~kernel_verify.properties.kernel_scale.
    curvature_length`: a spectral peak far from 0)."""
    step = length if step_length is None else step_length
    rng = seeded_rng(seed, "fourth_difference.points")
    ratios = []
    for _ in range(points):
        x = rng.standard_normal(d)
        x *= length * norm / np.linalg.norm(x)
        e = rng.standard_normal(d)
        e /= np.linalg.norm(e)
        grid = x + step * STEP * np.arange(-2, 3)[:, None] * e
        f = target.features(grid, seed=seed)
        delta4 = f[4] - 4 * f[3] + 6 * f[2] - 4 * f[1] + f[0]
        scale = np.abs(f).max(axis=0)
        # a feature below 2⁻⁴⁰ of the largest is (or may be) the float64 round-off of an exact
        # zero (e.g. the empty buckets of an FFT-based TensorSketch, ~1e-18 where the largest is
        # ~1e-2): its relative noise is O(1) in any precision and says nothing about float32
        keep = scale > NEGLIGIBLE_FEATURE * scale.max(initial=0.0)
        ratios.append(np.abs(delta4[keep]) / scale[keep])
    r = np.concatenate(ratios)
    return float(np.median(r)) if r.size else 0.0


#: Norms of the no-family mean test's points, in units of the declared kernel's length ℓ: up to
#: 1.5ℓ each, so opposite points lie 3ℓ apart, where a kernel decays to a few per cent and a
#: map whose frequencies have the wrong law (scale, shape or direction) is off by a visible
#: fraction of the kernel (at 0.2–0.8ℓ every stationary kernel is near 1 − c‖x − y‖², and only
#: the frequencies' second moment shows).
MEAN_TEST_NORMS = (0.2, 0.5, 0.8, 1.5)


def pilot_mean_test(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, seed: int,
                    mean: float, alpha: float) -> StatResult:
    """The assumption-based mean test (module docstring)."""
    return pilot_mean_tests(target, x, y, seed, mean, (alpha,))[0]


def pilot_variance(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, seed: int) -> float:
    """``INFLATION·s²`` of a :data:`PILOT`-draw pilot (its own seed stream, independent of the
    main sample's draws): the variance the assumption-based mean test uses."""
    pilot = estimates(target, x, y, child_seeds(seed, 1, "pilot")[0], PILOT)
    return INFLATION * float(np.var(pilot, ddof=1))


def estimates_and_products(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, seed: int,
                           draws: int) -> tuple[np.ndarray, np.ndarray]:
    """``(estimates, Σᵢ|φᵢ(x)φᵢ(y)|)`` per draw: the very draws of :func:`estimates` (the shared
    sampler's seed derivation), with the sum of absolute products the rounding bound needs."""
    est, absprod = np.empty(draws), np.empty(draws)
    for r, f in enumerate(feature_pairs(target, x, y, None, seed, draws)):
        est[r] = f[0] @ f[1]
        absprod[r] = float(np.abs(f[0] * f[1]).sum()) * (
            2 * FEATURE_REL_ERROR + FEATURE_REL_ERROR**2 + gamma(f.shape[-1], U64)
        ) * (1 + FEATURE_REL_ERROR) ** 2
    return est, absprod


def rounding_variance(bound: float, mean: float, alphas) -> float:
    """The smallest variance the assumption-based mean test uses, derived from the rounding a
    correct map may show, so that a sample whose only spread or offset is rounding is never
    rejected.

    Per draw, with features of relative error ``≤ ρ`` (:data:`FEATURE_REL_ERROR`, the black-box
    suite's stated assumption) and the float64 sum of ``D`` products
    (``|fl(Σaᵢbᵢ) − Σaᵢbᵢ| ≤ γ_D·Σ|aᵢbᵢ|``, Higham Lemma 3.1), the computed estimate is within
    ``(2ρ + ρ² + γ_D)(1 + ρ)²·Σ|φ̂ᵢ(x)φ̂ᵢ(y)|`` of the exact one (the computed products bound
    the exact ones within ``(1 + ρ)²``); ``bound`` is its maximum over the sample's draws
    (:func:`estimates_and_products`). The claimed mean, a reference rounded once, adds
    ``reference_rounding(mean)``. The known-variance threshold is ``t = c_α·σ`` (``c_α = t/σ``
    of :func:`kernel_verify.verify.stats.known_variance_threshold` for :data:`DRAWS` samples,
    Catoni's or the median of means', smallest at the largest α), so ``σ = R/c_α`` gives
    ``t ≥ R`` at every level; the variance is raised by one part in 10¹² so that ``t > R``
    strictly (Catoni's test rejects a constant sample at exactly ``t`` from the mean).

    It matters where the pilot is (nearly) constant: an exactly constant pilot has variance 0,
    and ``np.var`` of equal values may return ``~1e-34`` instead (its mean is rounded); either
    way a correct map whose estimate is one ulp from the rounded kernel was rejected. (It
    replaces the fallback ``max(|k|, 1)·1e-24`` used only at an exactly zero pilot variance:
    no derivation, and it scaled with ``|k|`` instead of ``k²``.)"""
    from kernel_verify.verify.stats import known_variance_threshold

    r = bound + float(reference_rounding(mean))
    c = min(known_variance_threshold(DRAWS, alpha, 1.0)[0] for alpha in alphas)
    return (r / c) ** 2 * (1 + 1e-12)


def pilot_mean_tests(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, seed: int,
                     mean: float, alphas) -> list[StatResult]:
    """:func:`pilot_mean_test` at each level of ``alphas`` on the same pilot and sample (the
    calibration's α ladder runs the property's check this way)."""
    samples, absprod = estimates_and_products(target, x, y, seed, DRAWS)
    var = max(pilot_variance(target, x, y, seed), rounding_variance(float(absprod.max()), mean,
                                                                    alphas))
    spread = float(np.ptp(samples))
    pair = ("y = −x" if np.allclose(x, -np.asarray(y), rtol=0, atol=1e-12) else
            "y = x" if np.allclose(x, y, rtol=0, atol=1e-12) else None)
    cause = ("the map ignores its seed (one fixed draw), or is deterministic" if pair is None
             else f"at this pair ({pair}) many correct estimators are the same for every draw "
             "(FAVOR+'s positive features at y = −x, random Fourier features at y = x), so "
             "the seed is not what this says; or the map ignores its seed, or is deterministic")
    same = ("" if spread > 1e-12 * float(np.abs(samples).max(initial=0.0)) else
            f" — every one of the {len(samples)} seeds gave the same estimate (spread "
            f"{spread:.2g}): {cause}; either way its mean over seeds is that one value")
    return [mean_test(
        samples, mean, alpha=alpha, variance=var,
        label=(f"{target.name}: E φ(x)ᵀφ(y) = {target.kernel}(x, y) [ASSUMPTION: variance ≤ "
               f"{INFLATION:g}× a {PILOT}-draw pilot variance; no family declared — declare "
               f"formula=/matrix= for the exact-variance test]{same}"),
        seed=seed, repro=f"pilot_mean_test(target, x={x.tolist()}, y={y.tolist()}, seed={seed})")
        for alpha in alphas]


# ------------------------------------------------------------------ deterministic identity
#: Assumed relative error of each returned feature of a correct float64 map (no formula).
FEATURE_ULPS = 64


def gram_bound(fx: np.ndarray, ex: np.ndarray, fy: np.ndarray, ey: np.ndarray,
               u: float = U64) -> np.ndarray:
    """``|fl(φ̂ψ̂ᵀ) − φψᵀ| ≤ |φ|e_ψ + e_φ|ψ| + e_φe_ψ + γ_D·(|φ| + e_φ)(|ψ| + e_ψ)`` (Higham
    3.5 for the inner product of length D, with feature bounds ``e``); ``fx``, ``fy`` are
    ``|φ̂| + e`` ≥ the exact feature magnitudes."""
    d = fx.shape[-1]
    g = d * u / (1 - d * u)
    a, b = np.abs(fx), np.abs(fy)
    return a @ ey.T + ex @ b.T + ex @ ey.T + g * ((a + ex) @ (b + ey).T)


def deterministic_excess(target: FeatureMapTarget, seed: int, d: int, scale: float) -> float:
    """``max |φ(X)φ(Y)ᵀ − K| / bound`` under the 64-ulp feature assumption (> 1: rejected), at
    Gaussian ``X, Y`` (``scale·N(0, 1)``) of the seed's stream ``"deterministic_excess.points"``
    (the calibration's sample; the property draws its inputs by Hypothesis)."""
    from kernel_verify.verify.references.kernels import gram_mp
    from kernel_verify.verify.references.mp import to_float

    rng = seeded_rng(seed, "deterministic_excess.points")
    X, Y = scale * rng.standard_normal((3, d)), scale * rng.standard_normal((3, d))
    F = target.features(np.concatenate([X, Y]), seed=seed)
    e = FEATURE_ULPS * U64 * np.abs(F)
    fx, fy, ex, ey = F[:3], F[3:], e[:3], e[3:]
    ref = to_float(gram_mp(target.kernel, X, Y, **target.kernel_args(d)))
    bound = gram_bound(np.abs(fx) + ex, ex, np.abs(fy) + ey, ey) + reference_rounding(ref)
    return float(np.max(np.abs(fx @ fy.T - ref) / bound))


# ------------------------------------------------------------ per-draw identities of a family
#: The per-draw identities of each black-box family (a formula's family is its record's
#: ``blackbox_family``, :mod:`kernel_verify.properties.formulas`):
#:
#: * ``pairs``: features are ``[cos, sin]`` pairs with squared weights summing to 1: per draw,
#:   ``‖φ(x)‖² = 1`` and ``φ(x + c)ᵀφ(y + c) = φ(x)ᵀφ(y)`` (``cos a cos b + sin a sin b =
#:   cos(a − b)`` for every row);
#: * ``norm_factor``: trigonometric softmax features ``φ = e^(‖x‖²/2)·ψ`` with ψ a pair map: the
#:   same identities for ψ, i.e. ``‖φ(x)‖² = e^(‖x‖²)`` — the norm factor of softmax features
#:   (docs/math.md §2);
#: * ``exponential``: exponential features of the softmax kernel (positive, hyperbolic, GERF):
#:   every feature is ``const·exp(±B·wᵀx − ‖x‖²/2)`` (GERF: ``B = √(1 − 4A)``, ``C = −½``;
#:   docs/math.md §2, §4), so ``g(x) = log φ(x) + ‖x‖²/2`` is affine in x per draw:
#:   ``g(x) + g(y) − g(x + y) − g(0) = 0``;
#: * ``homogeneous``: positively homogeneous features of the arc-cosine kernel of degree 1 (relu
#:   random features, Cho & Saul 2009; docs/math.md §0): ``φ(a·x) = a·φ(x)`` for ``a > 0``, per
#:   draw.
FAMILIES = ("pairs", "norm_factor", "exponential", "homogeneous")


def has_family_identities(formula: str | None) -> bool:
    """Whether the declared formula's record names a black-box family with identities here."""
    return record(formula).blackbox_family in FAMILIES


#: Relative level of the identities (an assumption, stated in the verdict): a correct float64
#: map meets them to ~1e-13 (phase errors ``≈ d·u·‖w‖‖x‖``); float32 evaluation or any model
#: defect (a wrong norm factor, a per-row stabiliser, a missing pair) is far above 1e-9.
IDENTITY_LEVEL = 1e-9


def family_identity_failures(target: FeatureMapTarget, seed: int, d: int,
                             shift: float = 2.0, level: float = IDENTITY_LEVEL,
                             inputs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                             ) -> list[str]:
    """Every violated per-draw identity of the declared family (module constants), for one draw
    (``seed``) at ``x``, ``y`` (scaled to norms ≤ 1) and a common shift ``c`` (scaled to norm
    ``shift``); empty when all hold. ``inputs``: the raw ``(x, y, c)`` (``c ≠ 0``; the property
    draws them by Hypothesis), default Gaussian ones from the seed's stream
    ``"family_identity.points"`` (the calibration's sample). ``level``: the relative level (the
    property uses :data:`IDENTITY_LEVEL`; the calibration also runs tighter levels to measure
    the margin). Raises KeyError for a formula without identities here."""
    formula = target.formula
    family = record(formula).blackbox_family
    if family not in FAMILIES:
        raise KeyError(f"no per-draw identities for formula {formula!r}")
    if inputs is None:
        inputs = tuple(seeded_rng(seed, "family_identity.points").standard_normal((3, d)))
    x, y, c = (np.array(a, dtype=np.float64) for a in inputs)
    x, y = x / max(1.0, np.linalg.norm(x)), y / max(1.0, np.linalg.norm(y))
    c *= shift / np.linalg.norm(c)
    pts = np.stack([x, y, x + c, y + c, x + y, np.zeros(d)])
    F = target.features(pts, seed=seed)
    bad = []
    if family == "homogeneous":
        a = 1.0 + shift
        G = target.features(a * pts[:2], seed=seed)
        err = np.abs(G - a * F[:2])
        tol = level * a * np.maximum(np.abs(F[:2]), np.abs(F[:2]).max())
        if not (err <= tol).all():
            bad.append(f"φ({a:g}·x) ≠ {a:g}·φ(x) (max |Δ| = {err.max():.3g}): relu features "
                       "are positively homogeneous of degree 1 for every draw")
        return bad
    if family == "exponential":
        if not (F > 0).all():
            return [f"{int((~(F > 0)).sum())} of {F.size} features are not > 0, but formula "
                    f"{formula!r} has exponential (positive) features"]
        g = np.log(F) + 0.5 * np.sum(pts**2, axis=1)[:, None]
        resid = g[0] + g[1] - g[4] - g[5]
        scale = 4 + np.abs(g[[0, 1, 4, 5]]).sum(axis=0)
        worst = int(np.argmax(np.abs(resid) / scale))
        if not (np.abs(resid) <= level * scale).all():
            bad.append(f"log φ(z) + ‖z‖²/2 is not affine in z (feature {worst}: g(x) + g(y) − "
                       f"g(x+y) − g(0) = {resid[worst]:.3g}, level {level:g}·"
                       f"{scale[worst]:.3g}): the norm factor is not exp(−‖x‖²/2), or the "
                       "features carry an input-dependent factor (per-row stabiliser, +ε)")
        return bad
    sq = np.sum(pts**2, axis=1)
    norm_factor = family == "norm_factor"
    psi = F * np.exp(-0.5 * sq)[:, None] if norm_factor else F
    norms2 = np.sum(psi[:4] ** 2, axis=1)
    if not (np.abs(norms2 - 1) <= level * np.maximum(norms2, 1)).all():
        what = "e^(−‖z‖²)·‖φ(z)‖²" if norm_factor else "‖φ(z)‖²"
        bad.append(f"{what} = {np.array2string(norms2, precision=12)} at four inputs, not 1: "
                   + ("the norm factor is not exp(‖x‖²/2)" if norm_factor
                      else "the [cos, sin] weights do not square-sum to 1 (or a pair is broken)"))
    before, after = psi[0] @ psi[1], psi[2] @ psi[3]
    mag = np.abs(psi[0] * psi[1]).sum() + np.abs(psi[2] * psi[3]).sum()
    if not abs(after - before) <= level * max(mag, 1e-300):
        bad.append(f"shifting both inputs by c (‖c‖ = {shift}) changed ψ(x)ᵀψ(y) from "
                   f"{before:.12g} to {after:.12g}: the map is not stationary per draw "
                   "(each row must see x − y only through cos/sin pairs of one projection)")
    return bad
