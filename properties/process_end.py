"""pytest plugin for the suite's own subprocess: :mod:`kernel_verify.runner` (``kernel-verify
check``) passes ``-p kernel_verify.properties.process_end``; never loaded in a caller's process.

When pytest is done, the process ends: every object moves into the collector's permanent
generation (:func:`gc.freeze`), so that the interpreter's shutdown does not traverse them all once
more (torch, SciPy, Hypothesis and the suite's modules; with fla and Triton imported a process's
exit measured 1.24 s, frozen 0.21 s). In-process runs (:func:`kernel_verify.check` on objects
defined in a notebook) do not load this plugin: their process goes on.
"""

from __future__ import annotations

import gc

import pytest


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    gc.freeze()
