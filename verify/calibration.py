"""``kernel-verify calibrate``: the false-alarm rate of the statistical properties, measured.

Each statistical property has a threshold derived to give a false-alarm rate ≤ α on correct
code. This command runs *the same check functions the properties call* on correct built-in
implementations, over ``--seeds`` fresh seeds at a loose ``--alpha`` (0.05 by default, so that
rejections are frequent enough to count), and reports the observed rejection rate with a 95 %
Clopper–Pearson interval (:func:`verify.stats.rejection_rate_interval`). A check is **ok** when
the interval's lower end is ≤ α (the observed rate is not significantly above α); the bounds
are conservative (Hoeffding, Bernstein, DKW, median of means), so observed rates are usually far
below α.

Checks calibrated:

* ``properties/test_random_matrices.py``: the nine row-law checks (:func:`row_law_checks`) on
  every built-in construction claiming Gaussian rows (d = m = 4, the property's 1000 draws);
* ``properties/test_feature_unbiased.py`` and ``test_feature_variance.py``: ``mean_test`` and
  ``variance_test`` of Monte Carlo estimates (:mod:`verify.checks.estimates`, the helpers the
  properties use) on a bounded and an unbounded built-in estimator (:data:`ESTIMATOR_TARGETS`);
* ``properties/test_attention_identities.py``: the model assumption of the convergence property,
  ``P(error at m=1024 ≥ ½·error at m=16) ≤ P0`` per trial, on every built-in attention claiming
  ``approximates_softmax`` (the observed per-trial rate with its interval, against P0), and the
  resulting rejection rate of the binomial test at ``--alpha``;
* ``properties/test_blackbox_maps.py`` and the black-box mean tests
  (:mod:`verify.calibration_blackbox`), on correct maps wrapped black-box.

Writes ``reports/calibration.md``. Seeds come from fresh OS entropy, recorded in the report.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from kernel_verify.verify import atomic, seeds
from kernel_verify.verify.paths import reports_dir
from kernel_verify.verify.stats import rejection_rate_interval

#: Fewest fresh seeds a calibration may use (``--seeds``); the default is 200.
MIN_SEEDS = 20


@dataclass(frozen=True)
class Row:
    check: str
    target: str
    trials: int
    rejections: int
    nominal: float

    @property
    def rate(self) -> float:
        return self.rejections / self.trials

    @property
    def interval(self) -> tuple[float, float]:
        return rejection_rate_interval(self.rejections, self.trials)

    @property
    def ok(self) -> bool:
        return self.interval[0] <= self.nominal


def _matrix_rows(n_seeds: int, alpha: float, entropy: int) -> list[Row]:
    from kernel_verify.verify.checks.row_law import draw_stack, orthonormal_pair, row_law_checks
    from kernel_verify.verify.thirdparty.builtin import builtin_targets
    from kernel_verify.verify.thirdparty.protocol import RandomMatrixTarget

    d = m = 4
    rows = []
    targets = [t for t in builtin_targets()
               if isinstance(t, RandomMatrixTarget) and t.has("gaussian_rows")]
    for target in targets:
        counts: dict[str, int] = {}
        for i in range(n_seeds):
            seed = seeds.child_seeds(entropy, 1, "calibrate.row_law", i)[0]
            w = draw_stack(target, seed, m, d)
            z1, z2 = orthonormal_pair(seed, d)
            for r in row_law_checks(w, z1, z2, alpha=alpha, seed=seed, name=target.name):
                label = r.label.split(": ", 1)[1]
                counts[label] = counts.get(label, 0) + (not r.ok)
        rows += [Row(f"random_matrices: {label}", target.name, n_seeds, k, alpha)
                 for label, k in counts.items()]
    return rows


def _convergence_rows(n_seeds: int, alpha: float, entropy: int) -> list[Row]:
    from kernel_verify.verify.checks.convergence import (
        CONV_SEEDS,
        P0,
        convergence_failures,
        convergence_threshold,
    )
    from kernel_verify.verify.thirdparty.builtin import builtin_targets
    from kernel_verify.verify.thirdparty.protocol import AttentionTarget

    rows = []
    targets = [t for t in builtin_targets()
               if isinstance(t, AttentionTarget) and t.has("approximates_softmax")]
    k_star = convergence_threshold(CONV_SEEDS, alpha)
    for target in targets:
        trials = failures = rejections = 0
        blocks = max(MIN_SEEDS, n_seeds // 10)  # ≥ 20 fresh seeds for the test's own rate
        for i in range(blocks):
            seed = seeds.child_seeds(entropy, 1, "calibrate.convergence", i)[0]
            d = 2 + i % 5
            f = convergence_failures(target, seed, d)
            trials += CONV_SEEDS
            failures += f
            rejections += f >= k_star
        rows.append(Row("attention: trial fails to halve the error (model assumption P0)",
                        target.name, trials, failures, P0))
        rows.append(Row(f"attention: convergence test rejects (k* = {k_star} of {CONV_SEEDS})",
                        target.name, blocks, rejections, alpha))
    return rows


#: Every statistical property (``@pytest.mark.statistical``) → the calibration rows that measure
#: the check function it calls (tests/test_calibration.py keeps this complete).
CALIBRATED = {
    "test_random_matrices.py::test_rows_are_standard_gaussian": "random_matrices:",
    "test_feature_unbiased.py::test_unbiased_on_random_points": "feature_unbiased: mean_test",
    "test_feature_unbiased.py::test_unbiased_on_grid": "feature_unbiased: mean_test",
    "test_feature_unbiased.py::test_biased_mean_is_mean_kernel": "feature_unbiased: mean_test",
    "test_feature_unbiased.py::test_bias_is_visible_where_theory_says_it_is_large":
        "feature_unbiased: mean_test",
    "test_feature_variance.py::test_sample_variance_matches_exact_variance":
        "feature_variance: variance_test",
    "test_feature_variance.py::test_iid_variance_matches_exact_variance_by_fourth_moment":
        "feature_variance: variance_test by the exact μ₄",
    "test_attention_identities.py::test_error_to_softmax_attention_falls_as_m_grows":
        "attention: convergence test",
    "test_blackbox_maps.py::test_unbiased_without_declared_family":
        "blackbox_maps: mean test, no family",
    "test_blackbox_maps.py::test_orthogonal_claim_has_the_orthogonal_variance":
        "blackbox_maps: orthogonal claim",
}

#: Feature maps whose Monte Carlo checks are calibrated: one bounded estimator (Hoeffding /
#: Bernstein for the mean, the bounded variance test), one unbounded (median of means with
#: the exact variance) and one with the V₁ variance bound (Fastfood rows).
ESTIMATOR_TARGETS = ("rff_pairs[iid]", "softmax_positive[iid]", "softmax_positive[fastfood]")


def _estimator_rows(n_seeds: int, alpha: float, entropy: int) -> list[Row]:
    """The unbiasedness property (``mean_test`` of φ(x)ᵀφ(y) against k(x, y)) and the variance
    property (``variance_test`` against the exact variance), at random points as the properties
    draw them, on correct built-in maps."""
    from kernel_verify.impls.registry import get
    from kernel_verify.verify.checks.estimates import (
        DRAWS,
        VARIANCE_DRAWS,
        estimates,
        exact_fourth_moment,
        exact_variance,
        mean_test_variance,
        range_bound,
    )
    from kernel_verify.verify.references.kernels import kernel_mp
    from kernel_verify.verify.stats import mean_test, variance_test
    from kernel_verify.verify.thirdparty.protocol import FeatureMapTarget

    rows = []
    for name in ESTIMATOR_TARGETS:
        target = FeatureMapTarget.from_entry(get(name))
        mean_rejects = var_rejects = var_trials = mu4_rejects = mu4_trials = 0
        for i in range(n_seeds):
            seed = seeds.child_seeds(entropy, 1, "calibrate.estimators", i)[0]
            rng = np.random.default_rng(seed)
            d, m = 2 + i % 4, 2 + i % 7
            x, y = (0.8 * u / np.linalg.norm(u) for u in rng.standard_normal((2, d)))
            k = float(kernel_mp(target.kernel, x, y, **target.kernel_args(d)))
            bounds = range_bound(target, d, m)
            var = exact_variance(target, x, y, m)
            found = mean_test_variance(target, x, y, m)  # exact, or the V₁ bound (Fastfood)
            samples = estimates(target, x, y, m, seed, DRAWS)
            mean_rejects += not mean_test(samples, k, alpha=alpha, bounds=bounds,
                                          variance=None if found is None else found[0],
                                          seed=seed).ok
            if bounds is not None and var is not None:
                var_trials += 1
                var_rejects += not variance_test(samples, k, var, alpha=alpha, bounds=bounds,
                                                 seed=seed).ok
            # the fourth-moment variance property: norms in [0.1, 0.4], 2000 draws, exact μ₄
            sx, sy = (rng.uniform(0.1, 0.4) * u / np.linalg.norm(u)
                      for u in rng.standard_normal((2, d)))
            moments = exact_fourth_moment(target, sx, sy, m)
            if moments is not None:
                mu4_trials += 1
                ks = float(kernel_mp(target.kernel, sx, sy, **target.kernel_args(d)))
                more = estimates(target, sx, sy, m, seeds.child_seeds(seed, 1, "unbounded")[0],
                                 VARIANCE_DRAWS)
                mu4_rejects += not variance_test(more, ks, moments[1], alpha=alpha,
                                                 fourth_central_moment=moments[0],
                                                 seed=seed).ok
        rows.append(Row("feature_unbiased: mean_test of φ(x)ᵀφ(y) = k(x, y)", name, n_seeds,
                        mean_rejects, alpha))
        if var_trials:
            rows.append(Row("feature_variance: variance_test = exact variance", name,
                            var_trials, var_rejects, alpha))
        if mu4_trials:
            rows.append(Row("feature_variance: variance_test by the exact μ₄", name,
                            mu4_trials, mu4_rejects, alpha))
    return rows


def _table(rows: list[Row]) -> list[str]:
    lines = ["| check | target | trials | rejections | observed | 95 % CP interval | nominal "
             "| ok |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lo, hi = r.interval
        lines.append(f"| {r.check} | `{r.target}` | {r.trials} | {r.rejections} | {r.rate:.4f} "
                     f"| [{lo:.4f}, {hi:.4f}] | {r.nominal:g} | {'yes' if r.ok else 'NO'} |")
    return lines


#: The groups of checks ``--part`` selects.
PARTS = ("matrices", "estimators", "convergence", "blackbox")


def run_calibration(args: argparse.Namespace) -> int:
    """``kernel-verify calibrate [--seeds N] [--alpha A]``; exit 1 if any check is not ok."""
    n_seeds, alpha = int(args.seeds), float(args.alpha)
    if n_seeds < MIN_SEEDS:
        raise ValueError(f"--seeds must be >= {MIN_SEEDS}, got {n_seeds}")
    if not 0 < alpha < 1:
        raise ValueError(f"--alpha must be in (0, 1), got {alpha}")
    entropy = seeds.fresh_entropy()
    start = time.monotonic()
    parts = getattr(args, "parts", None) or list(PARTS)
    rows = []
    if "matrices" in parts:
        rows += _matrix_rows(n_seeds, alpha, entropy)
    if "estimators" in parts:
        rows += _estimator_rows(n_seeds, alpha, entropy)
    if "convergence" in parts:
        rows += _convergence_rows(n_seeds, alpha, entropy)
    if "blackbox" in parts:
        from kernel_verify.verify.calibration_blackbox import blackbox_rows

        rows += blackbox_rows(n_seeds, alpha, entropy, Row)
    seconds = time.monotonic() - start
    bad = [r for r in rows if not r.ok]
    text = [
        "# Calibration of the statistical properties",
        "",
        f"`kernel-verify calibrate --seeds {n_seeds} --alpha {alpha} --part {' '.join(parts)}`: "
        f"{seconds:.0f} s, entropy {entropy} (seed i of a check: "
        "`verify.seeds.child_seeds(entropy, 1, check, i)`). Each check runs at level α on "
        "correct implementations; *ok* means the Clopper–Pearson interval's lower end is ≤ the "
        "nominal rate (α, or the model assumption P0).",
        "",
        *_table(rows),
        "",
        f"**{len(rows) - len(bad)}/{len(rows)} ok**",
    ]
    # A partial run is written beside the full one, never over it.
    suffix = "" if set(parts) == set(PARTS) else "_" + "_".join(parts)
    out = reports_dir() / f"calibration{suffix}.md"
    atomic.write_text(out, "\n".join(text) + "\n")
    print("\n".join(text))
    print(f"\n(written to {out})")
    return 1 if bad else 0
