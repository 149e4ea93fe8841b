"""The exact gated (decayed) causal linear attention, in mpmath (docs/math.md §16).

Features ``φ(q), φ(k) (..., T, m)``, values ``v (..., T, d_v)`` and **log-gates** ``g ≤ 0``
(``g = −∞`` is a decay of exactly 0):

* scalar gates ``g (..., T)`` — RetNet's fixed per-head decay ``γ_h`` (``g_t = log γ_h`` for
  every t), Mamba2/SSD's and simple GLA's data-dependent ``a_t = e^(g_t)``;
* key-dimension gates ``g (..., T, m)`` — GLA's ``diag(α_t)`` on the key side.

The recurrence, with an initial state ``(S_0, z_0)`` (``S_0 (..., m, d_v)``, ``z_0 (..., m)``)::

    S_t = diag(e^(g_t)) S_(t−1) + φ(k_t) v_tᵀ,   z_t = diag(e^(g_t)) z_(t−1) + φ(k_t),
    o_t = φ(q_t)ᵀ S_t                 (no normaliser: RetNet, GLA, Mamba2)
    o_t = φ(q_t)ᵀ S_t / φ(q_t)ᵀ z_t   (normalised)

and its unrolled (parallel) form ``o_t = Σ_(s≤t) Σ_f φq_tf D_tsf φk_sf v_s + Σ_f φq_tf D_t0f S0_f``
with the masked decay ``D_tsf = exp(Σ_(r=s+1..t) g_rf)`` (``D_t0f = exp(Σ_(r≤t) g_rf)``; a
scalar gate is the same for every f). The chunked form (chunk c = rows ``[b, e)``) carries the
state across chunks with the decay of the whole chunk, ``S_c = diag(D_(e−1,b−1)) S_(c−1) +
Σ_(b≤s<e) diag(D_(e−1,s)) φ(k_s) v_sᵀ``, and reads it inside the chunk through
``D_(t,b−1)``. Every product of gates is the exponential of an exact sum of log-gates at the
working precision (no linear-space product underflows; ``exp(−∞) = 0``), and every result is
rounded once to float64. The three functions compute the same numbers by three routes; the
tests check that they agree, that ``g ≡ 0`` is plain linear attention
(:mod:`.forms`) and that ``g ≡ −∞`` leaves ``o_t = φ(q_t)ᵀφ(k_t) v_t``.
"""

from __future__ import annotations

import mpmath
import numpy as np

from kernel_verify.verify.inputs import check_array
from kernel_verify.verify.references.forms import (
    check_recurrence_inputs,
    each_sequence,
    readout,
    recurrence_one,
)

__all__ = ["gate_kind", "gated_chunked_mp", "gated_parallel_mp", "gated_recurrence_mp"]


def gate_kind(phi_k: np.ndarray, log_gates: np.ndarray) -> str:
    """``"scalar"`` for ``g (..., T)``, ``"key_dim"`` for ``g (..., T, m)``; else ValueError."""
    if log_gates.shape == phi_k.shape[:-1]:
        return "scalar"
    if log_gates.shape == phi_k.shape:
        return "key_dim"
    raise ValueError(f"log_gates must have shape {phi_k.shape[:-1]} (scalar gates) or "
                     f"{phi_k.shape} (key-dimension gates), got {log_gates.shape}")


def _check(phi_q, phi_k, v, log_gates, initial_state):
    check_recurrence_inputs(phi_q, phi_k, v)
    g = np.asarray(log_gates, dtype=np.float64)
    kind = gate_kind(phi_k, g)
    if np.isnan(g).any() or (g > 0).any():
        raise ValueError("log_gates must be ≤ 0 (decays in [0, 1]; −inf is a decay of 0), "
                         "without NaN")
    lead, m, dv = phi_q.shape[:-2], phi_q.shape[-1], v.shape[-1]
    if initial_state is None:
        s0, z0 = np.zeros((*lead, m, dv)), np.zeros((*lead, m))
    else:
        s0, z0 = (np.asarray(a, dtype=np.float64) for a in initial_state)
        check_array("initial_state[0]", s0, backend="numpy")
        check_array("initial_state[1]", z0, backend="numpy")
        if s0.shape != (*lead, m, dv) or z0.shape != (*lead, m):
            raise ValueError(f"initial_state must have shapes {(*lead, m, dv)} and {(*lead, m)}, "
                             f"got {s0.shape} and {z0.shape}")
    gm = g if kind == "key_dim" else np.broadcast_to(g[..., None], phi_k.shape)
    return gm, s0, z0


def _decay(g: np.ndarray, a: int, b: int, f: int):
    """``exp(Σ_(r=a..b−1) g_rf)`` exactly at the working precision (1 for an empty range)."""
    total = mpmath.fsum(g[r, f] for r in range(a, b))
    return mpmath.exp(total)


def _mp_gates(g: np.ndarray) -> np.ndarray:
    out = np.empty(g.shape, dtype=object)
    out.ravel()[:] = [mpmath.mpf(float(x)) if np.isfinite(x) else mpmath.ninf
                      for x in g.ravel()] if g.size else []
    return out


def _add_decayed(s, z, g, pk, vv, first: int, end: int) -> None:
    """In place, in the order of ``j``: ``z += Σ_{first ≤ j < end} D(j+1, end)·k_j`` and
    ``s += Σ D(j+1, end)·k_j v_jᵀ``, ``D`` the decay of :func:`_decay`."""
    for j in range(first, end):
        for f in range(len(z)):
            w = _decay(g, j + 1, end, f) * pk[j, f]
            z[f] += w
            for c in range(vv.shape[1]):
                s[f][c] += w * vv[j, c]


def _parallel_one(pq, pk, vv, s0, z0, *, g, normalise):
    n, m = pq.shape
    dv = vv.shape[1]
    out = np.empty((n, dv), dtype=object)
    for t in range(n):
        d0 = [_decay(g, 0, t + 1, f) for f in range(m)]
        s = [[d0[f] * s0[f, c] for c in range(dv)] for f in range(m)]
        z = [d0[f] * z0[f] for f in range(m)]
        _add_decayed(s, z, g, pk, vv, 0, t + 1)
        out[t, :] = readout(pq, s, z, t, normalise, dv)
    s_fin = [[_decay(g, 0, n, f) * s0[f, c] for c in range(dv)] for f in range(m)]
    z_fin = [_decay(g, 0, n, f) * z0[f] for f in range(m)]
    _add_decayed(s_fin, z_fin, g, pk, vv, 0, n)
    return out, s_fin, z_fin


def _chunked_one(pq, pk, vv, s0, z0, *, g, normalise, chunk):
    n, m = pq.shape
    dv = vv.shape[1]
    out = np.empty((n, dv), dtype=object)
    s = [[s0[f, c] for c in range(dv)] for f in range(m)]
    z = [z0[f] for f in range(m)]
    for b in range(0, n, chunk):
        e = min(b + chunk, n)
        for t in range(b, e):  # inside the chunk: the state before it, decayed, + the chunk
            st = [[_decay(g, b, t + 1, f) * s[f][c] for c in range(dv)] for f in range(m)]
            zt = [_decay(g, b, t + 1, f) * z[f] for f in range(m)]
            _add_decayed(st, zt, g, pk, vv, b, t + 1)
            out[t, :] = readout(pq, st, zt, t, normalise, dv)
        for f in range(m):  # the state after the chunk: decay of the whole chunk
            whole = _decay(g, b, e, f)
            z[f] = whole * z[f] + mpmath.fsum(_decay(g, j + 1, e, f) * pk[j, f]
                                              for j in range(b, e))
            for c in range(dv):
                s[f][c] = whole * s[f][c] + mpmath.fsum(_decay(g, j + 1, e, f) * pk[j, f]
                                                        * vv[j, c] for j in range(b, e))
    return out, s, z


def _run(one, phi_q, phi_k, v, log_gates, initial_state, normalise, dps, **kw):
    gm, s0, z0 = _check(phi_q, phi_k, v, log_gates, initial_state)
    return each_sequence(one, phi_q, phi_k, v, s0, z0, dps,
                         lambda idx: {"g": _mp_gates(gm[idx]), "normalise": normalise, **kw})


def gated_recurrence_mp(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray,
                        log_gates: np.ndarray, *, normalise: bool = False,
                        initial_state: tuple[np.ndarray, np.ndarray] | None = None,
                        dps: int | None = None
                        ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """``(outputs, (S_T, z_T))`` of the gated recurrence (module docstring) one token at a
    time, float64; ``log_gates (..., T)`` scalar or ``(..., T, m)`` per key dimension."""
    return _run(recurrence_one, phi_q, phi_k, v, log_gates, initial_state, normalise, dps)


def gated_parallel_mp(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray,
                      log_gates: np.ndarray, *, normalise: bool = False,
                      initial_state: tuple[np.ndarray, np.ndarray] | None = None,
                      dps: int | None = None
                      ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """The same from the masked decay matrix ``D_tsf = exp(Σ_(s<r≤t) g_rf)`` (module
    docstring): every output and the final state summed over all pairs at once."""
    return _run(_parallel_one, phi_q, phi_k, v, log_gates, initial_state, normalise, dps)


def gated_chunked_mp(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray,
                     log_gates: np.ndarray, *, chunk_size: int, normalise: bool = False,
                     initial_state: tuple[np.ndarray, np.ndarray] | None = None,
                     dps: int | None = None
                     ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """The same chunk by chunk (module docstring): the state carried across chunks with the
    decay of the whole chunk, read inside a chunk through the decay since its start."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    return _run(_chunked_one, phi_q, phi_k, v, log_gates, initial_state, normalise, dps,
                chunk=chunk_size)
