"""The report's pages of the committed mutant and calibration reports, each as one figure.

Read at report time from the committed data (never rewritten here):

* ``reports/mutants.json`` (written by ``kernel-verify mutants``): a heatmap of mutants (rows,
  grouped by the mutant's family) × property families (columns; a property
  ``family::test`` belongs to ``family``). A cell is **killed (intended killer)** when a property
  of the family that the mutant lists among its ``intended_killers`` failed, **killed** when
  another property of the family failed, **ran, passed** when the family ran on the mutant (a
  verdict of it is recorded) and none failed, **not run** otherwise (:func:`mutant_matrix`).
* ``reports/calibration.md`` (written by ``kernel-verify calibrate``): every table row with
  ``trials``, ``level(s)`` and ``rejections`` gives one point per level: the observed rate
  ``k/n`` on correct code against the nominal level, with its two-sided Clopper–Pearson interval
  at :data:`CONF` (:func:`kernel_verify.verify.stats.rejection_rate_interval`)
  (:func:`calibration_points`).

Where a file is missing (an installed package run outside a checkout) the page says so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from kernel_verify.report.pages import Page
from kernel_verify.verify.paths import reports_dir
from kernel_verify.verify.stats import rejection_rate_interval

__all__ = ["CONF", "calibration_page", "calibration_points", "mutant_matrix", "mutants_page"]

#: Confidence of the calibration plot's intervals (two-sided).
CONF = 0.95
#: Cell values of the mutant matrix.
NOT_RUN, PASSED, KILLED, INTENDED = 0, 1, 2, 3


def _family(prop: str) -> str:
    return prop.split("::", 1)[0]


def mutant_matrix(data: dict) -> tuple[list[str], list[str], np.ndarray, list[str]]:
    """``(mutant names, property families, matrix, mutant family per row)`` of a mutants.json
    (module docstring); rows sorted by mutant family, then name."""
    if not isinstance(data, dict) or not isinstance(data.get("mutants"), list):
        raise ValueError("data must be the mutants report: a dict with a 'mutants' list")
    mutants = sorted(data["mutants"], key=lambda m: (m.get("family", ""), m["name"]))
    families = sorted({v["family"] for m in mutants for v in m.get("verdicts", [])}
                      | {_family(f["property"]) for m in mutants for f in m.get("failures", [])})
    col = {f: j for j, f in enumerate(families)}
    matrix = np.full((len(mutants), len(families)), NOT_RUN, dtype=int)
    for i, m in enumerate(mutants):
        for v in m.get("verdicts", []):
            matrix[i, col[v["family"]]] = PASSED
        intended = set(m.get("intended_killers", []))
        for f in m.get("failures", []):
            j = col[_family(f["property"])]
            matrix[i, j] = max(matrix[i, j], INTENDED if f["property"] in intended else KILLED)
    return ([m["name"] for m in mutants], families, matrix,
            [m.get("family", "") for m in mutants])


def mutants_page(figdir: Path, rel: str, source: Path | None = None) -> Page:
    """The mutants page: counts and the heatmap of ``source`` (default reports/mutants.json)."""
    from kernel_verify.report import figures

    source = source or reports_dir() / "mutants.json"
    page = Page("Mutants: which property families kill which mutant")
    page.p("[← index](index.md)")
    if not source.is_file():
        page.p(f"**not available**: {source} does not exist (the mutant report is committed in a "
               "checkout; `kernel-verify mutants` writes it).")
        return page
    data = json.loads(source.read_text())
    names, families, matrix, groups = mutant_matrix(data)
    killed = int(np.sum((matrix >= KILLED).any(axis=1)))
    intended = int(np.sum((matrix == INTENDED).any(axis=1)))
    page.p(f"From `{source.name}` ({data.get('commit', 'commit unknown')}, profile "
           f"`{data.get('profile', '?')}`): {len(names)} mutants, {killed} killed by at least one "
           f"property, {intended} by an intended killer; {len(families)} property families; "
           f"controls that failed: {data.get('controls_failed', '?')}. The full tables: "
           f"reports/mutants.md.")
    cap = figures.mutant_heatmap(names, families, matrix, groups, figdir / "mutants_heatmap.png")
    page.img(f"{rel}/mutants_heatmap.png", cap)
    per = [[f, str(int((matrix[:, j] >= KILLED).sum())), str(int((matrix[:, j] == INTENDED)
                                                               .sum())),
            str(int((matrix[:, j] != NOT_RUN).sum()))] for j, f in enumerate(families)]
    page.table(["property family", "mutants killed", "as intended killer", "mutants run on"], per)
    return page


_ROW = re.compile(r"^\|(.*)\|\s*$")


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (``\\|`` inside a cell kept)."""
    inner = _ROW.match(line.strip())
    if not inner:
        return []
    parts = re.split(r"(?<!\\)\|", inner.group(1))
    return [p.strip().replace("\\|", "|") for p in parts]


def calibration_points(text: str, conf: float = CONF) -> list[dict]:
    """One point per (table row, level) of a calibration report: ``check``, ``target``,
    ``backend``, ``part``, ``level``, ``trials``, ``rejections``, ``rate`` and its two-sided
    Clopper–Pearson interval ``lo``, ``hi`` at ``conf``. Rows whose levels are not numbers
    (a measured rate with no level) are skipped."""
    if not isinstance(text, str):
        raise TypeError(f"text must be the calibration report's Markdown, got {type(text)!r}")
    points: list[dict] = []
    header: list[str] | None = None
    part = ""
    for line in text.splitlines():
        if line.startswith("## Part"):
            part = line.split("`")[1] if "`" in line else line[8:].strip()
            header = None
            continue
        cells = _cells(line)
        if not cells:
            header = None
            continue
        if header is None:
            header = cells
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        row = dict(zip(header, cells, strict=False))
        if not {"trials", "level(s)", "rejections"} <= row.keys():
            continue
        try:
            n = int(row["trials"])
            levels = [float(x) for x in row["level(s)"].split("/")]
            ks = [int(x) for x in row["rejections"].split("/")]
        except ValueError:
            continue
        if len(levels) != len(ks):
            continue
        for level, k in zip(levels, ks, strict=True):
            lo, hi = rejection_rate_interval(k, n, conf)
            points.append({"part": part, "check": row.get("check", ""),
                           "target": row.get("target", ""),
                           "backend": row.get("backend, dtype, mode", ""), "level": level,
                           "trials": n, "rejections": k, "rate": k / n, "lo": lo, "hi": hi})
    return points


def calibration_page(figdir: Path, rel: str, source: Path | None = None) -> Page:
    """The calibration page: the rate-vs-level plot of ``source`` (default
    reports/calibration.md) and a count per level."""
    from kernel_verify.report import figures

    source = source or reports_dir() / "calibration.md"
    page = Page("Calibration: observed false-alarm rate against the nominal level")
    page.p("[← index](index.md)")
    if not source.is_file():
        page.p(f"**not available**: {source} does not exist (the calibration report is committed "
               "in a checkout; `kernel-verify calibrate` writes it).")
        return page
    points = calibration_points(source.read_text())
    if not points:
        page.p(f"**not available**: no table row with trials, levels and rejections in {source}.")
        return page
    above = [p for p in points if p["lo"] > p["level"]]
    page.p(f"From `{source.name}`: {len(points)} (check, level) points of "
           f"{len({(p['part'], p['check'], p['target'], p['backend']) for p in points})} rows; "
           f"intervals are two-sided {CONF:.0%} Clopper–Pearson. Points whose interval lies "
           f"wholly above their level: {len(above)}. The full tables: reports/calibration.md "
           "(its **ok** column uses the one-sided upper bound).")
    cap = figures.calibration_figure(points, figdir / "calibration_rate_vs_level.png", CONF)
    page.img(f"{rel}/calibration_rate_vs_level.png", cap)
    rows = []
    for level in sorted({p["level"] for p in points}, reverse=True):
        at = [p for p in points if p["level"] == level]
        k, n = sum(p["rejections"] for p in at), sum(p["trials"] for p in at)
        rows.append([f"{level:g}", str(len(at)), f"{k}/{n}", f"{k / n:.4g}",
                     str(sum(p["lo"] > level for p in at)),
                     f"{max(p['rate'] for p in at):.3g}"])
    page.table(["level", "points", "rejections / trials (pooled)", "pooled rate",
                "points above their level", "largest rate"], rows)
    if above:
        page.p("**Above their level:**")
        page.ul([f"{p['check']} `{p['target']}` {p['backend']}: {p['rejections']}/{p['trials']} "
                 f"at level {p['level']:g}" for p in above])
    return page
