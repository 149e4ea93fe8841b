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
with the reason).

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
        'the committed matrix predates mutant eps_in_every_denominator, '
        'which kills it by assertion in kernel-verify check'
    ),
    'attention_forms::test_gradients_flow_through_the_state': (
        'the committed matrix predates mutant initial_state_log_normaliser_detached, '
        'which kills it by assertion in kernel-verify check'
    ),
    'blackbox_maps::test_unbiased_without_declared_family': (
        'the committed matrix predates mutant blackbox_nofamily_rff_phase_missing_sqrt2, '
        'which kills it by assertion in kernel-verify check'
    ),
    'feature_unbiased::test_bias_is_visible_where_theory_says_it_is_large': (
        'the committed matrix predates mutant rff_pairs_fixed_norm_rows_not_fixed, '
        'which kills it by assertion in kernel-verify check'
    ),
    'feature_unbiased::test_biased_mean_is_reference_mean': (
        'the committed matrix predates mutant rff_pairs_sorf_missing_sqrt_d, '
        'which kills it by assertion in kernel-verify check'
    ),
    'feature_unbiased::test_biased_mean_is_mean_kernel': (
        'the committed matrix predates mutant rff_pairs_fixed_norm_unit_rows, '
        'which kills it by assertion in kernel-verify check'
    ),
    'gradients::test_attention_gradients_finite_along_scale_sweep': (
        'the committed matrix predates mutant grad_log_positive_via_phi, '
        'which kills it by assertion in kernel-verify check'
    ),
    'gradients::test_feature_attention_gradients_match_exact': (
        'the committed matrix predates mutant grad_log_positive_drops_minus_x, '
        'which kills it by assertion in kernel-verify check'
    ),
    'gradients::test_low_precision_gradients_near_float64': (
        'the committed matrix predates mutant grad_causal_lowp_backward_unscaled, '
        'which kills it by assertion in kernel-verify check'
    ),
    'gradients::test_padded_inputs_get_zero_gradient': (
        'the committed matrix predates mutant padded_gather_backward_left_aligned, '
        'which kills it by assertion in kernel-verify check'
    ),
}


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
