"""The report's system pages (gated, hybrid, model), its intervals and undecidable points, and
the mutant heatmap and calibration plot (kernel_verify/report/system_pages.py, summaries.py,
mappage.py)."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from kernel_verify.impls.systems import get_system
from kernel_verify.properties.checks.recurrent import full_form
from kernel_verify.properties.claim_tests import targets_of
from kernel_verify.report import mappage, summaries
from kernel_verify.report import system_pages as sp
from kernel_verify.report.pages import to_html, to_markdown
from kernel_verify.report.systems import systems_page
from kernel_verify.report.verdicts import PropertyVerdict
from kernel_verify.verify.backends import get_backend

PNG = b"\x89PNG\r\n\x1a\n"


def _is_png(path: Path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == PNG


# ------------------------------------------------------------------ gated, hybrid, model pages
def test_ratio_of_error_to_bound():
    """0/0 is 0 (exact in float64), an error over a zero bound is inf, else the worst ratio."""
    assert sp.ratio(np.array([0.0, 1.0]), np.array([0.0, 4.0])) == 0.25
    assert sp.ratio(np.array([1e-20]), np.array([0.0])) == np.inf
    assert sp.ratio(np.array([np.nan]), np.array([1.0])) == np.inf


def test_gated_page_has_verdicts_numbers_and_a_figure(tmp_path):
    system = get_system("gated_scalar")
    data = sp.compute_system(system)
    assert data["kind"] == "gated" and data["verdict"] == "pass", data["reasons"]
    rows = data["rows"]
    backends = {r["backend"] for r in rows}
    assert {"numpy-float64", "numpy-float32", "torch:cpu-float64"} <= backends
    forms = {r["form"] for r in rows if r["backend"] == "numpy-float64"}
    assert {"parallel", "stateful", "chunked (C = 3)"} <= forms and any(
        f.startswith("step") for f in forms)
    for r in rows:  # every number is an error below its derived bound, and the ratio says so
        assert 0 <= r["max_error"] <= r["bound_at_max"] <= r["max_bound"]
        assert r["ratio"] <= 1.0 and r["verdict"] == "pass"
    f64 = [r for r in rows if r["backend"] == "numpy-float64"]
    f32 = [r for r in rows if r["backend"] == "numpy-float32"]
    assert max(r["max_bound"] for r in f64) < min(r["max_bound"] for r in f32)  # u₆₄ ≪ u₃₂
    page = sp.render_system(system, data, tmp_path, "figs")
    md = to_markdown(page)
    assert "verdict **pass**" in md and "worst error / bound" in md
    assert "test_gated_forms_meet_the_exact_recurrence" in md
    assert _is_png(tmp_path / "system_gated_scalar.png")
    assert "figs/system_gated_scalar.png" in to_html(page)


def test_a_wrong_gated_form_fails_its_row():
    """A parallel form 1 % off: its rows FAIL with the ratio over 1, the other forms pass."""
    target = targets_of("gated_scalar")[0]
    good = target.parallel

    def off(*args, **kw):
        out, state = good(*args, **kw)
        return out * 1.01, state

    rows = sp.gated_rows(replace(target, parallel=off), [get_backend("numpy-float64")])
    by_form = {r["form"]: r for r in rows}
    assert by_form["parallel"]["verdict"] == "FAIL" and by_form["parallel"]["ratio"] > 1
    assert by_form["stateful"]["verdict"] == "pass"
    data = {"rows": rows, "checks": []}
    verdict, reasons = sp.system_verdict(data)
    assert verdict == "FAIL" and "parallel" in reasons[0]


def test_delta_rule_transition_gets_a_page():
    """A transition other than the decay (the delta rule) is measured the same way."""
    data = sp.compute_system(get_system("delta_rule"))
    assert data["verdict"] == "pass", data["reasons"]
    assert {r["backend"] for r in data["rows"]} >= {"numpy-float64", "torch:cpu-float32"}
    assert all(r["max_error"] <= r["bound_at_max"] for r in data["rows"])


def test_hybrid_page_covers_the_window_and_both_limits(tmp_path):
    system = get_system("hybrid_attention")
    data = sp.compute_system(system)
    assert data["kind"] == "hybrid" and data["verdict"] == "pass", data["reasons"]
    forms = {r["form"] for r in data["rows"]}
    assert {label for label, _, _ in sp.HYBRID_WINDOWS} <= forms
    assert {r["target"] for r in data["rows"]} == {t.name for t in targets_of("hybrid_attention")}
    assert all(r["max_error"] <= r["bound_at_max"] for r in data["rows"])
    md = to_markdown(sp.render_system(system, data, tmp_path, "figs"))
    assert "w = 0 (linear attention)" in md and "softmax attention" in md
    assert _is_png(tmp_path / "system_hybrid_attention.png")


def test_model_page_shows_each_check_its_power_and_the_decode_error(tmp_path):
    system = get_system("tiny_lm")
    data = sp.compute_system(system)
    assert data["kind"] == "model", data
    checks = {(c["backend"], c["check"]): c for c in data["checks"]}
    decode = checks[("torch:cpu-float32", "decode")]
    assert decode["verdict"] == "pass" and decode["caught"] is True
    # every check of MODEL_CHECKS appears once per dtype path
    assert {c for _, c in checks} == {name for name, *_ in sp.MODEL_CHECKS}
    assert data["rows"] and all(r["max_error"] <= r["bound_at_max"] for r in data["rows"])
    md = to_markdown(sp.render_system(system, data, tmp_path, "figs"))
    assert "Decode error against its tolerance" in md and "cache dropped" in md
    assert _is_png(tmp_path / "system_tiny_lm.png")


def test_systems_page_links_the_computed_pages():
    data = {"gated_scalar": {"name": "gated_scalar", "verdict": "FAIL"}}
    md = to_markdown(systems_page(data))
    assert "(systems/gated_scalar.md) · verdict **FAIL**" in md
    assert "systems/delta_rule.md" not in md  # not computed: no link


# ------------------------------------------------------------ the same truth as the properties
@pytest.mark.parametrize(("system", "backend"), [
    ("gated_scalar", "numpy-float64"), ("gated_scalar", "torch:cpu-float16"),
    ("gated_key_dim", "torch:cpu-float32"), ("gated_fixed_decay", "numpy-float64"),
    ("gated_scalar_normalised", "torch:cpu-float64"), ("delta_rule", "numpy-float32"),
    ("gated_delta_rule", "torch:cpu-bfloat16"), ("comba", "numpy-float64"),
    ("rwkv7", "torch:cpu-float64"), ("kimi_delta_attention", "numpy-float64")])
def test_gated_truth_and_forms_equal_the_propertys_own(system, backend):
    """On the report's inputs, system_checks' exact values and bound equal the gated property
    file's ``exact()`` bit for bit, and its form calls equal the property's ``run()`` /
    ``run_steps()``: the report cannot drift from the property."""
    from kernel_verify.properties import test_gated_forms as gf
    from kernel_verify.properties.checks.forms import Shape
    from kernel_verify.report import system_checks as sc

    target, b = targets_of(system)[0], get_backend(backend)
    for seed, regime in sp.GATED_DRAWS:
        shape = Shape(1, 2, 6, 3, 3 if target.dv_equals_d else 2, 3, 3, seed)
        x, g = sc.gated_inputs(target, b, shape, regime)
        ref, bound = sc.gated_exact(target, b, x, g)
        ref_p, _, bound_p, _ = gf.exact(target, b, x, g)
        assert np.array_equal(ref, ref_p) and np.array_equal(bound, bound_p)
        form = full_form(target)
        got = sc.gated_run(target, b, x, g, form=form, seed=seed, chunk=3)
        assert np.array_equal(got, gf.run(target, b, x, g, form=form, seed=seed, chunk=3)[0])
        if target.step is not None:
            assert np.array_equal(sc.gated_steps(target, b, x, g, seed=seed),
                                  gf.run_steps(target, b, x, g, seed=seed)[0])


def test_gated_inputs_draw_a_strong_run_and_refuse_what_they_cannot_draw():
    from kernel_verify.properties.checks.forms import Shape
    from kernel_verify.report import system_checks as sc

    target, b = targets_of("gated_scalar")[0], get_backend("numpy-float64")
    shape = Shape(1, 2, 6, 3, 2, 3, 3, 2)
    _, g = sc.gated_inputs(target, b, shape, "strong_run")
    at_min = (g.g == float(target.min_log_gate)).sum(axis=-1)
    assert np.all(at_min >= 3), at_min  # ≥ 3 tokens at the strongest decay in every head
    _, g = sc.gated_inputs(target, b, shape, "mixed")
    assert np.all(g.g <= 0) and np.all(g.g >= float(target.min_log_gate))
    with pytest.raises(ValueError, match="regime"):
        sc.gated_inputs(target, b, shape, "near_one")


@pytest.mark.parametrize("backend", ["numpy-float32", "torch:cpu-float16", "torch:cpu-float64"])
def test_hybrid_truth_equals_the_propertys_own(backend):
    from kernel_verify.properties import test_hybrid_attention as ha
    from kernel_verify.report import system_checks as sc

    b = get_backend(backend)
    target = next(t for t in targets_of("hybrid_attention") if t.accepts(b.library, b.dtype))
    for _, window, reference in sp.HYBRID_WINDOWS:
        _, seen = sc.hybrid_inputs(b, 1, sp.HYBRID_T)
        _, seen_p = ha.draw_inputs(b, 1, sp.HYBRID_T)
        assert all(np.array_equal(a, c) for a, c in zip(seen, seen_p, strict=True))
        ref, bound = sc.hybrid_exact(target, b, seen, window, reference)
        ref_p, bound_p = ha.exact(target, b, seen, window, reference)
        assert np.array_equal(ref, ref_p) and np.array_equal(bound, bound_p)
    with pytest.raises(ValueError, match="reference"):
        sc.hybrid_exact(target, b, seen, 3, "exact")


# ------------------------------------------------------------------ intervals, undecidable
def _point(resolution: str = "") -> dict:
    return {"m": 16, "mean": 1.0, "mean_lo": 0.9, "mean_hi": 1.1, "variance": 0.5,
            "var_lo": 0.4, "var_hi": 0.6, "theory_mean": 1.0, "theory_variance": 0.5,
            "theory_variance_se": None, "mse": 0.5, "theory_mse": 0.5, "test": "t",
            "test_ok": True, "flag": "", "band": "bootstrap", "resolution": resolution}


UNDECIDABLE = ("m = 16: first measurement flagged (x); not decidable at these draws (heavy tail; "
               "the theory point is not tested): a band with guaranteed coverage would need about "
               "3e+16 draws (its half-width falls as 1/√n ...)")


def _map_data(points: list[dict]) -> dict:
    return {"accuracy_ok": True, "gradients": [],
            "properties": [asdict(PropertyVerdict("test_unbiased_on_grid", "pass", "", ""))],
            "measurement": {"points": points, "geometry": []}}


def test_an_undecidable_point_is_not_under_pass():
    assert mappage._verdict(_map_data([_point()]), True) == ("pass", [])
    verdict, reasons = mappage._verdict(_map_data([_point(UNDECIDABLE)]), True)
    assert verdict == "not tested" and "not decidable" in reasons[0] and "m = 16" in reasons[0]
    assert mappage.band_cell(_point(UNDECIDABLE)) == "**not decidable** (needs about 3e+16 draws)"
    assert mappage.band_cell(_point()) == "inside band"
    assert mappage.band_cell(_point("theory confirmed by a second measurement")) == (
        "resolved (below)")


def test_undecidable_points_are_listed_apart_from_resolved_ones():
    page = mappage.Page("t")
    mappage._resolutions(page, [_point(UNDECIDABLE), _point("m = 8: theory confirmed: ...")])
    md = to_markdown(page)
    head, _, tail = md.partition("Flags resolved by a second measurement")
    assert "**not decidable** at these draws" in head and UNDECIDABLE in head
    assert "theory confirmed" in tail and UNDECIDABLE not in tail


def test_mse_interval_spans_both_intervals():
    """MSE = (mean − k)² + Var over [mean_lo, mean_hi] × [var_lo, var_hi]: the squared bias is
    0 where the mean's interval holds k, else its nearer end squared."""
    p = {**_point(), "mean_lo": 0.0, "mean_hi": 3.0, "var_lo": 0.25, "var_hi": 1.0}
    assert mappage.mse_interval(p, 1.0) == (0.25, 2.0 ** 2 + 1.0)
    p = {**p, "mean_lo": 1.5, "mean_hi": 2.0}
    assert mappage.mse_interval(p, 1.0) == (0.5 ** 2 + 0.25, 1.0 ** 2 + 1.0)


# ------------------------------------------------------------------ heatmap, calibration plot
MUTANTS = {"profile": "ci", "commit": "abc", "controls_failed": 0, "mutants": [
    {"name": "m_b", "family": "attention", "intended_killers": ["forms::test_a"],
     "failures": [{"property": "forms::test_a", "kind": "property"},
                  {"property": "grads::test_g", "kind": "property"}],
     "verdicts": [{"family": "forms", "outcome": "fail"}, {"family": "grads", "outcome": "fail"},
                  {"family": "psd", "outcome": "pass"}]},
    {"name": "m_a", "family": "feature_map", "intended_killers": ["maps::test_m"],
     "failures": [], "verdicts": [{"family": "psd", "outcome": "pass"}]},
]}


def test_mutant_matrix_from_fixture():
    names, families, matrix, groups = summaries.mutant_matrix(MUTANTS)
    assert names == ["m_b", "m_a"] and groups == ["attention", "feature_map"]
    assert families == ["forms", "grads", "psd"]
    assert matrix.tolist() == [[summaries.INTENDED, summaries.KILLED, summaries.PASSED],
                               [summaries.NOT_RUN, summaries.NOT_RUN, summaries.PASSED]]
    with pytest.raises(ValueError, match="data"):
        summaries.mutant_matrix({"no": "mutants"})


def test_mutant_heatmap_is_written(tmp_path):
    import json

    src = tmp_path / "mutants.json"
    src.write_text(json.dumps(MUTANTS))
    md = to_markdown(summaries.mutants_page(tmp_path, "figures", source=src))
    assert "2 mutants, 1 killed by at least one property, 1 by an intended killer" in md
    assert "figures/mutants_heatmap.png" in md
    assert _is_png(tmp_path / "mutants_heatmap.png")
    missing = to_markdown(summaries.mutants_page(tmp_path, "f", source=tmp_path / "none.json"))
    assert "**not available**" in missing


CALIBRATION = """# Calibration

## Part `matrices`

| check | target | backend, dtype, mode | trials | level(s) | rejections | measured rate | ok |
|---|---|---|---|---|---|---|---|
| sign symmetry | `matrix:iid` | numpy float64 | 100 | 0.2 / 0.1 | 3 / 2 | 0.030 / 0.020 | yes |
| a \\| b | `x` | numpy | 50 | 0.001 | 0 | 0.000 | yes |
| measured | `y` | numpy | 100 | measured | 4 | 0.04 | yes |

## Part `other`

| check | target | trials | level(s) | rejections |
|---|---|---|---|---|
| too many | `z` | 10 | 0.1 | 9 |
"""


def test_calibration_points_from_fixture():
    pts = summaries.calibration_points(CALIBRATION)
    got = [(p["part"], p["check"], p["level"], p["rejections"], p["trials"]) for p in pts]
    assert got == [("matrices", "sign symmetry", 0.2, 3, 100),
                   ("matrices", "sign symmetry", 0.1, 2, 100),
                   ("matrices", "a | b", 0.001, 0, 50), ("other", "too many", 0.1, 9, 10)]
    for p in pts:
        assert p["rate"] == p["rejections"] / p["trials"] and p["lo"] <= p["rate"] <= p["hi"]
    assert pts[2]["lo"] == 0.0 and pts[0]["lo"] > 0.0
    # 9 of 10 at level 0.1: the interval lies wholly above the level
    assert pts[3]["lo"] > 0.1
    with pytest.raises(TypeError, match="text"):
        summaries.calibration_points(None)  # type: ignore[arg-type]


def test_calibration_plot_is_written(tmp_path):
    src = tmp_path / "calibration.md"
    src.write_text(CALIBRATION)
    md = to_markdown(summaries.calibration_page(tmp_path, "figures", source=src))
    assert "4 (check, level) points of 3 rows" in md
    assert "Points whose interval lies wholly above their level: 1" in md
    assert "figures/calibration_rate_vs_level.png" in md
    assert _is_png(tmp_path / "calibration_rate_vs_level.png")
    missing = to_markdown(summaries.calibration_page(tmp_path, "f", source=tmp_path / "no.md"))
    assert "**not available**" in missing
