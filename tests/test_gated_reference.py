"""The exact gated reference (verify/references/gated.py, docs/math.md §16): its three routes
agree, decay 1 is plain linear attention, decay 0 is each token's own value, long runs of
strong decay stay exact, and the derived bounds (verify/gated_bounds.py) hold for a float32
evaluation and fail for a defect.

Tolerances: every route rounds its result once to float64 from ≥ 40 digits, so two routes agree
within 1 ulp of float64 per entry (``4u·|x|`` + the smallest normal, a margin of 2); the plain
reference (verify/references/forms.py) is the same computation at g = 0 (``exp(0) = 1``
exactly), equal bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.verify.gated_bounds import (
    gated_forms_error_bound,
    gated_state_error_bound,
    smallest_normal,
)
from kernel_verify.verify.references.forms import causal_recurrence_mp
from kernel_verify.verify.references.gated import (
    gate_kind,
    gated_chunked_mp,
    gated_parallel_mp,
    gated_recurrence_mp,
)
from kernel_verify.verify.tolerance import U64


def _inputs(t=5, m=3, dv=2, lead=(2,), seed=0, kind="scalar", positive=False, strong=False):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((*lead, t, m)), rng.standard_normal((*lead, t, m))
    if positive:
        q, k = np.exp(0.3 * q), np.exp(0.3 * k)
    v = rng.standard_normal((*lead, t, dv))
    shape = (*lead, t) if kind == "scalar" else (*lead, t, m)
    g = -rng.uniform(0, 25 if strong else 1.5, shape)
    return q, k, v, g


def _close(a, b):
    return np.all(np.abs(a - b) <= 4 * U64 * np.abs(b) + 1e-300)


@pytest.mark.parametrize("kind", ["scalar", "key_dim"])
@pytest.mark.parametrize("normalise", [False, True])
@pytest.mark.parametrize(("t", "chunk"), [(1, 1), (5, 2), (6, 3), (7, 7)])
def test_the_three_routes_agree(kind, normalise, t, chunk):
    q, k, v, g = _inputs(t=t, kind=kind, positive=normalise, seed=t + chunk)
    rng = np.random.default_rng(9)
    s0 = (rng.standard_normal((2, 3, 2)), np.abs(rng.standard_normal((2, 3))))
    rec, (s1, z1) = gated_recurrence_mp(q, k, v, g, normalise=normalise, initial_state=s0)
    par, (s2, z2) = gated_parallel_mp(q, k, v, g, normalise=normalise, initial_state=s0)
    chk, (s3, z3) = gated_chunked_mp(q, k, v, g, chunk_size=chunk, normalise=normalise,
                                     initial_state=s0)
    for other in (par, chk):
        assert _close(other, rec)
    for s, z in ((s2, z2), (s3, z3)):
        assert _close(s, s1) and _close(z, z1)


@pytest.mark.parametrize("normalise", [False, True])
def test_decay_one_is_plain_linear_attention(normalise):
    q, k, v, _ = _inputs(t=6, positive=True)
    g = np.zeros(q.shape[:-1])
    s0 = (np.ones((2, 3, 2)), np.ones((2, 3)))
    out, (s, z) = gated_recurrence_mp(q, k, v, g, normalise=normalise, initial_state=s0)
    plain, (sp, zp) = causal_recurrence_mp(q, k, v, s0)
    if normalise:
        assert np.array_equal(out, plain)
    else:  # the plain reference normalises: compare the numerator φ(q)ᵀS_t
        _, (s_t, _) = causal_recurrence_mp(q, k, v, s0)
        assert np.array_equal(s, s_t)
        assert _close(out / np.einsum("...tf,...tf->...t", q, np.cumsum(k, -2) + 1.0)[..., None],
                      plain)
    assert np.array_equal(s, sp) and np.array_equal(z, zp)


@pytest.mark.parametrize("kind", ["scalar", "key_dim"])
def test_decay_zero_leaves_each_token_its_own_value(kind):
    q, k, v, g = _inputs(t=5, kind=kind)
    g = np.full(g.shape, -np.inf)
    s0 = (np.ones((2, 3, 2)), np.ones((2, 3)))
    out, (s, _) = gated_recurrence_mp(q, k, v, g, initial_state=s0)
    want = np.einsum("...tf,...tf->...t", q, k)[..., None] * v
    # want in float64: m + 1 roundings of Σ_f |q_f k_f| |v| (γ_4 < 5u)
    slack = 5 * U64 * np.einsum("...tf,...tf->...t", np.abs(q), np.abs(k))[..., None] * abs(v)
    assert np.all(np.abs(out - want) <= slack)
    assert _close(s, k[..., -1, :, None] * v[..., -1, None, :])
    par, _ = gated_parallel_mp(q, k, v, g, initial_state=s0)
    assert np.all(np.abs(par - want) <= slack)
    normed, _ = gated_recurrence_mp(np.abs(q) + 0.1, np.abs(k) + 0.1, v, g, normalise=True)
    assert _close(normed, v)


def test_long_runs_of_strong_decay_stay_exact():
    """40 tokens at g = −30: ``e^(G_t)`` is ``e^(−1200)``, below float64's range, but every
    decay the routes use is an exact sum's exponential: the last output is the last two
    tokens' contribution (decay e^(−30) between them), not 0 or NaN."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 40, 2)) for _ in range(3))
    g = np.full((1, 40), -30.0)
    out, _ = gated_recurrence_mp(q, k, v, g)
    par, _ = gated_parallel_mp(q, k, v, g)
    chk, _ = gated_chunked_mp(q, k, v, g, chunk_size=16)
    want = q[0, -1] @ k[0, -1] * v[0, -1] + np.exp(-30.0) * (q[0, -1] @ k[0, -2]) * v[0, -2]
    assert np.allclose(out[0, -1], want, rtol=1e-12, atol=0)
    assert _close(par, out) and _close(chk, out)


def test_bad_input_is_named():
    q, k, v, g = _inputs()
    with pytest.raises(ValueError, match="log_gates must have shape"):
        gated_recurrence_mp(q, k, v, g[..., :-1])
    with pytest.raises(ValueError, match="≤ 0"):
        gated_recurrence_mp(q, k, v, -g)
    with pytest.raises(ValueError, match="chunk_size"):
        gated_chunked_mp(q, k, v, g, chunk_size=0)
    assert gate_kind(k, g) == "scalar"


def _float32_recurrence(q, k, v, g, normalise):
    """The recurrence in float32 with linear-space per-step decays (one evaluation the bound
    covers)."""
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    a = np.exp(g.astype(np.float32))
    if a.ndim == q.ndim - 1:
        a = np.broadcast_to(a[..., None], q.shape)
    s = np.zeros((*q.shape[:-2], q.shape[-1], v.shape[-1]), np.float32)
    z = np.zeros((*q.shape[:-2], q.shape[-1]), np.float32)
    outs = []
    for t in range(q.shape[-2]):
        s = a[..., t, :, None] * s + k[..., t, :, None] * v[..., t, None, :]
        z = a[..., t, :] * z + k[..., t, :]
        o = np.einsum("...f,...fc->...c", q[..., t, :], s)
        if normalise:
            o = o / np.einsum("...f,...f->...", q[..., t, :], z)[..., None]
        outs.append(o)
    return np.stack(outs, -2).astype(np.float64), s.astype(np.float64)


def _float32_log_space(q, k, v, g, half_cumsum=False):
    """The parallel form in float32 from global cumulative log-gates (optionally summed in
    float16: the defect the bound must reject)."""
    g32 = g.astype(np.float16 if half_cumsum else np.float32)
    cum = np.cumsum(g32, axis=-1).astype(np.float32)
    n = q.shape[-2]
    diff = cum[..., :, None] - cum[..., None, :]
    dec = np.where(np.tril(np.ones((n, n), bool)), np.exp(np.minimum(diff, 0)), 0)
    scores = (q.astype(np.float32) @ np.swapaxes(k.astype(np.float32), -1, -2)) * dec
    return (scores @ v.astype(np.float32)).astype(np.float64)


@pytest.mark.parametrize("kind", ["scalar", "key_dim"])
@pytest.mark.parametrize("normalise", [False, True])
@pytest.mark.parametrize("strong", [False, True])
def test_the_derived_bound_holds_for_float32_evaluations(kind, normalise, strong):
    u, c_exp = 2.0**-24, 4
    q, k, v, g = _inputs(t=12, m=4, dv=3, kind=kind, positive=normalise, strong=strong, seed=5)
    q, k, v, g = (x.astype(np.float32).astype(np.float64) for x in (q, k, v, g))
    ref, (s_ref, _) = gated_recurrence_mp(q, k, v, g, normalise=normalise)
    bound = gated_forms_error_bound(q, k, v, g, u=u, exp_ulps=c_exp,
                                    tiny=smallest_normal("float32"), normalise=normalise)
    out, s = _float32_recurrence(q, k, v, g, normalise)
    assert np.all(np.abs(out - ref) <= bound)
    s_b, _ = gated_state_error_bound(k, v, g, u=u, exp_ulps=c_exp,
                                     tiny=smallest_normal("float32"))
    assert np.all(np.abs(s - s_ref) <= s_b)
    if kind == "scalar" and not normalise:
        assert np.all(np.abs(_float32_log_space(q, k, v, g) - ref) <= bound)


def test_the_bound_rejects_a_half_precision_cumulative_log_gate():
    """Strong decays summed in float16 move a decay near the diagonal by up to ~10 %: far
    beyond the float32 bound; the float32 sum of the same gates is within it."""
    u, c_exp = 2.0**-24, 4
    q, k, v, g = _inputs(t=12, m=4, dv=3, strong=True, seed=6)
    q, k, v, g = (x.astype(np.float32).astype(np.float64) for x in (q, k, v, g))
    ref, _ = gated_recurrence_mp(q, k, v, g)
    bound = gated_forms_error_bound(q, k, v, g, u=u, exp_ulps=c_exp,
                                    tiny=smallest_normal("float32"))
    assert np.all(np.abs(_float32_log_space(q, k, v, g) - ref) <= bound)
    assert np.any(np.abs(_float32_log_space(q, k, v, g, half_cumsum=True) - ref) > bound)
