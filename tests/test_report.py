"""The variance report: same code path as the properties, same verdicts, a planted bias is
reported with its size, and the HTML index renders in headless Chromium with no external request.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernel_verify.impls.registry import get
from kernel_verify.mutants.catalogue import load
from kernel_verify.properties import test_feature_unbiased, unbiased_checks
from kernel_verify.properties.checks import estimates as props
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.report import measure, theory, verdicts
from kernel_verify.report.settings import QUICK, Settings
from kernel_verify.verify.backends import get_backend

ROOT = Path(__file__).resolve().parents[1]
TINY = Settings("tiny", ms=(8, 32), draws=200, boot=100, ref_draws=400, geo_draws=40,
                geo_points=3, att_ms=(8,), att_ns=(16,), att_seeds=1, krr_ms=(8,), krr_seeds=1)


def test_report_uses_the_property_suites_functions():
    """No second code path: the sampler, the mean test's variance (exact or the V₁ bound), the
    exact variance, range and kernel are the properties'."""
    assert measure.estimates is props.estimates
    assert measure.mean_test_variance is props.mean_test_variance
    assert theory.exact_variance is props.exact_variance
    assert measure.range_bound is props.range_bound
    assert theory.kernel_value is unbiased_checks.kernel_value
    # ... and the property tests call the same library functions as the report
    assert test_feature_unbiased.check_mean is unbiased_checks.check_mean
    assert verdicts.unbiased_on_grid is unbiased_checks.unbiased_on_grid
    assert test_feature_unbiased.unbiased_on_grid is unbiased_checks.unbiased_on_grid
    target = get("rff_pairs[orthogonal]")
    meas = measure.measure_target(target, TINY, alpha=1e-3, version="test", geometry=False)
    x, y = np.array(meas.x), np.array(meas.y)
    for i, p in enumerate(meas.points):
        samples = props.estimates(target, x, y, p.m, meas.seed + i, TINY.draws)
        assert p.mean == float(samples.mean())
        assert p.variance == float(samples.var(ddof=1))
        assert p.theory_variance == props.exact_variance(target, x, y, p.m)
    assert meas.kernel == unbiased_checks.kernel_value(target, "gaussian", x, y)


NAMES = ["rff_pairs[iid]", "rff_pairs[orthogonal_fixed_norm]",
         "softmax_positive[orthogonal_fixed_norm]"]
_WORDS = {"PASSED": "pass", "FAILED": "FAIL", "SKIPPED": "not tested"}


def _property_nodes(name: str) -> list[str]:
    """The pytest node ids of the deterministic properties ``verdicts.property_verdicts`` runs
    for the target ``name``."""
    target = get(name)
    tests = ["test_unbiased_on_grid"] if target.has("unbiased") else []
    if target.has("biased") and target.mean_kernel:
        tests.append("test_bias_is_visible_where_theory_says_it_is_large")
    return [f"properties/{verdicts.FILE}::{test}[{name}]" for test in tests]


@pytest.fixture(scope="module")
def pytest_outcomes() -> tuple[dict[str, str], int, str]:
    """What pytest says about the property nodes of every target in :data:`NAMES`, from one
    pytest subprocess (each parametrisation below checks its own node): node -> outcome, and
    the number of statistical assertions that run collected (its α per assertion)."""
    nodes = [node for name in NAMES for node in _property_nodes(name)]
    res = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n",
                          "0", *nodes], capture_output=True, text=True, cwd=ROOT, check=False)
    output = res.stdout[-2000:] + res.stderr[-2000:]
    found = {}
    for node in nodes:
        hit = re.search(rf"^{re.escape(node)} ({'|'.join(_WORDS)})\b", res.stdout, flags=re.M)
        if hit:
            found[node] = _WORDS[hit[1]]
    count = re.search(r"statistical assertions collected: (\d+)", res.stdout)
    assert count, output
    return found, int(count[1]), output


@pytest.mark.parametrize("name", NAMES)
def test_report_verdicts_match_the_property_suite(name, pytest_outcomes):
    """The report's property verdicts (same test functions, same seeds) equal what pytest says."""
    from kernel_verify.properties.alpha import assertion_count, per_assertion

    outcomes, collected, output = pytest_outcomes
    target = get(name)
    ours = per_assertion()
    with assertion_count(collected):  # the α pytest ran them at; this run's α restored after
        (mine,) = verdicts.property_verdicts(target)
    assert per_assertion() == ours  # the statistical tests after this one keep their α
    path, _, rest = mine.command.split("'")[1].partition("::")  # an absolute path: runs anywhere
    node = f"{Path(path).relative_to(ROOT)}::{rest}"
    assert node in outcomes, output
    assert mine.outcome == outcomes[node]


def test_planted_bias_is_reported_with_its_size():
    """Mutant ``softmax_hyperbolic_missing_negative_half`` estimates SM/2: bias −50 %."""
    (target,) = [t for t in load("softmax_hyperbolic_missing_negative_half")
                 if isinstance(t, FeatureMapTarget)]
    meas = measure.measure_target(target, TINY, alpha=1e-3, version="test", geometry=False)
    assert all(p.test_ok is False for p in meas.points)
    for p in meas.points:
        lo, hi = p.mean_lo / meas.kernel - 1, p.mean_hi / meas.kernel - 1
        assert lo <= -0.5 <= hi or abs(p.mean / meas.kernel - 1 + 0.5) < 0.05
    v, reasons = verdicts.overall(True, [], [p.test_ok for p in meas.points], [], True)
    assert v == "FAIL" and "mean test rejected" in reasons[0]


def test_fixed_norm_exponential_map_mean_is_tested_on_its_page():
    """The page's mean test of a biased map whose construction has a row law (fixed-norm SM⁺:
    no norm bound of the formula, no exact variance) uses the row law's range and V₁, as
    ``check_mean`` does, instead of "not tested"; the correct built-in passes it."""
    meas = measure.measure_target(get("softmax_positive[orthogonal_fixed_norm]"), TINY,
                                  alpha=1e-3, version="test", geometry=False)
    assert meas.points and all(p.test_ok is True for p in meas.points)
    assert all("row law" in p.test for p in meas.points)


def test_unbiased_map_is_not_reported_biased():
    target = get("softmax_positive[iid]")
    meas = measure.measure_target(target, TINY, alpha=1e-3, version="test", geometry=False)
    assert all(p.test_ok for p in meas.points)


def test_no_verdict_without_a_test():
    """SORF softmax maps have no exact mean: 'not tested', never 'pass'."""
    v, why = verdicts.overall(True, [], [None, None], [], True)
    assert v == "not tested" and why


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-default-apps", "--disable-client-side-phishing-detection",
         "--disable-features=Translate,OptimizationHints,MediaRouter,SpellCheck"]
#: Chromium's own services (update, time, account checks) that no page asks for.
BROWSER_SERVICES = ("google.com", "googleapis.com", "gvt1.com", "gstatic.com")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium): "
                    "the headless rendering test needs it")
def test_html_index_renders_in_headless_chromium(tmp_path, monkeypatch):
    monkeypatch.setenv("KV_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "report"
    from kernel_verify.report import main, settings

    monkeypatch.setattr(settings, "QUICK", TINY)
    monkeypatch.setattr(main, "QUICK", TINY)
    assert main.run_report(quick=True, out=str(out), maps=["softmax_trig[iid]", "relu"],
                           no_plots=False) == 0
    index = out / "index.html"
    text = index.read_text()
    assert not re.search(r'(src|href)="(https?:)?//', text), "external reference in the index"
    assert "](" not in text, "a Markdown link was not rendered"
    assert 'href="maps/softmax_trig__iid.html"' in text  # impls.names.identifier
    for page in (out / "maps").glob("*.html"):
        assert not re.search(r'(src|href)="(https?:)?//', page.read_text())
    shot, net = tmp_path / "shot.png", tmp_path / "net.json"
    subprocess.run([CHROMIUM, *FLAGS, f"--screenshot={shot}", "--window-size=1200,900",
                    f"--log-net-log={net}", index.as_uri()], capture_output=True, timeout=120,
                   check=False)
    from PIL import Image

    img = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert img.shape == (900, 1200)
    assert img.std() > 10, "blank screenshot"
    assert (img < 100).mean() > 0.005, "no text rendered"
    urls = set(re.findall(r'"url":"([^"]+)"', net.read_text())) if net.exists() else set()
    page_requests = {u for u in urls if u.startswith(("http:", "https:", "ws:"))
                     and not any(s in u.split("/")[2] for s in BROWSER_SERVICES)}
    assert not page_requests, page_requests
    data = json.loads((out / "report.json").read_text())
    assert {m["name"] for m in data["maps"]} == {"softmax_trig[iid]", "relu"}
    assert data["header"]["command"].startswith("kernel-verify")


def test_quick_and_full_reports_go_to_separate_untracked_folders():
    from kernel_verify.cli import build_parser
    from kernel_verify.report.main import _out_dir

    quick_args = build_parser().parse_args(["report", "--quick"])
    full_args = build_parser().parse_args(["report"])
    quick = _out_dir(quick_args.out, quick_args.quick)
    full = _out_dir(full_args.out, full_args.quick)
    assert quick != full and quick.parts[0] == full.parts[0] == "build"
    assert QUICK.draws < 1000


def test_rerun_hits_the_cache_and_a_code_change_misses(tmp_path, monkeypatch):
    monkeypatch.setenv("KV_CACHE_DIR", str(tmp_path))
    from kernel_verify.report import mappage

    first = mappage.compute(get("relu"), TINY, 1e-3, "v1")
    again = mappage.compute(get("relu"), TINY, 1e-3, "v1")
    other = mappage.compute(get("relu"), TINY, 1e-3, "v2")
    assert (first["cached"], again["cached"], other["cached"]) == (False, True, False)
    assert again["verdict"] == first["verdict"] == "pass"


def test_cache_key_covers_the_reports_measuring_code():
    """The cache's code version hashes the report's own measuring modules (a change to the
    gradient or variance measurement recomputes), not its presentation modules."""
    from kernel_verify.report.settings import source_files

    names = {str(p.relative_to(ROOT)) for p in source_files()}
    for module in ("gradients", "measure", "accuracy", "mappage", "theory"):
        assert f"kernel_verify/report/{module}.py" in names
    assert "properties/gradient_checks.py" in names
    assert "kernel_verify/report/figures.py" not in names


# ------------------------------------------------------------------------------------ gradients
def _grad_row(rows, backend: str, dtype: str):
    (row,) = [r for r in rows if r.backend == backend and r.dtype == dtype]
    return row


def test_gradient_section_uses_the_property_checks():
    """The gradient table's numbers are the property's check functions on the report's inputs:
    the same functions (``properties/gradient_checks.py``) and, re-run here, the same ratios."""
    from kernel_verify.properties import gradient_checks, test_gradients
    from kernel_verify.report import gradients as grad

    assert grad.feature_vjp_check is gradient_checks.feature_vjp_check
    assert grad.kernel_gradient_check is gradient_checks.kernel_gradient_check
    assert test_gradients.feature_vjp_check is gradient_checks.feature_vjp_check
    assert test_gradients.kernel_gradient_check is gradient_checks.kernel_gradient_check
    target = get("softmax_positive[iid]")
    rows = grad.gradient_rows(target)
    entry, _ = gradient_checks.rule_entry(target)
    for dtype in ("float64", "float32", "bfloat16"):
        row = _grad_row(rows, "torch:cpu", dtype)
        phi, kern = [], []
        for seed in range(grad.SEEDS):
            params = gradient_checks.draw(target, seed, grad.D, grad.M)
            b = get_backend(f"torch:cpu-{dtype}")
            x, y = grad._inputs(seed, b)
            phi.append(gradient_checks.feature_vjp_check(
                target, entry, b, x, params,
                np.random.default_rng(20_000 + seed)).ratio)
            if dtype in grad.KERNEL_DTYPES:
                kern.append(gradient_checks.kernel_gradient_check(
                    target, entry, b, x, y, params).ratio)
        assert row.phi_ratio == max(phi)
        assert row.kernel_ratio == (max(kern) if kern else None)
        assert row.status == "pass" and 0 < row.phi_ratio <= 1
    assert _grad_row(rows, "numpy", "float64").status == grad.NO_AUTOGRAD
    cuda = _grad_row(rows, "torch:cuda", "float32")
    import torch

    if not torch.cuda.is_available():
        assert cuda.status.startswith("not run") and "no GPU" in cuda.status


def _mutant_white(name: str) -> FeatureMapTarget:
    """The white-box feature-map target of a gradient mutant, or of ``control_<name>`` (the
    correct custom backward of ``kernel_verify/mutants/gradients.py``)."""
    from kernel_verify.mutants import gradients as gm

    targets = (gm.GRADIENT_CONTROLS[name.removeprefix("control_")]()
               if name.startswith("control_") else load(name))
    (target,) = [t for t in targets if isinstance(t, FeatureMapTarget) and t.white_box]
    return target


def test_wrong_gradient_shows_as_fail():
    """A hand-written backward that drops the −x of −‖x‖²/2 (mutant
    ``grad_positive_drops_minus_x``) is FAIL on every torch dtype and fails the page's verdict;
    the correct custom backward (control) passes."""
    from kernel_verify.report import gradients as grad
    from kernel_verify.report.mappage import _verdict

    bad = grad.gradient_rows(_mutant_white("grad_positive_drops_minus_x"))
    good = grad.gradient_rows(_mutant_white("control_grad_positive_custom_backward"))
    for dtype in ("float64", "float32", "float16", "bfloat16"):
        row = _grad_row(bad, "torch:cpu", dtype)
        assert row.status == "FAIL" and row.phi_ratio > 1, row
        assert _grad_row(good, "torch:cpu", dtype).status == "pass"
    from dataclasses import asdict

    data = {"accuracy_ok": True, "identity_error": 0.0, "gradients": [asdict(r) for r in bad]}
    verdict, reasons = _verdict(data, random=False)
    assert verdict == "FAIL" and "derived bound" in reasons[0]
    data["gradients"] = [asdict(r) for r in good]
    assert _verdict(data, random=False)[0] == "pass"


def test_biased_gradient_estimator_is_flagged():
    """The backward missing m^(−1/2) (mutant ``grad_positive_scale_wrong``) makes the gradient
    estimator √m = 4 times too large: ``∇ₓk`` lies below its interval on the two nonzero
    components and the page is flagged; the control (correct custom backward) is not flagged
    and passes the property's known-variance test, which rejects the mutant at 200 draws
    (Catoni's threshold ≈ 0.4σ of one draw; the median rule's 2σ passed it)."""
    from kernel_verify.report import gradients as grad

    x, y = measure.pair(8)
    bad = grad.gradient_bias(_mutant_white("grad_positive_scale_wrong"), x, y, 200, 1, 0.999,
                             200, 1e-3)
    exact, lo = np.array(bad.exact), np.array(bad.lo)
    assert lo[0] > exact[0] > 0 and lo[1] > exact[1] > 0
    (flag,) = grad.bias_flags(bad.to_json())
    assert "[0, 1]" in flag
    assert bad.test_ok is False and "Catoni" in bad.test
    good = grad.gradient_bias(_mutant_white("control_grad_positive_custom_backward"), x, y, 200,
                              1, 0.999, 200, 1e-3)
    assert good.test_ok is True and grad.bias_flags(good.to_json()) == []
    assert np.allclose(good.exact, grad.kernel_gradient(
        get("softmax_positive[iid]"), x, y))


def test_gradient_section_renders():
    """The map page shows the gradient table and the bias table with its figure."""
    from dataclasses import asdict

    from kernel_verify.report import gradients as grad
    from kernel_verify.report.mappage import _gradient_section
    from kernel_verify.report.pages import Page, to_markdown

    target = get("softmax_positive[iid]")
    x, y = measure.pair(8)
    data = {"random": True, "gradients": [asdict(r) for r in grad.gradient_rows(target)],
            "gradient_bias": grad.gradient_bias(target, x, y, 120, 3, 0.999, 100,
                                                1e-3).to_json()}
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        page = Page("t")
        _gradient_section(page, get("softmax_positive[iid]"), data, TINY, Path(tmp), "f", "s")
        assert (Path(tmp) / "s_gradient_bias.png").stat().st_size > 1000
    text = to_markdown(page)
    assert "Gradient accuracy per backend and dtype" in text
    assert "Bias of the gradient estimator" in text and "Catoni test" in text
    assert "no autograd" in text
