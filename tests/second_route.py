"""Helpers of ``tests/test_second_route.py``: the points, the Monte Carlo samplers of each
kernel's spectral or latent representation (NumPy, written from the definitions, not from the
references or the code under test), and the bounds with a stated false-alarm rate.

**Empirical Bernstein** (Maurer & Pontil 2009, Thm 4): for i.i.d. ``Z ∈ [a, a + R]`` with
unbiased sample variance ``V``, ``P(|Z̄ − EZ| ≥ √(2V·L/n) + 7R·L/(3(n − 1))) ≤ α`` with
``L = log(4/α)`` (each side at ``α/2``). It needs only a proven range, and is far tighter than
Hoeffding when the variance is small.

**Median of means** for unbounded samples with a proven upper bound ``V̄`` on the variance:
:func:`kernel_verify.verify.stats.mean_test` (``variance=V̄``; a larger variance only widens the
threshold, so the level stays ``α``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

from kernel_verify.verify.stats import mean_test

#: Monte Carlo draws per check (about 20–60 ms of NumPy each at d ≤ 4).
DRAWS = 200_000
#: ``(reference, route, |disagreement|, tolerance)`` of every check of this process (the issue's
#: table of references × second routes is printed from it; nothing asserts on it).
RECORD: list[tuple[str, str, float, float]] = []


def record(reference: str, route: str, err: float, tol: float) -> None:
    RECORD.append((reference, route, float(err), float(tol)))


def empirical_bernstein(samples: np.ndarray, width: float, alpha: float) -> float:
    """Half-width ``t`` of the two-sided empirical-Bernstein interval at level ``α`` (module
    docstring), for samples with a proven range of ``width``."""
    n = samples.shape[0]
    log_term = math.log(4.0 / alpha)
    var = float(np.var(samples, ddof=1, axis=0).max()) if samples.ndim > 1 else float(
        np.var(samples, ddof=1))
    return math.sqrt(2.0 * var * log_term / n) + 7.0 * width * log_term / (3.0 * (n - 1))


def check_bounded(label: str, samples: np.ndarray, exact: float, width: float,
                  alpha: float) -> tuple[float, float]:
    """Assert ``|mean − exact| ≤ t`` (empirical Bernstein); returns ``(|mean − exact|, t)``."""
    lo, hi = float(samples.min()), float(samples.max())
    assert hi - lo <= width * (1 + 1e-12), f"{label}: samples span {hi - lo} > proven {width}"
    t = empirical_bernstein(samples, width, alpha)
    err = abs(float(samples.mean()) - exact)
    record(label.split(" at ")[0], "Monte Carlo, empirical Bernstein", err, t)
    assert err <= t, (f"{label}: Monte Carlo mean {samples.mean():.6g} (n = {len(samples)}) vs "
                      f"reference {exact:.6g}: |diff| {err:.3g} > {t:.3g} (empirical Bernstein, "
                      f"α = {alpha:.2g})")
    return err, t


def check_unbounded(label: str, samples: np.ndarray, exact: float, variance_bound: float,
                    alpha: float) -> tuple[float, float]:
    """Median of means with a proven variance bound (module docstring)."""
    res = mean_test(samples, exact, alpha=alpha, variance=variance_bound, label=label)
    err = abs(float(np.asarray(res.statistic)) - exact)
    record(label.split(" at ")[0], "Monte Carlo, median of means", err, float(res.threshold))
    assert res.ok, f"{label}: {res.explain() if hasattr(res, 'explain') else res}"
    return err, float(res.threshold)


# ------------------------------------------------------------------------------------ points
@st.composite
def pairs(draw, dims=(2, 3, 4), scale: float = 0.8):
    """``(x, y)``: generic coordinates in ``[−scale, scale]`` (not on the span of the report's
    default pair, not at symmetric positions), with a random subset of the coordinates of
    ``x − y`` set to zero (the report's pair has six) — there a difference and its mirror image
    are probed by the same derivative stencil."""
    d = draw(st.sampled_from(dims))
    coord = st.floats(-scale, scale, allow_nan=False, allow_infinity=False, allow_subnormal=False)
    x = np.array(draw(st.lists(coord, min_size=d, max_size=d)))
    y = np.array(draw(st.lists(coord, min_size=d, max_size=d)))
    zero = draw(st.lists(st.booleans(), min_size=d, max_size=d))
    if all(zero):
        zero[0] = False
    y[np.array(zero)] = x[np.array(zero)]
    return x, y


def mirror(x: np.ndarray, y: np.ndarray, flips: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pair whose difference is ``x − y`` with the signs of the ``flips`` coordinates
    reversed (``y`` kept)."""
    delta = x - y
    delta[flips] = -delta[flips]
    return y + delta, y


def point_text(x: np.ndarray, y: np.ndarray) -> str:
    return f"x = {x.tolist()}, y = {y.tolist()}"  # exact floats: the point re-runs


# ---------------------------------------------------------- Monte Carlo of each representation
def _sphere(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    g = rng.standard_normal((n, d))
    return g / np.linalg.norm(g, axis=1, keepdims=True) * math.sqrt(d)


def _mixture(rng, n, pi, mu, lower):
    """``ω ~ Σ_c (π_c/Σπ) N(μ_c, L_cᵀL_c)`` and the total weight ``Σπ``."""
    total = float(np.sum(pi))
    comp = rng.choice(len(pi), size=n, p=np.asarray(pi) / total)
    z = rng.standard_normal((n, mu.shape[1]))
    omega = mu[comp] + np.einsum("nij,ni->nj", lower[comp], z)  # μ + Lᵀz
    return omega, total, comp


def generative_frequencies(rng, n, kp):
    eps = rng.standard_normal((n, kp["W1"].shape[1]))
    return np.sin(eps @ kp["W1"].T + kp["b1"]) @ kp["W2"].T + kp["b2"]


def generative_bound(kp) -> np.ndarray:
    """``|g_j| ≤ Σ_h |W2_jh| + |b2_j|`` (|sin| ≤ 1)."""
    return np.abs(kp["W2"]).sum(axis=1) + np.abs(kp["b2"])


def value_samples(kernel: str, x, y, kp, rng, n=DRAWS):
    """``(samples, ("bounded", width) | ("unbounded", variance bound))`` of ``k(x, y)``."""
    delta, s = x - y, x + y
    lam = math.exp(-(x @ x + y @ y) / 2)
    d = len(x)
    if kernel == "gaussian":
        w = rng.standard_normal((n, d)) / kp.get("sigma", 1.0)
        return np.cos(w @ delta), ("bounded", 2.0)
    if kernel == "gaussian_fixed_norm":
        w = _sphere(rng, n, d) / kp.get("sigma", 1.0)
        return np.cos(w @ delta), ("bounded", 2.0)
    if kernel == "spectral_mixture":
        omega, total, _ = _mixture(rng, n, kp["pi"], kp["mu"], kp["L"])
        return total * np.cos(omega @ delta), ("bounded", 2.0 * total)
    if kernel == "generative":
        return np.cos(generative_frequencies(rng, n, kp) @ delta), ("bounded", 2.0)
    if kernel == "softmax":  # E X² = Λ² e^{2‖s‖²}
        w = rng.standard_normal((n, d))
        return lam * np.exp(w @ s), ("unbounded", lam**2 * math.exp(2 * s @ s))
    if kernel == "softmax_fixed_norm":  # |wᵀs| ≤ √d‖s‖
        w = _sphere(rng, n, d)
        r = math.sqrt(d) * float(np.linalg.norm(s))
        return lam * np.exp(w @ s), ("bounded", lam * (math.exp(r) - math.exp(-r)))
    if kernel == "gmm_prf":  # E X² = Σπ·Σ_c π_c Λ² e^{2μ_cᵀs + 2‖L_c s‖²}
        omega, total, _ = _mixture(rng, n, kp["pi"], kp["mu"], kp["L"])
        second = total * sum(p * lam**2 * math.exp(2 * m @ s + 2 * np.sum((low @ s) ** 2))
                             for p, m, low in zip(kp["pi"], kp["mu"], kp["L"], strict=True))
        return total * lam * np.exp(omega @ s), ("unbounded", second)
    if kernel == "arccos1":  # E X² ≤ √(E relu(u)⁴ E relu(v)⁴) = 1.5‖x‖²‖y‖²
        w = rng.standard_normal((n, d))
        return (np.maximum(w @ x, 0) * np.maximum(w @ y, 0),
                ("unbounded", 1.5 * (x @ x) * (y @ y)))
    raise KeyError(kernel)


def gradient_samples(kernel: str, x, y, kp, rng, n=DRAWS):
    """``(samples (n, d), ("bounded", widths (d,)) | ("unbounded", variance bounds (d,)))`` of
    ``∇ₓ k(x, y)``: the gradient of the representation's integrand (differentiation under the
    expectation; the integrands' derivatives are dominated by integrable functions)."""
    delta, s = x - y, x + y
    lam = math.exp(-(x @ x + y @ y) / 2)
    d = len(x)
    if kernel == "gaussian":  # −sin(ωᵀδ)ω, ω = w/σ: E X_j² ≤ E ω_j² = 1/σ²
        sigma = kp.get("sigma", 1.0)
        w = rng.standard_normal((n, d)) / sigma
        return -np.sin(w @ delta)[:, None] * w, ("unbounded", np.full(d, 1 / sigma**2))
    if kernel == "spectral_mixture":  # E X_j² ≤ Σπ·Σ_c π_c (μ_cj² + (L_cᵀL_c)_jj)
        omega, total, _ = _mixture(rng, n, kp["pi"], kp["mu"], kp["L"])
        cov_diag = np.einsum("cij,cij->cj", kp["L"], kp["L"])
        bound = total * (np.asarray(kp["pi"])[:, None] * (kp["mu"] ** 2 + cov_diag)).sum(axis=0)
        return -total * np.sin(omega @ delta)[:, None] * omega, ("unbounded", bound)
    if kernel == "generative":  # |X_j| ≤ B_j
        g = generative_frequencies(rng, n, kp)
        return -np.sin(g @ delta)[:, None] * g, ("bounded", 2 * generative_bound(kp))
    if kernel == "gaussian_fixed_norm":  # |ω_j| ≤ ‖ω‖ = √d/σ
        w = _sphere(rng, n, d) / kp.get("sigma", 1.0)
        return (-np.sin(w @ delta)[:, None] * w,
                ("bounded", np.full(d, 2 * math.sqrt(d) / kp.get("sigma", 1.0))))
    if kernel == "softmax_fixed_norm":  # |Λe^{wᵀs}(w_j − x_j)| ≤ Λe^{√d‖s‖}(√d + |x_j|)
        w = _sphere(rng, n, d)
        top = lam * math.exp(math.sqrt(d) * float(np.linalg.norm(s)))
        return (lam * np.exp(w @ s))[:, None] * (w - x), (
            "bounded", 2 * top * (math.sqrt(d) + np.abs(x)))
    if kernel == "softmax":  # X = Λe^{wᵀs}(w − x); E X_j² = Λ²e^{2‖s‖²}((2s − x)_j² + 1)
        w = rng.standard_normal((n, d))
        bound = lam**2 * math.exp(2 * s @ s) * ((2 * s - x) ** 2 + 1)
        return (lam * np.exp(w @ s))[:, None] * (w - x), ("unbounded", bound)
    if kernel == "gmm_prf":  # tilted: ω ~ N(μ + 2Σs, Σ) under e^{2ωᵀs}
        omega, total, _ = _mixture(rng, n, kp["pi"], kp["mu"], kp["L"])
        bound = np.zeros(d)
        for p, m, low in zip(kp["pi"], kp["mu"], kp["L"], strict=True):
            cov = low.T @ low
            tilt = m + 2 * cov @ s
            bound += total * p * lam**2 * math.exp(2 * m @ s + 2 * s @ cov @ s) * (
                (tilt - x) ** 2 + np.diag(cov))
        return (total * lam * np.exp(omega @ s))[:, None] * (omega - x), ("unbounded", bound)
    if kernel == "arccos1":  # 1{wᵀx>0}relu(wᵀy)w: E X_j² ≤ E w_j²(wᵀy)² = ‖y‖² + 2y_j²
        w = rng.standard_normal((n, d))
        weight = (w @ x > 0) * np.maximum(w @ y, 0)
        return weight[:, None] * w, ("unbounded", y @ y + 2 * y**2)
    raise KeyError(kernel)


def third_derivative_bound(kernel: str, x, y, kp, h: float) -> np.ndarray | None:
    """``M₃,j ≥ max |∂³k/∂x_j³|`` on ``[x − h e_j, x + h e_j]`` (per component), or None where
    no bound is derived here. Spectral kernels ``E cos(ωᵀδ)``: ``|∂³_j| ≤ E|ω_j|³``; exact
    finite polynomials of degree ≤ 2 in ``x_j`` (square_dot, relu_dot, dpfp, cosformer away from
    the kinks at ``x_j = 0``): 0; softmax: ``|y_j|³ e^{xᵀy + h|y_j|}``."""
    d = len(x)
    if kernel == "gaussian":  # E|N(0, 1/σ²)|³ = 2√(2/π)/σ³
        return np.full(d, 2 * math.sqrt(2 / math.pi) / kp.get("sigma", 1.0) ** 3)
    if kernel == "spectral_mixture":  # E|ω_j|³ ≤ (E ω_j⁴)^{3/4}, Gaussian fourth moment
        cov_diag = np.einsum("cij,cij->cj", kp["L"], kp["L"])
        mu = kp["mu"]
        fourth = mu**4 + 6 * mu**2 * cov_diag + 3 * cov_diag**2
        return (np.asarray(kp["pi"])[:, None] * fourth ** 0.75).sum(axis=0)
    if kernel == "generative":
        return generative_bound(kp) ** 3
    if kernel == "fastfood_learned":
        return None  # handled by the rows' maximum in the test (needs the exact matrix)
    if kernel == "gaussian_fixed_norm":  # |ω_j| ≤ √d/σ
        return np.full(d, (math.sqrt(d) / kp.get("sigma", 1.0)) ** 3)
    if kernel == "softmax":
        return np.abs(y) ** 3 * math.exp(x @ y + h * float(np.max(np.abs(y))))
    if kernel == "polynomial":  # ∂³_j (xᵀy + c)^p = p(p−1)(p−2)y_j³(xᵀy + c)^(p−3)
        p_, c = int(kp["p"]), float(kp["c"])
        if p_ < 3:
            return np.zeros(d)
        base = np.abs(x @ y) + c + h * np.abs(y)
        return p_ * (p_ - 1) * (p_ - 2) * np.abs(y) ** 3 * base ** (p_ - 3)
    if kernel == "taylor":  # ∂³_j Σ_k t^k/k! = (y_j/√d)³ Σ_(k≥3) t^(k−3)/(k−3)!
        order = int(kp["order"])
        t = (np.abs(x @ y) + h * np.abs(y)) / math.sqrt(d)
        series = sum(t**k / math.factorial(k) for k in range(max(order - 2, 0)))
        return (np.abs(y) / math.sqrt(d)) ** 3 * series
    if kernel == "elu_plus_one":  # f(x_j)f(y_j): linear for x_j > h, e^(x_j)f(y_j) for x_j < −h
        fy = np.where(y > 0, y + 1, np.exp(np.minimum(y, 0)))
        return np.where(x > 0, 0.0, np.exp(np.minimum(x + h, 0)) * fy)
    if kernel in ("linear", "square_dot", "relu_dot", "dpfp", "cosformer"):
        return np.zeros(d)
    return None


# -------------------------------------------------------------- exact rational second routes
def fr(v) -> list[Fraction]:
    return [Fraction(float(t)) for t in np.asarray(v).ravel()]


def _relu_q(a: Fraction) -> Fraction:
    return a if a > 0 else Fraction(0)


def rational_kernel(kernel: str, x, y, kp) -> Fraction | tuple[Fraction, int]:
    """The exact value in rational arithmetic (cosine: ``(k², sign k)``; taylor needs a square
    d)."""
    xs, ys = fr(x), fr(y)
    dot = sum((a * b for a, b in zip(xs, ys, strict=True)), Fraction(0))
    if kernel == "linear":
        return dot
    if kernel == "polynomial":  # ⟨[x, √c]^{⊗p}, [y, √c]^{⊗p}⟩ = (xᵀy + c)^p by expansion
        c, p = Fraction(float(kp["c"])), int(kp["p"])
        return sum((Fraction(math.comb(p, k)) * dot**k * c ** (p - k) for k in range(p + 1)),
                   Fraction(0))
    if kernel == "square_dot":
        return sum((a * a * b * b for a, b in zip(xs, ys, strict=True)), Fraction(0))
    if kernel == "relu_dot":
        return sum((_relu_q(a) * _relu_q(b) for a, b in zip(xs, ys, strict=True)), Fraction(0))
    if kernel == "dpfp":  # Σ_j Σ_i r_i(x) r_{i−j}(x) r_i(y) r_{i−j}(y), r = [relu(x), relu(−x)]
        nu = int(kp["nu"])
        rx = [_relu_q(a) for a in xs] + [_relu_q(-a) for a in xs]
        ry = [_relu_q(a) for a in ys] + [_relu_q(-a) for a in ys]
        n2 = len(rx)
        return sum((rx[i] * rx[(i - j) % n2] * ry[i] * ry[(i - j) % n2]
                    for j in range(1, nu + 1) for i in range(n2)), Fraction(0))
    if kernel == "cosine":
        nx = sum((a * a for a in xs), Fraction(0))
        ny = sum((b * b for b in ys), Fraction(0))
        if nx == 0 or ny == 0:
            return Fraction(0), 0
        return dot * dot / (nx * ny), (dot > 0) - (dot < 0)
    if kernel == "taylor":  # Σ_k ⟨x^{⊗k}, y^{⊗k}⟩ / (k!·d^{k/2}); √d exact for square d
        root = math.isqrt(len(xs))
        assert root * root == len(xs), "taylor's rational route needs a square d"
        order = int(kp["order"])
        return sum((dot**k / (math.factorial(k) * Fraction(root) ** k)
                    for k in range(order + 1)), Fraction(0))
    raise KeyError(kernel)


def fwht(v: np.ndarray) -> np.ndarray:
    """The Walsh–Hadamard transform ``H v`` (Sylvester order, unnormalised) by butterflies
    (object or float arrays, last axis a power of two)."""
    v = v.copy()
    n = v.shape[-1]
    step = 1
    while step < n:
        for start in range(0, n, 2 * step):
            a = v[..., start:start + step].copy()
            b = v[..., start + step:start + 2 * step].copy()
            v[..., start:start + step] = a + b
            v[..., start + step:start + 2 * step] = a - b
        step *= 2
    return v
