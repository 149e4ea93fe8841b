"""Per-frequency integrands ``h(w; x, y)`` of every random-feature estimator, as exponential sums.

Each estimator of docs/math.md §1, §2, §4 has ``φ(x)ᵀφ(y) = (1/m)·Σᵢ h(wᵢ; x, y)`` (m frequencies).
Written from the feature definitions with Euler's formula (``cos θ = (e^(iθ) + e^(−iθ))/2``, …),
``h`` is a finite sum of terms

    c · exp(a·u + b·v + e·‖w‖² + i·k·β),   u = wᵀx̃, v = wᵀỹ,

(a, b, c complex, e real, k an integer: the frequency of the random phase β ~ U[0, 2π), whose
expectation keeps only k = 0). Products of sums are expanded mechanically (:func:`mul`), so
``h²`` needs no algebra by hand. :mod:`kernel_verify.verify.moments.estimators` integrates the
terms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.moments.gauss_hermite import expect_exp_terms

__all__ = ["FORMULAS_WITH_TERMS", "Integrand", "Terms", "integrand", "mul", "power_moments"]

#: (a, b, e, k) -> coefficient
Terms = dict[tuple[Any, Any, Any, int], Any]


def _add_term(out: Terms, key: tuple, coef: Any) -> None:
    total = out.get(key, 0) + coef
    if total == 0:
        out.pop(key, None)
    else:
        out[key] = total


def mul(p: Terms, q: Terms) -> Terms:
    """The exponential sum of the product ``p·q`` (exponents add, coefficients multiply)."""
    out: Terms = {}
    for (a1, b1, e1, k1), c1 in p.items():
        for (a2, b2, e2, k2), c2 in q.items():
            _add_term(out, (a1 + a2, b1 + b2, e1 + e2, k1 + k2), c1 * c2)
    return out


def add(p: Terms, q: Terms) -> Terms:
    out = dict(p)
    for key, coef in q.items():
        _add_term(out, key, coef)
    return out


def scale(p: Terms, c: Any) -> Terms:
    return {key: coef * c for key, coef in p.items()} if c != 0 else {}


def _exp(a: Any = 0, b: Any = 0, e: Any = 0, k: int = 0) -> Terms:
    zero = mpmath.mpf(0)
    return {(mpmath.mpc(a) + zero, mpmath.mpc(b) + zero, mpmath.mpf(e), k): mpmath.mpf(1)}


def _cos(a: Any, b: Any, k: int = 0) -> Terms:
    """``cos(a·u + b·v + kβ)`` for real a, b."""
    j = mpmath.mpc(0, 1)
    return add(scale(_exp(j * a, j * b, 0, k), mpmath.mpf(1) / 2),
               scale(_exp(-j * a, -j * b, 0, -k), mpmath.mpf(1) / 2))


def _sin(a: Any, b: Any, k: int = 0) -> Terms:
    j = mpmath.mpc(0, 1)
    return add(scale(_exp(j * a, j * b, 0, k), 1 / (2 * j)),
               scale(_exp(-j * a, -j * b, 0, -k), -1 / (2 * j)))


@dataclass(frozen=True)
class Integrand:
    """``h`` as terms in ``u = wᵀx_eff``, ``v = wᵀy_eff`` (mp vectors), and the dimension d."""

    terms: Terms
    x_eff: np.ndarray
    y_eff: np.ndarray
    d: int


def _sq(v: np.ndarray) -> Any:
    return mpmath.fsum(t * t for t in v)


def _sigma(config: Mapping[str, Any]) -> Any:
    sigma = float(config["sigma"])
    if not sigma > 0:
        raise ValueError(f"config['sigma'] must be > 0, got {sigma}")
    return mpmath.mpf(sigma)


def _rff_pairs(x, y, config):
    # φ = m^(-1/2)[cos u, sin u]: h = cos u cos v + sin u sin v,  u = wᵀx/σ (docs/math.md §1)
    sig = _sigma(config)
    h = add(mul(_cos(1, 0), _cos(0, 1)), mul(_sin(1, 0), _sin(0, 1)))
    return h, x / sig, y / sig


def _rff_phase(x, y, config):
    # φ = √(2/m) cos(u + β): h = 2 cos(u + β) cos(v + β) (docs/math.md §1)
    sig = _sigma(config)
    return scale(mul(_cos(1, 0, 1), _cos(0, 1, 1)), 2), x / sig, y / sig


def _softmax_trig(x, y, config):
    # φ = e^(‖x‖²/2) m^(-1/2)[cos u, sin u]: h = e^((‖x‖²+‖y‖²)/2)(cos u cos v + sin u sin v)
    pref = mpmath.exp((_sq(x) + _sq(y)) / 2)
    h = add(mul(_cos(1, 0), _cos(0, 1)), mul(_sin(1, 0), _sin(0, 1)))
    return scale(h, pref), x, y


def _softmax_positive(x, y, config):
    # φ = m^(-1/2) e^(u − ‖x‖²/2): h = e^(u − ‖x‖²/2)·e^(v − ‖y‖²/2)
    return scale(_exp(1, 1), mpmath.exp(-(_sq(x) + _sq(y)) / 2)), x, y


def _softmax_hyperbolic(x, y, config):
    # φ = (2m)^(-1/2) e^(−‖x‖²/2)[e^u, e^(−u)]: h = ½e^(−(‖x‖²+‖y‖²)/2)(e^u e^v + e^(−u) e^(−v))
    lam = mpmath.exp(-(_sq(x) + _sq(y)) / 2)
    return scale(add(_exp(1, 1), _exp(-1, -1)), lam / 2), x, y


def _gerf(x, y, config):
    # φ = m^(-1/2) D e^(A‖w‖² + B u − ‖x‖²/2): h = D² e^(2A‖w‖² + B(u+v) − (‖x‖²+‖y‖²)/2) (§4)
    a = mpmath.mpf(float(config["A"]))
    if not a < mpmath.mpf(1) / 4:
        raise ValueError(f"config['A'] must be < 1/4, got {a}")
    d = len(x)
    b = mpmath.sqrt(1 - 4 * a)
    d2 = (1 - 4 * a) ** (mpmath.mpf(d) / 2)
    pref = d2 * mpmath.exp(-(_sq(x) + _sq(y)) / 2)
    return scale(_exp(b, b, 2 * a), pref), x, y


_BUILDERS = {
    "rff_pairs": _rff_pairs,
    "rff_phase": _rff_phase,
    "softmax_trig": _softmax_trig,
    "softmax_positive": _softmax_positive,
    "softmax_hyperbolic": _softmax_hyperbolic,
    "gerf": _gerf,
}

#: Formulas whose per-frequency integrand is an exponential sum (relu_features is not).
FORMULAS_WITH_TERMS = frozenset(_BUILDERS)


def integrand(formula: str, x: np.ndarray, y: np.ndarray, config: Mapping[str, Any]) -> Integrand:
    """The integrand of ``formula`` for mp vectors ``x``, ``y`` (at the caller's precision)."""
    build = _BUILDERS.get(formula)
    if build is None:
        raise KeyError(
            f"no exponential-sum integrand for formula {formula!r}; known: {sorted(_BUILDERS)}"
        )
    terms, x_eff, y_eff = build(x, y, config)
    return Integrand(terms, x_eff, y_eff, len(x))


def power_moments(itg: Integrand, dps: int, k: int) -> list:
    """``[E h, …, E hᵏ]`` of an exponential-sum integrand: each power of its terms (:func:`mul`)
    integrated term by term (:func:`~kernel_verify.verify.moments.gauss_hermite.expect_exp_terms`)
    at ``dps`` digits."""
    power, out = itg.terms, []
    for j in range(k):
        if j:
            power = mul(power, itg.terms)
        out.append(expect_exp_terms(power, itg.x_eff, itg.y_eff, itg.d, dps))
    return out
