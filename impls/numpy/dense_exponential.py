"""Dense-exponential random features (DERF) of FAVOR# in NumPy (docs/math.md §20).

For ``ω ~ N(0, I_d)``, a query-side and a key-side map

    f₁(ω, x) = D·exp(ωᵀAω + ωᵀB₁x + xᵀC₁x),   f₂(ω, y) = D·exp(ωᵀAω + ωᵀB₂y + yᵀC₂y)

with ``A`` symmetric, ``I − 4A ≻ 0``, ``B₁ᵀ(I − 4A)⁻¹B₂ = I``, ``Cᵢ = −½Bᵢᵀ(I − 4A)⁻¹Bᵢ`` and
``D = det(I − 4A)^(1/4)`` give ``E f₁(ω, x)f₂(ω, y) = exp(xᵀy)`` (the Gaussian integral
``E exp(ωᵀMω + ωᵀv) = det(I − 2M)^(−1/2)·exp(½vᵀ(I − 2M)⁻¹v)`` with ``M = 2A``; finite
variance needs ``I − 8A ≻ 0``). Likhosherstov, Choromanski, Dubey, Liu, Sarlos, Weller,
"FAVOR#: Sharp Attention Kernel Approximations via New Classes of Positive Random Features"
(arXiv 2302.00787), re-derived in docs/math.md §20.

* SDERF (symmetric): ``B₁ = B₂ = (I − 4A)^(1/2)``, ``C = −½I``. The registered entry
  ``sderf[iid]`` takes ``A = αI + β·11ᵀ/d`` from two config scalars (a dense ``A``); any
  symmetric ``A`` goes through :func:`sderf_parameters` and :func:`log_dense_exponential`.
* ADERF (asymmetric): ``A = aI``, ``B₁ = √(1−4a)·P``, ``B₂ = √(1−4a)·P⁻ᵀ``,
  ``C₁ = −½PᵀP``, ``C₂ = −½P⁻¹P⁻ᵀ`` for an invertible ``P``: two different maps, so it is not a
  registry entry (one ``φ`` serves both sides there); :func:`aderf_parameters`.
* GERF is SDERF with ``A = aI`` and ADERF with ``P = I``.

Variance-optimal parameters for a query set X and a key set Y (they minimise the mean over all
pairs of ``log E f₁²f₂²``; derivation in docs/math.md §20): :func:`optimal_sderf_a`,
:func:`optimal_aderf`, :func:`optimal_gerf_a_for_sets`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kernel_verify.impls.numpy.random_features import optimal_gerf_a
from kernel_verify.impls.validation import (
    Config,
    NumpyParams,
    check_array,
    check_last_dim,
    check_params,
    check_scalar,
    config_value,
)


def _check_square_symmetric(name: str, a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{name} must be a square (d, d) matrix, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite")
    if not np.allclose(a, a.T, rtol=0, atol=1e-12 * max(1.0, float(np.abs(a).max()))):
        raise ValueError(f"{name} must be symmetric")
    return 0.5 * (a + a.T)


def sderf_parameters(a: np.ndarray) -> tuple[np.ndarray, float]:
    """``(B, log D)`` of SDERF for a symmetric ``A`` with ``I − 4A ≻ 0``:
    ``B = (I − 4A)^(1/2)`` (symmetric square root), ``log D = ¼ log det(I − 4A)``."""
    a = _check_square_symmetric("A", a)
    lam, u = np.linalg.eigh(a)
    if not np.all(lam < 0.25):
        raise ValueError(f"A must have every eigenvalue < 1/4 (I − 4A ≻ 0), largest {lam.max()}")
    k = 1.0 - 4.0 * lam
    b = (u * np.sqrt(k)) @ u.T
    return b, 0.25 * float(np.sum(np.log(k)))


def sderf_config_matrix(config: Config, d: int) -> np.ndarray:
    """``A = αI + β·11ᵀ/d`` of the registered ``sderf`` entry (eigenvalues ``α`` (d−1 times)
    and ``α + β`` along ``1/√d``); both below 1/4 (1/8 for a finite variance)."""
    alpha = check_scalar("alpha", config_value(config, "alpha"), below=0.25)
    beta = check_scalar("beta", config_value(config, "beta"))
    if not alpha + beta < 0.25:
        raise ValueError(f"config alpha + beta must be < 1/4 (I − 4A ≻ 0), got {alpha + beta}")
    return alpha * np.eye(d) + (beta / d) * np.ones((d, d))


def log_dense_exponential(x: np.ndarray, w: np.ndarray, a: np.ndarray, b: np.ndarray,
                          c: np.ndarray, log_d: float) -> np.ndarray:
    """``log f(ωᵢ, x) − ½ log m = log D + ωᵢᵀAωᵢ + ωᵢᵀBx + xᵀCx − ½ log m`` for the rows ``ωᵢ``
    of ``w`` (m, d); in the dtype of ``x`` (the row term and ``WB`` formed in float64)."""
    check_array("x", x, min_ndim=2, backend="numpy")
    check_last_dim("x", x, w.shape[1])
    m = w.shape[0]
    row = np.einsum("id,de,ie->i", w, a, w) + log_d - 0.5 * np.log(m)
    proj = (w @ b).astype(x.dtype)  # rows Bᵀωᵢ: (x Bᵀω)ᵢ = ωᵢᵀBx
    quad = np.einsum("...d,de,...e->...", x, c.astype(x.dtype), x)[..., None]
    return x @ proj.T + row.astype(x.dtype) + quad


def log_sderf(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``log φ(x) = log D + ωᵢᵀAωᵢ + ωᵢᵀBx − ‖x‖²/2 − ½ log m``, ``A = αI + β11ᵀ/d``,
    ``B = (I − 4A)^(1/2)`` (SDERF, docs/math.md §20)."""
    check_array("x", x, min_ndim=2, backend="numpy")
    check_params("params", params, {"W": (None, None)}, backend="numpy")
    w = params["W"]
    a = sderf_config_matrix(config, w.shape[1])
    b, log_d = sderf_parameters(a)
    return log_dense_exponential(x, w, a, b, -0.5 * np.eye(w.shape[1]), log_d)


def sderf(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """SDERF features ``D·exp(ωᵀAω + ωᵀBx − ‖x‖²/2)/√m``: softmax kernel, unbiased, positive."""
    return np.exp(log_sderf(x, params, config))


def aderf_parameters(a: float, p: np.ndarray) -> dict[str, Any]:
    """ADERF's ``(B₁, C₁)``, ``(B₂, C₂)`` and ``log D`` for scalar ``A = aI`` (a < 1/4) and an
    invertible ``P``: ``B₁ = √(1−4a)P``, ``B₂ = √(1−4a)P⁻ᵀ``, ``C₁ = −½PᵀP``,
    ``C₂ = −½P⁻¹P⁻ᵀ``, ``log D = (d/4)·log(1 − 4a)``."""
    a = check_scalar("a", a, below=0.25)
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ValueError(f"P must be a square matrix, got shape {p.shape}")
    d = p.shape[0]
    p_inv_t = np.linalg.inv(p).T
    s = np.sqrt(1 - 4 * a)
    return {"A": a * np.eye(d), "B1": s * p, "C1": -0.5 * p.T @ p,
            "B2": s * p_inv_t, "C2": -0.5 * p_inv_t.T @ p_inv_t,
            "log_D": 0.25 * d * float(np.log1p(-4 * a))}


def aderf_features(x: np.ndarray, w: np.ndarray, parameters: Mapping[str, Any],
                   side: str) -> np.ndarray:
    """ADERF features of the query side (``side="query"``: ``f₁``) or the key side (``f₂``),
    divided by √m: ``φ_q(x)ᵀφ_k(y)`` estimates ``exp(xᵀy)``."""
    if side not in ("query", "key"):
        raise ValueError(f"side must be 'query' or 'key', got {side!r}")
    i = "1" if side == "query" else "2"
    return np.exp(log_dense_exponential(x, w, parameters["A"], parameters["B" + i],
                                        parameters["C" + i], parameters["log_D"]))


# ------------------------------------------------------------------ variance-optimal parameters


def _set_statistics(xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                               np.ndarray]:
    xs = np.asarray(xs, dtype=np.float64)
    ys = np.asarray(ys, dtype=np.float64)
    for name, s in (("xs", xs), ("ys", ys)):
        if s.ndim != 2 or s.shape[0] < 1 or not np.all(np.isfinite(s)):
            raise ValueError(f"{name} must be a finite (n, d) set of vectors, got shape {s.shape}")
    if xs.shape[1] != ys.shape[1]:
        raise ValueError(f"xs and ys must have one dimension d, got {xs.shape[1]} and "
                         f"{ys.shape[1]}")
    m1 = xs.T @ xs / len(xs)
    m2 = ys.T @ ys / len(ys)
    return m1, m2, xs.mean(axis=0), ys.mean(axis=0)


def optimal_gerf_a_for_sets(xs: np.ndarray, ys: np.ndarray) -> float:
    """GERF's ``A*`` for the sets: ``ρ = mean over pairs ‖x+y‖²/d = tr(M₁ + M₂ + 2μ₁μ₂ᵀ)/d``."""
    m1, m2, mu1, mu2 = _set_statistics(xs, ys)
    return float(optimal_gerf_a(float(np.trace(m1) + np.trace(m2) + 2 * mu1 @ mu2), m1.shape[0]))


def optimal_sderf_a(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """SDERF's optimal ``A = Σᵢ A*(sᵢ)uᵢuᵢᵀ`` over the eigenpairs ``(sᵢ, uᵢ)`` of
    ``S = M₁ + M₂ + μ₁μ₂ᵀ + μ₂μ₁ᵀ`` (the mean of ``(x+y)(x+y)ᵀ`` over pairs), with GERF's
    one-dimensional optimum ``A*(s) = (1 − 2s − √((2s+1)² + 8s))/16``."""
    m1, m2, mu1, mu2 = _set_statistics(xs, ys)
    s_mat = m1 + m2 + np.outer(mu1, mu2) + np.outer(mu2, mu1)
    s, u = np.linalg.eigh(s_mat)
    s = np.maximum(s, 0.0)  # S is a mean of squares: ≥ 0 up to round-off
    a = (1 - 2 * s - np.sqrt((2 * s + 1) ** 2 + 8 * s)) / 16
    return (u * a) @ u.T


def optimal_aderf(xs: np.ndarray, ys: np.ndarray, ridge: float = 0.0) -> tuple[float, np.ndarray]:
    """ADERF's optimal ``(a, P)``: ``PᵀP = G = M₁^(−1/2)(M₁^(1/2)M₂M₁^(1/2))^(1/2)M₁^(−1/2)``
    (it minimises ``tr(GM₁) + tr(G⁻¹M₂)``, minimum ``2φ``, ``φ = tr (M₁^(1/2)M₂M₁^(1/2))^(1/2)``)
    and ``a = A*(ρ)`` with ``ρ = 2(φ + μ₁ᵀμ₂)/d``; needs ``M₁``, ``M₂`` positive definite.
    ``ridge ≥ 0`` is added to both diagonals first (for fewer than d points per side, e.g. one
    pair: the optimum is then approached, not attained)."""
    m1, m2, mu1, mu2 = _set_statistics(xs, ys)
    d = m1.shape[0]
    ridge = check_scalar("ridge", ridge, nonnegative=True)
    m1, m2 = m1 + ridge * np.eye(d), m2 + ridge * np.eye(d)
    l1, u1 = np.linalg.eigh(m1)
    l2 = np.linalg.eigvalsh(m2)
    if l1.min() <= 1e-12 * max(l1.max(), 1e-300) or l2.min() <= 1e-12 * max(l2.max(), 1e-300):
        raise ValueError("optimal ADERF needs positive definite second moments of xs and ys "
                         "(at least d points in general position on each side)")
    r1 = (u1 * np.sqrt(l1)) @ u1.T
    r1_inv = (u1 / np.sqrt(l1)) @ u1.T
    mid_l, mid_u = np.linalg.eigh(r1 @ m2 @ r1)
    mid_l = np.maximum(mid_l, 0.0)
    phi = float(np.sum(np.sqrt(mid_l)))
    g = r1_inv @ ((mid_u * np.sqrt(mid_l)) @ mid_u.T) @ r1_inv
    gl, gu = np.linalg.eigh(0.5 * (g + g.T))
    p = (gu * np.sqrt(gl)) @ gu.T  # symmetric square root: PᵀP = G
    a = float(optimal_gerf_a(max(0.0, 2 * (phi + float(mu1 @ mu2))), d))
    return a, p


__all__ = [
    "aderf_features",
    "aderf_parameters",
    "log_dense_exponential",
    "log_sderf",
    "optimal_aderf",
    "optimal_gerf_a_for_sets",
    "optimal_sderf_a",
    "sderf",
    "sderf_config_matrix",
    "sderf_parameters",
]
