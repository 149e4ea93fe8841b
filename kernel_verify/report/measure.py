"""Monte Carlo measurements of one random feature map, through the property suite's functions.

Samples are :func:`kernel_verify.properties.checks.estimates.estimates` (one independent
parameter draw per sample, the same function the unbiasedness and variance properties call); the
mean test is :func:`kernel_verify.verify.stats.mean_test` with :func:`range_bound` and
:func:`exact_variance` exactly as ``check_mean`` of the property suite chooses them (for a biased
map whose declared construction has a row law, e.g. fixed-norm exponential maps, the row law's
range and variance bound ``V₁``: :func:`~kernel_verify.properties.checks.estimates.row_law`).
Intervals are percentile bootstrap intervals (``conf``, default 99.9 %: about 0.5 chance flags
over the ~500 points of a full report): valid for heavy-tailed (log-normal) estimators where
±2 SE from the sample fourth moment is not, though at small R any interval under-covers a heavy
tail — so a theory point outside its band is flagged, never silently drawn.

**A flag means the theory or the code may be wrong** (issue #35). Where a test with guaranteed
coverage exists for ``E(X − k)² = σ²`` (an unbiased map, theory variance σ²), it decides the flag
instead of the bootstrap band, which is then only drawn (:func:`guaranteed_variance_test`):

* the exact fourth central moment (iid rows, :mod:`kernel_verify.verify.moments.fourth`);
* a proven range of every estimate (bounded maps, e.g. RFF): Hoeffding/Bernstein on ``(X − k)²``;
* a derived bound on the fourth moment where the rows are Gaussian marginally (iid,
  orthogonal or simplex with χ norms, fastfood: ``impls.random_matrices.UNBIASED_MATRICES``):
  ``X − k = (1/m)Σᵢ(h(wᵢ) − k)`` and convexity of ``t⁴`` give ``E(X − k)⁴ ≤ E(h(w) − k)⁴``, the
  exact fourth central moment of one row (whatever the dependence between rows), so
  ``Var((X − k)²) ≤ E(h − k)⁴``: median of means with that bound.

A guaranteed band decides only where it is informative (:data:`INFORMATIVE`: half-width at most
the theory variance); at heavy-tailed points its width at the page's draws is many times the
theory (e.g. softmax_positive[orthogonal] at ‖x + y‖ = 2.5, m = 16: a fourth-moment bound of
~10¹⁸ against a variance of ~400), and the bootstrap band stays the first, descriptive look.

A point still flagged is **resolved by a second measurement** (:func:`resolve_flag`):
:data:`SECOND_FACTOR` times the draws, fresh seeds, the same guaranteed test (or, where none
exists, the bootstrap band at those draws). Not rejected: **theory confirmed** (the first band
missed a rare heavy-tail draw; the flag is cleared and the page shows both measurements).
Rejected again: the theory's variance is recomputed by its second route (Gauss–Hermite quadrature
of the per-row moments and, for orthogonal rows, the disk quadrature of the row covariance,
instead of the closed forms and the moment series); if the two routes disagree the verdict is
**theory wrong** (a bug in the truth, flagged), otherwise **estimator wrong** (a bug in the code
under test: the page FAILs). Where the guaranteed band exists but is still too wide at the second
measurement's draws, the point is **not decidable** at these draws: the page says how many draws
a guaranteed band would need (its half-width falls as 1/√n) and the flag is cleared — the point
is shown, not tested. Without any guaranteed test a persisting flag stays **unresolved**.
Each second-measurement test is one more assertion of the report's α budget.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import asdict, dataclass, field

import mpmath
import numpy as np

from kernel_verify.impls.random_matrices import UNBIASED_MATRICES
from kernel_verify.properties.checks.estimates import (
    estimates,
    exact_fourth_moment,
    feature_m,
    mean_test_variance,
    point_range,
    range_bound,
    row_construction,
    row_law,
)
from kernel_verify.properties.formulas import record
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.report.settings import Settings
from kernel_verify.report.theory import Theory, theory
from kernel_verify.verify.moments import (
    exact_moments,
    fourth_central_moment,
    orf_variance,
)
from kernel_verify.verify.moments.estimators import per_frequency_moments
from kernel_verify.verify.moments.orf import orthogonal_covariance_quadrature
from kernel_verify.verify.references.mp import to_mp
from kernel_verify.verify.stats import mean_test, variance_test

SHIFT_INVARIANT = frozenset({"gaussian", "spectral_mixture", "generative"})
#: The second measurement of a flagged point draws this many times the page's draws
#: (:func:`resolve_flag`): the median-of-means threshold shrinks as 1/√draws, 4× narrower.
SECOND_FACTOR = 16
#: Seed offset of the second measurement (fresh draws, disjoint from the page's seeds).
SECOND_SEED = 10**6
#: A guaranteed band decides a point only if its half-width is at most this fraction of the
#: theory variance (it can then tell the theory from 0 or from twice the theory); a wider one
#: (a heavy tail at few draws) is shown, and the point falls back to the bootstrap band and,
#: if flagged, to the second measurement.
INFORMATIVE = 1.0


def seed_of(name: str, salt: int = 0) -> int:
    """A stable seed per map name (crc32), shown on every page."""
    return (zlib.crc32(name.encode()) + 7919 * salt) % 2**31


def pair(d: int, nx: float = 0.8, ny: float = 0.6, angle_deg: float = 60.0):
    """``x = nx·e₁``, ``y = ny·(cos θ e₁ + sin θ e₂)``: the report's default pair."""
    x, y = np.zeros(d), np.zeros(d)
    t = np.deg2rad(angle_deg)
    x[0] = nx
    y[0], y[1] = ny * np.cos(t), ny * np.sin(t)
    return x, y


def interval(samples: np.ndarray, boot: int, conf: float, seed: int):
    """Percentile-bootstrap intervals ``(mean_lo, mean_hi, var_lo, var_hi)``."""
    rng = np.random.default_rng(seed)
    n = len(samples)
    res = samples[rng.integers(0, n, (boot, n))]
    means, vars_ = res.mean(axis=1), res.var(axis=1, ddof=1)
    q = [(1 - conf) / 2, (1 + conf) / 2]
    ml, mh = np.quantile(means, q)
    vl, vh = np.quantile(vars_, q)
    return float(ml), float(mh), float(vl), float(vh)


@dataclass
class Point:
    """One m at the default pair: measured moments, intervals, theory and the mean test."""

    m: int
    mean: float
    mean_lo: float
    mean_hi: float
    variance: float
    var_lo: float
    var_hi: float
    theory_mean: float | None
    theory_variance: float | None
    theory_variance_se: float | None
    mse: float
    theory_mse: float | None
    test: str
    test_ok: bool | None
    flag: str = ""
    #: how the flag was decided, and the second measurement's resolution (module docstring)
    band: str = "bootstrap"
    resolution: str = ""


@dataclass
class GeoPoint:
    """One input geometry at ``geo_m``: relative MSE measured (interval) and in theory."""

    axis: str
    value: float
    kernel: float
    rel_mse: float
    rel_mse_lo: float
    rel_mse_hi: float
    theory_rel_mse: float | None
    rel_bias: float
    flag: str = ""
    band: str = "bootstrap"
    resolution: str = ""


@dataclass
class Measurement:
    name: str
    x: list[float]
    y: list[float]
    kernel: float
    theory: dict
    points: list[Point] = field(default_factory=list)
    geometry: list[GeoPoint] = field(default_factory=list)
    seed: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def _test(target: FeatureMapTarget, samples, x, y, m: int, mu: float | None, alpha: float,
          seed: int) -> tuple[bool | None, str]:
    """``mean_test`` with the property suite's choice of method (``check_mean``)."""
    if mu is None:
        return None, "not tested: no exact mean (biased, no declared mean kernel)"
    bounds = range_bound(target, x.shape[-1], m)
    found = mean_test_variance(target, x, y, m) if target.has("unbiased") else None
    var = found[0] if found is not None else None
    law = row_law(target, x, y, m) if bounds is None and target.has("biased") else None
    if law is not None:  # fixed-norm exponential maps: check_mean's row-law range and V₁
        bounds, var = law[0], law[1]
        found = (law[1], law[2])
    if bounds is None:
        bounds = point_range(target, x, y, m)  # e.g. relu_features with fixed-norm rows
    if bounds is None and var is None:
        return None, ("not tested: no exact variance for this construction and not bounded "
                      "(no test with a known false-alarm rate)")
    res = mean_test(samples, mu, alpha=alpha, bounds=bounds, variance=var,
                    label=f"{target.name}: E φ(x)ᵀφ(y) at m={m}", seed=seed)
    extra = f"; {found[1]}" if found is not None and found[1] != "exact variance" else ""
    return bool(res.ok), f"{res.method}{extra}, α = {alpha:.2g}"


def guaranteed_variance_test(target: FeatureMapTarget, samples: np.ndarray, x, y, m: int,
                             k: float, theory_mean: float | None, var: float | None,
                             alpha: float) -> tuple[bool, str, bool, float] | None:
    """``(rejected, how, informative, half-width)`` of ``E(X − k)² = var`` by a test with guaranteed
    coverage at ``alpha`` (module docstring: exact fourth moment, proven range, or the one-row
    fourth-moment bound), or None where no such test exists (biased map, no theory, structured
    or fixed-norm rows). ``informative``: the guaranteed band's half-width is at most ``var``
    (:data:`INFORMATIVE`), so the test would reject a variance of 0 or of twice the theory."""
    if (theory_mean is None or var is None or not var > 0
            or abs(theory_mean - k) > 1e-12 * max(abs(k), 1e-300)):
        return None
    exact = exact_fourth_moment(target, x, y, m)
    bounds = range_bound(target, x.shape[-1], m) or point_range(target, x, y, m)
    try:
        if exact is not None and exact[1] > 0:
            res = variance_test(samples, k, var, alpha=alpha, fourth_central_moment=exact[0])
            how = "exact fourth moment"
        elif bounds is not None and bounds[0] <= k <= bounds[1]:
            res = variance_test(samples, k, var, alpha=alpha, bounds=bounds)
            how = "proven range of every estimate"
        elif (row_construction(target) in UNBIASED_MATRICES
              and record(target.formula).fourth_moment):
            mu4_row = float(fourth_central_moment(target.formula, x, y, dict(target.config), 1)[0])
            res = variance_test(samples, k, var, alpha=alpha,
                                fourth_central_moment=mu4_row + var * var)
            how = (f"fourth-moment bound E(X − k)⁴ ≤ E(h − k)⁴ = {mu4_row:.4g} of one Gaussian "
                   "row (convexity)")
        else:
            return None
    except (ValueError, KeyError, NotImplementedError, ArithmeticError):
        return None
    lo, hi = var - res.threshold, var + res.threshold
    return (not res.ok, f"{how}: E(X − k)² = {float(res.statistic):.4g} vs theory {var:.4g}, "
            f"guaranteed band [{lo:.4g}, {hi:.4g}] at α = {alpha:.2g} ({len(samples)} draws)",
            res.threshold <= INFORMATIVE * var, float(res.threshold))


def theory_second_route(target: FeatureMapTarget, x, y, m: int) -> tuple[float, float] | None:
    """The theory variance by its two routes: closed forms (and the orthogonal covariance's
    moment series) against Gauss–Hermite quadrature of the per-row moments (and the disk
    quadrature of the covariance). None where verify.moments has no second route."""
    matrix = row_construction(target)
    if not record(target.formula).exact_variance or matrix not in ("iid", "orthogonal"):
        return None
    config = dict(target.config)
    try:
        first = exact_moments(target.formula, x, y, config, m, matrix=matrix).variance
        with mpmath.workdps(30):
            xm, ym = to_mp(np.asarray(x, float)), to_mp(np.asarray(y, float))
            mean, v1 = per_frequency_moments(target.formula, xm, ym, config, "quadrature", 30)
            if matrix == "iid":
                second = v1 / m
            else:
                cov = orthogonal_covariance_quadrature(target.formula, xm, ym, config, mean, 30)
                second = orf_variance(v1, cov, m, len(x))
    except (ValueError, KeyError, NotImplementedError, ArithmeticError):
        return None
    return float(first), float(second)


def resolve_flag(target: FeatureMapTarget, x, y, m: int, k: float, theory_mean: float | None,
                 var: float, draws: int, seed: int, alpha: float, boot: int, conf: float,
                 relative: bool = False) -> tuple[str, str]:
    """The second measurement of a flagged variance point (module docstring): ``(outcome,
    text)`` with outcome ``"theory confirmed"``, ``"theory wrong"``, ``"estimator wrong"``,
    ``"not decidable"`` (a guaranteed band exists but would need more draws than any measurement
    here: ``n·(t/σ²)²`` by the 1/√n rule of its half-width t, stated on the page) or
    ``"unresolved"`` (no guaranteed band at all, and the second bootstrap band misses too).
    ``relative``: the bootstrap band and the theory are stated as relative MSE (divided by k²),
    as on the geometry figure."""
    n2 = SECOND_FACTOR * draws
    samples = estimates(target, x, y, m, seed + SECOND_SEED, n2)
    g = guaranteed_variance_test(target, samples, x, y, m, k, theory_mean, var, alpha)
    if g is None or not g[2]:
        rng = np.random.default_rng(seed + SECOND_SEED)
        err2 = (samples - k) ** 2
        boots = err2[rng.integers(0, n2, (boot, n2))].mean(axis=1)
        lo, hi = np.quantile(boots, [(1 - conf) / 2, (1 + conf) / 2])
        tmse = var + ((theory_mean if theory_mean is not None else k) - k) ** 2
        inside = lo - 1e-12 <= tmse <= hi + 1e-12
        unit, what = (k * k, "relative MSE") if relative and k != 0 else (1.0, "MSE")
        lo, hi, tmse = lo / unit, hi / unit, tmse / unit
        why = ("no test with guaranteed coverage exists here" if g is None else
               f"the guaranteed band is still too wide: {g[1]}")
        how = (f"{n2} fresh draws, {conf:.1%} bootstrap band of the {what} [{lo:.4g}, {hi:.4g}] "
               f"vs theory {tmse:.4g} (descriptive: {why})")
        if inside:
            return "theory confirmed", f"theory confirmed by a second measurement: {how}"
    else:
        rejected, how = g[0], g[1]
        how = f"second measurement, {n2} fresh draws, {how}"
        if not rejected:
            return "theory confirmed", f"theory confirmed: {how}"
    routes = theory_second_route(target, x, y, m)
    if routes is not None and abs(routes[0] - routes[1]) > 1e-9 * max(abs(routes[1]), 1e-300):
        return "theory wrong", (f"theory wrong: its two routes disagree (closed {routes[0]:.6g}, "
                                f"quadrature {routes[1]:.6g}); {how}")
    if g is None:
        return "unresolved", f"unresolved: {how}"
    if not g[2]:
        needed = math.ceil(n2 * (g[3] / (INFORMATIVE * var)) ** 2)
        return "not decidable", (
            f"not decidable at these draws (heavy tail; the theory point is not tested): a band "
            f"with guaranteed coverage would need about {needed:.3g} draws (its half-width "
            f"falls as 1/√n and must reach the theory variance), the pages use {draws} and the "
            f"second measurement {n2}; {how}")
    agree = "" if routes is None else f" (theory's two routes agree: {routes[1]:.6g})"
    return "estimator wrong", f"estimator wrong: {how}{agree}"


def _decide(target, samples, x, y, m, k, theory_mean, var, alpha, where, band_flag: str,
            draws: int, seed: int, boot: int, conf: float, relative: bool = False
            ) -> tuple[str, str, str]:
    """``(flag, band, resolution)`` of one theory point: the guaranteed test where one exists
    (else the bootstrap flag ``band_flag``), then the second measurement of a flag."""
    g = guaranteed_variance_test(target, samples, x, y, m, k, theory_mean, var, alpha)
    if g is None:
        flag, band = band_flag, "bootstrap (no test with guaranteed coverage here)"
    elif not g[2]:
        band = f"bootstrap (the guaranteed band is too wide at these draws: {g[1]})"
        flag = band_flag
    else:
        rejected, how = g[0], g[1]
        band = how
        flag = f"{where}: theory variance rejected by the {how}" if rejected else ""
    if not flag:
        return "", band, ""
    outcome, text = resolve_flag(target, x, y, m, k, theory_mean, var, draws, seed, alpha, boot,
                                 conf, relative)
    if outcome in ("theory confirmed", "not decidable"):
        return "", band, f"{where}: first measurement flagged ({flag}); {text}"
    return f"{flag}; {text}", band, outcome


def measure_target(target: FeatureMapTarget, s: Settings, *, alpha: float, version: str,
                   geometry: bool = True) -> Measurement:
    """Everything the page of a random map shows about its estimator (module docstring)."""
    x, y = pair(s.d)
    ms = tuple(feature_m(target, m) for m in s.ms)
    th: Theory = theory(target, x, y, ms, ref_draws=s.ref_draws, version=version)
    seed = seed_of(target.name)
    meas = Measurement(target.name, x.tolist(), y.tolist(), th.kernel, asdict(th), seed=seed)
    tested_mean = th.mean if "Monte Carlo" not in th.mean_kind else None
    for i, m in enumerate(ms):
        sm = seed + i
        samples = estimates(target, x, y, m, sm, s.draws)
        ml, mh, vl, vh = interval(samples, s.boot, s.conf, sm)
        mean, var = float(samples.mean()), float(samples.var(ddof=1))
        tv = th.variance[i]
        tse = th.variance_se[i] if th.variance_se else None
        mse = (mean - th.kernel) ** 2 + var
        tmse = None if (tv is None or th.mean is None) else (th.mean - th.kernel) ** 2 + tv
        ok, how = _test(target, samples, x, y, m, tested_mean, alpha, sm)
        flag, band, resolution = "", "bootstrap", ""
        if tv is not None:
            # slack 1e-12·k²: a variance below that is zero to float64 (e.g. exact estimators)
            slack = 1e-12 * th.kernel**2
            lo, hi = vl - 2 * (tse or 0.0) - slack, vh + 2 * (tse or 0.0) + slack
            boot_flag = "" if lo <= tv <= hi else (
                f"m = {m}: theory variance {tv:.4g} outside the measured {s.conf:.1%} "
                f"bootstrap band [{vl:.4g}, {vh:.4g}]")
            flag, band, resolution = _decide(target, samples, x, y, m, th.kernel, th.mean, tv,
                                             alpha, f"m = {m}", boot_flag, s.draws, sm, s.boot,
                                             s.conf)
        meas.points.append(Point(m, mean, ml, mh, var, vl, vh, th.mean, tv, tse, mse, tmse,
                                 how, ok, flag, band, resolution))
    if geometry:
        meas.geometry = sweep(target, s, version, alpha)
    return meas


def sum_difference_pair(d: int, plus: float, minus: float):
    """``x = (s + t)/2``, ``y = (s − t)/2`` with ``s = plus·e₁``, ``t = minus·e₂``: the pair with
    ``‖x + y‖ = plus`` and ``‖x − y‖ = minus`` (and ``‖x‖ = ‖y‖``)."""
    s, t = np.zeros(d), np.zeros(d)
    s[0], t[1] = plus, minus
    return (s + t) / 2, (s - t) / 2


def geometry_grid(target: FeatureMapTarget, d: int, n: int):
    """``(axis, value, x, y)``. Shift-invariant kernels: ‖x − y‖/σ (x fixed) and ‖x + y‖/σ at
    ‖x − y‖ = σ (flat for a stationary estimator). Other kernels: ‖x‖ = ‖y‖ at 60°, the angle at
    ‖x‖ = ‖y‖ = 1, ‖x − y‖ at ‖x + y‖ = 1 and ‖x + y‖ at ‖x − y‖ = 1 (trigonometric softmax
    features degrade along the first, positive features along the second)."""
    out = []
    if target.kernel in SHIFT_INVARIANT:
        sigma = float(dict(target.config).get("sigma", 1.0))
        for z in np.linspace(0.25, 2.5, n):
            x, _ = pair(d, 0.5, 0.0)
            u = np.zeros(d)
            u[1] = 1.0
            out.append(("‖x − y‖/σ", float(z), x, x - z * sigma * u))
        for z in np.linspace(0.0, 3.0, n):
            out.append(("‖x + y‖/σ at ‖x − y‖ = σ", float(z),
                        *sum_difference_pair(d, z * sigma, sigma)))
        return out
    for r in np.linspace(0.25, 1.5, n):
        out.append(("‖x‖ = ‖y‖ (angle 60°)", float(r), *pair(d, r, r, 60.0)))
    for a in np.linspace(0.0, 180.0, n):
        out.append(("angle (degrees), ‖x‖ = ‖y‖ = 1", float(a), *pair(d, 1.0, 1.0, a)))
    for z in np.linspace(0.25, 2.5, n):
        out.append(("‖x − y‖ at ‖x + y‖ = 1", float(z), *sum_difference_pair(d, 1.0, z)))
    for z in np.linspace(0.25, 2.5, n):
        out.append(("‖x + y‖ at ‖x − y‖ = 1", float(z), *sum_difference_pair(d, z, 1.0)))
    return out


def sweep(target: FeatureMapTarget, s: Settings, version: str,
          alpha: float = 1e-3) -> list[GeoPoint]:
    """Relative MSE ``(bias² + Var)/k²`` over the input geometry at ``m = geo_m``. A theory point
    is flagged by a test with guaranteed coverage where one exists
    (:func:`guaranteed_variance_test`), else when it lies outside the bootstrap band; a flag is
    resolved by a second measurement (:func:`resolve_flag`)."""
    m = feature_m(target, s.geo_m)
    out = []
    for j, (axis, value, x, y) in enumerate(geometry_grid(target, s.d, s.geo_points)):
        th = theory(target, x, y, (m,), ref_draws=0, version=version, allow_reference=False)
        k = th.kernel
        if abs(k) < 1e-12:  # e.g. arccos1 at x = −y: the relative error is undefined
            continue
        samples = estimates(target, x, y, m, seed_of(target.name, 100 + j), s.geo_draws)
        err2 = (samples - k) ** 2 / k**2
        rng = np.random.default_rng(j)
        boots = err2[rng.integers(0, len(err2), (s.boot, len(err2)))].mean(axis=1)
        lo, hi = np.quantile(boots, [(1 - s.conf) / 2, (1 + s.conf) / 2])
        tv = th.variance[0]
        t_rel = None if (tv is None or th.mean is None) else ((th.mean - k) ** 2 + tv) / k**2
        flag, band, resolution = "", "bootstrap", ""
        if t_rel is not None:
            boot_flag = "" if lo - 1e-12 <= t_rel <= hi + 1e-12 else (  # 1e-12: 0 in float64
                f"{axis} = {value:.3g}: theory relative MSE {t_rel:.3g} outside the measured "
                f"{s.conf:.1%} band [{lo:.3g}, {hi:.3g}] ({s.geo_draws} draws, m = {m})")
            flag, band, resolution = _decide(target, samples, x, y, m, k, th.mean, tv, alpha,
                                             f"{axis} = {value:.3g}", boot_flag, s.geo_draws,
                                             seed_of(target.name, 100 + j), s.boot, s.conf,
                                             relative=True)
        out.append(GeoPoint(axis, value, k, float(err2.mean()), float(lo), float(hi), t_rel,
                            float(samples.mean() / k - 1), flag, band, resolution))
    return out
