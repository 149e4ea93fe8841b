"""Gated (decayed) causal linear attention in every form, in NumPy (docs/math.md §16).

Features ``φ(q), φ(k) (..., T, m)``, values ``v (..., T, d_v)``, log-gates ``g ≤ 0``:
``(..., T)`` one scalar per token (RetNet's fixed decay repeated, Mamba2/simple GLA) or
``(..., T, m)`` one per key dimension (GLA). State ``(S (..., m, d_v), z (..., m))``;
``normalise`` divides by ``φ(q_t)ᵀz_t``. Recurrence: ``S_t = diag(e^(g_t)) S_(t−1) + φ(k_t)v_tᵀ``,
``o_t = φ(q_t)ᵀS_t``.

* chunked :func:`gated_attention_chunked`, chunk c = rows ``[b, e)``. Log-gates are summed
  *inside each chunk only* (``Gl_t = Σ_(b≤r≤t) g_r``: at most C terms, each decay the exponential
  of a difference ``Gl_t − Gl_s ≤ 0``, never of ``±G`` alone, so nothing overflows and a long
  run of strong decays cannot underflow a product it should not):
  ``o_t = (φq_t ⊙ e^(Gl_t))ᵀS_(c−1) + Σ_(b≤s≤t) Σ_f φq_tf e^(Gl_tf − Gl_sf) φk_sf v_s``,
  ``S_c = diag(e^(Gl_(e−1))) S_(c−1) + Σ_s (φk_s ⊙ e^(Gl_(e−1) − Gl_s)) v_sᵀ`` — the decay of the
  whole chunk, from its last token. The in-chunk part of every chunk is one batched product;
  the states run through one loop over the chunks (a linear recurrence). The tail chunk is
  padded with zero features and zero log-gates (they add nothing);
* parallel :func:`gated_attention_parallel`: one chunk of ``T``;
* recurrent :func:`gated_attention_step`: one token.
"""

from __future__ import annotations

import numpy as np

from kernel_verify.impls.attention_checks import check_attention_inputs, denominator_guard
from kernel_verify.impls.forms_checks import check_chunk_size, check_state, check_step_inputs
from kernel_verify.impls.gated_checks import check_gated_options, check_log_gates, time_length

State = tuple[np.ndarray, np.ndarray]

__all__ = ["gated_attention_chunked", "gated_attention_parallel", "gated_attention_step"]


def _inputs(phi_q, phi_k, v, g, initial_state):
    check_attention_inputs(phi_q, phi_k, v, causal=True, names=("phi_q", "phi_k", "v"),
                           backend="numpy")
    kind = check_log_gates(g, phi_k, backend="numpy")
    lead, m, dv = phi_q.shape[:-2], phi_q.shape[-1], v.shape[-1]
    state = check_state(initial_state, lead=lead, m=m, dv=dv, log=False, backend="numpy",
                        like=phi_q)
    if state is None:
        state = (np.zeros((*lead, m, dv), phi_q.dtype), np.zeros((*lead, m), phi_q.dtype))
    return (g[..., None] if kind == "scalar" else g), tuple(s.astype(phi_q.dtype) for s in state)


def _chunks(x: np.ndarray, chunk: int) -> np.ndarray:
    n = x.shape[-2]
    nc = -(-n // chunk)
    if nc * chunk != n:
        x = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, nc * chunk - n), (0, 0)])
    return x.reshape(*x.shape[:-2], nc, chunk, x.shape[-1])


def gated_chunk_sums(fq: np.ndarray, fk: np.ndarray, v: np.ndarray, g: np.ndarray, chunk: int,
                     s0: np.ndarray, z0: np.ndarray) -> tuple[np.ndarray, np.ndarray, State]:
    """Numerators ``(..., T, d_v)``, denominators ``(..., T, 1)`` and the final state of the
    chunked form (module docstring) on validated inputs; ``g (..., T, m)`` per key dimension or
    ``(..., T, 1)`` one per token."""
    n, dv = fq.shape[-2], v.shape[-1]
    if n == 0:
        return (np.zeros((*fq.shape[:-1], dv), fq.dtype), np.ones((*fq.shape[:-1], 1), fq.dtype),
                (s0.copy(), z0.copy()))
    chunk = min(chunk, n)
    qc, kc, vc, gc = (_chunks(a, chunk) for a in (fq, fk, v, g))
    gl = np.cumsum(gc, axis=-2)  # (..., nc, C, m): in-chunk cumulative log-gates
    causal = np.tril(np.ones((chunk, chunk), dtype=bool))[..., None]
    diff = np.where(causal, gl[..., :, None, :] - gl[..., None, :, :], -np.inf)
    if gc.shape[-1] == 1:  # one gate per token: (φQ φKᵀ) ⊙ D
        pair = (qc @ np.swapaxes(kc, -1, -2)) * np.exp(diff[..., 0])
    else:  # per key dimension: Σ_f φq_tf D_tsf φk_sf
        pair = np.einsum("...tf,...tsf,...sf->...ts", qc, np.exp(diff), kc)
    last = gl[..., -1:, :]  # (..., nc, 1, m): the whole chunk's log-decay
    k_dec = kc * np.exp(last - gl)  # keys decayed to the chunk's end
    chunk_s = np.swapaxes(k_dec, -1, -2) @ vc  # (..., nc, m, dv)
    chunk_z = k_dec.sum(axis=-2)
    whole = np.exp(last[..., 0, :])  # (..., nc, m)
    s_before, z_before = [], []
    s, z = s0, z0
    for c in range(qc.shape[-3]):
        s_before.append(s)
        z_before.append(z)
        s = whole[..., c, :, None] * s + chunk_s[..., c, :, :]
        z = whole[..., c, :] * z + chunk_z[..., c, :]
    sb, zb = np.stack(s_before, axis=-3), np.stack(z_before, axis=-2)
    q_dec = qc * np.exp(gl)  # queries read the state through the decay since the chunk start
    num = q_dec @ sb + pair @ vc
    den = q_dec @ zb[..., None] + pair.sum(axis=-1, keepdims=True)
    lead = fq.shape[:-2]
    return (num.reshape(*lead, -1, dv)[..., :n, :], den.reshape(*lead, -1, 1)[..., :n, :],
            (s, z))


def gated_attention_chunked(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray,
                            log_gates: np.ndarray, *, chunk_size: int = 64,
                            initial_state: State | None = None, normalise: bool = False,
                            zero_denominator: str = "raise") -> tuple[np.ndarray, State]:
    """Gated causal linear attention, chunked, state ``(S, z)`` in and out (module docstring)."""
    check_gated_options(normalise, zero_denominator)
    chunk_size = check_chunk_size(chunk_size)
    g, (s0, z0) = _inputs(phi_q, phi_k, v, log_gates, initial_state)
    num, den, state = gated_chunk_sums(phi_q, phi_k, v, g, chunk_size, s0, z0)
    if normalise:
        return num / denominator_guard(den, zero_denominator), state
    return num, state


def gated_attention_parallel(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray,
                             log_gates: np.ndarray, *, initial_state: State | None = None,
                             normalise: bool = False, zero_denominator: str = "raise"
                             ) -> tuple[np.ndarray, State]:
    """The parallel form ``O = (φ(Q)φ(K)ᵀ ⊙ D)V + (φ(Q) ⊙ e^G)S_0`` (one chunk of T)."""
    return gated_attention_chunked(phi_q, phi_k, v, log_gates,
                                   chunk_size=time_length(phi_q),
                                   initial_state=initial_state, normalise=normalise,
                                   zero_denominator=zero_denominator)


def gated_attention_step(state: State | None, phi_q_t: np.ndarray, phi_k_t: np.ndarray,
                         v_t: np.ndarray, log_gate_t: np.ndarray, *, normalise: bool = False,
                         zero_denominator: str = "raise") -> tuple[State, np.ndarray]:
    """One token: ``S_t = diag(e^(g_t)) S_(t−1) + φ(k_t)v_tᵀ``, ``z_t`` alike,
    ``o_t = φ(q_t)ᵀS_t`` (``/ φ(q_t)ᵀz_t`` with ``normalise``); ``state`` None is empty."""
    check_gated_options(normalise, zero_denominator)
    check_step_inputs(phi_q_t, phi_k_t, v_t, names=("phi_q_t", "phi_k_t", "v_t"),
                      backend="numpy")
    kind = check_log_gates(log_gate_t, phi_k_t, backend="numpy", name="log_gate_t", step=True)
    lead, m, dv = phi_q_t.shape[:-1], phi_q_t.shape[-1], v_t.shape[-1]
    state = check_state(state, lead=lead, m=m, dv=dv, log=False, backend="numpy", like=phi_q_t,
                        name="state")
    if state is None:
        state = (np.zeros((*lead, m, dv), phi_q_t.dtype), np.zeros((*lead, m), phi_q_t.dtype))
    s, z = (x.astype(phi_q_t.dtype, copy=False) for x in state)
    a = np.exp(log_gate_t[..., None] if kind == "scalar" else log_gate_t)
    s = a[..., None] * s + phi_k_t[..., :, None] * v_t[..., None, :]
    z = a * z + phi_k_t
    num = (phi_q_t[..., None, :] @ s)[..., 0, :]
    if not normalise:
        return (s, z), num
    den = np.sum(phi_q_t * z, axis=-1, keepdims=True)
    return (s, z), num / denominator_guard(den, zero_denominator)

