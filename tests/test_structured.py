"""The fast Walsh–Hadamard SORF/Fastfood projections equal the explicit matrices the suite draws.

``draw_matrix(kind, rng, m, d)`` and ``draw_factors(kind, rng, m, d)`` consume a generator the
same way, so the same seed gives the explicit matrix ``W`` and the factors of the fast transform;
``structured_projections(x, factors)`` must equal ``x Wᵀ`` in float64 up to rounding.

Bound (derived, not tuned): each Hadamard stage of radix ``r`` is a sum of ``r`` terms (error
``γ_r`` relative to the sum of absolute values) and each diagonal scaling one rounding, so with
``R = Σ r_i`` over one transform's stages the computed chain has relative error ``γ_(3R + 6)`` with
respect to the same chain applied to absolute values. That chain gives, per output entry,
``p·‖x‖₁`` for SORF (``p⁻¹·J·J·J``, ``J`` the all-ones matrix, ``|Dᵢ| = 1``) and
``s_i·‖g‖₁·‖x‖₁/√p`` for Fastfood (``|S| J |G| Π J |B|/√p``); the explicit product ``x Wᵀ``
adds ``γ_d·(|x| |W|ᵀ)``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_verify.impls.random_matrices import draw_factors, draw_matrix, factors_matrix
from kernel_verify.impls.torch.structured import Hadamard, radices, structured_projections
from kernel_verify.verify.attention_bounds import gamma
from kernel_verify.verify.tolerance import U64


@pytest.mark.parametrize("p", [1, 2, 4, 32, 64, 128, 1024, 2048])
def test_hadamard_transform_is_sylvester_hadamard(p):
    from scipy.linalg import hadamard

    assert int(np.prod(radices(p))) == p and max(radices(p)) <= 32
    z = torch.as_tensor(np.random.default_rng(p).standard_normal((5, p)))
    got = Hadamard(p, torch.float64, torch.device("cpu"))(z).numpy()
    # Derived bound: every output is a signed sum Σᵢ ±zᵢ (products by ±1 are exact). Summed in
    # any order, with any grouping (the transform's radix stages, the reference's BLAS dot
    # product), a sum of p terms is Σᵢ ±zᵢ(1 + θᵢ) with |θᵢ| ≤ γ_(p−1) ≤ γ_p (Higham §4.2,
    # Lemma 3.1), so each of the two results is within γ_p·Σ|zᵢ| of the exact value.
    bound = 2 * gamma(p, U64) * np.abs(z.numpy()).sum(axis=1, keepdims=True)
    err = np.abs(got - z.numpy() @ hadamard(p))
    assert (err <= bound).all(), f"p={p}: max error {err.max():.3g} > bound {bound.min():.3g}"


@pytest.mark.parametrize("kind", ["sorf", "fastfood"])
@given(seed=st.integers(0, 2**32 - 1), m=st.integers(1, 300), d=st.integers(1, 70),
       n=st.integers(1, 5))
@settings(max_examples=25, deadline=None)
def test_fast_projections_equal_explicit_matrix(kind, seed, m, d, n):
    w = draw_matrix(kind, np.random.default_rng(seed), m, d)
    factors = draw_factors(kind, np.random.default_rng(seed), m, d)
    np.testing.assert_array_equal(factors_matrix(factors), w)  # same draw, same matrix
    x = np.random.default_rng(seed + 1).standard_normal((2, n, d))
    got = structured_projections(torch.as_tensor(x), factors).numpy()
    expected = x @ w.T
    p = factors.p
    l1 = np.abs(x).sum(axis=-1, keepdims=True)
    if kind == "sorf":
        chain = p * l1
    else:
        g1 = np.abs(factors.diagonals[:, 1]).sum(axis=-1)  # ‖g‖₁ per block
        s = (factors.diagonals[:, 2] * g1[:, None]).reshape(-1)[:m]  # s_i·‖g‖₁ per row
        chain = l1 * s / np.sqrt(p)
    bound = gamma(3 * sum(radices(p)) + 6, U64) * chain + gamma(d, U64) * (np.abs(x) @ np.abs(w).T)
    assert got.shape == (2, n, m)
    assert np.all(np.abs(got - expected) <= bound), np.abs(got - expected).max()


def test_structured_projections_keep_low_precision_dtype():
    factors = draw_factors("sorf", np.random.default_rng(0), 8, 5)
    x = torch.randn(3, 5, dtype=torch.bfloat16)
    assert structured_projections(x, factors).dtype == torch.bfloat16


def test_draw_factors_refuses_unstructured_kinds():
    with pytest.raises(ValueError, match="structured kind"):
        draw_factors("iid", np.random.default_rng(0), 4, 4)
