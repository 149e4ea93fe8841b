"""Low-rank references in NumPy: the truncated SVD (optimal rank r) and Linformer-style projected
attention (docs/math.md §8).

* :func:`truncated_svd`: ``K_r = U_r Σ_r V_rᵀ``; by Eckart–Young ``‖K − K_r‖₂ = σ_(r+1)``, the
  smallest 2-norm error of any rank-r matrix: the reference every low-rank approximation (e.g.
  Nyström with r landmarks) is measured against.
* :func:`linformer_attention`: ``softmax(Q (E K)ᵀ/√d) (F V)`` with given projections
  ``E, F (r, n)`` (Wang et al. 2020), i.e. attention over r projected keys/values.
* :data:`LOW_RANK` names rank-r approximations of a PSD Gram matrix ``(K, r, rng) -> K̃`` so
  reports can iterate over them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kernel_verify.impls.attention_checks import check_linformer_inputs
from kernel_verify.impls.numpy.nystrom import choose_landmarks, nystrom_from_gram
from kernel_verify.impls.validation import check_array, check_positive_int

__all__ = ["LOW_RANK", "linformer_attention", "truncated_svd"]


def truncated_svd(K: np.ndarray, rank: int) -> np.ndarray:
    """The best rank-``rank`` approximation ``U_r Σ_r V_rᵀ`` of K (m, n) (Eckart–Young)."""
    check_array("K", K, min_ndim=2, backend="numpy")
    if K.ndim != 2:
        raise ValueError(f"K must be a matrix, got shape {K.shape}")
    r = check_positive_int("rank", rank)
    if r > min(K.shape):
        raise ValueError(f"rank (= {r}) must be <= min(K.shape) = {min(K.shape)}")
    u, s, vt = np.linalg.svd(K, full_matrices=False)
    return (u[:, :r] * s[:r]) @ vt[:r]


def _softmax_rows(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def linformer_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    e_proj: np.ndarray,
    f_proj: np.ndarray,
    *,
    scale: float | None = None,
) -> np.ndarray:
    """``softmax(Q (E K)ᵀ·scale)(F V)``, ``scale = 1/√d`` by default; ``E, F`` of shape (r, n)
    shared over the leading (batch/head) axes."""
    scale = check_linformer_inputs(q, k, v, e_proj, f_proj, scale, backend="numpy")
    s = q.dtype.type(1.0 / np.sqrt(q.shape[-1]) if scale is None else scale)
    kp = e_proj.astype(q.dtype) @ k
    vp = f_proj.astype(q.dtype) @ v
    return _softmax_rows((q @ np.swapaxes(kp, -1, -2)) * s) @ vp


def _nystrom_uniform(K: np.ndarray, rank: int, rng: np.random.Generator) -> np.ndarray:
    return nystrom_from_gram(K, choose_landmarks(K.shape[0], rank, rule="uniform", rng=rng))


#: Rank-r approximations of a PSD Gram matrix: ``(K, r, rng) -> K̃``.
LOW_RANK: dict[str, Callable[[np.ndarray, int, np.random.Generator], np.ndarray]] = {
    "truncated_svd": lambda K, rank, rng: truncated_svd(K, rank),
    "nystrom_uniform": _nystrom_uniform,
}
