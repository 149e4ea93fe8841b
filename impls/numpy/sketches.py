"""NumPy sketching maps of polynomial kernels (docs/math.md §18)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kernel_verify.impls.validation import check_array, check_last_dim, check_params

__all__ = ["polysketch"]


def polysketch(x: np.ndarray, params: Mapping[str, np.ndarray],
               config: Mapping[str, Any]) -> np.ndarray:
    """``φ(x) = vec((Sx)(Sx)ᵀ)`` (m² features): ``φ(x)ᵀφ(y) = ((Sx)ᵀ(Sy))²`` (Kacham, Mirrokni
    & Zhong 2024, the non-negative degree-2 PolySketch); computed in the dtype of ``x``."""
    check_array("x", x, min_ndim=2, backend="numpy")
    check_params("params", params, {"S": (None, None)}, backend="numpy")
    check_last_dim("x", x, params["S"].shape[1])
    z = x @ params["S"].astype(x.dtype).T
    return (z[..., :, None] * z[..., None, :]).reshape(*z.shape[:-1], -1)
