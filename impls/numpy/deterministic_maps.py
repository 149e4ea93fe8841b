"""Deterministic feature maps used in linear attention, in plain NumPy (docs/math.md §6).

Each map induces the kernel ``k(x, y) = φ(x)ᵀφ(y)`` (declared in the registry so the references
can evaluate it). Shapes: ``x (..., n, d)`` → ``(..., n, D)`` in the dtype of ``x``.

* :func:`elu_plus_one`: ``elu(x)+1`` (Katharopoulos et al. 2020, "PosELU"): ``x+1`` for ``x > 0``
  and ``exp(x)`` otherwise (computed as ``exp(x)``, not ``expm1(x)+1``, so small features keep
  their relative accuracy). Positive in exact arithmetic; ``exp`` underflows to 0 below about
  −745 (float64) / −103 (float32).
* :func:`relu`: ``relu(x)``. Features can all be 0 (e.g. ``x ≤ 0``): attention denominators can
  be 0, so linear attention needs its ``zero_denominator`` guard. Claim: ``nonnegative``.
* :func:`square`: ``x⊙x``, kernel ``Σ x_i² y_i²``.
* :func:`identity`: ``φ(x) = x``, kernel ``xᵀy``. Can be negative: normalised linear attention
  with it is ill-posed (denominators of either sign or 0); registered as a negative control.
* :func:`cosformer`: at position ``i`` (0 ≤ i ≤ M), ``[relu(x)·sin(πi/2M), relu(x)·cos(πi/2M)]``
  (Qin et al. 2022). Kernel ``relu(x)ᵀrelu(y)·cos(π(i−j)/2M)`` by ``sin a sin b + cos a cos b =
  cos(a−b)``. Needs ``positions=`` (integer array of shape ``(n,)``) and ``M`` in ``config``.
* :func:`dpfp`: ``r = [relu x, relu(−x)] ∈ R^(2d)``, ``φ = concat_(j=1..ν) r ⊙ roll(r, j)``
  (Schlag et al. 2021), size ``2dν``; ``roll(r, j)[k] = r[k−j mod 2d]``.
* :func:`hedgehog`: ``[softmax(Wx+b), softmax(−(Wx+b))]`` (Zhang et al. 2024) with ``W (d, d)``,
  ``b (d,)`` given in ``config`` (``None`` = the seeded default of :func:`hedgehog_weights`).
  The registry entry's ``draw`` (:func:`draw_hedgehog`) resolves them into ``params``, so the
  mpmath reference computes from ``params`` alone; the map reads them from ``params`` when they
  are there and otherwise resolves ``config`` itself (:func:`hedgehog_values`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from kernel_verify.impls.validation import (
    Config,
    NumpyParams,
    check_array,
    check_drawn_for,
    check_numpy_input,
    check_params,
    check_positive_int,
    config_value,
)

__all__ = [
    "check_positions",
    "cosformer",
    "dpfp",
    "draw_hedgehog",
    "elu_plus_one",
    "hedgehog",
    "hedgehog_values",
    "hedgehog_weights",
    "identity",
    "log_elu_plus_one",
    "log_hedgehog",
    "relu",
    "square",
]


def elu_plus_one(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ(x) = elu(x) + 1``: ``x + 1`` for ``x > 0``, ``exp(x)`` for ``x ≤ 0``."""
    check_numpy_input(x)
    return np.where(x > 0, x + x.dtype.type(1), np.exp(np.minimum(x, 0)))


def log_elu_plus_one(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``log(elu(x) + 1)``: ``log1p(x)`` for ``x > 0`` and exactly ``x`` for ``x ≤ 0`` (never
    underflows, unlike ``φ`` itself)."""
    check_numpy_input(x)
    return np.where(x > 0, np.log1p(np.maximum(x, 0)), x)


def relu(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ(x) = max(x, 0)``: kernel ``relu(x)ᵀrelu(y)`` (zero denominators possible)."""
    check_numpy_input(x)
    return np.maximum(x, x.dtype.type(0))


def square(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ(x) = x⊙x``: kernel ``Σ_i x_i² y_i²``."""
    check_numpy_input(x)
    return x * x


def identity(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``φ(x) = x``: kernel ``xᵀy`` (normalisation ill-posed: it can be ≤ 0)."""
    check_numpy_input(x)
    return x.copy()


def check_positions(positions: Any, n: int, big_m: Any) -> tuple[np.ndarray, int]:
    """Validate cosFormer positions (integers in ``[0, M]``, shape ``(n,)``) and ``M >= 1``."""
    big_m = check_positive_int("M", big_m)
    if positions is None:
        raise ValueError(
            "cosformer needs positions=: an integer array of shape (n,) with 0 <= i <= M"
        )
    if type(positions).__module__.startswith("torch"):
        positions = positions.detach().cpu().numpy()
    pos = np.asarray(positions)
    if not np.issubdtype(pos.dtype, np.integer):
        raise TypeError(f"positions must be an integer array, got dtype {pos.dtype}")
    if pos.shape != (n,):
        raise ValueError(f"positions must have shape ({n},) (one per row of x), got {pos.shape}")
    if pos.size and (pos.min() < 0 or pos.max() > big_m):
        raise ValueError(
            f"positions must lie in [0, M={big_m}], got range [{pos.min()}, {pos.max()}]"
        )
    return pos, big_m


def cosformer(
    x: np.ndarray,
    params: NumpyParams,
    config: Config,
    *,
    positions: Any = None,
) -> np.ndarray:
    """``[relu(x)·sin(πi/2M), relu(x)·cos(πi/2M)]``: kernel ``relu(x)ᵀrelu(y)·cos(π(i−j)/2M)``."""
    check_numpy_input(x)
    pos, big_m = check_positions(positions, x.shape[-2], config_value(config, "M"))
    angle = (math.pi / (2 * big_m)) * pos.astype(np.float64)
    r = np.maximum(x, x.dtype.type(0))
    s = np.sin(angle).astype(x.dtype)[:, None]
    c = np.cos(angle).astype(x.dtype)[:, None]
    return np.concatenate([r * s, r * c], axis=-1)


def dpfp(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``concat_(j=1..ν) r ⊙ roll(r, j)``, ``r = [relu x, relu(−x)]`` (size ``2dν``)."""
    check_numpy_input(x)
    nu = check_positive_int("nu", config_value(config, "nu"))
    zero = x.dtype.type(0)
    r = np.concatenate([np.maximum(x, zero), np.maximum(-x, zero)], axis=-1)
    return np.concatenate([r * np.roll(r, j, axis=-1) for j in range(1, nu + 1)], axis=-1)


@lru_cache(maxsize=32)
def _default_hedgehog(seed: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, d])
    w = rng.standard_normal((d, d)) / math.sqrt(d)
    b = 0.1 * rng.standard_normal(d)
    w.setflags(write=False)
    b.setflags(write=False)
    return w, b


def hedgehog_weights(config: Mapping[str, Any], d: int) -> dict[str, np.ndarray]:
    """``{"W": (d, d), "b": (d,)}`` from ``config``: user arrays (validated), or for ``None`` the
    seeded default ``W ~ N(0, 1/d)``, ``b ~ N(0, 0.1²)`` drawn from
    ``default_rng([config["init_seed"], d])`` (deterministic; cached)."""
    seed = check_positive_int("init_seed", config_value(config, "init_seed"), minimum=0)
    w_default, b_default = _default_hedgehog(seed, d)
    w = w_default if config_value(config, "W") is None else np.asarray(config_value(config, "W"))
    b = b_default if config_value(config, "b") is None else np.asarray(config_value(config, "b"))
    for name, value, shape in (("W", w, (d, d)), ("b", b, (d,))):
        check_array(f"config[{name!r}]", value)
        if value.shape != shape:
            raise ValueError(
                f"config[{name!r}] must have shape {shape} for d={d}, got {value.shape}"
            )
    return {"W": w.astype(np.float64), "b": b.astype(np.float64)}


def draw_hedgehog(
    rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    """The registry ``draw`` of Hedgehog: no randomness, the weights of :func:`hedgehog_weights`
    (copies) as the parameters every backend and the reference share."""
    return {k: np.array(v, dtype=np.float64) for k, v in hedgehog_weights(config, d).items()}


def hedgehog_values(
    params: NumpyParams, config: Config, d: int, *, backend: str | None = None
) -> dict[str, Any]:
    """``W`` and ``b``: from ``params`` (the entry's draw) when present, else from ``config``
    (validated either way)."""
    check_params("params", params, {}, backend=backend)
    from_config = hedgehog_weights(config, d)
    if "W" in params or "b" in params:
        check_params("params", params, {"W": (None, None), "b": (None,)}, backend=backend)
        check_drawn_for("x", d, params["W"].shape[1])
        check_params("params", params, {"W": (d, d), "b": (d,)}, backend=backend)
        return {"W": params["W"], "b": params["b"]}
    return from_config


def _log_softmax(z: np.ndarray) -> np.ndarray:
    shift = np.max(z, axis=-1, keepdims=True)
    return z - shift - np.log(np.sum(np.exp(z - shift), axis=-1, keepdims=True))


def log_hedgehog(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``[log_softmax(z), log_softmax(−z)]``, ``z = Wx + b``."""
    check_numpy_input(x)
    weights = hedgehog_values(params, config, x.shape[-1], backend="numpy")
    z = x @ weights["W"].astype(x.dtype).T + weights["b"].astype(x.dtype)
    return np.concatenate([_log_softmax(z), _log_softmax(-z)], axis=-1)


def hedgehog(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``[softmax(Wx+b), softmax(−(Wx+b))]`` (size 2d; positive, each half sums to 1)."""
    return np.exp(log_hedgehog(x, params, config))
