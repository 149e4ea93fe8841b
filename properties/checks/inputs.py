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

__all__ = ["GUARD", "Snapshot", "call_unchanged", "guarded", "named_arrays", "nan_gained"]


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


#: The least number of NaN elements placed before and after each floating input by
#: :func:`guarded` (at least the input's own size: an unmasked tail load reads up to a block).
GUARD = 256


def _guard_one(x: Any) -> Any:
    """``x`` (a floating array) as a contiguous view into a NaN-filled buffer with
    ``max(GUARD, x.size)`` NaN elements before and after it: the same values, shape, dtype and
    device, another ``data_ptr`` and a storage offset."""
    if _is_torch(x):
        import torch

        if not x.is_floating_point():
            return x
        g = max(GUARD, x.numel())
        buf = torch.full((x.numel() + 2 * g,), float("nan"), dtype=x.dtype, device=x.device)
        buf[g:g + x.numel()] = x.detach().reshape(-1)
        view = buf[g:g + x.numel()].view(x.shape)
        return view.requires_grad_(True) if x.requires_grad else view
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":
        g = max(GUARD, x.size)
        buf = np.full(x.size + 2 * g, np.nan, dtype=x.dtype)
        buf[g:g + x.size] = x.reshape(-1)
        return buf[g:g + x.size].reshape(x.shape)
    return x


def guarded(value: Any) -> Any:
    """``value`` with every floating array in it (also inside tuples, lists and mappings)
    placed inside NaN guard bands (:func:`_guard_one`); anything else as it is."""
    if _is_array(value):
        return _guard_one(value)
    if isinstance(value, tuple | list):
        return type(value)(guarded(v) for v in value)
    if isinstance(value, Mapping):
        return {k: guarded(v) for k, v in value.items()}
    return value


def _nan_mask(x: Any) -> np.ndarray | None:
    if _is_torch(x):
        return x.detach().isnan().cpu().numpy() if x.is_floating_point() else None
    if isinstance(x, np.ndarray) and x.dtype.kind == "f":
        return np.isnan(x)
    return None


def nan_gained(plain: Any, guard_run: Any) -> list[str]:
    """Per result array, the NaN the guarded run has where the plain run has none (one line
    each; empty: none)."""
    out = []
    mine = dict(named_arrays("result", plain))
    for name, arr in named_arrays("result", guard_run):
        a, b = _nan_mask(mine.get(name)) if name in mine else None, _nan_mask(arr)
        if a is None or b is None or a.shape != b.shape:
            continue
        new = b & ~a
        if new.any():
            first = tuple(int(i) for i in np.argwhere(new)[0])
            out.append(f"{name} NaN at {int(new.sum())} of {new.size} entries (first at "
                       f"{first})")
    return out


def call_unchanged(what: str, fn: Callable[..., Any], args: Sequence[tuple[str, Any]],
                   kwargs: Mapping[str, Any] | None = None, *, guard: bool = True) -> Any:
    """``fn(*args, **kwargs)`` (``args`` named: ``[("q", q), ...]``), asserting that every array
    among the arguments (``kwargs`` named by their keywords) is bitwise what it was before the
    call; returns the result. With ``guard``, the call is made again with every floating
    argument inside NaN guard bands (:func:`guarded`): a result that gains a NaN read memory
    outside its inputs (an unmasked tail load, a stride or storage offset ignored)."""
    kwargs = dict(kwargs or {})
    snap = Snapshot([*args, *kwargs.items()])
    out = fn(*(a for _, a in args), **kwargs)
    snap.check(what)
    if guard:
        again = fn(*(guarded(a) for _, a in args), **{k: guarded(v) for k, v in kwargs.items()})
        gained = nan_gained(out, again)
        if gained:
            raise AssertionError(
                f"{what} read outside its inputs: called again with each floating input inside "
                f"a NaN-filled buffer (at least {GUARD} NaN before and after it; the same "
                "values, shape and dtype, a contiguous view at another address), its "
                f"{'; '.join(gained)} — a load past an input's end or before its start (a "
                "tail block loaded without its mask, a stride or a storage offset ignored)")
    return out
