"""Nyström approximations in torch: batched, device-generic (the device is the input's).

Same formulas as :mod:`kernel_verify.impls.numpy.nystrom` (docs/math.md §8): landmark Nyström
``K̃ = C W⁺ Cᵀ`` of a Gram matrix with the eigenvalue cutoff ``τ = s·u·λ_max`` (derivation in
:func:`kernel_verify.impls.numpy.nystrom.pinv_cutoff`), batched over leading axes; Nyströmformer
attention with segment-mean landmarks and the iterative pseudo-inverse, ``Z₀ = Aᵀ/(‖A‖₁‖A‖_∞)``
computed per matrix. float16/bfloat16 inputs are computed in float32 and cast back.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from kernel_verify.impls.torch.convert import compute_dtype
from kernel_verify.impls.validation import (
    check_array,
    check_landmarks,
    check_positive_int,
    check_segments,
)

__all__ = [
    "iterative_pinv",
    "nystrom_from_gram",
    "nystromformer_attention",
    "psd_pinv",
    "segment_means",
]


def _eig_factor(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvectors scaled by ``λ^(-1/2)`` for eigenvalues ``> τ`` (others zeroed), batched."""
    sym = 0.5 * (w + w.transpose(-1, -2))
    lam, vec = torch.linalg.eigh(sym)
    u = torch.finfo(w.dtype).eps / 2
    tau = w.shape[-1] * u * lam.amax(dim=-1, keepdim=True).clamp(min=0)
    keep = lam > tau
    inv_root = torch.where(keep, lam.clamp(min=torch.finfo(w.dtype).tiny).rsqrt(), 0)
    return vec, inv_root


def psd_pinv(w: torch.Tensor) -> torch.Tensor:
    """Pseudo-inverse of symmetric PSD matrices ``(..., s, s)`` with the cutoff ``s·u·λ_max``."""
    check_array("W", w, min_ndim=2, backend="torch")
    if w.shape[-1] != w.shape[-2]:
        raise ValueError(f"W must be square in its last two axes, got {tuple(w.shape)}")
    ww = w.to(compute_dtype(w.dtype))
    vec, inv_root = _eig_factor(ww)
    scaled = vec * inv_root.unsqueeze(-2)
    return (scaled @ scaled.transpose(-1, -2)).to(w.dtype)


def _check_landmarks(landmarks: Any, n: int, device: torch.device) -> torch.Tensor:
    if isinstance(landmarks, torch.Tensor):
        landmarks = landmarks.detach().cpu().numpy()
    return torch.as_tensor(check_landmarks(landmarks, n), device=device)


def nystrom_from_gram(K: torch.Tensor, landmarks: Any) -> torch.Tensor:
    """``K̃ = C W⁺ Cᵀ`` for Gram matrices ``K (..., n, n)`` and landmark indices (shared)."""
    check_array("K", K, min_ndim=2, backend="torch")
    if K.shape[-1] != K.shape[-2]:
        raise ValueError(f"K must be square in its last two axes, got {tuple(K.shape)}")
    idx = _check_landmarks(landmarks, K.shape[-1], K.device)
    kw = K.to(compute_dtype(K.dtype))
    c = kw[..., :, idx]
    w = c[..., idx, :]
    vec, inv_root = _eig_factor(w)
    f = (c @ vec) * inv_root.unsqueeze(-2)
    return (f @ f.transpose(-1, -2)).to(K.dtype)


def segment_means(x: torch.Tensor, n_segments: int) -> torch.Tensor:
    """Means of ``n_segments`` contiguous row segments of ``x (..., n, d)`` (array_split sizes)."""
    s = check_segments(x, n_segments, backend="torch")
    sizes = [len(p) for p in np.array_split(np.arange(x.shape[-2]), s)]
    return torch.stack([p.mean(dim=-2) for p in torch.split(x, sizes, dim=-2)], dim=-2)


def iterative_pinv(a: torch.Tensor, n_iter: int) -> torch.Tensor:
    """``Z ≈ A⁺`` by the Nyströmformer iteration; ``Z₀ = Aᵀ/(‖A‖₁‖A‖_∞)`` per matrix."""
    check_array("A", a, min_ndim=2, backend="torch")
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(f"A must be square in its last two axes, got {tuple(a.shape)}")
    n_iter = check_positive_int("n_iter", n_iter, minimum=0)
    aw = a.to(compute_dtype(a.dtype))
    abs_a = aw.abs()
    norm1 = abs_a.sum(dim=-2).amax(dim=-1)
    norm_inf = abs_a.sum(dim=-1).amax(dim=-1)
    z = aw.transpose(-1, -2) / (norm1 * norm_inf)[..., None, None]
    eye = torch.eye(a.shape[-1], dtype=aw.dtype, device=a.device)
    for _ in range(n_iter):
        az = aw @ z
        z = 0.25 * z @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az)))
    return z.to(a.dtype)


def nystromformer_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, n_landmarks: int, *, n_iter: int = 6
) -> torch.Tensor:
    """``sm(Q K̃ᵀ)·Z·(sm(Q̃ Kᵀ) V)`` with ``Q, K`` scaled by ``d^(-1/4)`` (non-causal)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_array(name, t, min_ndim=2, backend="torch")
    if q.shape != k.shape or v.shape[:-1] != k.shape[:-1]:
        raise ValueError(
            f"q, k must match and v share (..., n): got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}"
        )
    if len({q.dtype, k.dtype, v.dtype}) != 1:
        raise TypeError(f"dtypes must match: q={q.dtype}, k={k.dtype}, v={v.dtype}")
    work = compute_dtype(q.dtype)
    scale = q.shape[-1] ** -0.25
    qs, ks, vw = q.to(work) * scale, k.to(work) * scale, v.to(work)
    n_landmarks = check_positive_int("n_landmarks", n_landmarks)
    if n_landmarks > q.shape[-2]:
        raise ValueError(f"n_landmarks (= {n_landmarks}) must be <= n (= {q.shape[-2]})")
    ql, kl = segment_means(qs, n_landmarks), segment_means(ks, n_landmarks)
    f = torch.softmax(qs @ kl.transpose(-1, -2), dim=-1)
    a = torch.softmax(ql @ kl.transpose(-1, -2), dim=-1)
    b = torch.softmax(ql @ ks.transpose(-1, -2), dim=-1)
    return (f @ (iterative_pinv(a, n_iter) @ (b @ vw))).to(q.dtype)
