"""The exact moments of the PolySketch estimate ``((Sx)ᵀ(Sy))²`` (docs/math.md §18), against a
second route: Gauss–Hermite quadrature over the sketch's Gaussian entries.

``verify/references/biased_means.py::sketch_moments`` derives ``E Z²`` and ``E Z⁴``
(``Z = (Sx)ᵀ(Sy)``, ``S`` with m i.i.d. rows ``N(0, I/m)``) from the cumulants of a product of
two correlated Gaussians. Here ``Z`` is written out as the polynomial it is in the m·d entries
of ``S``: ``Z⁴`` has degree 8 in each entry, so the 5-point (probabilists') Gauss–Hermite rule,
exact to degree 9 per variable, integrates ``Z²`` and ``Z⁴`` exactly up to float64 rounding
(tensor rule over m·d ≤ 4 variables: ≤ 625 nodes). The comparison is at a relative 1e-11:
both sides are sums of ≤ 625·(small) float64 terms, rounding ≲ 1e-13 relative.
Cost: well under a second.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from kernel_verify.verify.references.biased_means import (
    reference_moments,
    reference_not_covered,
    sketch_moments,
)

CASES = [
    (np.array([0.3, -0.5]), np.array([0.1, 0.4]), 1),
    (np.array([0.3, -0.5]), np.array([0.1, 0.4]), 2),
    (np.array([1.2, 0.0]), np.array([0.0, 0.7]), 2),      # x ⟂ y: the mean is all bias
    (np.array([0.8, 0.6]), np.array([1.6, 1.2]), 2),      # collinear
    (np.array([0.2, -0.4, 0.9]), np.array([0.5, 0.3, -0.1]), 1),
    (np.array([0.7]), np.array([-1.1]), 3),
]


def _quadrature(x: np.ndarray, y: np.ndarray, m: int) -> tuple[float, float]:
    """``(E Z², E Z⁴)`` by the tensor Gauss–Hermite rule over the m·d entries of ``S``."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(5)
    weights = weights / weights.sum()                  # probability weights of N(0, 1)
    d = x.shape[0]
    e2 = e4 = 0.0
    for idx in itertools.product(range(5), repeat=m * d):
        g = nodes[list(idx)].reshape(m, d) / np.sqrt(m)
        w = float(np.prod(weights[list(idx)]))
        z = float((g @ x) @ (g @ y))
        e2 += w * z**2
        e4 += w * z**4
    return e2, e4


@pytest.mark.parametrize(("x", "y", "m"), CASES)
def test_sketch_moments_match_gauss_hermite(x, y, m):
    mom = sketch_moments("polysketch", x, y, m)
    e2, e4 = _quadrature(x, y, m)
    assert mom.mean == pytest.approx(e2, rel=1e-11, abs=1e-300)
    assert mom.variance == pytest.approx(e4 - e2 * e2, rel=1e-11, abs=1e-300)


def test_sketch_mean_is_the_stated_bias():
    """``E Z² = (xᵀy)²(1 + 1/m) + ‖x‖²‖y‖²/m``, the closed form the map's docs state."""
    x, y, m = np.array([0.5, 0.25, -1.0]), np.array([0.75, -0.5, 0.125]), 4
    c, a, b = x @ y, x @ x, y @ y
    mean = sketch_moments("polysketch", x, y, m).mean
    assert mean == pytest.approx(c * c * (1 + 1 / m) + a * b / m, rel=1e-15)


def test_sketch_moments_reject_bad_input():
    x = np.array([0.5, 0.25])
    with pytest.raises(ValueError, match="m must be"):
        sketch_moments("polysketch", x, x, 0)
    with pytest.raises(ValueError, match="same length"):
        sketch_moments("polysketch", x, np.array([1.0]), 2)
    with pytest.raises(ValueError, match="not a sketch formula"):
        sketch_moments("rff_pairs", x, x, 2)
    assert reference_not_covered("polysketch", "orthogonal", 2) is not None
    with pytest.raises(ValueError, match="Gaussian sketch"):
        reference_moments("polysketch", "orthogonal", x, x, {}, 2)
