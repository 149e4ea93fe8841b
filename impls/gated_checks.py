"""Argument checks of the gated forms (``impls/{numpy,torch}/gated_forms.py``, docs/math.md
§16), shared by both backends: the log-gates of a sequence or of one token.

Log-gates ``g ≤ 0`` (a decay ``e^g ∈ (0, 1]``), finite: ``(..., T)`` scalar per token or
``(..., T, m)`` per key dimension (one token: ``(...)`` or ``(..., m)``), of the features'
backend, device and dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_verify.impls.attention_checks import ZERO_DENOMINATOR_POLICIES
from kernel_verify.impls.validation import check_bool, check_one_backend, is_torch

__all__ = ["check_gated_options", "check_log_gates", "time_length"]


def check_log_gates(g: Any, phi_k: Any, *, backend: str, name: str = "log_gates",
                    step: bool = False, keys: str = "phi_k") -> str:
    """``g`` as the log-gates of keys ``phi_k`` (module docstring); returns ``"scalar"`` or
    ``"key_dim"``. ValueError/TypeError naming ``name``."""
    if is_torch(g) != (backend == "torch"):
        want = "torch.Tensor" if backend == "torch" else "numpy.ndarray"
        raise TypeError(f"{name} must be a {want} like the features, got {type(g).__name__}")
    if not hasattr(g, "shape") or not hasattr(g, "dtype"):
        raise TypeError(f"{name} must be an array, got {type(g).__name__}")
    scalar_shape = tuple(phi_k.shape[:-1])
    if tuple(g.shape) == scalar_shape:
        kind = "scalar"
    elif tuple(g.shape) == tuple(phi_k.shape):
        kind = "key_dim"
    else:
        what = "one token's" if step else "the sequence's"
        raise ValueError(f"{name} must have shape {scalar_shape} (one scalar gate per token) or "
                         f"{tuple(phi_k.shape)} (one gate per key dimension) to match "
                         f"{what} keys, got {tuple(g.shape)}")
    if g.dtype != phi_k.dtype:
        raise TypeError(f"{name} must have the dtype of {keys} ({phi_k.dtype}), got {g.dtype}")
    check_one_backend((name, keys), g, phi_k)
    if backend == "torch":
        import torch

        bad_nan = bool(torch.isnan(g).any()) if g.numel() else False
        bad_inf = bool(torch.isinf(g).any()) if g.numel() else False
        positive = bool((g > 0).any()) if g.numel() else False
    else:
        arr = np.asarray(g)
        bad_nan = bool(np.isnan(arr).any())
        bad_inf = bool(np.isinf(arr).any())
        positive = bool((arr > 0).any())
    if bad_nan or bad_inf:
        raise ValueError(f"{name} contains NaN or Inf: log-gates must be finite (a decay of "
                         "exactly 0 is not representable in log space; use a large negative "
                         "log-gate)")
    if positive:
        raise ValueError(f"{name} must be ≤ 0 (log of a decay in (0, 1]); got a positive entry")
    return kind


def check_gated_options(normalise: Any, zero_denominator: Any) -> None:
    """``normalise`` a bool and ``zero_denominator`` a policy name, checked whether or not the
    normaliser is used (an option that is silently ignored hides a caller's mistake)."""
    check_bool("normalise", normalise)
    if not isinstance(zero_denominator, str) or zero_denominator not in ZERO_DENOMINATOR_POLICIES:
        raise ValueError(f"zero_denominator must be one of {ZERO_DENOMINATOR_POLICIES}, "
                         f"got {zero_denominator!r}")


def time_length(phi_q: Any) -> int:
    """The time length of ``phi_q`` for the parallel form's one chunk (at least 1); an input
    without two axes is left to the chunked form's checks, which name it."""
    shape = getattr(phi_q, "shape", None)
    return max(int(shape[-2]), 1) if shape is not None and len(shape) >= 2 else 1
