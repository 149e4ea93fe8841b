"""Covariance of two simplex-coupled features, variance of SimRF estimators (docs/math.md §19).

Simplex random features (Reid, Choromanski, Likhosherstov & Weller, "Simplex Random Features",
ICML 2023): inside a block of d rows, ``wᵢ = rᵢθᵢ`` with ``rᵢ ~ χ_d`` independent of each other
and of the directions, and ``θ₁ … θ_d`` the vertices of a regular simplex turned by one Haar
rotation, so ``θᵢᵀθⱼ = c = −1/(d−1)`` exactly (i ≠ j). For a per-frequency term that depends on w
only through one projection ``t = wᵀz`` and ``‖w‖`` (the exponential sums of
:mod:`kernel_verify.verify.moments.integrands`), as for orthogonal rows
(:mod:`kernel_verify.verify.moments.orf`, the case ``c = 0``),

    E[h(w₁)h(w₂)] = E[H(v₁)H(v₂)],   H(v) = Σ c_t·E_r exp(λ_t‖z‖·r·v + e_t·r²),

with ``v₁ = θ₁ᵀẑ``, ``v₂ = θ₂ᵀẑ``. Write ``θ₂ = c·θ₁ + s·θ⊥`` (``s = √(1 − c²)``, θ⊥ the unit
vector of θ₂'s part orthogonal to θ₁): the pair ``(θ₁, θ⊥)`` is a Haar-random orthonormal pair,
so ``(a, b) = (θ₁ᵀẑ, θ⊥ᵀẑ)`` has the disk law of two coordinates of a uniform unit vector,
whose moments are ``E[a^(2p)b^(2q)] = (½)_p(½)_q/(d/2)_(p+q)`` (odd ones vanish), and
``v₁ = a``, ``v₂ = c·a + s·b``. Expanding ``H(v) = Σₙ hₙvⁿ`` with
``hₙ = Σ_t c_t·(λ_t‖z‖)ⁿ·E[rⁿe^(e_t r²)]/n!``,
``E[rⁿe^(er²)] = (1−2e)^(−(d+n)/2)·2^(n/2)Γ((d+n)/2)/Γ(d/2)``, and ``v₂ⁿ`` binomially:

    E[H(v₁)H(v₂)] = Σ_(j,n) h_j h_n Σ_k C(n,k) c^k s^(n−k) E[a^(j+k) b^(n−k)],

an absolutely convergent triple series (``|a|, |v₂| ≤ 1``, so the tail past N is at most
``2·Σ_(n>N)|hₙ|·Σₙ|hₙ|``; hₙ decays like ``κⁿ/Γ(n/2+1)``, ``κ = |λ|‖z‖/√(1−2e)``), summed until
that bound falls below ``10^-(dps+5)`` of the running scale. ``C = E[h(w₁)h(w₂)] − (E h)²``.
Supported ``κ ≤ 6`` (cost grows like ``κ⁶``); beyond, :class:`QuadratureError`.

The second route (:func:`coupled_covariance_quadrature`) integrates ``H(a)·H(c·a + s·b)`` over
the same disk law numerically (``(a, b) = sin ψ·(cos φ, sin φ)``, density
``Γ(d/2)/(πΓ(d/2−1))·sin ψ cos^(d−3)ψ dψ dφ``; the unit circle for d = 2): Gauss–Legendre in
ψ, the trapezoidal rule in φ, doubled until two levels agree. At ``c = 0`` both routes are the
ORF covariance of :mod:`kernel_verify.verify.moments.orf`
(``tests/test_simplex_moments.py`` checks the three against each other).

The estimator with m rows in blocks of d has ``Var = (m·V₁ + P·C)/m²``, P the ordered same-block
pairs (:func:`kernel_verify.verify.moments.orf.orf_variance`). Covered: the formulas ORF covers
(rff_pairs, rff_phase, softmax_trig, softmax_positive, softmax_hyperbolic, gerf); relu features
need two projections per row and are not covered (:class:`NotImplementedError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.moments.gauss_hermite import QuadratureError
from kernel_verify.verify.moments.orf import _one_projection, chi_mgf, disk_level, refine_levels

__all__ = ["MAX_KAPPA", "coupled_covariance", "coupled_covariance_quadrature", "simplex_cosine"]

#: Largest ``κ = |λ|‖z‖/√(1−2e)`` the series route accepts (module docstring).
MAX_KAPPA = 6.0


def simplex_cosine(d: int) -> Any:
    """``c = −1/(d−1)``: the cosine between two directions of one simplex block (d ≥ 2)."""
    if d < 2:
        raise ValueError(f"two simplex rows need d >= 2, got d={d}")
    return -mpmath.mpf(1) / (d - 1)


def _kappa(terms, znorm) -> Any:
    return max((abs(lam) * znorm / mpmath.sqrt(1 - 2 * mpmath.mpf(e)) for _, lam, e in terms),
               default=mpmath.mpf(0))


def _coefficients(terms, znorm, d: int, tol: Any) -> list:
    """``hₙ`` (all n) until the tail bound is below ``tol`` times ``Σ|hₙ|``."""
    half_d = mpmath.mpf(d) / 2
    chains = []
    for c, lam, e in terms:
        shrink = 1 - 2 * mpmath.mpf(e)
        k = lam * znorm / mpmath.sqrt(shrink)
        # tₙ = c·(1−2e)^(−d/2)·kⁿ·μₙ/n!, μₙ = E rⁿ (r ~ χ_d), μ_(n+2) = (d + n)·μₙ
        mu1 = mpmath.sqrt(2) * mpmath.exp(mpmath.loggamma(half_d + mpmath.mpf(1) / 2)
                                          - mpmath.loggamma(half_d))
        chains.append((c * shrink ** (-half_d), k, [mpmath.mpf(1), mu1]))
    kappa = float(_kappa(terms, znorm))
    out: list = []
    total = mpmath.mpf(0)
    n, small = 0, 0
    fact = mpmath.mpf(1)
    while True:
        if n > 0:
            fact *= n
        hn = mpmath.mpc(0)
        for base, k, mu in chains:
            if n >= len(mu):
                mu.append((d + n - 2) * mu[n - 2])
            hn += base * k**n * mu[n] / fact
        out.append(hn)
        total += abs(hn)
        small = small + 1 if abs(hn) <= tol * total else 0
        # past the peak (n > κ² + d) terms fall faster than geometrically with ratio < ½, so
        # six consecutive negligible terms bound the tail by twice the last
        if small >= 6 and n > kappa**2 + d:
            return out
        n += 1


def coupled_covariance(
    formula: str, x: np.ndarray, y: np.ndarray, config: Mapping[str, Any], mean: Any, dps: int,
    cosine: Any,
) -> Any:
    """``C = Cov(h(w₁), h(w₂))`` for two rows with independent χ_d norms whose directions are a
    uniformly rotated pair at cosine ``cosine`` (−1/(d−1) for simplex rows, 0 for orthogonal
    rows), by the triple series of the module docstring; ``mean = E h``; x, y mp vectors."""
    with mpmath.workdps(dps + 10):
        terms, znorm, d = _one_projection(formula, x, y, config)
        if d < 2:
            raise ValueError("two coupled rows need d >= 2")
        kappa = _kappa(terms, znorm)
        if kappa > MAX_KAPPA:
            raise QuadratureError(
                f"simplex covariance series for {formula!r}: κ = {mpmath.nstr(kappa, 4)} > "
                f"{MAX_KAPPA} is outside the supported domain")
    work = dps + 15 + int(float(kappa) ** 2 / 2.3)  # the series' terms reach ~e^(κ²)
    with mpmath.workdps(work):
        terms, znorm, d = _one_projection(formula, x, y, config)
        cs = mpmath.mpf(cosine)
        if abs(cs) > 1:
            raise ValueError(f"cosine must lie in [-1, 1], got {cosine}")
        sn = mpmath.sqrt(1 - cs * cs)
        tol = mpmath.mpf(10) ** (-(dps + 8))
        h = _coefficients(terms, znorm, d, tol)
        count = len(h)
        half_d, half = mpmath.mpf(d) / 2, mpmath.mpf(1) / 2
        poch = [mpmath.rf(half, i) for i in range(count + 1)]
        poch_d = [mpmath.rf(half_d, i) for i in range(2 * count + 1)]
        cpow = [abs(cs) ** k for k in range(count)]
        spow = [sn**k for k in range(count)]
        sign = -1 if cs < 0 else 1
        # Pruning: every moment E[a^p b^q] is at most 1 in size, so the terms of one (n, k)
        # add up to at most |hₙ|·C(n,k)|c|^k s^(n−k)·Σ|h|; those below ``cut`` are left out
        # (in all at most count²·cut·Σ|h| = tol·(Σ|h|)²), and so are the j past the last
        # |h_j| ≥ cut (h decays monotonically there: that tail is below count·cut·Σ|h|).
        absum = mpmath.fsum(abs(t) for t in h)
        cut = tol * absum / count**2
        jmax = max((j for j in range(count) if abs(h[j]) >= cut), default=0)
        # The inner sums Σ_j h_j·(½)_p/(d/2)_(p+q) run in fixed point (Python integers at
        # ``bits`` fractional bits, h scaled by 1/Σ|h|, every ratio ≤ 1): each product errs by at
        # most 2^-bits, so a sum of ≤ count terms by count·2^-bits·Σ|h| — far below ``cut``.
        bits = int(mpmath.mp.prec) + 2 * count.bit_length() + 8
        one = 1 << bits
        h_re = [int(mpmath.nint(mpmath.re(t) / absum * one)) for t in h]
        h_im = [int(mpmath.nint(mpmath.im(t) / absum * one)) for t in h]
        complex_h = any(h_im)
        # ratio[q][p] = (½)_p/(d/2)_(p+q), so E[a^(2p) b^(2q)] = ratio[q][p]·(½)_q
        ratio = [[int(mpmath.nint(poch[p] / poch_d[p + q] * one)) for p in range(count)]
                 for q in range(count // 2 + 1)]
        scale = absum / mpmath.mpf(one) ** 2
        total = mpmath.mpc(0)
        for n in range(count):
            if abs(h[n]) * (abs(cs) + sn) ** n < cut:
                continue
            inner = mpmath.mpc(0)
            k = n % 2
            binom = mpmath.mpf(n if k else 1)  # C(n, k)
            while k <= n:  # n − k even
                bound = binom * cpow[k] * spow[n - k]
                if abs(h[n]) * bound >= cut:
                    weight = bound * sign**k * poch[(n - k) // 2]
                    # Σ_j h_j E[a^(j+k) b^(n−k)]: j ≡ k (mod 2)
                    row = ratio[(n - k) // 2]
                    js = range(k % 2, jmax + 1, 2)
                    re = sum(h_re[j] * row[(j + k) // 2] for j in js)
                    im = sum(h_im[j] * row[(j + k) // 2] for j in js) if complex_h else 0
                    inner += weight * mpmath.mpc(re, im) * scale
                binom = binom * (n - k) * (n - k - 1) / ((k + 1) * (k + 2))
                k += 2
            total += h[n] * inner
        cov = mpmath.re(total) - mpmath.mpf(mean) ** 2
    return +cov


def coupled_covariance_quadrature(
    formula: str, x: np.ndarray, y: np.ndarray, config: Mapping[str, Any], mean: Any, dps: int,
    cosine: Any,
) -> Any:
    """The same C by quadrature over the disk law (module docstring): the second route."""
    with mpmath.workdps(dps + 15):
        terms, znorm, d = _one_projection(formula, x, y, config)
        if d < 2:
            raise ValueError("two coupled rows need d >= 2")
        cs = mpmath.mpf(cosine)
        sn = mpmath.sqrt(1 - cs * cs)

        def big_h(v):
            return mpmath.fsum(c * chi_mgf(lam * znorm * v, d, e) for c, lam, e in terms)

        half_d = mpmath.mpf(d) / 2
        const = mpmath.gamma(half_d) / (mpmath.pi * mpmath.gamma(half_d - 1)) if d >= 3 else None

        def level(n_psi: int, n_phi: int):
            phis = [2 * mpmath.pi * j / n_phi for j in range(n_phi)]
            trig = [(mpmath.cos(p), mpmath.sin(p)) for p in phis]
            return disk_level(lambda a, b: big_h(a) * big_h(cs * a + sn * b), trig, n_psi,
                              n_phi, d, dps, const)

        cur = refine_levels(level, 8, 16, 128, dps, mean,
                            f"coupled covariance quadrature for {formula!r} did not converge to "
                            f"{dps} digits: outside the supported domain")
        cov = mpmath.re(cur) - mpmath.mpf(mean) ** 2
    return +cov
