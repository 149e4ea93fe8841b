"""``kernel-verify check module:attribute``: the property suite against a third-party adapter.

The shipped suite (the installed :mod:`kernel_verify.properties`) runs in a pytest subprocess
with ``KV_TARGET`` set, from the caller's working directory, so the adapter is imported exactly
as the properties import it and a crashing adapter cannot take the command down. The property
files are those that take their targets from :mod:`kernel_verify.properties.targets`
(:func:`target_property_files`); files testing built-in code only are left out. Per-test
outcomes come back as JSON records (:mod:`kernel_verify.properties.results`) and are folded into
a verdict per (property, target):
``fail`` if any example/parametrisation failed (or errored), ``pass`` if some passed and none
failed, ``skip`` (with the reason) if every one was skipped. The command prints the verdict table
with the first lines of each failure message and exits 1 when any property fails (2 when the
suite could not run at all).

:func:`run_suite` is shared with ``kernel-verify mutants`` (:mod:`verify.mutants.runner`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import kernel_verify.properties as _suite
from kernel_verify.verify import atomic

#: The folder of the shipped property suite.
SUITE_DIR = Path(_suite.__file__).resolve().parent
EVIDENCE_LINES = 4


@dataclass(frozen=True)
class Outcome:
    """One collected test item's result."""

    family: str  # file stem without "test_": attention_identities, random_matrices, …
    prop: str  # the test function
    target: str  # the target id (first parametrisation id), or "" when unparametrised
    outcome: str  # passed, failed, error, skipped
    message: str = ""


@dataclass(frozen=True)
class Verdict:
    family: str
    prop: str
    target: str
    outcome: str  # pass, fail, skip
    evidence: str = ""


@dataclass
class SuiteRun:
    spec: str
    returncode: int
    seconds: float
    outcomes: list[Outcome] = field(default_factory=list)
    output_tail: str = ""

    @property
    def verdicts(self) -> list[Verdict]:
        return fold(self.outcomes)

    @property
    def crashed(self) -> bool:
        """pytest could not run the suite (usage/internal/collection error, or no results)."""
        return self.returncode not in (0, 1, 5) or not self.outcomes


def load_results(path: Path) -> list[Outcome]:
    """Outcomes from the JSON records of :mod:`kernel_verify.properties.results`: one per test,
    the worst phase winning (an error in setup or teardown is an error of the test)."""
    worst: dict[str, Outcome] = {}
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    for line in path.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        outcome = r["outcome"]
        if outcome == "failed" and r["when"] != "call":
            outcome = "error"
        if r["when"] != "call" and outcome == "passed":
            continue
        o = Outcome(r["family"], r["prop"], r["target"], outcome, r["message"].strip())
        old = worst.get(r["nodeid"])
        if old is None or rank[o.outcome] > rank[old.outcome]:
            worst[r["nodeid"]] = o
    return list(worst.values())


def _evidence(message: str) -> str:
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    # Prefer the assertion lines ("E   ...") of a pytest traceback.
    errors = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    return "\n".join((errors or lines)[:EVIDENCE_LINES])


def _skip_reason(message: str) -> str:
    first = message.splitlines()[0] if message else ""
    return first.split(": ", 1)[-1] if first.startswith(("Skipped", "skip")) else first


def fold(outcomes: list[Outcome]) -> list[Verdict]:
    """One verdict per (family, property, target) (see the module docstring)."""
    groups: dict[tuple[str, str, str], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.family, o.prop, o.target), []).append(o)
    verdicts = []
    for (family, prop, target), items in sorted(groups.items()):
        bad = [o for o in items if o.outcome in ("failed", "error")]
        if bad:
            verdicts.append(Verdict(family, prop, target, "fail", _evidence(bad[0].message)))
        elif any(o.outcome == "passed" for o in items):
            verdicts.append(Verdict(family, prop, target, "pass"))
        else:
            verdicts.append(Verdict(family, prop, target, "skip", _skip_reason(items[0].message)))
    return verdicts


def target_property_files() -> tuple[str, ...]:
    """The property files that take their targets from :mod:`kernel_verify.properties.targets`:
    the ones that can say anything about a third-party target (other files in the suite test
    built-in code only and would just add run time)."""
    files = sorted(SUITE_DIR.glob("test_*.py"))
    marker = "kernel_verify.properties.targets"
    chosen = [f for f in files if marker in f.read_text(encoding="utf-8")]
    return tuple(str(f) for f in chosen) or (str(SUITE_DIR),)


def run_suite(spec: str | None, *, profile: str | None = None, keyword: str | None = None,
              jobs: int = 2, paths: tuple[str, ...] | None = None,
              timeout: float | None = None) -> SuiteRun:
    """Run the shipped property suite in a subprocess against ``spec`` (None: built-in
    targets), from the current working directory."""
    paths = target_property_files() if paths is None else paths
    env = dict(os.environ)
    if spec:
        env["KV_TARGET"] = spec
    else:
        env.pop("KV_TARGET", None)
    if profile:
        env["HYPOTHESIS_PROFILE"] = profile
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *filter(None, [env.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="kv-check-") as tmp:
        results = Path(tmp) / "results.jsonl"
        ini = Path(tmp) / "pytest.ini"
        # An empty ini of our own: the caller's pytest configuration (addopts, plugins) must
        # not change what the suite does.
        atomic.write_text(ini, "[pytest]\n")
        env["KV_RESULTS"] = str(results)
        cmd = [sys.executable, "-m", "pytest", *paths, "-c", str(ini), "--rootdir", str(SUITE_DIR),
               "-p", "no:cacheprovider", "-p", "kernel_verify.properties.results", "-q",
               "-n", str(jobs if jobs > 1 else 0)]
        if keyword:
            cmd += ["-k", keyword]
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                  timeout=timeout, check=False)
            rc, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as err:
            rc, text = -1, f"timed out after {timeout} s\n{err.stdout or ''}"
        seconds = time.monotonic() - start
        outcomes = load_results(results) if results.exists() else []
    tail = "\n".join(text.strip().splitlines()[-15:])
    return SuiteRun(spec or "built-in", rc, seconds, outcomes, tail)


def verdict_table(verdicts: list[Verdict], *, show_passed: bool = True) -> str:
    """A plain-text table property × target with the evidence of failures."""
    rows = [v for v in verdicts if show_passed or v.outcome != "pass"]
    if not rows:
        return "(no properties ran)"
    w_prop = max(len(f"{v.family}::{v.prop}") for v in rows)
    w_target = max(len(v.target) for v in rows)
    lines = []
    for v in rows:
        label = f"{v.family}::{v.prop}".ljust(w_prop)
        detail = ""
        if v.outcome == "skip":
            detail = f"  ({v.evidence})"
        lines.append(f"{label}  {v.target.ljust(w_target)}  {v.outcome.upper()}{detail}")
        if v.outcome == "fail":
            lines.extend(f"{'':{w_prop}}    | {ln}" for ln in v.evidence.splitlines())
    return "\n".join(lines)


def summary(verdicts: list[Verdict]) -> dict[str, int]:
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for v in verdicts:
        counts[v.outcome] += 1
    return counts


def _validate_target(spec: str) -> tuple[str, ...]:
    """Load the adapter in this process first: a broken spec gets a clear error at once."""
    from kernel_verify.verify.thirdparty.loader import load_targets

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    targets = load_targets(spec)
    names = ", ".join(f"{t.name} ({type(t).__name__})" for t in targets)
    print(f"kernel-verify check: {spec} → {len(targets)} target(s): {names}")
    return tuple(t.name for t in targets)


def run_check(args: argparse.Namespace) -> int:
    """``kernel-verify check TARGET [--profile P] [-k EXPR] [--json FILE]``."""
    try:
        _validate_target(args.target)
    except (ValueError, TypeError) as err:
        print(f"kernel-verify check: {err}", file=sys.stderr)
        return 2
    jobs = int(getattr(args, "jobs", 2) or 2)
    run = run_suite(args.target, profile=args.profile, keyword=args.keyword, jobs=jobs,
)
    verdicts = run.verdicts
    print(verdict_table(verdicts))
    counts = summary(verdicts)
    print(f"\n{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped "
          f"({run.seconds:.0f} s; profile {args.profile or 'default'})")
    if args.json_out:
        payload = {"target": args.target, "returncode": run.returncode, "seconds": run.seconds,
                   "counts": counts, "verdicts": [asdict(v) for v in verdicts]}
        atomic.write_text(args.json_out, json.dumps(payload, indent=2, ensure_ascii=False))
    if run.crashed:
        print(f"kernel-verify check: the suite did not run (pytest exit {run.returncode}):\n"
              f"{run.output_tail}", file=sys.stderr)
        return 2
    return 1 if counts["fail"] else 0
