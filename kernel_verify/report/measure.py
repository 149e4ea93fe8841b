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
tail — so a theory point outside its band is flagged, never silently drawn. Where the map is
unbiased with iid rows and its formula has an exact fourth moment
(:mod:`kernel_verify.verify.moments.fourth`), the flag is instead decided by the property suite's
variance test with that moment (median of means, known false-alarm rate, in the report's α
budget): the bootstrap band is then only drawn.
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, field

import numpy as np

from kernel_verify.properties.checks.estimates import (
    estimates,
    exact_fourth_moment,
    feature_m,
    mean_test_variance,
    point_range,
    range_bound,
    row_law,
)
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.report.settings import Settings
from kernel_verify.report.theory import Theory, theory
from kernel_verify.verify.stats import mean_test, variance_test

SHIFT_INVARIANT = frozenset({"gaussian", "spectral_mixture", "generative"})


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


def fourth_moment_flag(target: FeatureMapTarget, samples: np.ndarray, x, y, m: int, k: float,
                       theory_mean: float | None, where: str, alpha: float) -> str | None:
    """The flag of a theory point decided by a test with a known false-alarm rate, where one
    exists: for an unbiased map with iid rows and an exact fourth moment, ``variance_test`` of
    ``E(X − k)² = σ²`` with ``Var((X − k)²) = μ₄ − σ⁴`` (median of means, the property's test) at
    ``alpha``. Returns ``""`` (no flag), the flag text, or None when no such test exists (the
    bootstrap band decides)."""
    if theory_mean is None or abs(theory_mean - k) > 1e-12 * abs(k):
        return None
    moments = exact_fourth_moment(target, x, y, m)
    if moments is None or not moments[1] > 0:
        return None
    mu4, var = moments
    res = variance_test(samples, k, var, alpha=alpha, fourth_central_moment=mu4,
                        label=f"{target.name}: {where}")
    if res.ok:
        return ""
    return (f"{where}: measured E(X − k)² = {float(np.mean((samples - k) ** 2)):.4g} against the "
            f"exact {var:.4g}, rejected by the exact-fourth-moment variance test at α = "
            f"{alpha:.2g} ({len(samples)} draws, m = {m})")


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
        flag = ""
        decided = None if tv is None else fourth_moment_flag(
            target, samples, x, y, m, th.kernel, th.mean, f"m = {m}", alpha)
        if decided is not None:
            flag = decided
        elif tv is not None:
            # slack 1e-12·k²: a variance below that is zero to float64 (e.g. exact estimators)
            slack = 1e-12 * th.kernel**2
            lo, hi = vl - 2 * (tse or 0.0) - slack, vh + 2 * (tse or 0.0) + slack
            if not lo <= tv <= hi:
                flag = (f"m = {m}: theory variance {tv:.4g} outside the measured {s.conf:.1%} "
                        f"bootstrap band [{vl:.4g}, {vh:.4g}]")
        meas.points.append(Point(m, mean, ml, mh, var, vl, vh, th.mean, tv, tse, mse, tmse,
                                 how, ok, flag))
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
    is flagged by the exact-fourth-moment test where one exists (:func:`fourth_moment_flag`),
    else when it lies outside the bootstrap band."""
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
        flag = ""
        decided = None if t_rel is None else fourth_moment_flag(
            target, samples, x, y, m, k, th.mean, f"{axis} = {value:.3g}", alpha)
        if decided is not None:
            flag = decided
        elif t_rel is not None and not lo - 1e-12 <= t_rel <= hi + 1e-12:  # 1e-12: 0 in float64
            flag = (f"{axis} = {value:.3g}: theory relative MSE {t_rel:.3g} outside the measured "
                    f"{s.conf:.1%} band [{lo:.3g}, {hi:.3g}] ({s.geo_draws} draws, m = {m})")
        out.append(GeoPoint(axis, value, k, float(err2.mean()), float(lo), float(hi), t_rel,
                            float(samples.mean() / k - 1), flag))
    return out
