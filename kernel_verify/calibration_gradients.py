"""Calibration rows of the gradient statistics (``kernel-verify calibrate --part gradients``).

``properties/test_gradients.py::test_gradient_of_unbiased_estimator_is_unbiased`` is the one
statistical gradient check: for the built-in ``softmax_positive[iid]`` map (the only target its
selection collects in the shipped suite), one example is
:func:`~kernel_verify.properties.gradient_checks.unbiased_gradient_trial` (a point ``d = 3``,
``‖x‖ = 0.8``, ``‖y‖ = 0.5``, ``B`` draw seeds from the example's seed, float64 autograd
gradients on torch CPU: the only backend, dtype and mode the property runs in) and the check is
:func:`~kernel_verify.properties.gradient_checks.unbiased_gradient_test` (median of means with the
exact per-draw variance, no pilot estimate). Here the same two functions run on fresh seeds at
every rung of the calibration ladder (``B = ⌈8 ln(1/α)⌉`` draws at level α; a trial's draws at a
looser level are the first draws of its trial at the tightest level, as the property would draw
them). The property's threshold holds per component (three components, three assertions in the
α budget); a row counts a rejection when *any* component rejects, so it holds the whole test to
the per-component level (stricter than the property needs).

Trials: ``max(n, 3·trials_to_certify(0.01))`` = 897 at the default 100 seeds, so that the row
reaches the ladder's last rung (0.01) with room for rejections (:func:`calibration.rungs`); a
trial costs ~1 ms per draw (37 draws at 0.01).
"""

from __future__ import annotations

#: The calibrated map (the one built-in map the property runs on).
GRADIENT_TARGET = "softmax_positive[iid]"
CHECK = "gradients: median-of-means test of E ∇ₓ φ(x)ᵀφ(y) = ∇ₓ k(x, y)"
WHERE = "torch:cpu float64"


def gradient_trials(n: int) -> int:
    """Trials of the gradient row for a run of ``n`` seeds (module docstring); ``n`` itself in a
    small (test) run below ``MIN_SEEDS``."""
    from kernel_verify import calibration as cal

    if n < cal.MIN_SEEDS:
        return n
    return max(n, 3 * cal.trials_to_certify(cal.LADDER[-1]))


def gradient_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list:
    """One ladder row: :func:`gradient_trials` trials, each a fresh seed through the property's
    example and test functions."""
    from kernel_verify import calibration as cal
    from kernel_verify.properties.gradient_checks import (
        unbiased_gradient_test,
        unbiased_gradient_trial,
    )
    from kernel_verify.verify.gradient_stats import draws_for_alpha

    target = cal._builtin(name)
    trials = gradient_trials(n)
    levels = cal.rungs(trials)
    counts = dict.fromkeys(levels, 0)
    most = max(draws_for_alpha(a) for a in levels)
    for i in range(trials):
        trial = unbiased_gradient_trial(target, cal._seed(entropy, "gradients", name, i), most)
        for a in levels:
            counts[a] += not unbiased_gradient_test(trial, a).ok
    return [cal.ladder_row(CHECK, name, WHERE, trials, counts)]
