"""Monte Carlo estimates of ``φ(x)ᵀφ(y)`` and what their tests need (range, exact variance):
shared by the unbiasedness and variance properties and by ``kernel-verify calibrate``, so that
calibration measures the very check the properties run."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.verify.moments import (
    FOURTH_MOMENT_FORMULAS,
    MOMENT_FORMULAS,
    QuadratureError,
    exact_moments,
    fourth_central_moment,
)
from kernel_verify.verify.tolerance import gamma

U64 = 2.0**-53
#: ``sup ‖φ(x)‖²`` by formula (properties/test_feature_unbiased.py); ``|φ(x)ᵀφ(y)| ≤`` this value.
SQ_NORM_BOUND = {"rff_pairs": 1.0, "fastfood": 1.0, "gmm_rks": 1.0, "generative": 1.0,
                 "rff_phase": 2.0}
#: Monte Carlo sample sizes (independent parameter draws per assertion): mean tests, and the
#: variance tests of properties/test_feature_variance.py.
DRAWS = 500
VARIANCE_DRAWS = 2000
#: Draws of the bias-visibility check of biased maps (a smaller threshold t is needed there).
BIAS_DRAWS = 2000


def random_pair(seed: int, d: int, nx: float, ny: float) -> tuple[np.ndarray, np.ndarray]:
    """Two seeded random directions in R^d scaled to norms ``nx`` and ``ny`` (the points of the
    unbiasedness, variance and black-box mean properties, and of ``kernel-verify calibrate``)."""
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(d), rng.standard_normal(d)
    return nx * x / np.linalg.norm(x), ny * y / np.linalg.norm(y)


def feature_pairs(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, m: int | None,
                  seed: int, draws: int) -> Iterator[np.ndarray]:
    """``draws`` feature pairs ``[φ(x), φ(y)]`` (shape ``(2, …)``), one independent parameter
    draw each: white-box from ``default_rng(child)``, black-box from the seed ``child``, the
    children drawn from ``default_rng(seed)``; ``m=None`` is the target's own ``m``."""
    xy = np.stack([x, y])
    children = np.random.default_rng(seed).integers(0, 2**63 - 1, size=draws)
    for child in children:
        if target.white_box:
            params = target.draw_params(np.random.default_rng(int(child)), x.shape[-1], m)
            yield target.features(xy, params=params)
        else:
            yield target.features(xy, seed=int(child))


def estimates(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, m: int, seed: int,
              draws: int = DRAWS) -> np.ndarray:
    """``draws`` i.i.d. estimates ``φ(x)ᵀφ(y)``, one independent parameter draw each."""
    return np.array([f[0] @ f[1] for f in feature_pairs(target, x, y, m, seed, draws)],
                    dtype=np.float64)


def feature_m(target: FeatureMapTarget, m: int) -> int:
    """The m the samples use (black-box targets fix their own)."""
    return max(m, target.min_m) if target.white_box else target.m


def range_bound(target: FeatureMapTarget, d: int, m: int) -> tuple[float, float] | None:
    """Proven range of one computed estimate (derived in the docstring of
    properties/test_feature_unbiased.py), or None."""
    if not target.has("bounded") or target.formula not in SQ_NORM_BOUND:
        return None
    width = 2 * m + 8 * d + 64  # ≥ D, the feature count, for every formula of the table
    b = SQ_NORM_BOUND[target.formula] * (1 + gamma(width + 8, U64))
    return -b, b


def row_construction(target: FeatureMapTarget) -> str | None:
    """The declared random-matrix construction; an undeclared one is ``"iid"`` unless the target
    claims ``orthogonal`` (then unknown: the iid moments would be wrong for it)."""
    if target.matrix is not None:
        return target.matrix
    return None if target.has("orthogonal") else "iid"


def exact_variance(target: FeatureMapTarget, x, y, m: int) -> float | None:
    """Exact variance of one estimate, when verify.moments covers the target."""
    matrix = row_construction(target)
    if target.formula not in MOMENT_FORMULAS or matrix not in ("iid", "orthogonal"):
        return None
    try:
        mom = exact_moments(target.formula, x, y, dict(target.config), m, matrix=matrix)
    except (NotImplementedError, QuadratureError):
        return None
    return float(mom.variance)


def mean_test_variance(target: FeatureMapTarget, x, y, m: int) -> tuple[float, str] | None:
    """``(V, how)``: the variance a mean test may use for an unbiased target — the exact variance
    where :mod:`kernel_verify.verify.moments` has it, else, for a target claiming ``gaussian_rows``
    (every row marginally ``N(0, I)``, e.g. Fastfood, or ORF rows of relu features), the per-feature
    variance ``V₁`` of the iid estimator as an upper bound: each of the m features has variance
    ``V₁`` and by Cauchy–Schwarz no covariance exceeds it, so ``Var((1/m)Σhᵢ) ≤ V₁``
    (docs/math.md §3). None when neither applies."""
    var = exact_variance(target, x, y, m)
    if var is not None:
        return var, "exact variance"
    if not target.has("gaussian_rows") or target.formula not in MOMENT_FORMULAS:
        return None
    try:
        mom = exact_moments(target.formula, x, y, dict(target.config), 1, matrix="iid")
    except (NotImplementedError, QuadratureError):
        return None
    return (float(mom.per_feature_variance),
            "variance ≤ V₁ (Cauchy–Schwarz over features with Gaussian rows; conservative)")


def variance_covered(target: FeatureMapTarget) -> bool:
    """Whether :func:`mean_test_variance` has a variance for this target's family at every point
    where its quadrature converges (so that a None from it is a quadrature failure at that point,
    not a family without a variance)."""
    if target.formula not in MOMENT_FORMULAS:
        return False
    return row_construction(target) in ("iid", "orthogonal") or target.has("gaussian_rows")


def exact_fourth_moment(target: FeatureMapTarget, x, y, m: int) -> tuple[float, float] | None:
    """``(μ₄, σ²)`` of one estimate for an iid-row target whose formula has an exact fourth
    moment (:mod:`kernel_verify.verify.moments.fourth`), else None (orthogonal or structured rows,
    unknown
    formula, or ``E h⁴`` infinite / not converged)."""
    if target.formula not in FOURTH_MOMENT_FORMULAS or row_construction(target) != "iid":
        return None
    try:
        mu4, var = fourth_central_moment(target.formula, x, y, dict(target.config), m)
    except (KeyError, NotImplementedError, QuadratureError):
        return None
    return float(mu4), float(var)


def bias_point(target: FeatureMapTarget, alpha: float, mean_kernel, kernel
               ) -> tuple[np.ndarray, np.ndarray, float, float, float] | None:
    """The point of the bias-visibility check of a biased map (``bias_is_visible`` in
    properties/unbiased_checks.py and its calibration): at d = 2, the first ``‖x − y‖`` of
    ``linspace(1.5, 3, 7)`` (x = −y on the first axis) where the declared mean kernel is at least
    ``2t`` from the target kernel, ``t`` the Hoeffding threshold of :data:`BIAS_DRAWS` estimates
    in the proven range at level ``alpha``. Returns ``(x, y, mean, kern, t)``, or None when no
    grid point qualifies. ``mean_kernel(x, y)``, ``kernel(x, y)``: the two kernel values."""
    from kernel_verify.verify.stats import hoeffding_threshold

    bounds = range_bound(target, 2, feature_m(target, 2))
    if bounds is None:
        raise ValueError(f"{target.name}: no proven range; the bias check needs one")
    t = hoeffding_threshold(BIAS_DRAWS, alpha, bounds[1] - bounds[0])
    for dist in np.linspace(1.5, 3.0, 7):
        x, y = np.array([dist / 2, 0.0]), np.array([-dist / 2, 0.0])
        mean, kern = float(mean_kernel(x, y)), float(kernel(x, y))
        if abs(mean - kern) >= 2 * t:
            return x, y, mean, kern, t
    return None
