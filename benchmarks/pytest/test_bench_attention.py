"""Exact softmax vs linear vs log-space linear attention (pytest-benchmark; docs/math.md §9).

One head, ``q, k, v`` of shape ``(1024, 64)``, float32, ``softmax_positive[iid]`` features with
``m = 64``; compare the three rows of a group with ``pytest benchmarks/pytest -k attention``.
Each benchmark also checks its output has the input's shape and is finite.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from benchmarks._common import float32_params, sync
from benchmarks.attention import LINEAR_ENTRY, linear_params, qkv
from kernel_verify.impls.attention import feature_map_attention
from kernel_verify.impls.numpy import attention as np_attention
from kernel_verify.impls.registry import get
from kernel_verify.impls.torch import attention as torch_attention
from kernel_verify.verify.backends import Backend

N, M = 1024, 64


#: Every backend in float32, skipped with the reason where it cannot run here (never dropped).
ALL_BACKENDS = float32_params()


def _finite(out: Any) -> bool:
    if isinstance(out, torch.Tensor):
        return bool(torch.isfinite(out).all())
    return bool(np.isfinite(out).all())


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_exact_softmax(benchmark: Any, backend: Backend, causal: bool) -> None:
    benchmark.group = f"attention {backend.name} causal={causal}"
    q, k, v = qkv(backend, N)
    att = np_attention if backend.library == "numpy" else torch_attention

    def run() -> Any:
        out = att.softmax_attention(q, k, v, causal=causal)
        sync(backend)
        return out

    out = benchmark(run)
    assert tuple(out.shape) == (N, 64) and _finite(out)


@pytest.mark.parametrize("path", ["plain", "log"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("backend", ALL_BACKENDS)
def test_linear(benchmark: Any, backend: Backend, causal: bool, path: str) -> None:
    benchmark.group = f"attention {backend.name} causal={causal}"
    q, k, v = qkv(backend, N)
    entry, params = get(LINEAR_ENTRY), linear_params(backend, M)

    def run() -> Any:
        out = feature_map_attention(entry, params, q, k, v, causal=causal, use_log=path == "log")
        sync(backend)
        return out

    out = benchmark(run)
    assert tuple(out.shape) == (N, 64) and _finite(out)
