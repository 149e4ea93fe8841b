"""ReBased and DARKFormer in torch (docs/math.md §21): the formulas and conventions of
:mod:`kernel_verify.impls.numpy.learned_attention`, device-generic, computed in the input's compute
dtype (float32 for half precision) and returned in the input dtype."""

from __future__ import annotations

import math

import torch

from kernel_verify.impls.numpy.learned_attention import _alignment, rebased_values
from kernel_verify.impls.torch.convert import checked_input, to_torch
from kernel_verify.impls.validation import Config, Params

__all__ = ["darkformer", "log_darkformer", "rebased"]


def rebased(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``φ(x) = √s·vec(x̃x̃ᵀ)``, ``x̃ = γ ⊙ (x − x̄)/√(var x + eps) + β`` (size ``d²``)."""
    xw = checked_input(x)
    d = x.shape[-1]
    v = rebased_values(params, config, d)
    p = to_torch({"gamma": v["gamma"], "beta": v["beta"]}, device=x.device, dtype=xw.dtype)
    c = xw - xw.mean(dim=-1, keepdim=True)
    sigma = torch.sqrt((c * c).mean(dim=-1, keepdim=True) + v["eps"])
    t = p["gamma"] * (c / sigma) + p["beta"]
    outer = (t.unsqueeze(-1) * t.unsqueeze(-2)).reshape(*t.shape[:-1], d * d)
    return (outer * math.sqrt(v["scale"])).to(x.dtype)


def log_darkformer(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``log φ(x) = εᵢᵀz − ‖z‖²/2 − ½ log m``, ``z = Mx`` (in the compute dtype)."""
    xw = checked_input(x)
    a = _alignment(params, config, x.shape[-1], "torch")
    p = to_torch({"M": a, "W": params["W"]}, device=x.device, dtype=xw.dtype)
    z = xw @ p["M"].T
    log_phi = z @ p["W"].T - (z * z).sum(dim=-1, keepdim=True) / 2
    return log_phi - 0.5 * math.log(p["W"].shape[0])


def darkformer(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``φ(x) = m^(−1/2)·exp(εᵢᵀz − ‖z‖²/2)``, ``z = Mx`` (positive; kernel ``exp(xᵀMᵀMy)``)."""
    return torch.exp(log_darkformer(x, params, config)).to(x.dtype)
