"""Taylor identities (Based, docs/math.md §5) and, generally, exact finite maps: ``φ(x)ᵀφ(y)``
equals the target kernel.

* **mpmath**: the formula's twin satisfies ``φ_p(q)ᵀφ_p(k) = Σ_(k≤p) tᵏ/k!``, ``t = qᵀk/√d``,
  exactly (40 digits; the identity is algebraic, so only working-precision rounding ~1e-38 is
  left: the assertion allows ``1e-35`` relative).
* **float**: every white-box ``exact_finite``/``deterministic`` target's own ``φ(X)φ(Y)ᵀ``
  (float64, NumPy and torch) equals the exact Gram matrix within
  ``Σ(|φ|e_ψ + e_φ|ψ| + e_φe_ψ) + γ_D·Σ(|φ| + e_φ)(|ψ| + e_ψ)`` (feature bounds ``e`` of the twin,
  :func:`kernel_verify.verify.references.features.feature_error_bound`) plus ``u₆₄|ref|``.
* full and compressed Taylor maps (every pair of Taylor targets of the same order) agree within
  the sum of their two bounds;
* positivity ``T₂(t) = ½((1+t)² + 1) ≥ ½``, with equality at ``t = −1``;
* the remainder ``|eᵗ − T₂(t)| ≤ (|t|³/6)·max(1, eᵗ)`` and the sign rule ``eᵗ ≥ T₂(t) ⇔ t ≥ 0``
  (Lagrange remainder ``e^ξ t³/6``), in mpmath on Hypothesis ``t`` and a grid.
"""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_verify.properties.checks.reference import has_twin, inner_bound
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.properties.strategies import generator, points
from kernel_verify.properties.targets import feature_maps
from kernel_verify.verify.compare import assert_close
from kernel_verify.verify.references.features import feature_error_bound, features_mp
from kernel_verify.verify.references.kernels import gram_mp, kernel_formula
from kernel_verify.verify.references.kernels_catalogue import cosformer_gram_mp, taylor_scale
from kernel_verify.verify.references.mp import to_float, working_precision
from kernel_verify.verify.tolerance import U64, reference_rounding

FEW = max(3, settings.default.max_examples // 5)
seeds = st.integers(0, 2**32 - 1)


def is_taylor(t: FeatureMapTarget) -> bool:
    return t.kernel == "taylor"


TAYLOR = feature_maps("exact_finite", predicate=is_taylor)
EXACT = feature_maps("exact_finite") + [
    p for p in feature_maps("deterministic")
    if p.values[0] is not None and not p.values[0].has("exact_finite")
]


def order_of(target: FeatureMapTarget, d: int) -> int:
    return int(target.kernel_args(d)["order"])


def need_white(target: FeatureMapTarget | None):
    if not target.white_box:
        pytest.skip(f"{target.name}: black-box (no parameters to evaluate a twin at): its "
                    "kernel identity runs in blackbox_maps::test_deterministic_black_box_map_"
                    "equals_kernel")
    if not has_twin(target):
        pytest.skip(f"{target.name}: formula {target.formula!r} has no mpmath twin (no derived "
                    "bound): its kernel identity runs through its features in blackbox_maps::"
                    "test_deterministic_black_box_map_equals_kernel")
    return target


def exact_gram(target: FeatureMapTarget, X: np.ndarray, Y: np.ndarray, pos=None):
    args = target.kernel_args(X.shape[-1])
    if target.has("positional"):
        if target.kernel != "cosformer":
            pytest.skip(f"{target.name}: positional kernel without a Gram rule")
        return cosformer_gram_mp(X, Y, pos[0], pos[1], args["M"])
    return gram_mp(target.kernel, X, Y, **args)


def own_features(target: FeatureMapTarget, X: np.ndarray, params: dict, backend: str, pos):
    kw = {"positions": pos} if target.has("positional") else {}
    if backend == "numpy":
        if target.numpy_fn is None:
            pytest.skip(f"{target.name} provides no numpy function")
        return target.numpy_fn(X, params, target.config, **kw)
    if target.torch_fn is None:
        pytest.skip(f"{target.name} provides no torch function")
    from kernel_verify.impls.torch.convert import to_torch

    out = target.torch_fn(torch.as_tensor(X), to_torch(params), target.config, **kw)
    return out.numpy()


def check_kernel_identity(target, X, Y, params, backend) -> tuple[np.ndarray, np.ndarray]:
    """Own float64 ``φ(X)φ(Y)ᵀ`` vs the exact Gram (module docstring); returns (got, bound)."""
    entry = need_white(target)
    pos = (np.arange(len(X)), np.arange(len(Y))) if target.has("positional") else (None, None)
    fx = own_features(target, X, params, backend, pos[0])
    fy = own_features(target, Y, params, backend, pos[1])
    ex = feature_error_bound(entry, X, params, None, U64, 1.0, pos[0])
    ey = feature_error_bound(entry, Y, params, None, U64, 1.0, pos[1])
    ref = exact_gram(target, X, Y, pos)
    ref64 = to_float(ref)
    # |exact φ| ≤ |φ̂| + e (the bound is vs the exact features)
    bound = inner_bound(np.abs(fx) + ex, ex, np.abs(fy) + ey, ey, U64)
    bound = bound + reference_rounding(ref64)
    got = fx @ fy.T
    assert_close(got, ref, bound, inputs={"X": X, "Y": Y},
                 label=f"{target.name} ({backend}): φ(x)ᵀφ(y) = {target.kernel}(x, y) "
                       f"[{kernel_formula(target.kernel, **target.kernel_args(X.shape[-1]))}]",
                 how="twin feature bounds through the inner product + γ_D + u₆₄|ref|",
                 repro=f"check_kernel_identity(target {target.name!r}, X, Y, params, "
                 f"{backend!r})")
    return got, bound


# ------------------------------------------------------------------------------ mp identity
# The mpmath twin of the formula (verify.references.features.features_mp) against the mpmath
# kernel: it never calls the target's own code (all four broken Taylor mutants pass it), so it
# is a check of the suite's references, marked kv_builtin_only: `check` does not credit it to
# the target. The target's own features are checked by test_exact_map_equals_kernel below.
@pytest.mark.kv_builtin_only
@pytest.mark.parametrize("target", TAYLOR)
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(1, 4), scale=st.sampled_from([0.1, 1.0, 3.0]), data=st.data())
def test_taylor_identity_in_mp(target, seed, d, scale, data):
    entry = need_white(target)
    x = data.draw(points((3, d), scale), label="x")
    params = target.draw_params(generator(seed, "params"), d, 1)
    with working_precision(40):
        phi = features_mp(entry, x, params, dps=40)
        gram = phi @ phi.T
        exact = gram_mp("taylor", x, x, dps=40, **target.kernel_args(d))
        worst = max(abs(gram[i, j] - exact[i, j]) / (1 + abs(exact[i, j]))
                    for i in range(3) for j in range(3))
    assert worst < mpmath.mpf(10) ** -35, (f"{target.name}: off by {worst} (seed {seed}, "
                                             f"x={x.tolist()})")


# ------------------------------------------------------------------- float, every exact map
@pytest.mark.parametrize("target", EXACT)
@pytest.mark.parametrize("backend", ["numpy", "torch:cpu"])
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(1, 4), scale=st.sampled_from([1e-3, 0.3, 1.0, 2.5]),
       data=st.data())
def test_exact_map_equals_kernel(target, backend, seed, d, scale, data):
    """φ(x)ᵀφ(y) = k(x, y) within the derived float64 bound (exact finite/deterministic maps)."""
    need_white(target)
    X = data.draw(points((3, d), scale), label="X")
    Y = data.draw(points((2, d), scale), label="Y")
    params = target.draw_params(generator(seed, "params"), d, 2)
    check_kernel_identity(target, X, Y, params, backend)


# white-box forms only: the comparison evaluates both maps on one parameter draw (a black-box
# Taylor map is held to the kernel itself by test_deterministic_black_box_map_equals_kernel)
PAIRS = [
    pytest.param(a.values[0], b.values[0], id=f"{a.id}-vs-{b.id}")
    for a, b in itertools.combinations(
        feature_maps("exact_finite", predicate=is_taylor, white_box=True), 2)
    if a.values[0] is not None and order_of(a.values[0], 3) == order_of(b.values[0], 3)
] or [pytest.param(None, None, id="none",
                   marks=pytest.mark.skip(reason="fewer than two Taylor targets of one order"))]


@pytest.mark.parametrize(("first", "second"), PAIRS)
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(1, 5), scale=st.sampled_from([1e-3, 0.5, 2.0]),
       data=st.data())
def test_taylor_forms_agree(first, second, seed, d, scale, data):
    """Full and compressed forms give the same inner products within the sum of both bounds."""
    X = data.draw(points((3, d), scale), label="X")
    out = []
    for t in (first, second):
        params = t.draw_params(generator(seed, "params"), d, 1)
        out.append(check_kernel_identity(t, X, X, params, "numpy"))
    (g1, b1), (g2, b2) = out
    assert_close(g2, g1, b1 + b2, inputs={"X": X},
                 label=f"{second.name} vs {first.name}", how="sum of both inner-product bounds",
                 repro=f"seed={seed} (parameter draws), X={X.tolist()}")


# ------------------------------------------------------------------------------- positivity
ORDER2 = feature_maps("exact_finite", predicate=lambda t: is_taylor(t)
                      and order_of(t, 3) == 2)


def _scale(target, d: int) -> float:
    """The factor s of t = s·qᵀk in the target's declared Taylor kernel (1/√d by default)."""
    return float(taylor_scale(target.kernel_args(d).get("scale"), d))


@pytest.mark.parametrize("target", ORDER2)
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(1, 6), scale=st.sampled_from([0.3, 1.0, 2.0]),
       data=st.data())
def test_second_order_taylor_kernel_is_at_least_half(target, seed, d, scale, data):
    """T₂(t) = ½((1+t)² + 1) ≥ ½: the computed φ(q)ᵀφ(k) ≥ ½ − bound (k near −q so t ≈ −1;
    q's rows off 0, |entries| ≥ 2⁻¹⁰·scale, so that k is defined)."""
    need_white(target)
    q = data.draw(points((2, d), scale, off_zero=True), label="q")
    s = _scale(target, d)
    k = -q / (s * np.sum(q * q, axis=-1))[:, None]  # s·qᵢᵀkᵢ = −1 on the diagonal
    k = k + data.draw(points((2, d), 0.05), label="k − k₋₁ (k₋₁: t = −1)")
    params = target.draw_params(generator(seed, "params"), d, 1)
    got, bound = check_kernel_identity(target, q, k, params, "numpy")
    assert np.all(got >= 0.5 - bound), f"{target.name}: φ(q)ᵀφ(k) = {got.min()} < ½"


@pytest.mark.parametrize("target", ORDER2)
def test_second_order_taylor_minimum_is_half_at_t_minus_one(target):
    """At t = −1 exactly (d = 16, q = ½·1, k = −q: qᵀk/√d = −4/4) the kernel is exactly ½ (a
    kernel declaring its own scale s: q = 1/√(16 s)·1, a power of 2 for s a power of 4)."""
    need_white(target)
    q = np.full((1, 16), 0.5 * float(_scale(target, 16) * 4) ** -0.5)
    params = target.draw_params(generator(0, "params"), 16, 1)
    got, bound = check_kernel_identity(target, q, -q, params, "numpy")
    assert abs(got[0, 0] - 0.5) <= bound[0, 0]


# -------------------------------------------------------------------------------- remainder
def _remainder_checks(t: mpmath.mpf) -> None:
    t2 = 1 + t + t * t / 2
    diff = mpmath.exp(t) - t2
    limit = abs(t) ** 3 / 6 * max(mpmath.mpf(1), mpmath.exp(t))
    assert abs(diff) <= limit * (1 + mpmath.mpf(10) ** -30), f"t = {t}: |eᵗ − T₂| > bound"
    assert (diff >= 0) == (t >= 0), f"t = {t}: sign rule eᵗ ≥ T₂ ⇔ t ≥ 0 fails"
    assert t2 >= mpmath.mpf(1) / 2


def _digits_for(t: float) -> int:
    """Enough digits to resolve ``eᵗ − T₂(t) ≈ t³/6`` next to 1: 50 + 3·log₁₀(1/|t|)."""
    return 50 + (3 * int(-np.log10(abs(t))) if 0 < abs(t) < 1 else 0)


@settings(max_examples=max(10, settings.default.max_examples))
@given(t=st.floats(-40.0, 40.0, allow_nan=False))
def test_taylor_remainder_bound_and_sign_rule(t):
    with working_precision(_digits_for(t)):
        _remainder_checks(mpmath.mpf(t))


def test_taylor_remainder_on_grid():
    grid = [-1e3, -20, -3, -1, -0.5, -1e-8, -1e-300, 0.0, 5e-324, 1e-8, 0.5, 1, 3, 20, 200]
    for t in grid:
        with working_precision(_digits_for(t)):
            _remainder_checks(mpmath.mpf(t))
    # The suite's reference kernel (not a hand-written T₂) has its minimum ½ at t = −1
    # (q = 1, k = −1, d = 1), and is above it on either side.
    one = np.ones((1, 1))
    for t, above in ((-1.0, False), (-0.9, True), (-1.1, True)):
        with working_precision(50):
            got = gram_mp("taylor", t * one, one, dps=50, order=2)[0, 0]
        if above:
            assert got > mpmath.mpf(1) / 2, f"reference T₂({t}) = {got} is not above ½"
        else:
            assert abs(got - mpmath.mpf(1) / 2) < mpmath.mpf(10) ** -45, (
                f"reference T₂(−1) = {got}, expected ½")
