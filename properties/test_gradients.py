"""Gradients (docs/math.md §14): autograd against the exact derivative, and the identities every
backward pass must meet. Targets claim ``differentiable`` (``deterministic_backward`` for the
bitwise test); everything else is skipped with the claim that would add the test.

**White-box** feature maps (``torch_fn`` with a parameter draw and a registry formula), every
torch backend × dtype, against the exact mpmath derivatives of
:mod:`kernel_verify.verify.references.gradients` (closed forms of docs/math.md §14, else
high-precision differentiation of the twin), within the derived backward bounds of
:mod:`kernel_verify.verify.gradient_bounds`:

* ``∂/∂x Σ G⊙φ(x)`` (and of ``log φ``): ``feature_vjp_bound`` with ``u`` of the compute dtype
  and the budget's worst elementary ulps, ``+ u₆₄|ref|`` (the reference's rounding) and, for
  half types (computed in float32, cast back), ``output_round`` ulps of the half type at
  ``|ref| + bound``;
* ``∇ₓ φ(x)ᵀφ(y)``: the same with upstream ``φ̂(y)``, whose error is the forward bound of ``φ(y)``;
* attention with the map (the log-space path of positive maps): ``attention_grad_bound`` with
  the weights' relative error ``ρ_i = expm1(2E_i + 4δ)`` of the forward analysis
  (``properties/test_feature_reference.py``), chained through the log-feature Jacobian;
* exact softmax attention (the built-in torch kernel): ``softmax_weight_error`` and
  ``attention_grad_bound``;
* finiteness along an input-scale sweep (positive maps, log-space path, float32, ‖x‖ up to 20,
  where the plain path underflows): gradients finite and within the bound.

**Every differentiable target** (black-box included: attention targets with a torch backend,
feature maps whose ``torch_fn``/``sample_fn`` take torch tensors):

* finite differences in float64 — float32 for attention targets that take only float32 (fla's
  Triton kernels), with that dtype's ``u`` in what follows — along random directions (the
  fast mode of ``torch.autograd.gradcheck``, written with ``backward()`` so that targets using
  reentrant checkpointing run):
  central differences with step ``h = u₆₄^(1/3)·s`` (``s = max(1, max|x|)``) err by
  ``h²|f'''|/6 + u₆₄·|f|/h``; Richardson extrapolation over ``h`` and ``h/2`` cancels the ``h²``
  term (a correct map with large third derivatives — ReLU features over a small denominator —
  fails without it), leaving ``O(h⁴|f⁽⁵⁾|)`` and ``≤ 3u₆₄·|f|/h``; assuming fifth derivatives
  ``≤ 100·F/s⁵`` at the input's own scale (``F = max(1, max|f|)``), the error is
  ``≤ 100·u₆₄^(2/3)·F`` (about ``2e-9·F``): ``atol = 100·u₆₄^(2/3)·F``, ``rtol =
  100·u₆₄^(2/3)``. A stated assumption; a wrong backward errs by O(1);
* forward mode against reverse mode: ``vᵀ(Ju) = (vᵀJ)u`` for random ``u, v`` (dual tensors of
  ``torch.autograd.forward_ad``, and ``backward()``), equal within ``γ_N·(|v|ᵀ|J||u|)``
  (``|J|`` row by row; ``N`` = inputs + outputs + 100); skipped without forward mode;
* causality (causal targets): ``∂o_i/∂(k_j, v_j) = 0`` for ``j > i``, and ``∂o_i/∂q_j = 0`` for
  ``j ≠ i`` (every target): exactly zero — the future never enters the computation of ``o_i``;
* batch and head independence: the gradient of one batch element's (one head's) outputs is
  exactly zero on every other batch element (head); feature maps: ``∂φ(x_i)/∂x_j = 0``, ``j ≠ i``;
* low precision: gradients of the target in float32/float16/bfloat16 against its float64
  gradient at the same (rounded) inputs: ``∂L/∂v`` within ``Σ_i ρ'_i·|G_i|`` (``P_ij ≤ 1``, the
  derived bound of ``verify.gradient_bounds`` with the black-box weight error ``ρ = expm1(2δ)``
  of ``properties/attention_cases.py``), ``∂L/∂q``, ``∂L/∂k`` within ``4ρ'·n·max|∂L/∂·|₆₄`` (an
  assumption: no cancellation beyond a factor n in the score chain); finite everywhere; and,
  beside these bounds, the same-precision criterion of docs/math.md §13.2
  (:mod:`kernel_verify.verify.same_precision`): each gradient's largest error against float64
  within ``c·max(err_plain, u_c·Y + η_c) + R·(u_o·Y + η_o)``, ``err_plain`` the error of the
  same gradient by torch autograd through a plain evaluation of the formula in the compute
  dtype on the inputs as the target saw them (exact attention: ``softmax(qkᵀ/√d)v``; declared
  features: the quadratic form of the features, chained through their Jacobian), ``c`` and
  ``R`` calibrated (``kernel-verify calibrate --part same_precision``, rows "gradients");
  targets with neither formula keep the derived bounds alone;
* ``deterministic_backward``: two backward passes give bitwise equal gradients.

**Statistics** (``unbiased`` maps declaring positive features with iid Gaussian rows): the
gradient of the estimator is unbiased for the kernel's gradient, ``E ∇ₓ φ(x)ᵀφ(y) = SM(x, y)·y``,
by the median-of-means test of :mod:`kernel_verify.verify.gradient_stats` (exact per-frequency
variance; false alarm ``≤ exp(−B/8) ≤ α`` per component for any distribution of the draws;
calibrated by ``kernel-verify calibrate``, row "gradients: median-of-means test"). Each of the
``B`` blocks is the mean of ``M`` iid frequency terms, ``M`` sized so that a gradient scaled by
1.1 is rejected (``gradient_checks.block_features``: the threshold ``2σ_T/√M`` shrinks with
the block; issue #29).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kernel_verify.impls.attention import feature_map_attention
from kernel_verify.impls.registry import is_registered
from kernel_verify.properties.backends import backend_axis, to_numpy
from kernel_verify.properties.evidence import check_same_precision
from kernel_verify.properties.formulas import record
from kernel_verify.properties.gradient_checks import (  # shared with the report
    KINK_SHIFT,
    LOW_PRECISION_HOW,
    STAT_D,
    attention_fn,
    attention_qkv,
    directional_differences,
    feature_vjp_check,
    kernel_gradient_check,
    low_precision_backend,
    low_precision_gradients,
    rule_entry,
    unbiased_gradient_test,
    unbiased_gradient_trial,
    vjp,
)
from kernel_verify.properties.gradient_checks import (  # shared with the report
    draw as _draw,
)
from kernel_verify.properties.gradient_checks import half_cast as _half_cast
from kernel_verify.properties.gradient_checks import map_budget as _map_budget
from kernel_verify.properties.gradient_checks import tensor as _tensor
from kernel_verify.properties.strategies import (
    ValueDraws,
    generator,
    kernel_estimate_draws,
    points,
    seeds,
)
from kernel_verify.properties.targets import feature_maps, none_param
from kernel_verify.verify.backends import Backend, get_backend
from kernel_verify.verify.compare import assert_close
from kernel_verify.verify.gradient_bounds import (
    attention_grad_bound,
    feature_vjp_bound,
    softmax_qk_bounds,
    softmax_weight_error,
)
from kernel_verify.verify.references.features import (
    feature_error_bound,
    features_reference,
)
from kernel_verify.verify.references.gradients import (
    feature_attention_grads_mp,
    softmax_attention_grads_mp,
)
from kernel_verify.verify.references.mp import to_float
from kernel_verify.verify.tolerance import FORMATS, gamma

torch = pytest.importorskip("torch")

ALL_DTYPES = ("float64", "float32", "float16", "bfloat16")
FEW = max(3, settings.default.max_examples // 5)
NO_CLAIM = ("no feature map claims `differentiable` (add the claim to a map to get its gradient "
            "tests)")


def _torch_backends(dtypes: tuple[str, ...]) -> list:
    return backend_axis(dtypes, libraries=("torch",))


def _need_torch_fn(target, backend: Backend, log: bool = False):
    fn = target.log_torch_fn if log else target.torch_fn
    if fn is None:
        pytest.skip(f"{target.name} provides no torch {'log-' if log else ''}feature function")
    return fn


def _need_rule(target):
    entry, reason = rule_entry(target)
    if entry is None:
        pytest.skip(reason)
    return entry


def _seen(t) -> np.ndarray:
    return to_numpy(t)


# ------------------------------------------------------------------ white-box feature maps
def _one_per_formula(t) -> bool:
    """Built-in maps that differ only in their frequency matrix share one backward code path:
    the iid variant stands for them (third-party targets are all kept)."""
    if not is_registered(t):
        return True
    return t.matrix in (None, "iid") and record(t.formula).backward is not None


WHITE = feature_maps("differentiable", white_box=True, predicate=_one_per_formula,
                     none_reason="no white-box feature map claims `differentiable`")


@pytest.mark.parametrize("target", WHITE)
@pytest.mark.parametrize("backend", _torch_backends(ALL_DTYPES))
@pytest.mark.parametrize("log", [False, True], ids=["phi", "logphi"])
@settings(max_examples=FEW)
@given(seed=seeds, n=st.integers(1, 3), d=st.integers(1, 4), m=st.integers(2, 6),
       scale=st.sampled_from([0.05, 0.5, 1.0, 2.0]), data=st.data())
def test_feature_gradient_matches_exact(target, backend, log, seed, n, d, m, scale, data):
    """``∂/∂x Σ G⊙φ(x)`` by autograd equals ``Σ_f G_f ∂φ_f/∂x`` (exact) within the derived
    backward bound (module docstring)."""
    if log and not target.has("log_features"):
        pytest.skip("claims no log_features")
    _need_torch_fn(target, backend, log)
    entry = _need_rule(target)
    params = _draw(target, seed, d, m)
    x = data.draw(points((n, d), scale, off_zero=True), label="x")
    rng = ValueDraws(data, "G", no_tiny=True)  # the upstream gradient G, drawn value by value
    x_r = _seen(_tensor(x, backend))
    assume(np.all(np.abs(x_r) > 1e-6 * scale))  # off the kinks (x = 0) of piecewise maps
    try:
        chk = feature_vjp_check(target, entry, backend, x, params, rng, log=log)
    except ValueError as err:  # the documented overflow error of the half type's range
        assume(backend.dtype != "float16" or "overflow" not in str(err))
        raise
    if backend.dtype == "float16":
        assume(chk.out_finite)
        # a gradient beyond float16's range is its range limit, not tested
        assume(float(np.max(np.abs(chk.ref) + chk.bound)) < float(np.finfo(np.float16).max))
    assert_close(
        chk.got, chk.ref, chk.bound, inputs=chk.inputs,
        label=f"{target.name}: ∂(G·{'log φ' if log else 'φ'})/∂x on {backend.name} "
              f"{backend.dtype}",
        how="feature_vjp_bound (u of the compute dtype, worst elementary ulps) + u₆₄|ref| "
            "(+ cast to a half type)",
        repro=f"seed={seed} (parameters), log={log}; x and G: the Hypothesis draws",
    )


@pytest.mark.parametrize("target", WHITE)
@pytest.mark.parametrize("backend", _torch_backends(("float64", "float32")))
@kernel_estimate_draws(FEW)
def test_kernel_estimate_gradient_matches_exact(target, backend, seed, d, m, scale, data):
    """``∇ₓ φ(x)ᵀφ(y)`` by autograd equals ``J(x)ᵀφ(y)`` (exact) within the derived bound with
    the upstream ``φ̂(y)`` carrying its forward error."""
    _need_torch_fn(target, backend)
    entry = _need_rule(target)
    params = _draw(target, seed, d, m)
    x = data.draw(points((2, d), scale, off_zero=True), label="x")
    y = data.draw(points((2, d), scale, no_tiny=True), label="y")
    assume(np.all(np.abs(_seen(_tensor(x, backend))) > 1e-6 * scale))
    chk = kernel_gradient_check(target, entry, backend, x, y, params)
    assert_close(
        chk.got, chk.ref, chk.bound, inputs=chk.inputs,
        label=f"{target.name}: ∇ₓ φ(x)ᵀφ(y) on {backend.name} {backend.dtype}",
        how="feature_vjp_bound with upstream φ̂(y) (forward bound of φ(y) as its error)",
        repro=f"seed={seed} (parameters), x={x.tolist()}, y={y.tolist()}",
    )


# -------------------------------------------------------------- attention with a white-box map
LOG_MAPS = feature_maps(
    "differentiable", "positive", "log_features", white_box=True,
    predicate=lambda t: record(t.formula).exp_affine and _one_per_formula(t),
    none_reason="no white-box positive log-feature map of an exp-affine formula claims "
                "`differentiable`")


def _feature_attention_check(target, q, k, v, g, params, backend: Backend, causal, *,
                             hypothesis: bool = True) -> None:
    entry = target  # the twin reads the target itself (an exp-affine formula: it has one)
    n, d = q.shape
    b = _map_budget(target, backend)
    u_c, ulps = b.u_compute, max(b.ulps.values())
    qt, kt, vt = (_tensor(a, backend, grad=True) for a in (q, k, v))
    gt = _tensor(g, backend)
    q_r, k_r, v_r, g_r = (_seen(t) for t in (qt, kt, vt, gt))
    out = feature_map_attention(target, backend.from_numpy_params(params), qt, kt, vt,
                                causal=causal)
    got = torch.autograd.grad((out * gt).sum(), (qt, kt, vt))
    refs = [to_float(r) for r in feature_attention_grads_mp(
        entry, params, q_r, k_r, v_r, g_r, causal=causal, prescale=target.attention_prescale)]
    s = d ** -0.25 if target.attention_prescale else 1.0  # exact: d ∈ {1, 16}
    xq, xk = q_r * s, k_r * s
    lq = features_reference(entry, xq, params, log=True)
    lk = features_reference(entry, xk, params, log=True)
    eq = feature_error_bound(entry, xq, params, entry.config, u_c, ulps, log=True)
    ek = feature_error_bound(entry, xk, params, entry.config, u_c, ulps, log=True)
    width = lq.shape[-1]
    z = np.abs(lq).max() + np.abs(eq).max() + np.abs(lk).max() + np.abs(ek).max()
    delta = gamma(n + width + 6, u_c) * (z + np.log(n * width) + 1)
    rho = np.expm1(2 * (eq.max(axis=-1, keepdims=True) + ek.max()) + 4 * delta)
    pair = np.exp(lq[:, None, :] + lk[None, :, :])  # (n, n, D): φq_if φk_jf
    a = pair.sum(axis=-1)
    if causal:
        a = np.tril(a)
        pair = pair * np.tril(np.ones((n, n)))[:, :, None]
    p = a / a.sum(axis=-1, keepdims=True)
    pi = pair / np.where(a > 0, a, 1.0)[:, :, None]
    parts = attention_grad_bound(p, v_r, g_r, rho, u_c, n_features=width)
    rc = np.where(parts["C"] > 0, parts["R"] * parts["C"], 0.0)
    dlq = np.einsum("ij,ijf->if", rc, pi)
    alq = np.einsum("ij,ijf->if", parts["C"], pi)
    dlk = np.einsum("ij,ijf->jf", rc, pi)
    alk = np.einsum("ij,ijf->jf", parts["C"], pi)
    bq = s * feature_vjp_bound(entry, xq, params, None, alq, u_c, ulps, log=True, g_err=dlq)
    bk = s * feature_vjp_bound(entry, xk, params, None, alk, u_c, ulps, log=True, g_err=dlk)
    bounds = (bq, bk, parts["v"])
    for name, g_hat, ref, bound in zip("qkv", got, refs, bounds, strict=True):
        bound = _half_cast(bound, ref, backend)
        assert np.isfinite(bound).all(), f"{target.name}: gradient bound not finite (ρ > 1/2)"
        assert_close(
            to_numpy(g_hat), ref, bound, inputs={"q": q_r, "k": k_r},
            label=f"{target.name}: attention ∂L/∂{name} ({'causal' if causal else 'non-causal'})"
                  f" on {backend.name} {backend.dtype}",
            how="attention_grad_bound (ρ = expm1(2E + 4δ) of the log path) through the "
                "log-feature Jacobian (feature_vjp_bound) + u₆₄|ref|",
            repro=f"_feature_attention_check(target {target.name!r}, q, k, v, G, params, "
                  f"get_backend({backend.id!r}), causal={causal})",
        )


@pytest.mark.parametrize("target", LOG_MAPS)
@pytest.mark.parametrize("backend", _torch_backends(("float64", "float32")))
@settings(max_examples=FEW)
@given(data=st.data())
def test_feature_attention_gradients_match_exact(target, backend, data):
    """∂L/∂(q, k, v) of linear attention with the map (log-space path) equal the exact
    gradients of the same estimator within the derived bound."""
    _need_torch_fn(target, backend, log=True)
    seed = data.draw(seeds, label="seed")
    causal = data.draw(st.booleans(), label="causal")
    n = data.draw(st.integers(1, 4), label="n")
    d = data.draw(st.sampled_from([1, 16]) if target.attention_prescale else st.integers(1, 4),
                  label="d")
    m = data.draw(st.integers(2, 6), label="m")
    scale = data.draw(st.sampled_from([0.3, 1.0, 2.0]), label="scale")
    q = data.draw(points((n, d), scale, no_tiny=True), label="q")
    k = data.draw(points((n, d), scale, no_tiny=True), label="k")
    v = data.draw(points((n, 2), no_tiny=True), label="v")
    g = data.draw(points((n, 2), no_tiny=True), label="G")
    _feature_attention_check(target, q, k, v, g, _draw(target, seed, d, m), backend, causal)


@pytest.mark.parametrize("target", LOG_MAPS)
@pytest.mark.parametrize("backend", _torch_backends(("float32",)))
@pytest.mark.parametrize("norm", [1.0, 5.0, 12.0, 20.0])
def test_attention_gradients_finite_along_scale_sweep(target, backend, norm):
    """Issue 20: at pre-scaled norms up to 20 (float32, where the plain path underflows) the
    log-space path's gradients are finite and within the derived bound (d = 16: exact
    prescale)."""
    _need_torch_fn(target, backend, log=True)
    d, n = (16, 4) if target.attention_prescale else (4, 4)
    rng = generator(0, f"attention_gradients_finite_along_scale_sweep.norm={norm}")
    s = d**0.25 if target.attention_prescale else 1.0
    q, k = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    q *= norm * s / np.linalg.norm(q, axis=-1, keepdims=True)
    k *= norm * s / np.linalg.norm(k, axis=-1, keepdims=True)
    v, g = rng.standard_normal((n, 2)), rng.standard_normal((n, 2))
    for causal in (False, True):
        _feature_attention_check(target, q, k, v, g, _draw(target, 5, d, 8), backend, causal,
                                 hypothesis=False)


# ------------------------------------------------------------------ exact softmax attention
@pytest.mark.kv_builtin_only
@pytest.mark.parametrize("backend", _torch_backends(ALL_DTYPES))
@settings(max_examples=FEW)
@given(causal=st.booleans(), n=st.integers(1, 5), d=st.integers(1, 6),
       scale=st.sampled_from([0.3, 1.0, 3.0]), data=st.data())
def test_softmax_attention_gradients_match_exact(backend, causal, n, d, scale, data):
    """The built-in torch softmax attention: ∂L/∂(q, k, v) equal the exact gradients within
    ``attention_grad_bound`` with the weight error of ``softmax_weight_error``."""
    from kernel_verify.impls.torch.attention import softmax_attention

    q = data.draw(points((n, d), scale, no_tiny=True), label="q")
    k = data.draw(points((n, d), scale, no_tiny=True), label="k")
    v = data.draw(points((n, 3), no_tiny=True), label="v")
    g = data.draw(points((n, 3), no_tiny=True), label="G")
    qt, kt, vt = (_tensor(a, backend, grad=True) for a in (q, k, v))
    gt = _tensor(g, backend)
    q_r, k_r, v_r, g_r = (_seen(t) for t in (qt, kt, vt, gt))
    out = softmax_attention(qt, kt, vt, causal=causal)
    got = torch.autograd.grad((out * gt).sum(), (qt, kt, vt))
    refs = [to_float(r) for r in softmax_attention_grads_mp(q_r, k_r, v_r, g_r, causal=causal)]
    b = backend.budget
    sc = 1 / math.sqrt(d)
    rho = softmax_weight_error(q_r, k_r, sc, b.u_compute, max(b.ulps.values()), causal=causal)
    s = np.exp((q_r @ k_r.T) * sc)
    if causal:
        s = np.tril(s)
    p = s / s.sum(axis=-1, keepdims=True)
    parts = attention_grad_bound(p, v_r, g_r, rho, b.u_compute)
    bq, bk = softmax_qk_bounds(parts, q_r, k_r, sc)
    for name, g_hat, ref, bound in zip("qkv", got, refs, (bq, bk, parts["v"]), strict=True):
        assert_close(
            to_numpy(g_hat), ref, _half_cast(bound, ref, backend), inputs={"q": q_r},
            label=f"softmax attention ∂L/∂{name} (causal={causal}) on {backend.name} "
                  f"{backend.dtype}",
            how="attention_grad_bound with softmax_weight_error + u₆₄|ref| (+ half cast)",
            repro=f"causal={causal}, q, k, v, G: the Hypothesis draws",
        )


# --------------------------------------------------- every differentiable target (black box)
def _gradient_only_formula(t) -> bool:
    """Built-in maps differing only in their frequency matrix share one backward: one each."""
    return not is_registered(t) or t.matrix in (None, "iid")


MAPS = feature_maps("differentiable", predicate=_gradient_only_formula, none_reason=NO_CLAIM)
DETERMINISTIC_MAPS = feature_maps("differentiable", "deterministic_backward",
                                  predicate=_gradient_only_formula,
                                  none_reason="no feature map claims `deterministic_backward`")


_vjp = vjp  # shared with kernel-verify calibrate (properties/gradient_checks.py)


def _fd_check(fn, inputs: tuple, dtype: str, seed: int, label: str, trials: int = 3) -> None:
    """Directional central differences against the backward (gradcheck's fast mode,
    :func:`~kernel_verify.properties.gradient_checks.directional_differences`): for random ``u``
    (``max|u| = 1``) and ``v``, the Richardson-extrapolated ``(4·D(h/2) − D(h))/3`` of
    ``D(h) = vᵀ(f(x + hu) − f(x − hu))/2h`` and ``(vᵀJ)u`` differ by at most
    ``‖v‖₁·100·u^(2/3)·F`` plus ``100·u^(2/3)`` relative (module docstring)."""
    for r in directional_differences(fn, inputs, dtype, seed, trials):
        again = ("" if r.shifted is None else
                 f"; and at the point moved by {KINK_SHIFT}·step (a kink cannot explain both): "
                 f"{r.shifted.numeric!r} vs {r.shifted.analytic!r}")
        assert r.ratio <= 1, (
            f"{label}: the backward is not the derivative of the forward: central differences "
            f"give vᵀJu = {r.numeric!r}, the backward {r.analytic!r} (allowed {r.allowed:.3g}; "
            f"{dtype}, step {r.step:.3g}){again}")


def _map_fn(target, seed: int, d: int, m: int = 4):
    """``x -> φ(x)`` on torch tensors: the white-box ``torch_fn`` with the seed's draw, or the
    black-box ``sample_fn(x, seed)`` (which must take torch tensors, claim ``differentiable``)."""
    if target.white_box:
        if target.torch_fn is None:
            pytest.skip(f"{target.name} provides no torch feature function")
        params = _draw(target, seed, d, m)
        kw = {"positions": np.arange(3)} if target.has("positional") else {}

        def fn(x):
            on = get_backend(f"torch:{x.device.type}-float64")
            return target.torch_fn(x, on.from_numpy_params(params), target.config, **kw)

        return fn
    return lambda x: target.sample(x, seed)


def _map_input(seed: int, d: int, dtype=torch.float64):
    x = generator(seed, "map_input").standard_normal((3, d)) * 0.8
    return torch.tensor(x, dtype=dtype, requires_grad=True)


@pytest.mark.parametrize("target", MAPS)
def test_gradcheck_float64_feature_map(target):
    """float64 central differences agree with autograd (step and tolerance: module docstring)."""
    fn = _map_fn(target, 11, 3)
    x = _map_input(12, 3)
    _fd_check(fn, (x,), "float64", 12, target.name)


@pytest.mark.parametrize("target", MAPS)
def test_feature_rows_have_independent_gradients(target):
    """``∂φ(x_i)/∂x_j = 0`` exactly for ``j ≠ i`` (row independence of the map)."""
    if target.has("positional"):
        pytest.skip(f"{target.name} is positional: rows differ by position by design")
    fn = _map_fn(target, 13, 3)
    x = _map_input(14, 3)
    out = fn(x)
    for i in range(x.shape[0]):
        (g,) = _vjp(out[i].sum(), [x], retain_graph=True)
        others = torch.cat([g[:i], g[i + 1:]])
        assert bool((others == 0).all()), (f"{target.name}: ∂φ(x_{i})/∂x_j ≠ 0 for some j ≠ {i}: "
                                           f"{others.tolist()}")


def _fwd_rev(fn, inputs: tuple, seed: int):
    """``(vᵀ(Ju), (vᵀJ)u, |v|ᵀ|J||u|)`` for random ``u, v``; skip without forward mode."""
    import torch.autograd.forward_ad as fwad

    rng = generator(seed, "fwd_rev.directions")  # random probes of the check, not inputs
    us = [torch.tensor(rng.standard_normal(tuple(a.shape)), dtype=a.dtype) for a in inputs]
    try:
        with fwad.dual_level():
            duals = [fwad.make_dual(a.detach(), u) for a, u in zip(inputs, us, strict=True)]
            jvp = fwad.unpack_dual(fn(*duals)).tangent
    except (NotImplementedError, RuntimeError) as err:
        pytest.skip(f"the target has no forward-mode AD ({type(err).__name__}: "
                    f"{str(err).splitlines()[0][:120]})")
    out = fn(*inputs)
    v = torch.tensor(rng.standard_normal(tuple(out.shape)), dtype=out.dtype)
    vjp = _vjp((out * v).sum(), list(inputs))
    lhs = float((v * jvp).sum())
    rhs = float(sum((g * u).sum() for g, u in zip(vjp, us, strict=True)))
    xs = [a.detach().clone().requires_grad_(True) for a in inputs]
    out = fn(*xs).reshape(-1)
    mag = 0.0
    for o, weight in enumerate(v.reshape(-1).abs().tolist()):  # one Jacobian row at a time
        rows = _vjp(out[o], xs, retain_graph=True)
        mag += weight * float(sum((r.abs() * u.abs()).sum() for r, u in zip(rows, us,
                                                                            strict=True)))
    return lhs, rhs, mag


@pytest.mark.parametrize("target", MAPS)
def test_forward_mode_matches_reverse_mode_feature_map(target):
    """``vᵀ(Ju) = (vᵀJ)u`` within ``γ_N(u₆₄)·|v|ᵀ|J||u|`` (``N`` = inputs + outputs + 100: each
    side is a sum over the products of Jacobian entries, each formed by at most 100 roundings —
    a stated count)."""
    fn = _map_fn(target, 15, 3)
    x = _map_input(16, 3)
    lhs, rhs, mag = _fwd_rev(fn, (x,), 17)
    n = x.numel() + fn(x).numel() + 100
    assert abs(lhs - rhs) <= gamma(n, 2.0**-53) * mag, (
        f"{target.name}: vᵀ(Ju) = {lhs!r} but (vᵀJ)u = {rhs!r} (bound "
        f"{gamma(n, 2.0**-53) * mag:.3g}): the backward and the forward-mode derivative differ")


@pytest.mark.parametrize("target", DETERMINISTIC_MAPS)
def test_feature_map_backward_is_deterministic(target):
    """``deterministic_backward``: two backward passes give bitwise equal gradients."""
    fn = _map_fn(target, 18, 3)
    x = _map_input(19, 3)
    g = torch.tensor(generator(20, "upstream_gradient").standard_normal(tuple(fn(x).shape)))
    first = _vjp((fn(x) * g).sum(), [x])[0]
    second = _vjp((fn(x) * g).sum(), [x])[0]
    assert torch.equal(first, second), f"{target.name}: two backward passes differ"


# ------------------------------------------------------------------------ attention targets
def _attention_targets(*claims: str) -> tuple[list, str | None]:
    from kernel_verify.properties.targets import attentions_with

    targets, skip = attentions_with(("differentiable", *claims))
    return [t for t in targets if "torch" in t.backends], skip


def _attn_params(*claims: str, dtype: str = "float64") -> list:
    targets, skip = _attention_targets(*claims)
    if not targets:
        reason = skip or "no attention target claiming `differentiable` takes torch tensors"
        return none_param(reason)
    return [pytest.param(t, id=t.name) for t in targets]


def _modes(target) -> list[bool]:
    return [c for c, claim in ((False, "noncausal"), (True, "causal")) if target.has(claim)] \
        or [False]


#: ``(q, k, v) -> o`` and the fixed Gaussian inputs of the example-based attention tests (one
#: full forward and backward pass per target and check: no Hypothesis examples), shared with
#: ``kernel-verify calibrate`` (properties/gradient_checks.py).
_attn_fn = attention_fn
_qkv = attention_qkv


def _work_dtype(target) -> str:
    """float64 when the target takes it, else float32 (fla's Triton kernels): the dtype of the
    black-box gradient identities; the finite-difference step and tolerances scale with its u."""
    for dtype in ("float64", "float32"):
        if target.accepts("torch", dtype):
            return dtype
    pytest.skip(f"{target.name} accepts neither torch float64 nor float32 "
                "(AttentionTarget.dtypes)")
    raise AssertionError  # unreachable


def _need_dtype(target, dtype: str) -> None:
    if not target.accepts("torch", dtype):
        pytest.skip(f"{target.name} accepts no torch {dtype} (AttentionTarget.dtypes)")


@pytest.mark.parametrize("target", _attn_params())
def test_gradcheck_float64_attention(target):
    """float64 central differences (gradcheck, fast mode) agree with autograd for ∂o/∂(q, k, v)
    (step and tolerance: module docstring)."""
    dtype = _work_dtype(target)
    for causal in _modes(target):
        fn = _attn_fn(target, causal)
        q, k, v = _qkv(21, dtype, b=1, h=2, n=4, d=4, target=target)
        _fd_check(fn, (q, k, v), dtype, 21, f"{target.name} (causal={causal})")


@pytest.mark.parametrize("target", _attn_params())
def test_forward_mode_matches_reverse_mode_attention(target):
    """``vᵀ(Ju) = (vᵀJ)u`` for attention (bound as for feature maps)."""
    dtype = _work_dtype(target)
    for causal in _modes(target):
        fn = _attn_fn(target, causal)
        q, k, v = _qkv(22, dtype, b=1, h=1, n=3, d=3, target=target)
        lhs, rhs, mag = _fwd_rev(fn, (q, k, v), 23)
        n_ops = 3 * q.numel() + v.numel() + 100
        assert abs(lhs - rhs) <= gamma(n_ops, FORMATS[dtype].u) * mag, (
            f"{target.name} (causal={causal}): vᵀ(Ju) = {lhs!r}, (vᵀJ)u = {rhs!r}")


@pytest.mark.parametrize("target", _attn_params())
def test_attention_gradient_locality(target):
    """``∂o_i/∂q_j = 0`` for ``j ≠ i``; causal: ``∂o_i/∂(k_j, v_j) = 0`` for ``j > i`` — exactly
    (the computation of o_i never touches those inputs)."""
    dtype = _work_dtype(target)
    for causal in _modes(target):
        fn = _attn_fn(target, causal)
        q, k, v = _qkv(24, dtype, b=1, h=1, n=5, d=3, target=target)
        out = fn(q, k, v)
        for i in range(out.shape[-2]):
            gq, gk, gv = _vjp(out[..., i, :].sum(), (q, k, v), retain_graph=True)
            if not target.self_attention_only:
                bad_q = torch.cat([gq[..., :i, :], gq[..., i + 1:, :]], dim=-2)
                assert bool((bad_q == 0).all()), (
                    f"{target.name} (causal={causal}): ∂o_{i}/∂q_j ≠ 0 for some j ≠ {i}")
            if causal:
                assert bool((gk[..., i + 1:, :] == 0).all()), (
                    f"{target.name}: ∂o_{i}/∂k_j ≠ 0 for some future j > {i} (the backward "
                    "sees the future)")
                assert bool((gv[..., i + 1:, :] == 0).all()), (
                    f"{target.name}: ∂o_{i}/∂v_j ≠ 0 for some future j > {i}")


@pytest.mark.parametrize("target", _attn_params())
def test_attention_gradients_batch_and_head_independent(target):
    """The gradient of one batch element's (one head's) outputs is exactly zero on every other
    batch element (head)."""
    dtype = _work_dtype(target)
    for causal in _modes(target):
        fn = _attn_fn(target, causal)
        q, k, v = _qkv(25, dtype, b=2, h=2, n=3, d=3, target=target)
        out = fn(q, k, v)
        for axis in (0, 1):
            for idx in range(2):
                part = out.select(axis, idx).sum()
                grads = _vjp(part, (q, k, v), retain_graph=True)
                for name, g in zip("qkv", grads, strict=True):
                    other = g.select(axis, 1 - idx)
                    assert bool((other == 0).all()), (
                        f"{target.name} (causal={causal}): the outputs of "
                        f"{'batch' if axis == 0 else 'head'} {idx} have a gradient in "
                        f"{name} of {'batch' if axis == 0 else 'head'} {1 - idx}")


@pytest.mark.parametrize("target", _attn_params("deterministic_backward"))
def test_attention_backward_is_deterministic(target):
    """``deterministic_backward``: two backward passes give bitwise equal gradients."""
    dtype = next((d for d in ("float64", "float32") if target.accepts("torch", d)), None)
    if dtype is None:
        pytest.skip(f"{target.name} accepts neither torch float64 nor float32")
    for causal in _modes(target):
        fn = _attn_fn(target, causal)
        q, k, v = _qkv(26, dtype, target=target)
        g = torch.tensor(generator(27, "upstream_gradient").standard_normal(tuple(v.shape)),
                         dtype=getattr(torch, dtype))
        first = _vjp((fn(q, k, v) * g).sum(), (q, k, v))
        second = _vjp((fn(q, k, v) * g).sum(), (q, k, v))
        for name, a, b in zip("qkv", first, second, strict=True):
            assert torch.equal(a, b), f"{target.name} (causal={causal}): ∂L/∂{name} differs " \
                                      "between two backward passes"


LOW = ("float32", "float16", "bfloat16")


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("target", _attn_params())
def test_low_precision_gradients_near_float64(target, dtype, record_property):
    """Gradients in float32/float16/bfloat16 against the float64 gradient of the same target at
    the same rounded inputs — or, for a target that accepts no float64, of the formula it
    declares (exact attention or its ``features``) evaluated in float64 — (budget: module
    docstring; ρ = expm1(2δ) of
    ``properties/attention_cases.py`` with the compute dtype's unit roundoff and the target's
    feature count; exact attention, ``feature_count = 0``: the derived softmax bound), and,
    beside that bound, the same-precision criterion (docs/math.md §13.2) against the gradient
    of a plain evaluation of the same formula in the compute dtype (exact attention, or a
    target declaring ``features``: ``gradient_checks.low_precision_plain``)."""
    from kernel_verify.properties.attention_cases import feature_count, unknown_count_note

    _need_dtype(target, dtype)
    formula = not target.accepts("torch", "float64")  # the declared formula's float64 gradient
    if formula and feature_count(target) != 0 and target.features is None:
        pytest.skip(f"{target.name} accepts no torch float64 and declares no formula to take a "
                    "float64 reference gradient from (feature_count=0 for exact attention, or "
                    "features=...; AttentionTarget.dtypes)")
    note = unknown_count_note(target)
    if note:  # the verdict states what the M_MAX assumption costs
        record_property("kv_note", note)
    backend, void = low_precision_backend(target, dtype)
    if void is not None:
        pytest.skip(void)
    for causal in _modes(target):
        for r in low_precision_gradients(target, backend, causal, 28, 29,
                                         formula_reference=formula):
            assert np.isfinite(r.got).all(), f"{target.name} {dtype}: ∂L/∂{r.name} not finite"
            ref = "the declared formula in float64" if formula else "float64"
            label = f"{target.name}: ∂L/∂{r.name} in {dtype} vs {ref} (causal={causal})"
            assert_close(
                r.got, r.ref, r.bound, inputs={}, label=label, how=LOW_PRECISION_HOW,
                repro=f"test_low_precision_gradients_near_float64[{target.name}-{dtype}]",
            )
            if r.plain is not None:  # beside the derived bound, never instead of it
                check_same_precision(r.got, r.ref, r.plain, compute=r.compute,
                                     output=r.output, what=label)


# ------------------------------------------------------------------------------- statistics
UNBIASED_POSITIVE = feature_maps(
    "differentiable", "unbiased", "gaussian_rows",
    predicate=lambda t: record(t.formula).gradient_median_test and t.matrix == "iid"
    and (t.white_box or t.sample_fn is not None),
    none_reason="no differentiable feature map declares, with iid rows, a formula whose "
                "gradient moments are exact (softmax_positive; properties/formulas.py)")


@pytest.mark.statistical(assertions=STAT_D)
@pytest.mark.parametrize("target", UNBIASED_POSITIVE)
@settings(max_examples=2)
@given(seed=seeds)
def test_gradient_of_unbiased_estimator_is_unbiased(target, seed):
    """``E ∇ₓ φ(x)ᵀφ(y) = ∇ₓ SM(x, y) = SM·y`` (docs/math.md §14) by the median-of-means test of
    :mod:`kernel_verify.verify.gradient_stats` with the exact per-frequency variance (false alarm ≤
    α per component, any distribution). The example is
    :func:`~kernel_verify.properties.gradient_checks.unbiased_gradient_trial` and the test
    :func:`~kernel_verify.properties.gradient_checks.unbiased_gradient_test`, the functions
    ``kernel-verify calibrate --part gradients`` runs on fresh seeds."""
    from kernel_verify.properties import alpha as alpha_budget
    from kernel_verify.verify.gradient_stats import draws_for_alpha

    if target.white_box and target.torch_fn is None:
        pytest.skip(f"{target.name} provides no torch feature function")
    alpha = alpha_budget.per_assertion()
    trial = unbiased_gradient_trial(target, seed, draws_for_alpha(alpha))
    result = unbiased_gradient_test(trial, alpha)
    assert result.ok, (f"{target.name}: the gradient of φ(x)ᵀφ(y) is biased for ∇ₓ SM(x, y) = "
                       f"{trial.mean.tolist()} at x={trial.x.tolist()}, y={trial.y.tolist()} "
                       f"(m={trial.m}, seed={seed}): {result.describe()}")


@pytest.mark.parametrize("target", _attn_params())
def test_padded_inputs_get_zero_gradient(target):
    """Targets offering ``padded`` (docs/math.md §13): the gradient of the valid outputs is
    exactly zero at padded positions, for right and left padding (no gradient reaches padding,
    fla issue 1263)."""
    dtype = _work_dtype(target)
    if not target.offers("padded"):
        pytest.skip(f"{target.name} offers no `padded` (AttentionTarget.padded)")
    t = target.to_layout
    q, k, v = _qkv(30, dtype, b=2, h=2, n=5, d=4, target=target)
    n = q.shape[-2]  # 5, or more where the target's shape contract asks for it
    valid = torch.tensor([[True] * (n - 2) + [False] * 2, [False] * 2 + [True] * (n - 2)])
    out, _ = target.padded(t(q), t(k), t(v), mask=valid)
    out = t(out)
    keep = valid[:, None, :, None].to(out.dtype)
    grads = _vjp((out * keep).sum(), (q, k, v))
    pad = ~valid[:, None, :, None]
    for name, g in zip("qkv", grads, strict=True):
        leaked = g.masked_select(pad.expand_as(g))
        assert bool((leaked == 0).all()), (
            f"{target.name}: padded positions receive gradient in {name} "
            f"(max |∂L/∂{name}| there {float(leaked.abs().max()):.3g})")


@pytest.mark.parametrize("target", _attn_params())
def test_attention_gradients_finite_where_outputs_are(target):
    """Along the input-scale sweep of ``properties/strategies.py`` (``SCALE_SWEEP``), wherever
    the target returns finite outputs its gradients w.r.t. q, k and v are finite too (an
    intermediate that overflows only in the backward, a NaN from ``0·inf`` in a masked branch,
    fla PR 1214)."""
    from kernel_verify.properties.strategies import SCALE_SWEEP

    dtype = _work_dtype(target)
    tested = []
    for causal in _modes(target):
        fn = _attn_fn(target, causal)
        for scale in SCALE_SWEEP:
            q, k, v = (a.detach() for a in _qkv(31, dtype, b=1, h=1, n=4, d=4, target=target))
            q, k = (a.mul(scale).requires_grad_(True) for a in (q, k))
            v = v.requires_grad_(True)
            try:
                out = fn(q, k, v)
            except ValueError:  # a documented refusal (overflow named), not a gradient matter
                continue
            if not bool(torch.isfinite(out).all()):
                continue
            grads = _vjp(out.sum(), (q, k, v))
            tested.append(scale)
            for name, g in zip("qkv", grads, strict=True):
                assert bool(torch.isfinite(g).all()), (
                    f"{target.name} (causal={causal}): finite outputs at input scale {scale} "
                    f"but a non-finite ∂L/∂{name}")
    if not tested:  # nothing was checked: a skip that says so, never a pass
        pytest.skip(f"{target.name} refused (ValueError) or returned non-finite outputs at "
                    f"every input scale of the sweep {list(SCALE_SWEEP)}: no gradient checked")
