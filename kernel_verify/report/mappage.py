"""Compute (cached) and lay out the page of one registered map."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

import numpy as np

from kernel_verify.impls.names import identifier, split_name
from kernel_verify.impls.registry import FeatureMap
from kernel_verify.report import figures
from kernel_verify.report import gradients as grad
from kernel_verify.report import measure as measure_mod
from kernel_verify.report.accuracy import accuracy_rows, available_cases
from kernel_verify.report.downstream import attention_curves, krr_curve
from kernel_verify.report.measure import measure_target, pair, seed_of
from kernel_verify.report.pages import Page
from kernel_verify.report.settings import Settings
from kernel_verify.report.verdicts import (
    hypothesis_properties,
    overall,
    property_verdicts,
)
from kernel_verify.verify.cache import file_cache_get, file_cache_put
from kernel_verify.verify.references.kernels import kernel_mp


def _scan(entry: FeatureMap, d: int = 8):
    """q = s·u, k = u (u a fixed unit vector): map value, its kernel (mpmath), s."""
    u = np.random.default_rng(5).standard_normal(d)
    u /= np.linalg.norm(u)
    s = np.linspace(-2.0, 2.0, 41)
    params = entry.draw(np.random.default_rng(0), d, 8, entry.config)
    vals, kern, scale = [], [], []
    kp = entry.kernel_args(d)
    for t in s:
        f = entry.numpy_fn(np.stack([t * u, u]), params, entry.config)
        vals.append(float(f[0] @ f[1]))
        scale.append(float(np.linalg.norm(f[0]) * np.linalg.norm(f[1])))
        kern.append(float(kernel_mp(entry.kernel, t * u, u, **kp)))
    return s, np.array(vals), np.array(kern), np.array(scale)


def compute(entry: FeatureMap, s: Settings, alpha: float, version: str) -> dict:
    """Every number of the page (JSON-ready); cached by map, config, settings and code version."""
    key = repr((entry.name, sorted((k, repr(v)) for k, v in entry.config.items()), s.key(),
                alpha, version))
    hit = file_cache_get("report-map", key)
    if hit is not None:
        hit["cached"] = True
        return hit
    target = entry
    random = not entry.has("deterministic")
    acc = [asdict(r) for r in accuracy_rows(entry)]
    data: dict = {"name": entry.name, "random": random, "accuracy": acc,
                  "accuracy_ok": all(r["worst_ratio"] <= 1.0 for r in acc)}
    if random:
        data["measurement"] = measure_target(target, s, alpha=alpha, version=version).to_json()
        data["properties"] = [asdict(p) for p in property_verdicts(target)]
    elif not entry.has("positional"):
        sc, vals, kern, scale = _scan(entry)
        data["scan"] = {"s": sc.tolist(), "values": vals.tolist(), "kernel": kern.tolist()}
        # relative to ‖φ(q)‖‖φ(k)‖, the scale of a dot product's rounding error (the kernel
        # itself can be 0, e.g. a polynomial kernel at qᵀk = −c)
        rel = np.abs(vals - kern) / np.maximum(scale, 1e-300)
        data["identity_error"] = float(rel.max())
    data["gradients"] = [asdict(r) for r in grad.gradient_rows(target)]
    if random and entry.has("unbiased") and entry.torch_fn is not None:
        x, y = pair(s.d)
        data["gradient_bias"] = grad.gradient_bias(
            target, x, y, s.draws, seed_of(entry.name, 200), s.conf, s.boot, alpha).to_json()
    data["hypothesis"] = hypothesis_properties(target)
    data["attention"] = attention_curves(entry, s.att_ms, s.att_ns, s.att_seeds)
    data["krr"] = krr_curve(entry, s.krr_ms, s.krr_seeds) if random else None
    data["verdict"], data["reasons"] = _verdict(data, random)
    file_cache_put("report-map", key, data)
    data["cached"] = False
    return data


IDENTITY_TOL = 1e-9


def _verdict(data: dict, random: bool) -> tuple[str, list[str]]:
    from kernel_verify.report.verdicts import PropertyVerdict

    props = [PropertyVerdict(**p) for p in data.get("properties", [])]
    meas = data.get("measurement")
    tests = [p["test_ok"] for p in meas["points"]] if meas else []
    flags = [p["flag"] for p in meas["points"] if p["flag"]] if meas else []
    flags += [g["flag"] for g in meas["geometry"] if g.get("flag")] if meas else []
    flags += grad.bias_flags(data.get("gradient_bias"))
    v, reasons = overall(data["accuracy_ok"], props, tests, flags, random)
    bad = [f"{r['backend']} {r['dtype']}" for r in data.get("gradients", [])
           if r["status"] == "FAIL"]
    grad_fail = [f"autograd gradient beyond its derived bound on {', '.join(bad)}"] if bad else []
    if (data.get("gradient_bias") or {}).get("test_ok") is False:
        grad_fail.append("the gradient of the estimator is biased for ∇ₓk (the known-variance "
                         "mean test rejected)")
    # a flag whose second measurement rejected the estimator with a guaranteed test while the
    # theory's two routes agree (measure.resolve_flag): a bug in the code under test
    wrong = [p["flag"] for p in ((meas or {}).get("points", []) + (meas or {}).get("geometry", []))
             if p.get("resolution") == "estimator wrong"]
    grad_fail += [f"estimator wrong: {f}" for f in wrong]
    if grad_fail:
        return "FAIL", ([] if v != "FAIL" else reasons) + grad_fail
    points = ((meas or {}).get("points", []) + (meas or {}).get("geometry", []))
    open_ = [(f"m = {p['m']}" if "m" in p else f"{p['axis']} = {p['value']:.3g}")
             + f" (needs about {undecidable(p)} draws)" for p in points
             if undecidable(p) is not None]
    if open_ and v == "pass":
        return "not tested", ["theory variance not decidable at these draws at "
                              + ", ".join(open_)]
    if not random and v == "pass":
        err = data.get("identity_error")
        if err is None:
            return "not tested", ["positional map: the kernel identity is not scanned here"]
        if err > IDENTITY_TOL:
            return "FAIL", [f"φ(q)ᵀφ(k) differs from its kernel by {err:.2g} (relative)"]
    return v, reasons


def _pct(a: float) -> str:
    return f"{100 * a:+.3g} %"


#: The draws a guaranteed band would need, as measure.resolve_flag states them.
_NEEDED = re.compile(r"would need about (\S+) draws")


def undecidable(p: dict) -> str | None:
    """The draws a not-decidable theory point would need (``"3e+16"``), ``"?"`` where the text
    gives none, None for a point that was decided."""
    res = p.get("resolution") or ""
    if p.get("flag") or "not decidable" not in res:
        return None
    m = _NEEDED.search(res)
    return m.group(1) if m else "?"


def band_cell(p: dict) -> str:
    """The "theory in band?" cell of a theory point: flagged, not decidable, resolved, inside."""
    if p.get("flag"):
        return f"**flagged**: {p['flag']}"
    need = undecidable(p)
    if need is not None:
        return f"**not decidable** (needs about {need} draws)"
    return "resolved (below)" if p.get("resolution") else "inside band"


def mse_interval(p: dict, k: float) -> tuple[float, float]:
    """``(lo, hi)`` of MSE = (mean − k)² + Var over the mean's and the variance's intervals:
    the squared bias is smallest at the point of ``[mean_lo − k, mean_hi − k]`` nearest 0 and
    largest at its farthest end."""
    a, b = p["mean_lo"] - k, p["mean_hi"] - k
    b2_lo = 0.0 if a <= 0.0 <= b else min(a * a, b * b)
    return b2_lo + p["var_lo"], max(a * a, b * b) + p["var_hi"]


def family(name: str) -> str:
    """The map's formula family: its name without the ``[matrix]`` suffix."""
    return split_name(name)[0]


def render(entry: FeatureMap, data: dict, s: Settings, figdir: Path, rel: str,
           siblings: list[dict] | None = None) -> Page:
    """The page; figures are written into ``figdir`` (``rel``: its path from the page).
    ``siblings``: the computed data of the same formula under every random-matrix construction
    in this run (this map's included), for the iid / orthogonal / structured comparison."""
    page = Page(entry.name)
    stem = identifier(entry.name)
    page.p(f"[← index](../index.md) · verdict **{data['verdict']}**"
           + (": " + "; ".join(data["reasons"]) if data["reasons"] else ""))
    page.h("What it is")
    kp = entry.kernel_args(s.d)
    page.table(["field", "value"], [
        ["formula", f"`{entry.formula}`: {entry.description}"],
        ["target kernel", f"`{entry.kernel}` {kp if kp else ''}".strip()],
        ["mean kernel (declared)", f"`{entry.mean_kernel}`" if entry.mean_kernel else "—"],
        ["claims", ", ".join(sorted(entry.claims))],
        ["random matrix", entry.matrix or "—"],
        ["configuration", ", ".join(f"{k} = {v}" for k, v in entry.config.items()) or "—"],
        ["source", entry.source or "—"],
    ])
    if data["random"]:
        _random_sections(page, entry, data, s, figdir, rel, stem)
        _construction_section(page, entry, data, siblings or [], s, figdir, rel, stem)
    else:
        _deterministic_sections(page, entry, data, figdir, rel, stem)
    _downstream_section(page, entry, data, figdir, rel, stem)
    _accuracy_section(page, data)
    _gradient_section(page, entry, data, s, figdir, rel, stem)
    _property_section(page, data)
    page.h("Reproduce")
    page.code(f"kernel-verify report --maps '{entry.name}'")
    return page


def _random_sections(page, entry, data, s, figdir, rel, stem) -> None:
    meas = data["measurement"]
    th = meas["theory"]
    k = meas["kernel"]
    page.h("Bias and variance at the default pair")
    page.p(f"x = 0.8·e₁, y = 0.6·(cos 60° e₁ + sin 60° e₂), d = {s.d}; k(x, y) = {k:.6g}. "
           f"{s.draws} independent parameter draws per m (seed {meas['seed']} + index of m); "
           f"intervals are {s.conf:.1%} percentile-bootstrap intervals ({s.boot} resamples), "
           "valid for heavy-tailed estimators (no normal approximation). "
           f"Theory variance: **{th['variance_kind']}**. Theory mean: {th['mean_kind']}.")
    rows = []
    for p in meas["points"]:
        pred = "—" if p["theory_mean"] is None else _pct(p["theory_mean"] / k - 1)
        test = {True: "pass", False: "**FAIL**", None: "**not tested**"}[p["test_ok"]]
        rows.append([str(p["m"]), f"{p['mean']:.5g} [{p['mean_lo']:.5g}, {p['mean_hi']:.5g}]",
                     f"{_pct(p['mean'] / k - 1)} [{_pct(p['mean_lo'] / k - 1)}, "
                     f"{_pct(p['mean_hi'] / k - 1)}]", pred, f"{test} ({p['test']})"])
    page.table(["m", "measured mean [CI]", "measured bias [CI]", "predicted bias",
                "mean test (vs theory mean)"], rows)
    rows = []
    for p in meas["points"]:
        tv = p["theory_variance"]
        mlo, mhi = mse_interval(p, k)
        rows.append([str(p["m"]), f"{p['variance']:.4g} [{p['var_lo']:.4g}, {p['var_hi']:.4g}]",
                     "—" if tv is None else f"{tv:.4g}",
                     "—" if not tv else f"{p['variance'] / tv:.3f} [{p['var_lo'] / tv:.3f}, "
                     f"{p['var_hi'] / tv:.3f}]",
                     f"{p['mse']:.4g} [{mlo:.4g}, {mhi:.4g}]",
                     "—" if p["theory_mse"] is None else f"{p['theory_mse']:.4g}",
                     band_cell(p)])
    page.table(["m", "measured Var [CI]", "theory Var", "measured/theory [CI]",
                "measured MSE [CI]", "theory MSE", "theory in band?"], rows)
    page.p(f"[CI]: the {s.conf:.1%} bootstrap interval of the variance (of the ratio: the same "
           "interval divided by the theory); of the MSE = (mean − k)² + Var: the smallest and "
           "largest value over the two intervals of the mean and of the variance (if each "
           f"covers at its level, this one covers with probability at least "
           f"{1 - 2 * (1 - s.conf):.1%}: union bound). **not decidable**: "
           "the point got no test at these draws (the draws a test with guaranteed coverage "
           "would need are stated); it is not counted as a pass.")
    _resolutions(page, meas["points"])
    cap = figures.variance_figure(meas, figdir / f"{stem}_variance.png", s.conf)
    page.img(f"{rel}/{stem}_variance.png", cap)
    if meas["geometry"]:
        page.h("Error against the input geometry")
        cap = figures.geometry_figure(meas, figdir / f"{stem}_geometry.png", s.geo_m, s.conf)
        page.img(f"{rel}/{stem}_geometry.png", cap)
        page.p(f"{s.geo_draws} draws per point at m = {s.geo_m}; theory drawn only where "
               "verify.moments has the exact variance at every point (iid and orthogonal rows). "
               "A theory point is decided by a variance test with guaranteed coverage where its "
               "band is informative (exact fourth moment for iid rows, a proven range, or the "
               "one-row fourth-moment bound for orthogonal rows); otherwise the bootstrap band, "
               "which under-covers heavy tails, is a first look, and a point outside it gets a "
               "second measurement (below).")
        _resolutions(page, meas["geometry"])
        geo_flags = [g["flag"] for g in meas["geometry"] if g.get("flag")]
        if geo_flags:
            page.p("**flagged** (still outside after the second measurement: theory wrong, "
                   "estimator wrong or unresolved, as each line says):")
            page.ul(geo_flags)


def _band_label(band: str) -> str:
    """The kind of band that decided a point, without its numbers."""
    for prefix, label in (("exact fourth moment", "exact fourth moment (guaranteed)"),
                          ("proven range", "proven range (guaranteed)"),
                          ("fourth-moment bound", "one-row fourth-moment bound (guaranteed)"),
                          ("bootstrap (the guaranteed band is too wide",
                           "bootstrap (the guaranteed band is too wide at these draws)")):
        if band.startswith(prefix):
            return label
    return band


def _resolutions(page, points: list[dict]) -> None:
    """How each theory point was decided, and every flag's second measurement
    (measure.resolve_flag: theory confirmed, not decidable at these draws, theory wrong,
    estimator wrong, unresolved)."""
    bands = sorted({_band_label(p.get("band", "bootstrap")) for p in points
                    if p.get("theory_variance", p.get("theory_rel_mse")) is not None})
    if bands:
        page.p("Theory points decided by: " + "; ".join(bands) + " (a test with guaranteed "
               "coverage decides a point where its band is informative; the bootstrap band is "
               "otherwise a first, descriptive look).")
    open_ = [p["resolution"] for p in points if undecidable(p) is not None]
    if open_:
        page.p("**not decidable** at these draws (no test decided these theory points; they are "
               "not counted as passes):")
        page.ul(open_)
    done = [p["resolution"] for p in points if p.get("resolution") and not p.get("flag")
            and undecidable(p) is None]
    if done:
        page.p("Flags resolved by a second measurement (fresh draws, "
               f"{measure_mod.SECOND_FACTOR}× as many):")
        page.ul(done)


def _construction_section(page, entry, data, siblings, s, figdir, rel, stem) -> None:
    """The same formula under iid, orthogonal and structured matrices, at the default pair."""
    others = [d for d in siblings if d.get("measurement") and d["measurement"]["points"]]
    if len(others) < 2:
        return
    page.h("iid vs orthogonal vs structured matrices")
    cap = figures.construction_figure(data["measurement"]["name"],
                                      [d["measurement"] for d in others],
                                      figdir / f"{stem}_constructions.png")
    page.img(f"{rel}/{stem}_constructions.png", cap)
    rows = []
    for d in others:
        meas = d["measurement"]
        k = meas["kernel"]
        p = meas["points"][-1]
        tm = p["theory_mse"]
        mlo, mhi = mse_interval(p, k)
        rows.append([("**" if meas["name"] == entry.name else "") + meas["name"]
                     + ("**" if meas["name"] == entry.name else ""),
                     str(p["m"]), f"{p['mse'] / k**2:.4g} [{mlo / k**2:.4g}, {mhi / k**2:.4g}]",
                     "—" if tm is None else f"{tm / k**2:.4g}",
                     f"{_pct(p['mean'] / k - 1)} [{_pct(p['mean_lo'] / k - 1)}, "
                     f"{_pct(p['mean_hi'] / k - 1)}]", d["verdict"]])
    page.table(["construction", "m", "measured relative MSE [CI]", "theory relative MSE",
                "measured bias [CI]", "verdict"], rows)
    page.p(f"Same pair and draws as above ({s.draws} independent draws per m for each "
           "construction); relative MSE = (bias² + Var)/k².")


def _deterministic_sections(page, entry, data, figdir, rel, stem) -> None:
    page.h("Its kernel against exp(qᵀk)")
    if "scan" not in data:
        page.p("**not tested** here: positional map (its kernel depends on token positions).")
        return
    sc = data["scan"]
    cap = figures.deterministic_figure(entry.name, np.array(sc["s"]), np.array(sc["values"]),
                                       np.array(sc["kernel"]), entry.kernel,
                                       figdir / f"{stem}_kernel.png")
    page.img(f"{rel}/{stem}_kernel.png", cap)
    page.p("Largest difference between φ(q)ᵀφ(k) and its mpmath kernel over the scan, relative "
           "to ‖φ(q)‖‖φ(k)‖: "
           f"{data['identity_error']:.2g} (≤ {IDENTITY_TOL:g} passes). No random parameters: "
           "no bias or variance.")


def _downstream_section(page, entry, data, figdir, rel, stem) -> None:
    att, krr = data.get("attention"), data.get("krr")
    page.h("Attention and downstream error")
    notes = []
    if att is None:
        notes.append("Attention: **not tested**: the target kernel is not softmax (no exact "
                     "softmax attention to compare with).")
    elif "skipped" in att:
        notes.append(f"Attention: **not tested**: {att['skipped']}")
        att = None
    if krr is None and data["random"]:
        notes.append("Kernel ridge regression: **not tested**: positional map.")
    elif krr is not None and "skipped" in krr:
        notes.append(f"Kernel ridge regression: **not tested**: {krr['skipped']}")
        krr = None
    elif krr is None:
        notes.append("Kernel ridge regression: not applicable (deterministic map: its features "
                     "give its kernel's KRR exactly).")
    if att or krr:
        cap = figures.downstream_figure(entry.name, att, krr, figdir / f"{stem}_downstream.png")
        page.img(f"{rel}/{stem}_downstream.png", cap)
        page.p("Attention: RMS error per output entry of linear attention with this map against "
               "exact softmax attention (q, k entries N(0, 0.6²), v entries N(0, 1), d = 8, mean "
               "over seeds). KRR: fixed synthetic task (d = 8, 100 training / 100 test points, "
               "λ = 1e-2), exact-kernel Gram from mpmath; downstream.py.")
    for n in notes:
        page.p(n)


def _accuracy_section(page, data) -> None:
    page.h("Accuracy per backend and dtype (against mpmath)")
    page.p("Worst |computed − mpmath| as a fraction of the derived rounding budget (≤ 1 passes), "
           "3 seeded draws, n = 4, d = 4, m = 8 (accuracy.py).")
    page.table(["backend", "dtype", "worst error / budget", "max abs error"],
               [[r["backend"], r["dtype"], f"{r['worst_ratio']:.3g}", f"{r['max_abs_error']:.3g}"]
                for r in data["accuracy"]])
    if not any(b.name == "torch:cuda" for b in available_cases()):
        page.p("CUDA: **not tested** — torch.cuda.is_available() is False on this machine.")


def _ratio(r: float | None) -> str:
    return "—" if r is None else f"{r:.3g}"


def _gradient_section(page, entry, data, s, figdir, rel, stem) -> None:
    rows = data.get("gradients")
    if rows is None:
        return
    page.h("Gradient accuracy per backend and dtype (against mpmath)")
    page.p(f"Worst |autograd − exact| as a fraction of the derived backward bound (≤ 1 passes), "
           f"{grad.SEEDS} seeded draws, n = {grad.N}, d = {grad.D}, m = {grad.M}, inputs "
           f"{grad.SCALE}·N(0, 1): ∂(Gᵀφ(x))/∂x with G ~ N(0, 1), and ∇ₓ φ(x)ᵀφ(y). Exact "
           "gradients from the mpmath Jacobian of the formula; bounds from "
           "verify/gradient_bounds.py (feature_vjp_bound); the same check functions as "
           "test_feature_gradient_matches_exact and test_kernel_estimate_gradient_matches_exact "
           "(properties/gradient_checks.py).")
    table = []
    for r in rows:
        status = r["status"] if r["status"] == "pass" else f"**{r['status']}**" \
            if r["status"] == "FAIL" else r["status"]
        kern = _ratio(r["kernel_ratio"]) if r["kernel_ratio"] is not None else (
            r["kernel_note"] or "—")
        table.append([r["backend"], r["dtype"], _ratio(r["phi_ratio"]),
                      "—" if r["phi_error"] is None else f"{r['phi_error']:.3g}", kern,
                      "—" if r["kernel_error"] is None else f"{r['kernel_error']:.3g}", status])
    page.table(["backend", "dtype", "∂(Gᵀφ)/∂x error / bound", "max abs error",
                "∇ₓφ(x)ᵀφ(y) error / bound", "max abs error", "verdict"], table)
    gb = data.get("gradient_bias")
    if gb is None:
        if data["random"]:
            page.p("Bias of the gradient estimator: **not measured**: the map claims no "
                   "unbiasedness (or has no torch function).")
        return
    page.h("Bias of the gradient estimator")
    exact, mean = np.array(gb["exact"]), np.array(gb["mean"])
    lo, hi = np.array(gb["lo"]), np.array(gb["hi"])
    page.p(f"At the default pair (x, y above, d = {len(exact)}), m = {gb['m']}: "
           f"{gb['draws']} independent parameter draws of ∇ₓ φ(x)ᵀφ(y) (float64 autograd, "
           f"seeds {gb['seed']}…); bias = mean over draws − ∇ₓk(x, y) (mpmath), with "
           f"{gb['conf']:.1%} percentile-bootstrap intervals of the mean ({s.boot} resamples; "
           "descriptive: they under-cover heavy tails). Test: " + gb["test"] + ".")
    table = [[str(j), f"{exact[j]:.5g}", f"{mean[j] - exact[j]:+.3g}",
              f"[{lo[j] - exact[j]:+.3g}, {hi[j] - exact[j]:+.3g}]",
              "yes" if lo[j] <= exact[j] <= hi[j] else "**no**"]
             for j in range(len(exact))]
    page.table(["component", "∇ₓk (exact)", "measured bias", f"{gb['conf']:.1%} interval",
                "0 inside?"], table)
    if gb.get("resolution"):
        page.p(f"The interval missed ∇ₓk; measured again ({grad.SECOND_FACTOR}× the draws, fresh "
               "seeds; ∇ₓk by the truth's second route where one exists): "
               + gb["resolution"] + ".")
    cap = figures.gradient_bias_figure(entry.name, gb, figdir / f"{stem}_gradient_bias.png")
    page.img(f"{rel}/{stem}_gradient_bias.png", cap)


def _property_section(page, data) -> None:
    page.h("Property verdicts")
    rows = [[p["test"], f"**{p['outcome']}**" if p["outcome"] != "pass" else "pass",
             p["detail"] or "—", f"`{p['command']}`"] for p in data.get("properties", [])]
    rows += [[t, "not run by the report (Hypothesis search)", "—", f"`{c}`"]
             for t, c in data.get("hypothesis", [])]
    if rows:
        page.table(["property", "outcome (report seeds)", "detail", "reproduce"], rows)
    else:
        page.p("No statistical property applies (deterministic map); accuracy above.")
