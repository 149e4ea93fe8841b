"""A third-party feature map that computes in float16 itself is judged by the half type's own
rounding, not by the project's upcast-then-round-once budget.

Found by running ``kernel-verify check`` on a plain torch FAVOR+ map
``exp(x Wᵀ − ‖x‖²/2)/√m`` written the way most torch code is (every operation in the input's
dtype): in float16 it was 1.35× over the upcasting budget at x = 3.5e-4 (three roundings to
float16 where the budget allowed one), a false failure of correct code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kernel_verify import FeatureMapTarget  # noqa: E402
from kernel_verify.properties.checks.reference import check_features  # noqa: E402
from kernel_verify.verify.backends import get_backend  # noqa: E402
from kernel_verify.verify.tolerance import budget_for, native_budget_for  # noqa: E402

FP16 = get_backend("torch:cpu-float16")


def _draw(rng, d, m, config):
    return {"W": rng.standard_normal((m, d))}


def _favor(scale: float):
    def fn(x, p, config):  # every operation in x's dtype, as third-party code writes it
        w = p["W"].to(x.dtype)
        return scale * torch.exp(x @ w.T - (x * x).sum(-1, keepdim=True) / 2) / math.sqrt(len(w))
    return fn


def _target(name: str, scale: float) -> FeatureMapTarget:
    return FeatureMapTarget(name, "softmax", frozenset({"unbiased", "positive"}), draw=_draw,
                            torch_fn=_favor(scale), formula="softmax_positive")


# the input that showed the false failure (d = 1, m = 3): φ ≈ 1/√3 = 0.577
X = np.array([[0.00034546852111816]])
PARAMS = {"W": np.array([[1.0], [-0.7], [0.3]])}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_native_budget_dominates_the_upcast_budget(dtype):
    native, upcast = native_budget_for(dtype), budget_for(dtype)
    assert native.u_compute >= upcast.u_compute
    assert native.output_round >= upcast.output_round
    assert all(native.ulps[f] * native.u_compute >= upcast.ulps[f] * upcast.u_compute
               for f in native.ulps)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_native_budget_is_the_budget_where_nothing_is_upcast(dtype):
    assert native_budget_for(dtype) == budget_for(dtype)


def test_correct_map_computing_in_float16_passes():
    check_features(_target("favor_fp16", 1.0), X, PARAMS, FP16, hypothesis=False)


def test_a_two_percent_scale_error_in_float16_still_fails():
    # 2 % is ≈ 40 float16 ulps at 0.577 (ulp 2^-11): far outside a few roundings
    with pytest.raises(AssertionError, match="FAILED"):
        check_features(_target("favor_fp16_scaled", 1.02), X, PARAMS, FP16, hypothesis=False)


# ------------------------------------------------------------------ attention targets
def _attention(claims: frozenset[str]):
    from kernel_verify import AttentionTarget

    def exact(q, k, v, *, causal, seed=0, m=None):
        s = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
        if causal:
            s = np.where(np.tri(s.shape[-2], s.shape[-1], dtype=bool), s, -np.inf)
        w = np.exp(s - s.max(-1, keepdims=True))
        return (w / w.sum(-1, keepdims=True)) @ v

    return AttentionTarget("exact", exact, claims)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_types_without_the_claim_get_the_native_budget(dtype):
    from kernel_verify.properties.attention_cases import for_target
    from kernel_verify.verify.backends import get_backend

    b = get_backend(f"torch:cpu-{dtype}")
    plain = _attention(frozenset({"noncausal"}))
    claimed = _attention(frozenset({"noncausal", "half_in_float32"}))
    assert for_target(plain, b).budget == native_budget_for(dtype)
    assert for_target(claimed, b).budget == budget_for(dtype)
    assert for_target(plain, get_backend("torch:cpu-float32")).budget == budget_for("float32")


def test_a_void_half_bound_is_not_credited_rather_than_passed():
    from kernel_verify.properties.attention_cases import for_target, output_error_bound
    from kernel_verify.properties.strategies import QKV
    from kernel_verify.verify.backends import get_backend

    b = for_target(_attention(frozenset({"noncausal"})), get_backend("torch:cpu-bfloat16"))
    x = np.ones((1, 1, 2, 2))
    with pytest.raises(pytest.skip.Exception, match=r"not credited.*half_in_float32"):
        output_error_bound(QKV(x, x, x, 1.0), b)


def test_an_exact_attention_claiming_convergence_is_at_its_rounding_floor():
    """An exact softmax attention has nothing left to halve as m grows: without the floor it
    failed every trial; a biased estimator's error is far above the floor."""
    from kernel_verify.properties.attention_cases import rounding_floor
    from kernel_verify.properties.checks.convergence import convergence_failures
    from kernel_verify.verify.backends import get_backend

    target = _attention(frozenset({"noncausal", "approximates_softmax"}))
    b = get_backend("numpy-float64")
    assert convergence_failures(target, 0, 2, convert=b.from_numpy) == 40
    assert convergence_failures(target, 0, 2, convert=b.from_numpy, floor=rounding_floor(b)) == 0


# ------------------------------------------------------------ intermediates in the subnormals
def _taylor2(scale: float):
    def fn(x, p, config):  # [1, z, z_i²/√2, z_i z_j], every intermediate in x's dtype
        d = x.shape[-1]
        z = x * d ** -0.25
        i, j = torch.triu_indices(d, d, offset=1)
        return torch.cat([torch.ones_like(z[..., :1]), z, z * z / math.sqrt(2) * scale,
                          z[..., i] * z[..., j]], dim=-1)
    return fn


def _taylor_target(name: str, scale: float) -> FeatureMapTarget:
    from kernel_verify.impls.descriptor import no_params

    return FeatureMapTarget(name, "taylor", frozenset({"deterministic"}), m=4,
                            config={"order": 2}, draw=no_params, torch_fn=_taylor2(scale),
                            formula="taylor2_compressed")


def test_products_rounded_twice_in_the_subnormals_pass():
    """fla's ``TaylorFeatureMap`` in float16 at x = 3.75e-4 (d = 1): z² ≈ 1.4e-7 and z²/√2 are
    both subnormal, rounded twice (error 4.0e-8 against 3.1e-8 without the underflow term)."""
    from kernel_verify.properties.checks.reference import native_underflow

    assert native_underflow("float16") == 2.0 ** -14
    x = np.array([[0.00037503242492676]])
    check_features(_taylor_target("taylor_fp16", 1.0), x, {}, FP16, hypothesis=False)


def test_the_underflow_term_leaves_a_one_percent_error_visible():
    # z²/√2 ≈ 0.35 at x = 0.84 (d = 1): 1 % is ≈ 7 float16 ulps (2^-12 spacing at 0.35)
    with pytest.raises(AssertionError, match="FAILED"):
        check_features(_taylor_target("taylor_fp16_scaled", 1.01), np.array([[0.84]]), {},
                       FP16, hypothesis=False)
