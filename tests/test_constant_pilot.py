"""The assumption-based black-box mean test at a constant estimator
(``properties/checks/blackbox.rounding_variance``): the variance is at least the one derived
from the rounding a correct map may show (features within ``FEATURE_REL_ERROR`` relative, a
float64 dot product, the claimed mean rounded once), so an exact constant estimator passes at
any level — it was rejected before: ``np.var`` of 200 equal values gave ~1e-34, a threshold of
1e-17 against an estimate one ulp from the rounded kernel — and one offset beyond that rounding
fails."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.properties.checks.blackbox import (
    DRAWS,
    FEATURE_REL_ERROR,
    estimates_and_products,
    pilot_mean_test,
    rounding_variance,
)
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.verify.stats import known_variance_threshold

X, Y = np.array([0.3, -0.4, 0.5]), np.array([0.25, 0.1, -0.2])


def _linear(scale: float = 1.0) -> FeatureMapTarget:
    """φ(x) = scale·x for every seed: a constant estimator of scale²·xᵀy."""
    return FeatureMapTarget(name="constant_linear", kernel="linear",
                            claims=frozenset({"unbiased"}), m=3,
                            sample_fn=lambda x, seed: scale * np.asarray(x, dtype=np.float64))


@pytest.mark.parametrize("alpha", [1e-3, 1e-9])
def test_exact_constant_estimator_passes(alpha):
    pilot_mean_test(_linear(), X, Y, 5, float(X @ Y), alpha).check()


def test_offset_beyond_the_rounding_bound_fails():
    mean = float(X @ Y)
    with pytest.raises(AssertionError):
        pilot_mean_test(_linear(), X, Y, 5, mean + 1e-9, 1e-9).check()


def test_threshold_is_the_rounding_bound_and_scales_with_the_products():
    alpha = 1e-6
    _, absprod = estimates_and_products(_linear(), X, Y, 5, DRAWS)
    var = rounding_variance(float(absprod.max()), float(X @ Y), (alpha,))
    t = known_variance_threshold(DRAWS, alpha, var)[0]
    r = float(np.abs(X * Y).sum())
    assert 2 * FEATURE_REL_ERROR * r <= t <= 3 * FEATURE_REL_ERROR * r
    _, big = estimates_and_products(_linear(1e4), X, Y, 5, DRAWS)  # k scaled by 1e8
    assert big.max() == pytest.approx(absprod.max() * 1e8, rel=1e-9)
