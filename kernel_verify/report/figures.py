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
