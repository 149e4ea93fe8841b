"""Known defects as data (kernel_verify.properties.known): a declared known failure that still
fails is reported as *known* (never pass), one that passes as *stale*; bad declarations are
rejected at construction."""

from __future__ import annotations

import pytest

from kernel_verify.properties.protocol import AttentionTarget, RandomMatrixTarget
from kernel_verify.runner import run_suite, summary

LAW = "test_rows_are_standard_gaussian"



@pytest.fixture(scope="module")
def run():
    """Both adapters of tests/known_adapters.py in one suite run (one subprocess; each verdict
    is per target, so the two do not mix)."""
    run = run_suite("tests.known_adapters:both", profile="ci", keyword="rows_are_standard_gaussian",
                    jobs=1, target_only=True, paths=None)
    assert not run.crashed, run.output_tail
    return run


def _verdict(run, target: str):
    mine = [v for v in run.verdicts if v.prop == LAW and v.target == target]
    assert len(mine) == 1, run.verdicts
    return mine[0]


def test_a_declared_defect_that_still_fails_is_known_not_pass(run):
    verdict = _verdict(run, "scaled_rows")
    assert verdict.outcome == "known"
    assert "variance 4" in verdict.evidence
    assert summary(run.verdicts)["pass"] == 0


def test_a_declared_defect_that_passes_is_stale(run):
    verdict = _verdict(run, "fixed_rows")
    assert verdict.outcome == "stale"
    assert "remove it from known_failures" in verdict.evidence
    assert run.returncode == 1  # pytest itself fails a strict xfail that passed


@pytest.mark.parametrize("known, exc, words", [
    ({"rows_law": "x"}, ValueError, "property names"),
    ({LAW: ""}, TypeError, "non-empty reason"),
    ("test_x", TypeError, "must be a mapping"),
])
def test_bad_declarations_are_rejected(known, exc, words):
    with pytest.raises(exc, match=words):
        RandomMatrixTarget("m", lambda rng, m, d: rng.standard_normal((m, d)),
                           frozenset(), known_failures=known)
    with pytest.raises(exc, match=words):
        AttentionTarget("a", lambda q, k, v, **kw: v, frozenset(), known_failures=known)
