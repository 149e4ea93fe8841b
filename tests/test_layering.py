"""Imports go one way (README "Layout"): checked mechanically on the source, with ``ast``.

Every ``import``/``from … import`` statement of every module is read, including imports inside
functions (a lazy import is still a dependency), and resolved to a dotted module name in the one
namespace ``kernel_verify`` (folders are mapped as in ``pyproject.toml``: ``impls/`` →
``kernel_verify.impls``, ``verify/`` → ``kernel_verify.verify``, ``properties/`` →
``kernel_verify.properties``; ``tests`` and ``benchmarks`` keep their own names). The rules:

1. ``kernel_verify.impls`` (the code under test) imports nothing from ``kernel_verify.verify``,
   ``kernel_verify.properties``, ``tests`` or ``benchmarks``.
2. The truth (:data:`TRUTH`) imports only the truth: no driver (CLI, check runner, third-party
   targets, mutants, calibration, reports, shared statistical checks), no property, and nothing
   of ``kernel_verify.impls`` — apart from :data:`TRUTH_EXCEPTIONS`, each with its reason.
3. Inside the truth the references do not import the moments (the moments use the references'
   mp conversions; the reverse would be a cycle), and the truth has no import cycle at all.
4. ``kernel_verify.properties`` (the shipped suite) never imports ``tests`` or ``benchmarks``.
5. Nothing imports the bare top-level names ``impls``, ``verify`` or ``properties``: they are not
   installed (one namespace).

``tests`` may import anything.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: repository folder -> dotted package name it is installed as
FOLDERS = {
    "impls": "kernel_verify.impls",
    "verify": "kernel_verify.verify",
    "properties": "kernel_verify.properties",
    "kernel_verify": "kernel_verify",
    "tests": "tests",
    "benchmarks": "benchmarks",
}

#: The high-precision side: references, exact moments, tolerances, statistics, comparisons, PSD
#: checks, attention rounding bounds, and the helpers they stand on (seeds, their own input
#: checks, the file cache of quadrature rules).
TRUTH = (
    "kernel_verify.verify.references",
    "kernel_verify.verify.moments",
    "kernel_verify.verify.tolerance",
    "kernel_verify.verify.stats",
    "kernel_verify.verify.compare",
    "kernel_verify.verify.psd",
    "kernel_verify.verify.attention_bounds",
    "kernel_verify.verify.seeds",
    "kernel_verify.verify.inputs",
    "kernel_verify.verify.cache",
    "kernel_verify.verify.atomic",
)

#: (importer, imported) pairs the truth is allowed despite rule 2, each with its reason. Empty:
#: the references take a map's description structurally (verify/references/spec.py), check
#: their own inputs (verify/inputs.py) and read learned values from the parameter draw.
TRUTH_EXCEPTIONS: dict[tuple[str, str], str] = {}

BARE = ("impls", "verify", "properties")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    parts = list(rel.with_suffix("").parts)
    parts[0] = FOLDERS[parts[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    out = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            out[_module_name(path)] = path
    return out


def _imports(name: str, path: Path) -> list[tuple[str, int]]:
    """Dotted names imported by the module (``from a import b`` gives ``a.b`` and ``a``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((module, node.lineno))
            found += [(f"{module}.{alias.name}", node.lineno) for alias in node.names]
    return found


SOURCES = _sources()
GRAPH = {name: _imports(name, path) for name, path in SOURCES.items()}


def _within(name: str, prefixes: tuple[str, ...] | str) -> bool:
    prefixes = (prefixes,) if isinstance(prefixes, str) else prefixes
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _project_module(imported: str) -> str | None:
    """The longest known module ``imported`` names (``a.b.func`` -> ``a.b``), or None."""
    parts = imported.split(".")
    for k in range(len(parts), 0, -1):
        candidate = ".".join(parts[:k])
        if candidate in SOURCES:
            return candidate
    return None


def _violations(importers: tuple[str, ...] | str, allowed) -> list[str]:
    bad = []
    for name, imports in GRAPH.items():
        if not _within(name, importers):
            continue
        for imported, line in imports:
            target = _project_module(imported)
            if target is not None and not allowed(name, target):
                bad.append(f"{SOURCES[name].relative_to(ROOT)}:{line} imports {target}")
    return sorted(set(bad))


def test_sources_found():
    assert len(SOURCES) > 80
    assert any(_within(n, "kernel_verify.verify.references") for n in SOURCES)


def test_impls_import_nothing_above_them():
    above = ("kernel_verify.verify", "kernel_verify.properties", "tests", "benchmarks")
    bad = _violations("kernel_verify.impls", lambda _, target: not _within(target, above))
    assert not bad, "impls (the code under test) imports the verifier:\n" + "\n".join(bad)


def test_truth_imports_only_the_truth():
    def allowed(importer: str, target: str) -> bool:
        return _within(target, TRUTH) or (importer, target) in TRUTH_EXCEPTIONS

    bad = _violations(TRUTH, allowed)
    assert not bad, "the truth imports a driver or the code under test:\n" + "\n".join(bad)


def test_truth_exceptions_are_still_needed():
    """A stated exception that no import uses any more must be removed from the list."""
    used = {
        (name, _project_module(imported))
        for name, imports in GRAPH.items()
        for imported, _ in imports
    }
    stale = [pair for pair in TRUTH_EXCEPTIONS if pair not in used]
    assert not stale, f"unused layering exceptions: {stale}"


def test_references_do_not_import_moments():
    refs, moments = "kernel_verify.verify.references", "kernel_verify.verify.moments"
    bad = _violations(refs, lambda _, target: not _within(target, moments))
    assert not bad, "references -> moments would close a cycle:\n" + "\n".join(bad)


def test_truth_has_no_import_cycle():
    """Package-level graph of the truth (each entry of TRUTH is one node) is acyclic."""
    def node(name: str) -> str | None:
        return next((t for t in TRUTH if _within(name, t)), None)

    edges: dict[str, set[str]] = defaultdict(set)
    for name, imports in GRAPH.items():
        src = node(name)
        if src is None:
            continue
        for imported, _ in imports:
            target = _project_module(imported)
            dst = node(target) if target else None
            if dst is not None and dst != src:
                edges[src].add(dst)
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for m in sorted(edges[n]):
            if state.get(m) == 1:
                pytest.fail("import cycle in the truth: " + " -> ".join([*path, n, m]))
            if m not in state:
                visit(m, [*path, n])
        state[n] = 2

    for n in TRUTH:
        if n not in state:
            visit(n, [])


def test_properties_never_import_tests():
    bad = _violations(
        "kernel_verify.properties",
        lambda _, target: not _within(target, ("tests", "benchmarks")),
    )
    assert not bad, "the shipped suite imports the project's unit tests:\n" + "\n".join(bad)


def test_no_bare_top_level_imports():
    bad = []
    for name, imports in GRAPH.items():
        for imported, line in imports:
            if imported.split(".")[0] in BARE:
                bad.append(f"{SOURCES[name].relative_to(ROOT)}:{line} imports {imported}")
    assert not bad, "bare top-level packages are not installed:\n" + "\n".join(sorted(set(bad)))


def _is_test_module(name: str) -> bool:
    return name.rsplit(".", 1)[-1].startswith(("test_", "conftest"))


def test_library_modules_never_import_test_modules():
    """The report, the CLI, the runners and every other library module call check functions
    from library modules (e.g. ``properties/unbiased_checks.py``), never from a test module:
    importing a test module runs its collection-time code (target selection reads
    ``KV_TARGET``)."""
    library = tuple(p for p in FOLDERS.values() if p not in ("tests", "benchmarks"))
    bad = [
        f"{SOURCES[name].relative_to(ROOT)}:{line} imports {target}"
        for name, imports in GRAPH.items()
        if _within(name, library) and not _is_test_module(name)
        for imported, line in imports
        if (target := _project_module(imported)) is not None and _is_test_module(target)
        and _within(target, "kernel_verify.properties")
    ]
    assert not bad, "library modules import test modules:\n" + "\n".join(sorted(set(bad)))
