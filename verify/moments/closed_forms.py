"""Closed forms of the mean and per-frequency variance ``V₁ = Var h`` of every estimator.

``φ(x)ᵀφ(y) = (1/m)Σᵢ h(wᵢ)``; with iid frequencies ``Var = V₁/m`` (docs/math.md §1, §2, §4).
Notation: ``s = x+y``, ``δ = x−y``, ``SM = exp(xᵀy)``, ``k = exp(−‖δ‖²/(2σ²))``.

=================== ================== ==================================================
formula             mean               V₁ (per frequency)
=================== ================== ==================================================
rff_pairs           k                  ½(1−k²)²                                  (§1)
rff_phase           k                  ½ + ½(1−k²)²                              (§1)
softmax_trig        SM                 ½e^(‖s‖²)SM⁻²(1−e^(−‖δ‖²))²               (§2)
softmax_positive    SM                 e^(‖s‖²)SM²(1−e^(−‖s‖²))                  (§2)
softmax_hyperbolic  SM                 ½(1−e^(−‖s‖²))·V₁(SM⁺)                    (§2)
gerf (A < 1/8)      SM                 SM²[(1+16A²/(1−8A))^(d/2) e^(‖s‖²/(1−8A)) − 1]  (§4)
sderf (§20)         SM                 det(I−4A)·det(I−8A)^(−½)·e^(−‖x‖²−‖y‖²+2sᵀB(I−8A)⁻¹Bs) − SM²
darkformer (§21)    exp(xᵀMᵀMy)        softmax_positive's at (Mx, My)
relu_features       ‖x‖‖y‖J₁(θ)/(2π)   ‖x‖²‖y‖²J₂(θ)/(2π) − mean²  (Cho & Saul 2009)
=================== ================== ==================================================

with ``J₁(θ) = sin θ + (π−θ)cos θ`` and ``J₂(θ) = 3 sin θ cos θ + (π−θ)(1 + 2cos²θ)``
(``E[relu(u)ⁿrelu(v)ⁿ] = ‖x‖ⁿ‖y‖ⁿJₙ(θ)/(2π)``, Cho & Saul 2009 eq. (6)–(7); **[recall]**, checked
against quadrature in ``tests/test_moments.py``).

Fixed-norm ORF means (rows uniform on the sphere of radius √d, docs/math.md §3): ``E cos(wᵀz) =
₀F₁(; d/2; −d‖z‖²/4)`` and ``E exp(wᵀz) = ₀F₁(; d/2; d‖z‖²/4)`` (:func:`fixed_norm_mean`).
Inputs are mp vectors; results are mpf at the caller's precision.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.moments import aligned, dense_exponential, maclaurin

__all__ = [
    "CLOSED_FORMS",
    "FIXED_NORM_MEANS",
    "OPTIMAL_VARIANCE",
    "closed_moments",
    "fixed_norm_mean",
    "gerf_per_feature_variance",
    "optimal_gerf_a_mp",
]


def _sq(v: np.ndarray) -> Any:
    return mpmath.fsum(t * t for t in v)


def _dot(a: np.ndarray, b: np.ndarray) -> Any:
    return mpmath.fsum(p * q for p, q in zip(a, b, strict=True))


def _rff(x, y, config, *, phase: bool):
    sigma = mpmath.mpf(float(config["sigma"]))
    k = mpmath.exp(-_sq(x - y) / (2 * sigma**2))
    v1 = (1 - k * k) ** 2 / 2
    return k, v1 + mpmath.mpf(1) / 2 if phase else v1


def _softmax_trig(x, y, config):
    sm = mpmath.exp(_dot(x, y))
    v1 = mpmath.exp(_sq(x + y)) / (2 * sm**2) * (1 - mpmath.exp(-_sq(x - y))) ** 2
    return sm, v1


def _softmax_positive(x, y, config):
    sm = mpmath.exp(_dot(x, y))
    s2 = _sq(x + y)
    return sm, mpmath.exp(s2) * sm**2 * (1 - mpmath.exp(-s2))


def _softmax_hyperbolic(x, y, config):
    sm, v_pos = _softmax_positive(x, y, config)
    return sm, (1 - mpmath.exp(-_sq(x + y))) / 2 * v_pos


def gerf_per_feature_variance(a: Any, x: np.ndarray, y: np.ndarray) -> Any:
    """``V₁(A) = SM²[(1 + 16A²/(1−8A))^(d/2)·exp(‖s‖²/(1−8A)) − 1]`` for ``A < 1/8``
    (docs/math.md §4)."""
    a = mpmath.mpf(a)
    if not a < mpmath.mpf(1) / 8:
        raise ValueError(f"the GERF variance is finite only for A < 1/8, got A = {a}")
    d = len(x)
    sm = mpmath.exp(_dot(x, y))
    growth = (1 + 16 * a * a / (1 - 8 * a)) ** (mpmath.mpf(d) / 2)
    return sm**2 * (growth * mpmath.exp(_sq(x + y) / (1 - 8 * a)) - 1)


def optimal_gerf_a_mp(x: np.ndarray, y: np.ndarray) -> Any:
    """``A* = (1/16)(1 − 2ρ − √((2ρ+1)² + 8ρ))``, ``ρ = ‖x+y‖²/d`` (docs/math.md §4), in mp."""
    rho = _sq(x + y) / len(x)
    return (1 - 2 * rho - mpmath.sqrt((2 * rho + 1) ** 2 + 8 * rho)) / 16


def _gerf_at_optimal(x: np.ndarray, y: np.ndarray) -> Any:
    """GERF's ``V₁(A*)`` at the per-input optimal ``A*`` (FAVOR++, docs/math.md §4)."""
    return gerf_per_feature_variance(optimal_gerf_a_mp(x, y), x, y)


#: formula -> ``(x, y) -> V₁`` at the formula's per-input optimal parameter (exact, mp).
OPTIMAL_VARIANCE = {"gerf": _gerf_at_optimal}


def _gerf(x, y, config):
    return mpmath.exp(_dot(x, y)), gerf_per_feature_variance(float(config["A"]), x, y)


def _relu(x, y, config):
    # sin θ = √(1−c²) and π−θ = acos(−c) are exact 0 at c = −1 (no rounded sin π)
    nxy = mpmath.sqrt(_sq(x) * _sq(y))  # ‖x‖‖y‖ with one rounding: c = −1 exactly for y = −x
    if nxy == 0:
        return mpmath.mpf(0), mpmath.mpf(0)
    c = min(max(_dot(x, y) / nxy, mpmath.mpf(-1)), mpmath.mpf(1))
    s = mpmath.sqrt(1 - c * c)
    rest = mpmath.acos(-c)  # π − θ
    j1 = s + rest * c
    j2 = 3 * s * c + rest * (1 + 2 * c * c)
    mean = nxy * j1 / (2 * mpmath.pi)
    return mean, nxy**2 * j2 / (2 * mpmath.pi) - mean**2


CLOSED_FORMS = {
    "rff_pairs": lambda x, y, c: _rff(x, y, c, phase=False),
    "rff_phase": lambda x, y, c: _rff(x, y, c, phase=True),
    "softmax_trig": _softmax_trig,
    "softmax_positive": _softmax_positive,
    "softmax_hyperbolic": _softmax_hyperbolic,
    "gerf": _gerf,
    "relu_features": _relu,
    "random_maclaurin": maclaurin.closed,
    "sderf": dense_exponential.closed,
    "darkformer": aligned.closed,
}


def closed_moments(formula: str, x: np.ndarray, y: np.ndarray, config: Mapping[str, Any]):
    """``(mean, V₁)`` of ``formula``'s per-frequency term from the table above."""
    closed = CLOSED_FORMS.get(formula)
    if closed is None:
        raise KeyError(f"no closed form for formula {formula!r}; known: {sorted(CLOSED_FORMS)}")
    return closed(x, y, config)


def _fixed_norm_rff(x, y, config, d, half_d, lam):
    sigma = mpmath.mpf(float(config["sigma"]))
    return mpmath.hyp0f1(half_d, -d * _sq(x - y) / (4 * sigma**2))


def _fixed_norm_trig(x, y, config, d, half_d, lam):
    return mpmath.hyp0f1(half_d, -d * _sq(x - y) / 4) / lam


def _fixed_norm_exp(x, y, config, d, half_d, lam):
    """softmax_positive and softmax_hyperbolic (``E cosh = E exp``: the law is symmetric)."""
    return lam * mpmath.hyp0f1(half_d, d * _sq(x + y) / 4)


def _fixed_norm_gerf(x, y, config, d, half_d, lam):
    a = mpmath.mpf(float(config["A"]))
    b2 = 1 - 4 * a
    pref = b2**half_d * lam * mpmath.exp(2 * a * d)  # D²Λe^(2A‖w‖²), ‖w‖² = d
    return pref * mpmath.hyp0f1(half_d, d * b2 * _sq(x + y) / 4)


def _fixed_norm_relu(x, y, config, d, half_d, lam):
    """relu(wᵀx)relu(wᵀy) is homogeneous of degree 2 in ‖w‖ and E‖w‖² = d for both laws."""
    return _relu(x, y, config)[0]


#: formula -> ``(x, y, config, d, d/2, e^(−(‖x‖² + ‖y‖²)/2)) -> E φ(x)ᵀφ(y)`` with rows uniform
#: on the sphere of radius √d.
FIXED_NORM_MEANS = {
    "rff_pairs": _fixed_norm_rff,
    "rff_phase": _fixed_norm_rff,
    "softmax_trig": _fixed_norm_trig,
    "softmax_positive": _fixed_norm_exp,
    "softmax_hyperbolic": _fixed_norm_exp,
    "gerf": _fixed_norm_gerf,
    "relu_features": _fixed_norm_relu,
}


def fixed_norm_mean(formula: str, x: np.ndarray, y: np.ndarray, config: Mapping[str, Any]):
    """``E φ(x)ᵀφ(y)`` with rows uniform on the sphere of radius √d (docs/math.md §3)."""
    d = len(x)
    half_d = mpmath.mpf(d) / 2
    lam = mpmath.exp(-(_sq(x) + _sq(y)) / 2)
    mean = FIXED_NORM_MEANS.get(formula)
    if mean is None:
        raise KeyError(f"no fixed-norm mean for formula {formula!r}")
    return mean(x, y, config, d, half_d, lam)
