"""Differentiable gated mutants: the built-in torch gated target with one defect of its
gradient or state route each (the NumPy skeleton of :mod:`kernel_verify.mutants.gated` has no
autograd, so these are the defects only a torch target can carry).

* ``gated_torch_initial_state_detached``: every form detaches the initial state / carried state
  from the graph (a cache that cuts the gradient of the prefill);
* ``gated_torch_gates_detached``: the log-gates enter every form detached (no gradient to the
  gate projection: a gate that cannot be learned);
* ``gated_torch_dq_scaled``: the backward of q scaled by 1.01 (a hand-written backward off by a
  constant; the forward is exact);
* ``gated_torch_state_keeps_keys``: the state carries every key seen so far beside ``(S, z)``
  (a cache that grows with the sequence).

The correct twin ``control_gated_torch_correct`` is the same wrapper with no defect.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from kernel_verify.mutants.attention import scale_gradient
from kernel_verify.properties.builtin_gated import gated_target
from kernel_verify.properties.gated_protocol import GatedAttentionTarget


def _forms(base: GatedAttentionTarget, *, detach_state: bool = False,
           detach_gates: bool = False, dq_factor: float | None = None,
           keep_keys: bool = False) -> dict[str, Any]:
    def st_in(state):
        if state is None:
            return None
        core = tuple(state[:2])
        return tuple(s.detach() for s in core) if detach_state else core

    def ins(q, g):
        if detach_gates:
            g = g.detach()
        if dq_factor is not None and q.requires_grad:
            q = scale_gradient(q, dq_factor)
        return q, g

    def out_state(state, k, before=None):
        if not keep_keys:
            return state
        seen = k if before is None or len(before) < 3 else torch.cat([before[2], k], dim=-2)
        return (*state, seen)

    def chunked(q, k, v, g, *, chunk_size, initial_state=None, seed=0):
        q, g = ins(q, g)
        o, s = base.chunked(q, k, v, g, chunk_size=chunk_size,
                            initial_state=st_in(initial_state), seed=seed)
        return o, out_state(s, k, initial_state)

    def parallel(q, k, v, g, *, initial_state=None, seed=0):
        q, g = ins(q, g)
        o, s = base.parallel(q, k, v, g, initial_state=st_in(initial_state), seed=seed)
        return o, out_state(s, k, initial_state)

    def stateful(q, k, v, g, *, initial_state=None, seed=0):
        q, g = ins(q, g)
        o, s = base.stateful(q, k, v, g, initial_state=st_in(initial_state), seed=seed)
        return o, out_state(s, k, initial_state)

    def step(state, q_t, k_t, v_t, g_t, *, seed=0):
        q_t, g_t = ins(q_t, g_t)
        s, o = base.step(st_in(state), q_t, k_t, v_t, g_t, seed=seed)
        return out_state(s, k_t[..., None, :], state), o

    def varlen(q, k, v, g, *, cu_seqlens, initial_state=None, seed=0):
        q, g = ins(q, g)
        return base.varlen(q, k, v, g, cu_seqlens=cu_seqlens,
                           initial_state=st_in(initial_state), seed=seed)

    def padded(q, k, v, g, *, mask, initial_state=None, seed=0):
        q, g = ins(q, g)
        return base.padded(q, k, v, g, mask=mask, initial_state=st_in(initial_state), seed=seed)

    def state_sums(state):
        return base.state_sums(tuple(state[:2]))

    return {"chunked": chunked, "parallel": parallel, "stateful": stateful, "step": step,
            "varlen": varlen, "padded": padded, "state_sums": state_sums}


def make_target(name: str, **defect: Any) -> GatedAttentionTarget:
    """The built-in torch gated target (scalar gates, float64 and float32) with ``defect``."""
    base = gated_target("scalar", backends=("torch",), dtypes=("float64", "float32"),
                        name=name)
    return dataclasses.replace(base, **_forms(base, **defect))


GATED_TORCH_MUTANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "gated_torch_initial_state_detached": (
        "torch gated forms detach the initial / carried state: no gradient reaches the prefill",
        {"detach_state": True}),
    "gated_torch_gates_detached": (
        "torch gated forms take the log-gates detached: no gradient to the gates",
        {"detach_gates": True}),
    "gated_torch_dq_scaled": (
        "torch gated forms: the backward of q scaled by 1.01 (forward exact)",
        {"dq_factor": 1.01}),
    "gated_torch_state_keeps_keys": (
        "torch gated forms: the state carries every key seen so far beside (S, z)",
        {"keep_keys": True}),
}

#: The property each mutant is written for.
GATED_TORCH_KILLERS: dict[str, tuple[str, ...]] = {
    "gated_torch_initial_state_detached": (
        "gated_forms::test_gated_gradients_flow_through_the_state",),
    "gated_torch_gates_detached": (
        "gated_forms::test_gated_gradients_with_respect_to_the_gates",),
    "gated_torch_dq_scaled": ("gated_forms::test_gated_gradients_meet_the_float64_reference",),
    "gated_torch_state_keeps_keys": (
        "gated_forms::test_gated_state_size_does_not_grow_with_length",),
}

GATED_TORCH_CONTROLS: dict[str, Callable[[], list]] = {
    "gated_torch_correct": lambda: [make_target("control:gated_torch_correct")],
}


def __getattr__(attr: str) -> list:
    """``<mutant name>`` / ``control_<name>``: the targets."""
    if attr in GATED_TORCH_MUTANTS:
        return [make_target(f"mutant:{attr}", **GATED_TORCH_MUTANTS[attr][1])]
    if attr.startswith("control_") and attr.removeprefix("control_") in GATED_TORCH_CONTROLS:
        return GATED_TORCH_CONTROLS[attr.removeprefix("control_")]()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


__all__ = ["GATED_TORCH_CONTROLS", "GATED_TORCH_KILLERS", "GATED_TORCH_MUTANTS", "make_target"]
