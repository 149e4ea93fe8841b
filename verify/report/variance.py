"""Variance report of one random feature map: exact theory against Monte Carlo measurement.

For a fixed pair of points ``(x, y)`` and feature counts ``m ∈ M`` it draws ``R`` independent
parameter sets, evaluates the estimator ``φ(x)ᵀφ(y)`` for each, and compares

* the sample mean with the exact mean (target kernel, or ``mean_kernel`` for biased maps) by
  :func:`verify.stats.mean_test` — median of means with the *exact* variance where
  :func:`verify.moments.exact_moments` covers the map, Hoeffding for bounded maps otherwise;
* the sample variance with the exact variance (iid and orthogonal rows, docs/math.md §1–§4), shown
  as a ratio with an approximate interval (the verdict is the mean test; the variance ratio is
  evidence, flagged when it is far outside its interval).

Intervals on the plots are ±2 standard errors of the sample variance, estimated from the sample
fourth moment (an approximation for display; no verdict rests on it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernel_verify.impls.registry import FeatureMap
from kernel_verify.verify import atomic
from kernel_verify.verify.moments import QuadratureError, exact_moments
from kernel_verify.verify.references.kernels import kernel_mp
from kernel_verify.verify.stats import mean_test


@dataclass
class VariancePoint:
    m: int
    exact_mean: float
    exact_variance: float | None
    sample_mean: float
    sample_variance: float
    variance_se: float
    mean_ok: bool | None
    mean_method: str


@dataclass
class VarianceReport:
    name: str
    x: list[float]
    y: list[float]
    kernel_value: float
    draws: int
    points: list[VariancePoint] = field(default_factory=list)
    note: str = ""

    @property
    def unbiased_ok(self) -> bool | None:
        """False if any mean test rejected, None if none ran, else True."""
        results = [p.mean_ok for p in self.points if p.mean_ok is not None]
        return None if not results else all(results)

    def worst_variance_ratio(self) -> float | None:
        ratios = [p.sample_variance / p.exact_variance for p in self.points
                  if p.exact_variance not in (None, 0.0)]
        return max(ratios, key=lambda r: abs(np.log(r))) if ratios else None


def default_pair(entry: FeatureMap, d: int) -> tuple[np.ndarray, np.ndarray]:
    """A fixed, documented pair: norms 0.8 and 0.6 at 60° (softmax family), ‖x−y‖ ≈ 0.72σ
    (Gaussian kernels): moderate kernels where the variance is neither tiny nor explosive."""
    x = np.zeros(d)
    y = np.zeros(d)
    x[0] = 0.8
    y[0], y[1 % d] = 0.6 * np.cos(np.pi / 3), 0.6 * np.sin(np.pi / 3)
    if d == 1:
        y[0] = 0.6
    return x, y


def _target_value(entry: FeatureMap, x: np.ndarray, y: np.ndarray) -> float:
    d = x.shape[0]
    kernel = entry.mean_kernel if entry.has("biased") and entry.mean_kernel else entry.kernel
    return float(kernel_mp(kernel, x, y, **entry.kernel_params(entry.config, d)))


def _estimates(entry: FeatureMap, x, y, m: int, draws: int, rng: np.random.Generator):
    pts = np.stack([x, y])
    out = np.empty(draws)
    for r in range(draws):
        params = entry.draw(rng, x.shape[0], m, entry.config)
        phi = entry.numpy_fn(pts, params, entry.config)
        out[r] = phi[0] @ phi[1]
    return out


def _variance_and_bound(
    entry: FeatureMap, x: np.ndarray, y: np.ndarray, m: int, report: VarianceReport
) -> tuple[float | None, float | None]:
    """(exact variance, a proven upper bound on it) of the m-feature estimate.

    When the construction has no exact variance but every row is marginally N(0, I)
    (``gaussian_rows``: Fastfood, ORF for ReLU), each of the m per-feature terms has the exact
    single-feature variance V₁, and the variance of their mean is ≤ V₁ whatever their dependence
    (Cauchy–Schwarz: Var(Σhᵢ/m) ≤ (Σ√Var hᵢ/m)² = V₁). A larger variance only makes the
    median-of-means threshold larger, so the test keeps its level."""
    try:
        exact = float(exact_moments(entry, x, y, entry.config, m).as_float().variance)
        return exact, exact
    except (NotImplementedError, KeyError, QuadratureError) as err:
        report.note = f"no exact variance: {err}"
    if entry.has("gaussian_rows") or (entry.has("unbiased") and entry.matrix == "orthogonal"):
        try:
            v1 = exact_moments(entry.formula, x, y, entry.config, 1, matrix="iid").as_float()
        except (NotImplementedError, KeyError, QuadratureError):
            return None, None
        report.note += "; mean tested with the single-feature variance V₁ as an upper bound"
        return None, float(v1.variance)
    return None, None


def _bound_of(entry: FeatureMap) -> tuple[float, float] | None:
    """Proven ranges of φ(x)ᵀφ(y) for bounded maps: RFF pairs ``cos(wᵀδ/σ)`` averaged → [−1, 1];
    random phase ``(2/m)Σcos(·)cos(·)`` → [−2, 2]."""
    if entry.formula == "rff_pairs":
        return (-1.0, 1.0)
    if entry.formula == "rff_phase":
        return (-2.0, 2.0)
    return None


def variance_report(
    entry: FeatureMap,
    *,
    d: int,
    ms: tuple[int, ...],
    draws: int,
    alpha: float,
    seed: int,
) -> VarianceReport:
    """Theory vs measurement for ``entry`` at the default pair (module docstring)."""
    x, y = default_pair(entry, d)
    target = _target_value(entry, x, y)
    report = VarianceReport(entry.name, x.tolist(), y.tolist(), target, draws)
    rng = np.random.default_rng(seed)
    for m in ms:
        m = max(m, entry.min_m)
        samples = _estimates(entry, x, y, m, draws, rng)
        exact_var, var_bound = _variance_and_bound(entry, x, y, m, report)
        bounds = _bound_of(entry)
        unknown_mean = entry.has("biased") and not entry.mean_kernel
        if unknown_mean:
            report.note = "biased, mean kernel unknown: the measured mean is shown, not tested"
        if unknown_mean or (var_bound is None and bounds is None):
            result = None
        else:
            result = mean_test(
                samples, target, alpha=alpha, bounds=bounds,
                variance=var_bound if var_bound else None,
                label=f"{entry.name} m={m}", seed=seed,
                repro=f"kernel-verify report --maps '{entry.name}'",
            )
        s_var = float(samples.var(ddof=1))
        fourth = float(np.mean((samples - samples.mean()) ** 4))
        se = float(np.sqrt(max(fourth - s_var**2, 0.0) / draws))
        report.points.append(
            VariancePoint(
                m=m, exact_mean=target, exact_variance=exact_var,
                sample_mean=float(samples.mean()), sample_variance=s_var, variance_se=se,
                mean_ok=None if result is None else bool(result.ok),
                mean_method="not tested" if result is None else result.method,
            )
        )
    return report


def plot_variance(report: VarianceReport, path: Any) -> None:
    """Variance against m on log-log axes: exact theory (line) and measurement (points ± 2 SE)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = np.array([p.m for p in report.points])
    measured = np.array([p.sample_variance for p in report.points])
    se = np.array([p.variance_se for p in report.points])
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    theory = [p.exact_variance for p in report.points]
    if all(t is not None for t in theory):
        ax.plot(ms, theory, "-", color="C0", label="exact (theory)")
    lower = np.maximum(measured - 2 * se, measured * 1e-3)
    ax.errorbar(ms, measured, yerr=[measured - lower, 2 * se], fmt="o", color="C1",
                label=f"measured ({report.draws} draws, ±2 SE)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("m (random features)")
    ax.set_ylabel("Var[φ(x)ᵀφ(y)]")
    ax.set_title(report.name, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    atomic.save_figure(fig, path, dpi=110)
    plt.close(fig)
