"""``kernel-verify report``: verify every registered map and write the variance reports.

Writes, under ``--out`` (default ``reports/``):

* ``summary.md``: one row per map — accuracy against mpmath (worst error as a fraction of the
  derived budget, per backend and dtype), unbiasedness verdict, measured/exact variance ratio;
* ``variance/<map>.png``: variance against m, exact theory and measurement;
* ``variance/softmax_estimators.png``: exact variance of the softmax estimators side by side;
* ``report.json``: everything above as data.

The unbiasedness checks share a false-alarm budget of ``KV_ALPHA_TOTAL`` (default 1e-3) for the
whole report (Bonferroni). The command exits non-zero when any map fails a check.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from kernel_verify.impls.registry import FeatureMap, all_maps, get
from kernel_verify.verify import atomic
from kernel_verify.verify.report.accuracy import accuracy_rows
from kernel_verify.verify.report.variance import VarianceReport, plot_variance, variance_report
from kernel_verify.verify.stats import AlphaBudget

D = 8


def _safe(name: str) -> str:
    return name.replace("[", "_").replace("]", "").replace("/", "_")


def _is_random(entry: FeatureMap) -> bool:
    return not entry.has("deterministic")


def _fmt_ratio(r: float) -> str:
    return "—" if r != r else f"{r:.2f}"


def _verdict(acc_ok: bool, unbiased: bool | None) -> str:
    if not acc_ok or unbiased is False:
        return "FAIL"
    return "pass"


def _softmax_overview(out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kernel_verify.verify.moments import exact_moments
    from kernel_verify.verify.report.variance import default_pair

    ms = np.array([1, 2, 4, 8, 16, 32, 64, 128])
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    for name in ("softmax_trig[iid]", "softmax_positive[iid]", "softmax_hyperbolic[iid]",
                 "gerf[iid]", "softmax_positive[orthogonal]"):
        entry = get(name)
        x, y = default_pair(entry, D)
        var = [float(exact_moments(entry, x, y, entry.config, int(m)).as_float().variance)
               for m in ms]
        ax.plot(ms, var, marker=".", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("m")
    ax.set_ylabel("exact Var[φ(x)ᵀφ(y)]")
    ax.set_title(f"softmax estimators at the default pair (d={D})", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    atomic.save_figure(fig, out / "softmax_estimators.png", dpi=110)
    plt.close(fig)


def run_report(args: argparse.Namespace) -> int:
    out = Path(args.out)
    (out / "variance").mkdir(parents=True, exist_ok=True)
    maps = [get(n) for n in args.maps] if args.maps else all_maps()
    ms = (4, 16, 64) if args.quick else (1, 4, 16, 64)
    draws = 400 if args.quick else 2000
    random_maps = [e for e in maps if _is_random(e)]
    budget = AlphaBudget.from_env(max(1, len(random_maps) * len(ms)))
    log = sys.stderr
    print(f"kernel-verify report: {len(maps)} maps, {len(random_maps)} random; m in {ms}, "
          f"{draws} draws; {budget.describe()}", file=log)
    rows, data = [], []
    start = time.perf_counter()
    for i, entry in enumerate(maps, 1):
        t0 = time.perf_counter()
        acc = accuracy_rows(entry)
        acc_ok = all(r.worst_ratio <= 1.0 for r in acc)
        vr: VarianceReport | None = None
        if _is_random(entry):
            vr = variance_report(entry, d=D, ms=ms, draws=draws, alpha=budget.per_assertion,
                                 seed=1000 + i)
            if not args.no_plots:
                plot_variance(vr, out / "variance" / f"{_safe(entry.name)}.png")
        unbiased = vr.unbiased_ok if vr else None
        verdict = _verdict(acc_ok, unbiased)
        ratio = vr.worst_variance_ratio() if vr else None
        rows.append((entry, acc, unbiased, ratio, verdict, vr))
        data.append({
            "name": entry.name, "kernel": entry.kernel, "claims": sorted(entry.claims),
            "verdict": verdict, "accuracy": [asdict(r) for r in acc],
            "variance": asdict(vr) if vr else None,
        })
        print(f"[{i:>2}/{len(maps)}] {entry.name:<40} {verdict:<4} "
              f"({time.perf_counter() - t0:.1f}s)", file=log)
    if not args.no_plots and not args.maps:
        _softmax_overview(out / "variance")
    _write_summary(out, rows, ms, draws, budget)
    atomic.write_text(out / "report.json", json.dumps(data, indent=1, default=float))
    failed = [e.name for e, *_, v, _ in rows if v == "FAIL"]
    elapsed = time.perf_counter() - start
    print(f"\n{len(rows) - len(failed)}/{len(rows)} maps pass; report in {out}/summary.md "
          f"({elapsed:.0f}s)", file=log)
    if failed:
        print("FAILED: " + ", ".join(failed), file=log)
    return 1 if failed else 0


def _write_summary(out: Path, rows, ms, draws, budget: AlphaBudget) -> None:
    cases = [f"{r.backend} {r.dtype}" for r in rows[0][1]] if rows else []
    lines = [
        "# kernel-verify report",
        "",
        f"Generated by `kernel-verify report`. d = {D} for the variance reports, m ∈ {list(ms)}, "
        f"{draws} independent parameter draws per m; {budget.describe()}.",
        "",
        "**Accuracy**: worst |computed − mpmath| as a fraction of the derived rounding budget "
        "(≤ 1 passes) over 3 seeded draws, n = 4, d = 4, m = 8.",
        "**Unbiased**: median-of-means (exact variance) or Hoeffding (bounded maps) test of the "
        "Monte Carlo mean against the exact kernel (`mean_kernel` for biased maps); "
        "'—' = not tested (deterministic, or no exact variance/range known).",
        "**Var ratio**: measured/exact variance, the one farthest from 1 over m "
        "(exact variance for iid and orthogonal rows only).",
        "",
        "| map | kernel | " + " | ".join(cases) + " | unbiased | var ratio | verdict |",
        "|---|---|" + "---|" * len(cases) + "---|---|---|",
    ]
    for entry, acc, unbiased, ratio, verdict, vr in rows:
        u = {True: "yes", False: "**NO**", None: "—"}[unbiased]
        r = "—" if ratio is None else f"{ratio:.3f}"
        plot = f"[{verdict}](variance/{_safe(entry.name)}.png)" if vr else verdict
        lines.append(
            f"| {entry.name} | {entry.kernel} | "
            + " | ".join(_fmt_ratio(a.worst_ratio) for a in acc)
            + f" | {u} | {r} | {plot} |"
        )
    notes = [(e.name, vr.note) for e, *_, vr in rows if vr is not None and vr.note]
    if notes:
        lines += ["", "## Notes", ""] + [f"- `{n}`: {t}" for n, t in notes]
    lines += ["", "![softmax estimators](variance/softmax_estimators.png)", ""]
    atomic.write_text(out / "summary.md", "\n".join(lines))
