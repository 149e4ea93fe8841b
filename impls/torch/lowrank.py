"""Low-rank references in torch: truncated SVD and Linformer-style projected attention.

Same formulas as :mod:`kernel_verify.impls.numpy.lowrank` (docs/math.md §8), batched over leading
axes and device-generic; float16/bfloat16 computed in float32 and cast back.
"""

from __future__ import annotations

import math

import torch

from kernel_verify.impls.attention_checks import check_linformer_inputs
from kernel_verify.impls.torch.convert import compute_dtype
from kernel_verify.impls.validation import check_array, check_positive_int

__all__ = ["linformer_attention", "truncated_svd"]


def truncated_svd(K: torch.Tensor, rank: int) -> torch.Tensor:
    """The best rank-``rank`` approximation of each matrix ``K (..., m, n)`` (Eckart–Young)."""
    check_array("K", K, min_ndim=2, backend="torch")
    r = check_positive_int("rank", rank)
    if r > min(K.shape[-2:]):
        raise ValueError(f"rank (= {r}) must be <= min(K.shape[-2:]) = {min(K.shape[-2:])}")
    u, s, vh = torch.linalg.svd(K.to(compute_dtype(K.dtype)), full_matrices=False)
    return ((u[..., :r] * s[..., None, :r]) @ vh[..., :r, :]).to(K.dtype)


def linformer_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    e_proj: torch.Tensor,
    f_proj: torch.Tensor,
    *,
    scale: float | None = None,
) -> torch.Tensor:
    """``softmax(Q (E K)ᵀ·scale)(F V)``; ``E, F (r, n)`` shared over the leading axes."""
    scale = check_linformer_inputs(q, k, v, e_proj, f_proj, scale, backend="torch")
    work = compute_dtype(q.dtype)
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    kp = e_proj.to(device=q.device, dtype=work) @ k.to(work)
    vp = f_proj.to(device=q.device, dtype=work) @ v.to(work)
    out = torch.softmax((q.to(work) @ kp.transpose(-1, -2)) * s, dim=-1) @ vp
    return out.to(q.dtype)
