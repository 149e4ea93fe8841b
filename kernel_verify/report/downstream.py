"""Attention-level and downstream (kernel ridge regression) error of a registry map.

**Attention** (docs/math.md §9): RMS error per output entry ``(mean (Â − A)²)^½`` of
:func:`kernel_verify.impls.attention.feature_map_attention` (non-causal) against exact softmax
attention :func:`kernel_verify.impls.numpy.attention.softmax_attention` (float64; itself checked
against mpmath by the attention properties), for q, k with i.i.d. N(0, 0.6²) entries and v with N(0,
1) entries at d = 8 (so the error is in units of v's standard deviation), as a function of m (at
n = 256) and of the sequence length n (at m = 64); mean over seeds. Only maps whose target kernel
is softmax (the random softmax estimators and every deterministic map, whose error against softmax
is the approximation error of linear attention) are compared with softmax attention.

**Kernel ridge regression** (representer theorem): on a fixed synthetic task (d = 8, n = 100
training and 100 test points ``x ~ N(0, I/d)``, ``f(x) = sin(3·uᵀx) + ½cos(2·vᵀx)``, noise 0.1,
λ = 1e-2), test MSE of ``f̂ = K_*(K + nλI)⁻¹y`` with the exact Gram (mpmath
:func:`kernel_verify.verify.references.kernels.gram_reference`, cached) against the same estimator
with the map's features ``Φ``: ``K ≈ ΦΦᵀ`` (primal form ``Φ_*(ΦᵀΦ + nλI)⁻¹Φᵀy``, the same function),
as a function of m; mean over seeds.
"""

from __future__ import annotations

import numpy as np

from kernel_verify.impls.attention import feature_map_attention
from kernel_verify.impls.numpy.attention import softmax_attention
from kernel_verify.impls.registry import FeatureMap
from kernel_verify.report.gradients import _reference_digest
from kernel_verify.verify.cache import exact_text, file_cache_get, file_cache_put
from kernel_verify.verify.references.kernels import gram_reference

D = 8


#: q and k entries are N(0, SCALE²): softmax logits qᵀk/√d have standard deviation SCALE² = 0.36
SCALE = 0.6


def _qkv(seed: int, n: int):
    rng = np.random.default_rng(seed)
    return (SCALE * rng.standard_normal((n, D)), SCALE * rng.standard_normal((n, D)),
            rng.standard_normal((n, D)))


def _att_error(entry: FeatureMap, m: int, n: int, seed: int) -> float:
    q, k, v = _qkv(seed, n)
    if entry.has("positional") and "M" in entry.config:  # cosFormer: horizon M ≥ n
        entry = entry.with_config(M=max(n, int(entry.config["M"])))
    params = entry.draw(np.random.default_rng(seed + 1), D, max(m, entry.min_m), entry.config)
    pos = np.arange(n) if entry.has("positional") else None
    approx = feature_map_attention(entry, params, q, k, v, positions=pos)
    exact = softmax_attention(q, k, v)
    return float(np.sqrt(np.mean((approx - exact) ** 2)))


def attention_curves(entry: FeatureMap, ms, ns, seeds: int) -> dict | None:
    """``{"m": [(m, err)], "n": [(n, err)]}`` against exact softmax (module docstring), or None
    when the target kernel is not softmax and the map is random."""
    deterministic = entry.has("deterministic")
    if entry.kernel != "softmax" and not deterministic:
        return None
    out: dict = {"m": [], "n": []}
    try:
        for m in ([64] if deterministic else ms):
            errs = [_att_error(entry, m, 256, 10 * s) for s in range(seeds)]
            out["m"].append((m, float(np.mean(errs))))
        for n in ns:
            errs = [_att_error(entry, 64, n, 10 * s + 3) for s in range(seeds)]
            out["n"].append((n, float(np.mean(errs))))
    except ValueError as exc:  # sign-changing features: the normaliser can be ≤ 0
        return {"skipped": f"linear attention refused these inputs: {exc}"}
    return out


def _task(n: int = 100):
    rng = np.random.default_rng(2026)
    u, v = rng.standard_normal(D), rng.standard_normal(D)
    u, v = u / np.linalg.norm(u), v / np.linalg.norm(v)
    X = rng.standard_normal((2 * n, D)) / np.sqrt(D)
    f = np.sin(3 * X @ u) + 0.5 * np.cos(2 * X @ v)
    y = f + 0.1 * rng.standard_normal(2 * n)
    return X[:n], y[:n], X[n:], f[n:]


LAMBDA = 1e-2
#: Kernels whose mpmath Gram is cheap enough for 2·100² entries (the generative kernel is a
#: quadrature, ~1 s per entry: hours for this task).
KRR_KERNELS = frozenset({"softmax", "gaussian", "arccos1", "spectral_mixture", "gmm_prf"})


def _exact_gram(entry: FeatureMap, X: np.ndarray, Y: np.ndarray, tag: str) -> np.ndarray:
    params = entry.kernel_args(D)
    # exact and signed (verify.cache.exact_text), and the references' source: a changed
    # reference is recomputed
    key = exact_text((entry.kernel, params, tag, X, Y, _reference_digest()))
    hit = file_cache_get("report-krr-gram", key)
    if hit is not None:
        return np.array(hit)
    g = gram_reference(entry.kernel, X, Y, dps=20, **params)
    file_cache_put("report-krr-gram", key, g.tolist())
    return g


def krr_curve(entry: FeatureMap, ms, seeds: int) -> dict | None:
    """Test MSE with the exact kernel and with the map's features (module docstring); None for
    positional and deterministic maps (an exact finite map gives the exact kernel's KRR) and
    maps whose target Gram has no mpmath reference."""
    if entry.has("positional") or entry.has("deterministic"):
        return None
    if not ms:
        return {"skipped": "quick depth (the exact Gram costs up to a minute per kernel in "
                "mpmath; the full report has this panel)"}
    if entry.kernel not in KRR_KERNELS:
        return {"skipped": f"the exact `{entry.kernel}` Gram is too slow in mpmath for this task "
                "(quadrature, ~1 s per entry)"}
    Xtr, ytr, Xte, fte = _task()
    n = len(Xtr)
    try:
        K = _exact_gram(entry, Xtr, Xtr, "train")
        Ks = _exact_gram(entry, Xte, Xtr, "test")
    except (NotImplementedError, ValueError, KeyError, TypeError):
        return None
    exact = float(np.mean((Ks @ np.linalg.solve(K + n * LAMBDA * np.eye(n), ytr) - fte) ** 2))
    curve = []
    for m in ([None] if entry.has("deterministic") else ms):
        errs = []
        for s in range(1 if m is None else seeds):
            mm = max(m or 8, entry.min_m)
            params = entry.draw(np.random.default_rng(77 + s), D, mm, entry.config)
            P, Ps = entry.numpy_fn(Xtr, params, entry.config), entry.numpy_fn(Xte, params,
                                                                              entry.config)
            w = np.linalg.solve(P.T @ P + n * LAMBDA * np.eye(P.shape[1]), P.T @ ytr)
            errs.append(float(np.mean((Ps @ w - fte) ** 2)))
        curve.append((m, float(np.mean(errs))))
    return {"exact": exact, "curve": curve, "null": float(np.mean(fte**2))}
