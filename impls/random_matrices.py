"""Random frequency matrices, drawn once in float64 NumPy and shared by every backend.

Every construction returns an explicit ``(m, d)`` matrix ``W`` at unit scale (the kernel
bandwidth σ is applied by the feature map as ``x/σ``). docs/math.md §3.

* ``iid``: rows ``wᵢ ~ N(0, I_d)``.
* ``orthogonal``: blocks of ``d`` rows, each block a Haar-random orthogonal matrix (QR of a
  Gaussian matrix with the sign correction ``Q ← Q·diag(sign(diag R))``, Mezzadri 2007), every row
  scaled by an independent norm ``rᵢ ~ χ_d``. Rows are marginally ``N(0, I)`` and exactly
  orthogonal within a block; the last block is truncated to ``m mod d`` rows.
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

import numpy as np
from scipy.linalg import hadamard

from kernel_verify.impls.validation import check_positive_int, check_rng

__all__ = [
    "MATRICES",
    "ORTHOGONAL_MATRICES",
    "UNBIASED_MATRICES",
    "draw_matrix",
    "haar_orthogonal",
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


def _blocks(m: int, size: int, make_block: Callable[[], np.ndarray]) -> np.ndarray:
    count = -(-m // size)
    return np.concatenate([make_block() for _ in range(count)], axis=0)[:m]


def _iid(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    return rng.standard_normal((m, d))


def _orthogonal(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    directions = _blocks(m, d, lambda: haar_orthogonal(rng, d))
    norms = np.sqrt(rng.chisquare(d, size=m))
    return directions * norms[:, None]


def _orthogonal_fixed_norm(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    return _blocks(m, d, lambda: haar_orthogonal(rng, d)) * np.sqrt(d)


def _padded_size(d: int) -> int:
    return 1 << max(0, (d - 1).bit_length())


def _rademacher(rng: np.random.Generator, p: int) -> np.ndarray:
    return rng.choice(np.array([-1.0, 1.0]), size=p)


def _sorf(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    p = _padded_size(d)
    h = hadamard(p).astype(np.float64) / np.sqrt(p)

    def block() -> np.ndarray:
        out = np.eye(p)
        for _ in range(3):
            out = out @ (h * _rademacher(rng, p))  # H·D multiplies column j of H by D_jj
        return np.sqrt(p) * out

    return _blocks(m, p, block)[:, :d]


def _fastfood(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    p = _padded_size(d)
    h = hadamard(p).astype(np.float64)

    def block() -> np.ndarray:
        b = _rademacher(rng, p)
        perm = rng.permutation(p)
        g = rng.standard_normal(p)
        s = np.sqrt(rng.chisquare(p, size=p)) / np.linalg.norm(g)
        hb = h * b  # H·B
        right = hb[perm, :]  # Π·H·B
        return (s[:, None] * (h * g)) @ right / np.sqrt(p)  # S·H·G·Π·H·B / √p

    return _blocks(m, p, block)[:, :d]


MATRICES: dict[str, Callable[[np.random.Generator, int, int], np.ndarray]] = {
    "iid": _iid,
    "orthogonal": _orthogonal,
    "orthogonal_fixed_norm": _orthogonal_fixed_norm,
    "sorf": _sorf,
    "fastfood": _fastfood,
}

#: Constructions whose rows are marginally N(0, I) (each per-feature estimator stays unbiased).
UNBIASED_MATRICES = frozenset({"iid", "orthogonal", "fastfood"})
#: Constructions with exactly orthogonal rows inside blocks of d. (SORF rows are orthogonal in
#: the zero-padded space of size p; restricted to d < p columns they are not, so it is left out.)
ORTHOGONAL_MATRICES = frozenset({"orthogonal", "orthogonal_fixed_norm"})


def draw_matrix(kind: str, rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    """An ``(m, d)`` float64 frequency matrix of construction ``kind`` (see module docstring)."""
    if kind not in MATRICES:
        raise ValueError(f"matrix kind must be one of {sorted(MATRICES)}, got {kind!r}")
    _check_rng(rng)
    m = check_positive_int("m", m)
    d = check_positive_int("d", d)
    return MATRICES[kind](rng, m, d)
