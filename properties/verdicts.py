"""Verdicts: the outcomes of the property suite's test cases folded into one word per
(property family, property, target).

The results plugin (:mod:`kernel_verify.properties.results`) writes one JSON record per test
phase; :func:`load_results` reads them (the worst phase of a test wins) and :func:`fold` makes
one :class:`Verdict` per (family, property, target): ``fail`` if any case failed (or errored),
``crash`` if a test worker died while running it, ``known`` if it fails as the target declared
in ``known_failures``, ``stale`` if a declared known failure passed on every case, ``pass`` if
some case passed and none failed, ``not credited`` if it passed only in cases that could not fail
for this target (``kv_uncredited``), ``skip`` (with the reason) if every case was skipped.
``known``, ``stale``, ``skip`` and ``not credited`` are never a pass. One vocabulary for every
surface: ``kernel-verify check``, its JSON, the notebook's HTML, the conformance pages and the
pytest plugin's summary (``pytest --kv-target``) all count with :func:`summary` of :func:`fold`.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

#: At most this many evidence lines per failure (each printed in full); the JSON output keeps
#: the whole message.
EVIDENCE_LINES = 60

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


def summary(verdicts: list[Verdict]) -> dict[str, int]:
    """Verdicts per word; ``not credited``, ``known``, ``stale`` and ``skip`` are never
    ``pass``."""
    counts = {"pass": 0, "fail": 0, "crash": 0, "skip": 0, "known": 0, "stale": 0,
              "not credited": 0}
    for v in verdicts:
        counts[v.outcome] += 1
    return counts


#: The verdict words in the order every surface prints them, with the plural used in counts.
WORDS = (("pass", "passed"), ("fail", "failed"), ("crash", "crashed"), ("known", "known"),
         ("stale", "stale"), ("not credited", "not credited"), ("skip", "skipped"))


def count_line(counts: dict[str, int]) -> str:
    """``"23 passed, 0 failed, 3 not credited, 49 skipped"``: passed, failed and skipped always,
    the other words when they occur (the one wording of ``check``, its HTML, the conformance
    pages and the pytest plugin's summary)."""
    return ", ".join(f"{counts.get(word, 0)} {plural}" for word, plural in WORDS
                     if counts.get(word, 0) or word in ("pass", "fail", "skip"))
