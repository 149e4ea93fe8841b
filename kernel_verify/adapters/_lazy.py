"""Lazy imports of the adapted libraries, and their versions.

An adapter calls :func:`need` inside its target functions, never at module import: when the
library is not installed the property that called it is *skipped* with the reason and the
command that installs the extra (``pytest.skip``; the suite runs under pytest).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType


@dataclass(frozen=True)
class Library:
    """One adapted library: its adapter module, pip extra, distribution and import names."""

    key: str  # adapter module name under kernel_verify.adapters
    extra: str  # pyproject optional-dependencies key
    dist: str  # distribution name on PyPI
    module: str  # import name
    title: str


LIBRARIES: dict[str, Library] = {
    lib.key: lib
    for lib in (
        Library("sklearn", "sklearn", "scikit-learn", "sklearn", "scikit-learn"),
        Library("performer", "performer", "performer-pytorch", "performer_pytorch",
                "performer-pytorch"),
        Library("fla", "fla", "fla-core", "fla", "flash-linear-attention (fla-core)"),
        Library("fla_models", "fla-models", "flash-linear-attention", "fla.models",
                "flash-linear-attention models (fla.models)"),
        Library("transformers_models", "transformers-models", "transformers", "transformers",
                "transformers (Mamba, Mamba2, RWKV models)"),
        Library("nystrom_attention", "nystrom", "nystrom-attention", "nystrom_attention",
                "nystrom-attention"),
        Library("fast_transformers", "fast-transformers", "pytorch-fast-transformers",
                "fast_transformers", "pytorch-fast-transformers"),
    )
}


def install_hint(lib: Library) -> str:
    return f"pip install 'kernel-verify[{lib.extra}]'"


def missing_reason(key: str) -> str | None:
    """Why the library of adapter ``key`` cannot be imported, or None when it can."""
    lib = LIBRARIES[key]
    if importlib.util.find_spec(lib.module) is None:
        return f"{lib.dist} is not installed ({install_hint(lib)})"
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
    name = LIBRARIES[key].module + (f".{submodule}" if submodule else "")
    return importlib.import_module(name)


def dist_version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"
