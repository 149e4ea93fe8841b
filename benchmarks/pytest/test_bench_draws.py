"""Frequency-matrix draws: iid vs orthogonal vs structured (pytest-benchmark; docs/math.md §3).

``draw_matrix(kind, rng, m=256, d=64)``; each benchmark checks the shape and finiteness of the
draw. Compare with ``pytest benchmarks/pytest -k draw``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from benchmarks._common import rng_for
from kernel_verify.impls.random_matrices import MATRICES, draw_matrix

M, D = 256, 64


@pytest.mark.parametrize("kind", sorted(MATRICES))
def test_draw_matrix(benchmark: Any, kind: str) -> None:
    benchmark.group = f"draw_matrix m={M} d={D}"
    rng = rng_for("pytest-draw", kind)
    w = benchmark(draw_matrix, kind, rng, M, D)
    assert w.shape == (M, D) and np.isfinite(w).all()
