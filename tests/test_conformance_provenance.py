"""Conformance pages name the run they come from, and ``--reuse`` refuses saved results that
older code produced (issue: pages regenerated from runs, never stale)."""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path

import pytest

from kernel_verify.adapters import conformance as conf
from kernel_verify.adapters._lazy import missing_reason

KEY = "sklearn"


def _without_findings(monkeypatch) -> None:
    """The library's record with no findings (nothing to re-measure on ``--reuse``)."""
    module = importlib.import_module(f"kernel_verify.adapters.{KEY}")
    monkeypatch.setattr(module, "LIBRARY", dataclasses.replace(module.LIBRARY, findings=()))


def test_fingerprint_is_stable_and_per_library():
    assert conf.code_fingerprint(KEY) == conf.code_fingerprint(KEY)
    assert conf.code_fingerprint(KEY) != conf.code_fingerprint("performer")
    assert len(conf.code_fingerprint(KEY)) == 12


def test_fingerprint_ignores_the_records_text_but_not_its_known_failures(monkeypatch):
    """Editing a page's text (the record) keeps ``--reuse`` possible; changing the adapter's code
    or the known failures its findings declare does not."""
    source = (Path(conf.__file__).parent / f"{KEY}.py").read_text(encoding="utf-8")
    base = conf._adapter_code(KEY, source)
    module = importlib.import_module(f"kernel_verify.adapters.{KEY}")
    text = module.LIBRARY.right[:40]
    assert text in source
    assert conf._adapter_code(KEY, source.replace(text, text.upper())) == base
    assert conf._adapter_code(KEY, source.replace("GAMMA = 1.0", "GAMMA = 2.0")) != base
    _without_findings(monkeypatch)
    assert conf._adapter_code(KEY, source) != base


@pytest.mark.skipif(missing_reason(KEY) is not None, reason=f"{KEY} adapter: library missing")
def test_reuse_refuses_results_of_older_code(tmp_path):
    saved = {"spec": "x", "returncode": 0, "seconds": 1.0, "outcomes": [], "output_tail": "",
             "confirmations": {}, "confirm_seconds": {},
             "provenance": {"commit": "abc", "fingerprint": "000000000000", "run_at": "then"}}
    (tmp_path / f"{KEY}.json").write_text(json.dumps(saved))
    with pytest.raises(conf.StaleResults, match=r"000000000000.*without --reuse"):
        conf.conformance(KEY, out_dir=tmp_path, profile="ci", quick=True, reuse=True)
    del saved["provenance"]  # results saved before provenance was recorded: refused too
    (tmp_path / f"{KEY}.json").write_text(json.dumps(saved))
    with pytest.raises(conf.StaleResults, match="none recorded"):
        conf.conformance(KEY, out_dir=tmp_path, profile="ci", quick=True, reuse=True)


@pytest.mark.skipif(missing_reason(KEY) is not None, reason=f"{KEY} adapter: library missing")
def test_reuse_of_current_results_names_the_run(tmp_path, monkeypatch):
    _without_findings(monkeypatch)
    prov = {"commit": "abc123", "fingerprint": conf.code_fingerprint(KEY), "run_at": "noon"}
    saved = {"spec": "x", "returncode": 0, "seconds": 1.0, "outcomes": [], "output_tail": "",
             "confirmations": {}, "confirm_seconds": {}, "provenance": prov}
    (tmp_path / f"{KEY}.json").write_text(json.dumps(saved))
    path = conf.conformance(KEY, out_dir=tmp_path, profile="ci", quick=True, reuse=True)
    text = path.read_text()
    assert "commit `abc123`" in text and prov["fingerprint"] in text and "noon" in text


@pytest.mark.skipif(missing_reason(KEY) is not None, reason=f"{KEY} adapter: library missing")
def test_page_says_which_verdicts_come_from_a_reduced_search(monkeypatch):
    """A verdict whose cases ran fewer examples (call_seconds) is marked in the table and
    counted above it (issue #20: never a silent reduction)."""
    from kernel_verify.runner import Outcome, SuiteRun

    _without_findings(monkeypatch)
    run = SuiteRun("x", 0, 1.0, [
        Outcome("attention_identities", "test_p", "slow", "passed",
                reduced=("3 of 25 examples (call_seconds=0.2)",)),
        Outcome("attention_identities", "test_p", "fast", "passed")])
    text = conf.page(KEY, run, {}, {}, "ci", {"commit": "abc", "fingerprint": "f", "run_at": "t"})
    assert "Reduced search: 1 verdicts" in text and "call_seconds" in text
    assert "| slow | pass | [reduced: 3 of 25 examples (call_seconds=0.2)] |" in text
    assert "| fast | pass |  |" in text


def test_a_library_is_run_as_check_runs_it(monkeypatch, tmp_path):
    """The page's counts are "as `kernel-verify check` counts them": the suite's tests of the
    project's own code (no target) are left out of a library's verdicts (target_only)."""
    from kernel_verify import runner
    from kernel_verify.adapters import conformance as conf

    seen = {}

    class Ran(Exception):
        pass

    def fake_run_suite(spec, **kwargs):
        seen.update(kwargs, spec=spec)
        raise Ran

    monkeypatch.setattr(runner, "run_suite", fake_run_suite)
    with pytest.raises(Ran):
        conf.conformance("sklearn", out_dir=tmp_path, profile="ci", quick=True)
    assert seen["target_only"] is True and seen["spec"].startswith("kernel_verify.adapters.")
