"""Backends and dtypes under test, from the one axis of :mod:`kernel_verify.verify.backends`.

Every backend is always a test parameter; one that is unavailable here is *skipped with its
reason*, never silently dropped, so the pytest summary shows what was not tested.

Two spellings, one axis: :func:`backend_axis` gives :class:`~kernel_verify.verify.backends.Backend`
objects (new code); :func:`backend_params` gives the ``(backend name, dtype)`` string pairs that
older properties and unit tests take.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kernel_verify.impls.torch.convert import to_torch
from kernel_verify.verify.backends import AXIS, DTYPES, Backend, as_float64, get_backend

BACKENDS = ("numpy", "torch:cpu", "torch:cuda")
__all__ = ["BACKENDS", "DTYPES", "backend_axis", "backend_params", "header_lines",
           "params_to_backend", "to_backend", "to_numpy", "unavailable_reason"]


def _marks(b: Backend) -> list:
    marks = [pytest.mark.skip(reason=b.skip_reason)] if b.skip_reason else []
    if b.device == "cuda":
        marks.append(pytest.mark.cuda)
    return marks


def backend_axis(dtypes: tuple[str, ...] = DTYPES) -> list[Any]:
    """``pytest.param(Backend)`` for every backend of the axis in ``dtypes``, marked skip (with
    the reason) where unavailable."""
    return [pytest.param(b, marks=_marks(b), id=b.id) for b in AXIS if b.dtype in dtypes]


def unavailable_reason(backend: str) -> str | None:
    """Why ``backend`` (``numpy``, ``torch:cpu``, ``torch:cuda``) cannot run here, or None."""
    return get_backend(f"{backend}:float64").skip_reason


def supports_dtype(backend: str, dtype: str) -> bool:
    """NumPy has no bfloat16, and its float16 is not a compute type for these maps."""
    return any(b.name == backend and b.dtype == dtype for b in AXIS)


def backend_params(dtypes: tuple[str, ...] = ("float64",)) -> list[Any]:
    """``pytest.param(backend, dtype)`` for every pair, marked skip where unavailable."""
    return [pytest.param(b.name, b.dtype, marks=_marks(b), id=b.id)
            for b in AXIS if b.dtype in dtypes]


def to_backend(x: np.ndarray, backend: str, dtype: str) -> Any:
    """A float64 NumPy array on ``backend`` in ``dtype`` (rounded once)."""
    return get_backend(f"{backend}:{dtype}").from_numpy(x)


def params_to_backend(params: dict[str, np.ndarray], backend: str) -> dict[str, Any]:
    """The float64 parameter draw as the backend wants it (torch converts to float64 tensors on
    the device; the maps convert to their compute dtype)."""
    if backend == "numpy":
        return params
    import torch

    return to_torch(params, device=backend.split(":", 1)[1], dtype=torch.float64)


def to_numpy(x: Any) -> np.ndarray:
    """Any backend's result as a float64 NumPy array (exact: every dtype here widens exactly)."""
    return as_float64(x)


def header_lines() -> list[str]:
    lines = []
    for backend in BACKENDS:
        reason = unavailable_reason(backend)
        lines.append(f"  {backend}: {'available' if reason is None else reason}")
    return lines
