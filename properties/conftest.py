"""pytest configuration of the shipped property suite: the Hypothesis profile
(:mod:`kernel_verify.properties.profiles`), the α budget over the statistical assertions
collected, and the backend header. ``--kv-target`` is added by the plugin
(:mod:`kernel_verify.properties.plugin`)."""

from __future__ import annotations

import os

import torch
from hypothesis import Phase, settings

from kernel_verify.properties import alpha, profiles
from kernel_verify.properties.backends import header_lines
from kernel_verify.properties.known import apply_known_failures

PROFILE = profiles.load()

# Accuracy checks never run in TF32 on CUDA (recorded in the header).
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def _examples(item) -> int:
    fn = getattr(item, "obj", None)
    if not getattr(fn, "is_hypothesis_test", False):
        return 1
    own = getattr(fn, "_hypothesis_internal_use_settings", None)
    return (own or settings.default).max_examples


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


def pytest_collection_modifyitems(session, config, items) -> None:
    total = 0
    for item in items:
        marker = item.get_closest_marker("statistical")
        if marker is not None:
            total += int(marker.kwargs.get("assertions", 1)) * _examples(item)
            _without_shrinking(item)
    alpha.set_assertion_count(total)
    config._kv_alpha_assertions = total
    apply_known_failures(items)


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
