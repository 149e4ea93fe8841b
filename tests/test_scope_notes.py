"""What ``kernel-verify check`` says it cannot reach, and the hint a half-type failure carries
(properties/test_gated_forms.py)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kernel_verify.api import _scope_note
from kernel_verify.properties.builtin_gated import builtin_gated_targets
from kernel_verify.properties.layouts import GATED_MAX_TOKENS, LONG_CHUNK_LENGTHS


def _delta():
    return next(t for t in builtin_gated_targets() if t.name.endswith(":gated_delta_rule"))


def test_a_target_with_its_own_block_and_no_chunk_sizes_is_told_the_drawn_lengths():
    t = replace(_delta(), chunked=None)
    note = _scope_note([t])
    assert t.name in note and f"at most {GATED_MAX_TOKENS} tokens" in note and "chunk_sizes" in note


def test_a_chunked_form_without_chunk_sizes_is_told_the_longest_sequence():
    """Its chunked form is given the suite's chunks, but a full-sequence form blocking
    internally (a fixed 64) is crossed by no drawn length: said, with the longest one."""
    t = _delta()
    note = _scope_note([t])
    assert t.name in note and f"up to {max(LONG_CHUNK_LENGTHS)} tokens" in note


def test_no_scope_note_where_sizes_are_declared():
    t = _delta()
    assert _scope_note([replace(t, chunk_sizes=(64,))]) == ""
    assert _scope_note([replace(t, chunked=None, chunk_sizes=(64,))]) == ""


def test_a_half_state_failure_names_the_state_dtype():
    import torch

    from kernel_verify.properties.checks.forms import Shape, draw_inputs
    from kernel_verify.properties.test_gated_forms import naming_a_half_state
    from kernel_verify.properties.token_inputs import TokenInputs
    from kernel_verify.verify.backends import get_backend

    base = next(t for t in builtin_gated_targets() if t.name.endswith(":gated_scalar"))

    def stateful(q, k, v, g, *, initial_state=None, seed=0, **kw):
        out, s = base.stateful(q, k, v, g, initial_state=initial_state, seed=seed, **kw)
        return out, tuple(p.to(torch.bfloat16) for p in s)  # (S, z) rounded to the half type

    t = replace(base, stateful=stateful, chunked=None)
    backend = get_backend("torch:cpu-bfloat16")
    shape = Shape(1, 1, 3, 2, 2, 1, 1, 0)
    x = draw_inputs(shape)
    g = TokenInputs(np.full((1, 1, 3), -0.1))
    with pytest.raises(AssertionError, match=r"returns its state in torch\.bfloat16"):
        with naming_a_half_state(t, backend, x, g, 0):
            raise AssertionError("the property's failure")
    with pytest.raises(AssertionError, match=r"^the property's failure$"):  # float32: unchanged
        with naming_a_half_state(t, get_backend("torch:cpu-float32"), x, g, 0):
            raise AssertionError("the property's failure")


def test_an_attention_target_without_chunk_sizes_is_told_the_blocks_crossed():
    from kernel_verify import AttentionTarget
    from kernel_verify.properties.layouts import DEFAULT_CHUNKS

    def softmax(q, k, v, *, causal, seed=0):
        s = q @ k.swapaxes(-1, -2)
        w = np.exp(s - s.max(-1, keepdims=True))
        return (w / w.sum(-1, keepdims=True)) @ v

    t = AttentionTarget("sm", softmax, frozenset({"noncausal"}))
    note = _scope_note([t])
    assert "sm" in note and f"lengths up to {2 * max(DEFAULT_CHUNKS) + 1}" in note
    assert _scope_note([replace(t, chunk_sizes=(64,))]) == ""


def test_a_model_whose_declared_boundaries_pass_max_len_is_told_so():
    from kernel_verify.properties.builtin_models import model_targets

    base = next(t for t in model_targets() if t.chunk_sizes)
    c = max(base.chunk_sizes)
    short = replace(base, max_len=c + 2)  # 2c + 1 > max_len − 2: not drawn
    note = _scope_note([short])
    assert short.name in note and str(2 * c + 1) in note and "raise max_len" in note
    assert "max_len" not in _scope_note([replace(base, max_len=2 * c + 3)])
