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
    assert "KV_TARGET=module:attr" in result.reproduce[0]
    assert "FAIL" in str(result) and "1 failed" in str(result)
    assert "<table>" in result._repr_html_()
    assert result.to_json()["counts"]["fail"] == 1


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
])
def test_bad_arguments_are_clear_errors(targets, kwargs, exc, words):
    with pytest.raises(exc, match=words):
        check(targets, **kwargs)
