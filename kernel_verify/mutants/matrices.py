"""Broken random-matrix constructions (docs/math.md §3), each claiming what the correct one claims.

Every function has the ``RandomMatrixTarget`` signature ``draw(rng, m, d) -> W (m, d)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.linalg import hadamard

from kernel_verify.impls.random_matrices import draw_matrix, haar_orthogonal, simplex_directions
from kernel_verify.properties.protocol import RandomMatrixTarget

Draw = Callable[[np.random.Generator, int, int], np.ndarray]


def _stack_blocks(m: int, d: int, block: Callable[[], np.ndarray]) -> np.ndarray:
    return np.concatenate([block() for _ in range(-(-m // d))], axis=0)[:m]


def plain_qr(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """Householder QR **without** the sign correction: Q is not Haar (LAPACK makes
    ``R₁₁ = −sign(a₁₁)‖a₁‖``, so ``Q₁₁ < 0`` always), norms χ_d as they should be."""
    def block() -> np.ndarray:
        q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        return q

    return _stack_blocks(m, d, block) * np.sqrt(rng.chisquare(d, size=m))[:, None]


def factorised_norms(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """Sign-corrected (Haar) directions, but each row scaled by the norm of the matching row of
    the Gaussian matrix that was factorised: norms correlated with directions."""
    def block() -> np.ndarray:
        g = rng.standard_normal((d, d))
        q, r = np.linalg.qr(g)
        q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
        return q * np.linalg.norm(g, axis=1)[:, None]

    return _stack_blocks(m, d, block)


def missing_norms(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """Haar directions with the χ_d norms forgotten: unit rows."""
    return _stack_blocks(m, d, lambda: haar_orthogonal(rng, d))


def block_padding(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """Orthogonal blocks without truncating the last one: ``⌈m/d⌉·d`` rows instead of m."""
    count = -(-m // d)
    return draw_matrix("orthogonal", rng, count * d, d)


def rademacher(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """±1 entries: mean 0, E[wwᵀ] = I, sign symmetric, but not Gaussian (‖w‖² = d exactly)."""
    return rng.choice(np.array([-1.0, 1.0]), size=(m, d))


def xavier_scaled(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """Gaussian rows scaled by 1/√d (a layer-initialisation habit): wrong σ."""
    return rng.standard_normal((m, d)) / np.sqrt(d)


def fastfood_unnormalised(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """Fastfood with ``S_ii = sᵢ`` instead of ``sᵢ/‖G‖_F``: rows far too long."""
    p = 1 << max(0, (d - 1).bit_length())
    h = hadamard(p).astype(np.float64)

    def block() -> np.ndarray:
        b = rng.choice(np.array([-1.0, 1.0]), size=p)
        perm = rng.permutation(p)
        g = rng.standard_normal(p)
        s = np.sqrt(rng.chisquare(p, size=p))
        return (s[:, None] * (h * g)) @ (h * b)[perm, :] / np.sqrt(p)

    return _stack_blocks(m, p, block)[:, :d]


def ignores_generator(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """Gaussian rows from NumPy's global generator instead of ``rng``: the same seed no longer
    gives the same draw (so the backends and the reference see different parameters)."""
    return np.random.standard_normal((m, d))  # noqa: NPY002 (the defect)


def _simplex_like(rng: np.random.Generator, m: int, d: int, directions: np.ndarray,
                  norms: Callable[[int], np.ndarray]) -> np.ndarray:
    """Blocks ``directions @ Q`` (Q Haar per block), rows scaled by ``norms(m)``."""
    def block() -> np.ndarray:
        return directions @ haar_orthogonal(rng, d)

    return _stack_blocks(m, d, block) * norms(m)[:, None]


def simplex_wrong_angle(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """SimRFs built from d of the d+1 vertices of the regular simplex of ``R^d``: unit
    directions at cosine ``−1/d`` instead of ``−1/(d−1)`` (Gram ``(1+1/d)I − 𝟙𝟙ᵀ/d``, whose
    symmetric square root ``aI + b𝟙𝟙ᵀ`` gives the rows); still Haar-rotated, norms χ_d, so every
    row is marginally N(0, I) — only the coupling is wrong."""
    if d == 1:
        return rng.standard_normal((m, 1))
    a = np.sqrt(1.0 + 1.0 / d)
    b = (np.sqrt(1.0 / d) - a) / d
    directions = a * np.eye(d) + b * np.ones((d, d))
    return _simplex_like(rng, m, d, directions, lambda k: np.sqrt(rng.chisquare(d, size=k)))


def simplex_normalised_norms(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """SimRFs with every row norm fixed to ``√d`` (the regularised option) instead of χ_d."""
    if d == 1:
        return np.sign(rng.standard_normal((m, 1)))
    return _simplex_like(rng, m, d, simplex_directions(d), lambda k: np.full(k, np.sqrt(d)))


def tiled_rows(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """Gaussian rows, but only ⌈m/2⌉ of them drawn and tiled to m (a buffer filled twice): every
    row marginally N(0, I), half of them copies."""
    half = rng.standard_normal((-(-m // 2), d))
    return np.concatenate([half, half])[:m]


def reused_block(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """ORF whose one Haar block is reused for every block of ``m > d`` rows, each row with a
    fresh χ_d norm: every row marginally N(0, I), but rows ``i`` and ``i + d`` point the same
    way (fewer random directions than m)."""
    q = haar_orthogonal(rng, d)
    return _stack_blocks(m, d, lambda: q) * np.sqrt(rng.chisquare(d, size=m))[:, None]


def _builtin(kind: str) -> Draw:
    return lambda rng, m, d: draw_matrix(kind, rng, m, d)


def target(name: str, draw: Draw, claims: set[str]) -> RandomMatrixTarget:
    return RandomMatrixTarget(f"mutant:{name}", draw, frozenset(claims))


MATRIX_MUTANTS: dict[str, tuple[str, Draw, set[str]]] = {
    "orf_no_sign_correction": (
        "ORF from a plain Householder QR (no sign correction): not Haar", plain_qr,
        {"gaussian_rows", "orthogonal"}),
    "orf_factorised_norms": (
        "ORF with norms from the factorised Gaussian matrix (correlated with directions)",
        factorised_norms, {"gaussian_rows", "orthogonal"}),
    "orf_fixed_norm_claimed_gaussian": (
        "regularised ORF (norms fixed to √d) claiming Gaussian rows",
        _builtin("orthogonal_fixed_norm"), {"gaussian_rows", "orthogonal"}),
    "orf_missing_norms": (
        "ORF whose χ_d row norms were forgotten (unit rows)", missing_norms,
        {"gaussian_rows", "orthogonal"}),
    "orf_block_padding": (
        "ORF returning ⌈m/d⌉·d rows (last block not truncated)", block_padding,
        {"gaussian_rows", "orthogonal"}),
    "iid_claimed_orthogonal": (
        "i.i.d. Gaussian rows claiming exact orthogonality", _builtin("iid"),
        {"gaussian_rows", "orthogonal"}),
    "sorf_claimed_gaussian": (
        "SORF (HD₁HD₂HD₃, fixed row norm) claiming Gaussian rows", _builtin("sorf"),
        {"gaussian_rows"}),
    "rademacher_rows": (
        "±1 (Rademacher) rows claiming Gaussian rows (right first two moments)", rademacher,
        {"gaussian_rows"}),
    "rows_xavier_scaled": (
        "Gaussian rows scaled by 1/√d (wrong σ) claiming N(0, I)", xavier_scaled,
        {"gaussian_rows"}),
    "matrix_ignores_generator": (
        "Gaussian rows drawn from the global NumPy generator, ignoring the rng passed in",
        ignores_generator, {"gaussian_rows"}),
    "fastfood_unnormalised": (
        "Fastfood without the 1/‖G‖_F normalisation of S", fastfood_unnormalised,
        {"gaussian_rows"}),
    "simplex_wrong_angle": (
        "SimRFs from d of the d+1 vertices of a simplex: cosine −1/d, not −1/(d−1)",
        simplex_wrong_angle, {"gaussian_rows", "simplex"}),
    "simplex_normalised_norms": (
        "SimRFs with row norms fixed to √d instead of independent χ_d, claiming Gaussian rows",
        simplex_normalised_norms, {"gaussian_rows", "simplex"}),
    "rows_tiled": (
        "Gaussian rows of which only half are drawn and the rest copied (claims Gaussian rows)",
        tiled_rows, {"gaussian_rows"}),
    "orf_reused_block": (
        "ORF reusing one orthogonal block for every block, fresh χ_d norms (rows i and i + d "
        "parallel)", reused_block, {"gaussian_rows", "orthogonal"}),
    "orthogonal_claimed_simplex": (
        "ORF (orthogonal blocks) claiming simplex blocks", _builtin("orthogonal"),
        {"gaussian_rows", "simplex"}),
}
