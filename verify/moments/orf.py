"""Covariance C of two orthogonal features and the variance of ORF estimators (docs/math.md §3).

Orthogonal rows ``w₁ = r₁θ₁``, ``w₂ = r₂θ₂`` (``rᵢ ~ χ_d`` independent, (θ₁, θ₂) a uniformly random
orthonormal pair). For an integrand depending on w only through one projection ``t = wᵀz`` and
``‖w‖`` — an exponential sum ``h = Σ c·exp(λt + e‖w‖²)``
(:mod:`kernel_verify.verify.moments.integrands`) —

    E[h(w₁)h(w₂)] = E_v[H(v₁)H(v₂)],   H(v) = Σ c·E_r exp(λ‖z‖·r·v + e·r²),

where ``(v₁, v₂) = (θ₁ᵀẑ, θ₂ᵀẑ)`` has density ``Γ(d/2)/(πΓ(d/2−1))·(1−v₁²−v₂²)^((d−4)/2)`` on the
unit disk (d ≥ 3; uniform on the unit circle for d = 2). The inner expectation over ``r ~ χ_d``
is the χ_d moment generating function (term-by-term from ``E rⁿ = 2^(n/2)Γ((d+n)/2)/Γ(d/2)``)

    E e^(cr) = ₁F₁(d/2; 1/2; c²/2) + c√2·Γ((d+1)/2)/Γ(d/2)·₁F₁((d+1)/2; 3/2; c²/2),
    E e^(cr + er²) = (1−2e)^(−d/2)·E e^(cr/√(1−2e))   (e < 1/2, substitute r → r/√(1−2e)).

The disk integral uses ``v = sin ψ·(cos φ, sin φ)``, turning the density into
``Γ(d/2)/(πΓ(d/2−1))·sin ψ cos^(d−3)ψ dψ dφ`` (smooth): Gauss–Legendre in ψ ∈ [0, π/2] and the
trapezoidal rule in φ (periodic: exponential convergence), doubled until two levels agree to
``10^-(dps+3)`` times the scale of the integrand (:func:`orthogonal_covariance_quadrature`,
~0.1–10 s). ``C = E[h(w₁)h(w₂)] − (E h)²``.

The fast default (:func:`orthogonal_covariance`, milliseconds) integrates the same law by its
moments: ``(v₁, v₂)`` are two coordinates of a uniform unit vector, so
``E[v₁^(2a)v₂^(2b)] = (½)_a(½)_b/(d/2)_(a+b)`` (odd moments vanish), and expanding
``H(v) = Σₙ hₙvⁿ`` with ``hₙ = Σ c·(λ‖z‖)ⁿ·E[rⁿe^(er²)]/n!``,
``E[rⁿe^(er²)] = (1−2e)^(−(d+n)/2)·2^(n/2)Γ((d+n)/2)/Γ(d/2)``, gives the absolutely convergent
double series ``E[H(v₁)H(v₂)] = Σ_(a,b) h_(2a)h_(2b)(½)_a(½)_b/(d/2)_(a+b)``, summed until the
terms fall below ``10^-(dps+5)`` of the running scale (tail decays like ``κ^(2a)/a!``,
``κ = |λ|‖z‖/√(1−2e)``; supported ``κ ≲ 15``, beyond which a QuadratureError is raised).

Covered: rff_pairs and rff_phase (z = δ/σ; independent phases make the phase terms vanish from
C), softmax_trig (z = δ), softmax_positive/hyperbolic (z = s), gerf (z = s, and ‖w‖² = r²).
Not covered: relu_features (h depends on two projections wᵀx, wᵀy: the joint law of four
projections of two orthogonal rows would be needed) — :class:`NotImplementedError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.moments.gauss_hermite import QuadratureError, gauss_legendre
from kernel_verify.verify.moments.integrands import FORMULAS_WITH_TERMS, integrand

__all__ = ["chi_mgf", "disk_level", "orf_variance", "orthogonal_covariance",
           "orthogonal_pair_count", "refine_levels"]


def chi_mgf(c: Any, d: int, e: Any = 0) -> Any:
    """``E exp(c·r + e·r²)`` for ``r ~ χ_d`` (formula in the module docstring); c may be complex."""
    e = mpmath.mpf(e)
    if not e < mpmath.mpf(1) / 2:
        raise ValueError(f"E exp(c r + e r²) diverges for e >= 1/2, got {e}")
    shrink = 1 - 2 * e
    c = mpmath.mpmathify(c) / mpmath.sqrt(shrink)
    half_d = mpmath.mpf(d) / 2
    q = c * c / 2
    odd = c * mpmath.sqrt(2) * mpmath.exp(mpmath.loggamma(half_d + mpmath.mpf(1) / 2)
                                          - mpmath.loggamma(half_d))
    value = mpmath.hyp1f1(half_d, mpmath.mpf(1) / 2, q) + odd * mpmath.hyp1f1(
        half_d + mpmath.mpf(1) / 2, mpmath.mpf(3) / 2, q
    )
    return value * shrink ** (-half_d)


def _one_projection(formula: str, x, y, config) -> tuple[list, Any, int]:
    """``[(c, λ, e)]`` and ``‖z‖`` with ``h = Σ c·exp(λ wᵀz + e‖w‖²)`` (phase terms dropped)."""
    if formula not in FORMULAS_WITH_TERMS:
        raise NotImplementedError(
            f"ORF covariance C is not covered for formula {formula!r}: its per-frequency term "
            "depends on two projections wᵀx and wᵀy (or is not an exponential sum)"
        )
    itg = integrand(formula, x, y, config)
    terms = [(key, c) for key, c in itg.terms.items() if key[3] == 0]
    ratio = None
    for (a, b, _e, _k), _c in terms:
        if a == 0 and b == 0:
            continue
        r = ("x", None) if b == 0 else ("ratio", a / b)
        if ratio is None:
            ratio = r
        elif r[0] != ratio[0] or (r[0] == "ratio" and abs(r[1] - ratio[1]) > 0):
            raise NotImplementedError(f"formula {formula!r}: h depends on two projections")
    if ratio is None:
        z, mode = itg.x_eff * 0, ("x", None)
    else:
        mode = ratio
        if mode[0] == "ratio" and abs(mpmath.im(mode[1])) > 0:
            raise NotImplementedError(f"formula {formula!r}: complex projection direction")
        z = itg.x_eff if mode[0] == "x" else mpmath.re(mode[1]) * itg.x_eff + itg.y_eff
    out = []
    for (a, b, e, _k), c in terms:
        lam = a if mode[0] == "x" else b
        out.append((c, lam, e))
    znorm = mpmath.sqrt(mpmath.fsum(t * t for t in z))
    return out, znorm, itg.d


def disk_level(pair, trig: list, n_psi: int, n_phi: int, d: int, dps: int, const: Any):
    """One level of the disk quadrature of ``E pair(a, b)``, ``(a, b)`` the first two
    coordinates of a uniform unit vector in ``d`` dimensions (module docstring): ``d = 2``, the
    mean over the ``n_phi`` angles ``trig = [(cos φ, sin φ)]``; else ``n_psi`` Gauss–Legendre
    nodes in ``ψ`` times the angles (``const`` the density's constant). Returns ``(integral,
    scale)``, the scale the sum of the absolute terms."""
    if d == 2:  # uniform on the unit circle
        vals = [pair(c, s) for c, s in trig]
        return mpmath.fsum(vals) / n_phi, mpmath.fsum(abs(v) for v in vals) / n_phi
    nodes, weights = gauss_legendre(n_psi, dps + 15)
    quarter = mpmath.pi / 4
    total, scale = mpmath.mpc(0), mpmath.mpf(0)
    for t, w in zip(nodes, weights, strict=True):
        psi = quarter * (t + 1)
        sp_, cp_ = mpmath.sin(psi), mpmath.cos(psi)
        radial = w * quarter * sp_ * cp_ ** (d - 3) * const * 2 * mpmath.pi / n_phi
        for c, s in trig:
            val = pair(sp_ * c, sp_ * s) * radial
            total += val
            scale += abs(val)
    return total, scale


def refine_levels(level, n_psi: int, n_phi: int, max_psi: int, dps: int, mean: Any,
                  failure: str) -> Any:
    """Double the nodes of ``level(n_psi, n_phi) -> (integral, scale)`` until two levels agree
    to ``10^-(dps+3)·(scale + |mean|²)``; :class:`QuadratureError` (``failure``) past
    ``max_psi``. Returns the last level's integral."""
    prev, _ = level(n_psi, n_phi)
    while True:
        n_psi, n_phi = 2 * n_psi, 2 * n_phi
        if n_psi > max_psi:
            raise QuadratureError(failure)
        cur, scale = level(n_psi, n_phi)
        if abs(cur - prev) <= mpmath.mpf(10) ** (-(dps + 3)) * (scale + abs(mean) ** 2):
            return cur
        prev = cur


def orthogonal_covariance_quadrature(
    formula: str, x: np.ndarray, y: np.ndarray, config: Mapping[str, Any], mean: Any, dps: int
) -> Any:
    """``C = Cov(h(w₁), h(w₂))`` for two orthogonal rows (module docstring); ``mean = E h``.
    x, y are mp vectors; the result is an mpf at the caller's precision."""
    with mpmath.workdps(dps + 15):
        terms, znorm, d = _one_projection(formula, x, y, config)
        if d < 2:
            raise ValueError("two orthogonal rows need d >= 2")
        memo: dict = {}

        def big_h(v):
            if v not in memo:
                memo[v] = mpmath.fsum(c * chi_mgf(lam * znorm * v, d, e) for c, lam, e in terms)
            return memo[v]

        half_d = mpmath.mpf(d) / 2
        const = mpmath.gamma(half_d) / (mpmath.pi * mpmath.gamma(half_d - 1)) if d >= 3 else None

        def level(n_psi: int, n_phi: int):
            # cos φⱼ for j ≤ N/2, then by symmetry (cos φ_(N−j) = cos φⱼ, sin φⱼ = cos φ_(j−N/4)),
            # so the arguments of H repeat exactly and the memo reuses them (N is a multiple of 4)
            half = [mpmath.cos(2 * mpmath.pi * j / n_phi) for j in range(n_phi // 2 + 1)]
            cos_all = half + half[-2:0:-1]
            trig = [(cos_all[j], cos_all[(j - n_phi // 4) % n_phi]) for j in range(n_phi)]
            return disk_level(lambda a, b: big_h(a) * big_h(b), trig, n_psi, n_phi, d, dps,
                              const)

        cur = refine_levels(level, 12, 16, 192, dps, mean,
                            f"ORF covariance quadrature for {formula!r} did not converge to "
                            f"{dps} digits (‖z‖ = {mpmath.nstr(znorm, 4)}): outside the "
                            "supported domain")
        cov = mpmath.re(cur) - mean**2
    return +cov


def orthogonal_pair_count(m: int, d: int) -> int:
    """Ordered pairs (i ≠ j) of rows in the same block: blocks of d rows, the last one of
    ``m mod d`` rows (``impls.random_matrices``)."""
    full, rest = divmod(m, d)
    return full * d * (d - 1) + rest * (rest - 1)


def orf_variance(v1: Any, cov: Any, m: int, d: int) -> Any:
    """``Var((1/m)Σh(wᵢ)) = (m·V₁ + P·C)/m²`` with P the ordered same-block pairs; for one block
    (m ≤ d) this is ``V₁/m + (1 − 1/m)C`` and for B full blocks ``V₁/m + ((d−1)/m)C`` (§3)."""
    return (m * v1 + orthogonal_pair_count(m, d) * cov) / mpmath.mpf(m) ** 2


def _series_coefficients(terms, znorm, d: int, count: int) -> list:
    """``h_(2a)`` for ``a < count`` (odd coefficients are not needed: odd moments vanish)."""
    half_d = mpmath.mpf(d) / 2
    coeffs = [mpmath.mpc(0)] * count
    for c, lam, e in terms:
        shrink = 1 - 2 * mpmath.mpf(e)
        kappa2 = (lam * znorm) ** 2 / shrink  # (λ‖z‖)²/(1−2e)
        # term_a = c·(1−2e)^(−d/2)·κ^(2a)·E[ρ^(2a)]/(2a)!,  E ρ^(2a) = 2^a (d/2)_a  (ρ ~ χ_d)
        term = c * shrink ** (-half_d)
        for a in range(count):
            coeffs[a] += term
            term = term * kappa2 * 2 * (half_d + a) / ((2 * a + 1) * (2 * a + 2))
    return coeffs


def orthogonal_covariance(
    formula: str, x: np.ndarray, y: np.ndarray, config: Mapping[str, Any], mean: Any, dps: int
) -> Any:
    """``C = Cov(h(w₁), h(w₂))`` for two orthogonal rows by the moment series of the module
    docstring; ``mean = E h``. x, y are mp vectors; the result is an mpf at the caller's
    precision."""
    with mpmath.workdps(dps + 10):
        terms, znorm, d = _one_projection(formula, x, y, config)
        if d < 2:
            raise ValueError("two orthogonal rows need d >= 2")
        kappa = max((abs(lam) * znorm / mpmath.sqrt(1 - 2 * mpmath.mpf(e)) for _, lam, e in terms),
                    default=mpmath.mpf(0))
        if kappa > 15:
            raise QuadratureError(
                f"ORF covariance series for {formula!r}: κ = {mpmath.nstr(kappa, 4)} > 15 is "
                "outside the supported domain"
            )
    work = dps + 15 + int(float(kappa) ** 2 / 2.3)  # the series' terms reach ~e^(κ²)
    with mpmath.workdps(work):
        terms, znorm, d = _one_projection(formula, x, y, config)
        count = 40 + int(4 * float(kappa) ** 2)
        h = _series_coefficients(terms, znorm, d, count)
        half_d = mpmath.mpf(d) / 2
        half = mpmath.mpf(1) / 2
        poch = [mpmath.rf(half, a) for a in range(count)]
        poch_d = [mpmath.rf(half_d, n) for n in range(count)]
        hp = [h[a] * poch[a] for a in range(count)]
        total, scale = mpmath.mpc(0), mpmath.mpf(0)
        last = mpmath.mpf(0)
        for a in range(count):
            row = mpmath.mpc(0)
            for b in range(count - a):
                val = hp[a] * hp[b] / poch_d[a + b]
                row += val
                scale += abs(val)
            total += row
            last = abs(row)
        if last > mpmath.mpf(10) ** (-(dps + 5)) * (scale + abs(mean) ** 2):
            raise QuadratureError(f"ORF covariance series for {formula!r} did not converge")
        cov = mpmath.re(total) - mpmath.mpf(mean) ** 2
    return +cov
