"""Imports go one way (README "Layout"): checked mechanically on the source, with ``ast``.

Every ``import``/``from … import`` statement of every module is read, including imports inside
functions (a lazy import is still a dependency), and resolved to a dotted module name in the one
namespace ``kernel_verify`` (folders are mapped as in ``pyproject.toml``: ``impls/`` →
``kernel_verify.impls``, ``verify/`` → ``kernel_verify.verify``, ``properties/`` →
``kernel_verify.properties``; ``tests`` and ``benchmarks`` keep their own names). The rules are
rules on folders, the layers of the project:

==============  ======================================================  ====================
folder          what it holds                                           may import
==============  ======================================================  ====================
``impls/``      the code under test                                     ``impls/``
``verify/``     the truth: mpmath references, exact moments,            ``verify/``
                tolerances, statistics, bounds, seeds, backend axis
``properties/`` the shipped suite: target protocol, built-in targets,   ``properties/``,
                strategies, shared checks, plugin, test files           ``verify/``, ``impls/``
``kernel_verify/`` the application: API, CLI, check runner, report,     all of the above
                mutants, calibration, conformance, adapters
==============  ======================================================  ====================

Besides: inside the truth the references do not import the moments (the moments use the
references' mp conversions; the reverse would be a cycle) and the truth has no import cycle;
nothing but ``tests`` and ``benchmarks`` imports ``tests`` or ``benchmarks``; no library module
imports a test module; nothing imports the bare top-level names ``impls``, ``verify`` or
``properties`` (they are not installed: one namespace).

Inside the application (``kernel_verify/`` itself) the groups have an order of their own,
:data:`APP_RANK` (provenance and the runner at the bottom, the API, then adapters, mutants and
the report, then calibration, the CLI on top), with no import cycle; ``kernel_verify/calibration/``
goes certify <- parts <- run <- report; every argparse handler is in ``cli.py``. Each of these
rules fails at 92f56a8, the commit before they held (checked in a worktree of that commit).
"""

from __future__ import annotations

import ast
import functools
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

IMPLS, TRUTH, SUITE = "kernel_verify.impls", "kernel_verify.verify", "kernel_verify.properties"

#: layer -> the layers its modules may import (itself included)
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "impls": (IMPLS,),
    "verify": (TRUTH,),
    "properties": (SUITE, TRUTH, IMPLS),
    "kernel_verify": ("kernel_verify",),
}

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


@functools.cache
def _graph() -> dict[str, list[tuple[str, int]]]:
    """Every module's imports, parsed on first use (by the tests, not at collection: each
    pytest worker collects this module)."""
    return {name: _imports(name, path) for name, path in SOURCES.items()}


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
    for name, imports in _graph().items():
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


def layer_of(name: str) -> str | None:
    """The layer (a key of :data:`MAY_IMPORT`) a module belongs to; None for tests/benchmarks."""
    for layer, package in (("impls", IMPLS), ("verify", TRUTH), ("properties", SUITE)):
        if _within(name, package):
            return layer
    return "kernel_verify" if _within(name, "kernel_verify") else None


@pytest.mark.parametrize("layer", sorted(MAY_IMPORT))
def test_layer_imports_only_what_lies_below(layer):
    def allowed(_: str, target: str) -> bool:
        return _within(target, MAY_IMPORT[layer])

    bad = [line for line in _violations(tuple(SOURCES), allowed)
           if layer_of(_name_of(line)) == layer]
    assert not bad, f"{layer}/ imports above its layer:\n" + "\n".join(bad)


def _name_of(violation: str) -> str:
    path = ROOT / violation.split(":", 1)[0]
    return next(n for n, p in SOURCES.items() if p == path)


def test_every_library_module_has_a_layer():
    missing = [n for n in SOURCES if not _within(n, ("tests", "benchmarks")) and
               layer_of(n) is None]
    assert not missing


def test_references_do_not_import_moments():
    refs, moments = "kernel_verify.verify.references", "kernel_verify.verify.moments"
    bad = _violations(refs, lambda _, target: not _within(target, moments))
    assert not bad, "references -> moments would close a cycle:\n" + "\n".join(bad)


def test_truth_has_no_import_cycle():
    """Module-level graph of the truth (each module or subpackage of ``verify/`` one node) is
    acyclic."""
    nodes = sorted({".".join(n.split(".")[:3]) for n in SOURCES if _within(n, TRUTH)} - {TRUTH})

    def node(name: str) -> str | None:
        return next((t for t in nodes if _within(name, t)), None)

    edges: dict[str, set[str]] = defaultdict(set)
    for name, imports in _graph().items():
        src = node(name)
        if src is None:
            continue
        for imported, _ in imports:
            target = _project_module(imported)
            dst = node(target) if target else None
            if dst is not None and dst != src:
                edges[src].add(dst)
    cycle = _cycle(nodes, edges)
    assert cycle is None, "import cycle in the truth: " + " -> ".join(cycle or ())


def _cycle(nodes, edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph (depth first, in sorted order), or None."""
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> list[str] | None:
        state[n] = 1
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return [*path, n, m]
            if m not in state and (found := visit(m, [*path, n])) is not None:
                return found
        state[n] = 2
        return None

    for n in nodes:
        if n not in state and (found := visit(n, [])) is not None:
            return found
    return None


def test_properties_never_import_tests():
    bad = _violations(
        "kernel_verify.properties",
        lambda _, target: not _within(target, ("tests", "benchmarks")),
    )
    assert not bad, "the shipped suite imports the project's unit tests:\n" + "\n".join(bad)


def test_no_bare_top_level_imports():
    bad = []
    for name, imports in _graph().items():
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
        for name, imports in _graph().items()
        if _within(name, library) and not _is_test_module(name)
        for imported, line in imports
        if (target := _project_module(imported)) is not None and _is_test_module(target)
        and _within(target, "kernel_verify.properties")
    ]
    assert not bad, "library modules import test modules:\n" + "\n".join(sorted(set(bad)))


# ------------------------------------------------------------------ inside the application layer
APP = "kernel_verify"

#: The application's own order (issue #28), bottom to top: a module of ``kernel_verify/`` outside
#: the three lower layers imports, besides its own group, only groups of a lower rank. A new
#: module or subpackage of the application is placed here (test_every_app_group_has_a_rank).
APP_RANK: dict[str, int] = {
    "kernel_verify": 0,  # the namespace package itself (its public API is lazy, by name)
    "kernel_verify.provenance": 0,  # commit, dirty state, code fingerprint: one rule
    "kernel_verify.runner": 0,  # the suite in a pytest subprocess; verdicts
    "kernel_verify.fingerprints": 0,  # the committed reports' fingerprints (stdlib only)
    "kernel_verify.probe": 0,  # one call of each declared function before a check
    "kernel_verify.api": 1,  # check(): the Python API on the runner
    "kernel_verify.adapters": 2,  # the shipped library adapters and their conformance pages
    "kernel_verify.mutants": 2,  # the mutant catalogue and its runner
    "kernel_verify.report": 2,  # the variance report
    "kernel_verify.calibration": 3,  # calibration (its black-box part wraps mutants' controls)
    "kernel_verify.calibration_gradients": 4,  # former path, re-exports calibration.gradients
    "kernel_verify.cli": 5,  # the command line: every argparse handler; nothing imports it
}

#: Inside ``kernel_verify/calibration/``: the shared certification code at the bottom, one module
#: per part above it (any module not named here is a part), the run, the report on top.
CALIBRATION_RANK = {"certify": 0, "run": 2, "report": 3, "__init__": 4}
_PART = 1


def _app_modules() -> list[str]:
    return [n for n in SOURCES if layer_of(n) == "kernel_verify"]


def _app_group(name: str) -> str:
    """The rank key of an application module: the longest key of :data:`APP_RANK` it lies in."""
    keys = [k for k in APP_RANK if _within(name, k)]
    return max(keys, key=len) if keys else name


def _app_edges() -> dict[str, set[str]]:
    """Module -> application modules it imports (imports of an enclosing package left out:
    Python initialises it before the module in any case)."""
    edges: dict[str, set[str]] = defaultdict(set)
    app = set(_app_modules())
    for name in app:
        for imported, _ in _graph()[name]:
            target = _project_module(imported)
            if target in app and target != name and not _within(name, target):
                edges[name].add(target)
    return edges


def test_every_app_group_has_a_rank():
    unplaced = sorted({_app_group(n) for n in _app_modules()} - set(APP_RANK))
    assert not unplaced, ("application modules without a place in APP_RANK (add them, with "
                          "what they are for):\n" + "\n".join(unplaced))


def test_application_imports_go_down():
    bad = []
    for name, targets in _app_edges().items():
        src = _app_group(name)
        for target in sorted(targets):
            dst = _app_group(target)
            if dst != src and APP_RANK.get(dst, 99) >= APP_RANK.get(src, -1):
                bad.append(f"{SOURCES[name].relative_to(ROOT)} ({src}, rank "
                           f"{APP_RANK.get(src)}) imports {target} ({dst}, rank "
                           f"{APP_RANK.get(dst)})")
    assert not bad, "application imports that do not go down APP_RANK:\n" + "\n".join(bad)


def test_application_has_no_import_cycle():
    """The module graph of ``kernel_verify/`` (function-level imports included) is acyclic."""
    cycle = _cycle(sorted(_app_modules()), _app_edges())
    assert cycle is None, "import cycle in kernel_verify/: " + " -> ".join(cycle or ())


def test_calibration_package_order():
    """certify imports nothing of the package; a part imports certify only; run the parts; the
    report the run."""
    pkg = "kernel_verify.calibration"

    def rank(name: str) -> int:
        leaf = "__init__" if name == pkg else name.removeprefix(pkg + ".").split(".")[0]
        return CALIBRATION_RANK.get(leaf, _PART)

    bad = []
    for name, targets in _app_edges().items():
        if not _within(name, pkg) or name == pkg:
            continue
        for target in sorted(targets):
            if _within(target, pkg) and rank(target) >= rank(name):
                bad.append(f"{SOURCES[name].relative_to(ROOT)} imports {target}")
    assert not bad, ("kernel_verify/calibration/ goes certify <- parts <- run <- report:\n"
                     + "\n".join(bad))


def test_argparse_handlers_live_in_cli():
    """Every handler of a ``kernel-verify`` subcommand (a function taking the parsed
    ``argparse.Namespace``) is in ``kernel_verify/cli.py``; the library functions it calls take
    keyword arguments."""
    bad = []
    for name in _app_modules():
        if name == "kernel_verify.cli":
            continue
        tree = ast.parse(SOURCES[name].read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for arg in node.args.args + node.args.kwonlyargs:
                    if arg.annotation is not None and "Namespace" in ast.unparse(arg.annotation):
                        bad.append(f"{SOURCES[name].relative_to(ROOT)}:{node.lineno} "
                                   f"{node.name}({arg.arg}: {ast.unparse(arg.annotation)})")
    assert not bad, "argparse handlers outside kernel_verify/cli.py:\n" + "\n".join(bad)


def test_no_module_imports_a_property_test_module():
    """Test files hold tests: the checks they share live in library modules
    (``properties/checks/``), so no module of the suite (a test module included) imports a test
    module of the suite (issue #28: ``check_features`` was imported from
    ``test_feature_reference``, ``nystrom_error_bound`` from ``test_nystrom_properties``). The
    project's unit tests (``tests/``) may import one to inspect what it selects."""
    bad = [
        f"{SOURCES[name].relative_to(ROOT)}:{line} imports {target}"
        for name, imports in _graph().items() if _within(name, SUITE)
        for imported, line in imports
        if (target := _project_module(imported)) is not None and _is_test_module(target)
        and _within(target, "kernel_verify.properties") and target != name
    ]
    assert not bad, "modules import a test module of the suite:\n" + "\n".join(sorted(set(bad)))
