"""The draws of the recurrent forms properties (properties/test_gated_forms.py): a target that
declares ``dv_equals_d`` only gets ``d_v = d``; the underflow run passes float64's underflow;
a target's own declaration is refused when it is not a bool."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_verify.properties.builtin_delta import delta_target
from kernel_verify.properties.checks.recurrent import (
    UNDERFLOW_LOG,
    draw_token_inputs,
    underflow_run_length,
)
from kernel_verify.properties.test_gated_forms import draw_shape

SQUARE = replace(delta_target("gated_delta"), name="square_only", dv_equals_d=True)
FREE = delta_target("gated_delta")


@settings(max_examples=60, deadline=None, database=None)
@given(data=st.data())
def test_dv_equals_d_is_kept_and_free_targets_draw_both(data):
    shape = draw_shape(data, SQUARE)
    assert shape.dv == shape.d
    free = draw_shape(data, FREE)
    assert (1 <= free.dv <= 3 or free.dv == 5) and (1 <= free.d <= 4 or free.d in (6, 9))


def test_free_targets_draw_unequal_widths_somewhere():
    """Without the declaration, d_v ≠ d is drawn (the shapes a transposed state breaks at)."""
    seen = set()

    @settings(max_examples=40, deadline=None, database=None)
    @given(data=st.data())
    def draw(data):
        s = draw_shape(data, FREE)
        seen.add(s.dv == s.d)

    draw()
    assert seen == {True, False}


@pytest.mark.parametrize("gates", ["scalar", "key_dim"])
def test_the_underflow_run_sums_below_float64_underflow(gates):
    target = delta_target("gated_delta") if gates == "scalar" else delta_target("kda")
    need = underflow_run_length(target)
    assert need == int(np.ceil(UNDERFLOW_LOG / 30.0)) == 26
    from kernel_verify.properties.checks.forms import Shape

    shape = Shape(2, 2, need + 3, 3, 2, 4, 5, 11)
    g = draw_token_inputs(target, shape, "underflow_run").g
    total = g.sum(axis=2)
    assert np.all(total < -UNDERFLOW_LOG)
    assert np.exp(total).max() == 0.0  # a linear-space product underflows in float64


def test_targets_without_a_reachable_underflow_keep_strong_runs():
    weak = replace(delta_target("gated_delta"), name="weak", min_log_gate=-5.0)
    assert underflow_run_length(weak) is None  # 152 tokens at −5: more than the cap
    assert underflow_run_length(delta_target("delta")) is None  # no gate


def test_dv_equals_d_must_be_a_bool():
    with pytest.raises(TypeError, match="dv_equals_d"):
        replace(FREE, dv_equals_d="yes")


def test_a_sigmoid_beta_with_negative_eigenvalues_is_two_sigmoid():
    """β through a sigmoid under ``negative_eigenvalues`` is ``2σ(logit)`` (fla's
    ``allow_neg_eigval``): the reference reads the drawn β ∈ [0, 2] back from its logit, and the
    built-in target computes the same (a new user's 2σ target failed against σ, error 1.06)."""
    from kernel_verify.properties.checks.forms import Shape
    from kernel_verify.properties.checks.recurrent import beta_of

    target = delta_target("delta", beta="sigmoid")
    assert target.has("negative_eigenvalues")
    shape = Shape(1, 1, 12, 2, 2, 6, 3, 0)
    ti = draw_token_inputs(target, shape, "mixed, β edges")
    beta = beta_of(target, ti)
    assert beta.max() <= 2.0 and beta.max() > 1.0  # the logit of β/2 read back as 2σ
    plain = replace(target, claims=target.claims - {"negative_eigenvalues"})
    np.testing.assert_allclose(beta_of(plain, ti), beta / 2, rtol=1e-15)


def test_the_builtin_two_sigmoid_target_meets_the_exact_recurrence():
    import kernel_verify

    result = kernel_verify.check([delta_target("delta", beta="sigmoid")], profile="ci",
                                 keyword="test_gated_forms_meet_the_exact_recurrence")
    assert result.ok and result.counts["pass"] == 1, result
