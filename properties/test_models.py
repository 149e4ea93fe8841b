"""Model properties: a causal LM's decoding, generation, packing, padding and gradients, at
random init (docs/math.md §15), and its serving-time state: chunked prefill, a saved state
restored and continued more than once, speculative rollback, a padded prefill decoded from
(§15.1). Targets: :class:`~kernel_verify.properties.model_protocol.
ModelTarget` (built-in: the tiny LM of ``impls/torch/tiny_lm.py``).

Every property runs over drawn token sequences, batch sizes, split points, packing layouts and
pad counts (:func:`kernel_verify.properties.strategies.model_cases`), on each dtype path of the
target (float32; float64 where it runs), and **carries its own power control**
(:func:`kernel_verify.properties.model_checks.power_ladder`): the same check on a planted defect
of its class at the same init must fail; the init scale is raised along the target's ladder
until it does, and the examples run there. A property whose planted defect passes at every
scale is reported ``not credited: cannot fail at this init``. The checks, their defects and
their tolerances are in :mod:`kernel_verify.properties.model_checks`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_verify.properties import model_checks as mc
from kernel_verify.properties.profiles import examples_for_cost, reduction_note
from kernel_verify.properties.strategies import model_cases
from kernel_verify.properties.targets import models, none_param, provides_none

#: Hypothesis examples of one (property, target, dtype) case; each runs a model a few times.
MODEL_EXAMPLES = 6


@dataclass(frozen=True)
class ModelPath:
    """The dtype a case runs the model in (its ``id`` is the verdict's backend column)."""

    dtype: str

    @property
    def id(self) -> str:
        return f"torch:cpu-{self.dtype}"


def paths(*, calls: tuple[str, ...] = (), claims: tuple[str, ...] = ()) -> list:
    """pytest params ``(target, backend)`` of every model target offering ``calls`` and
    claiming ``claims``, one per dtype path; a skip naming what is missing when none does."""
    out, missing = [], []
    for t in models():
        lacks = [c for c in calls if not t.offers(c)] + [c for c in claims if not t.has(c)]
        if lacks:
            missing.append(f"{t.name} lacks {', '.join(lacks)}")
            continue
        out += [pytest.param(t, ModelPath(d), id=f"{t.name}-{d}") for d in mc.dtypes(t)]
    if out:
        return out
    return none_param("; ".join(missing) or provides_none("model target"), values=2)


def run(target, backend: ModelPath, check: mc.Check, defect: str, record_property, *,
        min_len: int = 3, examples: int = MODEL_EXAMPLES) -> None:
    """The power control, then ``examples`` drawn cases at the credited init scale (serving
    checks: :func:`~kernel_verify.properties.model_checks.serving_cases`, cut points around the
    target's declared chunk sizes and window)."""
    power = mc.power_ladder(target, check, backend.dtype, defect)
    assert power.problem is None, power.problem
    if power.scale is None:
        record_property("kv_uncredited", power.note)
    else:
        record_property("kv_note", power.note)
    scale = power.scale or power.largest
    n = examples_for_cost(target.call_seconds, examples)
    if n < examples:
        record_property("kv_reduced", reduction_note(target.call_seconds, n, examples))
    strategy = (mc.serving_cases(target) if check in mc.SERVING_CHECKS
                else model_cases(target.vocab_size, target.max_len, min_len=min_len))

    @settings(max_examples=n)
    @given(case=strategy)
    def examples_at_scale(case):
        problem = check(target, backend.dtype, scale, case, False)
        assert problem is None, f"init scale {scale:g} ({backend.dtype}): {problem}"

    examples_at_scale()


@pytest.mark.parametrize(("target", "backend"), paths(calls=("prefill", "step")))
def test_decode_equals_full_forward_at_every_split(target, backend, record_property):
    """Prefill to any drawn split, then one-token steps: each step's logits equal the full
    forward's row (docs/math.md §15). Control: the cache dropped after the first step."""
    run(target, backend, mc.decode, "cache dropped after the first step", record_property)


@pytest.mark.parametrize(("target", "backend"), paths(calls=("generate",)))
def test_greedy_generate_with_cache_equals_without(target, backend, record_property):
    """Greedy ``generate`` with the cache = greedy decoding recomputed without it, token for
    token, scores compared at every step. Control: scores of a cache dropped after the first
    step."""
    run(target, backend, mc.generate, "cache dropped after the first step", record_property)


@pytest.mark.parametrize(("target", "backend"), paths(calls=("packed",)))
def test_packed_sequences_equal_separate_runs(target, backend, record_property):
    """``cu_seqlens``-packed sequences = separate runs. Control: state carried across packed
    sequences (the packed row run as one sequence)."""
    run(target, backend, mc.packed, "state carried across packed sequences", record_property)


@pytest.mark.parametrize(("target", "backend"), paths(claims=("left_padding",)))
def test_left_padding_equals_unpadded(target, backend, record_property):
    """Left-padded rows give the unpadded logits at valid positions. Control: the mask
    dropped."""
    run(target, backend, mc.left_padding, "attention mask dropped", record_property)


@pytest.mark.parametrize(("target", "backend"), paths(claims=("right_padding",)))
def test_right_padding_equals_unpadded(target, backend, record_property):
    """Right-padded rows give the unpadded logits at valid positions. Control: the mask read
    as left padding."""
    run(target, backend, mc.right_padding, "right-padding mask read as left padding",
        record_property)


@pytest.mark.parametrize(("target", "backend"),
                         paths(calls=("prefill", "step"), claims=("differentiable",)))
def test_gradients_through_the_cache_equal_full_forward(target, backend, record_property):
    """∇θ of a loss through prefill + cached decoding = ∇θ through the full forward. Control:
    the prefill detached (no gradient through the cache)."""
    run(target, backend, mc.gradients, "prefill detached from the graph", record_property,
        examples=max(2, MODEL_EXAMPLES // 2))


@pytest.mark.parametrize(("target", "backend"),
                         paths(calls=("prefill", "step"), claims=("differentiable",)))
def test_second_backward_through_the_cache(target, backend, record_property):
    """Two backward passes through one graph of prefill + cached decoding both run and agree
    bitwise: no saved cache tensor was updated in place. Control: the graph freed after the
    first backward."""
    run(target, backend, mc.second_backward, "graph freed after the first backward",
        record_property, min_len=4, examples=max(2, MODEL_EXAMPLES // 2))


@pytest.mark.parametrize(("target", "backend"), paths())
def test_batch_elements_are_independent(target, backend, record_property):
    """Each row of a batch = the row alone. Control: state carried from the previous row."""
    run(target, backend, mc.batch_independent, "state carried across batch elements",
        record_property)


@pytest.mark.parametrize(("target", "backend"), paths())
def test_same_seed_and_input_give_the_same_output(target, backend, record_property):
    """Two builds from one seed, and two calls of one model, give bitwise equal logits.
    Control: the second build from the next seed."""
    run(target, backend, mc.same_seed, "the next seed", record_property,
        examples=max(2, MODEL_EXAMPLES // 2))


@pytest.mark.parametrize(("target", "backend"), paths())
def test_outputs_stay_finite_over_an_init_scale_sweep(target, backend, record_property):
    """Logits and log-softmax finite from the credited scale up to 512× it (weights with a
    standard deviation of ~10 at the usual 0.02), in float32 no further than 512× the
    ladder's first scale (a correct float32 model may leave float32's range beyond).
    Control: a naive log-softmax, which overflows somewhere on the sweep (in float32; in
    float64 the logits need ~709)."""
    run(target, backend, mc.finite, "naive log-softmax", record_property,
        examples=max(2, MODEL_EXAMPLES // 3))


@pytest.mark.parametrize(("target", "backend"), paths(calls=("extend", "step")))
def test_chunked_prefill_equals_one_prefill(target, backend, record_property):
    """``extend`` over chunks ending at drawn cut points (around the declared chunk sizes and
    window) = the full forward, and decoding from its cache too (docs/math.md §15.1).
    Control: the cache dropped between chunks."""
    run(target, backend, mc.chunked_prefill, "cache dropped between chunks", record_property)


@pytest.mark.parametrize(("target", "backend"), paths(calls=("extend", "copy_cache")))
def test_restored_state_continues_as_if_never_stopped(target, backend, record_property):
    """A state saved at an interior position (chunk boundaries included), restored after the
    live cache went on, continues as the full forward. Control: the state saved one token
    early."""
    run(target, backend, mc.restore, "state saved one token early", record_property)


@pytest.mark.parametrize(("target", "backend"), paths(calls=("extend", "copy_cache")))
def test_continuations_from_one_saved_state_are_independent(target, backend, record_property):
    """Three continuations from one saved state (two different) each equal their own full
    forward: continuing neither consumes nor changes the saved state. Control: the second
    continuation started from the state the first one left."""
    run(target, backend, mc.continuations, "state consumed by the first continuation",
        record_property)


@pytest.mark.parametrize(("target", "backend"), paths(calls=("extend", "copy_cache")))
def test_speculative_rollback_equals_the_accepted_state(target, backend, record_property):
    """Draft k tokens, accept j (0 and k included), roll back: continuing equals the full
    forward of the accepted tokens and the continuation. Control: one rejected draft kept."""
    run(target, backend, mc.speculative, "one rejected draft kept", record_property)


@pytest.mark.parametrize(("target", "backend"), paths(calls=("padded_prefill",)))
def test_padded_prefill_then_decoding_equals_unpadded(target, backend, record_property):
    """A left-padded batch prefilled with its mask, then decoded with the cache, gives each
    row's unpadded logits. Control: the state of the prefill without the mask."""
    run(target, backend, mc.padded_decode, "pad tokens entered the state", record_property)


def test_model_case_strategy_draws_valid_cases():
    """The cases are what the checks assume (split inside, lengths sum to T, pads < T)."""

    @settings(max_examples=30)
    @given(case=model_cases(7, 9), data=st.data())
    def inner(case, data):
        t = case.length
        assert all(len(r) == t for r in case.ids)
        assert 1 <= case.split < t
        assert sum(case.lengths) == t and all(n >= 1 for n in case.lengths)
        assert all(1 <= p < t for p in case.pads)
        assert all(0 <= v < 7 for r in case.ids for v in r)

    inner()


def test_serving_case_strategy_draws_valid_cases():
    """Serving cases are what the serving checks assume, and the declared cut points are
    drawn (chunk ends and save points land on them)."""
    from kernel_verify.properties.builtin_models import tiny_lm_target

    target = tiny_lm_target()
    special = set(target.cut_points())
    landed = set()

    @settings(max_examples=60)
    @given(case=mc.serving_cases(target))
    def inner(case):
        t, b, k, j = case.length, case.save, case.draft, case.accept
        assert 4 <= t <= target.max_len
        assert all(len(r) == t for r in case.ids + case.alt)
        assert list(case.cuts) == sorted(set(case.cuts)) and 1 <= case.cuts[0]
        assert case.cuts[-1] <= t - 1
        assert 1 <= b <= t - 2 and 1 <= k and b + k <= t - 1 and 0 <= j <= k
        assert all(1 <= p <= t - 3 for p in case.pads)
        for row, alt in zip(case.ids, case.alt, strict=True):
            assert alt[b] != row[b] and alt[b + j] != row[b + j]
        landed.update(special & {b, *case.cuts})

    inner()
    assert landed, f"no drawn chunk end or save point hit a declared cut point {special}"
