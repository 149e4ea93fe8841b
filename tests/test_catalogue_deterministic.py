"""Deterministic linear-attention maps (issue 3): elu+1, ReLU, Square, Identity, cosFormer,
DPFP-ν, Hedgehog.

Tolerances: as in :mod:`tests.test_catalogue_exact` (its module docstring): every backend and
dtype against the mpmath twin within the formula's a-priori forward error bound; the declared
induced kernel against ``φ(x)ᵀφ(y)`` within the propagated inner-product bound. Sign claims
(positive / nonnegative) are checked on the computed features directly: they are exact
statements about the float results for inputs whose exp does not underflow (|x| ≤ 5 here).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernel_verify.impls.registry import all_maps, get
from kernel_verify.impls.torch.deterministic_maps import Hedgehog
from kernel_verify.properties.backends import backend_axis
from kernel_verify.verify.backends import get_backend
from kernel_verify.verify.compare import assert_close
from kernel_verify.verify.references.features import feature_error_bound
from kernel_verify.verify.references.kernels_catalogue import cosformer_gram_mp
from kernel_verify.verify.references.mp import to_float
from kernel_verify.verify.tolerance import reference_rounding
from tests.test_catalogue_exact import (
    U64,
    check_against_mp,
    check_induced_kernel,
    inner_bound,
    inputs,
)

DETERMINISTIC = ("elu_plus_one", "relu", "square", "identity", "dpfp", "hedgehog")
ALL_DTYPES = ("float64", "float32", "float16", "bfloat16")
seeds = st.integers(0, 2**32 - 1)
scales = st.sampled_from([1e-3, 0.5, 1.0, 3.0])


def drawn(entry, d: int) -> dict:
    """The entry's parameter draw (empty for most deterministic maps; Hedgehog's resolved
    weights), which the implementation and the mpmath twin share."""
    return entry.draw(np.random.default_rng(0), d, 1, entry.config)


@pytest.mark.parametrize("name", DETERMINISTIC)
@pytest.mark.parametrize("backend", backend_axis(ALL_DTYPES))
@given(seed=seeds, n=st.integers(1, 3), d=st.integers(1, 4), scale=scales)
def test_features_match_mp_twin(name, backend, seed, n, d, scale):
    entry = get(name)
    check_against_mp(entry, inputs(seed, n, d, scale), drawn(entry, d), backend)


@pytest.mark.parametrize("name", ["hedgehog", "elu_plus_one"])
@pytest.mark.parametrize("backend", backend_axis(("float64", "float32")))
@given(seed=seeds, d=st.integers(1, 4), scale=scales)
def test_log_features_match_mp_twin(name, backend, seed, d, scale):
    entry = get(name)
    check_against_mp(entry, inputs(seed, 3, d, scale), drawn(entry, d), backend, log=True)


@pytest.mark.parametrize("nu", [1, 2, 3])
@pytest.mark.parametrize("backend", backend_axis(("float64", "float32")))
def test_dpfp_orders_match_mp_twin(nu, backend):
    entry = get("dpfp").with_config(nu=nu)
    x = inputs(nu, 3, 3, 1.0)
    check_against_mp(entry, x, {}, backend)
    assert entry.output_dim(3, 1) == 2 * 3 * nu


@pytest.mark.parametrize("backend", backend_axis(ALL_DTYPES))
@given(seed=seeds, n=st.integers(1, 4), d=st.integers(1, 4), scale=scales,
       big_m=st.sampled_from([4, 7, 256]))
def test_cosformer_matches_mp_twin(backend, seed, n, d, scale, big_m):
    entry = get("cosformer").with_config(M=big_m)
    pos = np.random.default_rng(seed).integers(0, big_m + 1, size=n)
    check_against_mp(entry, inputs(seed, n, d, scale), {}, backend, positions=pos)


@given(seed=seeds, d=st.integers(1, 4), scale=st.sampled_from([0.3, 1.0, 3.0]))
@pytest.mark.parametrize("name", DETERMINISTIC)
def test_declared_kernel_is_induced(name, seed, d, scale):
    """φ(x)ᵀφ(y) equals the kernel the entry declares (so the references evaluate the right one)."""
    entry = get(name)
    check_induced_kernel(
        entry, inputs(seed, 3, d, scale), inputs(seed + 1, 2, d, scale), drawn(entry, d)
    )


def test_dpfp_kernel_higher_nu():
    for nu in (2, 3):
        entry = get("dpfp").with_config(nu=nu)
        check_induced_kernel(entry, inputs(5, 3, 3, 1.0), inputs(6, 2, 3, 1.0), {})


@given(seed=seeds, d=st.integers(1, 4), big_m=st.sampled_from([3, 16, 256]))
def test_cosformer_kernel_with_positions(seed, d, big_m):
    """relu(x)ᵀrelu(y)·cos(π(i−j)/2M) from the features at positions i, j."""
    entry = get("cosformer").with_config(M=big_m)
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((3, d)), rng.standard_normal((2, d))
    pi, pj = rng.integers(0, big_m + 1, size=3), rng.integers(0, big_m + 1, size=2)
    fx = entry.numpy_fn(X, {}, entry.config, positions=pi)
    fy = entry.numpy_fn(Y, {}, entry.config, positions=pj)
    ex = feature_error_bound(entry, X, {}, None, U64, 1.0, positions=pi)
    ey = feature_error_bound(entry, Y, {}, None, U64, 1.0, positions=pj)
    ref = to_float(cosformer_gram_mp(X, Y, pi, pj, big_m))
    bound = inner_bound(fx, ex, fy, ey, U64) + reference_rounding(ref)
    assert_close(fx @ fy.T, ref, bound, inputs={"X": X, "Y": Y}, label="cosformer kernel",
                 how="propagated feature bounds + γ_D", repro=f"seed={seed}")


# ------------------------------------------------------------------------------- claims
@pytest.mark.parametrize("entry", all_maps(family="deterministic"), ids=lambda e: e.name)
@given(seed=seeds, scale=st.sampled_from([0.1, 1.0, 5.0]))
def test_sign_claims(entry, seed, scale):
    x = np.clip(inputs(seed, 4, 3, scale), -5, 5)
    kw = {"positions": np.arange(4)} if entry.has("positional") else {}
    for out in (entry.numpy_fn(x, {}, entry.config, **kw),
                entry.torch_fn(torch.as_tensor(x), {}, entry.config, **kw).numpy()):
        if entry.has("positive"):
            assert np.all(out > 0), f"{entry.name}: non-positive feature (seed {seed})"
        if entry.has("nonnegative"):
            assert np.all(out >= 0), f"{entry.name}: negative feature (seed {seed})"


def test_relu_features_can_all_vanish():
    """Why ReLU needs attention's zero-denominator guard: x ≤ 0 gives φ(x) = 0 exactly."""
    e = get("relu")
    assert not np.any(e.numpy_fn(-np.abs(inputs(1, 3, 4, 1.0)), {}, e.config))


def test_identity_kernel_can_be_negative():
    """Negative control: xᵀy < 0 for y = −x, so normalised attention with φ = x is ill-posed."""
    e = get("identity")
    x = inputs(2, 1, 4, 1.0)
    f = e.numpy_fn(np.concatenate([x, -x]), {}, e.config)
    assert (f[0] @ f[1]) < 0
    assert not e.has("positive") and not e.has("nonnegative")


# ------------------------------------------------------------------------------ Hedgehog
def test_hedgehog_module_matches_function_and_trains():
    entry = get("hedgehog")
    d = 4
    x = inputs(3, 5, d, 1.0)
    module = Hedgehog.from_config(entry.config, d)
    out = module(torch.as_tensor(x))
    ref = entry.numpy_fn(x, {}, entry.config)
    bound = 2 * feature_error_bound(entry, x, drawn(entry, d), None, U64, 1.0)
    assert_close(out.detach().numpy(), ref, bound, label="Hedgehog module vs registry function",
                 how="2 × forward bound (same formula, two code paths)", repro="seed 3")
    target = torch.as_tensor(np.random.default_rng(4).uniform(size=out.shape))
    ((out - target) ** 2).sum().backward()
    for name, p in module.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, f"no gradient reaches {name}"


def test_hedgehog_with_given_weights():
    d = 3
    w, b = np.eye(d), np.zeros(d)
    entry = get("hedgehog").with_config(W=w, b=b)
    x = inputs(5, 2, d, 1.0)
    z = x
    expect = np.concatenate([np.exp(z) / np.exp(z).sum(-1, keepdims=True),
                             np.exp(-z) / np.exp(-z).sum(-1, keepdims=True)], axis=-1)
    check_against_mp(entry, x, drawn(entry, d), get_backend("numpy-float64"))
    bound = feature_error_bound(entry, x, drawn(entry, d), None, U64, 1.0) + 6 * U64 * expect
    assert_close(entry.numpy_fn(x, {}, entry.config), expect, bound, label="hedgehog W = I",
                 how="feature bound + the naive softmax's own 3-rounding error", repro="seed 5")


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_bad_inputs(backend):
    as_in = (lambda a: a) if backend == "numpy" else torch.as_tensor

    def fn(e):
        return e.numpy_fn if backend == "numpy" else e.torch_fn

    cos = get("cosformer")
    x = np.ones((3, 2))
    with pytest.raises(ValueError, match="cosformer needs positions="):
        fn(cos)(as_in(x), {}, cos.config)
    with pytest.raises(ValueError, match=r"positions must have shape \(3,\)"):
        fn(cos)(as_in(x), {}, cos.config, positions=np.arange(4))
    with pytest.raises(TypeError, match="positions must be an integer array"):
        fn(cos)(as_in(x), {}, cos.config, positions=np.arange(3.0))
    with pytest.raises(ValueError, match=r"positions must lie in \[0, M=2\]"):
        fn(cos)(as_in(x), {}, {"M": 2}, positions=np.array([0, 1, 3]))
    with pytest.raises(ValueError, match="M must be >= 1"):
        fn(cos)(as_in(x), {}, {"M": 0}, positions=np.arange(3))
    with pytest.raises(ValueError, match="nu must be >= 1"):
        fn(get("dpfp"))(as_in(x), {}, {"nu": 0})
    hh = get("hedgehog")
    with pytest.raises(ValueError, match=r"config\['W'\] must have shape \(2, 2\)"):
        fn(hh)(as_in(x), {}, {**hh.config, "W": np.eye(3)})
    with pytest.raises(ValueError, match=r"config\['b'\] contains NaN"):
        fn(hh)(as_in(x), {}, {**hh.config, "b": np.array([0.0, np.nan])})
    bad = x.copy()
    bad[1, 0] = np.inf
    for name in DETERMINISTIC:
        e = get(name)
        with pytest.raises(ValueError, match="x contains NaN or Inf"):
            fn(e)(as_in(bad), {}, e.config)
        with pytest.raises(TypeError, match="floating dtype"):
            fn(e)(as_in(np.ones((2, 2), dtype=np.int32)), {}, e.config)
    with pytest.raises(ValueError, match="Hedgehog needs W"):
        Hedgehog(np.eye(3), np.zeros(2))
