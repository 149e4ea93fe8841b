"""Checks of a white-box feature map against its mpmath twin: features, kernel estimate and
attention, each within a derived bound (docs/math.md §1–§7, §9). Called by
``properties/test_feature_reference.py`` and the other properties that compare with the
twin (``test_taylor``, ``test_blackbox_maps``) and by the project's tests.

For one shared float64 parameter draw ``ω`` (``target.draw``), a backend function of the
target computes ``φ(x; ω)``; the reference is the formula's mpmath twin
(:mod:`kernel_verify.verify.references.features`) evaluated on the *rounded* input (the
input in the tested dtype, converted exactly) and rounded once to float64.

Tolerances (all derived, none tuned):

* **features**: ``feature_error_bound(entry, x, ω, config, u_c, ulps)`` — the a-priori forward
  error analysis of the formula (rules in :mod:`kernel_verify.verify.references.features`) with
  ``u_c`` the unit roundoff of the *compute* dtype and ``ulps`` the largest elementary-function
  figure of :func:`kernel_verify.verify.tolerance.budget_for` — plus ``u₆₄|ref|`` for the
  reference's own rounding and, for float16/bfloat16 (computed in float32, cast back),
  ``output_round`` ulps of the half type at ``|ref| + bound``; a third-party map, which may
  round every intermediate to the half type, is judged with the half type's unit roundoff and
  the underflow term of :func:`native_underflow`.
* **kernel estimate** ``φ(X)φ(Y)ᵀ`` (product computed by the backend in the tested dtype):
  with feature bounds ``e``, ``|fl(φ̂ψ̂ᵀ) − φψᵀ| ≤ Σ(|φ|e_ψ + e_φ|ψ| + e_φe_ψ) +
  γ_D·Σ(|φ| + e_φ)(|ψ| + e_ψ)`` (D features; Higham eq. 3.5) plus ``u₆₄|ref|``.
* **attention** (``impls.attention.feature_map_attention``) against
  :func:`kernel_verify.verify.references.attention.estimator_attention_reference`:

  - plain path: the propagated feature error — ``ΔK_ij = Σ_f(|φq|e_k + e_q|φk| + e_qe_k)``,
    ``a_i = Σ_j ΔK_ij|v_j|``, ``b_i = Σ_j ΔK_ij`` give ``|N̂/D̂ − N/D| ≤ (a + |out|b)/(|D| − b)``
    (exact N, D, out from mp) — plus
    :func:`kernel_verify.verify.attention_bounds.linear_attention_error_bound` of the computation
    from the computed features;
  - log path (maps with ``log_features``): log-feature errors ``e`` move every product term
    ``exp(ℓq + ℓk)`` by a factor within ``e^(±E)``, ``E = max e_q + max e_k``, so the convex
    weights move by a factor within ``e^(±2E)`` and the output by at most
    ``expm1(2E)·max|v|``; the log-space evaluation from the computed logs adds
    ``expm1(4δ)·max|v|``, ``δ = γ_(n+D+6)(Z + 1)``, ``Z = max|ℓ̂q| + max|ℓ̂k| + log(n·D)`` (the
    derivation of ``tests/test_attention.py::test_log_space_path_equals_plain_path``);
  - plus ``u₆₄|ref|``. The ``d^(−1/4)`` prescale of softmax-family maps is exact only when
    ``d^(−1/4)`` is a power of two, so prescaled maps are tested at ``d ∈ {1, 16}`` (the
    reference applies the exact prescale).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import assume

from kernel_verify.impls.attention import feature_map_attention
from kernel_verify.impls.registry import is_registered
from kernel_verify.properties.backends import to_numpy
from kernel_verify.properties.formulas import record
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.properties.strategies import generator
from kernel_verify.verify.attention_bounds import linear_attention_error_bound
from kernel_verify.verify.backends import Backend
from kernel_verify.verify.compare import assert_close
from kernel_verify.verify.references.attention import estimator_attention_reference
from kernel_verify.verify.references.features import (
    feature_error_bound,
    features_mp,
    features_reference,
)
from kernel_verify.verify.references.mp import to_float
from kernel_verify.verify.tolerance import (
    FORMATS,
    U64,
    budget_for,
    dtype_name,
    gamma,
    native_budget_for,
    reference_rounding,
    ulp,
)


def has_twin(target: FeatureMapTarget) -> bool:
    """Whether the target's formula has an mpmath twin. The truth then reads the target itself
    (its formula, config and claims; :class:`kernel_verify.verify.references.spec.MapSpec`)."""
    return record(target.formula).twin is not None


def need_twin(target: FeatureMapTarget) -> FeatureMapTarget:
    """The target, once its formula is known to have an mpmath twin; skip with the reason."""
    if not has_twin(target):
        pytest.skip(f"{target.name}: no mpmath twin for formula {target.formula!r}")
    return target


def backend_fn(target: FeatureMapTarget, backend: Backend, *, log: bool = False):
    """The target's function for ``backend`` (skip with the reason when it has none)."""
    if backend.skip_reason:
        pytest.skip(backend.skip_reason)
    if backend.library == "numpy":
        fn = target.log_numpy_fn if log else target.numpy_fn
    else:
        fn = target.log_torch_fn if log else target.torch_fn
    if fn is None:
        kind = "log-feature" if log else "feature"
        pytest.skip(f"{target.name} provides no {backend.name} {kind} function")
    return fn


def draw(target: FeatureMapTarget, seed: int, d: int, m: int) -> dict[str, np.ndarray]:
    return target.draw_params(generator(seed, "params"), d, max(m, target.min_m))


def positions_for(target: FeatureMapTarget, n: int) -> np.ndarray | None:
    return np.arange(n) if target.has("positional") else None


def call(target: FeatureMapTarget, fn, x_in: Any, params: dict, backend: Backend,
         positions: np.ndarray | None):
    kw = {"positions": positions} if target.has("positional") else {}
    return fn(x_in, backend.from_numpy_params(params), target.config, **kw)


def feature_bound(entry: FeatureMapTarget, x: np.ndarray, params: dict, backend: Backend,
                  ref: np.ndarray, positions: np.ndarray | None = None, *,
                  log: bool = False, native: bool = False) -> np.ndarray:
    """Bound on ``|computed − ref|`` for features (the module docstring). ``native``: the target's
    code may compute in a half type itself
    (:func:`~kernel_verify.verify.tolerance.native_budget_for`); the project's own maps compute
    half types in float32 and round once."""
    budget = (native_budget_for if native else budget_for)(backend.dtype, backend.device)
    ulps = max(budget.ulps.values())
    bound = feature_error_bound(entry, x, params, entry.config, budget.u_compute, ulps,
                                positions, log=log)
    bound = bound + reference_rounding(ref)
    if native and dtype_name(backend.dtype) in ("float16", "bfloat16"):
        bound = bound + native_underflow(backend.dtype)
    if budget.output_round:
        bound = bound + budget.output_round * ulp(np.abs(ref) + bound, backend.dtype)
    return bound


def native_underflow(dtype: Any) -> float:
    """Absolute error that gradual underflow adds to a feature computed *in* a half type.

    The twins' bounds use ``fl(a∘b) = (a∘b)(1+δ)``. Below the normal range the model is
    ``fl(a∘b) = (a∘b)(1+δ) + η`` with ``|η| ≤ λu`` (λ the smallest normal, u the unit roundoff;
    Higham, *Accuracy and Stability*, §2.1, eq. (2.8)): code that rounds every intermediate to
    float16 (``λu = 2^-25``) adds one such η per intermediate that lands in the subnormals,
    carried to the feature by the factors applied after it. A feature made of ``R`` roundings
    whose later factors are at most ``A`` in magnitude is off by at most ``R·A·λu`` more, which
    is ``≤ λ`` whenever ``R·A ≤ 1/u`` (2048 for float16: 16 roundings with factors up to 128).
    The bound adds ``λ`` (the convention the twins already use for exp results that underflow):
    6.1e-5 in float16, 1.2e-38 in bfloat16. The suite's own maps compute half types in float32
    and round once, which ``output_round`` covers; this term is only for native code."""
    return float(np.ldexp(1.0, FORMATS[dtype_name(dtype)].emin))


def rounded_input(x64: np.ndarray, backend: Backend) -> tuple[Any, np.ndarray]:
    """``x`` on the backend in its dtype, and the same rounded values exactly in float64."""
    x_in = backend.from_numpy(x64)
    return x_in, to_numpy(x_in)


def inner_bound(phi: np.ndarray, e_phi: np.ndarray, psi: np.ndarray, e_psi: np.ndarray,
                u: float) -> np.ndarray:
    """``|fl(φ̂ψ̂ᵀ) − φψᵀ|`` bound from feature bounds (the module docstring); rows × rows."""
    a, b = np.abs(phi), np.abs(psi)
    prop = a @ e_psi.T + e_phi @ b.T + e_phi @ e_psi.T
    return prop + gamma(phi.shape[-1], u) * ((a + e_phi) @ (b + e_psi).T)


def check_features(target: FeatureMapTarget, x64: np.ndarray, params: dict, backend: Backend,
                   *, log: bool = False, hypothesis: bool = True) -> None:
    entry = need_twin(target)
    fn = backend_fn(target, backend, log=log)
    n = x64.shape[-2]
    pos = positions_for(target, n)
    x_in, x_r = rounded_input(x64, backend)
    ref = features_reference(entry, x_r, params, positions=pos, log=log)
    # a third-party map may compute in the half type itself: only the registry's maps are
    # known to upcast (kernel_verify.impls.torch.convert)
    bound = feature_bound(entry, x_r, params, backend, ref, pos, log=log,
                          native=not is_registered(target))
    if backend.dtype == "float16" and hypothesis:
        # overflow to ±inf of float16 is its documented range limit, not tested here
        assume(float(np.max(np.abs(ref) + bound)) < float(np.finfo(np.float16).max))
    got = to_numpy(call(target, fn, x_in, params, backend, pos))
    assert got.shape == ref.shape, f"{target.name}: shape {got.shape}, expected {ref.shape}"
    kind = "log φ" if log else "φ"
    assert_close(
        got, ref, bound, inputs={"x": x_r},
        label=f"{target.name} {kind} on {backend.name} {backend.dtype}",
        how="a-priori forward error bound of the formula (u of the compute dtype, worst "
        "elementary ulps of the budget) + u₆₄|ref| (+ cast to a half type)",
        repro=f"check_features(target {target.name!r}, x, params, get_backend({backend.id!r}), "
        f"log={log})",
    )



def check_attention(target: FeatureMapTarget, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                    params: dict, backend: Backend, causal: bool,
                    *, hypothesis: bool = True) -> None:
    """Attention with the target's map vs the exact estimator (the module docstring)."""
    twin = need_twin(target)
    use_log = target.has("log_features")
    fn = backend_fn(target, backend, log=use_log)
    n, d = q.shape
    pos = positions_for(target, n)
    (q_in, q_r), (k_in, k_r), (v_in, v_r) = (rounded_input(a, backend) for a in (q, k, v))
    s = d ** -0.25 if target.attention_prescale else 1.0  # exact: d ∈ {1, 16} when prescaled
    xq, xk = q_r * s, k_r * s
    phi_q = features_mp(twin, xq, params, positions=pos)
    phi_k = features_mp(twin, xk, params, positions=pos)
    pair = phi_q @ phi_k.T
    if causal:
        pair = np.where(np.tril(np.ones((n, n), dtype=bool)), pair, 0)
    den = to_float(pair.sum(axis=-1, keepdims=True))
    if hypothesis:
        # the normalised output is defined by the implementations only for positive
        # denominators (a non-positive one is a documented ValueError)
        assume(bool(np.all(den > 0)))
    # The reference applies the *target's* pre-scaling (the twin is the target itself): a target
    # declaring no ``attention_prescale`` runs its map on q, k as given (issue 10).
    ref = estimator_attention_reference(twin, params, q_r, k_r, v_r, causal=causal,
                                        positions=pos)
    path = _log_path_bound if use_log else _plain_path_bound
    bound, how, feat_dtype = path(target, twin, fn, backend, params, pos, xq, xk, v_r, den, ref,
                                  causal, hypothesis)
    bound = bound + reference_rounding(ref)
    assert np.isfinite(bound).all(), f"{target.name}: attention bound not finite (ill-posed)"
    # The adapter dtype rule (properties/protocol.py): features may come back wider than
    # the input (float64 features for float32 input); the attention then runs, and is compared,
    # in that wider dtype (v's values are unchanged; every bound above is for the input dtype's
    # unit roundoff, so it holds a fortiori). feature_map_attention takes q, k, v of one dtype,
    # so all three are widened; widening is exact, and an adapter that promotes float32 input to
    # float64 internally computes the same features from the widened input.
    narrower = FORMATS[dtype_name(feat_dtype)].p < FORMATS[dtype_name(backend.dtype)].p
    assert not narrower, (
        f"{target.name}: features of {backend.dtype} input came back as "
        f"{dtype_name(feat_dtype)} on {backend.name}: narrower than the input (features may "
        "come back wider than their input, never narrower), so attention on them cannot keep "
        f"the input's precision — reproduce: check_attention(target {target.name!r}, q, k, v, "
        f"params, get_backend({backend.id!r}), causal={causal})")
    q_in, k_in, v_in = (widen_like(a, feat_dtype) for a in (q_in, k_in, v_in))
    got = feature_map_attention(target, backend.from_numpy_params(params), q_in, k_in, v_in,
                                causal=causal, positions=pos)
    assert_close(
        to_numpy(got), ref, bound, inputs={"q": q_r, "k": k_r},
        label=f"{target.name}: attention ({'causal' if causal else 'non-causal'}) on "
        f"{backend.name} {backend.dtype}",
        how=how + " + u₆₄|ref|", repro=f"check_attention(target {target.name!r}, q, k, v, "
        f"params, get_backend({backend.id!r}), causal={causal})",
    )


def _computed(target, fn, backend: Backend, params: dict, pos, xq, xk):
    """The target's (log-)features of the prescaled q and k as computed, and their dtype."""
    fq_hat = to_numpy(call(target, fn, backend.from_numpy(xq), params, backend, pos))
    raw = call(target, fn, backend.from_numpy(xk), params, backend, pos)
    return fq_hat, to_numpy(raw), raw.dtype


def _log_path_bound(target, twin, fn, backend: Backend, params: dict, pos, xq, xk, v_r, den,
                    ref, causal: bool, hypothesis: bool):
    """``(bound, how, feature dtype)`` of the log path (the module docstring): log-feature
    errors E move the weights by ``e^(±2E)``; the log-space evaluation adds ``expm1(4δ)``."""
    n, u_c = xq.shape[0], backend.budget.u_compute
    lq_ref = features_reference(twin, xq, params, positions=pos, log=True)
    lk_ref = features_reference(twin, xk, params, positions=pos, log=True)
    eq = feature_bound(twin, xq, params, backend, lq_ref, pos, log=True)
    ek = feature_bound(twin, xk, params, backend, lk_ref, pos, log=True)
    big_e = eq.max(axis=-1, keepdims=True) + ek.max()
    lq_hat, lk_hat, feat_dtype = _computed(target, fn, backend, params, pos, xq, xk)
    width = lq_hat.shape[-1]
    z = np.abs(lq_hat).max() + np.abs(lk_hat).max() + np.log(n * width)
    delta = gamma(n + width + 6, u_c) * (z + 1)
    bound = (np.expm1(2 * big_e) + np.expm1(4 * delta)) * float(np.abs(v_r).max())
    how = "log-feature bounds → expm1(2E)·max|v| + log-space evaluation expm1(4δ)·max|v|"
    return bound, how, feat_dtype


def _plain_path_bound(target, twin, fn, backend: Backend, params: dict, pos, xq, xk, v_r, den,
                      ref, causal: bool, hypothesis: bool):
    """``(bound, how, feature dtype)`` of the plain path (the module docstring): the propagated
    feature error ``(a + |out|b)/(|D| − b)`` plus the computation's own bound."""
    fq_ref = features_reference(twin, xq, params, positions=pos)
    fk_ref = features_reference(twin, xk, params, positions=pos)
    eq = feature_bound(twin, xq, params, backend, fq_ref, pos)
    ek = feature_bound(twin, xk, params, backend, fk_ref, pos)
    aq, ak = np.abs(fq_ref) * (1 + U64), np.abs(fk_ref) * (1 + U64)
    dk = aq @ ek.T + eq @ ak.T + eq @ ek.T
    if causal:
        dk = np.tril(dk)
    a = dk @ np.abs(v_r)
    b = dk.sum(axis=-1, keepdims=True)
    slack = np.abs(den) - b
    if hypothesis:
        assume(np.all(slack > 0))
    prop = (a + np.abs(ref) * b) / np.where(slack > 0, slack, np.nan)
    fq_hat, fk_hat, feat_dtype = _computed(target, fn, backend, params, pos, xq, xk)
    comp = linear_attention_error_bound(fq_hat, fk_hat, v_r, causal=causal,
                                        u=backend.budget.u_compute)
    how = "feature bounds → (a + |out|b)/(|D| − b) + linear_attention_error_bound(u_c)"
    return prop + comp, how, feat_dtype


def widen_like(v_in: Any, feature_dtype: Any) -> Any:
    """``v_in`` in the features' dtype when that is wider (the adapter dtype rule)."""
    if isinstance(v_in, np.ndarray):
        wide = np.result_type(v_in.dtype, feature_dtype)
        return v_in if wide == v_in.dtype else v_in.astype(wide)
    import torch

    wide = torch.promote_types(v_in.dtype, feature_dtype)
    return v_in if wide == v_in.dtype else v_in.to(wide)
