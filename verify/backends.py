"""The backend axis, chosen once: array library × device × dtype.

One :class:`Backend` names where an array lives and in which dtype (``numpy`` float64/float32;
``torch`` on ``cpu`` and ``cuda`` in float64/float32/float16/bfloat16), converts float64 NumPy
arrays to it and back, says why it cannot run here (``skip_reason``), and gives the key of its
error budget in :data:`kernel_verify.verify.tolerance.BUDGETS` (``tolerance_key`` /
``budget``). Properties, reports and benchmarks all take their axis from :data:`AXIS`, so an
unavailable backend is *skipped with its reason* everywhere, never dropped.

Conversions are exact in one direction: :meth:`Backend.from_numpy` rounds a float64 array once to
the backend's dtype; :meth:`Backend.to_numpy` widens any result to float64 (every dtype here
widens exactly). ``backend.seen(x)`` is ``to_numpy(from_numpy(x))``: the input exactly as the
code under test sees it, which is what every reference must be computed from.

This module sits at the bottom of the stack: it imports NumPy, torch (lazily) and
:mod:`kernel_verify.verify.tolerance`, nothing of ``impls`` and nothing above it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from kernel_verify.verify.tolerance import Budget, budget_for, native_budget_for

__all__ = ["AXIS", "DTYPES", "LIBRARIES", "Backend", "as_float64", "axis", "get_backend"]

LIBRARIES = ("numpy", "torch")
DTYPES = ("float64", "float32", "float16", "bfloat16")
#: NumPy has no bfloat16, and its float16 is no compute type of this project's maps.
NUMPY_DTYPES = ("float64", "float32")


@cache
def _cuda_reason() -> str | None:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch:cuda skipped: torch.cuda.is_available() is False on this machine (no GPU)"
    return None


@dataclass(frozen=True)
class Backend:
    """One point of the axis: ``library`` (numpy, torch), ``device`` (cpu, cuda), ``dtype``."""

    library: str
    device: str
    dtype: str
    #: The target may round every operation to a half dtype (third-party code that does not
    #: upcast): :attr:`budget` is then :func:`~kernel_verify.verify.tolerance.native_budget_for`'s.
    #: The axis holds False; the properties set it per target (``properties.attention_cases``).
    native_half: bool = False

    @property
    def name(self) -> str:
        """``numpy``, ``torch:cpu`` or ``torch:cuda`` (the device part of the axis)."""
        return "numpy" if self.library == "numpy" else f"torch:{self.device}"

    @property
    def id(self) -> str:
        """``numpy-float64``, ``torch:cpu-bfloat16``, …: the pytest id of this point."""
        return f"{self.name}-{self.dtype}"

    def __str__(self) -> str:
        return self.id

    @property
    def skip_reason(self) -> str | None:
        """Why this backend cannot run on this machine, or None."""
        if self.library == "torch" and self.device == "cuda":
            return _cuda_reason()
        return None

    @property
    def available(self) -> bool:
        return self.skip_reason is None

    @property
    def tolerance_key(self) -> tuple[str, str]:
        """The key of this backend's error budget in ``verify.tolerance.BUDGETS``."""
        return (self.dtype, self.device)

    @property
    def budget(self) -> Budget:
        """The error budget (ulps, compute dtype, cast-back rounding) of this backend."""
        return (native_budget_for if self.native_half else budget_for)(self.dtype, self.device)

    def native_dtype(self) -> Any:
        """``numpy.dtype`` or ``torch.dtype`` of this backend."""
        if self.library == "numpy":
            return np.dtype(self.dtype)
        import torch

        return getattr(torch, self.dtype)

    def from_numpy(self, x: Any) -> Any:
        """A float64 array (or anything NumPy reads) on this backend, rounded once to its dtype."""
        a = np.asarray(x, dtype=np.float64)
        if self.library == "numpy":
            return a.astype(self.dtype)
        import torch

        return torch.as_tensor(a, dtype=torch.float64).to(device=self.device,
                                                          dtype=self.native_dtype())

    def from_numpy_params(self, params: Any) -> Any:
        """A float64 parameter draw (``name → array``) as this backend's maps take it: NumPy
        arrays unchanged; torch float64 tensors on the device (tensors are moved). The maps
        convert parameters to their compute dtype themselves, so the draw stays float64 here."""
        if self.library == "numpy":
            return params
        import torch

        return {key: (value.to(device=self.device, dtype=torch.float64)
                      if isinstance(value, torch.Tensor)
                      else torch.as_tensor(np.asarray(value), dtype=torch.float64,
                                           device=self.device))
                for key, value in params.items()}

    @property
    def torch_device(self) -> str | None:
        """The torch device (``cpu``, ``cuda``) of a torch backend; None for NumPy."""
        return None if self.library == "numpy" else self.device

    def to_numpy(self, x: Any) -> np.ndarray:
        """Any result of this (or another) backend as a float64 NumPy array, exactly."""
        return as_float64(x)

    def seen(self, x: Any) -> np.ndarray:
        """``x`` as the code under test sees it: rounded to this dtype, widened back exactly."""
        return self.to_numpy(self.from_numpy(x))

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is an array of this backend (library, device and dtype)."""
        if self.library == "numpy":
            return isinstance(value, np.ndarray) and value.dtype == np.dtype(self.dtype)
        return (type(value).__module__.startswith("torch") and hasattr(value, "device")
                and value.device.type == self.device and value.dtype == self.native_dtype())


def as_float64(x: Any) -> np.ndarray:
    """A NumPy array, torch tensor (any device, any dtype, bfloat16 included) or array-like as a
    float64 NumPy array (exact for every dtype of :data:`DTYPES`)."""
    if type(x).__module__.startswith("torch") and hasattr(x, "detach"):
        import torch

        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def axis(libraries: tuple[str, ...] = LIBRARIES, dtypes: tuple[str, ...] = DTYPES,
         devices: tuple[str, ...] = ("cpu", "cuda")) -> tuple[Backend, ...]:
    """Every backend of ``libraries`` × ``devices`` × ``dtypes`` that exists (NumPy: CPU,
    float64/float32), unavailable ones included (they carry their ``skip_reason``)."""
    out = []
    for lib in libraries:
        for dev in devices:
            if lib == "numpy" and dev != "cpu":
                continue
            for dt in dtypes:
                if lib == "numpy" and dt not in NUMPY_DTYPES:
                    continue
                out.append(Backend(lib, dev, dt))
    return tuple(out)


#: The full axis: numpy float64/float32; torch float64/float32/float16/bfloat16 on cpu and cuda.
AXIS: tuple[Backend, ...] = axis()


def get_backend(spec: str) -> Backend:
    """The backend with id ``spec`` (``'torch:cpu-float32'``) or ``name:dtype`` spelling
    (``'torch:cpu:float32'``, ``'numpy:float64'``); a ``KeyError`` lists the known ids."""
    for b in AXIS:
        if spec in (b.id, f"{b.name}:{b.dtype}"):
            return b
    raise KeyError(f"unknown backend {spec!r}; known: {', '.join(b.id for b in AXIS)}")
