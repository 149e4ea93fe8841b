"""Nyström and low rank (docs/math.md §8): exact on landmarks, exact when every point is a landmark,
never better than the Eckart–Young bound; the Nyströmformer iteration's error recursion.

Targets: ``properties.targets.approximations(...)`` (built in:
:mod:`kernel_verify.properties.builtin_approx`).
Each target gets ``kernel(A, B)`` = the exact Gram matrix correctly rounded to float64
(:func:`kernel_verify.verify.references.kernels.gram_reference`) of a PSD kernel (Gaussian σ = 1,
softmax).

The float bound on ``|K̃_computed − K̃_exact|`` (:func:`nystrom_error_bound`), for any method that
solves with W backward-stably (eigendecomposition, Cholesky, LU) and forms ``C·(…)·Cᵀ`` by
ordinary products. With ``c_i = K[S, i]``, ``λ = λ_min(W) > 0`` and, for PSD K,
``‖W^(−1/2)c_i‖² ≤ K_ii`` (the Schur complement of W in ``K[S∪i, S∪i]`` is ≥ 0):

* W is perturbed by ``E`` (entry rounding ``u|W|`` + solver backward error ``2·500·s·ε‖W‖₁``,
  the LAPACK limit used in :mod:`kernel_verify.verify.psd`), ``η = ‖E‖₂/λ < 1``:
  ``|c_iᵀ((W+E)⁻¹ − W⁻¹)c_j| ≤ √(K_ii K_jj)·η/(1−η)``;
* the columns are rounded, ``‖Δc_i‖ ≤ u‖c_i‖``: ``(‖Δc_i‖√K_jj + ‖Δc_j‖√K_ii)/(√λ(1−η)) +
  ‖Δc_i‖‖Δc_j‖/(λ(1−η))``;
* forming ``c_iᵀ·V Λ⁻¹ Vᵀ·c_j`` (or any product of C, an s×s factor and Cᵀ) in float64:
  ``γ_(3s+6)·Σ|terms| ≤ γ_(3s+6)·s·‖c_i‖‖c_j‖/(λ(1−η))`` (``‖|V|‖₂² ≤ s``).

``λ`` is a lower bound: the float64 eigenvalue of the rounded W minus ``‖E‖₂`` (Weyl). Examples
with ``η ≥ ½`` are rejected (the bound is then uninformative); among them every example whose
landmark set holds two copies of one point (W exactly singular, ``λ ≤ 0``: the bound is void, and
what a correct K̃ then is depends on the implementation's eigenvalue cutoff, which
:func:`test_exact_for_a_rank_deficient_kernel` checks on its own).

**Point sets** (:data:`cases`): 5–7 points in R^2 or R^3, drawn value by value, either
independent (:func:`~kernel_verify.properties.strategies.points`) or clustered
(:func:`~kernel_verify.properties.strategies.clustered_points`: 1 to n centres, offsets at
0, 1e-3, 1e-2 or 1e-1 times the scale) — the exact duplicates and near-duplicates of real data,
where K has (nearly) rank ≤ the number of centres and W is (nearly) singular. Those sets give the
properties their power on defects hidden by generic points: an approximation that is secretly of
rank r + 1 for the r landmarks it reports beats σ_(r+1) when K is nearly of rank r + 1
(:func:`test_error_is_at_least_eckart_young`), and an eigenvalue of W below a regulariser is
where a wrongly signed one makes K̃ indefinite (``test_psd_properties``). Between 1 draw in 6
and 1 in 3 is rejected (mostly exact duplicate landmarks; 300 draws, twice); every property on
:data:`cases` runs the profile's full example count (:data:`CASE_EXAMPLES`).
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
from kernel_verify.properties.protocol import KernelApproxTarget
from kernel_verify.properties.strategies import clustered_points, generator, points
from kernel_verify.properties.targets import approximations
from kernel_verify.verify.psd import EIGH_BACKWARD_C
from kernel_verify.verify.references.kernels import gram_reference
from kernel_verify.verify.references.mp import to_mp, working_precision
from kernel_verify.verify.tolerance import gamma

U64 = 2.0**-53
EPS = 2.0**-52
FEW = max(3, settings.default.max_examples // 5)
#: Examples of the properties on :data:`cases`: the profile's full count (25 in ``ci``). Their
#: point sets come from two families (independent; clustered at four offset scales, with exact
#: and near duplicates) and one example costs milliseconds; at ``FEW`` (5) a defect that only
#: near-duplicate landmarks expose was missed in 2 to 8 of 20 random runs (module docstring).
CASE_EXAMPLES = max(3, settings.default.max_examples)
KERNELS = {"gaussian": {"sigma": 1.0}, "softmax": {}}

seeds = st.integers(0, 2**32 - 1)


# ----------------------------------------------------------------------------- shared helpers
def kernel_fn(kernel: str):
    params = KERNELS[kernel]
    return lambda A, B: gram_reference(kernel, A, B, **params)


def point_set(seed: int, n: int, d: int, scale: float) -> np.ndarray:
    """A fixed Gaussian point set ``scale·N(0, 1)`` of an example-based test (the seed's
    stream ``"point_set"``); properties draw theirs by value (:data:`cases`)."""
    return scale * generator(seed, "point_set").standard_normal((n, d))


def run(target: KernelApproxTarget, X: np.ndarray, kernel: str, seed: int):
    """``(K (rounded exact Gram), K̃, landmark indices)``."""
    k_ref = kernel_fn(kernel)(X, X)
    k_tilde, idx = target.approximate(X, kernel_fn(kernel), generator(seed, "landmarks"))
    k_tilde = np.asarray(k_tilde, dtype=np.float64)
    idx = np.asarray(idx)
    assert k_tilde.shape == k_ref.shape, f"{target.name}: K̃ shape {k_tilde.shape}"
    assert idx.ndim == 1 and idx.size >= 1 and len(np.unique(idx)) == idx.size
    return k_ref, k_tilde, idx


def nystrom_error_bound(k_ref: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, float]:
    """``(bound on |K̃_computed − K̃_exact| entry-wise, η)`` (module docstring)."""
    s = idx.size
    w = k_ref[np.ix_(idx, idx)]
    e_norm = float(np.linalg.norm(U64 * np.abs(w))) + 2 * EIGH_BACKWARD_C * s * EPS * float(
        np.abs(w).sum(axis=0).max())
    lam = float(np.linalg.eigvalsh(0.5 * (w + w.T))[0]) - e_norm
    if lam <= 0:
        return np.full(k_ref.shape, np.inf), np.inf
    eta = e_norm / lam
    if eta >= 1:
        return np.full(k_ref.shape, np.inf), eta
    diag = np.sqrt(np.abs(np.diag(k_ref)) * (1 + U64))
    c_norm = np.linalg.norm(k_ref[idx, :], axis=0) * (1 + U64)
    dc = U64 * c_norm
    shrink = 1 - eta
    t1 = np.outer(diag, diag) * eta / shrink
    t2 = (np.outer(dc, diag) + np.outer(diag, dc)) / (np.sqrt(lam) * shrink)
    t3 = np.outer(dc, dc) / (lam * shrink)
    t4 = gamma(3 * s + 6, U64) * s * np.outer(c_norm, c_norm) / (lam * shrink)
    return t1 + t2 + t3 + t4, eta


def close(got: np.ndarray, want: np.ndarray, bound: np.ndarray, what: str, repro: str) -> None:
    err = np.abs(got - want)
    bad = ~(err <= bound)
    if bad.any():
        i = np.unravel_index(int(np.argmax(np.where(bad, err - bound, -np.inf))), err.shape)
        raise AssertionError(
            f"{what}: |err| {err[i]:.3e} > bound {bound[i]:.3e} at {i} ({int(bad.sum())} of "
            f"{err.size} entries); reproduce: {repro}")


@st.composite
def _cases(draw) -> tuple[int, np.ndarray, str]:
    """``(seed, X, kernel)``: the landmark draw's seed, 5–7 points in R^2 or R^3 drawn value by
    value at scale 0.8 or 1.2 and a kernel. The points are either independent
    (:func:`~kernel_verify.properties.strategies.points`) or clustered
    (:func:`~kernel_verify.properties.strategies.clustered_points`: exact duplicates and
    near-duplicates, so K is (nearly) low rank and W can be nearly singular)."""
    seed = draw(seeds, label="seed")
    n, d = draw(st.integers(5, 7), label="n"), draw(st.integers(2, 3), label="d")
    scale = draw(st.sampled_from([0.8, 1.2]), label="scale")
    X = draw(st.one_of(points((n, d), scale), clustered_points(n, d, scale)), label="X")
    return seed, X, draw(st.sampled_from(sorted(KERNELS)), label="kernel")


cases = _cases()


# -------------------------------------------------------------------------------- landmarks
@pytest.mark.parametrize("target", approximations("exact_on_landmarks"))
@settings(max_examples=CASE_EXAMPLES)
@given(case=cases)
def test_exact_on_landmark_columns(target, case):
    """K̃[:, S] = K[:, S] within the derived bound (+ u|K| for the rounded reference)."""
    seed, X, kernel = case
    k_ref, k_tilde, idx = run(target, X, kernel, seed)
    bound, eta = nystrom_error_bound(k_ref, idx)
    assume(eta < 0.5)
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
    assert sorted(idx.tolist()) == list(range(target.rank)), f"landmarks {idx}"
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
    assume(lam[d - 1] > 4 * EIGH_BACKWARD_C * idx.size * EPS * lam[0])
    kappa = lam[0] / lam[d - 1]
    bound = 4 * EIGH_BACKWARD_C * idx.size * EPS * kappa**2 * np.linalg.norm(k_ref, 2)
    close(np.asarray(k_tilde, dtype=np.float64), k_ref, np.full(k_ref.shape, bound),
          f"{target.name}: K̃ = K for the rank-{d} linear kernel", f"seed={seed}, X={X.tolist()}")


@pytest.mark.parametrize("target", approximations("psd"))
@settings(max_examples=CASE_EXAMPLES)
@given(case=cases)
def test_error_is_at_least_eckart_young(target, case):
    """‖K − K̃‖₂ ≥ σ_(r+1)(K) for r = |S| (K̃ has rank ≤ r), up to the rounding slack
    ‖Err‖_F + ‖u|K|‖_F + 2·500·n·ε(‖K‖₁ + ‖K̃‖₁) (entry errors and the SVD's backward error)."""
    seed, X, kernel = case
    n = X.shape[0]
    k_ref, k_tilde, idx = run(target, X, kernel, seed)
    r = idx.size
    assume(r < n)
    bound, eta = nystrom_error_bound(k_ref, idx)
    assume(eta < 0.5)
    sigma = np.linalg.svd(k_ref, compute_uv=False)
    err = float(np.linalg.norm(k_ref - k_tilde, 2))
    norm1 = float(np.abs(k_ref).sum(axis=0).max() + np.abs(k_tilde).sum(axis=0).max())
    slack = (float(np.linalg.norm(bound)) + float(np.linalg.norm(U64 * k_ref))
             + 2 * EIGH_BACKWARD_C * n * EPS * norm1)
    assert err >= sigma[r] - slack, (
        f"{target.name}: ‖K − K̃‖₂ = {err:.6g} < σ_(r+1) = {sigma[r]:.6g} − {slack:.3g} with "
        f"r = {r} landmarks: K̃ is not a rank-{r} approximation (case={case})")


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
