"""The recurrent judge checks a white-box target's state itself (``state_sums``) against the
exact state, not only through the probe continued from it: a state scaled by ``1 + 10⁻⁶`` in
float64 is named as the final state wherever the judge reads a state (split invariance, packed
sequences, padding: properties/checks/recurrent.py, ``ByTheTruth.state``)."""

from __future__ import annotations

import pytest

from kernel_verify.properties.attention_cases import for_target
from kernel_verify.properties.builtin_delta import delta_target
from kernel_verify.properties.checks.forms import Shape, draw_inputs
from kernel_verify.properties.checks.recurrent import (
    ByTheTruth,
    draw_token_inputs,
    run_any,
    seen_gates,
    seen_inputs,
)
from kernel_verify.properties.checks.transition_forms import probe_for
from kernel_verify.verify.backends import AXIS

torch = pytest.importorskip("torch")


def test_a_scaled_state_is_named_as_the_state():
    target = delta_target("gated_delta", backends=("torch",), dtypes=("float64",))
    backend = for_target(target, next(b for b in AXIS if b.library == "torch"
                                      and b.device == "cpu" and b.dtype == "float64"))
    shape = Shape(b=1, h=1, t=6, d=3, dv=2, chunk=4, cut=3, seed=11)
    x = seen_inputs(draw_inputs(shape), backend)
    g = seen_gates(draw_token_inputs(target, shape, "mixed"), backend)
    judge = ByTheTruth(target, backend, shape.seed)
    want = judge.whole(x, g)
    _, state = run_any(target, backend, x, g, seed=shape.seed)
    probe = probe_for(target, backend, shape)
    judge.state(state, want, probe, "correct")  # the correct state passes
    scaled = (state[0] * (1.0 + 1e-6),)
    with pytest.raises(AssertionError, match="scaled final state S"):
        judge.state(scaled, want, probe, "scaled")
