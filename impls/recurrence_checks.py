"""Argument checks of the delta rule and its relatives (``impls/{numpy,torch}/recurrence.py``),
shared by both backends.

One recurrence, the transition as data: ``S_t = A_t S_(t−1) + w_t v_tᵀ``, ``o_t = S_tᵀq_t``, with
``A_t = Diag(e^(λ_t)) + x_t y_tᵀ`` (diagonal plus rank one). Inputs in layout ``(..., T, d)``
(leading batch/head axes, time axis −2): ``q, k (..., T, d)``, ``v (..., T, d_v)``; log-gates
``g ≤ 0`` of shape ``(..., T)`` (one per token) or ``(..., T, d)`` (one per key dimension);
``beta (..., T)``; ``p, a, b (..., T, d)``; a state ``S (..., d, d_v)`` (None: zeros). One token
(a recurrent step) drops the time axis and suffixes every name with ``_t``.

Which inputs a transition takes is :data:`REQUIRED_INPUTS`; a missing one, and one given to a
transition that does not take it, are errors naming it (an ignored input hides a caller's
mistake).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kernel_verify.impls.attention_checks import check_attention_inputs
from kernel_verify.impls.forms_checks import check_chunk_size, check_step_inputs
from kernel_verify.impls.gated_checks import check_log_gates
from kernel_verify.impls.sequence_validation import check_nonempty_lead
from kernel_verify.impls.validation import (
    check_array,
    check_one_backend,
    dtype_name,
    is_torch,
)

__all__ = [
    "GATE_INPUTS",
    "REQUIRED_INPUTS",
    "TRANSITIONS",
    "check_chunk_size",
    "check_recurrence_state",
    "check_sequence_inputs",
    "check_step",
    "check_transition",
    "check_transition_inputs",
]

#: The transitions, in order of generality (each row of the contract's table).
TRANSITIONS = ("identity", "decay", "delta", "gated_delta", "kda", "comba", "rwkv7")

#: The optional inputs of a transition, in the order of the keyword arguments.
GATE_INPUTS = ("g", "beta", "p", "a", "b")

#: transition -> the inputs it needs (and the only ones it accepts).
REQUIRED_INPUTS: dict[str, tuple[str, ...]] = {
    "identity": (),
    "decay": ("g",),
    "delta": ("beta",),
    "gated_delta": ("g", "beta"),
    "kda": ("g", "beta"),
    "comba": ("g", "beta", "p"),
    "rwkv7": ("g", "a", "b"),
}

_WHAT = {
    "g": "log-gates ≤ 0",
    "beta": "writing strengths, one per token",
    "p": "the comba output-feedback key",
    "a": "the rank-one transition's row vector (RWKV-7: −κ̂)",
    "b": "the rank-one transition's column vector (RWKV-7: κ̂ ⊙ a)",
}

_FLOATS = ("float64", "float32", "float16", "bfloat16")


def check_transition(transition: Any) -> str:
    """``transition`` is one of :data:`TRANSITIONS` (TypeError for a non-string)."""
    if not isinstance(transition, str):
        raise TypeError(f"transition must be a str, one of {', '.join(TRANSITIONS)}; got "
                        f"{type(transition).__name__} {transition!r}")
    if transition not in TRANSITIONS:
        raise ValueError(f"transition {transition!r} is unknown; choose one of "
                         f"{', '.join(TRANSITIONS)}")
    return transition


def _check_vector_input(name: str, x: Any, shape: tuple[int, ...], k: Any, *, backend: str,
                        what: str) -> None:
    """``x`` an array of ``backend`` with exactly ``shape``, ``k``'s dtype and device, finite."""
    check_array(name, x, min_ndim=0, backend=backend)
    if tuple(x.shape) != shape:
        raise ValueError(f"{name} must have shape {shape} ({what}, to match the keys of shape "
                         f"{tuple(k.shape)}), got {tuple(x.shape)}")
    if dtype_name(x) != dtype_name(k):
        raise TypeError(f"{name} must have the keys' dtype {dtype_name(k)}, got "
                        f"{dtype_name(x)}")
    check_one_backend((name, "k"), x, k)


def check_transition_inputs(transition: Any, k: Any, inputs: Mapping[str, Any], *,
                            backend: str, step: bool = False) -> str | None:
    """The inputs ``inputs`` (``g, beta, p, a, b`` -> array or None) of ``transition`` for keys
    ``k`` (``(..., T, d)``, or ``(..., d)`` for one token with ``step``): each required one
    given, none other, each of the right shape, dtype, backend and device, finite; ``g ≤ 0``.

    Returns the kind of ``g``: ``"scalar"``, ``"key_dim"`` or None (the transition takes no
    gate). Errors name the argument as the caller spells it (``g``, or ``g_t`` with ``step``).
    """
    transition = check_transition(transition)
    suffix = "_t" if step else ""
    need = REQUIRED_INPUTS[transition]
    for key in GATE_INPUTS:
        name = key + suffix
        given = inputs.get(key) is not None
        if key in need and not given:
            raise ValueError(f"transition {transition!r} needs {name} ({_WHAT[key]}); it takes "
                             f"{', '.join(n + suffix for n in need)}")
        if key not in need and given:
            takes = ", ".join(n + suffix for n in need) or "none of g, beta, p, a, b"
            raise ValueError(f"transition {transition!r} takes no {name} (it takes {takes}): "
                             f"pass {name}=None or choose the transition that uses it")
    kind = None
    for key in need:
        name, x = key + suffix, inputs[key]
        if key == "g":
            if not hasattr(x, "dtype") or not hasattr(x, "shape"):
                raise TypeError(f"{name} must be an array, got {type(x).__name__}")
            floating = (dtype_name(x) in _FLOATS if is_torch(x)
                        else np.issubdtype(x.dtype, np.floating))
            if not floating:
                raise TypeError(f"{name} must have a floating dtype, got {dtype_name(x)}")
            kind = check_log_gates(x, k, backend=backend, name=name, step=step,
                                   keys="k_t" if step else "k")
        elif key == "beta":
            _check_vector_input(name, x, tuple(k.shape[:-1]), k, backend=backend,
                                what="one per token")
        else:
            _check_vector_input(name, x, tuple(k.shape), k, backend=backend,
                                what="one per key dimension")
    return kind


def check_sequence_inputs(q: Any, k: Any, v: Any, *, backend: str) -> None:
    """``q, k (..., T, d)`` and ``v (..., T, d_v)`` of ``backend``: finite, floating, one
    dtype, one leading shape with no axis of size 0, as many queries as keys, ``d ≥ 1``."""
    check_attention_inputs(q, k, v, causal=True, names=("q", "k", "v"), backend=backend)
    check_nonempty_lead("q", q, q.ndim - 2)


def check_step(q_t: Any, k_t: Any, v_t: Any, *, backend: str) -> None:
    """One token: ``q_t, k_t (..., d)``, ``v_t (..., d_v)`` of ``backend``, one dtype and
    leading shape, finite."""
    check_step_inputs(q_t, k_t, v_t, names=("q_t", "k_t", "v_t"), backend=backend)


def check_recurrence_state(state: Any, *, lead: tuple[int, ...], d: int, dv: int, backend: str,
                           like: Any, name: str = "initial_state") -> Any:
    """``state``: None (zeros), or a finite floating array of ``backend`` on ``like``'s device
    with shape ``(*lead, d, d_v)``; returned unchanged."""
    if state is None:
        return None
    if isinstance(state, tuple | list):
        raise TypeError(f"{name} must be one array S of shape {(*lead, d, dv)} (the delta "
                        f"rule's state has no normaliser z), got a {type(state).__name__} of "
                        f"length {len(state)}")
    check_array(name, state, min_ndim=2, backend=backend)
    check_one_backend((name, "q"), state, like)
    want = (*lead, d, dv)
    if tuple(state.shape) != want:
        raise ValueError(f"{name} must have shape {want} (leading shape {lead}, d = {d} key "
                         f"dimensions, d_v = {dv} value columns), got {tuple(state.shape)}")
    return state
