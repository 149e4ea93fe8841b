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
reaches the ladder's last rung (0.01) with room for rejections
(:func:`kernel_verify.calibration.rungs`); a trial costs ~1 ms per draw (37 draws at 0.01).

The gradcheck properties (``test_gradcheck_float64_feature_map``,
``test_gradcheck_float64_attention``) rest on a stated assumption (fifth derivatives
``≤ 100·F/s⁵``, docs/math.md §14) rather than a bound: :func:`fd_rows` and
:func:`fd_attention_rows` measure it as the other deterministic model assumptions are measured,
at 1e-3 per example with 2995 fresh examples per map, attention target and mode, through the
property's own :func:`~kernel_verify.properties.gradient_checks.directional_differences`.
"""

from __future__ import annotations

import numpy as np

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


# --------------------------------------------------------------------------- finite differences
FD_CHECK = ("gradients: float64 finite differences within 100·u^(2/3)·F "
            "(fifth-derivative assumption)")


def fd_targets() -> list[str]:
    """The maps ``test_gradcheck_float64_feature_map`` runs on in the shipped suite: built-in
    feature maps claiming ``differentiable``, one per formula (the iid or matrix-free variant;
    variants differing only in their frequency matrix share one backward)."""
    from kernel_verify.properties.builtin import builtin_targets
    from kernel_verify.properties.protocol import FeatureMapTarget

    return [t.name for t in builtin_targets() if isinstance(t, FeatureMapTarget)
            and t.has("differentiable") and t.matrix in (None, "iid")]


def fd_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list:
    """The stated assumption of the gradcheck property on one map, measured at its stated level
    (``ASSUMPTION_LEVEL`` = 1e-3 per example, ``assumption_trials`` examples): each trial draws
    the map's parameters (d = 3, m = 4) and a 3 × 3 input (``0.8·N(0, 1)``) from fresh seeds, as
    the property draws them from its fixed seeds, and runs
    :func:`~kernel_verify.properties.gradient_checks.directional_differences` (3 directions) on
    torch CPU float64; a trial rejects when any direction exceeds its tolerance. Margin: the
    largest ``|numeric − analytic| / allowed`` seen."""
    import torch

    from kernel_verify import calibration as cal
    from kernel_verify.impls.torch.convert import to_torch
    from kernel_verify.properties.gradient_checks import directional_differences, draw

    target = cal._builtin(name)
    kw = {"positions": np.arange(3)} if target.has("positional") else {}
    rejections, worst = 0, 0.0
    for i in range(assumption_trials):
        p_seed = cal._seed(entropy, "gradients_fd", name, i, "params")
        x_seed = cal._seed(entropy, "gradients_fd", name, i, "input")
        params = to_torch(draw(target, p_seed, 3, 4), device="cpu", dtype=torch.float64)

        def fn(x, params=params):
            return target.torch_fn(x, params, target.config, **kw)

        x = torch.tensor(np.random.default_rng(x_seed).standard_normal((3, 3)) * 0.8,
                         dtype=torch.float64)
        ratio = max(r.ratio for r in directional_differences(fn, (x,), "float64", x_seed))
        rejections += not ratio <= 1
        worst = max(worst, ratio)
    return [cal.Row(FD_CHECK, name, "torch:cpu float64", assumption_trials,
                    (cal.ASSUMPTION_LEVEL,), (rejections,),
                    f"stated {cal.ASSUMPTION_LEVEL:g} per example (model assumption)",
                    f"max error / tolerance = {worst:.2g}")]


def fd_attention_targets() -> list[str]:
    """The attention targets ``test_gradcheck_float64_attention`` runs on in the shipped suite:
    built-in attention targets claiming ``differentiable`` with a torch backend."""
    from kernel_verify.properties.builtin import builtin_targets
    from kernel_verify.properties.protocol import AttentionTarget

    return [t.name for t in builtin_targets() if isinstance(t, AttentionTarget)
            and t.has("differentiable") and "torch" in t.backends]


def fd_attention_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list:
    """:func:`fd_rows` for an attention target, one row per mode it claims: each trial draws
    ``q, k (1, 2, 4, 4)``, ``v (1, 2, 4, 3)`` from the named stream ``qkv`` of a fresh seed (as
    the property's ``_qkv(21, b=1, h=2, n=4, d=4)`` does from seed 21) and a fresh attention seed
    (the property uses 0), in the target's working dtype (float64, else float32), and runs
    :func:`~kernel_verify.properties.gradient_checks.directional_differences` on ``∂o/∂(q, k,
    v)``."""
    import torch

    from kernel_verify import calibration as cal
    from kernel_verify.properties.gradient_checks import directional_differences
    from kernel_verify.verify.seeds import rng as seeded_rng

    target = cal._builtin(name)
    dtype = next(t for t in ("float64", "float32") if target.accepts("torch", t))
    modes = [c for c, claim in ((False, "noncausal"), (True, "causal")) if target.has(claim)]
    rows = []
    for causal in modes or [False]:
        rejections, worst = 0, 0.0
        for i in range(assumption_trials):
            seed = cal._seed(entropy, "gradients_fd_attention", name, int(causal), i)
            gen = seeded_rng(seed, "qkv")
            arrays = [gen.standard_normal((1, 2, 4, 4)) for _ in range(2)]
            arrays.append(gen.standard_normal((1, 2, 4, 3)))
            qkv = tuple(torch.tensor(a, dtype=getattr(torch, dtype)) for a in arrays)

            def fn(q, k, v, causal=causal, seed=seed):
                t = target.to_layout
                tq = t(q)
                tk = tq if target.self_attention_only else t(k)
                return t(target.attention(tq, tk, t(v), causal=causal, seed=seed % 2**31))

            ratio = max(r.ratio for r in directional_differences(fn, qkv, dtype, seed))
            rejections += not ratio <= 1
            worst = max(worst, ratio)
        mode = "causal" if causal else "non-causal"
        rows.append(cal.Row(FD_CHECK, name, f"torch:cpu {dtype}, {mode}", assumption_trials,
                            (cal.ASSUMPTION_LEVEL,), (rejections,),
                            f"stated {cal.ASSUMPTION_LEVEL:g} per example (model assumption)",
                            f"max error / tolerance = {worst:.2g}"))
    return rows
