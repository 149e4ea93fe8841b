"""Agreement with the mpmath reference (white-box feature-map targets; docs/math.md §1–§7, §9).

For one shared float64 parameter draw ``ω`` (``target.draw``), every backend function the target
provides (numpy, torch:cpu, torch:cuda) in every dtype computes ``φ(x; ω)``; the reference is the
formula's mpmath twin (:mod:`kernel_verify.verify.references.features`) evaluated on the *rounded*
input (the input in the tested dtype, converted exactly) and rounded once to float64.

Tolerances (all derived, none tuned): see :mod:`kernel_verify.properties.checks.reference`,
which holds the checks (:func:`~kernel_verify.properties.checks.reference.check_features`,
:func:`~kernel_verify.properties.checks.reference.check_attention`) and their derivation.

The large-norm case of issue 2 (``‖q‖·d^(−1/4)`` up to 20, float32, positive maps through the
log path) must give finite outputs within the same bound.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_verify.properties.backends import backend_axis, to_numpy
from kernel_verify.properties.checks.reference import (
    backend_fn,
    call,
    check_attention,
    check_features,
    draw,
    feature_bound,
    inner_bound,
    need_twin,
    positions_for,
    rounded_input,
)
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.properties.strategies import generator, kernel_estimate_draws, points, seeds
from kernel_verify.properties.targets import feature_maps
from kernel_verify.verify.compare import assert_close
from kernel_verify.verify.references.features import features_mp
from kernel_verify.verify.references.mp import to_float
from kernel_verify.verify.tolerance import U64, reference_rounding

ALL_DTYPES = ("float64", "float32", "float16", "bfloat16")
#: Reference (mpmath) comparisons are slower: a fifth of the profile's examples, at least 3.
FEW = max(3, settings.default.max_examples // 5)


# --------------------------------------------------------------------------------- features
WHITE = feature_maps(white_box=True)
LOGS = feature_maps("log_features", white_box=True)


def _feature_draws(scales: list[float]):
    """The draws of a features property: a seed, ``n ∈ [1, 3]`` points of ``d ∈ [1, 4]``,
    ``m ∈ [2, 6]`` features, a scale from ``scales`` and ``data`` (the points), at :data:`FEW`
    examples."""
    def wrap(test):
        return settings(max_examples=FEW)(given(
            seed=seeds, n=st.integers(1, 3), d=st.integers(1, 4), m=st.integers(2, 6),
            scale=st.sampled_from(scales), data=st.data())(test))
    return wrap


def _features_at_drawn_points(target, backend, seed: int, n: int, d: int, m: int,
                              scale: float, data, log: bool = False) -> None:
    """:func:`check_features` (of ``log φ`` when ``log``) at ``n`` drawn points of ``d``
    coordinates at ``scale``, on the target's parameters of ``(seed, d, m)``."""
    need_twin(target)
    params = draw(target, seed, d, m)
    x = data.draw(points((n, d), scale, no_tiny=True), label="x")
    check_features(target, x, params, backend, log=log)


@pytest.mark.parametrize("target", WHITE)
@pytest.mark.parametrize("backend", backend_axis(ALL_DTYPES))
@_feature_draws([1e-3, 0.3, 1.0, 2.0])
def test_features_match_reference(target, backend, seed, n, d, m, scale, data):
    """φ(x; ω) of every backend and dtype equals the correctly rounded mp value within budget."""
    _features_at_drawn_points(target, backend, seed, n, d, m, scale, data)


@pytest.mark.parametrize("target", LOGS)
@pytest.mark.parametrize("backend", backend_axis(("float64", "float32")))
@_feature_draws([1e-3, 0.5, 2.0, 6.0])
def test_log_features_match_reference(target, backend, seed, n, d, m, scale, data):
    """log φ (the stable path's input) equals the mp log-features within its bound."""
    _features_at_drawn_points(target, backend, seed, n, d, m, scale, data, log=True)


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
@kernel_estimate_draws(FEW)
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
def _dims(target: FeatureMapTarget):
    prescaled = target.attention_prescale
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

