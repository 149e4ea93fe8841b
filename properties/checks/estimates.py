"""Monte Carlo estimates of ``φ(x)ᵀφ(y)`` and what their tests need (range, exact variance):
shared by the unbiasedness and variance properties and by ``kernel-verify calibrate``, so that
calibration measures the very check the properties run."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from kernel_verify.impls.descriptor import BLACKBOX_SEEDS
from kernel_verify.properties.formulas import record
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.verify.moments import (
    EXACT_VARIANCE_MATRICES,
    QuadratureError,
    exact_moments,
    fourth_central_moment,
)
from kernel_verify.verify.references.biased_means import (
    estimate_range,
    fixed_norm_relu_range,
    not_covered,
    row_moments,
)
from kernel_verify.verify.tolerance import U64, gamma

#: Monte Carlo sample sizes (independent parameter draws per assertion): mean tests, and the
#: variance tests of properties/test_feature_variance.py.
DRAWS = 500
VARIANCE_DRAWS = 2000
#: Draws of the bias-visibility check of biased maps (a smaller threshold t is needed there).
BIAS_DRAWS = 2000
#: Draws of a mean test that has a range and no exact variance (Hoeffding or the empirical
#: Bernstein bound, ``verify/stats.py``): the bound's range term ``7wL/(3(n−1))`` falls as
#: ``1/n``, so at 4000 draws a spectral-mixture estimate of spread 0.03 is tested to ~0.013
#: (at 500, Hoeffding's 0.22 for the range [−1, 1]).
RANGE_ONLY_DRAWS = 4000


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
    # distinct children in [0, 2³²): a black-box map may hand them to a legacy seeding API
    children = np.random.default_rng(seed).choice(BLACKBOX_SEEDS, size=draws, replace=False)
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
    sq_norm = record(target.formula).sq_norm_bound  # sup ‖φ(x)‖²: |φ(x)ᵀφ(y)| ≤ this value
    if not target.has("bounded") or sq_norm is None:
        return None
    width = 2 * m + 8 * d + 64  # ≥ D, the feature count, for every bounded formula
    b = sq_norm * (1 + gamma(width + 8, U64))
    return -b, b


def row_construction(target: FeatureMapTarget) -> str | None:
    """The declared random-matrix construction; an undeclared one is ``"iid"`` unless the target
    claims ``orthogonal`` or ``simplex`` (then unknown: the iid moments would be wrong for it)."""
    if target.matrix is not None:
        return target.matrix
    return None if target.has("orthogonal") or target.has("simplex") else "iid"


def exact_variance(target: FeatureMapTarget, x, y, m: int) -> float | None:
    """Exact variance of one estimate, when verify.moments covers the target."""
    matrix = row_construction(target)
    if not record(target.formula).exact_variance or matrix not in EXACT_VARIANCE_MATRICES:
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
    if not target.has("gaussian_rows") or not record(target.formula).exact_variance:
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
    if not record(target.formula).exact_variance:
        return False
    return row_construction(target) in ("iid", "orthogonal") or target.has("gaussian_rows")


def exact_fourth_moment(target: FeatureMapTarget, x, y, m: int) -> tuple[float, float] | None:
    """``(μ₄, σ²)`` of one estimate for an iid-row target whose formula has an exact fourth
    moment (:mod:`kernel_verify.verify.moments.fourth`): by quadrature, or by the closed raw
    moments where the quadrature does not converge; else None (orthogonal or structured rows,
    unknown formula, or ``E h⁴`` infinite / not converged without a closed form)."""
    if not record(target.formula).fourth_moment or row_construction(target) != "iid":
        return None
    config = dict(target.config)
    try:
        mu4, var = fourth_central_moment(target.formula, x, y, config, m)
    except (KeyError, NotImplementedError, QuadratureError):
        # Outside the quadrature's domain (|α| ≳ 12: large norms) the closed raw moments, where
        # the formula has them, are still exact (the record's closed_fourth_moment).
        if not record(target.formula).closed_fourth_moment:
            return None
        mu4, var = fourth_central_moment(target.formula, x, y, config, m, method="closed")
    return float(mu4), float(var)


def row_law_covered(target: FeatureMapTarget, d: int) -> bool:
    """Whether :func:`point_range` has the row-law range of ``target`` at dimension ``d``: a
    white-box target whose formula and declared construction have a row law
    (:func:`kernel_verify.verify.references.biased_means.not_covered` is None). A function of the
    target and ``d`` alone."""
    return target.white_box and not_covered(target.formula, target.matrix, d) is None


def point_range(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, m: int
                ) -> tuple[float, float] | None:
    """A proven range of one computed estimate ``φ(x)ᵀφ(y)`` at this point, or None.

    :func:`range_bound` where the formula bounds every estimate at every point; otherwise, for a
    target covered by :func:`row_law_covered`, the range of its construction's row law at
    ``(x, y)`` (:func:`~kernel_verify.verify.references.biased_means.estimate_range`). For
    ``orthogonal_fixed_norm`` rows (every row has ``‖w‖ = √d`` exactly) and ``s = x + y``,
    ``N = (‖x‖² + ‖y‖²)/2``, ``r = √d‖s‖``, Cauchy–Schwarz gives ``|wᵀs| ≤ r`` for every row, so
    the per-row estimate lies in

    * ``softmax_positive`` (``h = e^(−N)·exp(wᵀs)``): ``[e^(−N − r), e^(−N + r)]``;
    * ``softmax_hyperbolic`` (``h = e^(−N)·cosh(wᵀs)``, the mean of the ``e^(wᵀx)`` and
      ``e^(−wᵀx)`` halves with the ``1/√(2m)`` scaling): ``[e^(−N), e^(−N)·cosh r]``;

    both ends attained by a row parallel (or orthogonal, for the hyperbolic minimum) to ``s``;
    and ``relu_features`` (``h = relu(wᵀx)·relu(wᵀy)``, no row law): ``[0, d(‖x‖‖y‖ + xᵀy)/2]``,
    the top at ``w`` along the bisector of ``x`` and ``y``.
    One estimate is the mean of the m rows' ``h``, so it lies in the same range whatever the
    dependence between the rows of an orthogonal block: the range bounds each *draw* of the
    map, and the tests that use it average independent draws (never rows), as Hoeffding needs.
    The range is widened by the rounding of a float64 implementation
    (:mod:`kernel_verify.verify.references.biased_means`, "Errors")."""
    bounds = range_bound(target, x.shape[-1], m)
    if bounds is not None:
        return bounds
    if _relu_fixed_norm(target):
        return fixed_norm_relu_range(x, y, m)
    law = row_law(target, x, y, m)
    return None if law is None else law[0]


def _relu_fixed_norm(target: FeatureMapTarget) -> bool:
    """ReLU features with fixed-norm rows: no row law (two projections), but a range,
    ``h ∈ [0, d(‖x‖‖y‖ + xᵀy)/2]`` per row
    (:func:`~kernel_verify.verify.references.biased_means.fixed_norm_relu_range`)."""
    return (target.white_box and record(target.formula).fixed_norm_range is not None
            and target.matrix == "orthogonal_fixed_norm")


def row_law(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, m: int
            ) -> tuple[tuple[float, float], float, str] | None:
    """``(range, V₁, how)`` from the row law of the target's declared construction at ``(x, y)``
    (:func:`row_law_covered`), or None: the proven range of one float64 estimate
    (:func:`point_range`) and the variance ``V₁ ≥ Var h`` of one row's estimate, which bounds the
    variance of the average of the m identically distributed rows of one draw (Cauchy–Schwarz,
    :mod:`kernel_verify.verify.references.biased_means`)."""
    if not row_law_covered(target, x.shape[-1]):
        return None
    mom = row_moments(target.formula, target.matrix, x, y, target.config)
    return (estimate_range(mom, x.shape[-1], m), mom.variance,
            f"range and variance bound of the row law: {mom.how}")


def has_range(target: FeatureMapTarget, d: int) -> bool:
    """Whether :func:`point_range` gives a range at every point of dimension ``d``."""
    return (range_bound(target, d, feature_m(target, d)) is not None
            or row_law_covered(target, d) or _relu_fixed_norm(target))


#: Rounding of the two kernel values of :func:`bias_point` (each an mpmath value rounded once to
#: float64: relative error ≤ u, charged as 2u).
_KERNEL_ROUNDING = 2 * U64


def bias_point(target: FeatureMapTarget, alpha: float, mean_kernel, kernel
               ) -> tuple[np.ndarray, np.ndarray, float, float, float,
                          tuple[float, float]] | None:
    """The point of the bias-visibility check of a biased map (``bias_is_visible`` in
    properties/unbiased_checks.py and its calibration): at d = 2, the first ``δ`` of
    ``linspace(1.5, 3, 7)`` with ``x = (δ/2, δ/2)``, ``y = (δ/2, −δ/2)`` (so ``x ⟂ y`` and
    ``‖x − y‖ = ‖x + y‖ = δ``: the shift-invariant fixed-norm means depend on ``‖x − y‖``, the
    softmax ones on ``‖x + y‖``, both far from their kernel there) where the declared mean kernel
    is at least ``2t`` from the target kernel after charging the rounding of both values
    (``|mean − kern| − 2u(|mean| + |kern|) ≥ 2t``), ``t`` the Hoeffding threshold of
    :data:`BIAS_DRAWS` estimates in the proven range :func:`point_range` at that point, at level
    ``alpha``. Returns ``(x, y, mean, kern, t, bounds)``, or None when no grid point qualifies.
    ``mean_kernel(x, y)``, ``kernel(x, y)``: the two kernel values."""
    from kernel_verify.verify.stats import hoeffding_threshold

    m = feature_m(target, 2)
    if not has_range(target, 2):
        raise ValueError(f"{target.name}: no proven range; the bias check needs one")
    for dist in np.linspace(1.5, 3.0, 7):
        x, y = np.array([dist / 2, dist / 2]), np.array([dist / 2, -dist / 2])
        bounds = point_range(target, x, y, m)
        t = hoeffding_threshold(BIAS_DRAWS, alpha, bounds[1] - bounds[0])
        mean, kern = float(mean_kernel(x, y)), float(kernel(x, y))
        if abs(mean - kern) - _KERNEL_ROUNDING * (abs(mean) + abs(kern)) >= 2 * t:
            return x, y, mean, kern, t, bounds
    return None
