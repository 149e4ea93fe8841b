"""The exact law of a Gaussian sketch's squared norm: a second, distribution-exact test of
PolySketch (docs/math.md §18).

With ``S`` (m × d) of i.i.d. ``N(0, 1/m)`` entries, ``Sx ~ N(0, (‖x‖²/m)·I_m)``, so
``m‖Sx‖²/‖x‖² ~ χ²_m`` exactly; PolySketch's features ``φ(x) = vec(zzᵀ)``, ``z = Sx``, give
``φ(x)ᵀφ(x) = ‖z‖⁴``, so ``q = √(φ(x)ᵀφ(x)) = ‖Sx‖²`` and, over n independent sketches,

    T = (m/‖x‖²)·Σₖ qₖ ~ χ²_(nm)   (derived).

The two-sided test rejects outside ``[χ²_(nm)(α/2), χ²_(nm)(1 − α/2)]``: its false-alarm rate is
α exactly (scipy's chi-square quantiles), whatever m and n. It sees a wrong sketch law (entry
variance, row count, a missing normalisation) through the whole distribution of ``‖Sx‖²``,
whose relative spread is ``√(2/(nm))``, instead of through the heavy-tailed mean of ``Z²``
(relative spread up to ``√(2 + 6/m)`` per draw), hence its power (docs/math.md §18).

Rounding: at an axis-aligned ``x = r·eⱼ`` every ``zᵢ = Sᵢⱼr`` is one rounded product (``S`` cast:
two roundings), every feature ``zᵢzₖ`` one more, ``φᵀφ`` a length-``m²`` sum of nonnegative terms
(``γ_(m²)``) and the root one call: ``|q̂ − q| ≤ ρq`` with ``ρ = γ_(m² + 8)`` (relative, as all terms
are nonnegative: no cancellation), so ``T`` is known within a factor ``1 ± ρ``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernel_verify.verify.references.biased_means import SKETCH_FORMULAS, SKETCH_MATRIX
from kernel_verify.verify.references.features import gamma

__all__ = ["ChiSquareLaw", "norm_law"]


@dataclass(frozen=True)
class ChiSquareLaw:
    """``T = scale·Σₖ qₖ ~ χ²_dof`` exactly; ``rel_rounding`` bounds ``|q̂ − q|/q``."""

    dof: int
    scale: float
    rel_rounding: float


def norm_law(formula: str | None, matrix: str | None, sq_norm: float, m: int, n: int,
             u: float) -> ChiSquareLaw | None:
    """The law of ``T`` for ``n`` sketches of an axis-aligned ``x`` (``‖x‖² = sq_norm``), or None
    for a formula/construction without one."""
    if formula not in SKETCH_FORMULAS or matrix != SKETCH_MATRIX:
        return None
    return ChiSquareLaw(dof=n * m, scale=m / sq_norm, rel_rounding=gamma(m * m + 8, u))
