"""make test's order (tests/conftest.py): the tests that share a process come first and fit in
the first batch pytest-xdist's ``--dist load`` hands a worker, so that one worker runs them all."""

from __future__ import annotations

import pytest

from tests.conftest import shares_a_process

#: Workers of make test (Makefile: ``-n 2``).
WORKERS = 2


def _first_batch(collected: int, workers: int = WORKERS) -> int:
    """Tests in a worker's first batch under ``--dist load``: a quarter of its share (at least
    2), pytest-xdist 3's ``LoadScheduling.schedule``."""
    return max((collected // workers) // 4, 2)


def test_tests_sharing_a_process_lead_and_fit_in_the_first_batch(request) -> None:
    items = request.session.items
    if len(items) < 1000:
        pytest.skip(f"{len(items)} tests collected: the order matters for the whole suite only")
    early = [item for item in items if shares_a_process(item)]
    assert items[: len(early)] == early, "a test sharing a process is not at the front"
    names = {item.path.name for item in early}
    assert {"test_packaging.py", "test_notebook.py", "test_known_failures.py"} <= names, names
    assert len(early) <= _first_batch(len(items)), (
        f"{len(early)} tests share a process, more than the {_first_batch(len(items))} of the "
        "first worker's first batch: they may split over the workers")
