"""Exact per-feature moments of random Maclaurin features of ``exp(xᵀy)`` (docs/math.md §18).

One feature is ``h = c_N·Π_(j<N) (w_jᵀx)(w_jᵀy)`` per pair, ``P(N = n) = (1 − 1/p)p^(−n)``,
``c_n = a_n/P(n)``, ``a_n = 1/n!``, ``w_j`` independent Rademacher vectors. With
``E(wᵀx)(wᵀy) = xᵀy = c`` and ``M = E(wᵀx)²(wᵀy)² = 2c² + ‖x‖²‖y‖² − 2Σᵢxᵢ²yᵢ²`` (the pairings
of ``E wᵢwⱼwₖwₗ``, the all-equal index counted once):

* ``E h = Σₙ P(n)c_n cⁿ = Σₙ cⁿ/n! = e^c`` (unbiased);
* ``E h² = Σₙ P(n)c_n² Mⁿ = Σₙ a_n² Mⁿ/P(n) = ₀F₁(; 1; pM)/(1 − 1/p)``; ``V₁ = E h² − e^(2c)``.

Two routes: :func:`closed` (the two closed forms above, ``M`` by its formula) and
:func:`enumerated` (``E(wᵀx)(wᵀy)`` and ``M`` by exact enumeration of the ``2^d`` sign
vectors, the two series summed term by term with ``mpmath.nsum``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.moments.gauss_hermite import QuadratureError

__all__ = ["MAX_ENUMERATED_D", "closed", "enumerated"]

#: Largest d whose 2^d sign vectors :func:`enumerated` sums.
MAX_ENUMERATED_D = 14


def _p(config: Mapping[str, Any]) -> Any:
    p = mpmath.mpf(float(config["p"]))
    if not p > 1:
        raise ValueError(f"config['p'] must be > 1, got {p}")
    return p


def closed(x: np.ndarray, y: np.ndarray, config: Mapping[str, Any]) -> tuple[Any, Any]:
    """``(E h, V₁)`` by the closed forms (module docstring); x, y mp vectors."""
    p = _p(config)
    c = mpmath.fsum(u * v for u, v in zip(x, y, strict=True))
    a, b = mpmath.fsum(u * u for u in x), mpmath.fsum(v * v for v in y)
    big_m = 2 * c * c + a * b - 2 * mpmath.fsum((u * v) ** 2 for u, v in zip(x, y, strict=True))
    mean = mpmath.exp(c)
    return mean, mpmath.hyp0f1(1, p * big_m) / (1 - 1 / p) - mean * mean


def enumerated(x: np.ndarray, y: np.ndarray, config: Mapping[str, Any]) -> tuple[Any, Any]:
    """``(E h, V₁)`` by enumerating the sign vectors and summing the series (module
    docstring); :class:`QuadratureError` (this route does not cover the point) for
    ``d > MAX_ENUMERATED_D``."""
    p = _p(config)
    d = len(x)
    if d > MAX_ENUMERATED_D:
        raise QuadratureError(f"enumeration over 2^d sign vectors needs d <= {MAX_ENUMERATED_D}, "
                         f"got d = {d}")
    first = second = mpmath.mpf(0)
    for signs in itertools.product((1, -1), repeat=d):
        px = mpmath.fsum(s * u for s, u in zip(signs, x, strict=True))
        py = mpmath.fsum(s * v for s, v in zip(signs, y, strict=True))
        first += px * py
        second += (px * py) ** 2
    first, second = first / 2**d, second / 2**d
    q = 1 - 1 / p

    def coef(n: Any) -> Any:
        return p**n / (mpmath.factorial(n) * q)

    mean = mpmath.nsum(lambda n: q * p**-n * coef(n) * first**n, [0, mpmath.inf])
    sq = mpmath.nsum(lambda n: q * p**-n * coef(n) ** 2 * second**n, [0, mpmath.inf])
    return mean, sq - mean * mean
