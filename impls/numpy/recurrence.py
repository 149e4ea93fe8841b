"""The delta rule and its relatives, one recurrence with the transition as data, in NumPy.

Layout ``(..., T, d)``: ``q, k (..., T, d)`` already featurised (normalised, scaled) by the
caller, ``v (..., T, d_v)``, state ``S (..., d, d_v)``. Every transition is diagonal plus rank
one, ``A_t = Diag(e^(λ_t)) + x_t y_tᵀ``, with the update ``w_t v_tᵀ``::

    S_t = Diag(e^(λ_t)) S_(t−1) + x_t (y_tᵀ S_(t−1)) + w_t v_tᵀ,      o_t = S_tᵀ q_t.

=============  ==========================  ============  ======  =====  =========================
transition     A_t                         λ             x       y      w
=============  ==========================  ============  ======  =====  =========================
identity       I                           0             0       0      k
decay          Diag(e^g)                   g             0       0      k
delta          I − βkkᵀ                    0             −βk     k      βk
gated_delta    e^g (I − βkkᵀ)              g             −e^gβk  k      βk
kda            (I − βkkᵀ) Diag(e^g)        g             −βk     e^g⊙k  βk
comba          e^g I − βkpᵀ                g             −βk     p      βk
rwkv7          Diag(e^g) + b aᵀ            g             b       a      k
=============  ==========================  ============  ======  =====  =========================

Sources: linear attention (identity; Katharopoulos et al. 2020, arXiv 2006.16236); decay
(RetNet, Mamba2, GLA); the delta rule ``S_t = S_(t−1) + βk(v − S_(t−1)ᵀk)ᵀ`` (DeltaNet: Yang et
al., NeurIPS 2024, arXiv 2406.06484); gated DeltaNet, decay before the error term (Yang et
al., arXiv 2412.06464); KDA, a per-key-dimension decay inside the delta rule (Kimi Linear tech
report, 2025); Comba, a scalar-plus-low-rank transition with a separate feedback key ``p`` (Hu
et al., 2025, arXiv 2506.02475; an implementation that decays before the error term,
``e^g(I − βkpᵀ)``, is this one with ``β`` replaced by ``e^gβ``); RWKV-7, a diagonal-plus-rank-one
transition (Peng et al., arXiv 2503.14456: its ``Diag(w_t) − κ̂_t(α_t ⊙ κ̂_t)ᵀ`` on the
state as stored here, ``(d, d_v)``, is ``g = log w``, ``a = −κ̂``, ``b = κ̂ ⊙ α``, with ``α`` the
in-context learning rate the paper calls ``a``, and ``w = k̃`` the replacement key).

Forms:

* :func:`recurrent_step` — one token; :func:`recurrent` — token by token;
* :func:`chunked` — the UT transform (DeltaNet's chunkwise form, generalised to a diagonal
  decay and any rank-one transition). In a chunk of C tokens entered with state ``S_0``, with
  the chunk-local cumulative log-gates ``G_t = Σ_(r≤t) λ_r`` (per key dimension; ``G_0 = 0``)
  and ``Γ_(t,s) = Diag(exp(G_t − G_s))`` for ``s ≤ t`` — always the exponential of a
  *difference* ``≤ 0``, never ``e^G`` and ``e^(−G)`` separately, so a run of strong decays
  neither overflows nor underflows to NaN. Unrolling the recurrence with ``u_t = S_(t−1)ᵀy_t``
  (the state read by the rank-one term) gives ``S_t = Γ_(t,0)S_0 + Σ_(s≤t) Γ_(t,s)(x_s u_sᵀ +
  w_s v_sᵀ)``, hence (rows ``u_tᵀ`` of ``U``)::

      U = (I − L)⁻¹ (Ŷ S_0 + M V),   L_ts = y_tᵀΓ_(t−1,s)x_s,  M_ts = y_tᵀΓ_(t−1,s)w_s  (s < t),
                                      Ŷ_t = Γ_(t−1,0) y_t;
      o_t = S_0ᵀΓ_(t,0)q_t + Σ_(s≤t) [(q_tᵀΓ_(t,s)x_s) u_s + (q_tᵀΓ_(t,s)w_s) v_s];
      S_C = Γ_(C,0)S_0 + Σ_s Γ_(C,s)(x_s u_sᵀ + w_s v_sᵀ).

  ``I − L`` is unit lower triangular: it is solved by forward substitution. Per key dimension
  the in-chunk products ``y_tᵀΓ x_s`` are taken by blocks of 16 columns: inside a block
  directly, for the rows after it as one matrix product factored at the block's last column
  ``c``, ``exp(G_t − G_c) · exp(G_c − G_s)`` — two differences ``≤ 0`` again. Everything but the
  terms in ``S_0`` is computed for every chunk at once (``(I − L)⁻¹`` applied to ``Ŷ`` and to
  ``MV``: the WY representation); the states then run through one loop over the chunks,
  ``U = W_Y S_0 + U_V``. The last chunk is padded with zero inputs and zero log-gates, which
  change nothing.
"""

from __future__ import annotations

import numpy as np

from kernel_verify.impls.numpy.gated_forms import _chunks
from kernel_verify.impls.recurrence_checks import (
    TRANSITIONS,
    check_chunk_size,
    check_recurrence_state,
    check_sequence_inputs,
    check_step,
    check_transition_inputs,
)
from kernel_verify.impls.validation import check_array

__all__ = ["TRANSITIONS", "chunked", "recurrent", "recurrent_step", "transition_terms"]

#: Block of columns of the per-key-dimension in-chunk products (``_pairs``).
SUB = 16

Terms = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
_NAMES = ("g", "beta", "p", "a", "b")


def _terms(transition: str, k: np.ndarray, g, beta, p, a, b) -> Terms:
    """``(λ, x, y, w)`` on validated inputs; ``λ`` has last axis 1 for a gate per token (or
    none), ``d`` per key dimension. Works for a sequence or one token alike."""
    lam = np.zeros((*k.shape[:-1], 1), k.dtype) if g is None else (
        g[..., None] if g.ndim == k.ndim - 1 else g)
    if transition in ("identity", "decay"):
        return lam, np.zeros_like(k), np.zeros_like(k), k
    if transition == "rwkv7":
        return lam, b, a, k
    bk = beta[..., None] * k
    if transition == "delta":
        return lam, -bk, k, bk
    if transition == "gated_delta":
        return lam, -np.exp(lam) * bk, k, bk
    if transition == "kda":
        return lam, -bk, np.exp(lam) * k, bk
    return lam, -bk, p, bk  # comba


def transition_terms(transition: str, k: np.ndarray, *, g: np.ndarray | None = None,
                     beta: np.ndarray | None = None, p: np.ndarray | None = None,
                     a: np.ndarray | None = None, b: np.ndarray | None = None) -> Terms:
    """``(λ, x, y, w)`` of ``A_t = Diag(e^(λ_t)) + x_t y_tᵀ`` and the update ``w_t v_tᵀ`` for
    keys ``k (..., T, d)`` (module docstring's table); ``λ`` broadcast to ``(..., T, d)``."""
    check_array("k", k, min_ndim=2, backend="numpy")
    inputs = {"g": g, "beta": beta, "p": p, "a": a, "b": b}
    check_transition_inputs(transition, k, inputs, backend="numpy")
    lam, x, y, w = _terms(transition, k, g, beta, p, a, b)
    return np.broadcast_to(lam, k.shape).copy(), x, y, w


def _start(state, lead, d, dv, like, name):
    state = check_recurrence_state(state, lead=lead, d=d, dv=dv, backend="numpy", like=like,
                                   name=name)
    if state is None:
        return np.zeros((*lead, d, dv), like.dtype)
    return state.astype(like.dtype, copy=True)


def _step(s, q_t, v_t, lam, x, y, w):
    """One token on validated inputs: ``S ← Diag(e^λ)S + x(yᵀS) + wvᵀ``, ``o = Sᵀq``."""
    ys = (y[..., None, :] @ s)[..., 0, :]  # yᵀS (..., d_v)
    s = (np.exp(lam)[..., :, None] * s + x[..., :, None] * ys[..., None, :]
         + w[..., :, None] * v_t[..., None, :])
    return s, (q_t[..., None, :] @ s)[..., 0, :]


def recurrent_step(state: np.ndarray | None, q_t: np.ndarray, k_t: np.ndarray, v_t: np.ndarray,
                   *, transition: str, g_t: np.ndarray | None = None,
                   beta_t: np.ndarray | None = None, p_t: np.ndarray | None = None,
                   a_t: np.ndarray | None = None, b_t: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """One token: ``S_t = Diag(e^(λ_t))S_(t−1) + x_t(y_tᵀS_(t−1)) + w_t v_tᵀ``, ``o_t = S_tᵀq_t``
    (module docstring). ``q_t, k_t (..., d)``, ``v_t (..., d_v)``, ``g_t (...)`` or ``(..., d)``,
    ``beta_t (...)``, ``p_t, a_t, b_t (..., d)``; ``state (..., d, d_v)``, None for zeros.
    Returns ``(S_t, o_t)``."""
    check_step(q_t, k_t, v_t, backend="numpy")
    # a NumPy scalar (``g[t]`` of a sequence without leading axes) is a 0-d array here
    inputs = {n: np.asarray(x) if isinstance(x, np.generic) else x
              for n, x in zip(_NAMES, (g_t, beta_t, p_t, a_t, b_t), strict=True)}
    check_transition_inputs(transition, k_t, inputs, backend="numpy", step=True)
    s = _start(state, tuple(q_t.shape[:-1]), q_t.shape[-1], v_t.shape[-1], q_t, "state")
    return _step(s, q_t, v_t, *_terms(transition, k_t, *(inputs[n] for n in _NAMES)))


def _sequence(q, k, v, transition, inputs, initial_state):
    check_sequence_inputs(q, k, v, backend="numpy")
    check_transition_inputs(transition, k, inputs, backend="numpy")
    s0 = _start(initial_state, tuple(q.shape[:-2]), q.shape[-1], v.shape[-1], q,
                "initial_state")
    return s0, _terms(transition, k, *(inputs[n] for n in _NAMES))


def recurrent(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, transition: str,
              g: np.ndarray | None = None, beta: np.ndarray | None = None,
              p: np.ndarray | None = None, a: np.ndarray | None = None,
              b: np.ndarray | None = None, initial_state: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """The recurrence token by token (module docstring); returns ``(o (..., T, d_v),
    S_T (..., d, d_v))``. ``T = 0`` gives an empty output and the initial state."""
    s, (lam, x, y, w) = _sequence(q, k, v, transition,
                                  {"g": g, "beta": beta, "p": p, "a": a, "b": b}, initial_state)
    outs = []
    for t in range(q.shape[-2]):
        s, o_t = _step(s, q[..., t, :], v[..., t, :], lam[..., t, :], x[..., t, :],
                       y[..., t, :], w[..., t, :])
        outs.append(o_t)
    if not outs:
        return np.zeros((*q.shape[:-1], v.shape[-1]), q.dtype), s
    return np.stack(outs, axis=-2), s


def _pairs(left: np.ndarray, g_row: np.ndarray, rights: tuple[np.ndarray, ...],
           g_col: np.ndarray, *, strict: bool) -> list[np.ndarray]:
    """``P_ts = Σ_f left_tf exp(g_row_tf − g_col_sf) right_sf`` for ``s < t`` (``strict``) or
    ``s ≤ t``, 0 above, for each of ``rights``; chunks ``(..., C, ·)``, log-gates ``(..., C, e)``
    with ``e = 1`` (one per token) or ``d`` (per key dimension), ``g_row_t − g_col_s ≤ 0``
    wherever ``P`` is kept. Only differences ``≤ 0`` are exponentiated (masked before the
    exponential).

    One gate per token: ``(left rightᵀ) ⊙ D``. Per key dimension, by blocks of :data:`SUB`
    columns ``[j, e)``: the rows of the block directly (``SUB × SUB × d`` decays); the rows
    ``t ≥ e`` after it as one product ``(left_t ⊙ e^(g_row_t − c))(right_s ⊙ e^(c − g_col_s))ᵀ``
    with ``c = g_col`` at the block's last column — both exponents ``≤ 0`` (the cumulative
    log-gates do not increase), so no factor overflows, and a factor that underflows stands for
    a product below the smallest normal number. ``C × SUB × d`` decays instead of ``C² × d``."""
    c_len = left.shape[-2]
    rows, cols = np.arange(c_len)[:, None], np.arange(c_len)[None, :]
    mask = cols < rows if strict else cols <= rows
    if g_row.shape[-1] == 1:
        decay = np.exp(np.where(mask, g_row[..., :, None, 0] - g_col[..., None, :, 0], -np.inf))
        return [(left @ np.swapaxes(r, -1, -2)) * decay for r in rights]
    blocks: list[list[np.ndarray]] = [[] for _ in rights]
    for j in range(0, c_len, SUB):
        e = min(j + SUB, c_len)
        diff = g_row[..., j:e, None, :] - g_col[..., None, j:e, :]
        decay = np.exp(np.where(mask[j:e, j:e, None], diff, -np.inf))
        later = None
        if e < c_len:
            ref = g_col[..., e - 1:e, :]
            later = left[..., e:, :] * np.exp(g_row[..., e:, :] - ref)
            to_ref = np.exp(ref - g_col[..., j:e, :])
        for out, r in zip(blocks, rights, strict=True):
            col = [np.zeros((*left.shape[:-2], j, e - j), left.dtype),
                   np.einsum("...tf,...tsf,...sf->...ts", left[..., j:e, :], decay, r[..., j:e, :])]
            if later is not None:
                col.append(later @ np.swapaxes(r[..., j:e, :] * to_ref, -1, -2))
            out.append(np.concatenate(col, axis=-2))
    return [np.concatenate(out, axis=-1) for out in blocks]


def _forward_substitution(low: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``X`` with ``(I − low) X = rhs`` for ``low`` strictly lower triangular ``(..., C, C)``:
    ``X_t = rhs_t + Σ_(s<t) low_ts X_s``, row by row."""
    out = rhs.copy()
    for t in range(1, rhs.shape[-2]):
        out[..., t, :] += (low[..., t:t + 1, :t] @ out[..., :t, :])[..., 0, :]
    return out


def _intra(qc, xc, yc, wc, vc, lc):
    """The parts of every chunk that do not depend on the state entering it (module
    docstring), for chunks ``(..., C, ·)``: ``W_Y = (I − L)⁻¹Ŷ``, ``U_V = (I − L)⁻¹MV``,
    ``Q̂ = Γ_(t,0)q_t``, ``A_x``, ``A_wV``, ``X̂ = Γ_(C,s)x_s``, ``Ŵ V``, ``Γ_(C,0)``."""
    gcum = np.cumsum(lc, axis=-2)  # G_t, t = 1..C
    gprev = np.concatenate([np.zeros_like(gcum[..., :1, :]), gcum[..., :-1, :]], axis=-2)
    low, m = _pairs(yc, gprev, (xc, wc), gcum, strict=True)  # y_tᵀΓ_(t−1,s)(x_s, w_s), s < t
    a_x, a_w = _pairs(qc, gcum, (xc, wc), gcum, strict=False)  # q_tᵀΓ_(t,s)(x_s, w_s), s ≤ t
    y_hat = np.exp(gprev) * yc
    sol = _forward_substitution(low, np.concatenate([y_hat, m @ vc], axis=-1))
    d = qc.shape[-1]
    last = gcum[..., -1:, :]
    to_end = np.exp(last - gcum)
    wv_end = np.swapaxes(to_end * wc, -1, -2) @ vc
    return (sol[..., :d], sol[..., d:], np.exp(gcum) * qc, a_x, a_w @ vc, to_end * xc, wv_end,
            np.exp(last[..., 0, :]))


def chunked(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, transition: str,
            g: np.ndarray | None = None, beta: np.ndarray | None = None,
            p: np.ndarray | None = None, a: np.ndarray | None = None,
            b: np.ndarray | None = None, chunk_size: int = 64,
            initial_state: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The chunked (UT transform) form of the recurrence (module docstring); returns
    ``(o (..., T, d_v), S_T (..., d, d_v))``, equal to :func:`recurrent` up to rounding.
    ``T`` need not be a multiple of ``chunk_size``; ``T = 0`` gives an empty output and the
    initial state."""
    chunk_size = check_chunk_size(chunk_size)
    s, (lam, x, y, w) = _sequence(q, k, v, transition,
                                  {"g": g, "beta": beta, "p": p, "a": a, "b": b}, initial_state)
    n, dv = q.shape[-2], v.shape[-1]
    if n == 0:
        return np.zeros((*q.shape[:-1], dv), q.dtype), s
    c = min(chunk_size, n)
    qc, xc, yc, wc, vc, lc = (_chunks(z, c) for z in (q, x, y, w, v, lam))
    nc = qc.shape[-3]
    w_y, u_v, q_hat, a_x, a_wv, x_end, wv_end, whole = _intra(qc, xc, yc, wc, vc, lc)
    outs = []
    for i in range(nc):
        u = w_y[..., i, :, :] @ s + u_v[..., i, :, :]
        outs.append(q_hat[..., i, :, :] @ s + a_x[..., i, :, :] @ u + a_wv[..., i, :, :])
        s = (whole[..., i, :, None] * s + np.swapaxes(x_end[..., i, :, :], -1, -2) @ u
             + wv_end[..., i, :, :])
    o = np.stack(outs, axis=-3).reshape(*q.shape[:-2], nc * c, dv)
    return o[..., :n, :], s
