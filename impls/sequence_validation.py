"""Checks of the arguments that describe sequences: packed boundaries (``cu_seqlens``), padding
masks, per-sequence initial states, empty batches and meta tensors.

Shared by the forms of causal attention (``impls/{numpy,torch}/forms.py``), the built-in
attention targets (``properties/builtin_forms.py``) and the library adapters, so that every
public surface taking sequences rejects bad ones the same way: a ``ValueError``/``TypeError``
that names the argument and the rule, never a wrong number of rows, a silently truncated
boundary or a raw ``IndexError``.

The rules (the forms protocol, ``AttentionTarget`` in ``properties/protocol.py``):

* ``cu_seqlens`` — N sequences packed along time in a batch of one: a 1-D integer array
  (NumPy integer array, torch integer tensor, or a list of Python ints; never a float or a
  bool) of N + 1 boundaries ``0 = c_0 ≤ c_1 ≤ … ≤ c_N = T``. Sequence i is rows
  ``[c_i, c_(i+1))``. An **empty sequence** (``c_i = c_(i+1)``) is allowed unless the caller
  says otherwise (``allow_empty=False``): it has no output rows and its final state is its
  initial state (the empty state when none is given) — the state after zero tokens.
* ``mask`` — padding: shape exactly ``(B, T)``, bool, or an integer array holding only 0 and 1
  (a float mask is refused: is 0.2 valid?). True marks a valid position. A row with **no valid
  position** is allowed: its outputs are 0 (every position is padding) and its final state is
  its initial state (the empty state when none is given), the state after zero tokens.
* per-sequence initial states — a tuple of arrays whose first (batch) axis has one entry per
  sequence (``varlen``) or per row (``padded``); 3 states for 2 sequences are refused.
* a batch (or any leading axis) of size 0 and tensors on the ``meta`` device (no data) are
  refused with an error saying so.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from kernel_verify.impls.validation import dtype_name, is_torch

__all__ = ["check_cu_seqlens", "check_mask", "check_nonempty_lead", "check_not_meta",
           "check_packed_batch", "check_qkv_call", "check_state_count"]

_INT_KINDS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def check_not_meta(name: str, x: Any) -> None:
    """``x`` is not a torch tensor on the ``meta`` device (shapes only, no values to check or
    compute with)."""
    if is_torch(x) and getattr(getattr(x, "device", None), "type", None) == "meta":
        raise ValueError(f"{name} is a tensor on the 'meta' device (a shape without data): the "
                         "forms compute with values; pass a tensor on a real device (cpu, cuda)")


def check_qkv_call(names: tuple[str, str, str], got: dict[str, Any], *, step: bool,
                   axes: str) -> Any:
    """The queries, keys and values of one call of a sequence form (``got``: the call's
    arguments by name; ``names``: the names of q, k and v in it): arrays of one backend, off
    the meta device, of rank 4 (rank 3 for a ``step``'s ``q_t``; ``axes`` names them in the
    target's layout, e.g. ``"(B, H, T, d)"``), ``k`` of ``q``'s shape, ``v`` of ``q``'s leading
    shape. Returns ``q``, or None when a name is missing from the call (the form's own signature
    error then names it)."""
    if not all(n in got for n in names):
        return None
    rank = 3 if step else 4
    q_name, k_name, v_name = names
    q = got[q_name]
    for n in names:
        x = got[n]
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise TypeError(f"{n} must be an array {axes} (a numpy.ndarray or torch.Tensor), "
                            f"got {type(x).__name__}")
        if is_torch(x) != is_torch(q):
            raise TypeError(f"{n} must be of the queries' backend "
                            f"({'torch' if is_torch(q) else 'numpy'}), got "
                            f"{type(x).__module__.split('.')[0]}.{type(x).__name__}")
        check_not_meta(n, x)
        if len(x.shape) != rank:
            raise ValueError(f"{n} must have {rank} dimensions {axes}, got shape "
                             f"{tuple(x.shape)}")
    k, v = got[k_name], got[v_name]
    if tuple(k.shape) != tuple(q.shape):
        raise ValueError(f"{k_name} must have the shape of {q_name} {tuple(q.shape)}, got shape "
                         f"{tuple(k.shape)}")
    if tuple(v.shape[:-1]) != tuple(q.shape[:-1]):
        raise ValueError(f"{v_name} must have shape {(*tuple(q.shape[:-1]), 'd_v')} (the leading "
                         f"axes of {q_name}), got shape {tuple(v.shape)}")
    return q


def check_nonempty_lead(name: str, x: Any, n_lead: int) -> None:
    """The first ``n_lead`` (batch, head) axes of ``x`` all have size ≥ 1."""
    lead = tuple(x.shape[:n_lead])
    if any(int(s) == 0 for s in lead):
        raise ValueError(f"{name} has a batch (leading) axis of size 0, shape {tuple(x.shape)}: "
                         "there is no sequence to attend over; pass at least one batch element "
                         "and head")


def _integer_values(name: str, x: Any) -> list[Any]:
    """The entries of a 1-D integer array/tensor/list as Python ints (checked, not cast)."""
    if isinstance(x, list | tuple):
        bad = [e for e in x if isinstance(e, bool) or not isinstance(e, int | np.integer)]
        if any(isinstance(e, list | tuple) for e in x):
            raise ValueError(f"{name} must be 1-D (N + 1 boundaries), got a nested list")
        if bad:
            raise TypeError(f"{name} must hold integers (boundaries of sequences), got "
                            f"{type(bad[0]).__name__} {bad[0]!r}")
        return [int(e) for e in x]
    if not hasattr(x, "dtype") or not hasattr(x, "shape"):
        raise TypeError(f"{name} must be a 1-D integer array (N + 1 boundaries), got "
                        f"{type(x).__name__}")
    check_not_meta(name, x)
    kind = dtype_name(x)
    if kind not in _INT_KINDS:
        what = ("bool" if kind == "bool" else kind)
        raise TypeError(f"{name} must have an integer dtype (boundaries of sequences; a float "
                        f"would be truncated), got {what}")
    if len(x.shape) != 1:
        raise ValueError(f"{name} must be 1-D (N + 1 boundaries), got shape {tuple(x.shape)}")
    return [int(e) for e in x.tolist()]


def check_cu_seqlens(cu_seqlens: Any, *, length: int, allow_empty: bool = True,
                     name: str = "cu_seqlens") -> list[int]:
    """The boundaries ``0 = c_0 ≤ … ≤ c_N = length`` of N ≥ 1 packed sequences (module
    docstring), returned as Python ints; ``allow_empty=False`` asks for ``c_i < c_(i+1)``."""
    if cu_seqlens is None:
        raise TypeError(f"{name} must be a 1-D integer array of N + 1 boundaries, got None")
    bounds = _integer_values(name, cu_seqlens)
    if len(bounds) < 2:
        raise ValueError(f"{name} must hold at least 2 boundaries (0 and T: one sequence), got "
                         f"{bounds}")
    if bounds[0] != 0:
        raise ValueError(f"{name} must start at 0, got {bounds[0]} (in {bounds})")
    steps = [b - a for a, b in itertools.pairwise(bounds)]
    if any(s < 0 for s in steps):
        i = next(i for i, s in enumerate(steps) if s < 0)
        raise ValueError(f"{name} must be non-decreasing, got {bounds[i]} then {bounds[i + 1]} "
                         f"(in {bounds})")
    if not allow_empty and any(s == 0 for s in steps):
        i = next(i for i, s in enumerate(steps) if s == 0)
        raise ValueError(f"{name} must be strictly increasing here (no empty sequence), got "
                         f"{bounds[i]} twice (in {bounds})")
    if bounds[-1] != length:
        raise ValueError(f"{name} must end at T = {length} (the packed length), got "
                         f"{bounds[-1]} (in {bounds})")
    return bounds


def check_packed_batch(name: str, x: Any, *, batch_axis: int = 0) -> None:
    """Packed sequences (``cu_seqlens`` given) live in a batch of one."""
    b = int(x.shape[batch_axis])
    if b != 1:
        raise ValueError(f"with cu_seqlens, {name} must have batch size 1 (the sequences are "
                         f"packed along time), got batch {b}, shape {tuple(x.shape)}")


def check_mask(mask: Any, *, batch: int, length: int, name: str = "mask") -> np.ndarray:
    """A padding mask of shape exactly ``(batch, length)``, bool or 0/1 integer (module
    docstring); returned as a NumPy bool array."""
    if isinstance(mask, list | tuple):
        mask = np.asarray(mask)
    if not hasattr(mask, "dtype") or not hasattr(mask, "shape"):
        raise TypeError(f"{name} must be a (B, T) bool array, got {type(mask).__name__}")
    check_not_meta(name, mask)
    kind = dtype_name(mask)
    if kind != "bool" and kind not in _INT_KINDS:
        raise TypeError(f"{name} must be a bool array (True at valid positions) or 0/1 integers, "
                        f"got {kind} (a fractional value has no meaning as a mask)")
    if tuple(mask.shape) != (batch, length):
        raise ValueError(f"{name} must have shape (B, T) = {(batch, length)}, got "
                         f"{tuple(mask.shape)}")
    values = np.asarray(mask.detach().to("cpu").numpy() if is_torch(mask) else mask)
    if kind != "bool":
        if values.size and not np.isin(values, (0, 1)).all():
            bad = values[~np.isin(values, (0, 1))].ravel()[0]
            raise ValueError(f"{name} must hold only 0 and 1 (or bools), got {bad}")
        values = values.astype(bool)
    return values


def check_state_count(state: Any, count: int, *, what: str, name: str = "initial_state") -> None:
    """``state`` is None or a tuple of arrays whose first (batch) axis holds ``count`` entries:
    one state per sequence (``what = "sequences in cu_seqlens"``) or per row."""
    if state is None:
        return
    if not isinstance(state, tuple | list) or not state:
        raise TypeError(f"{name} must be None or a tuple of state arrays, got "
                        f"{type(state).__name__}")
    for i, s in enumerate(state):
        if not hasattr(s, "shape") or len(s.shape) < 1:
            raise TypeError(f"{name}[{i}] must be an array with a batch axis, got "
                            f"{type(s).__name__}")
        if int(s.shape[0]) != count:
            raise ValueError(f"{name} must hold one state per sequence: {count} {what}, but "
                             f"{name}[{i}] has {int(s.shape[0])} along its batch axis (shape "
                             f"{tuple(s.shape)})")
