"""Nyström, Nyströmformer and low-rank references (issue 3; docs/math.md §8), NumPy and torch.

Tolerances (u = 2⁻⁵³, float64 throughout):

* **Eigen/SVD solvers.** LAPACK's symmetric eigensolver and SVD are backward stable: the result is
  exact for ``W + E`` with ``‖E‖₂ ≤ p(s)·u·‖W‖₂``. With Householder tridiagonalisation/
  bidiagonalisation the constant grows at most like ``s²`` (Higham, ASNA 2nd ed., §19.3 and
  Thm 19.4: ``γ̃_(cs²)``); we take ``p(s) = 2s²``.
* **Nyström exactness** (landmark columns; all points). When no eigenvalue is cut (we require
  ``κ(W)·s·u < 10⁻³``, far from the cutoff ``s·u·λ_max``), the computed ``W⁺`` is
  ``(W + E)⁻¹``, so ``K̃[:, S] − C = −C(W + E)⁻¹E`` and ``‖·‖₂ ≤ ‖C‖₂·p(s)uκ/(1 − p(s)uκ)``; the
  products forming ``F = C V Λ^(-1/2)`` and ``F F_Sᵀ`` add ``≤ 4s·u·κ·‖C‖₂`` (γ_s per length-s
  product, each scaled by at most ``κ``). Tolerance ``(2s² + 4s)·u·κ(W)·‖C‖₂/(1 − 2s²uκ)``.
  The same perturbation of ``W⁻¹`` bounds ``‖K̃_computed − K̃‖₂ ≤ (2s²+4s)uκ‖C‖₂²‖W⁻¹‖₂/(1 −
  2s²uκ)``, used for the Schur-complement (``K − K̃ ⪰ 0``) and Eckart–Young checks.
* **Nyströmformer recurrence** ``E_(j+1) = ¼E_j³(3I + E_j)``, ``E = I − AZ``: checked in
  mpmath on the float matrices (exact conversion), so the only discrepancy is the rounding of
  one iteration step: ``|Ẑ_(j+1) − Z'| ≤ γ_(4s+4)·¼|Z|(13 + |A||Z|(15 + |A||Z|(7 + |A||Z|)))``
  (the longest chain: four length-s products, three additions, exact scalings by 13, 15, 7, ¼;
  forward error of a product/sum expression, Higham §3.5), hence
  ``|ΔE_(j+1)| ≤ |A|·|Ẑ_(j+1) − Z'|``.
* **Softmax rounding** (attention references): scores ``fl(q·c)·fl(k·c)ᵀ``, ``c = d^(-1/4)``:
  ``|Δs| ≤ γ_(d+4+4·ulps)·|q||k|ᵀ/√d``; the row softmax ``e^(s−m)/Σ`` then has relative error
  ``ρ ≤ 2·expm1(2·max|Δs| + u·max|s − m|) + 2·(2·ulps + 1)·u + γ_(n+1)`` (numerator and
  denominator), i.e. ``|Â − A| ≤ ρA``; the output ``Â·V`` adds ``γ_n|Â||V|``.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from kernel_verify.impls.numpy import lowrank as np_lr
from kernel_verify.impls.numpy import nystrom as np_ny
from kernel_verify.impls.registry import get
from kernel_verify.impls.torch import lowrank as t_lr
from kernel_verify.impls.torch import nystrom as t_ny
from kernel_verify.verify.compare import assert_close
from kernel_verify.verify.references.mp import to_float, to_mp, working_precision
from kernel_verify.verify.tolerance import EVALUATION_SLACK, gamma

U = 2.0**-53
seeds = st.integers(0, 2**32 - 1)
BACKENDS = ("numpy", "torch")


def _nys_from_gram(backend: str, K: np.ndarray, idx: np.ndarray) -> np.ndarray:
    if backend == "numpy":
        return np_ny.nystrom_from_gram(K, idx)
    return t_ny.nystrom_from_gram(torch.as_tensor(K), idx).numpy()


def _gaussian_points(seed: int, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    X = 1.5 * np.random.default_rng(seed).standard_normal((n, d))
    return X, np_ny.kernel_gram("gaussian", X, X, sigma=1.0)


def _kappa(w: np.ndarray) -> float:
    lam = np.linalg.eigvalsh(w)
    return float(lam[-1] / lam[0]) if lam[0] > 0 else math.inf


def _exactness_tol(s: int, kappa: float, norm_c: float) -> float:
    p = 2 * s * s
    return (p + 4 * s) * U * kappa * norm_c / (1 - p * U * kappa)


# ------------------------------------------------------------------------ landmark Nyström
@pytest.mark.parametrize("backend", BACKENDS)
@given(seed=seeds, n=st.integers(4, 12), s=st.integers(1, 4), d=st.integers(2, 4))
def test_exact_on_landmark_columns(backend, seed, n, s, d):
    _, K = _gaussian_points(seed, n, d)
    idx = np_ny.choose_landmarks(n, min(s, n), rng=np.random.default_rng(seed))
    w = K[np.ix_(idx, idx)]
    kappa = _kappa(w)
    assume(kappa * len(idx) * U < 1e-3)
    approx = _nys_from_gram(backend, K, idx)
    c = K[:, idx]
    err = np.linalg.norm(approx[:, idx] - c, 2)
    tol = _exactness_tol(len(idx), kappa, np.linalg.norm(c, 2))
    assert err <= tol, f"‖K̃[:, S] − C‖₂ = {err:.3g} > {tol:.3g} (κ = {kappa:.3g}, seed {seed})"


@pytest.mark.parametrize("backend", BACKENDS)
@given(seed=seeds, n=st.integers(1, 8), d=st.integers(2, 4))
def test_exact_when_all_points_are_landmarks(backend, seed, n, d):
    _, K = _gaussian_points(seed, n, d)
    kappa = _kappa(K)
    assume(kappa * n * U < 1e-3)
    err = np.linalg.norm(_nys_from_gram(backend, K, np.arange(n)) - K, 2)
    tol = _exactness_tol(n, kappa, np.linalg.norm(K, 2))
    assert err <= tol, f"‖K̃ − K‖₂ = {err:.3g} > {tol:.3g} (κ = {kappa:.3g}, seed {seed})"


@pytest.mark.parametrize("backend", BACKENDS)
def test_exact_with_ill_conditioned_landmarks(backend):
    """Two landmarks 6.3e-4 apart: λ_min(W) ≈ δ²/2 ≈ 2e-7, κ ≈ 1e7 — far above the cutoff
    s·u·λ_max ≈ 4e-16, so nothing may be cut; the exactness bound (∝ κ) still holds. (A cutoff
    at 1e-6·λ_max would drop λ_min and miss C by ~λ_min ≈ 2e-7, above the ~4e-8 tolerance.)"""
    X = np.array([[0.0, 0.0], [6.3e-4, 0.0], [1.0, 1.0], [-1.0, 0.5], [0.3, -0.7]])
    K = np_ny.kernel_gram("gaussian", X, X)
    idx = np.array([0, 1])
    kappa = _kappa(K[np.ix_(idx, idx)])
    assert 1e6 < kappa < 1e8
    approx = _nys_from_gram(backend, K, idx)
    err = np.linalg.norm(approx[:, idx] - K[:, idx], 2)
    tol = _exactness_tol(2, kappa, np.linalg.norm(K[:, idx], 2))
    assert err <= tol, (err, tol)


def _approx_error_bound(K: np.ndarray, idx: np.ndarray) -> float:
    """``‖K̃_computed − K̃‖₂`` bound of the module docstring."""
    w = K[np.ix_(idx, idx)]
    lam = np.linalg.eigvalsh(w)
    kappa, s = lam[-1] / lam[0], len(idx)
    norm_c = np.linalg.norm(K[:, idx], 2)
    return (2 * s * s + 4 * s) * U * kappa * norm_c**2 / lam[0] / (1 - 2 * s * s * U * kappa)


@given(seed=seeds, n=st.integers(5, 12), r=st.integers(1, 4))
def test_schur_complement_and_eckart_young(seed, n, r):
    """K − K̃ ⪰ 0 (a Schur complement) and ‖K − K̃‖₂ ≥ σ_(r+1) = ‖K − K_r‖₂ (Eckart–Young)."""
    _, K = _gaussian_points(seed, n, 3)
    idx = np_ny.choose_landmarks(n, r, rule="strided")
    kappa = _kappa(K[np.ix_(idx, idx)])
    assume(kappa * r * U < 1e-3)
    approx = np_ny.nystrom_from_gram(K, idx)
    delta = _approx_error_bound(K, idx)
    norm_k = np.linalg.norm(K, 2)
    eig_err = 2 * n * n * U * (norm_k + np.linalg.norm(approx, 2))  # eigvalsh of K − K̃
    assert np.linalg.eigvalsh(K - approx)[0] >= -(delta + eig_err)
    sigma = np.linalg.svd(K, compute_uv=False)
    svd_err = 2 * n * n * U * norm_k  # backward error of the SVD
    for backend_svd in (np_lr.truncated_svd(K, r),
                        t_lr.truncated_svd(torch.as_tensor(K), r).numpy()):
        best = np.linalg.norm(K - backend_svd, 2)
        tol = (2 * n * n + 4 * n) * U * norm_k + 2 * svd_err
        assert abs(best - sigma[r]) <= tol, (best, sigma[r], tol)
    assert np.linalg.norm(K - approx, 2) >= sigma[r] - delta - svd_err


def test_nystrom_kernel_sources_agree():
    """A GRAM_KERNELS name, an exact_finite registry entry and a callable give the same K̃."""
    X = np.random.default_rng(3).standard_normal((8, 3))
    idx = np.array([0, 3, 5])
    by_name = np_ny.nystrom("taylor", X, idx, order=2)
    by_entry = np_ny.nystrom(get("taylor2"), X, idx)
    by_call = np_ny.nystrom(lambda a, b: np_ny.kernel_gram("taylor", a, b), X, idx)
    assert np.array_equal(by_name, by_call)
    k = np_ny.kernel_gram("taylor", X, X)
    # Taylor Gram from features vs closed form: both within γ_(D+8)·(1 + |t| + t²/2)-sized
    # rounding of the same kernel; Nyström amplifies by at most (2s² + 4s)κ (module docstring)
    w = k[np.ix_(idx, idx)]
    kappa = _kappa(w)
    scale = np.abs(1 + np.abs(X @ X.T) / math.sqrt(3) + (X @ X.T) ** 2 / 6).max()
    tol = 2 * gamma(30, U) * scale * (2 * 9 + 12) * kappa * np.linalg.norm(k[:, idx], 2) ** 2
    tol /= np.linalg.eigvalsh(w)[0]
    assert np.abs(by_entry - by_name).max() <= tol
    seeded = np_ny.nystrom("gaussian", X, 3, rng=np.random.default_rng(1))
    again = np_ny.nystrom("gaussian", X, 3, rng=np.random.default_rng(1))
    assert np.array_equal(seeded, again)


def test_psd_pinv_cutoff():
    """Eigenvalues below s·u·λ_max are dropped: an exactly singular W gives the exact pinv of its
    range (here diag(1, 0) → diag(1, 0)), never 1/tiny."""
    w = np.diag([1.0, 1e-300])
    for got in (np_ny.psd_pinv(w), t_ny.psd_pinv(torch.as_tensor(w)).numpy()):
        assert np.array_equal(got, np.diag([1.0, 0.0]))
    assert np_ny.pinv_cutoff(np.array([1e-20, 2.0])) == 2 * U * 2.0


# --------------------------------------------------------------------------- Nyströmformer
def _attention_inputs(seed: int, batch: int, n: int, d: int):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((batch, n, d)) for _ in range(3))


def _scores_softmax(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    s = (q * q.shape[-1] ** -0.25) @ np.swapaxes(k * k.shape[-1] ** -0.25, -1, -2)
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _mp_mat(a: np.ndarray) -> mpmath.matrix:
    return mpmath.matrix(a.tolist())


@pytest.mark.parametrize("backend", BACKENDS)
@given(seed=seeds, s=st.integers(2, 5))
def test_residual_recurrence(backend, seed, s):
    """E_(j+1) = ¼E_j³(3I + E_j) for the float iterates, within the one-step rounding bound."""
    q, k, _ = _attention_inputs(seed, 1, s, 3)
    a = _scores_softmax(q, k)[0]
    pinv = np_ny.iterative_pinv if backend == "numpy" else (
        lambda m, j: t_ny.iterative_pinv(torch.as_tensor(m), j).numpy())
    with working_precision(40):
        am = _mp_mat(a)
        eye = mpmath.eye(s)
        for j in range(4):
            z0, z1 = pinv(a, j), pinv(a, j + 1)
            e0 = eye - am * _mp_mat(z0)
            e1 = eye - am * _mp_mat(z1)
            predicted = e0**3 * (3 * eye + e0) / 4
            diff = np.array((e1 - predicted).tolist(), dtype=object)
            az = np.abs(a) @ np.abs(z0)
            inner = 13 + az @ (15 + az @ (7 + az))
            step = gamma(4 * s + 4, U) * 0.25 * np.abs(z0) @ inner
            bound = np.abs(a) @ step
            assert np.all(np.abs(to_float(diff)) <= bound), (j, to_float(diff), bound)


def _softmax_rounding(q: np.ndarray, k: np.ndarray, ulps: float = 1.0) -> np.ndarray:
    d, n = q.shape[-1], k.shape[-2]
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
    ds = gamma(d + 4 + 4, U) * np.abs(q) @ np.swapaxes(np.abs(k), -1, -2) / math.sqrt(d)
    spread = (s.max(-1, keepdims=True) - s).max(-1, keepdims=True)
    return (2 * np.expm1(2 * ds.max(-1, keepdims=True) + U * spread) + 2 * (2 * ulps + 1) * U
            + gamma(n + 1, U))


def _mp_softmax(qm: np.ndarray, km: np.ndarray) -> np.ndarray:
    """Exact row softmax of ``qkᵀ/√d`` for mp arrays."""
    s = qm @ km.T / mpmath.sqrt(qm.shape[-1])
    e = np.frompyfunc(mpmath.exp, 1, 1)(s)
    return e / e.sum(axis=-1, keepdims=True)


def _mp_softmax_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray):
    a = _mp_softmax(to_mp(q), to_mp(k))
    return a @ to_mp(v), a


@pytest.mark.parametrize("backend", BACKENDS)
@given(seed=seeds, n=st.integers(2, 6))
def test_nystromformer_converges_to_softmax(backend, seed, n):
    """landmarks = n: out = Â Ẑ (Â V) → A V. Final error ≤ |Ê Â V| (exact residual, mp) +
    γ_(2n+2)|Â||Ẑ||Â||V| + ρ·A|V| (softmax rounding, module docstring); errors decrease."""
    q, k, v = _attention_inputs(seed, 1, n, 3)
    fn = np_ny.nystromformer_attention if backend == "numpy" else (
        lambda *a, n_iter: t_ny.nystromformer_attention(
            *(torch.as_tensor(t) for t in a[:3]), a[3], n_iter=n_iter).numpy())
    with working_precision(40):
        ref_mp, a_mp = _mp_softmax_attention(q[0], k[0], v[0])
        ref = to_float(ref_mp)
        a_hat = _scores_softmax(q, k)[0]
        norms = []  # ‖E_j‖₂ decreases strictly: E_j = f^j(E₀), f(e) = e³(3+e)/4 < e on (0, 1)
        for it in range(6):
            z_it = np_ny.iterative_pinv(a_hat, it)
            e_it = mpmath.eye(n) - _mp_mat(a_hat) * _mp_mat(z_it)
            norms.append(np.linalg.norm(to_float(np.array(e_it.tolist(), dtype=object)), 2))
        for j in range(5):
            if norms[j] > 1e-6:  # far above the per-step rounding (≲ 1e-13 here)
                assert norms[j + 1] < norms[j], norms
        z = np_ny.iterative_pinv(a_hat, 60) if backend == "numpy" else (
            t_ny.iterative_pinv(torch.as_tensor(a_hat), 60).numpy())
        resid = mpmath.eye(n) - _mp_mat(a_hat) * _mp_mat(z)
        e_av = np.abs(to_float(np.array((resid * _mp_mat(a_hat) * _mp_mat(v[0])).tolist(),
                                        dtype=object)))
    av = np.abs(a_hat) @ np.abs(z) @ np.abs(a_hat) @ np.abs(v[0])
    a_exact = to_float(a_mp)
    bound = (e_av + gamma(2 * n + 2, U) * av
             + _softmax_rounding(q[0], k[0]) * (a_exact @ np.abs(v[0])) * EVALUATION_SLACK)
    out = fn(q, k, v, n, n_iter=60)[0]
    assert_close(out, ref, bound, inputs={"q": q[0], "k": k[0], "v": v[0]},
                 label=f"Nyströmformer ({backend}) with n landmarks, 60 iterations",
                 how="exact residual term + product rounding + softmax rounding (docstring)",
                 repro=f"seed={seed}, n={n}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_initial_scaling_is_per_matrix(backend):
    """Z₀ = Aᵀ/(‖A‖₁‖A‖_∞) per batch element: element 0's Z₀ (and output) do not depend on
    element 1 (scaled ×10 so a batch-wide norm would change element 0 by a factor ~100)."""
    rng = np.random.default_rng(2)
    a = rng.uniform(size=(2, 4, 4))
    a[1] *= 10
    pinv = np_ny.iterative_pinv if backend == "numpy" else (
        lambda m, j: t_ny.iterative_pinv(torch.as_tensor(m), j).numpy())
    z_batch, z_alone = pinv(a, 0)[0], pinv(a[:1], 0)[0]
    exact = a[0].T / (np.abs(a[0]).sum(0).max() * np.abs(a[0]).sum(1).max())
    bound = 2 * (2 * gamma(4, U) + U) * np.abs(exact) / (1 - 2 * gamma(4, U))
    assert np.all(np.abs(z_batch - z_alone) <= bound)
    q, k, v = _attention_inputs(5, 2, 6, 3)
    q2 = q.copy()
    q2[1] *= 3
    fn = np_ny.nystromformer_attention if backend == "numpy" else (
        lambda *t, n_iter: t_ny.nystromformer_attention(
            *(torch.as_tensor(x) for x in t[:3]), t[3], n_iter=n_iter).numpy())
    assert np.array_equal(fn(q, k, v, 3, n_iter=6)[0], fn(q2, k, v, 3, n_iter=6)[0])


@pytest.mark.parametrize("backend", BACKENDS)
@given(seed=seeds, n=st.integers(1, 9), s=st.integers(1, 4))
def test_segment_means_uneven(backend, seed, n, s):
    """Landmarks are means of contiguous segments with numpy.array_split sizes (the first n mod s
    segments one row longer). Each mean of L rows: |err| ≤ γ_(L+1)·Σ|x|/L (a length-L sum and one
    division)."""
    assume(s <= n)
    x = np.random.default_rng(seed).standard_normal((2, n, 3))
    got = (np_ny.segment_means(x, s) if backend == "numpy"
           else t_ny.segment_means(torch.as_tensor(x), s).numpy())
    parts = np.array_split(np.arange(n), s)
    with working_precision(30):
        xm = to_mp(x)
        ref = np.stack([to_float(xm[:, p, :].sum(axis=1) / len(p)) for p in parts], axis=1)
    bound = np.stack([gamma(len(p) + 1, U) * np.abs(x[:, p, :]).sum(1) / len(p) for p in parts],
                     axis=1)
    assert_close(got, ref, bound + U * np.abs(ref), label=f"segment means ({backend})",
                 how="γ_(L+1) per mean + reference rounding", repro=f"seed={seed}, n={n}, s={s}")
    out = (np_ny.nystromformer_attention(x, x, x, s) if backend == "numpy"
           else t_ny.nystromformer_attention(*(torch.as_tensor(x),) * 3, s).numpy())
    assert out.shape == x.shape and np.all(np.isfinite(out))


# ------------------------------------------------------------------------------ Linformer
@pytest.mark.parametrize("backend", BACKENDS)
@given(seed=seeds, n=st.integers(2, 6), r=st.integers(1, 4))
def test_linformer_matches_mp(backend, seed, n, r):
    """softmax(Q(EK)ᵀ/√d)(FV) against mpmath; identity projections give softmax attention."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((n, 3)) for _ in range(3))
    for e_proj, f_proj in ((np.eye(n), np.eye(n)),
                           (rng.standard_normal((r, n)), rng.standard_normal((r, n)))):
        if backend == "numpy":
            out = np_lr.linformer_attention(q, k, v, e_proj, f_proj)
        else:
            out = t_lr.linformer_attention(
                *(torch.as_tensor(t) for t in (q, k, v, e_proj, f_proj))).numpy()
        kp, vp = e_proj @ k, f_proj @ v
        dkp = gamma(n, U) * np.abs(e_proj) @ np.abs(k)
        dvp = gamma(n, U) * np.abs(f_proj) @ np.abs(v)
        with working_precision(40):
            a_mp = _mp_softmax(to_mp(q), to_mp(e_proj) @ to_mp(k))
            ref = to_float(a_mp @ (to_mp(f_proj) @ to_mp(v)))
        a_exact = to_float(a_mp)
        ds_extra = np.abs(q) @ dkp.T / math.sqrt(3)
        rho = _softmax_rounding(q, kp) + 2 * np.expm1(2 * ds_extra.max(-1, keepdims=True))
        mag_v = np.abs(vp) + dvp
        bound = (rho * (a_exact @ mag_v) + a_exact @ dvp
                 + gamma(e_proj.shape[0], U) * (a_exact * (1 + rho)) @ mag_v) * EVALUATION_SLACK
        assert_close(out, ref, bound, inputs={"q": q, "k": k, "v": v},
                     label=f"linformer ({backend})", how="softmax rounding + projection rounding",
                     repro=f"seed={seed}, n={n}, r={r}")


# ------------------------------------------------------------------------------ bad input
def test_bad_inputs():
    K = np.eye(4)
    with pytest.raises(ValueError, match="distinct indices"):
        np_ny.nystrom_from_gram(K, np.array([0, 0]))
    with pytest.raises(ValueError, match="distinct indices"):
        t_ny.nystrom_from_gram(torch.as_tensor(K), np.array([0, 4]))
    with pytest.raises(TypeError, match="integer array"):
        np_ny.nystrom_from_gram(K, np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="K must be square"):
        np_ny.nystrom_from_gram(np.ones((3, 4)), np.array([0]))
    with pytest.raises(ValueError, match="K contains NaN"):
        np_ny.nystrom_from_gram(np.full((2, 2), np.nan), np.array([0]))
    with pytest.raises(ValueError, match=r"n_landmarks \(= 5\) must be <= n \(= 4\)"):
        np_ny.choose_landmarks(4, 5, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="needs rng="):
        np_ny.choose_landmarks(4, 2)
    with pytest.raises(ValueError, match="rule must be one of"):
        np_ny.choose_landmarks(4, 2, rule="kmeans")
    with pytest.raises(ValueError, match="kernel must be one of"):
        np_ny.nystrom("laplace", np.ones((3, 2)), np.array([0]))
    with pytest.raises(ValueError, match="not an exact finite"):
        np_ny.nystrom(get("cosformer"), np.ones((3, 2)), np.array([0]))
    with pytest.raises(ValueError, match="c must be >= 0"):
        np_ny.nystrom("polynomial", np.ones((3, 2)), np.array([0]), c=-1.0)
    q = np.ones((2, 5, 3))
    for mod, conv in ((np_ny, np.asarray), (t_ny, torch.as_tensor)):
        with pytest.raises(ValueError, match="n_iter must be >= 0"):
            mod.iterative_pinv(conv(np.eye(3)), -1)
        with pytest.raises(ValueError, match="must be square"):
            mod.iterative_pinv(conv(np.ones((2, 3))), 2)
        with pytest.raises(ValueError, match=r"n_landmarks \(= 6\) must be <= n \(= 5\)"):
            mod.nystromformer_attention(conv(q), conv(q), conv(q), 6)
        with pytest.raises(ValueError, match="q, k must match"):
            mod.nystromformer_attention(conv(q), conv(q[:, :4]), conv(q), 2)
    with pytest.raises(TypeError, match="dtypes must match"):
        np_ny.nystromformer_attention(q, q.astype(np.float32), q, 2)
    with pytest.raises(ValueError, match="rank"):
        np_lr.truncated_svd(np.eye(3), 4)
    with pytest.raises(ValueError, match="rank must be >= 1"):
        t_lr.truncated_svd(torch.eye(3, dtype=torch.float64), 0)
    with pytest.raises(ValueError, match="E and F must both be"):
        np_lr.linformer_attention(q, q, q, np.ones((2, 4)), np.ones((2, 5)))
    with pytest.raises(ValueError, match="E and F must both be"):
        t_lr.linformer_attention(*(torch.as_tensor(t) for t in (q, q, q, np.ones((2, 4)),
                                                                  np.ones((2, 4)))))
