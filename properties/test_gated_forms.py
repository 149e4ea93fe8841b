"""Gated (decayed) and delta-rule causal linear attention in all its forms (docs/math.md §16,
§23), on every :class:`~kernel_verify.properties.gated_protocol.GatedAttentionTarget`
(built-in, or ``kernel-verify check module:attr``) over every backend × dtype it accepts: the
gated transitions of the one set of recurrent forms properties (:mod:`kernel_verify.properties.
checks.transition_forms`, whose bodies these tests call; the identity transition is
``properties/test_attention_forms.py``'s).

The judge (:class:`~kernel_verify.properties.checks.recurrent.ByTheTruth`) compares every form
with the **exact** recurrence of the target's transition and features
(:mod:`kernel_verify.verify.references.gated`, ``recurrence``: mpmath, log-gates summed
exactly) within the derived bound of :mod:`kernel_verify.verify.gated_bounds` (``recurrence_
bounds``) for the compute dtype (plus the cast back of a half type), on the inputs and gates as
the target saw them: two forms with the same defect agree with each other, not with the truth.
Continuations are compared with the exact run of the whole sequence.

Hypothesis draws the layout (:class:`~kernel_verify.properties.checks.forms.Shape`: batch,
heads, ``T ∈ {C + 1, C, C − 1, 1}`` with ``C ∈ {3, 4, 5}`` (the simplest example: ``T = 4``
across ``C = 3``) or free, chunk sizes ``C``, 1, T and non-divisors, a split point, head
dimensions ``d ∈ [1, 4]`` or 6 or 9 and ``d_v ∈ [1, 3]`` or 5, so a kernel's partial last tile
along d shows; a target whose own block is longer than 10 tokens declares ``chunk_sizes`` and
``T`` crosses it) and the
**gate regime** (:data:`REGIMES`): decays near 1 (``g ∈ [−10⁻³, 0]``, close to plain linear
attention), near 0 (``g`` down to the target's ``min_log_gate``), mixed, long runs of strong
decay (half the sequence at ``min_log_gate``: ``e^(G_t)`` of the run underflows float32, so a
form that forms ``e^(G_t)`` and ``e^(−G_s)`` separately breaks), and an underflow run (the
sequence lengthened until a run at ``min_log_gate`` sums below −760: ``e^(G_t)`` underflows
float64 too; 26 tokens at the default −30); β and q/k norm regimes for a delta rule. A target
with fixed ``chunk_sizes`` (a kernel's own chunk, e.g. 64) also gets ``T ∈ {C − 1, C + 1,
2C + 1}``: every property crosses its chunk boundary. A missing form skips naming the protocol
field. Besides the shared bodies: every output before ``t₀`` is bitwise unchanged by the future
(causality), and with ``differentiable`` (torch) the gradients through the state and with
respect to the gates and transition inputs meet float64 central differences, and those of the
decay transition the float64 closed forms (:func:`reference_gradients`).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_verify.impls.recurrence_conventions import L2_CONVENTIONS
from kernel_verify.properties.backends import backend_param
from kernel_verify.properties.checks.forms import (
    Shape,
    draw_inputs,
    gradcheck_culprits,
    gradcheck_f64,
    padding_mask,
)
from kernel_verify.properties.checks.recurrent import (  # shared with the report's pages
    FULL,
    REGIMES,
    STATEFUL,
    ByTheTruth,
    beta_top,
    call_tensors,
    check_plain,
    chunk_of,
    continuation_gradcheck,
    differentiable_parts,
    draw_gate_parameters,
    draw_token_inputs,
    exact,
    full_forms,
    gate_shape,
    plain,
    raw_gate_input,
    rebuild_inputs,
    run,
    run_any,
    run_steps,
    seen_gates,
    seen_inputs,
    underflow_run_length,
)
from kernel_verify.properties.checks.transition_forms import (
    check_state_sums,
    every_form,
    every_form_from_a_state,
    forms_left_to_split,
    packed_sequences,
    padded_rows,
    prefill_then_decode,
    split_invariance,
    state_sizes,
    where,
)
from kernel_verify.properties.checks.transition_forms import probe_for as shared_probe
from kernel_verify.properties.evidence import check_same_precision, check_within
from kernel_verify.properties.gated_protocol import l2_features
from kernel_verify.properties.layouts import (
    GATED_MAX_TOKENS,
    LONG_CHUNK_LENGTHS,
    LONG_CHUNKS,
)
from kernel_verify.properties.strategies import QKV, generator, qkv_join, qkv_rows
from kernel_verify.properties.targets import missing_form_param, none_param, of_kind, provides_none
from kernel_verify.properties.token_inputs import TokenInputs
from kernel_verify.verify.backends import AXIS
from kernel_verify.verify.gated_bounds import smallest_normal

#: Examples per (property, target, backend): each runs several forms and an mpmath reference.
GATED_EXAMPLES = max(3, settings.default.max_examples // 5)
PROBE = 3
#: Tokens run one at a time at most (a long sequence is prefilled up to its last ones): a step
#: of a slow kernel (Triton's interpreter) costs as much as a whole sequence.
STEP_TOKENS = 8
HALF = ("float16", "bfloat16")


# ------------------------------------------------------------------ cases
def gated_targets() -> list:
    """The gated targets under test: the adapter's (``KV_TARGET``), else the built-in ones
    (:mod:`kernel_verify.properties.builtin_gated`)."""
    def builtin() -> list:
        from kernel_verify.properties.builtin_gated import builtin_gated_targets

        return builtin_gated_targets()

    return of_kind("GatedAttentionTarget", builtin)


def gated_cases(*need: str, any_of: tuple[str, ...] = (), bound_free: bool = False) -> list:
    """``pytest.param(target, backend)`` for gated targets × accepted backends; a target
    lacking a form is one skipped param naming the field that would add the property.
    ``bound_free``: the property uses no rounding bound (bitwise causality, state shapes), so
    it also runs on half types for a target that does not claim ``half_in_float32``."""
    targets = gated_targets()
    if not targets:
        return none_param(provides_none("gated attention (GatedAttentionTarget)"), values=2)
    out = []
    for t in targets:
        skipped = missing_form_param(t, need, any_of, "GatedAttentionTarget",
                                     "the gated forms protocol",
                                     lambda t, f: getattr(t, f) is not None)
        if skipped is not None:
            out.append(skipped)
            continue
        for b in AXIS:
            if t.accepts(b.library, b.dtype):
                if b.dtype in HALF and not t.has("half_in_float32") and not bound_free:
                    out.append(pytest.param(t, b, id=f"{t.name}-{b.id}", marks=pytest.mark.skip(
                        reason=f"not credited on {b.id}: the target does not claim "
                               "half_in_float32, so every operation may round to the half "
                               "type and the derived bound is void")))
                    continue
                out.append(backend_param(t, backend=b, id=f"{t.name}-{b.id}"))
    return out




@contextmanager
def naming_a_half_state(target, backend, x: QKV, g: TokenInputs, seed: int):
    """A failure on a half type, where the target returns its state in that type, says so: the
    claim ``half_in_float32`` promises one rounding of the output per call, and a state rounded
    to the half type between calls is a second one the derived bounds do not allow."""
    try:
        yield
    except AssertionError as err:
        found = None
        form = next((f for f in STATEFUL if getattr(target, f) is not None), None)
        if backend.dtype in HALF and form is not None:
            try:
                _, state = run(target, backend, qkv_rows(x, 0, 1), g.rows(0, 1), form=form,
                               seed=seed)
            except Exception:  # a hint only: the failure stands as it is
                state = None
            parts = state if isinstance(state, (tuple, list)) else (state,)
            found = next((str(p.dtype) for p in parts
                          if str(getattr(p, "dtype", "")).endswith(HALF)), None)
        if found is None:
            raise
        raise AssertionError(
            f"{err}\n{target.name} returns its state in {found}: under half_in_float32 a state "
            "is kept in float32 (rounding it to the half type between calls is a second "
            "rounding per call, which the derived bounds do not allow); return the state in "
            "float32, or do not claim half_in_float32") from None


# ------------------------------------------------------------------ layouts and gates
def draw_shape(data, target, max_t: int = GATED_MAX_TOKENS) -> Shape:
    """The layout (module docstring); crosses a fixed chunk size of the target."""
    c0 = data.draw(st.integers(3, 5), label="C")  # simplest: T = 4 across C = 3
    if target.chunk_sizes is not None and max(target.chunk_sizes) > max_t:
        big = max(target.chunk_sizes)
        # the first (simplest) example already crosses the block boundary
        t = data.draw(st.sampled_from([big + 1, 2 * big + 1, big - 1, 3]), label="T")
    elif target.chunk_sizes is None and target.chunked is not None:
        # a chunked form that takes any chunk size: besides the short draws, chunks of 16 and
        # 32 (a UT/WY solve blocked in 16s, a fixed inner tile) at T = 17 and 33
        t = data.draw(st.one_of(st.sampled_from([c0 + 1, c0, c0 - 1, 1]),
                                st.integers(3, max_t), st.sampled_from(LONG_CHUNK_LENGTHS)),
                      label="T")
    else:
        t = data.draw(st.one_of(st.sampled_from([c0 + 1, c0, c0 - 1, 1]),
                                st.integers(3, max_t)), label="T")
    non_divisors = [c for c in range(2, t) if t % c]
    longer = [c for c in LONG_CHUNKS if c < t] if target.chunk_sizes is None else []
    chunk = data.draw(st.sampled_from([c0, 1, t, *non_divisors[:2], *longer]),
                      label="chunk size")
    cut = data.draw(st.integers(1, max(t - 1, 1)), label="split point")
    b, h = data.draw(st.integers(1, 2), label="B"), data.draw(st.integers(1, 3), label="H")
    # mostly small, sometimes past a kernel's tile of 4 or 8 along d (a partial last tile)
    d = data.draw(st.integers(1, 4) | st.sampled_from([6, 9]), label="d")
    dv = d if target.dv_equals_d else data.draw(st.integers(1, 3) | st.just(5), label="d_v")
    return Shape(b, h, t, d, dv, chunk, cut, data.draw(st.integers(0, 2**32 - 1), label="seed"))


#: β regimes of a transition with β (the first is what the simplest example draws).
BETA_REGIMES = ("uniform", "edges")
#: Norms of q and k of a delta-rule transition (the features normalise them: the ε convention
#: shows at tiny norms): as drawn, every row at 10^(−4..−2), at 10^(1..2), or mixed.
NORM_REGIMES = ("as drawn", "tiny", "large", "mixed")


def _scale_rows(x: QKV, regime: str, seed: int) -> QKV:
    if regime == "as drawn":
        return x
    rng = generator(seed, f"norms:{regime}")
    shape = (*x.q.shape[:-1], 1)
    lo, hi = {"tiny": (-4, -2), "large": (1, 2), "mixed": (-4, 2)}[regime]
    sq, sk = (10.0 ** rng.uniform(lo, hi, shape) for _ in range(2))
    return QKV(x.q * sq, x.k * sk, x.v, x.scale)


def setup(target, backend, data, max_t: int = GATED_MAX_TOKENS):
    shape = draw_shape(data, target, max_t)
    # a slow target (few examples): its simplest example already has a run of strong decay
    order = REGIMES if target.call_seconds is None else ("strong_runs", *REGIMES[:1],
                                                         *REGIMES[2:])
    regime = data.draw(st.sampled_from(order), label="gate regime")
    if regime == "underflow_run":  # a sequence long enough for the run, in every dtype
        need = underflow_run_length(target)
        if need is None:
            regime = "strong_runs"
        else:
            shape = replace(shape, t=max(shape.t, need + 3))
    raw = draw_inputs(shape)
    if target.transition != "decay":
        if "beta" in target.token_inputs():
            regime += ", β " + data.draw(st.sampled_from(BETA_REGIMES), label="β regime")
        norms = data.draw(st.sampled_from(NORM_REGIMES), label="q/k norms")
        raw = _scale_rows(raw, norms, shape.seed)
        if norms != "as drawn":
            regime += f", q/k norms {norms}"
    x = seen_inputs(raw, backend)
    g = seen_gates(draw_token_inputs(target, shape, _draw_regime(regime)), backend)
    return shape, regime, x, g


def _norms_of(regime: str) -> str:
    """The q/k norm regime of a regime label (``"as drawn"`` when it names none)."""
    _, _, norms = regime.partition(", q/k norms ")
    return norms or "as drawn"


def _draw_regime(regime: str) -> str:
    """The part of a regime label the token inputs are drawn from (the norms are the inputs')."""
    return regime.split(", q/k norms")[0]


def probe_for(target, backend, shape: Shape, regime: str | None = None, b: int | None = None):
    """The probe that reads a state (:func:`~kernel_verify.properties.checks.transition_forms.
    probe_for`: the ``read`` regime whatever the sequence's ``regime``, which is accepted for
    the callers' convenience and not used)."""
    return shared_probe(target, backend, shape, b=b)


# ------------------------------------------------------------------ every form = exact
@pytest.mark.parametrize(("target", "backend"), gated_cases(any_of=(*FULL, "step")))
@settings(max_examples=GATED_EXAMPLES)
@given(data=st.data())
def test_gated_forms_meet_the_exact_recurrence(target, backend, data):
    """parallel, stateful, chunked (drawn C, and C = 1, 2) and the recurrence one step at a
    time, outputs against the exact gated recurrence within the derived bound, under the drawn
    gates and under a run of strong decay (every example); final states through
    ``state_sums`` against the exact state. On float32 and half types every output is also
    within the same-precision reference criterion (issue #44,
    :mod:`kernel_verify.verify.same_precision`: the plain recurrence run in the same
    precision)."""
    shape, regime, x, g = setup(target, backend, data)
    with naming_a_half_state(target, backend, x, g, shape.seed):
        _forms_meet_exact(target, backend, shape, regime, x, g)
    first = regime.split(",")[0]
    if (first not in ("strong_runs", "underflow_run") and target.fixed_log_gates is None
            and target.gates != "none"
            and target.call_seconds is None):  # a run of strong decay in every example
        # (a slow target draws it among the regimes: its few examples go to other layouts):
        # one whose log-gates sum below −UNDERFLOW_LOG where the target's min_log_gate allows
        need = underflow_run_length(target)
        kind = "strong_runs" if need is None else "underflow_run"
        strong_regime = kind + regime[len(first):]
        long = shape if need is None else replace(shape, t=max(shape.t, need + 3))
        xl = x if long is shape else seen_inputs(
            _scale_rows(draw_inputs(long, stream="underflow"), _norms_of(regime), long.seed),
            backend)
        strong = seen_gates(draw_token_inputs(target, long, _draw_regime(strong_regime)),
                            backend)
        _forms_meet_exact(target, backend, long, strong_regime, xl, strong)


def _forms_meet_exact(target, backend, shape, regime, x, g) -> None:
    ref, s_ref, bound, s_b = exact(target, backend, x, g)
    w = where(target, backend, shape, regime)
    same = plain(target, backend, x, g)
    # the drawn C, and C = 1 and 2: every row at a boundary; long sequences: the last
    # STEP_TOKENS one by one after a prefill
    for name, (out, state, off) in every_form(target, backend, x, g, seed=shape.seed,
                                              chunks=(shape.chunk, 1, 2),
                                              step_tokens=STEP_TOKENS, prefill_chunk=1).items():
        try:
            check_within(out, ref[..., off:, :], bound[..., off:, :], f"{w}: {name}")
        except AssertionError as err:
            hint = l2_convention_hint(target, backend, x, g, out, off)
            if hint is None:
                raise
            raise AssertionError(f"{err}\n{hint}") from None
        check_plain(out, ref, same, backend, f"{w}: {name}", start=off)
        check_state_sums(target, state, s_ref, s_b, f"{w}: {name}", z=target.has("normalised"))


def _final_replay() -> bool:
    """Whether this is Hypothesis' final replay of the failing example: diagnoses that cost
    more than the check run once, not on every shrinking step. Outside Hypothesis (the power
    harness calls the bodies directly, thousands of failing trials) no diagnosis is made."""
    from hypothesis.control import _current_build_context

    ctx = _current_build_context.value
    return ctx is not None and bool(getattr(ctx, "is_final", False))


def l2_convention_hint(target, backend, x, g, out, off: int) -> str | None:
    """For a target whose features are :func:`l2_features`: the other ε convention or ε value
    (of a few common ones) under which ``out`` *does* meet the exact recurrence within its
    bound, closest first, among those whose exact outputs differ from the declared convention's
    by more than the bound at these inputs (else the inputs cannot tell them apart) — the likely
    cause of the failure, said in the declaration's words; None when none does (or the features
    are not ``l2_features``)."""
    declared = getattr(target.features, "convention", None)
    if declared is None or not _final_replay():
        return None
    conv0, eps0, q_scale = declared
    ref0 = exact(target, backend, x, g)[0][..., off:, :]
    best = None  # (worst error/bound, convention, ε) of the closest fit
    for eps in dict.fromkeys((eps0, 1e-6, 1e-5, 1e-12, 0.0)):
        for conv in L2_CONVENTIONS:
            if (conv, eps) == (conv0, eps0) or (conv == "clamp" and eps == 0.0):
                continue
            other = replace(target, features=l2_features(eps=eps, convention=conv,
                                                         q_scale=q_scale))
            ref, _, bound, _ = exact(other, backend, x, g)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = float(np.max(np.abs(out - ref[..., off:, :]) / bound[..., off:, :]))
                # a convention whose truth is within the bound of the declared one's at these
                # inputs cannot be told apart from it here: no evidence either way
                apart = float(np.max(np.abs(ref[..., off:, :] - ref0) / bound[..., off:, :]))
            if ratio <= 1 < apart and (best is None or ratio < best[0]):
                best = (ratio, conv, eps)
    if best is None:
        return None
    _, conv, eps = best
    return (f"HINT: these outputs meet the exact recurrence with "
            f"features=l2_features(eps={eps:g}, convention={conv!r}) (the closest of the "
            f"conventions and ε tried) — the declared features are l2_features(eps={eps0:g}, "
            f"convention={conv0!r}): the implementation normalises q and k with another ε or "
            "another ε placement than it declares")


# ------------------------------------------------------------------ split invariance
@pytest.mark.parametrize(("target", "backend"), gated_cases(any_of=STATEFUL))
@settings(max_examples=GATED_EXAMPLES)
@given(data=st.data())
def test_gated_split_invariance(target, backend, data):
    """``[0, t₀)`` then ``[t₀, T)`` continued from its final state meets the exact run of
    ``[0, T)``, and so does a probe continued from the split run's final state (bitwise equal
    to the full run under ``state_bitwise``); on float32 and half types both also within the
    same-precision reference criterion (issue #44: the plain recurrence in the same
    precision)."""
    shape, regime, x, g = setup(target, backend, data)
    with naming_a_half_state(target, backend, x, g, shape.seed):
        split_invariance(ByTheTruth(target, backend, shape.seed), x, g, shape,
                         where(target, backend, shape, regime))


@pytest.mark.parametrize(("target", "backend"), gated_cases(any_of=FULL))
@settings(max_examples=GATED_EXAMPLES)
@given(data=st.data())
def test_gated_every_form_continues_from_a_state(target, backend, data):
    """The state of ``[0, t₀)`` (the chunked or stateful form, else the steps) continues every
    full-sequence form the split-invariance property does not carry a state through (a
    ``parallel`` form; ``stateful`` beside ``chunked``) over ``[t₀, T)``: its rows meet the
    exact run of ``[0, T)``. A form that ignores ``initial_state`` fails."""
    if not forms_left_to_split(target):
        pytest.skip(f"{target.name}: its one full-sequence form with a state is split by "
                    "test_gated_split_invariance")
    if not any(getattr(target, f) is not None for f in (*STATEFUL, "step")):
        pytest.skip(f"{target.name} offers no form that returns a state (GatedAttentionTarget."
                    "stateful, .chunked or .step) to continue from")
    shape, regime, x, g = setup(target, backend, data)
    with naming_a_half_state(target, backend, x, g, shape.seed):
        every_form_from_a_state(ByTheTruth(target, backend, shape.seed), x, g, shape,
                                where(target, backend, shape, regime))


# ------------------------------------------------------------------ causality
@pytest.mark.parametrize(("target", "backend"), gated_cases(any_of=(*FULL, "step"),
                                                           bound_free=True))
@settings(max_examples=GATED_EXAMPLES)
@given(data=st.data())
def test_gated_outputs_are_causal_bitwise(target, backend, data):
    """Every future token perturbed (q, k, v, gates and the transition's inputs from
    ``t₀`` on, drawn anew in the same regime): every output before ``t₀`` of every form is
    bitwise unchanged. A causal form computes row t from rows ≤ t only, in the same order
    whatever comes later (a masked product adds exact zeros), so this holds to the last bit;
    a form that lets a later token into an earlier row — a chunk's mask off by one, a
    normaliser or a solve over the whole chunk — fails it even where the change is below
    any tolerance (docs/math.md §13, §23)."""
    shape, regime, x, g = setup(target, backend, data)
    if shape.t < 2:
        return
    cut = max(1, min(shape.cut, shape.t - 1))
    other = seen_inputs(draw_inputs(shape, stream="future"), backend)
    other_g = seen_gates(draw_token_inputs(target, shape, _draw_regime(regime),
                                           stream="future gates"), backend)
    y = qkv_join(qkv_rows(x, 0, cut), qkv_rows(other, cut, shape.t))
    gy = TokenInputs.join(g.rows(0, cut), other_g.rows(cut, shape.t))
    w = where(target, backend, shape, regime)
    runs: list[tuple[str, Any]] = []
    for form in FULL:
        if getattr(target, form) is not None:
            runs.append((form, lambda xx, gg, f=form: run(target, backend, xx, gg, form=f,
                                                          seed=shape.seed,
                                                          chunk=shape.chunk)[0]))
    if target.step is not None:
        runs.append(("step", lambda xx, gg: run_steps(target, backend, qkv_rows(xx, 0, cut + 1),
                                                      gg.rows(0, cut + 1),
                                                      seed=shape.seed)[0]))
    for name, fn in runs:
        a, b = fn(x, g)[..., :cut, :], fn(y, gy)[..., :cut, :]
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        assert same.all(), (
            f"{w}: {name}: tokens from {cut} on changed {int((~same).sum())} of {a.size} "
            f"earlier outputs (largest change {np.nanmax(np.abs(a - b)):.3e}): not causal")


# ------------------------------------------------------------------ prefill then decode
@pytest.mark.parametrize(("target", "backend"), gated_cases("step", any_of=STATEFUL))
@settings(max_examples=GATED_EXAMPLES)
@given(data=st.data())
def test_gated_prefill_then_decode(target, backend, data):
    """Prefill ``[0, t₀)`` with the full-sequence form, decode the rest one token at a time
    from its state: the decoded outputs meet the exact run."""
    shape, regime, x, g = setup(target, backend, data)
    cut = shape.cut if shape.cut < shape.t else 0
    cut = max(cut, shape.t - STEP_TOKENS)  # decode at most STEP_TOKENS tokens
    with naming_a_half_state(target, backend, x, g, shape.seed):
        prefill_then_decode(ByTheTruth(target, backend, shape.seed), x, g, cut, shape.chunk,
                            where(target, backend, shape, regime))


# ------------------------------------------------------------------ packed sequences
#: (sequences, initial states given) of the packed property, simplest first: Hypothesis tries
#: the simplest choice first, so every run has two sequences with given states (drawn apart, a
#: five-example run gave one sequence to every example with states: a new user's varlen form
#: that decayed each initial state by the earlier sequences' gates passed).
PACKED_LAYOUTS = ((2, True), (3, True), (2, False), (1, True), (3, False), (1, False))

@pytest.mark.parametrize(("target", "backend"), gated_cases("varlen"))
@settings(max_examples=GATED_EXAMPLES)
@given(data=st.data())
def test_gated_packed_sequences_equal_separate_runs(target, backend, data):
    """``varlen`` on N sequences packed along time (gates packed with them), with fresh or given
    initial states: each sequence's outputs meet its own exact run (from its own prefix) and its
    final state continues a probe as that run does — the state and the decay reset at every
    boundary."""
    shape, regime, _, _ = setup(target, backend, data)
    big = max(target.chunk_sizes or (0,))
    top = max(shape.t, 1) if big <= GATED_MAX_TOKENS else big + 1
    # the simplest layout (drawn first) is the richest: two sequences with given initial states
    # (a defect of the boundaries between states shows only there)
    n_seq, with_state = data.draw(st.sampled_from(PACKED_LAYOUTS),
                                  label="sequences, initial states")
    # the first sequence crosses the target's block (its own varlen chunk may differ from the
    # chunked form's: a sequence longer than C must be drawn, not left to chance)
    if big > GATED_MAX_TOKENS:
        first = st.sampled_from([big + 1, big - 1])
    elif target.chunk_sizes is None:
        first = st.one_of(st.integers(1, top), st.sampled_from(LONG_CHUNK_LENGTHS))
    else:
        first = st.integers(1, top)
    lengths = [data.draw(first, label="length 0")] + [
        data.draw(st.integers(1, top), label=f"length {i}") for i in range(1, n_seq)]
    with_state = with_state and any(
        getattr(target, f) is not None for f in ("stateful", "chunked", "step"))
    one = replace(shape, b=1)
    seqs = [seen_inputs(draw_inputs(one, t=n, stream=f"seq{i}"), backend)
            for i, n in enumerate(lengths)]
    gates = [seen_gates(draw_token_inputs(target, one, _draw_regime(regime), t=n,
                                          stream=f"gates{i}"), backend)
             for i, n in enumerate(lengths)]
    fixed = target.gates == "scalar_fixed"
    prefix = pg = init = None
    if with_state:
        pshape = replace(shape, b=n_seq, t=2)
        prefix = seen_inputs(draw_inputs(pshape, stream="prefix"), backend)
        pg = (gates[0] if fixed else  # one gate per head, shared
              seen_gates(draw_token_inputs(target, pshape, _draw_regime(regime),
                                           stream="prefix gates"), backend))
        init = run_any(target, backend, prefix, pg, seed=shape.seed)[1]
    w = f"{where(target, backend, shape, regime)} lengths {lengths}, initial states {with_state}"
    packed_sequences(ByTheTruth(target, backend, shape.seed), seqs, gates, init,
                     None if prefix is None else (prefix, pg), shape, w)


# ------------------------------------------------------------------ padding
@pytest.mark.parametrize(("target", "backend"), gated_cases("padded"))
@settings(max_examples=GATED_EXAMPLES)
@given(data=st.data())
def test_gated_padding_changes_neither_valid_outputs_nor_state(target, backend, data):
    """Rows padded right or left with garbage values and garbage (strong or positive-free
    random) gates: the valid outputs meet the exact run of the valid part, the final state
    continues a probe as that run does."""
    shape, regime, x, g = setup(target, backend, data)
    mask, padding = padding_mask(data, shape)
    padded_rows(ByTheTruth(target, backend, shape.seed), x, g, mask, shape,
                f"{where(target, backend, shape, regime)}, {padding}")


# ------------------------------------------------------------------ state size
@pytest.mark.parametrize(("target", "backend"), gated_cases(any_of=(*STATEFUL, "step"),
                                                           bound_free=True))
@settings(max_examples=GATED_EXAMPLES)
@given(data=st.data())
def test_gated_state_size_does_not_grow_with_length(target, backend, data):
    """The state after T and after T + 7 tokens (and after 2 steps) has the same shapes."""
    shape, regime, x, g = setup(target, backend, data)
    n = shape.t + 7  # longer by more than a step (a state that keeps tokens grows)
    long_x = seen_inputs(draw_inputs(shape, t=n, stream="long"), backend)
    long_g = seen_gates(draw_token_inputs(target, shape, _draw_regime(regime), t=n,
                                          stream="long"), backend)
    state_sizes(target, backend, [(x, g), (long_x, long_g)], shape.seed, shape.chunk,
                where(target, backend, shape, regime))


# ------------------------------------------------------------------ gradients
def _differentiable_f64(target, backend) -> None:
    if not (target.has("differentiable") and backend.library == "torch"
            and backend.dtype == "float64"):
        pytest.skip("gradients: differentiable gated targets (claim `differentiable`) on torch "
                    "float64")


_gradcheck = gradcheck_f64


def _grad_gates(target, shape: Shape) -> np.ndarray:
    """Gates for finite differences: in ``[−3, −0.05]`` (a step of ``u^(1/3)·3 ≈ 2e-5`` keeps
    them ≤ 0, where they are valid)."""
    rng = generator(shape.seed, "gradient gates")
    return -rng.uniform(0.05, 3.0, gate_shape(target, shape.b, shape.h, shape.t, shape.d))


def _grad_inputs(target, shape: Shape) -> TokenInputs:
    """The token inputs for finite differences: gates of :func:`_grad_gates`, β in
    ``[0.1, 0.9]`` of its range (a logit in ``[−2, 2]``: a step never leaves the valid set),
    the transition's vectors as drawn."""
    g = None if target.gates == "none" else _grad_gates(target, shape)
    drawn = draw_token_inputs(target, shape, "mixed", stream="gradient inputs")
    extra = dict(drawn.extra)
    if "beta" in extra:
        rng = generator(shape.seed, "gradient beta")
        size = extra["beta"].shape
        extra["beta"] = (rng.uniform(-2.0, 2.0, size) if target.beta == "sigmoid"
                         else rng.uniform(0.1, 0.9, size) * beta_top(target))
    params = draw_gate_parameters(target, shape) if g is not None else {}
    raw = g is not None and target.gate_input != "log"
    return TokenInputs(raw_gate_input(target, g, params) if raw else g,
                       target.gates == "scalar_fixed", extra, params, raw)


def _grad_qkv(target, shape: Shape) -> QKV:
    """q, k, v for finite differences; for a delta-rule transition (features that L2-normalise
    q and k) every q and k row rescaled to a norm in ``[0.5, 2]``: the normalisation bends on
    the scale ``√ε`` around 0, where central differences at the step ``u^(1/3)·max|x|`` lose
    their accuracy for a correct gradient (the tiny-norm regime is the forms properties')."""
    x = draw_inputs(shape)
    if target.transition == "decay":
        return x
    rng = generator(shape.seed, "gradient norms")

    def rows(a: np.ndarray) -> np.ndarray:
        n = np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-300)
        return a / n * rng.uniform(0.5, 2.0, n.shape)

    return QKV(rows(x.q), rows(x.k), x.v, x.scale)


@pytest.mark.parametrize(("target", "backend"), gated_cases(any_of=FULL))
@settings(max_examples=GATED_EXAMPLES)
@given(data=st.data())
def test_gated_gradients_with_respect_to_the_gates(target, backend, data):
    """torch float64: the gradient of the output w.r.t. the log-gates, the transition's inputs
    (β, p, a, b) and q, k, v, by autograd, against float64 central differences (gradcheck, fast
    mode) — ``∂o_t/∂g_r = Σ_(s<r≤t) D_ts (φq_tᵀφk_s) v_s`` for a decay, docs/math.md §16, §23.
    A target's own constant decay (``fixed_log_gates``) is no input: its gradient is not checked
    (the failure message lists the inputs that were)."""
    _differentiable_f64(target, backend)
    shape = draw_shape(data, target, max_t=6)
    x = _grad_qkv(target, shape)
    t = target.to_layout
    arrays = [backend.from_numpy(a).requires_grad_(True) for a in (x.q, x.k, x.v)]
    ti = _grad_inputs(target, shape)
    names = differentiable_parts(ti)
    # one decay per head: differentiated like the others, unless it is the target's own
    # constant (fixed_log_gates: not an input the target reads, so no gradient to check)
    if ti.g is not None and ti.fixed and getattr(target, "fixed_log_gates", None) is None:
        names = ["g", *names]
    elif ti.g is not None and ti.fixed:  # the constant decay, on the backend, not differentiated
        ti = rebuild_inputs(ti, ["g"], [backend.from_numpy(np.ascontiguousarray(ti.g))])
    parts = [backend.from_numpy(np.ascontiguousarray(ti.g if n == "g" else ti.extra[n]))
             .requires_grad_(True) for n in names]
    for form in full_forms(target):  # each form's backward is its own code

        def fn(q, k, v, *tok, form=form):
            tt = rebuild_inputs(ti, names, tok)
            return t(call_tensors(target, form, shape, q, k, v, tt)[0])

        if _gradcheck(fn, [*arrays, *parts]):
            continue
        culprits = gradcheck_culprits(fn, [*arrays, *parts], ["q", "k", "v", *names])
        raise AssertionError(
            f"{where(target, backend, shape, 'gradient')}: {form}: autograd's gradient w.r.t. "
            f"{', '.join(culprits) or 'the inputs together (none alone)'} disagrees with "
            f"float64 central differences (inputs checked: q, k, v, {', '.join(names)})")


@pytest.mark.parametrize(("target", "backend"), gated_cases(any_of=STATEFUL))
@settings(max_examples=GATED_EXAMPLES)
@given(data=st.data())
def test_gated_gradients_flow_through_the_state(target, backend, data):
    """torch float64: the outputs after the split point, continued from the prefix's final
    state, as a function of the prefix's q, k, v, gates and transition inputs (they reach them
    only through the state), against float64 central differences. A state detached from the
    graph fails."""
    _differentiable_f64(target, backend)
    shape = draw_shape(data, target, max_t=6)
    for form in full_forms(target, STATEFUL):  # each form's backward is its own code
        ok = continuation_gradcheck(target, backend, shape, _grad_qkv(target, shape),
                                    _grad_inputs(target, shape), form)
        assert ok is not False, (
            f"{where(target, backend, shape, 'gradient')}: {form}: the gradient of the "
            "continuation w.r.t. the prefix inputs and token inputs (through the final state) "
            "disagrees with finite differences")


# ------------------------------------------------------------------ gradients vs float64
@pytest.mark.parametrize(("target", "backend"), gated_cases(any_of=FULL))
@settings(max_examples=GATED_EXAMPLES)
@given(data=st.data())
def test_gated_low_precision_gradients_near_float64(target, backend, data):
    """``differentiable`` torch targets in float32 whose gradients no float64 closed form
    covers (the delta transitions, features that are not ``φ(x) = c·x``): autograd's
    gradients of ``Σ w·o`` (random cotangent ``w``) w.r.t. q, k, v, the log-gates and the
    transition's inputs (β, p) against the float64 reference gradient — autograd through the
    token recurrence in float64 (:func:`~kernel_verify.verify.recurrence_gradients.recurrence_vjp`)
    chained through the declared features' float64 Jacobian, at the inputs as the target saw
    them — within the same-precision criterion (docs/math.md §13.2): ``c`` times the error of
    the same gradients by the same loop in float32, plus one rounding. The check a
    float32-only kernel's backward gets; finite differences need float64."""
    if not (target.has("differentiable") and backend.library == "torch"
            and backend.dtype == "float32"):
        pytest.skip("low-precision gradients of the recurrence: differentiable gated targets on "
                    "torch float32")
    if target.gate_input != "log" or target.has("normalised"):
        pytest.skip("the float64 gradient of the recurrence is w.r.t. log-gates, without a "
                    "normaliser; gate inputs and normalised forms are checked against float64 "
                    "finite differences (test_gated_gradients_with_respect_to_the_gates)")
    if target.transition in ("comba", "rwkv7"):
        pytest.skip(f"the {target.transition} transition's chunked evaluations may err up to "
                    "172 times a plain token loop (correct kernels, measured): no plain "
                    "float32 evaluation bounds their gradients; declare float64 too for "
                    "finite differences")
    import torch

    from kernel_verify.properties.checks.declared import feature_jacobian
    from kernel_verify.verify.recurrence_gradients import recurrence_vjp
    from kernel_verify.verify.tolerance import gamma

    shape = draw_shape(data, target, max_t=8)
    x0 = _grad_qkv(target, shape)
    if target.transition == "decay" and _linear_scale(target, x0.q, "q") is not None \
            and _linear_scale(target, x0.k, "k") is not None:
        pytest.skip("a decay with linear features: its float32 gradients meet the float64 "
                    "closed forms (test_gated_gradients_meet_the_float64_reference)")
    ti0 = _grad_inputs(target, shape)

    def seen(a: np.ndarray) -> np.ndarray:  # the values the target receives, in float64
        return backend.to_numpy(backend.from_numpy(np.ascontiguousarray(a)))

    q, k, v = (seen(a) for a in (x0.q, x0.k, x0.v))
    ti = ti0.map(seen, fixed_too=True)
    arrays = [backend.from_numpy(a).requires_grad_(True) for a in (q, k, v)]
    names = differentiable_parts(ti)
    if ti.g is not None and ti.fixed and getattr(target, "fixed_log_gates", None) is None:
        names = ["g", *names]  # (a target's own constant decay is no input: not checked)
    parts = [backend.from_numpy(np.ascontiguousarray(ti.g if n == "g" else ti.extra[n]))
             .requires_grad_(True) for n in names]
    w = generator(shape.seed, "cotangent").standard_normal((*q.shape[:-1], v.shape[-1]))
    w = seen(w)
    ti_t = rebuild_inputs(ti.map(backend.from_numpy, fixed_too=True), names, parts)

    def target_gradients(form: str, cut: int) -> dict[str, np.ndarray]:
        """Autograd's gradients of ``Σ w·o`` through ``form`` over the whole sequence
        (``cut = 0``), or over ``[0, cut)`` then ``[cut, T)`` continued from its final state:
        the same function, whose backward then runs through the state returned and the state
        given (their gradients included)."""
        if cut:
            first, state = call_tensors(target, form, shape, *(a[..., :cut, :] for a in arrays),
                                        ti_t.rows(0, cut))
            second = call_tensors(target, form, shape, *(a[..., cut:, :] for a in arrays),
                                  ti_t.rows(cut, shape.t), state)[0]
            out = torch.cat([target.to_layout(first), target.to_layout(second)], dim=-2)
        else:
            out = target.to_layout(call_tensors(target, form, shape, *arrays, ti_t)[0])
        loss = (out * torch.as_tensor(w, dtype=out.dtype, device=out.device)).sum()
        grads = torch.autograd.grad(loss, [*arrays, *parts], allow_unused=True)
        return {n: np.zeros(np.shape(a)) if gr is None else backend.to_numpy(gr)  # all BHTD
                for n, a, gr in zip(["q", "k", "v", *names],
                                    [q, k, v, *[ti.g if n == "g" else ti.extra[n]
                                                for n in names]], grads, strict=True)}

    cut = min(max(shape.cut, 1), shape.t - 1)
    runs = [(form, 0) for form in full_forms(target)]  # each form's backward is its own code
    runs += [(form, cut) for form in full_forms(target, STATEFUL) if shape.t >= 2]
    b, _, n, _ = q.shape
    gg = ti.per_token_gates(b, n)
    extra = dict(ti.extra)
    fq = np.asarray(target.features(q, "q"), dtype=np.float64)
    fk = np.asarray(target.features(k, "k"), dtype=np.float64)
    jq = feature_jacobian(lambda a, _s: target.features(a, "q"), q, 0)[0]
    jk = feature_jacobian(lambda a, _s: target.features(a, "k"), k, 0)[0]
    transition = target.transition
    if transition == "decay" and gg is None:
        transition = "identity"

    def vjp(dtype: str) -> dict[str, np.ndarray]:
        r = recurrence_vjp(fq, fk, v, w, transition=transition, dtype=dtype, g=gg,
                           inputs=extra, beta_logit=target.beta == "sigmoid",
                           beta_top=beta_top(target))
        cd = getattr(torch, dtype)

        def chain(gf: np.ndarray, jac: np.ndarray) -> np.ndarray:
            a_, j_ = (torch.from_numpy(np.ascontiguousarray(z)).to(cd) for z in (gf, jac))
            return (a_[..., None] * j_).sum(dim=-2).to(torch.float64).numpy()

        r["q"], r["k"] = chain(r["fq"], jq), chain(r["fk"], jk)
        if "g" in r and ti.fixed:  # one decay per head: the sum over batch and time
            r["g"] = r["g"].sum(axis=(0, 2))
        return r

    ref, plain = vjp("float64"), vjp("float32")
    # The chain rule through the features in float32 (autograd's JVP of φ at x): for a
    # normalising map (φ = s·x/n, homogeneous of degree 0: J·x = 0) its terms s·g_c/n and
    # s·x_c(gᵀx)/n³ cancel, each rounded within γ_(d+4) of its size ≤ ‖g‖₁·‖φ‖/‖x‖; a plain
    # evaluation chained through the float64 Jacobian has no such cancellation, so this
    # rounding is allowed on top of the criterion: η = 2γ_(d+4)·max_rows ‖∂L/∂φ‖₁·‖φ‖/‖x‖
    # (for φ = c·x it is the JVP's own rounding, γ_(d+4)·‖g‖₁·c).
    u32 = 2.0 ** -24
    floor = {}
    for name, f, a in (("q", fq, q), ("k", fk, k)):
        xn = np.maximum(np.linalg.norm(a, axis=-1), np.finfo(np.float64).tiny)
        row = np.abs(ref["f" + name]).sum(-1) * np.linalg.norm(f, axis=-1) / xn
        floor[name] = 2 * gamma(a.shape[-1] + 4, u32) * float(row.max(initial=0.0))
    w_ = where(target, backend, shape, "gradient")
    for form, at in runs:
        how = f"{form} over [0, {at}) then [{at}, {shape.t}) from its state" if at else form
        for name, gnp in target_gradients(form, at).items():  # no derived bound: the
            # criterion alone decides
            check_same_precision(gnp, ref[name], [plain[name]], compute="float32",
                                 output="float32", extra=floor.get(name, 0.0),
                                 extra_why="the features' chain rounding η =",
                                 what=f"{w_}: {how}: d(Σ w·o)/d{name} in float32 against the "
                                 "float64 gradient of the recurrence (autograd through a "
                                 "float32 token loop as the plain evaluation)")


def _linear_scale(target, x: np.ndarray, role: str) -> float | None:
    """``c`` when the target's declared features are ``φ(x) = c·x`` on ``x`` (checked), else
    None: the float64 route needs the features' Jacobian, which is then ``c·I``."""
    f = np.asarray(target.features(x, role), dtype=np.float64)
    if f.shape != x.shape:
        return None
    c = float((f * x).sum() / max((x * x).sum(), 1e-300))
    return c if np.allclose(f, c * x, rtol=1e-15, atol=0) else None


def reference_gradients(fq, fk, v, g, w, *, u: float, exp_ulps: float, tiny: float):
    """Float64 gradients of ``Σ w·o`` (no normaliser, no initial state) w.r.t. ``φq, φk, v`` and
    the log-gates, and their derived bounds for an evaluation at unit roundoff ``u`` (docs/math.md
    §16): with ``A_ts = Σ_f φq_tf D_tsf φk_sf`` and ``dA_ts = w_t·v_s`` (s ≤ t),
    ``dv = Aᵀw``, ``dφq_tf = Σ_s dA_ts D_tsf φk_sf``, ``dφk_sf = Σ_t dA_ts D_tsf φq_tf``,
    ``dg_rf = Σ_(t≥r>s) dA_ts φq_tf D_tsf φk_sf``. Every entry errs by at most
    ``θ = e^δ(1 + γ_(4T+m+d_v+8)) − 1`` times the same sum of absolute terms (+ ``η`` per
    pair); ``dg`` also by the route through ``φq ⊙ dφq`` and ``φk ⊙ dφk`` (reverse cumulative
    sums, fla's), whose absolute sum is the larger and is used."""
    from kernel_verify.verify.gated_bounds import decay_exponent_error, decay_matrix
    from kernel_verify.verify.tolerance import gamma

    n, m, dv_ = fq.shape[-2], fq.shape[-1], v.shape[-1]
    d, _ = decay_matrix(g, fk)
    delta = decay_exponent_error(g, fk, u=u, exp_ulps=exp_ulps).max(initial=0.0)
    theta = np.exp(min(delta, 700.0)) * (1 + gamma(4 * n + m + dv_ + 8, u)) - 1
    causal = np.tril(np.ones((n, n)))
    aq, ak = np.abs(fq), np.abs(fk)
    a = np.einsum("...tf,...tsf,...sf->...ts", fq, d, fk)
    a_abs = np.einsum("...tf,...tsf,...sf->...ts", aq, d, ak)
    plain = np.einsum("...tf,...sf->...ts", aq, ak) * causal
    da = (w @ np.swapaxes(v, -1, -2)) * causal
    da_abs = (np.abs(w) @ np.swapaxes(np.abs(v), -1, -2)) * causal
    grads = {"v": np.swapaxes(a, -1, -2) @ w,
             "q": np.einsum("...ts,...tsf,...sf->...tf", da, d, fk),
             "k": np.einsum("...ts,...tsf,...tf->...sf", da, d, fq)}
    bounds = {"v": theta * (np.swapaxes(a_abs, -1, -2) @ np.abs(w))
              + tiny * (np.swapaxes(plain, -1, -2) @ np.abs(w)),
              "q": theta * np.einsum("...ts,...tsf,...sf->...tf", da_abs, d, ak)
              + tiny * np.einsum("...ts,...sf->...tf", da_abs, ak),
              "k": theta * np.einsum("...ts,...tsf,...tf->...sf", da_abs, d, aq)
              + tiny * np.einsum("...ts,...tf->...sf", da_abs, aq)}
    p = da[..., None] * fq[..., :, None, :] * d * fk[..., None, :, :]  # (..., t, s, f)
    before = np.cumsum(p, axis=-2) - p  # Σ_(s<r') P[t, s] at column r' = s index
    rows = np.arange(n)
    # dg_r = Σ_(t≥r) Σ_(s<r) P[t, s]: column r of the exclusive sums, rows t ≥ r
    take = before[..., :, rows, :]  # (..., t, r, f)
    dg = (take * (rows[:, None] >= rows[None, :])[..., None]).sum(axis=-3)
    route = (np.cumsum((aq * np.einsum("...ts,...tsf,...sf->...tf", da_abs, d, ak))[..., ::-1, :],
                       axis=-2)[..., ::-1, :]
             + np.cumsum((ak * np.einsum("...ts,...tsf,...tf->...sf", da_abs, d, aq))
                         [..., ::-1, :], axis=-2)[..., ::-1, :])
    flush = tiny * n * n * float(np.abs(da).max(initial=0.0) * aq.max(initial=0.0)
                                 * ak.max(initial=0.0))
    grads["g"], bounds["g"] = dg, theta * route + flush
    return grads, bounds


@pytest.mark.parametrize(("target", "backend"), gated_cases(any_of=FULL))
@settings(max_examples=GATED_EXAMPLES)
@given(data=st.data())
def test_gated_gradients_meet_the_float64_reference(target, backend, data):
    """``differentiable`` targets in float32 and float64 (torch): autograd's gradients of
    ``Σ w·o`` (random cotangent ``w``) w.r.t. q, k, v and the log-gates against the float64
    closed forms of :func:`reference_gradients`, within their derived bounds — the check a
    float32-only kernel's backward gets (finite differences need float64). Targets whose
    declared features are linear (``φ(x) = c·x``: RetNet, GLA, fla), without a normaliser."""
    if not (target.has("differentiable") and backend.library == "torch"
            and backend.dtype in ("float64", "float32")):
        pytest.skip("gradients against the float64 reference: differentiable gated targets on "
                    "torch float64/float32 (half-type backward bounds are not derived)")
    if target.has("normalised"):
        pytest.skip("the float64 gradient reference covers targets without a normaliser")
    if target.gate_input != "log":
        pytest.skip(f"the float64 gradient closed forms are w.r.t. log-gates; gate input "
                    f"{target.gate_input!r} is checked against float64 finite differences "
                    "(test_gated_gradients_with_respect_to_the_gates)")
    if target.transition != "decay":
        pytest.skip(f"the float64 gradient closed forms cover the decay transition; the "
                    f"{target.transition} transition's gradients are checked against float64 "
                    "finite differences (test_gated_gradients_with_respect_to_the_gates)")
    import torch

    shape, regime, x, g = setup(target, backend, data)
    cq, ck = _linear_scale(target, x.q, "q"), _linear_scale(target, x.k, "k")
    if cq is None or ck is None:
        pytest.skip(f"{target.name}: declared features are not linear (φ(x) = c·x)")
    t = target.to_layout
    gated_input = target.fixed_log_gates is None
    w = generator(shape.seed, "cotangent").standard_normal((*x.q.shape[:-1], x.v.shape[-1]))
    b, _, n, _ = x.q.shape
    gg = g.per_token_gates(b, n)
    budget = backend.budget
    kw = {"u": budget.u_compute, "exp_ulps": budget.ulps["exp"],
          "tiny": smallest_normal(budget.compute_dtype)}
    ref, bound = reference_gradients(x.q * cq, x.k * ck, x.v, gg, w, **kw)
    # the float64 reference's own error: the same bound at float64
    _, own_b = reference_gradients(x.q * cq, x.k * ck, x.v, gg, w, u=2.0**-53, exp_ulps=1,
                                   tiny=smallest_normal("float64"))
    for form in full_forms(target):  # each form's backward is its own code
        arrays = [backend.from_numpy(a).requires_grad_(True) for a in (x.q, x.k, x.v)]
        garr, _ = g.arguments(target, backend.from_numpy)
        if gated_input:
            garr = garr.detach().requires_grad_(True)
        if form == "chunked":
            out = target.chunked(*(t(a) for a in arrays), garr, chunk_size=chunk_of(
                target, shape.chunk), seed=shape.seed)[0]
        else:
            out = getattr(target, form)(*(t(a) for a in arrays), garr, seed=shape.seed)[0]
        loss = (t(out) * torch.as_tensor(w, dtype=out.dtype, device=out.device)).sum()
        got = torch.autograd.grad(loss, [*arrays, *([garr] if gated_input else [])],
                                  allow_unused=True)
        w_ = f"{where(target, backend, shape, regime)}: {form}"
        for name, gr, scale in (("q", got[0], cq), ("k", got[1], ck), ("v", got[2], 1.0)):
            gnp = np.zeros(x.q.shape if name != "v" else x.v.shape) if gr is None else \
                backend.to_numpy(gr)
            check_within(gnp, ref[name] * scale, (bound[name] + own_b[name]) * abs(scale),
                         f"{w_}: d(Σ w·o)/d{name}")
        if gated_input:
            if got[3] is None:  # the output does not depend on the gates at all
                gnp = np.zeros(np.shape(g.g))
            else:
                gnp = backend.to_numpy(t(got[3]) if target.gates != "scalar_fixed" else got[3])
            want, want_b = ref["g"], bound["g"] + own_b["g"]
            if target.gates == "scalar":
                want, want_b = want.sum(axis=-1), want_b.sum(axis=-1)
            elif target.gates == "scalar_fixed":
                want, want_b = want.sum(axis=(0, 2, 3)), want_b.sum(axis=(0, 2, 3))
            check_within(gnp, want, want_b, f"{w_}: d(Σ w·o)/d(log-gates)")
