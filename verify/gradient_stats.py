"""The gradient of an unbiased estimator is unbiased (docs/math.md §14): exact moments and a
test with a known false-alarm rate.

**Positive features** ``φ_f(x) = exp(w_fᵀx − ‖x‖²/2)/√m`` with iid rows ``w_f ~ N(0, I)``:
``∇ₓ φ(x)ᵀφ(y) = (1/m) Σ_f T(w_f)``, ``T(w) = Λ e^{wᵀs}(w − x)`` (``s = x + y``,
``Λ = e^{−(‖x‖² + ‖y‖²)/2}``). With the Gaussian tilt ``E[e^{c·wᵀs} f(w)] =
e^{c²‖s‖²/2} E[f(w + c s)]``:

    E T = Λ e^{‖s‖²/2}(s − x) = SM(x, y)·y            (the kernel's gradient, ∇ₓ e^{xᵀy})
    E T_j² = Λ² e^{2‖s‖²}·(1 + (2s_j − x_j)²),        Var T_j = E T_j² − (SM·y_j)²

so one draw of m rows has ``Var = Var T_j / m`` exactly (:func:`positive_gradient_moments`;
checked against Monte Carlo in ``tests/test_gradient_truth.py``).

**Test** (:func:`median_of_means_test`): ``B`` independent draws ``ĝ_b`` (each the gradient of
one parameter draw) with known variance ``σ_b²``. Chebyshev gives ``P(|ĝ_b − μ| > 2σ_b) ≤ 1/4``;
the median leaves ``[μ − 2σ_b, μ + 2σ_b]`` only if at least ``B/2`` draws do, which by Hoeffding
on the count of such draws has probability ``≤ exp(−2B(1/2 − 1/4)²) = exp(−B/8)``. So with
``B = ⌈8 ln(1/α)⌉`` the false-alarm rate of one component is ``≤ α`` for any distribution of
the draws (no normality, no bounded range), and the rejection threshold is ``2σ_b``.

**Sharper, same draws** (:func:`gradient_mean_test`, what the properties run): each component
standardised, ``zᵦ = (ĝᵦ − μ)/σ_b`` (mean 0, variance 1 under the null), goes through the
known-variance mean test of :mod:`kernel_verify.verify.stats` — Catoni's M-estimator, whose
threshold ``√(2L/(B − 2L))·σ_b`` (``L = log(2/α)``) is about ``0.6σ_b`` at ``B = ⌈8 ln(1/α)⌉``
against the median's ``2σ_b``, at the same level ``α`` per component.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["MedianTest", "draws_for_alpha", "gradient_mean_test", "median_of_means_test",
           "positive_gradient_moments"]


def positive_gradient_moments(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(E T, Var T)`` per component (d,) of one frequency's term of ``∇ₓ φ(x)ᵀφ(y)`` for
    positive features (module docstring); float64 from the closed forms."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    s = x + y
    sm = math.exp(float(x @ y))
    lam2 = math.exp(-float(x @ x + y @ y))
    mean = sm * y
    second = lam2 * math.exp(2 * float(s @ s)) * (1 + (2 * s - x) ** 2)
    return mean, second - mean**2


def draws_for_alpha(alpha: float) -> int:
    """``B = ⌈8 ln(1/α)⌉`` (module docstring)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    return max(1, math.ceil(8 * math.log(1 / alpha)))


@dataclass(frozen=True)
class MedianTest:
    ok: bool
    median: np.ndarray
    threshold: np.ndarray
    alpha: float
    draws: int
    #: "median" (the 2σ rule) or the method of :func:`gradient_mean_test`'s known-variance test
    method: str = "median"

    def describe(self) -> str:
        if self.method != "median":
            return (f"{self.method} estimate of {self.draws} draws "
                    f"{np.round(self.median, 6).tolist()}, allowed "
                    f"±{np.round(self.threshold, 6).tolist()} (known-variance mean test per "
                    f"component, false alarm ≤ {self.alpha:.3g} per component)")
        return (f"median of {self.draws} draws {np.round(self.median, 6).tolist()}, allowed "
                f"±{np.round(self.threshold, 6).tolist()} (2σ per draw; false alarm ≤ "
                f"exp(−B/8) ≤ {self.alpha:.3g} per component)")


def median_of_means_test(draws: np.ndarray, mean: np.ndarray, sigma: np.ndarray,
                         alpha: float) -> MedianTest:
    """Reject when the componentwise median of ``draws`` (B, d) is farther than ``2σ`` from
    ``mean`` (module docstring); needs ``B ≥ draws_for_alpha(alpha)``."""
    draws = np.asarray(draws, dtype=np.float64)
    need = draws_for_alpha(alpha)
    if draws.shape[0] < need:
        raise ValueError(f"median_of_means_test at α = {alpha:g} needs ≥ {need} draws, got "
                         f"{draws.shape[0]}")
    med = np.median(draws, axis=0)
    thr = 2 * np.asarray(sigma, dtype=np.float64)
    ok = bool(np.all(np.abs(med - mean) <= thr))
    return MedianTest(ok, med, thr + 0 * med, alpha, draws.shape[0])


def gradient_mean_test(draws: np.ndarray, mean: np.ndarray, sigma: np.ndarray,
                       alpha: float) -> MedianTest:
    """The componentwise test of ``E ĝ = mean`` on ``draws`` (B, d) of known per-draw standard
    deviations ``sigma`` (module docstring, "Sharper, same draws"): each component with
    ``σ > 0`` standardised and tested by :func:`kernel_verify.verify.stats.mean_test` at
    ``alpha`` (variance 1); a component with ``σ = 0`` must have its median exactly at the mean.
    Needs ``B ≥ draws_for_alpha(alpha)`` (the draws the properties take)."""
    from kernel_verify.verify.stats import known_variance_threshold, mean_test

    draws = np.asarray(draws, dtype=np.float64)
    need = draws_for_alpha(alpha)
    if draws.shape[0] < need:
        raise ValueError(f"gradient_mean_test at α = {alpha:g} needs ≥ {need} draws, got "
                         f"{draws.shape[0]}")
    mean = np.broadcast_to(np.asarray(mean, dtype=np.float64), draws.shape[1:])
    sigma = np.broadcast_to(np.asarray(sigma, dtype=np.float64), draws.shape[1:])
    live = sigma > 0
    z = np.where(live, (draws - mean) / np.where(live, sigma, 1.0), 0.0)
    res = mean_test(np.moveaxis(z, 0, -1), 0.0, alpha=alpha, variance=1.0)
    est = mean + sigma * np.asarray(res.statistic)
    med = np.median(draws, axis=0)
    bad = np.where(live, np.asarray(res.rejected, dtype=bool), med != mean)
    thr = sigma * res.threshold
    method = {"catoni": "Catoni", "median_of_means": "median-of-means"}[
        known_variance_threshold(draws.shape[0], alpha, 1.0)[1]]
    return MedianTest(not bool(np.any(bad)), np.where(live, est, med), thr + 0 * est, alpha,
                      draws.shape[0], method)
