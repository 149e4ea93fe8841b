"""pytest plugin of kernel-verify, registered through the ``pytest11`` entry point.

It is loaded by every pytest run in an environment where kernel-verify is installed, so it
stays light: it imports nothing heavy and changes nothing unless asked.

* ``--kv-target module:attr`` (or ``KV_TARGET``) points the property suite at a third-party
  adapter.
* When ``--kv-target`` is given and no test paths are, the run collects the property suite
  shipped inside the installed package (this folder), from any working directory:
  ``pytest --kv-target my_adapter:targets``.

* One verdict vocabulary (:mod:`kernel_verify.properties.verdicts`): a test case that passed
  but could not fail for its target (``kv_uncredited``) is reported as ``not credited``, and a
  declared known failure as ``known``, never as ``passed`` (pytest's own counts line says so);
  a declared known failure that passed is ``stale`` and fails the run. With ``--kv-target``, the
  terminal summary ends with the verdicts per property × target, counted exactly as
  ``kernel-verify check`` counts them for the same run.

Hypothesis profiles, the α budget and the backend header live in this folder's
``conftest.py``, which pytest loads only when it collects the shipped suite.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

#: The folder of the shipped property suite (``kernel_verify/properties`` when installed).
SUITE_DIR = Path(__file__).resolve().parent
RESULTS_ENV = "KV_RESULTS"
RESULTS_PLUGIN = "kernel_verify.properties.results"
#: The temporary folder of a run's own outcome records (removed when the run ends).
_OWN_RESULTS = pytest.StashKey[str]()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("kernel-verify")
    group.addoption(
        "--kv-target",
        default=None,
        metavar="MODULE:ATTR",
        help="run kernel-verify's property suite against a third-party adapter "
        "(same as KV_TARGET); with no test paths, the installed suite is collected",
    )


MARKERS = (
    "cuda: needs a CUDA device",
    "slow: long-running statistical or mpmath work (still run in CI, with fewer examples)",
    "statistical(assertions=1): a property making statistical assertions (counted in the α "
    "budget)",
    "kv_builtin_only: checks the suite's own built-in code, not the target (kernel-verify check "
    "leaves it out of the target's totals)",
)


def pytest_configure(config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    target = config.getoption("--kv-target")
    if target is None:
        return
    if not target.strip():
        raise pytest.UsageError("--kv-target is empty: give the adapter as module:attribute "
                                "(e.g. my_adapter:targets)")
    os.environ["KV_TARGET"] = target
    # The adapter module is usually in the working directory: make it importable as the
    # command line's `kernel-verify check` does.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    if not hasattr(config, "workerinput"):  # a bad spec: one usage error, not one per module
        from kernel_verify.properties.loader import load_targets

        try:
            load_targets(target)
        except ValueError as e:
            raise pytest.UsageError(f"--kv-target {target!r}: {e}") from None
    explicit = config.args_source == config.ArgsSource.ARGS
    if not explicit:
        config.args[:] = [str(SUITE_DIR)]
    # The outcome records of the results plugin feed the verdict summary (the controller writes
    # them; pytest-xdist workers inherit the variable and only annotate their reports).
    if not hasattr(config, "workerinput") and not os.environ.get(RESULTS_ENV):
        folder = tempfile.mkdtemp(prefix="kv-pytest-")
        os.environ[RESULTS_ENV] = str(Path(folder) / "results.jsonl")
        config.stash[_OWN_RESULTS] = folder
    if not config.pluginmanager.has_plugin(RESULTS_PLUGIN):
        config.pluginmanager.import_plugin(RESULTS_PLUGIN)


def pytest_unconfigure(config) -> None:
    folder = config.stash.get(_OWN_RESULTS, None)
    if folder:
        os.environ.pop(RESULTS_ENV, None)
        shutil.rmtree(folder, ignore_errors=True)


def _kv_word(report) -> str | None:
    """``not credited``, ``known`` or ``stale`` for a report that pytest would count otherwise
    (the results plugin's markers: ``kv_uncredited``, the ``known defect:`` xfail reason)."""
    from kernel_verify.properties.known import KNOWN_PREFIX, XPASS_STRICT

    if report.when == "call" and report.passed and any(
            isinstance(p, tuple) and p[:1] == ("kv_uncredited",)
            for p in report.user_properties):
        return "not credited"
    if report.skipped and str(getattr(report, "wasxfail", "")).startswith(KNOWN_PREFIX):
        return "known"
    if report.failed and str(report.longrepr).startswith(f"{XPASS_STRICT} {KNOWN_PREFIX}"):
        return "stale"
    return None


def pytest_report_teststatus(report, config):
    """pytest's counts line in the verdict words: ``3 not credited``, ``2 known``, ``1 stale``
    instead of ``passed``/``xfailed``/``failed`` (a stale known failure still fails the run)."""
    word = _kv_word(report)
    if word == "not credited":
        return "not credited", "n", ("NOT CREDITED", {"yellow": True})
    if word == "known":
        return "known", "k", ("KNOWN", {"yellow": True})
    if word == "stale":
        return "stale", "S", ("STALE", {"red": True})
    return None


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """With ``--kv-target``: the verdicts per property × target, as ``kernel-verify check``
    folds and counts them for this run."""
    if not config.getoption("--kv-target") or hasattr(config, "workerinput"):
        return
    path = os.environ.get(RESULTS_ENV)
    if not path or not Path(path).exists():
        return
    from kernel_verify.properties.verdicts import count_line, fold, load_results, summary

    verdicts = fold(load_results(Path(path), target_only=True))
    tr = terminalreporter
    tr.section("kernel-verify verdicts")
    for v in verdicts:
        if v.outcome in ("fail", "crash", "known", "stale", "not credited"):
            reason = v.evidence.splitlines()[0] if v.evidence else ""
            tr.write_line(f"{v.outcome.upper()} {v.family}::{v.prop} {v.target}"
                          + (f" ({reason})" if reason else ""))
    tr.write_line(f"{count_line(summary(verdicts))} — one verdict per property × target of "
                  f"{config.getoption('--kv-target')}, as `kernel-verify check` counts them "
                  "(not credited, known, stale and skipped are never a pass)")


def pytest_report_header(config) -> list[str]:
    if not config.getoption("--kv-target"):
        return []
    return [f"kernel-verify suite: {SUITE_DIR} (target {config.getoption('--kv-target')})"]
