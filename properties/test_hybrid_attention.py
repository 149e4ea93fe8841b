"""Hybrid attention — softmax over a sliding window, linear attention before it (docs/math.md
§22) — on every :class:`~kernel_verify.properties.hybrid_protocol.HybridAttentionTarget`
(built-in, or the adapter's through ``KV_TARGET``), over the backends × dtypes it accepts.

Every output is compared with the exact mpmath value
(:mod:`kernel_verify.verify.references.hybrid`, or the softmax / linear attention references
for the two limits) within the derived bound of :mod:`kernel_verify.verify.hybrid_bounds` for
the dtype, on the inputs as the target sees them (rounded to its dtype). Properties:

* the full-sequence form meets the exact hybrid at a drawn window ``0 ≤ w ≤ T + 2``;
* the same at inputs of scale 30, whose scores pass the exponential's range;
* a window ``w ≥ T`` is exact softmax attention (the mixing factor cancels);
* a window ``w = 0`` is linear attention with the target's own φ;
* the forms agree across the window's boundary: for a drawn ``w``, every layout of
  :func:`kernel_verify.properties.layouts.layouts` around ``C = w`` (``T ∈ {w − 1, w, w + 1,
  2w + 1}``, splits at ``w − 1``, ``w``, ``w + 1``): the split run ``[0, t₀)`` then ``[t₀, T)`` from
  its state, prefill then ``step`` one token at a time, and a probe continued from the final
  state, each against the exact run of the whole sequence;
* causality: changing the rows after ``c`` leaves rows ``≤ c`` within their bounds of the same
  exact values;
* gradients (``differentiable``, torch float64): autograd against float64 central differences
  (the step and tolerance of ``properties/test_gradients.py``), of the output and of a
  continuation through the state.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, note, settings
from hypothesis import strategies as st

from kernel_verify.properties.backends import backend_param
from kernel_verify.properties.checks.forms import F64_TOL
from kernel_verify.properties.checks.hybrid import exact
from kernel_verify.properties.layouts import layouts
from kernel_verify.properties.strategies import generator
from kernel_verify.properties.targets import none_param, of_kind, provides_none
from kernel_verify.verify.backends import AXIS, as_float64

#: Examples per (property, target, backend): each runs an mpmath reference.
HYBRID_EXAMPLES = max(3, settings.default.max_examples // 5)
HALF = ("float16", "bfloat16")
PROBE = 2


# ------------------------------------------------------------------ cases
def hybrid_targets() -> list:
    """The adapter's hybrid targets (``KV_TARGET``), else the built-in ones."""
    def builtin() -> list:
        from kernel_verify.properties.builtin_hybrid import builtin_hybrid_targets

        return builtin_hybrid_targets()

    return of_kind("HybridAttentionTarget", builtin)


def hybrid_cases(*, dtypes: tuple[str, ...] | None = None, need_step: bool = False) -> list:
    """``pytest.param(target, backend)`` over the hybrid targets × accepted backends."""
    targets = hybrid_targets()
    if not targets:
        return none_param(provides_none("hybrid attention (HybridAttentionTarget)"), values=2)
    out = []
    for t in targets:
        if need_step and t.step is None:
            out.append(pytest.param(t, None, id=f"{t.name}-no-step", marks=pytest.mark.skip(
                reason=f"{t.name} offers no HybridAttentionTarget.step")))
            continue
        for b in AXIS:
            if not t.accepts(b.library, b.dtype) or (dtypes and b.dtype not in dtypes):
                continue
            if b.dtype in HALF and not t.has("half_in_float32"):
                out.append(pytest.param(t, b, id=f"{t.name}-{b.id}", marks=pytest.mark.skip(
                    reason=f"not credited on {b.id}: no half_in_float32 claim, the derived "
                           "bound is void")))
                continue
            out.append(backend_param(t, backend=b, id=f"{t.name}-{b.id}"))
    return out


# ------------------------------------------------------------------ inputs and the truth
def draw_inputs(backend, seed: int, t: int, *, h: int = 2, d: int = 3, dv: int = 2,
                scale: float = 1.0, hot: bool = False) -> tuple[tuple, tuple]:
    """``(q, k, v)`` on the backend and the float64 values it sees (rounded to its dtype);
    ``hot``: the last query and key are ``scale·(1, …, 1)``, a score of ``scale²·d`` times the
    scale on the diagonal, inside every window ``w ≥ 1``."""
    rng = generator(seed, "hybrid inputs")
    raw = (rng.uniform(-1, 1, (1, h, t, d)) * scale, rng.uniform(-1, 1, (1, h, t, d)) * scale,
           rng.uniform(-1, 1, (1, h, t, dv)))
    if hot:
        raw[0][..., -1, :] = raw[1][..., -1, :] = scale
    arrays = tuple(backend.from_numpy(x) for x in raw)
    return arrays, tuple(as_float64(x) for x in arrays)


def check_within(got, ref, bound, what: str) -> None:
    g = as_float64(got)
    assert g.shape == ref.shape, f"{what}: output shape {g.shape}, expected {ref.shape}"
    err = np.abs(g - ref)
    bad = ~(err <= bound)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} entries outside the derived bound; first "
            f"at {idx}: got {g[idx]!r}, exact {ref[idx]!r}, error {err[idx]:.3g} > bound "
            f"{bound[idx]:.3g}")


def rows(xs: tuple, a: int, b: int) -> tuple:
    return tuple(x[..., a:b, :] for x in xs)


def cat(parts: list):
    if type(parts[0]).__module__.startswith("torch"):
        import torch

        return torch.cat(parts, dim=-2)
    return np.concatenate(parts, axis=-2)


def steps(target, state, arrays: tuple, window: int):
    outs = []
    for i in range(arrays[0].shape[-2]):
        state, o = target.step(state, *(x[..., i, :] for x in arrays), window=window)
        outs.append(o[..., None, :])
    return (cat(outs) if outs else None), state


# ------------------------------------------------------------------ the formula
@pytest.mark.parametrize(("target", "backend"), hybrid_cases())
@settings(max_examples=HYBRID_EXAMPLES)
@given(seed=st.integers(0, 2**16), t=st.integers(1, 9), extra=st.integers(0, 11),
       scale=st.sampled_from([1.0, 3.0]))
@example(seed=0, t=7, extra=3, scale=1.0)  # a window of 3 inside a sequence of 7
def test_hybrid_meets_the_exact_reference(target, backend, seed, t, extra, scale):
    """The full-sequence form at a window ``w = extra mod (T + 3)`` meets the exact hybrid."""
    window = extra % (t + 3)
    arrays, seen = draw_inputs(backend, seed, t, scale=scale)
    ref, bound = exact(target, backend, seen, window)
    out, _ = target.attention(*arrays, window=window)
    check_within(out, ref, bound, f"T={t}, w={window}, scale={scale}")


@pytest.mark.parametrize(("target", "backend"), hybrid_cases())
@settings(max_examples=HYBRID_EXAMPLES)
@given(seed=st.integers(0, 2**16), t=st.integers(2, 9), extra=st.integers(1, 3),
       scale=st.sampled_from([1.0, 3.0]))
def test_full_window_is_softmax_attention(target, backend, seed, t, extra, scale):
    """``w = T`` and a drawn ``w > T``: exact causal softmax attention (the reference of §9,
    not the hybrid's). ``T ≥ 2``: at ``T = 1`` every normalised attention returns ``v_0``."""
    arrays, seen = draw_inputs(backend, seed, t, scale=scale)
    for window in (t, t + extra):
        ref, bound = exact(target, backend, seen, window, reference="softmax")
        out, _ = target.attention(*arrays, window=window)
        check_within(out, ref, bound, f"T={t}, w={window} (softmax attention)")


@pytest.mark.parametrize(("target", "backend"), hybrid_cases())
@settings(max_examples=HYBRID_EXAMPLES)
@given(seed=st.integers(0, 2**16), t=st.integers(1, 9), scale=st.sampled_from([1.0, 3.0]))
def test_zero_window_is_linear_attention(target, backend, seed, t, scale):
    """``w = 0``: causal linear attention with the target's features (§9's reference)."""
    arrays, seen = draw_inputs(backend, seed, t, scale=scale)
    ref, bound = exact(target, backend, seen, 0, reference="linear")
    out, _ = target.attention(*arrays, window=0)
    check_within(out, ref, bound, f"T={t}, w=0 (linear attention)")


@pytest.mark.parametrize(("target", "backend"), hybrid_cases())
@settings(max_examples=HYBRID_EXAMPLES)
@given(seed=st.integers(0, 2**16), t=st.integers(2, 8), extra=st.integers(0, 9))
def test_hybrid_large_scores_meet_the_exact_reference(target, backend, seed, t, extra):
    """Inputs at scale 30 whose last query and key meet at a score ``30²·d·s`` (≈ 1560 at
    ``d = 3``, ``s = 1/√3``: past the exponential's range even in float64) inside the window
    ``w = 1 + extra mod (T + 1)``: the full-sequence form still meets the exact hybrid within
    the derived bound (the shift must cancel, not overflow). Scale 30 keeps elu + 1's
    smallest products (``e^(−60)``) inside float32's normal range."""
    window = 1 + extra % (t + 1)
    arrays, seen = draw_inputs(backend, seed, t, scale=30.0, hot=True)
    ref, bound = exact(target, backend, seen, window)
    out, _ = target.attention(*arrays, window=window)
    check_within(out, ref, bound, f"T={t}, w={window}, scale=30")


# ------------------------------------------------------------------ forms and state
@pytest.mark.parametrize(("target", "backend"), hybrid_cases())
@settings(max_examples=HYBRID_EXAMPLES)
@given(seed=st.integers(0, 2**16), window=st.integers(0, 4))
def test_hybrid_forms_agree_across_the_window(target, backend, seed, window):
    """Split runs, prefill + steps and a probe from the final state, over the layouts around
    the window (module docstring), each against the exact run of the whole sequence."""
    for lay in layouts((max(window, 1),)):
        t, cut = lay.t, min(lay.cut, lay.t)
        where = f"w={window}, T={t}, t0={cut}"
        note(f"layout {where} (an exception below was raised by the target in this layout)")
        arrays, seen = draw_inputs(backend, seed + lay.index, t + PROBE)
        ref, bound = exact(target, backend, seen, window)
        body, probe = rows(arrays, 0, t), rows(arrays, t, t + PROBE)
        first, state = target.attention(*rows(body, 0, cut), window=window)
        if cut < t:  # no call of zero tokens: a split needs tokens on both sides
            rest, _ = target.attention(*rows(body, cut, t), window=window, initial_state=state)
            first = cat([first, rest])
        check_within(first, ref[..., :t, :], bound[..., :t, :],
                     f"{where}: [0, t0) then [t0, T) from its state")
        if target.step is not None:
            got, _ = steps(target, state, rows(body, cut, t), window) if cut < t else (None, 0)
            if got is not None:
                check_within(got, ref[..., cut:t, :], bound[..., cut:t, :],
                             f"{where}: prefill [0, t0), then step")
            got, _ = steps(target, None, rows(body, 0, min(t, 2 * window + 2)), window)
            n = got.shape[-2]
            check_within(got, ref[..., :n, :], bound[..., :n, :], f"{where}: step from empty")
        _, final = target.attention(*body, window=window)
        got, _ = target.attention(*probe, window=window, initial_state=final)
        check_within(got, ref[..., t:, :], bound[..., t:, :],
                     f"{where}: a probe continued from the final state")


@pytest.mark.parametrize(("target", "backend"), hybrid_cases())
@settings(max_examples=HYBRID_EXAMPLES)
@given(seed=st.integers(0, 2**16), t=st.integers(2, 9), cut=st.integers(0, 7),
       window=st.integers(0, 5))
def test_hybrid_outputs_ignore_the_future(target, backend, seed, t, cut, window):
    """Rows ``≤ c`` of two sequences that differ only after ``c`` agree within the sum of
    their derived bounds (their exact values are equal: their inputs up to ``c`` are)."""
    c = cut % (t - 1)
    arrays, seen = draw_inputs(backend, seed, t)
    other, seen2 = draw_inputs(backend, seed + 1, t, scale=2.0)
    mixed = tuple(cat([a[..., :c + 1, :], b[..., c + 1:, :]])
                  for a, b in zip(arrays, other, strict=True))
    seen_mixed = tuple(np.concatenate([a[..., :c + 1, :], b[..., c + 1:, :]], axis=-2)
                       for a, b in zip(seen, seen2, strict=True))
    _, bound = exact(target, backend, seen, window)
    _, bound2 = exact(target, backend, seen_mixed, window)
    out, _ = target.attention(*arrays, window=window)
    out2, _ = target.attention(*mixed, window=window)
    keep = slice(0, c + 1)
    check_within(as_float64(out2)[..., keep, :], as_float64(out)[..., keep, :],
                 bound[..., keep, :] + bound2[..., keep, :],
                 f"T={t}, w={window}: rows <= {c} after the rows after {c} changed")


# ------------------------------------------------------------------ gradients
def _gradcheck(fn, inputs) -> bool:
    import torch

    scale = max(1.0, float(fn(*inputs).detach().abs().max()))
    h = (2.0**-53) ** (1 / 3) * max(1.0, max(float(a.detach().abs().max()) for a in inputs))
    return bool(torch.autograd.gradcheck(fn, tuple(inputs), eps=h, atol=F64_TOL * scale,
                                         rtol=F64_TOL, fast_mode=True, raise_exception=False))


@pytest.mark.parametrize(("target", "backend"), hybrid_cases(dtypes=("float64",)))
@settings(max_examples=HYBRID_EXAMPLES)
@given(seed=st.integers(0, 2**16), t=st.integers(2, 6), window=st.integers(0, 4))
def test_hybrid_gradients_match_finite_differences(target, backend, seed, t, window):
    """Autograd w.r.t. q, k, v of the output, and of a continuation w.r.t. the prefix's inputs
    (through the state), against float64 central differences."""
    if not (target.has("differentiable") and backend.library == "torch"):
        pytest.skip("gradients: differentiable hybrid targets (claim `differentiable`) on torch "
                    "float64")
    arrays, _ = draw_inputs(backend, seed, t + PROBE)
    leaves = [a[..., :t, :].detach().clone().requires_grad_(True) for a in arrays]
    probe = rows(arrays, t, t + PROBE)

    def full(q, k, v):
        return target.attention(q, k, v, window=window)[0]

    def through_state(q, k, v):
        _, state = target.attention(q, k, v, window=window)
        return target.attention(*probe, window=window, initial_state=state)[0]

    assert _gradcheck(full, leaves), f"T={t}, w={window}: gradient of the output"
    assert _gradcheck(through_state, leaves), (
        f"T={t}, w={window}: gradient of a continuation w.r.t. the prefix (through the state)")
