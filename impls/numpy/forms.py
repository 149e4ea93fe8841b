"""The forms of causal linear attention with an explicit state, in NumPy (docs/math.md §13).

Shapes: features ``(..., T, m)``, values ``(..., T, d_v)``; one token ``(..., m)``/``(..., d_v)``.
Every form takes an initial state (None: empty) and returns ``(out, final_state)``; the final
state after ``T`` tokens is the state after the last token, whatever ``T`` and the chunk size.

**Plain state** ``(S, z)``: ``S = Σ_j φ(k_j) v_jᵀ (..., m, d_v)``, ``z = Σ_j φ(k_j) (..., m)``.

* recurrent :func:`linear_attention_step`: ``S_t = S_(t−1) + φ(k_t)v_tᵀ``,
  ``z_t = z_(t−1) + φ(k_t)``, ``o_t = φ(q_t)ᵀS_t / φ(q_t)ᵀz_t``;
* chunked :func:`linear_attention_chunked`, chunk size C, chunk c = rows ``[cC, cC + C)``:
  ``O_c = (φ(Q_c)S_(c−1) + tril(φ(Q_c)φ(K_c)ᵀ)V_c) / (φ(Q_c)z_(c−1) + tril(φ(Q_c)φ(K_c)ᵀ)1)``.
  Chunk-parallel: the per-chunk sums ``φ(K_c)ᵀV_c`` and ``φ(K_c)ᵀ1`` come from one batched
  product, the states before every chunk from one cumulative sum over
  ``[S_0, φ(K_0)ᵀV_0, φ(K_1)ᵀV_1, …]`` (its last entry is the final state), and the inside of
  every chunk is one batched masked product — no Python loop over chunks. The tail chunk is
  padded with zero *features* (which add nothing to any sum), never with zero inputs (``φ(0) ≠ 0``
  for positive and Taylor maps); padded rows are dropped;
* parallel :func:`linear_attention_parallel`: the chunked form with one chunk of ``T``.

**Log-space state** ``(L, V̄)`` of positive features (the two-softmax form, README "Stable
positive features"): ``L_f = logsumexp_j log φ(k_j)_f``, ``V̄_f = Σ_j softmax_j(log φ(k_·)_f)v_j``.
Two states merge exactly and associatively (:func:`merge_log_states`):
``L = logaddexp(L¹, L²)``, ``V̄ = e^(L¹−L)V̄¹ + e^(L²−L)V̄²`` — both weights ≤ 1, nothing added,
nothing to cancel. Query i with past state ``(L, V̄)`` and in-chunk keys ``j ≤ i``:
``o_i = softmax over {past, j ≤ i} of [logsumexp_f(lq_if + L_f), logsumexp_f(lq_if + lk_jf)]``
applied to ``[Σ_f softmax_f(lq_if + L_f)V̄_f, v_j]``. The chunked form takes the states before
every chunk from a parallel (Hillis–Steele) scan of the merge over
``[initial, chunk 0, chunk 1, …]``: ⌈log₂(T/C + 1)⌉ vectorised merge steps, no loop over chunks.
An empty feature has ``L_f = −∞`` and ``V̄_f = 0``.

**Packed sequences**: the chunked and parallel forms take ``cu_seqlens`` (N + 1 boundaries
``0 = c_0 ≤ … ≤ c_N = T``, inputs in a batch of one, ``initial_state`` one state per sequence
along the batch axis): each sequence runs from its own state, and the final states come back
stacked ``(N, …)`` (:func:`kernel_verify.impls.packed.run_packed`; the rules are those of
:mod:`kernel_verify.impls.sequence_validation`). Inputs with a leading axis of size 0 are refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import logsumexp

from kernel_verify.impls.attention_checks import denominator_guard
from kernel_verify.impls.forms_checks import (
    check_chunk_size,
    check_form_arrays,
    check_state,
    check_step_inputs,
)
from kernel_verify.impls.packed import run_packed
from kernel_verify.impls.sequence_validation import check_nonempty_lead

State = tuple[np.ndarray, np.ndarray]


# ----------------------------------------------------------------------------- plain state
def empty_state(lead: tuple[int, ...], m: int, dv: int, dtype: Any = np.float64, *,
                log: bool = False) -> State:
    """The state before any token: ``(S, z) = (0, 0)``, or ``(L, V̄) = (−∞, 0)`` for ``log``."""
    if log:
        return np.full((*lead, m), -np.inf, dtype=dtype), np.zeros((*lead, m, dv), dtype=dtype)
    return np.zeros((*lead, m, dv), dtype=dtype), np.zeros((*lead, m), dtype=dtype)


def _inputs(arrays: tuple[Any, Any, Any], initial_state: Any, *, log: bool) -> State:
    """The arrays checked, and their starting state in their dtype: ``initial_state`` validated,
    or the empty state (``(S, z)``, or ``(L, V̄)`` for ``log``)."""
    check_form_arrays(arrays, log=log, backend="numpy")
    features, v = arrays[0], arrays[2]
    lead, m, dv = features.shape[:-2], features.shape[-1], v.shape[-1]
    state = check_state(initial_state, lead=lead, m=m, dv=dv, log=log, backend="numpy",
                        like=features)
    if state is None:
        state = empty_state(lead, m, dv, features.dtype, log=log)
    return tuple(s.astype(features.dtype, copy=False) for s in state)


def _packed(form, arrays, initial_state, cu_seqlens, *, log: bool = False, **kw):
    """``form`` on each packed sequence (:func:`kernel_verify.impls.packed.run_packed`), after
    the checks of the arrays themselves."""
    names = check_form_arrays(arrays, log=log, backend="numpy")
    return run_packed(lambda a, b, c, s: form(a, b, c, initial_state=s, **kw), arrays, names,
                      cu_seqlens=cu_seqlens, initial_state=initial_state)


def _pad_chunks(x: np.ndarray, chunk: int, fill: float = 0.0) -> np.ndarray:
    """``x (..., T, f)`` padded along T to a multiple of ``chunk`` and reshaped to
    ``(..., T/C, C, f)``."""
    n = x.shape[-2]
    nc = -(-n // chunk)
    pad = nc * chunk - n
    if pad:
        widths = [(0, 0)] * (x.ndim - 2) + [(0, pad), (0, 0)]
        x = np.pad(x, widths, constant_values=fill)
    return x.reshape(*x.shape[:-2], nc, chunk, x.shape[-1])


def plain_chunked_sums(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray, chunk: int,
                       s0: np.ndarray, z0: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, State]:
    """Numerators ``(..., T, d_v)``, denominators ``(..., T, 1)`` and the final state of the
    chunk-parallel form (module docstring) on validated inputs."""
    n, dv = phi_q.shape[-2], v.shape[-1]
    if n == 0:
        return (np.zeros((*phi_q.shape[:-1], dv), phi_q.dtype),
                np.ones((*phi_q.shape[:-1], 1), phi_q.dtype), (s0.copy(), z0.copy()))
    chunk = min(chunk, n)
    fq, fk, vc = _pad_chunks(phi_q, chunk), _pad_chunks(phi_k, chunk), _pad_chunks(v, chunk)
    fkt = np.swapaxes(fk, -1, -2)  # (..., nc, m, C)
    kv = fkt @ vc  # (..., nc, m, dv)
    ks = fk.sum(axis=-2)  # (..., nc, m)
    # one cumulative sum over [S0, kv_0, kv_1, ...]: entry c is the state before chunk c, the
    # last entry the final state
    s_all = np.cumsum(np.concatenate([s0[..., None, :, :], kv], axis=-3), axis=-3)
    z_all = np.cumsum(np.concatenate([z0[..., None, :], ks], axis=-2), axis=-2)
    within = np.tril(fq @ fkt)  # (..., nc, C, C): j ≤ i inside each chunk
    num = fq @ s_all[..., :-1, :, :] + within @ vc
    den = fq @ z_all[..., :-1, :, None] + within.sum(axis=-1, keepdims=True)
    lead = phi_q.shape[:-2]
    num = num.reshape(*lead, -1, dv)[..., :n, :]
    den = den.reshape(*lead, -1, 1)[..., :n, :]
    return num, den, (s_all[..., -1, :, :], z_all[..., -1, :])


def linear_attention_chunked(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray, *,
                             chunk_size: int = 64, initial_state: State | None = None,
                             zero_denominator: str = "raise", cu_seqlens: Any = None
                             ) -> tuple[np.ndarray, State]:
    """Causal linear attention, chunk-parallel, with the plain state ``(S, z)`` in and out
    (module docstring; docs/math.md §13). ``zero_denominator`` as for
    :func:`kernel_verify.impls.numpy.attention.linear_attention`; ``cu_seqlens``: packed
    sequences (module docstring)."""
    chunk_size = check_chunk_size(chunk_size)
    if cu_seqlens is not None:
        return _packed(linear_attention_chunked, (phi_q, phi_k, v), initial_state, cu_seqlens,
                       chunk_size=chunk_size, zero_denominator=zero_denominator)
    s0, z0 = _inputs((phi_q, phi_k, v), initial_state, log=False)
    num, den, state = plain_chunked_sums(phi_q, phi_k, v, chunk_size, s0, z0)
    return num / denominator_guard(den, zero_denominator), state


def linear_attention_parallel(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray, *,
                              initial_state: State | None = None,
                              zero_denominator: str = "raise", cu_seqlens: Any = None
                              ) -> tuple[np.ndarray, State]:
    """The parallel form: ``(tril(φ(Q)φ(K)ᵀ)V + φ(Q)S_0) / (tril(φ(Q)φ(K)ᵀ)1 + φ(Q)z_0)`` and
    the final state ``(S_0 + φ(K)ᵀV, z_0 + φ(K)ᵀ1)`` (one chunk of T); ``cu_seqlens``: packed
    sequences (module docstring)."""
    if cu_seqlens is not None:
        return _packed(linear_attention_parallel, (phi_q, phi_k, v), initial_state, cu_seqlens,
                       zero_denominator=zero_denominator)
    s0, z0 = _inputs((phi_q, phi_k, v), initial_state, log=False)
    num, den, state = plain_chunked_sums(phi_q, phi_k, v, max(phi_q.shape[-2], 1), s0, z0)
    return num / denominator_guard(den, zero_denominator), state


def linear_attention_step(state: State | None, phi_q_t: np.ndarray, phi_k_t: np.ndarray,
                          v_t: np.ndarray, *, zero_denominator: str = "raise"
                          ) -> tuple[State, np.ndarray]:
    """One token of the recurrence: ``S_t = S_(t−1) + φ(k_t)v_tᵀ``, ``z_t = z_(t−1) + φ(k_t)``,
    ``o_t = φ(q_t)ᵀS_t / φ(q_t)ᵀz_t``; ``state`` None is the empty state. Returns
    ``((S_t, z_t), o_t)``; its cost does not depend on t."""
    check_step_inputs(phi_q_t, phi_k_t, v_t, names=("phi_q_t", "phi_k_t", "v_t"),
                      backend="numpy")
    check_nonempty_lead("phi_q_t", phi_q_t, phi_q_t.ndim - 1)
    lead, m, dv = phi_q_t.shape[:-1], phi_q_t.shape[-1], v_t.shape[-1]
    state = check_state(state, lead=lead, m=m, dv=dv, log=False, backend="numpy", like=phi_q_t,
                        name="state")
    if state is None:
        state = empty_state(lead, m, dv, phi_q_t.dtype)
    s, z = (x.astype(phi_q_t.dtype, copy=False) for x in state)
    s = s + phi_k_t[..., :, None] * v_t[..., None, :]
    z = z + phi_k_t
    num = (phi_q_t[..., None, :] @ s)[..., 0, :]
    den = np.sum(phi_q_t * z, axis=-1, keepdims=True)
    return (s, z), num / denominator_guard(den, zero_denominator)


# ------------------------------------------------------------------------- log-space state
def _softmax_safe(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; a row of only −∞ gives 0 (an empty past), never NaN."""
    top = np.max(logits, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(logits - top)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def _logsumexp_safe(x: np.ndarray, axis: int, keepdims: bool = False) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return logsumexp(x, axis=axis, keepdims=keepdims)


def merge_log_states(first: State, second: State) -> State:
    """The exact, associative merge of two log-space states (docs/math.md §13):
    ``L = logaddexp(L¹, L²)``, ``V̄ = e^(L¹−L)V̄¹ + e^(L²−L)V̄²`` (weights ≤ 1; an empty feature,
    ``L = −∞`` on both sides, stays empty with ``V̄ = 0``)."""
    (l1, v1), (l2, v2) = first, second
    lm = np.logaddexp(l1, l2)
    empty = np.isneginf(lm)
    safe = np.where(empty, 0.0, lm)
    with np.errstate(invalid="ignore"):
        w1 = np.where(empty, 0.0, np.exp(l1 - safe))
        w2 = np.where(empty, 0.0, np.exp(l2 - safe))
    return lm, w1[..., None] * v1 + w2[..., None] * v2


def _scan_log_states(log_norm: np.ndarray, v_bar: np.ndarray) -> State:
    """Inclusive scan of :func:`merge_log_states` along axis −2 of ``log_norm (..., E, m)`` and
    axis −3 of ``v_bar (..., E, m, d_v)`` (Hillis–Steele: ⌈log₂ E⌉ vectorised steps)."""
    n = log_norm.shape[-2]
    step = 1
    while step < n:
        merged = merge_log_states((log_norm[..., :-step, :], v_bar[..., :-step, :, :]),
                                  (log_norm[..., step:, :], v_bar[..., step:, :, :]))
        log_norm = np.concatenate([log_norm[..., :step, :], merged[0]], axis=-2)
        v_bar = np.concatenate([v_bar[..., :step, :, :], merged[1]], axis=-3)
        step *= 2
    return log_norm, v_bar


def _pair_log_weights(lq: np.ndarray, lk: np.ndarray) -> np.ndarray:
    from kernel_verify.impls.numpy.attention import _pair_log_weights as pair

    return pair(lq, lk)


def log_chunked(lq: np.ndarray, lk: np.ndarray, v: np.ndarray, chunk: int, l0: np.ndarray,
                vb0: np.ndarray) -> tuple[np.ndarray, State]:
    """The chunk-parallel log-space form (module docstring) on validated inputs."""
    n, dv = lq.shape[-2], v.shape[-1]
    lead = lq.shape[:-2]
    if n == 0:
        return np.zeros((*lead, 0, dv), dtype=v.dtype), (l0.copy(), vb0.copy())
    chunk = min(chunk, n)
    qc, kc, vc = _pad_chunks(lq, chunk), _pad_chunks(lk, chunk), _pad_chunks(v, chunk)
    nc = qc.shape[-3]
    # chunk states: padded keys (rows ≥ n of the last chunk) get log φ = −∞
    valid = (np.arange(nc * chunk) < n).reshape(nc, chunk, 1)
    k_state = np.where(valid, kc, -np.inf)
    chunk_norm = _logsumexp_safe(k_state, axis=-2)  # (..., nc, m)
    weights = np.exp(k_state - chunk_norm[..., None, :])  # softmax over the chunk's keys
    chunk_vbar = np.swapaxes(weights, -1, -2) @ vc  # (..., nc, m, dv)
    norms, vbars = _scan_log_states(
        np.concatenate([l0[..., None, :], chunk_norm], axis=-2),
        np.concatenate([vb0[..., None, :, :], chunk_vbar], axis=-3))
    past_norm, past_vbar = norms[..., :-1, :], vbars[..., :-1, :, :]  # before each chunk
    past_logits = qc + past_norm[..., None, :]  # (..., nc, C, m)
    past_log_weight = _logsumexp_safe(past_logits, axis=-1, keepdims=True)
    past_value = _softmax_safe(past_logits) @ past_vbar  # (..., nc, C, dv)
    future = np.triu(np.ones((chunk, chunk), dtype=bool), k=1)
    pair = np.where(future, -np.inf, _pair_log_weights(qc, kc))
    w = _softmax_safe(np.concatenate([past_log_weight, pair], axis=-1))
    out = w[..., :1] * past_value + w[..., 1:] @ vc
    out = out.reshape(*lead, nc * chunk, dv)[..., :n, :]
    return out, (norms[..., -1, :], vbars[..., -1, :, :])


def log_linear_attention_chunked(log_phi_q: np.ndarray, log_phi_k: np.ndarray, v: np.ndarray,
                                 *, chunk_size: int = 64, initial_state: State | None = None,
                                 cu_seqlens: Any = None) -> tuple[np.ndarray, State]:
    """Causal linear attention from log-features, chunk-parallel, with the log-space state
    ``(L, V̄)`` in and out (module docstring; docs/math.md §13). Equals
    :func:`linear_attention_chunked` with ``φ = exp(log φ)`` in exact arithmetic.
    ``cu_seqlens``: packed sequences (module docstring)."""
    chunk_size = check_chunk_size(chunk_size)
    if cu_seqlens is not None:
        return _packed(log_linear_attention_chunked, (log_phi_q, log_phi_k, v), initial_state,
                       cu_seqlens, chunk_size=chunk_size, log=True)
    l0, vb0 = _inputs((log_phi_q, log_phi_k, v), initial_state, log=True)
    return log_chunked(log_phi_q, log_phi_k, v.astype(log_phi_q.dtype, copy=False), chunk_size,
                       l0, vb0)


def log_linear_attention_parallel(log_phi_q: np.ndarray, log_phi_k: np.ndarray, v: np.ndarray,
                                  *, initial_state: State | None = None,
                                  cu_seqlens: Any = None) -> tuple[np.ndarray, State]:
    """The parallel log-space form (one chunk of T: every pair weight at once); ``cu_seqlens``:
    packed sequences (module docstring)."""
    if cu_seqlens is not None:
        return _packed(log_linear_attention_parallel, (log_phi_q, log_phi_k, v), initial_state,
                       cu_seqlens, log=True)
    l0, vb0 = _inputs((log_phi_q, log_phi_k, v), initial_state, log=True)
    return log_chunked(log_phi_q, log_phi_k, v, max(log_phi_q.shape[-2], 1), l0, vb0)


def log_linear_attention_step(state: State | None, log_phi_q_t: np.ndarray,
                              log_phi_k_t: np.ndarray, v_t: np.ndarray
                              ) -> tuple[State, np.ndarray]:
    """One token in log space: ``(L, V̄) ← merge((L, V̄), (log φ(k_t), v_t))``, then
    ``o_t = Σ_f softmax_f(log φ(q_t)_f + L_f) V̄_f``; ``state`` None is the empty state."""
    check_step_inputs(log_phi_q_t, log_phi_k_t, v_t,
                      names=("log_phi_q_t", "log_phi_k_t", "v_t"), backend="numpy")
    check_nonempty_lead("log_phi_q_t", log_phi_q_t, log_phi_q_t.ndim - 1)
    lead, m, dv = log_phi_q_t.shape[:-1], log_phi_q_t.shape[-1], v_t.shape[-1]
    state = check_state(state, lead=lead, m=m, dv=dv, log=True, backend="numpy",
                        like=log_phi_q_t, name="state")
    if state is None:
        state = empty_state(lead, m, dv, log_phi_q_t.dtype, log=True)
    state = tuple(x.astype(log_phi_q_t.dtype, copy=False) for x in state)
    token = (log_phi_k_t, np.broadcast_to(v_t[..., None, :], (*lead, m, dv)))
    ln, vb = merge_log_states(state, token)
    out = (_softmax_safe(log_phi_q_t + ln)[..., None, :] @ vb)[..., 0, :]
    return (ln, vb), out


def log_state_sums(state: State) -> State:
    """``(S, z) = (e^L·V̄, e^L)`` of a log-space state (exact in exact arithmetic; overflows only
    where ``e^L`` does)."""
    ln, vb = state
    z = np.exp(ln)
    return z[..., None] * vb, z


# empty_state, merge_log_states and log_state_sums are helpers on states the forms produced
# (tested in tests/test_forms.py); the entry points below validate everything they are given.
__all__ = [
    "linear_attention_chunked",
    "linear_attention_parallel",
    "linear_attention_step",
    "log_linear_attention_chunked",
    "log_linear_attention_parallel",
    "log_linear_attention_step",
]
