"""Random-feature maps in torch: batched, device-generic (the device is the input's).

Same formulas, parameters and conventions as :mod:`kernel_verify.impls.numpy.random_features`;
inputs have shape ``(..., n, d)`` (typically ``(batch, heads, n, d)``). float16/bfloat16 inputs are
computed in float32 and returned in their own dtype (:mod:`kernel_verify.impls.torch.convert`).
docs/math.md §1, §2, §4.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from kernel_verify.impls.numpy.random_features import gerf_constants, trig_overflow_remedy
from kernel_verify.impls.torch.convert import compute_dtype, to_torch
from kernel_verify.impls.validation import (
    Config,
    Params,
    check_array,
    check_finite_result,
    check_last_dim,
    check_params,
    check_scalar,
    config_value,
)


def _prepare(
    x: torch.Tensor, params: Mapping[str, Any], keys: dict[str, tuple[int | None, ...]]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    check_array("x", x, min_ndim=2, backend="torch")
    check_params("params", params, keys)
    work = compute_dtype(x.dtype)
    p = to_torch(params, device=x.device, dtype=work)
    check_last_dim("x", x, p["W"].shape[1])
    return x.to(work), p


def _projections(x: torch.Tensor, w: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    return (x / scale) @ w.T


def _sq_norm_half(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (x * x).sum(dim=-1, keepdim=True)


def _shifted_projections(x: torch.Tensor, w: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """``x Wᵀ − shift`` (``shift`` of shape ``(..., n, 1)``), the shift subtracted in place from
    the fresh product (a second fresh ``n×m`` tensor would cost its page faults; ``addmm``'s
    broadcast copy of the shift into the output was slower still, measured)."""
    return (x @ w.T).sub_(shift)


def rff_pairs(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``φ(x) = m^(-1/2)[cos(wᵢᵀx/σ), sin(wᵢᵀx/σ)]ᵢ`` (2m outputs)."""
    sigma = check_scalar("sigma", config_value(config, "sigma"), positive=True)
    xw, p = _prepare(x, params, {"W": (None, None)})
    u = _projections(xw, p["W"], sigma)
    out = torch.cat([torch.cos(u), torch.sin(u)], dim=-1) / math.sqrt(u.shape[-1])
    return out.to(x.dtype)


def rff_phase(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``φ(x) = √(2/m)·cos(wᵢᵀx/σ + bᵢ)``."""
    sigma = check_scalar("sigma", config_value(config, "sigma"), positive=True)
    w = params.get("W") if isinstance(params, Mapping) else None
    m = w.shape[0] if hasattr(w, "shape") and len(w.shape) == 2 else None
    xw, p = _prepare(x, params, {"W": (None, None), "b": (m,)})
    u = _projections(xw, p["W"], sigma)
    return (math.sqrt(2.0 / u.shape[-1]) * torch.cos(u + p["b"])).to(x.dtype)


def softmax_trig(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``φ(x) = exp(+‖x‖²/2)·m^(-1/2)[cos wᵢᵀx, sin wᵢᵀx]``."""
    xw, p = _prepare(x, params, {"W": (None, None)})
    u = _projections(xw, p["W"])
    scale = torch.exp(_sq_norm_half(xw)) / math.sqrt(u.shape[-1])
    out = (scale * torch.cat([torch.cos(u), torch.sin(u)], dim=-1)).to(x.dtype)
    # Overflow in the compute dtype or when casting back to a half type: an error, never inf.
    limit = min(torch.finfo(xw.dtype).max, torch.finfo(x.dtype).max)
    return check_finite_result("softmax_trig features", out, trig_overflow_remedy(x, limit))


def log_softmax_positive(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``log φ(x) = wᵢᵀx − ‖x‖²/2 − ½ log m`` (SM⁺), in the compute dtype."""
    xw, p = _prepare(x, params, {"W": (None, None)})
    w = p["W"]
    return _shifted_projections(xw, w, _sq_norm_half(xw) + 0.5 * math.log(w.shape[0]))


def softmax_positive(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``φ(x) = m^(-1/2)·exp(wᵢᵀx − ‖x‖²/2)`` (SM⁺)."""
    return log_softmax_positive(x, params, config).exp_().to(x.dtype)


def log_softmax_hyperbolic(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``log φ(x) = [±wᵢᵀx] − ‖x‖²/2 − ½ log 2m`` (SM⁺ₕ), in the compute dtype."""
    xw, p = _prepare(x, params, {"W": (None, None)})
    w = p["W"]
    shift = _sq_norm_half(xw) + 0.5 * math.log(2 * w.shape[0])
    return _shifted_projections(xw, torch.cat([w, -w]), shift)


def softmax_hyperbolic(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``φ(x) = (2m)^(-1/2)·exp(−‖x‖²/2)[exp(wᵢᵀx), exp(−wᵢᵀx)]`` (SM⁺ₕ)."""
    return log_softmax_hyperbolic(x, params, config).exp_().to(x.dtype)


def relu_features(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``φ(x) = m^(-1/2)·relu(Wx)`` (arc-cosine kernel of order 1)."""
    xw, p = _prepare(x, params, {"W": (None, None)})
    u = _projections(xw, p["W"])
    return (torch.relu(u) / math.sqrt(u.shape[-1])).to(x.dtype)


def log_gerf(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``log φ(x) = log D + A‖wᵢ‖² + B wᵢᵀx − ‖x‖²/2 − ½ log m`` (GERF), in the compute dtype."""
    xw, p = _prepare(x, params, {"W": (None, None)})
    w = p["W"]
    a = config_value(config, "A")
    b, log_d = gerf_constants(a, w.shape[1])
    row_term = a * (w * w).sum(dim=-1) + log_d - 0.5 * math.log(w.shape[0])
    return b * _projections(xw, w) + row_term - _sq_norm_half(xw)


def gerf(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """GERF/FAVOR++ positive features ``D·exp(A‖w‖² + B wᵀx − ‖x‖²/2)/√m``."""
    return log_gerf(x, params, config).exp_().to(x.dtype)


__all__ = [
    "gerf",
    "log_gerf",
    "log_softmax_hyperbolic",
    "log_softmax_positive",
    "relu_features",
    "rff_pairs",
    "rff_phase",
    "softmax_hyperbolic",
    "softmax_positive",
    "softmax_trig",
]
