"""Built-in hybrid attention targets
(:class:`~kernel_verify.properties.hybrid_protocol.HybridAttentionTarget`): the project's
:mod:`kernel_verify.impls.numpy.hybrid_attention` and :mod:`kernel_verify.impls.torch.
hybrid_attention` with ``φ(x) = elu(x) + 1`` (positive features: every denominator is > 0).

Coverage (``make test`` budget): NumPy float64 and float32 with ``γ = 1``; torch in every dtype with
``γ = 0.75`` and ``scale = 0.6`` (the mixing factor and an explicit scale exercised; the
differentiable path in float64).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_verify.impls.systems import get_system
from kernel_verify.impls.validation import is_torch
from kernel_verify.properties.hybrid_protocol import HYBRID_CLAIMS, HybridAttentionTarget

__all__ = ["builtin_hybrid_targets", "elu1", "hybrid_target"]



def elu1(x: Any) -> Any:
    """``elu(x) + 1`` on either backend (half tensors computed in float32 by the caller), as
    ``x + 1`` or ``e^x``: ``elu(x) + 1`` itself cancels for ``x ≪ 0`` (``(e^x − 1) + 1`` keeps
    no correct digit of ``e^(−30)`` in float32: the large-score property found it)."""
    if is_torch(x):
        import torch

        return torch.where(x > 0, x + 1, torch.exp(torch.clamp(x, max=0.0)))
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0))).astype(x.dtype, copy=False)


def _mod(x: Any):
    if is_torch(x):
        from kernel_verify.impls.torch import hybrid_attention
    else:
        from kernel_verify.impls.numpy import hybrid_attention
    return hybrid_attention


def _phi(x: Any) -> Any:
    if is_torch(x) and x.dtype.itemsize == 2:  # half: features in float32 (half_in_float32)
        import torch

        return elu1(x.to(torch.float32))
    return elu1(x)


def _lift(q: Any, k: Any, v: Any) -> tuple[Any, Any, Any]:
    if is_torch(q) and q.dtype.itemsize == 2:
        import torch

        return q.to(torch.float32), k.to(torch.float32), v.to(torch.float32)
    return q, k, v


def hybrid_target(name: str, *, mix: float = 1.0, scale: float | None = None,
                  backends: tuple[str, ...] = ("numpy",),
                  dtypes: tuple[str, ...] = ("float64",), phi=None) -> HybridAttentionTarget:
    """A target over the impls (module docstring); ``phi`` replaces elu + 1 (mutants)."""
    phi = phi or _phi

    def attention(q, k, v, *, window, initial_state=None):
        like = v
        q2, k2, v2 = _lift(q, k, v)
        out, state = _mod(q).hybrid_attention(q2, k2, v2, phi(q), phi(k), window=window,
                                              mix=mix, scale=scale,
                                              initial_state=initial_state)
        return (out.to(like.dtype) if is_torch(out) else out), state

    def step(state, q_t, k_t, v_t, *, window):
        like = v_t
        q2, k2, v2 = _lift(q_t, k_t, v_t)
        state, o = _mod(q_t).hybrid_attention_step(state, q2, k2, v2, phi(q_t), phi(k_t),
                                                   window=window, mix=mix, scale=scale)
        return state, (o.to(like.dtype) if is_torch(o) else o)

    def features(x, role):
        return elu1(np.asarray(x, dtype=np.float64))

    # the descriptor's claims a hybrid target takes (impls/systems.py; differentiable: torch)
    claims = get_system("hybrid_attention").claims & frozenset(HYBRID_CLAIMS)
    if "torch" not in backends:
        claims -= {"differentiable"}
    return HybridAttentionTarget(name, claims, attention, features, step=step,
                                 mix=mix, scale=scale, backends=backends, dtypes=dtypes)


def builtin_hybrid_targets() -> list[HybridAttentionTarget]:
    """The built-in targets (module docstring)."""
    return [
        hybrid_target("hybrid_attention[elu1_numpy]", backends=("numpy",),
                      dtypes=("float64", "float32")),
        hybrid_target("hybrid_attention[elu1_torch]", mix=0.75, scale=0.6, backends=("torch",),
                      dtypes=("float64", "float32", "float16", "bfloat16")),
    ]
