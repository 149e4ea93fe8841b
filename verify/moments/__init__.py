"""Exact moments of random-feature estimators (no Monte Carlo). See ``estimators.py``."""

from kernel_verify.verify.moments.closed_forms import (
    fixed_norm_mean,
    gerf_per_feature_variance,
    optimal_gerf_a_mp,
)
from kernel_verify.verify.moments.estimators import (
    EXACT_VARIANCE_MATRICES,
    MOMENT_FORMULAS,
    Moments,
    exact_moments,
)
from kernel_verify.verify.moments.fourth import FOURTH_MOMENT_FORMULAS, fourth_central_moment
from kernel_verify.verify.moments.gauss_hermite import QuadratureError
from kernel_verify.verify.moments.orf import orf_variance, orthogonal_covariance

__all__ = [
    "EXACT_VARIANCE_MATRICES",
    "FOURTH_MOMENT_FORMULAS",
    "MOMENT_FORMULAS",
    "Moments",
    "QuadratureError",
    "exact_moments",
    "fixed_norm_mean",
    "fourth_central_moment",
    "gerf_per_feature_variance",
    "optimal_gerf_a_mp",
    "orf_variance",
    "orthogonal_covariance",
]
