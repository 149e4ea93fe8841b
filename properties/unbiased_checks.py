"""The unbiasedness checks shared by the property suite and the report (a library module: the
report and ``properties/test_feature_unbiased.py`` call the same functions; importing it reads no
environment variable).

Each sample is one estimate ``φ_ω(x)ᵀφ_ω(y)`` from an independent parameter draw; the test is
:func:`kernel_verify.verify.stats.mean_test` with the strongest valid method (exact variance,
bounded range, or the ``V₁`` variance bound); the methods, their false-alarm rates and their
power are described in ``properties/test_feature_unbiased.py``'s module docstring.

:func:`unbiased_on_grid` and :func:`bias_is_visible` are the two deterministic-seed checks (no
Hypothesis search), which the report re-runs per map; they raise ``pytest.skip.Exception`` with
the reason when no test with a known false-alarm rate exists, :class:`Degenerate` where no valid
test exists at a point, and ``AssertionError`` when the property fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.properties import profiles
from kernel_verify.properties.alpha import per_assertion
from kernel_verify.properties.checks.estimates import (
    BIAS_DRAWS,
    RANGE_ONLY_DRAWS,
    bias_point,
    estimates,
    feature_m,
    has_range,
    mean_test_variance,
    point_range,
    range_bound,
    row_law,
    variance_covered,
)
from kernel_verify.properties.checks.estimates import (  # shared with kernel-verify calibrate
    DRAWS as ESTIMATE_DRAWS,
)
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.verify.moments import MOMENT_FORMULAS, QuadratureError
from kernel_verify.verify.references.biased_means import (
    estimate_range,
    reference_moments,
    reference_not_covered,
)
from kernel_verify.verify.references.kernels import kernel_mp
from kernel_verify.verify.stats import hoeffding_threshold, mean_test


def default_draws() -> int:
    """Monte Carlo sample size (independent parameter draws per assertion): 500 in the dev and
    ci profiles, 20000 in nightly (test_feature_unbiased's docstring, "Power")."""
    return 20000 if profiles.selected() == "nightly" else ESTIMATE_DRAWS


class Degenerate(Exception):
    """No valid test at this point: the exact variance is below ``1e-12·μ²`` (rounding is not
    negligible), or a quadrature-defined reference did not validate there."""


def untested_reason(target: FeatureMapTarget, label: str) -> str | None:
    """Why no mean test with a derived false-alarm rate exists for ``target`` (its verdict is
    then "not tested" with this reason), or None when one exists at every point.

    A function of the target alone, never of the example: :func:`has_range` depends only on the
    target (the formula's norm bound of a ``bounded`` target, independent of ``d`` and ``m``; the
    row law of its declared construction, for every d the properties draw; the fixed-norm ReLU
    range), and :func:`variance_covered` depends only on the formula, rows and claims. So the
    ``pytest.skip`` that :func:`check_mean` raises with it inside a Hypothesis body is the same
    on every example: it reports the target as not tested, it never drops a property because of
    one point (a quadrature that fails at one point is :class:`Degenerate`, that case only)."""
    if has_range(target, 2):
        return None
    if target.has("biased") and reference_mean_reason(target) is None:
        return None  # the row law of its construction gives a range at every point
    if target.has("unbiased") and variance_covered(target):
        return None
    other = ("blackbox_maps::test_unbiased_without_declared_family runs instead (stated "
             "pilot-variance assumption)" if not target.white_box
             else "no other property tests this claim")
    return (f"not tested: {target.name}: no exact variance (formula {target.formula!r}, "
            f"matrix {target.matrix!r}) and no proven range, so no test with a derived "
            f"false-alarm rate exists for its {label} claim; {other}. An exact variance "
            f"for this construction in verify.moments (formulas {sorted(MOMENT_FORMULAS)}"
            ", rows iid|orthogonal, or Gaussian rows) or a proven range would add it")


def check_mean(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, m: int, seed: int,
               mean: float, label: str, *, draws: int | None = None) -> None:
    """``mean_test`` of the estimates against ``mean`` with the strongest valid method; raises
    :class:`Degenerate` for (nearly) constant estimators without a range, or where the exact
    variance's quadrature did not converge at this point (that case only), and
    ``pytest.skip`` with :func:`untested_reason` when the target has no valid test at all."""
    reason = untested_reason(target, label)
    if reason is not None:
        pytest.skip(reason)
    m = feature_m(target, m)
    bounds = range_bound(target, x.shape[-1], m)
    found = mean_test_variance(target, x, y, m) if target.has("unbiased") else None
    var, how = found if found is not None else (None, "")
    law = (row_law(target, x, y, m) if bounds is None and target.has("biased")
           and reference_mean_reason(target) is None else None)
    if law is not None:
        # no range from the formula (exponential features), but the construction's row law
        # bounds every estimate and its one-row variance (verify/references/biased_means.py)
        bounds, var, how = law
        if not bounds[0] <= mean <= bounds[1]:
            raise AssertionError(
                f"{target.name}: the declared mean {label} = {mean:.10g} lies outside the proven "
                f"range {bounds} of every estimate of its construction ({how})")
    if bounds is None:
        bounds = point_range(target, x, y, m)  # e.g. relu_features with fixed-norm rows
    if bounds is None and var is None:
        # the family has an exact variance (untested_reason is None), but its quadrature did
        # not converge at this point: this case is skipped (Degenerate), never the property
        raise Degenerate(f"{target.name}: the exact-variance quadrature did not converge at "
                         f"x={x.tolist()}, y={y.tolist()}, m={m}")
    if var is not None and bounds is None:
        # Rounding must stay negligible: each sample carries a relative rounding error
        # ≲ 1e-14 (module docstring of test_feature_unbiased), so the sample mean is shifted by
        # at most 1e-14·|μ|. The median-of-means threshold is ≥ σ/√n; with σ² ≥ 1e-12·μ² and
        # n ≤ 20000 (nightly) that is ≥ 1e-6·|μ|/141 = 7e-9·|μ|, so the shift is < 1.5e-6 of
        # the threshold: the test's level is unchanged to that relative precision. Below this
        # variance the point is Degenerate (no valid test there), not drawn.
        if not var >= 1e-12 * mean * mean:
            raise Degenerate(f"variance {var:.3g} at mean {mean:.3g}")
    n = draws or default_draws()
    if draws is None and var is None:  # a range only: more draws (RANGE_ONLY_DRAWS)
        n = max(n, RANGE_ONLY_DRAWS)
    samples = estimates(target, x, y, m, seed, n)
    spread = ""
    if var is not None and float(np.var(samples)) > 4.0 * var:
        # the threshold assumes the declared family's variance: a sample far more spread than
        # that is rejected as much for its spread as for its mean (a map that is unbiased but
        # not the declared family, e.g. independent frequencies where pairs are declared)
        spread = (f"; the sample variance {float(np.var(samples)):.3g} is "
                  f"{float(np.var(samples)) / var:.3g}× the declared family's {var:.3g}: the "
                  "map's spread, not only its mean, differs from the declared construction")
    mean_test(samples, mean, alpha=per_assertion(), bounds=bounds, variance=var,
              label=f"{target.name}: E φ(x)ᵀφ(y) = {label}" + (f" [{how}]" if how else "")
              + spread,
              seed=seed,
              repro=f"estimates(target, x={x.tolist()}, y={y.tolist()}, m={m}, seed={seed})"
              ).check()


def kernel_value(target: FeatureMapTarget, kernel: str, x: np.ndarray, y: np.ndarray) -> float:
    try:
        return float(kernel_mp(kernel, x, y, **target.kernel_args(x.shape[-1])))
    except QuadratureError as exc:
        raise Degenerate(str(exc)) from None


def grid_pairs(d: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Deterministic cases: coordinate axes, collinear and (nearly) opposite, small, large."""
    e = np.eye(d)
    v = np.linspace(0.15, 0.45, d)
    return {
        "orthogonal_axes": (0.8 * e[0], 0.8 * e[1]),
        "same_axis": (e[0], 0.5 * e[0]),
        "nearly_opposite": (v, -0.9 * v),
        "collinear": (v, 2 * v),
        "small": (1e-3 * v, -2e-3 * v[::-1]),
        "large": (1.6 * e[0], 1.6 * e[-1]),
    }


#: The deterministic grid cases at d = 3.
GRID = list(grid_pairs(3))


def unbiased_on_grid(target: FeatureMapTarget) -> None:
    """E φ(x)ᵀφ(y) = k(x, y) on every deterministic grid case at d = 3 (m = 3: one orthogonal
    block); a case where the estimator is (nearly) constant and unbounded is left out. Case ``i``
    is scaled by the ``i``-th length of the declared kernel (``properties/kernel_scale.py``;
    1 for a kernel without one), so the grid sees the kernel where it varies."""
    from kernel_verify.properties.kernel_scale import to_kernel_scale

    tested = 0
    for i, (x, y) in enumerate(grid_pairs(3).values()):
        x, y = to_kernel_scale(target, 3, i, x), to_kernel_scale(target, 3, i, y)
        try:
            check_mean(target, x, y, 3, 1000 + i, kernel_value(target, target.kernel, x, y),
                       "k(x, y)")
            tested += 1
        except Degenerate:
            continue
    assert tested >= len(GRID) - 2, f"{target.name}: only {tested} grid cases were testable"


def bias_is_visible(target: FeatureMapTarget) -> None:
    """At d = 2, ``x ⟂ y`` and ``‖x − y‖ = ‖x + y‖ ∈ {1.5, …, 3}`` the fixed-norm mean (a
    Bessel/₀F₁ kernel) is far from the target: the first point with |mean − kernel| ≥ 2t must
    give a sample mean more than t from the kernel (and within t of the mean kernel). ``t``: the
    Hoeffding threshold of :data:`BIAS_DRAWS` independent draws in the proven range of one
    estimate at that point (:func:`~kernel_verify.properties.checks.estimates.point_range`: the
    formula's norm bound, or the row law of the declared construction, e.g. fixed-norm rows of
    the exponential maps). It fails only if a sample mean is ``t`` away from its true mean
    (probability ≤ α each, two assertions). The point:
    :func:`kernel_verify.properties.checks.estimates.bias_point` (shared with the calibration)."""
    d = 2
    m = feature_m(target, d)
    if not has_range(target, d):
        pytest.skip(f"not tested: {target.name}: its declared mean kernel "
                    f"{target.mean_kernel!r} needs a proven range for this check, and the "
                    f"construction {target.matrix!r} with formula {target.formula!r} has none "
                    "(no norm bound of the formula, no row law in "
                    "verify/references/biased_means.py)")
    found = bias_point(target, per_assertion(),
                       lambda a, b: kernel_value(target, target.mean_kernel, a, b),
                       lambda a, b: kernel_value(target, target.kernel, a, b))
    if found is None:
        parts = []
        for dist in (1.5, 3.0):
            x, y = np.array([dist / 2, dist / 2]), np.array([dist / 2, -dist / 2])
            lo, hi = point_range(target, x, y, m)
            t = hoeffding_threshold(BIAS_DRAWS, per_assertion(), hi - lo)
            bias = (kernel_value(target, target.mean_kernel, x, y)
                    - kernel_value(target, target.kernel, x, y))
            parts.append(f"‖δ‖ = {dist:g}: |bias| = {abs(bias):.3g}, 2t = {2 * t:.3g} "
                         f"(range width {hi - lo:.3g})")
        pytest.skip(f"not tested: {target.name}: |mean − kernel| < 2t at every grid point "
                    f"({'; '.join(parts)}): {BIAS_DRAWS} draws cannot show the bias")
    x, y, mean, kern, t, bounds = found
    dist = float(np.linalg.norm(x - y))
    samples = estimates(target, x, y, m, 77, BIAS_DRAWS)
    mean_test(samples, mean, alpha=per_assertion(), bounds=bounds,
              label=f"{target.name}: mean kernel at ‖δ‖ = {dist:.3g}", seed=77).check()
    gap = abs(float(samples.mean()) - kern)
    assert gap > t, (
        f"{target.name}: sample mean {samples.mean():.6g} is within t = {t:.3g} of the target "
        f"kernel {kern:.6g} at ‖δ‖ = {dist:.3g}, although the declared mean kernel is "
        f"{mean:.6g} (|bias| ≥ 2t): the estimator is not biased as declared (seed 77)"
    )


def reference_mean_reason(target: FeatureMapTarget) -> str | None:
    """Why a biased map without a declared mean kernel gets no reference-mean test ("not
    tested" with this reason), or None. A function of the target alone (its formula and
    construction; every d the properties draw, 2…5, has a row law)."""
    if not target.white_box:
        return (f"not tested: {target.name} claims 'biased' without a mean_kernel and is "
                "black-box: no formula and construction to compute a reference mean from")
    why = reference_not_covered(target.formula, target.matrix, 5)
    if why is not None:
        return (f"not tested: {target.name} claims 'biased' without a mean_kernel, and no "
                f"reference mean exists for it: {why} (verify/references/biased_means.py)")
    return None


def check_reference_mean(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, m: int,
                         seed: int, *, draws: int | None = None) -> None:
    """``E φ(x)ᵀφ(y)`` equals the reference mean of the target's construction
    (:func:`kernel_verify.verify.references.biased_means.row_moments`: the exact mean of one
    frequency row of the declared law, within its stated error ``e``).

    Test: the estimates of independent draws lie in the proven range ``[lo, hi]`` of that law
    (:func:`~kernel_verify.verify.references.biased_means.estimate_range`, rounding included),
    and two one-sided mean tests at level ``α/2`` each (Bernstein with the variance bound ``V₁``
    of one row, or Hoeffding with the range, whichever is smaller) against ``μ_ref + e`` (upper
    side) and ``μ_ref − e`` (lower side): since ``|μ − μ_ref| ≤ e``, a correct target is
    rejected with probability ≤ α (Bernstein/Hoeffding need only independent draws with the
    stated range and variance bound: no further assumption). A sample outside the range is a
    rejection. A sketch formula (PolySketch: ``((Sx)ᵀ(Sy))²``, unbounded) has the exact mean
    and variance of the estimate itself at this m (``sketch_moments``): median of means with
    that variance, one-sided at ``α/2`` each the same way."""
    reason = reference_mean_reason(target)
    if reason is not None:
        pytest.skip(reason)
    m = feature_m(target, m)
    mom = reference_moments(target.formula, target.matrix, x, y, target.config, m)
    # a sketch formula's estimate is unbounded above: its exact variance (median of means)
    bounds = estimate_range(mom, x.shape[-1], m) if np.isfinite(mom.hi) else None
    samples = estimates(target, x, y, m, seed, draws or default_draws())
    half = per_assertion() / 2
    for side, claimed in (("greater", mom.mean + mom.mean_error),
                          ("less", mom.mean - mom.mean_error)):
        mean_test(samples, claimed, alpha=half, bounds=bounds, variance=mom.variance,
                  alternative=side,
                  label=(f"{target.name}: E φ(x)ᵀφ(y) = reference mean {mom.mean:.10g} "
                         f"(± {mom.mean_error:.2g}; {mom.how})"),
                  seed=seed,
                  repro=f"estimates(target, x={x.tolist()}, y={y.tolist()}, m={m}, seed={seed})"
                  ).check()
