"""Exact softmax vs linear vs stable log-space linear attention (docs/math.md §9).

One head, ``q, k, v`` of shape ``(n, 64)`` with ``N(0, 1)`` entries. Linear attention uses
Performer's positive features ``softmax_positive[iid]`` (the softmax-kernel estimator, so the three
paths estimate the same attention) through :func:`impls.attention.feature_map_attention`:
``path="plain"`` forms ``φ(q), φ(k)`` and runs ``linear_attention``; ``path="log"`` forms
``log φ`` and runs ``log_linear_attention``. Both include the feature-map cost, as a user pays it.

Memory: the causal path carries an ``m×d_v`` prefix state over chunks of 64 rows, so its memory is
``O(n(m + d))`` — never an ``n×m×d`` tensor. ``CausalLinearAttentionMemory`` records peak RSS
(asv ``peakmem_``, which includes the interpreter and the inputs); ``CausalLinearAttentionTraced``
records the bytes the call itself allocates at its peak (``tracemalloc`` for NumPy,
``torch.cuda.max_memory_allocated`` for CUDA; torch's CPU allocator is invisible to both, so
that combination is skipped), a deterministic number to divide by ``n(m + d)·itemsize``.
"""

from __future__ import annotations

import tracemalloc
from typing import Any, ClassVar

import torch

from benchmarks._common import (
    BACKENDS,
    BackendBenchmark,
    params_to_backend,
    require,
    rng_for,
    sync,
    to_backend,
)
from kernel_verify.impls.attention import feature_map_attention
from kernel_verify.impls.numpy import attention as np_attention
from kernel_verify.impls.registry import get
from kernel_verify.impls.torch import attention as torch_attention

D = 64
LINEAR_ENTRY = "softmax_positive[iid]"
DTYPES = ["float32", "float64"]


def qkv(backend: str, dtype: str, n: int, d: int = D) -> tuple[Any, Any, Any]:
    """Seeded ``q, k, v`` of shape ``(n, d)`` on ``backend`` in ``dtype``."""
    rng = rng_for("qkv", n, d)
    return tuple(to_backend(rng.standard_normal((n, d)), backend, dtype) for _ in range(3))


def linear_params(backend: str, m: int, d: int = D) -> dict[str, Any]:
    """The ``softmax_positive[iid]`` draw for ``(m, d)``, on ``backend``."""
    entry = get(LINEAR_ENTRY)
    return params_to_backend(entry.draw(rng_for(LINEAR_ENTRY, m, d), d, m, entry.config), backend)


class SoftmaxAttention(BackendBenchmark):
    """Exact ``softmax(qkᵀ/√d)v``: ``O(n²d)`` time, an ``n×n`` score matrix."""

    params: ClassVar[list[Any]] = [BACKENDS, DTYPES, [1024, 4096], [False, True]]
    param_names: ClassVar[list[str]] = ["backend", "dtype", "n", "causal"]
    timeout = 120.0
    repeat = (1, 5, 10.0)  # up to 5 samples or 10 s: the n = 4096 float64 runs take ~1 s each

    def setup(self, backend: str, dtype: str, n: int, causal: bool) -> None:
        require(backend, dtype)
        self.pin()
        self.q, self.k, self.v = qkv(backend, dtype, n)
        self.att = np_attention if backend == "numpy" else torch_attention

    def time_softmax_attention(self, backend: str, dtype: str, n: int, causal: bool) -> None:
        self.att.softmax_attention(self.q, self.k, self.v, causal=causal)
        sync(backend)


class LinearAttention(BackendBenchmark):
    """``feature_map_attention`` with ``softmax_positive[iid]``: ``O(nmd)`` time."""

    params: ClassVar[list[Any]] = [
        BACKENDS, DTYPES, [1024, 4096], [64, 256], [False, True], ["plain", "log"]
    ]
    param_names: ClassVar[list[str]] = ["backend", "dtype", "n", "m", "causal", "path"]
    timeout = 120.0
    repeat = (1, 5, 10.0)  # the NumPy float64 causal log path takes ~4 s at n = 4096, m = 256

    def setup(self, backend: str, dtype: str, n: int, m: int, causal: bool, path: str) -> None:
        require(backend, dtype)
        self.pin()
        self.entry = get(LINEAR_ENTRY)
        self.q, self.k, self.v = qkv(backend, dtype, n)
        self.p = linear_params(backend, m)

    def time_feature_map_attention(
        self, backend: str, dtype: str, n: int, m: int, causal: bool, path: str
    ) -> None:
        feature_map_attention(
            self.entry, self.p, self.q, self.k, self.v, causal=causal, use_log=path == "log"
        )
        sync(backend)


class CausalLinearAttentionMemory(BackendBenchmark):
    """Peak RSS of causal linear attention at large ``n`` (float32, d = 64)."""

    params: ClassVar[list[Any]] = [BACKENDS, [4096, 65536], [64, 256]]
    param_names: ClassVar[list[str]] = ["backend", "n", "m"]
    timeout = 120.0

    def setup(self, backend: str, n: int, m: int) -> None:
        require(backend, "float32")
        self.pin()
        self.entry = get(LINEAR_ENTRY)
        self.q, self.k, self.v = qkv(backend, "float32", n)
        self.p = linear_params(backend, m)

    def peakmem_causal_linear_attention(self, backend: str, n: int, m: int) -> None:
        feature_map_attention(
            self.entry, self.p, self.q, self.k, self.v, causal=True, use_log=False
        )
        sync(backend)


class CausalLinearAttentionTraced(BackendBenchmark):
    """Bytes allocated at the peak of one causal linear-attention call (float32, d = 64)."""

    params: ClassVar[list[Any]] = [BACKENDS, [4096, 65536], [64, 256]]
    param_names: ClassVar[list[str]] = ["backend", "n", "m"]
    unit = "bytes"
    timeout = 120.0

    def setup(self, backend: str, n: int, m: int) -> None:
        require(backend, "float32")
        if backend == "torch:cpu":
            raise NotImplementedError(
                "torch:cpu: torch's CPU allocator is invisible to tracemalloc (see peakmem_)"
            )
        self.pin()
        self.entry = get(LINEAR_ENTRY)
        self.q, self.k, self.v = qkv(backend, "float32", n)
        self.p = linear_params(backend, m)

    def _call(self) -> Any:
        return feature_map_attention(
            self.entry, self.p, self.q, self.k, self.v, causal=True, use_log=False
        )

    def track_peak_allocated_bytes(self, backend: str, n: int, m: int) -> int:
        if backend == "torch:cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            self._call()
            torch.cuda.synchronize()
            return int(torch.cuda.max_memory_allocated() - before)
        tracemalloc.start()
        try:
            self._call()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return int(peak)
