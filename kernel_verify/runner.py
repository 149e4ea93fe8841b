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
crashed). Quiet by default (:func:`verdict_table`): the skips as one line per reason with its
count, each target in a falsifying example as ``<Class 'name'>``; ``--verbose``: every row and
every repr.

:func:`run_suite` is shared with ``kernel-verify mutants``
(:mod:`kernel_verify.mutants.runner`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import kernel_verify.properties as _suite
from kernel_verify.properties.verdicts import (  # noqa: F401  (re-exported)
    EVIDENCE_LINES,
    Outcome,
    Verdict,
    _evidence,
    _skip_reason,
    fold,
    load_results,
    summary,
)
from kernel_verify.verify import atomic

#: The folder of the shipped property suite.
SUITE_DIR = Path(_suite.__file__).resolve().parent
#: A results record of a finished test: its call phase, or a setup that did not pass (a skip).
_FINISHED = re.compile(rb'"when": "(?:call|setup", "outcome": "(?:skipped|failed))"')


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


def target_property_files() -> tuple[str, ...]:
    """The property files that can say anything about a third-party target: those holding a
    property parametrised over some kind of target (the suite's own static index,
    :func:`kernel_verify.properties.property_index.files_with_target_properties`, which follows
    the selection helpers through shared case modules), and any file importing
    :mod:`kernel_verify.properties.targets` directly. Other files test built-in code only and
    would just add run time. (A text search for the import alone once dropped
    test_attention_forms.py, whose cases moved to a shared module, from every ``check``.)"""
    from kernel_verify.properties.property_index import files_with_target_properties

    files = sorted(SUITE_DIR.glob("test_*.py"))
    indexed = {p.name for p in files_with_target_properties()}
    marker = "kernel_verify.properties.targets"
    chosen = [f for f in files
              if f.name in indexed or marker in f.read_text(encoding="utf-8")]
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
               "-p", "no:cacheprovider", "-p", "kernel_verify.properties.results",
               "-p", "kernel_verify.properties.process_end", "-q",
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


#: The start of the note a model property records for its power control
#: (:func:`kernel_verify.properties.model_checks.power_ladder`).
POWER_NOTE = "power control"


#: A skip because no target of the kind a property tests was given: ``<who> provides no <what>``.
_PROVIDES_NO = re.compile(r"^(?P<who>.+?) provides no (?P<what>.+)$")
#: A skip because a target lacks a part of a protocol (:mod:`kernel_verify.properties.targets`):
#: ``<target> does not offer what this property needs: <parts>[ (<where documented>)]``.
_LACKS = re.compile(r"^(?P<who>\S+) does not offer what this property needs: (?P<what>.+?)"
                    r"(?P<doc> \([^()]*\))?$")
#: The start of a target's repr in a Hypothesis falsifying example: ``target=SomeTarget(``.
_TARGET_REPR = re.compile(r"(?P<key>\btargets?=)(?P<cls>[A-Z]\w*)\(")


def short_target_reprs(evidence: str) -> tuple[str, bool]:
    """``evidence`` with each whole target dataclass repr of a falsifying example
    (``target=AttentionTarget(name='x', fn=…, …)``, over as many lines as it spans) replaced
    by ``target=<AttentionTarget 'x'>``; and whether any was replaced. The parentheses are
    matched outside quoted strings; an unbalanced repr (cut short) is left as it is."""
    text, changed, pos = evidence, False, 0
    while (m := _TARGET_REPR.search(text, pos)) is not None:
        depth, quote, i = 0, "", m.end() - 1
        while i < len(text):
            c = text[i]
            if quote:
                if c == "\\":
                    i += 1
                elif c == quote:
                    quote = ""
            elif c in "'\"":
                quote = c
            elif c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        if i >= len(text):  # unbalanced: leave it
            pos = m.end()
            continue
        body = text[m.end():i]
        name = re.match(r"\s*(?:name=)?(?P<q>['\"])(?P<n>.*?)(?P=q)", body)
        short = f"{m['key']}<{m['cls']}{' ' + repr(name['n']) if name else ''}>"
        text = text[:m.start()] + short + text[i + 1:]
        pos, changed = m.start() + len(short), True
    return text, changed


def skip_summary(verdicts: list[Verdict]) -> list[str]:
    """The skipped verdicts as one line per distinct reason with its count, most frequent
    first; the skips for want of a target of the tested kind (``… provides no <what>``)
    last, as one line that counts each kind (``attention``, not each set of claims asked of
    it; a second line for the properties that ask for a kind alone, ``… provides no model
    target``), and those of one target lacking parts of a protocol (``<target> does not offer
    what this property needs: <parts>``) as one line per target that counts each set of
    parts."""
    skips = [v for v in verdicts if v.outcome == "skip"]
    if not skips:
        return []
    kinds: dict[str, int] = {}
    reasons: dict[str, int] = {}
    lacks: dict[tuple[str, str], dict[str, int]] = {}
    for v in skips:
        reason = v.evidence.splitlines()[0] if v.evidence else "(no reason given)"
        m, lack = _PROVIDES_NO.match(reason), _LACKS.match(reason)
        if m:  # one count per kind, whatever claims the property asks of it (--verbose: each)
            kind, with_claims, _ = m["what"].partition(" with claims ")
            key = (kind, bool(with_claims))
            kinds[key] = kinds.get(key, 0) + 1
        elif lack:
            parts = lacks.setdefault((lack["who"], lack["doc"] or ""), {})
            parts[lack["what"]] = parts.get(lack["what"], 0) + 1
        else:
            reasons[reason] = reasons.get(reason, 0) + 1
    lines = [f"SKIP  {len(skips)} propert{'y' if len(skips) == 1 else 'ies'}, by reason "
             "(each row: --verbose):"]
    rows = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    for (who, doc), parts in lacks.items():
        listed = " | ".join(f"{what} ({n})" for what, n in
                            sorted(parts.items(), key=lambda kv: (-kv[1], kv[0])))
        rows.append((f"{who} does not offer what the property needs{doc}: {listed}",
                     sum(parts.values())))
    rows.sort(key=lambda kv: -kv[1])
    # a property that asks for claims skips when no target of its kind has them all (a target of
    # the kind may well be there, declaring fewer claims); one that asks for a kind alone skips
    # when no target is of that kind: listed last, after the reasons about the run's own targets
    kind_rows = []
    for by_claims, head in ((True, "no target of the kind has the claims the property needs"),
                            (False, "no target of the kind the property tests")):
        counts = {kind: n for (kind, c), n in kinds.items() if c is by_claims}
        if counts:
            listed = ", ".join(f"{what} ({n})" for what, n in
                               sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
            kind_rows.append((f"{head}: {listed}", sum(counts.values())))
    shown, rest = rows[:SKIP_REASONS_SHOWN], rows[SKIP_REASONS_SHOWN:]
    lines.extend(f"  {n:>4} × {reason}" for reason, n in shown)
    if rest:
        lines.append(f"  {sum(n for _, n in rest):>4} × {len(rest)} other reasons, each rarer "
                     "(every row: --verbose)")
    lines.extend(f"  {n:>4} × {reason}" for reason, n in kind_rows)
    return lines


#: The most frequent skip reasons the quiet table lists (the rest: one line, --verbose).
SKIP_REASONS_SHOWN = 8


_POWER = re.compile(r"power control at init scale (?P<scale>\S+) \((?P<dtype>[^)]+)\): the "
                    r"planted defect \((?P<what>.*?)\) fails this check")


def power_summary(power: list[tuple[Verdict, str]]) -> list[str]:
    """The power-control notes as one line per property × target (quiet output): the planted
    defect and the init scales and dtypes it failed at; the evidence of each: --verbose."""
    grouped: dict[tuple[str, str], dict[str, list[str]]] = {}
    for v, n in power:
        m = _POWER.match(n)
        key = (f"{v.family}::{v.prop}", v.target)
        what = f"the planted defect ({m['what']}) fails it at init scale" if m else n
        grouped.setdefault(key, {}).setdefault(what, []).append(
            f"{m['scale']} ({m['dtype']})" if m else "")
    out = []
    for (prop, target), whats in grouped.items():
        for what, where in whats.items():
            at = ", ".join(dict.fromkeys(w for w in where if w))
            out.append(f"  {prop}  {target}: {what} {at}".rstrip())
    return out


def verdict_table(verdicts: list[Verdict], *, show_passed: bool = True,
                  verbose: bool = False) -> str:
    """A plain-text table property × target with the evidence of failures and the command that
    reproduces each. Quiet (the default): the skipped verdicts summarised by reason
    (:func:`skip_summary`), and each target's repr in a failure's falsifying example shortened
    to its class and name (:func:`short_target_reprs`); ``verbose``: every row, every repr."""
    rows = [v for v in verdicts if (show_passed or v.outcome != "pass")
            and (verbose or v.outcome != "skip")]
    skipped = [] if verbose else skip_summary(verdicts)
    if not rows and not skipped:
        return "(no properties ran)"
    w_prop = max((len(f"{v.family}::{v.prop}") for v in rows), default=0)
    w_target = max((len(v.target) for v in rows), default=0)
    lines = []
    shortened = False
    for v in rows:
        label = f"{v.family}::{v.prop}".ljust(w_prop)
        detail = ""
        if v.outcome in ("skip", "known", "stale", "not credited"):
            detail = f"  ({v.evidence.splitlines()[0] if v.evidence else ''})"
        if v.reduced:
            detail += f"  [reduced: {v.reduced}]"
        lines.append(f"{label}  {v.target.ljust(w_target)}  {v.outcome.upper()}{detail}")
        if v.outcome in ("fail", "crash"):
            evidence = v.evidence
            if not verbose:
                evidence, short = short_target_reprs(evidence)
                shortened = shortened or short
            lines.extend(f"{'':{w_prop}}    | {ln}" for ln in evidence.splitlines())
            if v.repro:
                lines.append(f"{'':{w_prop}}    | reproduce: {v.repro}")
    if shortened:
        lines.append("(targets shown as <Class 'name'> in the falsifying examples; their whole "
                     "repr: --verbose)")
    if skipped:
        lines.extend(([""] if lines else []) + skipped)
    power = [(v, n) for v in verdicts for n in v.notes if n.startswith(POWER_NOTE)]
    notes = [(v, n) for v in verdicts for n in v.notes if not n.startswith(POWER_NOTE)]
    if power:
        lines.append("\nPower controls (model properties: the planted defect that failed the "
                     "same check at the init scale the verdict was given at):")
        if verbose:
            lines.extend(f"  {v.family}::{v.prop}  {v.target}: {n}" for v, n in power)
        else:
            lines.extend(power_summary(power))
    if notes:
        lines.append("\nInput-policy notes (not correctness failures; claim validates_input to "
                     "make them failures):")
        if verbose:
            lines.extend(f"  {v.family}::{v.prop}  {n}" for v, n in notes)
        else:  # one line per property × target: its first note and how many more
            grouped: dict[tuple[str, str], list[str]] = {}
            for v, n in notes:
                grouped.setdefault((f"{v.family}::{v.prop}", v.target), []).append(n)
            for (prop, _), ns in grouped.items():
                more = f"  (+{len(ns) - 1} more of this property: --verbose)" if len(ns) > 1 \
                    else ""
                lines.append(f"  {prop}  {ns[0]}{more}")
    return "\n".join(lines)


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


