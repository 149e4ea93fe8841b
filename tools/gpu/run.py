"""``make gpu``: the prepared GPU run, one process, within a stated budget (default 6 minutes).

    python -m tools.gpu.run --device cuda [--base REV | --base-tree DIR] [--budget 360]
    python -m tools.gpu.run --device cpu      # the rehearsal on this CPU, reduced sizes

1. the gate (:mod:`tools.gpu.gate`): the device's property cases of the timed code; a failure
   stops the run;
2. the previous commit (``--base``, default ``HEAD~1``, exported with ``git archive``; or
   ``--base-tree``, exported beforehand by ``make gpu-prepare`` for a machine without ``.git``)
   and the current tree are loaded side by side (:mod:`tools.gpu.versions`);
3. each cell of the plan (:mod:`tools.gpu.plan`), in priority order: both versions set up, warmed
   up untimed, then :data:`~tools.gpu.plan.ROUNDS` rounds (per device) alternating them in a
   seeded random order, CUDA-event timing on CUDA (:mod:`tools.gpu.timing`); a cell whose
   measured cost does not fit the budget left is not run and the summary says so;
4. the verdict per cell (:mod:`tools.gpu.stats`): factor and exact sign test;
5. asv results for both commits under the device's machine entry (:mod:`tools.gpu.asv_results`),
   ``summary.md`` and ``run.json`` (per-cell costs, for the budget test) in ``--out``.

Exit status: 0 no regression, 1 a regression or a failed gate, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from tools.gpu import asv_results, plan, stats, summary, timing, versions
from tools.gpu.gate import run_gate

ROOT = Path(__file__).resolve().parents[2]


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m tools.gpu.run",
                                 description="the prepared GPU run (docs/benchmarks.md)")
    ap.add_argument("--device", choices=sorted(plan.BUDGET), default="cuda")
    base = ap.add_mutually_exclusive_group()
    base.add_argument("--base", default="HEAD~1", help="previous commit (default HEAD~1)")
    base.add_argument("--base-tree", type=Path, help="an exported tree of the previous commit")
    head = ap.add_mutually_exclusive_group()
    head.add_argument("--head", help="a commit to time instead of the working tree")
    head.add_argument("--head-tree", type=Path, help="an exported tree to time as head")
    ap.add_argument("--budget", type=float, help="seconds for the whole run")
    ap.add_argument("--gate-budget", type=float, help="seconds for the gate")
    ap.add_argument("--no-gate", action="store_true", help="skip the correctness gate")
    ap.add_argument("--rounds", type=int, help="rounds per cell (default: the plan's, per device)")
    ap.add_argument("--factor", type=float, default=stats.FACTOR)
    ap.add_argument("--alpha", type=float, default=stats.ALPHA)
    ap.add_argument("--only", help="time only cells whose label contains this text")
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--out", type=Path, help="summary folder (default reports/gpu for cuda, "
                    "reports/gpu/rehearsal for cpu)")
    ap.add_argument("--results-dir", type=Path, help="asv results folder (default "
                    "reports/asv/results for cuda, build/gpu/rehearsal-asv for cpu: the "
                    "rehearsal's timings on a shared CPU are not a series to keep)")
    args = ap.parse_args(argv)
    # an explicit 0 is an error, never the default (None: not given)
    args.budget = plan.BUDGET[args.device] if args.budget is None else args.budget
    args.gate_budget = (plan.GATE_BUDGET[args.device] if args.gate_budget is None
                        else args.gate_budget)
    args.rounds = plan.ROUNDS[args.device] if args.rounds is None else args.rounds
    for name in ("budget", "gate_budget", "factor", "alpha"):
        value = getattr(args, name)
        if not (value > 0 and math.isfinite(value)):
            ap.error(f"--{name.replace('_', '-')} must be a finite number > 0, got {value}")
    if not args.alpha < 1:
        ap.error(f"--alpha must be in (0, 1), got {args.alpha}")
    if args.rounds < 1:
        ap.error(f"--rounds must be >= 1, got {args.rounds}")
    if args.only is not None and not args.only.strip():
        ap.error("--only must name some text of a cell label (an empty --only would time "
                 "every cell)")
    if args.seed < 0:
        ap.error(f"--seed must be >= 0, got {args.seed}")
    if args.gate_budget >= args.budget:
        ap.error("--gate-budget must be smaller than --budget")
    if args.rounds < stats.min_rounds(args.alpha):
        ap.error(f"--rounds {args.rounds} cannot reach alpha {args.alpha}: the sign test needs "
                 f"at least {stats.min_rounds(args.alpha)} rounds")
    for tree in (args.base_tree, args.head_tree):
        if tree is not None and not tree.is_dir():
            ap.error(f"tree {tree} is not a folder")
    args.out = args.out or (ROOT / ("reports/gpu" if args.device == "cuda"
                                    else "reports/gpu/rehearsal"))
    args.results_dir = args.results_dir or (ROOT / ("reports/asv/results" if args.device == "cuda"
                                                    else "build/gpu/rehearsal-asv"))
    return args


def _commit_of(tree: Path) -> tuple[str, int]:
    """The commit hash and date (ms) of a tree: its COMMIT file, or git for the checkout, or
    the ``HEAD_COMMIT`` that ``tools.gpu.prepare`` left for a machine without ``.git``."""
    marker = tree / "COMMIT"
    if not marker.exists() and not (tree / ".git").exists():
        marker = tree / "build" / "gpu" / "HEAD_COMMIT"
    if marker.exists():
        commit = marker.read_text().split()[0]
    else:
        try:
            commit = versions.git("rev-parse", "HEAD", cwd=tree)
            if versions.git("status", "--porcelain", "--untracked-files=no", cwd=tree):
                print(f"[gpu] note: {tree} has uncommitted changes; timed as {commit[:8]}")
        except (ValueError, FileNotFoundError):
            return "0" * 40, int(time.time() * 1000)
    try:
        date = int(versions.git("show", "-s", "--format=%ct", commit, cwd=ROOT)) * 1000
    except (ValueError, FileNotFoundError):
        date = int(time.time() * 1000)
    return commit, date


def _trees(args: argparse.Namespace, work: Path) -> tuple[Path, Path]:
    if args.base_tree is not None:
        base = args.base_tree
    else:
        base, _ = versions.export_commit(ROOT, args.base, work / "base")
    if args.head_tree is not None:
        head = args.head_tree
    elif args.head is not None:
        head, _ = versions.export_commit(ROOT, args.head, work / "head")
    else:
        head = ROOT
    return base, head


def _device_name(device: str) -> tuple[str, str]:
    import torch

    name = torch.cuda.get_device_name(0) if device == "cuda" else platform.processor() or \
        platform.machine()
    return name, torch.__version__


def _make(version: versions.Version, cell: plan.Cell) -> tuple[Any, Any]:
    """An instance of the cell's benchmark class, set up, and its bound timed method."""
    cls_name, method = cell.method.split(".")
    cls = version.get(f"{cell.module}:{cls_name}")
    with version.active():
        obj = cls()
        obj.setup(*cell.params)
    return obj, getattr(obj, method)


def _teardown(version: versions.Version, obj: Any, cell: plan.Cell) -> None:
    if obj is not None and hasattr(obj, "teardown"):
        with version.active():
            obj.teardown(*cell.params)


def time_cell(cell: plan.Cell, base: versions.Version, head: versions.Version,
              timer: timing.Timer, rounds: int, seed: int,
              left: float) -> dict[str, Any]:
    """Set up, warm up and time one cell in both versions (or say why not)."""
    row: dict[str, Any] = {"label": cell.label, "cell": cell}
    t0 = time.monotonic()
    if left < cell.setup_reserve_s:
        return row | {"reason": f"not run: {left:.0f} s left, under the "
                                f"{cell.setup_reserve_s:.0f} s its set-up may take"}
    objs: dict[str, Any] = {}
    try:
        for version in (head, base):
            try:
                objs[version.label] = _make(version, cell)
            except KeyError as exc:
                if version is head:
                    return row | {"reason": f"not in head ({exc.args[0]})"}
                row["new"] = True
            except NotImplementedError as exc:
                return row | {"reason": f"skipped: {exc}"}
        fns = {label: fn for label, (_, fn) in objs.items()}

        def sample(version: versions.Version, number: int) -> float:
            with version.active():
                return timer(lambda: fns[version.label](*cell.params), number)

        per_call = 0.0
        for version in (head, base):
            if version.label in fns:
                with version.active():
                    per_call = max(per_call, timing.warm(timer, lambda v=version:
                                                         fns[v.label](*cell.params)))
        number = timing.calls_per_sample(per_call, timer.device)
        setup_s = time.monotonic() - t0
        cost = timing.cell_cost(per_call, number, rounds)
        row |= {"per_call": per_call, "number": number, "setup_s": setup_s, "cost_s": cost}
        if cost > left - setup_s:
            return row | {"reason": f"not run: needs {cost:.0f} s, {left - setup_s:.0f} s left"}
        if row.get("new"):
            head_samples = [sample(head, number) for _ in range(rounds)]
            return row | {"head_samples": head_samples, "head": statistics.median(head_samples),
                          "reason": "new (not in base)"}
        b, h = timing.alternate(lambda: sample(base, number), lambda: sample(head, number),
                                rounds, seed)
        row |= {"base_samples": b, "head_samples": h}
        return row
    finally:
        for version in (head, base):
            if version.label in objs:
                _teardown(version, objs[version.label][0], cell)
        row["cell_s"] = time.monotonic() - t0


def _asv_timings(rows: list[dict[str, Any]], key: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in rows:
        samples = r.get(key)
        if samples:
            combo = tuple(repr(p) for p in r["cell"].params)
            out.setdefault(r["cell"].asv_name, {})[combo] = asv_results.stats_of(
                samples, r["number"])
    return out


def _write_outputs(args: argparse.Namespace, meta: dict[str, Any], gate: Any,
                   rows: list[dict[str, Any]], commits: tuple[tuple[str, int], ...],
                   wall: float, final: bool) -> None:
    """asv results of the cells timed so far, ``summary.md`` and ``run.json``; before the last
    cell both say the run is incomplete and how many of the planned cells they hold."""
    if rows:
        from tools.asv_dashboard import machine_info

        machine = machine_info()
        for (commit, date), key in zip(commits, ("head_samples", "base_samples"), strict=True):
            timings = _asv_timings(rows, key)
            if timings and set(commit) != {"0"}:
                asv_results.write(args.results_dir, machine, commit, date, meta["python"],
                                  timings, wall)
        asv_results.widen_listing(args.results_dir)
    meta = meta | {"wall": wall}
    gate_dict = None if gate is None else {**gate.__dict__, "ok": gate.ok}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.md").write_text(summary.render(meta, gate_dict, rows, complete=final))
    record = {"meta": meta, "gate": gate_dict, "complete": final,
              "cells": [{k: v for k, v in r.items() if k != "cell"} for r in rows]}
    (args.out / "run.json").write_text(json.dumps(record, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    start = time.monotonic()
    work = ROOT / "build" / "gpu" / "work"
    try:
        timer = timing.Timer(args.device)
    except RuntimeError as exc:
        print(f"gpu: {exc}", file=sys.stderr)
        return 2
    base_tree, head_tree = _trees(args, work)
    base_commit, base_date = _commit_of(base_tree)
    head_commit, head_date = _commit_of(head_tree)
    device_name, torch_version = _device_name(args.device)
    print(f"[gpu] {args.device} ({device_name}); head {head_commit[:8]} vs base "
          f"{base_commit[:8]}; budget {args.budget:.0f} s", flush=True)
    gate = None
    if not args.no_gate:
        gate = run_gate(head_tree, args.device, args.gate_budget, args.out / "gate.log")
        print(f"[gpu] gate: {gate.passed} passed, {len(gate.failed)} failed, {gate.not_run} "
              f"not run (budget), {gate.skipped} skipped in {gate.seconds:.0f} s", flush=True)
    rows: list[dict[str, Any]] = []
    meta = {"title": "GPU run" if args.device == "cuda" else "GPU run: CPU rehearsal",
            "device": args.device, "device_name": device_name, "torch": torch_version,
            "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
            "head": head_commit[:8], "base": base_commit[:8],
            "command": "python -m tools.gpu.run " + " ".join(argv if argv is not None
                                                              else sys.argv[1:]),
            "budget": args.budget, "gate_budget": args.gate_budget,
            "factor": args.factor, "rounds": args.rounds, "alpha": args.alpha}
    commits = ((head_commit, head_date), (base_commit, base_date))
    if gate is None or gate.ok:
        base = versions.load("base", base_tree, base_commit, plan.MODULES, work)
        head = versions.load("head", head_tree, head_commit, plan.MODULES, work)
        cells = [c for c in plan.cells(args.device) if not args.only or args.only in c.label]
        for i, cell in enumerate(cells):
            left = args.budget - (time.monotonic() - start)
            # Said before the set-up, which is not bounded (a Triton kernel's autotuning can
            # take minutes): a run killed from outside names the cell it was in.
            print(f"[gpu] {i + 1}/{len(cells)} {cell.label}: setting up [{left:.0f} s left]",
                  flush=True)
            row = time_cell(cell, base, head, timer, args.rounds, args.seed + i, left)
            if "base_samples" in row:
                cmp = stats.compare(row["base_samples"], row["head_samples"], args.factor,
                                    args.alpha)
                row |= {"base": statistics.median(row["base_samples"]),
                        "head": statistics.median(row["head_samples"]),
                        "ratio": cmp.ratio, "p_slower": cmp.p_slower, "p_faster": cmp.p_faster,
                        "verdict": cmp.verdict}
            rows.append(row)
            what = row.get("verdict") or row.get("reason")
            extra = f" ratio {row['ratio']:.3f}" if "ratio" in row else ""
            print(f"[gpu] {i + 1}/{len(cells)} {cell.label}:{extra} {what} "
                  f"[{time.monotonic() - start:.0f} s]", flush=True)
            # Written after every cell: a run stopped from outside keeps the cells it timed.
            _write_outputs(args, meta | {"cells_planned": len(cells)}, gate, rows, commits,
                           time.monotonic() - start, final=False)
    wall = time.monotonic() - start
    _write_outputs(args, meta, gate, rows, commits, wall, final=True)
    print(f"[gpu] done in {wall:.0f} s: {args.out / 'summary.md'}", flush=True)
    if gate is not None and not gate.ok:
        return 1
    return int(any(r.get("verdict") == "regression" for r in rows))


if __name__ == "__main__":
    sys.exit(main())
