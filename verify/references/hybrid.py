"""Exact hybrid attention (sliding-window softmax + linear attention) in mpmath (docs/math.md §22).

Query ``i`` weighs key ``j ≤ i`` by ``a_ij = γ·exp(s·q_iᵀk_j)`` when ``i − w < j ≤ i`` and by
``a_ij = φ(q_i)ᵀφ(k_j)`` when ``j ≤ i − w``; ``y_i = Σ_j a_ij v_j / Σ_j a_ij`` (LoLCATs, Zhang et
al. 2024, arXiv 2410.10254). The weight matrix is built exactly and normalised by
:func:`kernel_verify.verify.references.attention.kernel_attention_mp` (causal), so a window
``w ≥ T`` and ``w = 0`` reach exact softmax and linear attention by another route than
:func:`~kernel_verify.verify.references.attention.softmax_attention_mp` and
:func:`~kernel_verify.verify.references.attention.feature_attention_mp`.
"""

from __future__ import annotations

from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.references.attention import _batched, _mp, kernel_attention_mp
from kernel_verify.verify.references.mp import mp_exp

__all__ = ["hybrid_attention_mp", "hybrid_weights_mp"]


def hybrid_weights_mp(q: Any, k: Any, phi_q: Any, phi_k: Any, *, window: int, mix: Any = 1,
                      scale: Any = None) -> np.ndarray:
    """The exact weights ``a_ij`` (mp array ``(…, T, T)``, zero above the diagonal)."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ValueError(f"window must be an integer >= 0, got {window!r}")
    qm, km, fq, fk = _mp("q", q), _mp("k", k), _mp("phi_q", phi_q), _mp("phi_k", phi_k)
    s = 1 / mpmath.sqrt(qm.shape[-1]) if scale is None else mpmath.mpf(scale)
    g = mpmath.mpf(mix)

    def one(qq, kk, aa, bb):
        t = qq.shape[0]
        if kk.shape[0] != t or aa.shape[0] != t or bb.shape[0] != t:
            raise ValueError("q, k, phi_q, phi_k must have one row per token")
        soft = g * mp_exp((qq @ kk.T) * s)
        lin = aa @ bb.T
        out = np.empty((t, t), dtype=object)
        for i in range(t):
            for j in range(t):
                out[i, j] = (soft[i, j] if i - window < j <= i else
                             lin[i, j] if j <= i - window else mpmath.mpf(0))
        return out

    return _batched(one, qm, km, fq, fk)


def hybrid_attention_mp(q: Any, k: Any, v: Any, phi_q: Any, phi_k: Any, *, window: int,
                        mix: Any = 1, scale: Any = None) -> np.ndarray:
    """Exact causal hybrid attention (mp array ``(…, T, d_v)``; module docstring)."""
    weights = hybrid_weights_mp(q, k, phi_q, phi_k, window=window, mix=mix, scale=scale)
    return kernel_attention_mp(weights, v, causal=True)
