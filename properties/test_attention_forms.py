"""The forms of causal attention and their state (docs/math.md §13) on attention targets that
offer them (the forms protocol of :class:`~kernel_verify.properties.protocol.
AttentionTarget`), over every backend and dtype the target accepts: the identity transition of
the one set of recurrent forms properties (:mod:`kernel_verify.properties.checks.
transition_forms`, whose bodies these tests call; the gated and delta-rule transitions are
``properties/test_gated_forms.py``'s).

Hypothesis draws the batch, heads, length ``T``, widths ``d`` and ``d_v`` (``H ≠ T``,
``d_v ≠ d`` in most draws: non-square layouts), the chunk size ``C`` and the split point; the
lengths always include ``T ∈ {1, C − 1, C, C + 1}`` and the chunk sizes ``1``, ``T`` and
non-divisors of ``T`` (:func:`form_shapes`), besides free draws. Before any draw, every property
runs the fixed layouts around the target's chunk boundaries (:mod:`kernel_verify.properties.
layouts`: its declared ``chunk_sizes``, else 4 and 16; ``T ∈ {1, C − 1, C, C + 1, 2C + 1}``,
split points at ``C − 1``, ``C``, ``C + 1``, packed boundaries and padded lengths at ``C − 1``,
``C``, ``C + 1``, with and without initial states): Hypothesis explicit examples, which a
target's ``call_seconds`` never cuts. A property needing a form the target does not offer is
skipped naming the field that would add it.

The judge (:class:`ByTheForms`) is relative, for black-box targets too: the forms
(``stateful``, ``chunked`` at the drawn ``C``, ``step``) agree with ``attention(causal=True)``;
split, packed, padded and decoded runs equal the target's own full run; two states agree when
the probe continues identically from both — within ``2ε`` of
:func:`~kernel_verify.properties.attention_cases.output_error_bound` for the inputs as the
target saw them (it covers any evaluation order, a state carried between calls included), or
the derived bound of the declared features (:func:`tol`), plus the same-precision criterion on
float32 and half types for a target declaring ``features``. Besides the shared bodies:

* the forms meet the exact mpmath recurrence (:mod:`kernel_verify.verify.references.forms`)
  within the derived bounds of the declared features, outputs and ``state_sums`` — white-box
  targets, float64 and float32;
* the final state equals the recurrence for every ``T``: the states after a chunked run and
  after ``T`` steps continue a probe identically;
* with ``differentiable``, padded inputs get zero gradient, and gradients flow through the
  final state: the outputs after the split point, as a function of the prefix inputs, have the
  gradient float64 finite differences give (torch float32: the declared formula's).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kernel_verify.properties.attention_cases import (
    call,
    form_cases,
    output_error_bound,
    seen,
)
from kernel_verify.properties.checks.declared import direct_extra, exact_bounds, feature_error
from kernel_verify.properties.checks.forms import (  # shared with kernel-verify calibrate
    Shape,
    draw_inputs,
    padding_mask,
    state_gradient_check,
)
from kernel_verify.properties.checks.recurrent import run as run_form
from kernel_verify.properties.checks.recurrent import run_steps as steps_of
from kernel_verify.properties.checks.transition_forms import (
    NO_GATES,
    Expected,
    check_state_sums,
    every_form,
    packed_sequences,
    padded_rows,
    prefill_then_decode,
    recurrent_view,
    split_invariance,
    state_sizes,
    where,
)
from kernel_verify.properties.checks.transition_forms import steps_tail as shared_steps_tail
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
from kernel_verify.properties.strategies import QKV, generator, qkv_join, seeds
from kernel_verify.verify.backends import Backend
from kernel_verify.verify.references.forms import causal_recurrence_mp
from kernel_verify.verify.tolerance import ulp

#: Examples per (property, target, backend): the forms run several calls per example.
FORM_EXAMPLES = max(2, settings.default.max_examples // 8)
#: Probe tokens that compare two states through their continuations.
PROBE = 3


# ------------------------------------------------------------------ cases and inputs


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


_same_precision = same_precision  # the judge's methods call it by this name


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
    """``(out float64 (B, H, T, d_v), state)`` of the target's ``chunked`` (at ``chunk``, else
    at ``T``) or ``stateful`` form, in its layout, from ``state``: the shared call of
    :func:`~kernel_verify.properties.checks.recurrent.run` on the identity transition."""
    form = form or ("chunked" if chunk is not None and target.offers("chunked") else
                    "stateful" if target.offers("stateful") else "chunked")
    return run_form(recurrent_view(target), backend, x, NO_GATES, form=form, seed=seed,
                    chunk=chunk if chunk is not None else max(x.q.shape[-2], 1), state=state)


def run_steps(target, backend: Backend, x: QKV, *, seed: int, state=None):
    """The recurrence one token at a time: ``(outputs (B, H, T, d_v), final state)``."""
    return steps_of(recurrent_view(target), backend, x, NO_GATES, seed=seed, state=state)


#: The recurrence one token at a time runs over at most this many final tokens of a sequence
#: (17 = 2·8 + 1), continuing from the state the full-sequence form reached before them
#: (:func:`steps_tail`): a layout of T = 129 would otherwise cost 129 calls of a slow kernel per
#: property. The step form over a whole sequence is checked on every random draw (T ≤ 12), and
#: across every chunk boundary by prefill-then-decode, whose layouts decode from t₀ = C − 1, C,
#: C + 1 to the end.
MAX_STEPS = 17


def steps_tail(target, backend: Backend, x: QKV, *, seed: int):
    """``(start, outputs of rows start…T−1, final state)`` of the recurrence one token at a time
    over at most the last :data:`MAX_STEPS` tokens (:func:`~kernel_verify.properties.checks.
    transition_forms.steps_tail`)."""
    return shared_steps_tail(target, backend, x, NO_GATES, seed=seed, tokens=MAX_STEPS)


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


def probe_for(shape: Shape) -> QKV:
    return draw_inputs(shape, t=PROBE, stream="probe")


class ByTheForms:
    """The judge of the plain forms properties (:class:`~kernel_verify.properties.checks.
    transition_forms.Judge`): a run against the target's own full-sequence form (:func:`run`)
    or ``attention(causal=True)``, within ``2ε`` of the whole input (:func:`tol`); a state
    against the reference run's final state through the probe continued from both
    (:func:`same_state`); on float32 and half types, for a target declaring ``features``, also
    the same-precision criterion (:func:`same_precision`)."""

    relative = True  # the reference is the target's own full run

    def __init__(self, target, backend: Backend, seed: int) -> None:
        self.target, self.backend, self.seed = target, backend, seed

    def whole(self, x: QKV, g=NO_GATES, *, context=None, state=None, chunk: int | None = None,
              form: str | None = None) -> Expected:
        if form == "attention":
            out, st_ = call(self.target, self.backend, x, causal=True, seed=self.seed), None
        else:
            out, st_ = run(self.target, self.backend, x, seed=self.seed, chunk=chunk, state=state)
        cx = x if context is None else context[0]
        return Expected(out, tol(cx, self.backend, self.target, self.seed), (cx, NO_GATES), st_)

    def outputs(self, got: np.ndarray, want: Expected, what: str, start: int = 0) -> None:
        text = nonfinite(got) or observed(got, tol=want.bound, expected=want.out[..., start:, :])
        if text:
            raise AssertionError(f"{what}: differs from the reference run: {text}")

    def state(self, state, want: Expected, probe, what: str, same_precision: bool = False) -> None:
        cx = want.context[0]
        got, _ = same_state(self.target, self.backend, state, want.state, probe[0], cx,
                            self.seed, what)
        if same_precision:
            check_same(got, _same_precision(qkv_join(cx, probe[0]), self.backend, self.target,
                                            self.seed),
                       self.backend, f"{what}: the probe continued from it", start=cx.q.shape[-2])

    def same_precision(self, got: np.ndarray, want: Expected, what: str, start: int = 0) -> None:
        if "same" not in want.extra:  # computed once per expectation
            want.extra["same"] = _same_precision(want.context[0], self.backend, self.target,
                                                 self.seed)
        check_same(got, want.extra["same"], self.backend, what, start)

    def continuation(self, state, probe) -> np.ndarray:
        return continuation(self.target, self.backend, state, probe[0], self.seed)


# ------------------------------------------------------------------ the forms agree
@pytest.mark.parametrize(("target", "backend"), form_cases(any_of=(*STATEFUL, "step")))
@_on_shapes(_at_lengths)
def test_forms_agree_with_each_other(target, backend, shape):
    """parallel = chunked (any C) = recurrent: ``attention(causal=True)``, ``stateful``,
    ``chunked`` at the drawn C and the steps give the same outputs within ``2ε``; on float32
    and half types, a target declaring ``features`` also has every output within the
    same-precision reference criterion (:func:`same_precision`)."""
    x = draw_inputs(shape)
    judge = ByTheForms(target, backend, shape.seed)
    want = judge.whole(x, form="attention")
    w = where(target, backend, shape)
    outs = every_form(target, backend, x, NO_GATES, seed=shape.seed, chunks=(shape.chunk,),
                      step_tokens=MAX_STEPS)
    for name, (out, _, start) in outs.items():
        judge.outputs(out, want, f"{w}: {name} vs attention(causal=True)", start)
    for name, (out, _, start) in {"attention(causal=True)": (want.out, None, 0), **outs}.items():
        judge.same_precision(out, want, f"{w}: {name}", start)


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
    ``(S, z)``. float64 and float32 backends, and half types computed in float32
    (``half_in_float32``: features from the half inputs in float32, the outputs cast back —
    one rounding of the half type added to the outputs' bound; a state kept or returned in
    the half type misses the float32 bound of ``state_sums``). A half type computed natively
    rounds its features to the half type, which the model does not cover (skipped)."""
    b = backend.budget
    if b.output_round and b.compute_dtype == backend.dtype:
        pytest.skip(f"the exact comparison runs on float64/float32 backends and on half types "
                    f"computed in float32 ({backend.dtype} computed in {b.compute_dtype} rounds "
                    "its features to the half type)")
    x = seen(draw_inputs(shape), backend)
    fq = np.asarray(target.features(x.q, shape.seed), dtype=np.float64)
    fk = np.asarray(target.features(x.k, shape.seed), dtype=np.float64)
    ref, (s_ref, z_ref) = causal_recurrence_mp(fq, fk, x.v)
    u = backend.budget.u_compute
    out_b, s_b, z_b = _exact_bounds(fq, fk, x.v, u, _feature_error(x, fq.shape[-1], u))
    if b.output_round:  # the cast back to the half type
        out_b = out_b + b.output_round * ulp(np.abs(ref).astype(np.float64) + out_b,
                                             backend.dtype)
    outs = {"attention(causal=True)": (call(target, backend, x, causal=True, seed=shape.seed),
                                       None, 0),
            **every_form(target, backend, x, NO_GATES, seed=shape.seed, chunks=(shape.chunk,),
                         step_tokens=MAX_STEPS)}
    w = where(target, backend, shape)
    for name, (out, state, start) in outs.items():
        check_within(out, ref[..., start:, :], out_b[..., start:, :], f"{w}: {name} output")
        check_state_sums(target, state, (s_ref, z_ref), (s_b, z_b), f"{w}: {name}", z=True)


# ------------------------------------------------------------------ split invariance
@pytest.mark.parametrize(("target", "backend"), form_cases(any_of=STATEFUL))
@_on_shapes(_at_layouts)
def test_split_invariance(target, backend, shape):
    """``[0, t₀)`` then ``[t₀, T)`` from its final state = ``[0, T)``: outputs within ``2ε``
    and the two final states continue a probe identically (bitwise, outputs and probe, under
    ``state_bitwise``); on float32 and half types, a target declaring ``features`` also has the
    split outputs and the probe continued from the split run's state within the same-precision
    reference criterion (:func:`same_precision`)."""
    split_invariance(ByTheForms(target, backend, shape.seed), draw_inputs(shape), NO_GATES, shape,
                     where(target, backend, shape))


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
    w = f"{where(target, backend, shape)} lengths {lengths}, initial states {with_state}"
    packed_sequences(ByTheForms(target, backend, shape.seed), seqs, [NO_GATES] * n_seq, init,
                     None if prefix is None else (prefix, NO_GATES), shape, w)


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
    grad = target.has("differentiable") and backend.library == "torch"
    w = f"{where(target, backend, shape)}, {padding}"
    out, arrays = padded_rows(ByTheForms(target, backend, shape.seed), x, NO_GATES, mask, shape,
                              w, grad=grad)
    if grad:
        import torch

        weights = torch.as_tensor(generator(shape.seed, "cotangent").standard_normal(
            tuple(out.shape)), dtype=out.dtype, device=out.device)
        keep = torch.as_tensor(mask, device=out.device)[:, None, :, None]
        loss = (out * weights * keep).sum()
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
    cut = shape.cut if shape.cut < shape.t else 0  # T = 1: decode from the empty state
    prefill_then_decode(ByTheForms(target, backend, shape.seed), draw_inputs(shape), NO_GATES,
                        cut, shape.chunk, where(target, backend, shape))


# ------------------------------------------------------------------ state size
@pytest.mark.parametrize(("target", "backend"), form_cases(any_of=(*STATEFUL, "step")))
@_on_shapes(_at_lengths)
def test_state_size_does_not_grow_with_length(target, backend, shape):
    """The state after T tokens and after 2T + 5 tokens has the same arrays and shapes (and
    the step's state equals the full-sequence form's in layout)."""
    long = draw_inputs(shape, t=2 * shape.t + 5, stream="long")
    state_sizes(target, backend, [(draw_inputs(shape), NO_GATES), (long, NO_GATES)], shape.seed,
                shape.chunk, where(target, backend, shape))


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
