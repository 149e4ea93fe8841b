"""Every dotted cross-reference in a docstring or comment is an import path that works, and every
import path or repository file written out in a docstring, comment or document exists.

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


# ------------------------------------------ import paths and file paths in docstrings and docs
#: ``kernel_verify.<module>.<name>`` written out (not only in a Sphinx role).
DOTTED = re.compile(r"(?<![\w./])(kernel_verify(?:\.[A-Za-z_]\w*)+)")
#: A repository file (``properties/test_<family>.py``, ``docs/math.md``), optionally ``::name``.
#: (``reports/`` is left out: what a command writes there may be absent from a fresh clone.)
FILE_REF = re.compile(
    r"(?<![\w./-])((?:impls|verify|properties|kernel_verify|tests|benchmarks|tools|examples"
    r"|docs)/[\w/.-]*\w\.(?:py|md|json|toml))(?:::(\w+))?")
DOCS = ("README.md", "CONTRIBUTING.md", "docs")


def _prose() -> list[tuple[str, int, str]]:
    """``(file, first line, text)`` of every docstring and comment of the sources and of every
    Markdown document (README, CONTRIBUTING, docs/): what a reader follows, not string data."""
    import ast
    import io
    import tokenize

    out = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel, text = str(path.relative_to(REPO)), path.read_text(encoding="utf-8")
            tree = ast.parse(text)
            for node in ast.walk(tree):
                if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef |
                              ast.AsyncFunctionDef):
                    body = node.body
                    if (body and isinstance(body[0], ast.Expr)
                            and isinstance(body[0].value, ast.Constant)
                            and isinstance(body[0].value.value, str)):
                        out.append((rel, body[0].lineno, body[0].value.value))
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type == tokenize.COMMENT:
                    out.append((rel, tok.start[0], tok.string))
    for doc in DOCS:
        for path in sorted([REPO / doc] if doc.endswith(".md") else (REPO / doc).glob("*.md")):
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                out.append((str(path.relative_to(REPO)), i, line))
    return out


def _importable(target: str) -> str | None:
    """None when ``target`` resolves; else why not."""
    try:
        return None if _resolves(target) else "does not resolve"
    except Exception as err:  # a module that fails to import is a broken reference too
        return f"import fails: {type(err).__name__}: {err}"[:160]


def test_every_written_import_path_resolves() -> None:
    """``kernel_verify.<module>.<name>`` in a docstring, comment or document resolves."""
    broken = []
    for where, line, text in _prose():
        for m in DOTTED.finditer(text):
            target = m.group(1)
            why = _importable(target)
            if why is not None:
                broken.append(f"{where}:{line}: {target} ({why})")
    assert not broken, "import paths that do not resolve:\n" + "\n".join(sorted(set(broken)))


def test_every_file_cited_in_prose_exists() -> None:
    """A repository path (``properties/test_<family>.py``, ``docs/math.md``) in a docstring,
    comment or document exists; with ``::name``, the file defines ``name``."""
    broken = []
    for where, line, text in _prose():
        for m in FILE_REF.finditer(text):
            path, name = REPO / m.group(1), m.group(2)
            if not path.exists():
                broken.append(f"{where}:{line}: {m.group(1)} does not exist")
            elif name and path.suffix == ".py" and not re.search(
                    rf"^\s*(?:async def|def|class)\s+{name}\b|^{name}\s*[:=]",
                    path.read_text(encoding="utf-8"), re.M):
                broken.append(f"{where}:{line}: {m.group(1)} defines no {name!r}")
    assert not broken, "cited files that do not exist:\n" + "\n".join(sorted(set(broken)))
