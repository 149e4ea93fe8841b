"""Unit tests of the backend axis (verify/backends.py), the strategies' seed helper, the
evidence wording (properties/evidence.py), the attention protocol's acceptance declaration and
the check runner's folding of result records (target-only counts, crashes, input-policy notes,
every distinct Hypothesis failure, the reproduce command)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from kernel_verify.properties.evidence import observed
from kernel_verify.properties.protocol import AttentionTarget
from kernel_verify.properties.strategies import generator
from kernel_verify.runner import _evidence, fold, load_results, summary
from kernel_verify.verify.backends import AXIS, as_float64, get_backend
from kernel_verify.verify.tolerance import BUDGETS


def test_axis_is_numpy_two_dtypes_and_torch_four_dtypes_per_device():
    ids = [b.id for b in AXIS]
    assert ids[:2] == ["numpy-float64", "numpy-float32"]
    for dev in ("cpu", "cuda"):
        assert [b.dtype for b in AXIS if b.name == f"torch:{dev}"] == [
            "float64", "float32", "float16", "bfloat16"]
    assert len(AXIS) == 10
    for b in AXIS:
        assert b.tolerance_key in BUDGETS  # every backend has a budget, no fallback
        assert b.budget.dtype == b.dtype


def test_unavailable_backends_say_why():
    cuda = get_backend("torch:cuda-float32")
    assert (cuda.skip_reason is None) == torch.cuda.is_available()
    if cuda.skip_reason:
        assert "torch.cuda.is_available() is False" in cuda.skip_reason
    assert get_backend("numpy:float64").skip_reason is None
    with pytest.raises(KeyError, match="known: numpy-float64"):
        get_backend("numpy:bfloat16")


@pytest.mark.parametrize("spec", ["numpy-float32", "torch:cpu-float16", "torch:cpu-bfloat16"])
def test_conversion_rounds_once_and_widens_exactly(spec):
    b = get_backend(spec)
    x = np.array([1.0 + 2.0**-30, 3.0, -0.1])
    y = b.from_numpy(x)
    assert b.accepts(y)
    seen = b.seen(x)
    # Rounded once to the dtype: a second round trip changes nothing (exact widening).
    assert np.array_equal(b.seen(seen), seen)
    assert np.all(np.abs(seen - x) <= b.budget.u * np.abs(x))
    assert np.array_equal(as_float64(y), seen)


def test_generator_streams_are_reproducible_and_distinct():
    a1, a2 = generator(7, "a").standard_normal(4), generator(7, "a").standard_normal(4)
    assert np.array_equal(a1, a2)
    assert not np.array_equal(a1, generator(7, "b").standard_normal(4))
    assert not np.array_equal(a1, generator(8, "a").standard_normal(4))


def test_evidence_names_nan_zero_outside_hull_and_uniform():
    lo, hi = np.zeros((1, 4)) + 1.0, np.zeros((1, 4)) + 3.0
    got = np.array([[np.nan, 0.0, 7.0, 2.0]])
    text = observed(got, tol=1e-9, lo=lo, hi=hi)
    assert "1 of 4 outputs are NaN" in text
    assert "exactly 0" in text
    assert "outside the hull" in text and "7.0" in text
    assert "differ" not in text
    uniform = np.full((1, 2), 2.0)
    text = observed(np.array([[2.0, 5.0]]), tol=1e-9, expected=np.array([[1.0, 4.0]]),
                    uniform=uniform)
    assert "collapsed to uniform" in text and "differ by more than" in text
    assert observed(np.array([1.0, 2.0]), tol=1e-9, expected=np.array([1.0, 2.0])) is None


def test_attention_targets_declare_what_they_accept():
    def f(q, k, v, *, causal, seed):
        return v

    t = AttentionTarget("t", f, frozenset({"noncausal", "validates_input"}),
                        backends=("torch",), dtypes=("float32", "bfloat16"))
    assert t.accepts("torch", "bfloat16") and not t.accepts("numpy", "float32")
    out = t(torch.ones(1, 1, 2, 2), None, torch.ones(1, 1, 2, 2, dtype=torch.bfloat16),
            causal=False)
    assert out.dtype == np.float64
    with pytest.raises(ValueError, match="backends must be a non-empty tuple of names among"):
        AttentionTarget("t", f, frozenset(), backends=("jax",))
    with pytest.raises(ValueError, match="unknown claims"):
        AttentionTarget("t", f, frozenset({"validates_everything"}))


def _rec(nodeid, outcome, *, target="t", when="call", message="", **extra):
    return json.dumps({"nodeid": nodeid, "family": "fam", "prop": nodeid.split("::")[1]
                       .split("[")[0], "target": target, "when": when, "outcome": outcome,
                       "message": message, "seconds": 0.0, **extra})


def test_check_counts_only_the_targets_properties_and_keeps_crashes_and_notes(tmp_path):
    lines = [
        _rec("f.py::test_own[x]", "passed", target=""),  # the suite's own code
        _rec("f.py::test_builtin[t]", "passed", builtin_only=True),
        _rec("f.py::test_missing[none]", "skipped", target="", when="setup",
             message="Skipped: provides no attention"),
        _rec("f.py::test_a[t-numpy-float64]", "passed", backend="numpy-float64",
             notes=["input policy: t raised RuntimeError"]),
        _rec("f.py::test_b[t-torch:cpu-float32]", "failed", backend="torch:cpu-float32",
             message="E   AssertionError: 2 of 4 outputs are NaN", repro="KV_TARGET=m:t pytest x"),
        _rec("f.py::test_b[t-numpy-float64]", "passed", backend="numpy-float64"),
        _rec("f.py::test_c[t]", "failed", when="???", crashed=True,
             message="worker 'gw0' crashed while running 'f.py::test_c[t]'"),
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    verdicts = {v.prop: v for v in fold(load_results(path, target_only=True))}
    assert set(verdicts) == {"test_missing", "test_a", "test_b", "test_c"}
    assert verdicts["test_a"].outcome == "pass"
    assert verdicts["test_a"].notes == ("input policy: t raised RuntimeError",)
    b = verdicts["test_b"]
    assert b.outcome == "fail" and "outputs are NaN" in b.evidence
    assert "failed on 1 of 2 case(s): torch:cpu-float32" in b.evidence
    assert b.repro == "KV_TARGET=m:t pytest x"
    assert verdicts["test_c"].outcome == "crash"
    everything = {v.prop for v in fold(load_results(path))}
    assert {"test_own", "test_builtin"} <= everything


def test_a_case_that_could_not_fail_is_not_credited_never_pass(tmp_path):
    """A passed case that recorded ``kv_uncredited`` (e.g. an input-policy property for a target
    without ``validates_input``) folds to ``not credited`` with its reason, and is not counted
    as a pass; one credited passing case among them makes the verdict ``pass``; a failure
    still wins."""
    why = "input policy: t does not claim validates_input"
    lines = [
        _rec("f.py::test_p[t-numpy-float64]", "passed", uncredited=[why, why],
             notes=["input policy: t on numpy-float64: nan in q was accepted silently"]),
        _rec("f.py::test_p[t-numpy-float32]", "passed", uncredited=[why]),
        _rec("f.py::test_q[t-numpy-float64]", "passed", uncredited=[why]),
        _rec("f.py::test_q[t-numpy-float32]", "passed"),
        _rec("f.py::test_r[t-numpy-float64]", "passed", uncredited=[why]),
        _rec("f.py::test_r[t-numpy-float32]", "failed", message="E   AssertionError: boom"),
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    verdicts = fold(load_results(path, target_only=True))
    by = {v.prop: v for v in verdicts}
    assert by["test_p"].outcome == "not credited" and by["test_p"].evidence == why
    assert by["test_p"].notes, "the input-policy note is kept beside the verdict"
    assert by["test_q"].outcome == "pass"
    assert by["test_r"].outcome == "fail"
    counts = summary(verdicts)
    assert counts["pass"] == 1 and counts["not credited"] == 1 and counts["fail"] == 1



def test_every_distinct_hypothesis_failure_and_a_reproduce_command_are_recorded(tmp_path):
    test = tmp_path / "test_two.py"
    test.write_text(
        "from hypothesis import given, settings, strategies as st\n"
        "@settings(derandomize=True, database=None, print_blob=True, max_examples=200)\n"
        "@given(st.integers(0, 100))\n"
        "def test_two(x):\n"
        "    if x > 50:\n"
        "        raise AssertionError(f'first defect at {x}')\n"
        "    if x < 5:\n"
        "        raise ValueError(f'second defect at {x}')\n")
    results = tmp_path / "r.jsonl"
    env = {"KV_RESULTS": str(results), "PATH": "", "HYPOTHESIS_PROFILE": "ci"}
    subprocess.run([sys.executable, "-m", "pytest", str(test), "-q", "-p", "no:cacheprovider",
                    "-p", "kernel_verify.properties.results", "-p", "no:xdist",
                    "--rootdir", str(tmp_path)], env=env, cwd=tmp_path, capture_output=True,
                   check=False)
    record = next(json.loads(ln) for ln in results.read_text().splitlines()
                  if json.loads(ln)["outcome"] == "failed")
    evidence = _evidence(record["message"])
    assert "first defect at 51" in evidence and "second defect at 0" in evidence
    assert "x=51," in evidence and "x=0," in evidence
    assert "Explanation" not in evidence
    assert record["repro"].startswith("HYPOTHESIS_PROFILE=ci ")
    assert f"{test}::test_two" in record["repro"] and "@reproduce_failure(" in record["repro"]
