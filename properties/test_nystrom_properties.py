"""Nyström and low rank (docs/math.md §8): exact on landmarks, exact when every point is a landmark,
never better than the Eckart–Young bound; the Nyströmformer iteration's error recursion.

Targets: ``properties.targets.approximations(...)`` (built in:
:mod:`kernel_verify.properties.builtin_approx`).
Each target gets ``kernel(A, B)`` = the exact Gram matrix correctly rounded to float64
(:func:`kernel_verify.verify.references.kernels.gram_reference`) of a PSD kernel (Gaussian σ = 1,
softmax).

The float bound on ``|K̃_computed − K̃_exact|``, its derivation, and the point sets the
properties draw (independent or clustered, with exact and near duplicates) are in
:mod:`kernel_verify.properties.checks.nystrom`.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kernel_verify.impls.numpy import nystrom as np_nystrom
from kernel_verify.impls.torch import nystrom as torch_nystrom
from kernel_verify.properties.checks.nystrom import (
    KERNELS,
    bounded_run,
    close,
    kernel_fn,
    nystrom_error_bound,
    on_cases,
    run,
)
from kernel_verify.properties.strategies import generator, points, seeds
from kernel_verify.properties.targets import approximations
from kernel_verify.verify.psd import EIGH_BACKWARD_C
from kernel_verify.verify.references.mp import to_mp, working_precision
from kernel_verify.verify.tolerance import EPS64, U64, gamma

FEW = max(3, settings.default.max_examples // 5)



# -------------------------------------------------------------------------------- landmarks
@pytest.mark.parametrize("target", approximations("exact_on_landmarks"))
@on_cases
def test_exact_on_landmark_columns(target, case):
    """K̃[:, S] = K[:, S] within the derived bound (+ u|K| for the rounded reference)."""
    seed, X, kernel = case
    k_ref, k_tilde, idx, bound = bounded_run(target, X, kernel, seed)
    close(k_tilde[:, idx], k_ref[:, idx], bound[:, idx] + U64 * np.abs(k_ref[:, idx]),
          f"{target.name}: K̃[:, S] = K[:, S] ({kernel})", f"case={case}")


@pytest.mark.parametrize("target", approximations("exact_on_landmarks"))
@settings(max_examples=FEW)
@given(seed=seeds, d=st.integers(2, 3), kernel=st.sampled_from(sorted(KERNELS)),
       data=st.data())
def test_exact_when_every_point_is_a_landmark(target, seed, d, kernel, data):
    """With n = rank points every point is a landmark: K̃ = K (rank W = rank K)."""
    X = data.draw(points((target.rank, d), 1.2), label="X")
    k_ref, k_tilde, idx = run(target, X, kernel, seed)
    assert sorted(idx.tolist()) == list(range(target.rank)), (
        f"{target.name}: with n = rank = {target.rank} points a sampler of rank distinct "
        f"landmarks takes every point, but the landmarks are {sorted(idx.tolist())} (fewer "
        "than rank distinct landmarks: a sampler with replacement, or one landmark dropped), "
        "so K̃ = K is not guaranteed")
    bound, eta = nystrom_error_bound(k_ref, idx)
    assume(eta < 0.5)
    close(k_tilde, k_ref, bound + U64 * np.abs(k_ref), f"{target.name}: K̃ = K ({kernel})",
          f"seed={seed}, X={X.tolist()}")


@pytest.mark.parametrize("target", approximations("exact_on_landmarks"))
@settings(max_examples=FEW)
@given(seed=seeds, n=st.integers(6, 9), d=st.integers(1, 2), data=st.data())
def test_exact_for_a_rank_deficient_kernel(target, seed, n, d, data):
    """Linear kernel ``K = XXᵀ`` of rank d < number of landmarks: W is singular, rank W =
    rank K = d (landmarks span R^d almost surely), so K̃ = K exactly (docs/math.md §8) — provided
    the pseudo-inverse discards W's rounding-level eigenvalues instead of inverting them.

    Bound for a correct implementation (first-order perturbation): the eigensolver's backward
    error ``‖E‖ ≤ c·s·ε·‖W‖₂`` (c = EIGH_BACKWARD_C) moves the inverse of the rank-d part by at
    most ``‖E‖/λ_d²``, and ``‖C‖₂² ≤ ‖K‖₂‖W‖₂`` for PSD K, so
    ``‖K̃ − K‖ ≤ c·s·ε·κ_d²·‖K‖₂`` with ``κ_d = λ_max(W)/λ_d(W)``. Beyond first order:
    Wedin's perturbation theorem for pseudo-inverses (Wedin 1973; Stewart & Sun, *Matrix
    Perturbation Theory*, Thm III.3.8) gives ``‖(W + E)⁺ − W⁺‖ ≤ μ‖W⁺‖‖(W + E)⁺‖‖E‖`` with
    ``μ ≤ (1 + √5)/2``, and ``‖(W + E)⁺‖ ≤ 2/λ_d`` once ``‖E‖ ≤ λ_d/2`` (the cut-off pseudo-inverse
    keeps the d large eigenvalues and drops the rounding-level ones), so the change is
    ``≤ 2μ·‖E‖/λ_d² < 4‖E‖/λ_d²``: hence the factor 4. The rounding of forming ``C W⁺ Cᵀ``
    (``≲ s·ε·κ_d·‖K‖``) is below the ``c = EIGH_BACKWARD_C = 500`` term.

    Case restriction (``assume``), derived: the argument needs ``‖E‖ ≤ λ_d/2`` and the
    implementation must keep ``λ_d`` (its cutoff is ``s·u·λ_max``); both hold when the exact
    ``λ_d ≥ 3·c·s·ε·λ_max``. The computed eigenvalues are within ``c·s·ε·λ_max`` of the exact
    ones (the same backward error, Weyl), so requiring the computed ``λ_d > 4·c·s·ε·λ_max``
    suffices; cases below it are rank-deficient to working precision, where K̃ = K is not
    claimed."""
    X = data.draw(points((n, d)), label="X")
    linear = lambda A, B: A @ B.T  # noqa: E731  (exact products of the inputs' values)
    k_ref = linear(X, X)
    k_tilde, idx = target.approximate(X, linear, generator(seed, "landmarks"))
    idx = np.asarray(idx)
    assume(idx.size > d)
    lam = np.linalg.eigvalsh(k_ref[np.ix_(idx, idx)])[::-1]
    # λ_d well above the eigensolver's backward error (docstring: case restriction)
    assume(lam[d - 1] > 4 * EIGH_BACKWARD_C * idx.size * EPS64 * lam[0])
    kappa = lam[0] / lam[d - 1]
    bound = 4 * EIGH_BACKWARD_C * idx.size * EPS64 * kappa**2 * np.linalg.norm(k_ref, 2)
    close(np.asarray(k_tilde, dtype=np.float64), k_ref, np.full(k_ref.shape, bound),
          f"{target.name}: K̃ = K for the rank-{d} linear kernel", f"seed={seed}, X={X.tolist()}")


@pytest.mark.parametrize("target", approximations("schur_residual"))
@on_cases
def test_error_is_at_least_eckart_young(target, case):
    """‖K − K̃‖₂ ≥ σ_(r+1)(K) for r = |S|, up to the rounding slack. It rests on rank K̃ ≤ |S|,
    which Nyström's K̃ = C W⁺ Cᵀ has and the claim ``schur_residual`` (K − K̃ the Schur
    complement of W) states; ``psd`` alone does not (a Nyström approximation with its diagonal
    corrected, FITC-style, is PSD, exact on its landmarks and of full rank: it failed here
    under ``psd``). The slack:
    ‖Err‖_F + ‖u|K|‖_F + 2·500·n·ε(‖K‖₁ + ‖K̃‖₁) (entry errors and the SVD's backward error).
    A target taking at least as many landmarks as the drawn points gets r + 2 − n more points
    (Gaussian, of the set's spread), so that σ_(r+1) is not 0 by construction."""
    seed, X, kernel = case
    k_ref, k_tilde, idx = run(target, X, kernel, seed)
    if idx.size >= X.shape[0]:
        # as many landmarks as points (a target taking 6 of the 5–7 drawn): σ_(r+1) = 0 says
        # nothing, so the set grows by r + 2 − n Gaussian points (of the drawn set's spread)
        extra = idx.size + 2 - X.shape[0]
        rng = generator(seed, "eckart-young: more points than landmarks")
        X = np.concatenate([X, float(np.abs(X).max(initial=1.0)) * rng.standard_normal(
            (extra, X.shape[1]))])
        k_ref, k_tilde, idx = run(target, X, kernel, seed)
    n = X.shape[0]
    r = idx.size
    if r >= n:  # the target takes every point again: no informative bound on this set
        return
    bound, eta = nystrom_error_bound(k_ref, idx)
    assume(eta < 0.5)
    sigma = np.linalg.svd(k_ref, compute_uv=False)
    err = float(np.linalg.norm(k_ref - k_tilde, 2))
    norm1 = float(np.abs(k_ref).sum(axis=0).max() + np.abs(k_tilde).sum(axis=0).max())
    slack = (float(np.linalg.norm(bound)) + float(np.linalg.norm(U64 * k_ref))
             + 2 * EIGH_BACKWARD_C * n * EPS64 * norm1)
    assert err >= sigma[r] - slack, (
        f"{target.name}: ‖K − K̃‖₂ = {err:.6g} < σ_(r+1) = {sigma[r]:.6g} − {slack:.3g} with "
        f"r = {r} landmarks: K̃ is not a rank-{r} approximation (case={case})")


@pytest.mark.parametrize("target", approximations("best_rank_on_landmarks"))
@on_cases
def test_truncation_is_the_best_rank_r_on_the_landmarks(target, case):
    """A truncated Nyström ``K̃ = C W_r⁺ Cᵀ`` (``W_r`` the ``r = rank`` largest eigenpairs of
    ``W = K[S, S]``) is ``W W_r⁺ W = W_r`` on its landmarks, the best rank-r approximation of
    W: ``‖W − K̃[S, S]‖₂ = λ_(r+1)(W)`` (0 when r ≥ |S|). Slack: W's eigendecomposition is
    backward stable (``‖E‖₂ ≤ c·s·ε‖W‖₂``, ``c = EIGH_BACKWARD_C``), moving each eigenvalue by
    at most that (Weyl) and ``W_r`` by ``‖E‖₂·(1 + 2λ₁/gap)`` (Davis–Kahan, ``gap = λ_r −
    λ_(r+1)``); forming ``C W_r⁺ Cᵀ`` multiplies rounding by ``κ_r = λ₁/λ_r``: together
    ``c·s·ε·λ₁·(4 + 4λ₁/gap + 2κ_r²)``, plus the 2-norm's own ``c·s·ε·λ₁``. Examples with
    ``gap`` or ``λ_r`` below ``1e-6·λ₁`` (near ties, a nearly singular retained part) are not
    judged. Keeping eigh's first r eigenpairs (ascending: the smallest) leaves ``λ₁``."""
    seed, X, kernel = case
    k_ref, k_tilde, idx = run(target, X, kernel, seed)
    s = idx.size
    if s == 0:
        raise AssertionError(f"{target.name} claims best_rank_on_landmarks but returned no "
                             "landmarks")
    w = k_ref[np.ix_(idx, idx)]
    lam = np.linalg.eigvalsh(w)[::-1]
    r = min(int(target.rank), s)
    want = float(lam[r]) if r < s else 0.0
    lam1 = float(lam[0])
    gap = float(lam[r - 1] - (lam[r] if r < s else 0.0))
    if not (lam1 > 0 and gap > 1e-6 * lam1 and lam[r - 1] > 1e-6 * lam1):
        return  # a near tie or a nearly singular retained part: the slack would be void
    c = EIGH_BACKWARD_C * s * EPS64 * lam1
    slack = c * (5.0 + 4.0 * lam1 / gap + 2.0 * (lam1 / float(lam[r - 1])) ** 2)
    got = float(np.linalg.norm(w - np.asarray(k_tilde, dtype=np.float64)[np.ix_(idx, idx)], 2))
    assert abs(got - want) <= slack, (
        f"{target.name}: ‖W − K̃[S, S]‖₂ = {got:.6g} on its {s} landmarks, but the best rank-"
        f"{r} approximation of W errs by λ_(r+1)(W) = {want:.6g} (slack {slack:.3g}; W's "
        f"eigenvalues {np.array2string(lam, precision=4)}): the truncation keeps other "
        f"eigenpairs than the {r} largest (numpy.linalg.eigh returns them ascending) "
        f"(case={case})")


@pytest.mark.parametrize("target", approximations("optimal_rank"))
@on_cases
def test_error_is_eckart_young_for_optimal_rank(target, case):
    """An ``optimal_rank`` approximation attains the Eckart–Young bound:
    ``‖K − K̃‖₂ = σ_(r+1)(K)``, ``r = min(target.rank, n)`` (σ_(n+1) = 0), within
    ``(4·c·n·ε + n·γ_r)·σ_1``: the SVD is backward stable (its factors are exact for K + E,
    ‖E‖₂ ≤ c·n·ε‖K‖₂, and orthogonal to c·n·ε: ``c = EIGH_BACKWARD_C``), so by Weyl the computed
    error is σ_(r+1) ± 2·c·n·ε·σ_1; forming ``U_r Σ_r V_rᵀ`` adds at most ``γ_r·σ_1`` per entry
    (|u_ik·v_jk| ≤ 1), ``n·γ_r·σ_1`` in the 2-norm; the reference σ and the measured 2-norm
    each add ``c·n·ε·σ_1``. A larger error is not the best rank-r approximation (wrong singular
    triples kept); a smaller one is not rank r."""
    seed, X, kernel = case
    n = X.shape[0]
    k_ref = kernel_fn(kernel)(X, X)
    k_tilde, _ = target.approximate(X, kernel_fn(kernel), generator(seed, "landmarks"))
    k_tilde = np.asarray(k_tilde, dtype=np.float64)
    assert k_tilde.shape == k_ref.shape, f"{target.name}: K̃ shape {k_tilde.shape}"
    r = min(target.rank, n)
    sigma = np.linalg.svd(k_ref, compute_uv=False)
    best = float(sigma[r]) if r < n else 0.0
    err = float(np.linalg.norm(k_ref - k_tilde, 2))
    slack = (4 * EIGH_BACKWARD_C * n * EPS64 + n * gamma(r, U64)) * float(sigma[0])
    assert abs(err - best) <= slack, (
        f"{target.name}: ‖K − K̃‖₂ = {err:.6g}, but the best rank-{r} error is σ_(r+1) = "
        f"{best:.6g} (|difference| {abs(err - best):.3g} > {slack:.3g}): not the optimal "
        f"rank-{r} approximation (case={case})")


# ---------------------------------------------------------------- Nyströmformer iteration
def _iterate_mp(a: np.ndarray, z: np.ndarray):
    """Exact ``(Z', ¼E³(3I + E), I, A)`` in mp: one step ``Z' = ¼Z(13I − AZ(15I − AZ(7I −
    AZ)))`` from Z and the claimed residual of it, ``E = I − AZ``."""
    s = a.shape[0]
    am, zm = to_mp(a), to_mp(z)
    eye = np.empty((s, s), dtype=object)
    for i in range(s):
        for j in range(s):
            eye[i, j] = mpmath.mpf(int(i == j))
    az = am @ zm
    z_next = zm @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az))) / 4
    e = eye - az
    return z_next, (e @ e @ e @ (3 * eye + e)) / 4, eye, am


@pytest.mark.parametrize("backend", ["numpy", "torch:cpu"])
@settings(max_examples=FEW)
@given(s=st.integers(2, 4), steps=st.integers(0, 3), data=st.data())
def test_nystromformer_iteration_error_recursion(backend, s, steps, data):
    """E_(j+1) = ¼E_j³(3I + E_j) for the implementation's iterates: exactly in mp from Z_j, and
    the implementation's Z_(j+1) equals the exact step from its Z_j within
    γ_(4s+12)·¼|Z|(13 + |A||Z|(15 + |A||Z|(7 + |A||Z|))) (four nested products of length s,
    three subtractions, the ¼ scaling; componentwise, Higham §3.5)."""
    logits = data.draw(points((s, s)), label="logits")
    a = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)  # a softmax matrix A_S
    if backend == "numpy":
        z_j = np_nystrom.iterative_pinv(a, steps)
        z_next = np_nystrom.iterative_pinv(a, steps + 1)
    else:
        z_j = torch_nystrom.iterative_pinv(torch.as_tensor(a), steps).numpy()
        z_next = torch_nystrom.iterative_pinv(torch.as_tensor(a), steps + 1).numpy()
    with working_precision(40):
        z_exact, e_rec, eye, am = _iterate_mp(a, z_j)
        e_next = eye - am @ z_exact
        worst = max(abs(e_next[i, j] - e_rec[i, j]) for i in range(s) for j in range(s))
        assert worst < mpmath.mpf(10) ** -30, f"identity off by {worst}"
        z_exact_f = np.array([[float(v) for v in row] for row in z_exact])
    abs_a, abs_z = np.abs(a), np.abs(z_j)
    az = abs_a @ abs_z
    eye_f = np.eye(s)
    mag = abs_z @ (13 * eye_f + az @ (15 * eye_f + az @ (7 * eye_f + az))) / 4
    bound = gamma(4 * s + 12, U64) * mag + U64 * np.abs(z_exact_f)
    close(z_next, z_exact_f, bound, f"{backend}: Z_(j+1) is one Nyströmformer step from Z_j",
          f"logits={logits.tolist()}, steps={steps}")


@pytest.mark.parametrize("backend", ["numpy", "torch:cpu"])
def test_iterative_pinv_initialises_per_matrix(backend):
    """Z₀ = Aᵀ/(‖A‖₁‖A‖_∞) per batch element: a batch gives exactly the per-matrix results
    (a batch-wide norm would couple batch elements)."""
    rng = generator(0, "iterative_pinv_per_matrix")  # the fixed input of this example test
    a = rng.uniform(0.1, 1.0, size=(3, 4, 4))
    a[1] *= 50.0  # very different norms across the batch
    if backend == "numpy":
        batch = np_nystrom.iterative_pinv(a, 0)
        single = np.stack([np_nystrom.iterative_pinv(m, 0) for m in a])
    else:
        batch = torch_nystrom.iterative_pinv(torch.as_tensor(a), 0).numpy()
        single = np.stack([torch_nystrom.iterative_pinv(torch.as_tensor(m), 0).numpy()
                           for m in a])
    expected = np.stack([m.T / (np.abs(m).sum(0).max() * np.abs(m).sum(1).max()) for m in a])
    np.testing.assert_array_equal(batch, single)
    # one division and one product of two exact maxima of sums of 4 positive terms:
    # relative γ_(2·3+2) at most (any summation order)
    assert np.all(np.abs(batch - expected) <= gamma(8, U64) * np.abs(expected))
