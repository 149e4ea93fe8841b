"""Argument checks of the forms of causal linear attention (``impls/{numpy,torch}/forms.py``),
shared by both backends: the state, the one-token inputs of a recurrent step, the chunk size.

States (docs/math.md §13): the plain state is ``(S, z)`` with ``S (..., m, d_v)`` and
``z (..., m)``; the log-space state is ``(L, V̄)`` with ``L (..., m)`` (entries may be −∞: a
feature no key has weighted yet) and ``V̄ (..., m, d_v)``. ``None`` is the empty state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_verify.impls.attention_checks import check_attention_inputs
from kernel_verify.impls.sequence_validation import check_nonempty_lead
from kernel_verify.impls.validation import (
    check_array,
    check_one_backend,
    check_positive_int,
    check_same_dtype,
    dtype_name,
    is_torch,
)

_FLOATS = ("float64", "float32", "float16", "bfloat16")


def check_chunk_size(chunk_size: Any) -> int:
    """``chunk_size``: an integer ≥ 1 (not a bool)."""
    return check_positive_int("chunk_size", chunk_size)


def check_form_arrays(arrays: tuple[Any, Any, Any], *, log: bool, backend: str
                      ) -> tuple[str, str, str]:
    """The checks every causal form runs on ``(phi_q, phi_k, v)``, or on ``(log_phi_q,
    log_phi_k, v)`` for ``log``, in ``backend``: attention inputs with at least one leading
    (batch) dimension. Returns the three names."""
    names = ("log_phi_q", "log_phi_k", "v") if log else ("phi_q", "phi_k", "v")
    check_attention_inputs(*arrays, causal=True, names=names, backend=backend)
    check_nonempty_lead(names[0], arrays[0], arrays[0].ndim - 2)
    return names


def _finite_or_minus_inf(name: str, x: Any) -> None:
    """Every entry finite or −∞ (an empty feature of a log-space state); NaN and +∞ raise."""
    if is_torch(x):
        import torch

        bad = bool((torch.isnan(x) | (x == float("inf"))).any()) if x.numel() else False
    else:
        bad = bool((np.isnan(x) | (x == np.inf)).any()) if x.size else False
    if bad:
        raise ValueError(f"{name} contains NaN or +Inf (−Inf marks an empty feature; nothing "
                         "else may be non-finite)")


def check_state(state: Any, *, lead: tuple[int, ...], m: int, dv: int, log: bool, backend: str,
                like: Any, name: str = "initial_state") -> tuple[Any, Any] | None:
    """``state`` (None, or a pair of arrays of ``backend`` on ``like``'s device) with the shapes
    of a plain ``(S, z)`` or log-space ``(L, V̄)`` state for leading shape ``lead``, ``m``
    features and ``d_v`` value columns; returns it as a tuple (None stays None)."""
    if state is None:
        return None
    kind = "(L, V̄)" if log else "(S, z)"
    if not isinstance(state, tuple | list) or len(state) != 2:
        raise TypeError(f"{name} must be None or a pair {kind} of arrays, got "
                        f"{type(state).__name__}"
                        + (f" of length {len(state)}" if isinstance(state, tuple | list) else ""))
    first, second = state
    names = (f"{name}[0]", f"{name}[1]")
    for n, x in zip(names, state, strict=True):
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            raise TypeError(f"{n} must be an array, got {type(x).__name__}")
        if is_torch(x) != (backend == "torch"):
            want = "torch.Tensor" if backend == "torch" else "numpy.ndarray"
            raise TypeError(f"{n} must be a {want} like the inputs, got {type(x).__name__}")
        floating = (dtype_name(x) in _FLOATS if is_torch(x)
                    else np.issubdtype(x.dtype, np.floating))
        if not floating:
            raise TypeError(f"{n} must have a floating dtype, got {dtype_name(x)}")
    check_one_backend((*names, "inputs"), first, second, like)
    check_same_dtype(names, first, second)
    if log:
        want = ((*lead, m), (*lead, m, dv))
    else:
        want = ((*lead, m, dv), (*lead, m))
    for n, x, shape in zip(names, state, want, strict=True):
        if tuple(x.shape) != shape:
            raise ValueError(f"{n} must have shape {shape} for inputs with leading shape {lead}, "
                             f"{m} features and {dv} value columns ({kind}), got "
                             f"{tuple(x.shape)}")
    if log:
        _finite_or_minus_inf(names[0], first)
        check_array(names[1], second, min_ndim=2, backend=backend)
    else:
        check_array(names[0], first, min_ndim=2, backend=backend)
        check_array(names[1], second, min_ndim=1, backend=backend)
    return first, second


def check_step_inputs(a: Any, b: Any, v: Any, *, names: tuple[str, str, str],
                      backend: str) -> None:
    """One token: ``a (..., f)``, ``b (..., f)``, ``v (..., d_v)`` of one backend and dtype,
    finite, with one leading shape."""
    for name, x in zip(names, (a, b, v), strict=True):
        if is_torch(x) != (backend == "torch"):
            check_array(name, x, backend=backend)
    check_one_backend(names, a, b, v)
    for name, x in zip(names, (a, b, v), strict=True):
        check_array(name, x, min_ndim=1, backend=backend)
    check_same_dtype(names, a, b, v)
    if a.shape != b.shape:
        raise ValueError(f"{names[0]} and {names[1]} must have the same shape, got "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[-1] < 1:
        raise ValueError(f"{names[0]} must have a last dimension >= 1, got {tuple(a.shape)}")
    if tuple(v.shape[:-1]) != tuple(a.shape[:-1]):
        raise ValueError(f"{names[2]} must have the leading shape of {names[0]}, got "
                         f"{tuple(v.shape)} and {tuple(a.shape)}")


__all__ = ["check_chunk_size", "check_state", "check_step_inputs"]
