"""``kernel-verify calibrate``: covers every statistical property, its verdict logic is right, and
each check family runs on correct code with a rejection count its level allows.

The smoke run is split into one test case per calibration unit (one group of checks on one
target), so that the pytest workers share it; each unit runs at a small trial count, where the
verdicts are *determined* (too few trials to certify any level: every row is not ok), and the
counts are checked with a known false-alarm rate (:func:`_allowed`). The verdict logic and the
exit status are tested on synthetic checks whose outcome is fixed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scipy import stats as sps

from kernel_verify import calibration
from kernel_verify.calibration import Row, Unit
from kernel_verify.cli import build_parser

PROPERTIES = Path(calibration.__file__).resolve().parents[2] / "properties"

#: Trials per unit in the smoke run (the orthogonal-claim unit: 1, it draws 20000 orthogonal
#: blocks a trial), and the assumption checks' trials there.
SMOKE_TRIALS, SMOKE_ASSUMPTION_TRIALS = 4, 4
#: False-alarm probability of one row's count assertion in the smoke run.
ROW_DELTA = 1e-7


def _statistical_properties() -> set[str]:
    found = set()
    for path in PROPERTIES.glob("test_*.py"):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"@pytest\.mark\.statistical.*?\ndef (test_\w+)", text, re.S):
            found.add(f"{path.name}::{match.group(1)}")
    return found


def test_every_statistical_property_is_calibrated() -> None:
    found = _statistical_properties()
    assert found, "no statistical properties found"
    assert found == set(calibration.CALIBRATED), (
        f"not calibrated: {sorted(found - set(calibration.CALIBRATED))}; stale: "
        f"{sorted(set(calibration.CALIBRATED) - found)}")


def test_every_part_is_a_cli_choice() -> None:
    (action,) = [a for a in build_parser()._subparsers._group_actions[0].choices["calibrate"]
                 ._actions if a.dest == "parts"]
    # power: the detection power of the attention properties, its own report (reports/power.md)
    assert list(action.choices) == [*calibration.PARTS, "power"]


def test_default_and_minimum_seeds() -> None:
    args = build_parser().parse_args(["calibrate"])
    assert args.seeds is None  # each part at its committed count (seeds_per_part)
    assert calibration.DEFAULT_SEEDS >= calibration.MIN_SEEDS == 20
    with pytest.raises(ValueError, match=">= 20"):
        calibration.calibrate(5)


_OLD = ("## Part `matrices`\n\n`kernel-verify calibrate --seeds 100 --part matrices` at commit x\n"
        "\n## Part `reference_means`\n\n`kernel-verify calibrate --seeds 300 --part "
        "reference_means` at commit y\n")


def test_seeds_default_to_each_parts_committed_count() -> None:
    """No --seeds: a part runs at the count its committed section records (at least 100)."""
    from kernel_verify.calibration.report import recorded_seeds, seeds_per_part

    assert recorded_seeds(_OLD) == {"matrices": 100, "reference_means": 300}
    got = seeds_per_part(["matrices", "reference_means", "gradients"], None, _OLD)
    assert got == {"matrices": 100, "reference_means": 300, "gradients": 100}
    assert seeds_per_part(["matrices"], 400, _OLD) == {"matrices": 400}


def test_fewer_seeds_than_a_committed_section_is_refused_without_the_flag() -> None:
    """--seeds 100 would replace the 300-seed section: a ValueError naming the part and both
    counts, unless allow_fewer (--allow-fewer-seeds)."""
    from kernel_verify.calibration.report import seeds_per_part

    with pytest.raises(ValueError, match=r"--seeds 100 .*reference_means \(300 seeds\)"):
        seeds_per_part(["reference_means"], 100, _OLD)
    assert seeds_per_part(["reference_means"], 100, _OLD, allow_fewer=True) == {
        "reference_means": 100}
    assert seeds_per_part(["matrices"], 100, _OLD) == {"matrices": 100}  # not fewer: fine


# ----------------------------------------------------------------------- verdict logic (exact)
def test_upper_bound_is_the_one_sided_clopper_pearson_bound() -> None:
    # 0 of n: 1 − 0.05^(1/n) in closed form; k of n: the Beta(k + 1, n − k) 95 % quantile
    assert calibration.upper_bound(0, 40) == pytest.approx(1 - 0.05 ** (1 / 40), rel=1e-12)
    assert calibration.upper_bound(3, 40) == pytest.approx(sps.beta.ppf(0.95, 4, 37), rel=1e-12)
    assert calibration.upper_bound(40, 40) == 1.0
    # the examples: 0/40 allows 7.2 % one-sided (8.8 % two-sided), 5/40 allows 24 %
    assert calibration.upper_bound(0, 40) > 0.05 and calibration.upper_bound(5, 40) > 0.05
    with pytest.raises(ValueError, match="k must be"):
        calibration.upper_bound(5, 4)


def test_trials_to_certify_is_the_smallest_certifying_count() -> None:
    for level in (0.2, 0.05, 1e-3):
        n = calibration.trials_to_certify(level)
        assert calibration.upper_bound(0, n) <= level < calibration.upper_bound(0, n - 1)
    assert calibration.trials_to_certify(0.05) == 59
    assert calibration.trials_to_certify(1e-3) == 2995


def test_ok_means_the_upper_bound_is_within_every_level() -> None:
    def row(trials: int, rejections: tuple[int, ...], levels=(0.2, 0.1)) -> Row:
        return Row("c", "t", "w", trials, levels, rejections, "op")

    assert row(100, (3, 1)).ok
    assert not row(100, (3, 9)).ok  # 9/100: upper 0.153 > 0.1 at the second rung
    assert not row(10, (0, 0)).ok  # 10 trials cannot certify 0.1 (upper 0.259)
    assert not Row("c", "t", "w", 100, (), (), "op", unstated=0).ok  # no stated level: never ok
    # An exact-level test (DKW–Massart: rate = level on correct code): ok while the rate is not
    # shown above the level (lower bound ≤ level), with as many trials as certifying would take.
    exact = dict(check="c", target="t", where="w", levels=(0.2, 0.1), operating="op",
                 exact_level=True)
    assert Row(trials=100, rejections=(19, 10), **exact).ok
    assert not Row(trials=100, rejections=(30, 10), **exact).ok  # lower 0.226 > 0.2
    assert not Row(trials=10, rejections=(0, 0), **exact).ok  # too few trials for 0.1


def test_exact_level_rows_of_a_part_share_a_family_wise_rate() -> None:
    """The K exact-level comparisons of one part share 1 % (each bound at 1 − 0.01/K): the
    matrices part once read NO on the orthogonal row law at 28/400 at level 0.05 (95 % lower
    bound 0.0502) — a rate whose chance on correct code is ~3 % per comparison, met in about
    one run in three over the part's 12 comparisons. A threshold off by a factor 2 still reads
    NO; a plain row keeps its own rule."""
    from kernel_verify.calibration.certify import lower_bound
    from kernel_verify.calibration.report import exact_confidence, row_ok

    exact = dict(check="c", target="t", where="w", levels=(0.2, 0.1, 0.05), operating="op",
                 exact_level=True)
    part = [Row(trials=400, rejections=(66, 46, 28), **exact)] + [
        Row(trials=400, rejections=(80, 40, 20), **exact) for _ in range(3)]
    conf = exact_confidence(part)
    assert conf == 1 - 0.01 / 12
    assert lower_bound(28, 400) > 0.05 and not part[0].ok  # the per-comparison 95 % rule: NO
    assert row_ok(part[0], conf)  # the family-wise rule: ok
    doubled = Row(trials=400, rejections=(160, 80, 40), **exact)  # rate twice every level
    assert not row_ok(doubled, exact_confidence([doubled, *part[1:]]))
    plain = Row("c", "t", "w", 100, (0.2, 0.1), (3, 9), "op")
    assert row_ok(plain, conf) == plain.ok is False


def test_the_ladder_keeps_room_for_rejections() -> None:
    assert calibration.rungs(100) == (0.2, 0.1)
    assert calibration.rungs(200) == (0.2, 0.1, 0.05)
    assert calibration.rungs(4) == (0.2,)  # a smoke run still runs the loosest level


def _fixed_unit(reject: bool) -> Unit:
    return Unit("fixed", "always-rejects" if reject else "never-rejects",
                _always_rejects if reject else _never_rejects)


def _never_rejects(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    return [calibration.ladder_row("fixed: never rejects", name, "none", n,
                                   dict.fromkeys(calibration.rungs(n), 0))]


def _always_rejects(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    return [calibration.ladder_row("fixed: always rejects", name, "none", n,
                                   dict.fromkeys(calibration.rungs(n), n))]


@pytest.mark.parametrize(("reject", "code"), [(False, 0), (True, 1)])
def test_calibration_fails_when_a_check_fails(tmp_path, monkeypatch, capsys, reject,
                                              code) -> None:
    """A check whose verdict is determined: never rejecting over 100 trials is ok at 0.2 and
    0.1 (exit 0); always rejecting is not ok (exit 1) and named in the report."""
    monkeypatch.setenv("KV_REPORTS", str(tmp_path))
    monkeypatch.setattr(calibration.run, "units", lambda parts: [_fixed_unit(reject)])
    got = calibration.calibrate(100, None, jobs=1)
    text = (tmp_path / "calibration.md").read_text(encoding="utf-8")
    capsys.readouterr()
    assert got == code
    assert ("**1/1 ok**" in text) == (not reject)
    assert "at commit " in text and "| 0.2 / 0.1 |" in text
    if reject:
        assert "not ok: fixed: always rejects" in text


# ----------------------------------------------------------------------- the real units, small
def _allowed(trials: int, level: float) -> int:
    """The largest count the smoke assertion accepts at ``level``: the smallest c with
    ``P(Bin(trials, level) > c) ≤ ROW_DELTA`` (a check whose false-alarm rate is ≤ level
    exceeds it with probability ≤ ROW_DELTA; with ≤ 200 rows a run fails falsely with
    probability ≤ 2e-5). At these trial counts c is often ``trials`` (no power): the assertion
    catches a check that rejects in every trial at a level where that is improbable."""
    return int(sps.binom.isf(ROW_DELTA, trials, level))


def _smoke_units() -> list:
    """Every unit, except that the units of one function of the feature-map parts (the same
    checks on another registry map) run on one map per formula and per row construction: the
    maps' units differ only in the formula and the frequency matrix whose truth they read."""
    from kernel_verify.impls.registry import get

    seen: set[tuple] = set()
    out = []
    for u in calibration.units():
        if u.part in ("estimators", "reference_means"):
            t = get(u.target)
            keys = {(u.fn, "formula", t.formula), (u.fn, "matrix", t.matrix)}
            if keys <= seen:
                continue
            seen |= keys
        out.append(pytest.param(u, id=u.id))
    return out


@pytest.mark.parametrize("unit", _smoke_units())
def test_unit_runs_its_checks_on_correct_code(unit: Unit) -> None:
    n = 1 if unit.fn is calibration.orthogonal_rows else SMOKE_TRIALS
    rows = unit.run(n, 20261123, SMOKE_ASSUMPTION_TRIALS)
    assert rows, f"{unit.id}: no rows"
    for r in rows:
        assert r.target and r.where and r.operating and 1 <= r.trials
        assert len(r.levels) == len(r.rejections)
        assert all(0 <= k <= r.trials for k in r.rejections)
        if r.levels and r.trials < min(map(calibration.trials_to_certify, r.levels)):
            # determined: too few trials to certify its level
            assert not r.ok, f"{unit.id}: {r.check} ok with {r.trials} trials"
        for k, level in zip(r.rejections, r.levels, strict=True):
            assert k <= _allowed(r.trials, level), (
                f"{unit.id}: {r.check} ({r.where}) rejected {k}/{r.trials} at level {level:g} on "
                "correct code")


def test_every_calibrated_prefix_is_produced_by_a_unit() -> None:
    """Each CALIBRATED prefix names checks a unit runs: the row names written in the modules of
    the unit functions (the smoke cases above run every unit)."""
    import inspect

    names = {"random_matrices: "}  # the row-law labels are the checks' own
    for module in {inspect.getmodule(u.fn) for u in calibration.units()}:
        names |= set(re.findall(r'"((?:random_matrices|feature_\w+|attention|blackbox_maps|'
                                r'gradients)[^"]*)"', inspect.getsource(module)))
    for prop, prefix in calibration.CALIBRATED.items():
        assert any(name.startswith(prefix) or prefix.startswith(name) for name in names), (
            f"{prop}: no calibration unit produces rows named {prefix!r}")


def test_statistical_checks_in_properties_carry_their_seed() -> None:
    """Every statistical check the properties call is given the seed, which its failure message
    prints next to the reproduction line (verify.stats.StatResult.explain)."""
    import ast

    calls = []
    for path in PROPERTIES.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
                    "mean_test", "variance_test", "row_law_checks"):
                calls.append((path.name, node.lineno, {k.arg for k in node.keywords}))
    assert calls
    missing = [(f, line) for f, line, kws in calls if "seed" not in kws]
    assert not missing, f"statistical checks without seed=: {missing}"


def test_a_failing_statistical_check_prints_its_seed() -> None:
    import numpy as np

    from kernel_verify.verify.stats import mean_test

    samples = np.random.default_rng(5).uniform(0, 1, 400)
    result = mean_test(samples, 0.9, alpha=1e-3, bounds=(0.0, 1.0), seed=424242,
                       repro="pytest -k example")
    assert not result.ok
    with pytest.raises(AssertionError, match="seed: 424242"):
        result.check()


def test_a_partial_run_replaces_only_its_sections(tmp_path, monkeypatch, capsys) -> None:
    """``--part P`` rewrites the section of P and keeps every other part's section (with its own
    stamp) and the total over all sections."""
    monkeypatch.setenv("KV_REPORTS", str(tmp_path))
    kept = calibration.section("matrices", "`old run` at commit abc",
                               [calibration.ladder_row("fixed: old", "t", "none", 100,
                                                       {0.2: 0, 0.1: 0})])
    (tmp_path / "calibration.md").write_text(
        calibration.merge_report("", {"matrices": kept, "gradients": "## Part `gradients`\n\nold"},
                                 2995), encoding="utf-8")
    monkeypatch.setattr(calibration.run, "units",
                        lambda parts: [Unit("gradients", "never-rejects", _never_rejects)])
    got = calibration.calibrate(100, ["gradients"], jobs=1)
    text = (tmp_path / "calibration.md").read_text(encoding="utf-8")
    capsys.readouterr()
    assert got == 0
    assert kept in text and "`old run` at commit abc" in text
    assert text.count("## Part `gradients`") == 1 and "\nold\n" not in text
    assert "fixed: never rejects" in text and "--part gradients` at commit " in text
    assert "**2/2 ok** over the parts matrices, gradients" in text
    assert text.index("## Part `matrices`") < text.index("## Part `gradients`")


# ------------------------------------------------ the assumption rows cover the cells they name
def _cells(params) -> set[tuple[str, str]]:
    """``(target, backend id)`` of the pytest params ``(target, backend)`` of a property, the
    unavailable backends included (marked skip there)."""
    return {(p.values[0].name, p.values[1].id) for p in params if p.values[0] is not None
            and p.values[1] is not None}


def test_convergence_rows_cover_every_cell_of_the_property() -> None:
    """Part ``convergence`` runs every (target, backend, dtype) of
    ``test_error_to_softmax_attention_falls_as_m_grows`` that is available here, in the one mode
    the property runs, and lists every other one as not run."""
    from kernel_verify.calibration.run import not_run_here
    from kernel_verify.properties.attention_cases import cases, modes

    want = _cells(cases("approximates_softmax"))
    here, gone = set(), set()
    for u in calibration.units(["convergence"]):
        target = calibration._builtin(u.target)
        for avail, into in ((True, here), (False, gone)):
            for b, causal in calibration._attention_places(target, available=avail):
                assert causal == modes(target)[0]
                into.add((u.target, b.id))
    assert here | gone == want and not here & gone
    assert all(b.startswith("torch:cuda") for _, b in gone)  # only what this machine lacks
    listed = not_run_here(["convergence"]).get("convergence", [])
    assert len(listed) == len(gone)


def test_gradcheck_rows_cover_the_property_targets() -> None:
    """Part ``gradients``: the finite-difference rows run on exactly the maps and attention
    targets the two gradcheck properties are parametrised with (torch CPU only: the properties
    build CPU tensors)."""
    from kernel_verify.calibration.gradients import fd_attention_targets, fd_targets
    from kernel_verify.properties import test_gradients as prop

    assert fd_targets() == [p.values[0].name for p in prop.MAPS]
    assert fd_attention_targets() == [p.values[0].name for p in prop._attn_params()]


def test_low_precision_rows_cover_the_property_cells() -> None:
    """Part ``gradient_assumptions``: one row per (target, dtype) where
    ``test_low_precision_gradients_near_float64`` asserts (not skipped), every mode."""
    from kernel_verify.calibration.gradients import low_precision_cells, low_precision_targets
    from kernel_verify.properties import test_gradients as prop
    from kernel_verify.properties.gradient_checks import low_precision_backend

    asserted = set()
    for p in prop._attn_params():
        t = p.values[0]
        for dtype in prop.LOW:
            if (t.accepts("torch", dtype) and t.accepts("torch", "float64")
                    and low_precision_backend(t, dtype)[1] is None):
                asserted.add((t.name, dtype))
    assert asserted == {(n, d) for n in low_precision_targets() for d in low_precision_cells(n)}


def test_state_gradient_rows_cover_the_property_cells() -> None:
    """Part ``gradient_assumptions``: the forms' state-gradient rows run every (target, backend)
    of ``test_gradients_flow_through_the_state`` that does not skip (differentiable, torch
    float64), here, and list the others as not run."""
    from kernel_verify.calibration.gradients import _state_places, state_gradient_targets
    from kernel_verify.calibration.run import not_run_here
    from kernel_verify.properties import test_attention_forms as prop

    want = {(t, b) for t, b in _cells(prop.form_cases(any_of=prop.STATEFUL))
            if b.startswith("torch") and b.endswith("-float64")
            and calibration._builtin(t).has("differentiable")}
    here = {(n, b.id) for n in state_gradient_targets()
            for b in _state_places(calibration._builtin(n))}
    gone = {(n, b.id) for n in state_gradient_targets()
            for b in _state_places(calibration._builtin(n), available=False)}
    assert here | gone == want and here
    assert len(not_run_here(["gradient_assumptions"]).get("gradient_assumptions", [])) == len(gone)


def test_random_shape_draws_the_strategy_support() -> None:
    """The calibration's i.i.d. layouts stay inside the support of ``form_shapes`` (the same
    constraints), and reach its corners (T = 1, C = T, C ∤ T)."""
    import numpy as np

    from kernel_verify.properties.checks.forms import random_shape

    rng = np.random.default_rng(3)
    shapes = [random_shape(rng, max_t=6) for _ in range(2000)]
    for s in shapes:
        assert 1 <= s.t <= 7 and 1 <= s.b <= 2 and 1 <= s.h <= 3 and 1 <= s.d <= 4
        assert 1 <= s.dv <= 3 and 1 <= s.cut <= max(s.t - 1, 1) and 1 <= s.chunk <= max(s.t, 6)
    assert any(s.t == 1 for s in shapes) and any(s.chunk == s.t > 1 for s in shapes)
    assert any(s.t % s.chunk for s in shapes)


def test_not_run_cells_are_written_in_the_section() -> None:
    text = calibration.section("convergence", "stamp", [], ["`a` on torch:cuda float64"])
    assert "Not run here" in text and "`a` on torch:cuda float64" in text
    assert calibration._verdicts(text) == (0, 0)
