"""Pages of the gated (and delta-rule), hybrid and model systems: verdicts per backend × dtype,
the error against its derived bound on fixed seeded draws, and a figure.

The numbers come from the library functions the property files compose (the mpmath references
and derived bounds; :mod:`kernel_verify.report.system_checks`, held equal to the property files'
own ``exact()`` by ``tests/test_report_pages.py``), on a small fixed layout, so a page shows what
the properties check, at the report's seeds (the Hypothesis search of the suite is not re-run
here; each page names the property and the command that runs it):

* **gated attention** (every transition: decay, delta, gated delta, KDA, comba, RWKV-7): the
  exact recurrence and the derived bound of the backend's dtype
  (:func:`~kernel_verify.report.system_checks.gated_exact`) against every full-sequence form and
  the step form, as ``test_gated_forms_meet_the_exact_recurrence`` compares them: layout
  ``B = 1, H = 2, T = 6, d = 3, d_v = 2`` (``d_v = d`` where the target takes square states),
  chunk 3, the draws of :data:`GATED_DRAWS` (gate regime ``mixed`` and a run of strong decay).
  A row passes when ``|computed − exact| ≤ bound`` at every entry of every draw.
* **hybrid attention**: :func:`~kernel_verify.report.system_checks.hybrid_exact` against the
  target's ``attention`` (and ``step``) at the windows of :data:`HYBRID_WINDOWS`, ``T = 7``, as
  ``test_hybrid_meets_the_exact_reference``, ``test_zero_window_is_linear_attention`` and
  ``test_full_window_is_softmax_attention`` do.
* **models**: each check of :mod:`kernel_verify.properties.model_checks` through the suite's own
  power control (:func:`~kernel_verify.properties.model_checks.power_ladder`) per dtype path: the
  model as built must pass the control case, and the planted defect must fail it at some init
  scale (the scale the property is then credited at; none: not credited); the decode check's
  measured ``max |step logits − full forward|`` at that scale against its tolerance
  (:func:`~kernel_verify.properties.model_checks.tolerance`).

The whole computation takes a few seconds on a CPU (no cache needed).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from kernel_verify.impls.names import identifier
from kernel_verify.impls.systems import SYSTEM_CLAIMS, SystemDescriptor, all_systems
from kernel_verify.properties.claim_tests import claim_evidence, targets_of
from kernel_verify.report import system_checks as sc
from kernel_verify.report.pages import Page
from kernel_verify.report.verdicts import pytest_line
from kernel_verify.verify.backends import AXIS, Backend, as_float64

__all__ = ["GATED_DRAWS", "HYBRID_WINDOWS", "compute_system", "gated_rows", "hybrid_rows",
           "model_rows", "page_systems", "ratio", "render_system", "system_verdict"]

#: ``(seed, gate regime)`` of the gated draws (:data:`~kernel_verify.report.system_checks.
#: GATE_REGIMES`: the first and the strong-decay regime of the gated property).
GATED_DRAWS: tuple[tuple[int, str], ...] = ((1, "mixed"), (2, "strong_run"))
#: The gated layout: batch, heads, tokens, key width, value width, chunk size.
GATED_LAYOUT = {"b": 1, "h": 2, "t": 6, "d": 3, "dv": 2, "chunk": 3}
#: ``(label, window, reference)`` of the hybrid rows at ``T = HYBRID_T``.
HYBRID_T = 7
HYBRID_WINDOWS: tuple[tuple[str, int, str], ...] = (
    ("hybrid, w = 3", 3, "hybrid"), ("w = 0 (linear attention)", 0, "linear"),
    (f"w = T = {HYBRID_T} (softmax attention)", HYBRID_T, "softmax"))
HYBRID_SEEDS = (0, 1)
#: The kinds with a page of their own (gated attention, the hybrid attention system, models).
PAGE_KINDS = ("gated_attention", "attention", "model")


def page_systems() -> list[SystemDescriptor]:
    """The systems that get a page: every gated and model system, and the hybrid attention."""
    out = list(all_systems(kind="gated_attention"))
    out += [s for s in all_systems(kind="attention") if s.name == "hybrid_attention"]
    return out + list(all_systems(kind="model"))


def _kind_of(system: SystemDescriptor) -> str:
    if system.name == "hybrid_attention":
        return "hybrid"
    return "model" if system.kind == "model" else "gated"


def backends_of(target: Any, half_claim: str = "half_in_float32") -> list[Backend]:
    """The backends × dtypes of :data:`~kernel_verify.verify.backends.AXIS` the target accepts
    and this machine has (CUDA only where ``torch.cuda.is_available()``), half types only with
    the claim that credits them (the suite skips them otherwise)."""
    cuda = False
    try:
        import torch

        cuda = bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    out = []
    for b in AXIS:
        if b.device == "cuda" and not cuda:
            continue
        if not target.accepts(b.library, b.dtype):
            continue
        if b.dtype in ("float16", "bfloat16") and not target.has(half_claim):
            continue
        out.append(b)
    return out


def ratio(err: np.ndarray, bound: np.ndarray) -> float:
    """``max |computed − exact| / bound`` over the entries: 0 where both are 0, ``inf`` where an
    entry is wrong with a zero bound (or not finite)."""
    err, bound = np.asarray(err, float), np.asarray(bound, float)
    if not np.all(np.isfinite(err)):
        return math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(err == 0, 0.0, err / bound)
    return float(np.max(r)) if r.size else 0.0


def _row(target: str, backend: str, form: str, err: list, bound: list, draws: int,
         error: str = "") -> dict:
    """One table row: worst ratio over the draws and the error and bound at the worst entry."""
    if error:
        return {"target": target, "backend": backend, "form": form, "draws": draws,
                "max_error": None, "bound_at_max": None, "max_bound": None, "ratio": None,
                "verdict": "FAIL", "detail": error}
    e = np.concatenate([np.ravel(a) for a in err])
    b = np.concatenate([np.ravel(a) for a in bound])
    r = ratio(e, b)
    i = int(np.argmax(np.where(np.isfinite(e), e, np.inf)))
    return {"target": target, "backend": backend, "form": form, "draws": draws,
            "max_error": float(e[i]), "bound_at_max": float(b[i]), "max_bound": float(b.max()),
            "ratio": r, "verdict": "pass" if r <= 1.0 else "FAIL", "detail": ""}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:200]


# ------------------------------------------------------------------ gated attention
def gated_rows(target: Any, backends: list[Backend] | None = None) -> list[dict]:
    """Rows ``(backend, form)`` of one gated target (module docstring); none for a target that
    does not take log-gates (a gate parametrisation: the property measures it)."""
    from kernel_verify.properties.checks.forms import Shape

    if target.gate_input != "log":
        return []
    lay = GATED_LAYOUT
    out = []
    for b in backends_of(target) if backends is None else backends:
        errs: dict[str, list] = {}
        bounds: dict[str, list] = {}
        failed: dict[str, str] = {}
        for seed, regime in GATED_DRAWS:
            shape = Shape(lay["b"], lay["h"], lay["t"], lay["d"],
                          lay["d"] if target.dv_equals_d else lay["dv"], lay["chunk"],
                          lay["t"] // 2, seed)
            x, g = sc.gated_inputs(target, b, shape, regime)
            ref, bound = sc.gated_exact(target, b, x, g)
            runs: list[tuple[str, Callable]] = [
                (form, partial(sc.gated_run, target, b, x, g, form=form, seed=seed,
                               chunk=lay["chunk"]))
                for form in ("parallel", "stateful", "chunked") if getattr(target, form)]
            if target.step is not None:
                runs.append((f"step × {lay['t']}",
                             partial(sc.gated_steps, target, b, x, g, seed=seed)))
            for form, call in runs:
                label = form
                if form == "chunked":
                    sizes = target.chunk_sizes
                    size = lay["chunk"] if sizes is None else sizes[lay["chunk"] % len(sizes)]
                    label = f"chunked (C = {size})"
                try:
                    got = call()
                except Exception as exc:  # the row shows what the form raised
                    failed.setdefault(label, _first_line(exc))
                    continue
                errs.setdefault(label, []).append(np.abs(got - ref))
                bounds.setdefault(label, []).append(bound)
        for label in dict.fromkeys([*errs, *failed]):
            out.append(_row(target.name, b.id, label, errs.get(label, []),
                            bounds.get(label, []), len(GATED_DRAWS), failed.get(label, "")))
    return out


# ------------------------------------------------------------------ hybrid attention
def _steps(target: Any, arrays: tuple, window: int) -> Any:
    """The step form from no state over the whole sequence (rows stacked along T)."""
    state, outs = None, []
    for i in range(arrays[0].shape[-2]):
        state, o = target.step(state, *(a[..., i, :] for a in arrays), window=window)
        outs.append(as_float64(o)[..., None, :])
    return np.concatenate(outs, axis=-2)


def hybrid_rows(target: Any, backends: list[Backend] | None = None) -> list[dict]:
    """Rows ``(backend, window / form)`` of one hybrid target (module docstring)."""
    out = []
    for b in backends_of(target) if backends is None else backends:
        for label, window, reference in HYBRID_WINDOWS:
            forms = [("attention", label)]
            if target.step is not None and reference == "hybrid":
                forms.append(("step", f"{label}, step × {HYBRID_T}"))
            for form, name in forms:
                errs, bounds, error = [], [], ""
                for seed in HYBRID_SEEDS:
                    arrays, seen = sc.hybrid_inputs(b, seed, HYBRID_T)
                    ref, bound = sc.hybrid_exact(target, b, seen, window, reference=reference)
                    try:
                        if form == "attention":
                            got = as_float64(target.attention(*arrays, window=window)[0])
                        else:
                            got = _steps(target, arrays, window)
                    except Exception as exc:  # the row shows what it raised
                        error = _first_line(exc)
                        break
                    errs.append(np.abs(got - ref))
                    bounds.append(bound)
                out.append(_row(target.name, b.id, name, errs, bounds, len(HYBRID_SEEDS), error))
    return out


# ------------------------------------------------------------------ models
#: ``(check, property test, calls it needs, claims it needs, the power control's defect)``:
#: the model properties of ``properties/test_models.py`` and the checks they call.
MODEL_CHECKS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...], str], ...] = (
    ("decode", "test_decode_equals_full_forward_at_every_split", ("prefill", "step"), (),
     "cache dropped after the first step"),
    ("generate", "test_greedy_generate_with_cache_equals_without", ("generate",), (),
     "cache dropped after the first step"),
    ("packed", "test_packed_sequences_equal_separate_runs", ("packed",), (),
     "state carried across packed sequences"),
    ("left_padding", "test_left_padding_equals_unpadded", (), ("left_padding",),
     "attention mask dropped"),
    ("right_padding", "test_right_padding_equals_unpadded", (), ("right_padding",),
     "right-padding mask read as left padding"),
    ("gradients", "test_gradients_through_the_cache_equal_full_forward", ("prefill", "step"),
     ("differentiable",), "prefill detached from the graph"),
    ("second_backward", "test_second_backward_through_the_cache", ("prefill", "step"),
     ("differentiable",), "graph freed after the first backward"),
    ("batch_independent", "test_batch_elements_are_independent", (), (),
     "state carried across batch elements"),
    ("same_seed", "test_same_seed_and_input_give_the_same_output", (), (), "the next seed"),
    ("finite", "test_outputs_stay_finite_over_an_init_scale_sweep", (), (),
     "naive log-softmax"),
    ("chunked_prefill", "test_chunked_prefill_equals_one_prefill", ("extend", "step"), (),
     "cache dropped between chunks"),
    ("restore", "test_restored_state_continues_as_if_never_stopped", ("extend", "copy_cache"),
     (), "state saved one token early"),
    ("continuations", "test_continuations_from_one_saved_state_are_independent",
     ("extend", "copy_cache"), (), "state consumed by the first continuation"),
    ("speculative", "test_speculative_rollback_equals_the_accepted_state",
     ("extend", "copy_cache"), (), "one rejected draft kept"),
    ("padded_decode", "test_padded_prefill_then_decoding_equals_unpadded", ("padded_prefill",),
     (), "pad tokens entered the state"),
)
def model_rows(target: Any) -> tuple[list[dict], list[dict]]:
    """``(check rows, decode error rows)`` of one model target (module docstring): per dtype
    path and check, the suite's power ladder (:func:`~kernel_verify.properties.model_checks.
    power_ladder`: climbs the target's init scales until the planted defect fails the check on
    its control case while the model as built passes), then the decode error at the scale the
    decode check is credited at."""
    import torch

    from kernel_verify.properties import model_checks as mc

    case = mc.control_case(target)
    rows, numbers = [], []
    for dtype in mc.dtypes(target):
        decode_scale = None
        for name, test, calls, claims, defect in MODEL_CHECKS:
            lacks = [c for c in calls if not target.offers(c)] + [
                c for c in claims if not target.has(c)]
            row = {"target": target.name, "backend": f"torch:cpu-{dtype}", "check": name,
                   "property": test, "defect": defect, "scale": None}
            if lacks:
                rows.append({**row, "verdict": "not applicable",
                             "detail": "lacks " + ", ".join(lacks), "caught": None})
                continue
            try:
                power = mc.power_ladder(target, getattr(mc, name), dtype, defect)
            except Exception as exc:  # the row shows what the check raised
                rows.append({**row, "verdict": "FAIL", "detail": _first_line(exc),
                             "caught": None})
                continue
            if power.problem is not None:
                rows.append({**row, "verdict": "FAIL", "detail": power.problem[:300],
                             "caught": None})
                continue
            if name == "decode":
                decode_scale = power.scale or power.largest
            rows.append({**row, "verdict": "pass", "scale": power.scale or power.largest,
                         "detail": power.note[:300], "caught": power.scale is not None})
        if decode_scale is not None:
            m = mc.model(target, case.seed, decode_scale, dtype)
            ids = case.tensor()
            tol = mc.tolerance(target, dtype, case.seed, decode_scale, ids)
            with torch.no_grad():
                full = target.forward(m, ids)
                _, cache = target.prefill(m, ids[:, :case.split])
                steps = []
                for t in range(case.split, case.length):
                    o, cache = target.step(m, cache, ids[:, t])
                    steps.append(o)
            diff = np.abs(mc._np(torch.stack(steps, 1)) - mc._np(full[:, case.split:]))
            err = float(np.max(diff)) if np.all(np.isfinite(diff)) else math.inf
            numbers.append({"target": target.name, "backend": f"torch:cpu-{dtype}",
                            "form": f"prefill {case.split} + step × {case.length - case.split}"
                                    f" (init scale {decode_scale:g})",
                            "max_error": err, "bound_at_max": tol.value,
                            "max_bound": tol.value, "ratio": err / tol.value if tol.value else (
                                0.0 if err == 0 else math.inf),
                            "verdict": "pass" if err <= tol.value else "FAIL",
                            "detail": tol.how, "draws": 1})
    return rows, numbers


# ------------------------------------------------------------------ one system
def compute_system(system: SystemDescriptor) -> dict:
    """Every number of a system's page (JSON-ready)."""
    kind = _kind_of(system)
    data: dict = {"name": system.name, "kind": kind, "rows": [], "checks": [],
                  "targets": [t.name for t in targets_of(system.name)]}
    for target in targets_of(system.name):
        if kind == "gated":
            data["rows"] += gated_rows(target)
        elif kind == "hybrid":
            data["rows"] += hybrid_rows(target)
        else:
            checks, numbers = model_rows(target)
            data["checks"] += checks
            data["rows"] += numbers
    data["verdict"], data["reasons"] = system_verdict(data)
    return data


def system_verdict(data: dict) -> tuple[str, list[str]]:
    """``FAIL`` if a row is over its bound (or raised) or a model check fails on the model as
    it is; ``not tested`` if nothing ran (no built-in target, or no backend here) or a model
    check's power control let its defect through; else ``pass``."""
    fails = [f"{r['target']} {r['backend']} {r['form']}: "
             + (r["detail"] or f"error / bound {r['ratio']:.3g}")
             for r in data["rows"] if r["verdict"] == "FAIL"]
    fails += [f"{c['target']} {c['backend']} {c['check']}: {c['detail']}"
              for c in data["checks"] if c["verdict"] == "FAIL"]
    if fails:
        return "FAIL", fails
    missed = [f"{c['target']} {c['backend']} {c['check']}: {c['detail']}"
              for c in data["checks"] if c["caught"] is False]
    if not data["rows"] and not data["checks"]:
        return "not tested", ["no built-in target or no backend of this machine"]
    if missed:
        return "not tested", missed
    return "pass", []


def _short(text: str, n: int = 140) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def _num(x: float | None) -> str:
    return "—" if x is None else "inf" if math.isinf(x) else f"{x:.3g}"


def _verdict_cell(v: str) -> str:
    return v if v in ("pass", "not applicable") else f"**{v}**"


def render_system(system: SystemDescriptor, data: dict, figdir: Path | None, rel: str) -> Page:
    """The page of one system (``figdir`` None: no figure)."""
    from kernel_verify.report import figures

    kind = data["kind"]
    page = Page(f"{system.name} ({system.kind})")
    page.p(f"[← systems](../systems.md) · verdict **{data['verdict']}**"
           + (": " + "; ".join(data["reasons"][:6]) if data["reasons"] else ""))
    page.h("What it is")
    page.table(["field", "value"], [
        ["description", system.description], ["docs", system.section],
        ["source", system.source], ["claims", ", ".join(sorted(system.claims))],
        ["built-in targets", ", ".join(f"`{t}`" for t in data["targets"]) or "none"]])
    if kind == "model":
        _model_sections(page, data)
    else:
        _bound_sections(page, data, kind)
    if figdir is not None and data["rows"]:
        stem = f"system_{identifier(system.name)}"
        cap = figures.system_error_figure(system.name, data["rows"], figdir / f"{stem}.png",
                                          what="tolerance" if kind == "model" else "bound")
        page.img(f"{rel}/{stem}.png", cap)
    page.h("Claims and the properties that test them")
    page.table(["claim", "meaning", "tested by"],
               [[c, SYSTEM_CLAIMS[c], _evidence_cell(e)]
                for c, e in claim_evidence(system).items()])
    return page


def _evidence_cell(evidence: tuple[str, ...] | str | None) -> str:
    if evidence is None:
        return "NOT ACCOUNTED FOR (properties/claim_tests.py)"
    if isinstance(evidence, str):
        return f"not tested: {evidence}"
    return ", ".join(f"`{p}`" for p in evidence)


def _bound_sections(page: Page, data: dict, kind: str) -> None:
    lay = GATED_LAYOUT
    page.h("Error against the derived bound, per backend × dtype and form")
    if kind == "gated":
        file, test = "test_gated_forms.py", "test_gated_forms_meet_the_exact_recurrence"
        page.p(f"The property `{test}` on fixed draws: every form against the exact recurrence "
               f"(mpmath) within the derived bound of the dtype (the property's references and "
               f"bounds, composed as its `exact()` composes them), B = {lay['b']}, "
               f"H = {lay['h']}, T = {lay['t']}, d = {lay['d']}, "
               f"d_v = {lay['dv']} (d where the target takes square states), chunk "
               f"{lay['chunk']}; draws (seed, gate regime): "
               + ", ".join(f"({s}, {r})" for s, r in GATED_DRAWS)
               + ". Max error: the largest |computed − exact| over the entries of every draw; "
               "bound: the derived bound at that entry; ratio: the worst |computed − exact| / "
               "bound (≤ 1 passes). Half types only where the target claims half_in_float32; "
               "CUDA rows only on a machine with a GPU.")
    else:
        file, test = "test_hybrid_attention.py", "test_hybrid_meets_the_exact_reference"
        page.p(f"The properties `{test}`, `test_zero_window_is_linear_attention` and "
               "`test_full_window_is_softmax_attention` on fixed draws: the full-sequence form "
               f"(and the step form) at T = {HYBRID_T}, seeds {list(HYBRID_SEEDS)}, against the "
               "exact mpmath reference (hybrid; linear attention at w = 0; softmax attention at "
               "w = T) within the derived bound of the dtype (as the property's `exact()`). "
               "Ratio ≤ 1 passes.")
    page.table(["target", "backend, dtype", "form", "draws", "max |computed − exact|",
                "bound there", "worst error / bound", "verdict"],
               [[f"`{r['target']}`", r["backend"], r["form"], str(r["draws"]),
                 _num(r["max_error"]), _num(r["bound_at_max"]), _num(r["ratio"]),
                 _verdict_cell(r["verdict"]) + (f": {r['detail']}" if r["detail"] else "")]
                for r in data["rows"]])
    names = sorted({r["target"] for r in data["rows"]})
    if names:
        page.p("The Hypothesis search of the property (many layouts, every gate regime): "
               + "; ".join(f"`{pytest_line(file, test, n)}`" for n in names[:2]))


def _model_sections(page: Page, data: dict) -> None:
    page.h("Model checks per dtype")
    page.p("Each model property first runs its power control (model_checks.py: "
           "`power_ladder`): on its fixed control case (`control_case`, `serving_control_case`) "
           "it climbs the target's init scales until the planted defect fails the check while "
           "the model as built passes; the property then runs drawn cases at that credited "
           "scale. The table shows the ladder's outcome per dtype path: the model as built on "
           "the control case, the defect planted, and the scale at which the check caught it "
           "(**no**: not credited, a defect of that class would go unseen).")
    page.table(["target", "dtype path", "check (property)", "as built (control case)",
                "planted defect", "caught (credited init scale)", "power control"],
               [[f"`{c['target']}`", c["backend"], f"{c['check']} (`{c['property']}`)",
                 _verdict_cell(c["verdict"]) + (f": {c['detail']}" if c["verdict"] != "pass"
                                                and c["detail"] else ""),
                 c["defect"], {True: f"yes ({c['scale']:g})" if c["scale"] else "yes",
                               False: "**no**", None: "—"}[c["caught"]],
                 _short(c["detail"]) if c["verdict"] == "pass" else "—"]
                for c in data["checks"]])
    if data["rows"]:
        page.h("Decode error against its tolerance")
        page.p("max |logits of the cached steps − rows of the full forward| on the control case "
               "against the check's tolerance (`model_checks.tolerance`: derived from the "
               "float32-vs-float64 gap of the same model where it has a float64 path).")
        page.table(["target", "dtype path", "form", "max |difference|", "tolerance",
                    "ratio", "verdict", "tolerance from"],
                   [[f"`{r['target']}`", r["backend"], r["form"], _num(r["max_error"]),
                     _num(r["bound_at_max"]), _num(r["ratio"]), _verdict_cell(r["verdict"]),
                     r["detail"]] for r in data["rows"]])


def write_system_pages(out: Path, figdir: Path, rel: str = "../figures",
                       progress: Callable[[str, str, float], None] | None = None) -> list[dict]:
    """Compute and write ``out/systems/<name>.{md,html}`` for every system of
    :func:`page_systems` (figures into ``figdir``, ``rel`` its path from the pages); returns the
    systems' data (for report.json and the systems page's links)."""
    import time

    from kernel_verify.report.pages import write_page

    (out / "systems").mkdir(parents=True, exist_ok=True)
    results = []
    for system in page_systems():
        t1 = time.perf_counter()
        data = compute_system(system)
        write_page(render_system(system, data, figdir, rel), out / "systems",
                   identifier(system.name))
        results.append(data)
        if progress is not None:
            progress(system.name, data["verdict"], time.perf_counter() - t1)
    return results
