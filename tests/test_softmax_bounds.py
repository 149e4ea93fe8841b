"""The derived bound of softmax attention in low precision (kernel_verify.verify.softmax_bounds,
docs/math.md §9): it holds for real float32 / float16 / bfloat16 evaluations (NumPy, torch, an
online softmax with rescaling) over random draws that include large logits, and it is not
vacuous — somewhere the observed error is more than 1e-3 of the bound."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernel_verify.verify.softmax_bounds import (
    format_tiny,
    softmax_attention_error_bound,
    softmax_attention_reference,
    softmax_backward_weight_error,
    softmax_gradient_error_bound,
    softmax_gradients_reference,
    softmax_log_weight_error,
    weight_underflow,
)
from kernel_verify.verify.tolerance import FORMATS, budget_for, ulp

torch = pytest.importorskip("torch")

DRAWS = 160
U32 = FORMATS["float32"].u


def _draws(seed: int):
    """``(q, k, v, causal)`` float64: shapes up to (2, 12, 8), scales 0.05 … 30 (scores up to
    ~4000: large logits, where an unshifted exponential overflows float32); every tenth draw
    has values of order 1e-38 (outputs subnormal in float32 and bfloat16)."""
    rng = np.random.default_rng(seed)
    for i in range(DRAWS):
        n, d, dv = int(rng.integers(1, 13)), int(rng.integers(1, 9)), int(rng.integers(1, 4))
        scale = float(np.exp(rng.uniform(np.log(0.05), np.log(30.0))))
        q = rng.uniform(-2, 2, (2, n, d)) * scale
        k = rng.uniform(-2, 2, (2, n, d)) * scale
        if i % 4 == 0:  # aligned keys: large positive scores on the diagonal
            k = q.copy()
        v = rng.uniform(-2, 2, (2, n, dv))
        if i % 10 == 5:  # values near float32's underflow: subnormal outputs
            v = v * 1e-38
        yield q, k, v, bool(i % 2)


def _np_softmax_attention(q, k, v, causal, dtype):
    """Plain max-shifted softmax attention, every operation in NumPy ``dtype``."""
    q, k, v = (a.astype(dtype) for a in (q, k, v))
    s = (q @ np.swapaxes(k, -1, -2)) * dtype(1 / math.sqrt(q.shape[-1]))
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, dtype(-np.inf))
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return ((e @ v) / e.sum(axis=-1, keepdims=True)).astype(np.float64)


def _np_online(q, k, v, causal, dtype, block=2):
    """FlashAttention's online softmax in NumPy ``dtype``: key blocks of ``block``, a running
    maximum, the partial numerator and denominator rescaled by ``exp(m_old − m_new)``."""
    q, k, v = (a.astype(dtype) for a in (q, k, v))
    sc = dtype(1 / math.sqrt(q.shape[-1]))
    n = k.shape[-2]
    m = np.full((*q.shape[:-1], 1), -np.inf, dtype=dtype)
    num = np.zeros((*q.shape[:-1], v.shape[-1]), dtype=dtype)
    den = np.zeros((*q.shape[:-1], 1), dtype=dtype)
    rows = np.arange(q.shape[-2])[:, None]
    for start in range(0, n, block):
        kb, vb = k[..., start:start + block, :], v[..., start:start + block, :]
        s = (q @ np.swapaxes(kb, -1, -2)) * sc
        if causal:
            s = np.where(rows >= np.arange(start, start + kb.shape[-2])[None, :], s,
                         dtype(-np.inf))
        new = np.maximum(m, s.max(axis=-1, keepdims=True))
        with np.errstate(invalid="ignore"):
            alpha = np.where(np.isfinite(new), np.exp(m - new), dtype(0))
            e = np.where(np.isfinite(new), np.exp(s - new), dtype(0))
        num = num * alpha + e @ vb
        den = den * alpha + e.sum(axis=-1, keepdims=True)
        m = new
    return (num / den).astype(np.float64)


def _torch_attention(q, k, v, causal, dtype, compute):
    """torch: inputs in ``dtype``, computed in ``compute`` (softmax then the weighted sum), the
    output cast back to ``dtype``."""
    t = [torch.tensor(a, dtype=dtype).to(compute) for a in (q, k, v)]
    s = (t[0] @ t[1].transpose(-1, -2)) * (1 / math.sqrt(q.shape[-1]))
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(s, dim=-1) @ t[2]).to(dtype).double().numpy()


def _lse_attention(q, k, v, causal, dtype):
    """``exp(s − logsumexp(s)) @ v``, unnormalised weights from a log-sum-exp (the log-sum-exp
    route of the bound), every operation in torch ``dtype``."""
    t = [torch.tensor(a, dtype=dtype) for a in (q, k, v)]
    s = (t[0] @ t[1].transpose(-1, -2)) * (1 / math.sqrt(q.shape[-1]))
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return (torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True)) @ t[2]).double().numpy()


def _rounded(a, dtype):
    return torch.tensor(a, dtype=dtype).double().numpy()


EXP32 = budget_for("float32").ulps["exp"]
#: name -> (evaluate(q, k, v, causal) on the rounded inputs, input dtype, u, ulps, u_out, tiny)
EVALUATIONS = {
    "numpy-float32": (lambda q, k, v, c: _np_softmax_attention(q, k, v, c, np.float32),
                      torch.float32, U32, EXP32, 0.0, format_tiny("float32")),
    "numpy-float32-online": (lambda q, k, v, c: _np_online(q, k, v, c, np.float32),
                             torch.float32, U32, EXP32, 0.0, format_tiny("float32")),
    "numpy-float16-native": (lambda q, k, v, c: _np_softmax_attention(q, k, v, c, np.float16),
                             torch.float16, FORMATS["float16"].u, 1.0, 0.0,
                             format_tiny("float16")),
    "numpy-float16-online": (lambda q, k, v, c: _np_online(q, k, v, c, np.float16, block=3),
                             torch.float16, FORMATS["float16"].u, 1.0, 0.0,
                             format_tiny("float16")),
    "torch-float32": (lambda q, k, v, c: _torch_attention(q, k, v, c, torch.float32,
                                                          torch.float32),
                      torch.float32, U32, EXP32, 0.0, format_tiny("float32")),
    "torch-float32-logsumexp": (lambda q, k, v, c: _lse_attention(q, k, v, c, torch.float32),
                                torch.float32, U32, EXP32, 0.0, format_tiny("float32")),
    "torch-float64-logsumexp": (lambda q, k, v, c: _lse_attention(q, k, v, c, torch.float64),
                                torch.float64, 2.0**-53, 1.0, 0.0, format_tiny("float64")),
    "torch-float16-in-float32": (lambda q, k, v, c: _torch_attention(q, k, v, c, torch.float16,
                                                                     torch.float32),
                                 torch.float16, U32, EXP32, FORMATS["float16"].u,
                                 format_tiny("float32")),
    "torch-bfloat16-in-float32": (lambda q, k, v, c: _torch_attention(q, k, v, c,
                                                                      torch.bfloat16,
                                                                      torch.float32),
                                  torch.bfloat16, U32, EXP32, FORMATS["bfloat16"].u,
                                  format_tiny("float32")),
}


@pytest.mark.parametrize("name", list(EVALUATIONS))
def test_bound_holds_and_is_not_vacuous(name):
    """Every observed error within the bound; the largest observed/bound ratio over the draws
    above 1e-3 (the bound is not vacuous)."""
    fn, dtype, u, ulps, u_out, tiny = EVALUATIONS[name]
    worst = 0.0
    seen_large = False
    for q, k, v, causal in _draws(17):
        q, k, v = (_rounded(a, dtype) for a in (q, k, v))
        if dtype == torch.float16 and np.abs(q).max() * np.abs(k).max() * q.shape[-1] > 6e4:
            continue  # scores beyond float16's range: not an input float16 attention can take
        ref, _ = softmax_attention_reference(q, k, v, causal=causal)
        got = fn(q, k, v, causal)
        bound = softmax_attention_error_bound(
            q, k, v, causal=causal, u=u, ulps=ulps, u_out=u_out, tiny=tiny,
            tiny_out=format_tiny(str(dtype).removeprefix("torch.")))
        ref_err = softmax_attention_error_bound(q, k, v, causal=causal, u=2.0**-53, ulps=1.0)
        err = np.abs(got - ref)
        assert np.isfinite(got).all(), f"{name}: non-finite output"
        assert (err <= bound + ref_err).all(), (
            f"{name}: error {err.max():.3g} beyond the bound (ratio "
            f"{(err / (bound + ref_err)).max():.3g}) at shape {q.shape}, causal={causal}")
        worst = max(worst, float((err / bound).max()))
        seen_large |= bool(np.abs(q @ np.swapaxes(k, -1, -2)).max() / math.sqrt(q.shape[-1])
                           > 100)
    assert seen_large, "no draw reached scores above 100 (large logits)"
    assert worst > 1e-3, f"{name}: the bound is vacuous here: largest error/bound {worst:.3g}"


def test_bound_catches_scores_rounded_to_bfloat16():
    """A float32 evaluation whose scores are rounded to bfloat16 leaves the float32 bound on
    some draw (the defect the mutant ``exact_lowp_scores_bf16`` plants)."""
    broke = 0
    for q, k, v, causal in _draws(18):
        q, k, v = (_rounded(a, torch.float32) for a in (q, k, v))
        t = [torch.tensor(a, dtype=torch.float32) for a in (q, k, v)]
        s = ((t[0] @ t[1].transpose(-1, -2)) / math.sqrt(q.shape[-1])).bfloat16().float()
        if causal:
            s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
        got = (torch.softmax(s, -1) @ t[2]).double().numpy()
        ref, _ = softmax_attention_reference(q, k, v, causal=causal)
        bound = softmax_attention_error_bound(q, k, v, causal=causal, u=U32, ulps=EXP32)
        broke += int((np.abs(got - ref) > bound).any())
    assert broke > DRAWS // 4, f"only {broke} of {DRAWS} draws see scores rounded to bfloat16"


def test_backward_weight_error_covers_float32_weights():
    """The weights a float32 backward uses — torch's softmax output, or ``exp(s − L)`` from a
    float32 log-sum-exp — are within ``ρ`` of the exact ones (relative), besides the underflow
    ``ω`` (absolute), on every draw."""
    for q, k, _, causal in _draws(19):
        q, k = (_rounded(a, torch.float32) for a in (q, k))
        _, p = softmax_attention_reference(q, k, k[..., :1], causal=causal)
        rho = softmax_backward_weight_error(q, k, causal=causal, u=U32, ulps=EXP32)
        t = [torch.tensor(a, dtype=torch.float32) for a in (q, k)]
        s = (t[0] @ t[1].transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
        lse = torch.logsumexp(s, -1, keepdim=True)
        for got in (torch.softmax(s, -1), torch.exp(s - lse)):
            g = got.double().numpy()
            err = np.abs(g - p)
            omega = weight_underflow(k.shape[-2], U32, format_tiny("float32"))
            assert (err <= rho * p + omega).all(), (
                f"weights off by {(err / np.where(p > 0, p, 1)).max():.3g} relative, "
                f"ρ = {rho.max():.3g}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16],
                         ids=["float32", "float16", "bfloat16"])
def test_gradient_bound_holds_for_torch_autograd(dtype):
    """torch autograd through softmax attention computed in float32 (half inputs upcast, the
    gradients cast back): ∂L/∂(q, k, v) within :func:`softmax_gradient_error_bound` plus the
    same bound at u₆₄ (the float64 reference) and, for a half type, half an ulp of it at
    ``|ref| + bound``; the bound is not vacuous; a backward with ∂L/∂q × 1.01 leaves it."""
    worst, scaled = 0.0, 0
    fmt = FORMATS[str(dtype).removeprefix("torch.")]  # its name: the dtype's
    for i, (q, k, v, causal) in enumerate(_draws(20)):
        if i % 4:  # a quarter of the draws: autograd per draw is the slow part
            continue
        if dtype == torch.float16 and np.abs(q).max() * np.abs(k).max() * q.shape[-1] > 6e4:
            continue
        q, k, v = (_rounded(a, dtype) for a in (q, k, v))
        shape = (*v.shape[:-2], q.shape[-2], v.shape[-1])
        g = _rounded(np.random.default_rng(i).standard_normal(shape), dtype)
        t = [torch.tensor(a, dtype=dtype, requires_grad=True) for a in (q, k, v)]
        w = [a.float() for a in t]
        s = (w[0] @ w[1].transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
        o = (torch.softmax(s, -1) @ w[2]).to(dtype)
        got = torch.autograd.grad((o * torch.tensor(g, dtype=dtype)).sum(), t)
        refs = softmax_gradients_reference(q, k, v, g, causal=causal)
        ours = softmax_gradient_error_bound(q, k, v, g, causal=causal, u=U32, ulps=EXP32)
        theirs = softmax_gradient_error_bound(q, k, v, g, causal=causal, u=2.0**-53, ulps=1.0,
                                              tiny=2.0**-1022)
        for name, a, r, b1, b2 in zip("qkv", got, refs, ours, theirs, strict=True):
            bound = b1 + b2
            if dtype != torch.float32:  # the cast back: half an ulp, subnormals included
                bound = bound + 0.5 * ulp(np.abs(r) + bound, fmt.name)
            err = np.abs(a.double().numpy() - r)
            assert (err <= bound).all(), (
                f"∂L/∂{name}: error {err.max():.3g} beyond the bound (ratio "
                f"{(err / bound).max():.3g}), shape {q.shape}, causal={causal}")
            worst = max(worst, float((err / bound).max()))
            if name == "q":
                scaled += int((np.abs(1.01 * a.double().numpy() - r) > bound).any())
    assert worst > 1e-3, f"the gradient bound is vacuous here: largest error/bound {worst:.3g}"
    assert scaled > 0, "∂L/∂q × 1.01 never leaves the bound"


def test_log_weight_error_grows_with_the_scores():
    """τ is a bound on score errors: it grows with ‖q‖‖k‖ and falls with u."""
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    small = softmax_log_weight_error(q, k, causal=False, u=U32, ulps=1.0)
    large = softmax_log_weight_error(10 * q, 10 * k, causal=False, u=U32, ulps=1.0)
    finer = softmax_log_weight_error(q, k, causal=False, u=2.0**-53, ulps=1.0)
    assert (large > small).all() and (finer < small).all()


def test_reference_gradients_match_finite_differences():
    """The closed-form gradients equal central differences of the float64 reference."""
    rng = np.random.default_rng(4)
    q, k, v, g = (rng.standard_normal((3, 4)) for _ in range(4))
    for causal in (False, True):
        dq, dk, dv = softmax_gradients_reference(q, k, v, g, causal=causal)
        for name, x, grad in (("q", q, dq), ("k", k, dk), ("v", v, dv)):
            h = 1e-6
            num = np.zeros_like(x)
            for idx in np.ndindex(*x.shape):
                plus, minus = x.copy(), x.copy()
                plus[idx] += h
                minus[idx] -= h
                args = {"q": q, "k": k, "v": v}
                args[name] = plus
                fp = (softmax_attention_reference(**args, causal=causal)[0] * g).sum()
                args[name] = minus
                fm = (softmax_attention_reference(**args, causal=causal)[0] * g).sum()
                num[idx] = (fp - fm) / (2 * h)
            assert np.allclose(num, grad, atol=1e-7, rtol=1e-6), (name, causal)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"u": 0.0}, "u must"), ({"ulps": -1.0}, "ulps must"), ({"scale": 0.0}, "scale must"),
])
def test_bad_arguments_are_named(kwargs, match):
    q = np.ones((2, 3))
    args = {"u": U32, "ulps": 1.0, **kwargs}
    with pytest.raises(ValueError, match=match):
        softmax_attention_error_bound(q, q, q, causal=False, **args)


def test_void_bound_raises():
    """``2K·u ≥ 1`` (bfloat16 arithmetic over 100 keys): no bound, a ValueError."""
    q = np.ones((100, 2))
    with pytest.raises(ValueError, match="void"):
        softmax_attention_error_bound(q, q, q, causal=False, u=FORMATS["bfloat16"].u, ulps=1.0)


def test_logsumexp_weights_at_large_scores_are_within_the_bound():
    """Two keys at a score of 900 (``q = k = 30``, ``d = 1``), equal values:
    ``exp(s − logsumexp(s)) @ v`` in float64 errs by 5.5e-14, the rounding of ``L̂`` at
    ``|L| ≈ 900``, which the normalised route alone (1.9e-15 here) did not cover (a new user's
    correct target failed on it)."""
    q = np.full((1, 1, 2, 1), 30.0)
    v = np.ones((1, 1, 2, 1))  # equal values: the normalised route's centred term is 0
    got = _lse_attention(q, q, v, False, torch.float64)
    ref, _ = softmax_attention_reference(q, q, v, causal=False)
    bound = softmax_attention_error_bound(q, q, v, causal=False, u=2.0**-53, ulps=1.0,
                                          tiny=format_tiny("float64"))
    assert np.abs(got - ref).max() > 1.9e-15  # beyond the normalised route's bound
    assert (np.abs(got - ref) <= bound).all()


@pytest.mark.parametrize("t", [1, 2, 8, 33, 41])
def test_bound_is_nonnegative_wherever_it_is_not_void(t):
    """bfloat16 arithmetic throughout: ``γ_K < 1`` up to ``T = 41`` keys, and the bound is
    ``≥ 0`` there; at ``T = 63`` the factor ``2γ_K/(1 − γ_K)`` was negative (a correct SDPA
    failed on a negative bound) and now the bound is void."""
    rng = np.random.default_rng(t)
    q, k, v = (rng.uniform(-1, 1, (1, 1, t, 3)) for _ in range(3))
    bound = softmax_attention_error_bound(q, k, v, causal=False, u=FORMATS["bfloat16"].u,
                                          ulps=1.0, tiny=format_tiny("bfloat16"))
    assert np.isfinite(bound).all() and (bound >= 0).all()


@pytest.mark.parametrize("t", [42, 63, 65])
def test_bound_is_void_once_gamma_k_reaches_one(t):
    q = np.ones((1, 1, t, 2))
    with pytest.raises(ValueError, match="void"):
        softmax_attention_error_bound(q, q, q, causal=False, u=FORMATS["bfloat16"].u, ulps=1.0)


def test_gradient_bound_is_inf_not_nan_where_void():
    """Scores of 900 rounded to float16 (u = 2⁻¹¹) make the weights' relative error unbounded;
    with a zero cotangent the chain multiplies ∞ by 0: the bound says void (∞), never NaN (the
    property then discards the draw; a NaN bound made a correct SDPA fail)."""
    q = np.full((1, 1, 1, 1), 30.0)
    z = np.zeros((1, 1, 1, 1))
    bq, bk, bv = softmax_gradient_error_bound(q, q.copy(), z, z, causal=False, u=2.0**-11,
                                              ulps=1.0, tiny=2.0**-14)
    assert not np.isnan(bq).any() and not np.isnan(bk).any()
    assert np.isinf(bq).all() and np.isinf(bk).all()
    assert np.isfinite(bv).all()  # ∂L/∂v does not go through the scores' error
