"""The Python API: ``kernel_verify.check(targets)`` runs the property suite and returns a result.

::

    from kernel_verify import AttentionTarget, check
    result = check("kernel_verify.examples.my_favor:targets", profile="ci")  # or target objects
    print(result)            # the verdict table (a notebook renders it as HTML)
    result.ok, result.counts, result.failures, result.reproduce

``targets`` is a ``"module:attribute"`` spec (what ``kernel-verify check`` takes), an imported
adapter module (its ``targets`` attribute), or target objects. Objects that an importable module
holds as an attribute run exactly like the spec of that attribute (a pytest subprocess, with
``jobs`` workers; the folder the module was imported from goes on its ``PYTHONPATH``). Objects
defined where no subprocess can import them — a notebook cell, a script's top level
(``__main__``, and ``__mp_main__``, the alias ``multiprocessing`` makes of it), a function body
— run in this process with one worker. Either way the suite's own output (pytest's report,
tracebacks, warnings) is captured into ``result.output``; the caller sees one progress line on
stderr and the result. The reproduce line of a case run in process is Python that rebuilds the
run: ``kernel_verify.check(<the targets>, profile=…, keyword=<that case>)``, naming the targets
by the variables of ``__main__`` that hold them, else ``kernel_verify.api.given(n)`` (this
session's record of in-process run ``n``).

Verdict words (one per property × target): ``pass`` (every case ran and held), ``fail``,
``crash`` (a worker died), ``skip`` (not tested; the reason says which claim or field would add
the test), ``known`` (fails as the target declared in ``known_failures``), ``stale`` (a declared
known failure that passed). The command line (``kernel-verify check``) prints this result.

Before anything runs, each declared function of each target is called once on a tiny input
and compared with its declaration (:mod:`kernel_verify.probe`): a contradiction (a map
declaring m features and returning 2m, a form returning the wrong tuple, a model whose build
ignores ``dtype``) raises one :class:`~kernel_verify.probe.DeclarationError` naming every
target and field (``kernel-verify check``: exit status 2), never a page of failed properties.
"""

from __future__ import annotations

import html
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from kernel_verify.properties.loader import _TARGET_TYPES as LOADER_TARGET_TYPES
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

#: Every target kind :func:`check` accepts (the loader's list: ``kernel-verify check``, the pytest
#: plugin and this API take the same kinds).
_TARGET_TYPES = LOADER_TARGET_TYPES


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
    #: everything the suite printed (pytest's report, tracebacks, warnings): captured, never
    #: written to the caller's streams
    output: str = ""
    #: why the run has no verdicts, when it is not a crash (a keyword that matched nothing)
    note: str = ""

    @property
    def counts(self) -> dict[str, int]:
        return summary(self.verdicts)

    @property
    def crashed(self) -> bool:
        """The suite could not run at all (pytest usage/collection error, no results; pytest's
        5 with no results is "nothing collected", a ``-k`` that matched nothing: not a crash,
        nothing verified)."""
        return self.returncode not in (0, 1, 5) or (not self.verdicts and self.returncode != 5)

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
        is stale), 2 the suite could not run or a worker crashed, 5 nothing was verified (no
        property passed or reproduced a known failure: every one skipped, e.g. an optional
        dependency missing or no declared dtype this machine runs; as pytest's 5, "no tests")."""
        if self.crashed:
            return 2
        c = self.counts
        if c["fail"] or c["stale"]:
            return 1
        if c["crash"]:
            return 2
        return 0 if self.verified else 5

    @property
    def verified(self) -> bool:
        """Whether any property exercised the targets (passed, or reproduced a known failure);
        a run in which everything skipped (or passed only uncredited) verified nothing."""
        c = self.counts
        return bool(c["pass"] or c.get("known", 0))

    def summary_line(self) -> str:
        from kernel_verify.properties.verdicts import count_line

        line = (f"{count_line(self.counts)} — properties run against your targets "
                f"({self.seconds:.0f} s; profile {self.profile})")
        if not self.crashed and not self.verified and not self.counts["fail"]:
            line += ("\nNOTHING VERIFIED: no property exercised your targets (each skipped, "
                     "for the reasons above; an optional dependency, a declared dtype or "
                     "backend this machine lacks, or a -k that matched none): exit status 5")
        if self.counts["not credited"]:
            line += ("\nnot credited: passed only in cases that could not fail for this target "
                     "(the reason is beside each); never counted as a pass")
        reduced = sum(bool(v.reduced) for v in self.verdicts)
        if reduced:
            from kernel_verify.properties.profiles import CI_CASE_SECONDS, MIN_EXAMPLES

            line += (f"\n{reduced} verdict(s) from a reduced search ([reduced: n of N examples]):"
                     f" a target declaring call_seconds gets at most max({MIN_EXAMPLES}, "
                     f"⌊{CI_CASE_SECONDS:g} s / call_seconds⌋) Hypothesis examples per property "
                     "in the ci profiles; every property still runs on it")
        if self.note:
            line += f"\n{self.note}"
        return line

    def table(self, *, show_passed: bool = True) -> str:
        return verdict_table(self.verdicts, show_passed=show_passed)

    def __str__(self) -> str:
        table = self.note if self.note and not self.verdicts else self.table()
        return f"{table}\n\n{self.summary_line()}"

    def __repr__(self) -> str:
        return (f"<CheckResult {self.spec}: {self.summary_line().splitlines()[0]}>")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's plain-text display (a terminal, a notebook's text/plain): the table."""
        printer.text(str(self))

    def _repr_html_(self) -> str:
        """The verdict table for a notebook: every line of each failure's evidence, each
        skip's or known failure's whole reason, and the line that reproduces it."""
        colour = {"pass": "#2a7", "fail": "#c33", "crash": "#c33", "stale": "#c80",
                  "known": "#888", "skip": "#888", "not credited": "#888"}
        rows = []
        for v in self.verdicts:
            detail = v.evidence
            if v.reduced:
                detail += f"\n[reduced: {v.reduced}]"
            if v.repro and v.outcome in ("fail", "crash", "stale"):
                detail += f"\nreproduce: {v.repro}"
            cell = (f"<pre style='white-space:pre-wrap;margin:0'>{html.escape(detail)}</pre>"
                    if detail else "")
            rows.append(
                f"<tr><td style='text-align:left'><code>{html.escape(v.family)}::"
                f"{html.escape(v.prop)}</code></td><td style='text-align:left'>"
                f"{html.escape(v.target)}</td><td style='color:{colour[v.outcome]}'>"
                f"<b>{v.outcome}</b></td><td style='text-align:left'>{cell}</td></tr>")
        summary = html.escape(self.summary_line()).replace("\n", "<br>")
        return (f"<p>kernel-verify check <code>{html.escape(self.spec)}</code>: "
                f"{summary}</p><table><tr><th>property</th>"
                f"<th>target</th><th>verdict</th><th>evidence / reason</th></tr>"
                f"{''.join(rows)}</table>")

    def to_json(self) -> dict[str, Any]:
        return {"target": self.spec, "targets": list(self.targets), "profile": self.profile,
                "returncode": self.returncode, "seconds": self.seconds, "counts": self.counts,
                "environment": environment(),
                "verdicts": [_short_evidence(asdict(v)) for v in self.verdicts],
                **({"note": self.note} if self.note else {})}


def _short_evidence(verdict: dict[str, Any]) -> dict[str, Any]:
    """A verdict's JSON with each whole target repr of its falsifying example shortened to
    ``target=<Class 'name'>`` (as the text table prints it; the target is named in the
    verdict's own ``target`` field)."""
    from kernel_verify.runner import short_target_reprs

    if isinstance(verdict.get("evidence"), str):
        verdict["evidence"] = short_target_reprs(verdict["evidence"])[0]
    return verdict


#: Distributions whose versions a saved result records (those installed).
RECORDED_DISTRIBUTIONS = ("kernel-verify", "torch", "numpy", "scipy", "mpmath", "hypothesis",
                          "triton", "fla-core", "flash-linear-attention", "transformers")


def environment() -> dict[str, Any]:
    """Where a result was computed: the kernel-verify code (its commit in a checkout, with any
    uncommitted changes, else its version), Python, the platform, and the versions of the
    installed :data:`RECORDED_DISTRIBUTIONS` (those not installed are left out)."""
    import platform

    from kernel_verify.fingerprints import _dist_version
    from kernel_verify.provenance import code_state

    found = {name: _dist_version(name) for name in RECORDED_DISTRIBUTIONS}
    versions = {name: v for name, v in found.items() if v is not None}
    return {"code": code_state(), "python": platform.python_version(),
            "platform": platform.platform(), "versions": versions}


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


def _importable(name: str, module: object) -> bool:
    """Whether a fresh interpreter can import ``module`` under ``name``: not the running script
    or notebook (``__main__``, and ``__mp_main__``, the alias ``multiprocessing`` gives it), not
    an alias under another name, not a module built in memory (no ``__spec__``)."""
    if name in ("__main__", "__mp_main__") or module is None:
        return False
    spec = getattr(module, "__spec__", None)
    return getattr(module, "__name__", None) == name and spec is not None and spec.name == name


def _import_root(name: str, module: object) -> str | None:
    """The ``sys.path`` entry ``module`` was imported from (the folder above its top package),
    or None when it has no file."""
    path = getattr(module, "__file__", None)
    if not path:
        return None
    root = Path(path).resolve().parent
    if Path(path).name == "__init__.py":
        root = root.parent
    for _ in name.split(".")[1:]:
        root = root.parent
    return str(root)


def _importable_spec(objs: list[object]) -> tuple[str, str | None] | None:
    """A ``module:attribute`` spec naming exactly ``objs`` (by identity), if an importable
    module holds them (then a subprocess loads the same objects), with the folder it was
    imported from (the subprocess gets it on its ``PYTHONPATH``)."""
    for name, module in list(sys.modules.items()):
        if name.startswith("kernel_verify.properties.") or not _importable(name, module):
            continue
        try:
            members = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in members:
            kind = type(value)  # no isinstance: it would run lazy objects' own __class__
            if kind not in (list, tuple) and kind.__name__ not in _TARGET_TYPES:
                continue
            if (len(objs) == 1 and value is objs[0]) or (
                    kind in (list, tuple) and len(value) == len(objs)
                    and all(a is b for a, b in zip(value, objs, strict=True))):
                return f"{name}:{attr}", _import_root(name, module)
    return None


#: Targets of the in-process runs of this session (``check`` of objects no module holds), by
#: run number: the reproduce snippet of a target that no variable of ``__main__`` names refers to
#: them as ``kernel_verify.api.given(n)``.
_GIVEN: dict[int, list[object]] = {}


def given(run: int) -> list[object]:
    """The targets of in-process run ``run`` of this session (what its reproduce lines name)."""
    if run not in _GIVEN:
        raise ValueError(f"no in-process check run {run} in this session (runs: "
                         f"{sorted(_GIVEN) or 'none'})")
    return _GIVEN[run]


def _rebuild_expression(objs: list[object], passed: object) -> str:
    """Python that evaluates to ``objs`` where the caller called :func:`check`: the names the
    caller's top level (a notebook, a script, the REPL: ``__main__``) binds them to, else
    ``kernel_verify.api.given(n)`` (this session's registry)."""
    namespace = vars(sys.modules["__main__"]) if "__main__" in sys.modules else {}
    public = [(k, v) for k, v in namespace.items() if not k.startswith("_")]
    for k, v in public:  # the very object passed: a list variable, or one target
        if v is passed:
            return k
    names = []
    for obj in objs:
        found = next((k for k, v in public if v is obj), None)
        if found is None:
            break
        names.append(found)
    else:
        return names[0] if len(objs) == 1 else f"[{', '.join(names)}]"
    run = max(_GIVEN, default=0) + 1
    _GIVEN[run] = list(objs)
    return f"kernel_verify.api.given({run})"


def _resolve(targets: object) -> tuple[str | None, str | None, list[Target]]:
    """(spec or None, the folder to import it from or None, the loaded targets)."""
    if isinstance(targets, str):
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        return targets, None, load_targets(targets)
    if isinstance(targets, ModuleType):
        if not hasattr(targets, "targets"):
            raise ValueError(f"module {targets.__name__!r} has no attribute 'targets'; pass "
                             "'module:attribute'")
        if _importable(targets.__name__, targets):
            spec = f"{targets.__name__}:targets"
            return spec, _import_root(targets.__name__, targets), load_targets(spec)
        targets = targets.targets  # the running script or notebook: its objects, in process
    objs = _as_list(targets)
    bad = [type(o).__name__ for o in objs if type(o).__name__ not in _TARGET_TYPES]
    if bad or not objs:
        raise TypeError(f"targets must be {', '.join(_TARGET_TYPES)} objects, got "
                        f"{bad or 'an empty list'}")
    names = [t.name for t in objs]  # type: ignore[attr-defined]
    if len(set(names)) != len(names):
        raise ValueError(f"target names must be unique, got {names}")
    found = _importable_spec(objs)
    spec, root = found if found else (None, None)
    return spec, root, objs  # type: ignore[return-value]


class _Progress:
    """One line on ``stream`` that says how far the run is (tests done of those collected, and
    the seconds so far), rewritten in place on a terminal or in a notebook, written once at the
    end elsewhere (a log keeps one line). Also a pytest plugin: it counts the tests it sees."""

    def __init__(self, stream: Any, label: str) -> None:
        self.stream, self.label = stream, label
        self.total: int | None = None
        self.done = 0
        self.start = self.shown = time.monotonic()
        isatty = getattr(stream, "isatty", lambda: False)
        self.live = bool(isatty()) or "ipykernel" in sys.modules

    def line(self) -> str:
        of = f" of {self.total}" if self.total is not None else ""
        return (f"kernel-verify check: {self.label}: {self.done}{of} tests done "
                f"({time.monotonic() - self.start:.0f} s)")

    def update(self, done: int | None = None, *, force: bool = False) -> None:
        if done is not None:
            self.done = done
        now = time.monotonic()
        if self.live and (force or now - self.shown >= 0.5):
            self.shown = now
            self._write(f"\r{self.line()}")

    def finish(self) -> None:
        self._write(f"\r{self.line()}\n" if self.live else f"{self.line()}\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: progress is optional
            pass

    # pytest hooks (an in-process run registers this object as a plugin)
    def pytest_collection_finish(self, session: Any) -> None:
        self.total = len(session.items)
        self.update(force=True)

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.update(self.done + 1)


def _run_in_process(targets: list[Target], *, profile: str | None, keyword: str | None,
                    shrink_seconds: int | None, progress: _Progress | None) -> SuiteRun:
    """The suite in this process (one worker) against target objects no subprocess can
    import: the property modules are imported afresh so that they parametrise over them.
    What the suite prints (pytest's report, tracebacks, warnings) is captured into the run's
    ``output``, never written to the caller's streams."""
    import contextlib
    import io
    import warnings

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
    captured = io.StringIO()
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
                "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "--color=no",
                # every run registers the results plugin in its own fresh plugin manager (a
                # second in-process run in one process recorded nothing when this depended on
                # whether an earlier run had imported the module)
                "-p", "kernel_verify.properties.results"]
        if keyword:
            args += ["-k", keyword]
        start = time.monotonic()
        forget_suite()
        try:
            # the run sets its own α budget: the caller's comes back (alpha.preserved)
            with alpha.preserved(), use_targets(targets), contextlib.redirect_stdout(captured), \
                    contextlib.redirect_stderr(captured), warnings.catch_warnings():
                rc = int(pytest.main(args, plugins=[progress] if progress else []))
        finally:
            forget_suite()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        seconds = time.monotonic() - start
        outcomes = load_results(results, target_only=True) if results.exists() else []
    output = captured.getvalue()
    tail = "\n".join(output.strip().splitlines()[-15:])
    return SuiteRun("<targets given in Python>", rc, seconds, outcomes,
                    tail if not outcomes else "", output)


def _check_arguments(*, jobs: object, profile: object, keyword: object, shrink_seconds: object,
                     timeout: object) -> None:
    """:func:`check`'s arguments besides the targets: a TypeError for the wrong type, a
    ValueError for a value out of range, each naming the argument (issue #45)."""
    from kernel_verify.impls.validation import check_positive_int, check_scalar

    check_positive_int("jobs", jobs)
    if profile is not None:
        from kernel_verify.properties.profiles import PROFILES

        if not isinstance(profile, str):
            raise TypeError(f"profile must be a str naming a profile ({', '.join(PROFILES)}) "
                            f"or None, got {type(profile).__name__} {profile!r}")
        if profile not in PROFILES:
            raise ValueError(f"profile {profile!r} is unknown; choose one of "
                             f"{', '.join(PROFILES)}")
    if keyword is not None and not isinstance(keyword, str):
        raise TypeError(f"keyword must be a str (a pytest -k expression) or None, got "
                        f"{type(keyword).__name__} {keyword!r}")
    if keyword is not None and not keyword.strip():
        raise ValueError(f"keyword must be a non-empty pytest -k expression, got {keyword!r}")
    if shrink_seconds is not None:
        check_scalar("shrink_seconds", shrink_seconds, nonnegative=True)
    if timeout is not None:
        check_scalar("timeout", timeout, positive=True)


def _scope_note(loaded: list) -> str:
    """What the forms properties cannot reach for these targets, said once: a gated (recurrent)
    target with no ``chunked`` form (whose chunk size the suite would choose) and no declared
    ``chunk_sizes`` is run on at most
    :data:`~kernel_verify.properties.layouts.GATED_MAX_TOKENS` tokens, so a block of its own
    longer than that (a kernel's fixed chunk of 64) is never crossed."""
    from kernel_verify.properties.layouts import (
        DEFAULT_CHUNKS,
        GATED_MAX_TOKENS,
        LONG_CHUNK_LENGTHS,
        LONG_CHUNKS,
    )

    undeclared = [t for t in loaded
                  if type(t).__name__ == "GatedAttentionTarget" and t.chunk_sizes is None
                  and any(getattr(t, f, None) is not None for f in ("stateful", "parallel"))]
    names = [t.name for t in undeclared if getattr(t, "chunked", None) is None]
    chunked = [t.name for t in undeclared if getattr(t, "chunked", None) is not None]
    # (exact attention, feature_count = 0: its block-boundary property crosses 64 and 128 keys
    # itself when no chunk_sizes is declared, so no scope is left to a declaration)
    plain = [t.name for t in loaded
             if type(t).__name__ == "AttentionTarget" and t.chunk_sizes is None
             and getattr(t, "feature_count", None) != 0]
    notes = []
    for t in loaded:  # a model's declared boundaries past its max_len are never cut at
        if type(t).__name__ != "ModelTarget":
            continue
        wanted = {p for c in t.chunk_sizes for p in (c - 1, c, c + 1, 2 * c + 1)}
        if t.conv_window is not None:
            wanted.add(t.conv_window - 1)
        dropped = sorted(p for p in wanted if p > t.max_len - 2)
        if dropped:
            notes.append(
                f"scope: {t.name}: the cut points {dropped} of its chunk_sizes/conv_window lie "
                f"past max_len − 2 = {t.max_len - 2} and are not drawn; raise max_len to "
                f"{max(dropped) + 2} to have every declared boundary crossed")
    if names:
        notes.append(
            f"scope: no chunk_sizes declared ({', '.join(names)}), and no chunked form to be "
            "given a chunk size: the forms properties draw sequences of at most "
            f"{GATED_MAX_TOKENS} tokens, so a block of the target's own longer than that (a "
            "kernel's fixed chunk) is never crossed; declare chunk_sizes=(C, ...) to have every "
            "drawn layout cross C")
    if chunked:
        longest = max(LONG_CHUNK_LENGTHS)
        notes.append(
            f"scope: no chunk_sizes declared ({', '.join(chunked)}): the chunked form is given "
            f"chunks up to {max(LONG_CHUNKS)} on sequences of up to {longest} tokens, and the "
            f"full-sequence forms see the same sequences, so a block of their own longer than "
            f"{longest} tokens (a kernel's fixed chunk of 64) is never crossed; declare "
            "chunk_sizes=(C, ...) to have every drawn layout cross C")
    if plain:
        big = max(DEFAULT_CHUNKS)
        notes.append(
            f"scope: no chunk_sizes declared ({', '.join(plain)}): the fixed layouts cross "
            f"blocks of {' and '.join(map(str, DEFAULT_CHUNKS))} tokens (lengths up to "
            f"{2 * big + 1}); a kernel that works in longer blocks (a flash-style kernel's 64 "
            "keys) declares chunk_sizes=(64,) to have its boundaries crossed")
    return "\n".join(notes)


def check(targets: object, *, profile: str | None = None, keyword: str | None = None,
          jobs: int = 2, shrink_seconds: int | None = None,
          timeout: float | None = None, progress: bool = True,
          probe: bool = True) -> CheckResult:
    """Run every property that applies to ``targets`` and return the verdicts.

    ``profile``: the Hypothesis profile (``dev``, ``ci``, ``nightly``; default: the
    ``HYPOTHESIS_PROFILE`` environment variable, else ``dev``); ``keyword``: a pytest ``-k``
    expression selecting properties; ``jobs``: pytest-xdist workers for a subprocess run;
    ``shrink_seconds``: Hypothesis' time limit for shrinking one failure; ``timeout``: seconds
    before the run is stopped (subprocess runs only); ``progress``: one line on stderr that
    says how far the run is (the suite's own output is captured into the result's ``output``,
    never printed); ``probe``: call each declared function of each target once on a tiny input
    first (:mod:`kernel_verify.probe`). Raises ``ValueError``/``TypeError`` for a spec or target
    that cannot be loaded, and :class:`kernel_verify.probe.DeclarationError` (a ``ValueError``
    listing every problem) for a declaration its own functions contradict (a map declaring m
    features and returning 2m, a form returning the wrong tuple, a model whose ``build`` ignores
    ``dtype``), before any property runs."""
    _check_arguments(jobs=jobs, profile=profile, keyword=keyword,
                     shrink_seconds=shrink_seconds, timeout=timeout)
    from kernel_verify.impls.validation import check_bool

    for name, flag in (("progress", progress), ("probe", probe)):
        check_bool(name, flag)
    spec, root, loaded = _resolve(targets)
    if probe:
        from kernel_verify.probe import probe_targets

        probe_targets(loaded)
    names = tuple(t.name for t in loaded)
    chosen = profile or _default_profile()
    where = (f"{spec} in a pytest subprocess ({jobs} worker{'s' * (jobs > 1)})" if spec else
             f"{len(loaded)} target(s) given in Python, in this process")
    meter = _Progress(sys.stderr, where) if progress else None
    if spec is not None:
        run = run_suite(spec, profile=profile, keyword=keyword, jobs=jobs, target_only=True,
                        shrink_seconds=shrink_seconds, timeout=timeout,
                        extra_path=root, progress=meter.update if meter else None)
    else:
        run = _run_in_process(loaded, profile=profile, keyword=keyword,
                              shrink_seconds=shrink_seconds, progress=meter)
    if meter:
        meter.finish()
    verdicts = run.verdicts
    if spec is None:  # a reproduce line names only the verdict's own target
        rebuild: dict[str, str] = {}
        by_name = {t.name: t for t in loaded}
        for i, v in enumerate(verdicts):
            if not v.repro:
                continue
            key = v.target if v.target in by_name else ""
            if key not in rebuild:
                rebuild[key] = (_rebuild_expression([by_name[key]], by_name[key]) if key
                                else _rebuild_expression(loaded, targets))
            verdicts[i] = replace(v, repro=_inline_repro(v.repro, rebuild[key], chosen,
                                                         shrink_seconds))
    note = _scope_note(loaded)
    if run.returncode == 5 and keyword:
        note = f"no property matched keyword {keyword!r}"
    return CheckResult(spec or run.spec, names, chosen, run.seconds, run.returncode, verdicts,
                       run.output_tail, run.output, note)


def _inline_repro(repro: str, rebuild: str, profile: str, shrink_seconds: int | None) -> str:
    """The Python line that re-runs one case of an in-process run: ``check`` of the same
    targets (``rebuild``) with ``-k`` naming the case (recorded by the results plugin as
    ``INLINE_REPRO``)."""
    from kernel_verify.properties.results import INLINE_REPRO

    if not repro.startswith(INLINE_REPRO):
        return repro
    # (a Hypothesis @reproduce_failure blob cannot be placed above an installed test: left out;
    # the profile's derandomised search finds the same example again)
    keyword = repro.removeprefix(INLINE_REPRO).partition("   #")[0].strip()
    extra = f", shrink_seconds={shrink_seconds}" if shrink_seconds is not None else ""
    return (f"import kernel_verify; kernel_verify.check({rebuild}, profile={profile!r}, "
            f"keyword={keyword!r}{extra})")


def save_json(result: CheckResult, path: str | Path) -> None:
    """Write ``result`` as JSON (what ``kernel-verify check --json FILE`` writes)."""
    atomic.write_text(path, json.dumps(result.to_json(), indent=2, ensure_ascii=False))
