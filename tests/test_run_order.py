"""make test's order (tests/conftest.py): the tests that share a process come first, within the
share pytest-xdist's ``--dist worksteal`` first hands one worker, so that one worker runs them all
before any steal (a steal takes the back half of a queue)."""

from __future__ import annotations

import pytest

from tests.conftest import shares_a_process

#: Workers of make test (Makefile: ``-n 2``).
WORKERS = 2


def _first_share(collected: int, workers: int = WORKERS) -> int:
    """Tests the first worker takes at the start under ``--dist worksteal``: the pending tests
    over the idle workers (pytest-xdist 3's ``WorkStealingScheduling.check_schedule``)."""
    return collected // workers


def test_tests_sharing_a_process_lead_and_fit_in_the_first_share(request) -> None:
    items = request.session.items
    if len(items) < 1000:
        pytest.skip(f"{len(items)} tests collected: the order matters for the whole suite only")
    early = [item for item in items if shares_a_process(item)]
    assert items[: len(early)] == early, "a test sharing a process is not at the front"
    names = {item.path.name for item in early}
    assert {"test_packaging.py", "test_notebook.py", "test_known_failures.py"} <= names, names
    assert len(early) <= _first_share(len(items)), (
        f"{len(early)} tests share a process, more than the {_first_share(len(items))} of the "
        "first worker's share: they may split over the workers")
