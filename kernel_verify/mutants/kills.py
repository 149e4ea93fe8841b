"""What a kill means: the failing verdicts of one suite run, classified, and whether they are the
kill a mutant was written for. Shared by the white-box runner
(:mod:`kernel_verify.mutants.runner`), the black-box pass
(:mod:`kernel_verify.mutants.blackbox_runner`) and the controls.

Every failing verdict gets one *kind*, from its evidence (the exception lines the check runner
keeps, :func:`kernel_verify.runner.fold`):

* ``property`` — an ``AssertionError`` raised by the property's own assertion: the defect the
  property is about;
* ``non-finite`` — a :data:`NONFINITE` error: the property stopped because the target's output
  was NaN/±Inf where its identity could not be judged (raised by the properties as
  ``properties.evidence.NonFiniteOutputError``, an ``AssertionError`` subclass);
* ``exception`` — any other exception (``TypeError``, ``ValueError``, ``RuntimeError``, …): the
  target or the suite's own input checks raised (e.g. ``TypeError: dtypes must match``);
* ``crash`` — a test worker died.

A verdict whose evidence holds several distinct failures (a Hypothesis ``ExceptionGroup``) takes
the first kind in that order. A mutant is *killed as intended* when some verdict of kind
``property`` fails a property named by its ``expected_killers`` (a family ``stem`` matches each
of its properties, ``stem::test_name`` one property). Properties whose subject is finiteness
(``test_outputs_stay_finite_…``, ``test_non_finite_input_is_rejected``) fail by a plain
assertion, so they count as ``property`` kills there. A control (a correct twin of
some mutant code) *fails* on any failing or crashed verdict.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kernel_verify.runner import SuiteRun, Verdict

#: Name of the exception class the properties raise for a non-finite output that is not the
#: property's subject (``kernel_verify.properties.evidence.NonFiniteOutputError``; the layers
#: forbid importing it here, so the runner matches its name).
NONFINITE = "NonFiniteOutputError"
KINDS = ("property", "non-finite", "exception", "crash")
_LINE = re.compile(r"^(?:[\w.]+\.)?(\w+)(?:\s*\(.*?\))?:")


def _kind_of_line(name: str) -> str | None:
    if name == NONFINITE:
        return "non-finite"
    if name == "AssertionError":
        return "property"
    if name.endswith("Group"):  # the group's header: its members are listed below it
        return None
    if name.endswith(("Error", "Exception", "Failure")):
        return "exception"
    return None


def failure_kind(v: Verdict) -> str:
    """The kind (:data:`KINDS`) of a failing or crashed verdict (see the module docstring)."""
    if v.outcome == "crash":
        return "crash"
    found = set()
    for line in v.evidence.splitlines():
        match = _LINE.match(line.strip())
        if match and (kind := _kind_of_line(match.group(1))):
            found.add(kind)
    for kind in KINDS:
        if kind in found:
            return kind
    return "exception"


def failures(run: SuiteRun) -> list[tuple[str, str]]:
    """``[(family::property, kind)]`` of the failing and crashed verdicts of ``run`` (one per
    property: the most meaningful kind over its targets)."""
    best: dict[str, str] = {}
    for v in run.verdicts:
        if v.outcome not in ("fail", "crash"):
            continue
        key, kind = f"{v.family}::{v.prop}", failure_kind(v)
        if key not in best or KINDS.index(kind) < KINDS.index(best[key]):
            best[key] = kind
    return sorted(best.items())


def killed(run: SuiteRun) -> bool:
    """At least one property failed (any kind; the plain kill of the matrix)."""
    return any(v.outcome == "fail" for v in run.verdicts)


def matches(prop: str, expected: Iterable[str]) -> str | None:
    """The entry of ``expected`` that names ``prop`` (``family::test``): the family stem or the
    property itself; None if none does."""
    family = prop.split("::", 1)[0]
    for e in expected:
        if e == prop or e == family:
            return e
    return None


def intended(run: SuiteRun, expected: Iterable[str]) -> list[str]:
    """The properties that killed ``run`` as intended (see the module docstring)."""
    expected = tuple(expected)
    out = []
    for prop, kind in failures(run):
        if matches(prop, expected) is None:
            continue
        if kind == "property":
            out.append(prop)
    return out


def verdict_word(run: SuiteRun, expected: Iterable[str]) -> str:
    """``killed`` (as intended), ``killed (other)`` (by a property outside ``expected``),
    ``killed (non-finite only)``, ``killed (exception only)``, ``crashed`` or ``SURVIVED``."""
    if run.crashed:
        return "crashed"
    if intended(run, expected):
        return "killed"
    kinds = {kind for _, kind in failures(run)}
    if "property" in kinds:
        return "killed (other)"
    for kind in ("non-finite", "exception", "crash"):
        if kind in kinds:
            return f"killed ({kind} only)"
    return "SURVIVED"


def control_failed(run: SuiteRun) -> bool:
    """A control (a correct twin) fails on any failing or crashed verdict, or a crashed run."""
    return run.crashed or any(v.outcome in ("fail", "crash") for v in run.verdicts)


def describe(run: SuiteRun) -> str:
    """``family::prop (kind), …`` of the failures of ``run``."""
    return ", ".join(f"{p} ({k})" for p, k in failures(run))
