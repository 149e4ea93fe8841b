"""The correctness gate: the device's cases of the properties that guard the timed code.

Before anything is timed, the run executes, in this process (CUDA is initialised once, never in
a forked child), the property cases of the benchmarked code on the run's device — exact and
linear attention and their identities, the forms (decode), the feature maps against their
references, the gradients, and the gated forms where the tree has them — through
``pytest.main`` with the ``ci`` Hypothesis profile. Only items whose id names the device
(``torch:cuda`` or, in the rehearsal, ``torch:cpu``) are kept, float32 first (the dtype the
benchmarks time). The gate has its own share of the budget: items not started when it is spent
are skipped with that reason and counted as *not run*, never as passed. A failing item stops the
run before any timing: speed of wrong code is not recorded.
"""

from __future__ import annotations

import io
import os
import time
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: Property files that guard the timed code (a file the tree lacks is left out).
FILES = ["properties/test_attention_identities.py", "properties/test_attention_forms.py",
         "properties/test_gated_forms.py", "properties/test_feature_reference.py",
         "properties/test_gradients.py"]
BUDGET_REASON = "gate budget spent"


@dataclass
class GateResult:
    passed: int = 0
    failed: list[str] = field(default_factory=list)
    not_run: int = 0  # skipped because the gate's budget was spent
    skipped: int = 0  # skipped by the suite, with its own reason
    seconds: float = 0.0
    exit_code: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed and self.exit_code in (0, 5) and self.passed > 0


class _Gate:
    def __init__(self, device: str, deadline: float, result: GateResult) -> None:
        self.marker = f"-torch:{device}-"
        self.deadline = deadline
        self.result = result

    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        keep = [i for i in items if self.marker in i.nodeid]
        drop = [i for i in items if self.marker not in i.nodeid]
        keep.sort(key=lambda i: "float32" not in i.nodeid)  # stable: float32 first
        items[:] = keep
        if drop:
            config.hook.pytest_deselected(items=drop)

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if time.monotonic() > self.deadline:
            pytest.skip(BUDGET_REASON)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        r = self.result
        if report.failed:
            r.failed.append(report.nodeid)
        elif report.when == "call" and report.passed:
            r.passed += 1
        elif report.skipped:
            reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else ""
            if BUDGET_REASON in reason:
                r.not_run += 1
            else:
                r.skipped += 1


def run_gate(root: Path, device: str, budget: float, log: Path) -> GateResult:
    """Run the gate on the checkout ``root`` for ``budget`` seconds; pytest's output to ``log``."""
    result = GateResult()
    files = [f for f in FILES if (root / f).exists()]
    start = time.monotonic()
    os.environ.setdefault("CI", "true")  # the ci Hypothesis profile (derandomized)
    args = [*files, "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-o", "addopts=",
            "--rootdir", str(root)]
    buffer = io.StringIO()
    cwd = os.getcwd()
    try:
        os.chdir(root)
        with redirect_stdout(buffer):
            result.exit_code = int(pytest.main(args, plugins=[_Gate(device, start + budget,
                                                                    result)]))
    finally:
        os.chdir(cwd)
    result.seconds = time.monotonic() - start
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(buffer.getvalue())
    return result
