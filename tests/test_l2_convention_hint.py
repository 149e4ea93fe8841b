"""The ε-convention hint of the recurrent forms property (properties/test_gated_forms.py,
``l2_convention_hint``): it names another convention only where the inputs tell the two apart.

A failing output that meets another normalisation convention within the bound is evidence of
that convention only if the declared and the other convention's exact outputs differ by more
than the bound at those inputs; otherwise the hint would blame the ε for a defect elsewhere (a
new user's bfloat16 target got a hint naming a convention its inputs could not distinguish)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kernel_verify.properties import test_gated_forms as tgf
from kernel_verify.properties.builtin_delta import delta_target
from kernel_verify.properties.checks.forms import Shape, draw_inputs
from kernel_verify.properties.checks.recurrent import (
    draw_token_inputs,
    exact,
    seen_gates,
    seen_inputs,
)
from kernel_verify.properties.gated_protocol import l2_features
from kernel_verify.verify.backends import get_backend

TARGET = delta_target("gated_delta")  # declares l2_features(eps=1e-6, "sum_inside")
SHAPE = Shape(1, 2, 7, 3, 2, 4, 3, 5)


@pytest.fixture(autouse=True)
def final_replay(monkeypatch):
    monkeypatch.setattr(tgf, "_final_replay", lambda: True)


def _inputs(backend, scale: float):
    x = draw_inputs(SHAPE)
    x = replace(x, q=scale * x.q, k=scale * x.k)
    return (seen_inputs(x, backend),
            seen_gates(draw_token_inputs(TARGET, SHAPE, "mixed"), backend))


def test_a_convention_the_inputs_tell_apart_is_named():
    backend = get_backend("numpy-float64")
    x, g = _inputs(backend, 1e-3)  # tiny q and k: ε's placement moves the output
    other = replace(TARGET, features=l2_features(eps=1e-6, convention="root_outside"))
    out = exact(other, backend, x, g)[0]
    hint = tgf.l2_convention_hint(TARGET, backend, x, g, out, 0)
    assert hint is not None and "convention='root_outside'" in hint and "eps=1e-06" in hint


def test_no_hint_where_the_conventions_agree_within_the_bound():
    """bfloat16 at unit-size rows: every convention's truth lies within the bound of the
    declared one's, so an output between them is no evidence for either: no hint."""
    backend = get_backend("torch:cpu-bfloat16")
    if backend.skip_reason:
        pytest.skip(backend.skip_reason)
    x, g = _inputs(backend, 1.0)
    ref0, _, bound, _ = exact(TARGET, backend, x, g)
    other = replace(TARGET, features=l2_features(eps=1e-5, convention="root_outside"))
    ref1 = exact(other, backend, x, g)[0]
    assert float(np.max(np.abs(ref1 - ref0) / bound)) <= 1  # the premise: indistinguishable
    out = ref0 + 1.5 * (ref1 - ref0)  # nearer the other convention than the declared one
    assert float(np.max(np.abs(out - ref1) / bound)) <= 1  # the old hint fired on this
    assert tgf.l2_convention_hint(TARGET, backend, x, g, out, 0) is None
