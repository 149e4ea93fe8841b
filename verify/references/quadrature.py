"""Gauss–Hermite and Gauss–Legendre rules at high precision (nodes and weights, cached).

Used by the references (the generative kernel's Gauss–Hermite integral) and by the moments (the
docs/math.md §0 reduction, the ORF covariance integral), so it sits below both: the moments import
the references, never the other way round.

* Gauss–Hermite for the N(0, 1) density: ``E f(g) ≈ Σ wᵢ f(gᵢ)``, exact for polynomials of
  degree < 2n; nodes are the roots of the probabilists' Hermite polynomial ``He_n``.
* Gauss–Legendre on ``[−1, 1]``: ``∫ f ≈ Σ wᵢ f(tᵢ)``, nodes the roots of ``P_n``.

Both refine NumPy's float64 nodes by Newton's method at ``dps + 10`` digits (Golub & Welsch give
the same rules from the Jacobi matrix; Newton from good starting points is simpler here), and are
cached in memory and in the file cache (:mod:`kernel_verify.verify.cache`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import mpmath
import numpy as np

from kernel_verify.verify.cache import file_cache_get, file_cache_put, mpf_from_json, mpf_to_json

__all__ = ["MAX_ORDER", "QuadratureError", "gauss_legendre", "hermite_rule"]

MAX_ORDER = 256


class QuadratureError(ArithmeticError):
    """A quadrature did not converge to the requested digits within the supported orders."""


def _cached_rule(kind: str, order: int, dps: int,
                 compute: Callable[[int, int], tuple[tuple, tuple]]) -> tuple[tuple, tuple]:
    """A quadrature rule ``(nodes, weights)`` at ``dps`` digits from the file cache, else from
    ``compute(order, dps)``; stored exactly (signed binary records,
    :func:`~kernel_verify.verify.cache.mpf_to_json`), so a rule read back is the computed one bit
    for bit."""
    if order < 1 or order > MAX_ORDER:
        raise ValueError(f"order must be in [1, {MAX_ORDER}], got {order}")
    key = f"{kind}:{order}:{dps}"
    stored = file_cache_get("rules", key)
    if stored is not None:
        return tuple(map(mpf_from_json, stored[0])), tuple(map(mpf_from_json, stored[1]))
    nodes, weights = compute(order, dps)
    file_cache_put("rules", key, [[mpf_to_json(v) for v in nodes],
                                  [mpf_to_json(v) for v in weights]])
    return nodes, weights


@functools.lru_cache(maxsize=64)
def hermite_rule(order: int, dps: int) -> tuple[tuple, tuple]:
    """Nodes and weights of the ``order``-point Gauss–Hermite rule for the N(0,1) density, at
    ``dps`` digits: ``E f(g) ≈ Σ wᵢ f(gᵢ)``, exact for polynomials of degree < 2·order.

    Nodes are the roots of the probabilists' Hermite polynomial ``He_n`` (three-term recurrence
    ``He_(k+1) = g·He_k − k·He_(k−1)``), found by Newton's method from NumPy's float64 rule
    (only the roots ≥ 0: the rule is symmetric); weights ``wᵢ = n!/(n·He_(n−1)(gᵢ))²``.
    Cached in memory and in the file cache (:mod:`kernel_verify.verify.cache`)."""
    return _cached_rule("hermite", order, dps, _hermite_newton)


def _hermite_newton(order: int, dps: int) -> tuple[tuple, tuple]:
    start, _ = np.polynomial.hermite_e.hermegauss(order)
    half = [float(g) for g in start if g >= 0]
    with mpmath.workdps(dps + 10):
        tol = mpmath.mpf(10) ** (-(dps + 8))
        log_fact = mpmath.loggamma(order + 1)
        pos = []
        for g0 in half:
            g = mpmath.mpf(g0)
            for _ in range(100):
                he_prev, he = _hermite_pair(g, order)
                step = he / (order * he_prev)  # He_n' = n·He_(n−1)
                g -= step
                if abs(step) <= tol * (1 + abs(g)):
                    break
            else:  # pragma: no cover - Newton from the float64 roots always converges
                raise QuadratureError(f"Hermite root refinement failed (order {order})")
            he_prev, _ = _hermite_pair(g, order)
            weight = mpmath.exp(log_fact - 2 * mpmath.log(order * abs(he_prev)))
            pos.append((g, weight))
        pairs = [(-g, w) for g, w in reversed(pos) if g != 0] + pos
    with mpmath.workdps(dps):
        return tuple(+g for g, _ in pairs), tuple(+w for _, w in pairs)


def _hermite_pair(g, order: int):
    """``(He_(n−1)(g), He_n(g))`` by the three-term recurrence."""
    he_prev, he = mpmath.mpf(1), g
    for k in range(1, order):
        he_prev, he = he, g * he - k * he_prev
    return he_prev, he


@functools.lru_cache(maxsize=64)
def gauss_legendre(order: int, dps: int) -> tuple[tuple, tuple]:
    """Gauss–Legendre nodes and weights on [−1, 1] at ``dps`` digits (Newton on ``P_n`` from
    NumPy's float64 rule); cached in memory and in the file cache."""
    return _cached_rule("legendre", order, dps, _legendre_newton)


def _legendre_newton(order: int, dps: int) -> tuple[tuple, tuple]:
    start, _ = np.polynomial.legendre.leggauss(order)
    with mpmath.workdps(dps + 10):
        tol = mpmath.mpf(10) ** (-(dps + 8))
        nodes, weights = [], []
        for t0 in start:
            t = mpmath.mpf(float(t0))
            for _ in range(100):
                p_prev, p = mpmath.mpf(1), t
                for k in range(1, order):
                    p_prev, p = p, ((2 * k + 1) * t * p - k * p_prev) / (k + 1)
                dp = order * (t * p - p_prev) / (t * t - 1)
                step = p / dp
                t -= step
                if abs(step) <= tol:
                    break
            p_prev, p = mpmath.mpf(1), t
            for k in range(1, order):
                p_prev, p = p, ((2 * k + 1) * t * p - k * p_prev) / (k + 1)
            dp = order * (t * p - p_prev) / (t * t - 1)
            nodes.append(t)
            weights.append(2 / ((1 - t * t) * dp * dp))
    with mpmath.workdps(dps):
        return tuple(+t for t in nodes), tuple(+w for w in weights)
