"""pytest plugin of kernel-verify, registered through the ``pytest11`` entry point.

It is loaded by every pytest run in an environment where kernel-verify is installed, so it
stays light: it imports nothing heavy and changes nothing unless asked.

* ``--kv-target module:attr`` (or ``KV_TARGET``) points the property suite at a third-party
  adapter.
* When ``--kv-target`` is given and no test paths are, the run collects the property suite
  shipped inside the installed package (this folder), from any working directory:
  ``pytest --kv-target my_adapter:targets``.

Hypothesis profiles, the α budget and the backend header live in this folder's
``conftest.py``, which pytest loads only when it collects the shipped suite.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The folder of the shipped property suite (``kernel_verify/properties`` when installed).
SUITE_DIR = Path(__file__).resolve().parent


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
    if not target:
        return
    os.environ["KV_TARGET"] = target
    # The adapter module is usually in the working directory: make it importable as the
    # command line's `kernel-verify check` does.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    explicit = config.args_source == config.ArgsSource.ARGS
    if not explicit:
        config.args[:] = [str(SUITE_DIR)]


def pytest_report_header(config) -> list[str]:
    if not config.getoption("--kv-target"):
        return []
    return [f"kernel-verify suite: {SUITE_DIR} (target {config.getoption('--kv-target')})"]
