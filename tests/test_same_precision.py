"""The same-precision reference criterion (verify/same_precision.py, issue #44): its allowance,
its plain evaluations against the exact references (outputs and gradients), the evidence it
gives, the switch the power report uses, the gradient criterion of
``test_low_precision_gradients_near_float64`` on a correct and a 0.1 %-off backward, and its
calibration part on a few trials."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.properties.evidence import check_same_precision, same_precision_criterion
from kernel_verify.verify import same_precision as sp
from kernel_verify.verify.references.recurrence import dplr_terms, recurrence_mp

U32 = 2.0**-24


def test_allowance_is_c_times_the_reference_error_plus_one_rounding():
    eta32, eta16 = 2.0**-149, 2.0**-24  # smallest subnormals: the absolute part of a rounding
    assert sp.allowance(1e-6, 2.0, compute="float32", output="float32", c=4.0) == (
        4.0 * 1e-6 + U32 * 2.0 + eta32)
    # a reference error below one rounding of the compute dtype counts as one rounding
    assert sp.allowance(0.0, 2.0, compute="float32", output="float32", c=4.0) == (
        5 * (U32 * 2.0 + eta32))
    # a half type computed in float32: R roundings of the half type, not multiplied by c
    got = sp.allowance(0.0, 1.0, compute="float32", output="float16", c=4.0)
    assert got == 4.0 * (U32 + eta32) + sp.HALF_ROUNDINGS * (2.0**-11 + eta16)


def test_an_output_below_the_half_range_may_round_to_zero():
    """A float16 output of 2.6e-12 (below its smallest subnormal, 6e-8) is 0 in float16: the
    rounding's absolute part, not a defect."""
    exact = np.full((1, 1, 1, 2), 2.6e-12)
    assert sp.compare(np.zeros_like(exact), exact, exact, compute="float32", output="float16").ok


@pytest.mark.parametrize(("kw", "name"), [({"err_ref": -1.0}, "err_ref"),
                                          ({"scale": float("nan")}, "scale"),
                                          ({"c": 0.0}, "c"),
                                          ({"compute": "float8"}, "compute"),
                                          ({"output": "int8"}, "output")])
def test_bad_arguments_are_named(kw, name):
    args = {"err_ref": 0.0, "scale": 1.0, "compute": "float32", "output": "float32", **kw}
    with pytest.raises(ValueError, match=name):
        sp.allowance(args.pop("err_ref"), args.pop("scale"), **args)


def test_compare_passes_the_reference_itself_and_fails_a_scaled_output():
    rng = np.random.default_rng(0)
    exact = rng.standard_normal((2, 3, 5, 2))
    ref = exact.astype(np.float32).astype(np.float64)
    ok = sp.compare(ref, exact, ref, compute="float32", output="float32")
    assert ok.ok and ok.needed <= 1.0
    bad = sp.compare(exact * (1 + 1e-4), exact, ref, compute="float32", output="float32")
    assert not bad.ok and bad.needed > sp.FACTOR
    assert "same-precision reference's error" in bad.text() and f"c = {sp.FACTOR:g}" in bad.text()
    # several plain evaluations: the larger error counts
    worse = exact * (1 + 1e-3)
    assert sp.compare(exact * (1 + 1e-4), exact, [ref, worse], compute="float32",
                      output="float32").ok
    nan = exact.copy()
    nan[0, 0, 0, 0] = np.nan
    assert not sp.compare(nan, exact, ref, compute="float32", output="float32").ok
    with pytest.raises(ValueError, match="one shape"):
        sp.compare(exact[..., :1], exact, ref, compute="float32", output="float32")


def test_causal_attention_plain_in_float64_is_the_exact_formula():
    rng = np.random.default_rng(1)
    fq, fk = rng.uniform(0.1, 1.0, (2, 1, 6, 3)), rng.uniform(0.1, 1.0, (2, 1, 6, 3))
    v = rng.standard_normal((2, 1, 6, 2))
    w = np.tril(fq @ np.swapaxes(fk, -1, -2))
    want = (w @ v) / w.sum(-1, keepdims=True)
    np.testing.assert_allclose(sp.causal_attention_plain(fq, fk, v, compute="float64"), want,
                               rtol=1e-13)
    lo = sp.causal_attention_plain(fq, fk, v, compute="float32")
    assert 0 < np.abs(lo - want).max() < 1e-5


@pytest.mark.parametrize("transition", ["decay", "gated_delta", "kda"])
@pytest.mark.parametrize("cumulative", [False, True])
def test_recurrence_plain_in_float64_meets_the_exact_recurrence(transition, cumulative):
    rng = np.random.default_rng(2)
    n, d = 7, 3
    q, k = rng.standard_normal((1, 2, n, d)), rng.standard_normal((1, 2, n, d)) / 2
    v = rng.standard_normal((1, 2, n, 2))
    gshape = (1, 2, n, d) if transition == "kda" else (1, 2, n)
    inputs = {"g": -rng.exponential(1.0, gshape)}
    if transition != "decay":
        inputs["beta"] = rng.uniform(0, 1, (1, 2, n))
    want, _ = recurrence_mp(q, k, v, transition=transition, **inputs)
    lam, x, y, w = dplr_terms(transition, k, **inputs)
    got = sp.recurrence_plain(q, v, lam, x, y, w, compute="float64", cumulative=cumulative)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    lo = sp.recurrence_plain(q, v, lam, x, y, w, compute="float32", cumulative=cumulative)
    assert np.abs(lo - want).max() < 1e-4


def test_a_zero_decay_stays_zero_in_the_cumulative_form():
    q = k = np.ones((1, 1, 3, 1))
    v = np.arange(1.0, 4.0).reshape(1, 1, 3, 1)
    g = np.array([[[0.0, -np.inf, 0.0]]])
    lam, x, y, w = dplr_terms("decay", k, g=g)
    got = sp.recurrence_plain(q, v, lam, x, y, w, compute="float32", cumulative=True)
    np.testing.assert_array_equal(got[0, 0, :, 0], [1.0, 2.0, 5.0])


def test_evidence_names_both_errors_and_the_switch_turns_it_off():
    exact = np.ones((1, 1, 2, 1))
    got = exact * (1 + 1e-3)
    with pytest.raises(AssertionError, match=r"same-precision reference.s error .*\(c = "):
        check_same_precision(got, exact, exact, compute="float32", output="float32", what="w")
    with same_precision_criterion(False):
        check_same_precision(got, exact, exact, compute="float32", output="float32", what="w")
    with pytest.raises(AssertionError):  # restored after the block
        check_same_precision(got, exact, exact, compute="float32", output="float32", what="w")


@pytest.mark.parametrize("name", ["attention:float32", "gated:float32", "gated:bfloat16",
                                  "gradients:float32", "gradients:float16"])
def test_calibration_part_runs_correct_targets_without_false_alarms(name):
    from kernel_verify.calibration.same_precision import same_precision_rows, unit_names

    assert name in unit_names()
    (row,) = same_precision_rows(name, 0, 12345, 14)
    assert row.trials > 0 and row.rejections == (0,), row
    assert "largest" in row.margin


@pytest.mark.parametrize("transition", ["decay", "gated_delta", "kda", "comba"])
@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_recurrence_chunked_plain_in_float64_meets_the_exact_recurrence(transition, chunk):
    rng = np.random.default_rng(3)
    n, d = 7, 3
    q, k = rng.standard_normal((2, 1, n, d)), rng.standard_normal((2, 1, n, d)) / 2
    v = rng.standard_normal((2, 1, n, 2))
    gshape = (2, 1, n, d) if transition == "kda" else (2, 1, n)
    inputs = {"g": -rng.exponential(1.0, gshape)}
    if transition != "decay":
        inputs["beta"] = rng.uniform(0, 1, (2, 1, n))
    if transition == "comba":
        inputs["p"] = rng.standard_normal((2, 1, n, d)) / 3
    want, _ = recurrence_mp(q, k, v, transition=transition, **inputs)
    lam, x, y, w = dplr_terms(transition, k, **inputs)
    got = sp.recurrence_chunked_plain(q, v, lam, x, y, w, compute="float64", chunk=chunk)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)
    lo = sp.recurrence_chunked_plain(q, v, lam, x, y, w, compute="float32", chunk=chunk)
    assert np.abs(lo - want).max() < 1e-4
    assert sp.recurrence_chunked_plain(q, v, lam, x, y, w, compute="bfloat16", chunk=chunk) is None


def test_comba_and_rwkv7_keep_the_derived_bound_alone():
    """A general rank-one transition has no plain evaluation that bounds its chunked kernels
    (properties/checks/recurrent.py, PLAIN_TRANSITIONS): no same-precision reference."""
    from kernel_verify.properties.builtin_gated import builtin_gated_targets
    from kernel_verify.properties.checks.recurrent import PLAIN_TRANSITIONS, plain

    assert {"comba", "rwkv7"}.isdisjoint(PLAIN_TRANSITIONS)
    comba = next(t for t in builtin_gated_targets() if t.transition == "comba")
    assert plain(comba, None, None, None, compute="float32") is None


# ------------------------------------------------------------------ the gradient criterion
def _closed_form_softmax_grads(q, k, v, g, causal):
    """``∂L/∂(q, k, v)`` of ``softmax(qkᵀ/√d)v`` per batch element and head by the exact mpmath
    reference (verify/references/gradients.py), float64."""
    from kernel_verify.verify.references.gradients import softmax_attention_grads_mp
    from kernel_verify.verify.references.mp import to_float

    out = [np.empty_like(q), np.empty_like(k), np.empty_like(v)]
    for idx in np.ndindex(*q.shape[:-2]):
        for o, r in zip(out, softmax_attention_grads_mp(q[idx], k[idx], v[idx], g[idx],
                                                        causal=causal), strict=True):
            o[idx] = to_float(r)
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_softmax_gradients_plain_in_float64_are_the_exact_gradients(causal):
    rng = np.random.default_rng(4)
    q, k = rng.standard_normal((1, 2, 5, 3)), rng.standard_normal((1, 2, 5, 3))
    v, g = rng.standard_normal((1, 2, 5, 2)), rng.standard_normal((1, 2, 5, 2))
    want = _closed_form_softmax_grads(q, k, v, g, causal)
    got = sp.softmax_attention_gradients_plain(q, k, v, g, compute="float64", causal=causal)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    lo = sp.softmax_attention_gradients_plain(q, k, v, g, compute="float32", causal=causal)
    err = max(float(np.abs(a - b).max()) for a, b in zip(lo, want, strict=True))
    assert 0 < err < 1e-5  # rounded in float32: off by a few of its roundings, not exact


@pytest.mark.parametrize("causal", [False, True])
def test_feature_gradients_plain_in_float64_are_the_closed_form(causal):
    """Against ``c_ij = G_iᵀ(v_j − o_i)/D_i``, ``∂L/∂φq_i = Σ_j c_ij φk_j``, ``∂L/∂q_i =
    J_iᵀ∂L/∂φq_i``, ``∂L/∂v_j = Σ_i P_ij G_i`` (properties/checks/declared.py)."""
    from kernel_verify.properties.checks.declared import exact_gradients

    rng = np.random.default_rng(5)
    fq, fk = rng.uniform(0.1, 1.0, (2, 1, 6, 4)), rng.uniform(0.1, 1.0, (2, 1, 6, 4))
    jq, jk = rng.standard_normal((2, 1, 6, 4, 3)), rng.standard_normal((2, 1, 6, 4, 3))
    v, g = rng.standard_normal((2, 1, 6, 2)), rng.standard_normal((2, 1, 6, 2))
    want = exact_gradients(fq, fk, jq, jk, v, g, causal)
    got = sp.feature_attention_gradients_plain(fq, fk, jq, jk, v, g, compute="float64",
                                               causal=causal)
    for a, name in zip(got, "qkv", strict=True):
        np.testing.assert_allclose(a, want[name], rtol=1e-11, atol=1e-13)
    lo = sp.feature_attention_gradients_plain(fq, fk, jq, jk, v, g, compute="float32",
                                              causal=causal)
    err = max(float(np.abs(a - want[n]).max()) for a, n in zip(lo, "qkv", strict=True))
    assert 0 < err < 1e-5


def test_gradient_plain_names_bad_shapes():
    x = np.ones((1, 1, 3, 2))
    with pytest.raises(ValueError, match="jq, jk"):
        sp.feature_attention_gradients_plain(x, x, np.ones((1, 1, 3, 2, 2)),
                                             np.ones((1, 1, 3, 1, 2)), x, x,
                                             compute="float32", causal=True)
    with pytest.raises(ValueError, match=r"q, k must have one shape .* and v"):
        sp.softmax_attention_gradients_plain(x, x, np.ones((1, 1, 2, 2)), x,
                                             compute="float32", causal=True)
    with pytest.raises(ValueError, match="g must"):
        sp.softmax_attention_gradients_plain(x, x, x, np.ones((1, 1, 3, 5)),
                                             compute="float32", causal=True)
    with pytest.raises(ValueError, match="compute"):
        sp.softmax_attention_gradients_plain(x, x, x, x, compute="float8", causal=True)


def _low_precision_property(target, dtype="float32"):
    from kernel_verify.properties.test_gradients import test_low_precision_gradients_near_float64

    test_low_precision_gradients_near_float64(target=target, dtype=dtype,
                                              record_property=lambda *a: None)


def test_gradient_criterion_kills_a_dk_off_by_0_1_percent_that_the_bound_lets_through():
    """``lowp_f32_dk_times_1_001`` (kernel_verify/mutants/lowp_paths.py): the float32 ``∂L/∂k``
    ×1.001 passes the derived bound alone and fails the criterion, whose message gives both
    errors; its twin passes both."""
    from kernel_verify.mutants import lowp_paths

    (bad,) = lowp_paths.lowp_f32_dk_times_1_001
    (twin,) = lowp_paths.control_lowp_taylor_f64_f32
    with same_precision_criterion(False):
        _low_precision_property(bad)
    with pytest.raises(AssertionError, match=r"∂L/∂k in float32 .*same-precision reference.s "
                                             r"error .*\(c = 128"):
        _low_precision_property(bad)
    _low_precision_property(twin)


def test_self_attention_gradient_reference_collects_both_paths():
    """A self-attention-only target (``k`` is ``q``): its ``∂L/∂q`` carries the query and the key
    paths, and so does the plain reference; a correct one passes the criterion in float32."""
    import dataclasses

    from kernel_verify.mutants import lowp_paths
    from kernel_verify.properties.gradient_checks import (
        low_precision_backend,
        low_precision_gradients,
    )

    (twin,) = lowp_paths.control_lowp_taylor_f64_f32
    selfish = dataclasses.replace(twin, self_attention_only=True)
    backend, void = low_precision_backend(selfish, "float32")
    assert void is None
    for causal in (False, True):
        got = {r.name: r for r in low_precision_gradients(selfish, backend, causal)}
        assert not got["k"].ref.any() and not got["k"].plain.any()
        assert np.abs(got["q"].plain - got["q"].ref).max() < 1e-5 * np.abs(got["q"].ref).max()
        assert all(r.same_precision().ok for r in got.values())


# ------------------------------------------------------------------ the running-sum evaluation
def test_running_sum_error_counts_c_G_times_never_looser_than_c():
    """``allowed = min(c·B + c_G·e_G, c·max(B, e_G)) + R·u_o·Y`` (module docstring): with the
    token loop's error 1e-7 and the running-sum loop's 1e-5 the second term is c_G·1e-5, not
    c·1e-5; with both equal the old allowance c·B is kept."""
    exact = np.ones((1, 1, 4, 2))
    u = 2.0 ** -24
    r = exact + 1e-7
    r_g = sp.cumulative(exact + 1e-5)
    c = sp.compare(exact, exact, [r, r_g], compute="float32", output="float32")
    b = max(1e-7, u)
    want = min(sp.FACTOR * b + sp.CUMULATIVE_FACTOR * 1e-5, sp.FACTOR * max(b, 1e-5)) + u
    assert c.allowed == pytest.approx(want, rel=1e-6)
    assert c.allowed < sp.FACTOR * 1e-5  # tighter than counting the running sums c times
    same = sp.compare(exact, exact, [r, sp.cumulative(r)], compute="float32", output="float32")
    plain = sp.compare(exact, exact, [r], compute="float32", output="float32")
    assert same.allowed == pytest.approx(plain.allowed, rel=1e-12)


def test_cumulative_marker_survives_slicing_and_is_not_enough_alone():
    r_g = sp.cumulative(np.zeros((1, 1, 3, 2)))
    assert isinstance(r_g[..., 1:, :], type(r_g))
    with pytest.raises(ValueError, match="not marked cumulative"):
        sp.compare(np.zeros((1, 1, 3, 2)), np.zeros((1, 1, 3, 2)), [r_g], compute="float32",
                   output="float32")
