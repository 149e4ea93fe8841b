"""Every registered system (``kernel-verify list``) has a built-in target the shipped suite runs, or
a declared reason it has none (``properties/builtin.py``: ``UNTESTED_SYSTEMS``); no reason is
left behind once a target exists (issue #28: the low-rank systems were listed with no property
covering them, silently). Every claim of every system is tested by named properties or says
why not (``properties/claim_tests.py``), and a built-in target carries every claim of its
descriptor that its kind of target takes: no claim is dropped silently."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kernel_verify.properties
from kernel_verify.impls.systems import all_systems
from kernel_verify.properties.builtin import UNTESTED_SYSTEMS
from kernel_verify.properties.claim_tests import (
    CLAIM_PROPERTIES,
    GATED_CLAIM_PROPERTIES,
    MODEL_CLAIM_PROPERTIES,
    SYSTEM_CLAIM_TESTS,
    claim_evidence,
    targets_of,
)


def _covered(system: str) -> bool:
    return bool(targets_of(system))


def _property_names() -> set[str]:
    """``"<stem>::<function>"`` of every property of the suite (``properties/test_<stem>.py``)."""
    folder = Path(kernel_verify.properties.__file__).parent
    return {f"{path.stem.removeprefix('test_')}::{node.name}"
            for path in folder.glob("test_*.py")
            for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_every_system_has_a_target_or_a_reason():
    missing = [s.name for s in all_systems()
               if not _covered(s.name) and s.name not in UNTESTED_SYSTEMS]
    assert not missing, ("systems with no built-in target and no reason: add a target "
                         "(properties/builtin*.py) or UNTESTED_SYSTEMS[name] = why:\n"
                         + "\n".join(missing))


def test_no_stale_reason():
    names = {s.name for s in all_systems()}
    stale = [n for n in UNTESTED_SYSTEMS if n not in names or _covered(n)]
    assert not stale, f"UNTESTED_SYSTEMS entries that are not systems or now have a target: {stale}"
    assert all(len(why) > 40 for why in UNTESTED_SYSTEMS.values())


@pytest.mark.parametrize("system", all_systems(), ids=lambda s: s.name)
def test_every_claim_is_tested_or_says_why_not(system):
    orphans = [c for c, evidence in claim_evidence(system).items() if evidence is None]
    assert not orphans, (
        f"system {system.name!r}: claims {orphans} are neither carried by a built-in target "
        "with properties that test them (CLAIM_PROPERTIES) nor listed in "
        f"SYSTEM_CLAIM_TESTS[{system.name!r}] (properties that test the project's functions, or "
        "why none does): add them in properties/claim_tests.py")


@pytest.mark.parametrize("system", [s for s in all_systems() if s.kind != "attention"
                                    or s.name == "exact_softmax"], ids=lambda s: s.name)
def test_built_in_targets_carry_their_descriptors_claims(system):
    """A target made from a descriptor takes every claim its kind of target knows, unless
    ``properties/claim_tests.py`` says why not (none is dropped silently on the way from
    ``impls/systems.py`` to the suite)."""
    declared = set(SYSTEM_CLAIM_TESTS.get(system.name, {}))
    for target in targets_of(system.name):
        dropped = system.target_claims() - target.claims - declared
        assert not dropped, (
            f"{target.name} drops {sorted(dropped)} of its "
            f"descriptor {system.name!r}: build it from the descriptor (properties/builtin*.py)")


def test_claim_tests_name_existing_properties_and_systems():
    names = _property_names()
    tables = [*CLAIM_PROPERTIES.values(), *GATED_CLAIM_PROPERTIES.values(),
              *MODEL_CLAIM_PROPERTIES.values(),
              *(v for claims in SYSTEM_CLAIM_TESTS.values() for v in claims.values()
                if isinstance(v, tuple))]
    unknown = sorted({p for props in tables for p in props if p not in names})
    assert not unknown, f"properties/claim_tests.py names no such property: {unknown}"
    systems = {s.name: s for s in all_systems()}
    stray = [(n, c) for n, claims in SYSTEM_CLAIM_TESTS.items() for c in claims
             if n not in systems or c not in systems[n].claims]
    assert not stray, f"properties/claim_tests.py accounts for claims no system makes: {stray}"
    reasons = [v for claims in SYSTEM_CLAIM_TESTS.values() for v in claims.values()
               if isinstance(v, str)]
    assert all(len(why) > 40 for why in reasons)


def test_report_systems_page_lists_every_claim_with_its_evidence():
    from kernel_verify.report.pages import to_markdown
    from kernel_verify.report.systems import systems_page

    text = to_markdown(systems_page())
    assert "NOT ACCOUNTED FOR" not in text
    for system in all_systems():
        assert f"## {system.name} ({system.kind}" in text, system.name


def test_every_gated_system_has_one_built_in_target_of_its_gates():
    """A built-in gated target exists for each gated descriptor, with the descriptor's gate kind
    (the gated protocol reads its gate kinds and claim words from ``impls/systems.py``)."""
    gated = all_systems(kind="gated_attention")
    assert gated
    for system in gated:
        assert [t.gates for t in targets_of(system.name)] == [system.gates], system.name


def test_list_names_every_kind():
    """``kernel-verify list`` counts and filters every kind of descriptor (``--kind``)."""
    from kernel_verify.cli import _KIND_NAMES
    from kernel_verify.impls.systems import KINDS

    assert set(_KIND_NAMES) == set(KINDS)


def test_every_batch_independent_low_rank_system_is_run_by_the_bitwise_property():
    """A kernel approximation claiming ``batch_independent`` has its call in
    ``properties/builtin_lowrank.py`` (the bitwise property runs it on NumPy and torch)."""
    from kernel_verify.properties.builtin_lowrank import lowrank_attention_targets

    claiming = {s.name for s in all_systems(kind="kernel_approximation",
                                            claims=("batch_independent",))}
    run = {t.name.removeprefix("lowrank:") for t in lowrank_attention_targets()
           if t.has("batch_independent") and set(t.backends) == {"numpy", "torch"}}
    assert claiming and claiming == run


def test_hybrid_targets_carry_their_descriptors_claims():
    """The hybrid targets take the words of their descriptor that a hybrid target knows
    (``differentiable`` where they run torch)."""
    from kernel_verify.impls.systems import get_system
    from kernel_verify.properties.hybrid_protocol import HYBRID_CLAIMS

    wanted = get_system("hybrid_attention").claims & set(HYBRID_CLAIMS)
    targets = targets_of("hybrid_attention")
    assert targets
    for target in targets:
        missing = wanted - target.claims - ({"differentiable"} if "torch" not in target.backends
                                            else set())
        assert not missing, f"{target.name} drops {sorted(missing)} of its descriptor"
