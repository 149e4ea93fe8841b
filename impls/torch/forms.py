"""The forms of causal linear attention with an explicit state, in torch (docs/math.md §13).

The same forms, states and algorithms as :mod:`kernel_verify.impls.numpy.forms` (read its docstring
for the formulas), batched over any leading dimensions and run on the inputs' device.
float16/bfloat16 inputs are computed in float32 (prefix sums and log-sum-exps in half precision lose
most of their digits): outputs are cast back to the input dtype, and the state is kept in the
compute dtype (float32 for half inputs; an initial state of any floating dtype is converted to it).
The chunked and parallel forms take ``cu_seqlens`` (packed sequences) as the NumPy forms do.

**Gradients at an empty feature.** A log-space state may hold ``L_f = −∞`` (no key has weighted
feature f yet; ``V̄_f = 0``). The outputs and the final state depend on ``L_f`` only through
weights ``w_f = exp(L_f − s)`` with a shift ``s`` that stays finite as ``L_f → −∞`` (it is set by
the other entries, or it is the shift of the in-chunk keys), each multiplying a bounded factor
``g`` (a value ``V̄_f``, a query weight ``e^(lq_f)``): ``∂(w_f g)/∂L_f = w_f g → 0``. The gradient
with respect to an empty ``L_f`` is therefore 0 — what the recurrent step's double-``where`` merge
gives. The chunked forms compute a log-cumulative-sum whose derivative at an all-empty prefix is
``exp(−∞ − (−∞))`` = NaN; :func:`_start` hands the forms ``L`` with the empty entries detached
(a ``where`` whose gradient is exactly 0 there), so that limit, 0, is what comes back.
"""

from __future__ import annotations

import torch

from kernel_verify.impls.attention_checks import denominator_guard
from kernel_verify.impls.forms_checks import (
    check_chunk_size,
    check_form_arrays,
    check_state,
    check_step_inputs,
)
from kernel_verify.impls.packed import run_packed
from kernel_verify.impls.sequence_validation import check_nonempty_lead
from kernel_verify.impls.torch.convert import compute_dtype

State = tuple[torch.Tensor, torch.Tensor]


def empty_state(lead: tuple[int, ...], m: int, dv: int, *, like: torch.Tensor,
                log: bool = False) -> State:
    """The state before any token, in the compute dtype of ``like`` on its device:
    ``(S, z) = (0, 0)``, or ``(L, V̄) = (−∞, 0)`` for ``log``."""
    dtype = compute_dtype(like.dtype)
    if log:
        return (like.new_full((*lead, m), float("-inf"), dtype=dtype),
                like.new_zeros((*lead, m, dv), dtype=dtype))
    return like.new_zeros((*lead, m, dv), dtype=dtype), like.new_zeros((*lead, m), dtype=dtype)


def _start(state, lead, m, dv, like, *, log: bool, name: str = "initial_state") -> State:
    state = check_state(state, lead=lead, m=m, dv=dv, log=log, backend="torch", like=like,
                        name=name)
    if state is None:
        return empty_state(lead, m, dv, like=like, log=log)
    dtype = compute_dtype(like.dtype)
    first, second = state[0].to(dtype), state[1].to(dtype)
    if log:  # an empty feature (L_f = −∞) gets gradient 0, its limit (module docstring)
        first = torch.where(torch.isneginf(first), first.detach(), first)
    return first, second


def _pad_chunks(x: torch.Tensor, chunk: int) -> torch.Tensor:
    """``x (..., T, f)`` zero-padded along T to a multiple of ``chunk``, as ``(..., T/C, C, f)``."""
    n = x.shape[-2]
    nc = -(-n // chunk)
    pad = nc * chunk - n
    if pad:
        x = torch.nn.functional.pad(x, (0, 0, 0, pad))
    return x.reshape(*x.shape[:-2], nc, chunk, x.shape[-1])


# ----------------------------------------------------------------------------- plain state
def plain_chunked_sums(fq: torch.Tensor, fk: torch.Tensor, v: torch.Tensor, chunk: int,
                       s0: torch.Tensor, z0: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor, State]:
    """Numerators, denominators and final state of the chunk-parallel form (compute dtype)."""
    n, dv = fq.shape[-2], v.shape[-1]
    if n == 0:
        return (fq.new_zeros((*fq.shape[:-1], dv)), fq.new_ones((*fq.shape[:-1], 1)),
                (s0.clone(), z0.clone()))
    chunk = min(chunk, n)
    qc, kc, vc = _pad_chunks(fq, chunk), _pad_chunks(fk, chunk), _pad_chunks(v, chunk)
    kct = kc.transpose(-1, -2)
    kv = kct @ vc  # (..., nc, m, dv)
    ks = kc.sum(dim=-2)  # (..., nc, m)
    s_all = torch.cumsum(torch.cat([s0.unsqueeze(-3), kv], dim=-3), dim=-3)
    z_all = torch.cumsum(torch.cat([z0.unsqueeze(-2), ks], dim=-2), dim=-2)
    within = torch.tril(qc @ kct)
    num = qc @ s_all[..., :-1, :, :] + within @ vc
    den = qc @ z_all[..., :-1, :].unsqueeze(-1) + within.sum(dim=-1, keepdim=True)
    lead = fq.shape[:-2]
    num = num.reshape(*lead, -1, dv)[..., :n, :]
    den = den.reshape(*lead, -1, 1)[..., :n, :]
    return num, den, (s_all[..., -1, :, :], z_all[..., -1, :])


def _packed(form, arrays, initial_state, cu_seqlens, *, log: bool = False, **kw):
    """``form`` on each packed sequence (:func:`kernel_verify.impls.packed.run_packed`), after
    the checks of the arrays themselves."""
    names = check_form_arrays(arrays, log=log, backend="torch")
    return run_packed(lambda a, b, c, s: form(a, b, c, initial_state=s, **kw), arrays, names,
                      cu_seqlens=cu_seqlens, initial_state=initial_state)


def _plain(phi_q, phi_k, v, chunk, initial_state, zero_denominator):
    check_form_arrays((phi_q, phi_k, v), log=False, backend="torch")
    lead, m, dv = tuple(phi_q.shape[:-2]), phi_q.shape[-1], v.shape[-1]
    s0, z0 = _start(initial_state, lead, m, dv, phi_q, log=False)
    dtype = compute_dtype(phi_q.dtype)
    fq, fk, vw = phi_q.to(dtype), phi_k.to(dtype), v.to(dtype)
    chunk = max(phi_q.shape[-2], 1) if chunk is None else chunk
    num, den, state = plain_chunked_sums(fq, fk, vw, chunk, s0, z0)
    return (num / denominator_guard(den, zero_denominator)).to(v.dtype), state


def linear_attention_chunked(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, *,
                             chunk_size: int = 64, initial_state: State | None = None,
                             zero_denominator: str = "raise", cu_seqlens: object = None
                             ) -> tuple[torch.Tensor, State]:
    """Chunk-parallel causal linear attention with the plain state ``(S, z)`` in and out; see
    :func:`kernel_verify.impls.numpy.forms.linear_attention_chunked`."""
    chunk_size = check_chunk_size(chunk_size)
    if cu_seqlens is not None:
        return _packed(linear_attention_chunked, (phi_q, phi_k, v), initial_state, cu_seqlens,
                       chunk_size=chunk_size, zero_denominator=zero_denominator)
    return _plain(phi_q, phi_k, v, chunk_size, initial_state, zero_denominator)


def linear_attention_parallel(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, *,
                              initial_state: State | None = None,
                              zero_denominator: str = "raise", cu_seqlens: object = None
                              ) -> tuple[torch.Tensor, State]:
    """The parallel form (one chunk of T); see
    :func:`kernel_verify.impls.numpy.forms.linear_attention_parallel`."""
    if cu_seqlens is not None:
        return _packed(linear_attention_parallel, (phi_q, phi_k, v), initial_state, cu_seqlens,
                       zero_denominator=zero_denominator)
    return _plain(phi_q, phi_k, v, None, initial_state, zero_denominator)


def linear_attention_step(state: State | None, phi_q_t: torch.Tensor, phi_k_t: torch.Tensor,
                          v_t: torch.Tensor, *, zero_denominator: str = "raise"
                          ) -> tuple[State, torch.Tensor]:
    """One token of the recurrence; see
    :func:`kernel_verify.impls.numpy.forms.linear_attention_step`."""
    check_step_inputs(phi_q_t, phi_k_t, v_t, names=("phi_q_t", "phi_k_t", "v_t"),
                      backend="torch")
    check_nonempty_lead("phi_q_t", phi_q_t, phi_q_t.ndim - 1)
    lead, m, dv = tuple(phi_q_t.shape[:-1]), phi_q_t.shape[-1], v_t.shape[-1]
    s, z = _start(state, lead, m, dv, phi_q_t, log=False, name="state")
    dtype = compute_dtype(phi_q_t.dtype)
    fq, fk, vw = phi_q_t.to(dtype), phi_k_t.to(dtype), v_t.to(dtype)
    s = s + fk.unsqueeze(-1) * vw.unsqueeze(-2)
    z = z + fk
    num = (fq.unsqueeze(-2) @ s).squeeze(-2)
    den = (fq * z).sum(dim=-1, keepdim=True)
    return (s, z), (num / denominator_guard(den, zero_denominator)).to(v_t.dtype)


# ------------------------------------------------------------------------- log-space state
def _softmax_safe(logits: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis; a row of only −∞ gives 0 (an empty past), never NaN."""
    top = logits.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(logits - top)
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def merge_log_states(first: State, second: State) -> State:
    """The exact associative merge of two log-space states; see
    :func:`kernel_verify.impls.numpy.forms.merge_log_states`."""
    (l1, v1), (l2, v2) = first, second
    # An empty feature on both sides stays empty; it is kept out of logaddexp (whose gradient at
    # (−∞, −∞) is NaN) by the double-where: only finite values reach the differentiated ops.
    empty = torch.isneginf(l1) & torch.isneginf(l2)
    zero = torch.zeros_like(l1)
    safe = torch.logaddexp(torch.where(empty, zero, l1), torch.where(empty, zero, l2))
    w1 = torch.where(empty, zero, torch.exp(l1 - safe))
    w2 = torch.where(empty, zero, torch.exp(l2 - safe))
    lm = torch.where(empty, torch.full_like(l1, float("-inf")), safe)
    return lm, w1.unsqueeze(-1) * v1 + w2.unsqueeze(-1) * v2


def _scan_log_states(log_norm: torch.Tensor, v_bar: torch.Tensor) -> State:
    """Inclusive Hillis–Steele scan of the merge along the entry axis (⌈log₂ E⌉ steps)."""
    n = log_norm.shape[-2]
    step = 1
    while step < n:
        merged = merge_log_states((log_norm[..., :-step, :], v_bar[..., :-step, :, :]),
                                  (log_norm[..., step:, :], v_bar[..., step:, :, :]))
        log_norm = torch.cat([log_norm[..., :step, :], merged[0]], dim=-2)
        v_bar = torch.cat([v_bar[..., :step, :, :], merged[1]], dim=-3)
        step *= 2
    return log_norm, v_bar


def _exp_minus(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """``exp(x − shift)`` with one fresh tensor (the exponential taken in place on the
    difference) when no gradient is recorded."""
    diff = x - shift
    return torch.exp(diff) if diff.requires_grad else diff.exp_()


def _chunk_sums(kc: torch.Tensor, vc: torch.Tensor, n: int) -> tuple[torch.Tensor, ...]:
    """Every chunk's own state as ``(M, S̃, Z)``: with the per-feature key maximum ``M_c``,
    ``e = exp(lk − M_c) ≤ 1``, ``S̃_c = Σ_j e_j v_jᵀ``, ``Z_c = Σ_j e_j ≥ 1``, so that
    ``L_c = M_c + log Z_c`` and ``V̄_c = S̃_c / Z_c`` (rows ≥ n, the tail padding, left out)."""
    nc, chunk = kc.shape[-3], kc.shape[-2]
    if nc * chunk > n:
        valid = (torch.arange(nc * chunk, device=kc.device) < n).reshape(nc, chunk, 1)
        kc = kc.masked_fill(~valid, float("-inf"))
    top = kc.detach().amax(dim=-2, keepdim=True)  # finite: every chunk has a real key
    e = _exp_minus(kc, top)
    return top.squeeze(-2), e.transpose(-1, -2) @ vc, e.sum(dim=-2)


def _past_of_chunks(qc, eq, a, big_m, s_tilde, past, tiny):
    """``(past weight, past value)`` of every query of every chunk (:func:`log_chunked`'s
    docstring): ``a_i + t_c + log(eq_i·u_c)`` and ``eq_i·U_c / eq_i·u_c``, near-underflow rows
    recomputed exactly, ``-inf`` where nothing precedes the chunk."""
    nc, n_e = qc.shape[-3], past.shape[-2] - 1
    # the past of every chunk (rows c = 0..nc−1 of the chunks; with an initial state, the
    # past of chunk c is entries < c + 1)
    rows = past[..., n_e - nc:n_e, :]  # (..., nc, m)
    t = rows.detach().amax(dim=-1, keepdim=True)
    empty = torch.isneginf(t)  # (..., nc, 1): nothing before this chunk
    t = torch.where(empty, torch.zeros_like(t), t)
    # entries before chunk c are e < c + off (off = 1 with an initial state, else 0)
    later = torch.ones(nc, n_e, dtype=torch.bool, device=qc.device).triu(n_e - nc).unsqueeze(-1)
    w = torch.exp((big_m.unsqueeze(-3) - t.unsqueeze(-2)).masked_fill(later, float("-inf")))
    u_state = (w.movedim(-1, -3) @ s_tilde.movedim(-2, -3)).movedim(-3, -2)  # (..., nc, m, dv)
    u_norm = torch.exp(rows - t)  # (..., nc, m)
    p = eq @ u_norm.unsqueeze(-1)  # (..., nc, C, 1)
    # p below tiny: an empty past (masked below) or a near-underflow row (recomputed below). Such
    # entries get 1 here, so that no 1/p or log p of a tiny p enters the backward: autograd
    # multiplies an overwritten entry's gradient 0 by its local derivative, and 0·inf = NaN.
    p_safe = torch.where(p >= tiny, p, torch.ones_like(p))
    past_value = (eq @ u_state) / p_safe
    past_w = a + t.unsqueeze(-1) + torch.log(p_safe)
    bad = (p < tiny) & ~empty.unsqueeze(-1)
    if bool(bad.any()):  # near-underflow rows: the exact two softmaxes over features
        safe = torch.where(torch.isneginf(rows), torch.zeros_like(rows), rows)
        w_exact = torch.exp((big_m.unsqueeze(-3) - safe.unsqueeze(-2)).masked_fill(
            later, float("-inf")))  # per-feature normalisation: V̄ of the past
        vbar_rows = (w_exact.movedim(-1, -3) @ s_tilde.movedim(-2, -3)).movedim(-3, -2)
        logits = qc + rows.unsqueeze(-2)
        past_w = torch.where(bad, torch.logsumexp(logits, dim=-1, keepdim=True), past_w)
        past_value = torch.where(bad, _softmax_safe(logits) @ vbar_rows, past_value)
    past_w = past_w.masked_fill(empty.unsqueeze(-1), float("-inf"))
    return past_w, past_value


def _pair_logits(qc, kc, eq, a, b, tiny):
    """The in-chunk pair weights ``a_i + b_j + log(eq_i·ek_j)`` for ``j ≤ i`` (near-underflow
    pairs by the exact log-sum-exp), ``-inf`` above the diagonal."""
    chunk = qc.shape[-2]
    prod = eq @ _exp_minus(kc, b).transpose(-1, -2)  # (..., nc, C, C)
    bad = prod < tiny  # recomputed below; log of 1 here keeps NaN out of the backward (above)
    pair = a + b.transpose(-1, -2) + torch.log(torch.where(bad, torch.ones_like(prod), prod))
    if bool(bad.any()):  # near-underflow pairs: the exact log-sum-exp
        idx = bad.nonzero(as_tuple=True)
        pair = pair.index_put(idx, torch.logsumexp(qc[idx[:-1]] + kc[(*idx[:-2], idx[-1])],
                                                   dim=-1))
    future = torch.ones(chunk, chunk, dtype=torch.bool, device=qc.device).triu(1)
    pair = pair.masked_fill(future, float("-inf"))
    return pair


def log_chunked(lq: torch.Tensor, lk: torch.Tensor, v: torch.Tensor, chunk: int,
                l0: torch.Tensor | None, vb0: torch.Tensor | None
                ) -> tuple[torch.Tensor, State]:
    """The chunk-parallel log-space form on validated compute-dtype inputs (``l0, vb0`` None:
    the empty initial state).

    Entries ``e`` = (initial state,) chunk 0, chunk 1, … with ``(M_e, S̃_e, Z_e)``
    (:func:`_chunk_sums`; the initial state is ``(L_0, V̄_0, 1)``) and ``L_e = M_e + log Z_e``.
    The past of chunk c is ``P_c = logsumexp_(e<c) L_e`` (one ``logcumsumexp``) and, with the
    per-chunk shift ``t_c = max_f P_(c,f)``, ``U_c = Σ_(e<c) e^(M_e − t_c) S̃_e`` and
    ``u_c = e^(P_c − t_c)`` (``= Σ_(e<c) e^(M_e − t_c) Z_e``): every factor ≤ 1, one masked
    product over entries (memory ``(T/C)²·m``), no loop over chunks. A query's past weight and
    value are then ``a_i + t_c + log(eq_i·u_c)`` and ``eq_i·U_c / eq_i·u_c`` with
    ``eq_i = exp(lq_i − a_i) ≤ 1``, ``a_i = max_f lq_if`` — two products (rows where ``eq_i·u_c``
    is below ``8·m·tiny`` are recomputed exactly, as for the pair weights). In the chunk, the
    pair weights ``a_i + b_j + log(eq_i·ek_j)`` (``ek_j = exp(lk_j − b_j)``) for ``j ≤ i``; the
    output is the softmax over {past, j ≤ i} applied to [past value, v_j]. The final state:
    ``L = logsumexp_e L_e``, ``V̄ = Σ_e e^(M_e − L) S̃_e``.
    """
    n, m, dv = lq.shape[-2], lq.shape[-1], v.shape[-1]
    lead = tuple(lq.shape[:-2])
    if n == 0:
        if l0 is None:
            l0, vb0 = empty_state(lead, m, dv, like=lq, log=True)
        return v.new_zeros((*lead, 0, dv)), (l0.clone(), vb0.clone())
    chunk = min(chunk, n)
    qc, kc, vc = _pad_chunks(lq, chunk), _pad_chunks(lk, chunk), _pad_chunks(v, chunk)
    nc = qc.shape[-3]
    big_m, s_tilde, z = _chunk_sums(kc, vc, n)
    log_ent = big_m + torch.log(z)  # (..., nc, m)
    if l0 is not None:
        big_m = torch.cat([l0.unsqueeze(-2), big_m], dim=-2)
        log_ent = torch.cat([l0.unsqueeze(-2), log_ent], dim=-2)
        s_tilde = torch.cat([vb0.unsqueeze(-3), s_tilde], dim=-3)
    acc = torch.logcumsumexp(log_ent, dim=-2)  # merge of entries ≤ e
    past = torch.cat([torch.full_like(acc[..., :1, :], float("-inf")), acc], dim=-2)  # (E+1)
    # the final state: per-feature normalisation
    w_fin = torch.exp(big_m - acc[..., -1:, :])  # (..., E, m), ≤ 1
    final = (acc[..., -1, :], (w_fin.unsqueeze(-1) * s_tilde).sum(dim=-3))
    a = qc.detach().amax(dim=-1, keepdim=True)
    b = kc.detach().amax(dim=-1, keepdim=True)
    eq = _exp_minus(qc, a)
    tiny = 8 * m * torch.finfo(lq.dtype).tiny
    past_w, past_value = _past_of_chunks(qc, eq, a, big_m, s_tilde, past, tiny)
    pair = _pair_logits(qc, kc, eq, a, b, tiny)
    top = torch.maximum(pair.detach().amax(dim=-1, keepdim=True), past_w.detach())
    w_pair = torch.exp(pair - top)
    w_past = torch.exp(past_w - top)
    den = w_past + w_pair.sum(dim=-1, keepdim=True)  # ≥ 1: the maximum contributes 1
    out = (w_past * past_value + w_pair @ vc) / den
    out = out.reshape(*lead, nc * chunk, dv)[..., :n, :]
    return out, final


def _log(lq, lk, v, chunk, initial_state):
    check_form_arrays((lq, lk, v), log=True, backend="torch")
    lead, m, dv = tuple(lq.shape[:-2]), lq.shape[-1], v.shape[-1]
    l0, vb0 = (None, None) if initial_state is None else _start(initial_state, lead, m, dv, lq,
                                                                log=True)
    dtype = compute_dtype(lq.dtype)
    chunk = max(lq.shape[-2], 1) if chunk is None else chunk
    out, state = log_chunked(lq.to(dtype), lk.to(dtype), v.to(dtype), chunk, l0, vb0)
    return out.to(v.dtype), state


def log_linear_attention_chunked(log_phi_q: torch.Tensor, log_phi_k: torch.Tensor,
                                 v: torch.Tensor, *, chunk_size: int = 64,
                                 initial_state: State | None = None, cu_seqlens: object = None
                                 ) -> tuple[torch.Tensor, State]:
    """Chunk-parallel causal attention from log-features with the state ``(L, V̄)``; see
    :func:`kernel_verify.impls.numpy.forms.log_linear_attention_chunked`."""
    chunk_size = check_chunk_size(chunk_size)
    if cu_seqlens is not None:
        return _packed(log_linear_attention_chunked, (log_phi_q, log_phi_k, v), initial_state,
                       cu_seqlens, chunk_size=chunk_size, log=True)
    return _log(log_phi_q, log_phi_k, v, chunk_size, initial_state)


def log_linear_attention_parallel(log_phi_q: torch.Tensor, log_phi_k: torch.Tensor,
                                  v: torch.Tensor, *, initial_state: State | None = None,
                                  cu_seqlens: object = None) -> tuple[torch.Tensor, State]:
    """The parallel log-space form (one chunk of T); ``cu_seqlens``: packed sequences."""
    if cu_seqlens is not None:
        return _packed(log_linear_attention_parallel, (log_phi_q, log_phi_k, v), initial_state,
                       cu_seqlens, log=True)
    return _log(log_phi_q, log_phi_k, v, None, initial_state)


def log_linear_attention_step(state: State | None, log_phi_q_t: torch.Tensor,
                              log_phi_k_t: torch.Tensor, v_t: torch.Tensor
                              ) -> tuple[State, torch.Tensor]:
    """One token in log space; see
    :func:`kernel_verify.impls.numpy.forms.log_linear_attention_step`."""
    check_step_inputs(log_phi_q_t, log_phi_k_t, v_t,
                      names=("log_phi_q_t", "log_phi_k_t", "v_t"), backend="torch")
    check_nonempty_lead("log_phi_q_t", log_phi_q_t, log_phi_q_t.ndim - 1)
    lead, m, dv = tuple(log_phi_q_t.shape[:-1]), log_phi_q_t.shape[-1], v_t.shape[-1]
    state = _start(state, lead, m, dv, log_phi_q_t, log=True, name="state")
    dtype = compute_dtype(log_phi_q_t.dtype)
    lq, lk, vw = log_phi_q_t.to(dtype), log_phi_k_t.to(dtype), v_t.to(dtype)
    ln, vb = merge_log_states(state, (lk, vw.unsqueeze(-2).expand(*lead, m, dv)))
    out = (_softmax_safe(lq + ln).unsqueeze(-2) @ vb).squeeze(-2)
    return (ln, vb), out.to(v_t.dtype)


def log_state_sums(state: State) -> State:
    """``(S, z) = (e^L·V̄, e^L)`` of a log-space state."""
    ln, vb = state
    z = torch.exp(ln)
    return z.unsqueeze(-1) * vb, z


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
