"""Slow targets in the ci profile (issue #20): a target's declared ``call_seconds`` cuts the
Hypothesis examples of each of its property cases (never to none, never silently), and a declared
known failure is not shrunk (properties/profiles.py, properties/conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from kernel_verify import AttentionTarget, check
from kernel_verify.properties import builtin_attention, profiles
from kernel_verify.properties.conftest import _case_settings, _examples
from kernel_verify.properties.layouts import identity_inputs
from kernel_verify.runner import Outcome, fold, verdict_table


def _softmax(q, k, v, *, causal: bool, seed: int = 0):
    s = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize(("seconds", "own", "profile", "expected"), [
    (None, 25, "ci", 25),       # no declaration: unchanged
    (0.1, 25, "ci", 5),         # ⌊0.5 / 0.1⌋
    (0.2, 25, "ci", profiles.MIN_EXAMPLES),  # ⌊0.5 / 0.2⌋ = 2, raised to the minimum
    (10.0, 25, "mutants", profiles.MIN_EXAMPLES),
    (0.1, 3, "ci", 3),          # never more than the property's own count
    (0.1, 25, "nightly", 25),   # other profiles keep their count
    (0.1, 10, "dev", 10),
])
def test_examples_for_cost(seconds, own, profile, expected):
    assert profiles.examples_for_cost(seconds, own, profile) == expected


@pytest.mark.parametrize(("bad", "exc"), [(0, ValueError), (-0.5, ValueError),
                                          (True, TypeError), ("0.1", TypeError)])
def test_call_seconds_must_be_a_positive_number(bad, exc):
    with pytest.raises(exc, match="call_seconds must be a positive"):
        AttentionTarget("slow", _softmax, frozenset({"causal"}), call_seconds=bad)


class _Item:
    """The parts of a collected pytest case that _case_settings reads."""

    def __init__(self, fn, target, name):
        self.obj, self.originalname, self.name = fn, name, f"{name}[{target.name}]"
        self.callspec = type("Callspec", (), {"params": {"target": target}})()
        self.user_properties: list = []


def _prop():
    @given(st.integers())
    def test_prop(n):
        pass

    return test_prop


def test_case_settings_cut_examples_and_record_the_reduction(monkeypatch):
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "ci")
    fn = _prop()
    own = fn._hypothesis_internal_use_settings.max_examples
    slow = AttentionTarget("slow", _softmax, frozenset({"causal"}), call_seconds=0.25)
    fast = AttentionTarget("fast", _softmax, frozenset({"causal"}))
    # A built-in target with a reduced budget, dropped, whose id CPython gave to `fast` (seen once
    # in a fresh-clone CI run when the registry kept bare ids): `fast` is not reduced.
    monkeypatch.setitem(builtin_attention._REDUCED, id(fast), object())
    assert builtin_attention.example_budget(fast) is None
    assert builtin_attention.example_budget(None) is None  # a skipped case has no target
    item, other = _Item(fn, slow, "test_prop"), _Item(fn, fast, "test_prop")
    _case_settings(item)
    _case_settings(other)
    n = max(profiles.MIN_EXAMPLES, 2)
    assert item._kv_settings.max_examples == min(own, n) == _examples(item)
    assert item.user_properties == [("kv_reduced", f"{n} of {own} examples (call_seconds=0.25)")]
    assert not hasattr(other, "_kv_settings") and other.user_properties == []
    assert fn._hypothesis_internal_use_settings.max_examples == own  # the function is shared


def test_a_declared_known_failure_is_not_shrunk(monkeypatch):
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "ci")
    fn = settings(phases=list(profiles.CI_PHASES))(_prop())
    known = AttentionTarget("known", _softmax, frozenset({"causal"}),
                            known_failures={"test_partition_of_unity": "fails as declared"})
    item = _Item(fn, known, "test_partition_of_unity")
    _case_settings(item)
    assert Phase.shrink not in item._kv_settings.phases
    assert set(item._kv_settings.phases) == set(profiles.KNOWN_PHASES) & set(profiles.CI_PHASES)
    assert item.user_properties == []  # the example count is unchanged: nothing to report


def test_reduced_verdicts_say_so():
    reduced = ("3 of 25 examples (call_seconds=0.2)",)
    outcomes = [Outcome("f", "test_p", "slow", "passed", reduced=reduced),
                Outcome("f", "test_p", "fast", "passed")]
    by_target = {v.target: v for v in fold(outcomes)}
    assert by_target["slow"].outcome == "pass" and by_target["slow"].reduced == reduced[0]
    assert by_target["fast"].reduced == ""
    table = verdict_table(list(by_target.values()))
    assert f"[reduced: {reduced[0]}]" in table


def test_check_runs_the_reduced_number_of_examples():
    """End to end, in this process: every example of test_same_seed_gives_same_output calls the
    target 4 times (twice, another input, again); a slow target gets ⌊0.5/0.25⌋ → 3 random
    examples, and its verdict and the summary say so. The fixed layouts around the target's
    chunk boundaries (properties/layouts.py, one run per layout) are never reduced: they run
    before the random draws, whatever the target's cost."""
    calls = []

    def counted(q, k, v, *, causal: bool, seed: int = 0):
        calls.append(q.shape)
        return _softmax(q, k, v, causal=causal)

    slow = AttentionTarget("cost_slow_softmax", counted, frozenset({"causal"}),
                           call_seconds=0.25)
    result = check([slow], profile="ci", keyword="test_same_seed_gives_same_output")
    [v] = [v for v in result.verdicts if v.target == "cost_slow_softmax"]
    assert v.outcome == "pass"
    assert v.reduced.startswith(f"{profiles.MIN_EXAMPLES} of 25 examples")
    fixed = len(identity_inputs(slow))
    assert fixed >= 5  # T = 1, C - 1, C, C + 1, 2C + 1 at least
    assert len(calls) == 4 * (profiles.MIN_EXAMPLES + fixed)
    assert "1 verdict(s) from a reduced search" in result.summary_line()
    assert "[reduced: 3 of 25 examples" in str(result)
