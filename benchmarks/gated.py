"""Gated causal linear attention (docs/math.md §16): the chunked form with decays against its
non-gated twin.

``GatedChunked``: :func:`impls.{numpy,torch}.gated_forms.gated_attention_chunked` (chunk 64,
log-gates ``log σ(x)`` of standard normal ``x``: one per token and head (``kind="scalar"``,
Mamba2/simple GLA) or per key dimension (``"key_dim"``, GLA)) on ``q, k, v`` of shape
``(2, 4, n, 64)`` with ``φ(q) = q/8``, ``φ(k) = k``, no normaliser, the state returned.
``time_plain_chunked`` times :func:`impls.{numpy,torch}.forms.linear_attention_chunked` on the same
arrays (plain state ``(S, z)``, normalised by ``φ(q)ᵀz``; positive features ``e^(x/8)`` so its
denominators are positive): the ratio is the cost of the decays. The per-key-dimension kind
builds a ``C × C × d`` decay tensor per chunk (``(n/64)·64·64·64`` entries per head): it runs up
to ``n = 4096`` (asv skips the larger size with that reason).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from benchmarks._common import BACKENDS, DTYPES, BackendBenchmark, rng_for, smoke, sync
from kernel_verify.impls.numpy import forms as np_forms
from kernel_verify.impls.numpy import gated_forms as np_gated
from kernel_verify.impls.torch import forms as torch_forms
from kernel_verify.impls.torch import gated_forms as torch_gated

CASES: list[str] = smoke([f"{b}/{t}" for b in BACKENDS for t in DTYPES[b]
                          if t in ("float64", "float32") and (t != "float64" or b == "numpy")])
SHAPE, DIM, CHUNK = (2, 4), 64, 64
#: The largest n of the per-key-dimension kind (memory of its decay tensor).
KEY_DIM_MAX_N = 4096


def inputs(backend: Any, n: int, kind: str) -> tuple[Any, ...]:
    """Seeded ``φ(q), φ(k), v`` and log-gates on ``backend`` (module docstring)."""
    rng = rng_for("gated", n, kind)
    q, k, v = (rng.standard_normal((*SHAPE, n, DIM)) for _ in range(3))
    x = rng.standard_normal((*SHAPE, n) if kind == "scalar" else (*SHAPE, n, DIM))
    g = -np.logaddexp(0.0, -x)  # log σ(x)
    return tuple(backend.from_numpy(a) for a in (q / 8, k, v, g))


class GatedChunked(BackendBenchmark):
    """The gated chunked form and its non-gated twin (module docstring)."""

    params: ClassVar[list[Any]] = [CASES, smoke([1024, 16384]), ["scalar", "key_dim"]]
    param_names: ClassVar[list[str]] = ["case", "n", "kind"]
    timeout = 300.0

    def setup(self, case: str, n: int, kind: str) -> None:
        if kind == "key_dim" and n > KEY_DIM_MAX_N:
            raise NotImplementedError(f"key_dim runs up to n = {KEY_DIM_MAX_N} (its C x C x d "
                                      "decay tensor per chunk)")
        self.use(*case.split("/"))
        self.q, self.k, self.v, self.g = inputs(self.backend, n, kind)
        numpy = self.backend.library == "numpy"
        self.gated = np_gated if numpy else torch_gated
        self.plain = np_forms if numpy else torch_forms
        exp = np.exp if numpy else (lambda a: a.exp())
        self.fq, self.fk = exp(self.q), exp(self.k / 8)

    def time_gated_chunked(self, case: str, n: int, kind: str) -> None:
        self.gated.gated_attention_chunked(self.q, self.k, self.v, self.g, chunk_size=CHUNK)
        sync(self.backend)

    def time_plain_chunked(self, case: str, n: int, kind: str) -> None:
        self.plain.linear_attention_chunked(self.fq, self.fk, self.v, chunk_size=CHUNK)
        sync(self.backend)
