"""``kernel-verify conformance [LIBRARY ...]``: a Markdown page per adapted library.

For each library (its record, :func:`kernel_verify.adapters.library.records`) the shipped
property suite runs
against ``kernel_verify.adapters.<library>:targets`` exactly as ``kernel-verify check`` runs it
(:func:`kernel_verify.runner.run_suite`), every confirmed finding is re-measured
by :mod:`kernel_verify.adapters.confirm`, and ``reports/conformance/<library>.md`` records:
versions (library, its dependencies, torch, numpy, Python, kernel-verify), the commands, wall
times, what the library does right, each finding (mechanism, independent measurement with its
95 % interval, reproducing commands, fix), every failing property with its evidence and what
explains it, and the verdict of every property. A library that is not installed gets a page
saying so, with the command that installs it.

Every page names the run it comes from: its time, the commit and a fingerprint of the code the
run depends on (:func:`code_fingerprint`); ``--reuse`` (rewrite a page from the saved
``<library>.json``) refuses saved results whose fingerprint differs from the code's.
"""

from __future__ import annotations

import ast
import hashlib
import json
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from kernel_verify.adapters._lazy import dist_version, missing_reason
from kernel_verify.adapters.library import CONTRACT_PROPERTIES, record, records
from kernel_verify.fingerprints import JSON_KEY, MARKER, json_field
from kernel_verify.provenance import code_fingerprint as _fingerprint
from kernel_verify.provenance import code_state
from kernel_verify.verify import atomic

#: Distributions whose versions every page records, besides the library and its dependencies.
COMMON = ("kernel-verify", "torch", "numpy", "hypothesis")


def code_fingerprint(key: str) -> str:
    """A hash of the code a conformance run depends on: the shipped property suite, the truth,
    the implementations (:func:`kernel_verify.provenance.code_fingerprint`) and this library's
    adapter module, less its record's text (:func:`_adapter_code`). A saved run whose
    fingerprint differs is older than the code; a page whose text alone changed is rewritten
    from it with ``--reuse``."""
    digest = hashlib.sha256(_fingerprint().encode())
    digest.update(_adapter_code(key).encode())
    return digest.hexdigest()[:12]


def _adapter_code(key: str, source: str | None = None) -> str:
    """The adapter module's source without its record block (from the comment line that names
    "the library's record", or else from ``LIBRARY =``, to the end of ``LIBRARY = Library(...)``),
    followed by what of the record the run reads: the known failures its findings declare.
    ``source``: the module's text (default: read from its file)."""
    if source is None:
        source = (Path(__file__).resolve().parent / f"{key}.py").read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    for node in ast.parse("".join(lines)).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "LIBRARY"):
            start = next((i for i in range(node.lineno - 1, -1, -1)
                          if "the library's record" in lines[i]), node.lineno - 1)
            lines = lines[:start] + lines[node.end_lineno:]
            break
    declared = sorted(record(key).known_failures().items())
    return "".join(lines) + repr(declared)


class StaleResults(RuntimeError):
    """``--reuse`` of saved results that an older version of the code produced."""


def versions(key: str) -> list[tuple[str, str]]:
    lib = record(key)
    rows = [(d, dist_version(d)) for d in (lib.dist, *lib.dependencies, *COMMON)]
    return [*rows, ("python", platform.python_version())]


def _spec(key: str) -> str:
    return record(key).spec


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _explain(v, key: str) -> str:
    known = record(key).explain(v.prop, v.target)
    if known is not None:
        return known
    if v.prop in CONTRACT_PROPERTIES:
        return ("the suite's own input contract (ValueError on NaN/Inf or mismatched shapes), "
                "which the library does not claim: not a numerical defect")
    return ("not confirmed by an independent route: reported to the kernel-verify maintainers "
            "as a possible suite issue, not as a library defect")


def page(key: str, run, confirmations: dict[str, str], seconds: dict[str, float],
         profile: str, provenance: dict[str, str] | None = None) -> str:
    """The Markdown page of library ``key`` from its suite run, its independent measurements
    (``confirmations``: name -> output) and their times."""
    lib = record(key)
    lines = _head(key, profile, provenance or {})
    reason = missing_reason(key)
    if reason is not None:
        lines += [f"**Not run**: {reason}.", ""]
        if lib.minor is not None:
            lines += [lib.minor, ""]
        return "\n".join(lines)
    scope = lib.scope
    if scope is not None:
        lines += ["## How the kernels were run", "", scope.text, ""]
        lines += [f"{i}. {w}" for i, w in enumerate(scope.workarounds, 1)] + [""]
    verdicts = run.verdicts
    lines += _run_lines(run, seconds, profile)
    lines += ["## What it does right", "", lib.right or "(see the verdicts)", ""]
    for name in lib.measured:
        lines += [f"`python -m kernel_verify.adapters.confirm {name}`:", "", "```",
                  confirmations.get(name, "(not run)"), "```", ""]

    def tagged(v) -> str:
        return f" {scope.tag}" if scope is not None and scope.covers(v.target) else ""

    passed = sorted({f"`{v.prop}` ({v.target}){tagged(v)}" for v in verdicts
                     if v.outcome == "pass" and v.target})
    if passed:
        lines += ["Properties passed by its targets: " + "; ".join(passed) + ".", ""]
    if lib.minor is not None:
        lines += ["Minor (not defects at realistic settings): " + lib.minor, ""]
    lines += _findings_lines(key, confirmations)
    lines += _failing_lines(key, verdicts, tagged)
    lines += ["## Every property", "", "| property | target | verdict | note |",
              "|---|---|---|---|"]
    for v in verdicts:
        note = _cell(v.evidence.splitlines()[0]) if v.evidence else ""
        note = f"{tagged(v).strip()} {note}".strip()
        if v.reduced:
            note = f"{note} [reduced: {v.reduced}]".strip()
        lines.append(f"| `{v.family}::{v.prop}` | {v.target or '—'} | {v.outcome} | {note} |")
    return "\n".join(lines) + "\n"


def _head(key: str, profile: str, prov: dict[str, str]) -> list[str]:
    """Title, provenance, versions and commands of a page."""
    lib = record(key)
    lines = [f"# Conformance: {lib.title}", "",
             f"Written {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by `kernel-verify conformance "
             f"{key}` (Hypothesis profile `{profile}`).", ""]
    if prov:
        lines += [f"From the run of {prov.get('run_at', '?')} at commit "
                  f"`{prov.get('commit', '?')}` (code fingerprint `{prov.get('fingerprint', '?')}`"
                  "; `kernel-verify conformance --reuse` refuses saved results whose fingerprint "
                  "differs from the code's)."
                  + (f" At most {prov['max_examples']} Hypothesis examples per property "
                     "(every call of this library is slow)." if prov.get("max_examples") else ""),
                  "", f"{MARKER}`{prov[JSON_KEY]}` (of the run's sources and "
                  "versions; `kernel-verify reports --stale` lists the reports whose sources "
                  "changed since)" if prov.get(JSON_KEY) else
                  f"{MARKER}none recorded (a run before reports carried one)", ""]
    lines += ["| package | version |", "|---|---|"]
    lines += [f"| {d} | {v} |" for d, v in versions(key)]
    lines += ["", "Commands:", "", "```bash",
              lib.install_hint,
              f"kernel-verify check {_spec(key)}        # the property suite, verdict table",
              f"kernel-verify conformance {key}          # this page",
              "python -m kernel_verify.adapters.confirm  # the independent measurements",
              "```", ""]
    return lines


def _run_lines(run, seconds: dict[str, float], profile: str) -> list[str]:
    """The suite run's counts and times, a reduced search, a crash."""
    from kernel_verify.properties.verdicts import count_line, summary

    verdicts = run.verdicts
    lines = [f"Property suite: {count_line(summary(verdicts))} in {run.seconds:.0f} s "
             "(one verdict per property × target, as `kernel-verify check` counts them); "
             "independent measurements: "
             f"{seconds.get('confirm', 0.0):.0f} s.", ""]
    reduced = [v for v in verdicts if v.reduced]
    if reduced:
        from kernel_verify.properties.profiles import CI_CASE_SECONDS, MIN_EXAMPLES

        slow = sorted({v.target for v in reduced})
        lines += [f"Reduced search: {len(reduced)} verdicts come from fewer Hypothesis examples "
                  f"than the property's own count, on the targets that declare the cost of a "
                  f"call (`call_seconds`): {', '.join(slow)}. The `{profile}` profile gives "
                  f"such a target at most max({MIN_EXAMPLES}, ⌊{CI_CASE_SECONDS:g} s / "
                  "call_seconds⌋) examples per property; every property still runs on it, and "
                  "the table's note says `reduced: n of N examples`.", ""]
    if run.crashed:
        lines += ["**The suite did not run**:", "", "```", run.output_tail, "```", ""]
    return lines


def _findings_lines(key: str, confirmations: dict[str, str]) -> list[str]:
    """The library's findings, each with its independent measurement and fix."""
    findings = record(key).findings
    lines = ["## Findings", ""]
    if not findings:
        lines += ["None found: every failing property (if any) is listed below with what "
                  "explains it.", ""]
    for i, f in enumerate(findings, 1):
        lines += [f"### {i}. {f.title}", "", f.what, "",
                  "Independent measurement (`python -m kernel_verify.adapters.confirm "
                  f"{f.confirm}`):", "", "```", confirmations.get(f.confirm, "(not run)"), "```",
                  ""]
        for prop in f.properties:
            lines += [f"Property: `kernel-verify check {_spec(key)} -k {prop}`", ""]
        lines += [f"**Fix**: {f.fix}", ""]
    return lines


def _failing_lines(key: str, verdicts, tagged) -> list[str]:
    """Every failing (or known, stale, crashed) verdict with what explains it."""
    fails = [v for v in verdicts if v.outcome in ("fail", "known", "stale", "crash")]
    lines = ["## Failing properties", ""]
    if not fails:
        lines += ["None.", ""]
    for v in fails:
        word = {"known": " (declared known failure of the adapter)",
                "stale": " (declared known failure that PASSED: stale declaration)",
                "crash": " (a test worker crashed)"}.get(v.outcome, "")
        lines += [f"* `{v.family}::{v.prop}` on `{v.target or '—'}`{word}{tagged(v)}: "
                  f"{_explain(v, key)}. "
                  f"Reproduce: `kernel-verify check {_spec(key)} -k {v.prop}`", "",
                  "  ```", *[f"  {ln}" for ln in v.evidence.splitlines()], "  ```", ""]
    return lines


def conformance(key: str, *, out_dir: Path, profile: str, quick: bool, jobs: int = 2,
                reuse: bool = False) -> Path:
    """Run one library's conformance and write its page; returns the page's path. The raw
    outcomes and measurements are kept in ``<library>.json``; ``reuse`` rewrites the page from
    them without running anything."""
    from kernel_verify.adapters import confirm
    from kernel_verify.runner import Outcome, SuiteRun, run_suite

    run, confirmations, seconds, provenance = None, {}, {}, {}
    out_dir.mkdir(parents=True, exist_ok=True)
    saved = out_dir / f"{key}.json"
    if missing_reason(key) is None:
        if reuse and saved.exists():
            data = json.loads(saved.read_text(encoding="utf-8"))
            provenance = data.get("provenance", {})
            now = code_fingerprint(key)
            if provenance.get("fingerprint") != now:
                raise StaleResults(
                    f"{saved}: the saved run comes from code fingerprint "
                    f"{provenance.get('fingerprint', '(none recorded)')} (commit "
                    f"{provenance.get('commit', 'unknown')}), the code is now {now}: run "
                    f"`kernel-verify conformance {key}` without --reuse")
            run = SuiteRun(data["spec"], data["returncode"], data["seconds"],
                           [Outcome(**o) for o in data["outcomes"]], data["output_tail"])
            confirmations, seconds = data["confirmations"], data["confirm_seconds"]
            for f in record(key).findings:  # findings added since the run
                if f.confirm not in confirmations:
                    confirmations[f.confirm] = confirm.run(f.confirm, quick)
        else:
            provenance = {"commit": code_state(), "fingerprint": code_fingerprint(key),
                          "run_at": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
                          # {JSON_KEY: …} of kernel_verify.fingerprints (page and JSON alike)
                          **json_field(f"reports/conformance/{key}.json")}
            # Slow targets declare call_seconds (fla's kernels, NystromAttention's padded
            # layer): the profile cuts their examples per property and each verdict says so.
            # target_only, as `kernel-verify check` runs it: the suite's tests of the project's
            # own code (no target) are not verdicts on the library
            run = run_suite(_spec(key), profile=profile, jobs=jobs, target_only=True)
            start = time.monotonic()
            lib = record(key)
            for name in (*(f.confirm for f in lib.findings), *lib.measured):
                confirmations[name] = confirm.run(name, quick)
            seconds["confirm"] = time.monotonic() - start
        atomic.write_text(saved, json.dumps({
            "spec": run.spec, "returncode": run.returncode, "seconds": run.seconds,
            "outcomes": [asdict(o) for o in run.outcomes], "output_tail": run.output_tail,
            "confirmations": confirmations, "confirm_seconds": seconds,
            "provenance": provenance,
            **({JSON_KEY: provenance[JSON_KEY]} if JSON_KEY in provenance else {}),
        }, indent=1, ensure_ascii=False))
    path = out_dir / f"{key}.md"
    atomic.write_text(path, page(key, run, confirmations, seconds, profile, provenance))
    return path


def run_conformance(libraries: Sequence[str] = (), *, out: str = "reports/conformance",
                    profile: str = "dev", quick: bool = False, reuse: bool = False) -> int:
    """``kernel-verify conformance [LIBRARY ...] [--out DIR] [--profile P] [--quick]
    [--reuse]``: the page of each library (default: every adapted library); 2 for an unknown
    library or stale saved results, else 0."""
    known = records()
    keys = list(libraries) or list(known)
    unknown = sorted(set(keys) - set(known))
    if unknown:
        print(f"kernel-verify conformance: unknown libraries {unknown}; known: {list(known)}")
        return 2
    total = time.monotonic()
    for key in keys:
        start = time.monotonic()
        reason = missing_reason(key)
        try:
            path = conformance(key, out_dir=Path(out), profile=profile, quick=quick,
                               reuse=reuse)
        except StaleResults as err:
            print(f"kernel-verify conformance: {err}", file=sys.stderr)
            return 2
        status = f"skipped ({reason}; {known[key].install_hint})" if reason else "ran"
        print(f"{key}: {status}, {time.monotonic() - start:.0f} s → {path}", flush=True)
    print(f"conformance: {len(keys)} page(s) in {time.monotonic() - total:.0f} s")
    return 0
