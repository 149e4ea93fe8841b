"""Nyström approximations in NumPy: landmark Nyström of a kernel Gram matrix, and Nyströmformer
attention (docs/math.md §8). Not feature maps: they have their own small API here.

Landmark Nyström
----------------
``K̃ = C W⁺ Cᵀ`` with ``C = K[:, S]``, ``W = K[S, S]`` for landmark indices S. ``W⁺`` is the
pseudo-inverse of the (PSD) landmark block computed from its eigendecomposition with the cutoff
of :func:`psd_pinv`; ``K̃`` is formed as ``F Fᵀ``, ``F = C V Λ⁺^(1/2)`` so it is symmetric PSD by
construction. The kernel is a name of :data:`GRAM_KERNELS` (float64 closed forms of exact
kernels), a registry entry with the ``exact_finite`` claim (Gram ``φ(X)φ(Y)ᵀ``), or any callable
``(X, Y) -> Gram``. Landmarks are supplied as indices or chosen by a seeded rule of
:data:`LANDMARK_RULES`.

Nyströmformer (Xiong et al. 2021)
---------------------------------
``Q, K`` scaled by ``d^(-1/4)``; landmarks ``Q̃, K̃`` are the means of ``s`` contiguous segments
of the rows (``numpy.array_split`` sizes when ``s`` does not divide ``n``);
``out = sm(Q K̃ᵀ)·Z·(sm(Q̃ Kᵀ) V)`` with ``Z ≈ A⁺``, ``A = sm(Q̃ K̃ᵀ)``, from
:func:`iterative_pinv`: ``Z₀ = Aᵀ/(‖A‖₁‖A‖_∞)`` computed **per matrix** (the norms are taken
over the last two axes of each batch element, never across the batch — the reference code's
batch-wide maximum couples batch elements), then
``Z_(j+1) = ¼ Z_j(13I − A Z_j(15I − A Z_j(7I − A Z_j)))``; the residual ``E = I − AZ`` obeys
``E_(j+1) = ¼E_j³(3I + E_j)`` (expand ``X = I − E`` in ``¼X(13 − 15X + 7X² − X³)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernel_verify.impls.registry import FeatureMap
from kernel_verify.impls.validation import (
    check_array,
    check_landmarks,
    check_positive_int,
    check_scalar,
    check_segments,
)

__all__ = [
    "GRAM_KERNELS",
    "LANDMARK_RULES",
    "choose_landmarks",
    "iterative_pinv",
    "kernel_gram",
    "nystrom",
    "nystrom_from_gram",
    "nystromformer_attention",
    "pinv_cutoff",
    "psd_pinv",
    "segment_means",
]


# ------------------------------------------------------------------------ exact float kernels
def _gaussian(x: np.ndarray, y: np.ndarray, sigma: float = 1.0) -> np.ndarray:
    sigma = check_scalar("sigma", sigma, positive=True)
    sq = np.sum(x * x, -1)[:, None] + np.sum(y * y, -1)[None, :] - 2 * x @ y.T
    return np.exp(-np.maximum(sq, 0) / (2 * sigma**2))


def _softmax(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.exp(x @ y.T)


def _linear(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return x @ y.T


def _cosine(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    def unit(a: np.ndarray) -> np.ndarray:
        norm = np.linalg.norm(a, axis=-1, keepdims=True)
        return np.where(norm > 0, a / np.where(norm > 0, norm, 1), 0)

    return unit(x) @ unit(y).T


def _polynomial(x: np.ndarray, y: np.ndarray, c: float = 1.0, p: int = 2) -> np.ndarray:
    c = check_scalar("c", c, nonnegative=True)
    p = check_positive_int("p", p, minimum=0)
    return (x @ y.T + c) ** p


def _taylor(x: np.ndarray, y: np.ndarray, order: int = 2, scale: float | None = None
            ) -> np.ndarray:
    order = check_positive_int("order", order, minimum=0)
    s = 1 / np.sqrt(x.shape[-1]) if scale is None else check_scalar("scale", scale, positive=True)
    t = x @ y.T * s
    out = np.zeros_like(t)
    term = np.ones_like(t)
    for k in range(order + 1):
        out += term
        term = term * t / (k + 1)
    return out


#: Float64 closed forms of exact PSD kernels ``(X (n, d), Y (p, d), **params) -> (n, p)``.
GRAM_KERNELS: dict[str, Callable[..., np.ndarray]] = {
    "gaussian": _gaussian,
    "softmax": _softmax,
    "linear": _linear,
    "cosine": _cosine,
    "polynomial": _polynomial,
    "taylor": _taylor,
}


def kernel_gram(kernel: Any, X: np.ndarray, Y: np.ndarray, **kernel_params: Any) -> np.ndarray:
    """Gram matrix of ``kernel`` (a :data:`GRAM_KERNELS` name, an ``exact_finite`` registry entry,
    or a callable ``(X, Y) -> Gram``) between the rows of X and Y."""
    check_array("X", X, min_ndim=2, backend="numpy")
    check_array("Y", Y, min_ndim=2, backend="numpy")
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y must be (n, d) and (p, d), got {X.shape} and {Y.shape}")
    if isinstance(kernel, str):
        if kernel not in GRAM_KERNELS:
            raise ValueError(f"kernel must be one of {sorted(GRAM_KERNELS)}, got {kernel!r}")
        return GRAM_KERNELS[kernel](X, Y, **kernel_params)
    if isinstance(kernel, FeatureMap):
        if not kernel.has("exact_finite") or kernel.has("positional"):
            raise ValueError(
                f"registry entry {kernel.name!r} is not an exact finite (non-positional) map"
            )
        params = kernel.draw(np.random.default_rng(0), X.shape[1], 1, kernel.config)
        fx = kernel.numpy_fn(X, params, kernel.config)
        fy = kernel.numpy_fn(Y, params, kernel.config)
        return fx @ fy.T
    if callable(kernel):
        return np.asarray(kernel(X, Y, **kernel_params))
    raise TypeError(
        f"kernel must be a name, a FeatureMap or a callable, got {type(kernel).__name__}"
    )


# ------------------------------------------------------------------------------ landmarks
def _uniform(rng: np.random.Generator, n: int, s: int) -> np.ndarray:
    return np.sort(rng.choice(n, size=s, replace=False))


def _first(rng: np.random.Generator | None, n: int, s: int) -> np.ndarray:
    return np.arange(s)


def _strided(rng: np.random.Generator | None, n: int, s: int) -> np.ndarray:
    return np.unique(np.floor(np.arange(s) * (n / s)).astype(np.intp))


#: Seeded landmark rules ``(rng, n, s) -> sorted distinct indices``: ``uniform`` (s of n without
#: replacement; needs ``rng``), ``first`` (0..s−1), ``strided`` (``⌊i·n/s⌋``).
LANDMARK_RULES: dict[str, Callable[..., np.ndarray]] = {
    "uniform": _uniform,
    "first": _first,
    "strided": _strided,
}


def choose_landmarks(
    n: int, n_landmarks: int, *, rule: str = "uniform", rng: np.random.Generator | None = None
) -> np.ndarray:
    """``n_landmarks`` distinct sorted indices in ``[0, n)`` by ``rule`` (``uniform`` needs an
    explicit, seeded ``rng``)."""
    n = check_positive_int("n", n)
    s = check_positive_int("n_landmarks", n_landmarks)
    if s > n:
        raise ValueError(f"n_landmarks (= {s}) must be <= n (= {n})")
    if rule not in LANDMARK_RULES:
        raise ValueError(f"rule must be one of {sorted(LANDMARK_RULES)}, got {rule!r}")
    if rule == "uniform" and not isinstance(rng, np.random.Generator):
        raise TypeError("the 'uniform' landmark rule needs rng=numpy.random.Generator")
    return LANDMARK_RULES[rule](rng, n, s)


# --------------------------------------------------------------------- stable pseudo-inverse
def pinv_cutoff(eigenvalues: np.ndarray, dtype: Any = np.float64) -> float:
    """Eigenvalues of the s×s PSD block below ``τ = s·u·λ_max`` are treated as 0.

    Why: the entries of W are kernel values, each computed with a relative error of a few u,
    so ``W_computed = W + E`` with ``|E_ij| ≲ c·u·|W_ij| ≤ c·u·λ_max`` (``|W_ij| ≤ λ_max`` for PSD
    W), hence ``‖E‖₂ ≤ ‖E‖_F ≤ s·c·u·λ_max``; and a backward-stable symmetric eigensolver returns
    the exact eigenvalues of ``W + E'`` with ``‖E'‖₂ = O(u)·λ_max``. By Weyl's inequality each
    computed eigenvalue is then within ``~s·u·λ_max`` of the exact one: an eigenvalue below
    ``τ`` is indistinguishable from 0 (or from a rounded negative), and inverting it would
    amplify that noise by up to ``1/τ``."""
    lam_max = float(np.max(eigenvalues)) if eigenvalues.size else 0.0
    u = np.finfo(dtype).eps / 2
    return eigenvalues.shape[-1] * u * max(lam_max, 0.0)


def _eig_factor(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(V_kept, λ_kept)`` of symmetric ``w`` with eigenvalues ``> τ`` (:func:`pinv_cutoff`)."""
    sym = 0.5 * (w + w.T)
    lam, vec = np.linalg.eigh(sym)
    keep = lam > pinv_cutoff(lam, w.dtype)
    return vec[:, keep], lam[keep]


def psd_pinv(w: np.ndarray) -> np.ndarray:
    """Pseudo-inverse of a symmetric PSD matrix with the cutoff of :func:`pinv_cutoff`."""
    check_array("W", w, min_ndim=2, backend="numpy")
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        raise ValueError(f"W must be square (s, s), got {w.shape}")
    vec, lam = _eig_factor(w)
    return (vec / lam) @ vec.T


# --------------------------------------------------------------------------------- Nyström
def nystrom_from_gram(K: np.ndarray, landmarks: Any) -> np.ndarray:
    """``K̃ = C W⁺ Cᵀ`` from a full PSD Gram matrix K (n, n) and landmark indices."""
    check_array("K", K, min_ndim=2, backend="numpy")
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be square (n, n), got {K.shape}")
    idx = check_landmarks(landmarks, K.shape[0])
    return _nystrom(K[:, idx], K[np.ix_(idx, idx)])


def _nystrom(c: np.ndarray, w: np.ndarray) -> np.ndarray:
    vec, lam = _eig_factor(w)
    f = (c @ vec) / np.sqrt(lam)
    return f @ f.T


def nystrom(
    kernel: Any,
    X: np.ndarray,
    landmarks: Any,
    *,
    rule: str = "uniform",
    rng: np.random.Generator | None = None,
    **kernel_params: Any,
) -> np.ndarray:
    """Landmark Nyström ``K̃ = C W⁺ Cᵀ`` of ``kernel`` on the rows of X (n, d).

    ``landmarks`` is an index array, or an int s (then chosen by ``rule`` with ``rng``)."""
    check_array("X", X, min_ndim=2, backend="numpy")
    if X.ndim != 2:
        raise ValueError(f"X must be (n, d), got shape {X.shape}")
    if isinstance(landmarks, int | np.integer) and not isinstance(landmarks, bool):
        idx = choose_landmarks(X.shape[0], int(landmarks), rule=rule, rng=rng)
    else:
        idx = check_landmarks(landmarks, X.shape[0])
    c = kernel_gram(kernel, X, X[idx], **kernel_params)
    w = kernel_gram(kernel, X[idx], X[idx], **kernel_params)
    return _nystrom(c, w)


# --------------------------------------------------------------------------- Nyströmformer
def segment_means(x: np.ndarray, n_segments: int) -> np.ndarray:
    """Means of ``n_segments`` contiguous row segments of ``x (..., n, d)`` → ``(..., s, d)``."""
    s = check_segments(x, n_segments, backend="numpy")
    parts = np.array_split(np.arange(x.shape[-2]), s)
    return np.stack([x[..., p, :].mean(axis=-2) for p in parts], axis=-2)


def iterative_pinv(a: np.ndarray, n_iter: int) -> np.ndarray:
    """``Z ≈ A⁺`` by the Nyströmformer iteration (module docstring), batched over leading axes;
    ``Z₀ = Aᵀ/(‖A‖₁‖A‖_∞)`` per matrix. ``n_iter = 0`` returns ``Z₀``."""
    check_array("A", a, min_ndim=2, backend="numpy")
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(f"A must be square in its last two axes, got {a.shape}")
    n_iter = check_positive_int("n_iter", n_iter, minimum=0)
    abs_a = np.abs(a)
    norm1 = abs_a.sum(axis=-2).max(axis=-1)  # max column sum, per matrix
    norm_inf = abs_a.sum(axis=-1).max(axis=-1)  # max row sum, per matrix
    z = np.swapaxes(a, -1, -2) / (norm1 * norm_inf)[..., None, None]
    eye = np.eye(a.shape[-1], dtype=a.dtype)
    for _ in range(n_iter):
        az = a @ z
        z = 0.25 * z @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az)))
    return z


def _softmax_rows(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def nystromformer_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, n_landmarks: int, *, n_iter: int = 6
) -> np.ndarray:
    """Nyströmformer attention ``sm(Q K̃ᵀ)·Z·(sm(Q̃ Kᵀ) V)`` (module docstring; non-causal).

    ``q, k (..., n, d)``, ``v (..., n, d_v)``; with ``n_landmarks = n`` and ``n_iter → ∞`` it
    tends to exact softmax attention ``softmax(qkᵀ/√d) v`` when A is invertible."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_array(name, t, min_ndim=2, backend="numpy")
    if q.shape != k.shape or v.shape[:-1] != k.shape[:-1]:
        raise ValueError(
            f"q, k must match and v share (..., n): got {q.shape}, {k.shape}, {v.shape}"
        )
    if len({q.dtype, k.dtype, v.dtype}) != 1:
        raise TypeError(f"dtypes must match: q={q.dtype}, k={k.dtype}, v={v.dtype}")
    scale = q.dtype.type(q.shape[-1] ** -0.25)
    qs, ks = q * scale, k * scale
    n_landmarks = check_positive_int("n_landmarks", n_landmarks)
    if n_landmarks > q.shape[-2]:
        raise ValueError(f"n_landmarks (= {n_landmarks}) must be <= n (= {q.shape[-2]})")
    ql, kl = segment_means(qs, n_landmarks), segment_means(ks, n_landmarks)
    f = _softmax_rows(qs @ np.swapaxes(kl, -1, -2))
    a = _softmax_rows(ql @ np.swapaxes(kl, -1, -2))
    b = _softmax_rows(ql @ np.swapaxes(ks, -1, -2))
    return f @ (iterative_pinv(a, n_iter) @ (b @ v))
