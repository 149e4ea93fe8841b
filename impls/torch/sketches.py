"""torch sketching maps of polynomial kernels (docs/math.md §18); device-generic, half inputs
computed in float32."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from kernel_verify.impls.numpy.sketches import check_maclaurin_params, maclaurin_coefficients
from kernel_verify.impls.torch.convert import compute_dtype, to_torch
from kernel_verify.impls.validation import check_array, check_last_dim, check_params

__all__ = ["polysketch", "random_maclaurin"]


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


def random_maclaurin(x: torch.Tensor, params: Mapping[str, Any], config: Mapping[str, Any]
                     ) -> torch.Tensor:
    """Random Maclaurin features of ``exp(xᵀy)`` (Kar & Karnick 2012), in torch:
    ``φᵢ(x) = √(a_(Nᵢ)/P(Nᵢ))·Π_(j < Nᵢ) w_(ij)ᵀx / √m``."""
    check_array("x", x, min_ndim=2, backend="torch")
    p = check_maclaurin_params(params, config, None)
    work = compute_dtype(x.dtype)
    t = to_torch({"W": params["W"]}, device=x.device, dtype=work)
    w = t["W"]
    check_last_dim("x", x, w.shape[2])
    deg = params["degree"]
    deg = deg.detach().cpu().numpy() if isinstance(deg, torch.Tensor) else deg
    z = torch.einsum("...nd,mkd->...nmk", x.to(work), w)
    live = torch.arange(w.shape[1], device=x.device)[None, :] < torch.as_tensor(
        deg, device=x.device)[:, None]
    z = torch.where(live, z, torch.ones((), dtype=work, device=x.device))
    coef = torch.as_tensor(np.sqrt(maclaurin_coefficients(deg, p) / w.shape[0]),
                           dtype=work, device=x.device)
    return (torch.prod(z, dim=-1) * coef).to(x.dtype)
