"""Contracts of the shipped library adapters (:mod:`kernel_verify.adapters`): output shape and
dtype, and seeding (same seed → same output, another seed → another draw). Each library's tests
skip with the reason when its extra is not installed; the numerical properties are the property
suite's job (``kernel-verify conformance``)."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.adapters import records
from kernel_verify.properties.loader import load_targets
from kernel_verify.properties.protocol import (
    AttentionTarget,
    FeatureMapTarget,
    KernelApproxTarget,
    RandomMatrixTarget,
)
from tests.library_marks import needs


def qkv(seed: int, shape=(2, 2, 5, 4)):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape) for _ in range(3))


@pytest.mark.parametrize("key", sorted(records()))
def test_every_adapter_module_loads_without_its_library(key):
    """Building ``targets`` never imports the library: the spec loads whatever is installed."""
    if key == "fast_transformers":
        pytest.skip("no fast-transformers targets yet (kernel_verify.adapters.fast_transformers)")
    targets = load_targets(f"kernel_verify.adapters.{key}:targets")
    assert targets and len({t.name for t in targets}) == len(targets)


# ------------------------------------------------------------------------------ sklearn
@needs("sklearn")
def test_sklearn_rbf_sampler_shapes_dtype_and_seeds():
    from kernel_verify.adapters import sklearn as ad

    white, black = ad.targets[0], ad.targets[1]
    x = np.random.default_rng(0).standard_normal((2, 7, 3))
    for t in (white, black):
        a, b, c = (t.features(x, seed=s) for s in (1, 1, 2))
        assert a.shape == (2, 7, t.m) and a.dtype == np.float64
        np.testing.assert_array_equal(a, b)
        assert not np.allclose(a, c)
    params = white.draw_params(np.random.default_rng(5), 3)
    np.testing.assert_array_equal(white.features(x, params=params),
                                  white.features(x, params=params))


@needs("sklearn")
def test_sklearn_white_box_injects_the_draw_into_the_fitted_sampler():
    """The white-box target is the library's transform with the suite's W, b (direct formula)."""
    from kernel_verify.adapters import sklearn as ad

    x = np.random.default_rng(1).standard_normal((6, 3))
    p = ad.draw_rff_phase(np.random.default_rng(2), 3, 10, {})
    got = ad.rbf_sampler_white(x, p, {"sigma": ad.SIGMA})
    want = np.sqrt(2 / 10) * np.cos(x @ p["W"].T / ad.SIGMA + p["b"])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@needs("sklearn")
def test_sklearn_nystroem_contract():
    from kernel_verify.adapters import sklearn as ad

    t = next(t for t in ad.targets if isinstance(t, KernelApproxTarget))
    X = np.random.default_rng(0).standard_normal((9, 3))
    kernel = lambda a, b: np.exp(-0.5 * ((a[:, None] - b[None]) ** 2).sum(-1))  # noqa: E731
    k1, i1 = t.approximate(X, kernel, np.random.default_rng(4))
    k2, i2 = t.approximate(X, kernel, np.random.default_rng(4))
    assert k1.shape == (9, 9) and k1.dtype == np.float64 and len(set(i1)) == t.rank
    np.testing.assert_array_equal(k1, k2)
    np.testing.assert_array_equal(i1, i2)


# ---------------------------------------------------------------------------- performer
@needs("performer")
def test_performer_matrix_draws_are_seeded_and_leave_torch_state_alone():
    import torch

    from kernel_verify.adapters import performer as ad

    before = torch.random.get_rng_state().clone()
    for t in (t for t in ad.targets if isinstance(t, RandomMatrixTarget)):
        a = t.draw(np.random.default_rng(3), 10, 4)
        b = t.draw(np.random.default_rng(3), 10, 4)
        c = t.draw(np.random.default_rng(4), 10, 4)
        assert a.shape == (10, 4) and a.dtype == np.float64
        np.testing.assert_array_equal(a, b)
        assert not np.allclose(a, c)
    assert torch.equal(torch.random.get_rng_state(), before)


@needs("performer")
@pytest.mark.parametrize("causal", [False, True])
def test_performer_attention_shapes_and_seeds(causal):
    from kernel_verify.adapters import performer as ad

    t = ad.targets[3 if causal else 2]
    q, k, v = qkv(0)
    a, b, c = (t(q, k, v, causal=causal, seed=s, m=16) for s in (1, 1, 2))
    assert a.shape == q.shape and a.dtype == np.float64
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


# ------------------------------------------------------------------------ nystrom-attention
@needs("nystrom_attention")
@pytest.mark.parametrize("index", [0, 1, 2])
def test_nystrom_attention_shapes_and_determinism(index):
    from kernel_verify.adapters import nystrom_attention as ad

    t: AttentionTarget = ad.targets[index]
    q, k, v = qkv(0, (2, 2, 6, 4))
    a, b = t(q, k, v, causal=False, seed=1), t(q, k, v, causal=False, seed=2)
    assert a.shape == q.shape and a.dtype == np.float64 and np.isfinite(a).all()
    np.testing.assert_array_equal(a, b)  # no randomness: the seed is ignored
    with pytest.raises(ValueError):
        t(q, k, v, causal=True, seed=0)


@needs("nystrom_attention")
def test_nystrom_identity_projections_route_every_token_exactly():
    """Every token a landmark and one-hot attention: the output is ``P·V`` exactly, no tolerance.

    ``k_j = e_j`` and ``q_i = 2000·e_π(i)`` (d = n = 4, a different permutation π per head), so
    the scaled scores are 1000 for key π(i) and 0 otherwise; ``exp(−1000)`` underflows to exactly
    0 in float64 (below ``exp(−745.2)``, the smallest subnormal), so every softmax of the layer is
    the permutation matrix ``P`` exactly. The 6-step pseudo-inverse then stays exact:
    ``Z₀ = Pᵀ/(max col sum · max row sum) = Pᵀ`` and each step computes ``xz = PPᵀ = I``,
    ``¼·Z·(13I − 9I) = Z`` in integer arithmetic. So ``out = (P·Pᵀ)·(P·V) = P·V`` with only
    products by 0 and 1 and additions of 0: any misrouting of q, k, v or of the heads changes it.
    """
    from kernel_verify.adapters.nystrom_attention import run_layer

    n = d = 4
    perms = [np.array([2, 0, 3, 1]), np.array([1, 3, 0, 2])]
    k = np.broadcast_to(np.eye(n), (1, 2, n, d)).copy()
    q = np.stack([2000.0 * np.eye(n)[p] for p in perms])[None]
    v = np.random.default_rng(3).standard_normal((1, 2, n, d))
    want = np.stack([v[0, h][p] for h, p in enumerate(perms)])[None]
    np.testing.assert_array_equal(run_layer(q, k, v, num_landmarks=n, mask=False), want)


@needs("nystrom_attention")
def test_nystrom_one_landmark_is_softmax_attention_of_the_mean_query():
    """One landmark: every output row is ``softmax(q̄Kᵀ/√d)·V`` with ``q̄`` the mean query.

    With ``num_landmarks = 1`` the landmark softmaxes are over one entry (exactly 1) and the
    pseudo-inverse iteration on ``[[1]]`` stays exactly 1 (``Z₀ = 1/(1·1)``, each step
    ``¼·1·(13 − 9) = 1``), so the layer computes ``attn3·V`` with ``attn3 = softmax(q̄Kᵀ·s)``,
    ``s = d^(−1/2)`` (checks the scale and the routing of k and v). The inputs are small
    integers, d = n = 4: ``s = ½`` and ``q̄ = Σ q_i·s / 4`` and the scores are dyadic, computed
    exactly by both sides, so both the library and the NumPy reference differ from the exact
    value only by: ``exp`` (≤ 1 ulp ≤ 2u relative, counted as 2 roundings), the softmax sum
    (n − 1), its division (1), and the product with V (n). Higham's Lemma 3.1 with these
    2n + 2 factors ``(1 + δ)^(±1)`` gives ``|fl(out) − out| ≤ γ_(2n+2)·Σ_j w_j|v_j| ≤
    γ_(2n+2)·max_j|v_j|`` for each side, so the two agree to twice that.
    """
    from kernel_verify.adapters.nystrom_attention import run_layer
    from kernel_verify.verify.tolerance import gamma

    n = d = 4
    rng = np.random.default_rng(5)
    q, k = rng.integers(-2, 3, (2, 1, 2, n, d)).astype(np.float64)
    v = rng.standard_normal((1, 2, n, d))
    qbar = (q * d**-0.5).mean(-2, keepdims=True)
    s = qbar @ np.swapaxes(k, -1, -2)
    w = np.exp(s - s.max(-1, keepdims=True))
    want = np.broadcast_to((w / w.sum(-1, keepdims=True)) @ v, v.shape)
    bound = 2 * gamma(2 * n + 2, 2.0**-53) * np.abs(v).max(-2, keepdims=True)
    got = run_layer(q, k, v, num_landmarks=1, mask=False)
    assert np.all(np.abs(got - want) <= bound), np.abs(got - want).max()
    unscaled = np.exp(2 * s - 2 * s.max(-1, keepdims=True))  # a layer without the 1/√d
    assert np.abs((unscaled / unscaled.sum(-1, keepdims=True)) @ v - want).max() > 1e3 * bound.max()


# ---------------------------------------------------------------------------------- fla
@needs("fla")
def test_fla_feature_map_shapes_and_dtype():
    from kernel_verify.adapters import fla as ad

    d = 4
    x = np.random.default_rng(0).standard_normal((2, 3, d))
    sizes = {"fla.TaylorFeatureMap": 1 + d + d * (d + 1) // 2,
             "fla.DPFPFeatureMap": 2 * d * ad.DPFP_NU, "fla.ReLUFeatureMap": d,
             # fla's d(d+1)/2 products laid out as vec(x̃x̃ᵀ) (unpack_triangle); softmax([2z, −2z])
             "fla.RebasedFeatureMap": d * d, "fla.HedgehogFeatureMap": 2 * d}
    for t in ad.feature_map_targets:
        assert isinstance(t, FeatureMapTarget) and t.white_box
        phi = t.features(x, seed=0)
        assert phi.shape == (2, 3, sizes[t.name]) and phi.dtype == np.float64
        np.testing.assert_array_equal(phi, t.features(x, seed=1))  # deterministic maps


@needs("nystrom_attention")
def test_nystrom_values_of_another_width_go_through_in_slices():
    """Attention is linear in v: a value width ≠ d gives the column-wise result of width-d runs."""
    from kernel_verify.adapters.nystrom_attention import run_layer

    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 1, 2, 6, 3))
    v = rng.standard_normal((1, 2, 6, 7))
    out = run_layer(q, k, v, num_landmarks=3, mask=False)
    cols = [run_layer(q, k, np.repeat(v[..., i:i + 1], 3, -1), num_landmarks=3, mask=False)[..., 0]
            for i in range(7)]
    assert out.shape == v.shape
    np.testing.assert_allclose(out, np.stack(cols, -1), rtol=1e-12, atol=1e-14)


def test_a_missing_library_skips_with_the_reason_and_the_install_command(monkeypatch):
    from kernel_verify.adapters import _lazy

    monkeypatch.setattr(_lazy, "missing_reason",
                        lambda key: "scikit-learn is not installed (pip install "
                                    "'kernel-verify[sklearn]')")
    with pytest.raises(pytest.skip.Exception, match=r"kernel-verify\[sklearn\]"):
        _lazy.need("sklearn")
