"""Exact moments of dense-exponential random features (DERF, FAVOR#; docs/math.md §20).

One feature pair is ``h = f₁(ω, x)f₂(ω, y)``, ``fᵢ = D·exp(ωᵀAω + ωᵀBᵢz + zᵀCᵢz)``,
``ω ~ N(0, I)``. With the Gaussian integral ``E exp(ωᵀMω + ωᵀv) = det(I − 2M)^(−1/2)·
exp(½vᵀ(I − 2M)⁻¹v)`` (``I − 2M ≻ 0``) and ``v = B₁x + B₂y``:

* ``E h  = D²·e^(xᵀC₁x + yᵀC₂y)·det(I − 4A)^(−1/2)·exp(½vᵀ(I − 4A)⁻¹v)``;
* ``E h² = D⁴·e^(2xᵀC₁x + 2yᵀC₂y)·det(I − 8A)^(−1/2)·exp(2vᵀ(I − 8A)⁻¹v)`` (``I − 8A ≻ 0``).

Two routes: :func:`closed_pair` (the determinants and inverses above, mp matrices) and
:func:`quadrature_pair` (``A = QΛQᵀ`` by ``mpmath.eigsy``; in the rotated variable
``ω' = Qᵀω ~ N(0, I)`` the integrand factorises into ``d`` one-dimensional integrals
``E exp(cω² + bω)``, each by ``mpmath.quad``; no determinant or inverse is used).

The registered formula ``sderf`` has ``A = αI + β·11ᵀ/d`` from its config, ``B₁ = B₂ =
(I − 4A)^(1/2)``, ``C = −½I``, ``D = det(I − 4A)^(1/4)``; :func:`closed` and
:func:`quadrature` give its ``(E h, V₁)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.references.dense_exponential import (
    _mat,
    _sym,
    sderf_matrix,
    sderf_parameters,
    sderf_parameters_mp,
)

__all__ = ["DerfParameters", "closed", "closed_pair", "closed_power", "log_second_moments",
           "quadrature", "quadrature_pair", "raw_moments", "sderf_matrix", "sderf_parameters_mp"]

DerfParameters = Mapping[str, Any]  # A, B1, B2, C1, C2 (mp matrices), log_D (mpf)


def _quad(c: mpmath.matrix, z: Any) -> Any:
    z = _mat(z) if not isinstance(z, mpmath.matrix) else z
    return (z.T * c * z)[0]


def _col(v: np.ndarray) -> mpmath.matrix:
    return mpmath.matrix([mpmath.mpf(t) for t in v])


def closed_pair(p: DerfParameters, x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
    """``(E h, E h²)`` by the closed forms (module docstring); x, y mp vectors."""
    a = _sym(p["A"])
    d = a.rows
    eye = mpmath.eye(d)
    xv, yv = _col(x), _col(y)
    v = _mat(p["B1"]) * xv + _mat(p["B2"]) * yv
    cq = _quad(_mat(p["C1"]), xv) + _quad(_mat(p["C2"]), yv)
    k4, k8 = eye - 4 * a, eye - 8 * a
    if not min(mpmath.eigsy(k8)[0]) > 0:
        raise ValueError("the DERF variance is finite only for I − 8A ≻ 0")
    mean = (mpmath.exp(2 * p["log_D"] + cq + _quad(mpmath.inverse(k4), v) / 2)
            / mpmath.sqrt(mpmath.det(k4)))
    second = (mpmath.exp(4 * p["log_D"] + 2 * cq + 2 * _quad(mpmath.inverse(k8), v))
              / mpmath.sqrt(mpmath.det(k8)))
    return mean, second


def _gauss_1d(c: Any, b: Any) -> Any:
    """``E exp(cω² + bω)``, ``ω ~ N(0, 1)``, by ``mpmath.quad`` (needs ``c < 1/2``)."""
    f = lambda w: mpmath.exp((c - mpmath.mpf(1) / 2) * w * w + b * w)  # noqa: E731
    centre = b / (1 - 2 * c)
    return mpmath.quad(f, [-mpmath.inf, centre, mpmath.inf]) / mpmath.sqrt(2 * mpmath.pi)


def quadrature_pair(p: DerfParameters, x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
    """``(E h, E h²)`` by ``d`` one-dimensional quadratures in the eigenbasis of ``A``."""
    a = _sym(p["A"])
    lam, q = mpmath.eigsy(a)
    xv, yv = _col(x), _col(y)
    v = q.T * (_mat(p["B1"]) * xv + _mat(p["B2"]) * yv)  # the linear term in ω' = Qᵀω
    cq = _quad(_mat(p["C1"]), xv) + _quad(_mat(p["C2"]), yv)
    mean = mpmath.exp(2 * p["log_D"] + cq)
    second = mpmath.exp(4 * p["log_D"] + 2 * cq)
    for i in range(a.rows):
        mean *= _gauss_1d(2 * lam[i], v[i])
        second *= _gauss_1d(4 * lam[i], 2 * v[i])
    return mean, second


def closed_power(p: DerfParameters, x: np.ndarray, y: np.ndarray, k: int) -> Any:
    """``E hᵏ = D^(2k)·e^(k(xᵀC₁x + yᵀC₂y))·det(I − 4kA)^(−½)·exp(½k²vᵀ(I − 4kA)⁻¹v)`` (the
    Gaussian integral with ``M = 2kA``, linear term ``kv``; finite for ``I − 4kA ≻ 0``)."""
    a = _sym(p["A"])
    xv, yv = _col(x), _col(y)
    v = _mat(p["B1"]) * xv + _mat(p["B2"]) * yv
    cq = _quad(_mat(p["C1"]), xv) + _quad(_mat(p["C2"]), yv)
    kk = mpmath.eye(a.rows) - 4 * k * a
    if not min(mpmath.eigsy(kk)[0]) > 0:
        raise ValueError(f"E h^{k} of DERF is finite only for I − {4 * k}A ≻ 0")
    return (mpmath.exp(2 * k * p["log_D"] + k * cq + k * k * _quad(mpmath.inverse(kk), v) / 2)
            / mpmath.sqrt(mpmath.det(kk)))


def raw_moments(x: np.ndarray, y: np.ndarray, config: Mapping[str, Any], dps: int) -> list:
    """``[E h, …, E h⁴]`` of the registered ``sderf`` by one-dimensional quadratures in the
    eigenbasis of ``A`` (``E exp(2kλω² + kvω)`` per direction; :class:`QuadratureError` where
    ``I − 16A`` is not positive definite: ``E h⁴`` is infinite)."""
    from kernel_verify.verify.moments.gauss_hermite import QuadratureError

    p = sderf_parameters(config, len(x))
    lam, q = mpmath.eigsy(_sym(p["A"]))
    if not all(16 * t < 1 for t in lam):
        raise QuadratureError("E h⁴ of SDERF is infinite unless every eigenvalue of A is < 1/16")
    v = q.T * (_mat(p["B1"]) * _col(x) + _mat(p["B2"]) * _col(y))
    cq = _quad(_mat(p["C1"]), _col(x)) + _quad(_mat(p["C2"]), _col(y))
    out = []
    for k in (1, 2, 3, 4):
        val = mpmath.exp(2 * k * p["log_D"] + k * cq)
        for i in range(len(lam)):
            val *= _gauss_1d(2 * k * lam[i], k * v[i])
        out.append(val)
    return out


def closed(x: np.ndarray, y: np.ndarray, config: Mapping[str, Any]) -> tuple[Any, Any]:
    """``(E h, V₁)`` of the registered ``sderf`` by the closed forms."""
    mean, second = closed_pair(sderf_parameters(config, len(x)), x, y)
    return mean, second - mean * mean


def quadrature(x: np.ndarray, y: np.ndarray, config: Mapping[str, Any]) -> tuple[Any, Any]:
    """``(E h, V₁)`` of the registered ``sderf`` by :func:`quadrature_pair`."""
    mean, second = quadrature_pair(sderf_parameters(config, len(x)), x, y)
    return mean, second - mean * mean


def log_second_moments(p: DerfParameters, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """``log E h²`` for every pair ``(xᵢ, yⱼ)`` (an ``(n₁, n₂)`` float64 array) by the closed
    form, with float64 parameters ``A, B1, B2, C1, C2, log_D``: ``4 log D + 2xᵀC₁x + 2yᵀC₂y −
    ½ log det(I − 8A) + 2vᵀ(I − 8A)⁻¹v``, ``v = B₁x + B₂y``. The variance of one feature is
    ``exp(this) − exp(2xᵀy)``; FAVOR#'s objective is its mean over the pairs."""
    a = np.asarray(p["A"], dtype=np.float64)
    d = a.shape[0]
    k8 = np.eye(d) - 8 * a
    sign, logdet = np.linalg.slogdet(k8)
    if sign <= 0 or np.linalg.eigvalsh(k8).min() <= 0:
        raise ValueError("the DERF variance is finite only for I − 8A ≻ 0")
    k8_inv = np.linalg.inv(k8)
    vx = np.asarray(xs, dtype=np.float64) @ np.asarray(p["B1"], dtype=np.float64).T
    vy = np.asarray(ys, dtype=np.float64) @ np.asarray(p["B2"], dtype=np.float64).T
    qx = np.einsum("id,de,ie->i", xs, p["C1"], xs) + np.einsum("id,de,ie->i", vx, k8_inv, vx)
    qy = np.einsum("id,de,ie->i", ys, p["C2"], ys) + np.einsum("id,de,ie->i", vy, k8_inv, vy)
    cross = vx @ k8_inv @ vy.T
    return (4 * float(p["log_D"]) - 0.5 * logdet + 2 * qx[:, None] + 2 * qy[None, :]
            + 4 * cross)
