"""Depth settings of ``kernel-verify report`` (full and quick) and the code version of the cache.

Every number the report shows is a function of (map, its configuration, these settings, the code
version); the per-map cache (:mod:`kernel_verify.verify.cache`) is keyed by all four, so a re-run
recomputes only the maps whose entry, settings or code changed.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

#: Folders whose source decides the report's numbers (a change there invalidates the cache); the
#: report's own measuring modules included (they left ``verify/`` with the move to
#: ``kernel_verify/report`` and had dropped out of the hash).
_SOURCES = ("impls", "verify", "properties", "kernel_verify/report")
#: Modules that decide no cached map number (layout, figures, and the system, mutant and
#: calibration pages, computed afresh on every run): editing them re-renders without recomputing.
_PRESENTATION = frozenset({"kernel_verify/report/figures.py", "kernel_verify/report/pages.py",
                           "kernel_verify/report/main.py", "kernel_verify/report/overview.py",
                           "kernel_verify/report/systems.py",
                           "kernel_verify/report/system_pages.py",
                           "kernel_verify/report/system_checks.py",
                           "kernel_verify/report/summaries.py"})


@dataclass(frozen=True)
class Settings:
    """How deep the report measures (see the reading guide on the index page)."""

    depth: str
    d: int = 8
    ms: tuple[int, ...] = (8, 16, 32, 64, 128)
    draws: int = 1000
    #: bootstrap resamples for the variance and mean intervals
    boot: int = 2000
    #: draws of the cached Monte Carlo reference (maps without exact moments)
    ref_draws: int = 12000
    #: m and draws of the input-geometry sweep
    geo_m: int = 16
    geo_draws: int = 200
    geo_points: int = 6
    att_ms: tuple[int, ...] = (8, 16, 32, 64, 128, 256)
    att_ns: tuple[int, ...] = (16, 64, 256, 1024)
    att_seeds: int = 3
    krr_ms: tuple[int, ...] = (8, 16, 32, 64, 128, 256)
    krr_seeds: int = 3
    #: confidence level of every interval drawn
    conf: float = 0.999

    def key(self) -> str:
        return repr(sorted(asdict(self).items()))


FULL = Settings("full")
QUICK = Settings("quick", ms=(8, 32, 128), draws=300, boot=1000, ref_draws=4000, geo_draws=100,
                 geo_points=4, att_ms=(8, 32, 128), att_ns=(16, 256), att_seeds=2,
                 krr_ms=(), krr_seeds=0)


def source_files() -> list[Path]:
    """Every ``.py`` file of :data:`_SOURCES` (sorted per folder), presentation-only modules
    excepted: the files whose content decides the report's numbers."""
    root = Path(__file__).resolve().parents[2]
    return [path for folder in _SOURCES for path in sorted((root / folder).rglob("*.py"))
            if str(path.relative_to(root)) not in _PRESENTATION]


def code_version() -> str:
    """sha256 (16 hex digits) of :func:`source_files` (path and content)."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for path in source_files():
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]
