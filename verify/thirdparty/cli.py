"""``kernel-verify check module:attribute``: the property suite against a third-party adapter.

The suite runs in a pytest subprocess (``python -m pytest <property files>
--ignore=properties/unit``) with ``KV_TARGET`` set, so the adapter is imported exactly as the
properties import it. The property files are those that take their targets from
``properties/targets.py`` (:func:`target_property_files`); files testing built-in code only are
left out. Per-test
outcomes come back through ``--junitxml`` and are folded into a verdict per (property, target):
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
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: The project root (holds ``properties/``).
ROOT = Path(__file__).resolve().parents[2]
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


def _split_name(name: str, known: tuple[str, ...] = ()) -> tuple[str, str]:
    """``test_x[mutant:a-numpy-float64]`` → (``test_x``, ``mutant:a``): the target is the
    ``-``-separated part of the parametrisation id equal to a known target name (target names
    may contain brackets and colons), else the whole id."""
    if "[" not in name:
        return name, ""
    base, ids = name[: name.index("[")], name[name.index("[") + 1 : -1]
    for t in sorted(known, key=len, reverse=True):
        if ids == t or ids.startswith(t + "-") or ids.endswith("-" + t) or f"-{t}-" in ids:
            return base, t
    return base, ids


def parse_junit(path: Path, known: tuple[str, ...] = ()) -> list[Outcome]:
    """Outcomes from a pytest ``--junitxml`` file (``known``: target names, see _split_name)."""
    root = ET.parse(path).getroot()
    out = []
    for case in root.iter("testcase"):
        classname = case.get("classname", "")
        stem = classname.rsplit(".", 1)[-1]
        family = stem.removeprefix("test_")
        prop, target = _split_name(case.get("name", ""), known)
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = (node.get("message") or "") + "\n" + (node.text or "")
                break
        out.append(Outcome(family, prop, target, outcome, message.strip()))
    return out


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
    """The property files that take their targets from ``properties/targets.py``: the ones that
    can say anything about a third-party target (other files in ``properties/`` test built-in
    code only and would just add run time)."""
    files = sorted((ROOT / "properties").glob("test_*.py"))
    chosen = [f for f in files if "properties.targets" in f.read_text(encoding="utf-8")]
    return tuple(str(f.relative_to(ROOT)) for f in chosen) or ("properties",)


def run_suite(spec: str | None, *, profile: str | None = None, keyword: str | None = None,
              jobs: int = 2, paths: tuple[str, ...] | None = None,
              timeout: float | None = None, known: tuple[str, ...] = ()) -> SuiteRun:
    """Run the property suite in a subprocess against ``spec`` (None: built-in targets)."""
    paths = target_property_files() if paths is None else paths
    env = dict(os.environ)
    if spec:
        env["KV_TARGET"] = spec
    else:
        env.pop("KV_TARGET", None)
    if profile:
        env["HYPOTHESIS_PROFILE"] = profile
    extra = [str(ROOT), os.getcwd()]
    env["PYTHONPATH"] = os.pathsep.join([*extra, *filter(None, [env.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="kv-check-") as tmp:
        xml = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", *paths, "-p", "no:cacheprovider",
               "--ignore=properties/unit", "-q", "-o", "junit_logging=no",
               f"--junitxml={xml}", "-n", str(jobs if jobs > 1 else 0)]
        if keyword:
            cmd += ["-k", keyword]
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=timeout, check=False)
            rc, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as err:
            rc, text = -1, f"timed out after {timeout} s\n{err.stdout or ''}"
        seconds = time.monotonic() - start
        outcomes = parse_junit(xml, known) if xml.exists() else []
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
    from verify.thirdparty.loader import load_targets

    for p in (str(ROOT), os.getcwd()):
        if p not in sys.path:
            sys.path.insert(0, p)
    targets = load_targets(spec)
    names = ", ".join(f"{t.name} ({type(t).__name__})" for t in targets)
    print(f"kernel-verify check: {spec} → {len(targets)} target(s): {names}")
    return tuple(t.name for t in targets)


def run_check(args: argparse.Namespace) -> int:
    """``kernel-verify check TARGET [--profile P] [-k EXPR] [--json FILE]``."""
    try:
        known = _validate_target(args.target)
    except (ValueError, TypeError) as err:
        print(f"kernel-verify check: {err}", file=sys.stderr)
        return 2
    jobs = int(getattr(args, "jobs", 2) or 2)
    run = run_suite(args.target, profile=args.profile, keyword=args.keyword, jobs=jobs,
                    known=known)
    verdicts = run.verdicts
    print(verdict_table(verdicts))
    counts = summary(verdicts)
    print(f"\n{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped "
          f"({run.seconds:.0f} s; profile {args.profile or 'default'})")
    if args.json_out:
        payload = {"target": args.target, "returncode": run.returncode, "seconds": run.seconds,
                   "counts": counts, "verdicts": [asdict(v) for v in verdicts]}
        Path(args.json_out).write_text(json.dumps(payload, indent=2, ensure_ascii=False))
    if run.crashed:
        print(f"kernel-verify check: the suite did not run (pytest exit {run.returncode}):\n"
              f"{run.output_tail}", file=sys.stderr)
        return 2
    return 1 if counts["fail"] else 0
