"""Backends, dtypes, seeded inputs and thread pinning shared by the asv benchmark classes.

A backend is a :class:`~kernel_verify.verify.backends.Backend` of the one axis; asv keeps its
parameter strings ``"numpy"``, ``"torch:cpu"``, ``"torch:cuda"`` (``Backend.name``) and dtype
names, so the dashboards' history survives; each ``setup`` turns its pair into the Backend once
(:func:`require`, through :func:`point`) and from then on holds the object: every conversion
(arrays, parameter draws, devices, skip reasons) is the Backend's own, none is written here.
Parameter lists hold only combinations that can run: impossible
ones (float16 on NumPy, ``m`` below a map's minimum) are never generated, and ``torch:cuda``
appears only where ``torch.cuda.is_available()`` — elsewhere the one benchmark
:class:`benchmarks.devices.CudaDevice` skips once with the reason. A CUDA machine's results
carry the CUDA series alongside the CPU ones (same names, same parameters); CUDA timings
synchronise inside the timed function. ``KV_BENCH_SMOKE=1`` keeps the first value of every
parameter list (``make bench-check``: every benchmark runs once, fast).

Threads: torch's intra-op pool and OpenBLAS (NumPy's BLAS) are pinned to :data:`THREADS` in
``setup`` and restored in ``teardown`` (:class:`PinnedThreads`) — never set at import — so
histories from machines with different core counts stay comparable, and NumPy is not timed
through OpenBLAS's thread hand-off: on this 2-core machine 64 products ``(64×256)·(256×64)`` took
2.06 s with 2 OpenBLAS threads and 0.008 s with 1 (``OPENBLAS_NUM_THREADS``), which would have made
every chunked causal NumPy timing measure thread wake-ups. OpenBLAS is found among the loaded
libraries (``/proc/self/maps``) and driven through its C API; without it (another BLAS, another
OS) NumPy keeps its default threads.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np
import torch

from kernel_verify.verify.backends import AXIS, Backend
from kernel_verify.verify.seeds import rng as seeded_rng

#: Every backend name of the one backend axis (:data:`kernel_verify.verify.backends.AXIS`).
ALL_BACKENDS: list[str] = list(dict.fromkeys(b.name for b in AXIS))
#: The backends this machine runs (``torch:cuda`` only with a GPU: the axis' skip reason).
BACKENDS: list[str] = list(dict.fromkeys(b.name for b in AXIS if b.available))
#: Dtypes per backend, from the axis (torch computes float16/bfloat16 in float32, casts back).
DTYPES: dict[str, list[str]] = {
    name: [b.dtype for b in AXIS if b.name == name] for name in ALL_BACKENDS
}
SMOKE = os.environ.get("KV_BENCH_SMOKE", "") not in ("", "0")


def smoke(values: list[Any]) -> list[Any]:
    """``values``, or only its first element under ``KV_BENCH_SMOKE=1``."""
    return values[:1] if SMOKE else values


def slowdown() -> int:
    """How many times a benchmark that honours ``KV_BENCH_SLOWDOWN`` repeats its work (default 1):
    the deliberately slowed run of the regression-check demonstration (docs/benchmarks.md)."""
    return max(1, int(os.environ.get("KV_BENCH_SLOWDOWN", "1")))
#: Base seed; each benchmark mixes in its own parameters so every combination has its own stream.
SEED = 20240611


def point(backend: str, dtype: str = "float64") -> Backend:
    """The point of the one backend axis (:data:`kernel_verify.verify.backends.AXIS`) for an asv
    parameter pair: asv keeps its parameter strings (so the history survives), everything else
    (conversions, skip reasons) is the axis'. Raises ``NotImplementedError`` (asv: skipped) for
    a pair the axis does not have (float16 on NumPy)."""
    if backend not in ALL_BACKENDS:
        raise ValueError(f"backend must be one of {ALL_BACKENDS}, got {backend!r}")
    for b in AXIS:
        if b.name == backend and b.dtype == dtype:
            return b
    raise NotImplementedError(f"{backend}: {dtype} is not a compute dtype of this backend")


def require(backend: str, dtype: str = "float64") -> Backend:
    """The :class:`Backend` of an asv parameter pair, chosen once in ``setup`` (everything after
    takes the object: its conversions, device, dtype); raises ``NotImplementedError`` (asv:
    skipped) with the axis' reason if it cannot run here."""
    b = point(backend, dtype)
    if b.skip_reason is not None:
        raise NotImplementedError(b.skip_reason)
    return b


def rng_for(*key: Any) -> np.random.Generator:
    """A Generator for :data:`SEED` and ``key`` (stable across runs and machines): the one seed
    module's child stream (:func:`kernel_verify.verify.seeds.rng`, key parts by their repr)."""
    return seeded_rng(SEED, *(repr(part) for part in key))


def positions_for(n: int, backend: Backend) -> Any:
    """Token positions ``0..n-1`` for positional maps, on ``backend``."""
    dev = backend.torch_device
    return np.arange(n) if dev is None else torch.arange(n, device=dev)


def sync(backend: Backend) -> None:
    """Wait for queued CUDA work, so a timing covers the computation, not its launch."""
    if backend.torch_device == "cuda":
        torch.cuda.synchronize()


def _openblas_controls() -> list[tuple[Any, Any]]:
    """``(get, set)`` thread-count functions of every OpenBLAS loaded in this process."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return []
    names = [
        ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
        ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
        ("openblas_get_num_threads", "openblas_set_num_threads"),
    ]
    controls = []
    for path in sorted(p for p in paths if p.startswith("/")):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for get_name, set_name in names:
            if hasattr(lib, get_name) and hasattr(lib, set_name):
                getter, setter = getattr(lib, get_name), getattr(lib, set_name)
                getter.restype, setter.argtypes = ctypes.c_int, [ctypes.c_int]
                controls.append((getter, setter))
                break
    return controls


#: threads for torch and OpenBLAS during a benchmark (restored afterwards).
THREADS = 1


class PinnedThreads:
    """Sets torch's and OpenBLAS's thread counts to ``threads`` until :meth:`restore`."""

    def __init__(self, threads: int = THREADS) -> None:
        self._torch = torch.get_num_threads()
        self._blas = [(setter, getter()) for getter, setter in _openblas_controls()]
        torch.set_num_threads(threads)
        for setter, _ in self._blas:
            setter(threads)

    def restore(self) -> None:
        torch.set_num_threads(self._torch)
        for setter, saved in self._blas:
            setter(saved)


class BackendBenchmark:
    """Base class: pins threads in :meth:`pin` (called by ``setup``, or through :meth:`use`);
    ``teardown`` restores."""

    _threads: PinnedThreads | None = None

    def pin(self) -> None:
        self._threads = PinnedThreads()

    def use(self, backend: str, dtype: str) -> None:
        """The first step of a backend benchmark's ``setup``: ``self.backend`` =
        :func:`require` ``(backend, dtype)`` (asv: skipped where it cannot run), then
        :meth:`pin`."""
        self.backend = require(backend, dtype)
        self.pin()

    def teardown(self, *args: Any) -> None:
        if self._threads is not None:
            self._threads.restore()
            self._threads = None


def float32_params() -> list[Any]:
    """pytest parameters of the pytest-benchmark files: every backend in float32, skipped with
    the reason where it cannot run here (never dropped); ids are the backend names (``numpy``,
    ``torch:cpu``, ``torch:cuda``). pytest is imported here, not at the top: asv imports this
    module without it."""
    import pytest

    return [
        pytest.param(b, id=b.name, marks=[pytest.mark.skip(reason=r)] if (r := b.skip_reason)
                     else [])
        for b in (point(name, "float32") for name in BACKENDS)
    ]
