"""pytest configuration of the shipped property suite: the Hypothesis profile
(:mod:`kernel_verify.properties.profiles`), the α budget over the statistical assertions
collected, and the backend header. ``--kv-target`` is added by the plugin
(:mod:`kernel_verify.properties.plugin`)."""

from __future__ import annotations

import os
import re

import pytest
import torch
from hypothesis import HealthCheck, Phase, settings

from kernel_verify.properties import alpha, profiles
from kernel_verify.properties.backends import header_lines
from kernel_verify.properties.builtin_attention import example_budget
from kernel_verify.properties.known import apply_known_failures, known_reason, target_of
from kernel_verify.properties.shape_contract import contract_note

PROFILE = profiles.load()

# Accuracy checks never run in TF32 on CUDA (recorded in the header).
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def _examples(item) -> int:
    fn = getattr(item, "obj", None)
    if not getattr(fn, "is_hypothesis_test", False):
        return 1
    own = getattr(item, "_kv_settings", None) or getattr(
        fn, "_hypothesis_internal_use_settings", None)
    # explicit @example cases run besides the generated ones and spend the budget too
    explicit = len(getattr(fn, "hypothesis_explicit_examples", ()))
    return (own or settings.default).max_examples + explicit


#: Phases of a statistical property: no shrinking. Shrinking a rejected statistical test re-runs
#: it (thousands of draws each time) at other inputs until Hypothesis' five-minute shrink limit;
#: the example reported is then the first one the search rejected (its seed is in the message
#: and in the reproduce blob).
STATISTICAL_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)


def _without_shrinking(item) -> None:
    fn = getattr(item, "obj", None)
    own = getattr(fn, "_hypothesis_internal_use_settings", None)
    if own is not None and Phase.shrink in own.phases:
        fn._hypothesis_internal_use_settings = settings(
            own, phases=[p for p in own.phases if p in STATISTICAL_PHASES])


def _case_settings(item) -> None:
    """Settings of this one case (target × parametrisation), where they differ from the
    function's: fewer examples for a target declaring ``call_seconds`` in the ci profiles
    (:func:`~kernel_verify.properties.profiles.examples_for_cost`) or for a built-in attention
    target outside the hand-picked coverage
    (:func:`~kernel_verify.properties.builtin_attention.example_budget`), recorded on the case as
    ``kv_reduced``, no shrinking for a declared known failure. Stored as ``item._kv_settings``
    and put in place around the call (:func:`pytest_runtest_call`): the function object is
    shared by every case of the property."""
    fn = getattr(item, "obj", None)
    if not getattr(fn, "is_hypothesis_test", False):
        return
    own = getattr(fn, "_hypothesis_internal_use_settings", None) or settings.default
    new = own
    target = target_of(item)
    cost = getattr(target, "call_seconds", None)
    n = profiles.examples_for_cost(cost, own.max_examples)
    note = profiles.reduction_note(cost, n, own.max_examples) if cost is not None else ""
    budget = example_budget(target)
    if budget is not None and budget < n and profiles.selected() in profiles.COST_PROFILES:
        n = budget
        note = (f"{n} of {own.max_examples} examples (built-in map outside the hand-picked "
                "backend x dtype coverage, properties/builtin_attention.py)")
    if n < own.max_examples:
        new = settings(new, max_examples=n)
        item.user_properties.append(("kv_reduced", note))
    if known_reason(item) is not None and Phase.shrink in new.phases:
        new = settings(new, phases=[p for p in new.phases if p in profiles.KNOWN_PHASES])
    if target is not None and contract_note(target) is not None:
        # inputs outside the target's shape contract are rejected (shape_contract): many may be
        # before one fits, which is no defect of the test
        new = settings(new, suppress_health_check=[*new.suppress_health_check,
                                                   HealthCheck.filter_too_much])
    if new is not own:
        item._kv_settings = new


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    fn = getattr(item, "obj", None)
    case = getattr(item, "_kv_settings", None)
    if case is None or fn is None:
        yield
        return
    saved = fn._hypothesis_internal_use_settings
    fn._hypothesis_internal_use_settings = case
    try:
        yield
    finally:
        fn._hypothesis_internal_use_settings = saved


def pytest_collection_modifyitems(session, config, items) -> None:
    for item in items:
        if item.get_closest_marker("statistical") is not None:
            _without_shrinking(item)
    total = 0
    for item in items:
        _case_settings(item)
        marker = item.get_closest_marker("statistical")
        if marker is not None:
            total += int(marker.kwargs.get("assertions", 1)) * _examples(item)
    alpha.set_assertion_count(total)
    config._kv_alpha_assertions = total
    apply_known_failures(items)
    for item in items:  # a declared shape contract: every verdict says what was not drawn
        note = contract_note(target_of(item)) if target_of(item) is not None else None
        if note is not None:
            item.user_properties.append(("kv_note", note))


#: An exception text that reads as a shape error of the target's own code.
_SHAPE_ERROR = re.compile(r"shape|size|broadcast|einsum|dimension|divisible|mismatch", re.I)


def _shape_error_hint(target, err: BaseException) -> str:
    """For a sequence target without a shape contract that raised a shape error (not an
    assertion of the property): the contract fields that would keep the suite to the shapes it
    accepts (:mod:`kernel_verify.properties.shape_contract`), or ``""``."""
    if target is None or not hasattr(target, "dv_equals_d") or isinstance(err, AssertionError):
        return ""
    if not isinstance(err, RuntimeError | ValueError | IndexError | TypeError):
        return ""
    if not _SHAPE_ERROR.search(str(err)):
        return ""
    fields = [text for name, text in (
        ("dv_equals_d", "dv_equals_d=True (values as wide as queries and keys)"),
        ("length_multiple_of", "length_multiple_of=N (T a multiple of a block)"),
        ("min_length", "min_length=N")) if hasattr(target, name)]
    return (f"E   hint: {target.name} raised a shape error ({type(err).__name__}) on an input the "
            "suite drew (the drawn values above; they include empty sequences, T = 0, such as "
            "the continuation a split at the end leaves: a target returns an empty output and "
            "its state unchanged there). If it accepts only some shapes, declare them and the "
            f"suite keeps to them: {', '.join(fields)} (the fields "
            f"{type(target).__name__} takes); else the error is a defect of the target")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A case whose target's shape contract refused every input Hypothesis drew
    (``Unsatisfiable`` or the filter health check) is a skip saying so, not a failure: nothing
    of the target was tested there (:mod:`kernel_verify.properties.shape_contract`)."""
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or call.excinfo is None or not report.failed:
        return
    target = target_of(item)
    note = contract_note(target) if target is not None else None
    if note is None:
        hint = _shape_error_hint(target, call.excinfo.value)
        if hint:
            report.longrepr = f"{report.longrepr}\n{hint}"  # an E line: kept as evidence
        return
    from hypothesis.errors import FailedHealthCheck, Unsatisfiable

    err = call.excinfo.value
    if isinstance(err, Unsatisfiable) or (isinstance(err, FailedHealthCheck)
                                          and "filter" in str(err)):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           f"Skipped: {note}; no input this property draws fits it")


def pytest_report_header(config) -> list[str]:
    target = os.environ.get("KV_TARGET") or config.getoption("--kv-target")
    return [
        f"kernel-verify: Hypothesis profile {PROFILE!r}; torch {torch.__version__}; "
        "TF32 disabled for accuracy checks",
        f"targets: {target or 'built-in registry'}",
        "backends:",
        *header_lines(),
    ]


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    n = getattr(config, "_kv_alpha_assertions", None)
    if n:
        terminalreporter.write_line(
            f"kernel-verify: {alpha.budget().describe()} (statistical assertions collected: {n})"
        )
