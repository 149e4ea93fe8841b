"""Argument checks and the denominator guard shared by the NumPy and torch attention code."""

from __future__ import annotations

from typing import Any

from kernel_verify.impls.validation import (
    _is_torch,
    all_finite_torch,
    check_array,
    check_same_dtype,
)

ZERO_DENOMINATOR_POLICIES = ("raise", "zero", "allow")


def check_attention_inputs(
    a: Any, b: Any, v: Any, *, causal: bool, names: tuple[str, str, str], backend: str
) -> None:
    """``a (..., n, f)``, ``b (..., n_k, f)``, ``v (..., n_k, d_v)``: finite, floating, same dtype
    and leading shape; ``n == n_k`` when causal."""
    na, nb, nv = names
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    for name, x in zip(names, (a, b, v), strict=True):
        check_array(name, x, min_ndim=2, backend=backend)
    check_same_dtype(names, a, b, v)
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(
            f"{na} and {nb} must have the same last dimension, got {tuple(a.shape)} and "
            f"{tuple(b.shape)}"
        )
    if b.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"{nb} and {nv} must have the same number of rows (keys), got {tuple(b.shape)} and "
            f"{tuple(v.shape)}"
        )
    lead = {tuple(x.shape[:-2]) for x in (a, b, v)}
    if len(lead) != 1:
        raise ValueError(
            f"{na}, {nb}, {nv} must have the same leading (batch, head) shape, got "
            f"{tuple(a.shape)}, {tuple(b.shape)}, {tuple(v.shape)}"
        )
    if causal and a.shape[-2] != b.shape[-2]:
        raise ValueError(
            f"causal attention needs as many queries as keys, got {na} with {a.shape[-2]} rows "
            f"and {nb} with {b.shape[-2]}"
        )


def denominator_guard(den: Any, policy: str) -> Any:
    """Check attention denominators under ``policy`` and return the divisor to use.

    ``"raise"``: every denominator must be > 0. ``"zero"``: a denominator of exactly 0 (whose
    numerator is then 0 for nonnegative features) gives output 0; negatives raise. ``"allow"``:
    any nonzero sign is divided by (signed maps, identity checks only); zeros raise.
    """
    if policy not in ZERO_DENOMINATOR_POLICIES:
        raise ValueError(
            f"zero_denominator must be one of {ZERO_DENOMINATOR_POLICIES}, got {policy!r}"
        )
    if _is_torch(den):
        import torch

        lib_where, n_bad_nonpos = torch.where, int((den <= 0).sum())
        n_zero, n_neg = int((den == 0).sum()), int((den < 0).sum())
        finite = all_finite_torch(den)
    else:
        import numpy as np

        lib_where = np.where
        n_bad_nonpos, n_zero, n_neg = int((den <= 0).sum()), int((den == 0).sum()), int(
            (den < 0).sum()
        )
        finite = bool(np.isfinite(den).all())
    if not finite:
        raise ValueError(
            "attention denominator is not finite (features overflowed): use the log-space path "
            "for positive maps or smaller inputs"
        )
    if policy == "raise" and n_bad_nonpos:
        raise ValueError(
            f"attention denominator is <= 0 in {n_bad_nonpos} rows ({n_zero} zero, {n_neg} "
            "negative): the features are not positive, so normalisation is ill-posed; pass "
            "zero_denominator='zero' for nonnegative maps (ReLU) to map empty rows to 0"
        )
    if policy == "zero" and n_neg:
        raise ValueError(f"attention denominator is negative in {n_neg} rows")
    if policy == "allow" and n_zero:
        raise ValueError(f"attention denominator is exactly 0 in {n_zero} rows")
    if policy == "zero" and n_zero:
        return lib_where(den == 0, 1, den)
    return den
