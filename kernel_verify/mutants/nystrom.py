"""Broken Nyström approximations (docs/math.md §8): ``KernelApproxTarget`` mutants.

``approximate(X, kernel, rng) -> (K̃, landmark indices)`` with ``K̃ = C·W⁺·Cᵀ``, ``C = K[:, S]``,
``W = K[S, S]``; each mutant breaks the inverse.
"""

from __future__ import annotations

import numpy as np

from kernel_verify.impls.systems import get_system
from kernel_verify.properties.protocol import KernelApproxTarget

LANDMARKS = 4
#: The truncated Nyström's landmarks and rank (``K̃ = C W_r⁺ Cᵀ``, r < |S|).
TRUNCATED_LANDMARKS, TRUNCATED_RANK = 6, 3
#: What a truncated Nyström claims: not exact on its landmarks, the best rank-r approximation
#: of W there.
TRUNCATED_CLAIMS = frozenset({"psd", "schur_residual", "best_rank_on_landmarks"})
#: Relative size of the diagonal regulariser of ``"jitter_subtracted"`` (times the mean of
#: diag W), the common ``W + λI`` stabilisation.
JITTER = 1e-3
#: The claims of the system the mutants break (its descriptor, :mod:`kernel_verify.impls.systems`).
CLAIMS = get_system("nystrom").target_claims()


def nystrom(x: np.ndarray, kernel, rng: np.random.Generator, *, inverse: str) -> tuple:
    """Uniform landmarks without replacement; ``inverse``: ``"W"`` (W itself instead of W⁺) or
    ``"no_cutoff"`` (pseudo-inverse without an eigenvalue cutoff: rounding-level eigenvalues of
    a (numerically) singular W are inverted); ``"pinv"`` is the correct twin (the control of
    :mod:`kernel_verify.mutants.controls`): ``numpy.linalg.pinv`` of the symmetric W with its
    default
    cutoff (singular values below ``1e-15·max`` dropped); ``"pinv_drops_landmark"``: the correct
    ``K̃`` with the landmark list returned by an off-by-one slice (``idx[1:]``), so ``K̃`` has
    rank up to |S| + 1 while the approximation reports |S| landmarks; ``"jitter_subtracted"``:
    the regularised inverse ``(W + λI)⁻¹`` with the sign of ``λ`` flipped, ``(W − λI)⁻¹`` with
    ``λ = JITTER·tr(W)/|S|``: an eigenvalue of W below λ becomes a negative one of W's
    "inverse", and K̃ is indefinite; ``"truncated_largest"``/``"truncated_smallest"``: the
    truncated Nyström ``C W_r⁺ Cᵀ`` (:func:`target`)."""
    n = x.shape[0]
    truncated = inverse.startswith("truncated")
    size = TRUNCATED_LANDMARKS if truncated else LANDMARKS
    idx = np.sort(rng.choice(n, size=min(size, n), replace=False))
    c = kernel(x, x[idx])
    w = c[idx]
    if truncated:  # W_r⁺ from the r largest eigenpairs (eigh: ascending), or the r first
        vals, vecs = np.linalg.eigh(w)
        r = min(TRUNCATED_RANK, w.shape[0])
        pick = slice(0, r) if inverse == "truncated_smallest" else slice(w.shape[0] - r, None)
        v_r = vecs[:, pick]
        w_inv = (v_r / vals[pick]) @ v_r.T
    elif inverse == "W":
        w_inv = w
    elif inverse == "jitter_subtracted":
        w_inv = np.linalg.inv(w - JITTER * np.trace(w) / w.shape[0] * np.eye(w.shape[0]))
    elif inverse in ("pinv", "pinv_drops_landmark"):
        w_inv = np.linalg.pinv(w, hermitian=True)
    else:
        vals, vecs = np.linalg.eigh(w)
        w_inv = (vecs / vals) @ vecs.T
    if inverse == "pinv_drops_landmark":
        return c @ w_inv @ c.T, idx[1:]
    return c @ w_inv @ c.T, idx


def truncated_eigh(x: np.ndarray, kernel, rng: np.random.Generator, *, keep: str) -> tuple:
    """A rank-``LANDMARKS`` truncation of the symmetric Gram matrix by its eigendecomposition
    (no landmarks: an empty index array); ``keep="largest"`` is the correct twin (for a PSD K
    the eigenpairs of the r largest eigenvalues are its best rank-r approximation),
    ``keep="first"`` keeps the first r columns of ``numpy.linalg.eigh``, whose eigenvalues come
    in ascending order: the r smallest."""
    del rng
    k = kernel(x, x)
    vals, vecs = np.linalg.eigh(k)
    r = min(LANDMARKS, k.shape[0])
    pick = slice(0, r) if keep == "first" else slice(k.shape[0] - r, k.shape[0])
    return (vecs[:, pick] * vals[pick]) @ vecs[:, pick].T, np.arange(0)


def truncation_target(name: str, keep: str) -> KernelApproxTarget:
    """A truncated eigendecomposition claiming its descriptor's ``optimal_rank``."""
    return KernelApproxTarget(f"mutant:{name}",
                              lambda x, kernel, rng: truncated_eigh(x, kernel, rng, keep=keep),
                              frozenset({"optimal_rank"}), rank=LANDMARKS)


def target(name: str, inverse: str) -> KernelApproxTarget:
    """The Nyström target of ``inverse``; the truncated ones (``truncated_largest``, the correct
    twin, and ``truncated_smallest``: eigh's first r eigenpairs, the smallest) take
    :data:`TRUNCATED_LANDMARKS` landmarks at rank :data:`TRUNCATED_RANK`."""
    truncated = inverse.startswith("truncated")
    return KernelApproxTarget(f"mutant:{name}",
                              lambda x, kernel, rng: nystrom(x, kernel, rng, inverse=inverse),
                              TRUNCATED_CLAIMS if truncated else CLAIMS,
                              rank=TRUNCATED_RANK if truncated else LANDMARKS)


#: Truncations claiming optimal rank: name -> (description, which eigenpairs they keep).
TRUNCATION_MUTANTS = {
    "truncated_eigh_keeps_smallest": (
        "rank-r truncation keeping eigh's first r eigenpairs (ascending order: the smallest)",
        "first"),
}

NYSTROM_MUTANTS = {
    "nystrom_w_instead_of_pinv": ("Nyström K̃ = C·W·Cᵀ (W instead of W⁺)", "W"),
    "nystrom_no_pinv_cutoff": (
        "Nyström with W⁺ from every eigenvalue, however small (no cutoff)", "no_cutoff"),
    "nystrom_reports_one_landmark_less": (
        "Nyström returning its landmark indices with an off-by-one slice (idx[1:]): K̃ has "
        "rank |S| + 1 for the |S| landmarks it reports", "pinv_drops_landmark"),
    "nystrom_jitter_subtracted": (
        "Nyström with the regulariser's sign flipped: (W − λI)⁻¹ instead of (W + λI)⁻¹, "
        "λ = 1e-3·mean diag W", "jitter_subtracted"),
    "nystrom_truncation_keeps_smallest": (
        "truncated Nyström (6 landmarks, rank 3) whose W_r⁺ takes eigh's first three "
        "eigenpairs (ascending order: the smallest)", "truncated_smallest"),
}

#: The property a Nyström mutant is written for, where it is one property (the others: the
#: nystrom and PSD families, the catalogue's default).
NYSTROM_KILLERS: dict[str, tuple[str, ...]] = {
    "nystrom_reports_one_landmark_less": (
        "nystrom_properties::test_error_is_at_least_eckart_young",),
    "nystrom_jitter_subtracted": ("psd_properties::test_nystrom_approximation_is_psd",),
    "truncated_eigh_keeps_smallest": (
        "nystrom_properties::test_error_is_eckart_young_for_optimal_rank",),
    "nystrom_truncation_keeps_smallest": (
        "nystrom_properties::test_truncation_is_the_best_rank_r_on_the_landmarks",),
}
