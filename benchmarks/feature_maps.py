"""Cost of features ``φ(x)`` for every registered map (every family), forward and backward.

The entry list is read from the registry at import time
(:func:`kernel_verify.impls.registry.all_maps`), so a newly registered map is benchmarked without
editing this file. ``case`` pairs a backend with a dtype it computes (``numpy/float64``,
``torch:cpu/bfloat16``, …; torch computes float16/bfloat16 in float32 and casts back), so no
impossible combination is generated. Inputs ``x (n, 16)`` with ``N(0, 1/4)`` entries,
``m = max(256, min_m)`` random features (deterministic/exact maps ignore ``m``). Backward:
``∂ Σφ(x) / ∂x`` on the torch backends in float32.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from benchmarks._common import (
    BACKENDS,
    DTYPES,
    BackendBenchmark,
    positions_for,
    rng_for,
    smoke,
    sync,
)
from kernel_verify.impls.attention import map_features
from kernel_verify.impls.registry import FeatureMap, all_maps, get
from kernel_verify.verify.backends import Backend

#: every registered map, sorted (``family`` is part of each entry; see ``--bench`` regexes).
ENTRIES: list[str] = smoke(sorted(e.name for e in all_maps()))
#: ``backend/dtype`` pairs this machine runs.
CASES: list[str] = smoke([f"{b}/{t}" for b in BACKENDS for t in DTYPES[b]])
TORCH_CASES: list[str] = [f"{b}/float32" for b in BACKENDS if b.startswith("torch:")]
D = 16
N = 1024
M = 256


def prepare(
    entry: FeatureMap, backend: Backend, n: int, m: int, d: int = D
) -> tuple[Any, dict[str, Any], dict[str, Any], Any]:
    """Seeded inputs ``x`` (entries ``N(0, 1/4)``, rounded once to ``backend``'s dtype), the
    parameter draw (float64, on ``backend``'s device), the config and positions.

    Positional maps get positions ``0..n-1`` and ``M = n`` (if the map has an ``M`` setting).
    """
    m = max(m, entry.min_m)
    rng = rng_for(entry.name, n, m, d)
    config = dict(entry.config)
    if entry.has("positional") and "M" in config:
        config["M"] = n
    params = entry.draw(rng, d, m, config)
    x = backend.from_numpy(0.5 * rng.standard_normal((n, d)))
    positions = positions_for(n, backend) if entry.has("positional") else None
    return x, backend.from_numpy_params(params), config, positions


class _MapBenchmark(BackendBenchmark):
    """The set-up of the feature-map benchmarks (no benchmark of its own): the backend of
    ``case``, the registry entry ``name``, its inputs (:func:`prepare`) with ``m`` features."""

    def setup(self, name: str, case: str, m: int = M) -> None:
        self.use(*case.split("/"))
        self.entry = get(name)
        self.x, self.p, self.config, self.positions = prepare(self.entry, self.backend, N, m)


class FeatureMaps(_MapBenchmark):
    """``φ(x)`` of every registered map: x ``(1024, 16)``, ``m = 256`` random features."""

    params: ClassVar[list[Any]] = [ENTRIES, CASES]
    param_names: ClassVar[list[str]] = ["entry", "case"]
    timeout = 60.0

    def time_features(self, name: str, case: str) -> None:
        map_features(self.entry, self.x, self.p, config=self.config, positions=self.positions)
        sync(self.backend)


class FeatureMapsBackward(_MapBenchmark):
    """``∂ Σφ(x)/∂x`` (forward + backward) of every registered map, torch float32."""

    params: ClassVar[list[Any]] = [ENTRIES, smoke(TORCH_CASES)]
    param_names: ClassVar[list[str]] = ["entry", "case"]
    timeout = 60.0

    def setup(self, name: str, case: str) -> None:
        super().setup(name, case)
        self.x.requires_grad_(True)

    def time_features_backward(self, name: str, case: str) -> None:
        out = map_features(self.entry, self.x, self.p, config=self.config,
                           positions=self.positions)
        torch.autograd.grad(out.sum(), self.x)
        sync(self.backend)


#: Maps timed at large ``m`` (the GPU run's feature-map cells; one of each construction kind).
LARGE_M_ENTRIES: list[str] = smoke(["softmax_positive[iid]", "softmax_positive[orthogonal]",
                                    "gerf[iid]", "rff_pairs[iid]"])
LARGE_MS: list[int] = smoke([4096, 16384])


class FeatureMapsLargeM(_MapBenchmark):
    """``φ(x)`` at large ``m`` (x ``(1024, 16)``, float32 torch): where a GPU earns its keep, the
    ``n × m`` projection and the elementwise exponentials over it."""

    params: ClassVar[list[Any]] = [LARGE_M_ENTRIES, smoke(TORCH_CASES), LARGE_MS]
    param_names: ClassVar[list[str]] = ["entry", "case", "m"]
    timeout = 60.0

    def time_features(self, name: str, case: str, m: int) -> None:
        map_features(self.entry, self.x, self.p, config=self.config, positions=self.positions)
        sync(self.backend)
