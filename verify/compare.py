"""Comparing computed results with correctly rounded references, and failure messages that teach.

``compare(got, expected, bound, ...)`` checks ``|got − expected| ≤ bound`` element-wise, where
``expected`` is the exact value rounded to float64 (a float64 array, or an mp array that is
rounded here once) and ``bound`` an array of absolute error bounds broadcastable to ``got``
(from :mod:`kernel_verify.verify.tolerance`: ``elementwise_bound``, ``dot_error_bound``, or a sum of
them). The :class:`ComparisonResult` records the max abs/rel/ulp errors, the worst points with their
inputs, expected and got, the budget and how it was derived, and a one-line reproduction
(scipy's ``FuncData`` and functional_algorithms report failures the same way).

A NaN or infinity in ``got`` where ``expected`` is finite always fails, whatever the bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernel_verify.verify.references.mp import to_float
from kernel_verify.verify.tolerance import dtype_name, ulp

__all__ = ["ComparisonResult", "WorstPoint", "assert_close", "compare", "ulp_distance"]

_MAX_INPUT_ELEMENTS = 16  # inputs that cannot be aligned with a point are shown whole up to this


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _as_float64(name: str, x: Any) -> tuple[np.ndarray, str]:
    """``x`` (NumPy array, torch tensor, scalar or mp array) as float64 plus its dtype name."""
    if _is_torch(x):
        kind = dtype_name(x.dtype)
        return x.detach().to("cpu").double().numpy(), kind  # every float dtype widens exactly
    a = np.asarray(x)
    if a.dtype == object:
        return to_float(a, np.float64), "float64"
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise TypeError(f"{name} must be a real array, got dtype {a.dtype}")
    kind = a.dtype.name if np.issubdtype(a.dtype, np.floating) else "float64"
    return a.astype(np.float64), kind


def ulp_distance(got: Any, expected: Any, dtype: Any) -> np.ndarray:
    """``|got − expected| / ulp_dtype(expected)``: the error in ulps of ``dtype`` at the reference.

    ``expected`` is the correctly rounded float64 reference (or an mp array, rounded to float64
    here). Equal values (including equal infinities and NaN against NaN) are 0 ulps apart; a
    non-finite value against a different one is ``inf``."""
    g, _ = _as_float64("got", got)
    e, _ = _as_float64("expected", expected)
    if g.shape != e.shape:
        raise ValueError(f"got and expected must have the same shape, got {g.shape} and {e.shape}")
    with np.errstate(invalid="ignore", over="ignore"):
        dist = np.abs(g - e) / ulp(np.where(np.isfinite(e), e, 0.0), dtype)
    same = (g == e) | (np.isnan(g) & np.isnan(e))
    dist = np.where(same, 0.0, dist)
    return np.where(np.isfinite(g) & np.isfinite(e) | same, dist, np.inf)


@dataclass(frozen=True)
class WorstPoint:
    """One of the worst points: its index, the inputs that produced it, expected and got."""

    index: tuple[int, ...]
    inputs: Mapping[str, Any]
    expected: float
    got: float
    abs_error: float
    bound: float
    ulps: float

    def describe(self) -> str:
        ratio = self.abs_error / self.bound if self.bound > 0 else np.inf
        lines = [
            f"  at {self.index}: expected {self.expected!r}, got {self.got!r}, "
            f"|err| {self.abs_error:.3e} ({self.ulps:.3g} ulp), bound {self.bound:.3e} "
            f"(err/bound {ratio:.3g})"
        ]
        for name, value in self.inputs.items():
            lines.append(f"      {name} = {_fmt(value)}")
        return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return np.array2string(value, precision=17, separator=", ", max_line_width=200)
    return value if isinstance(value, str) else repr(value)


@dataclass(frozen=True)
class ComparisonResult:
    """Outcome of :func:`compare`; ``str(result)`` is the full report."""

    ok: bool
    label: str
    dtype: str
    n_elements: int
    n_failed: int
    max_abs_error: float
    max_rel_error: float
    max_ulp_error: float
    worst: tuple[WorstPoint, ...]
    how: str
    repro: str
    notes: tuple[str, ...] = field(default=())

    def message(self) -> str:
        verdict = "OK" if self.ok else f"FAILED at {self.n_failed} of {self.n_elements} elements"
        lines = [
            f"{self.label}: {verdict} ({self.dtype})",
            f"  max abs error {self.max_abs_error:.3e}, max rel error {self.max_rel_error:.3e}, "
            f"max ulp error {self.max_ulp_error:.3g} (ulps of {self.dtype})",
            f"  bound: {self.how}",
            *(f"  note: {n}" for n in self.notes),
            f"  worst {len(self.worst)} point(s) by err/bound:",
            *(w.describe() for w in self.worst),
            f"  reproduce: {self.repro}",
        ]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.message()


def _point_inputs(inputs: Mapping[str, Any], index: tuple[int, ...], shape: tuple[int, ...]):
    """The inputs behind output element ``index``: an input with the output's shape gives its
    element; one whose leading dims match the output's leading dims gives that row (``x`` of
    shape ``(..., n, d)`` for features ``(..., n, D)``); scalars and small arrays are shown
    whole; anything else is summarised by its shape."""
    out: dict[str, Any] = {}
    for name, value in inputs.items():
        if _is_torch(value):
            value = value.detach().to("cpu").double().numpy()
        a = np.asarray(value)
        if a.dtype == object:
            a = to_float(a, np.float64) if a.size else a
        if a.ndim == 0:
            out[name] = a.item()
        elif a.shape == shape:
            out[name] = a[index].item()
        elif a.ndim <= len(shape) and a.shape[:-1] == shape[: a.ndim - 1]:
            row = a[index[: a.ndim - 1]]
            small = row.size <= 4 * _MAX_INPUT_ELEMENTS
            out[name] = row if small else f"<row of shape {row.shape}>"
        elif a.size <= _MAX_INPUT_ELEMENTS:
            out[name] = a
        else:
            out[name] = f"<array of shape {a.shape}>"
    return out


def _checked_arrays(got: Any, expected: Any, bound: Any):
    """``(got, its dtype name, expected, bound)`` as float64 arrays of one shape, after the
    checks of :func:`compare` (same shape, finite expected, finite nonnegative bound that
    broadcasts)."""
    g, kind = _as_float64("got", got)
    e, _ = _as_float64("expected", expected)
    if g.shape != e.shape:
        raise ValueError(f"got and expected must have the same shape, got {g.shape} and {e.shape}")
    if not np.isfinite(e).all():
        raise ValueError("expected contains NaN or Inf: compare non-finite values separately")
    b = np.asarray(bound, dtype=np.float64)
    if not np.isfinite(b).all() or (b < 0).any():
        raise ValueError("bound must be finite and >= 0 everywhere")
    try:
        b = np.broadcast_to(b, g.shape)
    except ValueError:
        raise ValueError(f"bound of shape {b.shape} does not broadcast to {g.shape}") from None
    return g, kind, e, b


def _worst_points(g, e, b, err, ulps, inputs: Mapping[str, Any], worst: int) -> list:
    """The ``worst`` points ranked by err/bound (failures first; a zero bound ranks any error as
    infinite), exact points after the first left out."""
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(b > 0, err / b, np.where(err > 0, np.inf, 0.0))
    flat = np.argsort(-score, axis=None, kind="stable")[: min(worst, g.size)]
    flat = [f for i, f in enumerate(flat) if i == 0 or score.flat[f] > 0]  # skip exact points
    points = []
    for f in flat:
        idx = tuple(int(i) for i in np.unravel_index(f, g.shape))
        points.append(
            WorstPoint(
                index=idx,
                inputs=_point_inputs(inputs, idx, g.shape),
                expected=float(e[idx]),
                got=float(g[idx]),
                abs_error=float(err[idx]),
                bound=float(b[idx]),
                ulps=float(ulps[idx]),
            )
        )
    return points


def compare(
    got: Any,
    expected: Any,
    bound: Any,
    *,
    inputs: Mapping[str, Any] | None = None,
    label: str,
    how: str,
    repro: str,
    worst: int = 5,
) -> ComparisonResult:
    """Check ``|got − expected| ≤ bound`` element-wise and report.

    ``got``: the computed result (NumPy array or torch tensor, any float dtype; its dtype sets
    the ulp unit). ``expected``: exact value rounded to float64 (float64 array or mp array).
    ``bound``: absolute error bounds, broadcastable to ``got``'s shape, finite and ``>= 0``.
    ``inputs``: named inputs shown at the worst points. ``label``: what was compared. ``how``:
    how the bound was derived (one line). ``repro``: one line that reproduces the failure.
    """
    for name, text in (("label", label), ("how", how), ("repro", repro)):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{name} must be a non-empty string")
    if isinstance(worst, bool) or not isinstance(worst, int) or worst < 1:
        raise ValueError(f"worst must be an integer >= 1, got {worst!r}")
    g, kind, e, b = _checked_arrays(got, expected, bound)
    finite = np.isfinite(g)
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.where(finite, np.abs(g - e), np.inf)
        rel = np.where(e != 0, err / np.abs(e), np.where(err == 0, 0.0, np.inf))
    ulps = ulp_distance(g, e, kind)
    failed = ~(err <= b)
    notes = []
    if (~finite).any():
        notes.append(f"{int((~finite).sum())} non-finite value(s) in got")

    points = _worst_points(g, e, b, err, ulps, inputs or {}, worst)
    size = g.size
    return ComparisonResult(
        ok=not bool(failed.any()),
        label=label,
        dtype=kind,
        n_elements=int(size),
        n_failed=int(failed.sum()),
        max_abs_error=float(err.max()) if size else 0.0,
        max_rel_error=float(rel.max()) if size else 0.0,
        max_ulp_error=float(ulps.max()) if size else 0.0,
        worst=tuple(points),
        how=how,
        repro=repro,
        notes=tuple(notes),
    )


def assert_close(
    got: Any,
    expected: Any,
    bound: Any,
    *,
    inputs: Mapping[str, Any] | None = None,
    label: str,
    how: str,
    repro: str,
    worst: int = 5,
) -> ComparisonResult:
    """:func:`compare`, raising ``AssertionError`` with the full report when it fails."""
    result = compare(
        got, expected, bound, inputs=inputs, label=label, how=how, repro=repro, worst=worst
    )
    if not result.ok:
        raise AssertionError(result.message())
    return result
