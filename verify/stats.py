"""Statistical checks of estimators with a known false-alarm rate.

Every test here has a threshold that holds at *any* sample size (no CLT, no normality):

* **Hoeffding** (bounded samples ``X ∈ [a, b]``): ``P(|X̄ − μ| ≥ t) ≤ 2·exp(−2n t²/(b−a)²)``.
* **Bernstein** (bounded, known variance σ², ``|X − μ| ≤ M``):
  ``P(|X̄ − μ| ≥ t) ≤ 2·exp(−n t²/(2σ² + 2Mt/3))``. With the exact variance it is much tighter
  than Hoeffding when σ ≪ b − a. When both apply the smaller threshold is used: both are fixed
  numbers computed before looking at the data, so the level stays ``α``.
* **Empirical Bernstein** (bounded, variance unknown; Maurer & Pontil 2009, Thm 4):
  ``P(X̄ − μ ≥ √(2V_n L/n) + 7(b−a)L/(3(n−1))) ≤ α_side``, ``L = log(2/α_side)``, ``V_n`` the
  sample variance. Its threshold depends on the data, so it is not simply the smaller of it and
  Hoeffding's: the two are run at ``α/2`` each and either may reject (level ``≤ α``). Where the
  variance is far below ``(b−a)²/4`` (a kernel estimate whose range is ``[−1, 1]`` and whose
  spread is a few percent) it is several times tighter than Hoeffding.
* **Median of means** (unbounded samples with known variance, e.g. positive softmax features,
  which are log-normal): split the n samples into k blocks of ``b = ⌊n/k⌋`` (k odd; the
  ``n − k·b`` left over are not used), take the median of the block means. A block mean is
  off by ``≥ t`` with probability at most
  ``p = σ²/(b t²)`` (Chebyshev) or, per side, ``σ²/(σ² + b t²)`` (Cantelli); the median is off
  only if at least ``(k+1)/2`` blocks are, so ``P ≤ P(Bin(k, p) ≥ (k+1)/2)``, computed exactly
  (regularised incomplete beta). ``k`` is chosen (before seeing the data) to minimise the
  threshold. This is the bound used for unbounded estimators because it needs only the exact
  variance, which the moments module supplies for every estimator, and no range or sign;
  Bernstein on truncated terms would also need a tail bound per estimator.
* **Catoni's M-estimator** (unbounded samples with a known variance bound ``v ≥ σ²``; Catoni
  2012, Ann. IHP 48(4), Prop. 2.4; Lugosi & Mendelson 2019, Found. Comput. Math., Thm 5): with
  ``ψ(x) = sign(x)·log(1 + |x| + x²/2)`` (increasing, ``−log(1 − x + x²/2) ≤ ψ(x) ≤
  log(1 + x + x²/2)``) and ``r(θ) = Σᵢ ψ(a(Xᵢ − θ))`` (strictly decreasing in θ), Markov's
  inequality on ``exp(r(θ))`` gives, for every fixed θ,
  ``P(r(θ) ≥ n·a(μ − θ) + n·a²(v + (μ − θ)²)/2 + L) ≤ δ``, ``L = log(1/δ)``. With ``x = 2L/n < 1``,
  ``a = √(x(1 − x)/v)`` and ``t = √(v·2L/(n − 2L))`` the right side is exactly 0 at
  ``θ = μ + t``, so ``P(r(μ + t) ≥ 0) ≤ δ``; by symmetry ``P(r(μ − t) ≤ 0) ≤ δ``. The test rejects
  the upper side when ``r(μ₀ + t) ≥ 0`` (equivalently, the root θ̂ of r is ``≥ μ₀ + t``), the
  lower when ``r(μ₀ − t) ≤ 0``, each at ``δ = α_side``: no block structure, and a threshold about
  2.5 times smaller than the median of means' at ``n = 500`` (``t/σ = 0.23`` against ``0.59`` at
  ``α = 5e-6``): the power of about six times as many draws. Of the two, the test with the
  smaller threshold at ``(n, α)`` runs — a choice made before looking at the data, so the
  level stays ``α`` (:func:`known_variance_threshold`).
* **Variance** (known mean μ): ``Y = (X − μ)²`` are i.i.d. with mean σ². If ``X ∈ [a, b]`` then
  ``Y ∈ [0, R]``, ``R = max((b−μ)², (μ−a)²)``, and ``E[Y²] ≤ R·σ²`` → Hoeffding/Bernstein on Y.
  For unbounded X the exact fourth central moment μ₄ gives ``Var(Y) = μ₄ − σ⁴`` → median of means.
  Without either, there is no variance test (a ``ValueError`` says so): chi-square tests assume
  normal data and are not used.

The run-wide false-alarm budget is :class:`AlphaBudget` (Bonferroni): a full run with N
statistical assertions at ``α_total/N`` each raises a false alarm with probability ≤ ``α_total``.
``KV_ALPHA_TOTAL`` (default ``1e-3``) sets :data:`DEFAULT_ALPHA_TOTAL`.

Sample arrays have shape ``(..., n)``: the last axis holds the i.i.d. draws; leading axes are
independent batches (used by the calibration meta-tests), each tested separately.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special, stats

__all__ = [
    "DEFAULT_ALPHA_TOTAL",
    "KNOWN_VARIANCE_METHODS",
    "AlphaBudget",
    "StatResult",
    "bernstein_threshold",
    "catoni_threshold",
    "hoeffding_threshold",
    "known_variance_threshold",
    "mean_test",
    "median_of_means_threshold",
    "rejection_rate_interval",
    "variance_test",
]

_ALTERNATIVES = ("two-sided", "greater", "less")


def _alpha_from_env() -> float:
    text = os.environ.get("KV_ALPHA_TOTAL", "1e-3")
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"KV_ALPHA_TOTAL must be a number in (0, 1), got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise ValueError(f"KV_ALPHA_TOTAL must be in (0, 1), got {value}")
    return value


#: Run-wide false-alarm probability (env ``KV_ALPHA_TOTAL``, default 1e-3).
DEFAULT_ALPHA_TOTAL: float = _alpha_from_env()


def _check_alpha(alpha: Any, name: str = "alpha") -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float | np.floating):
        raise TypeError(f"{name} must be a real number, got {type(alpha).__name__}")
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {alpha!r}")
    return a


@dataclass(frozen=True)
class AlphaBudget:
    """A run-wide false-alarm budget split evenly over ``n_assertions`` (Bonferroni).

    ``AlphaBudget(1e-3, 250).per_assertion == 4e-6``: if every one of the 250 statistical
    assertions has level ``4e-6``, the probability that any of them fires on correct code is at
    most ``1e-3`` (union bound; no independence needed)."""

    total: float = DEFAULT_ALPHA_TOTAL
    n_assertions: int = 1

    def __post_init__(self) -> None:
        _check_alpha(self.total, "total")
        if isinstance(self.n_assertions, bool) or not isinstance(self.n_assertions, int):
            raise TypeError(f"n_assertions must be an integer, got {self.n_assertions!r}")
        if self.n_assertions < 1:
            raise ValueError(f"n_assertions must be >= 1, got {self.n_assertions}")

    @property
    def per_assertion(self) -> float:
        """The level of each assertion, ``total / n_assertions``."""
        return self.total / self.n_assertions

    @classmethod
    def from_env(cls, n_assertions: int) -> AlphaBudget:
        """The budget with ``total`` from ``KV_ALPHA_TOTAL`` (read now, default 1e-3)."""
        return cls(_alpha_from_env(), n_assertions)

    def describe(self) -> str:
        return (
            f"α = {self.per_assertion:.3g} per assertion = {self.total:.3g} run-wide / "
            f"{self.n_assertions} assertions (Bonferroni)"
        )


def _check_n(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"n (number of samples) must be an integer >= 1, got {n!r}")
    return int(n)


def _check_alternative(alternative: str) -> None:
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be one of {_ALTERNATIVES}, got {alternative!r}")


def _log_inv_side(alpha: float, alternative: str) -> float:
    """``log(1/α_side)``: two-sided tests split α over the two tails."""
    return math.log((2.0 if alternative == "two-sided" else 1.0) / alpha)


def _pos(name: str, value: Any, *, allow_zero: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"{name} must be finite and {'>=' if allow_zero else '>'} 0, got {v}")
    return v


def hoeffding_threshold(
    n: int, alpha: float, width: float, alternative: str = "two-sided"
) -> float:
    """``t = (b−a)·√(log(1/α_side)/(2n))``: ``P(X̄ − μ ≥ t) ≤ α_side`` for ``X ∈ [a, b]``,
    ``b − a = width`` (Hoeffding 1963, Thm 2); ``α_side = α/2`` when two-sided."""
    n, alpha = _check_n(n), _check_alpha(alpha)
    _check_alternative(alternative)
    width = _pos("width", width)
    return width * math.sqrt(_log_inv_side(alpha, alternative) / (2.0 * n))


def bernstein_threshold(
    n: int, alpha: float, variance: float, max_dev: float, alternative: str = "two-sided"
) -> float:
    """The ``t`` solving ``exp(−n t²/(2σ² + 2Mt/3)) = α_side`` (Bernstein's inequality; Boucheron,
    Lugosi & Massart 2013, Cor. 2.11), for i.i.d. samples with variance ``σ² = variance`` and
    ``|X − μ| ≤ M = max_dev``: ``t = (2ML/3 + √((2ML/3)² + 8nσ²L))/(2n)``, ``L = log(1/α_side)``."""
    n, alpha = _check_n(n), _check_alpha(alpha)
    _check_alternative(alternative)
    var, m = _pos("variance", variance), _pos("max_dev", max_dev)
    big_l = _log_inv_side(alpha, alternative)
    c = 2.0 * m * big_l / 3.0
    return (c + math.sqrt(c * c + 8.0 * n * var * big_l)) / (2.0 * n)


def empirical_bernstein_threshold(
    samples: np.ndarray, alpha: float, width: float, alternative: str = "two-sided"
) -> np.ndarray:
    """``t = √(2·V_n·L/n) + 7·w·L/(3(n − 1))``, ``L = log(2/α_side)``, per batch (last axis the
    ``n`` samples): ``P(X̄ − μ ≥ t) ≤ α_side`` for i.i.d. ``X ∈ [a, a + w]`` with ``V_n`` the
    unbiased sample variance (Maurer & Pontil 2009, *Empirical Bernstein bounds and sample
    variance penalization*, Thm 4, scaled from [0, 1] to width ``w``); ``α_side = α/2`` when
    two-sided. Unlike Hoeffding it adapts to a variance far below the range's ``w²/4`` without
    knowing it."""
    alpha = _check_alpha(alpha)
    _check_alternative(alternative)
    width = _pos("width", width)
    x = np.asarray(samples, dtype=np.float64)
    n = x.shape[-1]
    if n < 2:
        raise ValueError(f"the empirical Bernstein bound needs n >= 2 samples, got {n}")
    big_l = math.log(2.0) + _log_inv_side(alpha, alternative)
    var = x.var(axis=-1, ddof=1)
    return np.sqrt(2.0 * var * big_l / n) + 7.0 * width * big_l / (3.0 * (n - 1))


@functools.lru_cache(maxsize=512)
def _mom_plan(n: int, alpha: float, alternative: str) -> tuple[float, int, int]:
    """``(t/σ, k, b)``: the smallest median-of-means threshold in units of σ over odd k."""
    ks = np.arange(1, min(n, 2001) + 1, 2)
    b = n // ks
    h = (ks + 1) // 2
    shrink = 1.0 - 1e-9  # keep p strictly on the safe side of the inverse's rounding
    s = 1.0 / np.sqrt(b)  # std of a block mean, in units of σ
    # Cantelli per side: P(B̄ − μ ≥ t) ≤ s²/(s² + t²); union of the two sides if two-sided.
    side_alpha = alpha / 2.0 if alternative == "two-sided" else alpha
    p_c = special.betaincinv(h, ks - h + 1, side_alpha) * shrink
    t = s * np.sqrt((1.0 - p_c) / p_c)
    if alternative == "two-sided":
        # Chebyshev on |B̄ − μ|: p = s²/t².
        p_ch = special.betaincinv(h, ks - h + 1, alpha) * shrink
        t = np.minimum(t, s / np.sqrt(p_ch))
    best = int(np.argmin(t))
    return float(t[best]), int(ks[best]), int(b[best])


def median_of_means_threshold(
    n: int, alpha: float, variance: float, alternative: str = "two-sided"
) -> tuple[float, int, int]:
    """``(t, k, b)``: with ``k`` (odd) blocks of ``b`` samples, the median of block means is at
    least ``t`` from μ (on the tested side) with probability ≤ ``α``, for i.i.d. samples of
    variance ``variance`` (see the module docstring for the derivation)."""
    n, alpha = _check_n(n), _check_alpha(alpha)
    _check_alternative(alternative)
    var = _pos("variance", variance)
    t_unit, k, b = _mom_plan(n, alpha, alternative)
    return t_unit * math.sqrt(var), k, b


@functools.lru_cache(maxsize=512)
def _catoni_plan(n: int, alpha: float, alternative: str) -> tuple[float, float] | None:
    """``(t/√v, a·√v)`` of Catoni's test (module docstring), None when ``n ≤ 2·log(1/α_side)``
    (the bound does not exist there)."""
    x = 2.0 * _log_inv_side(alpha, alternative) / n
    if not x < 1.0:
        return None
    return math.sqrt(x / (1.0 - x)), math.sqrt(x * (1.0 - x))


def catoni_threshold(n: int, alpha: float, variance: float,
                     alternative: str = "two-sided") -> float | None:
    """``t = √(v·2L/(n − 2L))``, ``L = log(1/α_side)``: Catoni's M-estimator of ``n`` i.i.d.
    samples of variance ``≤ v`` is at least ``t`` from μ (on the tested side) with probability
    ``≤ α`` (module docstring); None when ``n ≤ 2L``."""
    n, alpha = _check_n(n), _check_alpha(alpha)
    _check_alternative(alternative)
    var = _pos("variance", variance)
    plan = _catoni_plan(n, alpha, alternative)
    return None if plan is None else plan[0] * math.sqrt(var)


#: The known-variance mean test's methods (:func:`known_variance_threshold`'s second value) and
#: the name each test label gives them.
KNOWN_VARIANCE_METHODS = {"catoni": "Catoni", "median_of_means": "median of means"}


def known_variance_threshold(n: int, alpha: float, variance: float,
                             alternative: str = "two-sided") -> tuple[float, str]:
    """``(t, method)``: the threshold of the known-variance mean test of ``n`` unbounded
    samples — Catoni's (``method = "catoni"``) or the median of means' (``"median_of_means"``),
    whichever is smaller at ``(n, α)``; the median of means at a zero variance (the samples are
    then a.s. constant, and its threshold 0 is exact)."""
    t_mom = median_of_means_threshold(n, alpha, variance, alternative)[0]
    t_cat = catoni_threshold(n, alpha, variance, alternative)
    if t_cat is None or not variance > 0 or t_mom <= t_cat:
        return t_mom, "median_of_means"
    return t_cat, "catoni"


def _catoni_psi(z: np.ndarray) -> np.ndarray:
    """``ψ(z) = sign(z)·log(1 + |z| + z²/2)`` without overflow (``2·log|z| − log 2`` beyond
    ``|z| = 1e150``, where the two agree to the last bit)."""
    az = np.abs(z)
    big = az > 1e150
    small = np.where(big, 0.0, az)
    val = np.where(big, 2.0 * np.log(np.where(big, az, 1.0)) - math.log(2.0),
                   np.log1p(small + 0.5 * small * small))
    return np.sign(z) * val


def _catoni_r(x: np.ndarray, theta: np.ndarray, a: float) -> np.ndarray:
    """``r(θ) = Σᵢ ψ(a(xᵢ − θ))`` per batch (``theta`` of the batch shape)."""
    return _catoni_psi(a * (x - np.asarray(theta)[..., None])).sum(axis=-1)


def _catoni_estimate(x: np.ndarray, a: float) -> np.ndarray:
    """The root θ̂ of ``r`` per batch (bisection on ``[min x, max x]``, where ``r`` changes
    sign; 200 halvings or until the bracket stops shrinking): the statistic shown."""
    lo, hi = x.min(axis=-1), x.max(axis=-1)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.all((mid == lo) | (mid == hi)):
            break
        up = _catoni_r(x, mid, a) > 0  # the root lies above mid
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return 0.5 * (lo + hi)


def _known_variance_test(x: np.ndarray, mu: float, var: float, alpha: float,
                         alternative: str) -> tuple[np.ndarray, np.ndarray, float, str, str]:
    """``(rejected, statistic, t, how, method)`` of the known-variance test of the mean ``mu`` of
    the unbounded samples ``x``: :func:`known_variance_threshold` picks ``method`` (a key of
    :data:`KNOWN_VARIANCE_METHODS`), ``how`` says how the threshold ``t`` was made."""
    n = x.shape[-1]
    t, method = known_variance_threshold(n, alpha, var, alternative)
    if method == "median_of_means":
        _, k, b = median_of_means_threshold(n, alpha, var, alternative)
        stat = _median_of_means(x, k, b)
        how = (f"median of {k} block means of {b} samples, Chebyshev/Cantelli per block with "
               f"variance {var:.4g}, exact binomial tail for the median")
        return _reject(stat, mu, t, alternative), stat, t, how, method
    a = _catoni_plan(n, alpha, alternative)[1] / math.sqrt(var)
    upper = _catoni_r(x, np.full(x.shape[:-1], mu + t), a) >= 0
    lower = _catoni_r(x, np.full(x.shape[:-1], mu - t), a) <= 0
    rejected = {"two-sided": upper | lower, "greater": upper, "less": lower}[alternative]
    how = (f"Catoni's M-estimator of {n} samples (ψ(z) = sign z·log(1 + |z| + z²/2), "
           f"a = {a:.4g}) with variance {var:.4g}: the root θ̂ of Σψ(a(X − θ)) is at least t "
           "from the mean with probability ≤ α (Catoni 2012, Prop. 2.4)")
    return rejected, _catoni_estimate(x, a), t, how, method


@dataclass(frozen=True)
class StatResult:
    """Outcome of a statistical check; ``str(result)`` explains it.

    ``statistic`` and ``rejected`` have the batch shape of the samples (``()`` for one batch);
    ``ok`` is True when no batch was rejected."""

    ok: bool
    test: str
    label: str
    claimed: float
    statistic: np.ndarray
    threshold: float
    alpha: float
    alternative: str
    n_samples: int
    rejected: np.ndarray
    method: str
    seed: int | None
    repro: str

    @property
    def n_rejected(self) -> int:
        return int(np.sum(self.rejected))

    @property
    def n_batches(self) -> int:
        return int(np.size(self.rejected))

    def explain(self) -> str:
        stat = np.asarray(self.statistic, dtype=np.float64)
        dev = stat - self.claimed
        worst = float(dev.flat[int(np.argmax(np.abs(dev)))]) if dev.size else 0.0
        verdict = "passed" if self.ok else f"REJECTED in {self.n_rejected} of {self.n_batches}"
        side = {"two-sided": "|stat − claimed|", "greater": "stat − claimed",
                "less": "claimed − stat"}[self.alternative]
        lines = [
            f"{self.label}: {self.test} {verdict} (false-alarm rate ≤ {self.alpha:.3g})",
            f"  claimed {self.claimed!r}; observed {_summary(stat)} from n = {self.n_samples} "
            f"samples; worst deviation {worst:+.4g}",
            f"  reject when {side} > {self.threshold:.4g}",
            f"  method: {self.method}",
        ]
        if not self.ok and self.n_batches > 1:
            where = [tuple(int(j) for j in i) if len(i) > 1 else int(i[0])
                     for i in np.argwhere(np.asarray(self.rejected))]
            lines.append(f"  rejected batches (index in the batch shape "
                         f"{tuple(np.shape(self.rejected))}): {where[:12]}"
                         + (" …" if len(where) > 12 else ""))
        lines.append(f"  seed: {self.seed!r}" + (f"; reproduce: {self.repro}" if self.repro
                                                 else ""))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()

    def check(self) -> StatResult:
        """Raise ``AssertionError`` with the explanation when rejected; else return self."""
        if not self.ok:
            raise AssertionError(self.explain())
        return self


def _summary(stat: np.ndarray) -> str:
    if stat.ndim == 0:
        return f"{float(stat):.6g}"
    return f"{stat.size} batches, range [{stat.min():.6g}, {stat.max():.6g}]"


def _samples(samples: Any) -> np.ndarray:
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"samples must have shape (..., n) with n >= 1, got {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("samples contain NaN or Inf")
    return x


def _bounds(bounds: Any) -> tuple[float, float] | None:
    if bounds is None:
        return None
    try:
        lo, hi = (float(v) for v in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"bounds must be a pair (a, b) of numbers, got {bounds!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"bounds must be finite with a < b, got {bounds!r}")
    return lo, hi


def _reject(stat: np.ndarray, claimed: float, t: float, alternative: str) -> np.ndarray:
    if alternative == "two-sided":
        return np.abs(stat - claimed) > t
    if alternative == "greater":
        return stat - claimed > t
    return claimed - stat > t


def _bounded_threshold(
    n: int, alpha: float, alternative: str, width: float, variance: float | None, max_dev: float
) -> tuple[float, str]:
    t = hoeffding_threshold(n, alpha, width, alternative)
    how = f"Hoeffding, range width {width:.4g}"
    if variance is not None:
        tb = bernstein_threshold(n, alpha, variance, max_dev, alternative)
        if tb < t:
            t, how = tb, f"Bernstein, variance {variance:.4g}, |X − mean| ≤ {max_dev:.4g}"
    return t, how


def _median_of_means(x: np.ndarray, k: int, b: int) -> np.ndarray:
    """The median over the last axis of ``k`` block means of ``b`` samples (the first ``k·b``)."""
    return np.median(x[..., : k * b].reshape(*x.shape[:-1], k, b).mean(axis=-1), axis=-1)


def _result(rejected, test, label, claimed, stat, t, alpha, alternative, n, how, seed,
            repro) -> StatResult:
    """The :class:`StatResult` of a mean or variance test (ok: no batch rejected)."""
    return StatResult(
        ok=not bool(np.any(rejected)), test=test, label=label, claimed=claimed,
        statistic=np.asarray(stat), threshold=t, alpha=alpha, alternative=alternative,
        n_samples=n, rejected=np.asarray(rejected), method=how, seed=seed, repro=repro,
    )


def mean_test(
    samples: Any,
    mean: float,
    *,
    alpha: float,
    bounds: tuple[float, float] | None = None,
    variance: float | None = None,
    alternative: str = "two-sided",
    label: str = "mean",
    seed: int | None = None,
    repro: str = "",
) -> StatResult:
    """Is the exact mean of the i.i.d. ``samples`` (last axis) equal to ``mean``?

    With ``bounds=(a, b)`` (a proven range of every sample): Bernstein when the exact
    ``variance`` is given and gives the smaller threshold, else Hoeffding; without a variance,
    Hoeffding or the empirical Bernstein bound (:func:`empirical_bernstein_threshold`) at ``α/2``
    each; a sample outside the range is itself a rejection. Without bounds the exact
    ``variance`` (or a bound on it) is required: Catoni's M-estimator or the median of means,
    whichever threshold is smaller (:func:`known_variance_threshold`). The level is ``alpha``
    (take it from :class:`AlphaBudget`). ``seed``/``repro`` go into the explanation."""
    x = _samples(samples)
    mu = float(mean)
    if not math.isfinite(mu):
        raise ValueError(f"mean must be finite, got {mean!r}")
    alpha = _check_alpha(alpha)
    _check_alternative(alternative)
    rng_bounds = _bounds(bounds)
    var = None if variance is None else _pos("variance", variance)
    n = x.shape[-1]
    if rng_bounds is not None:
        lo, hi = rng_bounds
        if not lo <= mu <= hi:
            raise ValueError(f"mean {mu} lies outside bounds {rng_bounds}")
        if var is None and n >= 2:  # no exact variance: Hoeffding and the empirical
            # Bernstein bound at α/2 each (union bound: level ≤ α), per batch the smaller
            t_h = hoeffding_threshold(n, alpha / 2, hi - lo, alternative)
            t_eb = empirical_bernstein_threshold(x, alpha / 2, hi - lo, alternative)
            t = np.minimum(t_h, t_eb)
            how = (f"Hoeffding (range width {hi - lo:.4g}) or empirical Bernstein (Maurer–Pontil, "
                   f"sample variance {float(np.max(x.var(axis=-1, ddof=1))):.4g}), α/2 each")
        else:
            t, how = _bounded_threshold(n, alpha, alternative, hi - lo, var,
                                        max(hi - mu, mu - lo))
        stat = x.mean(axis=-1)
        outside = ((x < lo) | (x > hi)).any(axis=-1)
        rejected = _reject(stat, mu, t, alternative) | outside
        if outside.any():
            how += f"; {int(outside.sum())} batch(es) had samples outside {rng_bounds}"
        test = "mean test"
    else:
        if var is None:
            raise ValueError("mean_test needs bounds (a, b) or the exact variance")
        rejected, stat, t, how, method = _known_variance_test(x, mu, var, alpha, alternative)
        test = f"mean test ({KNOWN_VARIANCE_METHODS[method]})"
    t = float(np.max(t)) if np.ndim(t) else t  # shown: the largest batch's threshold
    return _result(rejected, test, label, mu, stat, t, alpha, alternative, n, how, seed, repro)


def _mu4(value: Any, var: float) -> float:
    mu4 = _pos("fourth_central_moment", value)
    if mu4 < var * var * (1 - 1e-12):
        raise ValueError(f"fourth_central_moment {mu4} < variance² {var * var}: impossible")
    return mu4


def variance_test(
    samples: Any,
    mean: float,
    variance: float,
    *,
    alpha: float,
    bounds: tuple[float, float] | None = None,
    fourth_central_moment: float | None = None,
    alternative: str = "two-sided",
    label: str = "variance",
    seed: int | None = None,
    repro: str = "",
) -> StatResult:
    """Is the exact variance of the i.i.d. ``samples`` (known exact ``mean``) equal to
    ``variance`` (``alternative='greater'``: is it at most ``variance``; ``'less'``: at least)?

    The statistic is the sample mean of ``Y = (X − mean)²``. Bounded samples (``bounds``):
    ``Y ∈ [0, R]``, Hoeffding or Bernstein with ``Var(Y) ≤ R·σ² − σ⁴`` (two-sided; ``R·σ²`` for
    ``'greater'``, whose null is every variance ≤ σ²; Hoeffding alone for ``'less'``); a given
    ``fourth_central_moment`` replaces the two-sided ``Var(Y)`` bound by the exact value. Unbounded
    samples: ``fourth_central_moment`` μ₄ is required, ``Var(Y) = μ₄ − σ⁴``, the known-variance
    test of :func:`known_variance_threshold` on Y (the null is then the simple one: variance σ²
    and fourth central moment μ₄)."""
    x = _samples(samples)
    mu = float(mean)
    if not math.isfinite(mu):
        raise ValueError(f"mean must be finite, got {mean!r}")
    var = _pos("variance", variance)
    alpha = _check_alpha(alpha)
    _check_alternative(alternative)
    rng_bounds = _bounds(bounds)
    n = x.shape[-1]
    y = (x - mu) ** 2
    if rng_bounds is not None:
        lo, hi = rng_bounds
        if not lo <= mu <= hi:
            raise ValueError(f"mean {mu} lies outside bounds {rng_bounds}")
        r = max(hi - mu, mu - lo) ** 2
        if var > r:
            raise ValueError(f"variance {var} exceeds the largest possible (range²) {r}")
        var_y: float | None
        if alternative == "two-sided":
            var_y, max_dev = max(r * var - var * var, 0.0), max(r - var, var)
            if fourth_central_moment is not None:  # the exact Var(Y) when it is known
                var_y = min(var_y, max(_mu4(fourth_central_moment, var) - var * var, 0.0))
        elif alternative == "greater":  # any true variance v' ≤ σ²: Var(Y) ≤ R·v' ≤ R·σ²
            var_y, max_dev = r * var, r
        else:  # 'less': true v' ≥ σ² has no useful variance bound, so Hoeffding only
            var_y, max_dev = None, r
        t, how = _bounded_threshold(n, alpha, alternative, r, var_y, max_dev)
        how = f"(X − mean)² ∈ [0, {r:.4g}]; {how}"
        stat = y.mean(axis=-1)
        outside = ((x < lo) | (x > hi)).any(axis=-1)
        rejected = _reject(stat, var, t, alternative) | outside
        if outside.any():
            how += f"; {int(outside.sum())} batch(es) had samples outside {rng_bounds}"
        test = "variance test"
    else:
        if fourth_central_moment is None:
            raise ValueError(
                "variance_test needs bounds (a, b) or the exact fourth central moment: only "
                "bounded estimators, or ones with a known 4th moment, get variance tests"
            )
        var_y = max(_mu4(fourth_central_moment, var) - var * var, 0.0)
        rejected, stat, t, how, method = _known_variance_test(y, var, var_y, alpha,
                                                              alternative)
        how = f"on Y = (X − mean)², Var(Y) = μ₄ − σ⁴ = {var_y:.4g}: {how}"
        test = f"variance test ({KNOWN_VARIANCE_METHODS[method]})"
    return _result(rejected, test, label, var, stat, t, alpha, alternative, n, how, seed, repro)


def rejection_rate_interval(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    """Clopper–Pearson interval for a rejection rate seen ``k`` times in ``n`` trials: it covers
    the true rate with probability ≥ ``conf`` (exact, from beta quantiles)."""
    n = _check_n(n)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 0 <= k <= n:
        raise ValueError(f"k must be an integer in [0, n={n}], got {k!r}")
    conf = _check_alpha(conf, "conf")
    tail = (1.0 - conf) / 2.0
    lo = 0.0 if k == 0 else float(stats.beta.ppf(tail, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1.0 - tail, k + 1, n - k))
    return lo, hi
