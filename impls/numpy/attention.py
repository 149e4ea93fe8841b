"""Exact softmax attention and linear (kernelised) attention in plain NumPy.

Shapes: ``q (..., n, d)``, ``k (..., n_k, d)``, ``v (..., n_k, d_v)``; features ``(..., n, m)``.
docs/math.md §9.

* :func:`softmax_attention`: ``softmax(q kᵀ·scale) v`` (scale ``1/√d`` by default), causal or not.
* :func:`linear_attention`: ``out_i = φ(q_i)ᵀ Σ_j φ(k_j) v_jᵀ / φ(q_i)ᵀ Σ_j φ(k_j)`` with j over all
  keys (non-causal) or ``j ≤ i`` (causal). The causal path runs over chunks of ``chunk_size`` rows:
  the prefix state ``S = Σ φ(k_j) v_jᵀ`` (m × d_v) and ``z = Σ φ(k_j)`` is carried from chunk to
  chunk and the inside of a chunk is a masked product, so memory is ``O(n(m + d_v))`` plus one
  chunk — never an ``n × m × d_v`` tensor.
* :func:`log_linear_attention`: the same estimator from log-features of positive maps, computed
  stably (derivation in its docstring): no shift is ever added to or
  subtracted from features in a way that fails to cancel, nothing is added after a shift, and in
  causal mode position i only ever sees keys ``j ≤ i``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from kernel_verify.impls.attention_checks import (
    SCORE_REMEDY,
    check_attention_inputs,
    check_scale,
    denominator_guard,
)
from kernel_verify.impls.validation import check_finite_result, check_positive_int


def _softmax_rows(scores: np.ndarray) -> np.ndarray:
    shifted = scores - np.max(scores, axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    causal: bool = False,
    scale: float | None = None,
) -> np.ndarray:
    """Exact ``softmax(q kᵀ·scale + mask) v``; ``scale = 1/√d`` by default (Vaswani et al. 2017)."""
    check_attention_inputs(q, k, v, causal=causal, names=("q", "k", "v"), backend="numpy")
    scale = check_scale(scale)
    n, d = q.shape[-2], q.shape[-1]
    out_shape = (*q.shape[:-1], v.shape[-1])
    if n == 0 or k.shape[-2] == 0:
        return np.zeros(out_shape, dtype=q.dtype)
    s = q.dtype.type(1.0 / np.sqrt(d) if scale is None else scale)
    with np.errstate(over="ignore", invalid="ignore"):
        scores = (q @ np.swapaxes(k, -1, -2)) * s
    check_finite_result("softmax_attention scores q·kᵀ·scale", scores, SCORE_REMEDY)
    if causal:
        future = np.triu(np.ones((n, n), dtype=bool), k=1)
        scores = np.where(future, -np.inf, scores)
    return _softmax_rows(scores) @ v


def linear_attention(
    phi_q: np.ndarray,
    phi_k: np.ndarray,
    v: np.ndarray,
    *,
    causal: bool = False,
    chunk_size: int = 64,
    zero_denominator: str = "raise",
) -> np.ndarray:
    """Kernelised attention from features (docs/math.md §9); see the module docstring.

    ``zero_denominator`` decides what happens to rows whose denominator ``φ(q_i)ᵀΣφ(k_j)`` is not
    > 0: ``"raise"`` (default) raises ``ValueError``; ``"zero"`` returns 0 for rows whose
    denominator is exactly 0 (numerator then 0 too: nonnegative maps such as ReLU) and raises for
    negative ones; ``"allow"`` divides whatever the sign (only for checking identities of signed
    maps, e.g. trigonometric features; a zero denominator still raises).
    """
    check_attention_inputs(phi_q, phi_k, v, causal=causal, names=("phi_q", "phi_k", "v"),
                           backend="numpy")
    chunk_size = check_positive_int("chunk_size", chunk_size)
    if causal:
        num, den = _causal_sums(phi_q, phi_k, v, chunk_size)
    else:
        num = phi_q @ (np.swapaxes(phi_k, -1, -2) @ v)
        den = phi_q @ np.sum(phi_k, axis=-2)[..., None]
    safe_den = denominator_guard(den, zero_denominator)
    return num / safe_den


def _causal_sums(
    phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray, chunk: int
) -> tuple[np.ndarray, np.ndarray]:
    """Numerators ``φ(q_i)ᵀS_i`` and denominators ``φ(q_i)ᵀz_i`` by chunked prefix sums."""
    n, m, dv = phi_q.shape[-2], phi_q.shape[-1], v.shape[-1]
    lead = phi_q.shape[:-2]
    state = np.zeros((*lead, m, dv), dtype=phi_q.dtype)
    z = np.zeros((*lead, m, 1), dtype=phi_q.dtype)
    num = np.zeros((*lead, n, dv), dtype=phi_q.dtype)
    den = np.zeros((*lead, n, 1), dtype=phi_q.dtype)
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        fq, fk, vc = phi_q[..., start:stop, :], phi_k[..., start:stop, :], v[..., start:stop, :]
        within = np.tril(fq @ np.swapaxes(fk, -1, -2))  # j ≤ i inside the chunk
        num[..., start:stop, :] = fq @ state + within @ vc
        den[..., start:stop, :] = fq @ z + np.sum(within, axis=-1, keepdims=True)
        state = state + np.swapaxes(fk, -1, -2) @ vc
        z = z + np.sum(fk, axis=-2)[..., None]
    return num, den


def log_linear_attention(
    log_phi_q: np.ndarray,
    log_phi_k: np.ndarray,
    v: np.ndarray,
    *,
    causal: bool = False,
    chunk_size: int = 64,
) -> np.ndarray:
    """Linear attention with positive features given as logs, evaluated stably.

    Equals :func:`linear_attention` with ``φ = exp(log φ)`` in exact arithmetic. Non-causal:
    ``L_f = logsumexp_j log φ(k_j)_f``, ``V̄_f = Σ_j softmax_j(log φ(k_·)_f) v_j`` and
    ``out_i = Σ_f softmax_f(log φ(q_i)_f + L_f) V̄_f``. Causal: chunked prefix sums of
    exponentials shifted by the running per-feature key maximum, every one ≤ 1, with an exact
    log-space recomputation of any row whose denominator underflows (:func:`_causal_log`).
    """
    check_attention_inputs(log_phi_q, log_phi_k, v, causal=causal,
                           names=("log_phi_q", "log_phi_k", "v"), backend="numpy")
    chunk_size = check_positive_int("chunk_size", chunk_size)
    out_shape = (*log_phi_q.shape[:-1], v.shape[-1])
    if log_phi_q.shape[-2] == 0 or log_phi_k.shape[-2] == 0:
        return np.zeros(out_shape, dtype=v.dtype)
    if not causal:
        log_norm = logsumexp(log_phi_k, axis=-2)  # (..., m)
        key_weights = np.exp(log_phi_k - log_norm[..., None, :])  # softmax over keys, per feature
        v_bar = np.swapaxes(key_weights, -1, -2) @ v  # (..., m, d_v)
        query_weights = _softmax_rows(log_phi_q + log_norm[..., None, :])
        return query_weights @ v_bar
    return _causal_log(log_phi_q, log_phi_k, v, chunk_size)


def _pair_log_weights(lq: np.ndarray, lk: np.ndarray) -> np.ndarray:
    """``logsumexp_f(lq_if + lk_jf)`` for every pair (i, j), as a matrix product.

    With row maxima ``a_i = max_f lq_if`` and ``b_j = max_f lk_jf``, the value is
    ``a_i + b_j + log P_ij``, ``P = exp(lq − a) exp(lk − b)ᵀ``: every factor is ≤ 1, and the sum
    of m positive terms has relative error ≤ γ_m. Terms that underflow carry an absolute error
    ≤ tiny·u each (gradual underflow), so P is accurate to relative u as long as
    ``P ≥ 8·m·tiny``; the rare pairs below that (the maxima of query and key sit on different
    features and everything else underflows) are recomputed with the exact log-sum-exp.
    """
    a = np.max(lq, axis=-1, keepdims=True)
    b = np.max(lk, axis=-1, keepdims=True)
    prod = np.exp(lq - a) @ np.swapaxes(np.exp(lk - b), -1, -2)
    with np.errstate(divide="ignore"):
        pair = a + np.swapaxes(b, -1, -2) + np.log(prod)
    bad = prod < 8 * lq.shape[-1] * np.finfo(lq.dtype).tiny
    if bad.any():
        *lead, i, j = np.nonzero(bad)
        pair[bad] = logsumexp(lq[(*lead, i)] + lk[(*lead, j)], axis=-1)
    return pair


def _causal_log(lq: np.ndarray, lk: np.ndarray, v: np.ndarray, chunk: int) -> np.ndarray:
    """Chunked linear attention on shifted exponentials, each ≤ 1 and taken once per entry.

    Chunk c (rows ``R_c``) uses the per-feature running key maximum
    ``N_f = max_{j ≤ max R_c} lk_jf``, key weights ``E_jf = e^(lk_jf − N_f)``, query weights
    ``Q_if = e^(lq_if + N_f − a_i)`` with ``a_i = max_f(lq_if + N_f)``, and
    ``[num_i den_i] = Q_i·S + Σ_{j ∈ R_c, j ≤ i} (Q_i·E_j)[v_j 1]``; the past state
    ``S_f = Σ_{j < min R_c} e^(lk_jf − N_f)[v_j 1]`` is carried as
    ``S ← (S + E_cᵀ[V_c 1])·e^(N_f − N'_f)`` (N nondecreasing: factors ≤ 1). The shifts cancel
    in ``num_i/den_i``. Rows whose denominator is below ``3m(n + 1)·tiny/u`` (underflow) are
    recomputed exactly. The same algorithm as, and the rounding and underflow analysis in,
    :func:`kernel_verify.impls.torch.attention._causal_log`.
    """
    n, m, dv = lq.shape[-2], lq.shape[-1], v.shape[-1]
    lead = lq.shape[:-2]
    v1 = np.concatenate([v, np.ones((*lead, n, 1), dtype=v.dtype)], axis=-1)
    state = np.zeros((*lead, m, dv + 1), dtype=lq.dtype)
    run_max = None
    num_den = np.empty((*lead, n, dv + 1), dtype=lq.dtype)
    with np.errstate(under="ignore"):
        for start in range(0, n, chunk):
            stop = min(start + chunk, n)
            q_c, k_c, v1_c = lq[..., start:stop, :], lk[..., start:stop, :], v1[..., start:stop, :]
            top = np.max(k_c, axis=-2, keepdims=True)  # (..., 1, m)
            if run_max is not None:
                top = np.maximum(run_max, top)
                state = state * np.swapaxes(np.exp(run_max - top), -1, -2)
            e_k = np.exp(k_c - top)
            t = q_c + top
            e_q = np.exp(t - np.max(t, axis=-1, keepdims=True))
            nd = np.tril(e_q @ np.swapaxes(e_k, -1, -2)) @ v1_c
            if run_max is not None:
                nd = nd + e_q @ state
            num_den[..., start:stop, :] = nd
            state = state + np.swapaxes(e_k, -1, -2) @ v1_c
            run_max = top
    num, den = num_den[..., :-1], num_den[..., -1:]
    info = np.finfo(lq.dtype)
    bad = den < 3 * m * (n + 1) * info.tiny / (info.eps / 2)
    out = num / np.where(bad, 1.0, den)
    if bad.any():
        j = np.arange(n)
        for idx in zip(*np.nonzero(bad[..., 0]), strict=True):
            *b, i = idx
            pair = logsumexp(lq[(*b, i)][None, :] + lk[tuple(b)], axis=-1)  # (n,)
            pair = np.where(j > i, -np.inf, pair)
            out[(*b, i)] = _softmax_rows(pair) @ v[tuple(b)]
    return out


__all__ = ["linear_attention", "log_linear_attention", "softmax_attention"]
