"""Fixtures of the pytest-benchmark files (run: ``pytest benchmarks/pytest``).

This directory has no ``__init__.py`` on purpose: asv imports every module of the ``benchmarks``
package when it discovers benchmarks, and these files need pytest. The default ``pytest`` run
(testpaths = ``properties/``) does not collect them either.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks._common import PinnedThreads


@pytest.fixture(autouse=True)
def pinned_threads() -> Iterator[None]:
    """The same thread pinning as the asv classes (torch and OpenBLAS: 1 thread), restored."""
    threads = PinnedThreads()
    yield
    threads.restore()
