"""The exact parameters of the registered SDERF formula in mpmath (docs/math.md §20).

``A = αI + β·11ᵀ/d`` from the config, ``B = (I − 4A)^(1/2)``, ``C = −½I``, ``log D = ¼ log
det(I − 4A)``: shared by the twin (:mod:`kernel_verify.verify.references.features_catalogue`)
and the exact moments (:mod:`kernel_verify.verify.moments.dense_exponential`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import mpmath
import numpy as np

__all__ = ["sderf_matrix", "sderf_parameters", "sderf_parameters_mp"]


def _mat(a: Any) -> mpmath.matrix:
    return a if isinstance(a, mpmath.matrix) else mpmath.matrix(np.asarray(a).tolist())


def _sym(a: Any) -> mpmath.matrix:
    """The symmetric part of ``A`` (a float64 ``A`` is symmetric only to its rounding; both
    routes use the same exact matrix)."""
    a = _mat(a)
    return (a + a.T) / 2


def sderf_matrix(config: Mapping[str, Any], d: int) -> mpmath.matrix:
    """``A = αI + β·11ᵀ/d`` (mp) of the registered ``sderf`` formula."""
    alpha, beta = mpmath.mpf(float(config["alpha"])), mpmath.mpf(float(config["beta"]))
    if not (alpha < mpmath.mpf(1) / 4 and alpha + beta < mpmath.mpf(1) / 4):
        raise ValueError(f"SDERF needs α < 1/4 and α + β < 1/4, got α = {alpha}, β = {beta}")
    return mpmath.matrix([[alpha * (i == j) + beta / d for j in range(d)] for i in range(d)])


def sderf_parameters_mp(a: Any) -> dict[str, Any]:
    """SDERF's parameters for a symmetric ``A`` (mp): ``B = (I − 4A)^(1/2)``, ``C = −½I``,
    ``log D = ¼ log det(I − 4A)``."""
    a = _mat(a)
    d = a.rows
    lam, q = mpmath.eigsy(a)
    if not all(v < mpmath.mpf(1) / 4 for v in lam):
        raise ValueError("SDERF needs every eigenvalue of A below 1/4")
    root = mpmath.diag([mpmath.sqrt(1 - 4 * v) for v in lam])
    b = q * root * q.T
    c = mpmath.diag([mpmath.mpf(-1) / 2] * d)
    log_d = mpmath.fsum(mpmath.log(1 - 4 * v) for v in lam) / 4
    return {"A": a, "B1": b, "B2": b, "C1": c, "C2": c, "log_D": log_d}


def sderf_parameters(config: Mapping[str, Any], d: int) -> dict[str, Any]:
    """``sderf_parameters_mp(sderf_matrix(config, d))``, memoised per ``(α, β, d)`` and working
    precision: the same exact values, with one symmetric eigendecomposition per size instead of
    one per call (a reference or moment of one case calls it per point). The matrices returned
    are copies: a caller may change them."""
    alpha, beta = float(config["alpha"]), float(config["beta"])
    params = _sderf_parameters_at(alpha, beta, d, mpmath.mp.prec)
    return {k: v.copy() if isinstance(v, mpmath.matrix) else v for k, v in params.items()}


@functools.lru_cache(maxsize=64)
def _sderf_parameters_at(alpha: float, beta: float, d: int, prec: int) -> dict[str, Any]:
    return sderf_parameters_mp(sderf_matrix({"alpha": alpha, "beta": beta}, d))
