"""Accuracy of every backend against the mpmath reference, as a fraction of the derived budget.

For a few seeded parameter draws and inputs, each backend (NumPy; torch on every available
device) and dtype computes ``φ(x; ω)``; the error against the correctly rounded mpmath value is
divided by the a-priori bound of
:func:`kernel_verify.verify.references.features.feature_error_bound` with the budget of
:mod:`kernel_verify.verify.tolerance` (plus the cast to a half type and the reference's own half
ulp). A ratio ≤ 1 is within budget; the report keeps the worst ratio per (backend, dtype).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from kernel_verify.impls.attention import map_features
from kernel_verify.impls.registry import FeatureMap
from kernel_verify.verify.backends import AXIS, Backend
from kernel_verify.verify.references.features import feature_error_bound, features_reference
from kernel_verify.verify.tolerance import budget_for, unit_roundoff


def available_cases() -> tuple[Backend, ...]:
    """Every point of the one backend axis this machine runs
    (:data:`kernel_verify.verify.backends.AXIS`; CUDA only where a device exists)."""
    return tuple(b for b in AXIS if b.available)


@dataclass
class AccuracyRow:
    backend: str
    dtype: str
    worst_ratio: float
    max_abs_error: float


def _subnormal(dtype: str) -> float:
    """Spacing of the subnormal range of ``dtype`` (``tiny·eps``)."""
    info = torch.finfo(getattr(torch, dtype))
    return float(info.tiny * info.eps)


def _compute(entry: FeatureMap, x: np.ndarray, params, backend: Backend, pos):
    out = map_features(entry, backend.from_numpy(x), backend.from_numpy_params(params),
                       positions=pos)
    return backend.to_numpy(out)


def accuracy_rows(entry: FeatureMap, *, seeds: int = 3, n: int = 4, d: int = 4, m: int = 8,
                  scale: float = 0.7) -> list[AccuracyRow]:
    rows = []
    for backend in available_cases():
        dtype = backend.dtype
        worst, max_err = 0.0, 0.0
        budget = budget_for(dtype, backend.device)
        u = budget.u_compute
        ulps = max(budget.ulps.values())
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            mm = max(m, entry.min_m)
            params = entry.draw(rng, d, mm, entry.config)
            # Inputs are rounded to the dtype first: the reference sees the same numbers.
            x = backend.seen(scale * rng.standard_normal((n, d)))
            pos = np.arange(n) if entry.has("positional") else None
            got = _compute(entry, x, params, backend, pos)
            ref = features_reference(entry, x, params, entry.config, positions=pos)
            bound = feature_error_bound(entry, x, params, entry.config, u, ulps, positions=pos)
            if budget.output_round:  # cast back to a half type: half an ulp, subnormals included
                bound = bound + unit_roundoff(dtype) * np.abs(ref) + 0.5 * _subnormal(dtype)
            bound = bound + unit_roundoff("float64") * np.abs(ref)
            err = np.abs(got - ref)
            worst = max(worst, float(np.max(err / np.where(bound > 0, bound, np.inf),
                                            initial=0.0)))
            max_err = max(max_err, float(err.max(initial=0.0)))
        rows.append(AccuracyRow(backend.name, dtype, worst, max_err))
    return rows
