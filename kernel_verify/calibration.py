"""``kernel-verify calibrate``: the false-alarm rate of every statistical or assumption-based
check, measured on correct code, with a verdict that holds at a stated confidence.

**Criterion.** A row counts ``k`` rejections in ``n`` independent trials of one check at one
level ``L``, on correct built-in implementations, with the check functions the properties call.
It is **ok** when the one-sided Clopper–Pearson upper bound of the rate at confidence
:data:`CONFIDENCE` (95 %) is ≤ ``L`` (:func:`upper_bound`): then, with 95 % confidence, the
check's false-alarm rate at ``L`` is within ``L``. With no rejection that takes
``n ≥ ln(0.05)/ln(1 − L)`` trials (:func:`trials_to_certify`: 14 at L = 0.2, 59 at 0.05, 2995 at
1e-3); a row with fewer trials can never be ok, so a run never reports ok from too few seeds.

**Checks with a derived threshold** (the α ladder): the row-law checks, ``mean_test`` and
``variance_test`` of the feature properties, the biased-map checks, the black-box mean tests,
the orthogonal-claim test and the convergence test's binomial threshold. Their threshold
``t(α)`` comes from a bound that holds for every α (Hoeffding, Bernstein, DKW, median of means,
the binomial tail), and the properties run them at ``α_op = α_total/N`` per assertion
(``properties/alpha.py``; ≈ 1e-5 in the ci profile), a rate no feasible seed count measures.
So the threshold function is calibrated across α: each trial's samples are tested at every level
of :data:`LADDER` that the trial count can certify (:func:`rungs`), and the row is ok only when
the bound is within the level at *every* rung. That the rate stays ≤ α below the lowest rung is
what the bounds' derivation states (no asymptotic step); the rows show that the implementation
(sample sizes, exact moments, ranges, thresholds) matches that derivation where it can be seen.

**Exact-level tests.** The row-law distribution tests use the DKW–Massart bound
``P(sup|F_n − F| > t) ≤ 2·exp(−2nt²)``, which is attained for a continuous ``F``: on correct code
their rate *is* the level (measured 0.19 at 0.2 on iid rows), so no number of trials brings an
upper bound below it. Their level is Massart's theorem (1990), not an assumption; their rows
(``Row.exact_level``) are ok when the measured rate is not shown to exceed the level (the 95 %
lower bound ≤ the level at every rung), which still catches an implementation whose threshold
does not match the bound it cites.

**Model assumptions** (a stated level, measured at that level):

* convergence (``properties/checks/convergence.py``): a trial fails to halve its error with
  probability ≤ ``P0`` = 0.1; ``P0`` is the number the binomial threshold is computed from, so
  the row at level P0 *is* its operating level. Run in every cell the property runs in: every
  built-in attention claiming ``approximates_softmax``, every backend × dtype it accepts that is
  available here (CUDA cells are listed in the report as not run when there is no GPU), in the
  one mode the property runs (``modes(target)[0]``), with the property's rounding floor;
* the float64-accuracy noise level, the 64-ulp feature assumption of the deterministic identity,
  the per-draw family identities (``IDENTITY_LEVEL``), the fifth-derivative assumption of the
  gradients' finite differences (per map and attention target and mode,
  ``calibration_gradients.fd_rows``, ``fd_attention_rows``), the no-cancellation assumption of
  the low-precision ``∂L/∂q,k`` bound (per attention target, dtype and mode,
  ``calibration_gradients.low_precision_rows``) and the finite differences of the forms' state
  gradients (per target and backend, ``calibration_gradients.state_gradient_rows``): a
  deterministic threshold whose
  false-alarm rate per example is stated as :data:`ASSUMPTION_LEVEL` = 1e-3 and measured with
  at least :func:`trials_to_certify` (1e-3) = 2995 trials, with the *margin* (the largest
  statistic seen over the threshold, or the rate at a 1000× tighter level);
* the pilot variance of the black-box mean test without a declared family (``σ² ≤ 4·s²`` of a
  200-draw pilot): the end-to-end test is on the α ladder, and the assumption itself (the event
  ``σ² > 4·s²``, on controls with an exact variance) is measured and reported with its bound as
  what the test adds to α: it has **no** certified level at ``α_op`` (it would take ~3·10⁵
  trials per map), and the report says so.

Each row names the backend, dtype and mode it ran in. Seeds come from fresh OS entropy, recorded
in the report with the commit the code came from. The run is split into units (one group of
checks on one target) that run in ``min(2, CPU count)`` processes. Writes
``reports/calibration.md``, one section per part (:data:`PARTS`) with the command, commit, time
and entropy of the run that produced it: ``--part P …`` reruns only those parts and replaces their
sections, keeping the others with their own stamps (:func:`merge_report`); exit status 1 if any
row of the run is not ok.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats as sps

from kernel_verify.verify import atomic, seeds
from kernel_verify.verify.paths import reports_dir

#: Fewest fresh seeds a calibration may use (``--seeds``); the default is :data:`DEFAULT_SEEDS`.
MIN_SEEDS = 20
DEFAULT_SEEDS = 100
#: One-sided confidence of every upper bound.
CONFIDENCE = 0.95
#: Levels at which the derived-threshold checks are calibrated (the rungs a trial count certifies).
LADDER = (0.2, 0.1, 0.05, 0.02, 0.01)
#: Stated per-example false-alarm rate of the deterministic model-assumption checks.
ASSUMPTION_LEVEL = 1e-3
NUMPY64 = "numpy float64"


def upper_bound(k: int, n: int, conf: float = CONFIDENCE) -> float:
    """One-sided Clopper–Pearson upper bound of a rate seen ``k`` times in ``n`` trials: it is
    ≥ the true rate with probability ≥ ``conf`` (exact, the Beta(k + 1, n − k) quantile)."""
    if not (isinstance(n, int | np.integer) and n >= 1):
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not (isinstance(k, int | np.integer) and 0 <= k <= n):
        raise ValueError(f"k must be an integer in [0, n={n}], got {k!r}")
    if not 0 < conf < 1:
        raise ValueError(f"conf must be in (0, 1), got {conf!r}")
    return 1.0 if k == n else float(sps.beta.ppf(conf, k + 1, n - k))


def lower_bound(k: int, n: int, conf: float = CONFIDENCE) -> float:
    """One-sided Clopper–Pearson lower bound of a rate seen ``k`` times in ``n`` trials (the
    Beta(k, n − k + 1) quantile at ``1 − conf``; 0 when ``k = 0``)."""
    upper_bound(k, n, conf)  # the same argument checks
    return 0.0 if k == 0 else float(sps.beta.ppf(1 - conf, k, n - k + 1))


def trials_to_certify(level: float, conf: float = CONFIDENCE) -> int:
    """The fewest trials whose upper bound can be ≤ ``level``: with 0 rejections the bound is
    ``1 − (1 − conf)^(1/n)``, ≤ level iff ``n ≥ ln(1 − conf)/ln(1 − level)``."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    n = math.ceil(math.log(1 - conf) / math.log1p(-level))
    while upper_bound(0, n, conf) > level:  # guard the rounding of the closed form
        n += 1
    return n


def rungs(n: int) -> tuple[float, ...]:
    """The levels of :data:`LADDER` that ``n`` trials certify with room for a few rejections
    (``n ≥ 3·trials_to_certify(level)``: a conservative check whose rate is a fraction of the
    level is then ok in most runs, not only when it never rejects); at least the loosest level,
    so that a small run still exercises every check (its rows are then not ok unless no trial
    rejects and ``n ≥ trials_to_certify``)."""
    return tuple(a for a in LADDER if 3 * trials_to_certify(a) <= n) or LADDER[:1]


def costly_trials(n: int) -> int:
    """Trials of a check that costs seconds per trial (fourth-moment quadrature, 2000-draw or
    orthogonal samples): a third of ``n``, at least :data:`MIN_SEEDS`; ``n`` itself in a small
    (test) run below MIN_SEEDS."""
    return max(MIN_SEEDS, n // 3) if n >= MIN_SEEDS else n


@dataclass(frozen=True)
class Row:
    """One check on one target in one place, at one or more levels: ``rejections[i]`` of
    ``trials`` at ``levels[i]``. ``levels`` empty: a measured rate with no stated level (reported,
    never ok)."""

    check: str
    target: str
    where: str
    trials: int
    levels: tuple[float, ...]
    rejections: tuple[int, ...]
    operating: str
    margin: str = ""
    unstated: int = field(default=-1)  # rejections of a measurement without a level
    #: A test whose bound is attained (DKW–Massart): its rate *equals* the level on correct
    #: code, so no trial count brings an upper bound below it. Its level is a theorem; the row is
    #: ok when the rate is not shown to exceed the level (lower bound ≤ level at every rung).
    exact_level: bool = False

    @property
    def uppers(self) -> tuple[float, ...]:
        return tuple(upper_bound(k, self.trials) for k in self.rejections)

    @property
    def lowers(self) -> tuple[float, ...]:
        return tuple(lower_bound(k, self.trials) for k in self.rejections)

    @property
    def ok(self) -> bool:
        if not self.levels:
            return False
        if self.exact_level:  # as many trials as certifying the level would take, at least
            return self.trials >= trials_to_certify(min(self.levels)) and all(
                b <= a for b, a in zip(self.lowers, self.levels, strict=True))
        return all(b <= a for b, a in zip(self.uppers, self.levels, strict=True))


def ladder_row(check: str, target: str, where: str, trials: int, counts: dict[float, int],
               operating: str = "α_op = α_total/N per assertion (derived for every α)",
               margin: str = "", exact_level: bool = False) -> Row:
    levels = tuple(sorted(counts, reverse=True))
    return Row(check, target, where, trials, levels, tuple(counts[a] for a in levels), operating,
               margin, exact_level=exact_level)


def _seed(entropy: int, *key: object) -> int:
    """One child seed of the run's entropy for ``key`` (verify/seeds.py)."""
    return seeds.child_seeds(entropy, 1, "calibrate", *key)[0]


# --------------------------------------------------------------------------- random matrices
def matrix_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    """The nine row-law checks (``properties/test_random_matrices.py``) on one built-in
    construction claiming Gaussian rows (d = m = 4, the property's draws), at every rung."""
    from kernel_verify.properties.checks.row_law import draw_stack, orthonormal_pair, row_law_checks

    target = _builtin(name)
    d = m = 4
    levels = rungs(n)
    counts: dict[str, dict[float, int]] = {}
    exact: set[str] = set()
    for i in range(n):
        seed = _seed(entropy, "row_law", name, i)
        w = draw_stack(target, seed, m, d)
        z1, z2 = orthonormal_pair(seed, d)
        for a in levels:
            for r in row_law_checks(w, z1, z2, alpha=a, seed=seed, name=target.name):
                label = r.label.split(": ", 1)[1]
                counts.setdefault(label, dict.fromkeys(levels, 0))[a] += not r.ok
                if "DKW" in r.test:
                    exact.add(label)
    # The distribution tests use DKW–Massart, P(sup|F_n − F| > t) ≤ 2·exp(−2nt²), which is
    # attained for continuous F: exact-level rows (Row.exact_level).
    return [ladder_row(f"random_matrices: {label}", name, NUMPY64, n, c,
                       exact_level=label in exact)
            for label, c in counts.items()]


def _builtin(name: str):
    from kernel_verify.properties.builtin import builtin_targets

    (target,) = [t for t in builtin_targets() if t.name == name]
    return target


# --------------------------------------------------------------------------- feature estimators
#: Feature maps whose Monte Carlo checks are calibrated: one bounded estimator (Hoeffding /
#: Bernstein for the mean, the bounded variance test), one unbounded (median of means with
#: the exact variance), one with the V₁ variance bound (Fastfood rows), and ReLU features with
#: fixed-norm rows (Hoeffding in the range ``[0, d(‖x‖‖y‖ + xᵀy)/2]`` of their rows).
ESTIMATOR_TARGETS = ("rff_pairs[iid]", "softmax_positive[iid]", "softmax_positive[fastfood]",
                     "relu_features[orthogonal_fixed_norm]")
#: Biased maps with a declared mean kernel and a proven range: the biased-map properties (the
#: formula's norm bound for the trigonometric maps, the row law of fixed-norm rows for the
#: exponential ones).
BIASED_TARGETS = ("rff_pairs[orthogonal_fixed_norm]", "rff_phase[orthogonal_fixed_norm]",
                  "softmax_positive[orthogonal_fixed_norm]",
                  "softmax_hyperbolic[orthogonal_fixed_norm]")
#: Biased maps without a mean kernel (reference mean of the row law): a SORF map with the
#: exponential formula, one bounded SORF map, a fixed-norm trigonometric map.
REFERENCE_TARGETS = ("softmax_positive[sorf]", "rff_phase[sorf]",
                     "softmax_trig[orthogonal_fixed_norm]")


def estimator_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    """The unbiasedness property (``mean_test`` of φ(x)ᵀφ(y) against k(x, y)) and the variance
    properties (``variance_test`` against the exact variance; against the exact μ₄ on
    ``max(MIN_SEEDS, n // 3)`` trials, its quadrature costs ~1 s a point), at random points as
    the properties draw them, on one correct built-in map."""
    from kernel_verify.impls.registry import get
    from kernel_verify.properties.checks.estimates import (
        DRAWS,
        VARIANCE_DRAWS,
        estimates,
        exact_fourth_moment,
        exact_variance,
        mean_test_variance,
        point_range,
        random_pair,
    )
    from kernel_verify.verify.references.kernels import kernel_mp
    from kernel_verify.verify.stats import mean_test, variance_test

    target = get(name)
    levels = rungs(n)
    mean_c, var_c = dict.fromkeys(levels, 0), dict.fromkeys(levels, 0)
    var_trials = 0
    mu4_trials = costly_trials(n)
    mu4_levels = rungs(mu4_trials)
    mu4_c, mu4_done = dict.fromkeys(mu4_levels, 0), 0
    for i in range(n):
        seed = _seed(entropy, "estimators", name, i)
        rng = np.random.default_rng(seed)
        d, m = 2 + i % 4, 2 + i % 7
        x, y = random_pair(seed, d, 0.8, 0.8)
        k = float(kernel_mp(target.kernel, x, y, **target.kernel_args(d)))
        bounds = point_range(target, x, y, m)  # the formula's, or the fixed-norm ReLU range
        var = exact_variance(target, x, y, m)
        found = mean_test_variance(target, x, y, m)  # exact, or the V₁ bound (Fastfood)
        samples = estimates(target, x, y, m, seed, DRAWS)
        for a in levels:
            mean_c[a] += not mean_test(samples, k, alpha=a, bounds=bounds,
                                       variance=None if found is None else found[0],
                                       seed=seed).ok
        if bounds is not None and var is not None:
            var_trials += 1
            for a in levels:
                var_c[a] += not variance_test(samples, k, var, alpha=a, bounds=bounds,
                                              seed=seed).ok
        if mu4_done >= mu4_trials:
            continue
        # the fourth-moment variance property: norms in [0.1, 0.4], 2000 draws, exact μ₄
        sx, sy = random_pair(seed, d, rng.uniform(0.1, 0.4), rng.uniform(0.1, 0.4))
        moments = exact_fourth_moment(target, sx, sy, m)
        if moments is not None:
            mu4_done += 1
            ks = float(kernel_mp(target.kernel, sx, sy, **target.kernel_args(d)))
            more = estimates(target, sx, sy, m, seeds.child_seeds(seed, 1, "unbounded")[0],
                             VARIANCE_DRAWS)
            for a in mu4_levels:
                mu4_c[a] += not variance_test(more, ks, moments[1], alpha=a,
                                              fourth_central_moment=moments[0], seed=seed).ok
    rows = [ladder_row("feature_unbiased: mean_test of φ(x)ᵀφ(y) = k(x, y)", name, NUMPY64,
                       n, mean_c)]
    if var_trials:
        rows.append(ladder_row("feature_variance: variance_test = exact variance", name,
                               NUMPY64, var_trials, {a: var_c[a] for a in rungs(var_trials)}))
    if mu4_done:
        rows.append(ladder_row("feature_variance: variance_test by the exact μ₄", name, NUMPY64,
                               mu4_done, {a: mu4_c[a] for a in rungs(mu4_done) if a in mu4_c}))
    return rows


def _biased_trial(target, seed: int, i: int) -> tuple[int, int, np.ndarray, np.ndarray]:
    """``(d, m, x, y)`` of trial ``i`` of the biased-map rows: ``d`` cycles through 2…5, ``m``
    through the target's feature counts from 2…8 and the norms of x and y through the grid
    the properties draw (``test_feature_unbiased.norms``), directions from ``seed``."""
    from kernel_verify.properties.checks.estimates import feature_m, random_pair

    d, m = 2 + i % 4, feature_m(target, 2 + i % 7)
    x, y = random_pair(seed, d, (0.05, 0.4, 0.8, 1.2)[i % 4], (0.4, 0.8, 1.2, 0.05)[i % 4])
    return d, m, x, y


def biased_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    """The biased-map properties on a correct biased map with a declared mean kernel:
    ``mean_test`` against ``mean_kernel`` at random points (``test_biased_mean_is_mean_kernel``,
    as :func:`~kernel_verify.properties.unbiased_checks.check_mean` runs it: Hoeffding in the
    formula's proven range, or Bernstein/Hoeffding with the range and one-row variance bound of
    the construction's row law), and the bias-visibility check
    (``test_bias_is_visible_where_theory_says_it_is_large``: at the point of
    :func:`~kernel_verify.properties.checks.estimates.bias_point` for the rung's α, the mean test
    against the mean kernel and ``|sample mean − kernel| > t``; a trial rejects when either
    fails), on ``max(MIN_SEEDS, n // 3)`` trials (2000 draws each)."""
    from kernel_verify.impls.registry import get
    from kernel_verify.properties.checks.estimates import (
        BIAS_DRAWS,
        DRAWS,
        bias_point,
        estimates,
        feature_m,
        range_bound,
        row_law,
    )
    from kernel_verify.verify.references.kernels import kernel_mp
    from kernel_verify.verify.stats import mean_test

    target = get(name)
    levels = rungs(n)
    mean_c = dict.fromkeys(levels, 0)
    for i in range(n):
        seed = _seed(entropy, "biased", name, i)
        d, m, x, y = _biased_trial(target, seed, i)
        mean = float(kernel_mp(target.mean_kernel, x, y, **target.kernel_args(d)))
        samples = estimates(target, x, y, m, seed, DRAWS)
        bounds, var = range_bound(target, d, m), None
        if bounds is None:  # exponential features: the row law's range and variance bound
            law = row_law(target, x, y, m)
            if law is None:
                raise ValueError(f"{name}: no proven range and no row law at d = {d}")
            bounds, var, _ = law
        for a in levels:
            mean_c[a] += not mean_test(samples, mean, alpha=a, bounds=bounds, variance=var,
                                       seed=seed).ok
    rows = [ladder_row("feature_unbiased (biased map): mean_test = mean_kernel", name, NUMPY64,
                       n, mean_c)]
    vis_trials = costly_trials(n)
    vis_levels = rungs(vis_trials)
    vis_c = dict.fromkeys(vis_levels, 0)
    m2 = feature_m(target, 2)

    def k_of(kernel: str) -> Callable[[np.ndarray, np.ndarray], float]:
        return lambda a, b: float(kernel_mp(kernel, a, b, **target.kernel_args(2)))

    points = {a: bias_point(target, a, k_of(target.mean_kernel), k_of(target.kernel))
              for a in vis_levels}
    for i in range(vis_trials):
        seed = _seed(entropy, "bias_visible", name, i)
        for a in vis_levels:
            if points[a] is None:
                continue
            x, y, mean, kern, t, bounds2 = points[a]
            draw_seed = seeds.child_seeds(seed, 1, f"{a:g}")[0]
            samples = estimates(target, x, y, m2, draw_seed, BIAS_DRAWS)
            bad = (not mean_test(samples, mean, alpha=a, bounds=bounds2, seed=seed).ok
                   or not abs(float(samples.mean()) - kern) > t)
            vis_c[a] += bad
    shown = {a: c for a, c in vis_c.items() if points[a] is not None}
    if shown:
        rows.append(ladder_row("feature_unbiased (biased map): bias visible where |mean − k| "
                               "≥ 2t", name, NUMPY64, vis_trials, shown))
    return rows


def reference_mean_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    """``test_biased_mean_is_reference_mean`` on a correct biased map without a mean kernel:
    :func:`~kernel_verify.properties.unbiased_checks.check_reference_mean`'s test (range of the
    row law, two one-sided Bernstein/Hoeffding tests at ``α/2`` against ``μ_ref ± e``) at random
    points as the property draws them; a trial rejects when either side rejects. Its threshold
    is derived (no model assumption): the row checks that the derivation holds in practice."""
    from kernel_verify.impls.registry import get
    from kernel_verify.properties.checks.estimates import DRAWS, estimates
    from kernel_verify.verify.references.biased_means import estimate_range, row_moments
    from kernel_verify.verify.stats import mean_test

    target = get(name)
    levels = rungs(n)
    counts = dict.fromkeys(levels, 0)
    for i in range(n):
        seed = _seed(entropy, "reference_mean", name, i)
        d, m, x, y = _biased_trial(target, seed, i)
        mom = row_moments(target.formula, target.matrix, x, y, target.config)
        bounds = estimate_range(mom, d, m)
        samples = estimates(target, x, y, m, seed, DRAWS)
        for a in levels:
            counts[a] += any(
                not mean_test(samples, mu, alpha=a / 2, bounds=bounds, variance=mom.variance,
                              alternative=side, seed=seed).ok
                for side, mu in (("greater", mom.mean + mom.mean_error),
                                 ("less", mom.mean - mom.mean_error)))
    return [ladder_row("feature_unbiased (biased map): mean_test = reference mean", name,
                       NUMPY64, n, counts)]


# --------------------------------------------------------------------------- convergence
def _attention_places(target, available: bool = True) -> list[tuple[object, bool]]:
    """The cells ``test_error_to_softmax_attention_falls_as_m_grows`` runs ``target`` in:
    ``(backend, causal)`` for each backend of the axis it accepts, as the property judges the
    target there (:func:`~kernel_verify.properties.attention_cases.for_target`), in the one mode
    the property runs (``modes(target)[0]``: non-causal when claimed, else causal); the
    backends available here (``available=False``: those that are not, e.g. CUDA on a machine
    without a GPU, which the report lists as not run)."""
    from kernel_verify.properties.attention_cases import for_target, modes
    from kernel_verify.verify.backends import AXIS

    causal = modes(target)[0]
    return [(for_target(target, b), causal) for b in AXIS
            if b.available == available and target.accepts(b.library, b.dtype)]


def convergence_targets() -> list[str]:
    """The built-in attention targets the convergence property judges (``approximates_softmax``)."""
    from kernel_verify.properties.builtin import builtin_targets
    from kernel_verify.properties.protocol import AttentionTarget

    return [t.name for t in builtin_targets()
            if isinstance(t, AttentionTarget) and t.has("approximates_softmax")]


def convergence_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    """The model assumption of the convergence property, ``P(error at m = 1024 ≥ ½·error at
    m = 16) ≤ P0`` per trial, on one built-in attention in every cell the property runs it in
    here (:func:`_attention_places`: backend, dtype and mode; ``max(3, n // 4)`` blocks of 40
    trials each, 1000 trials at the default 100 seeds — a block costs 0.1–0.7 s, and a rate of a
    few percent then has an upper bound well inside P0; one block in a small test run below
    MIN_SEEDS), through the property's own
    :func:`~kernel_verify.properties.checks.convergence.convergence_failures` with its inputs
    (``d`` in 2…6), its conversion to the backend and its rounding floor
    (:func:`~kernel_verify.properties.attention_cases.rounding_floor`), on fresh seeds; and the
    binomial test's rejections at every rung, all places pooled, where the pooled blocks can
    certify a rung (the test's level follows from P0 by the exact binomial tail)."""
    from kernel_verify.properties.attention_cases import rounding_floor
    from kernel_verify.properties.checks.convergence import (
        CONV_SEEDS,
        P0,
        convergence_failures,
        convergence_threshold,
    )

    target = _builtin(name)
    places = _attention_places(target)
    blocks = max(3, n // 4) if n >= MIN_SEEDS else 1
    rows, pooled, total = [], [], 0
    for b, causal in places:
        failures = 0
        for i in range(blocks):
            seed = _seed(entropy, "convergence", name, b.id, int(causal), i)
            f = convergence_failures(target, seed, 2 + i % 5, causal=causal,
                                     self_attention=target.self_attention_only,
                                     convert=b.from_numpy, floor=rounding_floor(b))
            failures += f
            pooled.append(f)
        total += blocks * CONV_SEEDS
        where = f"{b.library}:{b.device} {b.dtype}, {'causal' if causal else 'non-causal'}"
        rows.append(Row("attention: trial fails to halve the error (model assumption P0)", name,
                        where, blocks * CONV_SEEDS, (P0,), (failures,),
                        f"P0 = {P0:g} per trial (the binomial threshold's parameter)"))
    # The binomial test's level follows from P0 exactly (P(Bin(40, P0) ≥ k*) ≤ α by
    # construction), so the P0 rows above carry the claim; the test's own rejections are listed
    # where the pooled blocks can certify a rung (with fewer, the row could never be ok), or in
    # a small (test) run.
    if len(pooled) >= trials_to_certify(LADDER[0]) or n < MIN_SEEDS:
        levels = rungs(len(pooled))
        counts = {a: sum(f >= convergence_threshold(CONV_SEEDS, a) for f in pooled)
                  for a in levels}
        rows.append(ladder_row(f"attention: convergence test rejects (k*(α) of {CONV_SEEDS})",
                               name, f"{len(places)} places pooled", len(pooled), counts))
    return rows


# --------------------------------------------------------------------------- black-box maps
def blackbox_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    """The black-box feature-map checks (``properties/test_blackbox_maps.py``) on one correct
    registry map wrapped black-box (:data:`kernel_verify.mutants.blackbox.CONTROLS`):

    * float64 accuracy (``|Δ⁴φ|`` noise > ``NOISE_LEVEL``), deterministic identity (64-ulp
      feature assumption), per-draw family identities at ``IDENTITY_LEVEL`` and at a 1000×
      tighter level: :data:`ASSUMPTION_LEVEL` rows with ``assumption_trials`` trials;
    * the undeclared-family mean test (pilot variance ×4) and the declared-family mean test
      (median of means with the exact variance) on the α ladder; the pilot assumption's own
      failure rate (``σ² > 4·s²``) measured, without a certified level."""
    from kernel_verify.mutants.blackbox import control_targets
    from kernel_verify.properties.checks.blackbox import (
        DRAWS,
        FAMILY_IDENTITY_FORMULAS,
        IDENTITY_LEVEL,
        NOISE_LEVEL,
        deterministic_excess,
        estimates,
        family_identity_failures,
        fourth_difference_noise,
        pilot_mean_tests,
        pilot_variance,
    )
    from kernel_verify.properties.checks.estimates import random_pair
    from kernel_verify.verify.moments import exact_moments
    from kernel_verify.verify.references.kernels import kernel_mp
    from kernel_verify.verify.stats import mean_test

    (fam,) = control_targets(name)
    (bare,) = control_targets(name, family=False)
    a_op = f"stated {ASSUMPTION_LEVEL:g} per example (model assumption)"
    rows = []
    stats = [fourth_difference_noise(fam, _seed(entropy, "noise", name, i), 2 + i % 4,
                                     (0.3, 0.7, 1.0)[i % 3]) for i in range(assumption_trials)]
    rows.append(Row(f"blackbox_maps: float64 accuracy, |Δ⁴φ| noise > {NOISE_LEVEL:g}", fam.name,
                    NUMPY64, assumption_trials, (ASSUMPTION_LEVEL,),
                    (sum(s > NOISE_LEVEL for s in stats),), a_op,
                    f"max noise / level = {max(stats) / NOISE_LEVEL:.2g}"))
    if fam.formula in FAMILY_IDENTITY_FORMULAS:
        for level, what in ((IDENTITY_LEVEL, "at IDENTITY_LEVEL"),
                            (IDENTITY_LEVEL * 1e-3, "at IDENTITY_LEVEL/1000 (margin)")):
            bad = sum(bool(family_identity_failures(
                fam, _seed(entropy, "identity", name, i), 1 + i % 8, (0.5, 2.0, 5.0)[i % 3],
                level=level)) for i in range(assumption_trials))
            rows.append(Row(f"blackbox_maps: per-draw family identities {what} = {level:g}",
                            fam.name, NUMPY64, assumption_trials, (ASSUMPTION_LEVEL,), (bad,),
                            a_op))
    if fam.has("deterministic"):
        ex = [deterministic_excess(bare, _seed(entropy, "deterministic", name, i), 1 + i % 4,
                                   (1e-3, 0.3, 1.0, 2.5)[i % 4]) for i in range(assumption_trials)]
        rows.append(Row("blackbox_maps: deterministic identity, 64-ulp feature assumption",
                        bare.name, NUMPY64, assumption_trials, (ASSUMPTION_LEVEL,),
                        (sum(e > 1 for e in ex),), a_op,
                        f"max error / bound = {max(ex):.2g}"))
        return rows
    if not fam.has("unbiased"):
        return rows
    # orthogonal rows cost a QR factorisation per draw (1200 draws a trial): costly
    n = costly_trials(n) if fam.matrix == "orthogonal" else n
    levels = rungs(n)
    pilot_c, exact_c = dict.fromkeys(levels, 0), dict.fromkeys(levels, 0)
    tried_exact = assumption_fails = 0
    norms = (0.2, 0.5, 0.8)
    for i in range(n):
        seed = _seed(entropy, "blackbox_mean", name, i)
        d = 2 + i % 4
        x, y = random_pair(seed, d, norms[i % 3], norms[(i // 3) % 3])
        mean = float(kernel_mp(fam.kernel, x, y, **fam.kernel_args(d)))
        for a, r in zip(levels, pilot_mean_tests(bare, x, y, seed, mean, levels), strict=True):
            pilot_c[a] += not r.ok
        try:
            var = float(exact_moments(fam.formula, x, y, dict(fam.config), fam.m,
                                      matrix=fam.matrix or "iid").variance)
        except (KeyError, NotImplementedError):
            continue
        if not var > 1e-12 * mean * mean:  # the property's Degenerate rule (unbiased_checks)
            continue
        tried_exact += 1
        assumption_fails += var > pilot_variance(bare, x, y, seed)
        samples = estimates(fam, x, y, seed, DRAWS)
        for a in levels:
            exact_c[a] += not mean_test(samples, mean, alpha=a, variance=var).ok
    rows.append(ladder_row("blackbox_maps: mean test, no family (pilot-variance assumption)",
                           bare.name, NUMPY64, n, pilot_c,
                           "α_op + q (q: the pilot assumption's rate, next row)"))
    if tried_exact:
        rows.append(Row("blackbox_maps: pilot assumption fails, σ² > 4·s² (q)", bare.name,
                        NUMPY64, tried_exact, (), (), "not certified at α_op (measured only)",
                        unstated=assumption_fails))
        rows.append(ladder_row("feature_unbiased on black-box: mean test, exact variance "
                               "(median of means)", fam.name, NUMPY64, tried_exact,
                               {a: exact_c[a] for a in rungs(tried_exact) if a in exact_c}))
    return rows


def orthogonal_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    """The orthogonal-claim variance test (one-sided Bernstein against the exact ORF variance,
    ``properties/test_blackbox_maps.py``, its 20000 draws at d = 8, ‖x − y‖ = 1.5) on
    ``max(14, n // 7)`` trials (14 can certify the 0.2 rung; each trial costs seconds)."""
    from kernel_verify.mutants.blackbox import control_targets
    from kernel_verify.properties.checks.estimates import (
        estimates,
        exact_variance,
        feature_m,
        random_pair,
        range_bound,
    )
    from kernel_verify.verify.references.kernels import kernel_mp
    from kernel_verify.verify.stats import variance_test

    (t,) = control_targets(name)
    d, dist, draws, m = 8, 1.5, 20000, feature_m(t, 64)
    trials = max(trials_to_certify(LADDER[0]), n // 7) if n >= MIN_SEEDS else n
    levels = rungs(trials)
    counts = dict.fromkeys(levels, 0)
    bounds = range_bound(t, d, m)
    for i in range(trials):
        seed = _seed(entropy, "orthogonal", name, i)
        x, y = random_pair(seed, d, 1.0, 1.0)
        y = x + dist * (y - x) / np.linalg.norm(y - x)
        var = exact_variance(t, x, y, m)
        mean = float(kernel_mp(t.kernel, x, y, **t.kernel_args(d)))
        samples = estimates(t, x, y, m, seed, draws)
        for a in levels:
            counts[a] += not variance_test(samples, mean, var, alpha=a, bounds=bounds,
                                           alternative="greater").ok
    return [ladder_row("blackbox_maps: orthogonal claim, Var ≤ exact ORF variance (Bernstein)",
                       t.name, NUMPY64, trials, counts)]


# --------------------------------------------------------------------------- the run
@dataclass(frozen=True)
class Unit:
    """One group of checks on one target: ``fn(target, n, entropy, assumption_trials)``."""

    part: str
    target: str
    fn: Callable[[str, int, int, int], list[Row]]

    @property
    def id(self) -> str:
        return f"{self.part}:{self.fn.__name__.removesuffix('_rows')}:{self.target}"

    def run(self, n: int, entropy: int, assumption_trials: int) -> list[Row]:
        return self.fn(self.target, n, entropy, assumption_trials)


#: The groups of checks ``--part`` selects.
PARTS = ("matrices", "estimators", "reference_means", "convergence", "blackbox", "gradients",
         "gradient_assumptions")


def units(parts: Sequence[str] = PARTS) -> list[Unit]:
    """Every calibration unit of ``parts`` (the built-in targets, the calibrated maps, the
    black-box controls)."""
    from kernel_verify.mutants.blackbox import CONTROLS
    from kernel_verify.properties.builtin import builtin_targets
    from kernel_verify.properties.protocol import RandomMatrixTarget

    out = []
    if "matrices" in parts:
        out += [Unit("matrices", t.name, matrix_rows) for t in builtin_targets()
                if isinstance(t, RandomMatrixTarget) and t.has("gaussian_rows")]
    if "estimators" in parts:
        out += [Unit("estimators", name, estimator_rows) for name in ESTIMATOR_TARGETS]
        out += [Unit("estimators", name, biased_rows) for name in BIASED_TARGETS]
    if "reference_means" in parts:  # light (~20 s per 100 seeds): its own part, run apart
        out += [Unit("reference_means", name, reference_mean_rows) for name in REFERENCE_TARGETS]
    if "convergence" in parts:
        out += [Unit("convergence", name, convergence_rows) for name in convergence_targets()]
    if "blackbox" in parts:
        out += [Unit("blackbox", name, blackbox_rows) for name in CONTROLS]
        out.append(Unit("blackbox", "rff_pairs[orthogonal]", orthogonal_rows))
    if "gradients" in parts:
        from kernel_verify.calibration_gradients import (
            GRADIENT_TARGET,
            fd_attention_rows,
            fd_attention_targets,
            fd_rows,
            fd_targets,
            gradient_rows,
        )

        out.append(Unit("gradients", GRADIENT_TARGET, gradient_rows))
        out += [Unit("gradients", name, fd_rows) for name in fd_targets()]
        out += [Unit("gradients", name, fd_attention_rows) for name in fd_attention_targets()]
    if "gradient_assumptions" in parts:  # light (~5 min at 2995 trials): its own part
        from kernel_verify.calibration_gradients import (
            low_precision_rows,
            low_precision_targets,
            state_gradient_rows,
            state_gradient_targets,
        )

        out += [Unit("gradient_assumptions", name, low_precision_rows)
                for name in low_precision_targets()]
        out += [Unit("gradient_assumptions", name, state_gradient_rows)
                for name in state_gradient_targets()]
    return out


#: Every statistical property (``@pytest.mark.statistical``) → the prefix of the calibration
#: rows that run the check function it calls (tests/test_calibration.py keeps this complete and
#: checks that each prefix is produced by a unit).
CALIBRATED = {
    "test_random_matrices.py::test_rows_are_standard_gaussian": "random_matrices:",
    "test_feature_unbiased.py::test_unbiased_on_random_points": "feature_unbiased: mean_test",
    "test_feature_unbiased.py::test_unbiased_on_grid": "feature_unbiased: mean_test",
    "test_feature_unbiased.py::test_biased_mean_is_mean_kernel":
        "feature_unbiased (biased map): mean_test = mean_kernel",
    "test_feature_unbiased.py::test_biased_mean_is_reference_mean":
        "feature_unbiased (biased map): mean_test = reference mean",
    "test_feature_unbiased.py::test_bias_is_visible_where_theory_says_it_is_large":
        "feature_unbiased (biased map): bias visible",
    "test_feature_variance.py::test_sample_variance_matches_exact_variance":
        "feature_variance: variance_test = exact variance",
    "test_feature_variance.py::test_iid_variance_matches_exact_variance_by_fourth_moment":
        "feature_variance: variance_test by the exact μ₄",
    "test_attention_identities.py::test_error_to_softmax_attention_falls_as_m_grows":
        "attention: trial fails to halve the error",
    "test_blackbox_maps.py::test_unbiased_without_declared_family":
        "blackbox_maps: mean test, no family",
    "test_blackbox_maps.py::test_orthogonal_claim_has_the_orthogonal_variance":
        "blackbox_maps: orthogonal claim",
    "test_gradients.py::test_gradient_of_unbiased_estimator_is_unbiased":
        "gradients: median-of-means test",
}


def _run_unit(args: tuple[Unit, int, int, int]) -> tuple[list[Row], float]:
    unit, n, entropy, assumption_trials = args
    start = time.monotonic()
    return unit.run(n, entropy, assumption_trials), time.monotonic() - start


@contextmanager
def _threads_per_process(jobs: int):
    """The BLAS/OpenMP thread count of the worker processes: the CPUs shared out, at least one
    each (``OMP_NUM_THREADS`` etc. in the environment the spawned workers inherit, unless the
    caller set them). Without it every worker's torch and BLAS start one thread per CPU, and
    ``jobs`` workers on small tensors oversubscribe the machine (the gradients part, 2 workers on
    2 cores: 220 s with one thread each; unthrottled, 36 CPU-minutes and not finished)."""
    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    share = str(max(1, (os.cpu_count() or 1) // jobs))
    saved = {k: os.environ.get(k) for k in names}
    for k in names:
        os.environ.setdefault(k, share)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_units(todo: Sequence[Unit], n: int, entropy: int, assumption_trials: int,
              jobs: int = 1, *, per_unit: bool = False) -> list:
    """The rows of every unit, in order (``per_unit``: one list of rows per unit); ``jobs > 1``:
    in that many processes."""
    work = [(u, n, entropy, assumption_trials) for u in todo]
    if jobs <= 1 or len(work) <= 1:
        results = [_run_unit(w) for w in work]
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        # the slow units first, so that the two processes finish together
        order = sorted(range(len(work)),
                       key=lambda i: work[i][0].part not in ("estimators", "gradients"))
        with _threads_per_process(jobs), ProcessPoolExecutor(
                jobs, mp_context=mp.get_context("spawn")) as pool:
            done = dict(zip(order, pool.map(_run_unit, [work[i] for i in order]), strict=True))
        results = [done[i] for i in range(len(work))]
    if per_unit:
        return [rows for rows, _ in results]
    return [r for rows, _ in results for r in rows]


def _fmt_levels(row: Row) -> tuple[str, str, str]:
    if not row.levels:
        k = row.unstated
        return (f"{k}", f"{k / row.trials:.4f}", f"{upper_bound(k, row.trials):.4f}")
    ks = " / ".join(str(k) for k in row.rejections)
    rates = " / ".join(f"{k / row.trials:.3f}" for k in row.rejections)
    ups = " / ".join(f"{u:.3g}" for u in row.uppers)
    return ks, rates, ups


def table(rows: Sequence[Row]) -> list[str]:
    lines = ["| check | target | backend, dtype, mode | trials | level(s) | rejections | measured "
             "rate | 95 % upper bound | operating level | margin | ok |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ks, rates, ups = _fmt_levels(r)
        levels = " / ".join(f"{a:g}" for a in r.levels) or "—"
        verdict = "yes" if r.ok else ("measured" if not r.levels else "NO")
        if r.exact_level:
            lows = " / ".join(f"{b:.3g}" for b in r.lowers)
            verdict += f" (exact-level test: 95 % lower bound {lows} ≤ level)"
        check = r.check.replace("|", "\\|")
        lines.append(f"| {check} | `{r.target}` | {r.where} | {r.trials} "
                     f"| {levels} | {ks} | {rates} | {ups} | {r.operating} | {r.margin} "
                     f"| {verdict} |")
    return lines


def git_commit() -> str:
    """The commit of the checkout, with the paths of the code under calibration that differ
    from it (``verify``, ``impls``, ``properties``), or ``unknown``."""
    here = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, check=False, timeout=10)
        if out.returncode != 0:
            return "unknown (not a git checkout)"
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--", "verify",
                                "kernel_verify", "impls", "properties"],
                               capture_output=True, text=True, check=False,
                               timeout=10).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    changed = sorted(line[3:] for line in dirty if line.strip())
    return out.stdout.strip() + (f" (uncommitted changes: {', '.join(changed)})"
                                 if changed else "")


#: ``## Part `name` `` opens the section of one part in reports/calibration.md.
SECTION = re.compile(r"^## Part `(\w+)`$", re.M)


def _ok_line(rows: Sequence[Row]) -> str:
    stated = [r for r in rows if r.levels]
    bad = [r for r in stated if not r.ok]
    return (f"**{len(stated) - len(bad)}/{len(stated)} ok**"
            + (f"; not ok: {', '.join(f'{r.check} ({r.target}, {r.where})' for r in bad)}"
               if bad else ""))


def section(part: str, stamp: str, rows: Sequence[Row], not_run: Sequence[str] = ()) -> str:
    """The section of one part: its heading, the stamp of the run, its table, the cells its
    properties run in that this run could not (``not_run``) and its verdict."""
    gap = ([f"Not run here (no row; the property runs there on a machine that has it): "
            f"{'; '.join(not_run)}.", ""] if not_run else [])
    return "\n".join([f"## Part `{part}`", "", stamp, "", *table(rows), "", *gap,
                      _ok_line(rows)])


def _verdicts(section_text: str) -> tuple[int, int]:
    """``(ok rows, rows with a stated level)`` of a section, from the table's last column."""
    ok = stated = 0
    for line in section_text.splitlines():
        if line.startswith("| ") and not line.startswith(("| check ", "|---")):
            verdict = line.rstrip(" |").rsplit("| ", 1)[-1]
            if verdict.startswith("measured"):
                continue
            stated += 1
            ok += verdict.startswith("yes")
    return ok, stated


def merge_report(old: str, sections: dict[str, str], assumption_trials: int) -> str:
    """reports/calibration.md with ``sections`` (part → section text) replacing the sections of
    those parts in ``old`` and the other parts' sections kept as they are (with their own
    stamps), in :data:`PARTS` order; the head states the criterion and the total."""
    kept: dict[str, str] = {}
    found = list(SECTION.finditer(old))
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(old)
        kept[match.group(1)] = old[match.start():end].strip()
    kept.update(sections)
    order = [p for p in PARTS if p in kept] + [p for p in kept if p not in PARTS]
    body = [kept[p] for p in order]
    counts = [_verdicts(b) for b in body]
    ok, stated = sum(c[0] for c in counts), sum(c[1] for c in counts)
    missing = [p for p in PARTS if p not in kept]
    head = [
        "# Calibration of the statistical and assumption-based checks",
        "",
        "Each row runs one check on correct code, as the property runs it. **ok** means the "
        f"one-sided {CONFIDENCE:.0%} Clopper–Pearson upper bound of the measured false-alarm "
        "rate is ≤ the level, at every level of the row. Checks with a derived threshold run at "
        f"every rung of {LADDER} that their trial count can certify (e.g. 0.2 / 0.1 / 0.05: "
        "the rejections, rates and bounds are listed in that order); the properties use them at "
        "α_op = α_total/N, which the derivation covers (kernel_verify/calibration.py). Model "
        f"assumptions run at their stated level: P0 for convergence, {ASSUMPTION_LEVEL:g} per "
        f"example for the deterministic thresholds ({assumption_trials} trials). A *measured* "
        "row has no certified level (the pilot-variance assumption: it adds its rate q to the "
        "test's α).",
        "",
        "Each part (`--part`) is a section with the command, commit and entropy of the run that "
        "wrote it; `kernel-verify calibrate --part P` replaces only the sections of P.",
        "",
        f"**{ok}/{stated} ok** over the parts {', '.join(order)}"
        + (f" (not run yet: {', '.join(missing)})" if missing else ""),
        "",
    ]
    return "\n".join(head) + "\n" + "\n\n".join(body) + "\n"


def run_calibration(args: argparse.Namespace) -> int:
    """``kernel-verify calibrate [--seeds N] [--part …]``; exit 1 if any row is not ok."""
    n = int(args.seeds)
    if n < MIN_SEEDS:
        raise ValueError(f"--seeds must be >= {MIN_SEEDS}, got {n}")
    parts = getattr(args, "parts", None) or list(PARTS)
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ValueError(f"--part must be among {', '.join(PARTS)}, got {unknown}")
    jobs = int(getattr(args, "jobs", None) or min(2, os.cpu_count() or 1))
    entropy = seeds.fresh_entropy()
    assumption_trials = max(n, trials_to_certify(ASSUMPTION_LEVEL))
    todo = units(parts)
    start = time.monotonic()
    per_unit = run_units(todo, n, entropy, assumption_trials, jobs, per_unit=True)
    seconds = time.monotonic() - start
    rows = [r for unit_rows in per_unit for r in unit_rows]
    stated = [r for r in rows if r.levels]
    bad = [r for r in stated if not r.ok]
    stamp = (f"`kernel-verify calibrate --seeds {n} --part {' '.join(parts)}` at commit "
             f"{git_commit()}: {seconds:.0f} s in {jobs} processes, entropy {entropy} (seed of a "
             "trial: `verify.seeds.child_seeds(entropy, 1, 'calibrate', check, target, …, i)`).")
    from kernel_verify.calibration_gradients import not_run_here

    gaps = not_run_here({u.part for u in todo})
    sections = {}
    for part in dict.fromkeys(u.part for u in todo):
        part_rows = [r for u, unit_rows in zip(todo, per_unit, strict=True) if u.part == part
                     for r in unit_rows]
        sections[part] = section(part, stamp, part_rows, gaps.get(part, ()))
    out = reports_dir() / "calibration.md"
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    text = merge_report(old, sections, assumption_trials)
    atomic.write_text(out, text)
    print(text)
    print(f"\n(written to {out}; parts {', '.join(sections)} replaced)")
    if bad:
        print("not ok: " + ", ".join(f"{r.check} ({r.target}, {r.where})" for r in bad))
    return 1 if bad else 0
