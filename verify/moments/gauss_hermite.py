"""Gauss–Hermite and Gauss–Legendre rules at high precision, and the docs/math.md §0 reduction.

For ``w ~ N(0, I_d)`` and vectors ``x̃, ỹ``, take the orthonormal basis ``e₁ = x̃/‖x̃‖``,
``e₂ ⟂ e₁`` in span(x̃, ỹ) and write ``gⱼ = wᵀeⱼ`` (iid N(0,1)). Then ``u = wᵀx̃ = ‖x̃‖g₁``,
``v = wᵀỹ = ‖ỹ‖(ρg₁ + √(1−ρ²)g₂)`` (ρ = cos∠(x̃, ỹ)) and ``‖w‖² = g₁² + g₂² + Σ_(j>2) gⱼ²``
(docs/math.md §0). Every per-frequency estimator of this project is a finite sum of terms
``c·exp(a·u + b·v + e·‖w‖²)`` (a, b complex: cos/sin by Euler's formula), and each term's
expectation factorises into one-dimensional Gaussian integrals

    E exp(a u + b v + e‖w‖²) = S(a‖x̃‖ + bρ‖ỹ‖, e)·S(b√(1−ρ²)‖ỹ‖, e)·S(0, e)^(d−2),
    S(α, e) = E exp(αg + e g²),  g ~ N(0, 1),

each evaluated with an n-point Gauss–Hermite rule (probabilists' weight, normalised to the
N(0,1) density). This is quadrature, independent of the closed forms it is compared with.

Convergence is *validated*: every ``S`` is computed with n and 2n nodes (n = 16, 32, …, up to
:data:`MAX_ORDER`) and accepted once the two agree to ``10^-(dps+3)·Σ|wᵢ f(gᵢ)|`` (an
absolute accuracy on the scale of the integrand, which is what a mean or variance built from
several terms needs); otherwise :class:`QuadratureError` is raised. Supported domain: ``e < 1/2``
(the integral diverges at ``e ≥ 1/2``) and ``|α|/√(1−2e) ≲ 12`` (larger arguments need more
than :data:`MAX_ORDER` nodes and raise). Working precision carries
``guard_digits(α)`` extra digits, enough for the cancellation in ``E cos(αg) = e^(−α²/2)``.
The rules themselves (nodes, weights, :class:`QuadratureError`) live in
:mod:`kernel_verify.verify.references.quadrature`, below both the references and the moments; they
are re-exported here.
"""

from __future__ import annotations

import math

import mpmath

from kernel_verify.verify.references.quadrature import (
    MAX_ORDER,
    QuadratureError,
    gauss_legendre,
    hermite_rule,
)

__all__ = [
    "MAX_ORDER",
    "QuadratureError",
    "expect_bivariate",
    "expect_exp_terms",
    "expect_relu_power",
    "gauss_legendre",
    "guard_digits",
    "hermite_rule",
    "normal_exp_quadratic",
]

#: |β| = |α|/√(1−2e) beyond which S(α, e) is refused up front (30 digits need ~200 nodes at 12).
MAX_BETA = 12.0


def guard_digits(alpha: complex | mpmath.mpc, e: float = 0.0) -> int:
    """Extra working digits for ``S(α, e)``: the terms reach ``~e^(|α|²/2)`` in size (divided by
    ``1−2e``) while the result can be as small as ``e^(−|Im α|²/2)``; their ratio is
    ``≤ e^(|α|²/(1−2e))``, i.e. ``|α|²/((1−2e)·ln 10)`` digits, plus 10."""
    mag = float(abs(alpha)) ** 2
    return 10 + math.ceil(mag / ((1 - 2 * float(e)) * math.log(10)))


def _s_sum(beta, order: int, dps: int):
    """``Σ wᵢ exp(β gᵢ)`` and ``Σ |wᵢ exp(β gᵢ)|``, using the symmetry of the rule: each pair ±g
    contributes ``2w·cosh(βg)`` (β real) or ``2w·cos(Im β·g)`` (β imaginary)."""
    nodes, weights = hermite_rule(order, dps)
    beta = mpmath.mpmathify(beta)
    re, im = mpmath.re(beta), mpmath.im(beta)
    half = order // 2
    pos = list(zip(nodes[half:], weights[half:], strict=True))  # nodes are sorted, g ≥ 0 here
    if im == 0:
        total = mpmath.fsum(w * (mpmath.cosh(re * g) if g else 1) * (2 if g else 1) for g, w in pos)
        return total, total
    if re == 0:
        total = mpmath.fsum(w * (mpmath.cos(im * g) if g else 1) * (2 if g else 1) for g, w in pos)
        return total, mpmath.mpf(1)
    terms = [w * mpmath.exp(beta * g) for g, w in zip(nodes, weights, strict=True)]
    return mpmath.fsum(terms), mpmath.fsum(abs(t) for t in terms)


def normal_exp_quadratic(alpha, e, dps: int):
    """``S(α, e) = E exp(αg + e·g²)``, ``g ~ N(0,1)``, by validated Gauss–Hermite quadrature
    (see the module docstring); α real or complex, ``e < 1/2``. Returns an mpf/mpc at the
    caller's precision.

    The factor ``e^(e g²)`` is absorbed into the Gaussian weight by the change of variables
    ``g = t/√(1−2e)`` (``φ(g)e^(eg²)dg = φ(t)dt/√(1−2e)``): ``S(α, e) = (1−2e)^(−1/2)·E exp(βt)``,
    ``β = α/√(1−2e)``; the remaining Gaussian expectation is the quadrature."""
    if not float(e) < 0.5:
        raise ValueError(f"E exp(αg + e g²) diverges for e >= 1/2, got e = {e}")
    if abs(complex(alpha)) / math.sqrt(1 - 2 * float(e)) > MAX_BETA:
        raise QuadratureError(
            f"Gauss–Hermite for E exp(αg + e g²) with α = {complex(alpha):.4g}, "
            f"e = {float(e):.4g}: |α|/√(1−2e) > {MAX_BETA} is outside the supported domain "
            "(did not converge with "
            f"≤ {MAX_ORDER} nodes)"
        )
    work = 10 * math.ceil((dps + guard_digits(alpha, e)) / 10)  # coarse, so rules are reused
    with mpmath.workdps(work):
        shrink = 1 - 2 * mpmath.mpf(e)
        beta = mpmath.mpmathify(alpha) / mpmath.sqrt(shrink)
        order = 16
        prev, _ = _s_sum(beta, order, work)
        while order < MAX_ORDER:
            order *= 2
            cur, scale = _s_sum(beta, order, work)
            if abs(cur - prev) <= mpmath.mpf(10) ** (-(dps + 3)) * scale:
                break
            prev = cur
        else:
            raise QuadratureError(
                f"Gauss–Hermite for E exp(αg + e g²) with α = {mpmath.nstr(alpha, 5)}, "
                f"e = {mpmath.nstr(e, 5)} did not converge to {dps} digits with {MAX_ORDER} "
                "nodes: outside the supported domain (|α|/√(1−2e) ≲ 12)"
            )
        result = cur / mpmath.sqrt(shrink)
    return +result


def _span_geometry(x_eff, y_eff):
    """``(‖x̃‖, ‖ỹ‖, ρ)`` with ρ = cos∠(x̃, ỹ) (0 when either vector is 0)."""
    nx = mpmath.sqrt(mpmath.fsum(t * t for t in x_eff))
    ny = mpmath.sqrt(mpmath.fsum(t * t for t in y_eff))
    if nx == 0 or ny == 0:
        return nx, ny, mpmath.mpf(0)
    rho = mpmath.fsum(p * q for p, q in zip(x_eff, y_eff, strict=True)) / (nx * ny)
    return nx, ny, min(max(rho, mpmath.mpf(-1)), mpmath.mpf(1))


def expect_exp_terms(terms: dict, x_eff, y_eff, d: int, dps: int):
    """``E Σ c·exp(a·u + b·v + e‖w‖² + ikβ)`` over ``w ~ N(0, I_d)`` and a uniform phase β
    (only k = 0 survives), by the factorisation of the module docstring. Real part returned
    (the imaginary part cancels between conjugate terms; a non-negligible one is an error)."""
    with mpmath.workdps(dps + 10):
        nx, ny, rho = _span_geometry(x_eff, y_eff)
        if nx == 0:  # u ≡ 0: put e₁ along ỹ instead
            nx, ny, rho, swap = ny, mpmath.mpf(0), mpmath.mpf(0), True
        else:
            swap = False
        rank = min(d, 2)
        perp = mpmath.sqrt(1 - rho * rho)
        memo: dict = {}

        def s(alpha, e):
            key = (alpha, e)
            if key not in memo:
                memo[key] = normal_exp_quadratic(alpha, e, dps + 5)
            return memo[key]

        total = mpmath.mpc(0)
        scale = mpmath.mpf(0)
        for (a, b, e, k), c in terms.items():
            if k != 0:
                continue
            if swap:
                a, b = b, a
            value = s(a * nx + b * rho * ny, e)
            if rank == 2:
                value *= s(b * perp * ny, e)
            if e != 0 and d > rank:
                value *= s(mpmath.mpf(0), e) ** (d - rank)
            total += c * value
            scale += abs(c * value)
        if abs(total.imag) > mpmath.mpf(10) ** (-dps) * (1 + scale):
            raise QuadratureError(f"imaginary part {mpmath.nstr(total.imag, 5)} did not cancel")
    return +total.real


def expect_relu_power(x, y, power: int, dps: int):
    """``E[relu(wᵀx)ᵖ relu(wᵀy)ᵖ]`` for ``w ~ N(0, I)``, p = 1, 2, 3 or 4, by the reduction of
    docs/math.md §0 in polar coordinates ``(g₁, g₂) = r(cos t, sin t)``: ``u = ‖x‖r cos t``,
    ``v = ‖y‖r cos(t−θ)``, so the value is ``‖x‖ᵖ‖y‖ᵖ·E[r^(2p)]·(1/2π)∫ cosᵖt cosᵖ(t−θ) dt`` over
    the arc ``t ∈ (θ−π/2, π/2)`` where both are positive, with ``E[r^(2p)] = 2ᵖp!`` (r² ~ χ²₂).
    The smooth arc integral is a validated Gauss–Legendre rule (orders 8, 16, … agreeing to
    ``10^-(dps+3)``)."""
    if power not in (1, 2, 3, 4):
        raise ValueError(f"power must be 1, 2, 3 or 4, got {power}")
    with mpmath.workdps(dps + 10):
        nx, ny, rho = _span_geometry(x, y)
        if nx == 0 or ny == 0:
            return mpmath.mpf(0)
        theta = mpmath.acos(rho)
        lo, hi = theta - mpmath.pi / 2, mpmath.pi / 2
        if hi <= lo:
            return mpmath.mpf(0)
        half, mid = (hi - lo) / 2, (hi + lo) / 2

        def arc(order):
            nodes, weights = gauss_legendre(order, dps + 10)
            return half * mpmath.fsum(
                w * (mpmath.cos(mid + half * t) * mpmath.cos(mid + half * t - theta)) ** power
                for t, w in zip(nodes, weights, strict=True)
            )

        order, prev = 8, arc(8)
        while True:
            order *= 2
            if order > MAX_ORDER:
                raise QuadratureError("Gauss–Legendre for the relu arc integral did not converge")
            cur = arc(order)
            if abs(cur - prev) <= mpmath.mpf(10) ** (-(dps + 3)) * (1 + abs(cur)):
                break
            prev = cur
        moment = mpmath.mpf(2) ** power * mpmath.factorial(power)
        result = (nx * ny) ** power * moment * cur / (2 * mpmath.pi)
    return +result


def expect_bivariate(f, x, y, dps: int, *, max_order: int = 128):
    """``E f(u, v)`` for ``(u, v) = (wᵀx, wᵀy)``, ``w ~ N(0, I)``, any smooth ``f(u, v) -> mpf``,
    by a product Gauss–Hermite rule in ``(g₁, g₂)`` (docs/math.md §0); orders 8, 16, … up to
    ``max_order``, accepted when two successive orders agree to ``10^-(dps+3)·Σ|wᵢwⱼ f|``.
    Costs order² evaluations of f: use it for integrands that are not exponential sums."""
    with mpmath.workdps(dps + 10):
        nx, ny, rho = _span_geometry(x, y)
        perp = mpmath.sqrt(1 - rho * rho)

        def grid(order):
            nodes, weights = hermite_rule(order, dps + 10)
            total, scale = mpmath.mpf(0), mpmath.mpf(0)
            for g1, w1 in zip(nodes, weights, strict=True):
                u = nx * g1
                for g2, w2 in zip(nodes, weights, strict=True):
                    term = w1 * w2 * f(u, ny * (rho * g1 + perp * g2))
                    total += term
                    scale += abs(term)
            return total, scale

        order, (prev, _) = 8, grid(8)
        while True:
            order *= 2
            if order > max_order:
                raise QuadratureError(
                    f"2-D Gauss–Hermite did not converge to {dps} digits with {max_order} nodes"
                )
            cur, scale = grid(order)
            if abs(cur - prev) <= mpmath.mpf(10) ** (-(dps + 3)) * scale:
                break
            prev = cur
    return +cur
