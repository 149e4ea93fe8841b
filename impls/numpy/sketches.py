"""NumPy sketching maps of polynomial kernels (docs/math.md §18)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kernel_verify.impls.validation import check_array, check_last_dim, check_params

__all__ = ["polysketch", "random_maclaurin"]  # (and the helpers the torch module shares)


def polysketch(x: np.ndarray, params: Mapping[str, np.ndarray],
               config: Mapping[str, Any]) -> np.ndarray:
    """``φ(x) = vec((Sx)(Sx)ᵀ)`` (m² features): ``φ(x)ᵀφ(y) = ((Sx)ᵀ(Sy))²`` (Kacham, Mirrokni
    & Zhong 2024, the non-negative degree-2 PolySketch); computed in the dtype of ``x``."""
    check_array("x", x, min_ndim=2, backend="numpy")
    check_params("params", params, {"S": (None, None)}, backend="numpy")
    check_last_dim("x", x, params["S"].shape[1])
    z = x @ params["S"].astype(x.dtype).T
    return (z[..., :, None] * z[..., None, :]).reshape(*z.shape[:-1], -1)


def maclaurin_coefficients(degree: np.ndarray, p: float) -> np.ndarray:
    """``a_N / P(N)`` for the exponential kernel's ``a_n = 1/n!`` and
    ``P(N = n) = (1 − 1/p)p^(−n)``: ``p^N / (N!·(1 − 1/p))``, as the product
    ``Π_(k ≤ N) (p/k)`` divided by ``1 − 1/p`` (float64)."""
    degree = np.asarray(degree, dtype=np.float64)
    top = int(degree.max()) if degree.size else 0
    steps = np.concatenate([[1.0], np.cumprod(p / np.arange(1, top + 1, dtype=np.float64))])
    return steps[degree.astype(np.int64)] / (1.0 - 1.0 / p)


def check_maclaurin_params(params: Mapping[str, Any], config: Mapping[str, Any],
                           backend: str | None) -> float:
    """Validate ``degree (m,)`` (integers ``0 ≤ N ≤ K``) and ``W (m, K, d)``; return ``p``."""
    from kernel_verify.impls.validation import config_value

    check_params("params", params, {"degree": (None,), "W": (None, None, None)}, backend=backend)
    deg = np.asarray(params["degree"].detach().cpu() if hasattr(params["degree"], "detach")
                     else params["degree"], dtype=np.float64)
    k = params["W"].shape[1]
    if deg.shape[0] != params["W"].shape[0]:
        raise ValueError(f"params['degree'] has {deg.shape[0]} entries, params['W'] "
                         f"{params['W'].shape[0]} rows: they must match")
    if not (np.all(deg == np.floor(deg)) and np.all(deg >= 0) and np.all(deg <= k)):
        raise ValueError(f"params['degree'] must hold integers in [0, {k}] (W's second axis)")
    p = float(config_value(config, "p"))
    if not (p > 1 and p < float("inf")):
        raise ValueError(f"config['p'] must be a finite number > 1, got {p}")
    return p


def random_maclaurin(x: np.ndarray, params: Mapping[str, np.ndarray],
                     config: Mapping[str, Any]) -> np.ndarray:
    """Random Maclaurin features of ``exp(xᵀy)`` (Kar & Karnick 2012):
    ``φᵢ(x) = √(a_(Nᵢ)/P(Nᵢ))·Π_(j < Nᵢ) w_(ij)ᵀx / √m``, ``a_n = 1/n!``, Rademacher ``w``."""
    check_array("x", x, min_ndim=2, backend="numpy")
    p = check_maclaurin_params(params, config, "numpy")
    w = params["W"]
    check_last_dim("x", x, w.shape[2])
    deg = params["degree"]
    z = np.einsum("...nd,mkd->...nmk", x, w.astype(x.dtype))
    live = np.arange(w.shape[1])[None, :] < deg[:, None]
    z = np.where(live, z, x.dtype.type(1))
    coef = np.sqrt(maclaurin_coefficients(deg, p) / w.shape[0]).astype(x.dtype)
    return np.prod(z, axis=-1) * coef
