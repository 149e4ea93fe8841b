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

**Per dtype path** (issue #29): a kill is credited to the dtype path it happened on (``float64``,
``float32``, ``half``; :mod:`kernel_verify.mutants.paths`). A property that ran on a mutant's
float32 or half path without killing any mutant there is not credited on that path: it is listed
in :data:`UNCREDITED_PATHS` with the reason, and the list is kept honest both ways.
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
    "nystrom_properties::test_truncation_is_the_best_rank_r_on_the_landmarks": (
        "added after the committed reports/mutants.json was made; its planted defect "
        "nystrom_truncation_keeps_smallest (kernel_verify/mutants/nystrom.py) is killed as "
        "intended by `kernel-verify mutants --only nystrom_truncation_keeps_smallest` (measured "
        "2026-12-08); the next complete mutants run credits it, and test_uncovered_list_is_"
        "current then asks for this entry's removal"),
}

#: ``(family::test, path)`` pairs — a low-precision dtype path a property ran on, over the
#: mutants, without killing one there — and why: on that path the property is not credited.
#: A float32 / half mutant it kills removes the pair (test_uncredited_paths_list_is_current
#: then fails until it is deleted here). Two facts behind several reasons: a case whose pytest
#: id names no backend takes the dtype named inside the mutant's target name
#: (kernel_verify/mutants/paths.py: ``grad_positive_float16_backward``,
#: ``grad_f32_backward_bfloat16``, ``softmax_positive_float32``, …), and properties without a
#: dtype axis call feature maps with float64 input.
_GRAD_HALF = ("runs only in float64 or float32 (the work dtype; half-only targets are skipped): "
              "its half path is the word bfloat16 in the names of float32 mutants "
              "(grad_f32_backward_bfloat16, grad_lowp_backward_bfloat16, "
              "forms_f32_final_state_bfloat16), so no half mutant can credit it")
_FLOAT16_NAME = ("its half path is the name of grad_positive_float16_backward, whose forward "
                 "is float64 (only its backward accumulates in float16)")
_STAT = ("statistical on float64 arrays of features the map computes from float64 input: the "
         "float32 maps here (softmax_positive_float32, rff_pairs_float32, taylor2_float32) err "
         "by ~1e-7 relative, far below the threshold (≳ 1 % of the mean); a bias is "
         "dtype-free and is credited on float64")
_INPUTS = ("a bitwise comparison of the inputs and a NaN-pattern comparison of the results, the "
           "same code on every dtype; the planted in-place and out-of-bounds defects are float64 "
           "targets, no float32/half mutant of this class is planted yet (the next mutant run "
           "with one removes the entry)")
_BUILTIN = ("kv_builtin_only: checks the suite's own mpmath reference at 40 digits, never the "
            "target's code (it kills nothing on float64 either); its low-precision path is the "
            "dtype named in a mutant's name")
UNCREDITED_PATHS: dict[tuple[str, str], str] = {
    ("blackbox_maps::test_claimed_sign_of_features", "float32"):
        "float32 exp underflows to 0 only below e^(−103), which the drawn inputs (entries ≤ 6, "
        "d ≤ 5) reach only at rare corners: the float32 SM⁺ maps pass it, and a sign defect "
        "that is not underflow (a subtracted ε) is no float32 defect",
    ("blackbox_maps::test_orthogonal_claim_has_the_orthogonal_variance", "float32"):
        "a variance test on float64 estimates: float32 rounding (~1e-7) cannot move a variance "
        "by the 1.2× it detects; the float32 maps here claim no orthogonal rows, and an "
        "orthogonal-claim defect is dtype-free (credited on float64)",
    ("blackbox_maps::test_frequency_rows_have_the_declared_law", "float32"):
        "a law of the rows a map draws (the draw's W, or rows read off float64 outputs): a map "
        "computed in float32 or a half type reads the same rows to ~1e-6, far below what moves "
        "a χ² or DKW statistic; a row-law defect is dtype-free and is credited on float64",
    ("blackbox_maps::test_frequency_rows_have_the_declared_law", "half"):
        "as its float32 path: the half path is the dtype named in the black-box SM⁺ mutants "
        "(blackbox_positive_float16*), whose rows are right",
    ("feature_reference::test_attention_matches_estimator_reference", "half"):
        "runs on float64 and float32 backends only: " + _FLOAT16_NAME,
    # the delta mutants compute in float64 and round once to float32: the non-causal rounding
    # of delta_decay_reference_at_chunk_end vanishes there (reports/power.md measures the
    # property's float32 power on a planted leak instead)
    ("gated_forms::test_gated_outputs_are_causal_bitwise", "float32"):
        "the float32 delta mutants compute in float64 and round once to float32, so the "
        "non-causal rounding of delta_decay_reference_at_chunk_end vanishes; a gated kernel "
        "computing in float32 with a future-dependent rounding is needed",
    ("feature_reference::test_features_match_reference", "half"):
        "runs in float16/bfloat16 only on white-box maps with a torch function — the gradient "
        "mutants' SM⁺ maps, whose forward is right (half computed in float32); a forward defect "
        "on the torch half path is not planted",
    ("feature_reference::test_features_on_grid", "half"):
        "runs on float64 and float32 backends only: " + _FLOAT16_NAME,
    ("feature_reference::test_kernel_estimate_matches_reference", "half"):
        "runs on float64 and float32 backends only: " + _FLOAT16_NAME,
    ("feature_unbiased::test_unbiased_on_grid", "float32"): _STAT,
    ("feature_unbiased::test_unbiased_on_grid", "half"):
        "statistical on float64 features: " + _FLOAT16_NAME + "; float16 maps err by ~5e-4, "
        "below the threshold",
    ("feature_unbiased::test_unbiased_on_random_points", "float32"): _STAT,
    ("feature_unbiased::test_unbiased_on_random_points", "half"):
        "statistical on float64 features: " + _FLOAT16_NAME + "; float16 maps err by ~5e-4, "
        "below the threshold",
    ("feature_variance::test_sample_variance_matches_exact_variance", "float32"):
        _STAT.replace("a bias is", "a variance defect is"),
    ("gradients::test_attention_backward_is_deterministic", "half"): _GRAD_HALF,
    ("gradients::test_attention_gradient_locality", "half"): _GRAD_HALF,
    ("gradients::test_attention_gradients_batch_and_head_independent", "half"): _GRAD_HALF,
    ("gradients::test_attention_gradients_finite_where_outputs_are", "half"): _GRAD_HALF,
    ("gradients::test_feature_map_backward_is_deterministic", "half"):
        "float64 input; its half path is grad_positive_float16_backward (float16 backward, "
        "deterministic): a float16 backward in a call-dependent order is not planted",
    ("gradients::test_feature_rows_have_independent_gradients", "half"):
        "float64 input; its half path is grad_positive_float16_backward (float16 backward, rows "
        "independent): a float16 backward reducing over rows is not planted",
    ("gradients::test_forward_mode_matches_reverse_mode_attention", "half"): _GRAD_HALF,
    ("gradients::test_gradcheck_float64_attention", "half"): _GRAD_HALF,
    ("gradients::test_gradient_of_unbiased_estimator_is_unbiased", "half"):
        "statistical on float64 input; its half path is grad_positive_float16_backward, whose "
        "float16 rounding (~1e-3) is below the test's 10 % power: a float16 backward scaled "
        "×1.1 is not planted",
    ("psd_properties::test_exact_kernel_gram_is_psd", "float32"): _BUILTIN,
    ("psd_properties::test_exact_kernel_gram_is_psd", "half"): _BUILTIN,
    ("psd_properties::test_exact_kernel_gram_is_psd_on_edge_sets", "float32"): _BUILTIN,
    ("psd_properties::test_exact_kernel_gram_is_psd_on_edge_sets", "half"): _BUILTIN,
    ("taylor::test_second_order_taylor_minimum_is_half_at_t_minus_one", "float32"):
        "float64 NumPy at one point; its float32 path is the name of taylor2_float32 (the right "
        "formula in float32, within the bound): a float32 coefficient defect is not planted "
        "(the float64 ones are killed)",
    ("taylor::test_taylor_identity_in_mp", "float32"): _BUILTIN,
    # inputs_unchanged: its planted defects (an in-place write into q/k/v, x, a step's or a
    # chunked form's state; a tail read past v's end) are float64 targets; the property compares
    # bits and NaN patterns, whatever the dtype, but no float32 or half mutant writes into or
    # reads past its inputs yet, so on those paths it is not credited
    ("inputs_unchanged::test_attention_forms_leave_their_inputs_unchanged", "float32"): _INPUTS,
    ("inputs_unchanged::test_attention_leaves_its_inputs_unchanged", "float32"): _INPUTS,
    ("inputs_unchanged::test_attention_leaves_its_inputs_unchanged", "half"): _INPUTS,
    ("inputs_unchanged::test_feature_map_leaves_its_inputs_unchanged", "half"): _INPUTS,
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


# ------------------------------------------------------------------ per dtype path
def _outcome(prop: str, outcome: str, node_id: str, message: str = "", backend: str = ""):
    from kernel_verify.runner import Outcome

    return Outcome("attention_forms", prop, "t", outcome, message=message, backend=backend,
                   repro=f"pytest 'properties/test_attention_forms.py::{prop}[{node_id}]'")


def test_credit_by_path_on_a_synthetic_matrix():
    """Kills are credited to the dtype path of the failing case (the last dtype of its id, not
    one inside the target's name), ran-paths come from passing and failing cases, a failure
    that is not the property's assertion is no kill, and a case naming no dtype takes the one
    dtype the mutant's targets accept (a float32-only library)."""
    from kernel_verify.mutants.paths import case_path, credit_by_path, uncredited_paths
    from kernel_verify.runner import SuiteRun

    fail = "AssertionError: outputs differ"
    runs = {
        "m64": SuiteRun("spec", 1, 0.0, [
            _outcome("test_a", "failed", "mutant:m_float32_inside-numpy-float64", fail,
                     "numpy-float64"),
            _outcome("test_a", "passed", "mutant:m_float32_inside-torch:cpu-bfloat16",
                     backend="torch:cpu-bfloat16"),
            _outcome("test_b", "failed", "mutant:m-torch:cpu-float32",
                     "ValueError: bad input", "torch:cpu-float32")]),
        "m32": SuiteRun("spec", 1, 0.0, [
            _outcome("test_a", "failed", "mutant:fla_like", fail),
            _outcome("test_b", "failed", "mutant:fla_like-float16", fail)]),
    }
    table = credit_by_path(runs, lambda name: ["float32"] if name == "m32" else [])
    assert table["attention_forms::test_a"] == {
        "ran": ["float64", "float32", "half"], "kills": {"float64": ["m64"], "float32": ["m32"]}}
    assert table["attention_forms::test_b"] == {
        "ran": ["float32", "half"], "kills": {"half": ["m32"]}}
    assert uncredited_paths(table) == [("attention_forms::test_a", "half"),
                                       ("attention_forms::test_b", "float32")]
    assert case_path(_outcome("test_c", "passed", "x")) == "float64"  # no dtype, none declared


def _path_table() -> dict[str, dict]:
    path = reports_dir() / "mutants.json"
    if not path.exists():
        pytest.skip("no reports/mutants.json: run kernel-verify mutants")
    payload = json.loads(path.read_text(encoding="utf-8"))
    assert "credit_by_path" in payload, (
        "reports/mutants.json predates the credit table per dtype path (issue #29): rerun "
        "kernel-verify mutants --blackbox")
    return payload["credit_by_path"]


def test_low_precision_paths_are_credited_only_where_a_mutant_is_killed():
    """Every float32/half path a property ran on over the mutants either has a mutant it kills
    there by its assertion, or is listed in UNCREDITED_PATHS with the reason."""
    from kernel_verify.mutants.paths import uncredited_paths

    table = _path_table()
    missing = [pair for pair in uncredited_paths(table) if pair not in UNCREDITED_PATHS]
    assert not missing, (
        "properties that ran on a low-precision path without killing a mutant there (add a "
        "mutant on that path, or list the pair in UNCREDITED_PATHS with the reason): "
        f"{missing}")


def test_uncredited_paths_list_is_current():
    from kernel_verify.mutants.paths import uncredited_paths

    table = _path_table()
    stale = [pair for pair in UNCREDITED_PATHS if pair not in uncredited_paths(table)]
    assert not stale, f"UNCREDITED_PATHS entries that are credited now (or never ran): {stale}"
    assert all(reason.strip() for reason in UNCREDITED_PATHS.values())
