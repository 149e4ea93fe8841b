"""The mark of a test that needs an optional library (tests/conftest.py skips it at set-up)."""

from __future__ import annotations

import pytest


def needs(key: str) -> pytest.MarkDecorator:
    """Mark a test as needing the library of adapter ``key``: tests/conftest.py skips it with
    ``kernel_verify.adapters.missing_reason(key)`` at set-up, not at collection (importing fla
    and transformers costs each pytest-xdist worker about 4 s of CPU), and sorts it to the front
    of the run, where the first worker takes it (tests/conftest.py)."""
    return pytest.mark.kv_needs(key)
