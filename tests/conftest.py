"""Unit tests of the project (not shipped): the same Hypothesis profiles as the property suite.

The packaging tests run first: one pytest-xdist worker builds the wheel's virtualenv and runs the
installed suite in subprocesses (one module fixture, ~30 s that cannot be split) while the other
takes the rest. Last in collection order, they would leave the other worker idle at the end. The
tests of the optional libraries (mark ``kv_needs``, :mod:`tests.library_marks`) come next, as one
``xdist_group``: one worker imports fla and transformers, at set-up rather than at collection.
"""

import pytest

from kernel_verify.properties import profiles

PROFILE = profiles.load()
FIRST = ("test_packaging.py", "test_notebook.py")  # one wheel virtualenv, built once


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "kv_needs(key): the test needs the library of adapter `key`; skipped with "
        "kernel_verify.adapters.missing_reason(key) when it cannot be imported")
    # pytest-xdist's own mark, declared here too: runs without xdist (-p no:xdist) use it
    config.addinivalue_line("markers", "xdist_group(name): tests that share a pytest-xdist worker")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's loadgroup reads the groups
def pytest_collection_modifyitems(items) -> None:
    for item in items:  # one worker imports the optional libraries (make test: --dist loadgroup)
        if item.get_closest_marker("kv_needs") is not None:
            item.add_marker(pytest.mark.xdist_group("libraries"))
    # stable: otherwise in order. The libraries' group (~30 s on one worker) goes early too, so
    # that it does not end the run alone.
    items.sort(key=lambda item: (item.path.name not in FIRST,
                                 item.get_closest_marker("kv_needs") is None))


def pytest_runtest_setup(item) -> None:
    for mark in item.iter_markers("kv_needs"):
        from kernel_verify.adapters import missing_reason

        reason = missing_reason(mark.args[0])
        if reason is not None:
            pytest.skip(reason)
