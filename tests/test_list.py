"""``kernel-verify list``: every registered system with its kind, target, claims and math section
(feature maps, kernel approximations, attention functions, random-matrix constructions)."""

from __future__ import annotations

import json

import pytest

from kernel_verify.cli import main
from kernel_verify.impls.random_matrices import MATRICES
from kernel_verify.impls.registry import all_maps
from kernel_verify.impls.systems import (
    KIND_CLAIM_WORDS,
    KINDS,
    SYSTEM_CLAIMS,
    TARGET_CLAIM_WORDS,
    ApproximationSystem,
    AttentionSystem,
    SystemDescriptor,
    all_systems,
    get_system,
)

#: The feature-map JSON fields that existed before systems of other kinds were listed.
FEATURE_MAP_FIELDS = {
    "name", "family", "formula", "kernel", "kernel_params", "mean_kernel", "claims", "matrix",
    "config", "output_dim", "attention_prescale", "description", "source",
}


def _list_json(capsys, *args: str) -> list[dict]:
    assert main(["list", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_every_kind_is_listed(capsys):
    rows = _list_json(capsys)
    by_kind = {k: [r["name"] for r in rows if r["kind"] == k] for k in KINDS}
    assert len(by_kind["feature_map"]) == len(all_maps())
    assert set(by_kind["kernel_approximation"]) == {
        "nystrom", "nystromformer", "truncated_svd", "linformer"}
    assert set(by_kind["attention"]) == {
        "exact_softmax", "linear_attention", "log_linear_attention", "hybrid_attention",
        "feature_map_attention"}
    assert set(by_kind["random_matrix"]) == set(MATRICES)
    assert sum(map(len, by_kind.values())) == len(rows)


def test_feature_map_json_is_backward_compatible(capsys):
    rows = _list_json(capsys, "--kind", "feature_map")
    assert [r["name"] for r in rows] == [m.name for m in all_maps()]
    for row in rows:
        assert FEATURE_MAP_FIELDS <= set(row), row["name"]
        assert row["kind"] == "feature_map"


@pytest.mark.parametrize("kind", list(KINDS))
def test_kind_filter(capsys, kind):
    rows = _list_json(capsys, "--kind", kind)
    assert rows and {r["kind"] for r in rows} == {kind}
    assert main(["list", "--kind", kind]) == 0
    assert f"({len(rows)} systems)" in capsys.readouterr().out


def test_kinds_combine_and_family_filters_every_kind(capsys):
    rows = _list_json(capsys, "--kind", "attention", "--kind", "random_matrix")
    assert {r["kind"] for r in rows} == {"attention", "random_matrix"}
    assert {r["name"] for r in _list_json(capsys, "--family", "nystrom")} == {
        "nystrom", "nystromformer"}


def test_unknown_kind_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["list", "--kind", "nope"])
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_every_row_has_target_claims_and_section(capsys):
    for row in _list_json(capsys):
        assert row["kernel"], row["name"]
        assert isinstance(row["claims"], list) and row["claims"], row["name"]
        assert row["math_section"].startswith("§"), row["name"]
        assert "docs/math.md §" in row["source"], row["name"]


@pytest.mark.parametrize("system", all_systems(), ids=lambda s: s.name)
def test_system_functions_resolve(system):
    """Every backend function named by a system exists (the listing does not point at nothing)."""
    assert system.functions
    for backend in system.functions:
        assert callable(system.resolve(backend))
    assert set(system.claims) <= set(SYSTEM_CLAIMS)


def test_system_validation_and_lookup():
    with pytest.raises(ValueError, match="unknown claims"):
        AttentionSystem("x", "attention", "k", frozenset({"nope"}), "§9", "", "")
    with pytest.raises(ValueError, match="not claims of a kernel_approximation system"):
        ApproximationSystem("x", "f", "k", frozenset({"causal"}), "§8", "", "")
    with pytest.raises(TypeError, match="class of its kind"):
        SystemDescriptor("x", "f", "k", frozenset(), "§9", "", "")
    with pytest.raises(ValueError, match="nystrom"):
        get_system("no_such_system")
    with pytest.raises(ValueError, match="unknown kind"):
        all_systems(kind="nope")


def test_one_claim_vocabulary():
    """Every word is some kind's; the suite's target kinds take words of the same vocabulary."""
    assert set(SYSTEM_CLAIMS) == set().union(*KIND_CLAIM_WORDS.values())
    for kind, words in TARGET_CLAIM_WORDS.items():
        assert set(words) <= KIND_CLAIM_WORDS[kind], kind
    for system in all_systems():
        assert system.claims <= KIND_CLAIM_WORDS[system.kind], system.name


def test_every_target_vocabulary_is_a_selection_of_the_one():
    """The suite's target kinds take words of SYSTEM_CLAIMS with the same meaning (models
    included: model_protocol.MODEL_CLAIMS)."""
    from kernel_verify.properties import gated_protocol, hybrid_protocol, model_protocol, protocol

    for vocabulary in (protocol.ATTENTION_CLAIMS, protocol.MATRIX_CLAIMS, protocol.APPROX_CLAIMS,
                       gated_protocol.GATED_CLAIMS, hybrid_protocol.HYBRID_CLAIMS,
                       model_protocol.MODEL_CLAIMS):
        assert vocabulary == {w: SYSTEM_CLAIMS[w] for w in vocabulary}
