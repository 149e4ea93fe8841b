"""Learned-kernel feature maps in torch (Chowdhury et al. 2021; docs/math.md §7).

Two faces of the same formulas as :mod:`kernel_verify.impls.numpy.learned_maps`:

* registry functions ``f(x, params, config)`` (learned values from ``config``, random part from
  ``params``), batched and device-generic;
* trainable ``nn.Module`` s (:class:`GMMRKS`, :class:`GMMPRF`, :class:`Fastfood`,
  :class:`Generative`) holding the learned values as ``nn.Parameter`` s and the random part as
  buffers, built from the same float64 arrays (``from_config``) so that both compute the same
  features. Mixture weights are parameterised as ``π = softmax(logits)`` with ``logits = log π``
  (always positive and summing to 1 while training; equal to the given π up to rounding).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from scipy.linalg import hadamard
from torch import nn

from kernel_verify.impls.numpy import learned_maps as np_lm
from kernel_verify.impls.torch.convert import checked_input, to_torch
from kernel_verify.impls.validation import (
    Config,
    Params,
    check_array,
    check_last_dim,
    check_params,
    check_scalar,
    config_value,
)

__all__ = [
    "GMMPRF",
    "GMMRKS",
    "Fastfood",
    "Generative",
    "fastfood",
    "generative",
    "gmm_prf",
    "gmm_rks",
    "log_gmm_prf",
]


# ---------------------------------------------------------------------------------- mixtures
def _gmm_frequencies(
    eps: torch.Tensor, pi: torch.Tensor, mu: torch.Tensor, lower: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    comps_np, counts_np = np_lm.mixture_layout(eps.shape[0], pi.shape[0])
    comps = torch.as_tensor(comps_np, device=eps.device)
    counts = torch.as_tensor(counts_np, dtype=eps.dtype, device=eps.device)
    omega = mu[comps] + torch.einsum("mkj,mk->mj", lower[comps], eps)
    return omega, pi[comps] / counts[comps]


def _rks_core(x: torch.Tensor, omega: torch.Tensor, a2: torch.Tensor) -> torch.Tensor:
    u = x @ omega.T
    a = torch.sqrt(a2)
    return torch.cat([a * torch.cos(u), a * torch.sin(u)], dim=-1)


def _log_prf_core(x: torch.Tensor, omega: torch.Tensor, a2: torch.Tensor) -> torch.Tensor:
    return x @ omega.T - 0.5 * (x * x).sum(dim=-1, keepdim=True) + 0.5 * torch.log(a2)


def _gmm_setup(
    x: torch.Tensor, params: Params, config: Config, tag: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    xw = checked_input(x)
    d = x.shape[-1]
    check_params("params", params, {"eps": (None, None)})
    check_last_dim("x", x, params["eps"].shape[1])  # ε was drawn for this d
    g = to_torch(np_lm.gmm_values(params, config, d, tag), device=x.device, dtype=xw.dtype)
    eps = to_torch({"eps": params["eps"]}, device=x.device, dtype=xw.dtype)["eps"]
    omega, a2 = _gmm_frequencies(eps, g["pi"], g["mu"], g["L"])
    return xw, omega, a2


def gmm_rks(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``a_i[cos ω_iᵀx, sin ω_iᵀx]``, ``ω_i = μ_(c_i) + L_(c_i)ᵀε_i`` (spectral mixture)."""
    xw, omega, a2 = _gmm_setup(x, params, config, "gmm_rks")
    return _rks_core(xw, omega, a2).to(x.dtype)


def log_gmm_prf(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``ω_iᵀx − ‖x‖²/2 + ½ log a_i²`` (compute dtype)."""
    xw, omega, a2 = _gmm_setup(x, params, config, "gmm_prf")
    return _log_prf_core(xw, omega, a2)


def gmm_prf(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``a_i·exp(ω_iᵀx − ‖x‖²/2)`` (positive)."""
    return torch.exp(log_gmm_prf(x, params, config)).to(x.dtype)


class _Mixture(nn.Module):
    def __init__(self, pi: Any, mu: Any, lower: Any, eps: Any) -> None:
        super().__init__()
        p = to_torch({"pi": pi, "mu": mu, "L": lower, "eps": eps})
        c, d = p["mu"].shape
        check_params("mixture", p, {"pi": (c,), "mu": (c, d), "L": (c, d, d), "eps": (None, d)})
        if bool((p["pi"] <= 0).any()):
            raise ValueError("mixture weights pi must all be > 0")
        np_lm.mixture_layout(p["eps"].shape[0], c)
        self.logits = nn.Parameter(torch.log(p["pi"]))
        self.mu = nn.Parameter(p["mu"])
        self.L = nn.Parameter(p["L"])
        self.register_buffer("eps", p["eps"])

    @classmethod
    def from_config(
        cls, config: Config, d: int, m: int, rng: np.random.Generator
    ) -> _Mixture:
        """Learned values from ``config`` (as the registry entry resolves them for d) and
        ``ε ~ N(0, I)`` of shape ``(m, d)`` drawn from ``rng``."""
        g = np_lm.gmm_params(config, d, cls._tag)
        return cls(g["pi"], g["mu"], g["L"], rng.standard_normal((m, d)))

    def frequencies(self) -> tuple[torch.Tensor, torch.Tensor]:
        return _gmm_frequencies(self.eps, torch.softmax(self.logits, dim=0), self.mu, self.L)

    def _prepare(self, x: torch.Tensor) -> torch.Tensor:
        check_array("x", x, min_ndim=2, backend="torch")
        check_last_dim("x", x, self.mu.shape[1])
        return x.to(self.mu.dtype)


class GMMRKS(_Mixture):
    """Trainable GMM-RKS features (spectral mixture kernel); parameters ``logits, mu, L``."""

    _tag = "gmm_rks"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _rks_core(self._prepare(x), *self.frequencies())


class GMMPRF(_Mixture):
    """Trainable GMM-PRF positive features; parameters ``logits, mu, L``."""

    _tag = "gmm_prf"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(_log_prf_core(self._prepare(x), *self.frequencies()))


# ---------------------------------------------------------------------------------- Fastfood
def _fastfood_matrix(
    s: torch.Tensor, g: torch.Tensor, b: torch.Tensor, perm: torch.Tensor, d: int
) -> torch.Tensor:
    """Differentiable ``S H G Π H B/√p`` for every block (``(blocks, p)`` arrays), first d cols."""
    blocks, p = s.shape
    h = torch.as_tensor(hadamard(p), dtype=s.dtype, device=s.device)
    hg = h.unsqueeze(0) * g.unsqueeze(1)  # H·G
    hb = h.unsqueeze(0) * b.unsqueeze(1)  # H·B
    right = hb[torch.arange(blocks, device=s.device).unsqueeze(1), perm]  # Π·H·B
    w = s.unsqueeze(2) * (hg @ right) / math.sqrt(p)
    return w.reshape(blocks * p, p)[:, :d]


def _fastfood_core(x: torch.Tensor, w: torch.Tensor, sigma: float) -> torch.Tensor:
    u = (x / sigma) @ w.T
    return torch.cat([torch.cos(u), torch.sin(u)], dim=-1) / math.sqrt(w.shape[0])


def fastfood(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``[cos(Wx/σ), sin(Wx/σ)]/√rows``, W from the Fastfood blocks in ``params``."""
    xw = checked_input(x)
    sigma = check_scalar("sigma", config_value(config, "sigma"), positive=True)
    d = x.shape[-1]
    p = np_lm.padded_size(d)
    check_params("params", params, {k: (None, p) for k in ("S", "G", "B", "perm")})
    raw_perm = params["perm"]
    if isinstance(raw_perm, torch.Tensor):  # params may already live on x's device (CUDA)
        raw_perm = raw_perm.detach().cpu().numpy()
    perm = torch.as_tensor(np_lm.check_perm(np.asarray(raw_perm)), device=x.device)
    t = to_torch({k: params[k] for k in ("S", "G", "B")}, device=x.device, dtype=xw.dtype)
    w = _fastfood_matrix(t["S"], t["G"], t["B"], perm, d)
    return _fastfood_core(xw, w, sigma).to(x.dtype)


class Fastfood(nn.Module):
    """Fastfood random features with trainable diagonals ``S, G, B`` (blocks, p); the permutation
    is a buffer. ``from_config`` gives the learned entry's values (one block), ``random`` a fresh
    random initialisation of ``blocks`` blocks (the Gaussian-kernel estimator)."""

    def __init__(self, s: Any, g: Any, b: Any, perm: Any, d: int, sigma: float = 1.0) -> None:
        super().__init__()
        p = to_torch({"S": s, "G": g, "B": b})
        perm_np = np_lm.check_perm(np.atleast_2d(np.asarray(perm)))
        shape = perm_np.shape
        for key, value in p.items():
            p[key] = value.reshape(shape)
            check_array(key, p[key], min_ndim=2)
        if np_lm.padded_size(d) != shape[1]:
            raise ValueError(
                f"block size {shape[1]} does not match d={d} (p = {np_lm.padded_size(d)})"
            )
        self.d = d
        self.sigma = check_scalar("sigma", sigma, positive=True)
        self.S = nn.Parameter(p["S"])
        self.G = nn.Parameter(p["G"])
        self.B = nn.Parameter(p["B"])
        self.register_buffer("perm", torch.as_tensor(perm_np))

    @classmethod
    def from_config(cls, config: Config, d: int) -> Fastfood:
        """The learned entry's diagonals (:func:`fastfood_learned_params`)."""
        v = np_lm.fastfood_learned_params(config, d)
        return cls(v["S"], v["G"], v["B"], v["perm"], d, config_value(config, "sigma"))

    @classmethod
    def random(cls, rng: np.random.Generator, d: int, blocks: int, sigma: float = 1.0) -> Fastfood:
        """A random initialisation (:func:`draw_fastfood`)."""
        v = np_lm.draw_fastfood(rng, d, blocks)
        return cls(v["S"], v["G"], v["B"], v["perm"], d, sigma)

    def matrix(self) -> torch.Tensor:
        return _fastfood_matrix(self.S, self.G, self.B, self.perm, self.d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_array("x", x, min_ndim=2, backend="torch")
        check_last_dim("x", x, self.d)
        return _fastfood_core(x.to(self.S.dtype), self.matrix(), self.sigma)


# -------------------------------------------------------------------------------- generative
def _generative_core(
    x: torch.Tensor, eps: torch.Tensor, w: Mapping[str, torch.Tensor]
) -> torch.Tensor:
    omega = torch.sin(eps @ w["W1"].T + w["b1"]) @ w["W2"].T + w["b2"]
    u = x @ omega.T
    return torch.cat([torch.cos(u), torch.sin(u)], dim=-1) / math.sqrt(u.shape[-1])


def generative(x: torch.Tensor, params: Params, config: Config) -> torch.Tensor:
    """``[cos ω_iᵀx, sin ω_iᵀx]/√m``, ``ω_i = W₂ sin(W₁ε_i + b₁) + b₂``."""
    xw = checked_input(x)
    weights = np_lm.generative_values(params, config, x.shape[-1])
    check_params("params", params, {"eps": (None, weights["W1"].shape[1])})
    w = to_torch(weights, device=x.device, dtype=xw.dtype)
    eps = to_torch({"eps": params["eps"]}, device=x.device, dtype=xw.dtype)["eps"]
    return _generative_core(xw, eps, w).to(x.dtype)


class Generative(nn.Module):
    """Trainable generative frequencies ``ω = g_θ(ε)`` (one hidden layer, sin activation);
    ε is a buffer of shape ``(m, k)``."""

    def __init__(self, weights: Mapping[str, Any], eps: Any) -> None:
        super().__init__()
        p = to_torch({**weights, "eps": eps})
        h, k = p["W1"].shape
        d = p["W2"].shape[0]
        check_params(
            "generative", p, {"W1": (h, k), "b1": (h,), "W2": (d, h), "b2": (d,), "eps": (None, k)}
        )
        for key in ("W1", "b1", "W2", "b2"):
            setattr(self, key, nn.Parameter(p[key]))
        self.register_buffer("eps", p["eps"])

    @classmethod
    def from_config(
        cls, config: Config, d: int, m: int, rng: np.random.Generator
    ) -> Generative:
        """Weights from ``config`` (:func:`generative_params`), ``ε ~ N(0, I_k)`` from ``rng``."""
        weights = np_lm.generative_params(config, d)
        return cls(weights, rng.standard_normal((m, weights["W1"].shape[1])))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_array("x", x, min_ndim=2, backend="torch")
        check_last_dim("x", x, self.W2.shape[0])
        w = {"W1": self.W1, "b1": self.b1, "W2": self.W2, "b2": self.b2}
        return _generative_core(x.to(self.W1.dtype), self.eps, w)
