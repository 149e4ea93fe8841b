"""Argument checks and the denominator guard shared by the NumPy and torch attention code."""

from __future__ import annotations

from typing import Any

from kernel_verify.impls.validation import (
    all_finite_torch,
    check_array,
    check_bool,
    check_one_backend,
    check_same_dtype,
    check_scalar,
    is_torch,
)

ZERO_DENOMINATOR_POLICIES = ("raise", "zero", "allow")
SCORE_REMEDY = ("|q·kᵀ| times scale exceeds the dtype's range; pass a smaller scale or smaller "
                "inputs (softmax attention is shift-invariant per row, nothing else helps)")


class DenominatorError(ValueError):
    """Attention denominators that cannot be divided by: counts of zero, negative and
    non-finite rows travel with the error so that callers knowing the map can diagnose it."""

    def __init__(self, message: str, *, n_zero: int, n_negative: int, finite: bool) -> None:
        super().__init__(message)
        self.n_zero, self.n_negative, self.finite = n_zero, n_negative, finite


def check_scale(scale: object) -> float | None:
    """``scale`` of softmax attention: None (``1/√d``) or a finite number > 0."""
    if scale is None:
        return None
    return check_scalar("scale", scale, positive=True)


def check_qkv_shapes(a: Any, b: Any, v: Any, names: tuple[str, str, str]) -> None:
    """Shapes of an attention call agree: ``a`` and ``b`` share the last dimension, ``b`` and
    ``v`` the number of rows (keys), all three the leading (batch, head) shape."""
    na, nb, nv = names
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


def check_attention_inputs(
    a: Any, b: Any, v: Any, *, causal: bool, names: tuple[str, str, str], backend: str
) -> None:
    """``a (..., n, f)``, ``b (..., n_k, f)``, ``v (..., n_k, d_v)``: finite, floating, same dtype
    and leading shape; ``n == n_k`` when causal."""
    na, nb, _ = names
    check_bool("causal", causal)
    for name, x in zip(names, (a, b, v), strict=True):
        if is_torch(x) != (backend == "torch"):
            check_array(name, x, backend=backend)  # raises: wrong backend, named
    check_one_backend(names, a, b, v)  # one device, before any value is read
    for name, x in zip(names, (a, b, v), strict=True):
        check_array(name, x, min_ndim=2, backend=backend)
    check_same_dtype(names, a, b, v)
    if a.shape[-1] < 1:
        raise ValueError(f"{na} must have a last dimension >= 1, got shape {tuple(a.shape)}")
    check_qkv_shapes(a, b, v, names)
    if causal and a.shape[-2] != b.shape[-2]:
        raise ValueError(
            f"causal attention needs as many queries as keys, got {na} with {a.shape[-2]} rows "
            f"and {nb} with {b.shape[-2]}"
        )


def check_linformer_inputs(q: Any, k: Any, v: Any, e_proj: Any, f_proj: Any, scale: object, *,
                           backend: str) -> float | None:
    """Linformer attention's arguments: ``q (..., n_q, d)``, ``k (..., n, d)``, ``v (..., n,
    d_v)`` with one leading shape and projections ``E, F`` both ``(r, n)``, all floating arrays
    of ``backend`` of one dtype; returns ``scale`` checked (:func:`check_scale`)."""
    for name, t in (("q", q), ("k", k), ("v", v), ("E", e_proj), ("F", f_proj)):
        check_array(name, t, min_ndim=2, backend=backend)
    check_same_dtype(("q", "k", "v", "E", "F"), q, k, v, e_proj, f_proj)
    scale = check_scale(scale)
    n = k.shape[-2]
    if q.shape[:-2] != k.shape[:-2] or k.shape[:-1] != v.shape[:-1] or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"incompatible q, k, v shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if e_proj.ndim != 2 or f_proj.shape != e_proj.shape or e_proj.shape[1] != n:
        raise ValueError(
            f"E and F must both be (r, n={n}), got {tuple(e_proj.shape)}, {tuple(f_proj.shape)}"
        )
    return scale


def denominator_guard(den: Any, policy: str) -> Any:
    """Check attention denominators under ``policy`` and return the divisor to use.

    ``"raise"``: every denominator must be > 0. ``"zero"``: a denominator of exactly 0 (whose
    numerator is then 0 for nonnegative features) gives output 0; negatives raise. ``"allow"``:
    any nonzero sign is divided by (signed maps, identity checks only); zeros raise.
    """
    if not isinstance(policy, str) or policy not in ZERO_DENOMINATOR_POLICIES:
        raise ValueError(
            f"zero_denominator must be one of {ZERO_DENOMINATOR_POLICIES}, got {policy!r}"
        )
    if is_torch(den):
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
    counts = {"n_zero": n_zero, "n_negative": n_neg, "finite": finite}
    if not finite:
        raise DenominatorError(
            "attention denominator is not finite (features overflowed): use the log-space path "
            "for positive maps or smaller inputs", **counts
        )
    if policy == "raise" and n_bad_nonpos:
        raise DenominatorError(
            f"attention denominator is <= 0 in {n_bad_nonpos} rows ({n_zero} zero, {n_neg} "
            "negative). Negative: the features are not positive, so normalisation is "
            "ill-posed. Zero with positive (exp-based) features: they underflowed at these "
            "input norms; use log_linear_attention on log-features (feature_map_attention "
            "does for maps claiming log_features). Zero with nonnegative features such as ReLU "
            "(rows with no positive weight): pass zero_denominator='zero' to map them to 0",
            **counts,
        )
    if policy == "zero" and n_neg:
        raise DenominatorError(f"attention denominator is negative in {n_neg} rows", **counts)
    if policy == "allow" and n_zero:
        raise DenominatorError(f"attention denominator is exactly 0 in {n_zero} rows", **counts)
    if policy == "zero" and n_zero:
        return lib_where(den == 0, 1, den)
    return den


__all__ = [
    "SCORE_REMEDY",
    "ZERO_DENOMINATOR_POLICIES",
    "DenominatorError",
    "check_attention_inputs",
    "check_scale",
    "denominator_guard",
]
