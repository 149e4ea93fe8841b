"""``kernel-verify mutants``: run the property suite against every mutant; print the kill matrix.

Each mutant runs in its own pytest subprocess (``KV_TARGET=verify.mutants.catalogue:target_<name>``,
Hypothesis profile ``mutants`` = ``ci`` without shrinking: derandomized, so the matrix is
reproducible), with no ``-x``: every property runs, which gives the full matrix. ``--jobs``
mutants run at a time (one pytest process each). A mutant is *killed* when at least one
property fails on one of its targets; the matrix shows, per property family
(``properties/test_<family>.py``), ``X`` (killed there), ``.`` (ran, passed) or ``-``
(nothing ran: no property of that family applies). What a kill means
(:mod:`kernel_verify.mutants.kills`): each failing property is classified as a property
assertion, a non-finite output, an exception (the target's or the suite's own input checks) or a
crash, and a mutant counts as *killed as intended* only when a property it was written for
(``expected_killers``) fails by its assertion; the verdict says ``killed (other)``,
``killed (non-finite only)`` or ``killed (exception only)`` otherwise. The report ends with
``killed as intended K/N``; survivors are listed with the catalogue's explanation. Without
``--only``, the correct twins of :mod:`kernel_verify.mutants.controls` run the same way and
must pass. Also written:
``reports/mutants.json`` and ``reports/mutants.md`` (and ``--json FILE``), including which
properties killed nothing — by a complete run only (every mutant and control, ``--blackbox``);
a partial run writes them to ``build/mutants/`` (:func:`report_folder`), so that the committed
reports are never replaced by one without its black-box section or its other mutants.
``--blackbox`` adds a second pass: every feature-map mutant wrapped
black-box, with and without its declared family, and correct maps wrapped black-box as controls
(:mod:`kernel_verify.mutants.blackbox_runner`).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from kernel_verify.mutants.base import Mutant
from kernel_verify.mutants.catalogue import MUTANTS, get_mutant
from kernel_verify.mutants.kills import (
    control_failed,
    describe,
    failures,
    intended,
    killed,
    verdict_word,
)
from kernel_verify.mutants.paths import credit_by_path, markdown_rows, target_dtypes
from kernel_verify.runner import SuiteRun, Verdict, run_suite
from kernel_verify.verify import atomic
from kernel_verify.verify.paths import reports_dir

PROFILE = "mutants"  # the ci profile without shrinking (properties/conftest.py)
TIMEOUT = 600.0


def _families(runs: dict[str, SuiteRun]) -> list[str]:
    return sorted({v.family for r in runs.values() for v in r.verdicts})


def _cell(verdicts: list[Verdict], family: str) -> str:
    mine = [v for v in verdicts if v.family == family]
    if any(v.outcome == "fail" for v in mine):
        return "X"
    if any(v.outcome == "pass" for v in mine):
        return "."
    return "-"


def _intended(m: Mutant, run: SuiteRun) -> bool:
    return bool(intended(run, m.expected_killers))


def kill_matrix(mutants: list[Mutant], runs: dict[str, SuiteRun]) -> str:
    families = _families(runs)
    w = max(len(m.name) for m in mutants)
    head = " ".join(f"{i:>2}" for i in range(1, len(families) + 1))
    lines = [f"{'mutant'.ljust(w)}  {head}  verdict"]
    for m in mutants:
        run = runs[m.name]
        cells = " ".join(f"{_cell(run.verdicts, f):>2}" for f in families)
        lines.append(f"{m.name.ljust(w)}  {cells}  {verdict_word(run, m.expected_killers)}")
    lines.append("")
    lines.extend(f"{i:>2} = {f}" for i, f in enumerate(families, 1))
    return "\n".join(lines)


def property_kills(runs: dict[str, SuiteRun]) -> dict[str, list[str]]:
    """``family::property`` → the mutants it killed (every property that ran appears)."""
    out: dict[str, list[str]] = {}
    for name, run in runs.items():
        for v in run.verdicts:
            key = f"{v.family}::{v.prop}"
            out.setdefault(key, [])
            if v.outcome == "fail" and name not in out[key]:
                out[key].append(name)
    return dict(sorted(out.items()))


def credit_table(mutants: list[Mutant],
                 runs: dict[str, SuiteRun]) -> dict[str, dict[str, list[str]]]:
    """``family::property`` → {mutant family (the target kind) → mutants it killed by its own
    assertion}; every property that ran on some mutant appears (empty when it killed none)."""
    out: dict[str, dict[str, list[str]]] = {}
    for m in mutants:
        run = runs[m.name]
        for v in run.verdicts:
            if v.outcome in ("pass", "fail"):  # it ran on this mutant
                out.setdefault(f"{v.family}::{v.prop}", {})
        for prop, kind in failures(run):
            if kind == "property":
                out.setdefault(prop, {}).setdefault(m.family, []).append(m.name)
    return dict(sorted(out.items()))


def _markdown(mutants: list[Mutant], runs: dict[str, SuiteRun], seconds: float,
              controls: list[Mutant] | None = None, commit: str = "unknown",
              fingerprint: str = "") -> str:
    killed_any = [m for m in mutants if killed(runs[m.name])]
    as_meant = [m for m in mutants if _intended(m, runs[m.name])]
    families = _families(runs)
    lines = [
        "# Mutation testing: kill matrix",
        "",
        f"Generated by `kernel-verify mutants` (Hypothesis profile `{PROFILE}`), "
        f"{len(mutants)} mutants, {seconds:.0f} s. `X` killed by that property family, `.` ran "
        "and passed, `-` no property of that family applies. *Verdict*: `killed` only when a "
        "property the mutant was written for (*intended*) fails by its own assertion; "
        "`killed (other)` by another property; `killed (non-finite only)`, `killed (exception "
        "only)`: only by NaN/Inf outputs, or by an exception (the target's, or the suite's own "
        "input checks) — not counted as killed. *Killed by*: every failing property with the "
        "kind of its failure.",
        "",
        f"Source: commit `{commit}` (the checkout the command ran from).",
        "",
        *([fingerprint, ""] if fingerprint else []),
        "| mutant | family | " + " | ".join(families) + " | verdict | intended | killed by |",
        "|---|---|" + "---|" * len(families) + "---|---|---|",
    ]
    for m in mutants:
        run = runs[m.name]
        cells = " | ".join(_cell(run.verdicts, f) for f in families)
        verdict = verdict_word(run, m.expected_killers)
        if verdict != "killed":
            verdict = f"**{verdict}**"
        wanted = ", ".join(k.replace("::test_", "::") for k in m.expected_killers)
        lines.append(f"| `{m.name}` | {m.family} | {cells} | {verdict} | {wanted} | "
                     f"{describe(run)} |")
    lines += ["", f"**killed as intended {len(as_meant)}/{len(mutants)}** (by any failure: "
              f"{len(killed_any)}/{len(mutants)})", ""]
    if controls:
        failed = [c for c in controls if control_failed(runs[c.name])]
        lines += ["## Controls: correct twins of the mutant code (must all pass)", "",
                  "| control | family | what | result | failures |", "|---|---|---|---|---|"]
        for c in controls:
            run = runs[c.name]
            state = ("crashed" if run.crashed else
                     "**FAILED**" if control_failed(run) else "pass")
            lines.append(f"| `{c.name}` | {c.family} | {c.description} | {state} | "
                         f"{describe(run)} |")
        lines += ["", f"**controls failed: {len(failed)}/{len(controls)}**", ""]
    lines += ["## Not killed as intended", ""]
    survivors = [m for m in mutants if m not in as_meant]
    lines += [f"- `{m.name}` ({verdict_word(runs[m.name], m.expected_killers)}): "
              f"{m.description}. {m.expected_survivor_reason or _why(m, runs[m.name])}"
              for m in survivors] or ["None."]
    lines += ["", "## Mutants killed per property", ""]
    for prop, names in property_kills({m.name: runs[m.name] for m in mutants}).items():
        lines.append(f"- `{prop}`: {len(names)}" + (f" ({', '.join(names)})" if names else
                                                     " — kills none in this catalogue"))
    lines += ["", "## Property × target kind → the planted defects it catches", "",
              "Only failures of kind `property` (the property's own assertion) count; a property "
              "listed with none catches no planted defect of this catalogue "
              "(`tests/test_property_credits.py` keeps this table complete).", "",
              "| property | target kind | mutants it kills by its assertion |", "|---|---|---|"]
    for prop, by_kind in credit_table(mutants, runs).items():
        if not by_kind:
            lines.append(f"| `{prop}` | — | **none** |")
        for kind, names in by_kind.items():
            lines.append(f"| `{prop}` | {kind} | {', '.join(names)} |")
    lines += ["", "## Credit per dtype path", "",
              "A property is credited on a dtype path (float64, float32, half = float16 and "
              "bfloat16) only where it kills a mutant on that path by its assertion "
              "(`kernel_verify/mutants/paths.py`); on the paths it ran on without a kill it is "
              "not credited.", "", *markdown_rows(_credit_by_path(mutants, runs))]
    lines += ["", "## Evidence (first failure per killed mutant)", ""]
    for m in killed_any:
        v = next(v for v in runs[m.name].verdicts if v.outcome == "fail")
        first = v.evidence.splitlines()[0] if v.evidence else ""
        lines.append(f"- `{m.name}` — `{v.family}::{v.prop}`: {first}")
    return "\n".join(lines) + "\n"


def _why(m: Mutant, run: SuiteRun | None = None) -> str:
    expected = ", ".join(m.expected_killers) or "none"
    got = f" Failed: {describe(run)}." if run is not None and failures(run) else ""
    return f"Not caught as intended; expected killers: {expected}.{got}"


def run_one(m: Mutant) -> SuiteRun:
    return run_suite(m.spec, profile=PROFILE, jobs=1, timeout=TIMEOUT)


def run_spec(spec: str, paths: tuple[str, ...] | None = None) -> SuiteRun:
    return run_suite(spec, profile=PROFILE, jobs=1, timeout=TIMEOUT, paths=paths)


def report_folder(only: Sequence[str] | None, blackbox: bool) -> tuple[Path, str]:
    """Where a run writes mutants.md and .json, and what makes it partial ("" when complete).
    Only a complete run — every mutant, every control, and the black-box pass — replaces the
    committed reports (:func:`kernel_verify.verify.paths.reports_dir`); a partial one (``--only``,
    or no ``--blackbox``: its report would lack the black-box section) writes beside the other
    untracked outputs, ``build/mutants/`` next to the reports folder."""
    missing = [why for why, yes in (("--only", bool(only)), ("no --blackbox", not blackbox))
               if yes]
    if not missing:
        return reports_dir(), ""
    return reports_dir().resolve().parent / "build" / "mutants", ", ".join(missing)


def run_mutants(only: Sequence[str] | None = None, *, jobs: int = 2, json_out: str | None = None,
                blackbox: bool = False) -> int:
    """``kernel-verify mutants [--only NAME ...] [--jobs J] [--json FILE] [--blackbox]``: run the
    suite on every mutant (``only``: those named; no controls then) and every control in ``jobs``
    threads, print the kill matrix, write reports/mutants.md and .json (and ``json_out``); 2 if
    the suite did not run on a mutant, else 0."""
    try:
        mutants = [get_mutant(n) for n in only] if only else list(MUTANTS)
    except KeyError as err:
        print(f"kernel-verify mutants: {err.args[0]}", file=sys.stderr)
        return 2
    from kernel_verify.mutants.controls import CONTROLS
    from kernel_verify.provenance import code_state

    controls = [] if only else list(CONTROLS)
    commit = code_state()  # stamped on the report: the code the matrix came from
    from kernel_verify.fingerprints import json_field, markdown_line

    # the sources' fingerprint as the run starts (kernel_verify.fingerprints.REPORTS)
    stamp_md, stamp_json = markdown_line("reports/mutants.md"), json_field("reports/mutants.json")
    jobs = max(1, int(jobs or 1))
    start = time.monotonic()
    runs: dict[str, SuiteRun] = {}
    everything = [*mutants, *controls]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for m, run in zip(everything, pool.map(run_one, everything), strict=True):
            runs[m.name] = run
            state = (("FAILED" if control_failed(run) else "pass") if m in controls
                     else verdict_word(run, m.expected_killers))
            print(f"  {m.name}: {state} ({run.seconds:.0f} s)", flush=True)
    seconds = time.monotonic() - start
    n_killed = sum(_intended(m, runs[m.name]) for m in mutants)
    print()
    print(kill_matrix(mutants, runs))
    survivors = [m for m in mutants if not _intended(m, runs[m.name])]
    if survivors:
        print("\nNot killed as intended:")
        for m in survivors:
            print(f"  {m.name} ({verdict_word(runs[m.name], m.expected_killers)}): "
                  f"{m.description}. {m.expected_survivor_reason or _why(m, runs[m.name])}")
    false_alarms = [c.name for c in controls if control_failed(runs[c.name])]
    for name in false_alarms:
        print(f"\nCONTROL FAILED {name}: {describe(runs[name])}")
    crashed = [m.name for m in mutants if runs[m.name].crashed]
    for name in crashed:
        print(f"\n{name}: the suite did not run:\n{runs[name].output_tail}", file=sys.stderr)
    payload = {**_payload(mutants, controls, runs, commit, seconds), **stamp_json}
    markdown = _markdown(mutants, runs, seconds, controls, commit, stamp_md)
    bb_lines: list[str] = []
    if blackbox:
        from kernel_verify.mutants.blackbox_runner import run_blackbox

        print("\nBlack-box pass (feature-map mutants and controls through sample_fn only):")
        section, payload["blackbox"], bb_lines = run_blackbox(mutants, runs, run_spec, jobs)
        markdown += section
    reports, partial = report_folder(only, blackbox)
    reports.mkdir(parents=True, exist_ok=True)
    atomic.write_text(reports / "mutants.json", json.dumps(payload, indent=2, ensure_ascii=False))
    atomic.write_text(reports / "mutants.md", markdown)
    if json_out:
        atomic.write_text(json_out, json.dumps(payload, indent=2, ensure_ascii=False))
    print(f"\n({seconds:.0f} s; {reports / 'mutants.md'}, {reports / 'mutants.json'})")
    if partial:
        print(f"a partial run ({partial}): the committed reports/mutants.md and .json are "
              "written only by a complete run (every mutant, the controls and --blackbox)")
    print(f"killed as intended {n_killed}/{len(mutants)}"
          + (f"; controls failed {len(false_alarms)}/{len(controls)}" if controls else ""))
    if bb_lines:
        print(bb_lines[-1])
    return 2 if crashed else 0


def _credit_by_path(mutants: list[Mutant], runs: dict[str, SuiteRun]) -> dict[str, dict]:
    """The credit table per dtype path (:mod:`kernel_verify.mutants.paths`) of the mutants."""
    by_name = {m.name: m for m in mutants}

    def dtypes(name: str) -> list[str]:  # built only for cases that name no dtype
        try:
            return target_dtypes(by_name[name].targets)
        except Exception:  # a mutant whose targets cannot be built here: the default path
            return []

    return credit_by_path({m.name: runs[m.name] for m in mutants}, dtypes)


def _payload(mutants: list[Mutant], controls: list[Mutant], runs: dict[str, SuiteRun],
             commit: str, seconds: float) -> dict:
    """reports/mutants.json of a run: every mutant's and control's verdicts and failures."""
    return {
        "profile": PROFILE, "commit": commit, "seconds": seconds,
        "killed": sum(_intended(m, runs[m.name]) for m in mutants),
        "total": len(mutants),
        "killed_any": sum(killed(runs[m.name]) for m in mutants),
        "mutants": [
            {"name": m.name, "family": m.family, "description": m.description,
             "expected_killers": list(m.expected_killers),
             "killed": _intended(m, runs[m.name]), "killed_any": killed(runs[m.name]),
             "verdict": verdict_word(runs[m.name], m.expected_killers),
             "intended_killers": intended(runs[m.name], m.expected_killers),
             "failures": [{"property": p, "kind": k} for p, k in failures(runs[m.name])],
             "crashed": runs[m.name].crashed, "seconds": runs[m.name].seconds,
             "verdicts": [asdict(v) for v in runs[m.name].verdicts if v.outcome != "skip"]}
            for m in mutants
        ],
        "controls": [
            {"name": c.name, "family": c.family, "description": c.description,
             "failed": control_failed(runs[c.name]),
             "failures": [{"property": p, "kind": k} for p, k in failures(runs[c.name])]}
            for c in controls
        ],
        "controls_failed": sum(control_failed(runs[c.name]) for c in controls),
        "property_kills": property_kills({m.name: runs[m.name] for m in mutants}),
        "credit_table": credit_table(mutants, runs),
        "credit_by_path": _credit_by_path(mutants, runs),
    }
