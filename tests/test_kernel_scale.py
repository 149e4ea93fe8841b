"""The input scale of a declared kernel (properties/kernel_scale.py), the kernel-scale mutants and
twins, and the black-box point of the gradient unbiasedness test (issue #44, items 3 and 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernel_verify.impls.registry import all_maps, get
from kernel_verify.properties.kernel_scale import (
    MAX_CONDITION,
    kernel_frames,
    kernel_scales,
    scale_for,
    to_kernel_scale,
)


def test_unit_scale_maps_keep_unit_scale():
    """Every built-in map whose kernel has no length draws at scale exactly 1.0 (its points are
    the same floats as before); the RFF maps declare σ = 1; only the spectral mixture (GMM-RKS)
    has component lengths."""
    for m in all_maps():
        for d in (2, 3, 5):
            scales = kernel_scales(m, d)
            if m.formula == "gmm_rks":
                L = m.kernel_args(d)["L"]
                want = sorted({math.sqrt(d) / float(np.linalg.norm(f)) for f in L})
                assert list(scales) == pytest.approx(want, rel=0, abs=0), m.name
            else:
                assert scales == (1.0,), (m.name, d, scales)


def test_declared_sigma_is_the_scale():
    for sigma in (0.05, 0.2, 5.0, 20.0):
        t = get("rff_pairs[iid]").with_config(sigma=sigma)
        assert kernel_scales(t, 3) == (sigma,)
        assert scale_for(t, 3, 12345) == sigma


def test_softmax_mixture_is_not_stationary():
    """GMM-PRF's kernel has factors L but is a softmax-type kernel of x + y: unit scale."""
    assert kernel_scales(get("gmm_prf"), 3) == (1.0,)


def test_scale_for_cycles_through_components():
    t = get("gmm_rks")
    scales = kernel_scales(t, 3)
    assert len(scales) == 2
    assert [scale_for(t, 3, i) for i in range(4)] == [*scales, *scales]


def test_bad_dimension_is_named():
    with pytest.raises(ValueError, match="d must be a positive integer"):
        kernel_scales(get("rff_pairs[iid]"), 0)


def test_scale_mutants_and_twins_are_registered():
    from kernel_verify.mutants.catalogue import get_mutant
    from kernel_verify.mutants.controls import CONTROLS
    from kernel_verify.mutants.kernel_scale import SCALE_MUTANTS, SCALE_TWINS

    for name in SCALE_MUTANTS:
        m = get_mutant(name)
        (t,) = m.targets
        assert not t.white_box and t.kernel in ("gaussian", "spectral_mixture")
        assert m.expected_killers, name
    names = {c.name for c in CONTROLS}
    for twin, sigma, family in SCALE_TWINS:
        assert f"control_{twin}" in names
        (t,) = next(c for c in CONTROLS if c.name == f"control_{twin}").targets
        assert t.kernel_args(3) == {"sigma": sigma}
        assert (t.formula is not None) == family


def test_scale_mutant_means_differ_at_the_scaled_points():
    """The σ² defect is a different Gaussian kernel: at the σ-scaled points its mean (the
    kernel at σ²) is far from the declared one, at the unit points (σ = 0.05) both are ≈ 0."""
    from kernel_verify.verify.references.kernels import kernel_mp

    sigma = 0.05
    x, y = np.array([0.5, 0.0]), np.array([0.0, 0.3])
    unit = [float(kernel_mp("gaussian", x, y, sigma=s)) for s in (sigma, sigma**2)]
    scaled = [float(kernel_mp("gaussian", sigma * x, sigma * y, sigma=s))
              for s in (sigma, sigma**2)]
    assert max(unit) < 1e-20
    assert scaled[0] - scaled[1] > 0.5


def test_blackbox_gradient_point():
    """A black-box map's example of the gradient test sits at ‖y‖ = 2, ‖x + y‖ = 0.3; a
    white-box map's keeps ‖x‖ = 0.8, ‖y‖ = 0.5."""
    from kernel_verify.mutants.gradients import _positive_targets
    from kernel_verify.properties.gradient_checks import (
        BLACKBOX_S,
        BLACKBOX_Y,
        unbiased_gradient_trial,
    )

    white, black = _positive_targets("t", "right")
    tb = unbiased_gradient_trial(black, 3, 2)
    assert np.linalg.norm(tb.y) == pytest.approx(BLACKBOX_Y, rel=1e-14)
    assert np.linalg.norm(tb.x + tb.y) == pytest.approx(BLACKBOX_S, rel=1e-12)
    tw = unbiased_gradient_trial(white, 3, 2)
    assert np.linalg.norm(tw.x) == pytest.approx(0.8, rel=1e-14)
    assert np.linalg.norm(tw.y) == pytest.approx(0.5, rel=1e-14)


class _Declared:
    """Anything with ``kernel`` and ``kernel_args(d)`` has a scale."""

    def __init__(self, kernel: str, args) -> None:
        self.kernel, self._args = kernel, args

    def kernel_args(self, d: int) -> dict:
        return self._args(d)


def test_an_anisotropic_component_is_seen_at_unit_scale_along_every_axis():
    """Points mapped by L_c⁻¹: ‖L_c(x − y)‖ = ‖x_u − y_u‖ for every pair, so an ARD component with
    lengths 0.1 and 10 varies along the long axes too (one length, √d/‖L₀‖_F ≈ 0.14 at d = 3,
    sees them at 1.4 % of 10)."""
    from kernel_verify.mutants.kernel_scale import ard_factors

    t = _Declared("spectral_mixture", ard_factors)
    rng = np.random.default_rng(0)
    xu, yu = rng.standard_normal((2, 5, 3))
    L = ard_factors(3)["L"]
    for c in (0, 1):
        x, y = to_kernel_scale(t, 3, c, xu), to_kernel_scale(t, 3, c, yu)
        got = np.linalg.norm((x - y) @ L[c].T, axis=-1)
        np.testing.assert_allclose(got, np.linalg.norm(xu - yu, axis=-1), rtol=1e-14)
    assert np.ptp(np.abs(to_kernel_scale(t, 3, 0, np.eye(3))).sum(0)) > 9  # 0.1 against 10
    assert kernel_scales(t, 3)[0] == pytest.approx(math.sqrt(3) / np.linalg.norm(L[0]))


def test_a_length_or_no_length_multiplies_the_points_exactly():
    x = np.random.default_rng(1).standard_normal((4, 3))
    t = get("rff_pairs[iid]").with_config(sigma=0.2)
    assert np.array_equal(to_kernel_scale(t, 3, 7, x), x * 0.2)
    assert np.array_equal(to_kernel_scale(get("softmax_positive[iid]"), 3, 7, x), x)


def test_an_ill_conditioned_factor_falls_back_to_its_single_length():
    def args(d):
        return {"pi": np.array([1.0]), "mu": np.zeros((1, d)),
                "L": np.array([np.diag([1.0] + [1.0 / (10 * MAX_CONDITION)] * (d - 1))])}

    t = _Declared("spectral_mixture", args)
    (frame,) = kernel_frames(t, 3)
    assert isinstance(frame, float) and frame == kernel_scales(t, 3)[0]


def test_curvature_length_is_the_rms_frequency_length():
    """``ℓ_κ = √d/ω_rms``: σ for a Gaussian of bandwidth σ; for a spectral-mixture component
    ``exp(−‖δ‖²/(2ℓ²))·cos(μᵀδ)``, ``√(d/(‖μ‖² + d/ℓ²))`` — far below ℓ when ``|μ| ≫ 1/ℓ`` (the
    float64 fourth-difference test stepped by ℓ = 10 saw a correct map's own oscillation at
    |μ| ≈ 9.3 as float32 noise); None for a kernel that is not stationary."""
    from kernel_verify.properties.kernel_scale import curvature_length

    for sigma in (0.2, 5.0):
        t = get("rff_pairs[iid]").with_config(sigma=sigma)
        assert curvature_length(t, 3) == pytest.approx(sigma, rel=1e-9)
    mu, ell = np.array([6.0, 3.0, -4.0]), 10.0

    def args(d):
        return {"pi": np.array([1.0]), "mu": mu[None, :d], "L": (np.eye(d) / ell)[None]}

    t = _Declared("spectral_mixture", args)
    want = math.sqrt(3 / (float(mu @ mu) + 3 / ell**2))
    assert curvature_length(t, 3) == pytest.approx(want, rel=1e-9)
    assert curvature_length(t, 3) < 0.05 * scale_for(t, 3, 0)
    assert curvature_length(get("softmax_positive[iid]"), 3) is None
