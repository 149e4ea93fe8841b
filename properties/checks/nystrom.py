"""Nyström checks shared by the properties (``properties/test_nystrom_properties.py``,
``properties/test_psd_properties.py``): the exact Gram matrix of a point set, one
approximation run, the float bound on its entries and the point-set strategy (docs/math.md §8).

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
``test_nystrom_properties.test_exact_for_a_rank_deficient_kernel`` checks on its own).

**Point sets** (:data:`cases`): 5–7 points in R^2 or R^3, drawn value by value, either
independent (:func:`~kernel_verify.properties.strategies.points`) or clustered
(:func:`~kernel_verify.properties.strategies.clustered_points`: 1 to n centres, offsets at
0, 1e-3, 1e-2 or 1e-1 times the scale) — the exact duplicates and near-duplicates of real data,
where K has (nearly) rank ≤ the number of centres and W is (nearly) singular. Those sets give the
properties their power on defects hidden by generic points: an approximation that is secretly of
rank r + 1 for the r landmarks it reports beats σ_(r+1) when K is nearly of rank r + 1
(``test_error_is_at_least_eckart_young``), and an eigenvalue of W below a regulariser is
where a wrongly signed one makes K̃ indefinite (``test_psd_properties``). Between 1 draw in 6
and 1 in 3 is rejected (mostly exact duplicate landmarks; 300 draws, twice); every property on
:data:`cases` runs the profile's full example count (:func:`case_examples`, :func:`on_cases`).
"""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kernel_verify.properties.protocol import KernelApproxTarget
from kernel_verify.properties.strategies import clustered_points, generator, points, seeds
from kernel_verify.verify.psd import EIGH_BACKWARD_C
from kernel_verify.verify.references.kernels import gram_reference
from kernel_verify.verify.tolerance import EPS64, U64, gamma

KERNELS = {"gaussian": {"sigma": 1.0}, "softmax": {}}


def kernel_fn(kernel: str):
    params = KERNELS[kernel]
    return lambda A, B: gram_reference(kernel, A, B, **params)


def point_set(seed: int, n: int, d: int, scale: float) -> np.ndarray:
    """A fixed Gaussian point set ``scale·N(0, 1)`` of an example-based test (the seed's
    stream ``"point_set"``); properties draw theirs by value (:data:`cases`)."""
    return scale * generator(seed, "point_set").standard_normal((n, d))


def run(target: KernelApproxTarget, X: np.ndarray, kernel: str, seed: int, *,
        landmarks: bool = True):
    """``(K (rounded exact Gram), K̃, landmark indices)``; ``landmarks=False``: an empty index
    array is accepted (a landmark-free approximation, for the properties that read ``K̃``
    alone)."""
    k_ref = kernel_fn(kernel)(X, X)
    k_tilde, idx = target.approximate(X, kernel_fn(kernel), generator(seed, "landmarks"))
    k_tilde = np.asarray(k_tilde, dtype=np.float64)
    idx = np.asarray(idx)
    assert k_tilde.shape == k_ref.shape, (
        f"{target.name}: K̃ has shape {k_tilde.shape}, the Gram matrix of the {len(X)} points "
        f"{k_ref.shape}")
    if not landmarks and idx.ndim == 1 and idx.size == 0:
        return k_ref, k_tilde, idx
    assert idx.ndim == 1 and idx.size >= 1 and len(np.unique(idx)) == idx.size, (
        f"{target.name}: the landmark indices must be a non-empty 1-D array of distinct point "
        f"indices (KernelApproxTarget.approximate returns (K̃, landmarks)); got {idx.tolist()} "
        "— a sampler with replacement returns repeated indices: drop the repeats")
    return k_ref, k_tilde, idx


def nystrom_error_bound(k_ref: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, float]:
    """``(bound on |K̃_computed − K̃_exact| entry-wise, η)`` (the module docstring)."""
    s = idx.size
    w = k_ref[np.ix_(idx, idx)]
    e_norm = float(np.linalg.norm(U64 * np.abs(w))) + 2 * EIGH_BACKWARD_C * s * EPS64 * float(
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
        i = tuple(int(j) for j in np.unravel_index(
            int(np.argmax(np.where(bad, err - bound, -np.inf))), err.shape))
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


def case_examples() -> int:
    """Examples of the properties on :data:`cases`: the loaded profile's full count (25 in
    ``ci``). Their point sets come from two families (independent; clustered at four offset
    scales, with exact and near duplicates) and one example costs milliseconds; at a fifth of
    the count (5) a defect that only near-duplicate landmarks expose was missed in 2 to 8 of 20
    random runs. Called when a test module is collected (after the profile is loaded)."""
    return max(3, settings.default.max_examples)


#: The most terms a landmark-free approximation's entries are assumed to sum (its features).
M_MAX_TERMS = 4096


def landmark_free_bound(k_tilde: np.ndarray) -> np.ndarray:
    """The entry error allowed to a landmark-free ``K̃`` (no ``W`` to bound from): computed as
    ``Z Zᵀ`` over at most :data:`M_MAX_TERMS` terms, ``|ΔK̃_ij| ≤ γ_m·(|Z||Z|ᵀ)_ij ≤
    γ_m·√(K̃_ii·K̃_jj)`` (Higham 3.5; Cauchy–Schwarz: ``(|Z||Z|ᵀ)_ij ≤ ‖z_i‖‖z_j‖`` and
    ``‖z_i‖² = K̃_ii`` up to the same rounding) — with ``|K̃_ii|`` for a diagonal that rounds
    below 0. ASSUMPTION: the approximation is a Gram of at most 4096 terms, or as accurate."""
    diag = np.abs(np.diag(k_tilde)) * (1 + gamma(M_MAX_TERMS, U64))
    return gamma(M_MAX_TERMS, U64) * np.sqrt(np.outer(diag, diag))


def bounded_run(target: KernelApproxTarget, X: np.ndarray, kernel: str, seed: int, *,
                landmarks: bool = True
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`run` and the bound on its entries (:func:`nystrom_error_bound`), ``(K, K̃, S,
    bound)``; an example whose bound is uninformative (``η ≥ ½``, module docstring) is assumed
    away (Hypothesis ``assume``). ``landmarks=False``: a landmark-free ``K̃`` (empty ``S``) is
    taken, with :func:`landmark_free_bound`."""
    k_ref, k_tilde, idx = run(target, X, kernel, seed, landmarks=landmarks)
    if idx.size == 0:
        return k_ref, k_tilde, idx, landmark_free_bound(k_tilde)
    bound, eta = nystrom_error_bound(k_ref, idx)
    assume(eta < 0.5)
    return k_ref, k_tilde, idx, bound


def on_cases(test):
    """A property's draws on :data:`cases`: ``@given(case=cases)`` at :func:`case_examples`
    examples, the decorator of every property on the Nyström point sets (under its target
    parametrisation)."""
    return settings(max_examples=case_examples())(given(case=cases)(test))
