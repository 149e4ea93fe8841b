"""Agreement with the mpmath reference (white-box feature-map targets; docs/math.md §1–§7, §9).

For one shared float64 parameter draw ``ω`` (``target.draw``), every backend function the target
provides (numpy, torch:cpu, torch:cuda) in every dtype computes ``φ(x; ω)``; the reference is the
formula's mpmath twin (:mod:`kernel_verify.verify.references.features`) evaluated on the *rounded*
input (the input in the tested dtype, converted exactly) and rounded once to float64.

Tolerances (all derived, none tuned):

* **features**: ``feature_error_bound(entry, x, ω, config, u_c, ulps)`` — the a-priori forward
  error analysis of the formula (rules in :mod:`kernel_verify.verify.references.features`) with
  ``u_c`` the unit roundoff of the *compute* dtype and ``ulps`` the largest elementary-function
  figure of :func:`kernel_verify.verify.tolerance.budget_for` — plus ``u₆₄|ref|`` for the
  reference's own rounding and, for float16/bfloat16 (computed in float32, cast back),
  ``output_round`` ulps of the half type at ``|ref| + bound``.
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

The large-norm case of issue 2 (``‖q‖·d^(−1/4)`` up to 20, float32, positive maps through the
log path) must give finite outputs within the same bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kernel_verify.impls.attention import feature_map_attention
from kernel_verify.impls.registry import is_registered
from kernel_verify.properties.backends import backend_axis, to_numpy
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.properties.strategies import generator, points
from kernel_verify.properties.targets import feature_maps
from kernel_verify.verify.attention_bounds import linear_attention_error_bound
from kernel_verify.verify.backends import Backend
from kernel_verify.verify.compare import assert_close
from kernel_verify.verify.references.attention import estimator_attention_reference
from kernel_verify.verify.references.features import (
    MP_FEATURES,
    feature_error_bound,
    features_mp,
    features_reference,
)
from kernel_verify.verify.references.mp import to_float
from kernel_verify.verify.tolerance import (
    budget_for,
    gamma,
    native_budget_for,
    reference_rounding,
    ulp,
)

U64 = 2.0**-53
ALL_DTYPES = ("float64", "float32", "float16", "bfloat16")
#: Reference (mpmath) comparisons are slower: a fifth of the profile's examples, at least 3.
FEW = max(3, settings.default.max_examples // 5)

seeds = st.integers(0, 2**32 - 1)


# ----------------------------------------------------------------------------- shared helpers
def has_twin(target: FeatureMapTarget) -> bool:
    """Whether the target's formula has an mpmath twin. The truth then reads the target itself
    (its formula, config and claims; :class:`kernel_verify.verify.references.spec.MapSpec`)."""
    return target.formula is not None and target.formula in MP_FEATURES


def need_twin(target: FeatureMapTarget | None) -> FeatureMapTarget:
    """The target, once its formula is known to have an mpmath twin; skip with the reason."""
    if target is None:
        pytest.skip("no target")
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
    """Bound on ``|computed − ref|`` for features (module docstring). ``native``: the target's
    code may compute in a half type itself
    (:func:`~kernel_verify.verify.tolerance.native_budget_for`); the project's own maps compute
    half types in float32 and round once."""
    budget = (native_budget_for if native else budget_for)(backend.dtype, backend.device)
    ulps = max(budget.ulps.values())
    bound = feature_error_bound(entry, x, params, entry.config, budget.u_compute, ulps,
                                positions, log=log)
    bound = bound + reference_rounding(ref)
    if budget.output_round:
        bound = bound + budget.output_round * ulp(np.abs(ref) + bound, backend.dtype)
    return bound


def rounded_input(x64: np.ndarray, backend: Backend) -> tuple[Any, np.ndarray]:
    """``x`` on the backend in its dtype, and the same rounded values exactly in float64."""
    x_in = backend.from_numpy(x64)
    return x_in, to_numpy(x_in)


def inner_bound(phi: np.ndarray, e_phi: np.ndarray, psi: np.ndarray, e_psi: np.ndarray,
                u: float) -> np.ndarray:
    """``|fl(φ̂ψ̂ᵀ) − φψᵀ|`` bound from feature bounds (module docstring); rows × rows."""
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


# --------------------------------------------------------------------------------- features
WHITE = feature_maps(white_box=True)
LOGS = feature_maps("log_features", white_box=True)


@pytest.mark.parametrize("target", WHITE)
@pytest.mark.parametrize("backend", backend_axis(ALL_DTYPES))
@settings(max_examples=FEW)
@given(seed=seeds, n=st.integers(1, 3), d=st.integers(1, 4), m=st.integers(2, 6),
       scale=st.sampled_from([1e-3, 0.3, 1.0, 2.0]), data=st.data())
def test_features_match_reference(target, backend, seed, n, d, m, scale, data):
    """φ(x; ω) of every backend and dtype equals the correctly rounded mp value within budget."""
    need_twin(target)
    params = draw(target, seed, d, m)
    x = data.draw(points((n, d), scale, no_tiny=True), label="x")
    check_features(target, x, params, backend)


@pytest.mark.parametrize("target", LOGS)
@pytest.mark.parametrize("backend", backend_axis(("float64", "float32")))
@settings(max_examples=FEW)
@given(seed=seeds, n=st.integers(1, 3), d=st.integers(1, 4), m=st.integers(2, 6),
       scale=st.sampled_from([1e-3, 0.5, 2.0, 6.0]), data=st.data())
def test_log_features_match_reference(target, backend, seed, n, d, m, scale, data):
    """log φ (the stable path's input) equals the mp log-features within its bound."""
    need_twin(target)
    params = draw(target, seed, d, m)
    x = data.draw(points((n, d), scale, no_tiny=True), label="x")
    check_features(target, x, params, backend, log=True)


def grid_inputs(d: int) -> dict[str, np.ndarray]:
    """Deterministic edge inputs: axes, opposite and collinear rows, tiny, zero and large."""
    e = np.eye(d)
    return {
        "axes": np.vstack([e, -e])[: min(2 * d, 4)],
        "opposite_collinear": np.vstack([np.full(d, 0.7), np.full(d, -0.7), np.full(d, 1.4)]),
        "zero_tiny": np.vstack([np.zeros(d), np.full(d, 1e-150), np.full(d, 3e-8)]),
        "large": np.vstack([np.full(d, 3.0) / np.sqrt(d), -np.linspace(1, 4, d)]),
    }


@pytest.mark.parametrize("target", WHITE)
@pytest.mark.parametrize("backend", backend_axis(("float64", "float32")))
def test_features_on_grid(target, backend):
    """The same comparison on deterministic edge inputs (every case of :func:`grid_inputs`)."""
    need_twin(target)
    d = 3
    params = draw(target, 20240601, d, 4)
    for x in grid_inputs(d).values():
        check_features(target, x, params, backend, hypothesis=False)


# --------------------------------------------------------------------------- kernel estimate
@pytest.mark.parametrize("target", WHITE)
@pytest.mark.parametrize("backend", backend_axis(("float64", "float32")))
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(1, 4), m=st.integers(2, 6),
       scale=st.sampled_from([0.1, 0.7, 1.5]), data=st.data())
def test_kernel_estimate_matches_reference(target, backend, seed, d, m, scale, data):
    """φ̂(X)φ̂(Y)ᵀ computed by the backend equals the mp φ(X)φ(Y)ᵀ within the propagated bound."""
    entry = need_twin(target)
    fn = backend_fn(target, backend)
    params = draw(target, seed, d, m)
    X = data.draw(points((3, d), scale, no_tiny=True), label="X")
    Y = data.draw(points((2, d), scale, no_tiny=True), label="Y")
    budget = backend.budget
    feats, bounds, exact, mp_feats = [], [], [], []
    for Z in (X, Y):
        z_in, z_r = rounded_input(Z, backend)
        pos = positions_for(target, Z.shape[0])
        phi_mp = features_mp(entry, z_r, params, positions=pos)
        ref = to_float(phi_mp)
        feats.append(call(target, fn, z_in, params, backend, pos))
        # bound vs the exact value: the twin's bound without the reference-rounding term
        bounds.append(feature_bound(entry, z_r, params, backend, ref, pos)
                      - reference_rounding(ref))
        exact.append(np.abs(ref) * (1 + U64))  # |exact| ≤ |ref|(1 + u₆₄)
        mp_feats.append(phi_mp)
    fx, fy = feats
    got = fx @ fy.T if backend.library == "numpy" else fx @ fy.transpose(-1, -2)
    ref_k = mp_feats[0] @ mp_feats[1].T
    bound = inner_bound(exact[0], bounds[0], exact[1], bounds[1], budget.u_compute)
    bound = bound + reference_rounding(to_float(ref_k))
    assert_close(
        to_numpy(got), ref_k, bound, inputs={},
        label=f"{target.name}: φ(X)φ(Y)ᵀ on {backend.name} {backend.dtype}",
        how="feature bounds propagated through the inner product + γ_D(u_c)·Σ|φ||ψ| + u₆₄|ref|",
        repro=f"seed={seed} (parameters), X={X.tolist()}, Y={Y.tolist()}",
    )


# -------------------------------------------------------------------------------- attention
def check_attention(target: FeatureMapTarget, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                    params: dict, backend: Backend, causal: bool,
                    *, hypothesis: bool = True) -> None:
    """Attention with the target's map vs the exact estimator (module docstring)."""
    twin = need_twin(target)
    use_log = target.has("log_features")
    fn = backend_fn(target, backend, log=use_log)
    n, d = q.shape
    budget = backend.budget
    u_c = budget.u_compute
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
    vmax = float(np.abs(v_r).max())
    if use_log:
        lq_ref = features_reference(twin, xq, params, positions=pos, log=True)
        lk_ref = features_reference(twin, xk, params, positions=pos, log=True)
        eq = feature_bound(twin, xq, params, backend, lq_ref, pos, log=True)
        ek = feature_bound(twin, xk, params, backend, lk_ref, pos, log=True)
        big_e = eq.max(axis=-1, keepdims=True) + ek.max()
        lq_hat = to_numpy(call(target, fn, backend.from_numpy(xq), params, backend, pos))
        raw = call(target, fn, backend.from_numpy(xk), params, backend, pos)
        feat_dtype, lk_hat = raw.dtype, to_numpy(raw)
        width = lq_hat.shape[-1]
        z = np.abs(lq_hat).max() + np.abs(lk_hat).max() + np.log(n * width)
        delta = gamma(n + width + 6, u_c) * (z + 1)
        bound = (np.expm1(2 * big_e) + np.expm1(4 * delta)) * vmax
        how = "log-feature bounds → expm1(2E)·max|v| + log-space evaluation expm1(4δ)·max|v|"
    else:
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
        fq_hat = to_numpy(call(target, fn, backend.from_numpy(xq), params, backend, pos))
        raw = call(target, fn, backend.from_numpy(xk), params, backend, pos)
        feat_dtype, fk_hat = raw.dtype, to_numpy(raw)
        comp = linear_attention_error_bound(fq_hat, fk_hat, v_r, causal=causal, u=u_c)
        bound = prop + comp
        how = "feature bounds → (a + |out|b)/(|D| − b) + linear_attention_error_bound(u_c)"
    bound = bound + reference_rounding(ref)
    assert np.isfinite(bound).all(), f"{target.name}: attention bound not finite (ill-posed)"
    # The adapter dtype rule (properties/protocol.py): features may come back wider than
    # the input (float64 features for float32 input); the attention then runs, and is compared,
    # in that wider dtype (v's values are unchanged; every bound above is for the input dtype's
    # unit roundoff, so it holds a fortiori). feature_map_attention takes q, k, v of one dtype,
    # so all three are widened; widening is exact, and an adapter that promotes float32 input to
    # float64 internally computes the same features from the widened input.
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


def widen_like(v_in: Any, feature_dtype: Any) -> Any:
    """``v_in`` in the features' dtype when that is wider (the adapter dtype rule)."""
    if isinstance(v_in, np.ndarray):
        wide = np.result_type(v_in.dtype, feature_dtype)
        return v_in if wide == v_in.dtype else v_in.astype(wide)
    import torch

    wide = torch.promote_types(v_in.dtype, feature_dtype)
    return v_in if wide == v_in.dtype else v_in.to(wide)


def _dims(target: FeatureMapTarget | None):
    prescaled = target is not None and target.attention_prescale
    return st.sampled_from([1, 16]) if prescaled else st.integers(1, 4)


@pytest.mark.parametrize("target", WHITE)
@pytest.mark.parametrize("backend", backend_axis(("float64", "float32")))
@settings(max_examples=FEW)
@given(data=st.data())
def test_attention_matches_estimator_reference(target, backend, data):
    """Linear attention with the target's map equals exact attention of the same estimator."""
    need_twin(target)
    seed = data.draw(seeds, label="seed")
    causal = data.draw(st.booleans(), label="causal")
    n = data.draw(st.integers(1, 4), label="n")
    d = data.draw(_dims(target), label="d")
    m = data.draw(st.integers(2, 6), label="m")
    scale = data.draw(st.sampled_from([0.3, 1.0, 2.0]), label="scale")
    q = data.draw(points((n, d), scale, off_zero=True), label="q")
    k = data.draw(points((n, d), scale, off_zero=True), label="k")
    if not target.has("positive"):
        # keep denominators > 0 (non-positive ones are a documented ValueError, zero rows of
        # nonnegative maps a separate policy): positive inputs and k₀ = q₀, so row 0 (all a
        # causal row 0 sees) has den ≥ ‖φ(q₀)‖²
        q, k = np.abs(q), np.abs(k)
        k[0] = q[0]
    v = data.draw(points((n, 2), no_tiny=True), label="v")
    check_attention(target, q, k, v, draw(target, seed, d, m), backend, causal)


LARGE_NORM = feature_maps("positive", "log_features", white_box=True,
                          predicate=lambda t: t.attention_prescale)


@pytest.mark.parametrize("target", LARGE_NORM)
@pytest.mark.parametrize("backend", backend_axis(("float32",)))
@pytest.mark.parametrize("norm", [5.0, 12.0, 20.0])
@pytest.mark.parametrize("causal", [False, True], ids=["noncausal", "causal"])
def test_large_norm_attention_is_finite_and_accurate(target, backend, norm, causal):
    """Issue 2: ‖q‖·d^(−1/4) up to 20 in float32 gives finite outputs equal to the mp estimator
    within the log-path bound (d = 16, so the prescale is exact)."""
    d, n = 16, 4
    rng = generator(0, f"large_norm_attention.norm={norm}.causal={causal}")  # fixed inputs
    q, k = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    q *= (norm * d**0.25) / np.linalg.norm(q, axis=-1, keepdims=True)
    k *= (norm * d**0.25) / np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((n, 2))
    check_attention(target, q, k, v, draw(target, 7, d, 8), backend, causal,
                    hypothesis=False)

