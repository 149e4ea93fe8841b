"""The Markdown summary of a GPU run (or of its CPU rehearsal): gate, then one row per cell."""

from __future__ import annotations

from typing import Any


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.3g} µs"


def render(meta: dict[str, Any], gate: dict[str, Any] | None,
           rows: list[dict[str, Any]]) -> str:
    """``meta``: device, commits, budget, rule; ``gate``: its counts (None if not run);
    ``rows``: per cell label, base/head medians, ratio, p-values, verdict or reason."""
    out = [f"# {meta['title']}", "",
           f"- device: {meta['device_name']} (`{meta['device']}`), torch {meta['torch']}, "
           f"Python {meta['python']}",
           f"- head: `{meta['head']}`; base (previous): `{meta['base']}`",
           f"- command: `{meta['command']}`",
           f"- wall time: {meta['wall']:.0f} s of a {meta['budget']:.0f} s budget "
           f"(gate {meta['gate_budget']:.0f} s of it)",
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
