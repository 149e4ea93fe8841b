"""Exact attention in every dtype it runs in (issue #44 item 2; docs/math.md §9, "Exact softmax
attention in low precision", and §14): a target declaring ``feature_count = 0`` (softmax of the
scores, no features) is compared with float64 exact softmax attention computed by the suite
from the inputs as the target saw them (rounded to its dtype):

* **outputs**, on every backend × dtype the target accepts (float64, float32, float16,
  bfloat16), causal and non-causal as it offers, within the derived bound
  :func:`~kernel_verify.verify.softmax_bounds.softmax_attention_error_bound` for the compute
  dtype of its budget (half types computed in float32 and cast back under ``half_in_float32``,
  else every operation in the half type), plus the same bound at ``u₆₄`` for the float64
  reference's own rounding;
* **gradients** (targets claiming ``differentiable`` with a torch backend), in float32,
  float16 and bfloat16: autograd ``∂L/∂(q, k, v)`` of ``L = Σ G⊙o`` (random cotangent ``G``,
  rounded to the dtype) against the float64 closed forms ``dV = PᵀG``, ``dP = G Vᵀ``,
  ``dS = P ⊙ (dP − rowsum(dP ⊙ P))``, ``dQ = dS K/√d``, ``dK = dSᵀQ/√d`` within
  :func:`~kernel_verify.verify.softmax_bounds.softmax_gradient_error_bound` (docs/math.md §14's
  backward bound with the weights' error of a reused or log-sum-exp-recomputed softmax), the
  same at ``u₆₄``, and the cast back to a half type (half an ulp, subnormals included).

Until this file, a float32-only exact-attention target (no float64 path to compare with) had
its gradients checked only by float32 finite differences. Besides the drawn inputs, the outputs
are compared at fixed lengths around the target's blocks (``test_exact_attention_outputs_at_
block_boundaries``: its ``chunk_sizes``, else 4, 16, 64 and 128 keys). Inputs: ``b, h ≤ 2``,
``T ≤ 12`` (gradients ``T ≤ 8``), ``d ≤ 6``, ``d_v ≤ 3`` (the target's shape contract kept),
entries of ``q, k`` in ``[−2, 2]·scale`` with ``scale ∈ {0.1, 0.5, 1, 3, 30}`` (scale 30: scores
in the thousands, where an unshifted exponential overflows), ``v`` and ``G`` in ``[−2, 2]``. A
gradient draw whose derived bound is void (scores in the thousands rounded to a half type
without ``half_in_float32``: the weights' relative error is unbounded) is discarded, not judged.
A fixed length whose output bound is void (``γ_K ≥ 1`` for the ``3T + 2`` roundings of a row's
sums: bfloat16 arithmetic throughout at ``T ≥ 42``) is not judged, and the verdict's note names
it. Credit: an output example whose bound is at least the spread of its values cannot fail for an
output inside the values' hull and is not credited
(:func:`~kernel_verify.properties.attention_cases.credit_case`).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kernel_verify.properties.attention_cases import call, credit_case, for_target, modes, seen
from kernel_verify.properties.backends import backend_param, to_numpy
from kernel_verify.properties.gradient_checks import attention_fn, half_cast, vjp
from kernel_verify.properties.layouts import (
    DEFAULT_CHUNKS,
    chunks_of,
    far_below_zero,
    lengths,
    qkv_at,
)
from kernel_verify.properties.shape_contract import keep_to_contract, refusal
from kernel_verify.properties.strategies import QKV, qkv_sets
from kernel_verify.properties.targets import attentions_with, none_param
from kernel_verify.verify.backends import AXIS, Backend
from kernel_verify.verify.compare import assert_close
from kernel_verify.verify.softmax_bounds import (
    format_tiny,
    softmax_attention_error_bound,
    softmax_attention_reference,
    softmax_gradient_error_bound,
    softmax_gradients_reference,
    stored_output_gradient_term,
)
from kernel_verify.verify.tolerance import FORMATS, U64

SCALES = (0.1, 0.5, 1.0, 3.0, 30.0)
LOW = ("float32", "float16", "bfloat16")
FEW = max(5, settings.default.max_examples // 3)
NONE = "no attention target declares feature_count = 0 (exact attention)"


def _exact(*claims: str) -> tuple[list, str]:
    targets, skip = attentions_with(claims)
    exact = [t for t in targets if getattr(t, "feature_count", None) == 0]
    return exact, (skip or NONE if not exact else "")


def _cases(dtypes: tuple[str, ...], libraries: tuple[str, ...], *claims: str) -> list:
    exact, reason = _exact(*claims)
    if not exact:
        return none_param(reason, values=2)
    out = [backend_param(t, backend=for_target(t, b), id=f"{t.name}-{b.id}")
           for t in exact for b in AXIS
           if b.dtype in dtypes and b.library in libraries and t.accepts(b.library, b.dtype)]
    return out or none_param(f"no exact-attention target{' claiming ' if claims else ''}"
                             f"{', '.join(claims)} accepts {'/'.join(libraries)} in "
                             f"{', '.join(dtypes)}", values=2)


OUTPUT_CASES = _cases(("float64", *LOW), ("numpy", "torch"))
GRADIENT_CASES = _cases(LOW, ("torch",), "differentiable")


@st.composite
def _inputs(draw, target, max_t: int) -> QKV:
    """``(b, h, T, d)`` within the target's shape contract, then the values
    (:func:`~kernel_verify.properties.strategies.qkv_sets`)."""
    b, h = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    step = max(1, int(getattr(target, "length_multiple_of", 1) or 1))
    least = max(1, int(getattr(target, "min_length", 1) or 1))
    t = draw(st.integers(1, max_t)) * step if step > 1 else draw(st.integers(1, max_t))
    t = max(t, -(-least // step) * step)
    d = draw(st.integers(1, 6))
    dv = d if getattr(target, "dv_equals_d", False) else draw(st.integers(1, 3))
    return draw(qkv_sets(shape=st.just((b, h, t, d)), dv=dv, scales=SCALES,
                         self_attention=bool(target.self_attention_only), aligned=None))


def _u_out(backend: Backend) -> float:
    return FORMATS[backend.dtype].u if backend.budget.output_round else 0.0


def _half_range_ok(x: QKV, backend: Backend) -> bool:
    """float16 computed in float16: scores and their products inside its range (65504)."""
    if backend.budget.compute_dtype != "float16":
        return True
    return float(np.abs(x.q).max() * np.abs(x.k).max() * x.q.shape[-1]) < 3e4


@pytest.mark.parametrize(("target", "backend"), OUTPUT_CASES)
@given(data=st.data())
def test_exact_attention_outputs_match_float64_softmax(target, backend, data, request):
    """``|ô − o| ≤ softmax_attention_error_bound`` (compute dtype, cast back) ``+`` the same at
    ``u₆₄``, ``o`` float64 softmax attention of the rounded inputs (module docstring)."""
    causal = data.draw(st.sampled_from(modes(target)), label="causal")
    x = seen(data.draw(_inputs(target, 12), label="x"), backend)
    assume(_half_range_ok(x, backend))
    try:
        _compare_outputs(target, backend, x, causal, request)
    except VoidBound:  # not at the drawn T ≤ 12 with the budgets here (2K·u ≤ 0.3)
        assume(False)


#: Input scales of the fixed lengths: weights spread over many keys, and nearly one-hot.
BOUNDARY_SCALES = (0.5, 3.0)
#: Key blocks of flash-style kernels, crossed besides the default blocks when a target declares
#: no ``chunk_sizes``.
FLASH_BLOCKS = (64, 128)


@pytest.mark.parametrize(("target", "backend"), OUTPUT_CASES)
def test_exact_attention_outputs_at_block_boundaries(target, backend, request):
    """The comparison of :func:`test_exact_attention_outputs_match_float64_softmax` at the fixed
    lengths around the target's blocks (its ``chunk_sizes``, else 4, 16, 64 and 128:
    ``T ∈ {1, C − 1, C, C + 1, 2C + 1}``, :func:`~kernel_verify.properties.layouts.lengths`),
    each mode, at input scales 0.5 and 3: a tiled kernel's partial last tile, its running-max
    rescaling across tiles and its mask inside a tile are all exercised, causal-only targets
    included (the drawn lengths stop at 12). Causal targets also meet inputs whose every
    visible score is far below zero (:func:`~kernel_verify.properties.layouts.far_below_zero`,
    about −8e4): a mask filled with a finite value (−1e4, float16's −65504) instead of −∞ lets
    the future in there (a new user's kernel with a −1e4 fill passed every property)."""
    step = max(1, int(getattr(target, "length_multiple_of", 1) or 1))
    least = max(1, int(getattr(target, "min_length", 1) or 1))
    self_att = bool(target.self_attention_only)
    dv = 2 if getattr(target, "dv_equals_d", False) else 3
    ran, void = 0, []
    # undeclared: the default blocks and a flash-style kernel's 64 and 128 keys (one forward
    # at T ≤ 257 is cheap for exact attention, and no scope is left to a declaration)
    chunks = chunks_of(target) if getattr(target, "chunk_sizes", None) else (*DEFAULT_CHUNKS,
                                                                              *FLASH_BLOCKS)
    for i, t in enumerate(lengths(chunks)):
        if t % step or t < least:
            continue
        for causal in modes(target):
            for scale in BOUNDARY_SCALES:
                x = seen(qkv_at(t, dv=dv, seed=i, scale=scale, self_attention=self_att),
                         backend)
                if not _half_range_ok(x, backend) or refusal(
                        target, t=t, d=x.q.shape[-1], dv=x.v.shape[-1]) is not None:
                    continue
                try:
                    _compare_outputs(
                        target, backend, x, causal, request,
                        repro=(f"causal={causal}; fixed layout T={t}: kernel_verify.properties."
                               f"layouts.qkv_at({t}, dv={dv}, seed={i}, scale={scale})"))
                except VoidBound:
                    void.append(t)
                    continue
                ran += 1
    # every visible score far below zero (−8e4): a mask filled with a finite value above them
    # (−1e4, float16's −65504) lets the future in with an O(1) error; a row's own keys only
    # are softmax-ed by a correct kernel (row 0 is v₀)
    t_far = -(-max(6, least) // step) * step
    if not self_att:
        for causal in [c for c in modes(target) if c]:
            x = seen(far_below_zero(t_far, dv=dv, seed=7), backend)
            if not _half_range_ok(x, backend) or refusal(
                    target, t=t_far, d=x.q.shape[-1], dv=x.v.shape[-1]) is not None:
                continue
            try:
                _compare_outputs(target, backend, x, causal, request,
                                 repro=(f"causal=True; every visible score far below zero: "
                                        f"kernel_verify.properties.layouts.far_below_zero("
                                        f"{t_far}, dv={dv}, seed=7)"))
            except VoidBound:
                request.node.user_properties.append((
                    "kv_note", f"the far-below-zero layout (scores near −8e4) is not judged on "
                    f"{backend.id}: the derived bound is void there with every operation in "
                    f"{backend.budget.compute_dtype}"))
                continue
            ran += 1
    void_note = ""
    if void:
        void_note = (f"T ∈ {sorted(set(void))} not judged on {backend.id}: the derived bound is "
                     f"void there (the sums' γ_K ≥ 1 with every operation in "
                     f"{backend.budget.compute_dtype}; a target computing in float32 claims "
                     "half_in_float32)")
        request.node.user_properties.append(("kv_note", void_note))
    if not ran:
        pytest.skip(f"{target.name}: none of the lengths {lengths(chunks)} meets "
                    f"its shape contract (length_multiple_of={step}, min_length={least}, "
                    "and its other limits)" + (f"; {void_note}" if void_note else ""))


def weights_rounding(target, backend: Backend, weights: np.ndarray,
                     v: np.ndarray) -> np.ndarray | float:
    """Under ``half_in_float32`` on a half type: ``u_h·Σ_j P_ij·|v_j|`` (``u_h`` the half type's
    unit roundoff), one rounding of each weight to the half type before the product with V,
    as FlashAttention's kernels round the probabilities (scores, row statistics and the
    accumulation stay in float32): ``|fl_h(P) − P| ≤ u_h·P`` elementwise, so the product moves
    by at most ``u_h·P|V|`` (docs/math.md §9). 0 otherwise."""
    if backend.dtype not in ("float16", "bfloat16") or not target.has("half_in_float32"):
        return 0.0
    return FORMATS[backend.dtype].u * (weights @ np.abs(v))


class VoidBound(Exception):
    """The derived bound is void for these inputs in this compute dtype (not a verdict)."""


def _compare_outputs(target, backend: Backend, x: QKV, causal: bool, request,
                     repro: str | None = None) -> None:
    """``|ô − o| ≤ softmax_attention_error_bound`` (compute dtype, cast back) ``+`` the same at
    ``u₆₄`` for the inputs as the target saw them."""
    got = call(target, backend, x, causal=causal, seed=0)
    ref, weights = softmax_attention_reference(x.q, x.k, x.v, causal=causal)
    b = backend.budget
    try:
        bound = softmax_attention_error_bound(
            x.q, x.k, x.v, causal=causal, u=b.u_compute, ulps=b.ulps["exp"],
            u_out=_u_out(backend), tiny=format_tiny(b.compute_dtype),
            tiny_out=format_tiny(backend.dtype))
    except ValueError as err:  # a void bound (γ_K ≥ 1 at this length): nothing to judge by
        raise VoidBound(str(err)) from None
    bound = bound + softmax_attention_error_bound(x.q, x.k, x.v, causal=causal, u=U64,
                                                  ulps=1.0, tiny=format_tiny("float64"))
    bound = bound + weights_rounding(target, backend, weights, x.v)
    if not np.isfinite(bound).all():  # (scores near −8e4 with every operation in bfloat16)
        raise VoidBound(f"the derived bound is not finite at these scores in "
                        f"{b.compute_dtype}")
    credit_case(request, float(bound.max()), (x.v,), backend, x.scale,
                "the comparison with float64 softmax attention")
    assert_close(
        got, ref, bound, inputs={"q": x.q, "k": x.k, "v": x.v},
        label=f"{target.name}: exact attention on {backend.id} vs float64 softmax "
              f"(causal={causal}, scale={x.scale})",
        how="softmax_attention_error_bound (docs/math.md §9) in the compute dtype of "
            f"{b.describe()} + the float64 reference's own bound",
        repro=repro or f"causal={causal}; q, k, v: the Hypothesis draws, shape {x.shape}",
    )


@pytest.mark.parametrize(("target", "backend"), GRADIENT_CASES)
@settings(max_examples=FEW)
@given(data=st.data())
def test_exact_attention_gradients_match_closed_form(target, backend, data):
    """Autograd ``∂L/∂(q, k, v)`` in float32/float16/bfloat16 against the float64 closed-form
    gradients of softmax attention within ``softmax_gradient_error_bound`` (module
    docstring)."""
    causal = data.draw(st.sampled_from(modes(target)), label="causal")
    x = seen(data.draw(_inputs(target, 8), label="x"), backend)
    assume(_half_range_ok(x, backend))
    keep_to_contract(target, t=x.q.shape[-2], d=x.q.shape[-1], dv=x.v.shape[-1])
    g = backend.seen(data.draw(qkv_sets(shape=st.just((*x.q.shape[:-1], x.v.shape[-1])),
                                        dv=1, scales=(1.0,)), label="G").q)
    q = backend.from_numpy(x.q).detach().requires_grad_(True)
    k = q if x.self_attention else backend.from_numpy(x.k).detach().requires_grad_(True)
    v = backend.from_numpy(x.v).detach().requires_grad_(True)
    inputs = (q, v) if x.self_attention else (q, k, v)
    out = attention_fn(target, causal)(q, k, v)
    got = vjp((out * backend.from_numpy(g)).sum(), inputs)
    refs = list(softmax_gradients_reference(x.q, x.k, x.v, g, causal=causal))
    b = backend.budget
    ulps = max(b.ulps["exp"], b.ulps["log"])
    kw = {"causal": causal, "self_attention": x.self_attention}
    ours = softmax_gradient_error_bound(x.q, x.k, x.v, g, u=b.u_compute, ulps=ulps,
                                        tiny=format_tiny(b.compute_dtype), **kw)
    theirs = softmax_gradient_error_bound(x.q, x.k, x.v, g, u=U64, ulps=1.0,
                                          tiny=format_tiny("float64"), **kw)
    bounds = [a + c for a, c in zip(ours, theirs, strict=True)]
    if b.u > b.u_compute:  # a backward may read the output as stored in the half type (FA-2)
        stored = stored_output_gradient_term(x.q, x.k, x.v, g, u_io=b.u, **kw)
        bounds = [a + c for a, c in zip(bounds, stored, strict=True)]
    # Scores in the thousands computed in a half type (no ``half_in_float32``): the weights'
    # derived relative error is unbounded (ρ = ∞), so nothing can be judged on this draw.
    assume(all(np.isfinite(b_).all() for b_ in bounds))
    names = "qkv"
    if x.self_attention:  # ∂L/∂q collects the query and the key paths (bound: both)
        refs, bounds, names = [refs[0] + refs[1], refs[2]], [bounds[0], bounds[2]], "qv"
    for name, grad, ref, bound in zip(names, got, refs, bounds, strict=True):
        assert_close(
            to_numpy(grad), ref, half_cast(bound, ref, backend),
            inputs={"q": x.q, "k": x.k, "v": x.v, "G": g},
            label=f"{target.name}: ∂L/∂{name} on {backend.id} vs the float64 closed form "
                  f"(causal={causal}, scale={x.scale})",
            how="softmax_gradient_error_bound (docs/math.md §9, §14) in the compute dtype + "
                "the float64 reference's own bound (+ stored_output_gradient_term on a half "
                "type: the output read back in it) + the cast back",
            repro=f"causal={causal}; q, k, v, G: the Hypothesis draws, shape {x.shape}",
        )
