"""A sequence target that raises a shape error gets a hint naming the shape-contract fields
(properties/conftest.py `_shape_error_hint`); assertion failures of a property and errors
that do not read as shape errors get none."""

from __future__ import annotations

import numpy as np

from kernel_verify import AttentionTarget, FeatureMapTarget
from kernel_verify.properties.conftest import _shape_error_hint


def _attention(q, k, v, *, causal, seed=0):
    return v


_TARGET = AttentionTarget("needs_square", _attention, frozenset({"causal"}))


def test_a_shape_error_names_the_contract_fields():
    hint = _shape_error_hint(_TARGET, RuntimeError("shape '[1, 2, -1]' is invalid for size 30"))
    assert hint.startswith("E   hint: needs_square raised a shape error (RuntimeError)")
    for name in ("dv_equals_d=True", "length_multiple_of=N", "min_length=N"):
        assert name in hint


def test_no_hint_for_a_property_assertion_or_another_error():
    assert _shape_error_hint(_TARGET, AssertionError("shape of the output differs")) == ""
    assert _shape_error_hint(_TARGET, RuntimeError("CUDA out of memory")) == ""
    assert _shape_error_hint(None, RuntimeError("size mismatch")) == ""


def test_no_hint_for_a_target_without_a_shape_contract():
    fmap = FeatureMapTarget("m", "gaussian", frozenset({"deterministic"}),
                            sample_fn=lambda x, seed: np.asarray(x), m=1)
    assert _shape_error_hint(fmap, RuntimeError("size mismatch")) == ""


def test_a_gated_target_is_offered_only_the_fields_it_takes():
    """GatedAttentionTarget takes ``dv_equals_d`` only: the hint names no field its constructor
    refuses (a new user's ``min_length=2`` raised TypeError), and says T = 0 is drawn."""
    from kernel_verify.properties.gated_protocol import GatedAttentionTarget

    def stateful(q, k, v, g, *, initial_state=None, seed=0):
        return v, initial_state

    gated = GatedAttentionTarget("gated_square", gates="scalar", stateful=stateful,
                                 claims=frozenset(), features=lambda x, which: x)
    hint = _shape_error_hint(gated, IndexError("index -1 is out of bounds for dimension 1 "
                                               "with size 0"))
    assert "dv_equals_d=True" in hint and "T = 0" in hint
    assert "min_length" not in hint and "length_multiple_of" not in hint


def test_gradient_inputs_keep_to_the_shape_contract():
    """The fixed inputs of the attention gradient properties follow the declared contract: d_v = d
    for ``dv_equals_d``, T at least ``min_length`` and a multiple of ``length_multiple_of`` (a
    library kernel needing d_v = d failed three gradient properties with its own shape error,
    one needing T divisible by 4 failed six)."""
    from kernel_verify.properties.gradient_checks import attention_qkv, contract_shape

    square = AttentionTarget("square", _attention, frozenset({"causal"}), dv_equals_d=True)
    blocks = AttentionTarget("blocks", _attention, frozenset({"causal"}), length_multiple_of=4,
                             min_length=6)
    assert contract_shape(None, 5, 4) == (5, 3)
    assert contract_shape(_TARGET, 5, 4) == (5, 3)
    assert contract_shape(square, 5, 4) == (5, 4)
    assert contract_shape(blocks, 3, 4) == (8, 3)
    q, k, v = attention_qkv(21, b=1, h=2, n=5, d=4, target=square)
    assert q.shape == k.shape == v.shape == (1, 2, 5, 4)
    assert attention_qkv(21, n=5, d=4, target=blocks)[2].shape == (2, 2, 8, 3)
