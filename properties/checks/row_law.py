"""Statistical checks that a random-matrix construction has rows marginally N(0, I_d).

Shared by the ``random_matrices`` property family and ``kernel-verify calibrate``; the
derivations of each check are in ``properties/test_random_matrices.py``'s module docstring.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

from kernel_verify.verify import seeds
from kernel_verify.verify.stats import StatResult, mean_test, variance_test

#: Independent matrices drawn per example (i.i.d. samples of each row position).
N_DRAWS = 1000


#: Statistical assertions per example of :func:`test_rows_are_standard_gaussian`.
N_ROW_CHECKS = 9


def draw_stack(target, seed: int, m: int, d: int, n_draws: int = N_DRAWS) -> np.ndarray:
    """``n_draws`` independent matrices ``(n_draws, m, d)`` from one seeded generator."""
    rng = seeds.rng(seed)
    return np.stack([np.asarray(target.draw(rng, m, d), dtype=np.float64)
                     for _ in range(n_draws)])


def orthonormal_pair(seed: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Two orthonormal test directions: ``z₁ = e₁`` (the coordinate where Householder sign bias
    sits) mixed with a seeded random direction half of the time, and ``z₂ ⊥ z₁``."""
    rng = seeds.rng(seed, "row_law.directions")
    a = rng.standard_normal((d, 2))
    if seed % 2 == 0:
        a[:, 0] = np.eye(d)[0]
    q, _ = np.linalg.qr(a)
    return q[:, 0], q[:, 1]


def dkw_test(samples: np.ndarray, cdf, *, alpha: float, label: str,
             seed: int | None = None, repro: str = "") -> StatResult:
    """Is every batch (leading axes) of i.i.d. ``samples`` (last axis) drawn from ``cdf``?

    Statistic ``D = sup_x |F_n(x) − F(x)|`` (exact, from the order statistics); reject when
    ``D > √(log(2/α)/(2n))``: Dvoretzky–Kiefer–Wolfowitz with Massart's constant,
    ``P(D > t) ≤ 2 exp(−2nt²)`` for every n and every continuous F (Massart 1990), valid here since
    ``α ≤ 1``. ``alpha`` applies to each batch; the caller splits it over batches."""
    x = np.sort(np.asarray(samples, dtype=np.float64), axis=-1)
    n = x.shape[-1]
    f = cdf(x)
    i = np.arange(1, n + 1)
    d_stat = np.maximum((i / n - f).max(axis=-1), (f - (i - 1) / n).max(axis=-1))
    t = math.sqrt(math.log(2.0 / alpha) / (2.0 * n))
    rejected = d_stat > t
    return StatResult(
        ok=not bool(np.any(rejected)), test="distribution test (DKW)", label=label, claimed=0.0,
        statistic=np.asarray(d_stat), threshold=t, alpha=alpha, alternative="greater",
        n_samples=n, rejected=np.asarray(rejected),
        method="sup|F_n − F|, Dvoretzky–Kiefer–Wolfowitz–Massart bound 2exp(−2nt²)",
        seed=seed, repro=repro,
    )


def row_law_checks(w: np.ndarray, z1: np.ndarray, z2: np.ndarray, *, alpha: float,
                   seed: int | None = None, name: str = "") -> list[StatResult]:
    """The :data:`N_ROW_CHECKS` checks of the module docstring on draws ``w (N, m, d)``; each
    check runs every row position at ``alpha/m`` (so each result has level ``alpha``)."""
    _, m, d = w.shape
    a = alpha / m
    s1 = np.moveaxis(w @ z1, 0, -1)  # (m, N): row position i, draw
    s2 = np.moveaxis(w @ z2, 0, -1)
    sq = np.moveaxis(np.sum(w * w, axis=-1), 0, -1)
    e_half = math.exp(-0.5)
    var_cos = (1.0 + math.exp(-2.0)) / 2.0 - math.exp(-1.0)
    kw = {"alpha": a, "seed": seed,
          "repro": f"row_law_checks(w of {w.shape[0]} draws of {m} × {d}, alpha={alpha:g}, "
                   f"seed={seed}) — one batch per row position i = 0…{m - 1}, each at α/m"}
    c = np.linspace(-1.0, 1.0, d)
    u2 = w * w / np.maximum(np.sum(w * w, axis=-1, keepdims=True), np.finfo(float).tiny)
    f_dir = np.moveaxis(u2 @ c, 0, -1)
    g_norm = np.sign(sq - d)
    var_fg = 2.0 * float(np.sum(c * c)) / (d * (d + 2))
    return [
        mean_test((s1 > 0).astype(float), 0.5, bounds=(0.0, 1.0), variance=0.25,
                  label=f"{name}: P(wᵢᵀz > 0) = 1/2 (sign symmetry)", **kw),
        mean_test(np.cos(s1), e_half, bounds=(-1.0, 1.0), variance=var_cos,
                  label=f"{name}: E cos(wᵢᵀz) = e^(-1/2)", **kw),
        dkw_test(s1, sps.norm.cdf, label=f"{name}: wᵢᵀz ~ N(0, 1)", **kw),
        mean_test(s1, 0.0, variance=1.0, label=f"{name}: E wᵢᵀz = 0", **kw),
        variance_test(s1, 0.0, 1.0, fourth_central_moment=3.0,
                      label=f"{name}: E (wᵢᵀz)² = 1", **kw),
        mean_test(s1 * s2, 0.0, variance=1.0,
                  label=f"{name}: E (wᵢᵀz₁)(wᵢᵀz₂) = 0 for z₁ ⊥ z₂ (isotropy)", **kw),
        dkw_test(sq, sps.chi2(d).cdf, label=f"{name}: ‖wᵢ‖² ~ χ²_{d}", **kw),
        mean_test(sq, float(d), variance=2.0 * d, label=f"{name}: E ‖wᵢ‖² = d = {d}", **kw),
        mean_test(f_dir * g_norm, 0.0, bounds=(-1.0, 1.0), variance=var_fg,
                  label=f"{name}: E[f(wᵢ/‖wᵢ‖)·sign(‖wᵢ‖² − d)] = 0 (norm ⟂ direction)", **kw),
    ]
