"""The conventions production code uses to build the inputs of the delta rule and its relatives
(:mod:`kernel_verify.impls.numpy.recurrence`): key/query normalisation, the writing strength
``β`` and the log-gates ``g ≤ 0``. Backend-generic: each function takes a NumPy array or a torch
tensor and returns the same kind (torch results are differentiable and on the input's device).

* :func:`l2_normalise` — four conventions that agree for ``‖x‖ ≫ √ε`` and differ near 0:

  - ``"sum_inside"``: ``x / √(Σ_i x_i² + ε)`` (flash-linear-attention's ``l2norm``, ε = 1e-6,
    applied to q and k by DeltaNet, Gated DeltaNet and KDA layers);
  - ``"root_outside"``: ``x / (√(Σ_i x_i²) + ε)`` (ε added to the norm; like ``"clamp"`` away
    from 0, but smooth);
  - ``"clamp"``: ``x / max(√(Σ_i x_i²), ε)`` (``torch.nn.functional.normalize``, whose default
    ε is 1e-12): exactly ``x/‖x‖`` wherever ``‖x‖ ≥ ε``;
  - ``"mean_inside"``: ``x / √(mean_i x_i² + ε)``, an RMS norm without weight (Zhang & Sennrich,
    arXiv 1910.07467): its result has norm ≈ √d, not 1.

  At ``‖x‖ = 10⁻⁴`` with ε = 10⁻⁶ the first gives ``‖x‖/√(‖x‖² + ε) ≈ 0.0995``, the second
  ``‖x‖/(‖x‖ + ε) ≈ 0.990``.
* :func:`beta_from_logit` — ``β = σ(x)`` (DeltaNet, Gated DeltaNet: ``β ∈ (0, 1)``), or
  ``β = 2σ(x) ∈ (0, 2)`` with ``allow_negative_eigenvalues`` (the eigenvalue ``1 − β`` of
  ``I − βkkᵀ`` along ``k`` then lies in ``(−1, 1)``: Grazzi et al., arXiv 2411.12537).
* :func:`mamba_log_gate` — ``g = −exp(A_log) · softplus(a + dt_bias)`` (Mamba2's discretised
  decay ``exp(Δ·A)`` with ``A = −exp(A_log)``, ``Δ = softplus(a + dt_bias)``: Dao & Gu, arXiv
  2405.21060; the gate of Gated DeltaNet, arXiv 2412.06464, and per key dimension of KDA, Kimi
  Linear tech report 2025).
* :func:`bounded_log_gate` — ``g = lower · σ(a)`` with ``lower < 0``: ``g ∈ (lower, 0)``.
  RWKV-7's decay ``w = exp(−e^(−0.5) σ(a))`` is ``lower = −e^(−0.5)`` (Peng et al., arXiv
  2503.14456); KDA's lower-bounded gate (Kimi Linear tech report 2025) uses ``lower = −5``.

Sigmoid and softplus are computed stably for large ``|x|``: ``σ(x)`` from ``e^(−|x|)``,
``softplus(x) = log(1 + e^x)`` as ``logaddexp(0, x)`` (no overflow, gradient ``σ(x)``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kernel_verify.impls.validation import (
    check_array,
    check_bool,
    check_one_backend,
    check_same_dtype,
    check_scalar,
    is_torch,
)

__all__ = ["L2_CONVENTIONS", "RWKV7_LOWER", "beta_from_logit", "bounded_log_gate",
           "l2_normalise", "mamba_log_gate"]

#: The conventions of :func:`l2_normalise`.
L2_CONVENTIONS = ("sum_inside", "root_outside", "mean_inside", "clamp")

#: RWKV-7's bound on the log-decay, ``−e^(−0.5)`` (:func:`bounded_log_gate`).
RWKV7_LOWER = -math.exp(-0.5)


def _sigmoid(x: Any) -> Any:
    if is_torch(x):
        import torch

        return torch.sigmoid(x)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _softplus(x: Any) -> Any:
    if is_torch(x):
        import torch

        return torch.logaddexp(x, torch.zeros_like(x))
    return np.logaddexp(np.zeros_like(x), x)


def l2_normalise(x: Any, *, eps: float = 1e-6, convention: str = "sum_inside") -> Any:
    """``x (..., d)`` normalised along its last axis by ``convention`` (module docstring):
    ``"sum_inside"`` ``x/√(Σx² + ε)``, ``"root_outside"`` ``x/(√(Σx²) + ε)``, ``"mean_inside"``
    ``x/√(mean(x²) + ε)``, ``"clamp"`` ``x/max(√(Σx²), ε)``. ``eps > 0``."""
    if not isinstance(convention, str) or convention not in L2_CONVENTIONS:
        raise ValueError(f"convention must be one of {', '.join(L2_CONVENTIONS)}, got "
                         f"{convention!r}")
    eps = check_scalar("eps", eps, positive=True)
    check_array("x", x, min_ndim=1)
    if x.shape[-1] < 1:
        raise ValueError(f"x must have a last dimension >= 1, got shape {tuple(x.shape)}")
    if is_torch(x):
        import torch

        sq = (x * x).sum(dim=-1, keepdim=True)
        sqrt = torch.sqrt
    else:
        sq = np.sum(x * x, axis=-1, keepdims=True)
        sqrt = np.sqrt
    if convention == "sum_inside":
        return x / sqrt(sq + eps)
    if convention == "root_outside":
        return x / (sqrt(sq) + eps)
    if convention == "clamp":
        norm = sqrt(sq)
        return x / (norm.clamp_min(eps) if is_torch(x) else np.maximum(norm, eps))
    return x / sqrt(sq / x.shape[-1] + eps)


def beta_from_logit(x: Any, *, allow_negative_eigenvalues: bool = False) -> Any:
    """``β = σ(x) ∈ (0, 1)``, or ``2σ(x) ∈ (0, 2)`` with ``allow_negative_eigenvalues``
    (module docstring); stable for large ``|x|``."""
    check_bool("allow_negative_eigenvalues", allow_negative_eigenvalues)
    check_array("x", x, min_ndim=0)
    beta = _sigmoid(x)
    return 2 * beta if allow_negative_eigenvalues else beta


def _check_broadcast(name: str, p: Any, a: Any) -> None:
    """``p`` broadcasts against ``a`` without changing ``a``'s shape."""
    try:
        shape = np.broadcast_shapes(tuple(p.shape), tuple(a.shape))
    except ValueError:
        shape = None
    if shape != tuple(a.shape):
        raise ValueError(f"{name} of shape {tuple(p.shape)} must broadcast against a of shape "
                         f"{tuple(a.shape)} (e.g. one value per head, shape (H, 1) for a of "
                         "shape (B, H, T))")


def mamba_log_gate(a: Any, *, A_log: Any, dt_bias: Any) -> Any:
    """``g = −exp(A_log) · softplus(a + dt_bias) ≤ 0`` (Mamba2 / Gated DeltaNet / KDA; module
    docstring). ``A_log`` and ``dt_bias`` broadcast against ``a`` (e.g. one per head)."""
    names = ("a", "A_log", "dt_bias")
    for name, x in zip(names, (a, A_log, dt_bias), strict=True):
        check_array(name, x, min_ndim=0, backend="torch" if is_torch(a) else "numpy")
    check_one_backend(names, a, A_log, dt_bias)
    check_same_dtype(names, a, A_log, dt_bias)
    _check_broadcast("A_log", A_log, a)
    _check_broadcast("dt_bias", dt_bias, a)
    if is_torch(a):
        import torch

        rate = torch.exp(A_log)
        finite = bool(torch.isfinite(rate).all())
    else:
        with np.errstate(over="ignore"):
            rate = np.exp(A_log)
        finite = bool(np.isfinite(rate).all())
    if not finite:
        raise ValueError("A_log is too large: exp(A_log) overflows the dtype "
                         f"{rate.dtype} (A_log is the log of the decay rate)")
    return -rate * _softplus(a + dt_bias)


def bounded_log_gate(a: Any, *, lower: float) -> Any:
    """``g = lower · σ(a) ∈ (lower, 0)`` with ``lower < 0`` (RWKV-7: ``lower =``
    :data:`RWKV7_LOWER`; KDA's lower-bounded gate; module docstring)."""
    lower = check_scalar("lower", lower, below=0.0)
    check_array("a", a, min_ndim=0)
    return lower * _sigmoid(a)
