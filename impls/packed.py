"""Packed sequences (``cu_seqlens``) run through a form of causal attention, one by one.

N sequences packed along time in a batch of one, ``cu_seqlens = [c_0 = 0, …, c_N = T]``: the
output of sequence i is the form's output on rows ``[c_i, c_(i+1))`` from its own initial
state (entry i along the batch axis of ``initial_state``; the empty state when None), the
state resets at every boundary, and the final states are stacked along the batch axis
(``(N, …)``). An empty sequence has no rows and keeps its initial state. The checks are those
of :mod:`kernel_verify.impls.sequence_validation`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from kernel_verify.impls.sequence_validation import (
    check_cu_seqlens,
    check_packed_batch,
    check_state_count,
)
from kernel_verify.impls.validation import is_torch

__all__ = ["run_packed", "run_padded"]


def _concat(parts: list[Any], axis: int) -> Any:
    if is_torch(parts[0]):
        import torch

        return torch.cat(parts, dim=axis)
    return np.concatenate(parts, axis=axis)


def _check_alongside(arrays: tuple[Any, ...], names: tuple[str, ...] | None, *, axis: int,
                     what: str) -> None:
    """Every array of ``arrays`` has the first one's length along ``axis`` (time, or the
    batch): a sequence input one token short or long is refused by name, never sliced short
    (an IndexError) or silently cut."""
    first = arrays[0]
    want = int(first.shape[axis])
    for i, x in enumerate(arrays[1:], start=1):
        name = names[i] if names is not None and i < len(names) else f"input {i}"
        if len(x.shape) < (axis + 1 if axis >= 0 else -axis) or int(x.shape[axis]) != want:
            first_name = names[0] if names else "the first input"
            raise ValueError(f"{name} must have the {what} of {first_name} ({want} along axis "
                             f"{axis}), got shape {tuple(x.shape)}")


def run_packed(form: Callable[..., tuple[Any, tuple[Any, ...]]], arrays: tuple[Any, ...],
               names: tuple[str, ...], *, cu_seqlens: Any, initial_state: Any,
               time_axis: int = -2) -> tuple[Any, tuple[Any, ...]]:
    """``form(*arrays_of_sequence_i, initial_state_i) -> (out_i, state_i)`` on every packed
    sequence; returns the outputs joined along time and the final states along the batch.
    ``arrays`` are already validated by the caller (backend, dtype, shapes)."""
    first = arrays[0]
    if len(first.shape) < 3:
        raise ValueError(f"with cu_seqlens, {names[0]} must have a batch axis of size 1 before "
                         f"the time axis, got shape {tuple(first.shape)}")
    bounds = check_cu_seqlens(cu_seqlens, length=int(first.shape[time_axis]))
    check_packed_batch(names[0], first)
    _check_alongside(arrays, names, axis=time_axis, what="time length")
    n_seq = len(bounds) - 1
    check_state_count(initial_state, n_seq, what="sequences in cu_seqlens")
    outs, finals = [], []
    for i, (a, b) in enumerate(itertools.pairwise(bounds)):
        init = None if initial_state is None else tuple(s[i:i + 1] for s in initial_state)
        index = [slice(None)] * len(first.shape)
        index[time_axis] = slice(a, b)
        out, state = form(*(x[tuple(index)] for x in arrays), init)
        outs.append(out)
        finals.append(state)
    return (_concat(outs, time_axis),
            tuple(_concat([s[j] for s in finals], 0) for j in range(len(finals[0]))))


def run_padded(form: Callable[..., tuple[Any, tuple[Any, ...]]], arrays: tuple[Any, ...],
               rows: Any, *, out_like: Any, initial_state: Any,
               names: tuple[str, ...] | None = None) -> tuple[Any, tuple[Any, ...]]:
    """``form(*arrays_of_row_b, initial_state_b) -> (out_b, state_b)`` on every row ``b`` of a
    ``(B, H, T, ·)`` batch at its valid positions (``rows``: the validated ``(B, T)`` boolean
    mask; each array sliced ``[b:b + 1, :, valid]``); returns the outputs, shaped and typed as
    ``out_like`` with 0 at padded positions, and the final states joined along the batch.
    Every array has the first one's batch and time length, and ``initial_state`` (None, or
    one state per row along the batch axis) is checked (``names``: the arrays' argument names
    for the errors)."""
    first = arrays[0]
    _check_alongside(arrays, names, axis=0, what="batch size")
    if len(first.shape) >= 3:
        _check_alongside(arrays, names, axis=2, what="time length")
    check_state_count(initial_state, len(rows), what="rows of the mask")
    out = out_like.new_zeros(out_like.shape) if is_torch(out_like) else np.zeros_like(out_like)
    states = []
    for b, row in enumerate(rows):
        idx = np.flatnonzero(row)
        if is_torch(first):
            import torch

            idx = torch.as_tensor(idx, dtype=torch.long, device=first.device)
        init = None if initial_state is None else tuple(s[b:b + 1] for s in initial_state)
        o, state = form(*(x[b:b + 1, :, idx] for x in arrays), init)
        out[b:b + 1, :, idx] = o
        states.append(state)
    return out, tuple(_concat([s[j] for s in states], 0) for j in range(len(states[0])))
