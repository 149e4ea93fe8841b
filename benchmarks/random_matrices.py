"""Cost of drawing an ``(m, d)`` frequency matrix with each construction (docs/math.md §3).

Draws are float64 NumPy only (the one draw is then handed to every backend), so there is no
backend parameter. ``orthogonal`` pays one QR per block of ``d`` rows; ``sorf``/``fastfood`` build
their ``p×p`` Hadamard products explicitly.
"""

from __future__ import annotations

from typing import Any, ClassVar

from benchmarks._common import BackendBenchmark, rng_for
from kernel_verify.impls.random_matrices import MATRICES, draw_matrix


class RandomMatrixDraws(BackendBenchmark):
    """``draw_matrix(kind, rng, m, d)`` for every construction."""

    params: ClassVar[list[Any]] = [sorted(MATRICES), [16, 64], [64, 256]]
    param_names: ClassVar[list[str]] = ["kind", "d", "m"]

    def setup(self, kind: str, d: int, m: int) -> None:
        self.pin()  # QR and the Hadamard products go through BLAS/LAPACK
        self.rng = rng_for("draw_matrix", kind, d, m)

    def time_draw_matrix(self, kind: str, d: int, m: int) -> None:
        draw_matrix(kind, self.rng, m, d)
