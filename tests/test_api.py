"""The Python API (kernel_verify.check): spec strings, adapter modules and target objects give
the same structured result the command line prints; objects no subprocess can import run in
this process; bad arguments are clear errors before anything runs."""

from __future__ import annotations

import numpy as np
import pytest

import kernel_verify
from kernel_verify import CheckResult, RandomMatrixTarget, check

KEYWORD = "rows_are_standard_gaussian"


def _scaled(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    return 2.0 * rng.standard_normal((m, d))


def test_public_names_are_exported():
    for name in ("FeatureMapTarget", "AttentionTarget", "RandomMatrixTarget",
                 "KernelApproxTarget", "check", "CheckResult"):
        assert name in kernel_verify.__all__
        assert getattr(kernel_verify, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        kernel_verify.nope  # noqa: B018


def test_objects_defined_here_run_in_process_and_fail_with_evidence():
    broken = RandomMatrixTarget("api_scaled", _scaled, frozenset({"gaussian_rows"}))
    result = check(broken, profile="ci", keyword=KEYWORD)
    assert isinstance(result, CheckResult)
    assert result.spec == "<targets given in Python>"
    assert not result.ok and result.exit_code == 1
    [failure] = result.failures
    assert failure.prop == "test_rows_are_standard_gaussian" and "REJECTED" in failure.evidence
    assert "FAIL" in str(result) and "1 failed" in str(result)
    page = result._repr_html_()
    assert "<table>" in page and "REJECTED" in page and "reproduce: import kernel_verify" in page
    assert result.to_json()["counts"]["fail"] == 1
    # the suite's own output (pytest's report, the traceback) is in the result, not printed
    assert "test_rows_are_standard_gaussian" in result.output
    # the reproduce line is Python that runs as printed: `broken` lives in this function only,
    # so it names this session's registry of in-process runs
    [line] = result.reproduce
    assert line.startswith("import kernel_verify; kernel_verify.check(kernel_verify.api.given(")
    namespace: dict = {}
    exec(line.replace("kernel_verify.check(", "result = kernel_verify.check(", 1), namespace)
    again = namespace["result"]
    assert [(v.prop, v.outcome) for v in again.verdicts] == [(failure.prop, "fail")]


def test_in_process_run_prints_one_progress_line(capsys):
    broken = RandomMatrixTarget("api_quiet", _scaled, frozenset({"gaussian_rows"}))
    result = check(broken, profile="ci", keyword=KEYWORD)
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, (out, err)
    assert err.startswith("kernel-verify check: 1 target(s) given in Python") and \
        "1 of 1 tests done" in err, err
    assert result.counts["fail"] == 1


SCRIPT = """
import torch  # imports multiprocessing: __mp_main__ becomes an alias of __main__
from kernel_verify import RandomMatrixTarget, check


def gaussian(rng, m, d):
    return rng.standard_normal((m, d))


good = RandomMatrixTarget("script_gaussian", gaussian, frozenset({"gaussian_rows"}))
if __name__ == "__main__":
    result = check(good, profile="ci", keyword="rows_are_standard_gaussian", progress=False)
    print(result.spec, [(v.prop, v.outcome) for v in result.verdicts])
"""


def test_targets_at_a_scripts_top_level_run(tmp_path):
    """The running script (``__main__``, and ``__mp_main__``, its alias once multiprocessing is
    imported) is not importable by a subprocess: its targets run in process."""
    import subprocess
    import sys

    (tmp_path / "script.py").write_text(SCRIPT)
    proc = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True,
                          text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == (
        "<targets given in Python> [('test_rows_are_standard_gaussian', 'pass')]"), proc.stdout


def test_a_keyword_matching_nothing_says_so():
    target = RandomMatrixTarget("api_nothing", _scaled, frozenset({"gaussian_rows"}))
    result = check(target, profile="ci", keyword="no_such_property", progress=False)
    # nothing verified (the README's exit status 5, as pytest's "no tests"), not a crash
    assert not result.verdicts and not result.crashed and result.exit_code == 5
    assert "no property matched keyword 'no_such_property'" in str(result)


def test_a_spec_and_the_objects_it_names_give_the_same_verdicts():
    from tests import known_adapters

    by_spec = check("tests.known_adapters:stale", profile="ci", keyword=KEYWORD, jobs=1)
    by_objects = check(known_adapters.stale, profile="ci", keyword=KEYWORD, jobs=1)
    assert by_objects.spec == "tests.known_adapters:stale"  # found where it lives: a subprocess
    assert [(v.prop, v.outcome) for v in by_spec.verdicts] == \
        [(v.prop, v.outcome) for v in by_objects.verdicts] == [(KEYWORD.join(("test_", "")),
                                                                 "stale")]


@pytest.mark.parametrize("targets, kwargs, exc, words", [
    ("no_colon", {}, ValueError, "module:attribute"),
    ("tests.known_adapters:nothing", {}, ValueError, "has no attribute"),
    (42, {}, TypeError, "spec, an adapter module"),
    ([], {}, TypeError, "empty list"),
    ("tests.known_adapters:known", {"jobs": 0}, ValueError, "jobs must be"),
    ("tests.known_adapters:known", {"profile": "fast"}, ValueError, "choose one of"),
    ("tests.known_adapters:known", {"keyword": " "}, ValueError, "keyword must be"),
])
def test_bad_arguments_are_clear_errors(targets, kwargs, exc, words):
    with pytest.raises(exc, match=words):
        check(targets, **kwargs)


def test_a_run_that_verified_nothing_exits_5_and_says_so():
    """Every property skipped (an optional dependency missing, no declared dtype this machine
    runs): not a pass — exit status 5 and a NOTHING VERIFIED line; one pass makes it 0."""
    from kernel_verify.api import CheckResult
    from kernel_verify.properties.verdicts import Verdict

    skipped = [Verdict("f", "p", "t", "skip", "scikit-learn is not installed")]
    nothing = CheckResult("m:t", ("t",), "ci", 1.0, 0, verdicts=skipped)
    assert nothing.exit_code == 5 and not nothing.verified
    assert "NOTHING VERIFIED" in nothing.summary_line()
    one = CheckResult("m:t", ("t",), "ci", 1.0, 0,
                      verdicts=[*skipped, Verdict("f", "q", "t", "pass")])
    assert one.exit_code == 0 and "NOTHING" not in one.summary_line()


def test_a_saved_result_records_where_it_was_computed():
    import platform

    from kernel_verify.api import environment

    env = environment()
    assert env["python"] == platform.python_version()
    assert env["versions"]["numpy"] == __import__("numpy").__version__
    assert "kernel-verify" in env["versions"] and env["code"]
    assert all(isinstance(v, str) for v in env["versions"].values())
