"""Unit tests of the project (not shipped): the same Hypothesis profiles as the property suite.

The packaging tests run first: one pytest-xdist worker builds the wheel's virtualenv and runs the
installed suite in subprocesses (one module fixture, ~30 s that cannot be split) while the other
takes the rest. Last in collection order, they would leave the other worker idle at the end.
"""

from kernel_verify.properties import profiles

PROFILE = profiles.load()
FIRST = ("test_packaging.py", "test_notebook.py")  # one wheel virtualenv, built once


def pytest_collection_modifyitems(items) -> None:
    items.sort(key=lambda item: item.path.name not in FIRST)  # stable: otherwise in order
