"""Which committed reports are current: each report's fingerprint, the sources it depends on, the
command that regenerates it (``kernel-verify reports --stale``, ``make reports``).

**The rule.** :data:`REPORTS` maps every regenerable committed report (its path under the
repository root) to a :class:`Spec`: the command that writes it, the globs (relative to the
repository root) of the source files whose contents determine it, and the installed
distributions whose versions do (a conformance page: its library and that library's
dependencies). Its fingerprint (:func:`fingerprint`) is

    sha256( for each file f in sorted(⋃ globs):  relpath(f) ‖ 0x00 ‖ len(bytes(f)) ‖ 0x00 ‖ bytes(f)
            for each distribution d in order:      d ‖ "==" ‖ version(d) ‖ 0x00 )

truncated to 16 hex digits (files under ``__pycache__`` are never part of it). The writer of a
report stamps it on a line ``Fingerprint: `<hex>``` (Markdown) or under the key
``"report_fingerprint"`` (JSON) beside the ``Source: commit …`` stamp of
:mod:`kernel_verify.provenance`. A report is

* ``current`` when every fingerprint it records equals the one its sources give now,
* ``stale`` when one differs (the sources changed since it was written),
* ``unknown`` when it records none (written before fingerprints were stamped: it may or may
  not match the code; it is regenerated like a stale one),
* ``missing`` when the file does not exist,
* ``unverifiable`` when a distribution its fingerprint covers is not installed here, or it
  needs hardware this machine lacks (:attr:`Spec.needs`): it is listed, never refreshed here.

:data:`RECORDS` lists the committed files under ``reports/`` that are dated records of one past
run (a demonstration, a hand-written account, raw benchmark results): they describe what ran
then, with the commit they name, and are not regenerated. Every file under ``reports/`` is in
exactly one of the two tables (``tests/test_reports_current.py``).

This module imports only the standard library: report writers of every layer of the application
import it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

__all__ = ["RECORDS", "REPORTS", "Spec", "Status", "fingerprint", "json_field", "markdown_line",
           "recorded", "refresh", "repo_root", "source_files", "status", "statuses"]

#: The line prefix of a Markdown report's fingerprint, and the key of a JSON report's.
MARKER = "Fingerprint: "
JSON_KEY = "report_fingerprint"
_HEX = 16
_MD = re.compile(r"^Fingerprint: `?([0-9a-f]{16})`?", re.MULTILINE)
#: A section of a report written by a run of its own (calibration.md's parts).
_SECTION = re.compile(r"^## Part `", re.MULTILINE)


class Spec(NamedTuple):
    """How a committed report is made: ``command`` (a shell command run from the repository
    root), ``globs`` (the source files it depends on, relative to the repository root),
    ``distributions`` (installed distributions whose versions it depends on) and ``needs`` (what
    a machine must have to regenerate it, e.g. a CUDA GPU; empty: any machine with the venv)."""

    command: str
    globs: tuple[str, ...]
    distributions: tuple[str, ...] = ()
    needs: str = ""


# ------------------------------------------------------------------------------- the table
_SUITE = ("properties/**/*.py", "verify/**/*.py", "impls/**/*.py")
_RUNNER = ("kernel_verify/runner.py", "kernel_verify/provenance.py")
_KV = ".venv/bin/kernel-verify"

#: The adapter modules every conformance page runs (the record, the lazy import, the page writer
#: and the independent measurements' driver).
_ADAPTER_BASE = ("__init__", "_lazy", "library", "confirm", "conformance")
_FLA = ("fla", "fla_gated", "fla_delta", "_fla_confirm", "_fla_feature_maps",
        "_triton_interpreter")
_MODELS = ("fla_models", "transformers_models", "hf_models", "_model_confirm", *_FLA)
#: library key -> (adapter modules it imports besides the base, directly or not; distributions:
#: the library, its dependencies, and the numerical stack every page records)
_CONFORMANCE: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "sklearn": (("sklearn",), ("scikit-learn", "scipy")),
    "performer": (("performer", "_torchseed"),
                  ("performer-pytorch", "einops", "local-attention",
                   "axial-positional-embedding")),
    "nystrom_attention": (("nystrom_attention",), ("nystrom-attention", "einops")),
    "fla": (_FLA, ("fla-core", "triton", "einops")),
    "fla_delta": (_FLA, ("fla-core", "triton", "einops")),
    "fla_models": (_MODELS, ("flash-linear-attention", "fla-core", "transformers", "triton",
                             "einops")),
    "transformers_models": (_MODELS, ("transformers", "huggingface-hub", "safetensors")),
}
_STACK = ("torch", "numpy", "hypothesis")


def _conformance(key: str, modules: tuple[str, ...], dists: tuple[str, ...]) -> Spec:
    adapters = tuple(f"kernel_verify/adapters/{m}.py"
                     for m in dict.fromkeys((*_ADAPTER_BASE, *modules)))
    return Spec(f"{_KV} conformance {key}", (*adapters, *_SUITE, *_RUNNER,
                                              "kernel_verify/probe.py"), (*dists, *_STACK))


#: Every regenerable committed report: path (relative to the repository root) -> :class:`Spec`,
#: in the order ``--refresh`` remakes them: the quick ones first (power: minutes; the conformance
#: pages: about 20 minutes in all; the kill matrices: a quarter of an hour or more), the full
#: calibration (hours) last; then the pages only a GPU machine remakes.
REPORTS: dict[str, Spec] = {
    "reports/power.md": Spec(f"{_KV} calibrate --part power",
                             ("kernel_verify/calibration/power.py",
                              "kernel_verify/calibration/certify.py",
                              "kernel_verify/mutants/attention.py", *_SUITE,
                              "kernel_verify/provenance.py")),
    **{f"reports/conformance/{key}.{ext}": _conformance(key, mods, dists)
       for key, (mods, dists) in _CONFORMANCE.items() for ext in ("md", "json")},
    # a page written when the library was not installed (its adapter has no run to show)
    "reports/conformance/fast_transformers.md": _conformance(
        "fast_transformers", ("fast_transformers",), ("pytorch-fast-transformers",)),
    "reports/mutants.md": Spec(f"{_KV} mutants --blackbox",
                               ("kernel_verify/mutants/**/*.py", *_SUITE, *_RUNNER)),
    "reports/mutants.json": Spec(f"{_KV} mutants --blackbox",
                                 ("kernel_verify/mutants/**/*.py", *_SUITE, *_RUNNER)),
    "reports/calibration.md": Spec(f"{_KV} calibrate",
                                   ("kernel_verify/calibration/**/*.py",
                                    "kernel_verify/calibration_gradients.py",
                                    "kernel_verify/mutants/**/*.py", *_SUITE, *_RUNNER)),
    "reports/cuda/cuda_tests.md": Spec(
        "CI=true python3 -m pytest -p no:cacheprovider -q -n 14 -k cuda properties tests -rsf",
        (*_SUITE, "tests/**/*.py"), needs="a CUDA GPU (the lent device; the page is written "
        "by hand from the run's output)"),
    "reports/gpu/summary.md": Spec("make gpu", ("tools/gpu/**/*.py", "benchmarks/**/*.py",
                                                *_SUITE), needs="a CUDA GPU (the lent device)"),
    "reports/gpu/run.json": Spec("make gpu", ("tools/gpu/**/*.py", "benchmarks/**/*.py",
                                              *_SUITE), needs="a CUDA GPU (the lent device)"),
    "reports/gpu/gate.log": Spec("make gpu", ("tools/gpu/**/*.py", *_SUITE),
                                 needs="a CUDA GPU (the lent device)"),
}

#: Committed files under ``reports/`` that record one dated past run and are not regenerated:
#: path or folder (a trailing ``/``) -> why.
RECORDS: dict[str, str] = {
    "reports/example_adapter.md": "the wheel before and after issue #18, two named commits",
    "reports/asv/": "asv's raw results per commit and the dashboard made from them",
    "reports/gpu/demo/": "throwaway demonstration commits of the regression rule",
    "reports/gpu/regression-demo.md": "a demonstration on named throwaway commits",
    "reports/gpu/rehearsal/": "one CPU rehearsal of the GPU run at a named commit",
}


# ---------------------------------------------------------------------------- fingerprints
def repo_root() -> Path:
    """The checkout this package runs from (the folder holding ``kernel_verify/`` and
    ``properties/``); a ``RuntimeError`` for an installed wheel, which has no committed
    reports."""
    root = Path(__file__).resolve().parent.parent
    if not (root / "properties").is_dir() or not (root / "reports").is_dir():
        raise RuntimeError(f"{root} is not a kernel-verify checkout (no properties/ and "
                           "reports/ beside kernel_verify/): committed reports live only there")
    return root


def _spec(report: str) -> Spec:
    try:
        return REPORTS[report]
    except KeyError:
        raise KeyError(f"report {report!r} is not in kernel_verify.fingerprints.REPORTS; "
                       f"known: {', '.join(sorted(REPORTS))}") from None


def source_files(globs: Iterable[str], root: Path) -> list[Path]:
    """The files the ``globs`` match under ``root``, sorted, without ``__pycache__``."""
    found = {p for g in globs for p in root.glob(g)
             if p.is_file() and "__pycache__" not in p.parts}
    return sorted(found)


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def fingerprint(report: str, root: Path | None = None, *,
                _cache: dict[Path, bytes] | None = None) -> str:
    """The fingerprint of ``report`` (a key of :data:`REPORTS`) from the sources under ``root``
    (default: :func:`repo_root`) and the installed distributions (module docstring: the
    formula). A distribution that is not installed enters as ``name==None``."""
    spec = _spec(report)
    root = repo_root() if root is None else Path(root)
    digest = hashlib.sha256()
    for f in source_files(spec.globs, root):
        data = _cache.get(f) if _cache is not None else None
        if data is None:
            data = f.read_bytes()
            if _cache is not None:
                _cache[f] = data
        digest.update(f.relative_to(root).as_posix().encode() + b"\0")
        digest.update(str(len(data)).encode() + b"\0" + data)
    for d in spec.distributions:
        digest.update(f"{d}=={_dist_version(d)}\0".encode())
    return digest.hexdigest()[:_HEX]


def markdown_line(report: str, root: Path | None = None) -> str:
    """The line a Markdown report carries beside its ``Source: commit …`` stamp (outside a
    checkout: a line that records none, so the report reads as ``unknown``)."""
    try:
        value = fingerprint(report, root)
    except RuntimeError:
        return f"{MARKER}none (not written from a kernel-verify checkout)"
    return (f"{MARKER}`{value}` (of the sources and versions this report depends on; "
            "`kernel-verify reports --stale` lists the reports whose sources changed since)")


def json_field(report: str, root: Path | None = None) -> dict[str, str]:
    """The field a JSON report carries: ``{"report_fingerprint": <hex>}`` (outside a checkout:
    none)."""
    try:
        return {JSON_KEY: fingerprint(report, root)}
    except RuntimeError:
        return {}


def recorded(path: Path) -> list[str]:
    """The fingerprints a report file records: one per separately written section for a report
    made of them (calibration.md's parts; ``""`` for each section that records none), else the
    ones it carries; empty when it records none."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError:
            return []
        value = data.get(JSON_KEY) if isinstance(data, dict) else None
        return [value] if isinstance(value, str) else []
    found = _MD.findall(text)
    sections = len(_SECTION.findall(text))
    return found + [""] * (sections - len(found)) if found else found


# ------------------------------------------------------------------------------ the status
@dataclass(frozen=True)
class Status:
    """Where one committed report stands (module docstring: the states)."""

    report: str
    state: str  # current | stale | unknown | missing | unverifiable
    now: str  # its fingerprint from the sources now ("" when unverifiable)
    recorded: tuple[str, ...]
    command: str
    why: str = ""

    @property
    def refreshable(self) -> bool:
        return self.state in ("stale", "unknown", "missing")

    def line(self) -> str:
        was = ", ".join(self.recorded) or "none recorded"
        text = f"{self.state:<12} {self.report}  (recorded {was}; now {self.now or '?'})"
        if self.why:
            text += f"  [{self.why}]"
        return text + (f"\n             refresh: {self.command}" if self.state != "current"
                       else "")


def status(report: str, root: Path | None = None, *,
           _cache: dict[Path, bytes] | None = None) -> Status:
    """The :class:`Status` of one report of :data:`REPORTS` under ``root``."""
    spec = _spec(report)
    root = repo_root() if root is None else Path(root)
    path = root / report
    missing = [d for d in spec.distributions if _dist_version(d) is None]
    now = "" if missing else fingerprint(report, root, _cache=_cache)
    seen = tuple(recorded(path)) if path.exists() else ()
    if missing:
        return Status(report, "unverifiable", now, seen, spec.command,
                      f"not installed here: {', '.join(missing)}")
    if not path.exists():
        state = "missing"
    elif not seen:
        state = "unknown"
    else:
        state = "current" if all(s == now for s in seen) else "stale"
    why = ""
    if state == "unknown":
        why = "written before reports carried a fingerprint"
    elif "" in seen:
        why = "some of its sections record no fingerprint"
    if spec.needs and state != "current":
        return Status(report, "unverifiable", now, seen, spec.command,
                      f"{why + '; ' if why else ''}needs {spec.needs}")
    return Status(report, state, now, seen, spec.command, why)


def statuses(root: Path | None = None) -> list[Status]:
    """The :class:`Status` of every report of :data:`REPORTS`, in its order, each source file
    read once."""
    root = repo_root() if root is None else Path(root)
    cache: dict[Path, bytes] = {}
    return [status(r, root, _cache=cache) for r in REPORTS]


def unclassified(root: Path | None = None) -> list[str]:
    """Files under ``reports/`` that are in neither :data:`REPORTS` nor :data:`RECORDS`."""
    root = repo_root() if root is None else Path(root)
    out = []
    for p in sorted((root / "reports").rglob("*")):
        rel = p.relative_to(root).as_posix()
        if (p.is_file() and rel not in REPORTS and rel not in RECORDS
                and not any(rel.startswith(k) for k in RECORDS if k.endswith("/"))):
            out.append(rel)
    return out


def refresh(items: Sequence[Status], root: Path | None = None, *,
            echo=print) -> int:
    """Run the command of each refreshable item once (two reports of one command share a run),
    from ``root``; the exit status: 0 when every command succeeded, else the first failure's.
    Items that cannot be refreshed here are listed and left alone."""
    root = repo_root() if root is None else Path(root)
    status_code = 0
    done: set[str] = set()
    for s in items:
        if not s.refreshable:
            if s.state != "current":
                echo(f"not refreshed here: {s.report} ({s.why})")
            continue
        if s.command in done:
            continue
        done.add(s.command)
        echo(f"$ {s.command}    # {s.report}: {s.state}")
        start = time.monotonic()
        args = shlex.split(s.command)
        if args[0] == _KV:  # the venv of the checkout, or the running interpreter's
            kv = root / _KV
            args = ([str(kv)] if kv.exists() else
                    [sys.executable, "-m", "kernel_verify.cli"]) + args[1:]
        rc = subprocess.run(args, cwd=root, check=False).returncode
        echo(f"  exit {rc} after {time.monotonic() - start:.0f} s")
        if rc and not status_code:
            status_code = rc
    return status_code
