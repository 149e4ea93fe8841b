"""The Python API: ``kernel_verify.check(targets)`` runs the property suite and returns a result.

::

    from kernel_verify import AttentionTarget, check
    result = check("examples.my_favor:targets", profile="ci")   # or the target objects
    print(result)            # the verdict table (a notebook renders it as HTML)
    result.ok, result.counts, result.failures, result.reproduce

``targets`` is a ``"module:attribute"`` spec (what ``kernel-verify check`` takes), an imported
adapter module (its ``targets`` attribute), or target objects. Objects that an importable module
holds as an attribute run exactly like the spec of that attribute (a pytest subprocess, with
``jobs`` workers). Objects defined where no subprocess can import them (a notebook, a function
body) run in this process with one worker; their reproduce lines then need an adapter module.

Verdict words (one per property × target): ``pass`` (every case ran and held), ``fail``,
``crash`` (a worker died), ``skip`` (not tested; the reason says which claim or field would add
the test), ``known`` (fails as the target declared in ``known_failures``), ``stale`` (a declared
known failure that passed). The command line (``kernel-verify check``) prints this result.
"""

from __future__ import annotations

import html
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kernel_verify.properties.loader import load_targets
from kernel_verify.properties.protocol import Target
from kernel_verify.runner import (
    SUITE_DIR,
    SuiteRun,
    Verdict,
    load_results,
    run_suite,
    summary,
    target_property_files,
    verdict_table,
)
from kernel_verify.verify import atomic

_TARGET_TYPES = ("FeatureMapTarget", "AttentionTarget", "RandomMatrixTarget",
                 "KernelApproxTarget")


@dataclass
class CheckResult:
    """What :func:`check` found: one :class:`Verdict` per property × target, with evidence and
    the command that re-runs each failing case."""

    spec: str
    targets: tuple[str, ...]
    profile: str
    seconds: float
    returncode: int
    verdicts: list[Verdict] = field(default_factory=list)
    output_tail: str = ""

    @property
    def counts(self) -> dict[str, int]:
        return summary(self.verdicts)

    @property
    def crashed(self) -> bool:
        """The suite could not run at all (pytest usage/collection error, no results)."""
        return self.returncode not in (0, 1, 5) or not self.verdicts

    @property
    def ok(self) -> bool:
        """Every property that ran held (no fail, crash or stale known failure)."""
        c = self.counts
        return not self.crashed and c["fail"] == c["crash"] == c["stale"] == 0

    @property
    def failures(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.outcome in ("fail", "crash", "stale")]

    @property
    def reproduce(self) -> list[str]:
        """One shell command per failing verdict that re-runs exactly its case."""
        return [v.repro for v in self.failures if v.repro]

    @property
    def exit_code(self) -> int:
        """The command line's exit status: 0 all held, 1 a property failed (or a known failure
        is stale), 2 the suite could not run or a worker crashed."""
        if self.crashed:
            return 2
        c = self.counts
        if c["fail"] or c["stale"]:
            return 1
        return 2 if c["crash"] else 0

    def summary_line(self) -> str:
        c = self.counts
        extra = "".join(f", {c[k]} {word}" for k, word in
                        (("crash", "crashed"), ("known", "known"), ("stale", "stale"),
                         ("not credited", "not credited (could not fail for this target)"))
                        if c[k])
        line = (f"{c['pass']} passed, {c['fail']} failed{extra}, {c['skip']} skipped — "
                f"properties that exercised your target ({self.seconds:.0f} s; profile "
                f"{self.profile})")
        reduced = sum(bool(v.reduced) for v in self.verdicts)
        if reduced:
            from kernel_verify.properties.profiles import CI_CASE_SECONDS, MIN_EXAMPLES

            line += (f"\n{reduced} verdict(s) from a reduced search ([reduced: n of N examples]):"
                     f" a target declaring call_seconds gets at most max({MIN_EXAMPLES}, "
                     f"⌊{CI_CASE_SECONDS:g} s / call_seconds⌋) Hypothesis examples per property "
                     "in the ci profiles; every property still runs on it")
        return line

    def table(self, *, show_passed: bool = True) -> str:
        return verdict_table(self.verdicts, show_passed=show_passed)

    def __str__(self) -> str:
        return f"{self.table()}\n\n{self.summary_line()}"

    def _repr_html_(self) -> str:
        colour = {"pass": "#2a7", "fail": "#c33", "crash": "#c33", "stale": "#c80",
                  "known": "#888", "skip": "#888", "not credited": "#888"}
        rows = []
        for v in self.verdicts:
            detail = html.escape(v.evidence.splitlines()[0] if v.evidence else "")
            if v.reduced:
                detail += html.escape(f" [reduced: {v.reduced}]")
            rows.append(
                f"<tr><td><code>{html.escape(v.family)}::{html.escape(v.prop)}</code></td>"
                f"<td>{html.escape(v.target)}</td><td style='color:{colour[v.outcome]}'>"
                f"<b>{v.outcome}</b></td><td>{detail}</td></tr>")
        return (f"<p>kernel-verify check <code>{html.escape(self.spec)}</code>: "
                f"{html.escape(self.summary_line())}</p><table><tr><th>property</th>"
                f"<th>target</th><th>verdict</th><th>evidence / reason</th></tr>"
                f"{''.join(rows)}</table>")

    def to_json(self) -> dict[str, Any]:
        return {"target": self.spec, "targets": list(self.targets), "profile": self.profile,
                "returncode": self.returncode, "seconds": self.seconds, "counts": self.counts,
                "verdicts": [asdict(v) for v in self.verdicts]}


def _default_profile() -> str:
    from kernel_verify.properties.profiles import selected

    return selected()


def _as_list(targets: object) -> list[object]:
    if type(targets).__name__ in _TARGET_TYPES:
        return [targets]
    if isinstance(targets, Iterable) and not isinstance(targets, str | bytes):
        return list(targets)
    raise TypeError("targets must be a 'module:attribute' spec, an adapter module, a target or "
                    f"a list of targets, got {type(targets).__name__}")


def _importable_spec(objs: list[object]) -> str | None:
    """A ``module:attribute`` spec naming exactly ``objs`` (by identity), if an importable
    module holds them: then a subprocess loads the same objects."""
    for name, module in list(sys.modules.items()):
        if name == "__main__" or module is None or name.startswith("kernel_verify.properties."):
            continue
        try:
            members = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in members:
            kind = type(value)  # no isinstance: it would run lazy objects' own __class__
            if kind not in (list, tuple) and kind.__name__ not in _TARGET_TYPES:
                continue
            if len(objs) == 1 and value is objs[0]:
                return f"{name}:{attr}"
            if (kind in (list, tuple) and len(value) == len(objs)
                    and all(a is b for a, b in zip(value, objs, strict=True))):
                return f"{name}:{attr}"
    return None


def _resolve(targets: object) -> tuple[str | None, list[Target]]:
    """(spec or None, the loaded targets)."""
    if isinstance(targets, str):
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        return targets, load_targets(targets)
    if isinstance(targets, ModuleType):
        if not hasattr(targets, "targets"):
            raise ValueError(f"module {targets.__name__!r} has no attribute 'targets'; pass "
                             "'module:attribute'")
        spec = f"{targets.__name__}:targets"
        return spec, load_targets(spec)
    objs = _as_list(targets)
    bad = [type(o).__name__ for o in objs if type(o).__name__ not in _TARGET_TYPES]
    if bad or not objs:
        raise TypeError(f"targets must be {', '.join(_TARGET_TYPES)} objects, got "
                        f"{bad or 'an empty list'}")
    names = [t.name for t in objs]  # type: ignore[attr-defined]
    if len(set(names)) != len(names):
        raise ValueError(f"target names must be unique, got {names}")
    return _importable_spec(objs), objs  # type: ignore[return-value]


def _run_in_process(targets: list[Target], *, profile: str | None, keyword: str | None,
                    shrink_seconds: int | None) -> SuiteRun:
    """The suite in this process (one worker) against target objects no subprocess can
    import: the property modules are imported afresh so that they parametrise over them."""
    import pytest

    from kernel_verify.properties import alpha
    from kernel_verify.properties.targets import use_targets

    def forget_suite() -> None:
        # The suite's test modules, under whatever name they were imported (an enclosing pytest
        # run in a checkout imports them as ``properties.test_…``): parametrisation happens at
        # import, so they must be imported afresh to see the targets given here.
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            if path and Path(path).name.startswith(("test_", "conftest")) and \
                    Path(path).resolve().parent == SUITE_DIR:
                del sys.modules[name]

    saved = {k: os.environ.get(k) for k in ("KV_RESULTS", "HYPOTHESIS_PROFILE",
                                            "KV_SHRINK_SECONDS", "KV_TARGET")}
    with tempfile.TemporaryDirectory(prefix="kv-check-") as tmp:
        results = Path(tmp) / "results.jsonl"
        ini = Path(tmp) / "pytest.ini"
        atomic.write_text(ini, "[pytest]\n")
        os.environ["KV_RESULTS"] = str(results)
        os.environ.pop("KV_TARGET", None)
        if profile:
            os.environ["HYPOTHESIS_PROFILE"] = profile
        if shrink_seconds is not None:
            os.environ["KV_SHRINK_SECONDS"] = str(shrink_seconds)
        args = [*target_property_files(), "-c", str(ini), "--rootdir", str(SUITE_DIR),
                "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                # every run registers the results plugin in its own fresh plugin manager (a
                # second in-process run in one process recorded nothing when this depended on
                # whether an earlier run had imported the module)
                "-p", "kernel_verify.properties.results"]
        if keyword:
            args += ["-k", keyword]
        start = time.monotonic()
        forget_suite()
        budget = dict(alpha._state)  # the run sets its own α budget: the caller's comes back
        try:
            with use_targets(targets):
                rc = int(pytest.main(args))
        finally:
            forget_suite()
            alpha._state.clear()
            alpha._state.update(budget)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        seconds = time.monotonic() - start
        outcomes = load_results(results, target_only=True) if results.exists() else []
    return SuiteRun("<targets given in Python>", rc, seconds, outcomes,
                    "" if outcomes else f"pytest exit {rc}")


def check(targets: object, *, profile: str | None = None, keyword: str | None = None,
          jobs: int = 2, shrink_seconds: int | None = None,
          timeout: float | None = None) -> CheckResult:
    """Run every property that applies to ``targets`` and return the verdicts.

    ``profile``: the Hypothesis profile (``dev``, ``ci``, ``nightly``; default: the
    ``HYPOTHESIS_PROFILE`` environment variable, else ``dev``); ``keyword``: a pytest ``-k``
    expression selecting properties; ``jobs``: pytest-xdist workers for a subprocess run;
    ``shrink_seconds``: Hypothesis' time limit for shrinking one failure; ``timeout``: seconds
    before the run is stopped (subprocess runs only). Raises ``ValueError``/``TypeError`` for a
    spec or target that cannot be loaded (before anything runs)."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an int >= 1, got {jobs!r}")
    if profile is not None:
        from kernel_verify.properties.profiles import PROFILES

        if profile not in PROFILES:
            raise ValueError(f"profile {profile!r} is unknown; choose one of "
                             f"{', '.join(PROFILES)}")
    spec, loaded = _resolve(targets)
    names = tuple(t.name for t in loaded)
    if spec is not None:
        run = run_suite(spec, profile=profile, keyword=keyword, jobs=jobs, target_only=True,
                        shrink_seconds=shrink_seconds, timeout=timeout)
    else:
        run = _run_in_process(loaded, profile=profile, keyword=keyword,
                              shrink_seconds=shrink_seconds)
    return CheckResult(spec or run.spec, names, profile or _default_profile(), run.seconds,
                       run.returncode, run.verdicts, run.output_tail)


def save_json(result: CheckResult, path: str | Path) -> None:
    """Write ``result`` as JSON (what ``kernel-verify check --json FILE`` writes)."""
    atomic.write_text(path, json.dumps(result.to_json(), indent=2, ensure_ascii=False))
