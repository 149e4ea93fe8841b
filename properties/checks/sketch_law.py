"""The sketch-norm law test of a sketch map (PolySketch): ``T = (m/‖x‖²)·Σₖ ‖Sₖx‖²`` over ``n``
independent sketches at an axis-aligned ``x`` is exactly ``χ²_(nm)``
(:func:`kernel_verify.verify.references.sketch_law.norm_law`, docs/math.md §18), read from the
features as ``‖Sx‖² = √(φ(x)ᵀφ(x))``. Two-sided test at level α on the exact interval, widened by
``1 ± ρ`` (the derived relative rounding of each ``‖Sx‖²``).

One function for ``properties/test_sketch_law.py`` and ``kernel-verify calibrate`` (part
``reference_means``), so that the calibration runs the property's own check. The test is
exact-level: on correct code its rate *is* α (less the rounding widening), as for the DKW tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2

from kernel_verify.properties.checks.estimates import estimates, feature_m
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.verify.references.sketch_law import norm_law

U64 = 2.0**-53
#: Independent sketches per assertion (each a d-dimensional product and m² features: cheap).
DRAWS = 4000


def has_norm_law(target: FeatureMapTarget) -> bool:
    """Whether the target's formula and construction have an exact sketch-norm law."""
    return norm_law(target.formula, target.matrix, 1.0, 2, 1, U64) is not None


@dataclass(frozen=True)
class SketchNormStatistic:
    """``T`` of one test, its ``χ²`` degrees of freedom and relative rounding, and the input."""

    t: float
    dof: int
    rel_rounding: float
    x: np.ndarray
    m: int

    def interval(self, alpha: float) -> tuple[float, float]:
        """The two-sided acceptance interval at level ``alpha``, rounding widening included."""
        lo, hi = chi2.ppf(alpha / 2, self.dof), chi2.isf(alpha / 2, self.dof)
        return lo * (1 - self.rel_rounding), hi * (1 + self.rel_rounding)

    def ok(self, alpha: float) -> bool:
        lo, hi = self.interval(alpha)
        return lo <= self.t <= hi


def sketch_norm_statistic(target: FeatureMapTarget, seed: int, d: int, m: int, axis: int,
                          r: float, draws: int = DRAWS) -> SketchNormStatistic:
    """``T = (m/‖x‖²)·Σₖ √(φₖ(x)ᵀφₖ(x))`` at ``x = r·e_(axis mod d)`` over ``draws`` independent
    sketches (the seed's draws)."""
    m = feature_m(target, m)
    x = np.zeros(d)
    x[axis % d] = r
    law = norm_law(target.formula, target.matrix, float(x @ x), m, draws, U64)
    if law is None:
        raise ValueError(f"{target.name}: no exact sketch-norm law for formula "
                         f"{target.formula!r} with matrix {target.matrix!r}")
    q = np.sqrt(np.maximum(estimates(target, x, x, m, seed, draws), 0.0))
    return SketchNormStatistic(law.scale * float(q.sum()), law.dof, law.rel_rounding, x, m)
