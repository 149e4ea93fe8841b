"""Exact attention in mpmath: softmax attention, kernelised attention, and "the same estimator in
high precision" (attention from the mp features of a given parameter draw). docs/math.md §9.

* softmax: ``out_i = Σ_j e^(s·q_iᵀk_j) v_j / Σ_j e^(s·q_iᵀk_j)``, ``s = 1/√d`` by default;
* kernelised: ``out = row-normalise(K)·V`` (``K[i, j]`` for ``j ≤ i`` only when causal, diagonal
  included), which equals the linear-attention recurrences of §9 in exact arithmetic;
* estimator: ``K = φ(q)φ(k)ᵀ`` with mp features; for an entry with ``attention_prescale`` the
  inputs are ``q·d^(−1/4)``, ``k·d^(−1/4)`` (scaled exactly, in mp).

Inputs are 2-D ``(n, d)`` float arrays (or mp arrays); leading batch dimensions are looped over.
A zero denominator (possible for nonnegative or signed features) is a ValueError.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.inputs import check_array
from kernel_verify.verify.references.features import features_mp
from kernel_verify.verify.references.mp import mp_exp, to_float, to_mp, working_precision
from kernel_verify.verify.references.spec import MapSpec

__all__ = [
    "estimator_attention_reference",
    "feature_attention_mp",
    "kernel_attention_mp",
    "softmax_attention_mp",
]


def _mp(name: str, a: Any) -> np.ndarray:
    if isinstance(a, np.ndarray) and a.dtype == object:
        return a
    check_array(name, a, min_ndim=2, backend="numpy")
    return to_mp(a)


def _batched(fn, *arrays: np.ndarray) -> np.ndarray:
    """Apply the 2-D ``fn`` over the shared leading dimensions of ``arrays``."""
    lead = arrays[0].shape[:-2]
    for a in arrays[1:]:
        if a.shape[:-2] != lead:
            raise ValueError(f"leading (batch) shapes differ: {[x.shape for x in arrays]}")
    if not lead:
        return fn(*arrays)
    outs = {idx: fn(*(a[idx] for a in arrays)) for idx in np.ndindex(*lead)}
    first = next(iter(outs.values()))
    result = np.empty(lead + first.shape, dtype=object)
    for idx, out in outs.items():
        result[idx] = out
    return result


def _normalise(k_mat: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    n_q, n_k = k_mat.shape
    if v.shape[0] != n_k:
        raise ValueError(f"v must have {n_k} rows (one per key), got shape {v.shape}")
    if causal and n_q != n_k:
        raise ValueError(f"causal attention needs as many queries as keys, got {n_q} and {n_k}")
    out = np.empty((n_q, v.shape[1]), dtype=object)
    for i in range(n_q):
        cols = range(i + 1) if causal else range(n_k)
        den = mpmath.fsum(k_mat[i, j] for j in cols)
        if den == 0:
            raise ValueError(f"attention denominator of query {i} is exactly 0")
        for c in range(v.shape[1]):
            out[i, c] = mpmath.fsum(k_mat[i, j] * v[j, c] for j in cols) / den
    return out


def softmax_attention_mp(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False, scale: Any = None
) -> np.ndarray:
    """Exact softmax attention (mp array); ``scale`` defaults to ``1/√d``. Runs at the current
    mpmath precision (wrap in :func:`kernel_verify.verify.references.mp.working_precision`)."""
    qm, km, vm = _mp("q", q), _mp("k", k), _mp("v", v)
    s = 1 / mpmath.sqrt(qm.shape[-1]) if scale is None else mpmath.mpf(scale)

    def one(qq, kk, vv):
        if qq.shape[1] != kk.shape[1]:
            raise ValueError(f"q and k must have the same last dimension: {qq.shape}, {kk.shape}")
        return _normalise(mp_exp((qq @ kk.T) * s), vv, causal)

    return _batched(one, qm, km, vm)


def kernel_attention_mp(k_mat: np.ndarray, v: np.ndarray, causal: bool = False) -> np.ndarray:
    """``row-normalise(K)·V`` (causal: lower triangle with diagonal) for an mp or float ``K``."""
    km, vm = _mp("K", k_mat), _mp("v", v)
    return _batched(lambda kk, vv: _normalise(kk, vv, causal), km, vm)


def feature_attention_mp(
    phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray, causal: bool = False
) -> np.ndarray:
    """Attention with ``K = φ(q)φ(k)ᵀ`` from mp (or float) features."""
    pq, pk, vm = _mp("phi_q", phi_q), _mp("phi_k", phi_k), _mp("v", v)

    def one(a, b, vv):
        if a.shape[1] != b.shape[1]:
            raise ValueError(f"phi_q and phi_k must have the same width: {a.shape}, {b.shape}")
        return _normalise(a @ b.T, vv, causal)

    return _batched(one, pq, pk, vm)


def estimator_attention_reference(
    entry: MapSpec,
    params: Mapping[str, np.ndarray],
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    causal: bool = False,
    dtype: np.dtype | type = np.float64,
    positions: np.ndarray | None = None,
    *,
    config: Mapping[str, Any] | None = None,
    dps: int | None = None,
) -> np.ndarray:
    """The attention output of ``entry`` for the draw ``params``, computed exactly from mp
    features (after the exact ``d^(−1/4)`` prescale when ``entry.attention_prescale``) and
    rounded once to ``dtype``."""
    with working_precision(dps):
        qm, km, vm = _mp("q", q), _mp("k", k), _mp("v", v)
        if entry.attention_prescale:
            factor = mpmath.mpf(qm.shape[-1]) ** (-mpmath.mpf(1) / 4)
            qm, km = qm * factor, km * factor
        phi_q = features_mp(entry, qm, params, config, positions=positions, dps=dps)
        phi_k = features_mp(entry, km, params, config, positions=positions, dps=dps)
        out = feature_attention_mp(phi_q, phi_k, vm, causal)
    return to_float(out, dtype)
