"""Calibration parts ``estimators`` and ``reference_means``: the Monte Carlo checks of the
feature-map properties (unbiasedness, variance, the biased-map means)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from kernel_verify.calibration.certify import (
    NUMPY64,
    Row,
    _seed,
    costly_trials,
    ladder_row,
    rungs,
)
from kernel_verify.verify import seeds


def _builtin_maps(keep: Callable[..., bool]) -> tuple[str, ...]:
    """Registry names of the built-in feature maps that ``keep`` selects, in registry order."""
    from kernel_verify.impls.registry import all_maps

    return tuple(t.name for t in all_maps() if keep(t))


def estimator_targets() -> tuple[str, ...]:
    """Every built-in random map claiming ``unbiased`` that the unbiasedness properties test with
    a derived threshold (``untested_reason`` is None: the formula's range, an exact variance of
    its formula and rows, or the ``V₁`` bound of Gaussian rows): each runs the mean test with the
    range or variance its own formula and construction give (Hoeffding/Bernstein, median of
    means), and the variance tests where the property has an exact variance / μ₄. Read from the
    registry and the formula records (a new map or row construction is calibrated as soon as
    it is registered, never by a list of names here)."""
    from kernel_verify.properties.unbiased_checks import untested_reason

    return _builtin_maps(lambda t: t.has("unbiased") and not t.has("deterministic")
                         and untested_reason(t, "k(x, y)") is None)


def biased_targets() -> tuple[str, ...]:
    """Every built-in map claiming ``biased`` with a declared ``mean_kernel``: the targets of
    ``test_biased_mean_is_mean_kernel`` and the bias-visibility property (the formula's norm
    bound for the trigonometric maps, the row law of fixed-norm rows for the exponential ones)."""
    return _builtin_maps(lambda t: t.has("biased") and t.mean_kernel is not None)


def reference_targets() -> tuple[str, ...]:
    """Every built-in map claiming ``biased`` without a mean kernel that
    ``test_biased_mean_is_reference_mean`` tests (``reference_mean_reason`` is None: the
    reference mean of its row law, or the exact moments of a sketch)."""
    from kernel_verify.properties.unbiased_checks import reference_mean_reason

    return _builtin_maps(lambda t: t.has("biased") and t.mean_kernel is None
                         and reference_mean_reason(t) is None)


def sketch_targets() -> tuple[str, ...]:
    """Every built-in sketch map with an exact sketch-norm law (the targets of
    ``test_sketch_law.py::test_sketch_norm_follows_its_chi_square_law``)."""
    from kernel_verify.properties.checks.sketch_law import has_norm_law

    return _builtin_maps(lambda t: t.has("biased") and has_norm_law(t))


def estimator_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    """The unbiasedness property (``mean_test`` of φ(x)ᵀφ(y) against k(x, y)) and the variance
    properties (``variance_test`` against the exact variance; against the exact μ₄ on
    ``max(MIN_SEEDS, n // 3)`` trials, its quadrature costs ~1 s a point), at random points as
    the properties draw them, on one correct built-in map."""
    from kernel_verify.impls.registry import get
    from kernel_verify.properties.checks.estimates import (
        DRAWS,
        VARIANCE_DRAWS,
        estimates,
        exact_fourth_moment,
        exact_variance,
        feature_m,
        mean_test_variance,
        point_range,
        random_pair,
    )
    from kernel_verify.verify.references.kernels import kernel_mp
    from kernel_verify.verify.stats import mean_test, variance_test

    target = get(name)
    levels = rungs(n)
    mean_c, var_c = dict.fromkeys(levels, 0), dict.fromkeys(levels, 0)
    var_trials = 0
    mu4_trials = costly_trials(n)
    mu4_levels = rungs(mu4_trials)
    mu4_c, mu4_done = dict.fromkeys(mu4_levels, 0), 0
    mean_trials = 0
    for i in range(n):
        seed = _seed(entropy, "estimators", name, i)
        rng = np.random.default_rng(seed)
        d, m = 2 + i % 4, feature_m(target, 2 + i % 7)
        x, y = random_pair(seed, d, 0.8, 0.8)
        k = float(kernel_mp(target.kernel, x, y, **target.kernel_args(d)))
        bounds = point_range(target, x, y, m)  # the formula's, or the fixed-norm ReLU range
        var = exact_variance(target, x, y, m)
        found = mean_test_variance(target, x, y, m)  # exact, or the V₁ bound (Fastfood)
        if bounds is None and (found is None or not found[0] >= 1e-12 * k * k):
            continue  # check_mean's Degenerate point (no test there): not a trial
        mean_trials += 1
        samples = estimates(target, x, y, m, seed, DRAWS)
        for a in levels:
            mean_c[a] += not mean_test(samples, k, alpha=a, bounds=bounds,
                                       variance=None if found is None else found[0],
                                       seed=seed).ok
        if bounds is not None and var is not None:
            var_trials += 1
            for a in levels:
                var_c[a] += not variance_test(samples, k, var, alpha=a, bounds=bounds,
                                              seed=seed).ok
        if mu4_done >= mu4_trials:
            continue
        # the fourth-moment variance property: norms in [0.1, 0.4], 2000 draws, exact μ₄
        sx, sy = random_pair(seed, d, rng.uniform(0.1, 0.4), rng.uniform(0.1, 0.4))
        moments = exact_fourth_moment(target, sx, sy, m)
        if moments is not None:
            mu4_done += 1
            ks = float(kernel_mp(target.kernel, sx, sy, **target.kernel_args(d)))
            more = estimates(target, sx, sy, m, seeds.child_seeds(seed, 1, "unbounded")[0],
                             VARIANCE_DRAWS)
            for a in mu4_levels:
                mu4_c[a] += not variance_test(more, ks, moments[1], alpha=a,
                                              fourth_central_moment=moments[0], seed=seed).ok
    rows = ([ladder_row("feature_unbiased: mean_test of φ(x)ᵀφ(y) = k(x, y)", name, NUMPY64,
                        mean_trials, {a: mean_c[a] for a in rungs(mean_trials)})]
            if mean_trials else [])
    if var_trials:
        rows.append(ladder_row("feature_variance: variance_test = exact variance", name,
                               NUMPY64, var_trials, {a: var_c[a] for a in rungs(var_trials)}))
    if mu4_done:
        rows.append(ladder_row("feature_variance: variance_test by the exact μ₄", name, NUMPY64,
                               mu4_done, {a: mu4_c[a] for a in rungs(mu4_done) if a in mu4_c}))
    return rows


def _biased_trials(target, name: str, n: int, entropy: int, tag: str,
                   ) -> Iterator[tuple[int, int, int, np.ndarray, np.ndarray]]:
    """``(seed, d, m, x, y)`` of the ``n`` trials of a biased-map row on ``target`` (registry
    entry ``name``): the seed of trial ``i`` from ``(entropy, tag, name, i)``; ``d`` cycles
    through 2…5, ``m`` through the target's feature counts from 2…8 and the norms of x and y
    through the grid the properties draw (``test_feature_unbiased.norms``), directions from
    the seed."""
    from kernel_verify.properties.checks.estimates import feature_m, random_pair

    for i in range(n):
        seed = _seed(entropy, tag, name, i)
        d, m = 2 + i % 4, feature_m(target, 2 + i % 7)
        x, y = random_pair(seed, d, (0.05, 0.4, 0.8, 1.2)[i % 4], (0.4, 0.8, 1.2, 0.05)[i % 4])
        yield seed, d, m, x, y


def biased_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    """The biased-map properties on a correct biased map with a declared mean kernel:
    ``mean_test`` against ``mean_kernel`` at random points (``test_biased_mean_is_mean_kernel``,
    as :func:`~kernel_verify.properties.unbiased_checks.check_mean` runs it: Hoeffding in the
    formula's proven range, or Bernstein/Hoeffding with the range and one-row variance bound of
    the construction's row law), and the bias-visibility check
    (``test_bias_is_visible_where_theory_says_it_is_large``: at the point of
    :func:`~kernel_verify.properties.checks.estimates.bias_point` for the rung's α, the mean test
    against the mean kernel and ``|sample mean − kernel| > t``; a trial rejects when either
    fails), on ``max(MIN_SEEDS, n // 3)`` trials (2000 draws each)."""
    from kernel_verify.impls.registry import get
    from kernel_verify.properties.checks.estimates import (
        BIAS_DRAWS,
        DRAWS,
        bias_point,
        estimates,
        feature_m,
        range_bound,
        row_law,
    )
    from kernel_verify.verify.references.kernels import kernel_mp
    from kernel_verify.verify.stats import mean_test

    target = get(name)
    levels = rungs(n)
    mean_c = dict.fromkeys(levels, 0)
    for seed, d, m, x, y in _biased_trials(target, name, n, entropy, "biased"):
        mean = float(kernel_mp(target.mean_kernel, x, y, **target.kernel_args(d)))
        samples = estimates(target, x, y, m, seed, DRAWS)
        bounds, var = range_bound(target, d, m), None
        if bounds is None:  # exponential features: the row law's range and variance bound
            law = row_law(target, x, y, m)
            if law is None:
                raise ValueError(f"{name}: no proven range and no row law at d = {d}")
            bounds, var, _ = law
        for a in levels:
            mean_c[a] += not mean_test(samples, mean, alpha=a, bounds=bounds, variance=var,
                                       seed=seed).ok
    rows = [ladder_row("feature_unbiased (biased map): mean_test = mean_kernel", name, NUMPY64,
                       n, mean_c)]
    vis_trials = costly_trials(n)
    vis_levels = rungs(vis_trials)
    vis_c = dict.fromkeys(vis_levels, 0)
    m2 = feature_m(target, 2)

    def k_of(kernel: str) -> Callable[[np.ndarray, np.ndarray], float]:
        return lambda a, b: float(kernel_mp(kernel, a, b, **target.kernel_args(2)))

    points = {a: bias_point(target, a, k_of(target.mean_kernel), k_of(target.kernel))
              for a in vis_levels}
    for i in range(vis_trials):
        seed = _seed(entropy, "bias_visible", name, i)
        for a in vis_levels:
            if points[a] is None:
                continue
            x, y, mean, kern, t, bounds2 = points[a]
            draw_seed = seeds.child_seeds(seed, 1, f"{a:g}")[0]
            samples = estimates(target, x, y, m2, draw_seed, BIAS_DRAWS)
            bad = (not mean_test(samples, mean, alpha=a, bounds=bounds2, seed=seed).ok
                   or not abs(float(samples.mean()) - kern) > t)
            vis_c[a] += bad
    shown = {a: c for a, c in vis_c.items() if points[a] is not None}
    if shown:
        rows.append(ladder_row("feature_unbiased (biased map): bias visible where |mean − k| "
                               "≥ 2t", name, NUMPY64, vis_trials, shown))
    return rows


def reference_mean_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    """``test_biased_mean_is_reference_mean`` on a correct biased map without a mean kernel:
    :func:`~kernel_verify.properties.unbiased_checks.check_reference_mean`'s test (range of the
    row law, two one-sided Bernstein/Hoeffding tests at ``α/2`` against ``μ_ref ± e``; a sketch
    formula: median of means with the exact variance of its estimate at this m) at random points
    as the property draws them; a trial rejects when either side rejects. Its threshold
    is derived (no model assumption): the row checks that the derivation holds in practice."""
    from kernel_verify.impls.registry import get
    from kernel_verify.properties.checks.estimates import DRAWS, estimates
    from kernel_verify.verify.references.biased_means import estimate_range, reference_moments
    from kernel_verify.verify.stats import mean_test

    target = get(name)
    levels = rungs(n)
    counts = dict.fromkeys(levels, 0)
    for seed, d, m, x, y in _biased_trials(target, name, n, entropy, "reference_mean"):
        mom = reference_moments(target.formula, target.matrix, x, y, target.config, m)
        # a sketch formula's estimate is unbounded above: median of means, its exact variance
        bounds = estimate_range(mom, d, m) if np.isfinite(mom.hi) else None
        samples = estimates(target, x, y, m, seed, DRAWS)
        for a in levels:
            counts[a] += any(
                not mean_test(samples, mu, alpha=a / 2, bounds=bounds, variance=mom.variance,
                              alternative=side, seed=seed).ok
                for side, mu in (("greater", mom.mean + mom.mean_error),
                                 ("less", mom.mean - mom.mean_error)))
    return [ladder_row("feature_unbiased (biased map): mean_test = reference mean", name,
                       NUMPY64, n, counts)]


def sketch_law_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    """``test_sketch_norm_follows_its_chi_square_law`` on a correct sketch map: the property's
    own statistic and interval (:mod:`kernel_verify.properties.checks.sketch_law`) at its draws
    (d 1…5, m 2…8, the axis, ‖x‖ from its grid, 4000 sketches), at every rung. The law is exact
    and continuous, so the rate on correct code *is* the level (less the rounding widening): an
    exact-level row (``Row.exact_level``), ok while the rate is not shown above the level."""
    from kernel_verify.impls.registry import get
    from kernel_verify.properties.checks.sketch_law import sketch_norm_statistic

    target = get(name)
    levels = rungs(n)
    counts = dict.fromkeys(levels, 0)
    for i in range(n):
        seed = _seed(entropy, "sketch_law", name, i)
        rng = np.random.default_rng(seed)
        stat = sketch_norm_statistic(target, seed, 1 + i % 5, 2 + i % 7, int(rng.integers(5)),
                                     (0.05, 0.4, 1.2, 3.0)[i % 4])
        for a in levels:
            counts[a] += not stat.ok(a)
    return [ladder_row("feature_sketch_law: T = (m/‖x‖²)Σ‖Sx‖² in the two-sided χ²_(nm) "
                       "interval", name, NUMPY64, n, counts, exact_level=True)]
