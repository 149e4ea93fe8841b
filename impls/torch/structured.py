"""SORF and Fastfood projections ``x Wᵀ`` through a fast Walsh–Hadamard transform (torch).

``W`` is the ``(m, d)`` matrix of :class:`kernel_verify.impls.random_matrices.StructuredFactors`
(the explicit matrix :func:`kernel_verify.impls.random_matrices.draw_matrix` draws from the same
seed). Instead of the ``O(md)`` product, each block of ``p = 2^⌈log₂ d⌉`` rows applies ``p×p``
Hadamard transforms to the zero-padded input: ``O(m log d)`` per input row. Sources: Yu et al. 2016
(SORF, ``√p·h D₁ h D₂ h D₃``), Le et al. 2013 (Fastfood, ``(1/√p)·S H G Π H B``); docs/math.md §3.

The transform: ``H_p = H_(r₁) ⊗ … ⊗ H_(r_k)`` (Sylvester order) with radices ``r ≤ 32``, so
``H_p z`` is ``k`` small products, one per axis of ``z`` viewed as an ``r₁×…×r_k`` array:
``O(p·Σr) = O(p log p)`` operations for bounded radix. Rows are processed in slabs of
:data:`SLAB` so the intermediates stay in cache and no slab-sized temporary is page-faulted anew.
Device-generic: everything follows the device of ``x``.
"""

from __future__ import annotations

import math

import torch

from kernel_verify.impls.random_matrices import StructuredFactors
from kernel_verify.impls.torch.convert import compute_dtype
from kernel_verify.impls.validation import check_array, check_last_dim

__all__ = ["radices", "structured_projections"]

#: rows transformed together (intermediates of SLAB × p values).
SLAB = 256
#: largest radix of one transform stage.
MAX_RADIX_BITS = 5


def _sylvester(r: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    h = torch.ones(1, 1, dtype=dtype, device=device)
    while h.shape[0] < r:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


def radices(p: int) -> list[int]:
    """Radices ``r_i ≤ 2^MAX_RADIX_BITS``, as equal as possible, with ``∏ r_i = p``."""
    bits = p.bit_length() - 1
    if p != 1 << bits:
        raise ValueError(f"transform size must be a power of two, got {p}")
    stages = max(1, -(-bits // MAX_RADIX_BITS))
    split = [bits // stages + (i < bits % stages) for i in range(stages)]
    return [1 << b for b in split]


class Hadamard:
    """The unnormalised Sylvester Hadamard transform ``z ↦ H_p z`` along the last axis."""

    def __init__(self, p: int, dtype: torch.dtype, device: torch.device) -> None:
        self.p = p
        self.mats = [_sylvester(r, dtype, device) for r in radices(p)]

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        rows = z.shape[0]
        pre = 1
        for h in self.mats:  # axis i of the r₁×…×r_k view; H_r is symmetric
            r = h.shape[0]
            post = self.p // (pre * r)
            if post == 1:
                z = z.reshape(-1, r) @ h
            else:
                z = torch.matmul(h, z.reshape(rows * pre, r, post))
            pre *= r
        return z.reshape(rows, self.p)


def structured_projections(x: torch.Tensor, factors: StructuredFactors) -> torch.Tensor:
    """``x Wᵀ`` of shape ``(..., n, m)`` for the SORF/Fastfood matrix ``W`` of ``factors``.

    Equals ``x @ torch.as_tensor(factors_matrix(factors)).T`` up to rounding (unit-tested);
    computed in :func:`kernel_verify.impls.torch.convert.compute_dtype` of ``x`` and returned in
    ``x.dtype``.
    """
    check_array("x", x, min_ndim=2, backend="torch")
    check_last_dim("x", x, factors.d)
    work = compute_dtype(x.dtype)
    p, m, d = factors.p, factors.m, factors.d
    diag = torch.as_tensor(factors.diagonals, dtype=work, device=x.device)
    perm = (None if factors.perm is None
            else torch.as_tensor(factors.perm, device=x.device))
    hadamard = Hadamard(p, work, x.device)
    flat = x.reshape(-1, d).to(work)
    blocks = diag.shape[0]
    out = torch.empty(flat.shape[0], blocks * p, dtype=work, device=x.device)
    for start in range(0, flat.shape[0], SLAB):
        z0 = flat[start:start + SLAB]
        if d < p:
            z0 = torch.nn.functional.pad(z0, (0, p - d))
        for b in range(blocks):
            out[start:start + SLAB, b * p:(b + 1) * p] = _block(z0, hadamard, diag[b],
                                                               None if perm is None else perm[b])
    return out[:, :m].reshape(*x.shape[:-1], m).to(x.dtype)


def _block(z: torch.Tensor, hadamard: Hadamard, diag: torch.Tensor,
           perm: torch.Tensor | None) -> torch.Tensor:
    """One ``p×p`` block applied to the rows of ``z`` (row vectors: ``z ↦ z Bᵀ``)."""
    if perm is None:  # SORF: √p·(H/√p)D₁(H/√p)D₂(H/√p)D₃ z = p^(-1)·H D₁ H D₂ H D₃ z
        z = hadamard(z * diag[2])
        z = hadamard(z.mul_(diag[1]))
        return hadamard(z.mul_(diag[0])).mul_(1.0 / hadamard.p)
    # Fastfood: p^(-1/2)·S H G Π H B z
    z = hadamard(z * diag[0])[:, perm]
    return hadamard(z.mul_(diag[1])).mul_(diag[2] / math.sqrt(hadamard.p))
