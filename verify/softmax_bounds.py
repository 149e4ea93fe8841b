"""A-priori rounding-error bounds of exact softmax attention in a low-precision compute dtype
(docs/math.md §9, "Exact softmax attention in low precision").

``o_i = Σ_j P_ij v_j``, ``P_ij = e^{s_ij}/Σ_l e^{s_il}``, ``s_ij = σ·q_iᵀk_j`` (``σ = 1/√d`` by
default; causal: ``j ≤ i``), evaluated in floating point with unit roundoff ``u`` by any
*stable* evaluation: the scores by dot products, a shift by the row maximum of the computed
scores (the whole row's, or a running maximum with rescaling of the partial sums, as the
online softmax of blocked kernels), the exponentials, the normaliser and the weighted sum of
the values in any order, the division before or after the weighted sum, and a final cast to a
half type. Higham's model (*Accuracy and Stability of Numerical Algorithms*, §2.2, Lemma 3.1,
§3.1): every basic operation rounds once, ``fl(x op y) = (x op y)(1 + δ) + η`` with ``|δ| ≤ u``
and, with gradual underflow, ``|η| ≤ u·λ`` (``λ`` the smallest normal number); a sum or dot
product of ``n`` terms in any order errs by ``≤ γ_n·Σ|terms|``, ``γ_n = nu/(1 − nu)``; an
exponential is within ``ulps`` ulps of the correctly rounded value, i.e. relative
``≤ (1 + 2·ulps)·u``, a log-error ``≤ λ_e = −log(1 − (1 + 2·ulps)u)``.

Per row ``i`` with ``T_i`` visible keys (the derivation: docs/math.md):

* scores: ``|ŝ_ij − s_ij| ≤ Δ_ij = γ_(d+4)·σ|q_i|ᵀ|k_j|`` (``d`` for the dot product, up to 2
  roundings forming the scale constant and 2 applying it: ``q`` and ``k`` pre-scaled by
  ``d^(−1/4)`` each, or the score once);
* shift: the arguments ``ŝ_ij − m̂`` round once, and an online softmax's rescaling arguments
  ``m̂_old − m̂_new`` round once each; the running maxima increase, so these roundings add up to
  at most ``2u·Ŝ_i`` with ``Ŝ_i = spread_i + 2·max_j Δ_ij`` (``spread_i = max_j s_ij −
  min_j s_ij``); each weight passes through at most ``T_i + 1`` exponentials (its own and one
  rescaling factor per later block). So every computed weight is ``ŵ_ij = C_i e^{s_ij}
  e^{θ_ij}`` (``C_i`` common to the row, which cancels) with ``|θ_ij| ≤ τ_i = max_j Δ_ij +
  2u·Ŝ_i + (T_i + 1)·λ_e``, plus underflow terms ``≤ 2(T_i + 2)·u·λ`` each;
* weights: ``P̃_ij = ŵ_ij/Σ_l ŵ_il`` satisfies ``|P̃_ij − P_ij| ≤ ρ_i·P_ij``, ``ρ_i =
  expm1(2τ_i)``; since ``Σ_j (P̃_ij − P_ij) = 0``, ``|Σ_j (P̃_ij − P_ij)v_jc| ≤ ρ_i·Σ_j
  P_ij|v_jc − μ_c|`` for any ``μ_c``: the midpoint of the visible values of column ``c``;
* sums: every term of the numerator ``Σ ŵ v`` and of the denominator ``Σ ŵ`` passes through at
  most ``K_i = 3T_i + 2`` roundings (a product, the reduction, one product and one addition per
  rescaling, a division when the weights are normalised first), so ``N̂/D̂`` is within
  ``2γ_K/(1 − γ_K)·Σ_j P̃_ij|v_jc| ≤ 2γ_K/(1 − γ_K)·e^{2τ_i}·Σ_j P_ij|v_jc|`` of ``N/D``;
* or the **log-sum-exp route**: the weights formed unnormalised as ``P̂_ij = exp(fl(ŝ_ij −
  L̂_i))`` from a computed log-sum-exp ``L̂_i`` (``torch.exp(s − torch.logsumexp(s))``, the
  ``P = exp(S − LSE)`` of blocked kernels): the common error ``|L̂_i − L_i|`` (below) does not
  cancel, so ``|P̂_ij − P_ij| ≤ expm1(ℓ_i)·P_ij`` with ``ℓ_i`` the recomputed weights' log-error
  of the backward paragraph, and the weighted sum of ``T_i`` terms adds ``γ_(T_i)·e^{ℓ_i}·Σ_j
  P_ij|v_jc|``. The bound is the larger of the two routes (at ``|s| ≈ 900`` in float64 the
  log-sum-exp route's ``u·|L|`` is ~1e-13, where the normalised route's is ~1e-15);
* the shift by the computed maximum makes one weight exactly ``e^0 = 1``, so ``D̂ ≥ 1``: the
  underflow terms move the output by at most ``T_i·2(T_i + 2)·u·λ·2·max|v|`` plus ``T_i`` more
  ``u·λ`` from the products and sums;
* the final division ``u·(|o| + E) + u·λ`` and, for a half type cast from the compute dtype,
  ``u_out·(|o| + E) + u_out·λ_out`` (``λ_out`` its smallest normal: a subnormal output).

The bound is computed from the inputs as the code saw them (rounded to its dtype): input
rounding is no error. A shift other than the row maximum (no shift at all, a constant) is not
covered (its denominator may underflow). Void — :func:`softmax_attention_error_bound` raises
``ValueError`` — when ``γ_K ≥ 1``, i.e. ``2K·u ≥ 1`` (the quotient's ``2γ_K/(1 − γ_K)``
changes sign there: bfloat16 arithmetic throughout is void from ``T = 42`` keys).

**Weights reused by the backward** (:func:`softmax_backward_weight_error`): the backward either
reuses the forward's normalised weights ``P̂ = fl(ŵ/D̂)`` (``|log P̂ − log P| ≤ 2τ +
log((1 + γ_K)(1 + u)/(1 − γ_K))``) or recomputes ``P̂_ij = exp(fl(ŝ_ij − L̂_i))`` from a saved
log-sum-exp ``L̂_i = fl(m̂_i + fl(log D̂_i))``: ``|L̂_i − L_i| ≤ τ_i − log(1 − γ_K) +
(1 + 2·ulps_log)u·(log T_i + τ_i + 1) + u·(max_j|s_ij| + max_j Δ_ij + log T_i + τ_i + 1)``
(``log D̂ = L − m̂ + θ``, ``|θ| ≤ τ − log(1 − γ_K)``; the addition rounds at ``|L̂| ≤ max|s| +
Δ + log T + τ + 1``), so ``|log P̂_ij − log P_ij| ≤ Δ_ij + |L̂_i − L_i| + u·(spread_i + 2Δ +
log T_i + |L̂_i − L_i|) + λ_e``. The relative weight error of the backward is ``expm1`` of the
larger of the two; docs/math.md §14's :func:`~kernel_verify.verify.gradient_bounds.
attention_grad_bound` takes it from there.
"""

from __future__ import annotations

import math

import numpy as np

from kernel_verify.verify.tolerance import FORMATS, gamma

__all__ = [
    "format_tiny",
    "softmax_attention_error_bound",
    "softmax_attention_reference",
    "softmax_backward_weight_error",
    "softmax_gradient_error_bound",
    "softmax_gradients_reference",
    "softmax_log_weight_error",
    "stored_output_gradient_term",
    "weight_underflow",
]


def _check(q: np.ndarray, k: np.ndarray, v: np.ndarray | None, causal: bool,
           u: float, ulps: float, scale: float | None) -> float:
    for name, a in (("q", q), ("k", k), ("v", v)):
        if a is None:
            continue
        if not isinstance(a, np.ndarray) or a.ndim < 2:
            raise ValueError(f"{name} must be a NumPy array of shape (..., n, d), got "
                             f"{type(a).__name__} {getattr(a, 'shape', None)}")
        if not np.isfinite(a).all():
            raise ValueError(f"{name} must be finite")
    if q.shape[-1] != k.shape[-1] or q.shape[:-2] != k.shape[:-2]:
        raise ValueError(f"q {q.shape} and k {k.shape} must agree in every axis but the length")
    if v is not None and (v.shape[:-1] != k.shape[:-1]):
        raise ValueError(f"v {v.shape} must have k's {k.shape[:-1]} leading axes")
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal attention needs as many queries as keys, got q {q.shape}, "
                         f"k {k.shape}")
    if not 0.0 < float(u) < 1.0:
        raise ValueError(f"u must be a unit roundoff in (0, 1), got {u!r}")
    if not (isinstance(ulps, int | float) and ulps >= 0):
        raise ValueError(f"ulps must be a non-negative number, got {ulps!r}")
    if scale is None:
        return 1.0 / math.sqrt(q.shape[-1])
    if not (isinstance(scale, int | float) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    return float(scale)


def _mask(n: int, m: int, causal: bool) -> np.ndarray:
    return np.tril(np.ones((n, m), dtype=bool)) if causal else np.ones((n, m), dtype=bool)


def softmax_attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool,
                                scale: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(o, P)``: exact softmax attention evaluated in float64 (max-shifted), ``P`` zero where
    masked; its own rounding is bounded by :func:`softmax_attention_error_bound` at ``u₆₄``."""
    sc = _check(q, k, v, causal, 2.0**-53, 1.0, scale)
    s = (q @ np.swapaxes(k, -1, -2)) * sc
    mask = _mask(q.shape[-2], k.shape[-2], causal)
    s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return p @ v, p


def softmax_gradients_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, *,
                                causal: bool, scale: float | None = None
                                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The closed-form gradients of ``L = Σ g⊙o`` (float64): ``dV = Pᵀg``, ``dP = g Vᵀ``,
    ``dS = P ⊙ (dP − rowsum(dP ⊙ P))``, ``dQ = σ·dS K``, ``dK = σ·dSᵀQ``."""
    sc = _check(q, k, v, causal, 2.0**-53, 1.0, scale)
    if g.shape != (*q.shape[:-1], v.shape[-1]):
        raise ValueError(f"g must have the output's shape {(*q.shape[:-1], v.shape[-1])}, got "
                         f"{g.shape}")
    _, p = softmax_attention_reference(q, k, v, causal=causal, scale=sc)
    dv = np.swapaxes(p, -1, -2) @ g
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return sc * ds @ k, sc * np.swapaxes(ds, -1, -2) @ q, dv


def _row_terms(q, k, sc, u, causal):
    """``(Δ, max_j Δ, spread, max|s|, T)`` per row (``Δ`` zero where masked)."""
    d = q.shape[-1]
    mask = _mask(q.shape[-2], k.shape[-2], causal)
    s = (q @ np.swapaxes(k, -1, -2)) * sc
    delta = gamma(d + 4, u) * sc * (np.abs(q) @ np.swapaxes(np.abs(k), -1, -2))
    delta = np.where(mask, delta, 0.0)
    hi = np.where(mask, s, -np.inf).max(axis=-1, keepdims=True)
    lo = np.where(mask, s, np.inf).min(axis=-1, keepdims=True)
    top = np.where(mask, np.abs(s), 0.0).max(axis=-1, keepdims=True)
    t = mask.sum(axis=-1)[:, None] * np.ones_like(hi)
    return delta, delta.max(axis=-1, keepdims=True), hi - lo, top, t


def _lam(u: float, ulps: float) -> float:
    x = (1 + 2 * ulps) * u
    if x >= 1:
        raise ValueError(f"the exponential's error (1 + 2·ulps)·u = {x} ≥ 1: the bound is void")
    return -math.log1p(-x)


def softmax_log_weight_error(q: np.ndarray, k: np.ndarray, *, causal: bool, u: float,
                             ulps: float, scale: float | None = None) -> np.ndarray:
    """``τ_i`` (``(..., n, 1)``) of the module docstring: every computed weight of row ``i`` is
    ``C_i e^{s_ij + θ_ij}`` with ``|θ_ij| ≤ τ_i`` (besides underflow)."""
    sc = _check(q, k, None, causal, u, ulps, scale)
    _, dmax, spread, _, t = _row_terms(q, k, sc, u, causal)
    return dmax + 2 * u * (spread + 2 * dmax) + (t + 1) * _lam(u, ulps)


def _gamma_k(t: np.ndarray, u: float) -> np.ndarray:
    """``γ_K``, ``K = 3T_i + 2``, per row; void (``ValueError``) unless ``γ_K < 1`` for every
    row, i.e. ``2K·u < 1``: the quotient's factor ``2γ_K/(1 − γ_K)`` and ``log(1 − γ_K)`` need
    it (with ``1/2 ≤ K·u < 1``, ``γ_K`` is defined but ``≥ 1`` and that factor negative)."""
    kk = 3 * int(t.max()) + 2
    if 2 * kk * u >= 1:
        raise ValueError(f"the sums' γ_K over K = 3T + 2 = {kk} roundings is void (γ_K ≥ 1: "
                         f"2K·u = {2 * kk * u:.3g} ≥ 1)")
    return np.vectorize(lambda ti: gamma(3 * int(ti) + 2, u))(t)


def _lse_log_error(dmax: np.ndarray, spread: np.ndarray, top: np.ndarray, t: np.ndarray,
                   gk: np.ndarray, u: float, ulps: float) -> np.ndarray:
    """The log-error bound of a weight formed as ``exp(fl(ŝ_ij − L̂_i))`` from a log-sum-exp
    ``L̂_i = fl(m̂_i + fl(log D̂_i))`` (module docstring: ``|L̂ − L|`` plus the score's ``Δ``,
    the subtraction's rounding at ``|ŝ − L̂|`` and the exponential's ``λ_e``)."""
    lam = _lam(u, ulps)
    tau = dmax + 2 * u * (spread + 2 * dmax) + (t + 1) * lam
    logt = np.log(t)
    lse = (tau - np.log1p(-gk) + (1 + 2 * ulps) * u * (logt + tau + 1)
           + u * (top + dmax + logt + tau + 1))
    return dmax + lse + u * (spread + 2 * dmax + logt + lse) + lam


def softmax_attention_error_bound(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool,
                                  u: float, ulps: float, u_out: float = 0.0,
                                  tiny: float | None = None, tiny_out: float | None = None,
                                  scale: float | None = None) -> np.ndarray:
    """Per-entry bound ``(..., n, d_v)`` on ``|ô − o|`` for softmax attention computed with unit
    roundoff ``u`` (exponential within ``ulps`` ulps; smallest normal ``tiny``, default
    ``2^(−126)``: float32's, the smallest normal of every compute dtype here but float16's)
    and, when ``u_out > 0``, cast to a dtype of unit roundoff ``u_out`` and smallest normal
    ``tiny_out`` (default ``tiny``) (module docstring).
    Inputs: float64 NumPy, as the code saw them. ``ValueError`` when the bound is void."""
    sc = _check(q, k, v, causal, u, ulps, scale)
    lam_min = 2.0**-126 if tiny is None else float(tiny)
    _, p = softmax_attention_reference(q, k, v, causal=causal, scale=sc)
    _, dmax, spread, top, t = _row_terms(q, k, sc, u, causal)
    tau = dmax + 2 * u * (spread + 2 * dmax) + (t + 1) * _lam(u, ulps)
    rho = np.expm1(2 * tau)
    gk = _gamma_k(t, u)
    # the log-sum-exp route: unnormalised weights exp(ŝ − L̂), whose common error |L̂ − L| does
    # not cancel (module docstring); their weighted sum of T_i terms rounds within γ_(T_i)
    ell = _lse_log_error(dmax, spread, top, t, gk, u, ulps)
    gt = np.vectorize(lambda ti: gamma(int(ti), u))(t)
    vis = p > 0  # visible keys (P > 0 exactly where not masked, in float64 at these sizes)
    vb = np.broadcast_to(v[..., None, :, :], (*p.shape, v.shape[-1]))
    vis4 = vis[..., None]
    vhi = np.where(vis4, vb, -np.inf).max(axis=-2)
    vlo = np.where(vis4, vb, np.inf).min(axis=-2)
    mid = 0.5 * (vhi + vlo)
    centred = np.einsum("...ij,...ijc->...ic", p, np.abs(vb - mid[..., None, :]))
    a = p @ np.abs(v)
    o = np.abs(p @ v)
    vmax = np.abs(v).max(axis=(-2, -1), keepdims=True) * np.ones_like(o)
    under = (4 * t * (t + 2) + t) * u * lam_min * np.maximum(vmax, 1.0)
    normalised = rho * centred + 2 * gk / (1 - gk) * np.exp(2 * tau) * a
    from_lse = (np.expm1(ell) + gt * np.exp(ell)) * a
    err = np.maximum(normalised, from_lse) + under
    err = err + u * (o + err) + u * lam_min
    if u_out:
        err = err + u_out * (o + err) + u_out * (lam_min if tiny_out is None else tiny_out)
    return err


def softmax_backward_weight_error(q: np.ndarray, k: np.ndarray, *, causal: bool, u: float,
                                  ulps: float, scale: float | None = None) -> np.ndarray:
    """``ρ_i`` (``(..., n, 1)``): the relative error of the weights a backward pass uses, reused
    from the forward or recomputed from a saved log-sum-exp (module docstring), for
    :func:`~kernel_verify.verify.gradient_bounds.attention_grad_bound`."""
    sc = _check(q, k, None, causal, u, ulps, scale)
    _, dmax, spread, top, t = _row_terms(q, k, sc, u, causal)
    tau = dmax + 2 * u * (spread + 2 * dmax) + (t + 1) * _lam(u, ulps)
    gk = _gamma_k(t, u)
    saved = 2 * tau + np.log((1 + gk) * (1 + u) / (1 - gk))
    recomputed = _lse_log_error(dmax, spread, top, t, gk, u, ulps)
    return np.expm1(np.maximum(saved, recomputed))


def weight_underflow(t: int, u: float, tiny: float) -> float:
    """``ω``: the absolute error a computed weight may carry from underflow besides its relative
    error — at most ``T + 3`` operations on its path (the exponentials, the rescalings, the
    division) each add ``≤ u·λ`` while the values stay ``≤ 2``: ``ω = 4(T + 3)·u·λ``."""
    return 4 * (int(t) + 3) * u * tiny


def softmax_gradient_error_bound(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, *,
                                 causal: bool, u: float, ulps: float,
                                 tiny: float | None = None, scale: float | None = None,
                                 self_attention: bool = False
                                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(Δ∂L/∂q, Δ∂L/∂k, Δ∂L/∂v)`` for ``L = Σ g⊙o`` by a backward pass computed with unit
    roundoff ``u``: docs/math.md §14's :func:`~kernel_verify.verify.gradient_bounds.
    attention_grad_bound` and :func:`~kernel_verify.verify.gradient_bounds.softmax_qk_bounds`
    with the weights' relative error :func:`softmax_backward_weight_error`, plus the underflow
    term ``ω`` (:func:`weight_underflow`) of every weight carried through the same chain
    (``Δ∂L/∂v_j += Σ_i ω|g_i|``; ``Δ∂L/∂ℓ_ij += 4ω|g_i|ᵀ(|v_j| + 2v̄)``, then through the
    scores). ``self_attention``: ``k`` is ``q``, so ``∂L/∂q`` collects both bounds. Inputs
    float64 NumPy ``(..., n, ·)``, as the code saw them; ``inf`` where the bound is void."""
    from kernel_verify.verify.gradient_bounds import attention_grad_bound, softmax_qk_bounds

    sc = _check(q, k, v, causal, u, ulps, scale)
    lam_min = 2.0**-126 if tiny is None else float(tiny)
    rho = softmax_backward_weight_error(q, k, causal=causal, u=u, ulps=ulps, scale=sc)
    _, p = softmax_attention_reference(q, k, v, causal=causal, scale=sc)
    omega = weight_underflow(k.shape[-2], u, lam_min)
    mask = _mask(q.shape[-2], k.shape[-2], causal)
    out = [np.empty(q.shape), np.empty(k.shape), np.empty(v.shape)]
    for idx in np.ndindex(*q.shape[:-2]):
        qi, ki, vi, gi = q[idx], k[idx], v[idx], g[idx]
        with np.errstate(invalid="ignore"):  # ∞·0 where ρ is void: NaN, made ∞ below
            parts = attention_grad_bound(p[idx], vi, gi, rho[idx], u)
            bq, bk = softmax_qk_bounds(parts, qi, ki, sc)
        ga = np.abs(gi)
        vbar = np.abs(vi).max(axis=0, keepdims=True)
        c = 4 * omega * mask * (ga @ (np.abs(vi) + 2 * vbar).T)
        bq = bq + sc * c @ np.abs(ki)
        bk = bk + sc * c.T @ np.abs(qi)
        bv = parts["v"] + omega * (mask.T.astype(float) @ ga)
        out[0][idx], out[1][idx], out[2][idx] = (bq + bk if self_attention else bq), bk, bv
    # a void weight error (ρ = ∞) times a zero factor is NaN: the bound is void there too
    q_b, k_b, v_b = (np.where(np.isnan(a), np.inf, a) for a in out)
    # gradual underflow: each of the ≤ T + d + 4 roundings that form one gradient entry (the
    # products with q, k, v and G, the sums over keys or queries, the scaling) may add an
    # absolute u·λ where its result is subnormal (Higham, Accuracy and Stability, §2.1)
    eta = (k.shape[-2] + q.shape[-1] + 4) * u * lam_min
    return q_b + eta, k_b + eta, v_b + eta


def stored_output_gradient_term(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, *,
                                causal: bool, u_io: float, scale: float | None = None,
                                self_attention: bool = False
                                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The extra gradient error of a backward that reads the forward's output *as stored in the
    input/output type* (unit roundoff ``u_io``), as FlashAttention-2's does for
    ``D_i = Σ_c dO_ic·O_ic`` (Dao 2023, Algorithm 2): with ``Ô = O(1 + δ)``, ``|δ| ≤ u_io``,

        |ΔD_i| ≤ u_io·Σ_c |g_ic||o_ic|,   dS_ij = P_ij(dP_ij − D_i)  ⇒  |ΔdS_ij| ≤ P_ij|ΔD_i|,
        |Δ∂L/∂q_i| ≤ s·|ΔD_i|·Σ_j P_ij|k_j|,   |Δ∂L/∂k_j| ≤ s·Σ_i P_ij|ΔD_i||q_i|,   Δ∂L/∂v = 0

    (first order in ``u_io``; ``s`` the score scale). A backward that keeps the output in the
    compute type adds nothing; this term is the allowance for one that does not — a correct
    and common choice when the I/O type is a half type. ``self_attention``: ``∂L/∂q`` collects
    both paths."""
    sc = _check(q, k, v, causal, u_io, 1.0, scale)
    o, p = softmax_attention_reference(q, k, v, causal=causal, scale=sc)
    dd = u_io * np.sum(np.abs(g) * np.abs(o), axis=-1, keepdims=True)  # (..., n, 1)
    bq = sc * dd * (p @ np.abs(k))
    bk = sc * np.swapaxes(p, -1, -2) @ (dd * np.abs(q))
    return (bq + bk if self_attention else bq), bk, np.zeros(v.shape)


def format_tiny(dtype: str) -> float:
    """The smallest normal number ``2^emin`` of ``dtype`` (for ``tiny``)."""
    return math.ldexp(1.0, FORMATS[dtype].emin)
