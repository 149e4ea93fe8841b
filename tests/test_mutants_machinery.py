"""The machinery of mutation testing and third-party checks: catalogue, loader, junit folding,
``kernel-verify check`` on the example adapter and on a mutant, and the power of single
properties against chosen mutants (run in-process on fixed seeds)."""

from __future__ import annotations

import argparse
import json
from collections import Counter

import numpy as np
import pytest

from kernel_verify.impls.registry import get, is_registered
from kernel_verify.mutants.base import FAMILIES, Mutant
from kernel_verify.mutants.catalogue import MUTANTS, get_mutant, load
from kernel_verify.mutants.runner import kill_matrix, property_kills
from kernel_verify.properties.checks.row_law import draw_stack, orthonormal_pair, row_law_checks
from kernel_verify.properties.loader import load_targets
from kernel_verify.properties.protocol import FeatureMapTarget, RandomMatrixTarget
from kernel_verify.runner import SuiteRun, fold, load_results


def test_catalogue_is_large_diverse_and_uniquely_named():
    names = [m.name for m in MUTANTS]
    assert len(names) >= 30
    assert len(set(names)) == len(names)
    by_family = Counter(m.family for m in MUTANTS)
    assert {"random_matrix", "attention", "feature_map"} <= set(by_family), by_family
    assert set(by_family) <= set(FAMILIES)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_every_mutant_loads_through_the_third_party_loader(mutant):
    targets = load_targets(mutant.spec)
    assert targets, mutant.name
    assert [t.name for t in targets] == [t.name for t in load(mutant.name)]
    for t in targets:
        assert t.name.startswith(f"mutant:{mutant.name}")


def _family_of(killer: str) -> str:
    return killer.split("::", 1)[0]


@pytest.mark.parametrize("mutant", [m for m in MUTANTS if m.family == "feature_map"
                                     and "gradients" not in map(_family_of, m.expected_killers)
                                     and not m.name.startswith("blackbox_")],
                         ids=lambda m: m.name)
def test_feature_mutants_lie_like_the_correct_map(mutant):
    """White-box, same formula, kernel and claims as the correct registry entry (but the
    gradient claims: a NumPy-only map has no torch path, and claiming ``differentiable``
    without one is refused at construction)."""
    from kernel_verify.impls.descriptor import GRADIENT_CLAIMS

    target = next(t for t in mutant.targets if isinstance(t, FeatureMapTarget))
    assert target.white_box and not is_registered(target) and target.torch_fn is None
    correct = next(e for e in _registry_entries() if e.formula == target.formula
                   and e.matrix == target.matrix and e.kernel == target.kernel)
    assert target.claims == correct.claims - GRADIENT_CLAIMS


@pytest.mark.parametrize("mutant", [m for m in MUTANTS if m.name.startswith("blackbox_")
                                     and not m.name.startswith("blackbox_nofamily_")],
                         ids=lambda m: m.name)
def test_blackbox_feature_mutants_are_black_box_with_a_declared_formula(mutant):
    """The black-box feature mutants expose ``sample_fn`` only and declare their family, so
    ``blackbox_maps`` judges them as it judges a library without parameters."""
    (target,) = mutant.targets
    assert isinstance(target, FeatureMapTarget) and not target.white_box
    assert target.formula is not None and target.sample_fn is not None


@pytest.mark.parametrize("mutant", [m for m in MUTANTS
                                     if m.name.startswith("blackbox_nofamily_")],
                         ids=lambda m: m.name)
def test_blackbox_nofamily_mutants_declare_no_family(mutant):
    """``blackbox_nofamily_*`` mutants expose ``sample_fn`` only and no estimator family
    (formula, matrix, config): the properties for maps without a declared family judge them."""
    (target,) = mutant.targets
    assert isinstance(target, FeatureMapTarget) and not target.white_box
    assert target.formula is None and target.matrix is None and not target.config


def _registry_entries():
    from kernel_verify.impls.registry import all_maps

    return all_maps()


def test_unknown_mutant_names_are_reported():
    with pytest.raises(KeyError, match="no mutant 'nope'"):
        get_mutant("nope")
    with pytest.raises(ValueError, match="has no attribute"):
        load_targets("kernel_verify.mutants.catalogue:target_nope")
    with pytest.raises(ValueError, match="family must be one of"):
        Mutant("x", "colour", "", list)


def test_result_records_are_folded_into_verdicts(tmp_path):
    def rec(nodeid, prop, when, outcome, message="", family="alpha"):
        return json.dumps({"nodeid": nodeid, "family": family, "prop": prop, "target": "t:1",
                           "when": when, "outcome": outcome, "message": message,
                           "seconds": 0.0})
    lines = [
        rec("test_alpha.py::test_a[t:1-numpy]", "test_a", "setup", "passed"),
        rec("test_alpha.py::test_a[t:1-numpy]", "test_a", "call", "passed"),
        rec("test_alpha.py::test_a[t:1-torch]", "test_a", "call", "failed",
            "E   AssertionError: off by 3\nE   more"),
        rec("test_alpha.py::test_b[t:1]", "test_b", "setup", "skipped",
            "Skipped: provides no attention"),
        rec("test_beta.py::test_c[t:1]", "test_c", "call", "passed", family="beta"),
        rec("test_beta.py::test_d[t:1]", "test_d", "call", "passed", family="beta"),
        rec("test_beta.py::test_d[t:1]", "test_d", "teardown", "failed", "boom", family="beta"),
    ]
    results = tmp_path / "r.jsonl"
    results.write_text("\n".join(lines) + "\n")
    outcomes = load_results(results)
    verdicts = {(v.family, v.prop): v for v in fold(outcomes)}
    assert verdicts["alpha", "test_a"].outcome == "fail"
    assert "off by 3" in verdicts["alpha", "test_a"].evidence
    assert verdicts["alpha", "test_b"].outcome == "skip"
    assert "provides no attention" in verdicts["alpha", "test_b"].evidence
    assert verdicts["beta", "test_c"].outcome == "pass"
    assert verdicts["beta", "test_d"].outcome == "fail"  # an error in teardown is an error
    run = SuiteRun("spec", 1, 0.0, outcomes)
    mutant = Mutant("m", "attention", "d", list)
    assert "killed" in kill_matrix([mutant], {"m": run})
    assert property_kills({"m": run})["alpha::test_a"] == ["m"]
    assert property_kills({"m": run})["beta::test_c"] == []


def _check(target: str, keyword: str) -> int:
    args = argparse.Namespace(target=target, profile="ci", keyword=keyword, json_out=None,
                              jobs=1)
    from kernel_verify.cli import _cmd_check

    return _cmd_check(args)


def test_check_passes_the_example_adapter(capsys):
    assert _check("examples.my_favor:targets", "partition_of_unity or causal") == 0
    assert "my_favor_attention" in capsys.readouterr().out


def test_check_fails_a_mutant_with_evidence(capsys):
    assert _check(get_mutant("favor_unnormalised").spec, "partition_of_unity") == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "V = 1" in out


def test_check_rejects_a_bad_spec(capsys):
    assert _check("examples.my_favor", "x") == 2
    assert "module:attribute" in capsys.readouterr().err


# ---------------------------------------------------------------- power on fixed seeds
ALPHA = 1e-6


def _row_law_failures(target: RandomMatrixTarget, seed: int, m: int, d: int) -> list[str]:
    w = draw_stack(target, seed, m, d)
    z1, z2 = orthonormal_pair(seed, d)
    return [r.label for r in row_law_checks(w, z1, z2, alpha=ALPHA, seed=seed) if not r.ok]


@pytest.mark.parametrize("kind", ["iid", "orthogonal", "fastfood"])
def test_row_law_checks_pass_correct_constructions(kind):
    from kernel_verify.impls.random_matrices import draw_matrix

    target = RandomMatrixTarget(kind, lambda rng, m, d: draw_matrix(kind, rng, m, d),
                                frozenset({"gaussian_rows"}))
    assert _row_law_failures(target, 12, 8, 4) == []


@pytest.mark.parametrize(("name", "expected"), [
    ("orf_no_sign_correction", "sign symmetry"),
    ("orf_factorised_norms", "norm ⟂ direction"),
    ("rademacher_rows", "~ N(0, 1)"),
    ("orf_missing_norms", "E ‖wᵢ‖²"),
])
def test_row_law_checks_catch_biased_constructions(name, expected):
    target = load(name)[0]
    failures = _row_law_failures(target, 12, 8, 4)
    assert any(expected in f for f in failures), failures


def test_nystromformer_is_batch_independent_only_when_uncoupled():
    """The coupled-Z₀ mutant differs from the per-matrix version on the other batch element."""
    from kernel_verify.mutants.attention import nystromformer

    rng = np.random.default_rng(5)
    q, k, v = rng.standard_normal((3, 2, 1, 8, 4))
    q2, k2 = q.copy(), k.copy()
    # Element 1: every landmark query attends landmark key 0 only, so ‖A‖₁ = L (the largest
    # possible), above element 0's.
    q2[1], k2[1] = 1.0, 0.0
    k2[1, :, :2] = 30.0
    for coupled, should_change in ((False, False), (True, True)):
        a = nystromformer(q, k, v, couple_batch=coupled)[0]
        b = nystromformer(q2, k2, v, couple_batch=coupled)[0]
        changed = np.abs(a - b).max() > 1e-9
        assert changed == should_change, (coupled, np.abs(a - b).max())


def test_feature_mutant_attention_uses_the_broken_map():
    """The attached attention of a non-cancelling mutant differs from the correct map's."""
    from kernel_verify.impls.attention import feature_map_attention

    targets = load("softmax_positive_missing_norm_term")
    att = next(t for t in targets if not isinstance(t, FeatureMapTarget))
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((3, 1, 1, 6, 3))
    entry = get("softmax_positive[iid]")
    params = entry.draw(np.random.default_rng(4), 3, 64, entry.config)
    correct = feature_map_attention(entry, params, q, k, v)
    assert np.abs(att(q, k, v, causal=False, seed=4) - correct).max() > 1e-3


def test_stabiliser_property_catches_an_unstabilised_kernel(monkeypatch):
    """A log-space kernel that just exponentiates its inputs (no stabilising shift) fails the
    stabiliser property (shifts of ±1000 overflow or underflow every feature)."""
    import kernel_verify.properties.test_attention_identities as prop
    from kernel_verify.impls.numpy import attention as np_att
    from kernel_verify.properties.builtin import builtin_targets
    from kernel_verify.verify.backends import get_backend

    def naive(lq, lk, v, *, causal=False, chunk_size=64):
        with np.errstate(over="ignore", invalid="ignore"):
            return np_att.linear_attention(np.exp(lq), np.exp(lk), v, causal=causal)

    target = next(t for t in builtin_targets() if t.name == "softmax_positive[iid]")
    inner = prop.test_stabiliser_shifts_cancel_in_log_space_attention.hypothesis.inner_test
    example = {"target": target, "backend": get_backend("numpy-float64"), "seed": 3,
               "shape": (1, 5, 3), "causal": False, "shift": 900.0}
    inner(**example)  # the real kernel passes
    monkeypatch.setattr(np_att, "log_linear_attention", naive)
    with pytest.raises((AssertionError, ValueError)):
        inner(**example)


def test_only_a_complete_mutants_run_replaces_the_committed_reports(monkeypatch, tmp_path):
    """Issue #30: `kernel-verify mutants` without --blackbox rewrote reports/mutants.md and
    .json without their black-box section. A partial run (--only, or no --blackbox) writes to
    build/mutants/ beside the reports folder; only a complete one writes the reports folder."""
    from kernel_verify.mutants.runner import report_folder

    monkeypatch.setenv("KV_REPORTS", str(tmp_path / "reports"))
    from kernel_verify.verify.paths import reports_dir

    assert reports_dir() == tmp_path / "reports"
    assert report_folder(None, True) == (tmp_path / "reports", "")
    assert report_folder(None, False) == (tmp_path / "build" / "mutants", "no --blackbox")
    assert report_folder(["rff_sqrt_sigma"], True) == (tmp_path / "build" / "mutants", "--only")
