"""What a kill means (:mod:`kernel_verify.mutants.kills`) and the controls
(:mod:`kernel_verify.mutants.controls`): failures classified by kind, only property assertions
of an intended property count, and every mutant family has correct twins that load."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.mutants.catalogue import MUTANTS
from kernel_verify.mutants.controls import CONTROLS
from kernel_verify.mutants.kills import (
    NONFINITE,
    control_failed,
    failure_kind,
    intended,
    verdict_word,
)
from kernel_verify.properties.evidence import NonFiniteOutputError, require_finite
from kernel_verify.properties.loader import load_targets
from kernel_verify.runner import Outcome, SuiteRun, Verdict

FAM = "attention_identities"


def _v(evidence: str, outcome: str = "fail", prop: str = "test_a") -> Verdict:
    return Verdict(FAM, prop, "t", outcome, evidence)


@pytest.mark.parametrize(("evidence", "kind"), [
    ("AssertionError: rows ≤ 0 changed when only positions > 0 changed", "property"),
    ("kernel_verify.properties.evidence.NonFiniteOutputError: 2 of 4 outputs are NaN",
     "non-finite"),
    ("TypeError: dtypes must match: log_phi_q=float64, v=float32", "exception"),
    ("ValueError: q must be finite", "exception"),
    ("ExceptionGroup: Hypothesis found 2 distinct failures. (2 sub-exceptions)\n"
     "TypeError: boom\nAssertionError: changed", "property"),
    ("", "exception"),
])
def test_failures_are_classified_by_their_exception(evidence, kind):
    assert failure_kind(_v(evidence)) == kind
    assert failure_kind(_v(evidence, "crash")) == "crash"


def test_the_property_raises_the_class_the_runner_matches():
    assert NonFiniteOutputError.__name__ == NONFINITE
    assert issubclass(NonFiniteOutputError, AssertionError)
    with pytest.raises(NonFiniteOutputError, match="NaN"):
        require_finite(np.array([1.0, np.nan]), "here", "the identity")
    require_finite(np.array([1.0, 2.0]), "here", "the identity")


def _run(*outcomes: tuple[str, str, str]) -> SuiteRun:
    return SuiteRun("spec", 1, 0.0, [Outcome(FAM, p, "t", o, msg) for p, o, msg in outcomes])


def test_only_a_property_assertion_of_an_intended_property_counts():
    want = (f"{FAM}::test_causal",)
    nan = _run(("test_causal", "failed", f"E   {NONFINITE}: 2 of 4 outputs are NaN"))
    assert intended(nan, want) == [] and verdict_word(nan, want) == "killed (non-finite only)"
    exc = _run(("test_causal", "failed", "E   TypeError: dtypes must match"))
    assert verdict_word(exc, want) == "killed (exception only)"
    other = _run(("test_other", "failed", "E   AssertionError: off"))
    assert verdict_word(other, want) == "killed (other)"
    good = _run(("test_causal", "failed", "E   AssertionError: rows changed"),
                ("test_other", "passed", ""))
    assert intended(good, want) == [f"{FAM}::test_causal"] and verdict_word(good, want) == "killed"
    assert intended(good, (FAM,)) == [f"{FAM}::test_causal"]  # a family names its properties
    survived = _run(("test_causal", "passed", ""))
    assert verdict_word(survived, want) == "SURVIVED"
    assert not control_failed(survived) and control_failed(nan) and control_failed(exc)


def test_every_mutant_family_has_controls_that_load():
    assert {m.family for m in MUTANTS} <= {c.family for c in CONTROLS}
    assert len({c.name for c in CONTROLS}) == len(CONTROLS)
    for c in CONTROLS:
        targets = load_targets(c.spec)
        assert targets and all(t.name.startswith("control:") for t in targets), c.name


def test_every_expected_killer_names_a_property_file_or_property():
    from kernel_verify.runner import target_property_files

    stems = {f.rsplit("/", 1)[-1].removeprefix("test_").removesuffix(".py")
             for f in target_property_files()}
    for m in MUTANTS:
        for e in m.expected_killers:
            assert e.split("::", 1)[0] in stems, (m.name, e)
