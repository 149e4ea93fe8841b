"""Causal hybrid attention (sliding-window softmax + linear attention) in PyTorch.

The formula, the shift and the state are those of
:mod:`kernel_verify.impls.numpy.hybrid_attention` (docs/math.md §22; LoLCATs, Zhang et al. 2024,
arXiv 2410.10254). Device-generic plain autograd: the shift ``c_i`` is detached (the output does
not depend on it), so gradients flow through both parts. float16/bfloat16 inputs are computed
in float32 and the output is rounded once to the input dtype; the state is kept in the compute
dtype (float32 for half inputs) and accepted in either.
"""

from __future__ import annotations

import math

import torch

from kernel_verify.impls.attention_checks import check_attention_inputs, denominator_guard
from kernel_verify.impls.forms_checks import check_step_inputs
from kernel_verify.impls.numpy.hybrid_attention import (
    advance_window,
    check_feature_inputs,
    check_hybrid_options,
    check_hybrid_state,
    check_window_size,
)
from kernel_verify.impls.torch.convert import compute_dtype

State = tuple[torch.Tensor, ...]

__all__ = ["hybrid_attention", "hybrid_attention_step"]


def empty_state(lead: tuple[int, ...], window: int, d: int, m: int, dv: int, like: torch.Tensor
                ) -> State:
    """The state before any token, in ``like``'s dtype and device."""
    check_window_size(window, lead, d, m, dv, like.element_size())
    def z(*shape: int) -> torch.Tensor:
        return torch.zeros(shape, dtype=like.dtype, device=like.device)

    return (z(*lead, window, d), z(*lead, window, m), z(*lead, window, dv), z(*lead),
            z(*lead, m, dv), z(*lead, m))


def combine(scores: torch.Tensor, lin_w: torch.Tensor, vals: torch.Tensor,
            lin_num: torch.Tensor, lin_den: torch.Tensor, mix: float,
            zero_denominator: str) -> torch.Tensor:
    """The shifted quotient of :func:`kernel_verify.impls.numpy.hybrid_attention.combine`."""
    num_l = lin_num + lin_w @ vals
    den_l = lin_den + lin_w.sum(dim=-1, keepdim=True)
    with torch.no_grad():
        if scores.shape[-1]:
            top = scores.amax(dim=-1, keepdim=True)
        else:
            top = torch.full_like(den_l, -math.inf)
        c = torch.maximum(top, torch.log(den_l.abs()))
        c = torch.where(torch.isfinite(c), c, torch.zeros_like(c))
        # no factor where the linear part is exactly 0 (e^(−c) may overflow there)
        some = (den_l != 0) | (num_l != 0).any(dim=-1, keepdim=True)
        f = torch.where(some, torch.exp(-c), torch.zeros_like(c))
    e = torch.exp(scores - c) * mix
    num = e @ vals + num_l * f
    den = e.sum(dim=-1, keepdim=True) + den_l * f
    return num / denominator_guard(den, zero_denominator)


def _up(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(x.to(compute_dtype(x.dtype)) for x in xs)


def hybrid_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, phi_q: torch.Tensor,
                     phi_k: torch.Tensor, *, window: int, mix: float = 1.0,
                     scale: float | None = None, initial_state: State | None = None,
                     zero_denominator: str = "raise") -> tuple[torch.Tensor, State]:
    """The parallel form, state in and out (see the NumPy module)."""
    window, mix, scale = check_hybrid_options(window, mix, scale)
    check_attention_inputs(q, k, v, causal=True, names=("q", "k", "v"), backend="torch")
    check_feature_inputs(q, phi_q, phi_k, v, "torch")
    out_dtype = v.dtype
    q, k, v, phi_q, phi_k = _up(q, k, v, phi_q, phi_k)
    lead, t, d = tuple(q.shape[:-2]), q.shape[-2], q.shape[-1]
    m, dv = phi_q.shape[-1], v.shape[-1]
    if initial_state is None:
        initial_state = empty_state(lead, window, d, m, dv, q)
    n0 = check_hybrid_state(initial_state, lead=lead, window=window, d=d, m=m, dv=dv)
    for i, s in enumerate(initial_state):
        if not isinstance(s, torch.Tensor) or s.device != q.device:
            raise TypeError(f"initial_state[{i}] must be a torch tensor on {q.device}")
    kw, fw, vw, _, s0, z0 = (x.to(q.dtype) for x in initial_state)
    keys = torch.cat([kw[..., window - n0:, :], k], dim=-2)
    feats = torch.cat([fw[..., window - n0:, :], phi_k], dim=-2)
    vals = torch.cat([vw[..., window - n0:, :], v], dim=-2)
    pos_q = n0 + torch.arange(t, device=q.device)[:, None]
    pos_k = torch.arange(n0 + t, device=q.device)[None, :]
    in_window = (pos_k <= pos_q) & (pos_k > pos_q - window)
    left = pos_k <= pos_q - window
    s = 1.0 / math.sqrt(d) if scale is None else scale
    raw = (q @ keys.transpose(-1, -2)) * s
    scores = torch.where(in_window, raw, torch.full_like(raw, -math.inf))
    lin = phi_q @ feats.transpose(-1, -2)
    lin_w = torch.where(left, lin, torch.zeros_like(lin))
    out = combine(scores, lin_w, vals, phi_q @ s0, phi_q @ z0[..., None], mix, zero_denominator)
    total = n0 + t
    keep = min(window, total)
    gone = total - keep
    pad = window - keep

    def last(x: torch.Tensor) -> torch.Tensor:
        tail = x[..., gone:, :]
        return torch.cat([x.new_zeros((*lead, pad, x.shape[-1])), tail], dim=-2)

    state = (last(keys), last(feats), last(vals),
             torch.full(lead, float(keep), dtype=q.dtype, device=q.device),
             s0 + feats[..., :gone, :].transpose(-1, -2) @ vals[..., :gone, :],
             z0 + feats[..., :gone, :].sum(dim=-2))
    return out.to(out_dtype), state


def hybrid_attention_step(state: State | None, q_t: torch.Tensor, k_t: torch.Tensor,
                          v_t: torch.Tensor, phi_q_t: torch.Tensor, phi_k_t: torch.Tensor, *,
                          window: int, mix: float = 1.0, scale: float | None = None,
                          zero_denominator: str = "raise") -> tuple[State, torch.Tensor]:
    """One token (see the NumPy module); ``state`` None is the empty state."""
    window, mix, scale = check_hybrid_options(window, mix, scale)
    check_step_inputs(q_t, k_t, v_t, names=("q_t", "k_t", "v_t"), backend="torch")
    check_step_inputs(phi_q_t, phi_k_t, v_t, names=("phi_q_t", "phi_k_t", "v_t"),
                      backend="torch")
    if tuple(phi_q_t.shape[:-1]) != tuple(q_t.shape[:-1]):
        raise ValueError(f"phi_q_t must have the leading shape of q_t {tuple(q_t.shape[:-1])}, "
                         f"got {tuple(phi_q_t.shape)}")
    out_dtype = v_t.dtype
    q_t, k_t, v_t, phi_q_t, phi_k_t = _up(q_t, k_t, v_t, phi_q_t, phi_k_t)
    lead, d, m, dv = tuple(q_t.shape[:-1]), q_t.shape[-1], phi_q_t.shape[-1], v_t.shape[-1]
    if state is None:
        state = empty_state(lead, window, d, m, dv, q_t)
    n = check_hybrid_state(state, lead=lead, window=window, d=d, m=m, dv=dv, name="state")
    for i, s in enumerate(state):
        if not isinstance(s, torch.Tensor) or s.device != q_t.device:
            raise TypeError(f"state[{i}] must be a torch tensor on {q_t.device}")
    kw, fw, vw, _, s, z = (x.to(q_t.dtype) for x in state)
    kw, fw, vw, s, z, n = advance_window((kw, fw, vw, s, z), n, k_t, phi_k_t, v_t, window,
                                         lambda xs: torch.cat(xs, dim=-2))
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    valid = torch.arange(window, device=q_t.device) >= window - n
    raw = (kw @ q_t[..., :, None])[..., 0] * sc
    scores = torch.where(valid, raw, torch.full_like(raw, -math.inf))[..., None, :]
    no_lin = torch.zeros((*lead, 1, window), dtype=q_t.dtype, device=q_t.device)
    o = combine(scores, no_lin, vw, phi_q_t[..., None, :] @ s,
                phi_q_t[..., None, :] @ z[..., :, None], mix, zero_denominator)
    new = (kw, fw, vw, torch.full(lead, float(n), dtype=q_t.dtype, device=q_t.device), s, z)
    return new, o[..., 0, :].to(out_dtype)
