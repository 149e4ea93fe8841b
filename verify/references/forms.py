"""The exact recurrence of causal linear attention and its state, in mpmath (docs/math.md §13).

For features ``φ(q), φ(k) (..., T, m)``, values ``v (..., T, d_v)`` and an initial state
``(S_0, z_0)`` (``S_0 (..., m, d_v)``, ``z_0 (..., m)``; None: zero):

    S_t = S_(t−1) + φ(k_t) v_tᵀ,   z_t = z_(t−1) + φ(k_t),   o_t = φ(q_t)ᵀS_t / φ(q_t)ᵀz_t,

every sum taken exactly at the working precision (float inputs convert exactly, :mod:`.mp`),
and the outputs and the final state ``(S_T, z_T)`` rounded once to float64. This is the truth
every form is compared with: parallel, chunked and recurrent forms, split runs and packed runs
all equal it in exact arithmetic. The log-space state of positive features is the same state
written as ``L = log z``, ``V̄ = S / z`` (:func:`log_state_of`).
"""

from __future__ import annotations

import mpmath
import numpy as np

from kernel_verify.verify.inputs import check_array
from kernel_verify.verify.references.mp import to_float, to_mp, working_precision

__all__ = ["causal_recurrence_mp", "check_recurrence_inputs", "log_state_of"]


def check_recurrence_inputs(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray) -> None:
    """The inputs of a causal recurrence reference: float arrays ``(..., T, m)``,
    ``(..., T, m)``, ``(..., T, d_v)`` with one leading shape and length (errors name them)."""
    for name, a in (("phi_q", phi_q), ("phi_k", phi_k), ("v", v)):
        check_array(name, a, min_ndim=2, backend="numpy")
    if phi_q.shape != phi_k.shape:
        raise ValueError(f"phi_q and phi_k must have one shape, got {phi_q.shape} and "
                         f"{phi_k.shape}")
    if v.shape[:-1] != phi_k.shape[:-1]:
        raise ValueError(f"v must have the leading shape and length of phi_k, got {v.shape}")



def readout(pq, s, z, t: int, normalise: bool, dv: int) -> list:
    """Output ``t`` from the state ``(s, z)`` after token ``t`` (mp lists): ``φ(q_t)ᵀS``, divided
    by ``φ(q_t)ᵀz`` when ``normalise`` (an exactly 0 denominator is a ValueError)."""
    m = len(z)
    num = [mpmath.fsum(pq[t, f] * s[f][c] for f in range(m)) for c in range(dv)]
    if not normalise:
        return num
    den = mpmath.fsum(pq[t, f] * z[f] for f in range(m))
    if den == 0:
        raise ValueError(f"attention denominator of position {t} is exactly 0")
    return [x / den for x in num]


def recurrence_one(pq, pk, vv, s0, z0, *, normalise: bool = True, g=None):
    """One sequence token by token in mp: ``S_t = a_t S_(t−1) + φ(k_t) v_tᵀ``,
    ``z_t = a_t z_(t−1) + φ(k_t)``, ``a_t = exp(g_t)`` per key feature for log gates ``g``
    ``(T, m)``, ``a_t = 1`` (an exact product) without; the output rows (:func:`readout`) and
    the final state as lists."""
    n, m = pq.shape
    dv = vv.shape[1]
    s = [[s0[f, c] for c in range(dv)] for f in range(m)]
    z = [z0[f] for f in range(m)]
    out = np.empty((n, dv), dtype=object)
    for t in range(n):
        for f in range(m):
            a = 1 if g is None else mpmath.exp(g[t, f])
            z[f] = a * z[f] + pk[t, f]
            for c in range(dv):
                s[f][c] = a * s[f][c] + pk[t, f] * vv[t, c]
        out[t, :] = readout(pq, s, z, t, normalise, dv)
    return out, s, z


def each_sequence(one, phi_q, phi_k, v, s0, z0, dps, extra=None
                  ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """``one(pq, pk, vv, s0, z0, **extra(idx))`` in mp (``dps`` digits) on each sequence
    (leading index ``idx``) of the float inputs: its outputs and final state (lists, as
    :func:`recurrence_one` returns them) rounded once to float64."""
    lead, m, dv = phi_q.shape[:-2], phi_q.shape[-1], v.shape[-1]
    out = np.empty((*lead, phi_q.shape[-2], dv), dtype=np.float64)
    s_out = np.empty((*lead, m, dv), dtype=np.float64)
    z_out = np.empty((*lead, m), dtype=np.float64)
    with working_precision(dps):
        for idx in np.ndindex(*lead):
            o, s, z = one(to_mp(phi_q[idx]), to_mp(phi_k[idx]), to_mp(v[idx]), to_mp(s0[idx]),
                          to_mp(z0[idx]), **(extra(idx) if extra else {}))
            out[idx] = to_float(o) if o.size else 0.0
            s_arr = np.empty((m, dv), dtype=object)
            for f in range(m):
                s_arr[f, :] = s[f]
            z_arr = np.empty(m, dtype=object)
            z_arr[:] = z
            s_out[idx], z_out[idx] = to_float(s_arr), to_float(z_arr)
    return out, (s_out, z_out)


def causal_recurrence_mp(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray,
                         initial_state: tuple[np.ndarray, np.ndarray] | None = None, *,
                         dps: int | None = None
                         ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """``(outputs, (S_T, z_T))`` of the exact recurrence (module docstring), float64, for float
    inputs of shapes ``(..., T, m)``, ``(..., T, m)``, ``(..., T, d_v)``; the leading shapes
    must agree and are looped over. A zero denominator is a ValueError."""
    check_recurrence_inputs(phi_q, phi_k, v)
    lead, m, dv = phi_q.shape[:-2], phi_q.shape[-1], v.shape[-1]
    if initial_state is None:
        s0, z0 = np.zeros((*lead, m, dv)), np.zeros((*lead, m))
    else:
        s0, z0 = initial_state
        check_array("initial_state[0]", s0, backend="numpy")
        check_array("initial_state[1]", z0, backend="numpy")
        if s0.shape != (*lead, m, dv) or z0.shape != (*lead, m):
            raise ValueError(f"initial_state must have shapes {(*lead, m, dv)} and {(*lead, m)}, "
                             f"got {s0.shape} and {z0.shape}")
    return each_sequence(recurrence_one, phi_q, phi_k, v, s0, z0, dps)


def log_state_of(state: tuple[np.ndarray, np.ndarray], *, dps: int | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The log-space state ``(L, V̄) = (log z, S / z)`` of a plain state of positive features,
    computed in mp and rounded once (``z_f = 0``: an empty feature, ``L_f = −∞``, ``V̄_f = 0``)."""
    s, z = state
    log_norm = np.empty(z.shape, dtype=np.float64)
    v_bar = np.zeros(s.shape, dtype=np.float64)
    with working_precision(dps):
        for idx in np.ndindex(*z.shape):
            zz = mpmath.mpf(float(z[idx]))
            if zz < 0:
                raise ValueError("a log-space state needs z >= 0 (positive features)")
            log_norm[idx] = -np.inf if zz == 0 else float(mpmath.log(zz))
            if zz > 0:
                v_bar[idx] = [float(mpmath.mpf(float(x)) / zz) for x in s[idx]]
    return log_norm, v_bar
