"""Exact softmax attention and linear (kernelised) attention in torch, device-generic.

The same algorithms and arguments as :mod:`kernel_verify.impls.numpy.attention` (read its docstrings
for the formulas), batched over any leading dimensions — typically ``(batch, heads, n, d)`` — and
run on the device of the inputs. float16/bfloat16 inputs are computed in float32 (prefix sums and
log-sum-exps in half precision lose most of their digits) and the output is cast back to the
input dtype. Every normalisation (softmax shift, log-space state) is per batch element and head;
nothing is ever reduced across the batch.
"""

from __future__ import annotations

import math

import torch

from kernel_verify.impls.attention_checks import (
    SCORE_REMEDY,
    check_attention_inputs,
    check_scale,
    denominator_guard,
)
from kernel_verify.impls.torch.convert import compute_dtype
from kernel_verify.impls.validation import check_finite_result, check_positive_int


def _work(*xs: torch.Tensor) -> list[torch.Tensor]:
    dtype = compute_dtype(xs[0].dtype)
    return [x.to(dtype) for x in xs]


def softmax_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """Exact ``softmax(q kᵀ·scale + mask) v``; ``scale = 1/√d`` by default."""
    check_attention_inputs(q, k, v, causal=causal, names=("q", "k", "v"), backend="torch")
    scale = check_scale(scale)
    n, d = q.shape[-2], q.shape[-1]
    out_shape = (*q.shape[:-1], v.shape[-1])
    if n == 0 or k.shape[-2] == 0:
        return q.new_zeros(out_shape)
    qw, kw, vw = _work(q, k, v)
    s = 1.0 / math.sqrt(d) if scale is None else float(scale)
    scores = (qw @ kw.transpose(-1, -2)) * s
    check_finite_result("softmax_attention scores q·kᵀ·scale", scores, SCORE_REMEDY)
    if causal:
        future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ vw).to(q.dtype)


def linear_attention(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    chunk_size: int = 64,
    zero_denominator: str = "raise",
) -> torch.Tensor:
    """Kernelised attention from features; see
    :func:`kernel_verify.impls.numpy.attention.linear_attention`."""
    check_attention_inputs(
        phi_q, phi_k, v, causal=causal, names=("phi_q", "phi_k", "v"), backend="torch"
    )
    chunk_size = check_positive_int("chunk_size", chunk_size)
    fq, fk, vw = _work(phi_q, phi_k, v)
    if causal:
        num, den = _causal_sums(fq, fk, vw, chunk_size)
    else:
        num_den = fq @ (fk.transpose(-1, -2) @ with_ones(vw))  # Σ_j φ(q)ᵀφ(k_j)[v_j 1]
        num, den = num_den[..., :-1], num_den[..., -1:]
    return (num / denominator_guard(den, zero_denominator)).to(v.dtype)


def _causal_sums(
    fq: torch.Tensor, fk: torch.Tensor, v: torch.Tensor, chunk: int
) -> tuple[torch.Tensor, torch.Tensor]:
    n, m, dv = fq.shape[-2], fq.shape[-1], v.shape[-1]
    lead = fq.shape[:-2]
    state = fq.new_zeros((*lead, m, dv))
    z = fq.new_zeros((*lead, m, 1))
    nums, dens = [], []
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        q_c, k_c, v_c = fq[..., start:stop, :], fk[..., start:stop, :], v[..., start:stop, :]
        within = torch.tril(q_c @ k_c.transpose(-1, -2))
        nums.append(q_c @ state + within @ v_c)
        dens.append(q_c @ z + within.sum(dim=-1, keepdim=True))
        state = state + k_c.transpose(-1, -2) @ v_c
        z = z + k_c.sum(dim=-2).unsqueeze(-1)
    if not nums:
        return fq.new_zeros((*lead, 0, dv)), fq.new_ones((*lead, 0, 1))
    return torch.cat(nums, dim=-2), torch.cat(dens, dim=-2)


def log_linear_attention(
    log_phi_q: torch.Tensor,
    log_phi_k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    chunk_size: int = 64,
) -> torch.Tensor:
    """Stable linear attention from log-features; see
    :func:`kernel_verify.impls.numpy.attention.log_linear_attention` for the formulas."""
    check_attention_inputs(
        log_phi_q, log_phi_k, v, causal=causal, names=("log_phi_q", "log_phi_k", "v"),
        backend="torch",
    )
    chunk_size = check_positive_int("chunk_size", chunk_size)
    return _log_linear(log_phi_q, log_phi_k, v, causal=causal, chunk_size=chunk_size)


def _log_linear(
    log_phi_q: torch.Tensor, log_phi_k: torch.Tensor, v: torch.Tensor, *, causal: bool,
    chunk_size: int, overwrite: bool = False,
) -> torch.Tensor:
    """The computation of :func:`log_linear_attention` on validated inputs (no checks).

    ``overwrite=True`` lets the non-causal path take its exponentials inside the caller's
    ``log_phi_q``/``log_phi_k`` (which then hold garbage): for a caller that owns them, it saves
    two fresh ``n×m`` tensors, whose first touch (page faults) costs more than the exponentials.
    """
    out_shape = (*log_phi_q.shape[:-1], v.shape[-1])
    if log_phi_q.shape[-2] == 0 or log_phi_k.shape[-2] == 0:
        return v.new_zeros(out_shape)
    lq, lk, vw = _work(log_phi_q, log_phi_k, v)
    if not causal:
        return _noncausal_log(lq, lk, vw, overwrite=overwrite).to(v.dtype)
    return _causal_log(lq, lk, vw, chunk_size).to(v.dtype)


def with_ones(v: torch.Tensor) -> torch.Tensor:
    """``[v 1]``: one matrix product then gives numerators and denominators together."""
    return torch.cat([v, v.new_ones((*v.shape[:-1], 1))], dim=-1)


def _noncausal_log(
    lq: torch.Tensor, lk: torch.Tensor, v: torch.Tensor, *, overwrite: bool = False
) -> torch.Tensor:
    """``out_i = Σ_f softmax_f(lq_if + L_f)·V̄_f`` (README "Stable positive features") as
    two shifted exponentials and two matrix products.

    With the per-feature key maximum ``M_f = max_j lk_jf`` and ``E_jf = exp(lk_jf − M_f) ≤ 1``,
    ``[S_f  Z_f] = Σ_j E_jf [v_j 1]`` (one product with ``[V 1]``) gives ``L_f = M_f + log Z_f``
    and ``V̄_f = S_f/Z_f``, so ``out_i = Σ_f P_if S_f / Σ_f P_if Z_f`` with
    ``P_if = exp(lq_if + M_f − a_i)``, ``a_i = max_f(lq_if + M_f)``: one product with
    ``[S Z]``. Every exponent is ≤ 0, and ``Z_f ≥ 1`` (its maximal key contributes 1) and
    ``P_if = 1`` at the maximising feature, so the denominator is ≥ 1: no underflow to 0/0 for any
    mismatch of query and key features. The shifts are constants of the softmaxes (detached); the
    exponentials are taken in place on fresh tensors, and no copy of a feature matrix is made.
    """
    shift_k = lk.detach().amax(dim=-2, keepdim=True)  # (..., 1, m)
    e_k = (lk.sub_(shift_k) if overwrite else torch.sub(lk, shift_k)).exp_()
    s_z = e_k.transpose(-1, -2) @ with_ones(v)  # (..., m, dv + 1)
    p = lq.add_(shift_k) if overwrite else torch.add(lq, shift_k)
    p = p.sub_(p.detach().amax(dim=-1, keepdim=True)).exp_()
    num_den = p @ s_z
    return num_den[..., :-1] / num_den[..., -1:]


def _pair_log_weights(lq: torch.Tensor, lk: torch.Tensor) -> torch.Tensor:
    """``logsumexp_f(lq_if + lk_jf)`` for every pair as a matrix product of shifted
    exponentials, with the exact log-sum-exp for pairs whose product is near underflow; see
    :func:`kernel_verify.impls.numpy.attention._pair_log_weights` for the accuracy argument."""
    a = lq.amax(dim=-1, keepdim=True)
    b = lk.amax(dim=-1, keepdim=True)
    prod = torch.exp(lq - a) @ torch.exp(lk - b).transpose(-1, -2)
    bad = prod < 8 * lq.shape[-1] * torch.finfo(lq.dtype).tiny
    # log of 1 where the pair is recomputed below: log(0)'s backward is 0/0 = NaN even for an
    # entry that is overwritten (a NaN gradient behind a finite output, issue 20)
    pair = a + b.transpose(-1, -2) + torch.log(torch.where(bad, torch.ones_like(prod), prod))
    if bool(bad.any()):
        idx = bad.nonzero(as_tuple=True)
        lead, i, j = idx[:-2], idx[-2], idx[-1]
        pair[idx] = torch.logsumexp(lq[(*lead, i)] + lk[(*lead, j)], dim=-1)
    return pair


def _causal_log(lq: torch.Tensor, lk: torch.Tensor, v: torch.Tensor, chunk: int) -> torch.Tensor:
    """Causal ``out_i = Σ_{j≤i} Σ_f e^(lq_if + lk_jf) v_j / Σ_{j≤i} Σ_f e^(lq_if + lk_jf)`` as
    chunked linear attention on shifted exponentials, every one ≤ 1, taken once per entry.

    Chunk c (rows ``R_c``) gets the per-feature running key maximum ``N_f = max_{j ≤ max R_c}
    lk_jf`` (past chunks and its own keys), key weights ``E_jf = e^(lk_jf − N_f)`` and query
    weights ``Q_if = e^(lq_if + N_f − a_i)``, ``a_i = max_f(lq_if + N_f)``. Then
    ``[num_i den_i] = Q_i·S + Σ_{j ∈ R_c, j ≤ i} (Q_i·E_j)[v_j 1]`` with the past state
    ``S_f = Σ_{j < min R_c} e^(lk_jf − N_f)[v_j 1]``, carried from chunk to chunk as
    ``S ← (S + E_cᵀ[V_c 1])·e^(N_f − N'_f)`` (N is nondecreasing: the factor is ≤ 1). The shifts
    ``N_f`` and ``a_i`` multiply numerator and denominator of row i alike and cancel exactly: the
    quotient is the formula above. Cost: one exponential per entry of ``lq`` and ``lk`` (as in the
    non-causal path) and, per chunk of C rows, the products ``Q[S Eᵀ]`` and ``tril(QEᵀ)[V 1]``.

    Rounding (bounds of ``tests/test_attention.py::test_log_space_path_equals_plain_path``): an
    exponent ``lq + N − a`` or ``lk − N`` carries an absolute error ≤ 3u(|lq| + |lk|max) and the
    chain of state rescalings ≤ u·Σ_c |N − N'| ≤ 2u·max|lk| (N is monotone: the sum telescopes)
    plus one rounding per rescaling, so every product term has a relative error ≤ e^δ' − 1 with
    δ' ≤ u(3|lq| + 7|lk|max + n + 3) ≤ δ = γ_(n+m+6)(Z + 1); the sums are those of the plain
    path's bound. Underflow: every factor is ≤ 1, so a result below ``tiny`` (subnormal or
    flushed) costs an absolute error < tiny once per exponential, rescaled state entry and product
    with Q, together < 3m(n + 1)·tiny on ``den_i`` (S_fz ≤ n) and that times max|v| on ``num_i``.
    Rows with ``den_i < 3m(n + 1)·tiny/u`` (a denominator that underflowed, e.g. the maxima of
    the row's feature weights sit on keys it does not see: later keys of its chunk, or keys far
    larger than its own past) are recomputed exactly as ``softmax_{j ≤ i}(logsumexp_f(lq_if +
    lk_jf)) V``; every other row has an underflow error ≤ u·max|v| relative to its denominator.
    """
    n, m, dv = lq.shape[-2], lq.shape[-1], v.shape[-1]
    lead = lq.shape[:-2]
    v1 = with_ones(v)
    state = lq.new_zeros((*lead, m, dv + 1))
    run_max = None
    parts = []
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        q_c, k_c, v1_c = lq[..., start:stop, :], lk[..., start:stop, :], v1[..., start:stop, :]
        top = k_c.detach().amax(dim=-2, keepdim=True)  # (..., 1, m)
        if run_max is not None:
            top = torch.maximum(run_max, top)
            state = state * torch.exp(run_max - top).transpose(-1, -2)
        e_k = torch.sub(k_c, top).exp_()  # in place on fresh tensors: no extra n×m copies
        t = q_c + top
        e_q = t.sub_(t.detach().amax(dim=-1, keepdim=True)).exp_()
        nd = (e_q @ e_k.transpose(-1, -2)).tril_() @ v1_c
        if run_max is not None:
            nd = nd + e_q @ state
        parts.append(nd)
        state = state + e_k.transpose(-1, -2) @ v1_c
        run_max = top
    num_den = torch.cat(parts, dim=-2)
    num, den = num_den[..., :-1], num_den[..., -1:]
    info = torch.finfo(lq.dtype)
    bad = den.detach() < 3 * m * (n + 1) * info.tiny / (info.eps / 2)
    # divide by 1 where the row is recomputed below: 0/0's backward is NaN even for an
    # overwritten entry (a NaN gradient behind a finite output, issue 20)
    out = num / torch.where(bad, torch.ones_like(den), den)
    if bool(bad.any()):
        out = _exact_rows(lq, lk, v, out, bad[..., 0])
    return out


def _exact_rows(lq: torch.Tensor, lk: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                rows: torch.Tensor) -> torch.Tensor:
    """``out`` with the causal rows ``rows`` (bool, ``out.shape[:-1]``) replaced by
    ``softmax_{j ≤ i}(logsumexp_f(lq_if + lk_jf)) V``: exact log-space weights for every pair,
    no underflow of the row's largest pair weight (it is 1 after the softmax's shift)."""
    n, m = lq.shape[-2], lq.shape[-1]
    lq3, lk3 = lq.reshape(-1, n, m), lk.reshape(-1, n, m)
    v3, out3 = v.reshape(-1, n, v.shape[-1]), out.reshape(-1, n, out.shape[-1])
    b, i = rows.reshape(-1, n).nonzero(as_tuple=True)
    step = max(1, 2**22 // (n * m))  # rows per batch: ≤ 4M logits in memory at a time
    j = torch.arange(n, device=lq.device)
    for s in range(0, b.numel(), step):
        bb, ii = b[s : s + step], i[s : s + step]
        pair = torch.logsumexp(lq3[bb, ii].unsqueeze(-2) + lk3[bb], dim=-1)  # (rows, n)
        pair = pair.masked_fill(j > ii.unsqueeze(-1), float("-inf"))
        fixed = (torch.softmax(pair, dim=-1).unsqueeze(-2) @ v3[bb]).squeeze(-2)
        out3 = out3.index_put((bb, ii), fixed)
    return out3.reshape(out.shape)


__all__ = ["linear_attention", "log_linear_attention", "softmax_attention"]
