"""Exact finite feature maps in plain NumPy: ``φ(x)ᵀφ(y)`` equals the kernel up to rounding.

Every function takes ``x`` of shape ``(..., n, d)``, ``params`` (unused: these maps have no
random parameters) and ``config``, and returns features ``(..., n, D)`` in the dtype of ``x``.
Formulas: docs/math.md §5 (Taylor, polynomial) and §6 (linear, cosine).

* :func:`taylor`: tensor powers ``[z^(⊗k)/√(k!)]_(k=0..p)`` with ``z = x·d^(-1/4)``, so that
  ``φ(q)ᵀφ(k) = Σ_(k≤p) tᵏ/k!``, ``t = qᵀk/√d``. Order 2 is the full Based map
  ``[1, x/d^(1/4), vec(xxᵀ)/(√2·√d)]`` (Arora et al. 2024); size ``Σ_(k≤p) dᵏ``.
* :func:`taylor2_compressed`: ``[1, z, z_i²/√2, (z_i z_j)_(i<j)]``, size ``1 + d + d(d+1)/2``:
  the same inner product ``1 + t + t²/2`` (each off-diagonal pair of vec(zzᵀ) appears twice, so
  ``2·(z_i z_j)(w_i w_j)/2 = (z_i z_j)(w_i w_j)``).
* :func:`polynomial`: the monomial map of ``(xᵀy + c)^p``. With ``x̃ = [√c, x]`` the multinomial
  theorem gives ``(x̃ᵀỹ)^p = Σ_(|α|=p) (p!/α!)·Π (x̃_i ỹ_i)^(α_i)``, so
  ``φ_α(x) = √(p!/α!)·Π x̃_i^(α_i)`` over the ``C(d+p, p)`` multi-indices α of ``d+1`` variables.
  Needs ``c >= 0`` (for ``c < 0`` there is no real map: ``(xᵀy + c)^p`` is not PSD).
* :func:`linear`: ``φ(x) = x``, kernel ``xᵀy``.
* :func:`cosine`: ``φ(x) = x/‖x‖`` with **φ(0) = 0**, so ``k(x, y) = cos∠(x, y)`` for nonzero
  x, y and ``k(0, y) = 0``. ``x`` is first scaled by a power of two (exact) so that ``‖x‖``
  neither overflows nor underflows.
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import combinations_with_replacement
from typing import Any

import numpy as np

from kernel_verify.impls.validation import (
    Config,
    NumpyParams,
    check_numpy_input,
    check_positive_int,
    check_scalar,
    config_value,
)

__all__ = [
    "check_order",
    "cosine",
    "linear",
    "polynomial",
    "polynomial_dim",
    "polynomial_indices",
    "taylor",
    "taylor2_compressed",
    "taylor_dim",
]


def check_order(name: str, value: Any) -> int:
    """A non-negative integer order (``p >= 0``)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return int(value)


def taylor_dim(d: int, order: int) -> int:
    """``Σ_(k≤p) dᵏ``: the size of the tensor-power Taylor map."""
    d = check_positive_int("d", d)
    order = check_positive_int("order", order, minimum=0)
    return sum(d**k for k in range(order + 1))


def polynomial_dim(d: int, p: int) -> int:
    """``C(d + p, p)``: the number of monomials of degree p in d+1 variables."""
    d = check_positive_int("d", d)
    p = check_positive_int("p", p, minimum=0)
    return math.comb(d + p, p)


@lru_cache(maxsize=64)
def polynomial_indices(d: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """``(idx, coef)``: ``idx[a]`` lists the p variables (0 = the constant √c, 1..d = x) of
    monomial ``a``; ``coef[a] = √(p!/α!)`` (α = the multiplicities). Read-only, cached."""
    combos = list(combinations_with_replacement(range(d + 1), p))
    idx = np.array(combos, dtype=np.intp).reshape(len(combos), p)
    coef = np.empty(len(combos))
    for a, combo in enumerate(combos):
        multinomial = math.factorial(p)
        for v in set(combo):
            multinomial //= math.factorial(combo.count(v))
        coef[a] = math.sqrt(multinomial)
    idx.setflags(write=False)
    coef.setflags(write=False)
    return idx, coef


def taylor(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ_p(x) = [z^(⊗k)/√(k!)]_(k=0..p)``, ``z = x·d^(-1/4)``: ``φ_p(q)ᵀφ_p(k) = Σ_(k≤p) tᵏ/k!``,
    ``t = qᵀk/√d`` (docs/math.md §5; order 2 = Based's full map)."""
    check_numpy_input(x)
    order = check_order("order", config_value(config, "order"))
    d = x.shape[-1]
    z = x * x.dtype.type(d**-0.25)
    blocks = [np.ones((*x.shape[:-1], 1), dtype=x.dtype)]
    power = blocks[0]
    for k in range(1, order + 1):
        power = (power[..., :, None] * z[..., None, :]).reshape(*x.shape[:-1], d**k)
        blocks.append(power * x.dtype.type(1.0 / math.sqrt(math.factorial(k))))
    return np.concatenate(blocks, axis=-1)


def taylor2_compressed(
    x: np.ndarray, params: NumpyParams, config: Config
) -> np.ndarray:
    """``[1, z, z_i²/√2, (z_i z_j)_(i<j)]``, ``z = x·d^(-1/4)``: inner product ``1 + t + t²/2``."""
    check_numpy_input(x)
    d = x.shape[-1]
    z = x * x.dtype.type(d**-0.25)
    i, j = np.triu_indices(d, k=1)
    return np.concatenate(
        [
            np.ones((*x.shape[:-1], 1), dtype=x.dtype),
            z,
            (z * z) * x.dtype.type(1.0 / math.sqrt(2.0)),
            z[..., i] * z[..., j],
        ],
        axis=-1,
    )


def polynomial(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ_α(x) = √(p!/α!)·Π x̃_i^(α_i)``, ``x̃ = [√c, x]``: ``φ(x)ᵀφ(y) = (xᵀy + c)^p`` (§5)."""
    check_numpy_input(x)
    p = check_order("p", config_value(config, "p"))
    c = check_scalar("c", config_value(config, "c"), nonnegative=True)
    d = x.shape[-1]
    idx, coef = polynomial_indices(d, p)
    const = np.full((*x.shape[:-1], 1), math.sqrt(c), dtype=x.dtype)
    xt = np.concatenate([const, x], axis=-1)
    return np.prod(xt[..., idx], axis=-1) * coef.astype(x.dtype)


def linear(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ(x) = x``: kernel ``xᵀy`` (docs/math.md §6)."""
    check_numpy_input(x)
    return x.copy()


def cosine(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ(x) = x/‖x‖``, ``φ(0) = 0``: kernel ``cos∠(x, y)`` (0 when x or y is 0)."""
    check_numpy_input(x)
    peak = np.max(np.abs(x), axis=-1, keepdims=True)
    _, exponent = np.frexp(peak)
    scaled = np.ldexp(x, -exponent)  # exact: |scaled| < 1, max ≥ 1/2 (outside subnormals)
    norm = np.sqrt(np.sum(scaled * scaled, axis=-1, keepdims=True))
    safe = np.where(norm > 0, norm, np.ones_like(norm))
    return np.where(norm > 0, scaled / safe, np.zeros_like(scaled))
