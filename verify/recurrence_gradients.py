"""Gradients of the one recurrence by autograd through a plain token loop, in any dtype: the
float64 reference and the same-precision yardstick of the low-precision gradient check of
delta-rule targets (``properties/test_gated_forms.py``,
``test_gated_low_precision_gradients_near_float64``; docs/math.md §13.2 and §23).

The recurrence (``verify/references/recurrence.py``, its module docstring) on features
``φq, φk``, values ``v``, log-gates ``g`` and the transition's inputs ``β, p, a, b``::

    S_t = Diag(e^(λ_t)) S_(t−1) + x_t (y_tᵀ S_(t−1)) + w_t v_tᵀ,      o_t = S_tᵀ φq_t,

``S_0 = 0``, with ``(λ, x, y, w)`` the transition's terms (``dplr_terms``: ``x̃ = −βφk``,
``ỹ = φk`` (``p`` for comba), ``w = βφk``; RWKV-7 ``x = b``, ``y = a``, ``w = φk``; the gate
multiplies ``x`` for gated_delta and ``y`` for kda; ``λ = g`` broadcast over the key
dimension). For ``L = Σ_t W_t·o_t`` (a cotangent ``W``), :func:`recurrence_vjp` returns
``∂L/∂(φq, φk, v, g, β, p, a, b)`` by torch autograd through that loop with every input
rounded once to the ``dtype`` and every operation in it: at float64 the reference gradient (its
own error ``O(T·d·u₆₄)`` relative, far below a float32 one), at float32 the gradient of a plain
same-precision evaluation of the same formula, the yardstick of the criterion
(:mod:`kernel_verify.verify.same_precision`). ``β`` given as a logit (``beta_logit``) enters as
``top·σ(β)`` (``beta_top``: 1, or 2 for a target allowing negative eigenvalues, fla's
``allow_neg_eigval``), so the gradient is w.r.t. the logit, as the target's is.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from kernel_verify.verify.references.recurrence import gate_shifts

__all__ = ["recurrence_vjp"]

#: The transitions :func:`recurrence_vjp` evaluates (every one of the reference).
TRANSITIONS = ("identity", "decay", "delta", "gated_delta", "kda", "comba", "rwkv7")


def recurrence_vjp(fq: np.ndarray, fk: np.ndarray, v: np.ndarray, cotangent: np.ndarray, *,
                   transition: str, dtype: str, g: np.ndarray | None = None,
                   inputs: Mapping[str, np.ndarray] | None = None,
                   beta_logit: bool = False, beta_top: float = 1.0) -> dict[str, np.ndarray]:
    """``{name: ∂L/∂name}`` (float64 NumPy of the uncast results) of ``L = Σ W⊙o`` for the
    recurrence of ``transition`` (module docstring) evaluated by a token loop in ``dtype``
    (``"float64"`` or ``"float32"``): ``fq, fk (B, H, T, d)``, ``v, cotangent (B, H, T, d_v)``,
    ``g`` the log-gates ``(B, H, T)`` (one per token) or ``(B, H, T, d)`` (per key dimension),
    ``inputs`` the transition's ``beta (B, H, T)``, ``p, a, b (B, H, T, d)``; with
    ``beta_logit`` β is ``beta_top·σ(beta)`` (``beta_top`` 1 or 2). Names: ``fq, fk, v``, ``g``
    when given, and each of ``inputs``."""
    import torch

    if transition not in TRANSITIONS:
        raise ValueError(f"transition must be one of {TRANSITIONS}, got {transition!r}")
    if dtype not in ("float64", "float32"):
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    if beta_top not in (1.0, 2.0):
        raise ValueError(f"beta_top must be 1 or 2 (2σ: negative eigenvalues), got {beta_top!r}")
    td = getattr(torch, dtype)
    named = {"fq": fq, "fk": fk, "v": v, **({} if g is None else {"g": g}),
             **dict(inputs or {})}
    leaves = {n: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)).to(td)
              .requires_grad_(True) for n, a in named.items()}
    q, k, vv = leaves["fq"], leaves["fk"], leaves["v"]
    if q.shape != k.shape or q.shape[:-1] != vv.shape[:-1] or q.ndim != 4:
        raise ValueError(f"fq, fk must have one shape (B, H, T, d) and v (B, H, T, d_v), got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(vv.shape)}")
    lam = None
    if "g" in leaves:
        gg = leaves["g"]
        lam = gg[..., None].expand(q.shape) if gg.ndim == 3 else gg
    beta = leaves.get("beta")
    if beta is not None and beta_logit:
        beta = beta_top * torch.sigmoid(beta)
    if transition in ("identity", "decay"):
        x = y = None
        w = k
    elif transition == "rwkv7":
        x, y, w = leaves["b"], leaves["a"], k
    else:
        w = beta[..., None] * k
        x, y = -w, (leaves["p"] if transition == "comba" else k)
    if lam is not None and x is not None:
        sx, sy = gate_shifts(transition)
        e = torch.exp(lam)
        x, y = (e * x if sx else x), (e * y if sy else y)
    s = torch.zeros((*q.shape[:-2], q.shape[-1], vv.shape[-1]), dtype=td)
    outs = []
    for t in range(q.shape[-2]):
        new = w[..., t, :, None] * vv[..., t, None, :]
        if lam is not None:
            new = new + torch.exp(lam[..., t, :])[..., None] * s
        else:
            new = new + s
        if x is not None:
            new = new + x[..., t, :, None] * (y[..., t, :, None] * s).sum(dim=-2)[..., None, :]
        s = new
        outs.append((q[..., t, :, None] * s).sum(dim=-2))
    out = torch.stack(outs, dim=-2)
    tw = torch.from_numpy(np.ascontiguousarray(cotangent, dtype=np.float64)).to(td)
    if tuple(tw.shape) != tuple(out.shape):
        raise ValueError(f"cotangent must have the outputs' shape {tuple(out.shape)}, got "
                         f"{tuple(tw.shape)}")
    names = list(leaves)
    grads = torch.autograd.grad((out * tw).sum(), [leaves[n] for n in names], allow_unused=True)
    return {n: (np.zeros(np.shape(named[n])) if gr is None
                else gr.detach().to(torch.float64).numpy())
            for n, gr in zip(names, grads, strict=True)}
