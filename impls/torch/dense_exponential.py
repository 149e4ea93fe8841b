"""Dense-exponential random features (FAVOR#'s SDERF, ADERF) in torch: batched, device-generic.

Same formulas, parameters and conventions as :mod:`kernel_verify.impls.numpy.dense_exponential`
(docs/math.md §20). The matrices ``A``, ``B``, ``C`` and the row term ``ωᵢᵀAωᵢ + log D − ½ log m``
are formed in float64 from the float64 draw, then the features are computed in the compute dtype
of ``x`` (float32 for float16/bfloat16 inputs, returned in their own dtype).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from kernel_verify.impls.numpy.dense_exponential import sderf_config_matrix, sderf_parameters
from kernel_verify.impls.torch.convert import compute_dtype, to_torch
from kernel_verify.impls.validation import Config, Params, check_array, check_last_dim, check_params


def log_dense_exponential(x: torch.Tensor, w: torch.Tensor, a: np.ndarray, b: np.ndarray,
                          c: np.ndarray, log_d: float) -> torch.Tensor:
    """``log D + ωᵢᵀAωᵢ + ωᵢᵀBx + xᵀCx − ½ log m`` for the rows of ``w`` (float64 tensor (m, d));
    in the compute dtype of ``x``."""
    check_array("x", x, min_ndim=2, backend="torch")
    check_last_dim("x", x, w.shape[1])
    work = compute_dtype(x.dtype)
    w64 = w.to(device=x.device, dtype=torch.float64)
    mats = to_torch({"A": a, "B": b, "C": c}, device=x.device, dtype=torch.float64)
    row = (torch.einsum("id,de,ie->i", w64, mats["A"], w64) + log_d
           - 0.5 * math.log(w.shape[0])).to(work)
    proj = (w64 @ mats["B"]).to(work)
    xw = x.to(work)
    quad = torch.einsum("...d,de,...e->...", xw, mats["C"].to(work), xw).unsqueeze(-1)
    return xw @ proj.T + row + quad


def log_sderf(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``log φ(x) = log D + ωᵢᵀAωᵢ + ωᵢᵀBx − ‖x‖²/2 − ½ log m`` (SDERF), in the compute dtype."""
    check_array("x", x, min_ndim=2, backend="torch")
    check_params("params", params, {"W": (None, None)})
    w = to_torch(params, device=x.device, dtype=torch.float64)["W"]
    a = sderf_config_matrix(config, w.shape[1])
    b, log_d = sderf_parameters(a)
    return log_dense_exponential(x, w, a, b, -0.5 * np.eye(w.shape[1]), log_d)


def sderf(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """SDERF features ``D·exp(ωᵀAω + ωᵀBx − ‖x‖²/2)/√m``."""
    return log_sderf(x, params, config).exp_().to(x.dtype)


def aderf_features(x: torch.Tensor, w: Any, parameters: Mapping[str, Any],
                   side: str) -> torch.Tensor:
    """ADERF features of one side (``"query"``: ``f₁``, ``"key"``: ``f₂``), divided by √m."""
    if side not in ("query", "key"):
        raise ValueError(f"side must be 'query' or 'key', got {side!r}")
    i = "1" if side == "query" else "2"
    w = to_torch({"W": w}, device=x.device, dtype=torch.float64)["W"]
    out = log_dense_exponential(x, w, parameters["A"], parameters["B" + i], parameters["C" + i],
                                parameters["log_D"])
    return out.exp_().to(x.dtype)


__all__ = ["aderf_features", "log_dense_exponential", "log_sderf", "sderf"]
