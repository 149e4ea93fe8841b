"""Positive semi-definiteness of Gram matrices: a float check with a derived threshold, and an
mpmath check that decides PSD-ness of exact kernels on given points. docs/math.md §10.

Float check (:func:`psd_float`). ``K̂`` is a Gram matrix whose entries carry errors
``|K̂ᵢⱼ − Kᵢⱼ| ≤ Eᵢⱼ`` (default: entries correctly rounded to ``dtype``, ``E = u_dtype·|K̂|``; or
pass ``entry_error``, e.g. from :func:`kernel_verify.verify.tolerance.dot_error_bound`). Its
symmetric part is formed in float64 (one more rounding, ``u₆₄·|K̂ₛ|``) and its eigenvalues computed
by LAPACK ``dsyevd`` (``numpy.linalg.eigh``). Then, if the exact K is PSD,

    λ̂_min ≥ −τ,   τ = ‖(E + Eᵀ)/2 + u₆₄|K̂ₛ|‖_F  +  2·c·n·ε·‖K̂ₛ‖₁,   c = 500, ε = 2⁻⁵²

* first term: Weyl's inequality, ``|λᵢ(K̂ₛ) − λᵢ(K)| ≤ ‖K̂ₛ − K‖₂ ≤ ‖K̂ₛ − K‖_F``;
* second term: the eigensolver's backward error. The computed decomposition ``ÛΛ̂Ûᵀ`` satisfies
  ``‖K̂ₛ − ÛΛ̂Ûᵀ‖₁ ≤ c·n·ε·‖K̂ₛ‖₁`` and ``‖I − ÛᵀÛ‖₁ ≤ c·n·ε`` (LAPACK Users' Guide §4.7: backward
  error ``p(n)·ε·‖A‖`` with ``p(n)`` "a modestly growing function of n", not a stated constant).
  LAPACK's own test suite checks exactly these two ratios and reports a failure above the
  threshold of its input file ``TESTING/sep.in``, 50.0; c = 500 is ten times that threshold.
  So c is an assumption, not a theorem: the eigensolver keeps both ratios below 10× the level
  LAPACK's tests demand of it (measured with ``numpy.linalg.eigh``: at most 1.3 and 2.3 over
  240 random symmetric and near-singular PSD matrices, n from 2 to 300).
  ``ÛΛ̂Ûᵀ`` has eigenvalues ``λ̂ᵢ·θᵢ`` with ``θᵢ`` within ``c·n·ε`` of 1 (Ostrowski), so the
  non-orthogonality costs at most ``c·n·ε·|λ̂_min| ≤ c·n·ε·‖K̂ₛ‖₁``; hence the factor 2.
  (``‖·‖₂ ≤ ‖·‖₁`` for symmetric matrices.)

So ``λ̂_min < −τ`` proves the exact Gram matrix is indefinite (a witness is the eigenvector), and a
PSD kernel is never rejected. With correctly rounded entries ``τ ≈ u·‖K‖_F ≤ u·√n·‖K‖₂``, i.e.
the ``c·n·u·‖K‖₂`` form with ``c ≤ 1/√n`` plus the eigensolver's ``1000·n·ε`` part.

mpmath check (:func:`psd_mp`). The Gram matrix is formed at ``dps`` digits from the float points
(converted exactly) and factorised by LDLᵀ with diagonal pivoting (the largest remaining
diagonal first; Higham, *Accuracy and Stability*, §10.3). With ``tol = n·10^(guard − dps)·max|K|``:

* a remaining diagonal ``< −tol`` → indefinite; witness ``z`` with ``zᵀKz < 0``;
* every remaining entry ``≤ tol`` in magnitude → PSD at the working precision (semidefinite when
  stopped early: the numerical rank is reported; singular Grams such as the linear kernel with
  ``n > d`` stop here);
* remaining diagonals all ``≤ tol`` but an off-diagonal ``|Sᵢⱼ| > tol`` → indefinite, because the
  2×2 minor ``Sᵢᵢ·Sⱼⱼ − Sᵢⱼ² < 0``; witness built from ``eᵢ − sign(Sᵢⱼ)·eⱼ``.

Every witness is re-checked by computing ``zᵀKz`` directly in mpmath. The ``guard`` digits absorb
the rounding of the entries and of the elimination (pivoted LDLᵀ of a PSD matrix has no element
growth: remaining entries never exceed the largest diagonal).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.references.mp import to_mp, working_precision
from kernel_verify.verify.tolerance import FORMATS, dtype_name

__all__ = ["EIGH_BACKWARD_C", "PsdResult", "psd_float", "psd_mp"]

#: Assumed bound on ``‖A − UΛUᵀ‖/(n·‖A‖·ε)`` and ``‖I − UᵀU‖/(n·ε)``: ten times the threshold
#: (50.0) above which LAPACK's test suite reports these ratios as failures (TESTING/sep.in);
#: module docstring.
EIGH_BACKWARD_C = 500.0
_EPS64 = 2.0**-52  # LAPACK's "ulp" = eps·base


@dataclass(frozen=True)
class PsdResult:
    """Outcome of a PSD check; ``str(result)`` explains it.

    ``value`` is the smallest computed eigenvalue (float check) or the smallest pivot, including
    the remainder's diagonal when the factorisation stops early (mp check);
    ``threshold`` the tolerance it was compared with (PSD iff ``value ≥ −threshold``, and for the
    mp check no large off-diagonal remainder); ``witness`` a vector with ``zᵀKz < 0`` when the
    matrix is indefinite, with ``witness_value = zᵀKz``."""

    is_psd: bool
    method: str
    n: int
    value: float
    threshold: float
    norm: float
    derivation: str
    rank: int | None = None
    witness: np.ndarray | None = None
    witness_value: float | None = None
    reason: str = ""

    def explain(self) -> str:
        verdict = "PSD" if self.is_psd else "NOT PSD"
        lines = [
            f"{verdict} ({self.method}, n = {self.n}): value {self.value:.6g} vs "
            f"−threshold {-self.threshold:.6g} (norm {self.norm:.6g})",
            f"  threshold: {self.derivation}",
        ]
        if self.rank is not None:
            lines.append(f"  numerical rank {self.rank}")
        if self.reason:
            lines.append(f"  {self.reason}")
        if self.witness is not None:
            lines.append(f"  witness zᵀKz = {self.witness_value:.6g} for z = {self.witness!r}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()


def _square_float(name: str, k: Any) -> np.ndarray:
    if type(k).__module__.startswith("torch"):
        k = k.detach().to("cpu").double().numpy()
    a = np.asarray(k)
    if a.dtype == object or not (
        np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)
    ):
        raise TypeError(f"{name} must be a real float array, got dtype {a.dtype}")
    a = a.astype(np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 1:
        raise ValueError(f"{name} must be a non-empty square matrix, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or Inf")
    return a


def psd_float(K: Any, dtype: Any, *, entry_error: Any = None) -> PsdResult:
    """Is the float Gram matrix ``K`` consistent with an exact PSD matrix? (Module docstring.)

    ``dtype``: the dtype K's entries were computed in (sets the default entry error
    ``u_dtype·|Kᵢⱼ|``, i.e. correctly rounded entries). ``entry_error``: absolute bounds on
    ``|Kᵢⱼ − exact Kᵢⱼ|`` (scalar or n×n array) when entries are computed, not rounded."""
    k = _square_float("K", K)
    u = FORMATS[dtype_name(dtype)].u
    n = k.shape[0]
    if entry_error is None:
        e = u * np.abs(k)
        entry_how = f"entries correctly rounded to {dtype_name(dtype)} (u = {u:.3g})"
    else:
        e = np.broadcast_to(np.asarray(entry_error, dtype=np.float64), k.shape)
        if not np.isfinite(e).all() or (e < 0).any():
            raise ValueError("entry_error must be finite and >= 0")
        entry_how = "entry errors as given"
    asym = np.abs(k - k.T)
    allowed = e + e.T
    ks = 0.5 * (k + k.T)
    lam, vecs = np.linalg.eigh(ks)  # LAPACK dsyevd
    e_sym = 0.5 * (e + e.T) + 2.0**-53 * np.abs(ks)
    norm1 = float(np.abs(ks).sum(axis=0).max())
    tau_entries = float(np.sqrt(np.sum(e_sym * e_sym)))
    tau_eig = 2.0 * EIGH_BACKWARD_C * n * _EPS64 * norm1
    tau = tau_entries + tau_eig
    lam_min = float(lam[0])
    derivation = (
        f"τ = ‖E‖_F {tau_entries:.3g} ({entry_how}) + 2·{EIGH_BACKWARD_C:g}·n·ε·‖K‖₁ "
        f"{tau_eig:.3g} (syevd backward error, c = 10× LAPACK's sep.in test threshold)"
    )
    reason = ""
    symmetric = bool((asym <= allowed).all())
    if not symmetric:
        i, j = np.unravel_index(int(np.argmax(asym - allowed)), k.shape)
        reason = (
            f"K is not symmetric within its entry error: |K[{i},{j}] − K[{j},{i}]| = "
            f"{asym[i, j]:.3g} > {allowed[i, j]:.3g}"
        )
    is_psd = symmetric and lam_min >= -tau
    witness = witness_value = None
    if lam_min < -tau:
        witness = vecs[:, 0]
        witness_value = float(witness @ ks @ witness)
        reason = (reason + "; " if reason else "") + "λ_min < −τ: the exact matrix is indefinite"
    return PsdResult(
        is_psd=is_psd, method="float64 eigh (LAPACK syevd)", n=n, value=lam_min, threshold=tau,
        norm=norm1, derivation=derivation, witness=witness, witness_value=witness_value,
        reason=reason,
    )


KernelMp = Callable[[np.ndarray, np.ndarray], Any]


def _gram(kernel: KernelMp, points: Any) -> np.ndarray:
    p = np.asarray(points)
    if p.dtype == object or not np.issubdtype(p.dtype, np.floating):
        raise TypeError(f"points must be a float array of shape (n, d), got dtype {p.dtype}")
    if p.ndim != 2 or p.shape[0] < 1:
        raise ValueError(f"points must have shape (n, d) with n >= 1, got {p.shape}")
    if not np.isfinite(p).all():
        raise ValueError("points contain NaN or Inf")
    xs = [to_mp(row) for row in p]
    n = len(xs)
    g = np.empty((n, n), dtype=object)
    for i in range(n):
        for j in range(i, n):
            g[i, j] = g[j, i] = mpmath.mpf(kernel(xs[i], xs[j]))
    return g


def _as_mp_matrix(k: Any) -> np.ndarray:
    a = np.asarray(k)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 1:
        raise ValueError(f"K must be a non-empty square matrix, got shape {a.shape}")
    if a.dtype != object:
        return to_mp(_square_float("K", a))
    out = np.empty(a.shape, dtype=object)
    for idx, v in np.ndenumerate(a):
        val = mpmath.mpf(v)
        if not mpmath.isfinite(val):
            raise ValueError(f"K contains a non-finite entry at {idx}")
        out[idx] = val
    if any(out[i, j] != out[j, i] for i in range(a.shape[0]) for j in range(i)):
        raise ValueError("K must be symmetric (an exact Gram matrix)")
    return out


def _lift(k: np.ndarray, done: list[int], rest: list[int], e: np.ndarray) -> np.ndarray:
    """``z`` with ``zᵀKz = eᵀSe`` for the Schur complement S on ``rest``: ``z_rest = e``,
    ``z_done = −K_dd⁻¹ K_dr e``."""
    n = k.shape[0]
    z = np.array([mpmath.mpf(0)] * n, dtype=object)
    for r, v in zip(rest, e, strict=True):
        z[r] = v
    if done:
        kdd = mpmath.matrix(k[np.ix_(done, done)].tolist())
        rhs = mpmath.matrix((k[np.ix_(done, rest)] @ e).tolist())
        sol = mpmath.lu_solve(kdd, rhs)
        for idx, d in enumerate(done):
            z[d] = -sol[idx]
    return z


def psd_mp(
    K: Any,
    points: Any = None,
    *,
    dps: int | None = None,
    guard: int = 10,
) -> PsdResult:
    """Decide PSD-ness of an exact Gram matrix in mpmath (module docstring).

    ``K``: an mp (object) or float symmetric matrix, or a kernel ``k(x, y)`` taking two mp
    vectors and returning an mpf, with ``points`` (float array ``(n, d)``, converted exactly).
    ``dps``: working digits (default ``KV_MP_DPS``); ``guard``: digits of ``tol`` above the
    working precision (``1 <= guard < dps − 5``)."""
    if isinstance(guard, bool) or not isinstance(guard, int) or guard < 1:
        raise ValueError(f"guard must be an integer >= 1, got {guard!r}")
    with working_precision(dps) as digits:
        if guard >= digits - 5:
            raise ValueError(f"guard ({guard}) must be < dps − 5 = {digits - 5}")
        if callable(K):
            if points is None:
                raise ValueError("a kernel function needs points of shape (n, d)")
            k = _gram(K, points)
        else:
            if points is not None:
                raise ValueError("points are only used with a kernel function")
            k = _as_mp_matrix(K)
        return _pivoted_ldlt(k, digits, guard)


def _pivoted_ldlt(k: np.ndarray, digits: int, guard: int) -> PsdResult:
    n = k.shape[0]
    kmax = max(abs(v) for v in k.ravel())
    tol = n * mpmath.mpf(10) ** (guard - digits) * kmax
    derivation = f"tol = n·10^({guard} − {digits})·max|K| = {float(tol):.3g}"
    s = k.copy()
    rest = list(range(n))
    done: list[int] = []
    min_pivot = None
    method = f"mpmath pivoted LDLᵀ at {digits} digits"

    def finish(is_psd: bool, reason: str, e_vec: np.ndarray | None = None) -> PsdResult:
        witness = witness_value = None
        if e_vec is not None:
            z = _lift(k, done, rest, e_vec)
            value = z @ k @ z
            if not value < 0:
                raise RuntimeError(f"witness check failed: zᵀKz = {value} (please report)")
            scale = max(abs(v) for v in z)
            witness = np.array([float(v / scale) for v in z])
            witness_value = float(value / scale**2)
        return PsdResult(
            is_psd=is_psd, method=method, n=n,
            value=float(min_pivot if min_pivot is not None else 0), threshold=float(tol),
            norm=float(kmax), derivation=derivation, rank=len(done), witness=witness,
            witness_value=witness_value, reason=reason,
        )

    while rest:
        sub = s[np.ix_(rest, rest)]
        diag = [sub[i, i] for i in range(len(rest))]
        p = int(np.argmax([float(v) for v in diag]))
        low = int(np.argmin([float(v) for v in diag]))
        if diag[low] < -tol:
            min_pivot = diag[low] if min_pivot is None else min(min_pivot, diag[low])
            e = np.array([mpmath.mpf(int(i == low)) for i in range(len(rest))], dtype=object)
            return finish(False, "negative diagonal in the Schur complement", e)
        biggest = max(abs(v) for v in sub.ravel())
        if biggest <= tol:
            min_pivot = diag[low] if min_pivot is None else min(min_pivot, diag[low])
            return finish(True, f"remainder ≤ tol after {len(done)} pivots (semidefinite)")
        piv = diag[p]
        if piv <= tol:
            i, j = np.unravel_index(int(np.argmax([float(abs(v)) for v in sub.ravel()])), sub.shape)
            e = np.array([mpmath.mpf(0)] * len(rest), dtype=object)
            e[i] = mpmath.mpf(1)
            e[j] = -mpmath.sign(sub[i, j])
            return finish(False, "small diagonal with a large off-diagonal (2×2 minor < 0)", e)
        min_pivot = piv if min_pivot is None else min(min_pivot, piv)
        r = rest[p]
        others = [q for q in rest if q != r]
        col = s[others, r]
        s[np.ix_(others, others)] = s[np.ix_(others, others)] - np.outer(col, col) / piv
        done.append(r)
        rest = others
    return finish(True, f"all {n} pivots > tol (positive definite)")
