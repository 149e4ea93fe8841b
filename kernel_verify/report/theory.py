"""Theory curves of the report: exact moments where :mod:`kernel_verify.verify.moments` has them,
else a large Monte Carlo reference computed once and cached with its own error bar.

* **exact**: ``E φ(x)ᵀφ(y)`` is the target kernel (claim ``unbiased``) or the declared
  ``mean_kernel`` (mpmath, :func:`kernel_verify.properties.unbiased_checks.kernel_value`); the
  variance is :func:`kernel_verify.properties.checks.estimates.exact_variance` — the property
  suite's own function,
  i.e. :func:`kernel_verify.verify.moments.exact_moments` for iid rows (``V₁/m``) and
  Haar-orthogonal rows with χ_d norms (``(m·V₁ + P·C)/m²``, docs/math.md §1–§4).
* **reference**: for constructions without exact moments (SORF, Fastfood, fixed-norm rows, learned
  maps) ``R`` independent draws at ``m_ref`` (one block: ``m_ref`` is a multiple of every block
  size at the report's d) give the mean and variance with bootstrap standard errors. Blocks of
  rows are drawn independently (``impls/random_matrices.py``), so for every ``m`` that is a
  multiple of ``m_ref`` the estimator is the mean of ``m/m_ref`` i.i.d. block estimators:
  ``E`` is unchanged and ``Var(m) = Var(m_ref)·m_ref/m`` exactly. Cached in the file cache
  (:mod:`kernel_verify.verify.cache`) keyed by target, configuration, points, R and code version.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernel_verify.properties.checks.estimates import estimates, exact_variance
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.properties.unbiased_checks import Degenerate, kernel_value
from kernel_verify.verify.cache import file_cache_get, file_cache_put

REF_SEED = 20261123


@dataclass
class Theory:
    """Theory at one pair: ``kernel`` k(x, y); ``mean`` E φᵀφ (None: unknown); ``variance`` per m
    (None: unknown); ``kind`` says where each number comes from; ``*_se``: reference errors."""

    kernel: float
    mean: float | None
    mean_kind: str
    variance: list[float | None]
    variance_kind: str
    mean_se: float = 0.0
    variance_se: list[float] | None = None


def _safe_kernel(target: FeatureMapTarget, kernel: str, x: np.ndarray, y: np.ndarray):
    try:
        return kernel_value(target, kernel, x, y)
    except Degenerate:
        return None


def bootstrap_se(samples: np.ndarray, boot: int, seed: int) -> tuple[float, float]:
    """Bootstrap standard errors of the sample mean and the sample variance."""
    rng = np.random.default_rng(seed)
    n = len(samples)
    means, vars_ = np.empty(boot), np.empty(boot)
    for b in range(boot):  # one row at a time: memory O(n)
        s = samples[rng.integers(0, n, n)]
        means[b], vars_[b] = s.mean(), s.var(ddof=1)
    return float(means.std(ddof=1)), float(vars_.std(ddof=1))


def reference(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, m_ref: int, draws: int,
              version: str) -> dict[str, float]:
    """Monte Carlo mean/variance at ``m_ref`` with bootstrap SEs (cached; module docstring)."""
    key = repr((target.name, sorted(dict(target.config).items()), x.tolist(), y.tolist(), m_ref,
                draws, REF_SEED, version))
    hit = file_cache_get("report-reference", key)
    if hit is not None:
        return hit
    samples = estimates(target, x, y, m_ref, REF_SEED, draws)
    mean_se, var_se = bootstrap_se(samples, 400, REF_SEED)
    value = {"mean": float(samples.mean()), "mean_se": mean_se,
             "variance": float(samples.var(ddof=1)), "variance_se": var_se, "draws": draws,
             "m_ref": m_ref}
    file_cache_put("report-reference", key, value)
    return value


def theory(target: FeatureMapTarget, x: np.ndarray, y: np.ndarray, ms: tuple[int, ...], *,
           ref_draws: int, version: str, allow_reference: bool = True) -> Theory:
    """Theory at ``(x, y)`` for every ``m`` in ``ms`` (module docstring)."""
    k = _safe_kernel(target, target.kernel, x, y)
    if target.has("unbiased"):
        mean, mean_kind = k, "target kernel (mpmath)"
    elif target.has("biased") and target.mean_kernel:
        mean = _safe_kernel(target, target.mean_kernel, x, y)
        mean_kind = f"declared mean kernel `{target.mean_kernel}` (mpmath, docs/math.md §3)"
    else:
        mean, mean_kind = None, "unknown"
    exact = [exact_variance(target, x, y, m) for m in ms] if target.has("unbiased") else []
    if exact and all(v is not None for v in exact):
        return Theory(float(k), mean, mean_kind, exact,
                      "exact (verify.moments: iid V₁/m or ORF (m·V₁ + P·C)/m², docs/math.md §1–§4)")
    if not allow_reference or not target.white_box:
        return Theory(float(k), mean, mean_kind, [None] * len(ms), "none")
    m_ref = min(ms)
    ref = reference(target, x, y, m_ref, ref_draws, version)
    var = [ref["variance"] * m_ref / m for m in ms]
    se = [ref["variance_se"] * m_ref / m for m in ms]
    kind = (f"Monte Carlo reference: {ref['draws']} draws at m = {m_ref} (one block), "
            f"Var(m) = Var({m_ref})·{m_ref}/m (independent blocks); band ±2 SE (bootstrap)")
    if mean is None:
        mean, mean_kind = ref["mean"], f"Monte Carlo reference ({ref['draws']} draws, ±2 SE)"
        return Theory(float(k), mean, mean_kind, var, kind, ref["mean_se"], se)
    return Theory(float(k), mean, mean_kind, var, kind, 0.0, se)
