"""Broken gate parametrisations (docs/math.md §23.1): a Gated DeltaNet that computes its gates
from a raw input, ``g = −exp(A_log)·softplus(a + dt_bias)`` (``gate_input="mamba"``), with the
defects of that step, as :class:`~kernel_verify.properties.gated_protocol.GatedAttentionTarget`
mutants over the built-in torch recurrence (float64 and float32).

The skeleton computes the gates by the switch's formula and runs the built-in log-gate forms
(:func:`kernel_verify.properties.builtin_delta.make_delta_forms`) on them; the control computes
them correctly through the same wrapper.

* ``gate_dt_bias_ignored``: ``g = −exp(A_log)·softplus(a)`` (the bias left out);
* ``gate_rounded_to_bfloat16``: the right formula, the gates rounded to bfloat16 before use (a
  gate kept in the half type of the activations): a relative error of ``2⁻⁹`` in ``g``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel_verify.properties.builtin_delta import (
    _backend_features,
    _head_axes,
    make_delta_forms,
)
from kernel_verify.properties.gated_protocol import GatedAttentionTarget, l2_features

__all__ = ["GATE_INPUT_CONTROLS", "GATE_INPUT_KILLERS", "GATE_INPUT_MUTANTS",
           "make_gate_input_target"]

DEFECTS = ("none", "dt_bias_ignored", "rounded_to_bfloat16")


def _gates(defect: str, a: Any, kw: dict, step: bool) -> Any:
    import torch

    a_log = _head_axes(kw["A_log"], a, step)
    dt = _head_axes(kw["dt_bias"], a, step)
    x = a if defect == "dt_bias_ignored" else a + dt
    g = -torch.exp(a_log) * torch.nn.functional.softplus(x)
    if defect == "rounded_to_bfloat16":
        g = g.to(torch.bfloat16).to(a.dtype)
    return g


def _wrap(forms: dict[str, Callable], defect: str) -> dict[str, Callable]:
    """The log-gate forms taking the raw input and ``A_log``, ``dt_bias`` instead."""
    def full(name: str) -> Callable:
        def form(q, k, v, a, **kw):
            params = {n: kw.pop(n) for n in ("A_log", "dt_bias")}
            return forms[name](q, k, v, _gates(defect, a, params, False), **kw)
        return form

    def step(state, q_t, k_t, v_t, a_t, **kw):
        params = {n: kw.pop(n) for n in ("A_log", "dt_bias")}
        return forms["step"](state, q_t, k_t, v_t, _gates(defect, a_t, params, True), **kw)

    out = {n: full(n) for n in ("parallel", "stateful", "chunked", "varlen", "padded")}
    return {**out, "step": step, "state_sums": forms["state_sums"]}


def make_gate_input_target(name: str, defect: str = "none") -> GatedAttentionTarget:
    """The skeleton (module docstring) with ``defect`` (``"none"``: the control)."""
    if defect not in DEFECTS:
        raise ValueError(f"defect must be one of {', '.join(DEFECTS)}, got {defect!r}")
    forms = make_delta_forms("gated_delta", phi=_backend_features(("sum_inside", 1e-6)))
    return GatedAttentionTarget(name, gates="scalar", transition="gated_delta",
                                gate_input="mamba", claims=frozenset({"differentiable"}),
                                features=l2_features(eps=1e-6, convention="sum_inside"),
                                backends=("torch",), dtypes=("float64", "float32"),
                                feature_ulps=6, **_wrap(forms, defect))


GATE_INPUT_MUTANTS: dict[str, tuple[str, str]] = {
    "gate_dt_bias_ignored": ("g = −exp(A_log)·softplus(a): dt_bias left out of the gate",
                             "dt_bias_ignored"),
    "gate_rounded_to_bfloat16": ("the gates −exp(A_log)·softplus(a + dt_bias) rounded to "
                                 "bfloat16 before use", "rounded_to_bfloat16"),
}
GATE_INPUT_KILLERS: dict[str, tuple[str, ...]] = dict.fromkeys(
    GATE_INPUT_MUTANTS, ("gated_forms::test_gated_forms_meet_the_exact_recurrence",))
GATE_INPUT_CONTROLS: dict[str, Callable[[], list]] = {
    "gate_input_correct": lambda: [make_gate_input_target("control:gate_input_correct")],
}


def __getattr__(attr: str) -> list:
    """``<mutant name>`` / ``control_<name>``: the targets (``kernel-verify check
    kernel_verify.mutants.gate_inputs:gate_dt_bias_ignored``)."""
    if attr in GATE_INPUT_MUTANTS:
        return [make_gate_input_target(f"mutant:{attr}", GATE_INPUT_MUTANTS[attr][1])]
    if attr.startswith("control_") and attr.removeprefix("control_") in GATE_INPUT_CONTROLS:
        return GATE_INPUT_CONTROLS[attr.removeprefix("control_")]()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
