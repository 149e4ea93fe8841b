"""torch sketching maps of polynomial kernels (docs/math.md §18); device-generic, half inputs
computed in float32."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from kernel_verify.impls.torch.convert import compute_dtype, to_torch
from kernel_verify.impls.validation import check_array, check_last_dim, check_params

__all__ = ["polysketch"]


def polysketch(x: torch.Tensor, params: Mapping[str, Any], config: Mapping[str, Any]
               ) -> torch.Tensor:
    """``φ(x) = vec((Sx)(Sx)ᵀ)`` (m² features): ``φ(x)ᵀφ(y) = ((Sx)ᵀ(Sy))²``."""
    check_array("x", x, min_ndim=2, backend="torch")
    check_params("params", params, {"S": (None, None)})
    work = compute_dtype(x.dtype)
    s = to_torch(params, device=x.device, dtype=work)["S"]
    check_last_dim("x", x, s.shape[1])
    z = x.to(work) @ s.T
    return (z[..., :, None] * z[..., None, :]).flatten(-2).to(x.dtype)
