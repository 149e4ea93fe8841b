"""pytest plugin that records each test's outcome as one JSON line (``KV_RESULTS=path``).

``kernel-verify check`` runs the shipped suite in a subprocess with ``-p
kernel_verify.properties.results`` and reads these records back: structured data, no parsing of
test ids or XML. Each record names the property family (the file stem without ``test_``), the
property (the test function), the target (the name of the :class:`Target` the test was
parametrised with, "" for none), the phase, the outcome and the failure text. Under
pytest-xdist only the controller writes; the target name travels from the worker in the
report's ``user_properties``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.user_properties.append(("kv_target", _target_name(item)))
    report.user_properties.append(("kv_prop", getattr(item, "originalname", item.name)))


_is_worker = False


def pytest_configure(config) -> None:
    global _is_worker
    _is_worker = hasattr(config, "workerinput")  # a pytest-xdist worker: the controller writes


def pytest_runtest_logreport(report) -> None:
    path = os.environ.get(ENV)
    if not path or _is_worker:
        return
    props = dict(p for p in report.user_properties if isinstance(p, tuple) and len(p) == 2)
    module = report.nodeid.split("::", 1)[0]
    family = Path(module).stem.removeprefix("test_")
    if report.skipped and isinstance(report.longrepr, tuple):
        message = str(report.longrepr[2])
    else:
        message = str(report.longrepr) if report.longrepr else ""
    record = {
        "nodeid": report.nodeid,
        "family": family,
        "prop": props.get("kv_prop") or report.nodeid.split("::")[-1].split("[")[0],
        "target": props.get("kv_target", ""),
        "when": report.when,
        "outcome": report.outcome,
        "message": message,
        "seconds": report.duration,
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
