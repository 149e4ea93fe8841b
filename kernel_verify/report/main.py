"""``kernel-verify report``: one page per registered map, an overview page and an HTML index.

Output (default ``build/report/full``, ``--quick``: ``build/report/quick``; both untracked):
``index.html``/``index.md`` (header, reading guide, one row per map), ``overview.{md,html}``,
``maps/<map>.{md,html}``, ``systems.{md,html}`` with ``systems/<system>.{md,html}`` (the gated,
hybrid and model systems: :mod:`kernel_verify.report.system_pages`), ``mutants.{md,html}`` and
``calibration.{md,html}`` (a heatmap and a rate-vs-level plot of the committed reports:
:mod:`kernel_verify.report.summaries`), ``figures/*.png`` and ``report.json``. The report is
assembled in a
temporary sibling folder and moved into place at the end, so an interrupted run never leaves a
half-written report; per-map numbers are cached (:mod:`kernel_verify.verify.cache`, keyed by map,
config, depth settings and code version), so a re-run recomputes only what changed. The statistical
tests of the report share ``KV_ALPHA_TOTAL`` (Bonferroni over the report's mean tests and flag
tests). Exit status 1 when a map FAILs.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from kernel_verify.impls.names import identifier
from kernel_verify.impls.registry import all_maps, get
from kernel_verify.properties.alpha import preserved, set_assertion_count
from kernel_verify.report import mappage
from kernel_verify.report.gradients import median_test_applies
from kernel_verify.report.pages import Page, write_atomic, write_page
from kernel_verify.report.settings import FULL, QUICK, Settings, code_version
from kernel_verify.verify.stats import AlphaBudget

DEFAULT_OUT = Path("build/report")


def _versions() -> str:
    import matplotlib
    import mpmath
    import numpy
    import torch

    from kernel_verify.provenance import code_state

    return (f"kernel-verify {code_state()}, "
            f"Python {platform.python_version()}, NumPy {numpy.__version__}, torch "
            f"{torch.__version__} (CUDA {'available' if torch.cuda.is_available() else 'unavailable'}), "  # noqa: E501
            f"mpmath {mpmath.__version__}, matplotlib {matplotlib.__version__}")


def _out_dir(out: str | None, quick: bool) -> Path:
    if out:
        return Path(out)
    return DEFAULT_OUT / ("quick" if quick else "full")


#: (start of a phase, phase) -> the measured seconds of each item of it not read from the cache
_PACE: dict[tuple[float, str], list[float]] = {}


def _progress(i: int, n: int, name: str, verdict: str, dt: float, cached: bool, t0: float,
              phase: str = "maps") -> None:
    """One progress line on stderr: the phase (``maps``: measurements; ``pages``: pages and
    figures), how many of ``n`` are done, and the time left in this phase: the ``n − i`` items
    left × the mean measured time of the items of this phase computed so far (a cached item
    takes no time and says nothing of the pace; before any was computed, elapsed / i)."""
    measured = _PACE.setdefault((t0, phase), [])
    if not cached:
        measured.append(dt)
    per_item = (sum(measured) / len(measured) if measured
                else (time.perf_counter() - t0) / i)
    eta = per_item * (n - i)
    bar = "#" * (20 * i // n) + "." * (20 - 20 * i // n)
    print(f"{phase:<5} [{bar}] {i:>2}/{n} {name:<42} {verdict:<10} {dt:5.1f}s"
          f"{' (cached)' if cached else ''}  ETA {eta:4.0f}s", file=sys.stderr, flush=True)


def _alpha_budget(random_maps: list, s: Settings) -> AlphaBudget:
    """Bonferroni over every statistical assertion of the report: its mean tests (one per map
    and m), the deterministic-seed properties it runs (6 grid cases per unbiased map, 2 per
    biased one), the guaranteed-coverage flag tests (one per m and per geometry point, ≤ 4 axes,
    and one more where a flag gets its second measurement, measure.resolve_flag) and the
    gradient-bias known-variance mean test (one per component where it applies)."""
    n_props = sum(6 if e.has("unbiased") else 2 if e.has("biased") and e.mean_kernel else 0
                  for e in random_maps)
    n_flags = 2 * len(random_maps) * (len(s.ms) + 4 * s.geo_points)
    n_grad = s.d * sum(median_test_applies(e) for e in random_maps)
    return AlphaBudget.from_env(max(1, len(random_maps) * len(s.ms) + n_props + n_flags
                                    + n_grad))


def _command_line(quick: bool, names: list[str]) -> str:
    """The command that made this report, as the pages print it: the real command line when run
    as ``kernel-verify``, else its equivalent."""
    if Path(sys.argv[0]).name == "kernel-verify":
        return " ".join(["kernel-verify", *map(shlex.quote, sys.argv[1:])])
    return "kernel-verify report " + " ".join(
        (["--quick"] if quick else []) + (["--maps", *names] if names else []))


def run_report(*, quick: bool = False, out: str | None = None, maps: Sequence[str] | None = None,
               no_plots: bool = False) -> int:
    """``kernel-verify report [--quick] [--out DIR] [--maps NAME ...] [--no-plots]``: verify the
    maps (default: every registered map) and write the report's pages, figures and report.json
    into ``out`` (default: build/report/full or build/report/quick). The report's false-alarm
    budget holds while it runs; a caller in the same process gets its own back after."""
    with preserved():
        return _run_report(quick=quick, out=out, maps=maps, no_plots=no_plots)


def _run_report(*, quick: bool, out: str | None, maps: Sequence[str] | None,
                no_plots: bool) -> int:
    s: Settings = QUICK if quick else FULL
    names = list(maps or ())
    out = _out_dir(out, quick)
    maps = [get(n) for n in names] if names else all_maps()
    random_maps = [e for e in maps if not e.has("deterministic")]
    budget = _alpha_budget(random_maps, s)
    set_assertion_count(budget.n_assertions)
    version = code_version()
    command = _command_line(quick, names)
    print(f"kernel-verify report ({s.depth}): {len(maps)} maps ({len(random_maps)} random) → "
          f"{out}/index.html; {budget.describe()}", file=sys.stderr, flush=True)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "maps").mkdir(parents=True)
    (tmp / "figures").mkdir()
    t0 = time.perf_counter()
    rows, data_all = [], []
    try:
        for i, entry in enumerate(maps, 1):
            t1 = time.perf_counter()
            data = mappage.compute(entry, s, budget.per_assertion, version)
            rows.append((entry, data))
            data_all.append(data)
            _progress(i, len(maps), entry.name, data["verdict"], time.perf_counter() - t1,
                      data["cached"], t0)
        if not no_plots:  # after every map: a page compares its map with its siblings
            print(f"pages and figures: {len(rows)} map pages …", file=sys.stderr, flush=True)
            t_pages = time.perf_counter()
            for i, (entry, data) in enumerate(rows, 1):
                t1 = time.perf_counter()
                siblings = [d for e, d in rows if mappage.family(e.name) == mappage.family(
                    entry.name)]
                page = mappage.render(entry, data, s, tmp / "figures", "../figures",
                                      siblings=siblings)
                write_page(page, tmp / "maps", identifier(entry.name))
                _progress(i, len(rows), entry.name, "page", time.perf_counter() - t1, False,
                          t_pages, phase="pages")
        overview_ok = False
        if not names and not no_plots:
            from kernel_verify.report import overview

            print("overview figures …", file=sys.stderr, flush=True)
            t1 = time.perf_counter()
            ov = overview.build(s, tmp / "figures", "figures", version)
            write_page(ov, tmp, "overview")
            print(f"overview figures done ({time.perf_counter() - t1:.0f} s)", file=sys.stderr,
                  flush=True)
            overview_ok = True
        from kernel_verify.report.systems import systems_page

        systems_data: list[dict] = []
        if not names and not no_plots:  # gated, hybrid and model systems: a page each
            from kernel_verify.report import summaries
            from kernel_verify.report.system_pages import write_system_pages

            t1 = time.perf_counter()
            systems_data = write_system_pages(tmp, tmp / "figures", progress=lambda n, v, dt: print(
                f"system {n:<40} {v:<10} {dt:5.1f}s", file=sys.stderr, flush=True))
            write_page(summaries.mutants_page(tmp / "figures", "figures"), tmp, "mutants")
            write_page(summaries.calibration_page(tmp / "figures", "figures"), tmp,
                       "calibration")
            print(f"system pages, mutant heatmap and calibration plot done "
                  f"({time.perf_counter() - t1:.0f} s)", file=sys.stderr, flush=True)
        # the systems page reads the declarations, and links the pages written above
        write_page(systems_page({d["name"]: d for d in systems_data}), tmp, "systems")
        duration = time.perf_counter() - t0
        header = {"command": command, "depth": s.depth, "settings": repr(s),
                  "versions": _versions(), "code_version": version,
                  "machine": f"{platform.platform()}, {os.cpu_count()} CPU cores, "
                  f"{platform.processor() or platform.machine()}",
                  "duration_s": round(duration, 1), "alpha": budget.describe(),
                  "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
        index = _index(rows, header, s, overview_ok, with_pages=not no_plots,
                       summaries_ok=bool(systems_data))
        write_page(index, tmp, "index")
        write_atomic(tmp / "report.json", json.dumps({"header": header, "maps": data_all,
                                                      "systems": systems_data},
                                                     indent=1, default=float))
        _swap(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    failed = [e.name for e, d in rows if d["verdict"] == "FAIL"]
    counts = {v: sum(d["verdict"] == v for _, d in rows)
              for v in ("pass", "flagged", "not tested", "FAIL")}
    # the summary is the command's result: stdout (progress went to stderr)
    print(f"\n{counts}; report in {out}/index.html ({duration:.0f}s)")
    if failed:
        print("FAILED: " + ", ".join(failed))
    return 1 if failed else 0


def _swap(tmp: Path, out: Path) -> None:
    """Replace ``out`` by ``tmp`` with two renames (the old report stays whole until then)."""
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)


GUIDE = [
    "**Verdict** — **FAIL**: a test rejected or accuracy exceeded its budget; **not tested**: "
    "at least one claim got no statistical test, or a theory point is **not decidable** at the "
    "report's draws (the page says which and why, and the draws a test would need); "
    "**flagged**: "
    "every test passed but a theory point lies outside its band even after a second "
    "measurement (theory wrong, or unresolved); an estimator a second measurement rejects with "
    "a guaranteed test FAILs; pass: every claim was tested and held, nothing flagged.",
    "**Bias** is measured mean / target kernel − 1 at the default pair with a percentile-bootstrap "
    "interval; maps that claim to be biased show the predicted bias (declared mean kernel, or a "
    "cached Monte Carlo reference).",
    "**Theory** curves are exact (verify.moments, iid and orthogonal rows) or a Monte Carlo "
    "reference computed once with its own ±2 SE band; every figure says which.",
    "**Heavy tails**: positive/hyperbolic/GERF estimators are log-normal-like; a bootstrap band "
    "under-covers their tail at small R, so a theory point is decided by a band with guaranteed "
    "coverage where one is informative, and a point outside its band is measured again (16× the "
    "draws): theory confirmed, not decidable at these draws (the draws a guaranteed band would "
    "need are stated), theory wrong or estimator wrong — each page says which.",
    "**Gradients**: worst |autograd − exact| / derived backward bound over torch backends × "
    "dtypes (≤ 1 passes; NumPy has no autograd, CUDA rows need a GPU); for unbiased random maps "
    "the page also shows the bias of the gradient estimator with its interval, tested where the "
    "exact gradient variance is known (positive features, iid rows).",
]


def _gradient_cell(d: dict) -> str:
    """Worst gradient ratio over the rows run, FAIL first; else why none ran."""
    rows = d.get("gradients") or []
    ran = [r for r in rows if r["status"] in ("pass", "FAIL")]
    if not ran:
        cpu = [r["status"] for r in rows if r["backend"] == "torch:cpu"]
        if cpu and "no derived backward bound" in cpu[0]:
            return "not tested: no derived backward bound (finite differences in the suite)"
        return cpu[0].split(" (")[0] if cpu else "not tested"
    worst = max(max(r["phi_ratio"], r["kernel_ratio"] or 0.0) for r in ran)
    fail = any(r["status"] == "FAIL" for r in ran)
    gb = d.get("gradient_bias") or {}
    bias = {True: "; bias test pass", False: "; **bias test FAIL**"}.get(gb.get("test_ok"), "")
    return (f"**FAIL** {worst:.3g}" if fail else f"pass {worst:.3g}") + bias


def _index(rows, header: dict, s: Settings, overview_ok: bool, with_pages: bool,
           summaries_ok: bool = False) -> Page:
    page = Page("kernel-verify variance report")
    page.table(["", ""], [[k, f"`{v}`" if k == "command" else str(v)] for k, v in header.items()])
    page.p(f"Seeds: per map crc32(name) + index (shown on each page); Monte Carlo references "
           f"seed 20261123; attention seeds 0–{s.att_seeds - 1}; KRR task seed 2026.")
    page.h("Reading guide")
    page.ul(GUIDE)
    if overview_ok:
        page.p("[Overview: softmax and Gaussian-kernel estimators compared](overview.md)")
    page.p("[Attention, gated attention, hybrid attention, models, kernel approximations and "
           "random matrices: each claim and what tests it](systems.md)"
           + (" — the gated, hybrid and model systems with a page each (verdicts per backend × "
              "dtype, error against the derived bound, a figure)" if summaries_ok else ""))
    if summaries_ok:
        page.p("[Mutants: the kill matrix as a heatmap](mutants.md) · [Calibration: observed "
               "false-alarm rate against the nominal level](calibration.md)")
    page.h("Maps")
    table = []
    for entry, d in rows:
        name = (f"[{entry.name}](maps/{identifier(entry.name)}.md)" if with_pages
                else entry.name)
        verdict = d["verdict"] if d["verdict"] == "pass" else f"**{d['verdict']}**"
        bias, var = "—", "—"
        meas = d.get("measurement")
        if meas:
            p = meas["points"][-1]
            k = meas["kernel"]
            bias = (f"{100 * (p['mean'] / k - 1):+.2f} % [{100 * (p['mean_lo'] / k - 1):+.2f}, "
                    f"{100 * (p['mean_hi'] / k - 1):+.2f}] (m={p['m']})")
            if p["theory_mean"] is not None and abs(p["theory_mean"] / k - 1) > 1e-9:
                bias += f"; predicted {100 * (p['theory_mean'] / k - 1):+.2f} %"
            tv = p["theory_variance"]
            if tv:
                var = (f"{p['variance'] / tv:.2f} [{p['var_lo'] / tv:.2f}, "
                       f"{p['var_hi'] / tv:.2f}]")
        kind = ("—" if not meas else "exact" if meas["theory"]["variance_kind"].startswith("exact")
                else "reference" if meas["theory"]["variance_kind"].startswith("Monte") else "none")
        table.append([name, entry.kernel, ", ".join(sorted(entry.claims - {"psd_kernel"})),
                      bias, var, kind, _gradient_cell(d), verdict,
                      "; ".join(d["reasons"])[:160]])
    page.table(["map", "kernel", "claims", "measured bias [CI]", "Var meas./theory [CI]",
                "theory",
                "gradients (worst error / bound)", "verdict", "why"], table)
    return page
