"""The prepared GPU run (tools/gpu): its regression rule, its two code versions in one process,
its asv results, and the budget its plan needs (docs/benchmarks.md, "The prepared GPU run")."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from tools.gpu import asv_results, plan, stats, versions

ROOT = Path(__file__).resolve().parents[1]
REHEARSAL = ROOT / "reports" / "gpu" / "rehearsal" / "run.json"
CUDA_RUN = ROOT / "reports" / "gpu" / "run.json"


def test_sign_test_p_is_the_binomial_tail():
    assert stats.sign_test_p(12, 12) == 2.0**-12
    assert stats.sign_test_p(11, 12) == 13 / 4096
    assert stats.sign_test_p(10, 12) == 79 / 4096
    assert stats.sign_test_p(0, 12) == 1.0
    assert stats.min_rounds(0.01) == 7 and stats.min_rounds(0.001) == 10
    with pytest.raises(ValueError, match="successes"):
        stats.sign_test_p(13, 12)


def test_a_consistent_slowdown_beyond_the_factor_is_a_regression():
    rng = random.Random(1)
    base = [1e-3 * (1 + 0.3 * rng.random()) for _ in range(12)]
    head = [1.5 * b * (1 + 0.05 * rng.random()) for b in base]
    cmp = stats.compare(base, head, factor=1.2, alpha=0.01)
    assert cmp.verdict == "regression" and cmp.ratio > 1.5 and cmp.p_slower == 2.0**-12


def test_the_factor_and_the_test_are_both_needed():
    base = [1.0] * 12
    # 10 of 12 rounds 1.5x slower: the ratio exceeds the factor, p = 79/4096 > 0.01
    head = [1.5] * 10 + [0.9] * 2
    assert stats.compare(base, head).verdict == "no change"
    # every round 1.1x slower: the test rejects, the ratio stays under the factor
    assert stats.compare(base, [1.1] * 12).verdict == "no change"
    # one unlucky round 100x slower does not make a regression
    assert stats.compare(base, [100.0] + [0.99] * 11).verdict == "no change"
    assert stats.compare(base, [0.5] * 12).verdict == "improvement"


def test_false_alarm_rate_under_drift_and_noise_is_at_most_alpha():
    """2000 null runs (same code both sides; drift within a run, heavy-tailed noise, a random
    order per round): rejections are Binomial(2000, p) with p = P(Bin(12, 1/2) >= 11) = 0.0032;
    more than 20 has probability < 1e-5 under the exact rate (a seeded, deterministic run)."""
    rng = random.Random(20261126)
    alarms = 0
    for _ in range(2000):
        base, head = [], []
        for i in range(12):
            drift = 1 + 0.05 * i
            first_is_base = rng.random() < 0.5
            t1 = drift * rng.paretovariate(3.0)
            t2 = drift * 1.02 * rng.paretovariate(3.0)  # the second of a round runs later
            b, h = (t1, t2) if first_is_base else (t2, t1)
            base.append(b)
            head.append(h)
        alarms += stats.compare(base, head, factor=1.0 + 1e-9).verdict == "regression"
    assert alarms <= 20


def test_median_ci_holds_the_median():
    xs = [float(i) for i in range(1, 31)]
    lo, hi = stats.median_ci(xs, 0.99)
    assert lo < 15.5 < hi and (lo, hi) != (1.0, 30.0)
    assert stats.median_ci([3.0, 1.0], 0.99) == (1.0, 3.0)


def _tree(where: Path, value: int) -> Path:
    for folder in ("impls", "verify", "properties", "kernel_verify", "benchmarks"):
        (where / folder).mkdir(parents=True)
        (where / folder / "__init__.py").write_text("")
    (where / "impls" / "core.py").write_text(f"VALUE = {value}\n")
    (where / "benchmarks" / "bench.py").write_text(
        "from kernel_verify.impls.core import VALUE\n"
        "class Bench:\n"
        "    def setup(self, x):\n        self.x = x\n"
        "    def time_it(self, x):\n"
        "        from kernel_verify.impls import late  # resolved while this version is active\n"
        "        return VALUE * 100 + late.LATE + x\n")
    (where / "impls" / "late.py").write_text(f"LATE = {value * 10}\n")
    return where


def test_two_versions_live_side_by_side(tmp_path):
    old = versions.load("base", _tree(tmp_path / "old", 1), "a" * 40, ["benchmarks.bench"],
                        tmp_path / "work")
    new = versions.load("head", _tree(tmp_path / "new", 2), "b" * 40, ["benchmarks.bench"],
                        tmp_path / "work")
    results = []
    for version in (old, new, old):
        bench = version.get("benchmarks.bench:Bench")()
        with version.active():
            bench.setup(3)
            results.append(bench.time_it(3))
    assert results == [113, 223, 113]
    assert "benchmarks.bench" not in sys.modules
    with pytest.raises(KeyError, match="has no Missing"):
        new.get("benchmarks.bench:Missing")


def test_a_folder_that_is_not_a_tree_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not a kernel-verify source tree"):
        versions.shadow(tmp_path, tmp_path / "shadow")


def test_asv_results_merge_and_load_in_asv(tmp_path):
    asv = pytest.importorskip("asv.results")
    machine = {"machine": "test-gpu", "os": "Linux", "arch": "x86_64", "cpu": "c",
               "num_cpu": "2", "ram": "1 GiB"}
    name = "attention.SoftmaxAttention.time_softmax_attention"
    cpu = {("'torch:cpu/float32'", "1024", "False"): asv_results.stats_of([1.0, 2.0, 3.0], 1)}
    cuda = {("'torch:cuda/float32'", "4096", "True"): asv_results.stats_of([0.1, 0.2], 4)}
    asv_results.write(tmp_path, machine, "c" * 40, 1, "3.11", {name: cpu}, 1.0)
    path = asv_results.write(tmp_path, machine, "c" * 40, 1, "3.11", {name: cuda}, 1.0)
    data = json.loads(path.read_text())
    entry = dict(zip(asv_results.COLUMNS, data["results"][name], strict=True))
    assert entry["params"] == [["'torch:cpu/float32'", "'torch:cuda/float32'"],
                               ["1024", "4096"], ["False", "True"]]
    assert sorted(r for r in entry["result"] if r is not None) == [0.15000000000000002, 2.0]
    loaded = asv.Results.load(str(path), machine_name="test-gpu")
    assert loaded.get_result_value(name, entry["params"]).count(None) == 6


def test_the_listing_is_widened_with_the_cases_results_hold(tmp_path):
    """asv draws only the parameter combinations benchmarks.json names: a CUDA result recorded on
    another machine must widen the listing, or the dashboard shows no CUDA series."""
    name = "attention.SoftmaxAttention.time_softmax_attention"
    listing = {name: {"params": [["'torch:cpu/float32'"], ["1024"], ["False"]], "version": "v"},
               "version": 2}
    (tmp_path / "benchmarks.json").write_text(json.dumps(listing))
    machine = {"machine": "gpu-box", "os": "Linux", "arch": "x86_64", "cpu": "c",
               "num_cpu": "16", "ram": "1 GiB"}
    cuda = {("'torch:cuda/float32'", "4096", "False"): asv_results.stats_of([0.1, 0.2], 4)}
    asv_results.write(tmp_path, machine, "d" * 40, 1, "3.12", {name: cuda}, 1.0)
    assert asv_results.widen_listing(tmp_path) == [name]
    params = json.loads((tmp_path / "benchmarks.json").read_text())[name]["params"]
    assert params == [["'torch:cpu/float32'", "'torch:cuda/float32'"], ["1024", "4096"],
                      ["False"]]
    assert asv_results.widen_listing(tmp_path) == []


def test_the_rehearsal_fits_its_budget_from_measured_cell_costs():
    """Every cell of the CPU plan was measured by the committed rehearsal, and the gate's budget
    plus each cell's measured set-up and timed cost fit the rehearsal's budget."""
    record = json.loads(REHEARSAL.read_text())
    measured = {c["label"]: c for c in record["cells"]}
    missing = [c.label for c in plan.cells("cpu") if c.label not in measured]
    assert not missing, f"cells without a measured cost (rerun `make gpu DEVICE=cpu`): {missing}"
    total = plan.GATE_BUDGET["cpu"] + sum(
        c.get("setup_s", 0.0) + c.get("cost_s", 0.0) for c in measured.values())
    assert total <= plan.BUDGET["cpu"], f"{total:.0f} s > {plan.BUDGET['cpu']} s"


def test_the_gpu_plan_fits_its_budget_from_the_measured_cuda_run():
    """The committed CUDA run (reports/gpu/run.json, an H200) measured each cell it timed. Replaying
    the default budget with those costs: 15 s of imports and 10 s of CUDA initialisation after the
    gate's share, then each cell in plan order, started only if its set-up reserve is left (a cell
    not measured costs its reserve). The run ends inside the budget, every cell outside fla is
    timed, and no measured set-up exceeds its cell's reserve."""
    record = json.loads(CUDA_RUN.read_text())
    assert record["meta"]["device"] == "cuda"
    measured = {c["label"]: c for c in record["cells"] if "setup_s" in c}
    elapsed = plan.GATE_BUDGET["cuda"] + 15.0 + 10.0
    skipped = []
    for cell in plan.cells("cuda"):
        if plan.BUDGET["cuda"] - elapsed < cell.setup_reserve_s:
            skipped.append(cell)
            continue
        m = measured.get(cell.label)
        elapsed += m["setup_s"] + m["cost_s"] if m else cell.setup_reserve_s
        if m:
            assert m["setup_s"] <= cell.setup_reserve_s, cell.label
    assert elapsed <= plan.BUDGET["cuda"], f"{elapsed:.0f} s"
    assert all(c.module == "benchmarks.fla_native" for c in skipped), skipped
    missing = [c.label for c in plan.cells("cuda")
               if c.module != "benchmarks.fla_native" and c.label not in measured]
    assert not missing, f"cells without a measured CUDA cost: {missing}"


def test_a_cell_is_not_started_without_its_set_up_reserve():
    from tools.gpu.run import time_cell

    cell = plan.cells("cuda")[-1]
    row = time_cell(cell, None, None, None, plan.ROUNDS["cuda"], 0, cell.setup_reserve_s - 1)
    assert row["reason"].startswith("not run:"), row


@pytest.mark.parametrize("bad", [["--budget", "0"], ["--gate-budget", "0"], ["--rounds", "0"],
                                 ["--budget", "inf"], ["--only", ""], ["--seed", "-1"],
                                 ["--alpha", "2"], ["--factor", "nan"]])
def test_bad_arguments_of_the_gpu_run_are_refused_not_defaulted(bad, capsys):
    """An explicit zero, a non-finite budget, an alpha outside (0, 1), an empty --only or a
    negative seed exits 2 with the argument named (never silently the default)."""
    from tools.gpu import run

    with pytest.raises(SystemExit) as exc:
        run.main([*bad, "--device", "cpu"])
    assert exc.value.code == 2
    assert bad[0] in capsys.readouterr().err
