"""The Markdown summary of a GPU run (or of its CPU rehearsal): gate, then one row per cell.

``python -m tools.gpu.summary RUN_JSON [OUT_MD]`` renders the summary again from a run's
``run.json`` (the record the run writes beside it), e.g. after a change of this renderer.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

#: The suffix older runs appended to the title of an incomplete run (now the renderer's job).
_OLD_PROGRESS = re.compile(r" \(in progress: .*\)$")


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.3g} µs"


def render(meta: dict[str, Any], gate: dict[str, Any] | None,
           rows: list[dict[str, Any]], complete: bool = True) -> str:
    """``meta``: device, commits, budget, rule; ``gate``: its counts (None if not run);
    ``rows``: per cell label, base/head medians, ratio, p-values, verdict or reason;
    ``complete``: False for a run that has not (or never) reached its last cell — the title
    then says how many of the planned cells the page holds."""
    title = _OLD_PROGRESS.sub("", meta["title"])
    if not complete:
        planned = meta.get("cells_planned")
        of = f" of {planned}" if planned is not None else ""
        title += (f" — incomplete: {len(rows)}{of} cells timed (the run did not reach its "
                  "last cell: stopped from outside, or still running)")
    gate_part = ("gate not run" if gate is None else f"gate {gate['seconds']:.0f} s of it, "
                 f"budget {meta['gate_budget']:.0f} s")
    out = [f"# {title}", "",
           f"- device: {meta['device_name']} (`{meta['device']}`), torch {meta['torch']}, "
           f"Python {meta['python']}",
           f"- head: `{meta['head']}`; base (previous): `{meta['base']}`",
           f"- command: `{meta['command']}`",
           f"- wall time: {meta['wall']:.0f} s of a {meta['budget']:.0f} s budget "
           f"({gate_part})",
           f"- rule: a cell is a regression iff the median paired ratio head/base exceeds "
           f"{meta['factor']} and the exact one-sided sign test over {meta['rounds']} "
           f"alternating rounds rejects at α = {meta['alpha']} (docs/benchmarks.md)", ""]
    if gate is None:
        out += ["Gate: not run (`--no-gate`).", ""]
    else:
        verdict = "passed" if gate["ok"] else "FAILED: nothing was timed"
        out += [f"Gate ({gate['seconds']:.0f} s): {gate['passed']} passed, "
                f"{len(gate['failed'])} failed, {gate['skipped']} skipped by the suite, "
                f"{gate['not_run']} not run (budget) — {verdict}.", ""]
        out += [f"- failed: `{n}`" for n in gate["failed"][:20]]
        if gate["failed"]:
            out.append("")
    out += ["| cell | base (median) | head (median) | head/base (median of paired ratios) "
            "| p (slower) | p (faster) | verdict |",
            "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "reason" in r:
            out.append(f"| `{r['label']}` | – | {_ms(r.get('head'))} | – | – | – | "
                       f"{r['reason']} |")
            continue
        out.append(f"| `{r['label']}` | {_ms(r['base'])} | {_ms(r['head'])} | "
                   f"{r['ratio']:.3f} | {r['p_slower']:.2g} | {r['p_faster']:.2g} | "
                   f"**{r['verdict']}** |" if r["verdict"] != "no change" else
                   f"| `{r['label']}` | {_ms(r['base'])} | {_ms(r['head'])} | "
                   f"{r['ratio']:.3f} | {r['p_slower']:.2g} | {r['p_faster']:.2g} | no change |")
    regressions = sum(r.get("verdict") == "regression" for r in rows)
    out += ["", f"Regressions: {regressions}."]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Render ``RUN_JSON``'s summary to ``OUT_MD`` (default: ``summary.md`` beside it)."""
    ap = argparse.ArgumentParser(prog="python -m tools.gpu.summary",
                                 description="render a GPU run's summary.md from its run.json")
    ap.add_argument("run_json", type=Path, metavar="RUN_JSON", help="the run's record")
    ap.add_argument("out_md", type=Path, nargs="?", metavar="OUT_MD",
                    help="where to write (default: summary.md beside RUN_JSON)")
    args = ap.parse_args(argv)
    source = args.run_json
    try:
        record = json.loads(source.read_text())
        meta, gate, cells = record["meta"], record["gate"], record["cells"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"summary: RUN_JSON {source} is not a GPU run's record: {exc}", file=sys.stderr)
        return 2
    out = args.out_md or source.with_name("summary.md")
    out.write_text(render(meta, gate, cells, complete=bool(record.get("complete", True))))
    print(f"summary: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
