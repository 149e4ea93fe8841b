"""Exact finite feature maps in torch: batched, device-generic (the device is the input's).

Same formulas and conventions as :mod:`kernel_verify.impls.numpy.exact_maps` (docs/math.md §5, §6);
float16/bfloat16 inputs are computed in float32 and cast back
(:mod:`kernel_verify.impls.torch.convert`).
"""

from __future__ import annotations

import math

import torch

from kernel_verify.impls.numpy.exact_maps import check_order, polynomial_indices
from kernel_verify.impls.torch.convert import checked_input
from kernel_verify.impls.validation import Config, Params, check_array, check_scalar, config_value

__all__ = ["cosine", "linear", "polynomial", "taylor", "taylor2_compressed"]


def taylor(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``[z^(⊗k)/√(k!)]_(k=0..p)``, ``z = x·d^(-1/4)``: inner product ``Σ_(k≤p) tᵏ/k!``."""
    xw = checked_input(x)
    order = check_order("order", config_value(config, "order"))
    d = x.shape[-1]
    z = xw * d**-0.25
    lead = tuple(x.shape[:-1])
    blocks = [torch.ones((*lead, 1), dtype=xw.dtype, device=x.device)]
    power = blocks[0]
    for k in range(1, order + 1):
        power = (power.unsqueeze(-1) * z.unsqueeze(-2)).reshape(*lead, d**k)
        blocks.append(power * (1.0 / math.sqrt(math.factorial(k))))
    return torch.cat(blocks, dim=-1).to(x.dtype)


def taylor2_compressed(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``[1, z, z_i²/√2, (z_i z_j)_(i<j)]``, ``z = x·d^(-1/4)``: inner product ``1 + t + t²/2``."""
    xw = checked_input(x)
    d = x.shape[-1]
    z = xw * d**-0.25
    i, j = torch.triu_indices(d, d, offset=1, device=x.device)
    ones = torch.ones((*x.shape[:-1], 1), dtype=xw.dtype, device=x.device)
    out = torch.cat([ones, z, (z * z) * (1.0 / math.sqrt(2.0)), z[..., i] * z[..., j]], dim=-1)
    return out.to(x.dtype)


def polynomial(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``√(p!/α!)·Π x̃_i^(α_i)``, ``x̃ = [√c, x]``: inner product ``(xᵀy + c)^p``."""
    xw = checked_input(x)
    p = check_order("p", config_value(config, "p"))
    c = check_scalar("c", config_value(config, "c"), nonnegative=True)
    idx_np, coef_np = polynomial_indices(x.shape[-1], p)
    idx = torch.tensor(idx_np, device=x.device)
    coef = torch.tensor(coef_np, dtype=xw.dtype, device=x.device)
    const = torch.full((*x.shape[:-1], 1), math.sqrt(c), dtype=xw.dtype, device=x.device)
    xt = torch.cat([const, xw], dim=-1)
    return (torch.prod(xt[..., idx], dim=-1) * coef).to(x.dtype)


def linear(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``φ(x) = x``: kernel ``xᵀy``."""
    check_array("x", x, min_ndim=2, backend="torch")
    return x.clone()


def cosine(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``φ(x) = x/‖x‖``, ``φ(0) = 0`` (power-of-two prescaling, as in the NumPy version)."""
    xw = checked_input(x)
    peak = xw.abs().amax(dim=-1, keepdim=True)
    _, exponent = torch.frexp(peak)
    # x times a power of two (exact); not torch.ldexp(xw, e), whose autograd gives a zero
    # gradient in x (measured with torch 2.13): the factor is a constant that cancels in x/‖x‖
    # (two factors: 2^-e alone overflows for subnormal rows)
    half = torch.div(-exponent, 2, rounding_mode="floor")
    one = torch.ones_like(peak)
    scaled = xw * torch.ldexp(one, half) * torch.ldexp(one, -exponent - half)
    norm = torch.sqrt((scaled * scaled).sum(dim=-1, keepdim=True))
    safe = torch.where(norm > 0, norm, torch.ones_like(norm))
    return torch.where(norm > 0, scaled / safe, torch.zeros_like(scaled)).to(x.dtype)
