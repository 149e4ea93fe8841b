"""Convergence of an attention estimator to exact softmax attention as m grows.

A trial draws two independent estimators, at m = M_LO and m = M_HI, and fails when the error to
exact softmax attention does not halve (the m^(-1/2) rate predicts a factor 8). Model
assumption ``P0``: a correct estimator fails in at most 10% of trials on these inputs (measured,
and re-measured by ``kernel-verify calibrate``); the failure count of independent trials is then
dominated by Bin(n, P0), which gives the rejection threshold.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

from kernel_verify.impls.numpy.attention import softmax_attention
from kernel_verify.verify import seeds


def qkv(seed: int, shape: tuple[int, int, int, int], dv: int, scale: float,
        aligned: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian ``q, k`` (entries N(0, scale²)) and ``v`` (N(0, 1)); ``aligned``: ``k = q``
    (large positive scores, the case where careless stabilisers underflow everything else)."""
    rng = seeds.rng(seed)
    q = scale * rng.standard_normal(shape)
    k = q.copy() if aligned else scale * rng.standard_normal(shape)
    v = rng.standard_normal((*shape[:-1], dv))
    return q, k, v


M_LO, M_HI = 16, 1024
CONV_SEEDS = 40
#: Model assumption: for a correct estimator, on these inputs, P(e(M_HI) ≥ e(M_LO)/2) ≤ P0.
P0 = 0.10


def convergence_failures(target, seed: int, d: int, n_seeds: int = CONV_SEEDS, *,
                         causal: bool = False, self_attention: bool = False,
                         convert=None, floor=None) -> int:
    """How many of ``n_seeds`` independent trials fail to halve the error to exact softmax
    attention (mean |ôut − out| over 2 batches × 2 heads × 8 rows × 2 values) when m grows from
    16 to 1024 (the m^(-1/2) rate predicts a factor 8). ``causal``: the causal path (against
    causal softmax attention; for targets that only claim causal). ``self_attention``: ``k = q``
    (passed as the same array). ``convert``: maps a float64 array to the target's backend and
    dtype (default: identity); exact attention is computed from the inputs as converted.
    ``floor(q, k, v) -> float``: the rounding error a correct output may have on these (converted)
    inputs; a trial whose m = 1024 error is already at or below it counts as converged (an exact
    attention claiming ``approximates_softmax`` has nothing left to halve). A biased estimator's
    error floor is the Monte Carlo scale, orders of magnitude above any rounding floor."""
    q, k, v = qkv(seed, (2, 2, 8, d), 2, 0.5, aligned=self_attention)
    to = convert or (lambda a: a)
    cq, cv = to(q), to(v)
    ck = cq if self_attention else to(k)
    if convert is not None:
        from kernel_verify.verify.backends import as_float64

        q, v = as_float64(cq), as_float64(cv)
        k = q if self_attention else as_float64(ck)
    exact = softmax_attention(q, k, v, causal=causal)
    level = 0.0 if floor is None else float(floor(q, k, v))
    failures = 0
    lo_seeds = seeds.child_seeds(seed, n_seeds, "convergence.m_lo")
    hi_seeds = seeds.child_seeds(seed, n_seeds, "convergence.m_hi")
    for s_lo, s_hi in zip(lo_seeds, hi_seeds, strict=True):
        lo = np.abs(target(cq, ck, cv, causal=causal, seed=s_lo, m=M_LO) - exact)
        hi = np.abs(target(cq, ck, cv, causal=causal, seed=s_hi, m=M_HI) - exact)
        failures += bool(not (hi.mean() < lo.mean() / 2 or hi.mean() <= level))
    return failures


def convergence_threshold(n_seeds: int, alpha: float) -> int:
    """The smallest k with ``P(Bin(n_seeds, P0) ≥ k) ≤ alpha``."""
    return int(sps.binom.isf(alpha, n_seeds, P0)) + 1
