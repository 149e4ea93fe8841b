"""pytest plugin that records each test's outcome as one JSON line (``KV_RESULTS=path``).

``kernel-verify check`` runs the shipped suite in a subprocess with ``-p
kernel_verify.properties.results`` and reads these records back: structured data, no parsing of
test ids or XML. Each record names the property family (the file stem without ``test_``), the
property (the test function), the target (the name of the :class:`Target` the test was
parametrised with, "" for none), the phase, the outcome and the failure text. Under
pytest-xdist only the controller writes; the target name travels from the worker in the
report's ``user_properties``.

Besides, each record carries: the backend of the case (``numpy-float64``, ``torch:cpu-bfloat16``,
"" when not parametrised by one), ``builtin_only`` (the test is marked ``kv_builtin_only``: it
checks the suite's own code, not the target), ``notes`` (``record_property("kv_note", …)``:
input-policy observations), ``uncredited`` (``record_property("kv_uncredited", reason)``: the
test passed but could not fail for this target in this case, e.g. an input-policy property for a
target that does not claim ``validates_input``; the verdict is then ``not credited`` with the
reason, never ``pass``), ``reduced`` (``kv_reduced``: the case ran fewer Hypothesis examples
than the property's own count because its target declares ``call_seconds``,
:mod:`kernel_verify.properties.profiles`), ``crashed`` (a pytest-xdist worker died while
running it: a crash,
not a failed property), ``known`` (``"known"``: a declared known failure that still fails;
``"stale"``: one that passed, :mod:`kernel_verify.properties.known`) and ``repro``: one shell
command that re-runs exactly this case (target,
property, backend and dtype, Hypothesis profile; the Hypothesis ``@reproduce_failure`` blob, when
the failure printed one, is appended as a comment line).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from kernel_verify.properties.known import KNOWN_PREFIX, XPASS_STRICT

ENV = "KV_RESULTS"


def _target_name(item) -> str:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return ""
    for value in callspec.params.values():
        name = getattr(value, "name", None)
        if isinstance(name, str) and type(value).__name__.endswith("Target"):
            return name
    return ""


def _backend_id(item) -> str:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return ""
    params = callspec.params
    b = params.get("backend")
    return str(b.id) if hasattr(b, "id") else ""


#: The reproduce record of a case run in process (``kernel_verify.check`` of target objects no
#: module holds): this prefix and a pytest ``-k`` expression naming the case; the API turns it
#: into a ``kernel_verify.check(…)`` line that rebuilds the run.
INLINE_REPRO = "kv-inline -k "
_K_IDENT = re.compile(r"^[\w:+\-.\[\]/]+$")  # what pytest's -k grammar takes as one name


def repro_command(item) -> str:
    """The shell command that re-runs exactly this test case (for an in-process run: the
    ``-k`` expression that selects it, :data:`INLINE_REPRO`)."""
    from kernel_verify.properties.profiles import selected
    from kernel_verify.properties.targets import _IN_PROCESS

    if _IN_PROCESS is not None:
        family = Path(str(item.path)).stem
        name = item.name if _K_IDENT.match(item.name) else getattr(item, "originalname",
                                                                   item.name)
        return f"{INLINE_REPRO}{family} and {name}"
    env = []
    extra = os.environ.get("KV_EXTRA_PATH")
    if extra:
        env.append(f"PYTHONPATH={shlex.quote(extra)}")
    target = os.environ.get("KV_TARGET")
    if target:
        env.append(f"KV_TARGET={shlex.quote(target)}")
    env.append(f"HYPOTHESIS_PROFILE={selected()}")
    node = f"{Path(str(item.path)).resolve()}::{item.name}"
    return " ".join([*env, shlex.quote(sys.executable), "-m", "pytest", shlex.quote(node),
                     "-p", "no:cacheprovider", "-p", "no:xdist"])


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BLOB = re.compile(r"@reproduce_failure\([^)]*\)")
#: What Hypothesis' filter health check means for a property of the suite (the first line of
#: such a failure; Hypothesis' own text, which suggests disabling the check, follows).
_FILTERED = (
    "NoExampleJudgedError: no example could be judged: the property discarded nearly every "
    "input it drew, because its precondition almost never held for this target (for the "
    "attention identities: outputs that are NaN or infinite on ordinary inputs, where an "
    "identity holds only vacuously — test_outputs_stay_finite_across_input_scales names the "
    "non-finite outputs; for the Nyström properties: landmark sets that leave no informative "
    "case). This is a finding about the target, not a setting to turn off")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.user_properties.append(("kv_target", _target_name(item)))
    report.user_properties.append(("kv_prop", getattr(item, "originalname", item.name)))
    report.user_properties.append(("kv_backend", _backend_id(item)))
    report.user_properties.append(("kv_builtin_only",
                                   item.get_closest_marker("kv_builtin_only") is not None))
    report.user_properties.append(("kv_repro", repro_command(item)))


_is_worker = False


def pytest_configure(config) -> None:
    global _is_worker
    _is_worker = hasattr(config, "workerinput")  # a pytest-xdist worker: the controller writes


def pytest_collectreport(report) -> None:
    """A test module that cannot be collected (an import error, or a target whose declaration
    breaks a parametrisation) is recorded as an error of that module: otherwise its properties
    would silently be missing from the verdicts."""
    path = os.environ.get(ENV)
    if not path or _is_worker or not report.failed:
        return
    module = report.nodeid.split("::", 1)[0]
    record = {
        "nodeid": report.nodeid, "family": Path(module).stem.removeprefix("test_"),
        "prop": "(collection)", "target": "", "backend": "", "builtin_only": False,
        "when": "collect", "outcome": "failed", "crashed": False, "known": "",
        "message": f"{module} could not be collected, so none of its properties ran:\n"
                   + _ANSI.sub("", str(report.longrepr)),
        "notes": [], "repro": "", "seconds": 0.0,
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def pytest_runtest_logreport(report) -> None:
    path = os.environ.get(ENV)
    if not path or _is_worker:
        return
    pairs = [p for p in report.user_properties if isinstance(p, tuple) and len(p) == 2]
    props = dict(pairs)
    notes = [str(v) for k, v in pairs if k == "kv_note"]
    uncredited = [str(v) for k, v in pairs if k == "kv_uncredited"]
    reduced = [str(v) for k, v in pairs if k == "kv_reduced"]
    module = report.nodeid.split("::", 1)[0]
    family = Path(module).stem.removeprefix("test_")
    if report.skipped and isinstance(report.longrepr, tuple):
        message = str(report.longrepr[2])
    else:
        message = str(report.longrepr) if report.longrepr else ""
    # pytest colours the text where the environment asks for it (FORCE_COLOR, PY_COLORS: a
    # notebook kernel sets them); the evidence is plain text
    message = _ANSI.sub("", message)
    if report.failed and "filtering out a lot of inputs" in message:
        message = _FILTERED + "\n" + message
    crashed = report.failed and "crashed while running" in message
    # Declared known failures (kernel_verify.properties.known): a strict xfail that failed as
    # declared, or that passed (stale).
    wasxfail = str(getattr(report, "wasxfail", ""))
    known = ""
    if report.skipped and wasxfail.startswith(KNOWN_PREFIX):
        known, message = "known", wasxfail.removeprefix(KNOWN_PREFIX)
    elif report.failed and message.startswith(f"{XPASS_STRICT} {KNOWN_PREFIX}"):
        known = "stale"
        message = message.removeprefix(f"{XPASS_STRICT} {KNOWN_PREFIX}")
    repro = props.get("kv_repro", "")
    blob = _BLOB.search(message)
    if report.failed and repro and blob:
        from hypothesis import settings

        if settings.default.derandomize:  # (the ci profile): no edit of the suite needed
            repro += ("   # derandomized profile: this command runs the same search and finds "
                      "this example again")
        else:
            repro += (f"   # Hypothesis: add {blob.group(0)} above the test (in a checkout of "
                      "the suite) to replay this example")
    record = {
        "nodeid": report.nodeid,
        "family": family,
        "prop": props.get("kv_prop") or report.nodeid.split("::")[-1].split("[")[0],
        "target": props.get("kv_target", ""),
        "backend": props.get("kv_backend", ""),
        "builtin_only": bool(props.get("kv_builtin_only", False)),
        "when": report.when,
        "outcome": report.outcome,
        "crashed": crashed,
        "known": known,
        "message": message,
        "notes": notes,
        "uncredited": uncredited,
        "reduced": reduced,
        "repro": repro,
        "seconds": report.duration,
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
