"""Attention targets against the formula they declare (issue #29; docs/math.md §14, "Declared
features"): a target that declares ``features(x, seed)`` — with or without any of the forms —
has its outputs and gradients compared with a float64 evaluation of linear attention on those
features, within bounds derived for the dtype it computes in
(:mod:`kernel_verify.properties.checks.declared`). This is the reference a float32-only target
(fla's Triton kernels) otherwise lacks: its own finite differences in float32 cannot see a
gradient a few percent off, and its forms only compare it with itself.

* ``test_attention_meets_declared_features``: outputs (causal and non-causal, as the target
  supports) within :func:`~kernel_verify.properties.checks.declared.output_bound` of the exact
  formula — the mpmath recurrence (:func:`~kernel_verify.verify.references.forms.
  causal_recurrence_mp`) for causal layouts, float64 with its own bound otherwise;
* ``test_gradients_meet_declared_features``: ``∂L/∂(q, k, v)`` of ``L = Σ G⊙o`` (``G`` Gaussian)
  within :func:`~kernel_verify.properties.checks.declared.gradient_bounds` of the exact
  gradients (differentiable targets with positive weights, torch).

Backends: float64 and float32 (the compute dtype is the input dtype); half types round the
features to the half type, which the model does not cover (skipped, with that reason). Each
case runs fixed layouts (non-square, ``T`` up to 9, one of them ``2C + 1`` for a target that
declares ``chunk_sizes``) and a few drawn seeds.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from kernel_verify.properties.attention_cases import modes
from kernel_verify.properties.backends import backend_param
from kernel_verify.properties.checks.declared import (
    declared_gradient_check,
    denominator_eps_hint,
    direct_extra,
    feature_error,
    inputs,
    output_bound,
    reference_outputs,
    seen_qkv,
)
from kernel_verify.properties.strategies import seeds
from kernel_verify.properties.targets import attentions_with, none_param
from kernel_verify.verify.backends import AXIS

#: Drawn seeds per case besides the fixed layouts.
EXAMPLES = max(2, settings.default.max_examples // 8)
#: ``(B, H, T, d, d_v)`` of the fixed layouts (H ≠ T, d_v ≠ d).
LAYOUTS = ((1, 2, 5, 4, 3), (2, 1, 9, 3, 2), (1, 1, 1, 4, 2))


def declared_cases(*claims: str, torch_only: bool = False) -> list:
    """``pytest.param(target, backend)``: attention targets declaring ``features`` (and
    ``claims``) × their float64/float32 backends."""
    targets, skip = attentions_with(claims)
    if skip is not None:
        return none_param(skip, values=2)
    out = []
    for t in targets:
        if t.features is None:
            out.append(pytest.param(t, None, id=f"{t.name}-no-features", marks=pytest.mark.skip(
                reason=f"{t.name} declares no features (AttentionTarget.features): no formula "
                       "to compare with")))
            continue
        cells = [backend_param(t, backend=b, id=f"{t.name}-{b.id}") for b in AXIS
                 if t.accepts(b.library, b.dtype) and b.dtype in ("float64", "float32")
                 and (b.library == "torch" or not torch_only)]
        if not cells:
            out.append(pytest.param(t, None, id=f"{t.name}-no-float32", marks=pytest.mark.skip(
                reason=f"{t.name} declares features but no float64 or float32 "
                f"{'torch ' if torch_only else ''}backend (dtypes {list(t.dtypes)}): the "
                "comparison with the declared features is derived for those dtypes only (a "
                "half type rounds the features themselves); declare float32 too to add it")))
        out.extend(cells)
    return out or none_param("no attention target declares features", values=2)


def layouts(target) -> list[tuple[int, ...]]:
    """The fixed layouts, each moved inside the target's shape contract
    (:mod:`kernel_verify.properties.shape_contract`): ``d_v = d`` for a target declaring
    ``dv_equals_d``, ``T`` raised to the next multiple of ``length_multiple_of`` and to at least
    ``min_length`` (the target is never called outside what it declares it accepts)."""
    out = list(LAYOUTS)
    if target.chunk_sizes:
        c = min(target.chunk_sizes)
        out.append((1, 1, 2 * c + 1, 3, 2))
    return list(dict.fromkeys(_inside_contract(target, lay) for lay in out))


def _inside_contract(target, layout: tuple[int, ...]) -> tuple[int, ...]:
    b, h, t, d, dv = layout
    multiple = max(1, target.length_multiple_of)
    t = max(t, target.min_length)
    t = -(-t // multiple) * multiple
    if target.dv_equals_d:
        dv = d
    return (b, h, t, d, dv)


def _where(target, backend, layout, seed, causal) -> str:
    b, h, t, d, dv = layout
    return (f"{target.name} on {backend.id} (B={b}, H={h}, T={t}, d={d}, d_v={dv}, "
            f"causal={causal}, seed={seed})")


@pytest.mark.parametrize(("target", "backend"), declared_cases())
@settings(max_examples=EXAMPLES)
@given(seed=seeds)
def test_attention_meets_declared_features(target, backend, seed):
    """The outputs equal linear attention on the declared features (the exact formula) within
    the derived bound for the compute dtype (module docstring)."""
    u = backend.budget.u_compute
    for layout in layouts(target):
        for causal in modes(target):
            x = seen_qkv(inputs(layout, seed, target.self_attention_only), backend)
            fq, fk, ref = reference_outputs(target, x, seed, causal)
            eta = feature_error(x, fq.shape[-1], u)
            bound = output_bound(fq, fk, x.v, ref, u, eta, direct_extra(layout[3]), causal)
            t = target.to_layout
            q = backend.from_numpy(x.q)
            k = q if x.self_attention else backend.from_numpy(x.k)
            got = backend.to_numpy(t(target.attention(t(q), t(k), t(backend.from_numpy(x.v)),
                                                      causal=causal, seed=seed)))
            err = np.where(np.isfinite(got), np.abs(got - ref), np.inf)
            if not (err <= bound).all():
                i = tuple(int(j) for j in np.unravel_index(np.argmax(err - bound),
                                                           err.shape))
                raise AssertionError(
                    f"{_where(target, backend, layout, seed, causal)}: output "
                    f"{float(got[i])!r} at {i}, the declared features give {float(ref[i])!r}: "
                    f"error {err[i]:.3e} > derived bound {bound[i]:.3e} (worst error/bound "
                    f"{float(np.max(err / bound)):.3g})"
                    + denominator_eps_hint(fq, fk, x.v, got, causal, bound))


@pytest.mark.parametrize(("target", "backend"),
                         declared_cases("differentiable", "positive_weights", torch_only=True))
@settings(max_examples=EXAMPLES)
@given(seed=seeds)
def test_gradients_meet_declared_features(target, backend, seed):
    """``∂L/∂(q, k, v)`` by autograd equal the exact gradients of linear attention on the
    declared features within the derived bound for the compute dtype (module docstring)."""
    for layout in layouts(target):
        for causal in modes(target):
            checks = declared_gradient_check(target, backend, layout, seed, causal)
            for c in checks:
                assert np.isfinite(c.bound).all(), (
                    f"{_where(target, backend, layout, seed, causal)}: the derived gradient "
                    "bound is void here (weights not all positive, or ρ' > 1/2)")
                if c.ratio > 1:
                    err = np.where(np.isfinite(c.got), np.abs(c.got - c.ref), np.inf)
                    i = tuple(int(j) for j in np.unravel_index(np.argmax(err / c.bound),
                                                             err.shape))
                    raise AssertionError(
                        f"{_where(target, backend, layout, seed, causal)}: ∂L/∂{c.name} "
                        f"{float(c.got[i])!r} at {i}, the declared features give "
                        f"{float(c.ref[i])!r}: error {err[i]:.3e} > derived bound "
                        f"{c.bound[i]:.3e} (worst error/bound {c.ratio:.3g})")
