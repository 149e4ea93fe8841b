"""A flag on a report page means the theory or the code may be wrong (issue #35): the guaranteed
band decides where it is informative, and a flag is resolved by a second measurement into
theory confirmed / not decidable at these draws / theory wrong / estimator wrong
(:mod:`kernel_verify.report.measure`, docstring). Each statistical call here runs at
``α = 1e-6`` with a known false-alarm rate (the variance tests of ``verify.stats``); 5 such
calls: false alarm ≤ 5e-6 per run."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.impls.registry import get
from kernel_verify.properties.checks import estimates as props
from kernel_verify.report import mappage, measure

ALPHA = 1e-6


def _kernel(target, x, y) -> float:
    from kernel_verify.properties.unbiased_checks import kernel_value

    return float(kernel_value(target, target.kernel, x, y))


@pytest.mark.statistical(assertions=3)
def test_the_guaranteed_band_keeps_the_right_variance_and_rejects_a_doubled_spread():
    """rff_pairs[iid], m = 8: at 300 draws (the quick page's) the exact-fourth-moment band holds
    the estimator and is informative (half-width ≤ the theory variance: Catoni's test on
    (X − k)², half-width 0.0054; the median of means' was 2.49 times wider, 0.0134 > 0.0103);
    at 3000 it is informative,
    holds the estimator and rejects the same draws spread twice as wide (variance ×4, the size
    of a √m scaling slip at m = 4)."""
    target = get("rff_pairs[iid]")
    x, y = measure.pair(8)
    k = _kernel(target, x, y)
    var = props.exact_variance(target, x, y, 8)
    few = measure.guaranteed_variance_test(target, props.estimates(target, x, y, 8, 11, 300), x,
                                           y, 8, k, k, var, ALPHA)
    assert few is not None and few[2] and not few[0], few
    samples = props.estimates(target, x, y, 8, 11, 3000)
    ok = measure.guaranteed_variance_test(target, samples, x, y, 8, k, k, var, ALPHA)
    bad = measure.guaranteed_variance_test(target, k + 2 * (samples - k), x, y, 8, k, k, var,
                                           ALPHA)
    assert ok is not None and bad is not None
    assert ok[2] and not ok[0], ok[1]
    assert bad[0], bad[1]


@pytest.mark.statistical(assertions=2)
def test_a_flag_resolves_into_estimator_wrong_theory_wrong_or_confirmed(monkeypatch):
    """The second measurement of a flagged point: with the map's own draws the theory is
    confirmed; with draws spread twice as wide (a planted estimator bug) and the theory's two
    routes agreeing, the estimator is wrong and the page FAILs; with the theory's routes
    disagreeing, the theory is wrong."""
    target = get("rff_pairs[iid]")
    x, y = measure.pair(8)
    k = _kernel(target, x, y)
    var = props.exact_variance(target, x, y, 8)
    outcome, text = measure.resolve_flag(target, x, y, 8, k, k, var, 300, 5, ALPHA, 200, 0.999)
    assert outcome == "theory confirmed", text
    real = measure.estimates
    monkeypatch.setattr(measure, "estimates",
                        lambda *a: k + 2 * (real(*a) - k))
    outcome, text = measure.resolve_flag(target, x, y, 8, k, k, var, 300, 5, ALPHA, 200, 0.999)
    assert outcome == "estimator wrong" and "two routes agree" in text, text
    data = {"accuracy_ok": True, "properties": [], "gradients": [], "gradient_bias": None,
            "measurement": {"points": [{"test_ok": True, "flag": f"m = 8: {text}",
                                        "resolution": outcome}], "geometry": []}}
    verdict, reasons = mappage._verdict(data, True)
    assert verdict == "FAIL" and any("estimator wrong" in r for r in reasons), reasons
    monkeypatch.setattr(measure, "theory_second_route", lambda *a: (var, 1.5 * var))
    outcome, text = measure.resolve_flag(target, x, y, 8, k, k, var, 300, 5, ALPHA, 200, 0.999)
    assert outcome == "theory wrong", text


def test_a_heavy_tail_point_is_not_decidable_and_says_how_many_draws():
    """softmax_positive[orthogonal] at ‖x + y‖ = 2.5, ‖x − y‖ = 1, m = 16 (a point the quick
    report flagged): the guaranteed band (one-row fourth-moment bound) exists but would need far
    more draws than the second measurement; the resolution says how many."""
    target = get("softmax_positive[orthogonal]")
    x, y = measure.sum_difference_pair(8, 2.5, 1.0)
    k = _kernel(target, x, y)
    var = props.exact_variance(target, x, y, 16)
    samples = props.estimates(target, x, y, 16, 3, 100)
    g = measure.guaranteed_variance_test(target, samples, x, y, 16, k, k, var, ALPHA)
    assert g is not None and not g[2], "the one-row bound should be uninformative here"
    outcome, text = measure.resolve_flag(target, x, y, 16, k, k, var, 100, 3, ALPHA, 100, 0.999)
    assert outcome == "not decidable" and "would need about" in text, text



@pytest.mark.parametrize("name", ["softmax_positive[simplex]", "darkformer"])
def test_heavy_tail_points_of_the_newer_maps_have_a_guaranteed_band(name):
    """‖x‖ = ‖y‖ = 1.5 at 60°, m = 16, the point the full report flagged "unresolved" for these
    two correct maps: simplex rows are Gaussian marginally (a Haar rotation of the simplex with
    χ norms), so the one-row fourth-moment bound holds; DARKFormer's exact fourth moment comes
    from its closed raw moments (FAVOR+'s at (Mx, My)) where the quadrature does not converge.
    The band exists, is uninformative at these draws, and the flag resolves without
    "unresolved"."""
    target = get(name)
    x, y = measure.pair(8, 1.5, 1.5, 60.0)
    k = _kernel(target, x, y)
    var = props.exact_variance(target, x, y, 16)
    if name == "darkformer":
        mu4, v = props.exact_fourth_moment(target, x, y, 16)
        assert abs(v - var) <= 1e-9 * var and mu4 > 0, (mu4, v, var)
    samples = props.estimates(target, x, y, 16, 5, 200)
    g = measure.guaranteed_variance_test(target, samples, x, y, 16, k, k, var, ALPHA)
    assert g is not None and not g[2], g
    outcome, text = measure.resolve_flag(target, x, y, 16, k, k, var, 200, 5, ALPHA, 100, 0.999)
    assert outcome in ("not decidable", "theory confirmed"), text

def test_the_pages_gradient_truth_has_a_second_route_and_agrees():
    """The generative page's ∇ₓk at the default pair (d = 8: six zero coordinates of x − y,
    where the unsigned cache key of format 1 gave 0) against the quadrature of −E[sin(gᵀδ)g]:
    within 1e-8 (both validated to 1e-18 times |g_j| ≤ 3), and components 2–7 are not 0."""
    from kernel_verify.report import gradients as grad

    target = get("generative")
    x, y = measure.pair(8)
    page = grad.kernel_gradient(target, x, y)
    second = grad.truth_second_route(target, x, y)
    assert second is not None
    assert np.max(np.abs(page - second)) <= 1e-8, (page, second)
    assert np.all(np.abs(page[2:]) > 1e-3), page
