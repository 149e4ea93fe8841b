"""Every property credited to a target catches a planted defect: the table property × target
kind → mutants (``credit_table`` of ``reports/mutants.json``, written by ``kernel-verify
mutants``) lists, for every property that runs on a target (a ``test_*`` function of a
target property file with a ``target`` argument), at least one mutant it kills by its own
assertion — or the property is listed in :data:`UNCOVERED` with the reason no mutant of the
catalogue shows its power yet. The list is kept honest both ways: a property that gains a kill
must leave it.

Not credited to targets, so not in the table: properties marked ``kv_builtin_only`` (they check
the suite's own truth, e.g. the PSD of the suite's reference Gram matrix of the declared kernel)
and properties whose body records ``kv_uncredited`` unconditionally (they cannot fail for any
target, e.g. ``ΦΦᵀ ⪰ 0`` formed by the suite from real features: the verdict is ``not credited``
with the reason; :func:`test_never_credited_properties_are_never_a_pass` checks it in the
committed matrix).

The table is the committed report's: regenerate it (``kernel-verify mutants --blackbox``) after
adding a property or a mutant.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kernel_verify.runner import target_property_files
from kernel_verify.verify.paths import reports_dir

#: Credited properties without a planted defect they kill (``family::test``) and why.
UNCOVERED: dict[str, str] = {}


def _builtin_only(fn: ast.FunctionDef) -> bool:
    return any("kv_builtin_only" in ast.unparse(d) for d in fn.decorator_list)


def _never_credited(fn: ast.FunctionDef) -> bool:
    """The body records ``kv_uncredited`` unconditionally (a top-level statement
    ``record_property("kv_uncredited", …)``): the property cannot fail for any target, so every
    passing case folds to ``not credited`` with its reason, never ``pass``."""
    for stmt in fn.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "record_property" and call.args
                and isinstance(call.args[0], ast.Constant)
                and call.args[0].value == "kv_uncredited"):
            return True
    return False


def _test_functions() -> list[tuple[str, ast.FunctionDef]]:
    out = []
    for path in target_property_files():
        family = Path(path).stem.removeprefix("test_")
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        for node in tree.body:
            if (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
                    and "target" in {a.arg for a in node.args.args}):
                out.append((f"{family}::{node.name}", node))
    return out


def never_credited_properties() -> list[str]:
    """Properties that run on targets but record ``kv_uncredited`` for every one of them."""
    return sorted(p for p, fn in _test_functions()
                  if not _builtin_only(fn) and _never_credited(fn))


def credited_properties() -> list[str]:
    return sorted(p for p, fn in _test_functions()
                  if not _builtin_only(fn) and not _never_credited(fn))


def _table() -> dict[str, dict[str, list[str]]]:
    path = reports_dir() / "mutants.json"
    if not path.exists():
        pytest.skip("no reports/mutants.json: run kernel-verify mutants")
    payload = json.loads(path.read_text(encoding="utf-8"))
    assert "credit_table" in payload, "reports/mutants.json predates the credit table: rerun"
    return payload["credit_table"]


def test_every_credited_property_kills_a_planted_defect_or_says_why_not():
    table = _table()
    missing = [p for p in credited_properties()
               if not any(table.get(p, {}).values()) and p not in UNCOVERED]
    assert not missing, (
        "credited properties that kill no mutant of the catalogue by their own assertion "
        f"(add a mutant, or list them in UNCOVERED with the reason): {missing}")


def test_uncovered_list_is_current():
    table = _table()
    credited = set(credited_properties())
    stale = [p for p in UNCOVERED if p not in credited or any(table.get(p, {}).values())]
    assert not stale, f"UNCOVERED entries that are no longer uncovered properties: {stale}"
    assert all(reason.strip() for reason in UNCOVERED.values())


def test_never_credited_properties_are_never_a_pass():
    """A property that records ``kv_uncredited`` for every target is ``not credited`` on every
    mutant it ran on (the verdict with its reason), never ``pass``: the mark is in force."""
    path = reports_dir() / "mutants.json"
    if not path.exists():
        pytest.skip("no reports/mutants.json: run kernel-verify mutants")
    payload = json.loads(path.read_text(encoding="utf-8"))
    never = set(never_credited_properties())
    assert never, "expected at least psd_properties::test_feature_gram_is_psd"
    seen = {f"{v['family']}::{v['prop']}": v["outcome"]
            for m in payload["mutants"] for v in m["verdicts"]
            if f"{v['family']}::{v['prop']}" in never and v["outcome"] == "pass"}
    assert not seen, f"never-credited properties folded to pass: {sorted(seen)}"
