"""``kernel-verify check module:attribute``: the property suite against a third-party adapter.

The shipped suite (the installed :mod:`kernel_verify.properties`) runs in a pytest subprocess
with ``KV_TARGET`` set, from the caller's working directory, so the adapter is imported exactly
as the properties import it and a crashing adapter cannot take the command down. The property
files are those that take their targets from :mod:`kernel_verify.properties.targets`
(:func:`target_property_files`); files testing built-in code only are left out. Per-test
outcomes come back as JSON records (:mod:`kernel_verify.properties.results`) and are folded into
a verdict per (property, target) (with ``reduced`` when its cases ran fewer Hypothesis examples
because the target declares ``call_seconds``, :mod:`kernel_verify.properties.profiles`):
``fail`` if any example/parametrisation failed (or errored), ``crash`` if a test worker died
while running it (a crash, not a failed property), ``pass`` if some passed and none failed,
``skip`` (with the reason) if every one was skipped, ``known`` if it fails as the target
declared in ``known_failures`` (never counted as a pass), ``stale`` if a declared known failure
passed on every case (the declaration is out of date; exit status 1), ``not credited`` (with
the reason) if it passed only in cases that could not fail for this target (the test recorded
``kv_uncredited``: an input-policy property for a target that does not claim
``validates_input``, whose outcome is an input-policy note, not a pass). ``known``, ``stale``,
``skip`` and ``not credited`` are verdict words of their own: none is counted as a pass. Only
properties that exercised the target count: records of tests not parametrised by a target (the
suite's own code) and of tests marked ``kv_builtin_only`` are left out of the totals.
Input-policy observations (how a target that does not claim ``validates_input`` treats NaN
input or mismatched shapes) are listed as notes beside those ``not credited`` verdicts.
The command prints the verdict table with the evidence of each failure —
every assertion line of every distinct failure (a Hypothesis ``ExceptionGroup`` included), the
falsifying example, the backends that failed — and one command that re-runs the failing case,
and exits 1 when any property fails (2 when the suite could not run at all or a worker
crashed).

:func:`run_suite` is shared with ``kernel-verify mutants``
(:mod:`kernel_verify.mutants.runner`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import kernel_verify.properties as _suite
from kernel_verify.verify import atomic

#: The folder of the shipped property suite.
SUITE_DIR = Path(_suite.__file__).resolve().parent
#: At most this many evidence lines per failure (each printed in full); the JSON output keeps
#: the whole message.
EVIDENCE_LINES = 60
#: A results record of a finished test: its call phase, or a setup that did not pass (a skip).
_FINISHED = re.compile(rb'"when": "(?:call|setup", "outcome": "(?:skipped|failed))"')
_EXCEPTION = re.compile(r"^(\w+\.)*\w*(Error|Exception|Group|Failure)\b:")


@dataclass(frozen=True)
class Outcome:
    """One collected test item's result."""

    family: str  # file stem without "test_": attention_identities, random_matrices, …
    prop: str  # the test function
    target: str  # the target id (first parametrisation id), or "" when unparametrised
    outcome: str  # passed, failed, error, skipped, crash
    message: str = ""
    backend: str = ""
    notes: tuple[str, ...] = ()
    repro: str = ""
    uncredited: tuple[str, ...] = ()  # why a passed case could not fail for this target
    reduced: tuple[str, ...] = ()  # fewer examples than the property's own (call_seconds)


@dataclass(frozen=True)
class Verdict:
    family: str
    prop: str
    target: str
    outcome: str  # pass, fail, crash, skip, known, stale, not credited
    evidence: str = ""
    repro: str = ""
    notes: tuple[str, ...] = ()
    reduced: str = ""  # the search was cut for cost: "n of N examples (call_seconds=…)"


@dataclass
class SuiteRun:
    spec: str
    returncode: int
    seconds: float
    outcomes: list[Outcome] = field(default_factory=list)
    output_tail: str = ""
    output: str = ""  # everything pytest printed (not saved with a conformance run)

    @property
    def verdicts(self) -> list[Verdict]:
        return fold(self.outcomes)

    @property
    def crashed(self) -> bool:
        """pytest could not run the suite (usage/internal/collection error, or no results)."""
        return self.returncode not in (0, 1, 5) or not self.outcomes


def load_results(path: Path, *, target_only: bool = False) -> list[Outcome]:
    """Outcomes from the JSON records of :mod:`kernel_verify.properties.results`: one per test,
    the worst phase winning (an error in setup or teardown is an error of the test).
    ``target_only``: leave out tests that did not exercise a target (not parametrised by one,
    or marked ``kv_builtin_only``); skips stay (they say which kinds the adapter lacks)."""
    worst: dict[str, Outcome] = {}
    rank = {"passed": 0, "uncredited": 1, "skipped": 1, "known": 2, "stale": 3, "failed": 4,
            "error": 5, "crash": 6}
    for line in path.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        outcome = r["outcome"]
        if r.get("crashed"):
            outcome = "crash"
        elif r.get("known"):
            outcome = r["known"]  # "known" (still fails as declared) or "stale" (passed)
        elif outcome == "failed" and r["when"] != "call":
            outcome = "error"
        if r["when"] != "call" and outcome == "passed":
            continue
        uncredited = tuple(dict.fromkeys(r.get("uncredited", ())))
        if outcome == "passed" and uncredited:
            outcome = "uncredited"  # it passed, but could not fail for this target here
        own = (r["target"] and not r.get("builtin_only")) or r["when"] == "collect"
        if target_only and not own and outcome not in ("skipped", "crash", "known", "stale"):
            continue
        if target_only and r.get("builtin_only"):
            continue
        o = Outcome(r["family"], r["prop"], r["target"], outcome, r["message"].strip(),
                    r.get("backend", ""), tuple(r.get("notes", ())), r.get("repro", ""),
                    uncredited, tuple(dict.fromkeys(r.get("reduced", ()))))
        old = worst.get(r["nodeid"])
        if old is None or rank[o.outcome] > rank[old.outcome]:
            worst[r["nodeid"]] = o
        elif o.notes and not old.notes:
            worst[r["nodeid"]] = Outcome(**{**asdict(old), "notes": o.notes})
    return list(worst.values())


def _evidence(message: str) -> str:
    """Every assertion line of the failure, in full and without repeats: all sub-exceptions of
    an ``ExceptionGroup`` (each distinct Hypothesis failure), the falsifying example(s)."""
    lines = [ln.rstrip() for ln in message.splitlines() if ln.strip()]
    keep: list[str] = []
    explaining = block = False
    for ln in lines:
        text = ln.strip()
        is_e = text.startswith("E ") or text == "E"
        core = (text[1:] if is_e else text).strip().lstrip("|+- ").strip()
        # Hypothesis' "Explanation: these lines were run by failing cases" (file:line lists) and
        # its "You can reproduce … @reproduce_failure" line (the blob goes into the reproduce
        # command instead) are left out; the failing example (arguments and drawn inputs) is
        # kept whole, once per distinct failure.
        if core.startswith("Explanation:"):
            explaining, block = True, False
            continue
        if core.startswith("You can reproduce this"):
            explaining = block = False
            continue
        if explaining or not core or core.startswith("where "):
            continue
        if _EXCEPTION.match(core):
            block = False
            if core not in keep:
                keep.append(core)
        elif core.startswith(("Falsifying example", "Falsifying explicit", "Failing test case")):
            block = True
            keep.append(core)
        elif block:
            keep.append(core)
        elif is_e and not core.startswith("assert "):
            keep.append(core)
    if not keep:
        keep = [ln.strip() for ln in lines]
    extra = len(keep) - EVIDENCE_LINES
    out = keep[:EVIDENCE_LINES]
    if extra > 0:
        out.append(f"… {extra} more line(s): the full message is in --json")
    return "\n".join(out)


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
        notes = tuple(dict.fromkeys(n for o in items for n in o.notes))
        reduced = "; ".join(dict.fromkeys(r for o in items for r in o.reduced))
        start = len(verdicts)
        crashed = [o for o in items if o.outcome == "crash"]
        bad = [o for o in items if o.outcome in ("failed", "error")]
        if bad:
            evidence = _evidence(bad[0].message)
            backends = [o.backend for o in bad if o.backend]
            ran = [o for o in items if o.outcome != "skipped"]
            if backends:
                evidence += (f"\nfailed on {len(bad)} of {len(ran)} case(s): "
                             f"{', '.join(dict.fromkeys(backends))}")
            verdicts.append(Verdict(family, prop, target, "fail", evidence, bad[0].repro, notes))
        elif crashed:
            verdicts.append(Verdict(family, prop, target, "crash",
                                    "a test worker crashed (died) while running it: "
                                    + _evidence(crashed[0].message), crashed[0].repro, notes))
        elif known := [o for o in items if o.outcome == "known"]:
            stale = [o for o in items if o.outcome == "stale"]
            evidence = known[0].message
            if stale:
                evidence += (f"\nstill fails on {len(known)} case(s); passes on {len(stale)}: "
                             f"{', '.join(dict.fromkeys(o.backend for o in stale if o.backend))}")
            verdicts.append(Verdict(family, prop, target, "known", evidence, known[0].repro,
                                    notes))
        elif stale := [o for o in items if o.outcome == "stale"]:
            verdicts.append(Verdict(family, prop, target, "stale",
                                    "declared a known failure, but it passed on every case "
                                    f"({stale[0].message}): remove it from known_failures",
                                    stale[0].repro, notes))
        elif any(o.outcome == "passed" for o in items):
            verdicts.append(Verdict(family, prop, target, "pass", notes=notes))
        elif uncredited := [o for o in items if o.outcome == "uncredited"]:
            reasons = dict.fromkeys(r for o in uncredited for r in o.uncredited)
            verdicts.append(Verdict(family, prop, target, "not credited",
                                    "; ".join(reasons), uncredited[0].repro, notes))
        else:
            verdicts.append(Verdict(family, prop, target, "skip", _skip_reason(items[0].message)))
        if reduced:
            verdicts[start:] = [replace(v, reduced=reduced) for v in verdicts[start:]]
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
              timeout: float | None = None, target_only: bool = False,
              shrink_seconds: int | None = None, extra_path: str | None = None,
              progress: Callable[[int], None] | None = None) -> SuiteRun:
    """Run the shipped property suite in a subprocess against ``spec`` (None: built-in
    targets), from the current working directory. ``shrink_seconds``: Hypothesis' time limit for
    shrinking one failure (:func:`kernel_verify.properties.profiles.load`); ``extra_path``: a
    folder the adapter module is imported from (put on the subprocess' ``PYTHONPATH`` after the
    working directory); ``progress``: called about twice a second with the number of tests
    finished so far."""
    paths = target_property_files() if paths is None else paths
    env = dict(os.environ)
    if spec:
        env["KV_TARGET"] = spec
    else:
        env.pop("KV_TARGET", None)
    if profile:
        env["HYPOTHESIS_PROFILE"] = profile
    if shrink_seconds is not None:
        env["KV_SHRINK_SECONDS"] = str(shrink_seconds)
    if jobs > 1:  # one BLAS/OpenMP pool per worker, sized to its share of the cores (unless the
        # caller chose): torch's default pool per worker oversubscribes, measured 2.3× slower
        threads = str(max(1, (os.cpu_count() or 1) // jobs))
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(var, threads)
    extra = [extra_path] if extra_path and extra_path != os.getcwd() else []
    if extra:
        env["KV_EXTRA_PATH"] = extra_path  # type: ignore[assignment]  # for reproduce lines
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *extra,
                                         *filter(None, [env.get("PYTHONPATH")])])
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
        log = Path(tmp) / "output.txt"
        with open(log, "w+", encoding="utf-8", errors="replace") as out:
            proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    text=True)
            rc = None
            while rc is None:
                try:
                    rc = proc.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    if timeout is not None and time.monotonic() - start > timeout:
                        proc.kill()
                        proc.wait()
                        rc = -1
                if progress is not None and results.exists():
                    with open(results, "rb") as fh:
                        progress(len(_FINISHED.findall(fh.read())))
            out.seek(0)
            text = out.read()
        if rc == -1 and timeout is not None:
            text = f"timed out after {timeout} s\n{text}"
        seconds = time.monotonic() - start
        outcomes = (load_results(results, target_only=target_only)
                    if results.exists() else [])
    tail = "\n".join(text.strip().splitlines()[-15:])
    return SuiteRun(spec or "built-in", rc, seconds, outcomes, tail, text)


def verdict_table(verdicts: list[Verdict], *, show_passed: bool = True) -> str:
    """A plain-text table property × target with the evidence of failures and the command that
    reproduces each."""
    rows = [v for v in verdicts if show_passed or v.outcome != "pass"]
    if not rows:
        return "(no properties ran)"
    w_prop = max(len(f"{v.family}::{v.prop}") for v in rows)
    w_target = max(len(v.target) for v in rows)
    lines = []
    for v in rows:
        label = f"{v.family}::{v.prop}".ljust(w_prop)
        detail = ""
        if v.outcome in ("skip", "known", "stale", "not credited"):
            detail = f"  ({v.evidence.splitlines()[0] if v.evidence else ''})"
        if v.reduced:
            detail += f"  [reduced: {v.reduced}]"
        lines.append(f"{label}  {v.target.ljust(w_target)}  {v.outcome.upper()}{detail}")
        if v.outcome in ("fail", "crash"):
            lines.extend(f"{'':{w_prop}}    | {ln}" for ln in v.evidence.splitlines())
            if v.repro:
                lines.append(f"{'':{w_prop}}    | reproduce: {v.repro}")
    notes = [(v, n) for v in verdicts for n in v.notes]
    if notes:
        lines.append("\nInput-policy notes (not correctness failures; claim validates_input to "
                     "make them failures):")
        lines.extend(f"  {v.family}::{v.prop}  {n}" for v, n in notes)
    return "\n".join(lines)


def summary(verdicts: list[Verdict]) -> dict[str, int]:
    """Verdicts per word; ``not credited``, ``known``, ``stale`` and ``skip`` are never
    ``pass``."""
    counts = {"pass": 0, "fail": 0, "crash": 0, "skip": 0, "known": 0, "stale": 0,
              "not credited": 0}
    for v in verdicts:
        counts[v.outcome] += 1
    return counts


def _default_profile() -> str:
    from kernel_verify.properties.profiles import selected

    return selected()


def _validate_target(spec: str) -> tuple[str, ...]:
    """Load the adapter in this process first: a broken spec gets a clear error at once."""
    from kernel_verify.properties.loader import load_targets

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    targets = load_targets(spec)
    names = ", ".join(f"{t.name} ({type(t).__name__})" for t in targets)
    print(f"kernel-verify check: {spec} → {len(targets)} target(s): {names}")
    return tuple(t.name for t in targets)

