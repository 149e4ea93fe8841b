"""Claims of feature maps checked through outputs only (``target.features(x, seed=…)``): what a
black-box target (``sample_fn(x, seed)``) can have tested, whether or not it declares its
estimator family. White-box targets run the same checks through a draw from the seed.

Each check and its false-alarm basis:

* **reproducible draw** (every map): two calls with one seed give the same features (exact
  equality up to ``2·64·u₆₄`` relative, to allow a reordered reduction). No statistics.
* **deterministic maps** (claim ``deterministic``, black-box; white-box ones run the twin-bound
  test of ``test_taylor``): two *different* seeds give the same features (same tolerance), and
  ``φ(X)φ(Y)ᵀ`` equals the mpmath Gram matrix of the claimed kernel within
  ``Σ(|φ|e_ψ + e_φ|ψ| + e_φe_ψ) + γ_D·Σ(|φ| + e_φ)(|ψ| + e_ψ) + u₆₄|ref|``. The feature bounds
  ``e`` are *derived* from the declared ``formula``'s forward error analysis
  (:func:`kernel_verify.verify.references.features.feature_error_bound`, as for white-box maps) when
  the formula has a twin without random parameters; otherwise the bound rests on the stated
  assumption that every returned feature has relative error ≤ 64 ulps of float64
  (``e = 64·u₆₄·|φ|``; its false-alarm rate on the registry's correct deterministic maps is
  measured by ``kernel-verify calibrate``). Any model defect (a missing ``/2``, a missing
  term) or float32 evaluation is many orders above either bound.
* **positivity** (claims ``positive`` / ``nonnegative``): every returned feature is ``> 0`` /
  ``≥ 0`` at random inputs of norm up to 3. A violation is a counterexample: no false alarm.
* **float64 output** (every map): float64 input gives a float64 (or wider) result — the adapter
  dtype rule (``properties/protocol.py``) lets wider results through; a narrower one is a
  silent precision loss. Weak on its own (a map may compute in float32 and cast back), hence:
* **float64 accuracy** (every non-positional map; :mod:`kernel_verify.properties.checks.blackbox`):
along a
  random direction ``e`` the fourth finite difference
  ``Δ⁴F = F(x+2he) − 4F(x+he) + 6F(x) − 4F(x−he) + F(x−2he)``, ``h = 2⁻¹²``, is
  ``h⁴·∂⁴φ + O(h⁶)`` plus at most ``16·ε·max|F|`` of rounding. The test rejects when the
  *median* over features and points of ``|Δ⁴F|/max|F|`` exceeds ``1e-10``: a map evaluated in
  float32 has rounding noise ``≈ 1e-7`` there; a correct float64 map ``≲ 1e-12``. Assumption
  (stated in the verdict): the median feature is smooth at scale ``h`` (``|∂⁴φ| ≤ 2.8e4·|φ|``
  along unit directions at ``‖x‖ ≤ 1``, in units of the kernel's length ℓ: points and step
  are scaled by ℓ, :mod:`kernel_verify.properties.kernel_scale`; kinks of ReLU-type maps touch
  few features, hence the median) and correct maps return features with relative error
  ≤ ``1e-12``. Measured false-alarm rate: ``kernel-verify calibrate``.
* **unbiasedness without a declared family** (claim ``unbiased``, no exact variance and no
  proven range — with a family, ``test_feature_unbiased`` runs the derived-bound test instead):
  the known-variance mean test (Catoni's M-estimator at 500 draws) at the run's α with the
  variance ``V = 4·s²`` estimated from an independent
  pilot of 200 draws. Assumption (stated in the verdict): the estimator's variance is at most
  four times a 200-draw pilot variance; measured false-alarm rate: ``kernel-verify calibrate``.
  Declaring ``formula``/``matrix`` replaces it by the exact-variance test (the skip reason says
  so).

* **per-draw identities of a declared family** (``formula`` declared; no statistics): ``[cos, sin]``
  pair maps (rff_pairs, fastfood, gmm_rks, generative) have ``‖φ(x)‖² = 1`` and
  ``φ(x + c)ᵀφ(y + c) = φ(x)ᵀφ(y)`` for every draw (stationarity of the Gaussian-type kernel,
  per draw); trigonometric softmax features have the same for ``e^(−‖x‖²/2)φ(x)`` (the norm factor
  of softmax features: ``‖φ(x)‖² = e^(‖x‖²)``); exponential softmax features (positive,
  hyperbolic, GERF) have ``g(x) = log φ(x) + ‖x‖²/2`` affine in x
  (``g(x) + g(y) − g(x+y) − g(0) = 0``); relu features are positively homogeneous,
  ``φ(a·x) = a·φ(x)``. Level ``1e-9`` relative — an assumption (a correct
  float64 map meets them to ~1e-13, see :mod:`kernel_verify.properties.checks.blackbox`); a wrong
  norm factor, a per-row stabiliser, an added ε, a broken pair or float32 evaluation is far above
  it. No statistics, so no false-alarm rate beyond the assumption; the registry's correct maps
  (white- and black-box) all pass it in every run.
* **distinct features** (claim ``gaussian_rows``, with or without a family): no two non-constant
  features coincide at 8 random inputs — rows with a continuous law never repeat, so repeated
  columns mean fewer random rows than m (duplicated rows, antithetic ``±w`` inside ``cos``). Exact,
  no false alarm for a continuous row law.
* **the frequency rows' law** (claim ``unbiased`` or ``gaussian_rows``; declared
  ``matrix='iid'``/``'orthogonal'`` and a formula among ``softmax_positive``,
  ``softmax_hyperbolic``, ``rff_pairs``, ``softmax_trig``): the rows of 1000 independent draws —
  a white-box draw's ``W``; a black-box map's read off its outputs at ``0, h·e₁, …, h·e_d``
  (:mod:`kernel_verify.properties.checks.frequencies`) — whitened by the kernel's σ, are
  ``N(0, I_d)`` at every row position (the row-law checks of the random-matrix properties) and
  their squared norms, pooled, are i.i.d. ``χ²_d`` (exact χ² sum; DKW–Massart). Derived
  false-alarm rates at the run's α. Power: a frequency scale of 1.05 moves the χ² sum by 13
  standard deviations at d = 2, m = 16; fixed-norm rows are ≥ 0.26 from ``χ²_d`` in law —
  defects that hide in the mean tests' Monte Carlo noise (an unbounded exponential estimator's
  variance grows as ``e^(2‖x+y‖²)``).
* **orthogonal rows** (claims ``orthogonal`` + ``bounded``, declared ``matrix='orthogonal'``):
  one-sided variance test ``Var ≤ exact ORF variance`` (Bernstein on ``(X − μ)² ∈ [0, R]``,
  derived, run's α) at d = 8, ‖x − y‖ = 1.5, m = 64, 20000 draws. Power: the iid variance of
  RFF pairs there is 0.00625 against the ORF variance 0.00215, the threshold at α = 1e-5 is
  0.00245 above it (``verify.stats.bernstein_threshold``): an iid map is rejected; a variance
  excess ≥ 1.2× the ORF variance is detected, in every profile.

**Inputs at the kernel's scale**: the statistical checks here draw their points at unit scale
times the length of the declared kernel (:mod:`kernel_verify.properties.kernel_scale`: a declared
``sigma``/lengthscale, a spectral mixture's component lengths, else 1), so the kernel varies over
them; the false-alarm rates are derived for any fixed inputs and do not change.

Power (smallest relative bias detected at the sample sizes here, for the assumption-based mean
test): Catoni's threshold is ``t = c(n, α)·2s`` with ``c(500, 1e-5) = √(2L/(n − 2L)) ≈ 0.23``
(``L = log(2/α)``; the median of means' was 0.59), so a bias of ``0.45·s`` is detected, in every
profile (the sample size does not depend on the
profile; the profile sets how many points are tried).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from kernel_verify.impls.registry import all_maps
from kernel_verify.properties.alpha import per_assertion
from kernel_verify.properties.checks.blackbox import (
    IDENTITY_LEVEL,
    MEAN_TEST_NORMS,
    NOISE_LEVEL,
    family_identity_failures,
    fourth_difference_noise,
    has_family_identities,
    pilot_mean_test,
)
from kernel_verify.properties.checks.estimates import (
    exact_variance,
    feature_m,
    mean_test_variance,
    random_pair,
    range_bound,
)
from kernel_verify.properties.checks.frequencies import DRAWS as ROW_DRAWS
from kernel_verify.properties.checks.frequencies import (
    FAMILY_KERNEL,
    N_POOLED_CHECKS,
    NotReadable,
    kernel_length,
    pooled_norm_checks,
    readable,
    rows_keep_positions,
    whitened_rows,
)
from kernel_verify.properties.checks.reference import has_twin, inner_bound
from kernel_verify.properties.checks.row_law import N_ROW_CHECKS, orthonormal_pair, row_law_checks
from kernel_verify.properties.formulas import records
from kernel_verify.properties.kernel_scale import curvature_length, scale_for, to_kernel_scale
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.properties.strategies import (
    fixed_input,
    generator,
    generic_rotation,
    points,
    unit_vectors,
)
from kernel_verify.properties.targets import feature_maps
from kernel_verify.verify.compare import assert_close
from kernel_verify.verify.references.features import feature_error_bound
from kernel_verify.verify.references.kernels import gram_mp, kernel_formula
from kernel_verify.verify.references.mp import to_float
from kernel_verify.verify.seeds import child_seeds
from kernel_verify.verify.tolerance import U64, reference_rounding

#: Assumed relative error of each returned feature of a correct float64 map (module docstring).
FEATURE_ULPS = 64
FEW = max(3, settings.default.max_examples // 5)

seeds = st.integers(0, 2**32 - 1)


def _not_positional(t: FeatureMapTarget) -> bool:
    return not t.has("positional")


def _seen_as(target: FeatureMapTarget) -> str:
    return "white-box, no mpmath twin" if target.white_box else "black-box"


def features(target: FeatureMapTarget, x: np.ndarray, seed: int) -> np.ndarray:
    """The target's features of ``x`` for the draw of ``seed`` (black- or white-box)."""
    return target.features(np.asarray(x, dtype=np.float64), seed=seed)


def raw_features(target: FeatureMapTarget, x: np.ndarray, seed: int) -> np.ndarray:
    """What the target returns, before the suite's float64 view (the dtype it chose)."""
    if target.white_box:
        params = target.draw_params(generator(seed), x.shape[-1])  # the protocol's draw
        kw = {"positions": np.arange(x.shape[-2])} if target.has("positional") else {}
        if target.numpy_fn is None:  # a torch-only map: its own torch function, float64 in
            import torch

            from kernel_verify.impls.torch.convert import to_torch

            if kw:
                kw = {"positions": torch.as_tensor(kw["positions"])}
            out = target.torch_fn(torch.as_tensor(np.asarray(x, dtype=np.float64)),
                                  to_torch(params), target.config, **kw)
            return out.detach().cpu().numpy()  # the dtype the target chose
        return np.asarray(target.numpy_fn(np.asarray(x, dtype=np.float64), params,
                                          target.config, **kw))
    out = target.sample(np.asarray(x, dtype=np.float64), seed)
    if hasattr(out, "detach"):  # a torch tensor from a torch adapter
        out = out.detach().cpu().numpy()
    return np.asarray(out)


ALL = feature_maps(predicate=_not_positional)


# ---------------------------------------------------------------------------- reproducibility
@pytest.mark.parametrize("target", ALL)
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(1, 5), data=st.data())
def test_same_seed_gives_the_same_draw(target, seed, d, data):
    """The protocol: the same seed means the same parameter draw."""
    x = data.draw(points((3, d)), label="x")
    a, b = features(target, x, seed), features(target, x, seed)
    bad = ~(np.isfinite(a) & np.isfinite(b))
    if bad.any():  # named as what it is: NaN ≠ NaN would read as two different draws
        i = tuple(int(j) for j in np.argwhere(bad)[0])
        raise AssertionError(
            f"{target.name}: features of ordinary inputs are not finite: {int(bad.sum())} of "
            f"{a.size} (first at index {i}: {float(a[i])!r}) for x = {x.tolist()} (d = {d}, "
            f"seed {seed})")
    tol = 2 * FEATURE_ULPS * U64 * np.maximum(np.abs(a), np.abs(b))
    bad = ~(np.abs(a - b) <= tol)
    assert not bad.any(), (
        f"{target.name}: two calls with seed {seed} differ in {int(bad.sum())} of {a.size} "
        f"features (max |Δ| = {np.nanmax(np.abs(a - b)):.3g}): the draw is not a function of "
        "the seed (hidden global RNG state?)")


@pytest.mark.parametrize("target", ALL)
def test_float64_input_gives_float64_output(target):
    """A float64 input must not come back narrower (dtype rule of the adapter protocol)."""
    x = fixed_input("test_float64_input_gives_float64_output", (3, 3))
    out = raw_features(target, x, 0)
    assert np.issubdtype(out.dtype, np.floating) and np.finfo(out.dtype).bits >= 64, (
        f"{target.name}: float64 input gave {out.dtype} features (the protocol allows a wider "
        "result, never a narrower one)")


# ---------------------------------------------------------------------------- positivity
@pytest.mark.parametrize("target", feature_maps("positive", predicate=_not_positional)
                         + feature_maps("nonnegative", predicate=_not_positional))
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(1, 5), scale=st.sampled_from([0.1, 1.0, 3.0]),
       data=st.data())
def test_claimed_sign_of_features(target, seed, d, scale, data):
    """claim positive: every feature > 0; nonnegative: ≥ 0 (a violation is a counterexample)."""
    x = to_kernel_scale(target, d, seed, data.draw(points((6, d), scale), label="x"))
    f = features(target, x, seed)
    strict = target.has("positive")
    bad = ~(f > 0) if strict else ~(f >= 0)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise AssertionError(
            f"{target.name} claims {'positive' if strict else 'nonnegative'} features, but "
            f"feature {j} of x = {x[i].tolist()} is {f[i, j]!r} (seed {seed}; "
            f"{int(bad.sum())} of {f.size} features violate it)")


# ------------------------------------------------------------------------ deterministic maps
#: deterministic maps seen through their features: black-box ones, and white-box ones whose
#: formula has no mpmath twin (taylor::test_exact_map_equals_kernel skips those, so without
#: this their declared kernel would never be compared with what they compute)
DETERMINISTIC_BLACK = feature_maps(
    "deterministic",
    predicate=lambda t: _not_positional(t) and (not t.white_box or not has_twin(t)))


def _formula_has_params(formula: str, d: int, m: int) -> bool:
    """Whether the built-in maps of ``formula`` draw random parameters (a black-box map hides
    them, so the twin's bound cannot be evaluated)."""
    return any(e.draw(generator(0, "params"), d, max(m, e.min_m), e.config)
               for e in all_maps() if e.formula == formula)


def derived_feature_bounds(target: FeatureMapTarget, X: np.ndarray, F: np.ndarray):
    """``(e, how)``: per-feature error bounds of a correct implementation (module docstring)."""
    if has_twin(target) and not _formula_has_params(target.formula, X.shape[-1], target.m):
        # no parameters: the twin's bound applies to any correct implementation
        try:
            e = feature_error_bound(target, X, {}, None, U64, 1.0)
        except KeyError:
            e = None
        if e is not None and e.shape == F.shape:
            return e, f"derived: forward error bound of formula {target.formula!r}"
    e = FEATURE_ULPS * U64 * np.abs(F)
    how = (f"ASSUMPTION: each returned feature has relative error ≤ {FEATURE_ULPS} ulps "
           "(no formula declared, or its twin has parameters; declare formula= for a derived "
           "bound)")
    return e, how


@pytest.mark.parametrize("target", DETERMINISTIC_BLACK)
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(1, 4), scale=st.sampled_from([1e-3, 0.3, 1.0, 2.5]),
       data=st.data())
def test_deterministic_black_box_map_equals_kernel(target, seed, d, scale, data):
    """φ(x)ᵀφ(y) = k(x, y) for a deterministic map seen through its features (any seed): a
    black-box map's ``sample_fn``, or a white-box map whose formula has no mpmath twin (no
    derived bound for ``taylor::test_exact_map_equals_kernel``); and two seeds give the same
    features."""
    # at the declared kernel's scale (kernel_scale)
    X = to_kernel_scale(target, d, seed, data.draw(points((3, d), scale), label="X"))
    Y = to_kernel_scale(target, d, seed, data.draw(points((3, d), scale), label="Y"))
    F = features(target, np.concatenate([X, Y]), seed)
    G = features(target, np.concatenate([X, Y]), seed + 1)
    tol = 2 * FEATURE_ULPS * U64 * np.maximum(np.abs(F), np.abs(G))
    bad = ~(np.abs(F - G) <= tol)
    assert not bad.any(), (
        f"{target.name} claims deterministic, but seeds {seed} and {seed + 1} give different "
        f"features ({int(bad.sum())} of {F.size}, max |Δ| = {np.nanmax(np.abs(F - G)):.3g})")
    e, how = derived_feature_bounds(target, np.concatenate([X, Y]), F)
    fx, fy, ex, ey = F[:3], F[3:], e[:3], e[3:]
    ref = gram_mp(target.kernel, X, Y, **target.kernel_args(d))
    bound = inner_bound(np.abs(fx) + ex, ex, np.abs(fy) + ey, ey, U64)
    bound = bound + reference_rounding(to_float(ref))
    assert_close(fx @ fy.T, ref, bound, inputs={"X": X, "Y": Y},
                 label=f"{target.name} ({_seen_as(target)}): φ(x)ᵀφ(y) = {target.kernel}(x, y) "
                       f"[{kernel_formula(target.kernel, **target.kernel_args(d))}]",
                 how=f"{how}; propagated through the inner product + γ_D + u₆₄|ref|",
                 repro=f"seed={seed}, X={X.tolist()}, Y={Y.tolist()}")


# ------------------------------------------------------------------------- float64 accuracy
@pytest.mark.parametrize("target", ALL)
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(2, 5), norm=st.sampled_from([0.3, 0.7, 1.0]))
def test_float64_input_is_computed_in_float64(target, seed, d, norm):
    """Features of float64 input carry float64 accuracy: the fourth finite difference along a
    random direction shows no float32-sized rounding noise (module docstring). The step is
    ``2⁻¹²`` of the shorter of the kernel's length and its curvature length ``√d/ω_rms``
    (``kernel_scale.curvature_length``): a spectral-mixture component with a mean frequency far
    from 0 oscillates much faster than it decays."""
    length = scale_for(target, d, seed)  # the declared kernel's length (kernel_scale)
    # the step follows the features' own oscillation where it is faster than the decay
    curv = curvature_length(target, d)
    step = length if curv is None else min(length, curv)
    noise = fourth_difference_noise(target, seed, d, norm, length=length, step_length=step)
    assert noise <= NOISE_LEVEL, (
        f"{target.name}: median |Δ⁴φ|/max|φ| = {noise:.3g} > {NOISE_LEVEL:g} along a random "
        f"direction at ‖x‖ = {norm}·ℓ, step h = 2⁻¹²·{step:.3g} "
        f"(ℓ = {length:g}, the kernel's length; seed {seed}, d {d}): rounding noise of "
        f"about {noise / 8:.1g} relative per feature, float32-sized (float64 ≈ 1e-16) — the map "
        "does not compute float64 input in float64. ASSUMPTION behind the level: the median "
        "feature is smooth at scale h (|∂⁴φ| ≤ 2.8e4·|φ|); measured false-alarm rate on correct "
        "maps: kernel-verify calibrate")


# ---------------------------------------------------- unbiasedness without a declared family
def undeclared(t: FeatureMapTarget) -> bool:
    """No exact variance and no proven range: the assumption-based mean test applies."""
    if not _not_positional(t) or t.white_box:
        return False
    d, m = 3, feature_m(t, 3)
    x, y = random_pair(0, d, 0.5, 0.5)
    return range_bound(t, d, m) is None and mean_test_variance(t, x, y, m) is None


@pytest.mark.statistical(assertions=1)
@pytest.mark.parametrize("target", feature_maps(
    "unbiased", predicate=undeclared,
    none_reason=("every unbiased target is white-box or declares its estimator family (exact "
                 "variance or proven range): feature_unbiased runs the derived-bound tests")))
@settings(max_examples=FEW)
@example(seed=0, d=2, nx=MEAN_TEST_NORMS[-1], ny=MEAN_TEST_NORMS[-1], data=None)
@given(seed=seeds, d=st.integers(2, 5), nx=st.sampled_from(MEAN_TEST_NORMS),
       ny=st.sampled_from(MEAN_TEST_NORMS), data=st.data())
def test_unbiased_without_declared_family(target, seed, d, nx, ny, data):
    """E φ(x)ᵀφ(y) = k(x, y), the known-variance mean test with a pilot-estimated variance
    (assumption).
    The points x, y (directions drawn by Hypothesis and turned by the seed's generic rotation,
    norms nx, ny from ``MEAN_TEST_NORMS``) are inputs; the estimates are the seed's independent
    parameter draws (the Monte Carlo sample). Norms in units of the declared kernel's length ℓ
    (``properties/kernel_scale.py``), so the kernel varies over them. The explicit example puts
    the points opposite at 1.5ℓ on the diagonal (1, …, 1)/√d, unturned (‖x − y‖ = 3ℓ): in the
    kernel's tail a wrong frequency law is off by a sizeable fraction of the per-draw spread, and
    a map that treats coordinates apart (per-coordinate scales, a transposed orthogonal block)
    is right along every axis and most wrong on the diagonal."""
    from kernel_verify.verify.references.kernels import kernel_mp

    rot = generic_rotation(seed, d)  # drawn directions turned off the axes (its docstring)
    if data is None:  # the explicit example: opposite points on the diagonal (docstring)
        ux = np.ones(d) / np.sqrt(d)
        uy = -ux
    else:
        ux = rot @ data.draw(unit_vectors(d), label="x/‖x‖")
        uy = rot @ data.draw(unit_vectors(d), label="y/‖y‖")
    x = to_kernel_scale(target, d, seed, nx * ux)
    y = to_kernel_scale(target, d, seed, ny * uy)
    mean = float(kernel_mp(target.kernel, x, y, **target.kernel_args(d)))
    assume(np.isfinite(mean))
    pilot_mean_test(target, x, y, seed, mean, per_assertion()).check()


# ------------------------------------------------------- per-draw identities of a family
def _with_family_identities(t: FeatureMapTarget) -> bool:
    return _not_positional(t) and has_family_identities(t.formula)


@pytest.mark.parametrize("target", feature_maps(
    predicate=_with_family_identities,
    none_reason=("no target declares one of the formulas "
                 f"{sorted(f for f, r in records().items() if has_family_identities(f))} "
                 "(declare formula= to add the per-draw identities of its family)")))
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(1, 8), shift=st.sampled_from([0.5, 2.0, 5.0]),
       data=st.data())
def test_declared_family_identities_hold_for_every_draw(target, seed, d, shift, data):
    """Per-draw identities of the declared formula (module docstring): pair norm, stationarity,
    the softmax norm factor, log-affine exponential features. x, y (scaled to norms ≤ 1) and the
    shift's direction are drawn by Hypothesis."""
    x = data.draw(points((d,)), label="x")
    y = data.draw(points((d,)), label="y")
    c = data.draw(unit_vectors(d), label="c/‖c‖")
    bad = family_identity_failures(target, seed, d, shift, inputs=(x, y, c))
    assert not bad, (
        f"{target.name} (declared formula {target.formula!r}, seed {seed}, d {d}, "
        f"x={x.tolist()}, y={y.tolist()}, c/‖c‖={c.tolist()}): "
        + "; ".join(bad) + f" [level {IDENTITY_LEVEL:g} relative: ASSUMPTION that a correct "
        "float64 map meets these identities to 1e-9]")


# ------------------------------------------------------- orthogonal claim: variance below iid
#: Draws and the point of the orthogonality check (d = 8, ‖x − y‖ = 1.5: where the ORF gain of
#: the [cos, sin] pairs at m = 64 is largest relative to the test's threshold).
ORTHO_DRAWS, ORTHO_D, ORTHO_DIST = 20000, 8, 1.5


def _ortho_bounded(t: FeatureMapTarget) -> bool:
    """claims 'orthogonal' and declares matrix='orthogonal' (not positional)."""
    return _not_positional(t) and t.has("orthogonal") and t.matrix == "orthogonal"


@pytest.mark.statistical(assertions=1)
@pytest.mark.parametrize("target", feature_maps(
    "unbiased", "bounded", predicate=_ortho_bounded,
    none_reason="no feature map claims 'orthogonal' (with 'unbiased' and 'bounded') and declares "
                "matrix='orthogonal'"))
def test_orthogonal_claim_has_the_orthogonal_variance(target):
    """One-sided: Var φ(x)ᵀφ(y) ≤ the exact ORF variance (the null includes every smaller one).
    Bernstein for ``(X − μ)² ∈ [0, R]`` with ``Var ≤ R·σ²_ORF`` at the run's α: a derived bound.
    An "orthogonal" map whose rows are really iid has the iid variance, ``(d−1)|C|/m`` above it
    (reported with the threshold: the power)."""
    from kernel_verify.properties.checks.estimates import estimates
    from kernel_verify.properties.unbiased_checks import kernel_value
    from kernel_verify.verify.stats import variance_test

    m = feature_m(target, 64)
    length = scale_for(target, ORTHO_D, 0)  # the declared kernel's length (kernel_scale)
    x, y = random_pair(11, ORTHO_D, length, length)
    delta = y - x
    y = x + ORTHO_DIST * length * delta / np.linalg.norm(delta)
    var_orf = exact_variance(target, x, y, m)
    bounds = range_bound(target, ORTHO_D, m)
    if var_orf is None or bounds is None:
        hint = ("the suite has none for this formula" if target.formula is not None
                and target.matrix == "orthogonal" else
                "declare formula=, matrix='orthogonal' and config= to add this test")
        pytest.skip(f"{target.name}: no exact ORF variance or range ({hint})")
    from kernel_verify.verify.moments import exact_moments

    var_iid = float(exact_moments(target.formula, x, y, dict(target.config), m,
                                  matrix="iid").variance)
    samples = estimates(target, x, y, m, 4242, ORTHO_DRAWS)
    variance_test(samples, kernel_value(target, target.kernel, x, y), var_orf,
                  alpha=per_assertion(), bounds=bounds, alternative="greater",
                  label=(f"{target.name}: Var φ(x)ᵀφ(y) ≤ exact ORF variance {var_orf:.4g} "
                         f"(iid rows would give {var_iid:.4g}; m={m}, d={ORTHO_D}, "
                         f"‖x−y‖={ORTHO_DIST})"),
                  seed=4242, repro=f"estimates(target, x, y, m={m}, seed=4242, "
                  f"draws={ORTHO_DRAWS})").check()


# -------------------------------------------------- the frequency rows have the declared law
def _rows_readable(t: FeatureMapTarget) -> bool:
    return readable(t) is None and (t.has("unbiased") or t.has("gaussian_rows"))


@pytest.mark.statistical(assertions=N_ROW_CHECKS + N_POOLED_CHECKS)
@pytest.mark.parametrize("target", feature_maps(
    predicate=_rows_readable,
    none_reason=("no unbiased or gaussian_rows map declares matrix 'iid' or 'orthogonal' with "
                 f"one of the formulas {sorted(FAMILY_KERNEL)} (whose rows can be read)")))
@settings(max_examples=FEW)
@given(seed=seeds, d=st.one_of(st.integers(2, 6), st.just(16)))
@example(seed=20261207, d=16)  # a head dimension models use, whatever the draws
def test_frequency_rows_have_the_declared_law(target, seed, d):
    """The rows the map draws — its draw's ``W`` (white-box), or read off its outputs through the
    declared family (black-box, :mod:`kernel_verify.properties.checks.frequencies`) — over
    :data:`ROW_DRAWS` independent seeds, whitened by the kernel's bandwidth, are ``N(0, I_d)``
    at every row position (the nine checks of ``row_law_checks``) and their squared norms,
    pooled, are i.i.d. ``χ²_d`` (exact χ² sum, DKW): what ``matrix='iid'``/``'orthogonal'``
    declares and the family's unbiasedness rests on. A bandwidth a few percent off, or
    orthogonal rows of one fixed norm ``√d`` claimed unbiased, fail here where the mean tests'
    Monte Carlo noise hides them."""
    draws = child_seeds(seed, ROW_DRAWS, "frequency_rows")
    try:
        stack = [whitened_rows(target, s, d) for s in draws]
    except NotReadable as why:
        pytest.skip(f"{target.name} (declared formula {target.formula!r}, seed {seed}, d {d}): "
                    f"its rows cannot be read off its outputs: {why}")
    alpha = per_assertion()
    label = f"{target.name} (matrix {target.matrix!r}, d {d}, {ROW_DRAWS} draws)"
    results = pooled_norm_checks(np.concatenate(stack), d, alpha=alpha, label=label, seed=seed)
    if rows_keep_positions(target) and len({w.shape for w in stack}) == 1:
        z1, z2 = orthonormal_pair(seed, d)
        results += row_law_checks(np.stack(stack), z1, z2, alpha=alpha, seed=seed, name=label)
    failures = [r for r in results if not r.ok]
    assert not failures, (
        f"{target.name}: the frequency rows (σω, σ = {kernel_length(target, d):g}) are not "
        f"N(0, I_{d}) as matrix {target.matrix!r} declares (seed {seed}):\n"
        + "\n".join(r.explain() for r in failures))


# ------------------------------------------------------------ an m that is what it says
def _random_map(t: FeatureMapTarget) -> bool:
    return _not_positional(t) and not t.has("deterministic")


@pytest.mark.parametrize("target", feature_maps("gaussian_rows", predicate=_random_map))
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(2, 5))
def test_random_features_are_distinct(target, seed, d):
    """No two features of a map claiming Gaussian rows coincide at 64 random inputs. Features of
    rows with a continuous law (iid or orthogonal-block Gaussian rows, Fastfood) coincide with
    probability zero — not so for SORF at small d, whose ``HD₃HD₂HD₁`` rows take finitely many
    values, hence the claim; identical columns mean fewer random rows than the map's m (duplicated
    rows, antithetic ``±w`` in an even feature such as ``cos``): unbiased, but with the variance of
    a smaller m. Exact check (level ``1e-12`` relative), no statistics, with or without a
    declared family. A feature constant over the 64 inputs is a failure too (a Gaussian-row
    feature depends on x; the likeliest constant one, a ReLU feature ≡ 0, has probability 2⁻⁶⁴);
    a map with a single feature has nothing to compare and is skipped as such."""
    # generic points (the claim holds almost surely, not at every input: Hypothesis' zeros and
    # equal rows make features coincide legitimately), a sample of the seed's own stream
    X = generator(seed, "generic_inputs").standard_normal((64, d))
    F = features(target, X, seed)
    if F.shape[1] < 2:
        pytest.skip(f"{target.name} returns {F.shape[1]} feature: nothing to compare")
    scale = np.abs(F).max()
    varying = np.ptp(F, axis=0) > 1e-12 * scale
    assert scale > 0 and varying.all(), (
        f"{target.name}: {int((~varying).sum())} of its {F.shape[1]} features are constant over "
        f"64 random inputs (seed {seed}, d {d}; largest |feature| {scale:.3g}): a feature of a "
        "random Gaussian row must depend on x")
    cols = np.round(F.T / (scale * 1e-12))  # equal columns ⇔ equal rows of this integer grid
    _, first, counts = np.unique(cols, axis=0, return_index=True, return_counts=True)
    dup = counts > 1
    if dup.any():
        j = int(first[dup][0])
        same = [int(k) for k in np.flatnonzero((np.abs(F.T - F.T[j]) <= 1e-12 * scale).all(1))]
        raise AssertionError(
            f"{target.name}: {int((counts[dup] - 1).sum())} of its {F.shape[1]} non-constant "
            f"features repeat another one exactly at 8 random inputs (e.g. features {same[:6]} "
            f"are identical; seed {seed}, d {d}): the map has fewer independent random rows "
            "than it says (duplicated rows, or antithetic ±w in an even feature): its variance "
            "is that of a smaller m")
