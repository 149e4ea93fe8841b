"""Failure evidence that names what was observed.

An attention output that is NaN, infinite, exactly zero, outside the hull of the values it may
see, collapsed to the mean of the values (uniform attention) or merely different from what it
should be are different defects; :func:`observed` counts each kind and says which it is, with the
first index and value of each, so a failure points at the cause rather than a symptom.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

__all__ = ["NonFiniteOutputError", "check_same_precision", "check_within", "first", "nonfinite",
           "observed", "require_finite", "same_precision_criterion"]

#: Whether :func:`check_same_precision` judges (``kernel-verify calibrate --part power`` turns it
#: off to measure the derived bounds alone: :func:`same_precision_criterion`).
_SAME_PRECISION = [True]


@contextmanager
def same_precision_criterion(on: bool) -> Iterator[None]:
    """Within the block, the same-precision reference criterion is applied (``on``) or not (the
    derived bounds alone): the power report measures each property both ways."""
    before = _SAME_PRECISION[0]
    _SAME_PRECISION[0] = bool(on)
    try:
        yield
    finally:
        _SAME_PRECISION[0] = before


class NonFiniteOutputError(AssertionError):
    """The target's output was NaN/±Inf where a property needed finite numbers to judge its
    identity: a failure, but not of the identity under test. The mutant runner
    (``verify.mutants.kills``) counts it as a non-finite kill, not as a kill by the property
    (the class name is matched there: keep it)."""


def require_finite(got: np.ndarray, where: str, what: str) -> None:
    """Raise :class:`NonFiniteOutputError` when ``got`` holds NaN/±Inf (``what``: the property
    that cannot be judged)."""
    text = nonfinite(np.asarray(got, dtype=np.float64))
    if text:
        raise NonFiniteOutputError(f"{where}: {text} (non-finite output: {what} cannot be "
                                   "judged)")


def first(mask: np.ndarray) -> tuple[int, ...]:
    """Index of the first True entry of ``mask``."""
    return tuple(int(i) for i in np.argwhere(mask)[0])


def nonfinite(got: np.ndarray, what: str = "outputs") -> str | None:
    """``"k of N outputs are NaN (first at …); j are ±Inf (first at …)"``, or None when all are
    finite."""
    parts = []
    for mask, word in ((np.isnan(got), "NaN"), (np.isinf(got), "±Inf")):
        if mask.any():
            parts.append(f"{int(mask.sum())} of {got.size} {what} are {word} (first at "
                         f"{first(mask)})")
    return "; ".join(parts) or None


def observed(got: np.ndarray, *, tol: float, expected: np.ndarray | None = None,
             lo: np.ndarray | None = None, hi: np.ndarray | None = None,
             uniform: np.ndarray | None = None) -> str | None:
    """What is wrong with ``got``, kind by kind, or None when nothing is.

    ``expected``: values ``got`` must equal within ``tol``; ``lo``/``hi``: the hull of the
    visible values (``got`` must lie in ``[lo − tol, hi + tol]``); ``uniform``: the output of
    uniform attention (the mean of the visible values), named when a wrong output equals it.
    Categories, in this order, each entry counted once: NaN, ±Inf, exactly 0 where a nonzero
    value was due, outside the hull, equal to uniform attention, otherwise "differs"."""
    got = np.asarray(got, dtype=np.float64)
    lines = []
    bad = np.zeros(got.shape, dtype=bool)
    text = nonfinite(got)
    if text:
        lines.append(text)
        bad |= ~np.isfinite(got)
    shape = np.broadcast_shapes(got.shape, *(a.shape for a in (expected, lo, hi)
                                            if a is not None))
    if expected is not None:
        exp = np.broadcast_to(expected, shape)
        wrong = ~bad & ~(np.abs(got - exp) <= tol)
    else:
        exp, wrong = None, np.zeros(shape, dtype=bool)
    if lo is not None and hi is not None:
        wrong |= ~bad & ((got < lo - tol) | (got > hi + tol))
    if not wrong.any():
        return "; ".join(lines) or None
    rest = wrong.copy()

    def take(mask: np.ndarray, text: str) -> None:
        nonlocal rest
        mask = mask & rest
        if mask.any():
            i = first(mask)
            detail = f"got {float(got[i])!r}" + (f", expected {float(exp[i])!r}"
                                                 if exp is not None else "")
            lines.append(f"{int(mask.sum())} of {got.size} outputs {text} (first at {i}: "
                         f"{detail})")
            rest = rest & ~mask

    due = np.abs(exp) > tol if exp is not None else np.ones(shape, dtype=bool)
    if lo is not None and hi is not None:
        due |= (lo > tol) | (hi < -tol)  # 0 is outside the hull
    take((got == 0) & due, "are exactly 0 where a nonzero value is due")
    if lo is not None and hi is not None:
        outside = (got < lo - tol) | (got > hi + tol)
        take(outside, f"lie outside the hull of the values they may see (± {tol:.3g})")
    if uniform is not None:
        take(np.abs(got - uniform) <= tol, "equal the mean of the visible values: attention "
             "collapsed to uniform")
    take(rest, f"differ by more than {tol:.3g}")
    return "; ".join(lines)


def check_within(got: np.ndarray, ref: np.ndarray, bound: np.ndarray, what: str) -> None:
    """``|got − ref| ≤ bound`` element-wise (float64 arrays), else an ``AssertionError`` naming
    ``what``: the non-finite entries (:func:`nonfinite`), or the worst entry by ``err − bound``
    with its value, the exact value, the error and the derived bound, and how many entries are
    outside."""
    text = nonfinite(got)
    if text:
        raise AssertionError(f"{what}: {text}")
    err = np.abs(got - ref)
    if not (err <= bound).all():
        i = tuple(int(j) for j in np.unravel_index(np.argmax(err - bound), err.shape))
        raise AssertionError(f"{what}: {float(got[i])!r} at {i}, exact {float(ref[i])!r}: "
                             f"error {err[i]:.3e} > "
                             f"derived bound {bound[i]:.3e} ({int((err > bound).sum())} of "
                             f"{err.size} entries outside)")


def check_same_precision(got: np.ndarray, exact: np.ndarray, plain, *, compute: str,
                         output: str, what: str, extra: float = 0.0,
                         extra_why: str = "") -> None:
    """The same-precision reference criterion (:mod:`kernel_verify.verify.same_precision`,
    issue #44): ``max|got − exact| ≤ c·max(max|plain − exact|, u_c·Y) + c_G·max|plain_G −
    exact| + u_o·Y``, else an ``AssertionError`` naming ``what`` with the errors, ``c`` and the
    allowance. ``exact`` the float64 value, ``plain`` the formula evaluated plainly in the same
    precision (an array or a sequence of arrays: the largest error counts; ``plain_G`` those
    marked :func:`~kernel_verify.verify.same_precision.cumulative`, decays from running sums of
    log-gates, whose error counts ``c_G`` times). ``extra``: an absolute allowance added to the
    criterion's (a derived rounding the plain evaluation does not make, named by
    ``extra_why``)."""
    from kernel_verify.verify.same_precision import compare

    if not _SAME_PRECISION[0]:
        return
    c = compare(got, exact, plain, compute=compute, output=output)
    if not (c.err <= c.allowed + extra):
        plus = (f"; plus {extra_why} {extra:.3e}, so {c.allowed + extra:.3e} allowed in all, "
                f"against the error {c.err:.3e}" if extra else "")
        raise AssertionError(f"{what}: less accurate than {c.c:g}× a plain evaluation of the "
                             f"same formula in {compute} (same-precision reference criterion, "
                             f"beside the derived bound: the result against the float64 "
                             f"evaluation of the formula the target declares — its features, "
                             f"its recurrence or softmax — not against another of its forms; a "
                             f"target computing another formula, e.g. another ε, fails it "
                             f"whatever its forms do): {c.text()}{plus}")
