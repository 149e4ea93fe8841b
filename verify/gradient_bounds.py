"""A-priori rounding-error bounds of backward passes (docs/math.md §14).

The same analysis as the forward bounds (:mod:`kernel_verify.verify.references.features`,
:mod:`kernel_verify.verify.attention_bounds`; Higham, *Accuracy and Stability*, §3.1): every basic
operation rounds once, a reduction of ``n`` terms in any order errs by ``≤ γ_n·Σ|terms|``, and
values the backward reuses from the forward (saved features, weights) carry their forward error
bounds.

**Vector–Jacobian products of a feature map** (:func:`feature_vjp_bound`). Autograd computes
``ĝ_j = Σ_f g_f Ĵ_fj``, where each ``Ĵ_fj`` is formed from saved forward values. With a
majorant ``M_fj ≥ Σ|chain-rule terms of J_fj|`` (the magnitudes the backward adds), a bound
``E_fj ≥ |Ĵ_fj − J_fj|`` (from the forward error of the saved values), ``k`` roundings per
product term and a reduction over the ``D`` features:

    |ĝ_j − Σ_f g_f J_fj| ≤ Σ_f |g_f| E_fj + Σ_f Δg_f (M_fj + E_fj)
                           + γ_(D+k)·Σ_f (|g_f| + Δg_f)(M_fj + E_fj)

(``Δg_f`` bounds the error of the upstream gradient itself, e.g. ``g = φ̂(y)`` in
``∇ₓ φ(x)ᵀφ(y)``). The per-formula ``(M, E, k)`` are in :data:`BACKWARD_RULES`, each derived in
its docstring; a formula without a rule has no derived bound (the properties say so and test it
by finite differences instead).

**Normalised attention** (:func:`attention_grad_bound`): ``o_i = Σ_j P_ij v_j`` with weights
``P_ij = a_ij/D_i ≥ 0`` that the forward computes with relative error ``≤ ρ_i`` (softmax: from
the scores' dot products and the exp; log-space linear attention: ``expm1(2E + 4δ)`` of the
forward bound, ``properties/test_feature_reference.py``). The backward forms ``∂L/∂v_j =
Σ_i P_ij G_i`` and ``∂L/∂ℓ_ij = P_ij G_iᵀ(v_j − o_i)`` (``ℓ_ij = log a_ij``) from the saved
weights; its intermediates are inner products ``G_iᵀv_j``, ``G_iᵀo_i`` and, on the log-space
path, ``G_iᵀV̄_f`` with ``|V̄_f| ≤ v̄ = max_j|v_j|`` (componentwise), so with
``C_ij = P_ij·|G_i|ᵀ(|v_j| + 2v̄)`` and ``ρ'_i = ρ_i + γ_K``:

    |Δ ∂L/∂v_j| ≤ Σ_i ρ'_i P_ij |G_i|,   |∂L/∂ℓ_ij| ≤ C_ij,   |Δ ∂L/∂ℓ_ij| ≤ 4ρ'_i C_ij

(the last for ``ρ'_i ≤ 1/2``: ``|ΔP| ≤ ρP``, the inner products err by ``≤ 2ρ'|G|ᵀ(|v_j| +
v̄)``, one product rounding; the bound is void — infinite — otherwise). Softmax then gives
``∂L/∂q_i = s Σ_j (∂L/∂ℓ_ij) k_j`` with ``Δ ≤ s Σ_j R_ij C_ij |k_j|``, ``R_ij = 4ρ'_i +
γ_K(1 + 4ρ'_i)``; linear attention gives ``∂L/∂ℓq_if = Σ_j (∂L/∂ℓ_ij) π_ijf`` (``π_ijf =
φq_if φk_jf/a_ij``, the per-feature share, whose product with ``P_ij`` carries the same relative
error ``ρ``), then the log-feature Jacobian as above. ``K = 2(n + D) + 20``: every backward
quantity is at most two reductions deep (over keys or queries, and over features) with at most
20 further roundings per term (the casts, the shift, the products, the normalisation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernel_verify.verify.references.features import (
    _half_sq_norm_term,
    _projection_term,
    feature_error_bound,
    smallest_normal,
)
from kernel_verify.verify.references.spec import MapSpec, require_map
from kernel_verify.verify.tolerance import gamma

__all__ = [
    "BACKWARD_RULES",
    "attention_grad_bound",
    "feature_vjp_bound",
    "softmax_weight_error",
]

Rule = Callable[..., tuple[np.ndarray, np.ndarray, int]]


def _g(n: float, u: float) -> float:
    return gamma(int(np.ceil(n)), u)


# ------------------------------------------------------------------------ per-formula rules
@dataclass(frozen=True)
class _ExpAffine:
    """``ℓ_f = b_fᵀx − ‖x‖²/2 + c_f`` of one exp-affine formula: ``rows(W, config) -> b``
    (``B s_f w_f``) and ``const(W, config) -> c_f``."""

    rows: Callable[[np.ndarray, Mapping[str, Any]], np.ndarray]
    const: Callable[[np.ndarray, Mapping[str, Any]], Any]
    #: ``(W, config, u, ulps) -> |b̂ − b|`` when the rows are formed otherwise than by a scalar
    #: times ``W`` (default: ``γ(6 + 2·ulps)|b|``)
    rows_error: Callable[..., np.ndarray] | None = None


def _gerf_scale(config: Mapping[str, Any]) -> float:
    return np.sqrt(1 - 4 * float(config["A"]))


def _gerf_const(w: np.ndarray, config: Mapping[str, Any]) -> np.ndarray:
    a = float(config["A"])
    return a * np.sum(w * w, axis=-1) + 0.25 * w.shape[1] * np.log1p(-4 * a) \
        - 0.5 * np.log(w.shape[0])


def _sderf_matrices(w: np.ndarray, config: Mapping[str, Any]):
    d = w.shape[1]
    a = float(config["alpha"]) * np.eye(d) + (float(config["beta"]) / d) * np.ones((d, d))
    lam, q = np.linalg.eigh(a)
    k = 1 - 4 * lam
    return a, (q * np.sqrt(k)) @ q.T, 0.25 * float(np.sum(np.log(k)))


def _sderf_rows(w: np.ndarray, config: Mapping[str, Any]) -> np.ndarray:
    """SDERF (docs/math.md §20): rows ``Bᵀωᵢ = (WB)ᵢ``, ``B = (I − 4A)^(1/2)`` symmetric."""
    return w @ _sderf_matrices(w, config)[1]


def _sderf_const(w: np.ndarray, config: Mapping[str, Any]) -> np.ndarray:
    a, _, log_d = _sderf_matrices(w, config)
    return np.einsum("id,de,ie->i", w, a, w) + log_d - 0.5 * np.log(w.shape[0])


def _sderf_rows_error(w: np.ndarray, config: Mapping[str, Any], u: float, ulps: float):
    """``WB`` formed in float64 from an eigh-based square root (the twin's forward bound,
    verify/references/features_catalogue.py), then cast to the compute dtype (one ``u``)."""
    d = w.shape[1]
    b = _sderf_matrices(w, config)[1]
    u64 = 2.0**-53
    e64 = (gamma(16 * d + 32, u64) * (np.abs(w) @ np.abs(b))
           + 64 * d * u64 * np.abs(b).max() * np.abs(w).sum(axis=1, keepdims=True))
    return e64 + _g(2, u) * (np.abs(w @ b) + e64)


#: formula -> its exp-affine log-features (softmax_positive, softmax_hyperbolic, GERF, SDERF).
_EXP_AFFINE: dict[str, _ExpAffine] = {
    "softmax_positive": _ExpAffine(lambda w, config: w,
                                   lambda w, config: -0.5 * np.log(w.shape[0])),
    "softmax_hyperbolic": _ExpAffine(lambda w, config: np.concatenate([w, -w], axis=0),
                                     lambda w, config: -0.5 * np.log(2 * w.shape[0])),
    "gerf": _ExpAffine(lambda w, config: _gerf_scale(config) * w, _gerf_const),
    "sderf": _ExpAffine(_sderf_rows, _sderf_const, _sderf_rows_error),
}


def _rule_exp_affine(entry, x, params, config, u, ulps, log):
    """``φ_f = exp(ℓ_f)``, ``ℓ_f = B s_f w_fᵀx − ‖x‖²/2 + c_f`` (positive, hyperbolic, GERF):
    ``J_fj = φ_f(b_fj − x_j)`` (``b_f = B s_f w_f``), ``log``: ``J = b_fj − x_j``.
    ``M = φ_f(|b_fj| + |x_j|)`` (``log``: without ``φ_f``). ``E``: the saved ``φ̂_f`` errs by
    the forward bound ``e_f`` (exp's backward multiplies by its output), and ``b̂`` by
    ``γ(6 + 2·ulps)|b|`` (B: 4 roundings and a sqrt call; the cast of W; the product):
    ``E = e_f(|b| + |x|) + (φ_f + e_f)γ(6 + 2·ulps)|b|``. ``k = 8``: ``g·φ̂``, ``×B``, the product
    in the W reduction, the two roundings of ``x·x``'s backward (product, add), the sum of the
    projection and norm parts, and the two dtype casts of the gradient."""
    form = _EXP_AFFINE[entry.formula]
    w = np.asarray(params["W"], dtype=np.float64)
    b = form.rows(w, config)
    lin = np.abs(b) + np.abs(x)[..., :, None, :]
    if form.rows_error is None:
        eb = _g(6 + 2 * ulps, u) * np.abs(b) * np.ones_like(lin)
    else:
        eb = form.rows_error(w, config, u, ulps) * np.ones_like(lin)
    if log:
        return lin, eb, 8
    phi = np.exp(_exp_affine_log(entry.formula, x, params, config))[..., None]
    e = feature_error_bound(entry, x, params, config, u, ulps)[..., None]
    return phi * lin, e * lin + (phi + e) * eb, 8


def _exp_affine_log(formula, x, params, config):
    w = np.asarray(params["W"], dtype=np.float64)
    form = _EXP_AFFINE[formula]
    b = form.rows(w, config)
    half = 0.5 * np.sum(x * x, axis=-1, keepdims=True)
    return x @ b.T - half + form.const(w, config)


def _trig_parts(p_v, p_e, sin_first: bool):
    s, c = np.sin(p_v), np.cos(p_v)
    return (np.concatenate([np.abs(s), np.abs(c)], axis=-1),
            np.concatenate([np.minimum(p_e, 2.0)] * 2, axis=-1))


def _rule_rff(entry, x, params, config, u, ulps, log):
    """RFF pairs ``s[cos p, sin p]``, ``p = Wx/σ``, ``s = m^(−1/2)``: ``J = s·[−sin p, cos p]·w/σ``.
    ``M = s|trig'(p)||w|/σ``; the saved ``p̂`` errs by ``e_p`` (the projection rule of the forward
    analysis), and ``|sin p̂ − sin p| ≤ min(e_p, 2)`` (1-Lipschitz) plus the call's
    ``2·ulps·u``; ``s``, ``σ`` and ``W`` carry 5 roundings and a sqrt call: ``E = s|w|/σ·(t +
    γ(5 + 2·ulps)(|trig'| + t))``, ``t = min(e_p, 2) + 2·ulps·u``. ``k = 6`` (``g·s``, ``×trig'``,
    the product in the W reduction, ``/σ``, the add of the cos and sin parts, one cast).
    Random phase ``√(2/m)cos(p + b)``: the same with ``p + b`` (``e + u(|p + b| + |b|)``)."""
    w = np.asarray(params["W"], dtype=np.float64)
    sigma = float(config["sigma"])
    p = _projection_term(x, w, sigma, u, ulps)
    trig, err = _trig_parts(p.v, p.e, True)
    return _rff_bound(trig, err, 1.0 / np.sqrt(w.shape[0]), np.concatenate([w, w], axis=0),
                      sigma, u, ulps)


def _rule_rff_phase(entry, x, params, config, u, ulps, log):
    """Random phase ``√(2/m)cos(p + b)``: :func:`_rule_rff` with ``p + b`` (``e + u(|p + b| +
    |b|)``)."""
    w = np.asarray(params["W"], dtype=np.float64)
    sigma = float(config["sigma"])
    p = _projection_term(x, w, sigma, u, ulps)
    b = np.asarray(params["b"], dtype=np.float64)
    pv = p.v + b
    pe = p.e + u * (np.abs(pv) + np.abs(b))
    return _rff_bound(np.abs(np.sin(pv)), np.minimum(pe, 2.0), np.sqrt(2.0 / w.shape[0]), w,
                      sigma, u, ulps)


def _rff_bound(trig, err, s, rows, sigma, u, ulps):
    """``(M, E, 6)`` of the rff rules from ``|trig'|``, its error, the scale and the rows."""
    t = (err + 2 * ulps * u)[..., None]
    scale = s * np.abs(rows) / sigma
    mj = scale * trig[..., None]
    ej = scale * (t + _g(5 + 2 * ulps, u) * (trig[..., None] + t))
    return mj, ej, 6


def _rule_relu_features(entry, x, params, config, u, ulps, log):
    """``s·relu(p)``: ``J = s·1[p > 0]·w``. Where ``|p| ≤ e_p`` the computed sign may differ and
    the computed row is off by ``s|w|``; elsewhere ``Ĵ`` errs by ``γ(5 + 2·ulps)s|w|`` (s, W).
    ``k = 3`` (``g·s``, the mask, the product in the W reduction)."""
    w = np.asarray(params["W"], dtype=np.float64)
    p = _projection_term(x, w, 1.0, u, ulps)
    s = 1.0 / np.sqrt(w.shape[0])
    unsure = (np.abs(p.v) <= p.e)[..., None]
    on = (p.v > 0)[..., None]
    base = s * np.abs(w) * np.ones((*p.v.shape, 1))
    mj = base * (on | unsure)
    ej = base * unsure + _g(5 + 2 * ulps, u) * mj
    return mj, ej, 3


def _diag(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    return values[..., :, :, None] * np.eye(x.shape[-1])


def _rule_linear(entry, x, params, config, u, ulps, log):
    """``J = I``: the gradient is ``g`` (``M = I``, ``E = 0``, ``k = 0``)."""
    return _diag(x, np.ones_like(x)), _diag(x, np.zeros_like(x)), 0


def _rule_relu(entry, x, params, config, u, ulps, log):
    """``J = diag(1[x > 0])`` exactly (x is the exact input): ``E = 0``, ``k = 0``."""
    return _diag(x, (x > 0).astype(float)), _diag(x, np.zeros_like(x)), 0


def _rule_square(entry, x, params, config, u, ulps, log):
    """``J = diag(2x)``: ``g·x·2`` (one rounding; ×2 exact): ``k = 1``."""
    return _diag(x, 2 * np.abs(x)), _diag(x, np.zeros_like(x)), 1


def _rule_elu(entry, x, params, config, u, ulps, log):
    """``elu(x) + 1``: ``J = 1`` (x > 0) or ``e^x`` (x ≤ 0), from the saved exp (``2·ulps·u``
    relative plus the underflow floor ``η``) or from ``elu(x) + 1`` (one more rounding of a value
    ≤ 1): ``E ≤ (2·ulps + 2)u + η`` absolute where ``x ≤ 0``. ``log``: ``log1p(x)`` (x > 0),
    ``x``: ``J = 1/(1 + x)`` formed with 2 roundings (``E = γ_2/(1 + x)``). ``k = 1``."""
    pos = x > 0
    if log:
        val = np.where(pos, 1.0 / (1.0 + np.maximum(x, 0.0)), 1.0)
        err = np.where(pos, _g(2, u) * val, 0.0)
    else:
        val = np.where(pos, 1.0, np.exp(np.minimum(x, 0.0)))
        err = np.where(pos, 0.0, (2 * ulps + 2) * u + smallest_normal(u))
    return _diag(x, val), _diag(x, err), 1


def _rule_softmax_trig(entry, x, params, config, u, ulps, log):
    """``φ = h[cos p, sin p]``, ``h = e^{‖x‖²/2}/√m``: ``J_fj = φ_f x_j + h·trig'_f w_fj``.
    ``M = |φ_f||x_j| + h|trig'_f||w_fj|``. ``E``: ``φ̂`` errs by the forward bound ``e_f``; ``ĥ``
    by ``ρ_h·h`` (the forward rule of ``exp(‖x‖²/2)·m^(−1/2)``); ``trig'`` by ``t = min(e_p, 2) +
    2·ulps·u``; W cast ``u``: ``E = e_f|x_j| + h|w|(ρ_h(|trig'| + t) + (1 + ρ_h)(t +
    u(|trig'| + t)))``. ``k = 8`` (``g·trig``, ``g·h``, the scale's exp backward and ``/√m``, the
    norm's ``x·x`` backward, ``×trig'``, the add of the two paths, one cast)."""
    w = np.asarray(params["W"], dtype=np.float64)
    p = _projection_term(x, w, 1.0, u, ulps)
    half = _half_sq_norm_term(x, p)
    m = w.shape[0]
    scale_t = half.exp() * half.const(np.full(half.v.shape, 1.0 / np.sqrt(m)),
                                      _g(3 + 2 * ulps, u))
    h, rho_h = scale_t.v[..., None], (scale_t.e / scale_t.v)[..., None]
    trig, err = _trig_parts(p.v, p.e, True)
    t = (err + 2 * ulps * u)[..., None]
    rows = np.abs(np.concatenate([w, w], axis=0))
    phi = h * np.concatenate([np.abs(np.cos(p.v)), np.abs(np.sin(p.v))], axis=-1)[..., None]
    e_f = feature_error_bound(entry, x, params, config, u, ulps)[..., None]
    ax = np.abs(x)[..., :, None, :]
    mj = phi * ax + h * trig[..., None] * rows
    ej = e_f * ax + h * rows * (rho_h * (trig[..., None] + t)
                                + (1 + rho_h) * (t + u * (trig[..., None] + t)))
    return mj, ej, 8


#: formula -> ``rule(entry, x, params, config, u, ulps, log) -> (M, E, k)`` (module docstring).
BACKWARD_RULES: dict[str, Rule] = {
    "softmax_positive": _rule_exp_affine,
    "softmax_hyperbolic": _rule_exp_affine,
    "gerf": _rule_exp_affine,
    "sderf": _rule_exp_affine,
    "rff_pairs": _rule_rff,
    "rff_phase": _rule_rff_phase,
    "relu_features": _rule_relu_features,
    "softmax_trig": _rule_softmax_trig,
    "linear": _rule_linear,
    "identity": _rule_linear,
    "relu": _rule_relu,
    "square": _rule_square,
    "elu_plus_one": _rule_elu,
}


def feature_vjp_bound(
    entry: MapSpec, x: np.ndarray, params: Mapping[str, np.ndarray],
    config: Mapping[str, Any] | None, g_abs: np.ndarray, u: float, ulps: float, *,
    log: bool = False, g_err: np.ndarray | None = None,
) -> np.ndarray:
    """Bound ``(..., n, d)`` on ``|ĝ − Σ_f g_f J_f|`` for the backward of ``φ`` (or ``log φ``)
    at ``x`` (the exact input as the code sees it), upstream ``|g|`` ``(..., n, D)`` and its own
    error ``g_err`` (module docstring). ``u``: unit roundoff of the compute dtype; ``ulps``: the
    elementary-function figure of the budget. A ``KeyError`` for a formula without a rule."""
    require_map(entry)
    rule = BACKWARD_RULES.get(entry.formula)
    if rule is None:
        raise KeyError(f"no derived backward bound for formula {entry.formula!r}; rules: "
                       f"{', '.join(sorted(BACKWARD_RULES))}")
    cfg = {**entry.config, **(config or {})}
    x = np.asarray(x, dtype=np.float64)
    mj, ej, k = rule(entry, x, params, cfg, u, ulps, log)
    ga = np.asarray(g_abs, dtype=np.float64)
    ge = np.zeros_like(ga) if g_err is None else np.asarray(g_err, dtype=np.float64)
    dim = mj.shape[-2]
    mag = mj + ej
    return (np.einsum("...f,...fj->...j", ga, ej) + np.einsum("...f,...fj->...j", ge, mag)
            + _g(dim + k, u) * np.einsum("...f,...fj->...j", ga + ge, mag))


# ------------------------------------------------------------------------------- attention
def softmax_weight_error(q: np.ndarray, k: np.ndarray, scale: float, u: float, ulps: float,
                         *, causal: bool) -> np.ndarray:
    """Relative error bound ``ρ_i`` (n, 1) of the computed softmax weights ``P̂_ij`` of row i:
    the scores ``fl(q_iᵀk_j)·s`` err by ``Δ_ij ≤ γ_(d+2)|q_i|ᵀ|k_j|·s`` (dot, scale and its
    rounding); the row maximum by ``≤ max_j Δ_ij``; the shift ``s_ij − m_i`` rounds once
    (``u·|s_ij − m_i|``); each exponential is then within ``e^{S_i}(1 + 2·ulps·u)``,
    ``S_i = 2·max_j Δ_ij + u·max_j|s_ij − m_i|``; the row sum adds ``γ_n``, the division one
    rounding: ``ρ_i = e^{2S_i}(1 + 2·ulps·u)²(1 + γ_(n+1))/(1 − γ_n) − 1``."""
    n, d = q.shape
    s = q @ k.T * scale
    delta = gamma(d + 2, u) * (np.abs(q) @ np.abs(k).T) * scale
    if causal:
        mask = np.tril(np.ones((n, k.shape[0]), dtype=bool))
        s = np.where(mask, s, -np.inf)
        delta = np.where(mask, delta, 0.0)
    spread = np.where(np.isfinite(s), np.abs(s - s.max(axis=-1, keepdims=True)), 0.0)
    big_s = 2 * delta.max(axis=-1, keepdims=True) + u * spread.max(axis=-1, keepdims=True)
    g_n = gamma(k.shape[0] + 1, u)
    return np.exp(2 * big_s) * (1 + 2 * ulps * u) ** 2 * (1 + g_n) / (1 - g_n) - 1


def attention_grad_bound(
    p: np.ndarray, v: np.ndarray, g: np.ndarray, rho: np.ndarray, u: float, *,
    n_features: int = 0,
) -> dict[str, np.ndarray]:
    """The bounds of the module docstring for one head: ``p`` (n, n) exact normalised weights
    (zero where masked), ``v`` (n, d_v), ``g`` (n, d_v) upstream, ``rho`` (n, 1) relative weight
    errors. Returns ``{"v": Δ∂L/∂v (n, d_v), "C": C (n, n), "R": R (n, n)}``; the caller maps
    ``C`` and ``R`` through the scores (:func:`softmax_qk_bounds`) or the features. Entries are
    ``inf`` where ``ρ'_i > 1/2`` (the bound is void)."""
    n = p.shape[0]
    big_k = 2 * (n + n_features) + 20
    g_k = gamma(big_k, u)
    rho_p = np.asarray(rho, dtype=np.float64) + g_k
    vbar = np.abs(v).max(axis=0, keepdims=True)
    ga = np.abs(g)
    c = p * (ga @ (np.abs(v) + 2 * vbar).T)
    r = 4 * rho_p + g_k * (1 + 4 * rho_p)
    r = np.where(rho_p <= 0.5, r, np.inf) * np.ones_like(p)
    dv = (p * rho_p).T @ ga
    return {"v": dv, "C": c, "R": r}


def softmax_qk_bounds(parts: dict[str, np.ndarray], q: np.ndarray, k: np.ndarray,
                      scale: float) -> tuple[np.ndarray, np.ndarray]:
    """``(Δ∂L/∂q, Δ∂L/∂k)`` of softmax attention: ``s Σ_j R_ij C_ij |k_j|`` and
    ``s Σ_i R_ij C_ij |q_i|`` (module docstring)."""
    rc = parts["R"] * parts["C"]
    return scale * rc @ np.abs(k), scale * rc.T @ np.abs(q)
