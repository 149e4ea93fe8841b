"""The frequency rows of a random feature map, read off the map, and the law they must have.

A map declaring one of the families below with ``matrix='iid'`` or ``'orthogonal'`` says that
its features are those of the family's formula at rows ``ω`` (the frequencies; ``ω = W/σ`` for
a Gaussian kernel of bandwidth σ) drawn so that every row is marginally ``N(0, σ⁻²I_d)`` and the
row norms are independent (iid rows; orthogonal blocks rescaled by independent χ_d norms, Yu et
al. 2016) — the construction the unbiasedness proof of the family rests on. The rows are
*whitened* here (``σω``), so a correct map's rows are ``N(0, I_d)``.

**Reading the rows** (:func:`whitened_rows`). A white-box map's draw gives them (``params["W"]``:
the family's twin divides by σ itself). A black-box map's are recovered from its outputs at
``X = [0, h·e₁, …, h·e_d]`` (one call per draw), exactly in exact arithmetic:

* exponential families (``softmax_positive``, ``softmax_hyperbolic``):
  ``log φᵢ(x) = ωᵢᵀx − ‖x‖²/2 + cᵢ`` for every column ``i`` (the ``−ω`` columns of the
  hyperbolic map too), so ``ωᵢⱼ = (log φᵢ(h·eⱼ) − log φᵢ(0))/h + h/2``; a column whose row is
  the negative or a copy of an earlier column's (the hyperbolic map's ``[ω, −ω]``, antithetic
  rows) is dropped, so every kept row is a distinct draw. Layout-free: any column order.
* ``[cos, sin]`` families (``rff_pairs``, and ``softmax_trig``, whose factor ``e^(‖x‖²/2)`` the
  angle ignores): at ``x = 0`` the cosine columns are positive and the sine columns zero; the
  k-th cosine column pairs with the k-th sine column (block ``[cos | sin]`` and interleaved
  layouts alike), checked by ``c² + s²`` being one value (to 1e-5) for every pair at every
  point; then ``ωᵢⱼ = atan2(sᵢ, cᵢ)(h·eⱼ)/h``. With ``h = ℓ/16`` the angle
  ``h·ωᵢⱼ = N(0,1)/16`` leaves ``(−π, π)`` with probability below ``e^(−1200)``: no aliasing for a
  correct map.

* the phase family (``rff_phase``: ``a·cos(ωᵀx + b)``, ``b`` uniform, ``a = √(2/m)``): at
  ``0, ±h·eⱼ`` each column gives ``cos(h·ωᵢⱼ) = (φᵢ(h·eⱼ) + φᵢ(−h·eⱼ))/(2φᵢ(0))`` (``a`` and
  ``b`` cancel), so ``|ωᵢⱼ| = arccos(…)/h``, with the sign of ``φᵢ(−h·eⱼ) − φᵢ(h·eⱼ)``, which
  is ``sign(ωᵢⱼ)·sign(a·sin b)``: the row times a random sign independent of it, of the same
  (symmetric) law. Read only from the columns with ``|φᵢ(0)| ≥ ½·max|φ(0)|`` (``|cos b|``
  not small: the quotient is then well conditioned; the choice depends on ``b`` alone, so the
  kept rows have the law of all of them), and checked at ``±2h·eⱼ``, where the sum must be
  ``2φᵢ(0)(2c² − 1)`` (to 1e-5 of the largest feature): columns of another form fail that and
  are reported. The number of rows kept varies per draw, so only the pooled checks below run
  (:func:`rows_keep_positions`).

Rounding: the recovered rows carry an absolute error of a few ``u₆₄·|log φ|/h`` (≲ 1e-13),
which moves the statistics below by far less than their thresholds' resolution; a map whose
outputs cannot be read this way (a non-positive exponential feature, columns that do not pair)
is reported as such, not tested.

**The law** (:func:`pooled_norm_checks`, beside the per-position checks of
:func:`kernel_verify.properties.checks.row_law.row_law_checks`): with ``K`` rows pooled over the
independent draws, their squared norms are i.i.d. ``χ²_d`` under both constructions, so

* ``T = Σ‖ωₖ‖² ~ χ²_(K·d)`` exactly: a two-sided test at the run's α (scipy's χ² quantiles) —
  rows scaled by ``1 + ε`` move ``T/(Kd)`` by ``2ε`` against a standard deviation
  ``√(2/(Kd))``: at K = 16000, d = 2 a frequency scale 1.02 (bandwidth 2 % off) is about 7 σ;
* the empirical law of the ``‖ωₖ‖²`` against ``χ²_d`` (Dvoretzky–Kiefer–Wolfowitz–Massart):
  rows of one fixed norm ``√d`` (a Performer-style "regularised" orthogonal matrix claimed
  unbiased) put every ``‖ω‖² = d``, a distance ≥ 0.26 from ``χ²_d``'s CDF at any d.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

from kernel_verify.verify.stats import StatResult

#: The families whose rows can be read off, and how.
EXPONENTIAL = ("softmax_positive", "softmax_hyperbolic")
TRIGONOMETRIC = ("rff_pairs", "softmax_trig")
PHASE = ("rff_phase",)
#: The kernel each family estimates (another declared kernel: the rows are not read).
FAMILY_KERNEL = {"softmax_positive": "softmax", "softmax_hyperbolic": "softmax",
                 "softmax_trig": "softmax", "rff_pairs": "gaussian", "rff_phase": "gaussian"}
#: Declared constructions whose rows are marginally Gaussian with independent norms.
GAUSSIAN_MATRICES = ("iid", "orthogonal")
#: Independent draws per example, and the step (in units of the kernel's length).
DRAWS = 1000
STEP = 1.0 / 16.0
#: Two rows closer than this (relative) are one row (a copy or the negative of another).
SAME_ROW = 1e-9
#: ``c² + s²`` of paired columns agree to this (relative): float32 maps pair too; columns that
#: are not pairs of one angle miss it by O(1).
PAIR_LEVEL = 1e-5
#: Statistical assertions of :func:`pooled_norm_checks`.
N_POOLED_CHECKS = 2


class NotReadable(Exception):
    """The map's outputs do not have the declared family's structure here (the reason)."""


def readable(target) -> str | None:
    """``None`` when :func:`whitened_rows` applies to ``target``, else why not."""
    if target.formula not in FAMILY_KERNEL:
        return (f"declares formula {target.formula!r}; rows are read for "
                f"{', '.join(sorted(FAMILY_KERNEL))}")
    if target.matrix not in GAUSSIAN_MATRICES:
        return (f"declares matrix {target.matrix!r}; the Gaussian-row law holds for "
                f"{' and '.join(GAUSSIAN_MATRICES)}")
    if target.kernel != FAMILY_KERNEL[target.formula]:
        return (f"declares kernel {target.kernel!r} with formula {target.formula!r}, which "
                f"estimates {FAMILY_KERNEL[target.formula]!r}")
    if target.has("positional"):
        return "is positional"
    return None


def kernel_length(target, d: int) -> float:
    """σ of a Gaussian kernel (its ``sigma`` parameter, default 1); 1 for the softmax kernel."""
    if target.kernel != "gaussian":
        return 1.0
    return float(target.kernel_args(d).get("sigma", 1.0))


def rows_keep_positions(target) -> bool:
    """Whether :func:`whitened_rows` returns every row at its position (one shape per draw, so
    the per-position checks apply): not for a black-box phase-family map, whose readable
    columns vary per draw (module docstring)."""
    return target.white_box or target.formula not in PHASE


def whitened_rows(target, seed: int, d: int) -> np.ndarray:
    """The rows ``σω`` (K, d) of the draw of ``seed`` (module docstring); raises
    :class:`NotReadable` when the outputs lack the family's structure."""
    if target.white_box:
        w = np.asarray(target.draw_params(np.random.default_rng(seed), d)["W"], dtype=np.float64)
        return w.reshape(-1, d)
    length = kernel_length(target, d)
    h = STEP * length
    if target.formula in PHASE:
        return _phases(target, seed, d, h) * length
    x = np.vstack([np.zeros((1, d)), h * np.eye(d)])
    f = target.features(x, seed=seed)
    if f.ndim != 2 or f.shape[0] != d + 1 or not np.all(np.isfinite(f)):
        raise NotReadable(f"features of {d + 1} points have shape {f.shape} or are not finite")
    if target.formula in EXPONENTIAL:
        if not np.all(f > 0):
            raise NotReadable("an exponential feature is ≤ 0")
        logf = np.log(f)
        rows = ((logf[1:] - logf[0]) / h + h / 2).T  # (D, d)
        return _distinct(rows) * length
    return _angles(f, h) * length


def _distinct(rows: np.ndarray) -> np.ndarray:
    """The rows that are neither a copy nor the negative of an earlier row."""
    tol = SAME_ROW * (np.linalg.norm(rows, axis=1) + 1e-300)[:, None]
    same = np.all(np.abs(rows[:, None] - rows[None]) <= tol[..., None], axis=-1)
    negative = np.all(np.abs(rows[:, None] + rows[None]) <= tol[..., None], axis=-1)
    earlier = np.tril(same | negative, k=-1)  # [i, j]: row i repeats row j < i
    return rows[~earlier.any(axis=1)]


def _angles(f: np.ndarray, h: float) -> np.ndarray:
    at0 = f[0]
    big = np.abs(at0).max(initial=0.0)
    cos_cols = np.flatnonzero(at0 > 0.5 * big)
    sin_cols = np.flatnonzero(np.abs(at0) <= 1e-12 * big)
    if big == 0 or len(cos_cols) != len(sin_cols) or len(cos_cols) + len(sin_cols) != f.shape[1]:
        raise NotReadable(f"at x = 0, {len(cos_cols)} columns are cosines (> 0) and "
                          f"{len(sin_cols)} sines (= 0) of {f.shape[1]}: not [cos, sin] pairs")
    c, s = f[:, cos_cols], f[:, sin_cols]
    r2 = c * c + s * s
    if not np.all(np.abs(r2 - r2[:, :1]) <= PAIR_LEVEL * r2[:, :1]):
        raise NotReadable("the k-th cosine and k-th sine columns do not have one c² + s² at "
                          "every point: not pairs of one angle")
    return (np.arctan2(s[1:], c[1:]) / h).T  # (m, d)


def _phases(target, seed: int, d: int, h: float) -> np.ndarray:
    """The rows of a phase-family map, up to one random sign per row (module docstring)."""
    e = np.eye(d)
    x = np.vstack([np.zeros((1, d)), h * e, -h * e, 2 * h * e, -2 * h * e])
    f = target.features(x, seed=seed)
    if f.ndim != 2 or f.shape[0] != 4 * d + 1 or not np.all(np.isfinite(f)):
        raise NotReadable(f"features of {4 * d + 1} points have shape {f.shape} or are not "
                          "finite")
    at0 = f[0]
    big = float(np.abs(f).max(initial=0.0))
    keep = np.abs(at0) >= 0.5 * np.abs(at0).max(initial=0.0)
    if big == 0 or not keep.any():
        raise NotReadable("every feature is 0 at x = 0 and ±h·eⱼ")
    f0 = at0[keep]
    plus, minus = f[1:d + 1][:, keep], f[d + 1:2 * d + 1][:, keep]
    plus2, minus2 = f[2 * d + 1:3 * d + 1][:, keep], f[3 * d + 1:][:, keep]
    c = (plus + minus) / (2 * f0)  # (d, kept): cos(h·ω)
    want = 2 * f0 * (2 * c * c - 1)
    off_form = np.abs(plus2 + minus2 - want) > PAIR_LEVEL * big
    if off_form.any() or np.any(np.abs(c) > 1 + 1e-6):
        raise NotReadable("the features are not a·cos(ωᵀx + b) along the axes: φ(2h·eⱼ) + "
                          "φ(−2h·eⱼ) ≠ 2φ(0)(2c² − 1) with c = (φ(h·eⱼ) + φ(−h·eⱼ))/(2φ(0))")
    angle = np.arccos(np.clip(c, -1.0, 1.0)) / h
    return (angle * np.where(minus - plus >= 0, 1.0, -1.0)).T  # (kept, d)


def pooled_norm_checks(rows: np.ndarray, d: int, *, alpha: float, label: str,
                       seed: int | None = None) -> list[StatResult]:
    """The two pooled checks of the module docstring on ``rows (K, d)`` pooled over draws, each
    at level ``alpha``."""
    from kernel_verify.properties.checks.row_law import dkw_test

    sq = np.sum(rows * rows, axis=-1)
    k = sq.size
    total = float(sq.sum())
    dof = k * d
    lo, hi = sps.chi2.ppf(alpha / 2, dof), sps.chi2.isf(alpha / 2, dof)
    ok = lo <= total <= hi
    chi2_result = StatResult(
        ok=bool(ok), test="χ² test (exact, two-sided)",
        label=f"{label}: Σ‖σωₖ‖² ~ χ²_{dof} over {k} rows (E = {dof}; observed {total:.6g}, "
              f"ratio {total / dof:.4f}, so the frequencies are scaled by "
              f"≈{math.sqrt(total / dof):.4f})",
        # the half-width on the side observed: "|stat − claimed| > threshold" reads true
        claimed=float(dof), statistic=np.asarray(total),
        threshold=float(dof - lo if total < dof else hi - dof), alpha=alpha,
        alternative="two-sided", n_samples=k,
        rejected=np.asarray(not ok), method=f"accept [{lo:.6g}, {hi:.6g}] (χ² quantiles at α/2)",
        seed=seed, repro="")
    dist = dkw_test(sq, sps.chi2(d).cdf, alpha=alpha, seed=seed,
                    label=f"{label}: ‖σωₖ‖² ~ χ²_{d} (the law of the row norms; {k} rows)")
    return [chi2_result, dist]
