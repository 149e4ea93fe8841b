"""Calibration rows of the gradient statistics (``kernel-verify calibrate --part gradients``).

``properties/test_gradients.py::test_gradient_of_unbiased_estimator_is_unbiased`` is the one
statistical gradient check: for the built-in ``softmax_positive[iid]`` map (the only target its
selection collects in the shipped suite), one example is
:func:`~kernel_verify.properties.gradient_checks.unbiased_gradient_trial` (a point ``d = 3``,
``‖x‖ = 0.8``, ``‖y‖ = 0.5``, ``B`` blocks from the example's seed — each one parameter draw
of ``M`` = :func:`~kernel_verify.properties.gradient_checks.block_features` features, sized so
that a gradient scaled by 1.1 is rejected (issue #29) — float64 autograd gradients on torch
CPU: the only backend, dtype and mode the property runs in) and the check is
:func:`~kernel_verify.properties.gradient_checks.unbiased_gradient_test` (median of means with the
exact per-block variance ``Var T/M``, no pilot estimate). Here the same two functions run on
fresh seeds at every rung of the calibration ladder (``B = ⌈8 ln(1/α)⌉`` blocks at level α; a
trial's blocks at a looser level are the first blocks of its trial at the tightest level, as the
property would draw them). The property's threshold holds per component (three components,
three assertions in the α budget); a row counts a rejection when *any* component rejects, so
it holds the whole test to the per-component level (stricter than the property needs).

Trials: ``max(n, 3·trials_to_certify(0.01))`` = 897 at the default 100 seeds, so that the row
reaches the ladder's last rung (0.01) with room for rejections
(:func:`kernel_verify.calibration.certify.rungs`); a trial costs ~1–5 ms per block (``M`` from
64 to 2¹⁷ features; 37 blocks at 0.01).

The gradcheck properties (``test_gradcheck_float64_feature_map``,
``test_gradcheck_float64_attention``) rest on a stated assumption (fifth derivatives
``≤ 100·F/s⁵``, docs/math.md §14) rather than a bound: :func:`fd_rows` and
:func:`fd_attention_rows` measure it as the other deterministic model assumptions are measured,
at 1e-3 per example with 8985 fresh examples per map (:func:`fd_map_trials`) and 2995 per
attention target and mode, through the property's own
:func:`~kernel_verify.properties.gradient_checks.directional_differences`.
"""

from __future__ import annotations

import numpy as np

from kernel_verify.calibration.certify import (
    ASSUMPTION_LEVEL,
    LADDER,
    MIN_SEEDS,
    Row,
    _builtin,
    _seed,
    ladder_row,
    rungs,
    trials_to_certify,
)

#: The calibrated map (the one built-in map the property runs on).
GRADIENT_TARGET = "softmax_positive[iid]"
CHECK = "gradients: median-of-means test of E ∇ₓ φ(x)ᵀφ(y) = ∇ₓ k(x, y)"
WHERE = "torch:cpu float64"


def gradient_trials(n: int) -> int:
    """Trials of the gradient row for a run of ``n`` seeds (module docstring); ``n`` itself in a
    small (test) run below ``MIN_SEEDS``."""

    if n < MIN_SEEDS:
        return n
    return max(n, 3 * trials_to_certify(LADDER[-1]))


def gradient_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list:
    """One ladder row: :func:`gradient_trials` trials, each a fresh seed through the property's
    example and test functions."""
    from kernel_verify.properties.gradient_checks import (
        unbiased_gradient_test,
        unbiased_gradient_trial,
    )
    from kernel_verify.verify.gradient_stats import draws_for_alpha

    target = _builtin(name)
    trials = gradient_trials(n)
    levels = rungs(trials)
    counts = dict.fromkeys(levels, 0)
    most = max(draws_for_alpha(a) for a in levels)
    for i in range(trials):
        trial = unbiased_gradient_trial(target, _seed(entropy, "gradients", name, i), most)
        for a in levels:
            counts[a] += not unbiased_gradient_test(trial, a).ok
    return [ladder_row(CHECK, name, WHERE, trials, counts)]


# ------------------------------------------------------------------ black-box gradient point
#: Features per ``sample_fn`` draw of the black-box rows (issue #44, item 5).
BLACKBOX_GRADIENT_M = 16
#: The stated defect of the power row: the gradient scaled by ``1 + POWER_EPS``.
POWER_EPS = 0.1
#: The level of the power row: at most the per-assertion α of the shipped suite (2.6e-5 in
#: the mutants profile), so the measured power is a lower bound of the property's.
POWER_ALPHA = 1e-5
BLACKBOX_CHECK = (f"{CHECK} (black-box point ‖y‖ = 2, ‖x + y‖ = 0.3, "
                  f"m = {BLACKBOX_GRADIENT_M} per draw)")


def _blackbox_positive(mode: str):
    """The black-box SM⁺ map of the gradient mutants (``kernel_verify.mutants.gradients``:
    m = 16, a hand-written backward; ``right`` is the control, ``scaled_1_1`` the ×1.1 one)."""
    from kernel_verify.mutants.gradients import _positive_targets

    black = _positive_targets(f"calibration:{mode}", mode)[1]
    if int(black.m) != BLACKBOX_GRADIENT_M:
        raise ValueError(f"the black-box gradient map has m = {black.m}, the rows say "
                         f"{BLACKBOX_GRADIENT_M}")
    return black


def white_point_m_needed(power: float = 0.1, eps: float = POWER_EPS, points: int = 4000,
                         seed: int = 0) -> int:
    """Features per ``sample_fn`` draw a black-box map would need for ``power`` against a
    gradient scaled by ``1 + eps`` at the *white-box* point law (``‖x‖ = 0.8``, ``‖y‖ = 0.5``,
    Gaussian directions): the property's block of ``r = STAT_R_MAX`` draws rejects where
    ``eps·|μ_j| ≥ 2.5·σ_T,j/√(r·m)`` (:func:`~kernel_verify.properties.gradient_checks.
    block_features`), so ``m = (2.5·q/eps)²/r`` with ``q`` the ``power``-quantile of
    ``min_j σ_T,j/|μ_j|`` over ``points`` points of that law (exact moments)."""
    import math

    from kernel_verify.properties.gradient_checks import STAT_D, STAT_R_MAX
    from kernel_verify.verify.gradient_stats import positive_gradient_moments

    rng = np.random.default_rng(seed)
    ratios = []
    for _ in range(points):
        x, y = rng.standard_normal(STAT_D), rng.standard_normal(STAT_D)
        x *= 0.8 / np.linalg.norm(x)
        y *= 0.5 / np.linalg.norm(y)
        mean, var = positive_gradient_moments(x, y)
        ratios.append(float(np.min(np.sqrt(var) / np.abs(mean))))
    q = float(np.quantile(ratios, power))
    return math.ceil((2.5 * q / eps) ** 2 / STAT_R_MAX)


def blackbox_gradient_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list:
    """The unbiasedness test of the gradient on a black-box map (m = 16 per draw, its own point:
    :data:`~kernel_verify.properties.gradient_checks.BLACKBOX_Y`, ``BLACKBOX_S``): the false
    alarms of the correct map on the α ladder (:func:`gradient_trials` trials), and the power
    against the same map with its gradient scaled by ``1 + POWER_EPS`` at ``POWER_ALPHA``
    (``n`` trials; a measured row), its margin stating the m the white-box point would need."""
    from kernel_verify.properties.gradient_checks import (
        unbiased_gradient_test,
        unbiased_gradient_trial,
    )
    from kernel_verify.verify.gradient_stats import draws_for_alpha

    right, scaled = _blackbox_positive("right"), _blackbox_positive("scaled_1_1")
    trials = gradient_trials(n)
    levels = rungs(trials)
    counts = dict.fromkeys(levels, 0)
    most = max(draws_for_alpha(a) for a in levels)
    for i in range(trials):
        trial = unbiased_gradient_trial(right, _seed(entropy, "gradients_bb", name, i), most)
        for a in levels:
            counts[a] += not unbiased_gradient_test(trial, a).ok
    hits = 0
    for i in range(n):
        trial = unbiased_gradient_trial(scaled, _seed(entropy, "gradients_bb_power", name, i),
                                        draws_for_alpha(POWER_ALPHA))
        hits += not unbiased_gradient_test(trial, POWER_ALPHA).ok
    need = white_point_m_needed()
    return [ladder_row(BLACKBOX_CHECK, right.name, WHERE, trials, counts),
            Row(f"{BLACKBOX_CHECK}: power, gradient ×{1 + POWER_EPS:g} detected",
                scaled.name, WHERE, n, (), (),
                f"power at α = {POWER_ALPHA:g} (measured; goal ≥ 0.1)",
                f"at the white-box point (‖x‖ = 0.8, ‖y‖ = 0.5) 10 % power would need "
                f"m ≈ {need} per draw", unstated=hits)]


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


def fd_map_trials(assumption_trials: int) -> int:
    """Examples of a feature map's finite-difference row: ``3·trials_to_certify(1e-3)`` = 8985 in
    a full run (room for a few rejections, the rule of ``calibration.rungs``), else
    ``assumption_trials`` (a small test run). The fifth-derivative assumption is false at the
    kinks of piecewise-linear maps (ReLU features): a stencil that straddles a kink, i.e. a
    pre-activation within ``h·|wᵀu|`` of 0, errs by O(1); this has a small, nonzero rate per
    example (seen once in 2995 examples of ``relu_features[iid]`` at e1fc6cf, pre-activation
    3.8e-6 against a step of 5.3e-6), so 2995 examples with no room for a rejection cannot
    certify 1e-3 for those maps. A map row costs ~1–8 s per 3000 examples; the attention rows
    (smooth targets, 3–10× dearer) keep ``assumption_trials``."""

    full = trials_to_certify(ASSUMPTION_LEVEL)
    return 3 * full if assumption_trials >= full else assumption_trials


def fd_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list:
    """The stated assumption of the gradcheck property on one map, measured at its stated level
    (``ASSUMPTION_LEVEL`` = 1e-3 per example, :func:`fd_map_trials` examples): each trial draws
    the map's parameters (d = 3, m = 4) and a 3 × 3 input (``0.8·N(0, 1)``) from fresh seeds, as
    the property draws them from its fixed seeds, and runs
    :func:`~kernel_verify.properties.gradient_checks.directional_differences` (3 directions) on
    torch CPU float64; a trial rejects when any direction exceeds its tolerance. Margin: the
    largest ``|numeric − analytic| / allowed`` seen."""
    import torch

    from kernel_verify.impls.torch.convert import to_torch
    from kernel_verify.properties.gradient_checks import directional_differences, draw

    target = _builtin(name)
    kw = {"positions": np.arange(3)} if target.has("positional") else {}
    trials = fd_map_trials(assumption_trials)
    rejections, worst = 0, 0.0
    for i in range(trials):
        p_seed = _seed(entropy, "gradients_fd", name, i, "params")
        x_seed = _seed(entropy, "gradients_fd", name, i, "input")
        params = to_torch(draw(target, p_seed, 3, 4), device="cpu", dtype=torch.float64)

        def fn(x, params=params):
            return target.torch_fn(x, params, target.config, **kw)

        x = torch.tensor(np.random.default_rng(x_seed).standard_normal((3, 3)) * 0.8,
                         dtype=torch.float64)
        ratio = max(r.ratio for r in directional_differences(fn, (x,), "float64", x_seed))
        rejections += not ratio <= 1
        worst = max(worst, ratio)
    return [Row(FD_CHECK, name, "torch:cpu float64", trials,
                    (ASSUMPTION_LEVEL,), (rejections,),
                    f"stated {ASSUMPTION_LEVEL:g} per example (model assumption)",
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
    ``q, k (1, 2, 4, 4)``, ``v (1, 2, 4, 3)`` by the property's own
    :func:`~kernel_verify.properties.gradient_checks.attention_qkv` from a fresh seed (the
    property: seed 21) and runs the target through its
    :func:`~kernel_verify.properties.gradient_checks.attention_fn` at a fresh attention seed (the
    property: 0), in the target's working dtype (float64, else float32), and
    :func:`~kernel_verify.properties.gradient_checks.directional_differences` on ``∂o/∂(q, k,
    v)``."""
    from kernel_verify.properties.gradient_checks import (
        attention_fn,
        attention_qkv,
        directional_differences,
    )

    target = _builtin(name)
    dtype = next(t for t in ("float64", "float32") if target.accepts("torch", t))
    modes = [c for c, claim in ((False, "noncausal"), (True, "causal")) if target.has(claim)]
    rows = []
    for causal in modes or [False]:
        rejections, worst = 0, 0.0
        for i in range(assumption_trials):
            seed = _seed(entropy, "gradients_fd_attention", name, int(causal), i)
            qkv = tuple(attention_qkv(seed, dtype, b=1, h=2, n=4, d=4))
            fn = attention_fn(target, causal, seed % 2**31)
            ratio = max(r.ratio for r in directional_differences(fn, qkv, dtype, seed))
            rejections += not ratio <= 1
            worst = max(worst, ratio)
        mode = "causal" if causal else "non-causal"
        rows.append(Row(FD_CHECK, name, f"torch:cpu {dtype}, {mode}", assumption_trials,
                            (ASSUMPTION_LEVEL,), (rejections,),
                            f"stated {ASSUMPTION_LEVEL:g} per example (model assumption)",
                            f"max error / tolerance = {worst:.2g}"))
    return rows


# --------------------------------------------------------------------------- low precision
LOW_CHECK = ("gradients: low precision vs float64, ∂L/∂q,k within 4ρ'·n·max|g₆₄| "
             "(no-cancellation assumption; ∂L/∂v derived)")
LOW_DTYPES = ("float32", "float16", "bfloat16")


def low_precision_cells(name: str) -> list[str]:
    """The dtypes ``test_low_precision_gradients_near_float64`` judges ``name`` in (the
    property's parameters: float32/float16/bfloat16 that the target accepts on torch, with
    float64, where the bound is not void: ``low_precision_backend``)."""
    from kernel_verify.properties.gradient_checks import low_precision_backend

    target = _builtin(name)
    if not target.accepts("torch", "float64"):
        return []
    return [d for d in LOW_DTYPES
            if target.accepts("torch", d) and low_precision_backend(target, d)[1] is None]


def low_precision_targets() -> list[str]:
    """The attention targets with at least one cell of :func:`low_precision_cells` (the
    property's targets are those of :func:`fd_attention_targets`)."""
    return [name for name in fd_attention_targets() if low_precision_cells(name)]


def low_precision_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list:
    """The stated assumption of ``test_low_precision_gradients_near_float64`` (``∂L/∂q,k`` of the
    low-precision run within ``4ρ'·n·max|g₆₄|``), at its stated level
    (:data:`~kernel_verify.calibration.ASSUMPTION_LEVEL` = 1e-3 per example), one row per dtype
    of :func:`low_precision_cells` and mode the target claims (the property runs every mode),
    on torch CPU (the only backend the property runs): each trial runs the property's own
    :func:`~kernel_verify.properties.gradient_checks.low_precision_gradients` with fresh seeds
    for the inputs, the upstream gradient and the target (the property: 28, 29, 0). A trial
    rejects when the property's assertion would fail: any element of ``∂L/∂(q, k, v)`` outside
    its bound or not finite (so the derived ``∂L/∂v`` bound is checked too). Margin: the
    largest ``|got − ref| / bound`` of ``q, k`` and of ``v``."""
    from kernel_verify.properties.gradient_checks import (
        low_precision_backend,
        low_precision_gradients,
    )

    target = _builtin(name)
    modes = [c for c, claim in ((False, "noncausal"), (True, "causal")) if target.has(claim)]
    rows = []
    for dtype in low_precision_cells(name):
        backend, _ = low_precision_backend(target, dtype)
        for causal in modes or [False]:
            rejections, worst_qk, worst_v = 0, 0.0, 0.0
            for i in range(assumption_trials):
                s_qkv, s_g, s_t = (_seed(entropy, "gradients_low", name, dtype, int(causal),
                                             i, part) for part in ("qkv", "g", "target"))
                got = low_precision_gradients(target, backend, causal, s_qkv, s_g, s_t % 2**31)
                ratios = {r.name: r.ratio for r in got}
                rejections += not max(ratios.values()) <= 1
                worst_qk = max(worst_qk, ratios["q"], ratios["k"])
                worst_v = max(worst_v, ratios["v"])
            mode = "causal" if causal else "non-causal"
            rows.append(Row(LOW_CHECK, name, f"torch:cpu {dtype} vs float64, {mode}",
                                assumption_trials, (ASSUMPTION_LEVEL,), (rejections,),
                                f"stated {ASSUMPTION_LEVEL:g} per example (model assumption)",
                                f"max error / bound: q,k {worst_qk:.2g}; v {worst_v:.2g}"))
    return rows


# --------------------------------------------------------------------------- forms
STATE_CHECK = ("forms: gradient through the state, float64 gradcheck within 100·u^(2/3)·F "
               "(finite-difference assumption)")


def _state_places(target, available: bool = True) -> list:
    """The backends ``test_gradients_flow_through_the_state`` runs ``target`` on: torch float64
    (CPU, CUDA), accepted, available here (``available=False``: those that are not)."""
    from kernel_verify.properties.attention_cases import for_target
    from kernel_verify.verify.backends import AXIS

    return [for_target(target, b) for b in AXIS
            if b.library == "torch" and b.dtype == "float64" and b.available == available
            and target.accepts(b.library, b.dtype)]


def state_gradient_targets() -> list[str]:
    """The attention targets ``test_gradients_flow_through_the_state`` judges: built-in, causal,
    offering a stateful or chunked form, claiming ``differentiable``, taking torch float64."""
    from kernel_verify.properties.builtin import builtin_targets
    from kernel_verify.properties.protocol import AttentionTarget

    return [t.name for t in builtin_targets() if isinstance(t, AttentionTarget)
            and t.has("causal") and (t.offers("stateful") or t.offers("chunked"))
            and t.has("differentiable") and t.accepts("torch", "float64")]


def state_gradient_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list:
    """The finite-difference assumption of ``test_gradients_flow_through_the_state`` at its
    stated level (1e-3 per example, ``assumption_trials`` examples per backend): each trial
    draws a layout i.i.d. from the support of the property's strategy
    (``random_shape(rng, max_t=6)``, the property's ``form_shapes(max_t=6)``; a layout with one
    token, where the property asserts nothing, is replaced by the next draw) and runs the
    property's own
    :func:`~kernel_verify.properties.checks.forms.state_gradient_check`; a trial
    rejects when gradcheck disagrees."""
    import numpy as np

    from kernel_verify.properties.checks.forms import random_shape, state_gradient_check

    target = _builtin(name)
    rows = []
    for b in _state_places(target):
        rng = np.random.default_rng(_seed(entropy, "forms_state_gradient", name, b.id))
        rejections = done = drawn = 0
        while done < assumption_trials:
            drawn += 1
            ok = state_gradient_check(target, b, random_shape(rng, max_t=6))
            if ok is None:
                continue
            done += 1
            rejections += not ok
        rows.append(Row(STATE_CHECK, name, f"{b.library}:{b.device} {b.dtype}, causal "
                            "(stateful/chunked forms)", assumption_trials,
                            (ASSUMPTION_LEVEL,), (rejections,),
                            f"stated {ASSUMPTION_LEVEL:g} per example (model assumption)",
                            f"{drawn - done} one-token layouts redrawn"))
    return rows
