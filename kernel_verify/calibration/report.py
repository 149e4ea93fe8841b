"""reports/calibration.md: the table of a part's rows, its section, the merge of a rerun's
sections into the report, and :func:`calibrate`, the run of ``kernel-verify calibrate`` that
writes it."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence

from kernel_verify.calibration import run
from kernel_verify.calibration.certify import (
    ASSUMPTION_LEVEL,
    CONFIDENCE,
    DEFAULT_SEEDS,
    EXACT_FAMILY_ALPHA,
    LADDER,
    MIN_SEEDS,
    Row,
    exact_confidence,
    lower_bound,
    trials_to_certify,
    upper_bound,
)
from kernel_verify.calibration.run import PARTS
from kernel_verify.provenance import code_state
from kernel_verify.verify import atomic, seeds
from kernel_verify.verify.paths import reports_dir


def _fmt_levels(row: Row) -> tuple[str, str, str]:
    if not row.levels:
        k = row.unstated
        return (f"{k}", f"{k / row.trials:.4f}", f"{upper_bound(k, row.trials):.4f}")
    ks = " / ".join(str(k) for k in row.rejections)
    rates = " / ".join(f"{k / row.trials:.3f}" for k in row.rejections)
    ups = " / ".join(f"{u:.3g}" for u in row.uppers)
    return ks, rates, ups


def row_ok(r: Row, exact_conf: float) -> bool:
    """:meth:`Row.ok_at` ``exact_conf`` (:func:`exact_confidence` of the row's part)."""
    return r.ok_at(exact_conf)


def table(rows: Sequence[Row]) -> list[str]:
    lines = ["| check | target | backend, dtype, mode | trials | level(s) | rejections | measured "
             "rate | 95 % upper bound | operating level | margin | ok |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    conf = exact_confidence(rows)
    for r in rows:
        ks, rates, ups = _fmt_levels(r)
        levels = " / ".join(f"{a:g}" for a in r.levels) or "—"
        verdict = "yes" if row_ok(r, conf) else ("measured" if not r.levels else "NO")
        if r.exact_level:
            lows = " / ".join(f"{lower_bound(k, r.trials, conf):.3g}" for k in r.rejections)
            verdict += (f" (exact-level test: {100 * conf:.4g} % lower bound {lows} ≤ level; "
                        f"family-wise {EXACT_FAMILY_ALPHA:g} over the part's exact-level rows)")
        check = r.check.replace("|", "\\|")
        lines.append(f"| {check} | `{r.target}` | {r.where} | {r.trials} "
                     f"| {levels} | {ks} | {rates} | {ups} | {r.operating} | {r.margin} "
                     f"| {verdict} |")
    return lines


#: ``## Part `name` `` opens the section of one part in reports/calibration.md.
SECTION = re.compile(r"^## Part `(\w+)`$", re.M)


def _ok_line(rows: Sequence[Row]) -> str:
    stated = [r for r in rows if r.levels]
    conf = exact_confidence(rows)
    bad = [r for r in stated if not row_ok(r, conf)]
    return (f"**{len(stated) - len(bad)}/{len(stated)} ok**"
            + (f"; not ok: {', '.join(f'{r.check} ({r.target}, {r.where})' for r in bad)}"
               if bad else ""))


def _part_rows(part: str, todo, per_unit) -> list[Row]:
    """The rows of one part of a run (the family of its exact-level comparisons)."""
    return [r for u, unit_rows in zip(todo, per_unit, strict=True) if u.part == part
            for r in unit_rows]


def section(part: str, stamp: str, rows: Sequence[Row], not_run: Sequence[str] = ()) -> str:
    """The section of one part: its heading, the stamp of the run, its table, the cells its
    properties run in that this run could not (``not_run``) and its verdict."""
    gap = ([f"Not run here (no row; the property runs there on a machine that has it): "
            f"{'; '.join(not_run)}.", ""] if not_run else [])
    return "\n".join([f"## Part `{part}`", "", stamp, "", *table(rows), "", *gap,
                      _ok_line(rows)])


def _verdicts(section_text: str) -> tuple[int, int]:
    """``(ok rows, rows with a stated level)`` of a section, from the table's last column."""
    ok = stated = 0
    for line in section_text.splitlines():
        if line.startswith("| ") and not line.startswith(("| check ", "|---")):
            verdict = line.rstrip(" |").rsplit("| ", 1)[-1]
            if verdict.startswith("measured"):
                continue
            stated += 1
            ok += verdict.startswith("yes")
    return ok, stated


def merge_report(old: str, sections: dict[str, str], assumption_trials: int) -> str:
    """reports/calibration.md with ``sections`` (part → section text) replacing the sections of
    those parts in ``old`` and the other parts' sections kept as they are (with their own
    stamps), in :data:`PARTS` order; the head states the criterion and the total."""
    kept: dict[str, str] = {}
    found = list(SECTION.finditer(old))
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(old)
        kept[match.group(1)] = old[match.start():end].strip()
    kept.update(sections)
    order = [p for p in PARTS if p in kept] + [p for p in kept if p not in PARTS]
    body = [kept[p] for p in order]
    counts = [_verdicts(b) for b in body]
    ok, stated = sum(c[0] for c in counts), sum(c[1] for c in counts)
    missing = [p for p in PARTS if p not in kept]
    head = [
        "# Calibration of the statistical and assumption-based checks",
        "",
        "Each row runs one check on correct code, as the property runs it. **ok** means the "
        f"one-sided {CONFIDENCE:.0%} Clopper–Pearson upper bound of the measured false-alarm "
        "rate is ≤ the level, at every level of the row. Checks with a derived threshold run at "
        f"every rung of {LADDER} that their trial count can certify (e.g. 0.2 / 0.1 / 0.05: "
        "the rejections, rates and bounds are listed in that order); the properties use them at "
        "α_op = α_total/N, which the derivation covers (kernel_verify/calibration/). Model "
        f"assumptions run at their stated level: P0 for convergence, {ASSUMPTION_LEVEL:g} per "
        f"example for the deterministic thresholds ({assumption_trials} trials). A *measured* "
        "row has no certified level (the pilot-variance assumption: it adds its rate q to the "
        "test's α).",
        "",
        "Each part (`--part`) is a section with the command, commit and entropy of the run that "
        "wrote it; `kernel-verify calibrate --part P` replaces only the sections of P.",
        "",
        f"**{ok}/{stated} ok** over the parts {', '.join(order)}"
        + (f" (not run yet: {', '.join(missing)})" if missing else ""),
        "",
    ]
    return "\n".join(head) + "\n" + "\n\n".join(body) + "\n"


#: (Without ``--seeds`` a part's committed section is replaced by a run at least as large as the
#: one that wrote it, and at least :data:`DEFAULT_SEEDS`.)
_STAMP_SEEDS = re.compile(r"`kernel-verify calibrate --seeds (\d+) ")


def recorded_seeds(old: str) -> dict[str, int]:
    """Part → the ``--seeds`` of the run that wrote its section of reports/calibration.md."""
    out = {}
    found = list(SECTION.finditer(old))
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(old)
        seeds_used = _STAMP_SEEDS.search(old[match.start():end])
        if seeds_used:
            out[match.group(1)] = int(seeds_used.group(1))
    return out


def seeds_per_part(parts: Sequence[str], seeds_per_check: int | None, old: str, *,
                   allow_fewer: bool = False) -> dict[str, int]:
    """The seeds each part runs with: ``seeds_per_check`` when given, else the larger of
    :data:`DEFAULT_SEEDS` and the seeds its committed section was written with. A given count
    below a committed section's is a ValueError unless ``allow_fewer`` (``--allow-fewer-seeds``):
    a smaller run would silently replace a larger committed one."""
    before = recorded_seeds(old)
    if seeds_per_check is None:
        return {p: max(DEFAULT_SEEDS, before.get(p, DEFAULT_SEEDS)) for p in parts}
    n = int(seeds_per_check)
    if n < MIN_SEEDS:
        raise ValueError(f"--seeds must be >= {MIN_SEEDS}, got {n}")
    smaller = {p: before[p] for p in parts if before.get(p, 0) > n}
    if smaller and not allow_fewer:
        listed = ", ".join(f"{p} ({k} seeds)" for p, k in smaller.items())
        raise ValueError(f"--seeds {n} would replace committed sections of reports/calibration.md "
                         f"written with more seeds: {listed}; give --seeds "
                         f"{max(smaller.values())} (or leave --seeds out: each part then runs "
                         "at its committed count), or --allow-fewer-seeds to replace them anyway")
    return dict.fromkeys(parts, n)


def calibrate(seeds_per_check: int | None, parts: Sequence[str] | None = None,
              jobs: int | None = None, *, allow_fewer_seeds: bool = False) -> int:
    """``kernel-verify calibrate [--seeds N] [--part …] [--jobs J]``: run the units of ``parts``
    (default: every part) with ``seeds_per_check`` fresh seeds (default: per part,
    :func:`seeds_per_part`), in ``jobs`` processes (default ``min(2, CPU count)``), and write
    their sections into reports/calibration.md; 1 if any row is not ok, else 0."""
    parts = list(parts or PARTS)
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ValueError(f"--part must be among {', '.join(PARTS)}, got {unknown}")
    out = reports_dir() / "calibration.md"
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    per_part = seeds_per_part(parts, seeds_per_check, old, allow_fewer=allow_fewer_seeds)
    jobs = int(jobs or min(2, os.cpu_count() or 1))
    code = 0
    for n in sorted(set(per_part.values())):  # one run per seed count, each its own stamp
        code |= _calibrate_parts(n, [p for p in parts if per_part[p] == n], jobs)
    return code


def _calibrate_parts(n: int, parts: list[str], jobs: int) -> int:
    """One run of ``parts`` at ``n`` seeds per check (:func:`calibrate`)."""
    entropy = seeds.fresh_entropy()
    assumption_trials = max(n, trials_to_certify(ASSUMPTION_LEVEL))
    todo = run.units(parts)
    from kernel_verify.fingerprints import markdown_line

    fingerprint = markdown_line("reports/calibration.md")  # the sources as the run starts
    start = time.monotonic()
    per_unit = run.run_units(todo, n, entropy, assumption_trials, jobs, per_unit=True)
    seconds = time.monotonic() - start
    by_part = {part: _part_rows(part, todo, per_unit)
               for part in dict.fromkeys(u.part for u in todo)}
    bad = [r for rows in by_part.values() for r in rows
           if r.levels and not row_ok(r, exact_confidence(rows))]
    stamp = (f"`kernel-verify calibrate --seeds {n} --part {' '.join(parts)}` at commit "
             f"{code_state()}: {seconds:.0f} s in {jobs} processes, entropy {entropy} (seed of a "
             "trial: `verify.seeds.child_seeds(entropy, 1, 'calibrate', check, target, …, i)`)."
             f"\n\n{fingerprint}")
    gaps = run.not_run_here({u.part for u in todo})
    sections = {}
    for part, rows in by_part.items():
        sections[part] = section(part, stamp, rows, gaps.get(part, ()))
    out = reports_dir() / "calibration.md"
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    text = merge_report(old, sections, assumption_trials)
    atomic.write_text(out, text)
    print(text)
    print(f"\n(written to {out}; parts {', '.join(sections)} replaced)")
    if bad:
        print("not ok: " + ", ".join(f"{r.check} ({r.target}, {r.where})" for r in bad))
    return 1 if bad else 0
