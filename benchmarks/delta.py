"""The delta rule with gates (issue #41): the chunked (UT transform) form against the token
recurrence it computes.

``DeltaRule``: :func:`impls.{numpy,torch}.recurrence.chunked` (chunk 64) and
:func:`impls.{numpy,torch}.recurrence.recurrent` on ``q, k, v`` of shape ``(2, 4, n, 64)`` in
float32, ``q`` and ``k`` with rows of unit L2 norm, ``β = σ(x)`` and log-gates ``g = log σ(x')``
of standard normal ``x, x'``: one gate per token and head for ``transition="gated_delta"`` (gated
DeltaNet), one per key dimension for ``"kda"`` (Kimi Delta Attention), the state returned. The
ratio ``time_chunked / time_recurrent`` is what the chunked form buys over a loop of ``n``
rank-one updates; per key dimension the chunked form builds ``C × C × d`` decays per chunk (in
column blocks of :data:`kernel_verify.impls.torch.recurrence.SUB`), which makes it
slower than the loop at these sizes (docs/benchmarks.md). Sizes stay modest (``n`` = 256, 1024):
the recurrent form is a Python loop over tokens. ``KV_BENCH_SMOKE=1`` keeps NumPy at ``n = 256``,
both transitions (~0.1 s).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from benchmarks._common import BACKENDS, BackendBenchmark, rng_for, smoke, sync
from kernel_verify.impls.numpy import recurrence as np_recurrence
from kernel_verify.impls.torch import recurrence as torch_recurrence

SHAPE, DIM, CHUNK = (2, 4), 64, 64
TRANSITIONS = ["gated_delta", "kda"]


def inputs(backend: Any, n: int, transition: str) -> dict[str, Any]:
    """Seeded ``q, k, v, g, beta`` on ``backend`` in float32 (module docstring)."""
    rng = rng_for("delta", n, transition)
    q, k, v = (rng.standard_normal((*SHAPE, n, DIM)) for _ in range(3))
    q, k = (a / np.linalg.norm(a, axis=-1, keepdims=True) for a in (q, k))
    beta = 1.0 / (1.0 + np.exp(-rng.standard_normal((*SHAPE, n))))
    x = rng.standard_normal((*SHAPE, n) if transition == "gated_delta" else (*SHAPE, n, DIM))
    g = -np.logaddexp(0.0, -x)  # log σ(x) ≤ 0
    arrays = {"q": q, "k": k, "v": v, "g": g, "beta": beta}
    return {name: backend.from_numpy(a) for name, a in arrays.items()}


class DeltaRule(BackendBenchmark):
    """The chunked and the recurrent form of the gated delta rule (module docstring)."""

    params: ClassVar[list[Any]] = [smoke(BACKENDS), smoke([256, 1024]), TRANSITIONS]
    param_names: ClassVar[list[str]] = ["backend", "n", "transition"]
    timeout = 300.0

    def setup(self, backend: str, n: int, transition: str) -> None:
        self.use(backend, "float32")
        self.args = inputs(self.backend, n, transition)
        self.impl = np_recurrence if self.backend.library == "numpy" else torch_recurrence

    def time_chunked(self, backend: str, n: int, transition: str) -> None:
        self.impl.chunked(transition=transition, chunk_size=CHUNK, **self.args)
        sync(self.backend)

    def time_recurrent(self, backend: str, n: int, transition: str) -> None:
        self.impl.recurrent(transition=transition, **self.args)
        sync(self.backend)
