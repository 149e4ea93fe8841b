"""The per-map figures (PNG, matplotlib Agg). Each function writes one file and returns its
one-line caption (what the reader should see)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from kernel_verify.impls.names import split_name
from kernel_verify.verify.atomic import save_figure

DPI = 100


def _log_axes(ax, xlabel: str, ylabel: str, title: str) -> None:
    """Log₂ x and log y axes with their labels and a small title."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)


def _legend_and_grid(ax) -> None:
    """The small legend and the major-and-minor grid of a panel."""
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    save_figure(fig, path, dpi=DPI)
    plt.close(fig)


def variance_figure(meas: dict, path: Path, conf: float) -> str:
    """(a) Var and MSE vs m, log–log, theory and measured with bootstrap bands; (b) relative
    bias vs m with its band and the predicted bias."""
    pts = meas["points"]
    th = meas["theory"]
    ms = np.array([p["m"] for p in pts], dtype=float)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10.5, 3.9))
    var = np.array([p["variance"] for p in pts])
    lo = np.array([p["var_lo"] for p in pts])
    hi = np.array([p["var_hi"] for p in pts])
    ax.errorbar(ms, var, yerr=[np.maximum(var - lo, 0), np.maximum(hi - var, 0)], fmt="o",
                color="C1", capsize=3, label=f"measured Var ({conf:.1%} bootstrap)")
    mse = np.array([p["mse"] for p in pts])
    ax.plot(ms, mse, "s", mfc="none", color="C3", label="measured MSE = bias² + Var")
    tv = [p["theory_variance"] for p in pts]
    if all(v is not None for v in tv):
        exact = th["variance_kind"].startswith("exact")
        style = "-" if exact else "--"
        label = "exact Var (theory)" if exact else "reference Var (Monte Carlo, ±2 SE band)"
        ax.plot(ms, tv, style, color="C0", label=label)
        se = [p["theory_variance_se"] for p in pts]
        if not exact and all(s is not None for s in se):
            tv_a, se_a = np.array(tv), np.array(se)
            ax.fill_between(ms, np.maximum(tv_a - 2 * se_a, 1e-300), tv_a + 2 * se_a,
                            color="C0", alpha=0.2)
        tm = [p["theory_mse"] for p in pts]
        if all(v is not None for v in tm) and max(tm) > 1.02 * max(tv):
            ax.plot(ms, tm, ":", color="C3", label="theory MSE")
    ref = var[0] if var[0] > 0 else 1.0
    ax.plot(ms, ref * ms[0] / ms, color="grey", lw=0.8, alpha=0.6, label="slope 1/m")
    for p in pts:
        if p["flag"]:
            ax.annotate("⚑ outside band", (p["m"], p["theory_variance"]), fontsize=7,
                        color="red", xytext=(4, 4), textcoords="offset points")
    _log_axes(ax, "m (random features, log₂ scale)", "Var / MSE of φ(x)ᵀφ(y) (kernel units²)",
              "(a) variance and MSE vs m")
    _legend_and_grid(ax)

    k = meas["kernel"]
    rb = np.array([p["mean"] / k - 1 for p in pts]) * 100
    rlo = np.array([p["mean_lo"] / k - 1 for p in pts]) * 100
    rhi = np.array([p["mean_hi"] / k - 1 for p in pts]) * 100
    bx.errorbar(ms, rb, yerr=[rb - rlo, rhi - rb], fmt="o", color="C1", capsize=3,
                label=f"measured (mean/k − 1, {conf:.1%} bootstrap)")
    bx.axhline(0, color="black", lw=0.8, label="unbiased (target kernel)")
    if th["mean"] is not None and abs(th["mean"] / k - 1) > 1e-12:
        bx.axhline((th["mean"] / k - 1) * 100, color="C0", ls="--",
                   label="predicted bias (" + ("Monte Carlo reference" if th["mean_kind"]
                                               .startswith("Monte") else "declared mean kernel")
                   + ")")
    bx.set_xscale("log", base=2)
    bx.set_xlabel("m (random features, log₂ scale)")
    bx.set_ylabel("relative bias (%)")
    bx.set_title("(b) bias: E φ(x)ᵀφ(y) / k(x, y) − 1", fontsize=10)
    bx.legend(fontsize=7)
    bx.grid(True, alpha=0.3)
    fig.suptitle(f"{meas['name']} at x = {_fmt(meas['x'])}, y = {_fmt(meas['y'])}", fontsize=10)
    _save(fig, path)
    return ("Variance falls as 1/m (grey guide) and sits on the theory curve; the bias panel shows "
            "whether the mean is on the target kernel or on the predicted biased mean.")


def _fmt(v) -> str:
    nz = [(i, a) for i, a in enumerate(v) if a != 0]
    return "(" + ", ".join(f"{a:.2g}e{i + 1}" for i, a in nz) + ")" if nz else "0"


def geometry_figure(meas: dict, path: Path, m: int, conf: float) -> str:
    """Relative MSE vs input geometry (one panel per axis), theory line and measured band."""
    geo = meas["geometry"]
    axes_names = list(dict.fromkeys(g["axis"] for g in geo))
    cols = min(2, len(axes_names))
    rows = -(-len(axes_names) // cols)
    fig, axs = plt.subplots(rows, cols, figsize=(5.4 * cols, 3.5 * rows), squeeze=False)
    for ax in axs.flat[len(axes_names):]:
        ax.set_visible(False)
    for ax, name in zip(axs.flat, axes_names, strict=False):
        g = [p for p in geo if p["axis"] == name]
        v = np.array([p["value"] for p in g])
        r = np.array([p["rel_mse"] for p in g])
        lo = np.array([p["rel_mse_lo"] for p in g])
        hi = np.array([p["rel_mse_hi"] for p in g])
        ax.errorbar(v, r, yerr=[np.maximum(r - lo, 0), np.maximum(hi - r, 0)], fmt="o",
                    color="C1", capsize=3, label=f"measured ({conf:.1%} bootstrap)")
        t = [p["theory_rel_mse"] for p in g]
        if all(x is not None for x in t):
            ax.plot(v, t, "-", color="C0", label="exact (theory)")
        else:
            ax.plot([], [], " ", label="no theory at these points")
        for p in g:
            if p.get("flag"):
                ax.annotate("⚑", (p["value"], p["theory_rel_mse"]), color="red", fontsize=9)
        ax.set_yscale("log")
        top = max(float(np.nanmax(hi)), max((x for x in t if x is not None), default=0.0))
        ax.set_ylim(bottom=max(float(np.nanmin(np.r_[lo, r])) * 0.5, top * 1e-8))
        ax.set_xlabel(name)
        ax.set_ylabel(f"relative MSE (bias² + Var)/k² at m = {m}")
        _legend_and_grid(ax)
    fig.suptitle(f"{meas['name']}: error against the input geometry", fontsize=10)
    _save(fig, path)
    return ("Relative MSE against the input geometry (norms, angle, ‖x − y‖, ‖x + y‖): how fast "
            "the estimator degrades as the inputs grow or move apart (points below the axis are "
            "exact to 1e-8, e.g. positive features at x = −y; ⚑: theory outside the measured "
            "band).")


def construction_figure(name: str, measurements: list[dict], path: Path) -> str:
    """Relative MSE vs m of one formula under each random-matrix construction (measured markers,
    exact theory lines where known); ``name`` is drawn bold."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, meas in enumerate(measurements):
        k2 = meas["kernel"] ** 2
        ms = np.array([p["m"] for p in meas["points"]], dtype=float)
        mse = np.array([p["mse"] for p in meas["points"]]) / k2
        label = split_name(meas["name"])[1] or meas["name"]
        own = meas["name"] == name
        ax.plot(ms, mse, "o", color=f"C{i}", ms=7 if own else 4,
                label=f"{label} (measured){' ← this page' if own else ''}")
        tm = [p["theory_mse"] for p in meas["points"]]
        if all(t is not None for t in tm):
            ax.plot(ms, np.array(tm) / k2, "-", color=f"C{i}", lw=2.2 if own else 1.0)
    ax.plot([], [], "-", color="grey", label="lines: theory (exact or reference)")
    _log_axes(ax, "m (random features, log₂ scale)",
              "relative MSE (bias² + Var)/k² (dimensionless)",
              f"{name.split('[', 1)[0]}: construction of the random matrix")
    _legend_and_grid(ax)
    _save(fig, path)
    return ("Relative MSE at the default pair for each construction of the random matrix: "
            "orthogonal and structured rows lie below iid where orthogonality helps; a biased "
            "construction (fixed norms, SORF) flattens out at its squared bias as m grows.")


def downstream_figure(name: str, att: dict | None, krr: dict | None, path: Path) -> str:
    """Attention error vs m and n; kernel ridge regression test MSE vs m."""
    panels = [p for p in ((att and "att_m"), (att and "att_n"), (krr and "krr")) if p]
    fig, axs = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.6))
    axs = np.atleast_1d(axs)
    for ax, kind in zip(axs, panels, strict=True):
        if kind == "att_m":
            m, e = zip(*att["m"], strict=True)
            ax.plot(m, e, "o-", color="C2", label="measured (mean over seeds)")
            if len(m) > 1:
                ax.plot(m, e[0] * np.sqrt(m[0] / np.array(m)), color="grey", lw=0.8,
                        label="slope m^(-1/2)")
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
            ax.set_xlabel("m (log₂ scale); n = 256")
            ax.set_ylabel("RMS attention error vs softmax (units of std v)")
            ax.set_title("attention error vs m", fontsize=10)
        elif kind == "att_n":
            n, e = zip(*att["n"], strict=True)
            ax.plot(n, e, "o-", color="C2", label="measured (mean over seeds)")
            _log_axes(ax, "sequence length n (log₂ scale); m = 64",
                      "RMS attention error vs softmax", "attention error vs n")
        else:
            m, e = zip(*krr["curve"], strict=True)
            ax.plot(m, e, "o-", color="C4", label="KRR with the map's features")
            ax.axhline(krr["exact"], color="black", ls="--", label="KRR with the exact kernel")
            ax.axhline(krr["null"], color="grey", ls=":", label="predict 0 (no model)")
            _log_axes(ax, "m (log₂ scale)", "test MSE (synthetic task)", "kernel ridge regression")
        _legend_and_grid(ax)
    fig.suptitle(f"{name}: attention and downstream error", fontsize=10)
    _save(fig, path)
    return ("Attention error shrinks like m^(-1/2) and does not grow with n; the KRR test error "
            "approaches the exact-kernel line as m grows.")


def deterministic_figure(name: str, s: np.ndarray, values: np.ndarray, target: np.ndarray,
                         kernel: str, path: Path) -> str:
    """φ(q)ᵀφ(k) of a deterministic map against exp(qᵀk) along q = s·u, k = u."""
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    ax.plot(s, np.exp(s), "-", color="black", label="exp(qᵀk) (softmax kernel)")
    ax.plot(s, values, "o", ms=3, color="C1", label=f"φ(q)ᵀφ(k) ({name}, float64)")
    ax.plot(s, target, "-", lw=0.8, color="C0", label=f"its kernel `{kernel}` (mpmath)")
    ax.set_xlabel("qᵀk  (q = s·u, k = u, ‖u‖ = 1, d = 8)")
    ax.set_ylabel("kernel value")
    if np.all(values > 0) and np.all(target > 0):
        ax.set_yscale("log")
    _legend_and_grid(ax)
    ax.set_title(f"{name}: its kernel against exp(qᵀk)", fontsize=10)
    _save(fig, path)
    return ("The map computes its own kernel exactly (dots on the blue line); the gap to the "
            "black curve is how far that kernel is from softmax's exp(qᵀk).")


def gradient_bias_figure(name: str, gb: dict, path: Path) -> str:
    """Per component of ∇ₓ: measured mean minus the exact ∇ₓk with its bootstrap interval,
    relative to max|∇ₓk|."""
    exact, mean = np.array(gb["exact"]), np.array(gb["mean"])
    lo, hi = np.array(gb["lo"]), np.array(gb["hi"])
    scale = float(np.max(np.abs(exact))) or 1.0
    j = np.arange(len(exact))
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    ax.errorbar(j, (mean - exact) / scale, yerr=[(mean - lo) / scale, (hi - mean) / scale],
                fmt="o", color="C0", capsize=3, label=f"measured bias, {gb['conf']:.1%} interval")
    ax.axhline(0.0, color="black", lw=0.8, label="unbiased")
    ax.set_xticks(j)
    ax.set_xlabel("component j of ∇ₓ")
    ax.set_ylabel("(mean ĝ_j − ∂k/∂x_j) / max|∇ₓk|")
    ax.set_title(f"{name}: gradient estimator, m = {gb['m']}, {gb['draws']} draws", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    _save(fig, path)
    return ("Bias of the gradient estimator per component (relative to the largest component "
            "of the exact gradient): an unbiased estimator's intervals straddle 0.")


#: The floor drawn for an error of exactly 0 on a log axis (a float64 result equal to the truth).
ZERO_FLOOR = 1e-20


def system_error_figure(name: str, rows: list[dict], path: Path, what: str = "bound") -> str:
    """Per backend × dtype (x) and form (colour): the largest |computed − exact| (filled) and the
    derived ``what`` at that entry (hollow), joined by a line, log y; an error of 0 sits at
    :data:`ZERO_FLOOR`."""
    rows = [r for r in rows if r.get("max_error") is not None]
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    forms = list(dict.fromkeys(r["form"] for r in rows))
    fig, ax = plt.subplots(figsize=(max(5.5, 1.3 * len(backends) + 2.5), 4.0))
    width = 0.7 / max(len(forms), 1)
    for j, form in enumerate(forms):
        pts = [(backends.index(r["backend"]), r) for r in rows if r["form"] == form]
        if not pts:
            continue
        xs = np.array([i for i, _ in pts], float) - 0.35 + width * (j + 0.5)
        err = np.array([max(r["max_error"], ZERO_FLOOR) for _, r in pts])
        bnd = np.array([max(r["bound_at_max"] or ZERO_FLOOR, ZERO_FLOOR) for _, r in pts])
        ax.vlines(xs, np.minimum(err, bnd), np.maximum(err, bnd), color=f"C{j}", lw=0.8)
        ax.plot(xs, err, "o", color=f"C{j}", label=f"{form}: max |computed − exact|")
        ax.plot(xs, bnd, "_", color=f"C{j}", ms=12, mew=2)
        over = err > bnd
        if over.any():
            ax.plot(xs[over], err[over], "x", color="red", ms=10)
    ax.plot([], [], "_", color="grey", ms=12, mew=2, label=f"derived {what} (at that entry)")
    ax.set_yscale("log")
    ax.set_xticks(range(len(backends)))
    ax.set_xticklabels(backends, rotation=20, fontsize=8)
    ax.set_ylabel(f"max |computed − exact| and its {what}")
    ax.set_title(f"{name}: error against the derived {what} per backend × dtype and form",
                 fontsize=10)
    ax.legend(fontsize=6, loc="best")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    _save(fig, path)
    return (f"Each dot (the largest error over the draws) lies below its {what} (the dash of the "
            f"same colour) where the form passes; a red × marks one above. Errors of exactly 0 "
            f"are drawn at {ZERO_FLOOR:g}.")


def mutant_heatmap(mutants: list[str], families: list[str], matrix: np.ndarray, groups: list[str],
                   path: Path) -> str:
    """Mutants (rows, grouped by their family) × property families (columns): 0 not run, 1 ran
    and passed, 2 killed by the family, 3 killed by an intended killer of the family."""
    from matplotlib.colors import ListedColormap

    cmap = ListedColormap(["#ffffff", "#d9d9d9", "#f4a582", "#b2182b"])
    h = max(3.0, 0.11 * len(mutants) + 1.6)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.38 * len(families) + 3.2), h))
    ax.imshow(matrix, aspect="auto", cmap=cmap, vmin=-0.5, vmax=3.5, interpolation="nearest")
    ax.set_xticks(range(len(families)))
    ax.set_xticklabels(families, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(mutants)))
    ax.set_yticklabels(mutants, fontsize=4 if len(mutants) > 60 else 7)
    for i in range(1, len(groups)):
        if groups[i] != groups[i - 1]:
            ax.axhline(i - 0.5, color="black", lw=0.6)
    for label, color in (("not run", "#ffffff"), ("ran, passed", "#d9d9d9"),
                         ("killed", "#f4a582"), ("killed (intended killer)", "#b2182b")):
        ax.plot([], [], "s", color=color, mec="grey", label=label)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_xlabel("property family")
    ax.set_title(f"mutant matrix: {len(mutants)} mutants × {len(families)} property families",
                 fontsize=10)
    _save(fig, path)
    return ("Which property families kill which mutant (rows grouped by the mutant's family, "
            "lines between groups): dark red where an intended killer failed, light red where "
            "another property of the family failed, grey where the family ran and passed, white "
            "where it did not run on that mutant.")


def calibration_figure(points: list[dict], path: Path, conf: float) -> str:
    """Observed false-alarm rate against the nominal level, one point per (row, level), with its
    two-sided Clopper–Pearson interval (faint), and the rate pooled over the points of each
    level with its interval (black); a rate of 0 is drawn at the floor with its upper bound."""
    from kernel_verify.verify.stats import rejection_rate_interval

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    levels = np.array([p["level"] for p in points], float)
    lo_level = float(levels.min()) if len(levels) else 1e-3
    floor = lo_level / 30
    rng = np.random.default_rng(0)  # a fixed horizontal jitter, so equal points stay readable
    for above in (False, True):
        sel = [p for p in points if (p["lo"] > p["level"]) == above]
        if not sel:
            continue
        x = np.array([p["level"] for p in sel]) * np.exp(rng.uniform(-0.12, 0.12, len(sel)))
        y = np.array([max(p["rate"], floor) for p in sel])
        lo = np.array([max(p["lo"], floor) for p in sel])
        hi = np.array([p["hi"] for p in sel])
        color = "red" if above else "C0"
        ax.errorbar(x, y, yerr=[np.maximum(y - lo, 0), np.maximum(hi - y, 0)], fmt="o", ms=3,
                    color=color, alpha=0.25, elinewidth=0.5,
                    label=("rate above its level (interval excludes it)" if above else
                           f"observed rate, {conf:.0%} Clopper–Pearson interval"))
    for i, level in enumerate(sorted(set(levels.tolist()))):
        at = [p for p in points if p["level"] == level]
        k, n = sum(p["rejections"] for p in at), sum(p["trials"] for p in at)
        lo, hi = rejection_rate_interval(k, n, conf)
        y = max(k / n, floor)
        ax.errorbar([level], [y], yerr=[[max(y - max(lo, floor), 0)], [max(hi - y, 0)]], fmt="D",
                    ms=6, color="black", capsize=4,
                    label="pooled over the checks at that level" if i == 0 else None)
    grid = np.geomspace(lo_level / 2, 0.5, 50)
    ax.plot(grid, grid, "-", color="black", lw=1, label="rate = level")
    ax.axhline(floor, color="grey", lw=0.6, ls=":", label="0 rejections (drawn here)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nominal level (α, or the stated rate of a model assumption)")
    ax.set_ylabel("observed false-alarm rate on correct code")
    ax.set_title(f"calibration: {len(points)} (check, level) points", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    _save(fig, path)
    return ("Each check on correct code: its observed false-alarm rate at each level it was run "
            "at, with its interval (faint), and the rate pooled per level (black diamonds); a "
            "calibrated check lies on or below the diagonal (a red point has an interval wholly "
            "above its level).")
