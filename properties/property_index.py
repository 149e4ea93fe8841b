"""The properties of each kind of target, read from the suite's own modules (not a list kept by
hand), so that a target's ``known_failures`` can be checked when the target is made.

A *property* is a module-level ``test_…`` function of a ``properties/test_*.py`` module. Its
kinds of target are found statically (:mod:`ast`, nothing is imported or collected): the values
of its ``pytest.mark.parametrize`` decorators are expressions over the selection helpers of
:mod:`kernel_verify.properties.targets` (``feature_maps``, ``attentions``, ``matrices``, …),
directly or through module-level names and functions of the suite (``WHITE =
feature_maps(...)``, ``form_cases()``, ``cases()`` imported from ``attention_cases``); each
helper's kind is, in turn, the target class it selects (``_select(AttentionTarget, …)``), and a
suite function that selects by class (``isinstance(t, GatedAttentionTarget)``, or its name as a
string) names it. A new property, a new module or a new kind of target is indexed without
editing this file. A
property parametrised over no target (one about the built-ins only) is no target's property.

The index is built on first use (one parse of the suite's modules, about 0.1 s) and cached.
"""

from __future__ import annotations

import ast
import difflib
import functools
from collections.abc import Mapping
from pathlib import Path

__all__ = ["check_known_properties", "files_with_target_properties", "properties_by_kind"]

_HERE = Path(__file__).resolve().parent
_PACKAGE = "kernel_verify.properties."
#: Readable names of the kinds, for messages.
_KIND_WORDS = {"FeatureMapTarget": "feature-map", "AttentionTarget": "attention",
               "RandomMatrixTarget": "random-matrix", "KernelApproxTarget": "kernel-approximation",
               "ModelTarget": "model"}


class _Module:
    """Module-level definitions and imports of one properties module."""

    def __init__(self, path: Path) -> None:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        self.tree = tree
        self.defs: dict[str, ast.AST] = {}
        self.imports: dict[str, tuple[str, str]] = {}  # local name -> (module stem, name)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.defs[node.name] = node
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for name in ast.walk(t):
                        if isinstance(name, ast.Name):
                            self.defs[name.id] = node
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(_PACKAGE):
                stem = node.module.removeprefix(_PACKAGE)
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (stem, alias.name)


@functools.cache
def _module(stem: str) -> _Module | None:
    path = _HERE / f"{stem.replace('.', '/')}.py"
    return _Module(path) if path.is_file() else None


def _names(node: ast.AST) -> set[str]:
    """Names an expression or definition uses, and class names it compares with as strings
    (``type(t).__name__ == "GatedAttentionTarget"``)."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif (isinstance(n, ast.Constant) and isinstance(n.value, str)
              and n.value.endswith("Target") and n.value.isidentifier()):
            out.add(n.value)
    return out


@functools.cache
def _helper_kinds() -> dict[str, frozenset[str]]:
    """Selection helper of ``targets.py`` -> the target classes it selects (the class names
    ending in ``Target`` that its body mentions)."""
    mod = _module("targets")
    if mod is None:
        return {}
    out = {}
    for name, node in mod.defs.items():
        if isinstance(node, ast.FunctionDef) and not name.startswith("_"):
            kinds = {n for n in _names(node) if n.endswith("Target") and n != "Target"}
            if kinds:
                out[name] = frozenset(kinds)
    return out


def _kinds_of(node: ast.AST, stem: str, seen: set[tuple[str, str]]) -> set[str]:
    """Target kinds an expression (or a definition's body) selects, following module-level
    names of the suite's modules."""
    helpers = _helper_kinds()
    mod = _module(stem)
    kinds: set[str] = set()
    for name in _names(node):
        if name in helpers:
            kinds |= helpers[name]
            continue
        if name.endswith("Target") and name != "Target":  # a selection by class
            kinds.add(name)
            continue
        where = (stem, name)
        if mod is None or where in seen:
            continue
        seen.add(where)
        if name in mod.defs:
            kinds |= _kinds_of(mod.defs[name], stem, seen)
        elif name in mod.imports:
            other, original = mod.imports[name]
            target = _module(other)
            if other != "targets" and target is not None and original in target.defs:
                seen.add((other, original))
                kinds |= _kinds_of(target.defs[original], other, seen)
    return kinds


def _parametrize_values(fn: ast.FunctionDef) -> list[ast.AST]:
    out = []
    for dec in fn.decorator_list:
        if (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute)
                and dec.func.attr == "parametrize" and len(dec.args) >= 2):
            out.append(dec.args[1])
    return out


@functools.cache
def properties_by_kind() -> dict[str, frozenset[str]]:
    """Target class name (``"AttentionTarget"``, …) -> the names of its properties."""
    found: dict[str, set[str]] = {}
    for path in sorted(_HERE.glob("test_*.py")):
        stem = path.stem
        mod = _module(stem)
        for node in mod.tree.body if mod else ():
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                kinds: set[str] = set()
                for values in _parametrize_values(node):
                    kinds |= _kinds_of(values, stem, set())
                for kind in kinds:
                    found.setdefault(kind, set()).add(node.name)
    return {kind: frozenset(names) for kind, names in found.items()}


@functools.cache
def files_with_target_properties() -> tuple[Path, ...]:
    """The ``properties/test_*.py`` files holding at least one property of some kind of target
    (by the same static reading as :func:`properties_by_kind`): the files a run against a
    third-party target needs, however each reaches its target selection (directly from
    :mod:`kernel_verify.properties.targets` or through a shared case module)."""
    out = []
    for path in sorted(_HERE.glob("test_*.py")):
        mod = _module(path.stem)
        for node in mod.tree.body if mod else ():
            if (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
                    and any(_kinds_of(v, path.stem, set()) for v in _parametrize_values(node))):
                out.append(path)
                break
    return tuple(out)


def check_known_properties(target_name: object, kind: str, known: Mapping[str, str]) -> None:
    """Every key of ``known`` (a target's ``known_failures``) is a property of targets of
    ``kind``; else a ValueError naming the target, the field, the unknown name, the closest
    property names and, where it is one, the kind the name belongs to."""
    if not known:
        return
    index = properties_by_kind()
    own = index.get(kind, frozenset())
    word = _KIND_WORDS.get(kind, kind)
    for prop in known:
        if prop in own:
            continue
        elsewhere = sorted(_KIND_WORDS.get(k, k) for k, names in index.items() if prop in names)
        if elsewhere:
            why = (f"is a property of {' and '.join(elsewhere)} targets, not of {word} "
                   "targets")
        else:
            close = difflib.get_close_matches(prop, sorted(own), n=3, cutoff=0.6)
            why = ("is not a property of the suite"
                   + (f"; did you mean {', '.join(map(repr, close))}?" if close else
                      f" ({len(own)} {word} properties; `kernel-verify list` and the "
                      "properties/test_*.py modules name them)"))
        raise ValueError(f"target {target_name!r}: known_failures names {prop!r}, which {why}")
