"""The delta rule and its relatives, one recurrence with the transition as data, in torch.

The same transitions, forms and algorithm as :mod:`kernel_verify.impls.numpy.recurrence` (read
its docstring: ``S_t = Diag(e^(λ_t))S_(t−1) + x_t(y_tᵀS_(t−1)) + w_t v_tᵀ``, ``o_t = S_tᵀq_t``;
the chunked form is the UT transform with every decay the exponential of a difference ``≤ 0``),
batched over any leading dimensions, on the inputs' device, differentiable by autograd in
every input and the initial state (no in-place writes; the unit lower triangular system
``(I − L)U = ŶS_0 + MV`` is solved with ``torch.linalg.solve_triangular(unitriangular=True)``,
which is differentiable; decays are masked *before* the exponential, so no ``0 · ∞`` reaches a
gradient). float64 and float32 inputs are computed in their own dtype; float16/bfloat16 inputs in
float32 (the house policy of :func:`kernel_verify.impls.torch.convert.compute_dtype`), outputs
cast back to the input dtype, the state kept in the compute dtype.
"""

from __future__ import annotations

import torch

from kernel_verify.impls.recurrence_checks import (
    TRANSITIONS,
    check_chunk_size,
    check_recurrence_state,
    check_sequence_inputs,
    check_step,
    check_transition_inputs,
)
from kernel_verify.impls.torch.convert import compute_dtype
from kernel_verify.impls.torch.gated_forms import _chunks
from kernel_verify.impls.validation import check_array

__all__ = ["TRANSITIONS", "chunked", "recurrent", "recurrent_step", "transition_terms"]

#: Block of columns of the per-key-dimension in-chunk products (``_pairs``).
SUB = 16

Terms = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
_NAMES = ("g", "beta", "p", "a", "b")


def _terms(transition: str, k: torch.Tensor, g, beta, p, a, b) -> Terms:
    """``(λ, x, y, w)`` on validated inputs in the compute dtype; ``λ`` has last axis 1 for a
    gate per token (or none), ``d`` per key dimension. A sequence or one token alike."""
    lam = k.new_zeros((*k.shape[:-1], 1)) if g is None else (
        g[..., None] if g.ndim == k.ndim - 1 else g)
    if transition in ("identity", "decay"):
        return lam, torch.zeros_like(k), torch.zeros_like(k), k
    if transition == "rwkv7":
        return lam, b, a, k
    bk = beta[..., None] * k
    if transition == "delta":
        return lam, -bk, k, bk
    if transition == "gated_delta":
        return lam, -torch.exp(lam) * bk, k, bk
    if transition == "kda":
        return lam, -bk, torch.exp(lam) * k, bk
    return lam, -bk, p, bk  # comba


def _cast(inputs: dict, dtype: torch.dtype) -> list:
    return [None if inputs[n] is None else inputs[n].to(dtype) for n in _NAMES]


def transition_terms(transition: str, k: torch.Tensor, *, g: torch.Tensor | None = None,
                     beta: torch.Tensor | None = None, p: torch.Tensor | None = None,
                     a: torch.Tensor | None = None, b: torch.Tensor | None = None) -> Terms:
    """``(λ, x, y, w)`` of ``A_t = Diag(e^(λ_t)) + x_t y_tᵀ`` and the update ``w_t v_tᵀ`` for
    keys ``k (..., T, d)`` (the NumPy module's table); ``λ`` broadcast to ``(..., T, d)``; in
    the compute dtype."""
    check_array("k", k, min_ndim=2, backend="torch")
    inputs = {"g": g, "beta": beta, "p": p, "a": a, "b": b}
    check_transition_inputs(transition, k, inputs, backend="torch")
    dtype = compute_dtype(k.dtype)
    lam, x, y, w = _terms(transition, k.to(dtype), *_cast(inputs, dtype))
    return lam.expand(k.shape).clone(), x, y, w


def _start(state, lead, d, dv, like, name) -> torch.Tensor:
    state = check_recurrence_state(state, lead=lead, d=d, dv=dv, backend="torch", like=like,
                                   name=name)
    dtype = compute_dtype(like.dtype)
    if state is None:
        return like.new_zeros((*lead, d, dv), dtype=dtype)
    return state.to(dtype)


def _step(s, q_t, v_t, lam, x, y, w):
    """One token on validated inputs: ``S ← Diag(e^λ)S + x(yᵀS) + wvᵀ``, ``o = Sᵀq``."""
    ys = (y[..., None, :] @ s)[..., 0, :]
    s = (torch.exp(lam)[..., :, None] * s + x[..., :, None] * ys[..., None, :]
         + w[..., :, None] * v_t[..., None, :])
    return s, (q_t[..., None, :] @ s)[..., 0, :]


def recurrent_step(state: torch.Tensor | None, q_t: torch.Tensor, k_t: torch.Tensor,
                   v_t: torch.Tensor, *, transition: str, g_t: torch.Tensor | None = None,
                   beta_t: torch.Tensor | None = None, p_t: torch.Tensor | None = None,
                   a_t: torch.Tensor | None = None, b_t: torch.Tensor | None = None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """One token (see the NumPy twin): returns ``(S_t, o_t)``; ``state`` None is zeros."""
    check_step(q_t, k_t, v_t, backend="torch")
    inputs = {"g": g_t, "beta": beta_t, "p": p_t, "a": a_t, "b": b_t}
    check_transition_inputs(transition, k_t, inputs, backend="torch", step=True)
    s = _start(state, tuple(q_t.shape[:-1]), q_t.shape[-1], v_t.shape[-1], q_t, "state")
    dtype = s.dtype
    terms = _terms(transition, k_t.to(dtype), *_cast(inputs, dtype))
    s, o = _step(s, q_t.to(dtype), v_t.to(dtype), *terms)
    return s, o.to(v_t.dtype)


def _sequence(q, k, v, transition, inputs, initial_state):
    check_sequence_inputs(q, k, v, backend="torch")
    check_transition_inputs(transition, k, inputs, backend="torch")
    s0 = _start(initial_state, tuple(q.shape[:-2]), q.shape[-1], v.shape[-1], q,
                "initial_state")
    dtype = s0.dtype
    return s0, _terms(transition, k.to(dtype), *_cast(inputs, dtype))


def recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, transition: str,
              g: torch.Tensor | None = None, beta: torch.Tensor | None = None,
              p: torch.Tensor | None = None, a: torch.Tensor | None = None,
              b: torch.Tensor | None = None, initial_state: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """The recurrence token by token; returns ``(o (..., T, d_v), S_T (..., d, d_v))``.
    ``T = 0`` gives an empty output and the initial state."""
    s, (lam, x, y, w) = _sequence(q, k, v, transition,
                                  {"g": g, "beta": beta, "p": p, "a": a, "b": b}, initial_state)
    qd, vd = q.to(s.dtype), v.to(s.dtype)
    outs = []
    for t in range(q.shape[-2]):
        s, o_t = _step(s, qd[..., t, :], vd[..., t, :], lam[..., t, :], x[..., t, :],
                       y[..., t, :], w[..., t, :])
        outs.append(o_t)
    if not outs:
        return v.new_zeros((*q.shape[:-1], v.shape[-1])), s
    return torch.stack(outs, dim=-2).to(v.dtype), s


def _masked_exp(diff: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``exp(diff)`` where ``mask``, 0 elsewhere, masked *before* the exponential (no overflow
    above the diagonal, no ``0 · ∞`` in a gradient)."""
    zero = torch.zeros_like(diff)
    return torch.where(mask, torch.exp(torch.where(mask, diff, zero)), zero)


def _pairs(left: torch.Tensor, g_row: torch.Tensor, rights: tuple[torch.Tensor, ...],
           g_col: torch.Tensor, *, strict: bool) -> list[torch.Tensor]:
    """``P_ts = Σ_f left_tf exp(g_row_tf − g_col_sf) right_sf`` for ``s < t`` (``strict``) or
    ``s ≤ t``, 0 above, for each of ``rights`` — by blocks of :data:`SUB` columns per key
    dimension, factored at each block's last column with both exponents ``≤ 0`` (see the NumPy
    twin's ``_pairs``)."""
    c_len = left.shape[-2]
    idx = torch.arange(c_len, device=left.device)
    rows, cols = idx[:, None], idx[None, :]
    mask = cols < rows if strict else cols <= rows
    if g_row.shape[-1] == 1:
        decay = _masked_exp(g_row[..., :, None, 0] - g_col[..., None, :, 0], mask)
        return [(left @ r.transpose(-1, -2)) * decay for r in rights]
    blocks: list[list[torch.Tensor]] = [[] for _ in rights]
    for j in range(0, c_len, SUB):
        e = min(j + SUB, c_len)
        diff = g_row[..., j:e, None, :] - g_col[..., None, j:e, :]
        decay = _masked_exp(diff, mask[j:e, j:e, None])
        later = None
        if e < c_len:
            ref = g_col[..., e - 1:e, :]
            later = left[..., e:, :] * torch.exp(g_row[..., e:, :] - ref)
            to_ref = torch.exp(ref - g_col[..., j:e, :])
        for out, r in zip(blocks, rights, strict=True):
            col = [left.new_zeros((*left.shape[:-2], j, e - j)),
                   torch.einsum("...tf,...tsf,...sf->...ts", left[..., j:e, :], decay,
                                r[..., j:e, :])]
            if later is not None:
                col.append(later @ (r[..., j:e, :] * to_ref).transpose(-1, -2))
            out.append(torch.cat(col, dim=-2))
    return [torch.cat(out, dim=-1) for out in blocks]


def _intra(qc, xc, yc, wc, vc, lc):
    """The state-independent parts of every chunk (see the NumPy twin's ``_intra``)."""
    gcum = torch.cumsum(lc, dim=-2)
    gprev = torch.cat([torch.zeros_like(gcum[..., :1, :]), gcum[..., :-1, :]], dim=-2)
    low, m = _pairs(yc, gprev, (xc, wc), gcum, strict=True)
    a_x, a_w = _pairs(qc, gcum, (xc, wc), gcum, strict=False)
    y_hat = torch.exp(gprev) * yc
    # (I − L) X = R: the diagonal of −L (zero) is not read, unitriangular takes it as 1
    sol = torch.linalg.solve_triangular(-low, torch.cat([y_hat, m @ vc], dim=-1), upper=False,
                                        unitriangular=True)
    d = qc.shape[-1]
    last = gcum[..., -1:, :]
    to_end = torch.exp(last - gcum)
    wv_end = (to_end * wc).transpose(-1, -2) @ vc
    return (sol[..., :d], sol[..., d:], torch.exp(gcum) * qc, a_x, a_w @ vc, to_end * xc,
            wv_end, torch.exp(last[..., 0, :]))


def chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, transition: str,
            g: torch.Tensor | None = None, beta: torch.Tensor | None = None,
            p: torch.Tensor | None = None, a: torch.Tensor | None = None,
            b: torch.Tensor | None = None, chunk_size: int = 64,
            initial_state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The chunked (UT transform) form (see the NumPy twin); returns ``(o (..., T, d_v),
    S_T (..., d, d_v))``. ``T`` need not be a multiple of ``chunk_size``; ``T = 0`` gives an
    empty output and the initial state."""
    chunk_size = check_chunk_size(chunk_size)
    s, (lam, x, y, w) = _sequence(q, k, v, transition,
                                  {"g": g, "beta": beta, "p": p, "a": a, "b": b}, initial_state)
    n, dv = q.shape[-2], v.shape[-1]
    if n == 0:
        return v.new_zeros((*q.shape[:-1], dv)), s
    c = min(chunk_size, n)
    qc, xc, yc, wc, vc, lc = (_chunks(z, c) for z in (q.to(s.dtype), x, y, w, v.to(s.dtype),
                                                      lam))
    nc = qc.shape[-3]
    w_y, u_v, q_hat, a_x, a_wv, x_end, wv_end, whole = _intra(qc, xc, yc, wc, vc, lc)
    outs = []
    for i in range(nc):
        u = w_y[..., i, :, :] @ s + u_v[..., i, :, :]
        outs.append(q_hat[..., i, :, :] @ s + a_x[..., i, :, :] @ u + a_wv[..., i, :, :])
        s = (whole[..., i, :, None] * s + x_end[..., i, :, :].transpose(-1, -2) @ u
             + wv_end[..., i, :, :])
    o = torch.stack(outs, dim=-3).reshape(*q.shape[:-2], nc * c, dv)
    return o[..., :n, :].to(v.dtype), s
