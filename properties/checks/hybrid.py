"""The hybrid attention property's truth (``properties/test_hybrid_attention.py``, the report's
hybrid page): the exact output of a whole sequence and its derived bound (docs/math.md §22).
A library module, so that the application reuses it rather than a copy."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_verify.verify.backends import Backend
from kernel_verify.verify.hybrid_bounds import hybrid_error_bound
from kernel_verify.verify.references.attention import feature_attention_mp, softmax_attention_mp
from kernel_verify.verify.references.hybrid import hybrid_attention_mp
from kernel_verify.verify.references.mp import to_float, working_precision

__all__ = ["exact"]


def exact(target: Any, backend: Backend, seen: tuple, window: int,
          reference: str = "hybrid") -> tuple[np.ndarray, np.ndarray]:
    """``(exact output, derived bound)`` of the whole sequence ``seen``: the exact hybrid
    (``reference="hybrid"``), causal softmax attention (``"softmax"``, a window ``≥ T``) or
    causal linear attention with the target's features (``"linear"``, ``w = 0``)."""
    if reference not in ("hybrid", "softmax", "linear"):
        raise ValueError(f"reference must be 'hybrid', 'softmax' or 'linear', got {reference!r}")
    q, k, v = seen
    fq, fk = target.features(q, "q"), target.features(k, "k")
    with working_precision():
        if reference == "softmax":
            ref = softmax_attention_mp(q, k, v, causal=True, scale=target.scale)
        elif reference == "linear":
            ref = feature_attention_mp(fq, fk, v, causal=True)
        else:
            ref = hybrid_attention_mp(q, k, v, fq, fk, window=window, mix=target.mix,
                                      scale=target.scale)
        ref = to_float(ref)
    bound = hybrid_error_bound(q, k, v, fq, fk, ref, window=window, dtype=backend.dtype,
                               mix=target.mix, scale=target.scale,
                               feature_ulps=target.feature_ulps)
    return ref, bound
