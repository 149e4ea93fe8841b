"""Completeness of the formula records (:mod:`kernel_verify.properties.formulas`).

Every formula id has a record; every fact that applies to a formula is either present or left
out with a declared reason (the verdict's "not tested (why)"); no reason is left behind once the
fact exists; every suite fact names a known formula. A failure names the formula, the field and
the file to add it to, as a record database should (PyTorch's OpInfo).
"""

from __future__ import annotations

import pytest

from kernel_verify.impls.names import FORMULAS
from kernel_verify.properties import formulas
from kernel_verify.properties.formulas import APPLIES, FIELDS, WHERE, WITHOUT, record, records


def test_every_formula_has_a_record_and_every_record_a_formula():
    assert set(records()) == set(FORMULAS)


def test_every_field_says_when_it_applies_and_where_it_is_added():
    assert set(APPLIES) == set(FIELDS) == set(WHERE)


@pytest.mark.parametrize("formula", sorted(FORMULAS))
def test_record_is_complete(formula):
    r = record(formula)
    missing = [f"{formula}: field {fact!r} is empty and applies to it: add it in "
               f"{WHERE[fact]}, or declare why not: not_derived={{{fact!r}: ...}} on its twin "
               f"(a fact of the truth) or WITHOUT[{formula!r}][{fact!r}] in "
               "properties/formulas.py"
               for fact in FIELDS if APPLIES[fact](r) and not r.has(fact)
               and not r.without.get(fact)]
    assert not missing, "\n".join(missing)


def test_reasons_name_known_formulas():
    assert set(WITHOUT) <= set(FORMULAS), sorted(set(WITHOUT) - set(FORMULAS))


@pytest.mark.parametrize("formula", sorted(FORMULAS))
def test_no_stale_reason(formula):
    """A declared reason (WITHOUT or the twin's not_derived) for a fact the record has, or one
    that does not apply, is stale."""
    r = record(formula)
    stale = [f"{formula}: the reason declared for {fact!r} is stale: "
             + ("the record has it" if fact in FIELDS and r.has(fact) else
                "the fact does not apply to it" if fact in FIELDS else "no such field")
             for fact in r.without
             if fact not in FIELDS or r.has(fact) or not APPLIES[fact](r)]
    assert not stale, "\n".join(stale)


def test_suite_facts_name_known_formulas_and_fields():
    assert set(formulas._SUITE_FACTS) <= set(FORMULAS)
    assert {k for facts in formulas._SUITE_FACTS.values() for k in facts} <= set(FIELDS)


def test_why_not_is_the_declared_reason():
    r = record("cosine")
    assert r.why_not("backward") == WITHOUT["cosine"]["backward"]
    assert record("softmax_positive").why_not("backward") is None
    assert record(None).why_not("twin") is not None


def test_completeness_fails_for_a_new_formula_without_its_facts(monkeypatch):
    """The control: a formula with a random unbiased map and no moment, family or backward rule
    is named with each missing field."""
    r = formulas.Formula(name="new_map", maps=(), kernels=("gaussian",),
                         claims=frozenset({"unbiased"}))
    monkeypatch.setattr(formulas, "_random", lambda rec: True)
    empty = [fact for fact in FIELDS if APPLIES[fact](r) and not r.has(fact)]
    assert {"twin", "backward", "exact_variance", "blackbox_family"} <= set(empty)
