"""Issue 10: correct adapters never fail; black-box checks catch the defects they are for.

* the natural white-box adapters of ``tests/whitebox_adapters.py`` (float64 features for float32
  input; softmax-family maps with and without ``attention_prescale``, with and without log
  functions) pass the attention-vs-estimator reference check on fixed inputs (they failed before:
  dtype mismatch inside the suite, and the twin's pre-scaling applied to the reference only);
* the black-box wrapper hides the draw but keeps kernel, claims and m;
* the float64-accuracy statistic separates float32-evaluated maps from correct ones, and the
  deterministic identity rejects broken Taylor maps seen black-box.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.impls.registry import get, is_registered
from kernel_verify.mutants.blackbox import CONTROLS, as_black_box, control_targets
from kernel_verify.mutants.catalogue import load
from kernel_verify.properties.checks.blackbox import NOISE_LEVEL, fourth_difference_noise
from kernel_verify.properties.checks.reference import check_attention
from kernel_verify.verify.backends import get_backend
from tests import whitebox_adapters as adapters

USER = adapters.targets + adapters.variants


@pytest.mark.parametrize("target", USER, ids=lambda t: t.name)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("causal", [False, True])
def test_correct_user_adapters_pass_the_attention_reference(target, dtype, causal):
    d = 16 if target.attention_prescale else 3
    rng = np.random.default_rng(5)
    q, k = 0.5 * rng.standard_normal((3, d)), 0.5 * rng.standard_normal((3, d))
    if not target.has("positive"):
        q, k = np.abs(q), np.abs(k)
        k[0] = q[0]
    v = rng.standard_normal((3, 2))
    params = target.draw_params(np.random.default_rng(1), d, 4)
    check_attention(target, q, k, v, params, get_backend(f"numpy-{dtype}"), causal,
                    hypothesis=False)


def test_float32_features_for_float32_input_are_widened_not_refused():
    target = adapters.targets[0]
    x = np.ones((2, 3), dtype=np.float32)
    out = target.numpy_fn(x, target.draw_params(np.random.default_rng(0), 3, 4), {})
    assert out.dtype == np.float64  # the natural adapter really returns a wider dtype


def test_black_box_wrapper_hides_the_draw_and_keeps_the_claims():
    white = get("softmax_positive[orthogonal]")
    black = as_black_box(white)
    assert not black.white_box and not is_registered(black) and black.draw is None
    assert black.kernel == white.kernel and black.m == white.m
    assert black.formula == "softmax_positive" and black.matrix == "orthogonal"
    assert "log_features" not in black.claims and "orthogonal" in black.claims
    bare = as_black_box(white, family=False)
    assert bare.formula is None and bare.matrix is None and bare.config == {}
    x = np.random.default_rng(0).standard_normal((2, 3))
    params = white.draw_params(np.random.default_rng(9), 3)
    np.testing.assert_array_equal(black.features(x, seed=9), white.features(x, params=params))


@pytest.mark.parametrize("name", CONTROLS)
def test_controls_load_as_black_box(name):
    (t,) = control_targets(name)
    assert not t.white_box and t.name == f"control:{name}@blackbox"


@pytest.mark.parametrize("mutant", ["softmax_positive_float32", "rff_pairs_float32"])
def test_float32_evaluation_is_visible_in_the_fourth_difference(mutant):
    target = as_black_box(load(mutant)[0])
    noise = fourth_difference_noise(target, 3, 4, 0.7)
    assert noise > 30 * NOISE_LEVEL, noise  # float32 rounding noise ≈ 1e-7


@pytest.mark.parametrize("name", ["softmax_positive[orthogonal]", "rff_pairs[orthogonal]",
                                  "taylor2", "relu_features[iid]", "gerf[iid]"])
def test_correct_maps_have_float64_sized_fourth_differences(name):
    (target,) = control_targets(name)
    noise = fourth_difference_noise(target, 3, 4, 0.7)
    assert noise < NOISE_LEVEL / 30, noise


def test_orthogonal_claim_without_declared_matrix_gets_no_iid_moments():
    """A map claiming orthogonal rows but declaring no ``matrix`` must not be held to the iid
    variance (a false alarm on correct ORF code): no exact variance, no fourth moment; its mean
    test falls back to the V₁ bound of its Gaussian rows."""
    from dataclasses import replace

    import numpy as np

    from kernel_verify.impls.registry import get
    from kernel_verify.properties.checks.estimates import (
        exact_fourth_moment,
        exact_variance,
        mean_test_variance,
    )

    declared = get("softmax_positive[orthogonal]")
    undeclared = replace(declared, matrix=None)
    x, y = np.array([0.3, 0.1, -0.2]), np.array([0.1, 0.2, 0.3])
    assert exact_variance(declared, x, y, 3) is not None
    assert exact_variance(undeclared, x, y, 3) is None
    assert exact_fourth_moment(undeclared, x, y, 3) is None
    bound, how = mean_test_variance(undeclared, x, y, 3)
    assert "V₁" in how and bound >= exact_variance(declared, x, y, 3)
