"""Backends and dtypes under test, chosen from what is installed (array-api-tests style).

A backend is ``"numpy"``, ``"torch:cpu"`` or ``"torch:cuda"``. Every backend is always a test
parameter; one that is unavailable here is *skipped with its reason*, never silently dropped, so
the pytest summary shows what was not tested.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from kernel_verify.impls.torch.convert import to_torch

BACKENDS = ("numpy", "torch:cpu", "torch:cuda")
DTYPES = ("float64", "float32", "float16", "bfloat16")


def unavailable_reason(backend: str) -> str | None:
    """Why ``backend`` cannot run here, or None."""
    if backend == "torch:cuda" and not torch.cuda.is_available():
        return "torch:cuda skipped: torch.cuda.is_available() is False on this machine (no GPU)"
    return None


def supports_dtype(backend: str, dtype: str) -> bool:
    """NumPy has no bfloat16, and its float16 is not a compute type for these maps."""
    return not (backend == "numpy" and dtype in ("float16", "bfloat16"))


def backend_params(dtypes: tuple[str, ...] = ("float64",)) -> list[Any]:
    """``pytest.param(backend, dtype)`` for every pair, marked skip where unavailable."""
    out = []
    for backend in BACKENDS:
        for dtype in dtypes:
            if not supports_dtype(backend, dtype):
                continue
            reason = unavailable_reason(backend)
            marks = [pytest.mark.skip(reason=reason)] if reason else []
            if backend == "torch:cuda":
                marks.append(pytest.mark.cuda)
            out.append(pytest.param(backend, dtype, marks=marks, id=f"{backend}-{dtype}"))
    return out


def torch_dtype(dtype: str) -> torch.dtype:
    return getattr(torch, dtype)


def to_backend(x: np.ndarray, backend: str, dtype: str) -> Any:
    """A float64 NumPy array on ``backend`` in ``dtype`` (rounded once)."""
    if backend == "numpy":
        return x.astype(dtype)
    device = backend.split(":", 1)[1]
    return torch.as_tensor(x, dtype=torch.float64).to(device=device, dtype=torch_dtype(dtype))


def params_to_backend(params: dict[str, np.ndarray], backend: str) -> dict[str, Any]:
    """The float64 parameter draw as the backend wants it (torch converts to float64 tensors on
    the device; the maps convert to their compute dtype)."""
    if backend == "numpy":
        return params
    return to_torch(params, device=backend.split(":", 1)[1], dtype=torch.float64)


def to_numpy(x: Any) -> np.ndarray:
    """Any backend's result as a float64 NumPy array (exact: every dtype here widens exactly)."""
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def header_lines() -> list[str]:
    lines = []
    for backend in BACKENDS:
        reason = unavailable_reason(backend)
        lines.append(f"  {backend}: {'available' if reason is None else reason}")
    return lines
