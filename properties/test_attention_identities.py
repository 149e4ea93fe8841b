"""Linear-attention identities on black-box ``AttentionTarget``s (docs/math.md §9), over every
backend and dtype the target accepts (:mod:`kernel_verify.properties.attention_cases`).

Every target is called as ``target(q, k, v, causal=..., seed=...)`` on arrays of its backend, of
shape ``(batch, heads, n, d)``; the seed fixes its randomness, so two calls with the same seed use
the same features. Inputs are drawn value by value (:mod:`kernel_verify.properties.strategies`);
self-attention-only targets get ``k is q``; causal-only targets are called with ``causal=True``
throughout. Properties, each applied to the targets that claim it:

* every target: the same seed and inputs give the same output, also after the target was used on
  other inputs (determinism; a nondeterministic target is named as such, not as a broken
  identity);
* ``positive_weights``: partition of unity (V = 1 ⇒ output 1, also with the keys moved far
  negative, where positive features are tiny) and outputs inside the hull of the
  visible values (convex combinations);
* ``causal``: changing queries, keys and values after position c never changes outputs ≤ c;
* every target: changing one batch element, or one head, never changes the others;
* ``noncausal``: permuting keys and values together leaves outputs unchanged; permuting queries
  permutes outputs;
* every target: outputs stay finite over an input-scale sweep; ``approximates_softmax``: at large
  scale the output keeps to exact attention's argmax value (no collapse to uniform attention);
* ``approximates_softmax``: the error to exact softmax attention falls as m grows (on the causal
  path for causal-only targets);
* input policy: NaN/Inf and mismatched shapes are a ``ValueError`` — a failure only for targets
  claiming ``validates_input``; for the others what happened is recorded as an *input-policy
  note* (``kv_note``), not a correctness failure;
* the built-in log-space kernels (``kv_builtin_only``: not counted as a property of the target):
  adding a constant to every query's log-features and a global constant to the keys' never
  changes the output, while a per-key shift does.

Tolerances: ``2ε`` of :func:`~kernel_verify.properties.attention_cases.output_error_bound` (derived
per dtype from the compute dtype's unit roundoff; half types computed in float32 and cast back).
Credit: an example of determinism, causality, batch/head independence or permutation
equivariance whose ``2ε`` is at least the spread of its values (max − min per column: any two
outputs inside the values' convex hull agree within it) could not fail and is not credited; a
case none of whose examples was credited is ``not credited``, not ``pass``
(:func:`~kernel_verify.properties.attention_cases.credit_case`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from kernel_verify.impls.numpy import attention as np_att
from kernel_verify.impls.torch import attention as torch_att
from kernel_verify.properties import alpha as alpha_budget
from kernel_verify.properties.attention_cases import (
    call,
    cases,
    credit_case,
    describe,
    feature_count,
    modes,
    output_error_bound,
    rounding_floor,
    seen,
)
from kernel_verify.properties.backends import backend_axis, to_numpy
from kernel_verify.properties.checks.convergence import (
    CONV_SEEDS,
    M_HI,
    M_LO,
    P0,
    convergence_failures,
    convergence_threshold,
)
from kernel_verify.properties.evidence import nonfinite, observed, require_finite
from kernel_verify.properties.layouts import (
    AT_BOUNDARIES,
    FixedDraws,
    identity_inputs,
    qkv_at,
    with_layouts,
)
from kernel_verify.properties.strategies import (
    QKV,
    SCALE_PAIRS,
    SCALE_SWEEP,
    fresh_like,
    generator,
    permutations,
    qkv_sets,
    scale_pairs,
    seeds,
    shapes,
)
from kernel_verify.properties.targets import feature_maps
from kernel_verify.verify.tolerance import U64, gamma

STAT_EXAMPLES = max(1, settings.default.max_examples // 4)


def _inputs(target, **kw) -> st.SearchStrategy:
    return qkv_sets(self_attention=bool(target is not None and target.self_attention_only), **kw)


def _eps(x: QKV, backend, target) -> float:
    """``ε`` of :func:`~kernel_verify.properties.attention_cases.output_error_bound` with the
    target's feature count (declared ``feature_count``, or measured from its ``features``; 0 for
    exact attention), ``M_MAX`` when it is unknown (issue #29: bounds that know what they
    bound)."""
    return output_error_bound(x, backend, feature_count(target))


def _check(got, tol, what, **kw) -> None:
    require_finite(got, what, "the identity")
    text = observed(got, tol=tol, **kw)
    if text:
        raise AssertionError(f"{what}: {text}")


def _dtype_max(backend) -> float:
    """The largest finite value of the backend's dtype (bfloat16 shares float32's exponent)."""
    return float(np.finfo(np.dtype(backend.dtype) if backend.dtype != "bfloat16"
                          else np.float32).max)


def _unchanged_nonfinite(got: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(got, ref)`` with the entries that are the same NaN/±Inf in both set to 0: an output
    that stays NaN did not change, while one that turns NaN (or stops being NaN) did — how a
    stabiliser over the whole sequence or batch leaks (underflow elsewhere makes it 0/0)."""
    same = ~np.isfinite(ref) & ((np.isnan(ref) & np.isnan(got)) | (ref == got))
    return np.where(same, 0.0, got), np.where(same, 0.0, ref)


def _fail(target, backend, x, causal, seed, out, tol, where, what, text) -> None:
    """Raise for a broken identity — unless the same call does not even reproduce its own
    output: then the cause is nondeterminism, and the failure says that instead."""
    again = call(target, backend, x, causal=causal, seed=seed)
    if not np.allclose(again, out, rtol=0, atol=tol, equal_nan=True):
        raise AssertionError(
            f"{where}: nondeterministic — the same call with the same seed and inputs gave "
            f"another output ({observed(again, tol=tol, expected=out)}); {what} cannot be judged "
            "on a nondeterministic target (see test_same_seed_gives_same_output)")
    raise AssertionError(f"{where}: {what}: {text}")


# ------------------------------------------------------------------ fixed layouts
# Every identity below also runs, before its random draws, the fixed layouts around the
# target's chunk boundaries (kernel_verify.properties.layouts: T ∈ {1, C − 1, C, C + 1, 2C + 1},
# causal cuts at C − 2 … C + 1, the kept rows reaching into the second block): Hypothesis'
# explicit example AT_BOUNDARIES, expanded by with_layouts into one run of the body per layout,
# whose draws from ``data`` are answered by the layout's inputs.
def _draws(x: QKV, lay, *more) -> FixedDraws:
    return FixedDraws([x, *more], f"T={lay.t}, C={lay.chunk}, inputs {x.shape}")


def _plain_layouts(target, **_):
    """Inputs of every layout (``data`` draws ``x`` only)."""
    return ({"data": _draws(x, lay), "seed": lay.index} for lay, x in identity_inputs(target))


def _determinism_layouts(target, **_):
    """Inputs of every layout, and the other inputs called in between (scale 1)."""
    for lay, x in identity_inputs(target):
        other = qkv_at(lay.t, seed=lay.index + 1000, scale=1.0,
                       self_attention=x.self_attention)
        yield {"data": _draws(x, lay, other), "seed": lay.index}


def _finite_layouts(target, **_):
    """Inputs of every layout at unit scale (the sweep multiplies them)."""
    for lay, _x in identity_inputs(target):
        x = qkv_at(lay.t, seed=lay.index, scale=1.0,
                   self_attention=bool(target.self_attention_only))
        yield {"data": _draws(x, lay), "seed": lay.index}


def _causal_layouts(target, **_):
    """Every layout of ≥ 2 rows with its cut: rows ``> c`` replaced (``cut`` the fraction that
    selects ``c = lay.cut``)."""
    for lay, x in identity_inputs(target, min_t=2, cuts=True):
        yield {"data": _draws(x, lay), "seed": lay.index,
               "cut": (lay.cut + 0.5) / (lay.t - 1), "scales": (0.5, 0.5)}
    # then one layout per length with a large-norm past (scale 30) and a small future: a
    # stabiliser taken over the sequence (or over a block holding future positions) underflows
    # the past there, and the random draws reach that pair only by chance. Last, because an
    # input beyond the dtype's range is assumed away, which ends the explicit example.
    for lay, _ in identity_inputs(target, min_t=2):
        big = qkv_at(lay.t, seed=lay.index, scale=30.0,
                     self_attention=bool(getattr(target, "self_attention_only", False)))
        yield {"data": _draws(big, lay), "seed": lay.index,
               "cut": (lay.cut + 0.5) / (lay.t - 1), "scales": (30.0, 0.5)}


def _batch_layouts(target, **_):
    """Every layout with two batch elements and two heads; the replaced one alternates between
    the batch axis and the heads axis."""
    for lay, x in identity_inputs(target, b=2, h=2):
        yield {"data": _draws(x, lay), "seed": lay.index, "which": lay.index,
               "axis": lay.index % 2, "scales": (0.5, 30.0)}


def _permutation_layouts(target, **_):
    """Every layout of ≥ 2 rows: keys reversed, queries rotated by one."""
    for lay, x in identity_inputs(target, min_t=2):
        n = lay.t
        yield {"data": _draws(x, lay, np.arange(n)[::-1].copy(), np.roll(np.arange(n), 1)),
               "seed": lay.index}


def _drawn_at_layouts(layouts):
    """``@given(data=st.data(), seed=seeds)``, its explicit example ``AT_BOUNDARIES`` first: the
    body runs once per layout ``layouts`` yields (:func:`with_layouts`), then on the draws."""
    def wrap(test):
        return example(data=AT_BOUNDARIES, seed=0)(
            given(data=st.data(), seed=seeds)(with_layouts(layouts)(test)))
    return wrap


# ------------------------------------------------------------------ determinism
@pytest.mark.parametrize(("target", "backend"), cases())
@_drawn_at_layouts(_determinism_layouts)
def test_same_seed_gives_same_output(target, backend, data, seed, request):
    """Same seed, same inputs ⇒ same output (within ``2ε``: reductions may be reordered, e.g.
    CUDA atomics), also when the target was called on other inputs in between (state kept
    across calls: a module whose buffers or RNG advance)."""
    x = data.draw(_inputs(target))
    other = data.draw(_inputs(target, scales=(1.0, 10.0)))
    xs = seen(x, backend)
    tol = 2 * _eps(xs, backend, target)
    credit_case(request, tol, (xs.v,), backend, x.scale, "determinism")
    for causal in modes(target):
        first = call(target, backend, x, causal=causal, seed=seed)
        second = call(target, backend, x, causal=causal, seed=seed)
        where = describe(target, backend, causal, seed, x)
        text = observed(second, tol=tol, expected=first)
        nan_same = np.array_equal(np.isnan(first), np.isnan(second))
        if text and not (nan_same and np.allclose(first, second, rtol=0, atol=tol,
                                                  equal_nan=True)):
            raise AssertionError(f"{where}: nondeterministic — two calls with the same seed and "
                                 f"inputs differ: {text}")
        call(target, backend, other, causal=causal, seed=seed + 1)
        third = call(target, backend, x, causal=causal, seed=seed)
        if not np.allclose(first, third, rtol=0, atol=tol, equal_nan=True):
            raise AssertionError(
                f"{where}: state carried across calls — after one call on other inputs (seed "
                f"{seed + 1}), the same call gave another output: "
                f"{observed(third, tol=tol, expected=first)}")


# ------------------------------------------------------------------ positive weights
@pytest.mark.parametrize(("target", "backend"), cases("positive_weights"))
@_drawn_at_layouts(_plain_layouts)
def test_partition_of_unity(target, backend, data, seed):
    """V = 1 gives 1, at the drawn inputs and again with every key (and, for self-attention,
    query) moved by ``KEY_OFFSET`` in each coordinate: there the weights of positive feature
    maps (exp-type, elu + 1) are tiny, and a normaliser that clamps its denominator
    (``max(Σw, δ)``) or adds ε to it gives outputs below 1 while the identity still holds
    exactly. Where the moved inputs give non-finite outputs (a denominator that underflows to 0
    for correct code too) that half checks nothing; finiteness is
    ``test_outputs_stay_finite_across_input_scales``'."""
    x = data.draw(_inputs(target))
    x = QKV(x.q, x.k, np.ones((*x.shape[:-1], 2)), x.scale, x.self_attention)
    moved_k = x.k + KEY_OFFSET
    moved = QKV(moved_k if x.self_attention else x.q, moved_k, x.v, x.scale, x.self_attention)
    for inputs, must_be_finite in ((x, True), (moved, False)):
        tol = _eps(seen(inputs, backend), backend, target)
        for causal in modes(target):
            out = call(target, backend, inputs, causal=causal, seed=seed)
            what = f"{describe(target, backend, causal, seed, inputs)}: V = 1 must give 1"
            if not must_be_finite and not np.isfinite(out).all():
                continue
            require_finite(out, what, "the identity")
            text = observed(out, tol=tol, expected=inputs.v)
            if text:
                raise AssertionError(f"{what}: {text}{_shrunk_hint(out, tol)}")


#: The move of every key coordinate in the second half of ``test_partition_of_unity``.
KEY_OFFSET = -12.0


def _shrunk_hint(out: np.ndarray, tol: float) -> str:
    """A hint when every output of ``V = 1`` lies in ``(0, 1 − tol)``: the weights sum to less
    than 1 — by one constant factor where every output is the same (a missing or extra scale,
    such as ``d^(−1/2)``), else as when a normaliser ``o = Σ w v / (Σ w + ε)`` adds ε to the
    denominator or clamps it (then the weights sum to ``s/(s + ε)``: not a partition of unity,
    so not ``positive_weights``)."""
    same = out.size and bool(((out > 0) & (out < 1 - tol)).all()) and float(
        out.max() - out.min()) <= 2 * tol
    if same and 1.0 - float(out.mean()) < 1e-3:
        short = 1.0 - float(out.mean())
        return (f" — every output is the same value {float(out.mean()):.12g}, short of 1 by "
                f"{short:.3g}: the weights sum to one constant just below 1, as when an ε is "
                "added to the denominator of a normaliser whose sum is the same in every row "
                f"(o = Σ w v / (Σ w + ε), ε ≈ {short:.3g}·Σ w; memory-efficient-attention-"
                "pytorch adds eps=1e-8), or a constant factor that close to 1; such a target's "
                "weights are not a partition of unity (do not claim positive_weights for it, "
                "or drop the ε)")
    if same:
        return (f" — every output is the same value {float(out.mean()):.10g} < 1: the weights "
                "sum to one constant below 1 (a missing normalisation or an extra constant "
                "factor, such as d^(−1/2)); such a target's weights are not a partition of "
                "unity")
    if out.size and bool(((out > 0) & (out < 1 - tol)).all()):
        return (f" — every output is below 1 (smallest {float(out.min()):.10g}): the weights "
                "sum to less than 1, as with an ε added to the denominator of a normaliser or "
                "the denominator clamped from below; "
                "such a target's weights are not a partition of unity (do not claim "
                "positive_weights for it, or drop the ε)")
    return ""


@pytest.mark.parametrize(("target", "backend"), cases("positive_weights"))
@_drawn_at_layouts(_plain_layouts)
def test_outputs_are_convex_combinations_of_visible_values(target, backend, data, seed):
    x = data.draw(_inputs(target))
    xs = seen(x, backend)
    tol = _eps(xs, backend, target)
    v = xs.v
    for causal in modes(target):
        out = call(target, backend, x, causal=causal, seed=seed)
        if causal:
            lo, hi = np.minimum.accumulate(v, axis=-2), np.maximum.accumulate(v, axis=-2)
        else:
            lo, hi = v.min(axis=-2, keepdims=True), v.max(axis=-2, keepdims=True)
        text = observed(out, tol=tol, lo=lo, hi=hi)
        if text:
            raise AssertionError(f"{describe(target, backend, causal, seed, x)}: outputs must be "
                                 f"convex combinations of the visible values: {text}")


# ------------------------------------------------------------------ input policy
def _policy(target, backend, what: str, args, causal: bool, record_property) -> None:
    """Call with bad input; ``ValueError`` is the contract. A target claiming
    ``validates_input`` fails otherwise; for any other target this case cannot fail, so it is
    recorded ``kv_uncredited`` (verdict ``not credited``, never ``pass``) and what it did with
    the bad input is an input-policy note."""
    if not target.has("validates_input"):
        record_property("kv_uncredited", f"input policy: {target.name} does not claim "
                        "validates_input, so this property cannot fail for it (what it does with "
                        "bad input is an input-policy note)")
    try:
        out = target(*args, causal=causal, seed=0)
    except ValueError:
        return
    except Exception as err:
        seen_ = f"raised {type(err).__name__} (not ValueError): {str(err).splitlines()[0][:120]}"
    else:
        state = nonfinite(out) or "all outputs finite"
        seen_ = f"was accepted silently ({state})"
    text = f"{target.name} on {backend.id} (causal={causal}): {what} {seen_}"
    if target.has("validates_input"):
        raise AssertionError(f"{text}; the target claims validates_input")
    record_property("kv_note", f"input policy: {text}")


@pytest.mark.parametrize(("target", "backend"), cases())
@pytest.mark.parametrize("where", ["q", "k", "v"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_input_is_rejected(target, backend, where, bad, record_property):
    """NaN/Inf anywhere in q, k or v is a ValueError (never a silently NaN output)."""
    rng = generator(0, "non_finite_input")
    arrays = {"q": rng.standard_normal((1, 2, 4, 3)) * 0.5,
              "k": rng.standard_normal((1, 2, 4, 3)) * 0.5, "v": rng.standard_normal((1, 2, 4, 2))}
    if target.self_attention_only and where == "k":
        where = "q"
    arrays[where][0, 1, 2, 0] = bad
    q = backend.from_numpy(arrays["q"])
    k = q if target.self_attention_only else backend.from_numpy(arrays["k"])
    for causal in modes(target):
        _policy(target, backend, f"{bad} in {where}", (q, k, backend.from_numpy(arrays["v"])),
                causal, record_property)


@pytest.mark.parametrize(("target", "backend"), cases())
def test_mismatched_shapes_are_rejected(target, backend, record_property):
    rng = generator(0, "mismatched_shapes")
    q, k, v = (backend.from_numpy(rng.standard_normal(s) * 0.5)
               for s in ((1, 2, 4, 3), (1, 2, 4, 3), (1, 2, 4, 2)))
    if target.self_attention_only:
        k = q
    bad = [("v with fewer rows than k", (q, k, v[..., :3, :]))]
    if not target.self_attention_only:
        bad.insert(0, ("k with another d", (q, k[..., :2], v)))
    for causal in modes(target):
        for what, args in bad:
            _policy(target, backend, what, args, causal, record_property)


def _judgeable(constrained: np.ndarray) -> None:
    """Discard an example whose constrained outputs are NaN/±Inf with the original inputs.

    Called after the comparison, which already fails when the constrained outputs change with
    the perturbation (NaN patterns included): what is left is an example on which the identity
    holds only vacuously. Outputs outside the constrained part (the replaced rows, batch
    elements or heads, at another input scale) are not this property's business: a target that
    turns NaN there fails ``test_outputs_stay_finite_across_input_scales``, once, by name. A
    target whose outputs are never finite leaves no example, and Hypothesis reports the property
    as unsatisfiable (an error, never a pass)."""
    assume(np.isfinite(constrained).all())


# ------------------------------------------------------------------ causality
@pytest.mark.parametrize(("target", "backend"), cases("causal"))
@example(data=AT_BOUNDARIES, seed=0, cut=0.0, scales=(0.5, 0.5))
@given(data=st.data(), seed=seeds, cut=st.floats(0.0, 1.0),
       scales=scale_pairs((*SCALE_PAIRS, (0.5, SCALE_SWEEP[-1]))))
@with_layouts(_causal_layouts)
def test_past_outputs_ignore_the_future(target, backend, data, seed, cut, scales, request):
    """Queries, keys and values after position c are replaced by fresh ones at another scale
    (large-norm pasts with small futures are where a shift over the sequence underflows). The
    pairs reach the top of the finiteness sweep (a small past with a future at scale 300): a
    stabiliser taken over the whole sequence, or over any block that holds future positions,
    underflows the past there in every dtype, float64 included (its exponent range ends near
    e^−708), and past rows that change — or turn NaN — when only the future changed fail. An
    example whose replaced inputs exceed the dtype's range (Σ|q||k| ≥ its largest value) is
    left out, as in the finiteness sweep: correct code need not handle it."""
    past, future = scales
    x = data.draw(_inputs(target, shape=shapes(n=(2, 8)), dv=2, scales=(past,), aligned=None))
    n = x.shape[2]
    c = min(int(cut * (n - 1)), n - 2)
    y = fresh_like(x, seed, future)
    cut_ = (..., slice(c + 1, None), slice(None))
    fq, fk, fv = x.q.copy(), x.k.copy(), x.v.copy()
    fq[cut_], fv[cut_] = y.q[cut_], y.v[cut_]
    if not x.self_attention:
        fk[cut_] = y.k[cut_]
    fx = QKV(fq, fq if x.self_attention else fk, fv, x.scale, x.self_attention)
    assume(float((np.abs(fx.q) @ np.abs(fx.k).swapaxes(-1, -2)).sum(-1).max())
           < _dtype_max(backend))
    out = call(target, backend, x, causal=True, seed=seed)
    out2 = call(target, backend, fx, causal=True, seed=seed)
    where = describe(target, backend, True, seed, x)
    xs, fxs = seen(x, backend), seen(fx, backend)
    tol = 2 * max(_eps(xs, backend, target), _eps(fxs, backend, target))
    credit_case(request, tol, (xs.v, fxs.v), backend, scales, "causality")
    # Past rows that turn NaN/Inf (or stop being NaN) when only the future changed are a
    # causality defect (e.g. a stabiliser over the whole sequence whose future maximum
    # underflows the past): compared first; finiteness is required only afterwards.
    got, ref = _unchanged_nonfinite(out2[..., : c + 1, :], out[..., : c + 1, :])
    text = observed(got, tol=tol, expected=ref)
    if text:
        if not (np.isfinite(got).all() and np.isfinite(ref).all()):
            text += (" — non-finite values in past rows that depend on the future: an overflow "
                     "or NaN in the future tokens (features, scores) reaches the past, as a "
                     "mask applied by multiplication does (0·∞ = NaN); mask by selection, or "
                     "keep the future's values finite")
        _fail(target, backend, x, True, seed, out, tol, where,
              f"rows ≤ {c} changed when only positions > {c} changed", text)
    _judgeable(out[..., : c + 1, :])


# ------------------------------------------------------------------ batch and heads
@pytest.mark.parametrize(("target", "backend"), cases())
@example(data=AT_BOUNDARIES, seed=0, which=0, axis=0, scales=(0.5, 30.0))
@given(data=st.data(), seed=seeds, which=st.integers(0, 2**16), axis=st.sampled_from([0, 1]),
       scales=scale_pairs(((0.5, 30.0), (30.0, 0.5), (0.5, 0.5), (0.5, SCALE_SWEEP[-1]))))
@with_layouts(_batch_layouts)
def test_batch_elements_and_heads_are_independent(target, backend, data, seed, which, axis,
                                                  scales, request):
    """Replace batch element b (axis 0) or head h (axis 1) by fresh inputs at another scale:
    every other batch element / head must be unchanged. As for causality, one pair puts the
    replacement at the top of the finiteness sweep (scale 300), where a stabiliser taken over
    the batch or the heads underflows the others in every dtype; an example whose replaced
    inputs exceed the dtype's range is left out."""
    base, new = scales
    x = data.draw(_inputs(target, shape=shapes(batch=(2, 3), heads=(2, 3)), dv=2,
                          scales=(base,), aligned=None))
    y = fresh_like(x, seed, new)
    j = which % x.shape[axis]
    index = (j,) if axis == 0 else (slice(None), j)
    fq, fk, fv = x.q.copy(), x.k.copy(), x.v.copy()
    fq[index], fk[index], fv[index] = y.q[index], y.k[index], y.v[index]
    fx = QKV(fq, fq if x.self_attention else fk, fv, x.scale, x.self_attention)
    assume(float((np.abs(fx.q) @ np.abs(fx.k).swapaxes(-1, -2)).sum(-1).max())
           < _dtype_max(backend))
    keep = np.flatnonzero(np.arange(x.shape[axis]) != j)
    xs, fxs = seen(x, backend), seen(fx, backend)
    tol = 2 * max(_eps(xs, backend, target), _eps(fxs, backend, target))
    credit_case(request, tol, (xs.v, fxs.v), backend, scales,
                "batch and head independence")
    what = "batch element" if axis == 0 else "head"
    for causal in modes(target):
        where = describe(target, backend, causal, seed, x)
        out = call(target, backend, x, causal=causal, seed=seed)
        out2 = call(target, backend, fx, causal=causal, seed=seed)
        # Other elements that turn NaN/Inf (or stop being NaN) when only element j changed are
        # coupled to it (e.g. a stabiliser over the whole batch): compared before finiteness.
        got, ref = _unchanged_nonfinite(np.take(out2, keep, axis), np.take(out, keep, axis))
        text = observed(got, tol=tol, expected=ref)
        if text:
            _fail(target, backend, x, causal, seed, out, tol, where,
                  f"changing {what} {j} changed the other {what}s", text)
        _judgeable(np.take(out, keep, axis))


# ------------------------------------------------------------------ permutations
@pytest.mark.parametrize(("target", "backend"), cases("noncausal"))
@_drawn_at_layouts(_permutation_layouts)
def test_permutation_equivariance(target, backend, data, seed, request):
    x = data.draw(_inputs(target, shape=shapes(n=(2, 8)), dv=2))
    n = x.shape[2]
    pk = data.draw(permutations(n), label="key permutation")
    pq = data.draw(permutations(n), label="query permutation")
    assume((pk != np.arange(n)).any())
    xs = seen(x, backend)
    tol = 2 * _eps(xs, backend, target)
    credit_case(request, tol, (xs.v,), backend, x.scale, "permutation equivariance")
    where = describe(target, backend, False, seed, x)
    out = call(target, backend, x, causal=False, seed=seed)
    require_finite(out, where, "permutation equivariance")
    if x.self_attention:  # one sequence: permuting it must permute the outputs
        px = QKV(x.q[..., pk, :], x.q[..., pk, :], x.v[..., pk, :], x.scale, True)
        got = call(target, backend, px, causal=False, seed=seed)
        text = observed(got, tol=tol, expected=out[..., pk, :])
        if text:
            _fail(target, backend, x, False, seed, out, tol, where,
                  f"permuting the sequence by {pk.tolist()} did not permute the outputs", text)
        return
    kx = QKV(x.q, x.k[..., pk, :], x.v[..., pk, :], x.scale)
    out_k = call(target, backend, kx, causal=False, seed=seed)
    text = observed(out_k, tol=tol, expected=out)
    if text:
        _fail(target, backend, x, False, seed, out, tol, where,
              f"permuting keys and values together by {pk.tolist()} changed the output", text)
    qx = QKV(x.q[..., pq, :], x.k, x.v, x.scale)
    out_q = call(target, backend, qx, causal=False, seed=seed)
    text = observed(out_q, tol=tol, expected=out[..., pq, :])
    if text:
        _fail(target, backend, x, False, seed, out, tol, where,
              f"permuting queries by {pq.tolist()} did not permute the outputs", text)


# ------------------------------------------------------------------ input scale
@pytest.mark.parametrize(("target", "backend"), cases())
@_drawn_at_layouts(_finite_layouts)
def test_outputs_stay_finite_across_input_scales(target, backend, data, seed):
    """The same unit-scale input multiplied by each scale of the sweep: outputs stay finite.

    A scale at which ``max_i Σ_j Σ_f |q_if||k_jf|`` (the magnitude a plain linear attention's
    row of scores sums to) exceeds the largest finite number of the dtype is beyond that dtype's
    range, not a defect of the target: it is left out for that example (float16 at scale 300 with
    d = 1; float32/float64 never reach it). Stabilised exponentials are still required: an
    exp-feature map overflows long before this limit. So is a denominator that cannot round to
    zero: ``F.elu(x) + 1`` is exactly 0 for x below about −36.7 in float64 (−8.3 in float16), and
    a plain elu+1 attention returns 0/0 for a query whose every coordinate is that negative, and
    fails here (evaluating it as ``exp(x)`` for x < 0 moves the limit to exp's underflow)."""
    x = data.draw(_inputs(target, dv=2, scales=(1.0,), aligned=None))
    limit = _dtype_max(backend)
    for scale in SCALE_SWEEP:
        k = x.q * scale if x.self_attention else x.k * scale
        sx = QKV(x.q * scale, k, x.v, scale, x.self_attention)
        if float((np.abs(sx.q) @ np.abs(sx.k).swapaxes(-1, -2)).sum(-1).max()) >= limit:
            continue
        for causal in modes(target):
            out = call(target, backend, sx, causal=causal, seed=seed)
            text = nonfinite(out)
            why = ""
            if text is not None and "NaN" in text:
                why = _WHY_NONFINITE_EXACT if target.feature_count == 0 else _WHY_NONFINITE
            assert text is None, (f"{describe(target, backend, causal, seed, sx)}: {text} at "
                                  f"input scale {scale}{why}")


#: What a NaN at a large input scale usually means, and the fixes (the failure's last line).
_WHY_NONFINITE = (
    " — a NaN here is most often 0/0: every feature of a row's query or keys rounded to 0, "
    "so the normaliser is 0 (F.elu(x) + 1 is exactly 0 below x ≈ ln u: −36.7 in float64, "
    "−16.6 in float32, −7.6 in float16, −5.5 in bfloat16; exponential features shifted by one "
    "shared maximum underflow to 0 for every key far below it: a log-space normaliser or a "
    "per-row shift that cancels in the ratio avoids it) — or an overflow: polynomial or "
    "exponential features past the dtype's range (float16: 65504) give ∞/∞ or 0·∞; a "
    "denominator "
    "that cannot round to zero (an ε, or the features evaluated as exp(x) for x < 0) or a "
    "stabilised exponential fixes it; if the target means to return NaN there, declare it "
    "in known_failures")


#: The same for exact softmax attention (``feature_count=0``: no features to round to 0).
_WHY_NONFINITE_EXACT = (
    " — for exact softmax attention a NaN here is most often exp(scores) overflowing (∞/∞: "
    "float64 past a score of 709.8, float32 88.7, float16 11.1) or every weight of a row "
    "underflowing to 0 (0/0); subtracting each row's largest score before exp leaves the "
    "softmax unchanged and fixes both; if the target means to return NaN there, declare it "
    "in known_failures")


def _antipodal_inputs(seed: int, d: int, scale: float, self_attention: bool):
    """Cross-attention: one query ``a·e₁``; keys ``±a(cos 30°·e₁ + sin 30°·e₂)`` (equal norms),
    ``a = scale·√d``. Exact attention tends to ``v₀`` as the scale grows; so does any positive
    random-feature estimator whose best feature for the direction ``q + k₀`` beats the best one
    for ``q − k₀`` (lengths 1.93a and 0.52a), which fails only if every one of the m projections
    on the first direction is below ~0.27× the largest on the second: probability ≲ Φ(0.8)^m
    (< 1e-26 at the m = 256 used here).
    Self-attention: the sequence ``(a·e₁, −a·e₁)``; row i tends to ``v_i`` (its own key; for
    positive features ``φ(x)ᵀφ(−x) = e^(−‖x‖²)`` exactly, while ``φ(x)ᵀφ(x) ≥ 5e^(−‖x‖²)`` unless
    all 256 projections ``wᵀe₁`` are below 0.3: probability ≲ Φ(0.3)^256 < 1e-50)."""
    rng = generator(seed, "antipodal")
    e, _ = np.linalg.qr(rng.standard_normal((d, 2)))
    a = scale * math.sqrt(d)
    v = rng.standard_normal((1, 1, 2, 3))
    if self_attention:
        q = np.stack([a * e[:, 0], -a * e[:, 0]])[None, None]
        return QKV(q, q, v, scale, True), v[0, 0]
    th = math.pi / 6
    k0 = a * (math.cos(th) * e[:, 0] + math.sin(th) * e[:, 1])
    q = (a * e[:, 0])[None, None, None, :]
    return QKV(q, np.stack([k0, -k0])[None, None], v, scale), v[0, 0, :1]


#: Sign pattern of the causal large-scale sequence ``x_j = s_j·a·u``: every row i ≥ 1 sees keys
#: of both signs, so its argmax set (the visible keys of its own sign) is never all it sees.
CAUSAL_SIGNS = (1, -1, 1, -1, -1, 1)


def _causal_argmax_inputs(seed: int, d: int, scale: float):
    """Causal large-scale inputs: the sequence ``x_j = s_j·a·u`` (``u`` a random unit vector,
    ``a = scale·√d``, signs :data:`CAUSAL_SIGNS`), used as queries and keys (``k = q``: valid for
    cross- and self-attention targets alike). Row i sees keys ``j ≤ i``; exact attention's
    scores are ``±a²/√d``, so as the scale grows row i tends to the mean of ``v_j`` over its
    argmax set ``A_i = {j ≤ i : s_j = s_i}``, while collapsed (uniform) attention gives the mean
    over all ``j ≤ i`` — different for every row i ≥ 1, since each sees both signs.
    Positive random features: ``φ(x)ᵀφ(−x) = e^(−a²)`` exactly, ``φ(x)ᵀφ(x) ≥ e^(−a²)·e^(2aM)/m``
    with ``M`` the largest of the m projections ``wᵀu``; the weight outside ``A_i`` exceeds 1/6
    only if ``e^(2aM)/m < 5n``, i.e. ``M < log(5nm)/(2a) ≤ 0.33`` (n = 6, m = 256, a ≥ 10√2):
    probability ≤ Φ(0.33)^256 < 1e-50. Returns ``(x, targets)``: ``targets[i]`` the argmax-set
    mean, and the visible means (uniform attention) for the failure's diagnosis."""
    rng = generator(seed, "antipodal_causal")
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    a = scale * math.sqrt(d)
    s = np.asarray(CAUSAL_SIGNS, dtype=np.float64)
    q = (s[:, None] * a * u)[None, None]
    v = rng.standard_normal((1, 1, len(s), 3))
    return QKV(q, q.copy(), v, scale), s


def _argmax_rows(target, backend, seed: int, d: int, scale: float, causal: bool):
    """``(v, out, [(row, argmax value, uniform value)])`` of one large-scale call."""
    if causal:
        x, s = _causal_argmax_inputs(seed, d, scale)
        if target.self_attention_only:
            x = QKV(x.q, x.q, x.v, x.scale, True)
        v = seen(x, backend).v[0, 0]
        rows = [(i, v[: i + 1][s[: i + 1] == s[i]].mean(axis=0), v[: i + 1].mean(axis=0))
                for i in range(1, len(s))]
    else:
        x, argmax = _antipodal_inputs(seed, d, scale, target.self_attention_only)
        v = seen(x, backend).v[0, 0]
        rows = [(i, argmax[i] if len(argmax) > i else argmax[0], v.mean(axis=0))
                for i in range(x.q.shape[-2])]
    out = call(target, backend, x, causal=causal, seed=seed, m=256)[0, 0]
    return v, out, rows


@pytest.mark.parametrize(("target", "backend"), cases("approximates_softmax"))
@given(seed=seeds, d=st.integers(2, 6))
def test_large_scale_keeps_the_argmax_value(target, backend, seed, d):
    """No collapse to uniform attention: at scales 10…300 each output is nearer exact
    attention's argmax value than the uniform-attention value (the mean of the values the row
    sees), i.e. the weight outside the argmax keys is below 1/6. Non-causal: one query against
    two keys (or a two-token self-attention sequence), :func:`_antipodal_inputs`. Causal: a
    six-token sequence whose every row i ≥ 1 sees keys of both signs
    (:func:`_causal_argmax_inputs`), so a causal-only target is judged on rows 1…5 — a target
    that returns the running mean of v fails here."""
    for causal in modes(target):
        for scale in (10.0, 30.0, 100.0, 300.0):
            v, out, rows = _argmax_rows(target, backend, seed, d, scale, causal)
            where = (f"{target.name} on {backend.id} (causal={causal}, seed={seed}, d={d}, "
                     f"scale={scale})")
            require_finite(out, where, "the argmax weight")
            for i, want, mean in rows:
                to_argmax, to_mean = np.linalg.norm(out[i] - want), np.linalg.norm(out[i] - mean)
                if to_argmax < 0.5 * to_mean:
                    continue
                visible = v[: i + 1] if causal else v
                if not np.any(out[i]):
                    kind = ("the output is exactly 0 (no key got any weight: every feature "
                            "exp(wᵀx − ‖x‖²/2) underflowed; the usual fix subtracts from the "
                            "exponents one stabiliser shared by every key of the row, e.g. "
                            "max over keys and features, and cancels it in the normaliser)")
                elif (np.any(out[i] < visible.min(axis=0) - 1e-9)
                      or np.any(out[i] > visible.max(axis=0) + 1e-9)):
                    kind = ("the output lies outside the hull of the visible values (weights "
                            "are not a convex combination)")
                elif to_mean < 0.1 * to_argmax:
                    kind = "attention collapsed to uniform"
                else:
                    kind = "the weight outside the argmax keys is above 1/6"
                raise AssertionError(
                    f"{where}: row {i} output {out[i]} is not near the argmax value {want} "
                    f"(distance {to_argmax:.3g}; to uniform attention {mean}: {to_mean:.3g}): "
                    f"{kind}")


# ------------------------------------------------------------------ convergence to softmax
@pytest.mark.statistical(assertions=1)
@pytest.mark.parametrize(("target", "backend"), cases("approximates_softmax"))
@settings(max_examples=STAT_EXAMPLES)
@given(seed=st.integers(0, 2**31), d=st.integers(2, 6))
def test_error_to_softmax_attention_falls_as_m_grows(target, backend, seed, d):
    """Trials are independent, so under the model assumption (``P0``: correct estimators fail to
    halve their error in at most 10% of trials; measured by ``kernel-verify calibrate --part
    convergence`` with this function and floor in every cell this property runs: 0–1.6% over
    1000 trials per cell for the built-in estimators, reports/calibration.md) the failure
    count is dominated by Bin(40, 0.1); rejecting at ``k*`` with ``P(Bin ≥ k*) ≤ α`` keeps the
    false-alarm rate ≤ α. The guarantee is conditional on that stated model, not a theorem.
    Causal-only targets are checked on the causal path (against causal softmax attention);
    in half types the output rounding (≤ 2^-8 relative) is well below the m = 1024 error.
    A biased estimator (wrong stabiliser, missing term) keeps an error floor and fails to halve
    in most trials."""
    alpha = alpha_budget.per_assertion()
    k_star = convergence_threshold(CONV_SEEDS, alpha)
    causal = modes(target)[0]
    failures = convergence_failures(target, seed, d, causal=causal,
                                    self_attention=target.self_attention_only,
                                    convert=backend.from_numpy, floor=rounding_floor(backend))
    assert failures < k_star, (
        f"{target.name} on {backend.id} (seed={seed}, d={d}, causal={causal}): the error to "
        f"softmax attention failed to halve from m={M_LO} to m={M_HI} in {failures}/{CONV_SEEDS} "
        f"trials (reject at ≥ {k_star}: P(Bin({CONV_SEEDS}, {P0}) ≥ {k_star}) ≤ α = "
        f"{alpha:.3g}): the estimator does not converge to softmax attention"
        + (" (no rounding floor applies in a half type without the claim half_in_float32: an "
           "exact attention that computes in float32 should claim it)"
           if backend.native_half else "")
    )


# ------------------------------------------------------------------ stabiliser invariance
def _log_maps() -> list:
    """White-box log-feature maps (built-in: one per formula with i.i.d. or no frequencies)."""
    return feature_maps("log_features", white_box=True,
                        predicate=lambda t: t.log_numpy_fn is not None
                        and getattr(t, "matrix", None) in (None, "iid"))


# This property checks the built-in log-space kernels (impls/{numpy,torch}/attention.py) with the
# log-features of every white-box log-feature target: third-party targets and mutants do not
# replace those kernels, so it says nothing about the target (marked kv_builtin_only: `check`
# leaves it out of the target's totals). It earns its place as the guard of the kernels
# themselves: an unstabilised kernel fails it through overflow/underflow at shifts of ±1000, as
# tests/test_mutants_machinery.py shows.
@pytest.mark.kv_builtin_only
@pytest.mark.parametrize("backend", backend_axis(("float64",)))
@pytest.mark.parametrize("target", _log_maps())
@given(seed=seeds, shape=st.tuples(st.integers(1, 2), st.integers(2, 10), st.integers(1, 6)),
       causal=st.booleans(), shift=st.floats(-1000, 1000))
def test_stabiliser_shifts_cancel_in_log_space_attention(target, backend, seed, shape, causal,
                                                         shift):
    """``log_linear_attention(lq + c_i, lk + c', v) == log_linear_attention(lq, lk, v)`` for a
    per-query constant ``c_i`` and a global key constant ``c'`` (exact rescalings that cancel,
    docs/math.md §9); a per-key shift is a reweighting of the keys and must change the output (the
    in-test negative control: without it the comparison could be vacuous).

    Bound: each evaluation is within ``(e^(4δ) − 1)·max|v|`` of the exact value with
    ``δ = γ_(n+m+6)·(Z + 1)``, ``Z = max|lq| + max|lk| + log(nm)`` of its own inputs
    (derivation in ``tests/test_attention.py``)."""
    b, n, d = shape
    rng = generator(seed, "stabiliser")
    x = rng.standard_normal((b, 2, n, d)) * 0.5
    params = target.draw_params(rng, d, 16)
    lq = np.asarray(target.log_numpy_fn(x[:, 0], params, target.config), dtype=np.float64)
    lk = np.asarray(target.log_numpy_fn(x[:, 1], params, target.config), dtype=np.float64)
    v = rng.standard_normal((b, n, 2))
    c_rows = rng.uniform(-1000, 1000, size=(b, n, 1))
    c_keys = rng.uniform(-2, 2, size=(b, n, 1))
    att = np_att if backend.library == "numpy" else torch_att
    m = lq.shape[-1]

    def run(a, bb):
        args = (backend.from_numpy(a), backend.from_numpy(bb), backend.from_numpy(v))
        return to_numpy(att.log_linear_attention(*args, causal=causal))

    def err(a, bb):
        z = np.abs(a).max() + np.abs(bb).max() + math.log(n * m)
        return math.expm1(4 * gamma(n + m + 6, U64) * (z + 1)) * np.abs(v).max()

    out = run(lq, lk)
    shifted = run(lq + c_rows, lk + shift)
    tol = err(lq, lk) + err(lq + c_rows, lk + shift)
    _check(shifted, tol, f"{target.name} {backend} causal={causal} seed={seed}: query-row shifts "
           f"and a key shift {shift:.3g} did not cancel", expected=out)
    per_key = run(lq, lk + c_keys)
    rows = slice(1, None) if causal else slice(None)  # causal row 0 sees one key only
    moved = np.abs(per_key - out)[..., rows, :].max()
    assert moved > err(lq, lk) + err(lq, lk + c_keys), (
        f"{target.name} {backend}: a per-key shift left the output unchanged (moved "
        f"{moved:.3e}): the shift-invariance check above has no power here"
    )

