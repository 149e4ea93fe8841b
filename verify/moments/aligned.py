"""Exact moments of DARKFormer's features (docs/math.md §21; Farzam et al. 2026, arXiv 2603.04127).

``φ(x) = m^(−1/2)·exp(εᵢᵀMx − ‖Mx‖²/2)``, ``ε ~ N(0, I_d)``: the per-frequency term is FAVOR+'s at
``(z, z') = (Mx, My)``, so its moments are those of ``softmax_positive`` there (docs/math.md §2):

* mean ``exp(zᵀz') = exp(xᵀΣy)``, ``Σ = MᵀM``;
* ``V₁ = e^(‖z+z'‖²)·SM²·(1 − e^(−‖z+z'‖²))``, ``SM = exp(zᵀz')``.

The raw moments ``E hᵏ`` (k ≤ 4) for the fourth moment come by the same quadrature
(:func:`raw_moments`). Two routes, as for every formula: :func:`closed` (the formula above)
and :func:`quadrature` (the Gauss–Hermite factorisation of ``softmax_positive``'s
exponential-sum integrand at ``(z, z')``).
``M`` is rebuilt from ``config``'s scalars exactly as the registry entry builds it
(:func:`alignment_matrix`: ``I + spread·G/√d``, ``G`` from ``default_rng([init_seed, d, 2603])``),
so the same float64 matrix, converted exactly, enters both routes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.moments.integrands import integrand, power_moments
from kernel_verify.verify.references.mp import to_mp

__all__ = ["aligned_pair", "alignment_matrix", "closed", "quadrature", "raw_moments"]


def alignment_matrix(config: Mapping[str, Any], d: int) -> np.ndarray:
    """DARKFormer's ``M`` (float64) from ``config["init_seed"]`` and ``config["spread"]``."""
    seed, spread = int(config["init_seed"]), float(config["spread"])
    if seed < 0 or not spread >= 0:
        raise ValueError(f"darkformer needs init_seed >= 0 and spread >= 0, got {seed}, {spread}")
    g = np.random.default_rng([seed, d, 2603]).standard_normal((d, d))
    return np.eye(d) + spread * g / math.sqrt(d)


def aligned_pair(x, y, config) -> tuple[np.ndarray, np.ndarray]:
    """``(Mx, My)`` as mp vectors: the point at which DARKFormer's term is FAVOR+'s."""
    a = to_mp(alignment_matrix(config, len(x)))
    return a @ np.asarray(x, dtype=object), a @ np.asarray(y, dtype=object)


def closed(x, y, config: Mapping[str, Any]) -> tuple[Any, Any]:
    """``(E h, V₁)`` in closed form (module docstring)."""
    z, w = aligned_pair(x, y, config)
    sm = mpmath.exp(mpmath.fsum(a * b for a, b in zip(z, w, strict=True)))
    s2 = mpmath.fsum((a + b) ** 2 for a, b in zip(z, w, strict=True))
    return sm, mpmath.exp(s2) * sm**2 * (1 - mpmath.exp(-s2))


def quadrature(x, y, config: Mapping[str, Any], dps: int) -> tuple[Any, Any]:
    """``(E h, V₁)`` by Gauss–Hermite quadrature of FAVOR+'s integrand at ``(Mx, My)``."""
    z, w = aligned_pair(x, y, config)
    mean, second = power_moments(integrand("softmax_positive", z, w, {}), dps, 2)
    return mean, second - mean**2


def raw_moments(x, y, config: Mapping[str, Any], dps: int) -> list:
    """``[E h, …, E h⁴]`` by quadrature of the powers of FAVOR+'s integrand at ``(Mx, My)`` (the
    fourth moment of the variance test, verify/moments/fourth.py)."""
    z, w = aligned_pair(x, y, config)
    return power_moments(integrand("softmax_positive", z, w, {}), dps, 4)
