"""The forms of causal attention and their state (docs/math.md §13) on attention targets that
offer them (the forms protocol of :class:`~kernel_verify.properties.protocol.
AttentionTarget`), over every backend and dtype the target accepts.

Hypothesis draws the batch, heads, length ``T``, widths ``d`` and ``d_v`` (``H ≠ T``,
``d_v ≠ d`` in most draws: non-square layouts), the chunk size ``C`` and the split point; the
lengths always include ``T ∈ {1, C − 1, C, C + 1}`` and the chunk sizes ``1``, ``T`` and
non-divisors of ``T`` (:func:`form_cases`), besides free draws. Before any draw, every property
runs the fixed layouts around the target's chunk boundaries (:mod:`kernel_verify.properties.
layouts`: its declared ``chunk_sizes``, else 4 and 16; ``T ∈ {1, C − 1, C, C + 1, 2C + 1}``,
split points at ``C − 1``, ``C``, ``C + 1``, packed boundaries and padded lengths at ``C − 1``,
``C``, ``C + 1``, with and without initial states): Hypothesis explicit examples, which a
target's ``call_seconds`` never cuts. Properties, each for the
targets offering the forms it needs (else skipped with the field that would add it):

* the forms agree with each other: ``attention(causal=True)``, ``stateful``, ``chunked`` at the
  drawn ``C`` and the recurrence one token at a time (``step``), outputs within ``2ε``;
* the forms meet the exact mpmath recurrence (:mod:`kernel_verify.verify.references.forms`) within
the derived
  bounds (:mod:`kernel_verify.verify.forms_bounds`), outputs and final state — white-box targets
  (``features``, ``state_sums``), float64 and float32;
* split invariance: running ``[0, t₀)`` and continuing from its final state equals the full run,
  at every split point drawn, outputs and state (bitwise under ``state_bitwise``);
* the final state equals the recurrence for every ``T``: the state after a chunked run and the
  state after ``T`` steps continue a probe sequence identically;
* packed sequences (``varlen``, ``cu_seqlens``) equal separate runs, with and without initial
  states (the state resets at each boundary);
* padding (``padded``, right or left, garbage values at padded positions) changes neither the
  valid outputs nor the state; with ``differentiable``, padded inputs get zero gradient;
* prefill then decode (``step``) equals the causal prefix of the full run;
* the state's size does not grow with ``T``;
* gradients (``differentiable``, torch float64) flow through the final state: the outputs after
  the split point, as a function of the prefix inputs (which reach them only through the
  state), have the gradient float64 finite differences give.

States are opaque: two states are compared through their continuations — the same probe tokens
run from each (by the target's own form) must give outputs within ``2ε``; a white-box target's
``state_sums`` are also compared with the exact state. Tolerances: ``ε`` of
:func:`~kernel_verify.properties.attention_cases.output_error_bound` for the inputs as the target
saw them (it covers any evaluation order, a state carried between calls included), and the derived
bounds of :mod:`kernel_verify.verify.forms_bounds` for the exact comparison.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kernel_verify.properties.attention_cases import (
    call,
    for_target,
    output_error_bound,
    seen,
)
from kernel_verify.properties.backends import backend_param
from kernel_verify.properties.checks.declared import direct_extra, exact_bounds, feature_error
from kernel_verify.properties.checks.forms import (  # shared with kernel-verify calibrate
    Shape,
    draw_inputs,
    padding_mask,
    state_gradient_check,
)
from kernel_verify.properties.checks.forms import chunk_size as _chunk
from kernel_verify.properties.evidence import (
    check_same_precision,
    check_within,
    nonfinite,
    observed,
)
from kernel_verify.properties.layouts import (
    AT_BOUNDARIES,
    FixedDraws,
    Layout,
    packings,
    paddings,
    shape_of,
    shapes_for,
    with_layouts,
)
from kernel_verify.properties.layouts import chunks_of as _chunks_of
from kernel_verify.properties.strategies import QKV, generator, qkv_join, qkv_rows, seeds
from kernel_verify.properties.targets import attentions_with, missing_form_param, none_param
from kernel_verify.verify.backends import AXIS, Backend
from kernel_verify.verify.references.forms import causal_recurrence_mp

#: Examples per (property, target, backend): the forms run several calls per example.
FORM_EXAMPLES = max(2, settings.default.max_examples // 8)
#: Probe tokens that compare two states through their continuations.
PROBE = 3


# ------------------------------------------------------------------ cases and inputs
def form_cases(*need: str, any_of: tuple[str, ...] = ()) -> list:
    """``pytest.param(target, backend)`` for causal attention targets × accepted backends;
    targets lacking a form in ``need`` (or all of ``any_of``) are one skipped param naming the
    protocol field that would add the property."""
    targets, skip = attentions_with(("causal",))
    if skip is not None:
        return none_param(skip, values=2)
    out = []
    for t in targets:
        skipped = missing_form_param(t, need, any_of, "AttentionTarget",
                                     "the forms protocol, docs/math.md §13",
                                     lambda t, f: t.offers(f))
        if skipped is not None:
            out.append(skipped)
            continue
        out.extend(backend_param(t, backend=for_target(t, b), id=f"{t.name}-{b.id}")
                   for b in AXIS if t.accepts(b.library, b.dtype))
    return out


STATEFUL = ("stateful", "chunked")


@st.composite
def form_shapes(draw, max_t: int = 12) -> Shape:
    """``T`` from ``{1, C − 1, C, C + 1}`` or free; then ``C`` from ``{1, T, a non-divisor of T,
    the first C}``; the split point ``1 ≤ t₀ < T`` (``t₀ = 1`` when ``T = 1``)."""
    c0 = draw(st.integers(1, 6), label="C")
    t = draw(st.one_of(st.sampled_from(sorted({max(c0 - 1, 1), c0, c0 + 1, 1})),
                       st.integers(1, max_t)), label="T")
    non_divisors = [c for c in range(2, t) if t % c]
    chunks = [c0, 1, t] + (non_divisors[:2] if non_divisors else [])
    chunk = draw(st.sampled_from(chunks), label="chunk size")
    cut = draw(st.integers(1, max(t - 1, 1)), label="split point")
    return Shape(draw(st.integers(1, 2)), draw(st.integers(1, 3)), t, draw(st.integers(1, 4)),
                 draw(st.integers(1, 3)), chunk, cut, draw(seeds, label="seed"))


#: Fixed layouts every property runs: non-square (H ≠ T, d_v ≠ d), T = C ± 1, C ∤ T, C = 1, T.
EXAMPLES = (Shape(1, 2, 5, 3, 1, 3, 2, 0), Shape(2, 1, 4, 2, 3, 4, 3, 1),
            Shape(1, 3, 7, 4, 2, 1, 6, 2))


def _examples(fn):
    """The fixed examples of a forms property: :data:`EXAMPLES`, then every layout around the
    target's chunk boundaries (:mod:`kernel_verify.properties.layouts`: ``T ∈ {1, C − 1, C,
    C + 1, 2C + 1}``, split points at ``C − 1``, ``C``, ``C + 1``), before the random draws.
    Place it above ``@given`` and :data:`_at_layouts` below it."""
    for s in (*EXAMPLES, AT_BOUNDARIES):
        fn = example(shape=s)(fn)
    return fn


#: Runs the body once per layout of the target when Hypothesis passes ``AT_BOUNDARIES``.
_at_layouts = with_layouts(lambda target, **_: ({"shape": s} for s in shapes_for(target)))
#: The same, one layout per length: for the properties that never split the sequence.
_at_lengths = with_layouts(
    lambda target, **_: ({"shape": s} for s in shapes_for(target, splits=False)))


def _on_shapes(layouts, shapes: st.SearchStrategy | None = None):
    """The draws of a forms property: ``@given(shape=shapes)`` (default :func:`form_shapes`) at
    :data:`FORM_EXAMPLES` examples, its fixed examples first (:func:`_examples`), the body run
    at every layout of :data:`_at_layouts` or :data:`_at_lengths` (``layouts``)."""
    def wrap(fn):
        drawn = given(shape=form_shapes() if shapes is None else shapes)(layouts(fn))
        return settings(max_examples=FORM_EXAMPLES)(_examples(drawn))
    return wrap


def _on_fixed_draws(layouts):
    """The draws of a forms property that draws more than the shape (lengths, padding):
    ``@given(shape=form_shapes(), data=st.data())`` at :data:`FORM_EXAMPLES` examples, the
    ``AT_BOUNDARIES`` example first, where the body runs at every layout ``layouts`` yields (each
    with the fixed answers to the body's draws)."""
    def wrap(fn):
        drawn = given(shape=form_shapes(), data=st.data())(with_layouts(layouts)(fn))
        return settings(max_examples=FORM_EXAMPLES)(
            example(shape=AT_BOUNDARIES, data=AT_BOUNDARIES)(drawn))
    return wrap


def tol(x: QKV, backend: Backend, target=None, seed: int = 0) -> float:
    """``2ε`` for two outputs of the target on (rounded) inputs ``x`` (issue #29: bounds that
    know what they bound). A target declaring ``features``, on float64/float32: twice the
    largest derived bound of the causal evaluation on those features
    (:func:`~kernel_verify.properties.checks.declared.exact_bounds`, the features' own error and
    a directly formed weight included; it covers a state carried between calls, docs/math.md
    §13); otherwise ``2ε`` of
    :func:`~kernel_verify.properties.attention_cases.output_error_bound` with the target's
    feature count (declared, else ``M_MAX``)."""
    from kernel_verify.properties.attention_cases import feature_count

    xs = seen(x, backend)
    if target is not None and target.features is not None and not backend.budget.output_round:
        from kernel_verify.properties.checks.declared import features64

        u = backend.budget.u_compute
        fq, fk = features64(target, xs.q, seed), features64(target, xs.k, seed)
        bound = _exact_bounds(fq, fk, xs.v, u, _feature_error(xs, fq.shape[-1], u),
                              direct_extra(xs.q.shape[-1]))[0]
        if np.isfinite(bound).all():
            return 2 * float(bound.max(initial=0.0))
    m = None if target is None else feature_count(target)
    return 2 * output_error_bound(xs, backend, m)


def same_precision(x: QKV, backend: Backend, target, seed: int):
    """``(y₆₄, plain)`` of the same-precision reference criterion (issue #44,
    :mod:`kernel_verify.verify.same_precision`) for the causal outputs of a target declaring
    ``features`` on a float32 or half-precision backend: the float64 outputs of the declared
    features of the inputs as the target saw them, and the quadratic form of the same features
    evaluated in the backend's compute dtype and cast to its dtype; None where the criterion
    does not apply (float64, or no declared features)."""
    if target is None or target.features is None or backend.dtype == "float64":
        return None
    from kernel_verify.properties.checks.declared import exact_attention, features64
    from kernel_verify.verify.same_precision import causal_attention_plain

    xs = seen(x, backend)
    fq, fk = features64(target, xs.q, seed), features64(target, xs.k, seed)
    y64 = exact_attention(fq, fk, xs.v, True)
    plain = causal_attention_plain(fq, fk, xs.v, compute=backend.budget.compute_dtype)
    if not (np.isfinite(y64).all() and np.isfinite(plain).all()):
        return None  # nothing to judge against: the derived bound alone
    return y64, plain


def check_same(got: np.ndarray, sp, backend: Backend, what: str, start: int = 0) -> None:
    """The criterion on ``got`` (rows ``start…`` of the outputs ``sp`` describes); nothing
    when ``sp`` is None."""
    if sp is None:
        return
    y64, plain = sp
    check_same_precision(got, y64[..., start:, :], plain[..., start:, :],
                         compute=backend.budget.compute_dtype, output=backend.dtype, what=what)


# ------------------------------------------------------------------ calling the forms
def run(target, backend: Backend, x: QKV, *, seed: int, chunk: int | None = None,
        state=None, form: str | None = None):
    """``(out float64 (B, H, T, d_v), state)`` of the target's ``chunked`` (at ``chunk``) or
    ``stateful`` form, in its layout, from ``state``."""
    t = target.to_layout
    q, k, v = (t(backend.from_numpy(a)) for a in (x.q, x.k, x.v))
    form = form or ("chunked" if chunk is not None and target.offers("chunked") else
                    "stateful" if target.offers("stateful") else "chunked")
    if form == "chunked":
        c = _chunk(target, chunk if chunk is not None else max(x.q.shape[-2], 1))
        out, st_ = target.chunked(q, k, v, chunk_size=c, initial_state=state, seed=seed)
    else:
        out, st_ = target.stateful(q, k, v, initial_state=state, seed=seed)
    out = backend.to_numpy(t(out))
    want = (*x.q.shape[:-1], x.v.shape[-1])
    assert out.shape == want, f"{target.name} {form}: output shape {out.shape}, expected {want}"
    return out, st_


def run_steps(target, backend: Backend, x: QKV, *, seed: int, state=None):
    """The recurrence one token at a time: ``(outputs (B, H, T, d_v), final state)``."""
    outs = []
    for i in range(x.q.shape[-2]):
        q, k, v = (backend.from_numpy(np.ascontiguousarray(a[..., i, :])) for a in (x.q, x.k, x.v))
        state, o = target.step(state, q, k, v, seed=seed)
        outs.append(backend.to_numpy(o))
    return np.stack(outs, axis=-2), state


#: The recurrence one token at a time runs over at most this many final tokens of a sequence
#: (17 = 2·8 + 1), continuing from the state the full-sequence form reached before them
#: (:func:`steps_tail`): a layout of T = 129 would otherwise cost 129 calls of a slow kernel per
#: property. The step form over a whole sequence is checked on every random draw (T ≤ 12), and
#: across every chunk boundary by prefill-then-decode, whose layouts decode from t₀ = C − 1, C,
#: C + 1 to the end.
MAX_STEPS = 17


def steps_tail(target, backend: Backend, x: QKV, *, seed: int):
    """``(start, outputs of rows start…T−1, final state)`` of the recurrence one token at a time:
    from the empty state (``start = 0``) when ``T ≤`` :data:`MAX_STEPS` or the target has no
    full-sequence form with a state, else over the last :data:`MAX_STEPS` tokens from the state
    the target's own ``stateful``/``chunked`` form reached after the first ``T − MAX_STEPS``."""
    n = x.q.shape[-2]
    if n <= MAX_STEPS or not (target.offers("stateful") or target.offers("chunked")):
        out, state = run_steps(target, backend, x, seed=seed)
        return 0, out, state
    start = n - MAX_STEPS
    _, state = run(target, backend, qkv_rows(x, 0, start), seed=seed)
    out, state = run_steps(target, backend, qkv_rows(x, start, n), seed=seed, state=state)
    return start, out, state


def _steps_name(start: int, n: int) -> str:
    return "step × T" if not start else (f"step × {n - start} (from the full-sequence form's "
                                         f"state after {start} tokens)")


def continuation(target, backend, state, probe: QKV, seed: int) -> np.ndarray:
    """What a state does: the outputs of the probe tokens run from it."""
    if target.offers("stateful") or target.offers("chunked"):
        return run(target, backend, probe, seed=seed, state=state)[0]
    return run_steps(target, backend, probe, seed=seed, state=state)[0]


def same_state(target, backend, a, b, probe: QKV, context: QKV, seed: int, what: str):
    """Two states agree when the probe continues identically from both (``2ε`` of the whole
    input ``context + probe``); returns the two continuations."""
    got_a = continuation(target, backend, a, probe, seed)
    got_b = continuation(target, backend, b, probe, seed)
    text = observed(got_a, tol=tol(qkv_join(context, probe), backend, target, seed), expected=got_b)
    if text:
        raise AssertionError(f"{what}: the probe continues differently from the two states: "
                             f"{text}")
    return got_a, got_b


def where(target, backend, shape: Shape) -> str:
    return (f"{target.name} on {backend.id} (B={shape.b}, H={shape.h}, T={shape.t}, "
            f"d={shape.d}, d_v={shape.dv}, C={_chunk(target, shape.chunk)}, "
            f"t0={shape.cut}, seed={shape.seed})")


def probe_for(shape: Shape) -> QKV:
    return draw_inputs(shape, t=PROBE, stream="probe")


def _size(state) -> list[tuple[int, ...]]:
    return [tuple(s.shape) for s in state]


# ------------------------------------------------------------------ the forms agree
@pytest.mark.parametrize(("target", "backend"), form_cases(any_of=(*STATEFUL, "step")))
@_on_shapes(_at_lengths)
def test_forms_agree_with_each_other(target, backend, shape):
    """parallel = chunked (any C) = recurrent: ``attention(causal=True)``, ``stateful``,
    ``chunked`` at the drawn C and the steps give the same outputs within ``2ε``; on float32
    and half types, a target declaring ``features`` also has every output within the
    same-precision reference criterion (:func:`same_precision`)."""
    x = draw_inputs(shape)
    ref = call(target, backend, x, causal=True, seed=shape.seed)
    outs = {}
    if target.offers("stateful"):
        outs["stateful"] = (run(target, backend, x, seed=shape.seed, form="stateful")[0], 0)
    if target.offers("chunked"):
        outs[f"chunked(C={_chunk(target, shape.chunk)})"] = (run(
            target, backend, x, seed=shape.seed, chunk=shape.chunk, form="chunked")[0], 0)
    if target.offers("step"):
        start, steps, _ = steps_tail(target, backend, x, seed=shape.seed)
        outs[_steps_name(start, shape.t)] = (steps, start)
    bound = tol(x, backend, target, shape.seed)
    for name, (out, start) in outs.items():
        text = nonfinite(out) or observed(out, tol=bound, expected=ref[..., start:, :])
        if text:
            raise AssertionError(f"{where(target, backend, shape)}: {name} differs from "
                                 f"attention(causal=True): {text}")
    sp = same_precision(x, backend, target, shape.seed)
    for name, (out, start) in {"attention(causal=True)": (ref, 0), **outs}.items():
        check_same(out, sp, backend, f"{where(target, backend, shape)}: {name}", start)


# ------------------------------------------------------------------ the exact recurrence
#: The derived bounds of the exact comparison (shared with the tolerances and the declared-
#: features properties): properties/checks/declared.py.
_feature_error = feature_error
_exact_bounds = exact_bounds


@pytest.mark.parametrize(("target", "backend"),
                         form_cases("features", any_of=(*STATEFUL, "step")))
@_on_shapes(_at_lengths, form_shapes(max_t=8))
def test_forms_meet_the_exact_recurrence(target, backend, shape):
    """Every offered form (and ``attention(causal=True)``) against the exact recurrence of the
    target's features (``features(x, seed)``, float64, of the inputs as the target saw them),
    within the derived bound for the compute dtype, the features' own evaluation error
    included (:func:`_feature_error`); the final state through ``state_sums`` against the exact
    ``(S, z)``. float64 and float32 backends (half types round their features to the half
    type: that rounding is not in the model)."""
    if backend.budget.output_round:
        pytest.skip(f"the exact comparison runs on float64/float32 backends ({backend.dtype} "
                    "features are rounded to the half type)")
    x = seen(draw_inputs(shape), backend)
    fq = np.asarray(target.features(x.q, shape.seed), dtype=np.float64)
    fk = np.asarray(target.features(x.k, shape.seed), dtype=np.float64)
    ref, (s_ref, z_ref) = causal_recurrence_mp(fq, fk, x.v)
    u = backend.budget.u_compute
    out_b, s_b, z_b = _exact_bounds(fq, fk, x.v, u, _feature_error(x, fq.shape[-1], u))
    outs = {"attention(causal=True)": (call(target, backend, x, causal=True, seed=shape.seed),
                                       None, 0)}
    if target.offers("stateful"):
        outs["stateful"] = (*run(target, backend, x, seed=shape.seed, form="stateful"), 0)
    if target.offers("chunked"):
        outs["chunked"] = (*run(target, backend, x, seed=shape.seed, chunk=shape.chunk,
                                form="chunked"), 0)
    if target.offers("step"):
        start, steps, state = steps_tail(target, backend, x, seed=shape.seed)
        outs[_steps_name(start, shape.t)] = (steps, state, start)
    for name, (out, state, start) in outs.items():
        check_within(out, ref[..., start:, :], out_b[..., start:, :],
                     f"{where(target, backend, shape)}: {name} output")
        if state is None or target.state_sums is None:
            continue
        s, z = target.state_sums(state)
        for label, got, want, bound in (("S", s, s_ref, s_b), ("z", z, z_ref, z_b)):
            if got is None:
                continue
            e = np.abs(np.asarray(got, dtype=np.float64) - want)
            assert (e <= bound).all(), (
                f"{where(target, backend, shape)}: {name} final state {label} differs from the "
                f"exact recurrence by {e.max():.3e} (bound {bound.flat[np.argmax(e)]:.3e})")


# ------------------------------------------------------------------ split invariance
@pytest.mark.parametrize(("target", "backend"), form_cases(any_of=STATEFUL))
@_on_shapes(_at_layouts)
def test_split_invariance(target, backend, shape):
    """``[0, t₀)`` then ``[t₀, T)`` from its final state = ``[0, T)``: outputs within ``2ε``
    and the two final states continue a probe identically (bitwise, outputs and probe, under
    ``state_bitwise``); on float32 and half types, a target declaring ``features`` also has the
    split outputs and the probe continued from the split run's state within the same-precision
    reference criterion (:func:`same_precision`)."""
    x = draw_inputs(shape)
    cut = min(shape.cut, shape.t)
    full, s_full = run(target, backend, x, seed=shape.seed, chunk=shape.chunk)
    first, s_first = run(target, backend, qkv_rows(x, 0, cut), seed=shape.seed, chunk=shape.chunk)
    if cut < shape.t:
        second, s_split = run(target, backend, qkv_rows(x, cut, shape.t), seed=shape.seed,
                              chunk=shape.chunk, state=s_first)
        split = np.concatenate([first, second], axis=-2)
    else:
        split, s_split = first, s_first
    w = where(target, backend, shape)
    if target.has("state_bitwise"):
        assert np.array_equal(split, full), (f"{w}: split at {cut} is not bitwise equal to the "
                                             "full run (the target claims state_bitwise)")
        probe = probe_for(shape)
        a = continuation(target, backend, s_split, probe, shape.seed)
        b = continuation(target, backend, s_full, probe, shape.seed)
        assert np.array_equal(a, b), f"{w}: the two final states continue differently (bitwise)"
        return
    text = observed(split, tol=tol(x, backend, target, shape.seed), expected=full)
    if text:
        raise AssertionError(f"{w}: running [0, {cut}) and continuing from its state differs "
                             f"from the full run: {text}")
    probe = probe_for(shape)
    got_split, _ = same_state(target, backend, s_split, s_full, probe, x, shape.seed,
                              f"{w}: final state of the split run vs the full run")
    sp = same_precision(x, backend, target, shape.seed)
    check_same(split, sp, backend, f"{w}: split at {cut}")
    spj = same_precision(qkv_join(x, probe), backend, target, shape.seed)
    check_same(got_split, spj, backend, f"{w}: the probe continued from the split run's final "
               "state", start=shape.t)


# ------------------------------------------------------------------ final state = recurrence
@pytest.mark.parametrize(("target", "backend"), form_cases("step", any_of=STATEFUL))
@_on_shapes(_at_lengths)
def test_final_state_equals_the_recurrence_for_every_length(target, backend, shape):
    """The final state of a chunked run (any T, not only multiples of C) and the state after T
    steps continue a probe identically; so do their outputs (the steps over at most the last
    :data:`MAX_STEPS` tokens, :func:`steps_tail`)."""
    x = draw_inputs(shape)
    out, s_chunks = run(target, backend, x, seed=shape.seed, chunk=shape.chunk)
    start, out_steps, s_steps = steps_tail(target, backend, x, seed=shape.seed)
    w = where(target, backend, shape)
    text = observed(out[..., start:, :], tol=tol(x, backend, target, shape.seed),
                    expected=out_steps)
    if text:
        raise AssertionError(f"{w}: the chunked form differs from the recurrence: {text}")
    same_state(target, backend, s_chunks, s_steps, probe_for(shape), x, shape.seed,
               f"{w}: final state of the chunked form vs T recurrent steps")


# ------------------------------------------------------------------ packed sequences
def _packed_layouts(target, **_):
    """Packed layouts around the chunk boundaries (:func:`~kernel_verify.properties.layouts.
    packings`): the body's draws (count, lengths, initial states) answered from each."""
    for i, p in enumerate(packings(_chunks_of(target))):
        lay = Layout(max(p.lengths), p.chunk, 1, 100 + i)
        yield {"shape": shape_of(target, lay),
               "data": FixedDraws([len(p.lengths), *p.lengths, p.with_state],
                                  f"lengths {list(p.lengths)}, initial states {p.with_state}")}


@pytest.mark.parametrize(("target", "backend"), form_cases("varlen", any_of=STATEFUL))
@_on_fixed_draws(_packed_layouts)
def test_packed_sequences_equal_separate_runs(target, backend, shape, data):
    """``varlen`` on N sequences packed along time (``cu_seqlens``) = N separate runs, outputs
    and final states, with fresh or given initial states (the state resets at each boundary)."""
    n_seq = data.draw(st.integers(1, 3), label="sequences")
    lengths = [data.draw(st.integers(1, max(shape.t, 1)), label=f"length {i}")
               for i in range(n_seq)]
    with_state = data.draw(st.booleans(), label="initial states")
    one = Shape(1, shape.h, shape.t, shape.d, shape.dv, shape.chunk, shape.cut, shape.seed)
    seqs = [draw_inputs(one, t=n, stream=f"seq{i}") for i, n in enumerate(lengths)]
    init = None
    prefix = None
    if with_state:
        prefix = draw_inputs(Shape(n_seq, shape.h, 2, shape.d, shape.dv, 1, 1, shape.seed),
                             stream="prefix")
        init = run(target, backend, prefix, seed=shape.seed)[1]
    packed = qkv_join(*seqs)
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    t = target.to_layout
    q, k, v = (t(backend.from_numpy(a)) for a in (packed.q, packed.k, packed.v))
    out, states = target.varlen(q, k, v, cu_seqlens=_index_array(cu, backend), initial_state=init,
                                seed=shape.seed)
    out = backend.to_numpy(t(out))
    w = f"{where(target, backend, shape)} lengths {lengths}, initial states {with_state}"
    for i, x in enumerate(seqs):
        st_i = None if init is None else tuple(s[i:i + 1] for s in init)
        ref, s_ref = run(target, backend, x, seed=shape.seed, state=st_i)
        context = x if prefix is None else qkv_join(
            qkv_rows(QKV(*(getattr(prefix, f)[i:i + 1] for f in "qkv"), 0.5), 0, 2), x)
        got = out[..., cu[i]:cu[i + 1], :]
        text = observed(got, tol=tol(context, backend, target, shape.seed), expected=ref)
        if text:
            raise AssertionError(f"{w}: sequence {i} packed differs from its separate run: "
                                 f"{text}")
        same_state(target, backend, tuple(s[i:i + 1] for s in states), s_ref,
                   probe_for(one), context, shape.seed,
                   f"{w}: final state of sequence {i} packed vs separate")


def _index_array(a: np.ndarray, backend: Backend):
    if backend.library == "numpy":
        return a
    import torch

    return torch.as_tensor(a, device=backend.device)


# ------------------------------------------------------------------ padding
def _padded_layouts(target, **_):
    """Two rows padded around the chunk boundaries (:func:`~kernel_verify.properties.layouts.
    paddings`): valid lengths ``C − 1``, ``C``, ``C + 1``, right and left padding."""
    for i, p in enumerate(paddings(_chunks_of(target))):
        lay = Layout(p.t, p.chunk, 1, 200 + i)
        yield {"shape": shape_of(target, lay, b=2),
               "data": FixedDraws([*p.valid, p.left],
                                  f"valid lengths {list(p.valid)}, left {p.left}")}


@pytest.mark.parametrize(("target", "backend"), form_cases("padded", any_of=STATEFUL))
@_on_fixed_draws(_padded_layouts)
def test_padding_changes_neither_valid_outputs_nor_state(target, backend, shape, data):
    """Rows padded on the right or the left with large garbage values: valid outputs and the
    final state equal those of the valid part alone; with ``differentiable`` (torch), padded
    positions get exactly zero gradient."""
    mask, padding = padding_mask(data, shape)
    x = draw_inputs(shape)
    rng = generator(shape.seed, "padding")
    garbage = {f: 30.0 * rng.standard_normal(getattr(x, f).shape) for f in "qkv"}
    px = QKV(*(np.where(mask[:, None, :, None], getattr(x, f), garbage[f]) for f in "qkv"), 0.5)
    t = target.to_layout
    arrays = [backend.from_numpy(a) for a in (px.q, px.k, px.v)]
    grad = target.has("differentiable") and backend.library == "torch"
    if grad:
        arrays = [a.detach().requires_grad_(True) for a in arrays]
    out, state = target.padded(*(t(a) for a in arrays), mask=_index_array(mask, backend),
                               seed=shape.seed)
    out_np = backend.to_numpy(t(out.detach() if grad else out))
    w = f"{where(target, backend, shape)}, {padding}"
    for b in range(shape.b):
        idx = np.flatnonzero(mask[b])
        xb = QKV(*(getattr(x, f)[b:b + 1][..., idx, :] for f in "qkv"), 0.5)
        ref, s_ref = run(target, backend, xb, seed=shape.seed)
        text = observed(out_np[b:b + 1][..., idx, :], tol=tol(xb, backend, target, shape.seed),
                        expected=ref)
        if text:
            raise AssertionError(f"{w}: row {b}: valid outputs changed by padding: {text}")
        if state is not None:
            one = Shape(1, shape.h, shape.t, shape.d, shape.dv, shape.chunk, shape.cut,
                        shape.seed)
            same_state(target, backend, tuple(s[b:b + 1] for s in state), s_ref,
                       probe_for(one), xb, shape.seed,
                       f"{w}: row {b}: final state with padding vs the valid part alone")
    if grad:
        import torch

        weights = torch.as_tensor(generator(shape.seed, "cotangent").standard_normal(
            out_np.shape), dtype=out.dtype, device=out.device)
        keep = torch.as_tensor(mask, device=out.device)[:, None, :, None]
        loss = (t(out) * weights * keep).sum()
        grads = torch.autograd.grad(loss, arrays, allow_unused=True)
        for name, g in zip("qkv", grads, strict=True):
            if g is None:
                continue
            g_np = g.detach().to("cpu", torch.float64).numpy()
            pad = g_np[np.broadcast_to(~mask[:, None, :, None], g_np.shape)]
            assert not np.any(pad), (f"{w}: padded positions of {name} get a nonzero gradient "
                                     f"(max |g| = {np.abs(pad).max():.3e})")


# ------------------------------------------------------------------ prefill then decode
@pytest.mark.parametrize(("target", "backend"), form_cases("step", any_of=STATEFUL))
@_on_shapes(_at_layouts)
def test_prefill_then_decode_equals_the_causal_prefix(target, backend, shape):
    """Prefill ``[0, t₀)`` with the full-sequence form, then decode ``t₀ … T−1`` one token at a
    time from its state (from the empty state when ``T = 1``): the decoded outputs equal the
    full causal run's."""
    x = draw_inputs(shape)
    cut = shape.cut if shape.cut < shape.t else 0  # T = 1: decode from the empty state
    state = None
    if cut:
        _, state = run(target, backend, qkv_rows(x, 0, cut), seed=shape.seed, chunk=shape.chunk)
    decoded, _ = run_steps(target, backend, qkv_rows(x, cut, shape.t), seed=shape.seed, state=state)
    full = call(target, backend, x, causal=True, seed=shape.seed)
    text = observed(decoded, tol=tol(x, backend, target, shape.seed), expected=full[..., cut:, :])
    if text:
        raise AssertionError(f"{where(target, backend, shape)}: decoding after a prefill of "
                             f"{cut} tokens differs from the causal run: {text}")


# ------------------------------------------------------------------ state size
@pytest.mark.parametrize(("target", "backend"), form_cases(any_of=(*STATEFUL, "step")))
@_on_shapes(_at_lengths)
def test_state_size_does_not_grow_with_length(target, backend, shape):
    """The state after T tokens and after 2T + 5 tokens has the same arrays and shapes (and
    the step's state equals the full-sequence form's in layout)."""
    short = draw_inputs(shape)
    long = draw_inputs(shape, t=2 * shape.t + 5, stream="long")
    sizes = []
    for x in (short, long):
        if target.offers("stateful") or target.offers("chunked"):
            sizes.append(_size(run(target, backend, x, seed=shape.seed, chunk=shape.chunk)[1]))
        if target.offers("step"):
            sizes.append(_size(run_steps(target, backend, qkv_rows(x, 0, 2), seed=shape.seed)[1]))
    assert all(s == sizes[0] for s in sizes), (
        f"{where(target, backend, shape)}: state shapes differ between lengths/forms: {sizes}")


# ------------------------------------------------------------------ gradients through the state
@pytest.mark.parametrize(("target", "backend"), form_cases(any_of=STATEFUL))
@_on_shapes(_at_layouts, form_shapes(max_t=6))
def test_gradients_flow_through_the_state(target, backend, shape):
    """``differentiable`` targets, torch float64: the outputs after the split point, computed by
    continuing from the prefix's final state, as a function of the *prefix* inputs — they reach
    it only through the state — have the gradient float64 central differences give
    (``torch.autograd.gradcheck``, fast mode; step and tolerance of
    ``properties/test_gradients.py``). A state detached from the graph, or a wrong backward
    through it, fails.

    torch float32 (issue #29; float32-only targets such as fla's kernels): a target declaring
    ``features`` (with ``positive_weights``) has the same gradient compared with the exact
    gradient of the declared formula (the rows before the split of ``∂L/∂(q, k, v)`` with
    ``G = 0`` before it), within the derived float32 bound
    (:func:`~kernel_verify.properties.checks.declared.state_gradient_declared`); without
    features, float32 directional differences
    (:func:`~kernel_verify.properties.checks.declared.state_gradient_differences`)."""
    if not (target.has("differentiable") and backend.library == "torch"
            and backend.dtype in ("float64", "float32")):
        pytest.skip("gradients through the state: differentiable targets (claim "
                    "`differentiable`) on torch float64 and float32")
    if backend.dtype == "float32":
        _state_gradient_float32(target, backend, shape)
        return
    assert state_gradient_check(target, backend, shape) is not False, (
        f"{where(target, backend, shape)}: the gradient of the continuation with respect to the "
        f"prefix inputs (through the final state) disagrees with finite differences")


def _state_gradient_float32(target, backend, shape) -> None:
    from kernel_verify.properties.checks.declared import (
        state_gradient_declared,
        state_gradient_differences,
    )

    w = where(target, backend, shape)
    if target.features is not None and target.has("positive_weights"):
        for c in state_gradient_declared(target, backend, shape) or []:
            assert c.ratio <= 1, (
                f"{w}: ∂L/∂{c.name} of the prefix through the final state differs from the "
                f"declared formula's: worst error/derived bound {c.ratio:.3g} (max |got| "
                f"{np.abs(c.got).max():.3g}, max |exact| {np.abs(c.ref).max():.3g})")
        return
    for r in state_gradient_differences(target, backend, shape) or []:
        assert r.ratio <= 1, (
            f"{w}: the gradient of the continuation with respect to the prefix inputs (through "
            f"the final state) disagrees with float32 finite differences: {r.numeric!r} vs "
            f"{r.analytic!r} (allowed {r.allowed:.3g})")
