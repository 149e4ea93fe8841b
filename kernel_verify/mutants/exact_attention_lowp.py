"""Exact-attention mutants in low precision (issue #44 item 2; docs/math.md §9, §14): a torch
softmax attention that declares ``feature_count = 0`` and takes float32, float16 and bfloat16
only — no float64 path, as a float32-only library kernel — computed in float32 (half inputs
upcast, the output and the gradients cast back: claims ``half_in_float32``), with its own
hand-written backward (the closed form ``dV = PᵀG``, ``dS = P ⊙ (G Vᵀ − rowsum)``,
``dQ = dS K/√d``, ``dK = dSᵀQ/√d``, as fused kernels ship it). One defect each:

* ``exact_lowp_scores_bf16``: the scores rounded to bfloat16 before the softmax (a precision
  defect of the forward: relative error ``2^-9`` on every score, far beyond float32's bound);
* ``exact_lowp_dq_scaled``: ``∂L/∂q`` × 1.01 in the backward (forward right);
* ``exact_lowp_backward_no_inv_sqrt_d``: the ``1/√d`` forgotten in the backward only
  (``∂L/∂q``, ``∂L/∂k`` × ``√d``);
* ``exact_lowp_mask_minus_1e4``: the causal mask filled with ``−1e4`` instead of ``−∞`` (a
  common shortcut): right wherever a row's visible scores are above about ``−1e4``, averaging
  future values where they are all far below (only a comparison at such scores sees it);
* ``exact_lowp_tiled_drops_partial_tile``: a causal-only flash-style forward (tiles of
  :data:`TILE` keys, running max and sum) that skips the partial last tile of keys once there is
  a full one: every output row is still a convex combination of visible values, so only a
  comparison with softmax attention at a length past a tile boundary sees it (its twin
  ``exact_lowp_tiled_correct`` visits every tile).

Each is meant to be killed by ``properties/test_exact_attention_lowp.py`` on its float32 and half
paths; the correct twin ``exact_lowp_correct`` (every defect off) must pass the whole suite.
Run one with ``kernel-verify mutants --only <name>``; load its targets with the spec
``kernel_verify.mutants.exact_attention_lowp:<name>`` (``control_exact_lowp_correct``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kernel_verify.properties.protocol import AttentionTarget, Target

__all__ = ["EXACT_LOWP_CONTROLS", "EXACT_LOWP_KILLERS", "EXACT_LOWP_MUTANTS"]

DTYPES = ("float32", "float16", "bfloat16")
CLAIMS = frozenset({"causal", "noncausal", "positive_weights", "differentiable",
                    "deterministic_backward", "half_in_float32"})
_OUT = "exact_attention_lowp::test_exact_attention_outputs_match_float64_softmax"
_GRAD = "exact_attention_lowp::test_exact_attention_gradients_match_closed_form"
_BLOCKS = "exact_attention_lowp::test_exact_attention_outputs_at_block_boundaries"
#: Keys per tile of the flash-style forward.
TILE = 16


def _tiled_softmax_attention(s, v, drop_partial: bool):
    """``softmax(s)v`` tile by tile over the keys (online softmax: running max ``m``, sum ``l``
    and accumulator rescaled by ``exp(m_old − m_new)``), in the dtype of ``s``; with
    ``drop_partial`` the partial last tile is skipped when a full one exists."""
    import torch

    n_keys = s.shape[-1]
    starts = list(range(0, n_keys, TILE))
    if drop_partial and n_keys % TILE and len(starts) > 1:
        starts = starts[:-1]
    m = torch.full((*s.shape[:-1], 1), float("-inf"), dtype=s.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros((*s.shape[:-1], v.shape[-1]), dtype=s.dtype)
    for j in starts:
        sj, vj = s[..., j:j + TILE], v[..., j:j + TILE, :]
        m_new = torch.maximum(m, sj.max(dim=-1, keepdim=True).values)
        alpha = torch.nan_to_num(torch.exp(m - m_new), nan=0.0)  # -inf − -inf: nothing yet
        pj = torch.nan_to_num(torch.exp(sj - m_new), nan=0.0)
        total = total * alpha + pj.sum(dim=-1, keepdim=True)
        acc = acc * alpha + pj @ vj
        m = m_new
    return acc / total


def _function(defect: str):
    """The ``torch.autograd.Function`` of softmax attention in float32 with ``defect`` (``none``,
    ``scores_bf16``, ``dq_scaled``, ``no_inv_sqrt_d``, ``mask_minus_1e4``, the tiled forms, and
    the correct ``probabilities_in_half``)."""
    import torch

    class Softmax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal):
            dtype = v.dtype
            q32, k32, v32 = q.float(), k.float(), v.float()
            sc = 1.0 / math.sqrt(q.shape[-1])
            s = (q32 @ k32.transpose(-1, -2)) * sc
            if defect == "scores_bf16":
                s = s.to(torch.bfloat16).float()
            if causal:
                n, m = s.shape[-2], s.shape[-1]
                future = torch.ones(n, m, dtype=torch.bool, device=s.device).triu(1)
                fill = -1e4 if defect == "mask_minus_1e4" else float("-inf")
                s = s.masked_fill(future, fill)
            p = torch.softmax(s, dim=-1)
            ctx.save_for_backward(q32, k32, v32, p)
            ctx.dtypes = (q.dtype, k.dtype, dtype)
            if defect in ("tiled", "tiled_drops_partial_tile"):
                out = _tiled_softmax_attention(s, v32, defect == "tiled_drops_partial_tile")
                return out.to(dtype)
            if defect == "probabilities_in_half":  # FlashAttention's P·V: P rounded to the
                # input's half type (float32 stays float32), the product accumulated in float32
                return (p.to(dtype).float() @ v32).to(dtype)
            return (p @ v32).to(dtype)

        @staticmethod
        def backward(ctx, g):
            q32, k32, v32, p = ctx.saved_tensors
            g32 = g.float()
            sc = 1.0 / math.sqrt(q32.shape[-1])
            dv = p.transpose(-1, -2) @ g32
            dp = g32 @ v32.transpose(-1, -2)
            ds = p * (dp - (dp * p).sum(dim=-1, keepdim=True))
            back = 1.0 if defect == "no_inv_sqrt_d" else sc
            dq = (ds @ k32) * back
            dk = (ds.transpose(-1, -2) @ q32) * back
            if defect == "dq_scaled":
                dq = dq * 1.01
            dq_t, dk_t, dv_t = ctx.dtypes
            return dq.to(dq_t), dk.to(dk_t), dv.to(dv_t), None

    return Softmax


def make_target(name: str, defect: str = "none") -> AttentionTarget:
    """The torch target (float32, float16, bfloat16; ``feature_count = 0``) with ``defect``; the
    tiled ones are causal only."""
    fn = _function(defect)

    def attention(q, k, v, *, causal: bool, seed: int = 0, **_: Any):
        for arg, x in (("q", q), ("k", k), ("v", v)):
            if x.ndim != 4:
                raise ValueError(f"{arg} must have shape (batch, heads, n, d), got "
                                 f"{tuple(x.shape)}")
        return fn.apply(q, k, v, causal)

    claims = CLAIMS - {"noncausal"} if defect.startswith("tiled") else CLAIMS
    return AttentionTarget(name, attention, claims, backends=("torch",), dtypes=DTYPES,
                           feature_count=0)


#: name -> (description, make(name) -> targets).
EXACT_LOWP_MUTANTS: dict[str, tuple[str, Callable[[str], list[Target]]]] = {
    "exact_lowp_scores_bf16": (
        "float32 exact attention (float32/half only, feature_count 0) whose scores are rounded "
        "to bfloat16 before the softmax",
        lambda name: [make_target(name, "scores_bf16")]),
    "exact_lowp_dq_scaled": (
        "float32 exact attention (float32/half only) whose hand-written backward scales ∂L/∂q "
        "by 1.01", lambda name: [make_target(name, "dq_scaled")]),
    "exact_lowp_backward_no_inv_sqrt_d": (
        "float32 exact attention (float32/half only) whose backward forgets the 1/√d of the "
        "scores (∂L/∂q, ∂L/∂k × √d)", lambda name: [make_target(name, "no_inv_sqrt_d")]),
    "exact_lowp_tiled_drops_partial_tile": (
        "causal flash-style exact attention (tiles of 16 keys, online softmax) that skips the "
        "partial last tile of keys once a full one exists",
        lambda name: [make_target(name, "tiled_drops_partial_tile")]),
    "exact_lowp_mask_minus_1e4": (
        "float32 exact attention (float32/half only) whose causal mask is filled with −1e4 "
        "instead of −∞ (future keys win where every visible score is below it)",
        lambda name: [make_target(name, "mask_minus_1e4")]),
}

#: The property each is written for (``family::test``).
EXACT_LOWP_KILLERS: dict[str, tuple[str, ...]] = {
    "exact_lowp_scores_bf16": (_OUT,),
    "exact_lowp_dq_scaled": (_GRAD,),
    "exact_lowp_backward_no_inv_sqrt_d": (_GRAD,),
    "exact_lowp_tiled_drops_partial_tile": (_BLOCKS,),
    "exact_lowp_mask_minus_1e4": (_BLOCKS,),
}

#: The correct twin: the same code with every defect off.
EXACT_LOWP_CONTROLS: dict[str, Callable[[], list[Target]]] = {
    "exact_lowp_correct": lambda: [make_target("control:exact_lowp_correct")],
    "exact_lowp_tiled_correct": lambda: [make_target("control:exact_lowp_tiled_correct",
                                                     "tiled")],
    # FlashAttention's rounding of P to the half type before P·V (allowed under
    # half_in_float32: one rounding of each weight)
    "exact_lowp_probabilities_in_half": lambda: [make_target(
        "control:exact_lowp_probabilities_in_half", "probabilities_in_half")],
}


def __getattr__(attr: str) -> list[Target]:
    """``<mutant name>`` / ``control_<twin>``: the targets."""
    if attr in EXACT_LOWP_MUTANTS:
        return EXACT_LOWP_MUTANTS[attr][1](f"mutant:{attr}")
    if attr.startswith("control_") and attr.removeprefix("control_") in EXACT_LOWP_CONTROLS:
        return EXACT_LOWP_CONTROLS[attr.removeprefix("control_")]()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
