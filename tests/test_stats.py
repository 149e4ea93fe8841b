"""Statistical helpers (verify/stats.py): thresholds, calibration and power meta-tests, and the
real registry entry ``rff_pairs[iid]``.

Synthetic estimators (1-D, vectorised over a batch axis; all moments derived here):

* RFF, one dimension: ``X = (1/m) Σⱼ cos(wⱼ δ)``, ``wⱼ ~ N(0, 1/σ²)`` (the pairs estimator
  ``cos(wx)cos(wy) + sin(wx)sin(wy) = cos(w(x−y))``). With ``E cos(j w δ) = exp(−j²δ²/(2σ²)) =
  k^(j²)``, ``k = exp(−δ²/(2σ²))``: mean ``k``; for m = 1, ``E X² = (1 + k⁴)/2``, ``E X³ =
  (3k + k⁹)/4``, ``E X⁴ = (3 + 4k⁴ + k¹⁶)/8`` (power-reduction formulas for cos², cos³, cos⁴),
  so ``Var = (1 − k²)²/2`` (docs/math.md §1) and the 4th central moment follows. X ∈ [−1, 1].
* Positive softmax features, one dimension: ``X = exp(w s − (x² + y²)/2)``, ``w ~ N(0, 1)``,
  ``s = x + y``: ``E Xʲ = exp(j²s²/2 − j(x² + y²)/2)`` (Gaussian mgf), mean ``exp(xy)``
  (docs/math.md §2). Unbounded (log-normal).

Calibration meta-tests run each helper on ``N_CAL`` independent batches at ``α = 0.05`` and fail
if the rejection count is significantly above ``α``: the lower end of a Clopper–Pearson interval
with one-sided level ``1e-6`` exceeds ``α``. A valid (possibly conservative) helper fails this
with probability ≤ 1e-6. Power meta-tests use the per-assertion ``α`` of a realistic run
(``AlphaBudget(1e-3, 1000)``: 1e-6) and require ≥ 95% of ``N_POW`` batches to reject a broken
estimator; the sample sizes are chosen so the expected deviation is 1.5–4 times the threshold
(checked for every batch of the fixed seeds).
All randomness is from seeded ``numpy.random.Generator``s; the seed is in each failure message.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from kernel_verify.impls import registry
from kernel_verify.verify.stats import (
    DEFAULT_ALPHA_TOTAL,
    AlphaBudget,
    bernstein_threshold,
    catoni_threshold,
    empirical_bernstein_threshold,
    hoeffding_threshold,
    known_variance_threshold,
    mean_test,
    median_of_means_threshold,
    rejection_rate_interval,
    variance_test,
)

N_CAL = 2000
CAL_ALPHA = 0.05
META_LEVEL = 1e-6
N_POW = 10
POWER_ALPHA = AlphaBudget(1e-3, 1000).per_assertion
# Real (non-meta) statistical assertions in this file, sharing the run-wide budget.
REAL_ASSERTIONS = 2
REAL_ALPHA = AlphaBudget(DEFAULT_ALPHA_TOTAL, REAL_ASSERTIONS).per_assertion


# --- synthetic estimators and their exact moments --------------------------------------------

def rff_k(delta: float, sigma: float) -> float:
    return math.exp(-(delta**2) / (2 * sigma**2))


def rff_samples(rng, shape, *, m=1, delta=1.0, sigma=1.0):
    w = rng.standard_normal((*shape, m)) / sigma
    return np.cos(w * delta).mean(axis=-1)


def rff_moments(m: int, delta: float, sigma: float) -> tuple[float, float, float | None]:
    """(mean, variance, 4th central moment (m = 1 only)) of the 1-D RFF estimator."""
    k = rff_k(delta, sigma)
    var = (1 - k * k) ** 2 / (2 * m)
    if m != 1:
        return k, var, None
    e2, e3, e4 = (1 + k**4) / 2, (3 * k + k**9) / 4, (3 + 4 * k**4 + k**16) / 8
    mu4 = e4 - 4 * k * e3 + 6 * k * k * e2 - 3 * k**4
    return k, var, mu4


def pos_samples(rng, shape, *, x=0.3, y=0.2, w_scale=1.0):
    w = rng.standard_normal(shape) * w_scale
    return np.exp(w * (x + y) - (x * x + y * y) / 2)


def pos_moments(x=0.3, y=0.2) -> tuple[float, float, float]:
    s, q = x + y, x * x + y * y

    def raw(j):
        return math.exp(j * j * s * s / 2 - j * q / 2)

    mu = raw(1)
    assert math.isclose(mu, math.exp(x * y), rel_tol=1e-14)
    var = raw(2) - mu * mu
    mu4 = raw(4) - 4 * mu * raw(3) + 6 * mu * mu * raw(2) - 3 * mu**4
    return mu, var, mu4


def test_synthetic_moments_match_quadrature():
    """The closed forms above against Gauss–Hermite quadrature (200 nodes; exact to ~1e-13
    for these smooth integrands), so the meta-tests rest on checked moments."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(200)
    weights = weights / weights.sum()  # expectation under N(0, 1)
    for delta, sigma in ((1.0, 1.0), (0.5, 1.3)):
        k, var, mu4 = rff_moments(1, delta, sigma)
        vals = np.cos(nodes / sigma * delta)
        assert weights @ vals == pytest.approx(k, abs=1e-12)
        assert weights @ (vals - k) ** 2 == pytest.approx(var, abs=1e-12)
        assert weights @ (vals - k) ** 4 == pytest.approx(mu4, abs=1e-12)
    mu, var, mu4 = pos_moments()
    vals = np.exp(nodes * 0.5 - 0.13 / 2)
    assert weights @ vals == pytest.approx(mu, rel=1e-12)
    assert weights @ (vals - mu) ** 2 == pytest.approx(var, rel=1e-10)
    assert weights @ (vals - mu) ** 4 == pytest.approx(mu4, rel=1e-8)


# --- thresholds ------------------------------------------------------------------------------

def test_hoeffding_threshold_formula():
    t = hoeffding_threshold(100, 0.01, 2.0)
    assert 2 * math.exp(-2 * 100 * t * t / 4.0) == pytest.approx(0.01, rel=1e-12)
    t1 = hoeffding_threshold(100, 0.01, 2.0, "greater")
    assert math.exp(-2 * 100 * t1 * t1 / 4.0) == pytest.approx(0.01, rel=1e-12)


@pytest.mark.parametrize(("n", "var", "m"), [(10, 0.2, 1.6), (1000, 0.01, 2.0), (5, 1.0, 0.1)])
def test_bernstein_threshold_solves_its_equation(n, var, m):
    for alt, sides in (("two-sided", 2), ("less", 1)):
        t = bernstein_threshold(n, 1e-4, var, m, alt)
        assert sides * math.exp(-n * t * t / (2 * var + 2 * m * t / 3)) == pytest.approx(
            1e-4, rel=1e-10
        )


@pytest.mark.parametrize("alpha", [0.05, 1e-3, 1e-6])
@pytest.mark.parametrize("n", [1, 50, 1000, 12345])
def test_median_of_means_threshold_has_level_alpha(alpha, n):
    """Re-derive the level of the chosen plan with scipy's binomial tail."""
    for alt in ("two-sided", "greater"):
        t, k, b = median_of_means_threshold(n, alpha, 2.0, alt)
        assert k % 2 == 1 and k * b <= n and b >= 1
        s2 = 2.0 / b
        h = (k + 1) // 2
        cantelli = sps.binom.sf(h - 1, k, s2 / (s2 + t * t))
        if alt == "two-sided":
            level = min(2 * cantelli, sps.binom.sf(h - 1, k, min(s2 / (t * t), 1.0)))
        else:
            level = cantelli
        assert level <= alpha * (1 + 1e-9)


@pytest.mark.parametrize("alpha", [0.05, 1e-3, 1e-6])
@pytest.mark.parametrize("n", [10, 50, 1000, 12345])
def test_catoni_threshold_meets_its_markov_bound(alpha, n):
    """Re-derive Catoni's level: at θ = μ + t the Markov bound of ``P(r(θ) ≥ 0)``,
    ``exp(−n·a·t + n·a²(v + t²)/2)``, equals ``δ = α_side`` (``v = 2``); no threshold where
    ``n ≤ 2·log(1/δ)``; the test run is the one with the smaller threshold."""
    from kernel_verify.verify.stats import _catoni_plan

    v = 2.0
    for alt, sides in (("two-sided", 2), ("greater", 1)):
        big_l = math.log(sides / alpha)
        t = catoni_threshold(n, alpha, v, alt)
        if n <= 2 * big_l:
            assert t is None and known_variance_threshold(n, alpha, v, alt)[1] == (
                "median_of_means")
            continue
        a = _catoni_plan(n, alpha, alt)[1] / math.sqrt(v)
        assert -n * a * t + n * a * a * (v + t * t) / 2 + big_l == pytest.approx(
            0.0, abs=1e-9 * big_l)
        assert t == pytest.approx(math.sqrt(v * 2 * big_l / (n - 2 * big_l)), rel=1e-12)
        t_mom = median_of_means_threshold(n, alpha, v, alt)[0]
        assert known_variance_threshold(n, alpha, v, alt) == (
            (t, "catoni") if t < t_mom else (t_mom, "median_of_means"))


def test_catoni_rejects_a_constant_sample_at_t_and_not_inside():
    """θ̂ of a constant sample is the constant: rejected at ``μ + t`` (the bound is ``≥``),
    not at ``μ + t(1 − 1e-9)``, on the tested side only."""
    n, alpha, v = 500, 1e-4, 1.0
    t = catoni_threshold(n, alpha, v)
    assert not mean_test(np.full(n, t * (1 - 1e-9)), 0.0, alpha=alpha, variance=v).rejected
    assert mean_test(np.full(n, t), 0.0, alpha=alpha, variance=v).rejected
    assert mean_test(np.full(n, -t), 0.0, alpha=alpha, variance=v).rejected
    assert not mean_test(np.full(n, -2 * t), 0.0, alpha=alpha, variance=v,
                         alternative="greater").rejected


def test_threshold_arguments_are_checked():
    with pytest.raises(ValueError, match="alpha"):
        hoeffding_threshold(10, 1.5, 1.0)
    with pytest.raises(ValueError, match="n"):
        bernstein_threshold(0, 0.1, 1.0, 1.0)
    with pytest.raises(ValueError, match="variance"):
        median_of_means_threshold(10, 0.1, -1.0)
    with pytest.raises(ValueError, match="alternative"):
        hoeffding_threshold(10, 0.1, 1.0, "both")


# --- the α budget ----------------------------------------------------------------------------

def test_alpha_budget_splits_evenly():
    b = AlphaBudget(1e-3, 250)
    assert b.per_assertion == pytest.approx(4e-6, rel=1e-15)
    assert "Bonferroni" in b.describe()
    assert AlphaBudget().total == DEFAULT_ALPHA_TOTAL
    with pytest.raises(ValueError, match="n_assertions"):
        AlphaBudget(1e-3, 0)
    with pytest.raises(ValueError, match="total"):
        AlphaBudget(0.0, 3)
    with pytest.raises(TypeError, match="n_assertions"):
        AlphaBudget(1e-3, 2.5)


def test_alpha_budget_from_env(monkeypatch):
    monkeypatch.setenv("KV_ALPHA_TOTAL", "5e-4")
    assert AlphaBudget.from_env(10).per_assertion == pytest.approx(5e-5, rel=1e-15)
    monkeypatch.setenv("KV_ALPHA_TOTAL", "2")
    with pytest.raises(ValueError, match="KV_ALPHA_TOTAL"):
        AlphaBudget.from_env(10)
    monkeypatch.setenv("KV_ALPHA_TOTAL", "lots")
    with pytest.raises(ValueError, match="KV_ALPHA_TOTAL"):
        AlphaBudget.from_env(10)


# --- Clopper–Pearson -------------------------------------------------------------------------

def test_clopper_pearson_closed_forms_and_coverage():
    # k = 0: upper limit solves (1 − p)^n = (1 − conf)/2.
    lo, hi = rejection_rate_interval(0, 50, 0.9)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.05 ** (1 / 50), rel=1e-12)
    lo, hi = rejection_rate_interval(50, 50, 0.9)
    assert hi == 1.0 and lo == pytest.approx(0.05 ** (1 / 50), rel=1e-12)
    # exact coverage ≥ conf, summed over the binomial law (no simulation)
    n, conf = 40, 0.9
    intervals = [rejection_rate_interval(k, n, conf) for k in range(n + 1)]
    for p in (0.01, 0.05, 0.3, 0.5, 0.77):
        pmf = sps.binom.pmf(np.arange(n + 1), n, p)
        covered = sum(pmf[k] for k, (lo, hi) in enumerate(intervals) if lo <= p <= hi)
        assert covered >= conf - 1e-12
    with pytest.raises(ValueError, match="k must be"):
        rejection_rate_interval(5, 4)


# --- result objects --------------------------------------------------------------------------

def test_result_explains_itself_and_carries_the_seed():
    seed = 99
    rng = np.random.default_rng(seed)
    k, var, _ = rff_moments(1, 1.0, 1.0)
    x = rff_samples(rng, (200,))
    r = mean_test(x, k * 1.5, alpha=1e-3, bounds=(-1, 1), variance=var, label="rff 1-D",
                  seed=seed, repro="pytest properties/test_stats.py -k explains")
    assert not r.ok and r.n_rejected == 1 and r.n_batches == 1
    text = r.explain()
    for needle in ("rff 1-D: mean test REJECTED", "false-alarm rate ≤ 0.001", "seed: 99",
                   "pytest properties/test_stats.py -k explains", "Bernstein", "claimed"):
        assert needle in text, (needle, text)
    with pytest.raises(AssertionError, match="seed: 99"):
        r.check()
    ok = mean_test(x, k, alpha=1e-3, bounds=(-1, 1), variance=var)
    assert ok.ok and ok.check() is ok


def test_samples_outside_the_proven_range_are_rejections():
    x = np.array([0.1, 0.2, 1.5])
    r = mean_test(x, 0.5, alpha=0.5, bounds=(-1, 1))
    assert not r.ok and "outside" in r.method
    r = variance_test(x, 0.5, 0.1, alpha=0.5, bounds=(-1, 1))
    assert not r.ok


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: mean_test([1.0, np.nan], 0.0, alpha=0.1, bounds=(-2, 2)), "NaN"),
        (lambda: mean_test([1.0], 0.0, alpha=0.1), "bounds"),
        (lambda: mean_test([1.0], 0.0, alpha=0.1, bounds=(2, -2)), "a < b"),
        (lambda: mean_test([1.0], 5.0, alpha=0.1, bounds=(-2, 2)), "outside"),
        (lambda: mean_test([1.0], 0.0, alpha=0.0, bounds=(-2, 2)), "alpha"),
        (lambda: mean_test(np.zeros((3, 0)), 0.0, alpha=0.1, bounds=(-2, 2)), "n >= 1"),
        (lambda: variance_test([1.0], 0.0, 1.0, alpha=0.1), "4th moment|fourth"),
        (lambda: variance_test([1.0], 0.0, 9.0, alpha=0.1, bounds=(-2, 2)), "exceeds"),
        (
            lambda: variance_test([1.0], 0.0, 1.0, alpha=0.1, fourth_central_moment=0.5),
            "impossible",
        ),
    ],
)
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- calibration meta-tests ------------------------------------------------------------------

def _not_above_alpha(result, alpha: float) -> tuple[bool, str]:
    k, n = result.n_rejected, result.n_batches
    lo, _ = rejection_rate_interval(k, n, 1 - 2 * META_LEVEL)
    return lo <= alpha, f"{k}/{n} rejections at α = {alpha} (CP lower limit {lo:.4f})"


CAL_CASES = {
    "hoeffding mean": lambda rng: mean_test(
        rff_samples(rng, (N_CAL, 60), m=4), rff_k(1, 1), alpha=CAL_ALPHA, bounds=(-1, 1)),
    "hoeffding or empirical Bernstein mean, small spread": lambda rng: mean_test(
        rff_samples(rng, (N_CAL, 400), m=64), rff_k(1, 1), alpha=CAL_ALPHA, bounds=(-1, 1)),
    "bernstein mean": lambda rng: mean_test(
        rff_samples(rng, (N_CAL, 60)), rff_k(1, 1), alpha=CAL_ALPHA, bounds=(-1, 1),
        variance=rff_moments(1, 1, 1)[1]),
    "bernstein mean, greater": lambda rng: mean_test(
        rff_samples(rng, (N_CAL, 20)), rff_k(1, 1), alpha=CAL_ALPHA, bounds=(-1, 1),
        variance=rff_moments(1, 1, 1)[1], alternative="greater"),
    "known-variance mean (Catoni at n = 300)": lambda rng: mean_test(
        pos_samples(rng, (N_CAL, 300)), pos_moments()[0], alpha=CAL_ALPHA,
        variance=pos_moments()[1]),
    "known-variance mean (Catoni), α=0.002": lambda rng: mean_test(
        pos_samples(rng, (N_CAL, 300)), pos_moments()[0], alpha=0.002,
        variance=pos_moments()[1]),
    "bounded variance": lambda rng: variance_test(
        rff_samples(rng, (N_CAL, 60)), rff_k(1, 1), rff_moments(1, 1, 1)[1], alpha=CAL_ALPHA,
        bounds=(-1, 1)),
    "bounded variance, exact μ4": lambda rng: variance_test(
        rff_samples(rng, (N_CAL, 60)), rff_k(1, 1), rff_moments(1, 1, 1)[1], alpha=CAL_ALPHA,
        bounds=(-1, 1), fourth_central_moment=rff_moments(1, 1, 1)[2]),
    "bounded variance, greater": lambda rng: variance_test(
        rff_samples(rng, (N_CAL, 60)), rff_k(1, 1), rff_moments(1, 1, 1)[1], alpha=CAL_ALPHA,
        bounds=(-1, 1), alternative="greater"),
    "known-variance variance (Catoni at n = 300)": lambda rng: variance_test(
        pos_samples(rng, (N_CAL, 300)), pos_moments()[0], pos_moments()[1], alpha=CAL_ALPHA,
        fourth_central_moment=pos_moments()[2]),
}


@pytest.mark.parametrize("case", list(CAL_CASES))
def test_calibration(case):
    seed = [31, list(CAL_CASES).index(case)]
    result = CAL_CASES[case](np.random.default_rng(seed))
    alpha = result.alpha
    ok, text = _not_above_alpha(result, alpha)
    assert ok, f"{case}: {text}; seed {seed}\n{result.explain()}"


def test_empirical_bernstein_threshold_formula():
    """√(2·V_n·L/n) + 7·w·L/(3(n − 1)), L = log(2/α_side) (Maurer & Pontil 2009, Thm 4)."""
    x = np.array([0.0, 1.0, 0.0, 1.0])
    t = empirical_bernstein_threshold(x, 0.1, 2.0)  # two-sided: α_side = 0.05
    big_l = math.log(2 / 0.05)
    want = math.sqrt(2 * x.var(ddof=1) * big_l / 4) + 7 * 2.0 * big_l / (3 * 3)
    assert t == pytest.approx(want, rel=1e-14)
    with pytest.raises(ValueError, match="n >= 2"):
        empirical_bernstein_threshold(np.array([0.5]), 0.1, 2.0)


def test_calibration_check_has_teeth():
    """An anti-conservative threshold (a third of Bernstein's) fails the calibration check,
    so the check above can fail."""
    rng = np.random.default_rng(37)
    k, var, _ = rff_moments(1, 1.0, 1.0)
    r = mean_test(rff_samples(rng, (N_CAL, 60)), k, alpha=CAL_ALPHA, bounds=(-1, 1), variance=var)
    shrunk = np.abs(r.statistic - k) > r.threshold / 3
    lo, _ = rejection_rate_interval(int(shrunk.sum()), N_CAL, 1 - 2 * META_LEVEL)
    assert lo > CAL_ALPHA


# --- power meta-tests ------------------------------------------------------------------------

def _power(result, label: str, seed) -> None:
    rate = result.n_rejected / result.n_batches
    assert rate >= 0.95, f"{label}: power {rate:.2f} < 0.95 (seed {seed})\n{result.explain()}"


K1, VAR1, MU4_1 = rff_moments(1, 1.0, 1.0)
PMU, PVAR, PMU4 = pos_moments()

POWER_CASES = {
    # mean: claimed value off by 1.05, frequencies missing a √2, wrong bandwidth σ
    "mean ×1.05 (bounded)": lambda rng: mean_test(
        rff_samples(rng, (N_POW, 60_000)), 1.05 * K1, alpha=POWER_ALPHA, bounds=(-1, 1),
        variance=VAR1),
    "mean, w missing √2 (bounded)": lambda rng: mean_test(
        rff_samples(rng, (N_POW, 2_000), sigma=1 / math.sqrt(2)), K1, alpha=POWER_ALPHA,
        bounds=(-1, 1), variance=VAR1),
    "mean, σ 1.1 vs 1 (bounded)": lambda rng: mean_test(
        rff_samples(rng, (N_POW, 15_000), sigma=1.1), K1, alpha=POWER_ALPHA, bounds=(-1, 1),
        variance=VAR1),
    # no exact variance, a range only: the empirical Bernstein bound sees the small spread
    # (Hoeffding alone, at the range [−1, 1], would need σ off by ~3 at this n)
    "mean, σ 1.1 vs 1 (range only, m = 64)": lambda rng: mean_test(
        rff_samples(rng, (N_POW, 4_000), m=64, sigma=1.1), K1, alpha=POWER_ALPHA,
        bounds=(-1, 1)),
    "mean ×1.05 (known variance)": lambda rng: mean_test(
        1.05 * pos_samples(rng, (N_POW, 100_000)), PMU, alpha=POWER_ALPHA, variance=PVAR),
    "mean ×√2 (known variance)": lambda rng: mean_test(
        math.sqrt(2) * pos_samples(rng, (N_POW, 2_000)), PMU, alpha=POWER_ALPHA, variance=PVAR),
    "mean, w scale 1.2 (known variance)": lambda rng: mean_test(
        pos_samples(rng, (N_POW, 200_000), w_scale=1.2), PMU, alpha=POWER_ALPHA,
        variance=PVAR),
    # variance: claimed variance off by 1.05, by a factor 2 (a missing √2), wrong σ
    "variance ÷1.05 (bounded, exact μ4)": lambda rng: variance_test(
        rff_samples(rng, (N_POW, 250_000)), K1, VAR1 / 1.05, alpha=POWER_ALPHA, bounds=(-1, 1),
        fourth_central_moment=MU4_1),
    "variance ×2 claimed for m=2 (bounded)": lambda rng: variance_test(
        rff_samples(rng, (N_POW, 4_000)), K1, VAR1 / 2, alpha=POWER_ALPHA, bounds=(-1, 1)),
    "variance, σ 1.1 vs 1 (bounded)": lambda rng: variance_test(
        rff_samples(rng, (N_POW, 40_000), sigma=1.1), K1, VAR1, alpha=POWER_ALPHA,
        bounds=(-1, 1)),
    "variance ÷2 (known variance)": lambda rng: variance_test(
        pos_samples(rng, (N_POW, 20_000)), PMU, PVAR / 2, alpha=POWER_ALPHA,
        fourth_central_moment=PMU4),
}


@pytest.mark.parametrize("case", list(POWER_CASES))
def test_power(case):
    seed = [41, list(POWER_CASES).index(case)]
    _power(POWER_CASES[case](np.random.default_rng(seed)), case, seed)


# --- the real registry entry rff_pairs[iid] --------------------------------------------------

def _rff_pairs_estimates(entry, rng, x, y, m, n_draws):
    """``φ(x)ᵀφ(y)`` for ``n_draws`` independent parameter draws of ``entry``."""
    xy = np.stack([x, y])
    out = np.empty(n_draws)
    for i in range(n_draws):
        params = entry.draw(rng, x.size, m, entry.config)
        phi = entry.numpy_fn(xy, params, entry.config)
        out[i] = phi[0] @ phi[1]
    return out


def _rff_case(seed, sigma_draw=None, m_draw=None):
    entry = registry.get("rff_pairs[iid]")
    rng = np.random.default_rng(seed)
    d, m, n_draws = 3, 4, 3_000
    x, y = rng.standard_normal(d) * 0.5, rng.standard_normal(d) * 0.5
    sigma = entry.config["sigma"]
    k = math.exp(-float(np.sum((x - y) ** 2)) / (2 * sigma**2))  # docs/math.md §1
    var = (1 - k * k) ** 2 / (2 * m)  # docs/math.md §1
    drawn = entry if sigma_draw is None else entry.with_config(sigma=sigma_draw)
    est = _rff_pairs_estimates(drawn, rng, x, y, m if m_draw is None else m_draw, n_draws)
    return est, k, var


def test_rff_pairs_iid_is_unbiased_with_the_math_variance():
    seed = 2026
    est, k, var = _rff_case(seed)
    repro = f"pytest properties/test_stats.py -k rff_pairs_iid  # seed {seed}"
    mean_test(est, k, alpha=REAL_ALPHA, bounds=(-1, 1), variance=var, seed=seed,
              label="rff_pairs[iid] mean", repro=repro).check()
    variance_test(est, k, var, alpha=REAL_ALPHA, bounds=(-1, 1), seed=seed,
                  label="rff_pairs[iid] variance", repro=repro).check()


def test_rff_pairs_iid_broken_claims_are_rejected():
    """Power on the real entry: features drawn with σ = √2 while the claim uses σ = 1 (mean test),
    and with m = 2 frequencies while the claim says m = 4 (variance twice the claim)."""
    est, k, var = _rff_case(2027, sigma_draw=math.sqrt(2))
    assert not mean_test(est, k, alpha=POWER_ALPHA, bounds=(-1, 1), variance=var).ok
    est, k, var = _rff_case(2028, m_draw=2)
    assert mean_test(est, k, alpha=POWER_ALPHA, bounds=(-1, 1), variance=2 * var).ok
    assert not variance_test(est, k, var, alpha=POWER_ALPHA, bounds=(-1, 1)).ok
