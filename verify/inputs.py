"""Input checks of the truth side (references, moments): NumPy arrays and Python scalars only.

The truth does not borrow the validators of the code it verifies (``impls.validation``): a
reference that rejected or accepted input through the implementation's own checks could not
catch a defect in them. These helpers raise ``TypeError``/``ValueError`` naming the argument; the
wording follows the implementations' messages where tests match on it ("contains NaN or Inf",
"must have at least k dimensions", "must have shape").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["check_array", "check_params", "check_positive_int", "check_scalar"]


def check_array(name: str, x: Any, *, min_ndim: int = 1, backend: str | None = None) -> None:
    """``x`` is a floating ``numpy.ndarray`` with at least ``min_ndim`` axes and finite values.

    ``backend`` is accepted for call compatibility; the truth only takes NumPy arrays (an
    object array of mpf values is not accepted here: callers convert after checking)."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"{name} must have a floating dtype, got {x.dtype.name}")
    if x.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {x.shape}")
    if x.size and not bool(np.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or Inf")


def check_params(
    name: str, params: Mapping[str, Any], required: Mapping[str, tuple[int | None, ...]]
) -> None:
    """Every key of ``required`` is in ``params`` with that shape (``None`` = any length)."""
    for key, shape in required.items():
        if key not in params:
            raise ValueError(
                f"{name} is missing parameter {key!r} (parameters come from the entry's draw); "
                f"has {sorted(params)}"
            )
        got = tuple(np.shape(params[key]))
        if len(got) != len(shape) or any(
            w is not None and g != w for g, w in zip(got, shape, strict=True)
        ):
            raise ValueError(f"{name}[{key!r}] must have shape {shape} (None = any), got {got}")
        check_array(f"{name}[{key!r}]", np.asarray(params[key]), min_ndim=len(shape))


def check_positive_int(name: str, value: Any, *, minimum: int = 1) -> int:
    """An integer (not a bool) ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_scalar(
    name: str,
    value: Any,
    *,
    positive: bool = False,
    nonnegative: bool = False,
    below: float | None = None,
) -> float:
    """A finite real number, optionally ``> 0``, ``>= 0`` or ``< below``."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if positive and v <= 0:
        raise ValueError(f"{name} must be > 0, got {v}")
    if nonnegative and v < 0:
        raise ValueError(f"{name} must be >= 0, got {v}")
    if below is not None and v >= below:
        raise ValueError(f"{name} must be < {below}, got {v}")
    return v
