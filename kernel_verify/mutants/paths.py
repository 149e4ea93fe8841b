"""The credit table per dtype path (issue #29): on which dtype a property killed a mutant.

A property that kills float64 mutants says nothing of its power on the float32 or half-precision
path a real library runs (fla's kernels are float32 only; a model's attention runs in bfloat16):
its bounds there are other numbers. So a kill is credited to the *dtype path* it happened on —
``float64``, ``float32`` or ``half`` (float16 and bfloat16) — and a property is credited on a
path only where some mutant on that path is killed by the property's own assertion
(``tests/test_property_credits.py`` keeps the table complete; ``reports/mutants.json`` holds it
as ``credit_by_path``).

The path of one test case: the last dtype named in its pytest id (the backend axis, or a
``dtype`` parametrisation: ``…[target-torch:cpu-float32]``, ``…[target-bfloat16]``; target
names come first in the id, so a dtype inside a target's name is not taken), else its recorded
backend, else the one dtype every target of the mutant accepts (a float32-only library), else
``float64`` (the suite's default dtype for properties without a dtype axis).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable

from kernel_verify.mutants.kills import failure_kind
from kernel_verify.runner import Outcome, SuiteRun, Verdict, _evidence

#: The dtype paths, in report order.
PATHS = ("float64", "float32", "half")
_DTYPE = re.compile(r"(float64|float32|float16|bfloat16)")
_ID = re.compile(r"\[([^\]]*)\]")


def path_of_dtype(dtype: str) -> str:
    """``float16``/``bfloat16`` → ``half``; ``float64``, ``float32`` as they are."""
    return "half" if dtype in ("float16", "bfloat16") else dtype


def case_path(o: Outcome, dtypes: Iterable[str] | Callable[[], Iterable[str]] = ()) -> str:
    """The dtype path of one test case (module docstring); ``dtypes`` (or a function giving
    them, called only when the case names no dtype): what the mutant's targets accept."""
    ids = _ID.findall(o.repro or "")
    found = _DTYPE.findall(ids[-1]) if ids else []
    if not found and o.backend:
        found = _DTYPE.findall(o.backend)
    if found:
        return path_of_dtype(found[-1])
    accepted = sorted(set(dtypes() if callable(dtypes) else dtypes))
    if len(accepted) == 1:
        return path_of_dtype(accepted[0])
    return "float64"


def target_dtypes(targets: Iterable[object]) -> list[str]:
    """The dtypes any of ``targets`` accepts (attention targets declare ``dtypes``; others run
    float64 and whatever their backends give)."""
    out: set[str] = set()
    for t in targets:
        out |= set(getattr(t, "dtypes", ()) or ())
    return sorted(out)


def _property_kill(o: Outcome) -> bool:
    """A failing case whose failure is the property's own assertion (kind ``property``)."""
    if o.outcome not in ("failed", "error"):
        return False
    # the evidence as the verdicts fold it (pytest's raw "E   AssertionError: …" lines): the
    # kind is read from the same lines as the matrix's own kill kinds
    v = Verdict(o.family, o.prop, o.target, "fail", evidence=_evidence(o.message))
    return failure_kind(v) == "property"


def credit_by_path(runs: dict[str, SuiteRun],
                   dtypes: Callable[[str], Iterable[str]] | None = None) -> dict[str, dict]:
    """``family::property`` → ``{"ran": [paths it ran on], "kills": {path: [mutants]}}`` over
    ``runs`` (mutant name → its suite run; ``dtypes``: mutant name → the dtypes its targets
    accept, asked only for cases that name no dtype). A property *ran* on a path where some
    case of it passed or failed there; it *kills* on that path where a case failed there by its
    assertion. Only the properties that
    have a verdict in the run count (cases of the suite's own code are left out, as in the
    verdicts)."""
    out: dict[str, dict] = {}
    for name, run in runs.items():
        keys = {f"{v.family}::{v.prop}" for v in run.verdicts if v.target}
        accepted = functools.cache(lambda name=name: list(dtypes(name)) if dtypes else [])
        for o in run.outcomes:
            key = f"{o.family}::{o.prop}"
            if key not in keys or o.outcome not in ("passed", "failed", "error"):
                continue
            path = case_path(o, accepted)
            entry = out.setdefault(key, {"ran": [], "kills": {}})
            if path not in entry["ran"]:
                entry["ran"].append(path)
            if _property_kill(o):
                kills = entry["kills"].setdefault(path, [])
                if name not in kills:
                    kills.append(name)
    for entry in out.values():
        entry["ran"] = [p for p in PATHS if p in entry["ran"]]
        entry["kills"] = {p: entry["kills"][p] for p in PATHS if p in entry["kills"]}
    return dict(sorted(out.items()))


def uncredited_paths(table: dict[str, dict], paths: Iterable[str] = ("float32", "half")
                     ) -> list[tuple[str, str]]:
    """``(property, path)`` for every low-precision path a property ran on without killing any
    mutant there: on that path it is not credited."""
    return [(prop, p) for prop, entry in table.items() for p in paths
            if p in entry.get("ran", ()) and not entry.get("kills", {}).get(p)]


def markdown_rows(table: dict[str, dict]) -> list[str]:
    """The per-path table of ``reports/mutants.md``."""
    lines = ["| property | ran on | credited on (a mutant killed there) | not credited on |",
             "|---|---|---|---|"]
    for prop, entry in table.items():
        credited = [f"{p} ({', '.join(names)})" for p, names in entry["kills"].items()]
        missing = [p for p in entry["ran"] if p not in entry["kills"]]
        lines.append(f"| `{prop}` | {', '.join(entry['ran']) or '—'} | "
                     f"{'; '.join(credited) or '**none**'} | {', '.join(missing) or '—'} |")
    return lines


__all__ = ["PATHS", "case_path", "credit_by_path", "markdown_rows", "path_of_dtype",
           "target_dtypes", "uncredited_paths"]
