"""Reference means of biased random-feature estimators that declare no mean kernel.

SORF rows (every formula) and fixed-norm orthogonal rows (the formulas without a fixed-norm
kernel in :mod:`kernel_verify.verify.references.kernels`) make the estimator ``φ(x)ᵀφ(y)``
biased, and its mean has no closed form among the kernels. This module computes that mean, an
upper bound on the variance of one estimate and a proven range of the estimate from the exact
law of one frequency row, each with a stated error, for the mean test of
``properties/test_feature_unbiased.py::test_biased_mean_is_reference_mean``.

Why one row suffices
--------------------
For every formula here one draw's estimate is an average over the m frequency rows,
``φ(x)ᵀφ(y) = (1/m)·Σᵢ h(wᵢ[, bᵢ]; x, y)`` (table below). Every row of both constructions has
the same marginal law (below), so ``E φ(x)ᵀφ(y) = E h(w; x, y)`` for one row ``w`` of that law,
for every m and whatever the dependence between the rows of a block. Every row lies in the
support of that law, so every estimate lies in ``[inf h, sup h]`` over the support; and by
Cauchy–Schwarz the variance of an average of m identically distributed terms is at most the
variance ``V₁`` of one term (``Var(Σhᵢ/m) = Σᵢⱼ Cov(hᵢ, hⱼ)/m² ≤ (Σᵢ σ)²/m² = V₁``).

Per-row estimates (``P = wᵀx/σ``, ``Q = wᵀy/σ``, ``S = ‖w‖²``, ``N = (‖x‖² + ‖y‖²)/2``;
docs/math.md §1–§4, the mpmath twins of ``verify/references/features.py``; ``σ = 1`` where the
formula has no bandwidth):

==================  =================================================================
rff_pairs           ``cos(P − Q)``
rff_phase           ``2cos(P + b)cos(Q + b) = cos(P − Q) + cos(P + Q + 2b)``, ``b ~ U[0, 2π)``
                    independent of W: ``E_b h = cos(P − Q)``, ``E_b h² = cos²(P − Q) + ½``,
                    ``h ∈ [cos(P − Q) − 1, cos(P − Q) + 1]``
softmax_trig        ``e^N·cos(P − Q)``
softmax_positive    ``e^(−N)·exp(P + Q)``
softmax_hyperbolic  ``e^(−N)·cosh(P + Q)``
relu_features       ``relu(P)·relu(Q)``
gerf                ``e^(−N + (d/2)·log(1 − 4A))·exp(B(P + Q) + 2A·S)``, ``B = √(1 − 4A)``
==================  =================================================================

Row laws
--------
* ``sorf``: row i of ``√p·(H D₁)(H D₂)(H D₃)``, first d columns (``H = H₊/√p``, ``H₊`` the
  Sylvester ±1 Hadamard matrix of size ``p = 2^⌈log₂ d⌉``, ``Dⱼ`` independent Rademacher
  diagonals; docs/math.md §3). ``eᵢᵀH₊D₁`` is a uniform random sign vector whatever ``i`` (``D₁``
  flips each sign independently with probability ½), so every row has the law of
  ``p⁻¹·(((s H₊) ∘ s₂) H₊ ∘ s₃)[:d]`` with ``s, s₂, s₃`` independent uniform sign vectors: a
  discrete law on at most ``2^(2p+d)`` points, enumerated exactly by :func:`sorf_row_law` in
  integer arithmetic (one exact division by ``p = 2^k`` at the end), for ``p ≤ 8``.
* ``orthogonal_fixed_norm``: a row of a Haar-orthogonal block scaled by ``√d`` is uniform on the
  sphere of radius ``√d`` (``S = d``). For a fixed ``s``, ``wᵀs`` then has the law of ``R·t``,
  ``R = √d‖s‖``, ``t`` the first coordinate of a uniform unit vector, and
  ``E exp(c·wᵀs) = ₀F₁(; d/2; c²R²/4)``, ``E cos(c·wᵀs) = ₀F₁(; d/2; −c²R²/4)`` (the Bessel
  series, as ``gaussian_fixed_norm`` and ``softmax_fixed_norm``); ``E cosh = E exp`` (the law is
  symmetric), ``cos² = (1 + cos 2z)/2`` and ``cosh² = (1 + cosh 2z)/2`` give the second moments.
  The range: ``|wᵀs| ≤ R`` (Cauchy–Schwarz, ``‖w‖ = √d`` exactly), attained by ``w = ±√d·s/‖s‖``.
  With ``c = 1``, ``s = x + y`` for the exponential maps this gives every row's estimate
  ``h ∈ [e^(−N−R), e^(−N+R)]`` (softmax_positive, ``h = e^(−N)·exp(wᵀs)``) and
  ``h ∈ [e^(−N), e^(−N)·cosh R]`` (softmax_hyperbolic, ``h = e^(−N)·cosh(wᵀs)``; the minimum at
  ``w ⟂ s``, which exists for ``d ≥ 2``); with ``s = x − y`` and ``c = 1/σ`` the trigonometric
  maps get ``cos(cwᵀs) ∈ [cos(cR), 1]`` for ``cR < π`` (else ``[−1, 1]``). One estimate
  averages the m rows of a draw, so it lies in the same range whatever the dependence between
  the rows of an orthogonal block; tests that use the range average independent *draws*.
  ``relu_features`` (two projections) has no row law here: it is unbiased with fixed norms
  (homogeneous of degree 2). Its range alone is :func:`fixed_norm_relu_range`: for a unit
  ``u`` at angles ``a, b`` from ``x, y`` (``a + b ≥ θ = ∠(x, y)``, the triangle inequality on
  the sphere), ``relu(uᵀx)relu(uᵀy) = ‖x‖‖y‖·cos a·cos b = ‖x‖‖y‖(cos(a − b) + cos(a + b))/2
  ≤ ‖x‖‖y‖(1 + cos θ)/2`` where both cosines are positive (``a + b < π``) and 0 otherwise, so
  with ``‖w‖² = d`` every row's ``h ∈ [0, d(‖x‖‖y‖ + xᵀy)/2]``, the top reached by ``w`` along
  the bisector of ``x`` and ``y``, the bottom by any ``w`` with ``wᵀx ≤ 0``.

Errors
------
* Fixed-norm moments: computed in mpmath at 40 digits from the exact inputs (``mpmath.hyp0f1``,
  exp, cos) and rounded once to float64: relative error ``≤ u`` (plus ``10⁻³⁸``), charged as
  ``2u·|value|``. (The parameters ``c``, ``a``, ``κ`` are the float64 values a float64
  implementation uses too: ``1/σ``, ``√(1 − 4A)``.)
* SORF moments: each support point is exact; ``h`` at a point is evaluated in float64 from
  arguments (``P``, ``Q``, ``S``, ``N`` and the formula's constant) that are sums of at most
  ``2d + 8`` rounded terms whose absolute values add to at most ``A`` (:func:`_argument`), so
  each argument is within ``γ_(2d+8)·A`` (Higham Lemma 3.1) and ``h`` within
  ``G·(expm1(γ_(2d+8)·A) + γ_8)`` of its exact value, ``G ≥ |h|`` and ``≥`` the factor in front
  of cos/cosh/exp (exp: relative ``expm1(|ε|)``; cos: absolute ``≤ |ε|`` times the factor;
  ``γ_8`` for the elementary functions (≤ 2 ulps each) and the products). The weighted sum is
  :func:`math.fsum` of products ``πₖ·hₖ`` (``πₖ`` exact dyadic), each rounded once: ``u`` per term
  plus ``u`` for the correctly rounded sum. :func:`row_moments` returns the total as
  ``mean_error``; the variance bound adds the second moment's error.

A float64 implementation's computed estimate differs from the exact estimate of its draw by at
most ``H·(expm1(γ_(2d+8)·A) + γ_(m+16))`` (``H`` the largest factor/|h| over the support: the
same argument analysis, plus the sum over ``m`` rows and the ``1/√m`` scalings):
:func:`estimate_range` widens the exact range by it.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.tolerance import EVALUATION_SLACK, gamma

__all__ = ["CONSTRUCTIONS", "FIXED_NORM_RANGES", "FORMULAS", "ROW_FORMULAS", "ROW_TERMS",
           "SKETCH_FORMULAS", "RowMoments", "RowTerm", "estimate_range", "fixed_norm_relu_range",
           "not_covered", "reference_moments", "reference_not_covered", "row_moments",
           "sketch_moments", "sorf_row_law"]

U = 2.0**-53
#: Constructions with a row law here.
CONSTRUCTIONS = ("sorf", "orthogonal_fixed_norm")
#: Largest padded size whose SORF law is enumerated (2^(2p+d) ≤ 2^24 points before merging).
SORF_MAX_P = 8


@dataclass(frozen=True)
class RowMoments:
    """Moments of one row's estimate ``h`` (module docstring), with their errors.

    ``mean``: ``E h`` within ``mean_error``; ``variance``: an upper bound on ``Var h`` (errors
    included); ``lo, hi``: every exact ``h`` on the support lies in ``[lo, hi]``; ``magnitude``
    and ``argument``: ``H`` and ``A`` of the rounding analysis (:func:`estimate_range`)."""

    mean: float
    mean_error: float
    variance: float
    lo: float
    hi: float
    magnitude: float
    argument: float
    how: str


def not_covered(formula: str | None, matrix: str | None, d: int) -> str | None:
    """Why no reference mean exists for this (formula, construction, d), or None."""
    term = ROW_TERMS.get(formula)
    if term is None:
        return (f"formula {formula!r} is not one whose estimate is a per-row average with a "
                f"reference here ({', '.join(sorted(ROW_FORMULAS))})")
    if matrix not in CONSTRUCTIONS:
        return f"construction {matrix!r} has no row law here ({', '.join(CONSTRUCTIONS)})"
    if matrix == "orthogonal_fixed_norm" and term.sphere is None:
        return term.sphere_why_not
    if matrix == "sorf" and _padded(d) > SORF_MAX_P:
        return f"SORF at d = {d} (p = {_padded(d)} > {SORF_MAX_P}): the law is not enumerated"
    return None


# ---------------------------------------------------------------- per-formula row terms
# Each formula's h of the module docstring's table: its constants (c, a, κ), its terms at the
# SORF support points (float64, with G) and its moments under the uniform-sphere law (mpmath).
def _unit_params(config: Mapping[str, Any], d: int) -> tuple[float, float, float]:
    return 1.0, 0.0, 0.0


def _bandwidth_params(config: Mapping[str, Any], d: int) -> tuple[float, float, float]:
    """rff: ``c = 1/σ``."""
    sigma = float(config["sigma"])
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    return 1.0 / sigma, 0.0, 0.0


def _gerf_params(config: Mapping[str, Any], d: int) -> tuple[float, float, float]:
    """GERF: ``c = B = √(1 − 4A)``, ``a = 2A``, ``κ = (d/2)·log(1 − 4A)``."""
    a = float(config["A"])
    if not a < 0.25:
        raise ValueError(f"GERF needs A < 1/4, got {a}")
    return math.sqrt(1 - 4 * a), 2 * a, d / 2 * math.log1p(-4 * a)


def _cos_terms(pre: float, P, Q, c: float):
    """``pre·cos(c(P − Q))``: ``(h, h², G = pre)``."""
    cz = np.cos(c * (P - Q))
    return pre * cz, (pre * cz) ** 2, np.full_like(cz, pre)


def _rff_pairs_terms(P, Q, S, N: float, c: float, a: float, kappa: float):
    return _cos_terms(1.0, P, Q, c)


def _softmax_trig_terms(P, Q, S, N: float, c: float, a: float, kappa: float):
    return _cos_terms(math.exp(N), P, Q, c)


def _rff_phase_terms(P, Q, S, N: float, c: float, a: float, kappa: float):
    """Averaged over the phase: ``E_b h = cos(P − Q)``, ``E_b h² = cos²(P − Q) + ½``, G = 2."""
    cz = np.cos(c * (P - Q))
    return cz, cz * cz + 0.5, np.full_like(cz, 2.0)


def _relu_terms(P, Q, S, N: float, c: float, a: float, kappa: float):
    v = np.maximum(P, 0.0) * np.maximum(Q, 0.0)
    return v, v * v, np.maximum(np.abs(P) * np.abs(Q), 1.0)


def _cosh_terms(P, Q, S, N: float, c: float, a: float, kappa: float):
    v = math.exp(-N) * np.cosh(P + Q)
    return v, v * v, v


def _exp_terms(P, Q, S, N: float, c: float, a: float, kappa: float):
    """softmax_positive (c = 1, a = κ = 0) and GERF."""
    v = np.exp(c * (P + Q) + a * S + kappa - N)
    return v, v * v, v


def _plain_range(h, err) -> tuple[float, float]:
    return float((h - err).min()), float((h + err).max())


def _phase_range(h, err) -> tuple[float, float]:
    """rff_phase: ``h = cos(P − Q) + cos(P + Q + 2b)``, within ``[−2, 2]``."""
    return max(float((h - err).min()) - 1.0, -2.0), min(float((h + err).max()) + 1.0, 2.0)


def _sphere_cos(pre, r, e1, e2):
    """``pre·cos(c·wᵀs)`` on the sphere: ``(mean, second, lo, hi, G)``."""
    lo_c = mpmath.cos(r) if r < mpmath.pi else mpmath.mpf(-1)
    return pre * e1, pre * pre * (1 + e2) / 2, pre * lo_c, pre, pre


def _sphere_rff_pairs(big_n, r, e1, e2, a: float, kappa: float, d: int):
    return _sphere_cos(mpmath.mpf(1), r, e1, e2)


def _sphere_softmax_trig(big_n, r, e1, e2, a: float, kappa: float, d: int):
    return _sphere_cos(mpmath.exp(big_n), r, e1, e2)


def _sphere_rff_phase(big_n, r, e1, e2, a: float, kappa: float, d: int):
    mean, second, lo_c, _, _ = _sphere_cos(mpmath.mpf(1), r, e1, e2)
    return (mean, second + mpmath.mpf(1) / 2, max(lo_c - 1, mpmath.mpf(-2)), mpmath.mpf(2),
            mpmath.mpf(2))


def _sphere_cosh(big_n, r, e1, e2, a: float, kappa: float, d: int):
    pre = mpmath.exp(-big_n)
    hi = pre * mpmath.cosh(r)
    return pre * e1, pre * pre * (1 + e2) / 2, pre, hi, hi


def _sphere_exp(big_n, r, e1, e2, a: float, kappa: float, d: int):
    """``e^(κ − N + a·d)·exp(c·wᵀs)``; a, κ float64 constants."""
    pre = mpmath.exp(mpmath.mpf(kappa) - big_n + mpmath.mpf(a) * d)
    hi = pre * mpmath.exp(r)
    return pre * e1, pre * pre * e2, pre * mpmath.exp(-r), hi, hi


@dataclass(frozen=True)
class RowTerm:
    """One formula's per-row estimate ``h`` (module docstring, table) and its math."""

    #: ``(config, d) -> (c, a, κ)``: the projection factor (``1/σ``, or ``B`` for GERF), the
    #: coefficient of ``S`` and the additive log-constant
    params: Callable[[Mapping[str, Any], int], tuple[float, float, float]]
    #: ``(P, Q, S, N, c, a, κ) -> (E_b h, E_b h², G)`` per SORF support point (float64)
    terms: Callable[..., tuple]
    #: ``(h, err) -> (lo, hi)``: the range of every ``h`` from the per-point values and errors
    sorf_range: Callable[..., tuple[float, float]]
    #: fixed-norm rows: ``h`` depends on ``wᵀ(x − y)`` through cos (True) or on ``wᵀ(x + y)``
    #: through exp / cosh (False)
    difference: bool
    #: ``(N, r, E f(z), E f(2z), a, κ, d) -> (mean, second, lo, hi, G)`` in mpmath under the
    #: uniform-sphere law; None with :attr:`sphere_why_not`
    sphere: Callable[..., tuple] | None
    sphere_why_not: str | None = None


#: formula -> its per-row term (the formulas whose estimate is an average of per-row terms).
ROW_TERMS: dict[str, RowTerm] = {
    "rff_pairs": RowTerm(_bandwidth_params, _rff_pairs_terms, _plain_range, True,
                         _sphere_rff_pairs),
    "rff_phase": RowTerm(_bandwidth_params, _rff_phase_terms, _phase_range, True,
                         _sphere_rff_phase),
    "softmax_trig": RowTerm(_unit_params, _softmax_trig_terms, _plain_range, True,
                            _sphere_softmax_trig),
    "softmax_positive": RowTerm(_unit_params, _exp_terms, _plain_range, False, _sphere_exp),
    "softmax_hyperbolic": RowTerm(_unit_params, _cosh_terms, _plain_range, False, _sphere_cosh),
    "relu_features": RowTerm(
        _unit_params, _relu_terms, _plain_range, False, None,
        "relu_features with fixed-norm rows depends on two projections (and is unbiased)"),
    "gerf": RowTerm(_gerf_params, _exp_terms, _plain_range, False, _sphere_exp),
}
#: Formulas whose estimate is an average of per-row terms (module docstring, table).
ROW_FORMULAS = frozenset(ROW_TERMS)


def _padded(d: int) -> int:
    return 1 << max(0, (d - 1).bit_length())


def _sylvester(p: int) -> np.ndarray:
    h = np.ones((1, 1), dtype=np.int64)
    while h.shape[0] < p:
        h = np.block([[h, h], [h, -h]])
    return h


def _merge(points: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, inv = np.unique(points, axis=0, return_inverse=True)
    return uniq, np.bincount(inv.ravel(), weights=counts, minlength=len(uniq))


@functools.lru_cache(maxsize=8)
def sorf_row_law(d: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, probabilities)``: the exact law of one SORF row at dimension ``d`` (module
    docstring): distinct support points ``(K, d)`` (exact dyadic values) and their
    probabilities (exact: integer counts over ``2^(2p+d)``)."""
    p = _padded(d)
    if p > SORF_MAX_P:
        raise ValueError(f"SORF law enumerated for p <= {SORF_MAX_P}, got d = {d} (p = {p})")
    h = _sylvester(p)
    signs = np.array(list(itertools.product((1, -1), repeat=p)), dtype=np.int64)
    a1, c1 = _merge(signs @ h, np.ones(len(signs)))                   # s H₊
    a2 = ((a1[:, None, :] * signs[None, :, :]) @ h)[..., :d].reshape(-1, d)  # ((sH₊)∘s₂)H₊
    a2, c2 = _merge(a2, np.repeat(c1, len(signs)))
    s3 = np.array(list(itertools.product((1, -1), repeat=d)), dtype=np.int64)
    a3, c3 = _merge((a2[:, None, :] * s3[None, :, :]).reshape(-1, d), np.repeat(c2, len(s3)))
    total = float(len(signs)) ** 2 * len(s3)
    assert c3.sum() == total
    return a3.astype(np.float64) / p, c3 / total


def _argument(c: float, a: float, kappa: float, s_max: float, x, y) -> float:
    """``A``: a bound on the sum of the absolute values of every term in ``h``'s arguments
    (``|wᵀx| ≤ √S‖x‖`` by Cauchy–Schwarz), at least 3 (so that ``expm1(γA) ≥ 3γ`` also covers
    ``relu(P)relu(Q)``'s product rule ``|P|ε_Q + |Q|ε_P + ε_Pε_Q``)."""
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    big = c * math.sqrt(s_max) * (nx + ny) + abs(a) * s_max + (nx * nx + ny * ny) / 2 + abs(kappa)
    return max(big, 3.0)


def _sorf_moments(term: RowTerm, x, y, c, a, kappa) -> RowMoments:
    d = x.shape[-1]
    rows, prob = sorf_row_law(d)
    P, Q = rows @ x, rows @ y
    S = np.einsum("kd,kd->k", rows, rows)
    N = float(x @ x + y @ y) / 2
    h, h2, g = term.terms(P, Q, S, N, c, a, kappa)
    big_a = _argument(c, a, kappa, float(S.max()), x, y)
    rel = math.expm1(gamma(2 * d + 8, U) * big_a) + gamma(8, U)
    err = g * rel                                   # |ĥ − h| per point
    mean = math.fsum(prob * h)
    mean_err = (float(prob @ err) + U * float(prob @ np.abs(h)) + U * abs(mean)) * EVALUATION_SLACK
    second = math.fsum(prob * h2)
    # |ĥ² − h²| ≤ 2|h|·err + err² per point (plus the phase term's exact ½ for rff_phase)
    err2 = 2 * np.abs(h) * err + err * err
    second_err = (float(prob @ err2) + U * float(prob @ np.abs(h2)) + U * second) * EVALUATION_SLACK
    low_mean = max(abs(mean) - mean_err, 0.0)
    var = max(second + second_err - low_mean * low_mean, 0.0) * EVALUATION_SLACK
    lo, hi = term.sorf_range(h, err)
    return RowMoments(mean, mean_err, var, lo, hi, float(g.max()), big_a,
                      f"exact SORF row law ({len(prob)} support points, p = {_padded(d)})")


def _fixed_norm_moments(term: RowTerm, x, y, c, a, kappa) -> RowMoments:
    """Every quantity in mpmath at 40 digits from the exact inputs, rounded once at the end."""
    d = x.shape[-1]
    with mpmath.workdps(40):
        xm, ym = [mpmath.mpf(float(v)) for v in x], [mpmath.mpf(float(v)) for v in y]
        big_n = mpmath.fsum(v * v for v in xm + ym) / 2
        trig = term.difference
        s = [u - v if trig else u + v for u, v in zip(xm, ym, strict=True)]
        r2 = d * mpmath.fsum(v * v for v in s) * mpmath.mpf(c) ** 2   # (c·√d‖s‖)², c exact
        r = mpmath.sqrt(r2)                                              # |c·wᵀs| ≤ r
        sign = -1 if trig else 1
        b = mpmath.mpf(d) / 2
        e1, e2 = mpmath.hyp0f1(b, sign * r2 / 4), mpmath.hyp0f1(b, sign * r2)  # E f(z), E f(2z)
        mean, second, lo, hi, g = term.sphere(big_n, r, e1, e2, a, kappa, d)
        var = second - mean * mean
        vals = [float(v) for v in (mean, var, lo, hi, g)]
    mean_f, var_f, lo_f, hi_f, g_f = vals
    # each value rounded once from 40 digits: relative ≤ u (+ 1e-38); charged as 2u
    mean_err = 2 * U * abs(mean_f)
    var_f = max(var_f * (1 + 2 * U) + 2 * U * abs(var_f), 0.0)
    big_a = _argument(c, a, kappa, float(d), x, y)
    return RowMoments(mean_f, mean_err, var_f, lo_f - 2 * U * abs(lo_f), hi_f + 2 * U * abs(hi_f),
                      g_f, big_a, "uniform-sphere row law (₀F₁ moments, 40 digits)")


def row_moments(formula: str, matrix: str, x: np.ndarray, y: np.ndarray,
                config: Mapping[str, Any]) -> RowMoments:
    """The moments of one row's estimate at ``(x, y)`` (module docstring); ``ValueError`` where
    :func:`not_covered` gives a reason."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    reason = not_covered(formula, matrix, x.shape[-1])
    if reason is not None:
        raise ValueError(reason)
    term = ROW_TERMS[formula]
    c, a, kappa = term.params(config, x.shape[-1])
    if matrix == "sorf":
        return _sorf_moments(term, x, y, c, a, kappa)
    return _fixed_norm_moments(term, x, y, c, a, kappa)


def estimate_range(mom: RowMoments, d: int, m: int) -> tuple[float, float]:
    """A proven range of one float64-computed estimate with m rows: ``[lo, hi]`` widened by the
    rounding of a float64 implementation, ``H·(expm1(γ_(2d+8)·A) + γ_(m+16))`` (module
    docstring)."""
    slack = mom.magnitude * (math.expm1(gamma(2 * d + 8, U) * mom.argument)
                             + gamma(m + 16, U)) * EVALUATION_SLACK
    return mom.lo - slack, mom.hi + slack


def fixed_norm_relu_range(x: np.ndarray, y: np.ndarray, m: int) -> tuple[float, float]:
    """A proven range of one float64-computed estimate of ``relu_features`` with m
    ``orthogonal_fixed_norm`` rows (``‖w‖ = √d``): the exact per-row range
    ``[0, d(‖x‖‖y‖ + xᵀy)/2]`` (module docstring, "Row laws"; its average over the m rows of a
    draw lies in it too) computed in mpmath at 40 digits and rounded outwards (``2u``), widened
    by the rounding of a float64 implementation as in :func:`estimate_range`, with
    ``H = max(d‖x‖‖y‖, 1) ≥ max(|P||Q|, 1)`` (the table's factor for relu) and the argument
    bound ``A`` of :func:`_argument` at ``S = d``."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    d = x.shape[-1]
    with mpmath.workdps(40):
        xm, ym = [mpmath.mpf(float(v)) for v in x], [mpmath.mpf(float(v)) for v in y]
        nxy = mpmath.sqrt(mpmath.fsum(v * v for v in xm) * mpmath.fsum(v * v for v in ym))
        top = d * (nxy + mpmath.fsum(u * v for u, v in zip(xm, ym, strict=True))) / 2
        hi, big_h = float(top), max(float(d * nxy), 1.0)
    hi += 2 * U * abs(hi)
    big_h *= 1 + 2 * U
    big_a = _argument(1.0, 0.0, 0.0, float(d), x, y)
    slack = big_h * (math.expm1(gamma(2 * d + 8, U) * big_a)
                     + gamma(m + 16, U)) * EVALUATION_SLACK
    return -slack, hi + slack


#: formula -> ``(x, y, m) -> (lo, hi)``: a proven range of one estimate under fixed-norm rows
#: where the formula has no row law there (:func:`fixed_norm_relu_range`).
FIXED_NORM_RANGES = {"relu_features": fixed_norm_relu_range}

# ------------------------------------------------------------------ sketches (docs/math.md §18)
#: The construction of a sketch formula's matrix: ``S`` with i.i.d. ``N(0, 1/m)`` entries.
SKETCH_MATRIX = "iid"
#: Formulas whose estimate is a square of a sketched inner product (:func:`sketch_moments`): no
#: row law and no finite range, but the exact mean and variance of the estimate at every m.
SKETCH_FORMULAS = frozenset({"polysketch"})
#: Every formula with a reference mean here.
FORMULAS = ROW_FORMULAS | SKETCH_FORMULAS


def reference_not_covered(formula: str | None, matrix: str | None, d: int) -> str | None:
    """Why no reference mean exists for this (formula, construction, d): :func:`not_covered`
    for the per-row formulas; a sketch formula needs its Gaussian (``"iid"``) sketch."""
    if formula in SKETCH_FORMULAS:
        if matrix != SKETCH_MATRIX:
            return (f"sketch formula {formula!r} has its exact moments for a Gaussian sketch "
                    f"(matrix {SKETCH_MATRIX!r}) only, got {matrix!r}")
        return None
    return not_covered(formula, matrix, d)


def sketch_moments(formula: str, x: np.ndarray, y: np.ndarray, m: int) -> RowMoments:
    """Exact mean and variance of one PolySketch estimate ``Z² = ((Sx)ᵀ(Sy))²`` with ``m``
    sketch rows (docs/math.md §18).

    ``Z = (1/m)Σᵢ UᵢVᵢ`` with ``(Uᵢ, Vᵢ) = (gᵢᵀx, gᵢᵀy)`` i.i.d. centred Gaussian pairs of
    covariance ``[[a, c], [c, b]]`` (``a = ‖x‖²``, ``b = ‖y‖²``, ``c = xᵀy``).
    ``E e^(tUV) = ((1 − tc)² − t²ab)^(−1/2)``, so the cumulants of ``UV`` are
    ``κₙ = ½(n − 1)!(λ₊ⁿ + λ₋ⁿ)``, ``λ± = c ± √(ab)``: ``κ₁ = c``, ``κ₂ = c² + ab``,
    ``κ₃ = 2c³ + 6c·ab``, ``κ₄ = 6c⁴ + 36c²ab + 6a²b²``, and ``Z`` has ``κₙ(Z) = m^(1−n)κₙ``.
    From cumulants to moments: ``E Z² = κ₂ + κ₁²`` (so ``E Z² = c²(1 + 1/m) + ab/m``) and
    ``E Z⁴ = κ₄ + 4κ₃κ₁ + 3κ₂² + 6κ₂κ₁² + κ₁⁴``; ``Var Z² = E Z⁴ − (E Z²)²``.

    Every quantity is a polynomial in the float inputs: computed exactly in rationals and
    rounded once (``mean_error = u·|mean|``; the variance rounded up). The estimate is ``≥ 0``
    and unbounded above: ``lo = 0``, ``hi = ∞`` (the mean test uses the exact variance, median
    of means). ``tests/test_sketch_moments.py`` checks the closed form against Gauss–Hermite
    quadrature of ``Z²`` and ``Z⁴`` (exact for these polynomials)."""
    from fractions import Fraction

    if formula not in SKETCH_FORMULAS:
        raise ValueError(f"formula {formula!r} is not a sketch formula "
                         f"({', '.join(sorted(SKETCH_FORMULAS))})")
    if isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 1:
        raise ValueError(f"m must be an int >= 1, got {m!r}")
    xs = [Fraction(float(v)) for v in np.asarray(x, dtype=np.float64).ravel()]
    ys = [Fraction(float(v)) for v in np.asarray(y, dtype=np.float64).ravel()]
    if len(xs) != len(ys):
        raise ValueError(f"x and y must have the same length, got {len(xs)} and {len(ys)}")
    a, b = sum(v * v for v in xs), sum(v * v for v in ys)
    c = sum(u * v for u, v in zip(xs, ys, strict=True))
    ab, mm = a * b, Fraction(int(m))
    k1, k2 = c, (c * c + ab) / mm
    k3 = (2 * c**3 + 6 * c * ab) / mm**2
    k4 = (6 * c**4 + 36 * c * c * ab + 6 * ab * ab) / mm**3
    second = k2 + k1 * k1
    fourth = k4 + 4 * k3 * k1 + 3 * k2 * k2 + 6 * k2 * k1 * k1 + k1**4
    mean, var = float(second), float(fourth - second * second)
    return RowMoments(mean, U * abs(mean), var * (1 + 2 * U), 0.0, math.inf, math.inf, 0.0,
                      f"exact moments of ((Sx)ᵀ(Sy))² with m = {int(m)} Gaussian sketch rows "
                      "(cumulants of a Gaussian product)")


def reference_moments(formula: str, matrix: str, x: np.ndarray, y: np.ndarray,
                      config: Mapping[str, Any], m: int) -> RowMoments:
    """The reference moments of one estimate with ``m`` features: :func:`sketch_moments` for a
    sketch formula (the moments of the estimate itself), else :func:`row_moments` (one row's,
    the same for every m)."""
    if formula in SKETCH_FORMULAS:
        why = reference_not_covered(formula, matrix, np.asarray(x).shape[-1])
        if why is not None:
            raise ValueError(why)
        return sketch_moments(formula, x, y, m)
    return row_moments(formula, matrix, x, y, config)
