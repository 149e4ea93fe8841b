"""A call leaves its inputs unchanged: every target, every backend and dtype it accepts, every
form it offers (:mod:`kernel_verify.properties.checks.inputs`).

Why: a library that writes into its caller's arrays passes every other property of the suite,
which draws fresh inputs for each call and compares outputs only; its caller's next use of the
arrays (the next layer, another head, a cache, a second call of the same step) reads what the
target left there. linear-attention-transformer 0.19.1's ``linear_attn(q, k, v, kv_mask=...)``
overwrites ``k`` and ``v`` (the masked positions zeroed in place). No claim is needed: any target
that takes arrays must leave them as they were.

Each property passes fixed inputs (Gaussian entries, two lengths: 5 and one past the target's
largest chunk, :func:`~kernel_verify.properties.layouts.chunks_of`, within its shape
contract), keeps bitwise copies of every array argument made before the call, and fails naming
the input that changed, its first changed index (in the layout the target was called with),
the values before and after and the largest change:

* attention targets (``AttentionTarget.attention``): ``q``, ``k``, ``v`` (``k is q`` for a
  self-attention-only target), causal and non-causal as claimed;
* the forms of attention targets and of gated targets (``GatedAttentionTarget``: ``parallel``,
  ``stateful``, ``chunked`` at each declared chunk size, ``step``, ``varlen``, ``padded``):
  ``q``, ``k``, ``v``, the gates ``g`` and the transition's inputs (``beta``, ``p``, ``a``,
  ``b``, gate parameters), ``cu_seqlens``, ``mask`` and the ``initial_state`` (each form called
  fresh and then again from the state its first call returned; ``step`` from the empty state
  and then from the state of the first token);
* feature maps (``FeatureMapTarget``): a white-box map's ``numpy_fn``/``torch_fn`` (and
  ``log_numpy_fn``/``log_torch_fn``) on the backend's ``x`` and its ``params`` (and
  ``positions`` for a positional map); a black-box map's ``sample_fn(x, seed)`` on float64
  NumPy (and on torch tensors for a map claiming ``differentiable``, which must take them).

A write of the same value (``k *= 1``) is no change and is not seen; anything else is, whatever
the dtype (bits are compared, so ``-0.0`` over ``0.0`` counts).

**Nor reads outside them**: every call is made a second time with each floating input placed
inside a NaN-filled buffer (at least :data:`~kernel_verify.properties.checks.inputs.GUARD` NaN
before and after it: the same values, shape and dtype, a contiguous view at another address
with a storage offset). A result that gains a NaN there read memory outside its inputs — a
kernel's tail block loaded without its mask (a new user's Triton chunked kernel passed every
other property: the rows it read past the end were multiplied by zero features, finite memory
times zero being zero), or a stride or storage offset ignored.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kernel_verify.properties.attention_cases import cases, form_cases, modes
from kernel_verify.properties.backends import backend_axis, backend_param
from kernel_verify.properties.checks.forms import Shape, draw_inputs
from kernel_verify.properties.checks.inputs import call_unchanged
from kernel_verify.properties.checks.recurrent import (
    chunk_of,
    draw_token_inputs,
    seen_gates,
    seen_inputs,
)
from kernel_verify.properties.checks.reference import draw, positions_for
from kernel_verify.properties.checks.transition_forms import index_array, recurrent_view
from kernel_verify.properties.layouts import DV, HEADS, D, chunks_of
from kernel_verify.properties.protocol import ATTENTION_FORMS
from kernel_verify.properties.strategies import generator
from kernel_verify.properties.targets import (
    feature_maps,
    none_param,
    of_kind,
    provides_none,
)
from kernel_verify.verify.backends import AXIS, Backend

ALL_DTYPES = ("float64", "float32", "float16", "bfloat16")
#: The gated forms, in the order they are called.
GATED_FORMS = ("parallel", *ATTENTION_FORMS)


# ------------------------------------------------------------------ shapes
def _fit(target, t: int) -> int:
    """``t`` moved into the target's shape contract (a multiple of ``length_multiple_of``, at
    least ``min_length``)."""
    mult = int(getattr(target, "length_multiple_of", 1) or 1)
    t = max(t, int(getattr(target, "min_length", 1) or 1))
    return -(-t // mult) * mult


def lengths(target) -> list[int]:
    """The two lengths of every property: 5, and one past the target's largest chunk."""
    return sorted({_fit(target, 5), _fit(target, max(chunks_of(target)) + 1)})


def _dv(target) -> int:
    return D if getattr(target, "dv_equals_d", False) else DV


# ------------------------------------------------------------------ attention
@pytest.mark.parametrize(("target", "backend"), cases())
def test_attention_leaves_its_inputs_unchanged(target, backend):
    """``attention(q, k, v, causal=..., seed=...)`` leaves q, k and v bitwise as they were."""
    t = target.to_layout
    for n in lengths(target):
        x = draw_inputs(Shape(2, HEADS, n, D, _dv(target), 1, 1, 11 * n), stream="inputs")
        q = t(backend.from_numpy(x.q))
        k = q if target.self_attention_only else t(backend.from_numpy(x.k))
        v = t(backend.from_numpy(x.v))
        for causal in modes(target):
            call_unchanged(f"{target.name} on {backend.id}: attention(causal={causal}) at "
                           f"(B, H, T, d, d_v) = {(2, HEADS, n, D, _dv(target))} "
                           f"({target.layout})", target.attention,
                           [("q", q), ("k", k), ("v", v)], {"causal": causal, "seed": 0})


# ------------------------------------------------------------------ forms


def gated_cases() -> list:
    """``(target, backend)`` for every ``GatedAttentionTarget`` (the adapter's, else the
    built-in ones) and every backend it accepts, half types included (no bound is used)."""
    def builtin() -> list:
        from kernel_verify.properties.builtin_gated import builtin_gated_targets

        return builtin_gated_targets()

    targets = of_kind("GatedAttentionTarget", builtin)
    if not targets:
        return none_param(provides_none("gated attention (GatedAttentionTarget)"), values=2)
    return [backend_param(t, backend=b, id=f"{t.name}-{b.id}")
            for t in targets for b in AXIS if t.accepts(b.library, b.dtype)]


def _chunks(view) -> list[int]:
    """The chunk sizes the chunked form is called at: every declared one, else 4."""
    sizes = view.chunk_sizes
    return [4] if sizes is None else [chunk_of(view, i) for i in range(len(sizes))]


def _twice(what: str, fn, args, kw: dict, state_slot: str = "initial_state") -> None:
    """``fn`` fresh, then from the state its first call returned (``(out, state)``), each call
    leaving its inputs unchanged; a form raising ``NotImplementedError`` when given a state
    takes none (the forms protocol) and is called fresh only."""
    _, state = call_unchanged(f"{what} from no state", fn, args, kw)
    if state is not None:
        try:
            call_unchanged(f"{what} from the state of a first call", fn, args,
                           {**kw, state_slot: state})
        except NotImplementedError:  # a form without a state input (the protocol's word)
            pass


def forms_leave_inputs_unchanged(target, backend: Backend, n: int) -> None:
    """Every form of ``target`` (an attention target through its identity-transition view, or a
    gated target) called on ``n`` tokens leaves every argument bitwise as it was."""
    view = recurrent_view(target)
    t = view.to_layout
    shape = Shape(2, HEADS, n, D, _dv(target), 4, 1, 13 * n)
    at = f"{target.name} on {backend.id} at (B, H, T, d, d_v) = {(2, HEADS, n, D, _dv(target))}"

    def arguments(sh: Shape):
        x = seen_inputs(draw_inputs(sh), backend)
        g = seen_gates(draw_token_inputs(view, sh, "mixed"), backend)
        qkv = [(name, t(backend.from_numpy(getattr(x, name)))) for name in "qkv"]
        gg, kw = g.arguments(view, backend.from_numpy)
        return x, g, [*qkv, ("g", gg)], kw

    x, g, args, kw = arguments(shape)
    for form in ("parallel", "stateful"):
        if getattr(view, form, None) is not None:
            _twice(f"{at}: {form}", getattr(view, form), args, {**kw, "seed": 0})
    if view.chunked is not None:
        for c in _chunks(view):
            _twice(f"{at}: chunked(chunk_size={c})", view.chunked, args,
                   {**kw, "chunk_size": c, "seed": 0})
    if view.step is not None:
        state = None
        for i in range(2):
            xi = [(name, backend.from_numpy(np.ascontiguousarray(getattr(x, name)[..., i, :])))
                  for name in "qkv"]
            gi, kwi = g.at(i).arguments(view, backend.from_numpy, step=True)
            state, _ = call_unchanged(
                f"{at}: step at token {i} from {'no state' if state is None else 'a state'}",
                view.step, [("state", state), *xi, ("g", gi)], {**kwi, "seed": 0})
    if view.padded is not None:
        mask = np.ones((2, n), dtype=bool)
        mask[0, n - n // 2:] = False  # right padding
        mask[1, : n // 2] = False  # left padding
        _twice(f"{at}: padded (right- and left-padded rows)", view.padded, args,
               {**kw, "mask": index_array(mask, backend), "seed": 0})
    if view.varlen is not None:
        one = replace(shape, b=1, t=2 * n)
        _, _, args1, kw1 = arguments(one)
        cu = np.array([0, n, 2 * n], dtype=np.int64)
        _twice(f"{at}: varlen (2 sequences of {n})", view.varlen, args1,
               {**kw1, "cu_seqlens": index_array(cu, backend), "seed": 0})


@pytest.mark.parametrize(("target", "backend"), form_cases(any_of=ATTENTION_FORMS))
def test_attention_forms_leave_their_inputs_unchanged(target, backend):
    """Every form (``stateful``, ``chunked``, ``step``, ``varlen``, ``padded``) leaves q, k, v,
    ``cu_seqlens``, ``mask`` and the ``initial_state``/``state`` bitwise as they were."""
    for n in lengths(target):
        forms_leave_inputs_unchanged(target, backend, n)


@pytest.mark.parametrize(("target", "backend"), gated_cases())
def test_gated_forms_leave_their_inputs_unchanged(target, backend):
    """Every form (``parallel``, ``stateful``, ``chunked``, ``step``, ``varlen``, ``padded``)
    leaves q, k, v, the gates, β and the transition's other inputs, the gate parameters,
    ``cu_seqlens``, ``mask`` and the ``initial_state``/``state`` bitwise as they were."""
    for n in lengths(target):
        forms_leave_inputs_unchanged(target, backend, n)


# ------------------------------------------------------------------ feature maps
@pytest.mark.parametrize("target", feature_maps())
@pytest.mark.parametrize("backend", backend_axis(ALL_DTYPES))
def test_feature_map_leaves_its_inputs_unchanged(target, backend):
    """φ leaves ``x`` (and a white-box map's ``params`` and ``positions``) bitwise as they were:
    ``numpy_fn``/``torch_fn`` and the log-feature functions of a white-box map, ``sample_fn``
    of a black-box map."""
    if backend.skip_reason:
        pytest.skip(backend.skip_reason)
    d, n = 4, 3
    x = 0.5 * generator(7, "inputs unchanged").standard_normal((n, d))
    where = f"{target.name} on {backend.id} at x {x.shape}"
    if not target.white_box:
        if backend.library == "numpy" and backend.dtype == "float64":
            call_unchanged(f"{where}: sample_fn", target.sample_fn, [("x", x)], {"seed": 3})
            return
        if backend.library == "torch" and target.has("differentiable"):
            call_unchanged(f"{where}: sample_fn", target.sample_fn,
                           [("x", backend.from_numpy(x))], {"seed": 3})
            return
        pytest.skip(f"{target.name} is black-box: sample_fn takes float64 NumPy (torch tensors "
                    "only with the claim differentiable)")
    names = (("numpy_fn", "log_numpy_fn") if backend.library == "numpy"
             else ("torch_fn", "log_torch_fn"))
    fns = [(name, getattr(target, name)) for name in names if getattr(target, name) is not None]
    if not fns:
        pytest.skip(f"{target.name} provides no {backend.name} feature function")
    params = backend.from_numpy_params(draw(target, 5, d, 6))
    pos = positions_for(target, n)
    kw = {} if pos is None else {"positions": pos}
    for name, fn in fns:
        call_unchanged(f"{where}: {name}", fn,
                       [("x", backend.from_numpy(x)), ("params", params),
                        ("config", target.config)], kw)
