"""The overview page: estimators compared at equal feature count.

1. **Softmax estimators** (trigonometric, positive, hyperbolic, GERF; iid and orthogonal exact,
   SORF/Fastfood measured) at d = 64, m = 64: relative MSE ``(bias² + Var)/SM²`` against the
   input norm ‖x‖ = ‖y‖ at 60° and against the angle at ‖x‖ = ‖y‖ = 1 — the comparison of the
   Performer and FAVOR++ papers, from :func:`kernel_verify.verify.moments.exact_moments`
   (docs/math.md §1–§4).
2. **Gaussian-kernel estimators** (RFF pairs: orthogonal exact; SORF, Fastfood, fixed-norm ORF
   measured) at d = m = 16: MSE ratio against iid RFF versus ‖x − y‖/σ (the orthogonal random
   features paper's figure).
3. **Deterministic maps**: their kernel against exp(qᵀk) along q = s·u, k = u.
4. **Estimators of 2021–2026** (FAVOR#'s SDERF and ADERF, random Maclaurin, PolySketch, simplex
   blocks) against FAVOR+ and GERF on the same pairs and norm sweep
   (:mod:`kernel_verify.report.overview_recent`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kernel_verify.impls.registry import all_maps, get
from kernel_verify.properties.checks.estimates import estimates
from kernel_verify.properties.formulas import records
from kernel_verify.report import overview_recent
from kernel_verify.report.figures import _save, plt
from kernel_verify.report.measure import pair
from kernel_verify.report.pages import Page
from kernel_verify.report.settings import Settings
from kernel_verify.verify.moments import exact_moments


def softmax_compared() -> tuple[str, ...]:
    """The formulas of the softmax-estimator comparison, in their records' order
    (``softmax_comparison``)."""
    compared = {f: r.softmax_comparison for f, r in records().items()
                if r.softmax_comparison is not None}
    return tuple(sorted(compared, key=compared.__getitem__))


def _exact_rel(name: str, x, y, m: int) -> float:
    e = get(name)
    mom = exact_moments(e, x, y, None, m).as_float()
    return mom.variance / mom.mean**2


def _optimal_rel(optimal_variance, x, y, m: int) -> float:
    """Exact relative variance of an iid estimator at its per-input optimal parameter (the
    record's ``optimal_variance``; GERF: ``A = A*(x, y)``, FAVOR++, docs/math.md §4)."""
    return float(optimal_variance(x, y) / m / np.exp(x @ y) ** 2)


def _measured_rel(name: str, x, y, m: int, draws: int, seed: int) -> float:
    t = get(name)
    k = float(np.exp(x @ y))
    s = estimates(t, x, y, m, seed, draws)
    return float(np.mean((s - k) ** 2) / k**2)


def _crossing(xs: np.ndarray, a: np.ndarray, b: np.ndarray) -> float | None:
    """First x where curve ``a`` drops below ``b`` (linear interpolation of log a − log b)."""
    tiny = np.finfo(float).tiny
    g = np.log(np.maximum(a, tiny)) - np.log(np.maximum(b, tiny))
    for i in range(1, len(xs)):
        if g[i - 1] > 0 >= g[i]:
            return float(xs[i - 1] + (xs[i] - xs[i - 1]) * g[i - 1] / (g[i - 1] - g[i]))
    return None


def softmax_figure(s: Settings, folder: Path) -> tuple[str, list[str]]:
    d = m = 64
    draws = max(100, s.geo_draws)
    norms = np.linspace(0.2, 1.6, 15 if s.depth == "full" else 6)
    angles = np.linspace(0, 180, 19 if s.depth == "full" else 7)
    fig, axs = plt.subplots(1, 3, figsize=(15, 4.4))
    # keyed by (registry name, sweep tag); GERF at its per-input optimal A* is no registered
    # map: its curves are apart, by tag
    curves: dict[tuple[str, str], np.ndarray] = {}
    optimal: dict[tuple[str, str], np.ndarray] = {}
    sweeps = ((axs[0], "n60", norms, lambda r: pair(d, r, r, 60.0)),
              (axs[1], "n120", norms, lambda r: pair(d, r, r, 120.0)),
              (axs[2], "a", angles, lambda a: pair(d, 1.2, 1.2, a)))
    for c, f in enumerate(softmax_compared()):
        for matrix, style in (("iid", "-"), ("orthogonal", "--")):
            name = f"{f}[{matrix}]"
            for ax, tag, grid, mk in sweeps:
                r = np.array([_exact_rel(name, *mk(v), m) for v in grid])
                curves[name, tag] = r
                ax.plot(grid, r, style, color=f"C{c}", label=f"{name} (exact)")
        best = records()[f].optimal_variance
        if best is not None:
            for ax, tag, grid, mk in sweeps:
                r = np.array([_optimal_rel(best, *mk(v), m) for v in grid])
                optimal[f, tag] = r
                ax.plot(grid, r, ":", color=f"C{c}", lw=2,
                        label=f"{f}[iid] at its optimal parameter (exact)")
        for ax, _tag, grid, mk in sweeps[:2]:
            sel = grid[:: max(1, len(grid) // 4)]
            rs = [_measured_rel(f"{f}[sorf]", *mk(v), m, draws, 11 + j)
                  for j, v in enumerate(sel)]
            ax.plot(sel, rs, "x", color=f"C{c}", label=f"{f}[sorf] (measured MSE)")
    for ax in axs:
        ax.set_yscale("log")
        ax.set_ylim(bottom=1e-8)
        ax.set_ylabel(f"relative MSE / SM² (d = {d}, m = {m})")
        ax.grid(True, which="both", alpha=0.3)
    axs[0].set_xlabel("‖x‖ = ‖y‖ (angle 60°: qᵀk > 0)")
    axs[1].set_xlabel("‖x‖ = ‖y‖ (angle 120°: qᵀk < 0)")
    axs[2].set_xlabel("angle between x and y (degrees), ‖x‖ = ‖y‖ = 1.2")
    axs[0].legend(fontsize=6, ncol=2)
    axs[0].set_title("vs input norm, acute angle", fontsize=10)
    axs[1].set_title("vs input norm, obtuse angle", fontsize=10)
    axs[2].set_title("vs angle", fontsize=10)
    _save(fig, folder / "overview_softmax.png")
    findings = []
    for tag, grid, what in (("n120", norms, "‖x‖ = ‖y‖ at 120°"), ("a", angles,
                                                                   "angle at ‖x‖ = ‖y‖ = 1.2"),
                            ("n60", norms, "‖x‖ = ‖y‖ at 60°")):
        pos, trig = curves["softmax_positive[iid]", tag], curves["softmax_trig[iid]", tag]
        x = _crossing(grid, pos, trig)
        if x is None and np.all(pos < trig):
            findings.append(f"{what}: positive features beat trigonometric ones on the whole grid.")
        elif x is None:
            findings.append(f"{what}: trigonometric features beat positive ones on the whole grid "
                            f"({grid[0]:g}–{grid[-1]:g}; at the end {trig[-1]:.3g} vs "
                            f"{pos[-1]:.3g}).")
        else:
            findings.append(f"{what}: iid positive features overtake trigonometric ones at "
                            f"{x:.3g} (d = m = 64, exact relative MSE; at the grid end "
                            f"{pos[-1]:.3g} vs {trig[-1]:.3g}).")
    fixed_a = float(get("gerf[iid]").config["A"])
    g_fixed, g_opt = curves["gerf[iid]", "n60"], optimal["gerf", "n60"]
    pos = curves["softmax_positive[iid]", "n60"]
    findings.append(f"GERF at the registry's fixed A = {fixed_a:g} has {g_fixed[0] / pos[0]:.3g}× "
                    f"the relative MSE of positive features at ‖x‖ = ‖y‖ = {norms[0]:g} (60°) "
                    f"and {g_fixed[-1] / pos[-1]:.3g}× at {norms[-1]:g}: the optimal A* → 0 as "
                    "the inputs shrink, so a fixed negative A only pays at large norms; with A* "
                    f"chosen per input (FAVOR++) the ratio is {g_opt[0] / pos[0]:.3g} and "
                    f"{g_opt[-1] / pos[-1]:.3g} (never above 1: A* minimises the variance).")
    j = int(np.argmin(np.abs(norms - 1.0)))
    for f in ("softmax_positive", "softmax_trig", "softmax_hyperbolic"):
        iid, orf = curves[f"{f}[iid]", "n60"], curves[f"{f}[orthogonal]", "n60"]
        findings.append(f"Orthogonal rows lower the variance of {f} at d = m = 64, ‖x‖ = ‖y‖ = "
                        f"{norms[j]:.2f}, 60°, by {100 * (1 - orf[j] / iid[j]):.1f} % "
                        f"({orf[j]:.3g} vs {iid[j]:.3g} relative, exact).")
    return ("Relative MSE of every softmax estimator at equal m (lines exact, crosses measured "
            "SORF): trigonometric features (blue) win for acute angles, positive ones (orange) "
            "where qᵀk < 0 and the kernel is small."), findings


def gaussian_figure(s: Settings, folder: Path) -> tuple[str, list[str]]:
    d = m = 16
    zs = np.linspace(0.25, 3.0, 8 if s.depth == "full" else 4)
    draws = 4 * max(100, s.geo_draws)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    iid_v, orf_v = [], []
    measured = {n: [] for n in ("rff_pairs[sorf]", "rff_pairs[fastfood]",
                                "rff_pairs[orthogonal_fixed_norm]")}
    for j, z in enumerate(zs):
        x = np.zeros(d)
        x[0] = 0.3
        y = x.copy()
        y[1] = -z
        iid = exact_moments(get("rff_pairs[iid]"), x, y, None, m).as_float().variance
        orf = exact_moments(get("rff_pairs[orthogonal]"), x, y, None, m).as_float().variance
        iid_v.append(iid)
        orf_v.append(orf)
        for n in measured:
            t = get(n)
            smp = estimates(t, x, y, m, 500 + j, draws)
            measured[n].append(float(np.mean((smp - np.exp(-z * z / 2)) ** 2)) / iid)
    ratio = np.array(orf_v) / np.array(iid_v)
    ax.plot(zs, ratio, "-", color="C0", label="rff_pairs[orthogonal] (exact Var)")
    for c, (n, r) in enumerate(measured.items(), 1):
        ax.plot(zs, r, "o--", color=f"C{c}", ms=4, label=f"{n} (measured MSE, {draws} draws)")
    ax.axhline(1, color="black", lw=0.8, label="iid RFF")
    ax.set_yscale("log")
    ax.set_xlabel("‖x − y‖/σ")
    ax.set_ylabel(f"MSE / Var(iid RFF)  (d = m = {d})")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("Gaussian-kernel estimators against iid RFF", fontsize=10)
    _save(fig, folder / "overview_gaussian.png")
    j = int(np.argmin(ratio))
    finding = (f"Orthogonal RFF at d = m = 16 has {ratio[j]:.2f}× the iid variance at "
               f"‖x − y‖/σ = {zs[j]:.2f} (largest gain on the grid); the ratio is "
               f"{ratio[-1]:.2f} at {zs[-1]:.2f}.")
    return ("Below 1: better than iid random Fourier features. Orthogonality helps most at "
            "moderate distances."), [finding]


def deterministic_figure(folder: Path) -> str:
    d = 8
    u = np.random.default_rng(5).standard_normal(d)
    u /= np.linalg.norm(u)
    sgrid = np.linspace(-2, 2, 41)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(sgrid, np.exp(sgrid), "k-", lw=2, label="exp(qᵀk)")
    for c, e in enumerate(m for m in all_maps(claims=("deterministic",))
                          if not m.has("positional")):
        params = e.draw(np.random.default_rng(0), d, 8, e.config)
        vals = []
        for t in sgrid:
            f = e.numpy_fn(np.stack([t * u, u]), params, e.config)
            vals.append(float(f[0] @ f[1]))
        ax.plot(sgrid, vals, ("-", "--", ":")[c // 7], color=f"C{c % 7}", lw=1.2, label=e.name)
    ax.set_xlabel("qᵀk (q = s·u, k = u, ‖u‖ = 1, d = 8)")
    ax.set_ylabel("φ(q)ᵀφ(k)")
    ax.set_yscale("symlog", linthresh=0.1)
    ax.legend(fontsize=6, ncol=2)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("deterministic maps: their kernel against exp(qᵀk)", fontsize=10)
    _save(fig, folder / "overview_deterministic.png")
    return ("Only the Taylor maps follow exp(qᵀk) near 0; the others have a different shape "
            "(symmetric-log axis).")


def build(s: Settings, folder: Path, rel: str, version: str) -> Page:
    page = Page("Overview: estimators compared at equal feature count")
    page.p("[← index](index.md)")
    cap, f1 = softmax_figure(s, folder)
    page.h("Softmax estimators")
    page.img(f"{rel}/overview_softmax.png", cap)
    cap2, f2 = gaussian_figure(s, folder)
    page.h("Gaussian-kernel estimators: variance ratio against iid")
    page.img(f"{rel}/overview_gaussian.png", cap2)
    page.h("Deterministic maps")
    page.img(f"{rel}/overview_deterministic.png", deterministic_figure(folder))
    cap3, f3 = overview_recent.recent_figure(s, folder)
    page.h("Estimators of 2021–2026 against FAVOR+ and GERF")
    page.img(f"{rel}/overview_recent.png", cap3)
    page.h("Findings")
    page.ul(f1 + f2 + f3)
    return page
