"""Attention against the formula its target declares (issue #29; docs/math.md §14, "Declared
features"): a library module shared by ``properties/test_declared_features.py``,
``properties/test_attention_forms.py`` (its tolerances) and ``kernel-verify calibrate``.

A target that declares ``features(x, seed)`` (the exact float64 features behind its outputs)
declares the whole formula of linear attention: ``o_i = Σ_j a_ij v_j / Σ_j a_ij``,
``a_ij = φ(q_i)ᵀφ(k_j)`` (``j ≤ i`` when causal). This module evaluates that formula in float64
(the outputs; the mpmath recurrence where cheap), its exact gradients (the analytic chain of
normalised attention through the features' Jacobian, the Jacobian by Richardson central
differences of the float64 features), and the derived bounds for a target computing in unit
roundoff ``u`` with ``m`` features:

* outputs — :func:`exact_bounds` (the plain evaluation, and the log-space one for positive
  features, of :mod:`kernel_verify.verify.forms_bounds`; non-causal:
  :mod:`kernel_verify.verify.attention_bounds`), the target's features within
  :func:`feature_error` of the declared ones, a weight formed directly from ``qᵀk`` (Based's
  ``1 + s + s²/2``) charged ``2(d + 4)`` more roundings (:func:`direct_extra`);
* gradients — :func:`gradient_bounds`: the weights ``P_ij`` with relative error ``ρ_i``
  (plain: ``γ_(m+2+extra)·Ā_ij/a_ij``, ``Ā_ij = Σ_f |φq_if φk_jf|``, then the normaliser), the
  derived bounds of :func:`kernel_verify.verify.gradient_bounds.attention_grad_bound`
  (``∂L/∂v`` derived; ``∂L/∂a_ij`` within ``R_ij·C_ij/a_ij``), then through the features:
  ``∂L/∂φq_if = Σ_j (∂L/∂a_ij)φk_jf`` and ``∂L/∂q_i = J(q_i)ᵀ ∂L/∂φq_i``, each reduction
  charged ``γ`` of its length and the target's Jacobian entries within
  ``γ_10·(|J_fc| + max_c'|J_fc'|)`` (exact derivation for monomial features — Taylor,
  ReBased — whose entries are single products; a stated assumption otherwise).

Everything is computed from the inputs as the target saw them (rounded to its dtype), so input
rounding is no error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kernel_verify.properties.strategies import QKV
from kernel_verify.verify.attention_bounds import linear_attention_error_bound
from kernel_verify.verify.forms_bounds import (
    log_forms_delta,
    log_forms_error_bound,
    plain_forms_error_bound,
    plain_state_error_bound,
)
from kernel_verify.verify.gradient_bounds import attention_grad_bound
from kernel_verify.verify.tolerance import U64, gamma, reference_rounding

__all__ = ["DeclaredGradient", "GradientGap", "direct_extra", "exact_attention", "exact_bounds",
           "exact_gradients", "feature_error", "feature_jacobian", "gradient_bounds",
           "output_bound"]

#: Roundings charged to each Jacobian entry of the target's features (module docstring).
JACOBIAN_ROUNDINGS = 10


def feature_error(x: QKV, m: int, u: float) -> float:
    """Relative error ``η`` of a feature the target computes against ``features(x, seed)`` —
    the same formula evaluated in another order or precision: exp-affine features
    ``exp(wᵀx − ‖x‖²/2 + c)`` have an exponent within ``γ_(d+3)·(Z + 1)``,
    ``Z = (√d + 8)·X + X² + log m`` (``X`` the largest pre-scaled input norm, ``‖w‖ ≤ √d + 8``:
    the model of :func:`~kernel_verify.properties.attention_cases.output_error_bound`, failing
    with probability ``< e^(−32)`` per row), and the exponential adds ≤ 4 ulp
    (verify/tolerance.py); polynomial (Taylor) features, ≤ 3 roundings, are inside the same
    figure."""
    d = x.q.shape[-1]
    big_x = max(np.linalg.norm(x.q, axis=-1).max(), np.linalg.norm(x.k, axis=-1).max()) * d**-0.25
    z = (math.sqrt(d) + 8) * big_x + big_x * big_x + math.log(max(m, 2))
    return math.expm1(gamma(d + 3, u) * (z + 1)) + 8 * u


def direct_extra(d: int) -> int:
    """Roundings per product term beyond the feature path's, for a target that forms each weight
    from the score ``s = qᵀk·c`` (Based's ``1 + s + s²/2``, ReBased's ``s²``) instead of a
    feature dot product: the score errs by ``γ_(d+1)`` of ``|q|ᵀ|k|·c``, which the squared
    term doubles, and the polynomial adds 4 roundings: ``2(d + 4)``, against the majorant
    ``Σ_f |φq_f φk_f|`` of the features (which is the polynomial in ``|q|ᵀ|k|·c``)."""
    return 2 * (d + 4)


def exact_bounds(fq: np.ndarray, fk: np.ndarray, v: np.ndarray, u: float, eta: float,
                 extra: int = 0, causal: bool = True):
    """Output and state bounds of whichever derived evaluation the target uses
    (verify/forms_bounds.py): the plain one always, the log-space one too when every feature is
    positive (the larger of the two bounds either). The target's features differ from
    ``features(x)`` by ``≤ η`` relative (:func:`feature_error`): on the plain path every
    product term moves by ``≤ 2η + η²``, i.e. ``⌈(2η + η²)/u⌉`` more roundings; in log space
    every logit by ``≤ 2·log(1 + η)``. The log-space state through ``state_sums``:
    ``S = e^L·V̄`` with ``|ΔL| ≤ δ`` (plus ≤ 8u for the exponential and the product) and
    ``|ΔV̄| ≤ E`` gives ``|ΔS| ≤ (e^δ − 1)|S| + z·E·e^δ`` and ``|Δz| ≤ (e^δ − 1)·z``.
    Non-causal (``causal=False``): the plain bound of
    :func:`~kernel_verify.verify.attention_bounds.linear_attention_error_bound` (no state)."""
    extra = extra + math.ceil((2 * eta + eta * eta) / u)
    if causal:
        out_b = plain_forms_error_bound(fq, fk, v, u=u, extra=extra)
        s_b, z_b = plain_state_error_bound(fk, v, u=u, extra=extra)
    else:
        out_b = linear_attention_error_bound(fq, fk, v, causal=False, u=u, extra=extra)
        s_b = z_b = None
    if (fq > 0).all() and (fk > 0).all():
        lq, lk = np.log(fq), np.log(fk)
        shift = 2 * math.log1p(eta)
        e_log = log_forms_error_bound(lq, lk, v, u=u, extra=shift)
        out_b = np.maximum(out_b, e_log)
        if causal:
            delta = log_forms_delta(lq, lk, u=u, extra=shift) + 8 * u
            z = fk.sum(axis=-2)
            s = np.swapaxes(fk, -1, -2) @ v
            s_b = np.maximum(s_b, np.abs(s) * math.expm1(delta)
                             + z[..., None] * e_log * math.exp(delta))
            z_b = np.maximum(z_b, z * math.expm1(delta))
    return out_b, s_b, z_b


def _weights(fq: np.ndarray, fk: np.ndarray, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(a, Ā)``: ``a_ij = φq_iᵀφk_j`` and ``Ā_ij = Σ_f |φq_if φk_jf|`` (zero where masked)."""
    a = fq @ np.swapaxes(fk, -1, -2)
    abar = np.abs(fq) @ np.swapaxes(np.abs(fk), -1, -2)
    if causal:
        mask = np.tril(np.ones(a.shape[-2:], dtype=bool))
        a, abar = np.where(mask, a, 0.0), np.where(mask, abar, 0.0)
    return a, abar


def exact_attention(fq: np.ndarray, fk: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    """``o = (a v)/(a 1)`` in float64 (module docstring)."""
    a, _ = _weights(fq, fk, causal)
    return (a @ v) / a.sum(axis=-1, keepdims=True)


def denominator_eps_hint(fq: np.ndarray, fk: np.ndarray, v: np.ndarray, got: np.ndarray,
                         causal: bool, bound: np.ndarray) -> str:
    """A diagnosis for outputs that miss linear attention on the declared features: when they
    equal ``(a v)/(a 1 + ε)`` for one ε > 0 — each output gives ``ε = (a v)_ic/ô_ic − (a 1)_i``;
    the estimates of every entry with ``|ô| > 1e-3·max|ô|`` agree within 10 % and that ε
    reproduces every output within the bound — the text names it (an ε added to the normaliser,
    which makes the weights sum to ``s/(s + ε) < 1``); else ''."""
    a, _ = _weights(fq, fk, causal)
    num, den = a @ v, a.sum(axis=-1, keepdims=True)
    if not np.isfinite(got).all():
        return ""
    big = np.abs(got) > 1e-3 * float(np.abs(got).max(initial=0.0))
    if not big.any():
        return ""
    with np.errstate(divide="ignore", invalid="ignore"):
        est = (num / got - den)[big]
    est = est[np.isfinite(est)]
    if not est.size:
        return ""
    eps = float(np.median(est))
    if not (eps > 0 and np.all(np.abs(est - eps) <= 0.1 * eps)):
        return ""
    if not (np.abs(num / (den + eps) - got) <= bound).all():
        return ""
    return (f" — these outputs equal linear attention on the declared features with ε ≈ "
            f"{eps:.3g} added to the normaliser, o = Σ_j w_ij v_j / (Σ_j w_ij + ε): the weights "
            "then sum to less than 1 (such an ε is a deviation of relative size ε/Σ_j w_ij from "
            "the declared formula, the size of a float32 evaluation in a float64 result; the "
            "float32 and half-type bounds absorb it where it is below their rounding)")


def output_bound(fq: np.ndarray, fk: np.ndarray, v: np.ndarray, out64: np.ndarray, u: float,
                 eta: float, extra: int, causal: bool) -> np.ndarray:
    """The target's bound (:func:`exact_bounds`) plus the float64 evaluation's own
    (the plain bound at ``u₆₄``) and its final rounding: per entry."""
    ours = exact_bounds(fq, fk, v, u, eta, extra, causal)[0]
    if causal:
        ref = plain_forms_error_bound(fq, fk, v, u=U64)
    else:
        ref = linear_attention_error_bound(fq, fk, v, causal=False, u=U64)
    return ours + ref + reference_rounding(out64)


def feature_jacobian(features, x: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(J, E)``: ``J (…, T, m, d)`` the Jacobian of the declared float64 features at ``x``
    by Richardson-extrapolated central differences ``(4·D(h/2) − D(h))/3``,
    ``h = u₆₄^(1/3)·max(1, max|x|)``, and ``E`` its error bound ``100·u₆₄^(2/3)·F`` per row
    (``F = max(1, max_f|φ_f(x)|)``; the fifth-derivative assumption of the suite's finite
    differences, docs/math.md §14 — exact up to rounding for polynomial features)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    h = U64 ** (1 / 3) * max(1.0, float(np.abs(x).max(initial=0.0)))
    cols = []
    for c in range(d):
        e = np.zeros(d)
        e[c] = 1.0

        def diff(step, e=e):
            return (np.asarray(features(x + step * e, seed), dtype=np.float64)
                    - np.asarray(features(x - step * e, seed), dtype=np.float64)) / (2 * step)

        cols.append((4 * diff(h / 2) - diff(h)) / 3)
    jac = np.stack(cols, axis=-1)
    phi = np.asarray(features(x, seed), dtype=np.float64)
    f_scale = np.maximum(1.0, np.abs(phi).max(axis=-1, keepdims=True))[..., None]
    return jac, 100 * U64 ** (2 / 3) * f_scale * np.ones_like(jac)


def exact_gradients(fq, fk, jq, jk, v, g, causal: bool) -> dict[str, np.ndarray]:
    """``∂L/∂(q, k, v)`` of ``L = Σ G⊙o`` in float64 (module docstring): ``c_ij = ∂L/∂a_ij =
    G_iᵀ(v_j − o_i)/D_i``, ``∂L/∂v_j = Σ_i P_ij G_i``, ``∂L/∂φq_i = Σ_j c_ij φk_j``,
    ``∂L/∂q_i = J(q_i)ᵀ ∂L/∂φq_i`` (and the same for k)."""
    a, _ = _weights(fq, fk, causal)
    den = a.sum(axis=-1, keepdims=True)
    p = a / den
    o = p @ v
    c = (g @ np.swapaxes(v, -1, -2) - (g * o).sum(-1, keepdims=True)) / den
    if causal:
        c = np.tril(c)
    dfq = c @ fk
    dfk = np.swapaxes(c, -1, -2) @ fq
    return {"q": np.einsum("...f,...fc->...c", dfq, jq),
            "k": np.einsum("...f,...fc->...c", dfk, jk),
            "v": np.swapaxes(p, -1, -2) @ g, "o": o}


def _row_weight_error(a: np.ndarray, abar: np.ndarray, u: float, m: int, n: int, eta: float,
                      extra: int, fq: np.ndarray, fk: np.ndarray, causal: bool) -> np.ndarray:
    """``ρ_i`` (…, T, 1): relative error of the target's ``P_ij`` (module docstring). Plain:
    each ``a_ij`` within ``r_ij = γ_(m+2+extra')·Ā_ij/a_ij`` (``extra'`` the features' own error
    as roundings), the row sum adds ``γ_n``, the division one rounding:
    ``ρ = (1 + r)(1 + γ_(n+1))/(1 − r − γ_n) − 1`` with ``r = max_j r_ij``. Positive features
    may be combined in log space instead: ``expm1(2δ)`` of :func:`log_forms_delta`; the larger."""
    extra = extra + math.ceil((2 * eta + eta * eta) / u)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(abar > 0, gamma(m + 2 + extra, u) * abar / a, 0.0)
    r = r.max(axis=-1, keepdims=True)
    g_n = gamma(n + 1, u)
    rho = (1 + r) * (1 + g_n) / (1 - r - g_n) - 1
    rho = np.where(r + g_n < 1, rho, np.inf)
    if (fq > 0).all() and (fk > 0).all():
        delta = log_forms_delta(np.log(fq), np.log(fk), u=u, extra=2 * math.log1p(eta))
        rho = np.maximum(rho, math.expm1(min(2 * delta, 700.0)))
    return rho


def gradient_bounds(fq, fk, jq, ejq, jk, ejk, v, g, u: float, eta: float, extra: int,
                    causal: bool, refs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-entry bounds of ``|∂L/∂(q, k, v) − exact|`` for a target computing in ``u``
    (module docstring); ``ejq``/``ejk``: the reference Jacobians' own error
    (:func:`feature_jacobian`), ``refs``: :func:`exact_gradients`. Inf where the weights are not
    all positive or ``ρ' > 1/2`` (void: the derivation needs positive weights)."""
    a, abar = _weights(fq, fk, causal)
    n, m = fk.shape[-2], fq.shape[-1]
    visible = np.tril(np.ones(a.shape[-2:], dtype=bool)) if causal else np.ones(a.shape[-2:],
                                                                                 dtype=bool)
    if not (a[..., visible] > 0).all():
        inf = {k: np.full_like(refs[k], np.inf) for k in "qkv"}
        return inf
    den = a.sum(axis=-1, keepdims=True)
    p = a / den
    rho = _row_weight_error(a, abar, u, m, n, eta, extra, fq, fk, causal)
    out = {"q": np.empty_like(refs["q"]), "k": np.empty_like(refs["k"]),
           "v": np.empty_like(refs["v"])}
    lead = a.shape[:-2]
    g_red = gamma(n + 2, u)  # the reduction over keys (queries) and the product with φ
    g_f = gamma(m + 2, u)  # the reduction over features in the Jacobian product
    g_j = gamma(JACOBIAN_ROUNDINGS, u)
    for idx in np.ndindex(*lead):
        parts = attention_grad_bound(p[idx], v[idx], g[idx], rho[idx], u, n_features=m)
        out["v"][idx] = parts["v"]
        with np.errstate(divide="ignore", invalid="ignore"):
            ca = np.where(p[idx] > 0, parts["C"] / np.where(a[idx] > 0, a[idx], 1.0), 0.0)
        rel = (1 + parts["R"]) * (1 + g_red) * (1 + eta) - 1  # ∂L/∂a, the product, φ's error
        rel = np.where(p[idx] > 0, rel, 0.0)
        for name, f_other, jac, ejac, cmat in (("q", fk[idx], jq[idx], ejq[idx], ca),
                                               ("k", fq[idx], jk[idx], ejk[idx], ca.T)):
            mag_f = cmat @ np.abs(f_other)  # Σ_j |∂L/∂a_ij||φ_jf|
            err_f = (cmat * rel if name == "q" else (ca * rel).T) @ np.abs(f_other)
            row_max = np.abs(jac).max(axis=-1, keepdims=True)
            d_jac = g_j * (np.abs(jac) + row_max) + ejac
            jbar = np.abs(jac) + d_jac
            bound = (np.einsum("tf,tfc->tc", err_f, jbar)
                     + np.einsum("tf,tfc->tc", mag_f, d_jac)
                     + g_f * np.einsum("tf,tfc->tc", mag_f + err_f, jbar))
            out[name][idx] = bound
    for name in "qkv":
        out[name] = out[name] + reference_rounding(refs[name], 4 * U64)
    return out


@dataclass(frozen=True)
class GradientGap:
    """``∂L/∂name`` of a target (``got``, float64) against a reference (``ref``) within ``bound``
    (per entry)."""

    name: str
    got: np.ndarray
    ref: np.ndarray
    bound: np.ndarray

    @property
    def ratio(self) -> float:
        """The worst ``|got − ref| / bound`` (non-finite ``got``: inf; a zero bound with a nonzero
        error: inf). ``≤ 1`` exactly when ``verify.compare.compare`` passes."""
        with np.errstate(invalid="ignore", divide="ignore"):
            err = np.where(np.isfinite(self.got), np.abs(self.got - self.ref), np.inf)
            r = np.where(self.bound > 0, err / self.bound, np.where(err > 0, np.inf, 0.0))
        return float(r.max(initial=0.0))


class DeclaredGradient(GradientGap):
    """``∂L/∂name`` of the target (``got``) against the declared formula's (``ref``) within
    ``bound`` (per entry, float64)."""


# ------------------------------------------------------------------ one example, end to end
#: Above this many ``T·m`` entries the causal reference is float64 with its bound, not mpmath.
MP_ENTRIES = 400


def inputs(layout: tuple[int, ...], seed: int, self_attention: bool) -> QKV:
    """Gaussian ``q, k`` (scale 0.5) and ``v`` of ``layout = (B, H, T, d, d_v)`` from the seed's
    stream ``declared_features`` (``k is q`` for self-attention-only targets)."""
    from kernel_verify.properties.strategies import generator

    b, h, t, d, dv = layout
    rng = generator(seed, "declared_features")
    q = 0.5 * rng.standard_normal((b, h, t, d))
    k = q if self_attention else 0.5 * rng.standard_normal((b, h, t, d))
    return QKV(q, k, rng.standard_normal((b, h, t, dv)), 0.5, self_attention)


def seen_qkv(x: QKV, backend) -> QKV:
    """``x`` rounded to the backend's dtype (what the target sees)."""
    q = backend.seen(x.q)
    k = q if x.self_attention else backend.seen(x.k)
    return QKV(q, k, backend.seen(x.v), x.scale, x.self_attention)


def features64(target, x: np.ndarray, seed: int) -> np.ndarray:
    """The target's declared features of ``x`` (BHTD) as float64."""
    return np.asarray(target.features(x, seed), dtype=np.float64)


def reference_outputs(target, x: QKV, seed: int, causal: bool):
    """``(φq, φk, o)``: the declared features and the exact outputs (the mpmath recurrence when
    causal and ``T·m ≤`` :data:`MP_ENTRIES`, else float64)."""
    from kernel_verify.verify.references.forms import causal_recurrence_mp

    fq, fk = features64(target, x.q, seed), features64(target, x.k, seed)
    if causal and fq.shape[-2] * fq.shape[-1] <= MP_ENTRIES:
        ref = causal_recurrence_mp(fq, fk, x.v)[0]
    else:
        ref = exact_attention(fq, fk, x.v, causal)
    return fq, fk, ref


def _reference_gradients(target, x: QKV, g: np.ndarray, seed: int, u: float, causal: bool):
    """``(refs, bounds)`` of :func:`exact_gradients` and :func:`gradient_bounds` at the seen
    inputs ``x`` with upstream ``g``."""
    fq, fk = features64(target, x.q, seed), features64(target, x.k, seed)
    jq, ejq = feature_jacobian(target.features, x.q, seed)
    jk, ejk = (jq, ejq) if x.self_attention else feature_jacobian(target.features, x.k, seed)
    refs = exact_gradients(fq, fk, jq, jk, x.v, g, causal)
    eta = feature_error(x, fq.shape[-1], u)
    bounds = gradient_bounds(fq, fk, jq, ejq, jk, ejk, x.v, g, u, eta,
                             direct_extra(x.q.shape[-1]), causal, refs)
    return refs, bounds


def _pack(names, grads, refs, bounds, self_attention: bool) -> list[DeclaredGradient]:
    if self_attention:
        return [DeclaredGradient("q (= k)", grads[0], refs["q"] + refs["k"],
                                 bounds["q"] + bounds["k"]),
                DeclaredGradient("v", grads[1], refs["v"], bounds["v"])]
    return [DeclaredGradient(n, gr, refs[n], bounds[n]) for n, gr in zip(names, grads,
                                                                          strict=True)]


def declared_gradient_check(target, backend, layout, seed: int, causal: bool
                            ) -> list[DeclaredGradient]:
    """One example of ``test_gradients_meet_declared_features``: ``∂L/∂(q, k, v)`` of
    ``L = Σ G⊙o`` (``G`` Gaussian from the seed's stream ``declared_features.G``, rounded to
    the dtype) by the target's autograd against the declared formula's."""
    import torch

    from kernel_verify.properties.gradient_checks import vjp
    from kernel_verify.properties.strategies import generator

    u = backend.budget.u_compute
    x = seen_qkv(inputs(layout, seed, target.self_attention_only), backend)
    q = backend.from_numpy(x.q).requires_grad_(True)
    k = q if x.self_attention else backend.from_numpy(x.k).requires_grad_(True)
    v = backend.from_numpy(x.v).requires_grad_(True)
    t = target.to_layout
    out = t(target.attention(t(q), t(k), t(v), causal=causal, seed=seed))
    g64 = generator(seed, "declared_features.G").standard_normal(tuple(out.shape))
    g_t = torch.as_tensor(g64, dtype=out.dtype, device=out.device)
    leaves = [q, v] if x.self_attention else [q, k, v]
    # loss.backward(), not autograd.grad: fla's feature maps use reentrant checkpointing
    grads = [backend.to_numpy(gr) for gr in vjp((out * g_t).sum(), leaves)]
    refs, bounds = _reference_gradients(target, x, backend.to_numpy(g_t), seed, u, causal)
    return _pack("qkv", grads, refs, bounds, x.self_attention)


def state_gradient_declared(target, backend, shape) -> list[DeclaredGradient] | None:
    """One example of ``test_gradients_flow_through_the_state`` on a float32 (or float64)
    target declaring features: ``L = Σ_(i ≥ t₀) G_i⊙o_i`` of the outputs after the split point,
    continued from the prefix's final state, differentiated with respect to the *prefix*
    inputs (they reach ``L`` only through the state), against the same rows of the exact
    gradient of the full causal formula with ``G_i = 0`` for ``i < t₀``, within
    :func:`gradient_bounds`. None when ``T = 1`` (no split point)."""
    import torch

    from kernel_verify.properties.checks.forms import draw_inputs, state_form
    from kernel_verify.properties.gradient_checks import vjp
    from kernel_verify.properties.strategies import generator

    if shape.t < 2:
        return None
    cut = min(shape.cut, shape.t - 1)
    x = seen_qkv(draw_inputs(shape), backend)
    t = target.to_layout

    def part(a, lo, hi):
        return backend.from_numpy(np.ascontiguousarray(a[..., lo:hi, :]))

    pre = [part(a, 0, cut).requires_grad_(True) for a in (x.q, x.k, x.v)]
    post = [part(a, cut, shape.t) for a in (x.q, x.k, x.v)]

    form = state_form(target, shape)

    out = t(form(*post, state=form(*pre)[1])[0])
    g_post = generator(shape.seed, "state_gradient.G").standard_normal(tuple(out.shape))
    g_t = torch.as_tensor(g_post, dtype=out.dtype, device=out.device)
    loss = (out * g_t).sum()
    if loss.requires_grad:
        grads = [backend.to_numpy(gr) for gr in vjp(loss, pre)]
    else:  # the state left the graph: no gradient reaches the prefix
        grads = [np.zeros(a.shape) for a in pre]
    g = np.zeros(x.v.shape)
    g[..., cut:, :] = backend.to_numpy(g_t)
    refs, bounds = _reference_gradients(target, QKV(x.q, x.k, x.v, x.scale), g, shape.seed,
                                        backend.budget.u_compute, True)
    rows = (..., slice(0, cut), slice(None))
    return [DeclaredGradient(n, gr, refs[n][rows], bounds[n][rows])
            for n, gr in zip("qkv", grads, strict=True)]


def state_gradient_differences(target, backend, shape):
    """The same continuation as :func:`state_gradient_declared` for a target without declared
    features: directional central differences in the backend's dtype against the backward
    (:func:`~kernel_verify.properties.gradient_checks.directional_differences`, tolerance
    ``100·u^(2/3)`` of that dtype: a detached state — a zero gradient — fails; a gradient a few
    percent off may not). None when ``T = 1``."""
    import torch

    from kernel_verify.properties.checks.forms import draw_inputs, state_form
    from kernel_verify.properties.gradient_checks import directional_differences

    if shape.t < 2:
        return None
    cut = min(shape.cut, shape.t - 1)
    x = draw_inputs(shape)
    t = target.to_layout
    pre = tuple(backend.from_numpy(np.ascontiguousarray(a[..., :cut, :]))
                for a in (x.q, x.k, x.v))
    post = [backend.from_numpy(np.ascontiguousarray(a[..., cut:, :])) for a in (x.q, x.k, x.v)]

    form = state_form(target, shape)

    def continued(q, k, v):
        out = t(form(*post, state=form(q, k, v)[1])[0])
        # a state detached from the graph: the continuation is a constant of the prefix, whose
        # zero gradient the differences then contradict
        return out if out.requires_grad or not torch.is_grad_enabled() else out + 0 * q.sum()

    return directional_differences(continued, pre, backend.dtype, shape.seed)
