"""Exact softmax vs linear vs stable log-space linear attention (docs/math.md §9).

One head, ``q, k, v`` of shape ``(n, 64)`` with ``N(0, 1)`` entries. Linear attention uses
Performer's positive features ``softmax_positive[iid]`` (the softmax-kernel estimator, so the three
paths estimate the same attention) through
:func:`kernel_verify.impls.attention.feature_map_attention`: ``path="plain"`` forms ``φ(q), φ(k)``
and runs ``linear_attention``; ``path="log"`` forms ``log φ`` and runs ``log_linear_attention``.
Both include the feature-map cost, as a user pays it.

Memory: the causal path carries an ``m×d_v`` prefix state over chunks of 64 rows, so its memory is
``O(n(m + d))`` — never an ``n×m×d`` tensor. ``LinearAttentionMemory`` records peak RSS (asv
``peakmem_``, which includes the interpreter and the inputs), causal and not;
``CausalLinearAttentionTraced``
records the bytes the call itself allocates at its peak (``tracemalloc`` for NumPy,
``torch.cuda.max_memory_allocated`` for CUDA; torch's CPU allocator is invisible to both, so
that combination is left out), a deterministic number to divide by ``n(m + d)·itemsize``.
"""

from __future__ import annotations

import tracemalloc
from typing import Any, ClassVar

import torch

from benchmarks._common import (
    BACKENDS,
    DTYPES,
    BackendBenchmark,
    rng_for,
    slowdown,
    smoke,
    sync,
)
from kernel_verify.impls.attention import feature_map_attention
from kernel_verify.impls.numpy import attention as np_attention
from kernel_verify.impls.registry import get
from kernel_verify.impls.torch import attention as torch_attention
from kernel_verify.verify.backends import Backend

D = 64
LINEAR_ENTRY = "softmax_positive[iid]"


def qkv(backend: Backend, n: int, d: int = D) -> tuple[Any, Any, Any]:
    """Seeded ``q, k, v`` of shape ``(n, d)`` on ``backend``, rounded once to its dtype."""
    rng = rng_for("qkv", n, d)
    return tuple(backend.from_numpy(rng.standard_normal((n, d))) for _ in range(3))


def linear_params(backend: Backend, m: int, d: int = D) -> dict[str, Any]:
    """The ``softmax_positive[iid]`` draw for ``(m, d)`` (float64), on ``backend``'s device."""
    entry = get(LINEAR_ENTRY)
    return backend.from_numpy_params(entry.draw(rng_for(LINEAR_ENTRY, m, d), d, m, entry.config))


ATTN_CASES: list[str] = smoke([f"{b}/{t}" for b in BACKENDS for t in DTYPES[b]
                               if t != "float64" or b == "numpy"])
NS: list[int] = smoke([256, 1024, 4096, 16384])
M = 256


class SoftmaxAttention(BackendBenchmark):
    """Exact ``softmax(qkᵀ/√d)v``: ``O(n²d)`` time, an ``n×n`` score matrix (n ≤ 4096)."""

    params: ClassVar[list[Any]] = [ATTN_CASES, smoke([256, 1024, 4096]), [False, True]]
    param_names: ClassVar[list[str]] = ["case", "n", "causal"]
    timeout = 120.0
    repeat = (1, 5, 10.0)  # up to 5 samples or 10 s

    def setup(self, case: str, n: int, causal: bool) -> None:
        self.use(*case.split("/"))
        self.q, self.k, self.v = qkv(self.backend, n)
        self.att = np_attention if self.backend.library == "numpy" else torch_attention

    def time_softmax_attention(self, case: str, n: int, causal: bool) -> None:
        self.att.softmax_attention(self.q, self.k, self.v, causal=causal)
        sync(self.backend)


class _LinearBenchmark(BackendBenchmark):
    """The set-up of the linear-attention benchmarks (no benchmark of its own)."""

    def linear_setup(self, backend: str, dtype: str, n: int, m: int = M) -> None:
        """The backend (:meth:`use`), the :data:`LINEAR_ENTRY` map, ``q, k, v`` of length ``n``
        (:func:`qkv`) and the map's parameters for ``m`` features."""
        self.use(backend, dtype)
        self.entry = get(LINEAR_ENTRY)
        self.q, self.k, self.v = qkv(self.backend, n)
        self.p = linear_params(self.backend, m)


class LinearAttention(_LinearBenchmark):
    """``feature_map_attention`` with ``softmax_positive[iid]``, m = 256: ``O(nmd)`` time.

    ``path="log"`` is the default (stable, log-space) path, ``"plain"`` forms ``φ`` directly.
    ``KV_BENCH_SLOWDOWN=k`` repeats the call ``k`` times (the regression-check demonstration).
    """

    params: ClassVar[list[Any]] = [ATTN_CASES, NS, [False, True], ["log", "plain"]]
    param_names: ClassVar[list[str]] = ["case", "n", "causal", "path"]
    timeout = 120.0
    repeat = (1, 5, 10.0)

    def setup(self, case: str, n: int, causal: bool, path: str) -> None:
        self.linear_setup(*case.split("/"), n)
        self.times = slowdown()

    def time_feature_map_attention(self, case: str, n: int, causal: bool, path: str) -> None:
        for _ in range(self.times):
            feature_map_attention(
                self.entry, self.p, self.q, self.k, self.v, causal=causal, use_log=path == "log"
            )
        sync(self.backend)


class LinearAttentionBackward(_LinearBenchmark):
    """Forward + backward (``∂ Σ out / ∂(q, k, v)``) of the default path, torch float32."""

    params: ClassVar[list[Any]] = [
        smoke([f"{b}/float32" for b in BACKENDS if b.startswith("torch:")]), NS, [False, True]
    ]
    param_names: ClassVar[list[str]] = ["case", "n", "causal"]
    timeout = 120.0
    repeat = (1, 5, 10.0)

    def setup(self, case: str, n: int, causal: bool) -> None:
        self.linear_setup(*case.split("/"), n)
        self.qkv = [t.requires_grad_(True) for t in (self.q, self.k, self.v)]

    def time_attention_backward(self, case: str, n: int, causal: bool) -> None:
        out = feature_map_attention(self.entry, self.p, *self.qkv, causal=causal)
        torch.autograd.grad(out.sum(), self.qkv)
        sync(self.backend)


class LinearAttentionMemory(_LinearBenchmark):
    """Peak RSS of linear attention, default path, causal and not (float32, d = 64, m = 256)."""

    params: ClassVar[list[Any]] = [smoke(BACKENDS), smoke([4096, 16384, 65536]), [False, True]]
    param_names: ClassVar[list[str]] = ["backend", "n", "causal"]
    timeout = 120.0

    def setup(self, backend: str, n: int, causal: bool) -> None:
        self.linear_setup(backend, "float32", n)

    def peakmem_linear_attention(self, backend: str, n: int, causal: bool) -> None:
        feature_map_attention(self.entry, self.p, self.q, self.k, self.v, causal=causal)
        sync(self.backend)


class CausalLinearAttentionTraced(_LinearBenchmark):
    """Bytes allocated at the peak of one causal linear-attention call (float32, d = 64)."""

    params: ClassVar[list[Any]] = [
        smoke([b for b in BACKENDS if b != "torch:cpu"]), smoke([4096, 65536]), [64, 256]
    ]
    param_names: ClassVar[list[str]] = ["backend", "n", "m"]
    unit = "bytes"
    timeout = 120.0

    def setup(self, backend: str, n: int, m: int) -> None:
        # torch:cpu is left out of the parameters: its allocator is invisible here
        self.linear_setup(backend, "float32", n, m)

    def _call(self) -> Any:
        return feature_map_attention(
            self.entry, self.p, self.q, self.k, self.v, causal=True, use_log=False
        )

    def track_peak_allocated_bytes(self, backend: str, n: int, m: int) -> int:
        if self.backend.torch_device == "cuda":
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
