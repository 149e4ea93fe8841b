"""Random frequency matrices, drawn once in float64 NumPy and shared by every backend.

Every construction returns an explicit ``(m, d)`` matrix ``W`` at unit scale (the kernel
bandwidth σ is applied by the feature map as ``x/σ``). docs/math.md §3.

* ``iid``: rows ``wᵢ ~ N(0, I_d)``.
* ``orthogonal``: blocks of ``d`` rows, each block a Haar-random orthogonal matrix (QR of a
  Gaussian matrix with the sign correction ``Q ← Q·diag(sign(diag R))``, Mezzadri 2007), every row
  scaled by an independent norm ``rᵢ ~ χ_d``. Rows are marginally ``N(0, I)`` and exactly
  orthogonal within a block; the last block is truncated to ``m mod d`` rows.
* ``simplex``: simplex random features (SimRFs; Reid et al., ICML 2023): blocks of ``d`` rows
  whose directions are the ``d`` unit vertices of a regular simplex centred at the origin
  (pairwise inner product exactly ``−1/(d−1)``), ``sᵢ = √(d/(d−1))·(eᵢ − 𝟙/d)``, turned by one
  Haar-random orthogonal matrix per block, every row scaled by an independent ``rᵢ ~ χ_d``. Each
  direction is uniform on the sphere, so rows are marginally ``N(0, I)``; the last block is
  truncated to ``m mod d`` rows; for ``d = 1`` there is no simplex and rows are i.i.d.
  (docs/math.md §19).
* ``orthogonal_fixed_norm``: the same directions with every norm fixed to ``√d`` (regularised ORF).
  Rows are uniform on the sphere of radius √d, *not* Gaussian: estimators become biased.
* ``sorf``: ``√p·H D₁ H D₂ H D₃`` blocks (normalised Hadamard ``H`` of size ``p = 2^⌈log₂ d⌉``,
  Rademacher diagonals; Yu et al. 2016), restricted to the first ``d`` columns (equivalent to
  zero-padding ``x`` to length ``p``). Fixed row norm ``√p``: biased.
* ``fastfood``: ``(1/√p)·S H G Π H B`` blocks (±1 Hadamard ``H``, permutation ``Π``, Gaussian
  diagonal ``G``, Rademacher diagonal ``B``, ``S_ii = sᵢ/‖G‖_F`` with ``sᵢ ~ χ_p``; Le et al.
  2013), first ``d`` columns. For any fixed ``z``, each ``[Wz]_j ~ N(0, ‖z‖²)`` exactly, so
  per-feature estimators stay unbiased; features inside a block are dependent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import hadamard

from kernel_verify.impls.validation import check_positive_int, check_rng

__all__ = [
    "MATRICES",
    "ORTHOGONAL_MATRICES",
    "SIMPLEX_MATRICES",
    "UNBIASED_MATRICES",
    "StructuredFactors",
    "draw_factors",
    "draw_matrix",
    "factors_matrix",
    "haar_orthogonal",
    "simplex_directions",
]


def _check_rng(rng: np.random.Generator) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")


def haar_orthogonal(rng: np.random.Generator, d: int) -> np.ndarray:
    """A Haar-distributed ``d×d`` orthogonal matrix: QR of a Gaussian matrix, signs corrected."""
    check_rng("rng", rng)
    d = check_positive_int("d", d)
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    signs = np.sign(np.diag(r))
    signs[signs == 0] = 1.0
    return q * signs  # multiplies column j by sign(R_jj)


def _iid(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    return rng.standard_normal((m, d))


def _haar_blocks(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """The first ``m`` rows of ``⌈m/d⌉`` stacked :func:`haar_orthogonal` blocks, drawn in one
    call: the Gaussian stack consumes the generator as ``⌈m/d⌉`` separate draws do, and the
    batched QR factors each matrix as a single QR does, so the matrix is the same bit for bit
    (``tests/test_haar_blocks.py``) at a quarter of the per-block overhead."""
    count = -(-m // d)
    q, r = np.linalg.qr(rng.standard_normal((count, d, d)))
    signs = np.sign(np.diagonal(r, axis1=-2, axis2=-1)).copy()
    signs[signs == 0] = 1.0
    return (q * signs[:, None, :]).reshape(count * d, d)[:m]


def _orthogonal(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    directions = _haar_blocks(rng, m, d)
    norms = np.sqrt(rng.chisquare(d, size=m))
    return directions * norms[:, None]


def simplex_directions(d: int) -> np.ndarray:
    """The ``d×d`` matrix whose rows are the unit vertices of a regular simplex centred at the
    origin: ``sᵢ = √(d/(d−1))·(eᵢ − 𝟙/d)``, so ``sᵢᵀsᵢ = 1`` and ``sᵢᵀsⱼ = −1/(d−1)`` (i ≠ j)
    (Reid et al. 2023, §3; docs/math.md §19). ``d ≥ 2``."""
    d = check_positive_int("d", d)
    if d < 2:
        raise ValueError(f"a regular simplex of d unit vectors needs d >= 2, got d={d}")
    return (np.eye(d) - 1.0 / d) * np.sqrt(d / (d - 1.0))


def _simplex(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    if d == 1:
        return rng.standard_normal((m, 1))
    count = -(-m // d)
    rotations = _haar_blocks(rng, count * d, d).reshape(count, d, d)
    directions = (simplex_directions(d) @ rotations).reshape(count * d, d)[:m]
    norms = np.sqrt(rng.chisquare(d, size=m))
    return directions * norms[:, None]


def _orthogonal_fixed_norm(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    return _haar_blocks(rng, m, d) * np.sqrt(d)


def _padded_size(d: int) -> int:
    return 1 << max(0, (d - 1).bit_length())


def _rademacher(rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
    """Independent ±1 signs. One call of any ``size`` consumes the generator exactly as calls
    for its rows in order would (one 32-bit draw per sign), so the signs of a whole SORF draw
    come from one call."""
    return rng.choice(np.array([-1.0, 1.0]), size=size)


@dataclass(frozen=True)
class StructuredFactors:
    """The random factors of a SORF or Fastfood draw, block by block (``blocks = ⌈m/p⌉``).

    SORF block: ``√p·h D₁ h D₂ h D₃`` with ``h = H/√p``; ``diagonals[:, i]`` is ``D_(i+1)``.
    Fastfood block: ``(1/√p)·S H G Π H B``; ``diagonals[:, 0]`` is ``B``, ``[:, 1]`` is ``G``,
    ``[:, 2]`` is the diagonal of ``S``, and ``perm`` holds ``Π`` (``(ΠHBx)_i = (HBx)_perm[i]``).
    The matrix is rows ``[:m]``, columns ``[:d]`` of the stacked blocks (``H`` in Sylvester order,
    :func:`scipy.linalg.hadamard`). :func:`draw_matrix` builds it explicitly;
    :mod:`kernel_verify.impls.torch.structured` applies it with a fast Walsh–Hadamard transform.
    """

    kind: str
    m: int
    d: int
    p: int
    diagonals: np.ndarray  # (blocks, 3, p)
    perm: np.ndarray | None = None  # (blocks, p), Fastfood only


def draw_factors(kind: str, rng: np.random.Generator, m: int, d: int) -> StructuredFactors:
    """The random factors of a ``"sorf"``/``"fastfood"`` draw; the generator is consumed exactly
    as :func:`draw_matrix` consumes it, so the same seed gives the same matrix."""
    if kind not in ("sorf", "fastfood"):
        raise ValueError(f"structured kind must be 'sorf' or 'fastfood', got {kind!r}")
    _check_rng(rng)
    m = check_positive_int("m", m)
    d = check_positive_int("d", d)
    p = _padded_size(d)
    blocks = -(-m // p)
    if kind == "sorf":  # D₁, D₂, D₃ of block 0, then of block 1, …
        return StructuredFactors(kind, m, d, p, _rademacher(rng, (blocks, 3, p)))
    diagonals, perms = np.empty((blocks, 3, p)), np.empty((blocks, p), dtype=np.int64)
    for i in range(blocks):  # Fastfood: B, Π, G, S of each block in turn
        diagonals[i, 0] = _rademacher(rng, p)
        perms[i] = rng.permutation(p)
        diagonals[i, 1] = rng.standard_normal(p)
        diagonals[i, 2] = np.sqrt(rng.chisquare(p, size=p)) / np.linalg.norm(diagonals[i, 1])
    return StructuredFactors(kind, m, d, p, diagonals, perms)


def factors_matrix(f: StructuredFactors) -> np.ndarray:
    """The explicit ``(m, d)`` matrix of ``f``: products of the ``p×p`` Hadamard matrices."""
    p = f.p
    h = hadamard(p).astype(np.float64)
    blocks = []
    for i, diag in enumerate(f.diagonals):
        if f.kind == "sorf":
            out = np.eye(p)
            for j in range(3):
                out = out @ (h / np.sqrt(p) * diag[j])  # H·D multiplies column j of H by D_jj
            blocks.append(np.sqrt(p) * out)
        else:
            right = (h * diag[0])[f.perm[i], :]  # Π·H·B
            blocks.append((diag[2][:, None] * (h * diag[1])) @ right / np.sqrt(p))  # S·H·G·Π·H·B
    return np.concatenate(blocks, axis=0)[: f.m, : f.d]


def _sorf(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    return factors_matrix(draw_factors("sorf", rng, m, d))


def _fastfood(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    return factors_matrix(draw_factors("fastfood", rng, m, d))


MATRICES: dict[str, Callable[[np.random.Generator, int, int], np.ndarray]] = {
    "iid": _iid,
    "orthogonal": _orthogonal,
    "orthogonal_fixed_norm": _orthogonal_fixed_norm,
    "simplex": _simplex,
    "sorf": _sorf,
    "fastfood": _fastfood,
}

#: Constructions whose rows are marginally N(0, I) (each per-feature estimator stays unbiased).
UNBIASED_MATRICES = frozenset({"iid", "orthogonal", "simplex", "fastfood"})
#: Constructions with exactly orthogonal rows inside blocks of d. (SORF rows are orthogonal in
#: the zero-padded space of size p; restricted to d < p columns they are not, so it is left out.)
ORTHOGONAL_MATRICES = frozenset({"orthogonal", "orthogonal_fixed_norm"})
#: Constructions whose directions inside blocks of d are the vertices of a regular simplex
#: (pairwise cosine exactly −1/(d−1)).
SIMPLEX_MATRICES = frozenset({"simplex"})


def draw_matrix(kind: str, rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """An ``(m, d)`` float64 frequency matrix of construction ``kind`` (see module docstring)."""
    if kind not in MATRICES:
        raise ValueError(f"matrix kind must be one of {sorted(MATRICES)}, got {kind!r}")
    _check_rng(rng)
    m = check_positive_int("m", m)
    d = check_positive_int("d", d)
    return MATRICES[kind](rng, m, d)
