"""Deterministic linear-attention feature maps in torch: batched, device-generic.

Same formulas and conventions as :mod:`kernel_verify.impls.numpy.deterministic_maps` (docs/math.md
§6). cosFormer takes ``positions=`` (integer tensor or array of shape ``(n,)``); Hedgehog's weights
come from ``config`` (see :func:`kernel_verify.impls.numpy.deterministic_maps.hedgehog_weights`),
and :class:`Hedgehog` is the trainable ``nn.Module`` with the same formula.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from kernel_verify.impls.numpy.deterministic_maps import (
    check_positions,
    hedgehog_values,
    hedgehog_weights,
)
from kernel_verify.impls.torch.convert import checked_input, to_torch
from kernel_verify.impls.validation import (
    Config,
    Params,
    check_array,
    check_last_dim,
    check_positive_int,
    config_value,
)

__all__ = [
    "Hedgehog",
    "cosformer",
    "dpfp",
    "elu_plus_one",
    "hedgehog",
    "identity",
    "log_elu_plus_one",
    "log_hedgehog",
    "relu",
    "square",
]


def elu_plus_one(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``elu(x) + 1``: ``x + 1`` for ``x > 0``, ``exp(x)`` for ``x ≤ 0`` (positive)."""
    xw = checked_input(x)
    return torch.where(xw > 0, xw + 1, torch.exp(torch.clamp(xw, max=0))).to(x.dtype)


def log_elu_plus_one(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``log1p(x)`` for ``x > 0``, ``x`` for ``x ≤ 0`` (compute dtype)."""
    xw = checked_input(x)
    return torch.where(xw > 0, torch.log1p(torch.clamp(xw, min=0)), xw)


def relu(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``max(x, 0)`` (nonnegative; denominators can be 0)."""
    return torch.relu(checked_input(x)).to(x.dtype)


def square(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``x⊙x``: kernel ``Σ_i x_i² y_i²``."""
    xw = checked_input(x)
    return (xw * xw).to(x.dtype)


def identity(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``φ(x) = x`` (normalisation ill-posed)."""
    check_array("x", x, min_ndim=2, backend="torch")
    return x.clone()


def cosformer(
    x: torch.Tensor, params: Params, config: Config, *, positions: Any = None
) -> torch.Tensor:
    """``[relu(x)·sin(πi/2M), relu(x)·cos(πi/2M)]`` at position i (0 ≤ i ≤ M)."""
    xw = checked_input(x)
    pos, big_m = check_positions(positions, x.shape[-2], config_value(config, "M"))
    angle = torch.as_tensor((math.pi / (2 * big_m)) * pos.astype(np.float64), device=x.device)
    r = torch.relu(xw)
    s = torch.sin(angle).to(xw.dtype).unsqueeze(-1)
    c = torch.cos(angle).to(xw.dtype).unsqueeze(-1)
    return torch.cat([r * s, r * c], dim=-1).to(x.dtype)


def dpfp(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``concat_(j=1..ν) r ⊙ roll(r, j)``, ``r = [relu x, relu(−x)]``."""
    xw = checked_input(x)
    nu = check_positive_int("nu", config_value(config, "nu"))
    r = torch.cat([torch.relu(xw), torch.relu(-xw)], dim=-1)
    out = torch.cat([r * torch.roll(r, j, dims=-1) for j in range(1, nu + 1)], dim=-1)
    return out.to(x.dtype)


def _log_hedgehog_core(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    z = x @ w.T + b
    return torch.cat([torch.log_softmax(z, dim=-1), torch.log_softmax(-z, dim=-1)], dim=-1)


def log_hedgehog(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``[log_softmax(z), log_softmax(−z)]``, ``z = Wx + b`` (in the compute dtype)."""
    xw = checked_input(x)
    values = hedgehog_values(params, config, x.shape[-1])
    weights = to_torch(values, device=x.device, dtype=xw.dtype)
    return _log_hedgehog_core(xw, weights["W"], weights["b"])


def hedgehog(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``[softmax(Wx+b), softmax(−(Wx+b))]`` (positive; size 2d)."""
    return torch.exp(log_hedgehog(x, params, config)).to(x.dtype)


class Hedgehog(nn.Module):
    """Trainable Hedgehog map ``[softmax(Wx+b), softmax(−(Wx+b))]`` (Zhang et al. 2024).

    ``W (d, d)`` and ``b (d,)`` are ``nn.Parameter`` s initialised from float64 arrays (e.g.
    :func:`kernel_verify.impls.numpy.deterministic_maps.hedgehog_weights`), so the NumPy map with
    the same values computes the same features.
    """

    def __init__(self, w: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> None:
        super().__init__()
        p = to_torch({"W": w, "b": b})
        w_shape, b_shape = tuple(p["W"].shape), tuple(p["b"].shape)
        if len(w_shape) != 2 or w_shape[0] != w_shape[1] or b_shape != w_shape[:1]:
            raise ValueError(f"Hedgehog needs W (d, d) and b (d,), got {w_shape}, {b_shape}")
        check_array("W", p["W"], min_ndim=2)
        check_array("b", p["b"], min_ndim=1)
        self.W = nn.Parameter(p["W"])
        self.b = nn.Parameter(p["b"])

    @classmethod
    def from_config(cls, config: Config, d: int) -> Hedgehog:
        """The module holding :func:`hedgehog_weights` ``(config, d)``."""
        weights = hedgehog_weights(config, d)
        return cls(weights["W"], weights["b"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_array("x", x, min_ndim=2, backend="torch")
        check_last_dim("x", x, self.W.shape[1])
        return torch.exp(_log_hedgehog_core(x.to(self.W.dtype), self.W, self.b))
