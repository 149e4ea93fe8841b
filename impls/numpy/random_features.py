"""Random-feature maps in plain NumPy (float64/float32), written for clarity.

Each function takes ``x`` of shape ``(..., n, d)``, the parameter draw ``params`` (``W`` of shape
``(m, d)`` at unit scale, plus ``b`` for the random phase) and the map's ``config``, and returns
features of shape ``(..., n, D)`` in the dtype of ``x``. Formulas: docs/math.md §1, §2, §4.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kernel_verify.impls.validation import (
    Config,
    NumpyParams,
    check_array,
    check_finite_result,
    check_last_dim,
    check_params,
    check_positive_int,
    check_scalar,
    config_value,
)


def _projections(x: np.ndarray, params: NumpyParams, scale: float = 1.0) -> np.ndarray:
    """``(x/scale) Wᵀ`` after validating ``x`` and ``W``; computed in the dtype of ``x``."""
    check_array("x", x, min_ndim=2, backend="numpy")
    check_params("params", params, {"W": (None, None)}, backend="numpy")
    w = params["W"]
    check_last_dim("x", x, w.shape[1])
    return (x / x.dtype.type(scale)) @ w.astype(x.dtype).T


def _sq_norm_half(x: np.ndarray) -> np.ndarray:
    return 0.5 * np.sum(x * x, axis=-1, keepdims=True)


def rff_pairs(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ(x) = m^(-1/2)[cos(wᵢᵀx/σ), sin(wᵢᵀx/σ)]ᵢ`` (2m outputs): Gaussian kernel, unbiased."""
    sigma = check_scalar("sigma", config_value(config, "sigma"), positive=True)
    u = _projections(x, params, sigma)
    scale = x.dtype.type(1.0 / np.sqrt(u.shape[-1]))
    return scale * np.concatenate([np.cos(u), np.sin(u)], axis=-1)


def rff_phase(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ(x) = √(2/m)·cos(wᵢᵀx/σ + bᵢ)``, ``bᵢ ~ U[0, 2π)``: Gaussian kernel, unbiased."""
    sigma = check_scalar("sigma", config_value(config, "sigma"), positive=True)
    u = _projections(x, params, sigma)
    check_params("params", params, {"b": (u.shape[-1],)}, backend="numpy")
    scale = x.dtype.type(np.sqrt(2.0 / u.shape[-1]))
    return scale * np.cos(u + params["b"].astype(x.dtype))


def trig_overflow_remedy(x: Any, dtype_max: float) -> str:
    """What to do when ``exp(‖x‖²/2)`` of the trigonometric softmax features overflows."""
    limit = math.sqrt(2 * math.log(dtype_max))
    return (f"exp(‖x‖²/2) exceeds the largest finite value of the compute dtype for ‖x‖ > "
            f"{limit:.1f}; trigonometric softmax features cannot represent these inputs. "
            "Pass float64 inputs (features finite for ‖x‖ < 37.7; attention, which multiplies "
            "two of them, for ‖q‖² + ‖k‖² < 1419), scale the inputs down, or use a positive map "
            "(softmax_positive, softmax_hyperbolic, gerf) with the log-space attention path, "
            "which has no such limit")


def softmax_trig(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ(x) = exp(+‖x‖²/2)·m^(-1/2)[cos wᵢᵀx, sin wᵢᵀx]``: softmax kernel, unbiased.

    Overflow of ``exp(‖x‖²/2)`` (‖x‖ > 13.3 in float32, > 37.7 in float64) is a ValueError
    with the remedy, never ``inf`` features."""
    u = _projections(x, params)
    with np.errstate(over="ignore"):
        scale = np.exp(_sq_norm_half(x)) / np.sqrt(u.shape[-1]).astype(x.dtype)
        out = scale * np.concatenate([np.cos(u), np.sin(u)], axis=-1)
    return check_finite_result("softmax_trig features", out,
                               trig_overflow_remedy(x, float(np.finfo(x.dtype).max)))


def log_softmax_positive(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``log φ(x) = wᵢᵀx − ‖x‖²/2 − ½ log m`` (SM⁺)."""
    u = _projections(x, params)
    return u - _sq_norm_half(x) - x.dtype.type(0.5 * np.log(u.shape[-1]))


def softmax_positive(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ(x) = m^(-1/2)·exp(wᵢᵀx − ‖x‖²/2)`` (SM⁺, FAVOR+): softmax kernel, unbiased, positive."""
    return np.exp(log_softmax_positive(x, params, config))


def log_softmax_hyperbolic(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``log φ(x) = [±wᵢᵀx] − ‖x‖²/2 − ½ log 2m`` (SM⁺ₕ)."""
    u = _projections(x, params)
    shift = _sq_norm_half(x) + x.dtype.type(0.5 * np.log(2 * u.shape[-1]))
    return np.concatenate([u, -u], axis=-1) - shift


def softmax_hyperbolic(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ(x) = (2m)^(-1/2)·exp(−‖x‖²/2)[exp(wᵢᵀx), exp(−wᵢᵀx)]`` (SM⁺ₕ): unbiased, positive."""
    return np.exp(log_softmax_hyperbolic(x, params, config))


def relu_features(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ(x) = m^(-1/2)·relu(Wx)``: arc-cosine kernel of order 1, unbiased, nonnegative."""
    u = _projections(x, params)
    return np.maximum(u, 0) / np.sqrt(u.shape[-1]).astype(x.dtype)


def gerf_constants(a: float, d: int) -> tuple[float, float]:
    """``(B, log D)`` of GERF/FAVOR++ (softmax): ``B = √(1−4A)``, ``D = (1−4A)^(d/4)``."""
    a = check_scalar("A", a, below=0.25)
    d = check_positive_int("d", d)
    return float(np.sqrt(1 - 4 * a)), 0.25 * d * float(np.log1p(-4 * a))


def log_gerf(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``log φ(x) = log D + A‖wᵢ‖² + B wᵢᵀx − ‖x‖²/2 − ½ log m`` (docs/math.md §4)."""
    u = _projections(x, params)
    w = params["W"]
    a = config_value(config, "A")
    b, log_d = gerf_constants(a, w.shape[1])
    row_term = (a * np.sum(w * w, axis=-1) + log_d - 0.5 * np.log(w.shape[0])).astype(x.dtype)
    return x.dtype.type(b) * u + row_term - _sq_norm_half(x)


def gerf(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """GERF/FAVOR++ features ``D·exp(A‖w‖² + B wᵀx − ‖x‖²/2)/√m``.

    Unbiased for the softmax kernel when A < 1/4; the variance is finite only for A < 1/8.
    """
    return np.exp(log_gerf(x, params, config))


def optimal_gerf_a(sq_norm_sum: float, d: int) -> float:
    """The variance-minimising A (docs/math.md §4).

    ``A* = (1/16)(1 − 2ρ − √((2ρ+1)² + 8ρ))`` with ``ρ = ‖x+y‖²/d``.
    """
    s2 = check_scalar("sq_norm_sum", sq_norm_sum, nonnegative=True)
    d = check_positive_int("d", d)
    rho = s2 / d
    return (1 - 2 * rho - np.sqrt((2 * rho + 1) ** 2 + 8 * rho)) / 16


__all__ = [
    "gerf",
    "gerf_constants",
    "log_gerf",
    "log_softmax_hyperbolic",
    "log_softmax_positive",
    "optimal_gerf_a",
    "relu_features",
    "rff_pairs",
    "rff_phase",
    "softmax_hyperbolic",
    "softmax_positive",
    "softmax_trig",
    "trig_overflow_remedy",
]
