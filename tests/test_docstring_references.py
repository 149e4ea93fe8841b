"""Every dotted cross-reference in a docstring or comment is an import path that works.

``:mod:`, ``:func:``, ``:class:`` (and the other Sphinx roles) with a dotted target must name a
module or an attribute that ``importlib`` finds, so that a reader (or Sphinx) can follow it:
the installed namespace is ``kernel_verify.…`` (``impls.…``/``verify.…`` are folders, not
modules). A dotted target may also be relative to its own module (``Backend.from_numpy``);
targets without a dot are local names and are not checked here.
"""

from __future__ import annotations

import importlib
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = {"impls": "kernel_verify.impls", "verify": "kernel_verify.verify",
           "properties": "kernel_verify.properties"}
FOLDERS = ("impls", "verify", "properties", "kernel_verify", "benchmarks", "tests")
ROLE = re.compile(r":(?:func|mod|class|meth|data|attr|obj|exc):`~?([A-Za-z_][\w.]*)`")


@cache
def _resolves(path: str) -> bool:
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    parts[0] = PACKAGE.get(parts[0], parts[0])
    return ".".join(p for p in parts if p != "__init__")


def _references() -> list[tuple[str, int, str]]:
    found = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            for m in ROLE.finditer(text):
                if "." in m.group(1):
                    line = text.count("\n", 0, m.start()) + 1
                    found.append((_module_of(path), line, m.group(1)))
    return found


def test_there_are_references_to_check() -> None:
    assert len(_references()) > 100


def test_every_dotted_reference_resolves() -> None:
    broken = [f"{f}:{line}: {target}" for f, line, target in _references()
              if not _resolves(target) and not _resolves(f"{f}.{target}")]
    assert not broken, "references that do not import:\n" + "\n".join(broken)
