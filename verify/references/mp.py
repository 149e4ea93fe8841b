"""Conventions shared by every mpmath reference.

* An mp array is a NumPy ``object`` array of :class:`mpmath.mpf`. :func:`to_mp` converts float
  inputs *exactly* (``mpf(float(v))``: every binary64 value is an mpf without rounding);
  :func:`to_float` rounds the result back *once* to the requested dtype.
* The working precision is a context: ``with working_precision(dps): ...``; the default comes
  from the environment variable ``KV_MP_DPS`` (decimal digits, default 40 — well above the 16 of
  float64, so a correctly rounded float64 result can be read off).
* Element-wise functions on mp arrays: :data:`mp_exp`, :data:`mp_cos`, … (``np.frompyfunc``
  wrappers; ``x @ y`` works on object arrays and sums in mp arithmetic).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import mpmath
import numpy as np

DEFAULT_DPS = int(os.environ.get("KV_MP_DPS", "40"))


@contextlib.contextmanager
def working_precision(dps: int | None = None) -> Iterator[int]:
    """Run the block at ``dps`` decimal digits (default :data:`DEFAULT_DPS`); yields the dps."""
    dps = DEFAULT_DPS if dps is None else int(dps)
    if dps < 16:
        raise ValueError(f"dps must be >= 16 for a float64 reference, got {dps}")
    with mpmath.workdps(dps):
        yield dps


def to_mp(a: np.ndarray | float) -> np.ndarray:
    """Exact conversion of a float array (any float dtype) to an mp array of the same shape."""
    arr = np.asarray(a)
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"to_mp needs a real numeric array, got dtype {arr.dtype}")
    flat = [mpmath.mpf(float(v)) for v in arr.astype(np.float64).ravel()]
    out = np.empty(arr.shape, dtype=object)
    out.ravel()[:] = flat if flat else []
    return out


def to_float(a: np.ndarray, dtype: np.dtype | type = np.float64) -> np.ndarray:
    """Round an mp array to ``dtype`` once, to nearest: each value is rounded to the dtype's
    significand width in mpmath, after which the conversion is exact (outside the subnormal range,
    where a second rounding can occur)."""
    arr = np.asarray(a, dtype=object)
    bits = np.finfo(dtype).nmant + 1
    with mpmath.workprec(bits):
        rounded = [float(+mpmath.mpf(v)) for v in arr.ravel()]
    return np.array(rounded, dtype=np.float64).reshape(arr.shape).astype(dtype)


mp_exp = np.frompyfunc(mpmath.exp, 1, 1)
mp_log = np.frompyfunc(mpmath.log, 1, 1)
mp_cos = np.frompyfunc(mpmath.cos, 1, 1)
mp_sin = np.frompyfunc(mpmath.sin, 1, 1)
mp_sqrt = np.frompyfunc(mpmath.sqrt, 1, 1)
mp_abs = np.frompyfunc(abs, 1, 1)
mp_max0 = np.frompyfunc(lambda v: v if v > 0 else mpmath.mpf(0), 1, 1)
