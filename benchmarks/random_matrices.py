"""Cost of drawing an ``(m, d)`` frequency matrix with each construction (docs/math.md §3).

Draws are float64 NumPy only (the one draw is then handed to every backend), so there is no
backend parameter. ``orthogonal`` pays one QR per block of ``d`` rows; ``sorf``/``fastfood`` build
their ``p×p`` Hadamard products explicitly. :class:`StructuredProjections` times applying them.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from benchmarks._common import BACKENDS, BackendBenchmark, rng_for, smoke, sync
from kernel_verify.impls.random_matrices import (
    MATRICES,
    draw_factors,
    draw_matrix,
    factors_matrix,
)
from kernel_verify.impls.torch.structured import structured_projections


class RandomMatrixDraws(BackendBenchmark):
    """``draw_matrix(kind, rng, m, d)`` for every construction."""

    params: ClassVar[list[Any]] = [smoke(sorted(MATRICES)), [16, 64], [64, 256]]
    param_names: ClassVar[list[str]] = ["kind", "d", "m"]

    def setup(self, kind: str, d: int, m: int) -> None:
        self.pin()  # QR and the Hadamard products go through BLAS/LAPACK
        self.rng = rng_for("draw_matrix", kind, d, m)

    def time_draw_matrix(self, kind: str, d: int, m: int) -> None:
        draw_matrix(kind, self.rng, m, d)


class StructuredProjections(BackendBenchmark):
    """``x Wᵀ`` for SORF/Fastfood: explicit GEMM vs the fast Walsh–Hadamard transform
    (:mod:`kernel_verify.impls.torch.structured`), ``x (4096, d)`` float32, ``m = d``."""

    params: ClassVar[list[Any]] = [
        ["sorf", "fastfood"], smoke([f"{b}/float32" for b in BACKENDS if b != "numpy"]),
        smoke([64, 256, 1024]), ["gemm", "fwht"],
    ]
    param_names: ClassVar[list[str]] = ["kind", "case", "d", "method"]

    def setup(self, kind: str, case: str, d: int, method: str) -> None:
        self.use(*case.split("/"))
        rng = rng_for("structured", kind, d)
        self.factors = draw_factors(kind, rng, d, d)
        dev = self.backend.torch_device
        self.w = torch.tensor(factors_matrix(self.factors), dtype=torch.float32, device=dev)
        self.x = torch.tensor(rng.standard_normal((4096, d)), dtype=torch.float32, device=dev)

    def time_projections(self, kind: str, case: str, d: int, method: str) -> None:
        if method == "gemm":
            self.x @ self.w.T
        else:
            structured_projections(self.x, self.factors)
        sync(self.backend)
