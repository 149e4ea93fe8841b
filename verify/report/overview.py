"""The overview page: estimators compared at equal feature count.

1. **Softmax estimators** (trigonometric, positive, hyperbolic, GERF; iid and orthogonal exact,
   SORF/Fastfood measured) at d = 64, m = 64: relative MSE ``(bias² + Var)/SM²`` against the
   input norm ‖x‖ = ‖y‖ at 60° and against the angle at ‖x‖ = ‖y‖ = 1 — the comparison of the
   Performer and FAVOR++ papers, from :func:`verify.moments.exact_moments` (docs/math.md §1–§4).
2. **Gaussian-kernel estimators** (RFF pairs: orthogonal exact; SORF, Fastfood, fixed-norm ORF
   measured) at d = m = 16: MSE ratio against iid RFF versus ‖x − y‖/σ (the orthogonal random
   features paper's figure).
3. **Deterministic maps**: their kernel against exp(qᵀk) along q = s·u, k = u.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kernel_verify.impls.registry import all_maps, get
from kernel_verify.properties.test_feature_unbiased import estimates
from kernel_verify.verify.moments import exact_moments
from kernel_verify.verify.report.figures import _save, plt
from kernel_verify.verify.report.measure import pair
from kernel_verify.verify.report.pages import Page
from kernel_verify.verify.report.settings import Settings
from kernel_verify.verify.thirdparty.protocol import FeatureMapTarget

SOFTMAX = ("softmax_trig", "softmax_positive", "softmax_hyperbolic", "gerf")


def _exact_rel(name: str, x, y, m: int) -> float:
    e = get(name)
    mom = exact_moments(e, x, y, None, m).as_float()
    return mom.variance / mom.mean**2


def _measured_rel(name: str, x, y, m: int, draws: int, seed: int) -> float:
    t = FeatureMapTarget.from_entry(get(name))
    k = float(np.exp(x @ y))
    s = estimates(t, x, y, m, seed, draws)
    return float(np.mean((s - k) ** 2) / k**2)


def softmax_figure(s: Settings, folder: Path) -> tuple[str, list[str]]:
    d = m = 64
    draws = max(100, s.geo_draws)
    norms = np.linspace(0.2, 1.6, 8 if s.depth == "full" else 5)
    angles = np.linspace(0, 180, 7 if s.depth == "full" else 4)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    curves: dict[str, np.ndarray] = {}
    for c, f in enumerate(SOFTMAX):
        for matrix, style in (("iid", "-"), ("orthogonal", "--")):
            name = f"{f}[{matrix}]"
            rn = np.array([_exact_rel(name, *pair(d, r, r), m) for r in norms])
            ra = np.array([_exact_rel(name, *pair(d, 1.0, 1.0, a), m) for a in angles])
            curves[name] = rn
            ax.plot(norms, rn, style, color=f"C{c}", label=f"{name} (exact)")
            bx.plot(angles, ra, style, color=f"C{c}", label=f"{name} (exact)")
        sel = norms[:: max(1, len(norms) // 4)]
        rs = [_measured_rel(f"{f}[sorf]", *pair(d, r, r), m, draws, 11 + j)
              for j, r in enumerate(sel)]
        ax.plot(sel, rs, "x", color=f"C{c}", label=f"{f}[sorf] (measured, MSE)")
    for a in (ax, bx):
        a.set_yscale("log")
        a.set_ylabel(f"relative MSE / SM² (d = {d}, m = {m})")
        a.grid(True, which="both", alpha=0.3)
    ax.set_xlabel("‖x‖ = ‖y‖ (angle 60°)")
    bx.set_xlabel("angle between x and y (degrees), ‖x‖ = ‖y‖ = 1")
    ax.legend(fontsize=6, ncol=2)
    ax.set_title("softmax estimators vs input norm", fontsize=10)
    bx.set_title("softmax estimators vs angle", fontsize=10)
    _save(fig, folder / "overview_softmax.png")
    findings = []
    trig, pos = curves["softmax_trig[iid]"], curves["softmax_positive[iid]"]
    better = np.nonzero(pos < trig)[0]
    if len(better):
        findings.append(f"At d = m = 64 and 60°, iid positive features have a lower relative MSE "
                        f"than iid trigonometric ones from ‖x‖ = ‖y‖ ≈ {norms[better[0]]:.2f} "
                        f"on (grid {norms[0]:.1f}–{norms[-1]:.1f}; at ‖x‖ = {norms[-1]:.1f}: "
                        f"{pos[-1]:.3g} vs {trig[-1]:.3g}).")
    else:
        findings.append("Trigonometric features beat positive ones over the whole norm grid.")
    for f in ("softmax_positive", "softmax_trig"):
        iid, orf = curves[f"{f}[iid]"], curves[f"{f}[orthogonal]"]
        j = len(norms) // 2
        findings.append(f"Orthogonal rows lower the variance of {f} at d = m = 64, ‖x‖ = ‖y‖ = "
                        f"{norms[j]:.2f} by {100 * (1 - orf[j] / iid[j]):.1f} % "
                        f"({orf[j]:.3g} vs {iid[j]:.3g}, exact).")
    return ("Relative MSE of every softmax estimator at equal m: lines exact, crosses measured; "
            "look for where positive features (orange) cross below trigonometric ones (blue)."
            ), findings


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
            t = FeatureMapTarget.from_entry(get(n))
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
        ax.plot(sgrid, vals, "-", color=f"C{c % 10}", lw=1, label=e.name)
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
    page.h("Findings")
    page.ul(f1 + f2)
    return page
