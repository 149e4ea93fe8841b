"""Batch independence, bitwise: each batch element's output is the same whatever the other
elements hold (claim ``batch_independent``: "no batch element changes another's output").

Targets: every attention target claiming ``batch_independent`` (``KV_TARGET``'s, else the
built-in ones: exact softmax attention, and the project's low-rank attentions Linformer and
Nyströmformer through :mod:`kernel_verify.properties.builtin_lowrank`, made from their
descriptors, on NumPy and torch).

**Why bitwise** (derived). The property calls the target twice on inputs of the same shape,
dtype, layout and backend: the drawn batch ``x``, and ``x`` with every element but ``b``
replaced by fresh inputs at another scale (up to 300: where a stabiliser taken over the batch,
e.g. one max over every score, underflows element ``b`` to 0/0). A batch-independent function
performs, on element ``b``'s values, the same floating-point operations in both calls — every
library kernel chooses its order of operations from shapes, strides, dtype and thread count,
not from the values of other elements — so element ``b``'s outputs are equal bit for bit; any
difference, however small, is element ``b`` reading another element. The comparison holds only
for a target whose two calls on the same inputs agree bitwise, which the property checks first
(a target that is not bitwise reproducible, e.g. CUDA atomics, is skipped with that reason:
``attention_identities::test_batch_elements_and_heads_are_independent`` compares within the
derived bound instead).

Not compared: element ``b`` run alone as a batch of one. That call has another shape, so other
code paths run (a batched product ``bmm`` against ``mm``, a reduction iterator that drops a
size-1 axis), which round differently; the difference would need a forward error bound of the
whole function, and none is derived here for the Nyströmformer iteration (its rounding error
grows with the conditioning of the landmark matrix). Equality at the batch's own shape is the
stronger check of the claim: any coupling at all shows, not only one above a bound.

Cost (ci profile): 2 targets × 2 backends × 2 dtypes + exact softmax's 8 cases, B + 2 calls
per example.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kernel_verify.properties.attention_cases import call, cases, describe, modes
from kernel_verify.properties.backends import AXIS, backend_param
from kernel_verify.properties.protocol import AttentionTarget
from kernel_verify.properties.strategies import (
    QKV,
    SCALE_SWEEP,
    fresh_like,
    qkv_sets,
    seeds,
    shapes,
)
from kernel_verify.properties.targets import target_spec

#: Examples per (target, backend): each is B + 2 calls of the target.
BATCH_EXAMPLES = max(5, settings.default.max_examples // 4)
#: (scale of the drawn batch, scale of the replaced elements).
SCALES = ((0.5, 0.5), (0.5, 30.0), (30.0, 0.5), (0.5, SCALE_SWEEP[-1]))


def batch_cases() -> list:
    """``(target, backend)`` for attention targets claiming ``batch_independent``: those of
    ``KV_TARGET``, else the built-in ones and the project's low-rank attentions."""
    found = cases("batch_independent")
    if target_spec() is not None:
        return found
    from kernel_verify.properties.builtin_lowrank import lowrank_attention_targets

    lowrank: list[AttentionTarget] = lowrank_attention_targets()
    extra = [backend_param(t, backend=b, id=f"{t.name}-{b.id}")
             for t in lowrank for b in AXIS if t.accepts(b.library, b.dtype)]
    return [p for p in found if p.id != "none"] + extra


def _others_replaced(x: QKV, y: QKV, b: int) -> QKV:
    """``x`` with every batch element but ``b`` taken from ``y``."""
    others = np.arange(x.shape[0]) != b
    q, k, v = x.q.copy(), x.k.copy(), x.v.copy()
    q[others], v[others] = y.q[others], y.v[others]
    if not x.self_attention:
        k[others] = y.k[others]
    return QKV(q, q if x.self_attention else k, v, x.scale, x.self_attention)


def _difference(got: np.ndarray, want: np.ndarray) -> str | None:
    """Where two outputs are not bitwise equal (NaN equal to NaN), or None."""
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    if same.all():
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.nan_to_num(np.where(same, 0.0, np.abs(got - want)), nan=np.inf)
    where = tuple(int(j) for j in np.unravel_index(int(np.argmax(diff)), got.shape))
    return (f"{int((~same).sum())} of {got.size} outputs differ, the largest by "
            f"{float(diff[where]):.3g} at {tuple(int(i) for i in where)} "
            f"({float(got[where])!r} against {float(want[where])!r})")


def _case(pair: tuple[float, float]) -> st.SearchStrategy:
    return st.tuples(qkv_sets(shape=shapes(batch=(2, 3), heads=(1, 2), n=(1, 8), d=(1, 4)),
                              dv=(1, 3), scales=(pair[0],)), st.just(pair))


#: The first example: two elements of five positions (a landmark count of 4 does not divide
#: it), the others replaced at scale 300.
_FIRST = (QKV(np.sin(np.arange(20.0)).reshape(2, 1, 5, 2),
              np.cos(np.arange(20.0)).reshape(2, 1, 5, 2),
              np.linspace(-2.0, 2.0, 20).reshape(2, 1, 5, 2), 0.5), (0.5, SCALE_SWEEP[-1]))


@pytest.mark.parametrize(("target", "backend"), batch_cases())
@settings(max_examples=BATCH_EXAMPLES)
@example(case=_FIRST, seed=0)
@given(case=st.sampled_from(SCALES).flatmap(_case), seed=seeds)
def test_batch_elements_alone_give_their_batch_outputs_bitwise(target, backend, case, seed):
    """Element ``b``'s output with the other elements replaced (fresh inputs at the second
    scale) equals its output in the drawn batch, bit for bit, for every ``b`` (module
    docstring)."""
    x, scales = case
    if target.self_attention_only and not x.self_attention:
        x = QKV(x.q, x.q, x.v, x.scale, True)
    for causal in modes(target):
        where = describe(target, backend, causal, seed, x)
        out = call(target, backend, x, causal=causal, seed=seed)
        again = call(target, backend, x, causal=causal, seed=seed)
        if _difference(again, out) is not None:
            pytest.skip(f"{where}: two calls on the same inputs differ ("
                        f"{_difference(again, out)}): the target is not bitwise reproducible, "
                        "so a bitwise comparison cannot judge batch independence (the derived "
                        "bound of attention_identities' batch property does)")
        y = fresh_like(x, seed, scales[1])
        for b in range(x.shape[0]):
            alone = call(target, backend, _others_replaced(x, y, b), causal=causal, seed=seed)
            text = _difference(alone[b], out[b])
            assert text is None, (
                f"{where}: batch element {b} gave another output when the other elements "
                f"were replaced by inputs at scale {scales[1]}: {text} (a batch-independent "
                "function repeats the same operations on it bit for bit)")
