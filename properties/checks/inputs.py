"""Inputs a call must leave as they were: bitwise copies of every array a call receives (NumPy
arrays and torch tensors, also inside tuples, lists and mappings such as a state or a parameter
dict), taken before the call and compared with the arrays after it
(``properties/test_inputs_unchanged.py``).

A target that writes into its caller's arrays (linear-attention-transformer 0.19.1's
``linear_attn(q, k, v, kv_mask=...)`` overwrites ``k`` and ``v``) passes every property that
draws fresh inputs for each call and compares outputs only; its caller's next use of the same
``k`` (the next layer, a second head, a cache) reads garbage. The comparison is of the bits (a
``-0.0`` written over ``0.0`` or a NaN payload changed is a change), the shape, the dtype and the
device; a write of the same value (``k *= 1``) is no change and is not seen.

A library module (no pytest, no Hypothesis): :func:`call_unchanged` is the whole check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["Snapshot", "call_unchanged", "named_arrays"]


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) or _is_torch(x)


def named_arrays(name: str, value: Any) -> Iterator[tuple[str, Any]]:
    """``(name, array)`` for every array in ``value``: the array itself, or the items of a tuple
    or list (``state[0]``) and the values of a mapping (``params['W']``), recursively."""
    if _is_array(value):
        yield name, value
    elif isinstance(value, tuple | list):
        for i, item in enumerate(value):
            yield from named_arrays(f"{name}[{i}]", item)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from named_arrays(f"{name}[{key!r}]", item)


def _layout(x: Any) -> tuple[tuple[int, ...], str, str]:
    """Shape, dtype and device of an array."""
    if _is_torch(x):
        return tuple(x.shape), str(x.dtype).removeprefix("torch."), str(x.device)
    return tuple(x.shape), str(x.dtype), "cpu"


def _bits_and_values(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """A copy of ``x``'s bits, ``(*shape, itemsize)`` uint8, and of its values as NumPy (floats
    widened to float64, for the message)."""
    if _is_torch(x):
        import torch

        t = x.detach().to("cpu", copy=True).contiguous()
        raw = t.reshape(-1).view(torch.uint8) if t.dtype != torch.bool else t.reshape(-1).to(
            torch.uint8)
        bits = raw.numpy().reshape(*t.shape, t.element_size())
        return bits, (t.to(torch.float64) if t.is_floating_point() else t).numpy()
    a = np.array(x, copy=True, order="C")
    bits = a.reshape(-1).view(np.uint8).reshape(*a.shape, a.itemsize)
    return bits, a.astype(np.float64) if a.dtype.kind == "f" else a


class Snapshot:
    """Bitwise copies of the named arrays of a call's arguments (the same object under two
    names, as ``k is q`` for self-attention, is one input named ``q = k``)."""

    def __init__(self, arguments: Sequence[tuple[str, Any]]) -> None:
        self.entries: list[list[Any]] = []  # [names, array, layout, bits, values]
        by_id: dict[int, list[Any]] = {}
        for arg_name, value in arguments:
            for name, array in named_arrays(arg_name, value):
                if id(array) in by_id:
                    by_id[id(array)][0].append(name)
                    continue
                entry = [[name], array, _layout(array), *_bits_and_values(array)]
                by_id[id(array)] = entry
                self.entries.append(entry)

    def changes(self) -> list[str]:
        """What changed, one line per input (empty: every input bitwise as it was)."""
        out = []
        for names, array, layout, bits, values in self.entries:
            name = " = ".join(names)
            now = _layout(array)
            if now != layout:
                out.append(f"{name}: (shape, dtype, device) {layout} became {now}")
                continue
            new_bits, new_values = _bits_and_values(array)
            differ = (new_bits != bits).any(axis=-1)
            if not differ.any():
                continue
            first = tuple(int(i) for i in np.argwhere(differ)[0])
            before, after = values[first].item(), new_values[first].item()
            text = (f"{name} changed at {int(differ.sum())} of {differ.size} entries, first at "
                    f"index {first}: {before!r} became {after!r}")
            if values.dtype.kind == "f":
                with np.errstate(invalid="ignore", over="ignore"):
                    delta = np.abs(new_values - values)[differ]
                largest = float(np.max(np.nan_to_num(delta, nan=np.inf)))
                text += f" (by {after - before:.6g}; largest change {largest:.6g})"
            out.append(text)
        return out

    def check(self, what: str) -> None:
        """Raise ``AssertionError`` naming every input ``what`` changed."""
        changed = self.changes()
        if changed:
            raise AssertionError(f"{what} changed its caller's inputs in place: "
                                 + "; ".join(changed))


def call_unchanged(what: str, fn: Callable[..., Any], args: Sequence[tuple[str, Any]],
                   kwargs: Mapping[str, Any] | None = None) -> Any:
    """``fn(*args, **kwargs)`` (``args`` named: ``[("q", q), ...]``), asserting that every array
    among the arguments (``kwargs`` named by their keywords) is bitwise what it was before the
    call; returns the result."""
    kwargs = dict(kwargs or {})
    snap = Snapshot([*args, *kwargs.items()])
    out = fn(*(a for _, a in args), **kwargs)
    snap.check(what)
    return out
