"""Backends and dtypes under test, from the one axis of :mod:`kernel_verify.verify.backends`.

Every backend is always a test parameter; one that is unavailable here is *skipped with its
reason*, never silently dropped, so the pytest summary shows what was not tested.

One spelling: a property takes one ``backend`` argument, a
:class:`~kernel_verify.verify.backends.Backend` (library × device × dtype), parametrised by
:func:`backend_axis` (or :func:`backend_param` for a case that pairs it with a target). Arrays go
to it with ``backend.from_numpy``, parameter draws with ``backend.from_numpy_params``, results
come back with :func:`to_numpy`; ``backend.id`` (``torch:cpu-float32``) is the pytest id and
``get_backend(id)`` its inverse for reproduction commands.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kernel_verify.verify.backends import AXIS, DTYPES, LIBRARIES, Backend, as_float64

__all__ = ["DTYPES", "backend_axis", "backend_param", "header_lines", "to_numpy"]


def _marks(b: Backend) -> list:
    marks = [pytest.mark.skip(reason=b.skip_reason)] if b.skip_reason else []
    if b.device == "cuda":
        marks.append(pytest.mark.cuda)
    return marks


def backend_param(*values: Any, backend: Backend, id: str | None = None) -> Any:
    """``pytest.param(*values, backend)`` marked skip (with the reason) where ``backend`` is
    unavailable and ``cuda`` on a CUDA device; id ``backend.id`` unless given."""
    return pytest.param(*values, backend, marks=_marks(backend), id=id or backend.id)


def backend_axis(dtypes: tuple[str, ...] = DTYPES,
                 libraries: tuple[str, ...] = LIBRARIES) -> list[Any]:
    """``pytest.param(Backend)`` for every backend of the axis in ``dtypes`` and ``libraries``,
    marked skip (with the reason) where unavailable."""
    return [backend_param(backend=b) for b in AXIS
            if b.dtype in dtypes and b.library in libraries]


def to_numpy(x: Any) -> np.ndarray:
    """Any backend's result as a float64 NumPy array (exact: every dtype here widens exactly)."""
    return as_float64(x)


def header_lines() -> list[str]:
    """One line per backend name of the axis: available, or why not."""
    lines = []
    for name in dict.fromkeys(b.name for b in AXIS):
        reason = next(b.skip_reason for b in AXIS if b.name == name)
        lines.append(f"  {name}: {'available' if reason is None else reason}")
    return lines
