"""Linear-attention identities (docs/math.md §9) on every backend, with derived rounding bounds.

* non-causal ``D̂⁻¹φ(Q)(φ(K)ᵀV)`` equals ``row-normalise(φ(Q)φ(K)ᵀ)·V``;
* causal (chunked prefix sums, any chunk size) equals the masked quadratic form;
* the stable log-space path equals the plain path;
* exact softmax attention: causal row i only sees keys ≤ i, rows are convex combinations.

Bounds come from :mod:`kernel_verify.verify.attention_bounds` (γ_N·Σ|terms|, derivation there);
comparing two implementations, the budget is the sum of both implementations' bounds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernel_verify.impls.attention import feature_map_attention, map_features
from kernel_verify.impls.numpy import attention as np_att
from kernel_verify.impls.registry import all_maps, get
from kernel_verify.impls.torch import attention as torch_att
from kernel_verify.properties.backends import backend_axis, to_numpy
from kernel_verify.verify.attention_bounds import gamma, linear_attention_error_bound
from kernel_verify.verify.tolerance import U64

POSITIVE_MAPS = [
    m.name for m in all_maps(claims=["positive", "log_features"]) if m.matrix in (None, "iid")
]
SIGNED_MAPS = ["softmax_trig[iid]", "rff_pairs[iid]", "rff_phase[orthogonal]"]


def _attention(backend):
    return np_att if backend.library == "numpy" else torch_att


def _quadratic(phi_q, phi_k, v, causal):
    scores = phi_q @ np.swapaxes(phi_k, -1, -2)
    if causal:
        scores = np.tril(scores)
    return (scores / scores.sum(axis=-1, keepdims=True)) @ v


def _features(name, seed, n, d, m, scale):
    entry = get(name)
    rng = np.random.default_rng(seed)
    m = max(m, entry.min_m)
    params = entry.draw(rng, d, m, entry.config)
    q, k = (scale * rng.standard_normal((2, n, d)) for _ in range(2))
    v = rng.standard_normal((2, n, 3))
    return map_features(entry, q, params), map_features(entry, k, params), v


shapes = st.tuples(
    st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 6), st.integers(1, 12)
)


@pytest.mark.parametrize("backend", backend_axis(("float64",)))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", POSITIVE_MAPS + SIGNED_MAPS)
@given(shape=shapes, chunk=st.integers(1, 50))
def test_linear_attention_equals_quadratic_form(backend, causal, name, shape, chunk):
    seed, n, d, m = shape
    phi_q, phi_k, v = _features(name, seed, n, d, m, 0.5)
    expected = _quadratic(phi_q, phi_k, v, causal)
    policy = "raise" if name in POSITIVE_MAPS else "allow"
    bound = 2 * linear_attention_error_bound(phi_q, phi_k, v, causal=causal, u=U64)
    if not np.all(np.isfinite(bound)):
        return  # denominator sign not decidable in float64 at these points: identity undefined
    att = _attention(backend)
    got = att.linear_attention(
        *(backend.from_numpy(a) for a in (phi_q, phi_k, v)),
        causal=causal, chunk_size=chunk, zero_denominator=policy,
    )
    err = np.abs(to_numpy(got) - expected)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert np.all(err <= bound), (
        f"{name} {backend} causal={causal} chunk={chunk}: |err| {err[worst]:.3e} > bound "
        f"{bound[worst]:.3e} at {worst} (bound: 2·γ_(n+m+2)(A+|out|B)/(|den|−γB) + u|out|)"
    )


@pytest.mark.parametrize("backend", backend_axis(("float64",)))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", POSITIVE_MAPS)
@given(shape=shapes, chunk=st.integers(1, 50))
def test_log_space_path_equals_plain_path(backend, causal, name, shape, chunk):
    """Bound for the log path (float64): every logit (a sum of at most 3 log-features plus a
    logsumexp over ≤ max(n, m) terms) carries an absolute error ≤ δ = γ_(n+m+6)·(Z + 1) with
    Z = max|log φ(q)| + max|log φ(k)| + log(n·m); the softmax weights then have relative errors
    ≤ e^(2δ) − 1 and the output, a convex combination of values, moves by at most
    (e^(4δ) − 1)·max|v|. Add the plain path's own bound."""
    seed, n, d, m = shape
    entry = get(name)
    rng = np.random.default_rng(seed)
    m = max(m, entry.min_m)
    params = entry.draw(rng, d, m, entry.config)
    q, k = (0.5 * rng.standard_normal((2, n, d)) for _ in range(2))
    v = rng.standard_normal((2, n, 3))
    lq = map_features(entry, q, params, log=True)
    lk = map_features(entry, k, params, log=True)
    phi_q, phi_k = np.exp(lq), np.exp(lk)
    expected = _quadratic(phi_q, phi_k, v, causal)
    z = np.abs(lq).max() + np.abs(lk).max() + np.log(n * m)
    delta = gamma(n + m + 6, U64) * (z + 1)
    bound = (np.expm1(4 * delta) * np.abs(v).max()) + linear_attention_error_bound(
        phi_q, phi_k, v, causal=causal, u=U64
    )
    got = _attention(backend).log_linear_attention(
        *(backend.from_numpy(a) for a in (lq, lk, v)), causal=causal, chunk_size=chunk
    )
    err = np.abs(to_numpy(got) - expected)
    assert np.all(err <= bound), f"{name}: max err {err.max():.3e}, bound {bound.min():.3e}"


@pytest.mark.parametrize("backend", backend_axis(("float64",)))
@given(shape=shapes)
def test_causal_softmax_attention_sees_only_the_past(backend, shape):
    seed, n, d, _ = shape
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((1, n, d)) for _ in range(3))
    att = _attention(backend)
    out = to_numpy(att.softmax_attention(*(backend.from_numpy(a) for a in (q, k, v)),
                                         causal=True))
    k2, v2 = k.copy(), v.copy()
    cut = n // 2
    k2[:, cut + 1 :] += 3.0
    v2[:, cut + 1 :] -= 5.0
    out2 = to_numpy(att.softmax_attention(*(backend.from_numpy(a) for a in (q, k2, v2)),
                                          causal=True))
    # Rows 0..cut read exactly the same keys and values: the computations are identical.
    np.testing.assert_array_equal(out[:, : cut + 1], out2[:, : cut + 1])
    # Row 0 attends to key 0 only.
    np.testing.assert_allclose(out[:, 0], v[:, 0], rtol=0, atol=4 * U64 * np.abs(v[:, 0]).max())
    # Every row is a convex combination of values (up to rounding of the weights).
    lo, hi = v.min(axis=1, keepdims=True), v.max(axis=1, keepdims=True)
    slack = gamma(n + 2, U64) * np.abs(v).max()
    assert np.all(out >= lo - slack) and np.all(out <= hi + slack)


@pytest.mark.parametrize("causal", [False, True])
def test_empty_sequence_gives_empty_result(causal):
    for att, mk in ((np_att, np.zeros), (torch_att, lambda s: torch.zeros(s, dtype=torch.float64))):
        assert att.softmax_attention(mk((2, 0, 4)), mk((2, 0, 4)), mk((2, 0, 3)),
                                     causal=causal).shape == (2, 0, 3)
        assert att.linear_attention(mk((2, 0, 4)), mk((2, 0, 4)), mk((2, 0, 3)),
                                    causal=causal).shape == (2, 0, 3)
        assert att.log_linear_attention(mk((2, 0, 4)), mk((2, 0, 4)), mk((2, 0, 3)),
                                        causal=causal).shape == (2, 0, 3)


def test_signed_features_with_nonpositive_denominator_are_refused():
    phi = np.array([[1.0, -1.0], [-1.0, 1.0]])
    v = np.ones((2, 1))
    with pytest.raises(ValueError, match="denominator is <= 0"):
        np_att.linear_attention(phi, phi[::-1].copy(), v)
    with pytest.raises(ValueError, match="denominator is <= 0"):
        torch_att.linear_attention(torch.tensor(phi), torch.tensor(phi[::-1].copy()),
                                   torch.tensor(v))


def test_relu_zero_denominator_guard_gives_zero_rows():
    phi_q = np.array([[0.0, 0.0], [1.0, 0.5]])
    phi_k = np.array([[1.0, 0.0], [0.0, 2.0]])
    v = np.array([[3.0], [5.0]])
    out = np_att.linear_attention(phi_q, phi_k, v, zero_denominator="zero")
    assert out[0, 0] == 0.0
    assert out[1, 0] == pytest.approx((1 * 3 + 1 * 5) / 2, rel=4 * U64)


def test_feature_map_attention_applies_prescale_and_matches_features():
    entry = get("softmax_positive[iid]")
    rng = np.random.default_rng(3)
    d, m, n = 4, 16, 9
    m = max(m, entry.min_m)
    params = entry.draw(rng, d, m, entry.config)
    q, k, v = (rng.standard_normal((n, d)) for _ in range(3))
    s = d**-0.25
    phi_q, phi_k = map_features(entry, q * s, params), map_features(entry, k * s, params)
    expected = _quadratic(phi_q, phi_k, v, False)
    got = feature_map_attention(entry, params, q, k, v)
    z = np.abs(np.log(phi_q)).max() + np.abs(np.log(phi_k)).max() + np.log(n * m)
    bound = np.expm1(4 * gamma(n + m + 6, U64) * (z + 1)) * np.abs(v).max()
    bound = bound + linear_attention_error_bound(phi_q, phi_k, v, causal=False, u=U64)
    assert np.all(np.abs(got - expected) <= bound)
