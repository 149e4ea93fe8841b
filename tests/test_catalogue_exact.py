"""Exact finite maps (issue 3): Taylor (full, compressed, order p), polynomial, linear, cosine.

What is shown, and how the tolerances are derived:

* **Backends agree with the mpmath twin** (and so with each other) on every map, dtype and
  backend: the reference is the twin's exact features rounded once to float64
  (:func:`kernel_verify.verify.references.features.features_reference`), the tolerance is the twin's
  a-priori forward error bound (``feature_error_bound``: γ_n-rule analysis in its docstring, with
  the dtype's ``u`` and the worst elementary-function ulps of
  :func:`kernel_verify.verify.tolerance.budget_for`) plus ``u₆₄|ref|`` for the reference's own
  rounding and, for half types, the cast back (``output_round`` ulps). Two backends each within
  ``B`` of the exact value are within ``2B`` of each other (triangle inequality);
  :func:`test_backends_agree_float64` states it directly.
* **Taylor identities** ``φ_p(q)ᵀφ_p(k) = Σ_(k≤p) tᵏ/k!``: exactly in mpmath (twins, 40
  digits: the identity is algebraic, so only working-precision rounding ~1e-38 remains), and
  in float64 against the exact kernel with the inner-product bound
  ``|fl(φ̂ᵀψ̂) − φᵀψ| ≤ Σ(|φ|e_ψ + |ψ|e_φ + e_φe_ψ) + γ_D·Σ(|φ|+e_φ)(|ψ|+e_ψ)`` (D features,
  e = the feature bounds) plus the reference's rounding; full and compressed forms agree
  within the sum of their two bounds.
"""

from __future__ import annotations

import math
from typing import Any

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernel_verify.impls.registry import FeatureMap, get
from kernel_verify.properties.backends import backend_axis, to_numpy
from kernel_verify.verify.backends import Backend
from kernel_verify.verify.compare import assert_close
from kernel_verify.verify.references.features import (
    feature_error_bound,
    features_mp,
    features_reference,
)
from kernel_verify.verify.references.kernels import gram_mp, gram_reference
from kernel_verify.verify.references.mp import to_float, working_precision
from kernel_verify.verify.tolerance import U64, gamma, reference_rounding, ulp

EXACT = ("taylor2", "taylor3", "taylor2_compressed", "polynomial", "linear", "cosine")
ALL_DTYPES = ("float64", "float32", "float16", "bfloat16")


# --------------------------------------------------------------------------- shared helpers
def inputs(seed: int, n: int, d: int, scale: float) -> np.ndarray:
    """Standard normal rows times ``scale`` from an explicit generator."""
    return np.random.default_rng(seed).standard_normal((n, d)) * scale


def backend_fn(entry: FeatureMap, backend: Backend, log: bool = False):
    if backend.library == "numpy":
        return entry.log_numpy_fn if log else entry.numpy_fn
    return entry.log_torch_fn if log else entry.torch_fn


def check_against_mp(
    entry: FeatureMap,
    x64: np.ndarray,
    params: dict[str, np.ndarray],
    backend: Backend,
    *,
    positions: np.ndarray | None = None,
    log: bool = False,
    label: str = "",
) -> None:
    """Backend features of ``entry`` against its twin, within the derived bound (module doc)."""
    if backend.skip_reason:
        pytest.skip(backend.skip_reason)
    kw: dict[str, Any] = {"positions": positions} if entry.has("positional") else {}
    x_in = backend.from_numpy(x64)
    x_r = to_numpy(x_in)  # the rounded input, exactly, in float64
    got = to_numpy(backend_fn(entry, backend, log)(x_in, backend.from_numpy_params(params),
                                                   entry.config, **kw))
    budget = backend.budget
    ulps = max(budget.ulps.values())
    ref = features_reference(entry, x_r, params, positions=positions, log=log)
    bound = feature_error_bound(
        entry, x_r, params, None, budget.u_compute, ulps, positions, log=log
    )
    bound = bound + reference_rounding(ref)
    if budget.output_round:
        bound = bound + budget.output_round * ulp(np.abs(ref) + bound, backend.dtype)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert_close(
        got, ref, bound, inputs={"x": x_r},
        label=label or f"{entry.name} {backend.name} {backend.dtype}",
        how="a-priori forward error bound of the formula (features_catalogue) + reference "
        "rounding (+ cast to a half type)",
        repro=f"check_against_mp(get({entry.name!r}), x, params, get_backend({backend.id!r}))",
    )


def inner_bound(phi: np.ndarray, e_phi: np.ndarray, psi: np.ndarray, e_psi: np.ndarray, u: float):
    """Bound on ``|fl(φ̂ψ̂ᵀ) − φψᵀ|`` (rows × rows) from feature bounds (module docstring)."""
    a, b = np.abs(phi), np.abs(psi)
    prop = a @ e_psi.T + e_phi @ b.T + e_phi @ e_psi.T
    return prop + gamma(phi.shape[-1], u) * ((a + e_phi) @ (b + e_psi).T)


def check_induced_kernel(
    entry: FeatureMap,
    X: np.ndarray,
    Y: np.ndarray,
    params: dict[str, np.ndarray],
    *,
    kernel_params: dict[str, Any] | None = None,
    gram: np.ndarray | None = None,
) -> None:
    """float64 ``φ(X)φ(Y)ᵀ`` (NumPy) equals the declared kernel's exact Gram matrix within the
    inner-product bound (module docstring)."""
    kp = entry.kernel_args(X.shape[-1]) if kernel_params is None else kernel_params
    fx, fy = entry.numpy_fn(X, params, entry.config), entry.numpy_fn(Y, params, entry.config)
    ex = feature_error_bound(entry, X, params, None, U64, 1.0)
    ey = feature_error_bound(entry, Y, params, None, U64, 1.0)
    ref = gram_reference(entry.kernel, X, Y, **kp) if gram is None else gram
    bound = inner_bound(fx, ex, fy, ey, U64) + reference_rounding(ref)
    assert_close(
        fx @ fy.T, ref, bound, inputs={"X": X, "Y": Y}, label=f"{entry.name}: φ(x)ᵀφ(y) = k(x, y)",
        how="feature bounds propagated through the inner product + γ_D (module docstring)",
        repro=f"check_induced_kernel(get({entry.name!r}), X, Y, params)",
    )


seeds = st.integers(0, 2**32 - 1)
scales = st.sampled_from([1e-3, 0.3, 1.0, 2.0])


# --------------------------------------------------------------------------- backends vs mp
@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("backend", backend_axis(ALL_DTYPES))
@given(seed=seeds, n=st.integers(1, 3), d=st.integers(1, 4), scale=scales)
def test_features_match_mp_twin(name, backend, seed, n, d, scale):
    entry = get(name)
    x = inputs(seed, n, d, scale)
    check_against_mp(entry, x, entry.draw(np.random.default_rng(seed), d, 1, entry.config),
                     backend)


@pytest.mark.parametrize(
    ("name", "overrides"),
    [("taylor2", {"order": 0}), ("taylor2", {"order": 4}), ("polynomial", {"p": 0}),
     ("polynomial", {"p": 3, "c": 0.5}), ("polynomial", {"p": 2, "c": 0.0})],
)
@pytest.mark.parametrize("backend", backend_axis(("float64", "float32")))
def test_other_orders_match_mp_twin(name, overrides, backend):
    entry = get(name).with_config(**overrides)
    x = inputs(7, 3, 3, 0.8)
    params: dict[str, np.ndarray] = {}
    check_against_mp(entry, x, params, backend)
    assert entry.numpy_fn(x, params, entry.config).shape[-1] == entry.output_dim(3, 1)


@pytest.mark.parametrize("name", EXACT)
@given(seed=seeds, d=st.integers(1, 4), scale=scales)
def test_backends_agree_float64(name, seed, d, scale):
    """|numpy − torch| ≤ 2B, B the forward bound of each (both within B of the exact value)."""
    entry = get(name)
    x = inputs(seed, 3, d, scale)
    a = entry.numpy_fn(x, {}, entry.config)
    b = entry.torch_fn(torch.as_tensor(x), {}, entry.config).numpy()
    bound = 2 * feature_error_bound(entry, x, {}, None, U64, 1.0)
    assert_close(b, a, bound, inputs={"x": x}, label=f"{name}: torch vs numpy",
                 how="2 × forward error bound (triangle inequality)", repro=f"seed={seed}")


# ---------------------------------------------------------------------- Taylor identities
@pytest.mark.parametrize(("name", "order"), [("taylor2", 2), ("taylor2_compressed", 2),
                                             ("taylor3", 3)])
@given(seed=seeds, d=st.integers(1, 4))
def test_taylor_identity_in_mp(name, order, seed, d):
    """φ_p(q)ᵀφ_p(k) = Σ tᵏ/k! exactly (40-digit twins; only working-precision rounding)."""
    entry = get(name)
    x = inputs(seed, 3, d, 1.0)
    with working_precision(40):
        phi = features_mp(entry, x, {}, dps=40)
        gram = phi @ phi.T
        exact = gram_mp("taylor", x, x, dps=40, order=order)
        worst = max(abs(gram[i, j] - exact[i, j]) / (1 + abs(exact[i, j]))
                    for i in range(3) for j in range(3))
    assert worst < mpmath.mpf(10) ** -35, f"{name}: identity off by {worst} (seed {seed})"


@pytest.mark.parametrize("name", ["taylor2", "taylor2_compressed", "taylor3", "polynomial"])
@given(seed=seeds, d=st.integers(1, 4), scale=st.sampled_from([0.1, 1.0, 3.0]))
def test_kernel_identity_float64(name, seed, d, scale):
    """In float64 the inner products equal the exact kernel within the propagated bound."""
    entry = get(name)
    X, Y = inputs(seed, 3, d, scale), inputs(seed + 1, 2, d, scale)
    check_induced_kernel(entry, X, Y, {})


@pytest.mark.parametrize("p", [0, 1, 2, 4])
def test_taylor_any_order(p):
    entry = get("taylor2").with_config(order=p)
    X = inputs(11, 3, 2, 0.9)
    check_induced_kernel(entry, X, X, {})
    assert entry.output_dim(2, 1) == sum(2**k for k in range(p + 1))


@given(seed=seeds, d=st.integers(1, 5), scale=scales)
def test_full_and_compressed_agree(seed, d, scale):
    """Same inner products (1 + t + t²/2) within the sum of the two inner-product bounds."""
    full, comp = get("taylor2"), get("taylor2_compressed")
    X = inputs(seed, 3, d, scale)
    out, bounds = [], []
    for e in (full, comp):
        f = e.numpy_fn(X, {}, e.config)
        eb = feature_error_bound(e, X, {}, None, U64, 1.0)
        out.append(f @ f.T)
        bounds.append(inner_bound(f, eb, f, eb, U64))
    assert_close(out[1], out[0], bounds[0] + bounds[1], inputs={"X": X},
                 label="compressed vs full Taylor map", how="sum of both inner-product bounds",
                 repro=f"seed={seed}")
    assert comp.output_dim(d, 1) == 1 + d + d * (d + 1) // 2
    assert full.output_dim(d, 1) == 1 + d + d * d


def test_taylor_kernel_floor():
    """1 + t + t²/2 ≥ ½ with equality at t = −1 (docs/math.md §5): k = −q, ‖q‖² = √d."""
    d = 16
    q = np.full((1, d), 0.5)  # qᵀq/√d = 16·¼/4 = 1 exactly
    with working_precision(40):
        value = gram_mp("taylor", q, -q, order=2)[0, 0]
    assert abs(value - mpmath.mpf(1) / 2) < mpmath.mpf(10) ** -35


# --------------------------------------------------------------------------------- cosine
def test_cosine_at_zero_is_zero():
    """Documented: φ(0) = 0, hence k(0, y) = 0 (both backends and the reference)."""
    e = get("cosine")
    x = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 2.0]])
    for out in (e.numpy_fn(x, {}, e.config), e.torch_fn(torch.as_tensor(x), {}, e.config).numpy()):
        assert np.array_equal(out[0], np.zeros(3))
        assert np.all(np.isfinite(out))
    assert to_float(gram_mp("cosine", x, x))[0, 1] == 0.0


def test_cosine_extreme_magnitudes():
    """The power-of-two prescaling keeps ‖x‖ finite: unit vectors at 1e±300 (float64)."""
    e = get("cosine")
    x = np.array([[3e300, 4e300], [3e-300, 4e-300]])
    for out in (e.numpy_fn(x, {}, e.config), e.torch_fn(torch.as_tensor(x), {}, e.config).numpy()):
        bound = feature_error_bound(e, x / np.array([[1e300], [1e-300]]), {}, None, U64, 1.0)
        assert_close(out, np.array([[0.6, 0.8], [0.6, 0.8]]), bound + 2 * U64, label="cosine",
                     how="relative bound of the unit vector + rounding of 0.6, 0.8",
                     repro="test_cosine_extreme_magnitudes")


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_bad_inputs(backend):
    as_in = (lambda a: a) if backend == "numpy" else torch.as_tensor
    tay, poly = get("taylor2"), get("polynomial")
    fn = (lambda e: e.numpy_fn) if backend == "numpy" else (lambda e: e.torch_fn)
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match="order must be >= 0"):
        fn(tay)(as_in(x), {}, {"order": -1})
    with pytest.raises(TypeError, match="order must be an integer"):
        fn(tay)(as_in(x), {}, {"order": 2.0})
    with pytest.raises(ValueError, match="p must be >= 0"):
        fn(poly)(as_in(x), {}, {"p": -2, "c": 1.0})
    with pytest.raises(ValueError, match="c must be >= 0"):
        fn(poly)(as_in(x), {}, {"p": 2, "c": -1.0})
    bad = x.copy()
    bad[0, 1] = np.nan
    for e in (tay, poly, get("linear"), get("cosine"), get("taylor2_compressed")):
        with pytest.raises(ValueError, match="x contains NaN or Inf"):
            fn(e)(as_in(bad), {}, e.config)
        with pytest.raises(ValueError, match="at least 2 dimensions"):
            fn(e)(as_in(np.ones(3)), {}, e.config)
        with pytest.raises(TypeError, match="floating dtype"):
            fn(e)(as_in(np.ones((2, 3), dtype=np.int64)), {}, e.config)
        other = torch.as_tensor(x) if backend == "numpy" else x
        with pytest.raises(TypeError, match="x must be a"):
            fn(e)(other, {}, e.config)


def test_config_errors_and_output_dim_follow_config():
    with pytest.raises(ValueError, match="unknown config keys"):
        get("taylor2").with_config(degree=3)
    with pytest.raises(ValueError, match="order must be >= 0"):
        get("taylor2").with_config(order=-1)
    assert get("polynomial").with_config(p=3).output_dim(4, 1) == math.comb(7, 3)
    assert get("taylor2").with_config(order=3).output_dim(2, 1) == 1 + 2 + 4 + 8
