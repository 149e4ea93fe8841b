"""The run's timings written as asv results (file format version 2), beside ``make bench``'s.

One file per commit and environment, ``<results>/<machine>/<hash[:8]>-existing-py<X.Y>.json``, as
``tools/asv_dashboard.py`` names them, and the machine's ``machine.json``; a file that exists is
merged, benchmark by benchmark and parameter combination by combination, so the CPU and CUDA
series of one machine entry, or two runs of one commit, never erase each other.  Each benchmark's
``version`` is taken from ``benchmarks.json`` (asv's listing of the current benchmark code), so
``asv publish`` draws the run's points in the same graphs as ``make bench``'s.  A parameter value
is stored as asv stores it: its ``repr``.  Statistics per combination: the median (asv's
``result``), a distribution-free 99 % interval of the median (:func:`.stats.median_ci`), the
quartiles, ``number`` and the count of samples, and the samples themselves.
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
from pathlib import Path
from typing import Any

from tools.gpu.stats import median_ci

COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
           "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
           "samples", "profile"]
PER_COMBO = ["result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75",
             "stats_number", "stats_repeat", "samples"]


def _combos(entry: dict[str, Any]) -> dict[tuple[str, ...], dict[str, Any]]:
    """An asv entry (a dict of columns) as ``{parameter combination: per-combination values}``."""
    out = {}
    for i, combo in enumerate(itertools.product(*entry["params"])):
        values = {c: (entry.get(c) or [None] * (i + 1))[i] for c in PER_COMBO}
        if values["result"] is not None:
            out[combo] = values
    return out


def _entry(combos: dict[tuple[str, ...], dict[str, Any]], version: str, started: int,
           duration: float) -> dict[str, Any]:
    dims = len(next(iter(combos)))
    params = [list(dict.fromkeys(c[i] for c in combos)) for i in range(dims)]
    product = list(itertools.product(*params))
    entry: dict[str, Any] = {"params": params, "version": version, "started_at": started,
                             "duration": duration, "profile": None}
    for column in PER_COMBO:
        entry[column] = [combos.get(c, {}).get(column) for c in product]
    return entry


def stats_of(samples: list[float], number: int) -> dict[str, Any]:
    """asv's per-combination columns for ``samples`` (seconds per call)."""
    lo, hi = median_ci(samples)
    q1, _, q3 = statistics.quantiles(samples, n=4) if len(samples) > 1 else samples * 3
    return {"result": statistics.median(samples), "stats_ci_99_a": lo, "stats_ci_99_b": hi,
            "stats_q_25": q1, "stats_q_75": q3, "stats_number": number,
            "stats_repeat": len(samples), "samples": list(samples)}


def benchmark_versions(results_dir: Path) -> dict[str, str]:
    """``{benchmark name: version}`` from asv's ``benchmarks.json`` (empty if there is none)."""
    listing = results_dir / "benchmarks.json"
    if not listing.exists():
        return {}
    data = json.loads(listing.read_text())
    return {k: v["version"] for k, v in data.items() if isinstance(v, dict) and "version" in v}


def write(results_dir: Path, machine: dict[str, str], commit: str, commit_date_ms: int,
          python: str, timings: dict[str, dict[tuple[str, ...], dict[str, Any]]],
          duration: float) -> Path:
    """Merge ``timings`` (``{asv name: {repr-params: stats_of(...)}}``) into the commit's file."""
    folder = results_dir / machine["machine"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "machine.json").write_text(json.dumps({**machine, "version": 1}, indent=4) + "\n")
    env = f"existing-py{python}"
    path = folder / f"{commit[:8]}-{env}.json"
    if path.exists():
        data = json.loads(path.read_text())
        if data.get("result_columns") != COLUMNS:
            raise ValueError(f"{path}: result columns {data.get('result_columns')} are not "
                             f"asv's version-2 columns; refusing to merge")
    else:
        data = {"commit_hash": commit, "env_name": env, "date": commit_date_ms,
                "params": {k: machine[k] for k in ("machine", "os", "arch", "cpu", "num_cpu",
                                                   "ram")} | {"python": python},
                "python": python, "requirements": {}, "env_vars": {},
                "result_columns": COLUMNS, "results": {}, "durations": {}, "version": 2}
    versions = benchmark_versions(results_dir)
    started = int(time.time() * 1000)
    for name, combos in timings.items():
        old = data["results"].get(name)
        merged = {}
        if old is not None:
            merged = _combos(dict(zip(COLUMNS, old, strict=True)))
        merged.update(combos)
        version = versions.get(name) or (dict(zip(COLUMNS, old, strict=True))["version"]
                                         if old else "gpu-run")
        entry = _entry(merged, version, started, duration)
        data["results"][name] = [entry.get(c) for c in COLUMNS]
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def widen_listing(results_dir: Path) -> list[str]:
    """Extend each benchmark's parameter lists in ``benchmarks.json`` with the values found in
    any machine's results of that benchmark (same number of parameters), so ``asv publish``
    graphs a CUDA series recorded on another machine: asv draws only the combinations its
    listing names, and a listing written on a CPU machine names no ``torch:cuda`` case.
    Returns the benchmarks widened. Values already listed keep their order."""
    listing_path = results_dir / "benchmarks.json"
    if not listing_path.exists():
        return []
    listing = json.loads(listing_path.read_text())
    seen: dict[str, list[list[str]]] = {}
    for path in sorted(results_dir.glob("*/*.json")):
        if path.name == "machine.json":
            continue
        data = json.loads(path.read_text())
        columns = data.get("result_columns", [])
        if "params" not in columns:
            continue
        for name, row in data.get("results", {}).items():
            params = row[columns.index("params")]
            if name in listing and len(params) == len(listing[name].get("params", [])):
                dims = seen.setdefault(name, [[] for _ in params])
                for dim, values in zip(dims, params, strict=True):
                    dim.extend(v for v in values if v not in dim)
    widened = []
    for name, dims in seen.items():
        current = listing[name]["params"]
        new = [cur + [v for v in dim if v not in cur] for cur, dim in zip(current, dims,
                                                                          strict=True)]
        if new != current:
            listing[name]["params"] = new
            widened.append(name)
    if widened:
        listing_path.write_text(json.dumps(listing, indent=4, sort_keys=True) + "\n")
    return widened
