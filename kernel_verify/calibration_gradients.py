"""Calibration rows of the gradient statistics (``kernel-verify calibrate``, part estimators).

``properties/test_gradients.py::test_gradient_of_unbiased_estimator_is_unbiased`` runs
:func:`kernel_verify.verify.gradient_stats.median_of_means_test` on autograd gradients of the
built-in ``softmax_positive[iid]`` map; here the same check runs at the calibration ladder's loose
levels (``B = ⌈8 ln(1/α)⌉`` draws at each level α) on fresh seeds, at points drawn as the property
draws them (d = 3, ‖x‖ = 0.8, ‖y‖ = 0.5, m = 64), and the rejection counts must stay within the
binomial bound of each level.
"""

from __future__ import annotations

import numpy as np

#: The calibrated map (the one built-in map the property runs on).
GRADIENT_TARGET = "softmax_positive[iid]"
CHECK = "gradients: median-of-means test of E ∇ₓ φ(x)ᵀφ(y) = ∇ₓ k(x, y)"


def gradient_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list:
    """One ladder row: ``n`` trials, each a fresh point and fresh parameter draws."""
    import torch

    from kernel_verify import calibration as cal
    from kernel_verify.impls.registry import get
    from kernel_verify.verify.gradient_stats import (
        draws_for_alpha,
        median_of_means_test,
        positive_gradient_moments,
    )

    entry = get(name)
    levels = cal.rungs(n)
    counts = dict.fromkeys(levels, 0)
    d, m = 3, 64
    most = max(draws_for_alpha(a) for a in levels)
    for i in range(n):
        seed = cal._seed(entropy, "gradients", name, i)
        rng = np.random.default_rng(seed)
        x, y = rng.standard_normal(d), rng.standard_normal(d)
        x *= 0.8 / np.linalg.norm(x)
        y *= 0.5 / np.linalg.norm(y)
        grads = []
        for _ in range(most):
            params = {k: torch.as_tensor(v) for k, v in entry.draw(rng, d, m, entry.config).items()}
            xt = torch.tensor(x[None, :], requires_grad=True)
            phi_y = entry.torch_fn(torch.tensor(y[None, :]), params, entry.config).detach()
            (g,) = torch.autograd.grad((entry.torch_fn(xt, params, entry.config) * phi_y).sum(),
                                       xt)
            grads.append(g.numpy()[0])
        mean, var = positive_gradient_moments(x, y)
        sigma = np.sqrt(var / m)
        draws = np.array(grads)
        for a in levels:
            counts[a] += not median_of_means_test(draws[:draws_for_alpha(a)], mean, sigma, a).ok
    return [cal.ladder_row(CHECK, name, "torch:cpu float64", n, counts)]
