"""Lazy imports of the adapted libraries, and their versions.

An adapter calls :func:`need` inside its target functions, never at module import: when the
library is not installed the property that called it is *skipped* with the reason and the
command that installs the extra (``pytest.skip``; the suite runs under pytest). What is imported
and how to install it are the adapter's record (:mod:`kernel_verify.adapters.library`).
"""

from __future__ import annotations

import importlib
import importlib.util
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType

from kernel_verify.adapters.library import Library, record


def install_hint(lib: Library) -> str:
    return lib.install_hint


def missing_reason(key: str) -> str | None:
    """Why the library of adapter ``key`` cannot be imported, or None when it can."""
    lib = record(key)
    if importlib.util.find_spec(lib.module) is None:
        return f"{lib.dist} is not installed ({lib.install_hint})"
    try:
        importlib.import_module(lib.module)
    except Exception as err:  # an installed but broken library (missing compiled part, …)
        return f"{lib.dist} is installed but does not import: {type(err).__name__}: {err}"
    return None


def need(key: str, submodule: str | None = None) -> ModuleType:
    """Import the library of adapter ``key`` (or its ``submodule``); skip the calling test with
    the reason when it is missing."""
    reason = missing_reason(key)
    if reason is not None:
        import pytest

        pytest.skip(reason)
    name = record(key).module + (f".{submodule}" if submodule else "")
    return importlib.import_module(name)


def dist_version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"
