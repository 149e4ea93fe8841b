"""Exact mean and variance of random-feature estimators ``φ(x)ᵀφ(y)`` — no Monte Carlo.

``φ(x)ᵀφ(y) = (1/m)Σᵢ h(wᵢ; x, y)`` over the m frequency rows ``wᵢ`` (docs/math.md §0–§4); the
per-frequency mean ``E h`` and variance ``V₁ = Var h`` come two independent ways:

* ``method="closed"``: the closed forms of :mod:`kernel_verify.verify.moments.closed_forms`
  (docs/math.md §1, §2, §4);
* ``method="quadrature"``: the reduction of docs/math.md §0
(:mod:`kernel_verify.verify.moments.gauss_hermite`),
  applied to ``h`` and ``h²`` written from the feature definitions
  (:mod:`kernel_verify.verify.moments.integrands`; relu by the polar reduction).

The variance of the estimator depends on how the rows are drawn (``entry.matrix``):

* ``"iid"``: ``V₁/m``;
* ``"orthogonal"``: ``(m·V₁ + P·C)/m²`` with P the ordered same-block pairs and C the covariance
  of two orthogonal features (:mod:`kernel_verify.verify.moments.orf`; C has no closed form: both
  methods use the exact moment series of the docs/math.md §3 law);
* ``"simplex"``: the same with C the covariance of two simplex-coupled features (cosine
  −1/(d−1); :mod:`kernel_verify.verify.moments.simplex`, docs/math.md §19);
* any other construction raises :class:`NotImplementedError` (fastfood/SORF features inside a
  block are dependent in ways these formulas do not cover; fixed-norm rows are not Gaussian —
  their mean is :func:`kernel_verify.verify.moments.closed_forms.fixed_norm_mean`).

``x``, ``y`` are the vectors fed to φ (no attention prescaling). Results are mpf; results are
cached in memory (keyed by the exact float inputs, config, m, matrix, method and dps).
Timing (this machine, after the Gauss–Hermite rules are cached): one (mean, variance) pair at
30 digits by quadrature takes ~5–30 ms for the exponential-sum estimators.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.inputs import check_array, check_positive_int
from kernel_verify.verify.moments import aligned, dense_exponential, maclaurin
from kernel_verify.verify.moments.closed_forms import closed_moments
from kernel_verify.verify.moments.gauss_hermite import expect_relu_power
from kernel_verify.verify.moments.integrands import (
    FORMULAS_WITH_TERMS,
    integrand,
    power_moments,
)
from kernel_verify.verify.moments.orf import orf_variance, orthogonal_covariance
from kernel_verify.verify.moments.simplex import coupled_covariance, simplex_cosine
from kernel_verify.verify.references.mp import to_mp
from kernel_verify.verify.references.spec import MapSpec, require_map

__all__ = ["EXACT_VARIANCE_MATRICES", "MOMENT_FORMULAS", "Moments", "exact_moments",
           "per_frequency_moments"]

#: Row constructions with an exact estimator variance.
EXACT_VARIANCE_MATRICES = ("iid", "orthogonal", "simplex")


def _exp_sum_quadrature(formula: str, x, y, config: Mapping[str, Any], dps: int):
    """An exponential-sum integrand: ``E h`` and ``E h²`` term by term (Gauss–Hermite)."""
    mean, second = power_moments(integrand(formula, x, y, config), dps, 2)
    return mean, second - mean**2


def _relu_quadrature(x, y, config: Mapping[str, Any], dps: int):
    """relu features: the polar reduction ``E[relu(u)ᵏrelu(v)ᵏ]``, k = 1, 2."""
    mean = expect_relu_power(x, y, 1, dps)
    return mean, expect_relu_power(x, y, 2, dps) - mean**2


#: formula -> ``(x, y, config, dps) -> (E h, Var h)``, the quadrature route (the second route
#: to :data:`~kernel_verify.verify.moments.closed_forms.CLOSED_FORMS`).
_QUADRATURE: dict[str, Callable[..., tuple[Any, Any]]] = {
    **{f: functools.partial(_exp_sum_quadrature, f) for f in sorted(FORMULAS_WITH_TERMS)},
    "relu_features": _relu_quadrature,
    # Rademacher rows: exact enumeration, series by nsum
    "random_maclaurin": lambda x, y, config, dps: maclaurin.enumerated(x, y, config),
    # dense A: one-dimensional quadratures in its eigenbasis
    "sderf": lambda x, y, config, dps: dense_exponential.quadrature(x, y, config),
    # FAVOR+'s integrand at (Mx, My) (docs/math.md §21)
    "darkformer": aligned.quadrature,
}
#: Formulas with exact moments.
MOMENT_FORMULAS = frozenset(_QUADRATURE)
#: formula -> why coupled rows (orthogonal, simplex) have no covariance C here.
_NO_COUPLED_ROWS = {"relu_features": "two projections per row"}


@dataclass(frozen=True)
class Moments:
    """Exact moments of ``φ(x)ᵀφ(y)`` with m frequencies: ``mean``, ``variance`` (of the
    estimator), ``per_feature_variance`` (V₁) and, for orthogonal rows, ``covariance`` (C)."""

    mean: Any
    variance: Any
    per_feature_variance: Any
    covariance: Any = None

    def as_float(self) -> Moments:
        """The same moments rounded to Python floats."""
        return Moments(
            float(self.mean),
            float(self.variance),
            float(self.per_feature_variance),
            None if self.covariance is None else float(self.covariance),
        )


def per_frequency_moments(
    formula: str, x: np.ndarray, y: np.ndarray, config: Mapping[str, Any], method: str, dps: int
) -> tuple[Any, Any]:
    """``(E h, Var h)`` for mp vectors x, y, at ``dps`` digits, by ``method``."""
    if formula not in MOMENT_FORMULAS:
        raise KeyError(f"no exact moments for {formula!r}; known: {sorted(MOMENT_FORMULAS)}")
    if method == "closed":
        mean, v1 = closed_moments(formula, x, y, config)
        return mean, v1
    if method != "quadrature":
        raise ValueError(f"method must be 'closed' or 'quadrature', got {method!r}")
    return _QUADRATURE[formula](x, y, config, dps)


def _key_of(a: np.ndarray) -> tuple[float, ...]:
    return tuple(float(v) for v in a)


@functools.lru_cache(maxsize=4096)
def _cached(formula, matrix, xk, yk, config_items, m, method, dps) -> Moments:
    config = dict(config_items)
    with mpmath.workdps(dps + 10):
        x, y = to_mp(np.array(xk)), to_mp(np.array(yk))
        mean, v1 = per_frequency_moments(formula, x, y, config, method, dps)
        if matrix == "iid":
            var, cov = v1 / m, None
        elif matrix == "simplex" and len(xk) == 1:  # no simplex in d = 1: i.i.d. rows
            var, cov = v1 / m, None
        else:
            cov = (coupled_covariance(formula, x, y, config, mean, dps, simplex_cosine(len(xk)))
                   if matrix == "simplex"
                   else orthogonal_covariance(formula, x, y, config, mean, dps))
            var = orf_variance(v1, cov, m, len(xk))
    with mpmath.workdps(dps):
        return Moments(+mean, +var, +v1, None if cov is None else +cov)


def exact_moments(
    entry_or_formula: MapSpec | str,
    x: np.ndarray,
    y: np.ndarray,
    config: Mapping[str, Any] | None,
    m: int,
    *,
    method: str = "closed",
    dps: int = 30,
    matrix: str | None = None,
) -> Moments:
    """Exact :class:`Moments` of ``φ(x)ᵀφ(y)`` with ``m`` frequency rows.

    ``entry_or_formula``: a registry entry (its ``formula``, ``matrix`` and default ``config``)
    or a formula id (``matrix`` defaults to ``"iid"``). ``config`` overrides the entry's.
    Raises NotImplementedError for constructions other than iid/orthogonal (see the module
    docstring) and for ORF with relu features; QuadratureError outside the supported domain."""
    if isinstance(entry_or_formula, str):
        formula, base, matrix = entry_or_formula, {}, matrix or "iid"
    else:
        entry = require_map(entry_or_formula, "entry_or_formula")
        formula = entry.formula
        base = dict(entry.config)
        matrix = matrix or getattr(entry, "matrix", None) or "iid"
    if formula not in MOMENT_FORMULAS:
        raise KeyError(f"no exact moments for {formula!r}; known: {sorted(MOMENT_FORMULAS)}")
    if matrix not in EXACT_VARIANCE_MATRICES:
        raise NotImplementedError(
            f"exact variance only for iid, orthogonal and simplex rows, not {matrix!r}: "
            "fastfood/SORF "
            "features inside a block are dependent, fixed-norm rows are not Gaussian"
        )
    why = _NO_COUPLED_ROWS.get(formula)
    if matrix in ("orthogonal", "simplex") and why is not None:
        raise NotImplementedError(f"{matrix} covariance C is not covered for {formula} ({why})")
    for name, v in (("x", x), ("y", y)):
        check_array(name, v, min_ndim=1, backend="numpy")
        if v.ndim != 1:
            raise ValueError(f"{name} must be a vector (d,), got shape {v.shape}")
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape, got {x.shape} and {y.shape}")
    m = check_positive_int("m", m)
    if not isinstance(dps, int) or dps < 16:
        raise ValueError(f"dps must be an int >= 16, got {dps!r}")
    config = {**base, **(config or {})}
    config_items = tuple(sorted((k, float(v)) for k, v in config.items()))
    return _cached(formula, matrix, _key_of(x), _key_of(y), config_items, m, method, dps)
