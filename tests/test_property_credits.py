"""Every property credited to a target catches a planted defect: the table property × target
kind → mutants (``credit_table`` of ``reports/mutants.json``, written by ``kernel-verify
mutants``) lists, for every property that runs on a target (a ``test_*`` function of a
target property file with a ``target`` argument, not marked ``kv_builtin_only``), at least one
mutant it kills by its own assertion — or the property is listed in :data:`UNCOVERED` with the
reason no mutant of the catalogue shows its power yet. The list is kept honest both ways: a
property that gains a kill must leave it.

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
UNCOVERED: dict[str, str] = {
    'attention_forms::test_forms_meet_the_exact_recurrence': (
        'no mutant of the catalogue reaches it (it never ran on one): needs white-box '
        'features on a forms target; the forms mutants expose none'
    ),
    'attention_forms::test_gradients_flow_through_the_state': (
        'no mutant of the catalogue reaches it (it never ran on one): needs a differentiable '
        'torch forms target; the forms mutants are NumPy'
    ),
    'blackbox_maps::test_unbiased_without_declared_family': (
        'no mutant of the catalogue reaches it (it never ran on one): black-box maps without '
        'a declared family only'
    ),
    'feature_unbiased::test_bias_is_visible_where_theory_says_it_is_large': (
        'no mutant of the catalogue reaches it (it never ran on one): biased maps only; the '
        "catalogue's feature mutants claim unbiased"
    ),
    'feature_unbiased::test_biased_mean_is_reference_mean': (
        'no mutant of the catalogue reaches it (it never ran on one): biased maps without a '
        'mean kernel only; tests/test_biased_means.py shows it fails for SORF rows scaled by '
        '√d and for Gaussian rows claimed as SORF'
    ),
    'feature_unbiased::test_biased_mean_is_mean_kernel': (
        'no mutant of the catalogue reaches it (it never ran on one): biased maps with a '
        'declared mean kernel only'
    ),
    'gradients::test_attention_gradients_finite_along_scale_sweep': (
        'no mutant of the catalogue reaches it (it never ran on one)'
    ),
    'gradients::test_feature_attention_gradients_match_exact': (
        'no mutant of the catalogue reaches it (it never ran on one)'
    ),
    'gradients::test_low_precision_gradients_near_float64': (
        'no mutant of the catalogue reaches it (it never ran on one): low-precision torch '
        'targets only'
    ),
    'gradients::test_padded_inputs_get_zero_gradient': (
        'no mutant of the catalogue reaches it (it never ran on one): padded torch forms only'
    ),
    'psd_properties::test_exact_kernel_gram_is_psd': (
        "checks the declared kernel's Gram matrix; no mutant declares a non-PSD kernel yet"
    ),
    'psd_properties::test_exact_kernel_gram_is_psd_on_edge_sets': (
        "checks the declared kernel's Gram matrix; no mutant declares a non-PSD kernel yet"
    ),
    'psd_properties::test_feature_gram_is_psd': (
        'ΦΦᵀ is PSD for any real Φ: it can fail only by rounding, a defect no mutant plants'
    ),
}


def _builtin_only(fn: ast.FunctionDef) -> bool:
    return any("kv_builtin_only" in ast.unparse(d) for d in fn.decorator_list)


def credited_properties() -> list[str]:
    out = []
    for path in target_property_files():
        family = Path(path).stem.removeprefix("test_")
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        for node in tree.body:
            if (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
                    and "target" in {a.arg for a in node.args.args}
                    and not _builtin_only(node)):
                out.append(f"{family}::{node.name}")
    return sorted(out)


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
