"""Feature maps per backend (pytest-benchmark): x ``(4096, 16)``, ``m = 256``, float32.

Each benchmark checks the features' shape against the entry's ``output_dim``. Compare with
``pytest benchmarks/pytest -k maps``.
"""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks._common import float32_params, sync
from benchmarks.feature_maps import prepare
from kernel_verify.impls.attention import map_features
from kernel_verify.impls.registry import get
from kernel_verify.verify.backends import Backend

#: one random-feature entry per formula of interest (the asv suite times every map).
RANDOM_ENTRIES = [
    "softmax_positive[iid]",
    "softmax_hyperbolic[orthogonal]",
    "rff_pairs[iid]",
    "gerf[iid]",
    "relu_features[iid]",
]

N, M, D = 4096, 256, 16


#: Every backend in float32, skipped with the reason where it cannot run here (never dropped).
ALL_BACKENDS = float32_params()


@pytest.mark.parametrize("backend", ALL_BACKENDS)
@pytest.mark.parametrize("name", RANDOM_ENTRIES)
def test_maps(benchmark: Any, name: str, backend: Backend) -> None:
    benchmark.group = f"maps {name}"
    entry = get(name)
    x, params, config, positions = prepare(entry, backend, N, M, D)

    def run() -> Any:
        out = map_features(entry, x, params, config=config, positions=positions)
        sync(backend)
        return out

    out = benchmark(run)
    assert tuple(out.shape) == (N, entry.output_dim(D, M))
