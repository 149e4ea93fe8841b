"""pytest configuration: Hypothesis profiles and the backend header.

Profiles (``HYPOTHESIS_PROFILE`` selects one; under ``CI=true`` the default is ``ci``):

* ``dev``: quick local runs (few examples).
* ``ci``: derandomized (the same examples on every run), no deadline, a fixed example budget.
* ``nightly``: fresh random seeds and many more examples.
* ``mutants``: ``ci`` without shrinking (``kernel-verify mutants`` only needs to know *whether*
  a property fails, and shrinking a failure re-runs the property many times).
"""

from __future__ import annotations

import os

import torch
from hypothesis import HealthCheck, Phase, settings

from properties import alpha
from properties.backends import header_lines

settings.register_profile(
    "dev", max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci",
    max_examples=25,
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "mutants",
    parent=settings.get_profile("ci"),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
settings.register_profile(
    "nightly",
    max_examples=300,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
_default = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", _default)
settings.load_profile(PROFILE)

# Accuracy checks never run in TF32 on CUDA (recorded in the header).
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--kv-target",
        default=None,
        help="run the property suite against module:attribute (a third-party adapter); "
        "same as KV_TARGET",
    )


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "statistical(assertions=1): a property making statistical assertions"
    )
    target = config.getoption("--kv-target")
    if target:
        os.environ["KV_TARGET"] = target


def _examples(item) -> int:
    fn = getattr(item, "obj", None)
    if not getattr(fn, "is_hypothesis_test", False):
        return 1
    own = getattr(fn, "_hypothesis_internal_use_settings", None)
    return (own or settings.default).max_examples


def pytest_collection_modifyitems(session, config, items) -> None:
    total = 0
    for item in items:
        marker = item.get_closest_marker("statistical")
        if marker is not None:
            total += int(marker.kwargs.get("assertions", 1)) * _examples(item)
    alpha.set_assertion_count(total)
    config._kv_alpha_assertions = total


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
