"""Unit tests of the project (not shipped): the same Hypothesis profiles as the property suite.

``make test`` runs two pytest-xdist workers with ``--dist worksteal``: each worker first takes
half of the collection, in order, and a worker whose queue runs dry takes the back half of the
other's. The tests that should share one process are sorted to the front
(:func:`pytest_collection_modifyitems`), so the first worker runs them all, first, before any
steal: the packaging tests and the notebook (one wheel virtualenv, one module fixture running
the example's ``check``), the tests of the optional libraries (mark ``kv_needs``,
:mod:`tests.library_marks`: one worker imports fla and transformers, at set-up rather than at
collection) and the known-failure tests (one suite run). They are subprocess-heavy and start the
run; the other worker takes CPU-bound tests meanwhile. Were one of them to land on the other
worker, its fixture would run there once more: slower, never wrong.

Measured with one tree (wall, user CPU): ``--dist loadgroup`` (which pins tests by
``xdist_group`` marks, but schedules every unmarked test as a unit of its own, at most two ahead
per worker, and counts the pending tests over every unit a worker was given at each completion)
149.5 s / 270 s, ``--dist load`` 134.5 s / 250 s; later, back to back, ``load`` 147.5 s and
``worksteal`` 144.9 s (load's workers ended 4–10 s apart; worksteal's together).

At the end, each pytest process freezes its objects (:func:`pytest_unconfigure`).
"""

import gc

import pytest

from kernel_verify.properties import profiles

PROFILE = profiles.load()
FIRST = ("test_packaging.py", "test_notebook.py")  # one wheel virtualenv, built once
SHARED_SUITE_RUN = "test_known_failures.py"  # one module fixture: one suite run


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "kv_needs(key): the test needs the library of adapter `key`; skipped with "
        "kernel_verify.adapters.missing_reason(key) when it cannot be imported")


def _run_order(item) -> tuple[bool, bool, bool]:
    return (item.path.name not in FIRST, item.get_closest_marker("kv_needs") is None,
            item.path.name != SHARED_SUITE_RUN)


def shares_a_process(item) -> bool:
    """Whether ``item`` is one of the tests that should run in one worker (module docstring)."""
    return not all(_run_order(item))


def pytest_collection_modifyitems(items) -> None:
    """The tests that share a process first (module docstring), in this order: the wheel's,
    the optional libraries', the known failures'; the sort is stable (otherwise in order)."""
    items.sort(key=_run_order)


def pytest_runtest_setup(item) -> None:
    for mark in item.iter_markers("kv_needs"):
        from kernel_verify.adapters import missing_reason

        reason = missing_reason(mark.args[0])
        if reason is not None:
            pytest.skip(reason)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    """The run is over and this process ends next: every object moves into the collector's
    permanent generation (:func:`gc.freeze`), so that the interpreter's shutdown does not
    traverse them all again. A worker holding torch, fla, transformers and Triton spent 1–2 s
    of CPU in that collection while the controller waited for it (the exit of a process that
    imports fla: 1.24 s, frozen 0.21 s). Nothing of the project's own runs in process after
    this: ``kernel_verify.check`` runs pytest in process, but with the shipped suite's
    conftest, not this one."""
    gc.freeze()
