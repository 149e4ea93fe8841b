"""Calibration rows of the black-box feature-map checks (``kernel-verify calibrate``).

Run on the registry's correct maps wrapped black-box (:data:`verify.mutants.blackbox.CONTROLS`),
with the check functions the properties call (:mod:`verify.checks.blackbox`):

* float64 accuracy (fourth-difference noise > 1e-10; model assumption), every control;
* deterministic identity under the 64-ulp feature assumption (no formula declared), the
  deterministic controls;
* the undeclared-family mean test (pilot variance ×4; model assumption) at ``--alpha``, the
  unbiased controls without family;
* the declared-family mean test (median of means with the exact variance; derived) at
  ``--alpha``, the unbiased controls with family that ``verify.moments`` covers;
* the orthogonal-claim variance test (one-sided Bernstein vs the exact ORF variance; derived)
  at ``--alpha``, ``rff_pairs[orthogonal]``; ``max(20, seeds/10)`` trials (20000 draws each).

Nominal rate of the two assumption checks without α (float64 accuracy, deterministic identity):
1e-3 per example, the run-wide budget of the statistical properties.
"""

from __future__ import annotations

import numpy as np

from kernel_verify.verify.seeds import child_seeds

ASSUMPTION_NOMINAL = 1e-3


def _seed(entropy: int, stream: int, i: int) -> int:
    """Trial ``i`` of ``stream``: one child seed of the run's entropy (verify/seeds.py)."""
    return child_seeds(entropy, 1, "calibrate.blackbox", stream, i)[0]


def _pair(seed: int, d: int, nx: float, ny: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(d), rng.standard_normal(d)
    return nx * x / np.linalg.norm(x), ny * y / np.linalg.norm(y)


def blackbox_rows(n_seeds: int, alpha: float, entropy: int, row_type) -> list:
    from kernel_verify.verify.checks.blackbox import (
        DRAWS,
        NOISE_LEVEL,
        deterministic_excess,
        estimates,
        fourth_difference_noise,
        pilot_mean_test,
    )
    from kernel_verify.verify.moments import exact_moments
    from kernel_verify.verify.mutants.blackbox import CONTROLS, control_targets
    from kernel_verify.verify.references.kernels import kernel_mp
    from kernel_verify.verify.stats import mean_test, variance_test

    rows = []
    norms = (0.2, 0.5, 0.8)
    for s, name in enumerate(CONTROLS):
        (fam,) = control_targets(name)
        (bare,) = control_targets(name, family=False)
        bad = sum(fourth_difference_noise(fam, _seed(entropy, s, i), 2 + i % 4,
                                          (0.3, 0.7, 1.0)[i % 3]) > NOISE_LEVEL
                  for i in range(n_seeds))
        rows.append(row_type("blackbox_maps: float64 accuracy, |Δ⁴φ| noise > 1e-10 "
                             "(assumption)", fam.name, n_seeds, bad, ASSUMPTION_NOMINAL))
        if fam.has("deterministic"):
            bad = sum(deterministic_excess(bare, _seed(entropy, 100 + s, i), 1 + i % 4,
                                           (1e-3, 0.3, 1.0, 2.5)[i % 4]) > 1
                      for i in range(n_seeds))
            rows.append(row_type("blackbox_maps: deterministic identity, 64-ulp feature "
                                 "assumption", bare.name, n_seeds, bad, ASSUMPTION_NOMINAL))
            continue
        if not fam.has("unbiased"):
            continue
        bad_pilot = bad_exact = tried_exact = 0
        for i in range(n_seeds):
            seed = _seed(entropy, 200 + s, i)
            d = 2 + i % 4
            x, y = _pair(seed, d, norms[i % 3], norms[(i // 3) % 3])
            mean = float(kernel_mp(fam.kernel, x, y, **fam.kernel_args(d)))
            bad_pilot += not pilot_mean_test(bare, x, y, seed, mean, alpha).ok
            try:
                var = float(exact_moments(fam.formula, x, y, dict(fam.config), fam.m,
                                          matrix=fam.matrix or "iid").variance)
            except (KeyError, NotImplementedError):
                continue
            if not var > 1e-12 * mean * mean:
                continue
            tried_exact += 1
            samples = estimates(fam, x, y, seed, DRAWS)
            bad_exact += not mean_test(samples, mean, alpha=alpha, variance=var).ok
        rows.append(row_type("blackbox_maps: mean test, no family (pilot-variance assumption)",
                             bare.name, n_seeds, bad_pilot, alpha))
        if tried_exact:
            rows.append(row_type("feature_unbiased on black-box: mean test, exact variance "
                                 "(median of means)", fam.name, tried_exact, bad_exact, alpha))
    rows += _orthogonal_rows(n_seeds, alpha, entropy, row_type, estimates, exact_moments,
                             kernel_mp, variance_test, control_targets)
    return rows


def _orthogonal_rows(n_seeds, alpha, entropy, row_type, estimates, exact_moments, kernel_mp,
                     variance_test, control_targets) -> list:
    from kernel_verify.verify.tolerance import gamma

    (t,) = control_targets("rff_pairs[orthogonal]")
    d, dist, draws, m = 8, 1.5, 20000, t.m
    trials = max(20, n_seeds // 10)
    b = 1.0 + gamma(2 * m + 8 * d + 72, 2.0**-53)  # the property's proven range of rff_pairs
    bad = 0
    for i in range(trials):
        seed = _seed(entropy, 900, i)
        x, y = _pair(seed, d, 1.0, 1.0)
        y = x + dist * (y - x) / np.linalg.norm(y - x)
        var = float(exact_moments(t.formula, x, y, dict(t.config), m,
                                  matrix="orthogonal").variance)
        mean = float(kernel_mp(t.kernel, x, y, **t.kernel_args(d)))
        samples = estimates(t, x, y, seed, draws)
        bad += not variance_test(samples, mean, var, alpha=alpha, bounds=(-b, b),
                                 alternative="greater").ok
    return [row_type("blackbox_maps: orthogonal claim, Var ≤ exact ORF variance (Bernstein)",
                     t.name, trials, bad, alpha)]
