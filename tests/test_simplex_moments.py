"""Second routes for the simplex covariance (docs/math.md §19; verify/moments/simplex.py).

* series (triple sum over the disk-law moments) = quadrature over the disk law, at the simplex
  cosine −1/(d−1), for every covered formula, d = 2 (antipodal pair), 3, 5;
* at cosine 0 the series is the ORF covariance of verify/moments/orf.py, digit for digit;
* the ordering reverses for even features (RFF pairs, hyperbolic): simplex rows are worse
  than ORF, and than iid at d = 2 (the docs/math.md §19 finding, exact);
* the construction: one block's directions have Gram matrix exactly ``(d·I − 𝟙𝟙ᵀ)/(d−1)``.
Cost: ~1.5 s (the d = 3 quadrature at 18 digits), ci profile.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from kernel_verify.impls.random_matrices import draw_matrix, simplex_directions
from kernel_verify.verify.moments import exact_moments
from kernel_verify.verify.moments.estimators import per_frequency_moments
from kernel_verify.verify.moments.orf import orthogonal_covariance
from kernel_verify.verify.moments.simplex import (
    coupled_covariance,
    coupled_covariance_quadrature,
    simplex_cosine,
)
from kernel_verify.verify.references.mp import to_mp

#: d = 2 is the antipodal pair (the unit circle, fast); one d = 3 case runs the disk quadrature.
CASES = [("softmax_positive", {}, 3), ("softmax_hyperbolic", {}, 2), ("gerf", {"A": -0.1}, 2),
         ("rff_pairs", {"sigma": 1.0}, 2), ("softmax_trig", {}, 2),
         ("rff_phase", {"sigma": 1.3}, 2)]


def _pair(d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return 0.4 * rng.standard_normal(d), 0.4 * rng.standard_normal(d)


@pytest.mark.parametrize(("formula", "config", "d"), CASES)
def test_series_equals_quadrature_at_the_simplex_cosine(formula, config, d):
    x, y = _pair(d, 7 * d)
    with mpmath.workdps(40):
        xm, ym = to_mp(x), to_mp(y)
        mean, _ = per_frequency_moments(formula, xm, ym, config, "closed", 30)
        c = simplex_cosine(d)
        series = coupled_covariance(formula, xm, ym, config, mean, 30, c)
        quad = coupled_covariance_quadrature(formula, xm, ym, config, mean, 18, c)
        assert abs(series - quad) <= mpmath.mpf(10) ** -16 * (abs(series) + mean**2), (
            f"{formula} d={d}: series {series} != quadrature {quad}")


@pytest.mark.parametrize(("formula", "config", "d"), [(f, c, 4) for f, c, _ in CASES])
def test_series_at_cosine_zero_is_the_orf_covariance(formula, config, d):
    x, y = _pair(d, 11)
    with mpmath.workdps(40):
        xm, ym = to_mp(x), to_mp(y)
        mean, _ = per_frequency_moments(formula, xm, ym, config, "closed", 30)
        ours = coupled_covariance(formula, xm, ym, config, mean, 30, 0)
        orf = orthogonal_covariance(formula, xm, ym, config, mean, 30)
        assert abs(ours - orf) <= mpmath.mpf(10) ** -25 * (abs(orf) + mean**2)


@pytest.mark.parametrize("d", [2, 3, 4, 7])
def test_simplex_block_gram_is_exact(d):
    s = simplex_directions(d)
    expected = (d * np.eye(d) - np.ones((d, d))) / (d - 1)
    np.testing.assert_allclose(s @ s.T, expected, atol=8 * d * 2.0**-52)
    np.testing.assert_allclose(s.sum(axis=0), 0.0, atol=8 * d * 2.0**-52)
    w = draw_matrix("simplex", np.random.default_rng(d), 2 * d + 1, d)
    assert w.shape == (2 * d + 1, d)


def test_simplex_needs_two_dimensions():
    with pytest.raises(ValueError, match="d >= 2"):
        simplex_directions(1)
    with pytest.raises(ValueError, match="d >= 2"):
        simplex_cosine(1)


@pytest.mark.parametrize(("formula", "config"), [("rff_pairs", {"sigma": 1.0}),
                                                 ("softmax_hyperbolic", {})])
def test_simplex_rows_are_worse_than_orf_for_even_features(formula, config):
    """The reverse of the positive-feature ordering, exactly (docs/math.md §19 table): at d = 2
    the two simplex rows are antipodal and ``cos``/``cosh`` are even, so their features are
    positively correlated: ``Var_simplex > Var_iid > Var_ORF`` (1.33x and 0.68x iid for RFF pairs
    at ``‖x − y‖ = 1``); at d = 3 simplex still exceeds ORF."""
    for d, z, worse_than_iid in ((2, 1.0, True), (3, 1.0, False)):
        x = np.zeros(d)
        x[0] = z / 2
        y = x.copy() if formula == "softmax_hyperbolic" else -x
        var = {k: exact_moments(formula, x, y, config, d, matrix=k).variance
               for k in ("iid", "orthogonal", "simplex")}
        assert var["simplex"] > var["orthogonal"], (formula, d, var)
        assert (var["simplex"] > var["iid"]) == worse_than_iid, (formula, d, var)
