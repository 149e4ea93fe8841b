"""Quiet by default (issue #45 item 5): `kernel-verify check` summarises the skips by reason,
shows a failure's evidence and reproduce line with each target named by class and name (its whole
repr on --verbose), and the report's ETA comes from the measured time per computed map."""

from __future__ import annotations

import argparse
import re

import numpy as np

from kernel_verify import RandomMatrixTarget, check
from kernel_verify.api import CheckResult
from kernel_verify.runner import Verdict, short_target_reprs, skip_summary, verdict_table

_REPR = ("Failing test case: test_rows(\ntarget=RandomMatrixTarget(name='api_scaled',\n"
         "draw=_scaled,\nclaims=frozenset({'gaussian_rows'}),\nknown_failures={}),\n"
         "size=(0, 2, 1),\n)")


def _verdicts() -> list[Verdict]:
    """Two targets: a pass, a failure with a falsifying example, and skips of three kinds — for
    want of a target kind (4 + 2), for want of parts of a protocol of one target (2 + 1) and a
    single other one (1)."""
    out = [Verdict("fam", "test_ok", "a", "pass"),
           Verdict("fam", "test_bad", "a", "fail",
                   evidence=f"AssertionError: rows are not N(0, I)\n{_REPR}",
                   repro="kernel-verify check x:targets -k test_bad")]
    out += [Verdict("models", f"test_m{i}", "", "skip",
                    evidence="x:targets provides no model target") for i in range(4)]
    out += [Verdict("gated", f"test_g{i}", "", "skip",
                    evidence="x:targets provides no gated attention (GatedAttentionTarget)")
            for i in range(2)]
    out += [Verdict("forms", f"test_f{i}", "b", "skip",
                    evidence="b does not offer what this property needs: AttentionTarget.step; "
                    "AttentionTarget.chunked (the forms protocol)") for i in range(2)]
    out += [Verdict("forms", "test_v", "b", "skip",
                    evidence="b does not offer what this property needs: AttentionTarget.varlen "
                    "(the forms protocol)")]
    out += [Verdict("attention", f"test_a{i}", "", "skip",
                    evidence=f"x:targets provides no attention with claims ['c{i}']")
            for i in range(3)]
    out += [Verdict("taylor", "test_t", "", "skip",
                    evidence="fewer than two Taylor targets of one order\nmore detail")]
    return out


def test_skips_are_one_line_per_reason_with_counts():
    lines = skip_summary(_verdicts())
    assert lines[0].startswith("SKIP  13 properties, by reason")
    body = lines[1:]
    # first the reasons about the run's own targets, most frequent first — target b's missing
    # parts (3), taylor (1) — then the kinds: asked with claims (3), asked alone (6)
    assert len(body) == 4
    counts = [int(re.match(r"\s*(\d+) × ", ln).group(1)) for ln in body]
    assert counts == [3, 1, 3, 6] and sum(counts) == 13  # each counted
    assert body[0].endswith("b does not offer what the property needs (the forms protocol): "
                            "AttentionTarget.step; AttentionTarget.chunked (2) | "
                            "AttentionTarget.varlen (1)")
    assert body[1].endswith("fewer than two Taylor targets of one order")  # first line only
    # one count per kind: attention asked with three sets of claims is "attention (3)"; a target
    # of the kind may be there, declaring fewer claims, so the line does not say there is none
    assert body[2].endswith("no target of the kind has the claims the property needs: "
                            "attention (3)")
    assert body[3].endswith("no target of the kind the property tests: model target (4), "
                            "gated attention (GatedAttentionTarget) (2)")
    assert skip_summary([v for v in _verdicts() if v.outcome != "skip"]) == []


def test_quiet_table_has_no_skip_rows_and_verbose_has_each():
    quiet = verdict_table(_verdicts())
    verbose = verdict_table(_verdicts(), verbose=True)
    assert sum(" SKIP " in ln for ln in quiet.splitlines()) == 0
    assert sum(" SKIP " in ln for ln in verbose.splitlines()) == 13
    for text in (quiet, verbose):  # the rest is the same: the pass, the failure and its repro
        assert re.search(r"fam::test_ok\s+a\s+PASS", text)
        assert "AssertionError: rows are not N(0, I)" in text
        assert "| reproduce: kernel-verify check x:targets -k test_bad" in text
    assert "SKIP  13 properties" in quiet and "SKIP  13 properties" not in verbose


def test_a_failure_names_its_target_by_class_and_name_unless_verbose():
    quiet = verdict_table(_verdicts())
    verbose = verdict_table(_verdicts(), verbose=True)
    assert "target=<RandomMatrixTarget 'api_scaled'>," in quiet
    assert "draw=_scaled" not in quiet and "known_failures" not in quiet
    assert "size=(0, 2, 1)," in quiet  # the drawn inputs stay
    assert "their whole repr: --verbose" in quiet
    assert "draw=_scaled" in verbose and "known_failures={})," in verbose
    assert "<RandomMatrixTarget" not in verbose


def test_short_target_reprs_matches_brackets_outside_strings():
    text = "f(target=X(name='a(b', fn=<function f at 0x1>, c={'x': (1, ')')}), size=3)"
    assert short_target_reprs(text) == ("f(target=<X 'a(b'>, size=3)", True)
    assert short_target_reprs("targets=Y(\n'n', 2)\nnext") == ("targets=<Y 'n'>\nnext", True)
    # cut short (no closing parenthesis): left as it is
    assert short_target_reprs("target=X(name='a',") == ("target=X(name='a',", False)
    assert short_target_reprs("no repr here") == ("no repr here", False)


def _result() -> CheckResult:
    return CheckResult("x:targets", ("a", "b"), "ci", 1.0, 1, _verdicts())


def test_check_command_is_quiet_by_default_and_verbose_on_request(monkeypatch, capsys):
    import kernel_verify.api as api
    import kernel_verify.runner as runner
    from kernel_verify import cli

    monkeypatch.setattr(runner, "_validate_target", lambda spec: ("a", "b"))
    monkeypatch.setattr(api, "check", lambda *a, **k: _result())
    args = dict(target="x:targets", profile="ci", keyword=None, json_out=None, jobs=1)
    assert cli._cmd_check(argparse.Namespace(**args)) == 1
    quiet = capsys.readouterr().out
    assert cli._cmd_check(argparse.Namespace(**args, verbose=True)) == 1
    verbose = capsys.readouterr().out
    assert quiet.count(" SKIP ") == 0 and "SKIP  13 properties" in quiet
    assert verbose.count(" SKIP ") == 13
    summary = "1 passed, 1 failed"
    assert summary in quiet and summary in verbose
    assert cli.build_parser().parse_args(["check", "x:y", "-v"]).verbose
    assert not cli.build_parser().parse_args(["check", "x:y"]).verbose


def test_a_real_failure_prints_its_target_short(capsys):
    """End to end in this process: the falsifying example of a real failure names the target
    by class and name in the printed result."""

    def scaled(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
        return 2.0 * rng.standard_normal((m, d))

    broken = RandomMatrixTarget("quiet_scaled", scaled, frozenset({"gaussian_rows"}))
    result = check(broken, profile="ci", keyword="rows_are_standard_gaussian", progress=False)
    [failure] = result.failures
    assert "target=RandomMatrixTarget(name='quiet_scaled'" in failure.evidence
    printed = str(result)
    assert "target=<RandomMatrixTarget 'quiet_scaled'>" in printed
    assert "draw=" not in printed and "reproduce: " in printed
    assert "draw=" in verdict_table(result.verdicts, verbose=True)


def test_report_eta_comes_from_the_measured_time_of_computed_maps(capsys):
    """Four of ten maps done: one computed in 8 s, three read from the cache (≈ 0 s); the ETA
    is 6 maps × 8 s = 48 s (the mean over the whole elapsed time would say ~ 6 × 2 s)."""
    import time

    from kernel_verify.report.main import _progress

    t0 = time.perf_counter() - 8.0
    _progress(1, 10, "computed", "pass", 8.0, False, t0)
    for i in (2, 3, 4):
        _progress(i, 10, f"cached{i}", "pass", 0.01, True, t0)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert int(re.search(r"ETA\s+(\d+)s", last).group(1)) == 6 * 8
    # a phase where nothing was computed yet: elapsed / done
    t1 = time.perf_counter() - 4.0
    _progress(2, 4, "cached", "pass", 0.0, True, t1, phase="pages")
    eta = int(re.search(r"ETA\s+(\d+)s", capsys.readouterr().err).group(1))
    assert eta in (4, 5)  # 4 s / 2 done × 2 left, plus the few ms since t1 was taken


def test_input_policy_notes_are_one_line_per_property_and_target_unless_verbose():
    """Twelve notes of one property on one target: one line with the first note and the count
    of the others (quiet); every note on --verbose."""
    notes = tuple(f"input policy: t on torch:cpu-float32 case {i} raised RuntimeError"
                  for i in range(12))
    v = [Verdict("attention_identities", "test_mismatched_shapes_are_rejected", "t",
                 "not credited", evidence="input policy", notes=notes),
         Verdict("attention_identities", "test_non_finite_input_is_rejected", "t",
                 "not credited", evidence="input policy", notes=notes[:1])]
    quiet = verdict_table(v).split("Input-policy notes")[1].strip().splitlines()[1:]
    assert len(quiet) == 2
    assert quiet[0].endswith("case 0 raised RuntimeError  (+11 more of this property: "
                             "--verbose)")
    assert quiet[1].endswith("case 0 raised RuntimeError")  # a single note: no count
    loud = verdict_table(v, verbose=True).split("Input-policy notes")[1].strip().splitlines()
    assert len(loud) == 1 + 13 and all("case" in ln for ln in loud[1:])


def test_power_controls_are_one_line_per_property_and_target_unless_verbose():
    """The model verdicts' power controls: quiet, the planted defect with the init scales and
    dtypes it failed at on one line; --verbose, each note with its evidence."""
    notes = tuple(f"power control at init scale 1 ({dt}): the planted defect (cache dropped "
                  f"after the first step) fails this check: max |difference| 0.3 ({dt})"
                  for dt in ("float32", "float64"))
    v = [Verdict("models", "test_decode", "lm", "pass", notes=notes)]
    quiet = verdict_table(v).split("Power controls")[1].strip().splitlines()[1:]
    assert quiet == ["  models::test_decode  lm: the planted defect (cache dropped after the "
                     "first step) fails it at init scale 1 (float32), 1 (float64)"]
    loud = verdict_table(v, verbose=True).split("Power controls")[1].strip().splitlines()[1:]
    assert len(loud) == 2 and all("max |difference| 0.3" in ln for ln in loud)


def test_rare_skip_reasons_fold_into_one_line():
    """Past the SKIP_REASONS_SHOWN most frequent reasons, the rest is one counted line."""
    from kernel_verify.runner import SKIP_REASONS_SHOWN

    many = [Verdict("f", f"test_{i}_{j}", "", "skip", evidence=f"reason {i}")
            for i in range(SKIP_REASONS_SHOWN + 3) for j in range(SKIP_REASONS_SHOWN + 3 - i)]
    lines = skip_summary(many)
    assert len(lines) == 1 + SKIP_REASONS_SHOWN + 1
    assert lines[-1].strip() == "6 × 3 other reasons, each rarer (every row: --verbose)"
    counts = [int(re.match(r"\s*(\d+) × ", ln).group(1)) for ln in lines[1:]]
    assert sum(counts) == len(many)
