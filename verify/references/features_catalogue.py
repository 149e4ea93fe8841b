"""mpmath twins and a-priori rounding-error bounds of the catalogue formulas (docs/math.md §5–§7).

Registered with :func:`kernel_verify.verify.references.features.mp_feature`. Each twin computes
``φ(x; ω)`` exactly from the exactly converted input, the scalars of ``config`` (σ, order, p, c, M,
ν) and the arrays of ``params`` alone: learned values (Hedgehog's W and b, the mixture's π, μ, L,
the generator's weights) are part of the parameter draw the registry entry's ``draw`` makes, so
nothing here imports or re-runs implementation code (the monomial order of the polynomial map
and the cosFormer position rule are re-derived from their definitions); each bound
follows the rules of :mod:`kernel_verify.verify.references.features` (its module docstring): every
basic operation rounds once (``|θ| ≤ u``), an elementary function is accurate to ``ulps`` ulps
(``2·ulps·u`` relative), a length-k dot product in any order has ``|err| ≤ γ_k·Σ|terms|``, a
float64 constant cast to the compute dtype adds one ``u``. A float64 computation (NumPy builds
some constants and frequencies in float64 whatever the input dtype) is covered because the
caller's ``u`` is ≥ float64's and ``ulps`` is ≥ the float64 library's. Magnitudes are evaluated
in float64 from the exact formulas (their own rounding changes a bound by a relative ~1e-15).

Per-formula derivations are in each ``_bound_*`` docstring. Counting conventions: ``γ(n)`` is
``nu/(1−nu)``; a relative error made of ``a`` roundings and ``b`` elementary-function calls is
bounded by ``γ(a + 2b·ulps)`` (``(1+u)^a(1+2·ulps·u)^b ≤ 1 + γ(a + 2b·ulps)``, Higham Lemma 3.1,
since ``1 + 2·ulps·u ≤ (1+u)^(2·ulps)`` for ``ulps ≥ 1/2``).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping
from typing import Any

import mpmath
import numpy as np
from scipy.linalg import hadamard

from kernel_verify.verify.inputs import check_params, check_positive_int
from kernel_verify.verify.references.features import (
    ErrorTerm,
    exp_of_log_bounds,
    gamma,
    mp_feature,
    smallest_normal,
)
from kernel_verify.verify.references.kernels_catalogue import (
    mp_dpfp,
    mp_fastfood_matrix,
    mp_generative_frequencies,
    mp_hedgehog_log,
)
from kernel_verify.verify.references.mp import mp_cos, mp_exp, mp_max0, mp_sin, to_mp

Params = Mapping[str, np.ndarray]


def _g(n: float, u: float, ulps: float = 0.0, calls: int = 0) -> float:
    """Relative-error factor of ``n`` roundings and ``calls`` elementary functions."""
    return gamma(n + 2 * calls * max(ulps, 0.5), u)


def _term(v: Any, e: Any, u: float, ulps: float) -> ErrorTerm:
    return ErrorTerm(np.asarray(v, dtype=np.float64), np.asarray(e, dtype=np.float64), u, ulps)


def _bc(t: ErrorTerm, shape: tuple[int, ...]) -> ErrorTerm:
    return _term(np.broadcast_to(t.v, shape), np.broadcast_to(t.e, shape), t.u, t.ulps)


def _ones(shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    out[...] = mpmath.mpf(1)
    return out


# ------------------------------------------------------- rules re-derived from the definitions
def _order(name: str, value: Any) -> int:
    """A non-negative integer order (Taylor order, polynomial degree)."""
    return check_positive_int(name, value, minimum=0)


@functools.lru_cache(maxsize=64)
def _monomials(d: int, p: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """Monomials of degree p in the d+1 variables ``(√c, x_1, …, x_d)`` (index 0 = √c), as sorted
    index tuples in lexicographic order (the order of
    ``itertools.combinations_with_replacement``), and their multinomial coefficients
    ``p!/α!`` (α = multiplicities): ``(xᵀy + c)^p = Σ_α (p!/α!) x̃^α ỹ^α``."""
    combos = list(itertools.combinations_with_replacement(range(d + 1), p))
    idx = np.array(combos, dtype=np.intp).reshape(len(combos), p)
    coef = []
    for combo in combos:
        multinomial = math.factorial(p)
        for v in set(combo):
            multinomial //= math.factorial(combo.count(v))
        coef.append(multinomial)
    idx.setflags(write=False)
    return idx, tuple(coef)


def _positions(positions: Any, n: int, big_m: Any) -> tuple[np.ndarray, int]:
    """cosFormer positions: integers ``0 ≤ i ≤ M``, one per row; ``M ≥ 1``."""
    big_m = check_positive_int("M", big_m)
    if positions is None:
        raise ValueError("cosformer needs positions=: an integer array of shape (n,), 0 <= i <= M")
    pos = np.asarray(positions)
    if not np.issubdtype(pos.dtype, np.integer):
        raise TypeError(f"positions must be an integer array, got dtype {pos.dtype}")
    if pos.shape != (n,):
        raise ValueError(f"positions must have shape ({n},), got {pos.shape}")
    if pos.size and (pos.min() < 0 or pos.max() > big_m):
        raise ValueError(f"positions must lie in [0, M={big_m}], got [{pos.min()}, {pos.max()}]")
    return pos, big_m


def _layout(m: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """Mixture layout: frequency i belongs to component ``i mod C``; every component needs one."""
    if m < c:
        raise ValueError(f"m (= {m}) must be >= the number of mixture components (= {c})")
    comps = np.arange(m) % c
    return comps, np.bincount(comps, minlength=c)


def _perm(perm: np.ndarray) -> np.ndarray:
    """Fastfood permutation rows as integers (each a permutation of ``0..p−1``)."""
    as_int = np.asarray(perm).astype(np.intp)
    rows = np.atleast_2d(as_int)
    if np.any(as_int != perm) or np.any(np.sort(rows, axis=-1) != np.arange(rows.shape[-1])):
        raise ValueError("Fastfood 'perm' rows must each be a permutation of 0..p-1")
    return as_int


def _fastfood_matrix_f64(
    s: np.ndarray, g: np.ndarray, b: np.ndarray, perm: np.ndarray, d: int
) -> np.ndarray:
    """``S H G Π H B/√p`` per block (±1 Hadamard H), first d columns, in float64: only the
    magnitudes of the error bounds use it (the twin builds the matrix exactly)."""
    p = s.shape[-1]
    h = hadamard(p).astype(np.float64)
    perm_i = _perm(perm)
    return np.concatenate(
        [(s[k][:, None] * (h * g[k])) @ (h * b[k])[perm_i[k], :] / math.sqrt(p)
         for k in range(s.shape[0])],
        axis=0,
    )[:, :d]


# ------------------------------------------------------------------------ Taylor (docs/math.md §5)
def _taylor_blocks(x: np.ndarray, order: int) -> list[np.ndarray]:
    """Exact-formula magnitudes ``|z|^(⊗k)/√(k!)`` per block (float64)."""
    d = x.shape[-1]
    z = np.abs(x) * d**-0.25
    blocks = [np.ones((*x.shape[:-1], 1))]
    power = blocks[0]
    for k in range(1, order + 1):
        power = (power[..., :, None] * z[..., None, :]).reshape(*x.shape[:-1], d**k)
        blocks.append(power / math.sqrt(math.factorial(k)))
    return blocks


def _taylor_rel(k: int, u: float, ulps: float) -> float:
    """Block k: ``c = d^(-1/4)`` (one pow call, one cast), each ``z_j = x_j·c`` (1 rounding + c's
    error), a product of k factors (k−1 roundings), ``1/√(k!)`` (sqrt call, division, cast) and the
    final product: ``2k + (k−1) + 3 + k`` roundings... bounded by ``4k + 2`` roundings and
    ``k + 1`` function calls."""
    return _g(4 * k + 2, u, ulps, k + 1)


def _bound_taylor(x, params, config, u, ulps) -> np.ndarray:
    """Relative bound ``_taylor_rel(k)`` on every feature of tensor-power block k (block 0 = 1 is
    exact)."""
    order = _order("order", config["order"])
    blocks = _taylor_blocks(x, order)
    return np.concatenate(
        [b * (_taylor_rel(k, u, ulps) if k else 0.0) for k, b in enumerate(blocks)], axis=-1
    )


@mp_feature("taylor", error_bound=_bound_taylor)
def _taylor(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    order = _order("order", config["order"])
    d = x_mp.shape[-1]
    z = x_mp * mpmath.power(d, mpmath.mpf(-0.25))
    lead = x_mp.shape[:-1]
    blocks = [_ones((*lead, 1))]
    power = blocks[0]
    for k in range(1, order + 1):
        power = (power[..., :, None] * z[..., None, :]).reshape(*lead, d**k)
        blocks.append(power / mpmath.sqrt(mpmath.factorial(k)))
    return np.concatenate(blocks, axis=-1)


def _compressed_parts(z: np.ndarray, root2: Any) -> list[np.ndarray]:
    i, j = np.triu_indices(z.shape[-1], k=1)
    return [z, z * z / root2, z[..., i] * z[..., j]]


def _bound_taylor2_compressed(x, params, config, u, ulps) -> np.ndarray:
    """``[1, z, z_i²/√2, z_i z_j]``: the order-2 relative bound of :func:`_bound_taylor` for every
    quadratic feature (one fewer rounding for ``z_i z_j``), order 1 for ``z``; ``1`` is exact."""
    z = np.abs(x) * x.shape[-1] ** -0.25
    lin, sq, cross = _compressed_parts(z, math.sqrt(2.0))
    return np.concatenate(
        [np.zeros((*x.shape[:-1], 1)), lin * _taylor_rel(1, u, ulps),
         sq * _taylor_rel(2, u, ulps), cross * _taylor_rel(2, u, ulps)],
        axis=-1,
    )


@mp_feature("taylor2_compressed", error_bound=_bound_taylor2_compressed)
def _taylor2_compressed(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    z = x_mp * mpmath.power(x_mp.shape[-1], mpmath.mpf(-0.25))
    parts = _compressed_parts(z, mpmath.sqrt(2))
    return np.concatenate([_ones((*x_mp.shape[:-1], 1)), *parts], axis=-1)


# --------------------------------------------------------------------- polynomial (docs/math.md §5)
def _poly_setup(x_shape: tuple[int, ...], config: Mapping) -> tuple[int, float, np.ndarray]:
    p = _order("p", config["p"])
    c = float(config["c"])
    if not c >= 0:
        raise ValueError(f"c must be >= 0, got {c}")
    idx, _ = _monomials(x_shape[-1], p)
    return p, c, idx


def _bound_polynomial(x, params, config, u, ulps) -> np.ndarray:
    """``√(p!/α!)·Π x̃``: ``√c`` (sqrt call + cast) in up to p factors, p−1 product roundings, the
    coefficient (sqrt call + cast) and the final product: ``≤ 2p + 2`` roundings and ``p + 1``
    calls, relative to ``|φ|``."""
    p, c, idx = _poly_setup(x.shape, config)
    xt = np.concatenate([np.full((*x.shape[:-1], 1), math.sqrt(c)), np.abs(x)], axis=-1)
    coef = np.sqrt(np.array(_monomials(x.shape[-1], p)[1], dtype=np.float64))
    mag = np.prod(xt[..., idx], axis=-1) * coef
    return mag * _g(2 * p + 2, u, ulps, p + 1)


@mp_feature("polynomial", error_bound=_bound_polynomial)
def _polynomial(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    p, c, idx = _poly_setup(x_mp.shape, config)
    root_c = np.empty((*x_mp.shape[:-1], 1), dtype=object)
    root_c[...] = mpmath.sqrt(mpmath.mpf(c))
    xt = np.concatenate([root_c, x_mp], axis=-1)
    coef = [mpmath.sqrt(c) for c in _monomials(x_mp.shape[-1], p)[1]]
    gathered = xt[..., idx]  # (..., n, D, p)
    prod = np.empty(gathered.shape[:-1], dtype=object)
    for pos in np.ndindex(prod.shape):
        prod[pos] = mpmath.fprod(gathered[pos]) if p else mpmath.mpf(1)
    return prod * np.array(coef, dtype=object)


# ------------------------------------------------------------------- linear, cosine (§6)
def _bound_zero(x, params, config, u, ulps) -> np.ndarray:
    """The map copies or clamps its input (x, relu x): exact, bound 0."""
    return np.zeros_like(x, dtype=np.float64)


@mp_feature("linear", error_bound=_bound_zero)
def _linear(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    return x_mp.copy()


@mp_feature("identity", error_bound=_bound_zero)
def _identity(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    return x_mp.copy()


def _bound_cosine(x, params, config, u, ulps) -> np.ndarray:
    """``x/‖x‖`` after an exact power-of-two scaling: d squares and a length-d nonnegative sum
    (``γ_d`` relative on ‖x‖²), a sqrt (half of that, plus one call), one division:
    ``≤ d + 2`` roundings and one call, relative to ``|φ|`` (0 at x = 0: φ(0) = 0 exactly)."""
    norm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))
    mag = np.where(norm > 0, np.abs(x) / np.where(norm > 0, norm, 1.0), 0.0)
    return mag * _g(x.shape[-1] + 2, u, ulps, 1)


@mp_feature("cosine", error_bound=_bound_cosine)
def _cosine(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    out = np.empty_like(x_mp)
    for idx in np.ndindex(x_mp.shape[:-1]):
        row = x_mp[idx]
        norm = mpmath.sqrt(mpmath.fsum(v * v for v in row))
        out[idx] = row / norm if norm != 0 else row * 0
    return out


# -------------------------------------------------------------- deterministic maps (§6)
def _bound_elu_plus_one(x, params, config, u, ulps) -> np.ndarray:
    """``x + 1`` (one rounding) for x > 0. For x ≤ 0 (``E = eˣ``, ``A = 1 − E``) any of the
    three spellings of the formula: ``exp(x)`` (one call: ``2·ulps·u·E``), ``elu(x) + 1`` with
    ``elu(x) = expm1(x)`` (``2·ulps·u·A`` from the call, ``u·E`` from the sum: the sum cancels,
    so the call's error, relative to ``A``, is absolute in the result) and with ``elu(x) = eˣ − 1``
    (``(1 + u)(2·ulps·u·E + u·A) + u·E``); all three lie within
    ``(1 + u)²·(2·ulps·u·max(A, E) + u·A) + u·E``, plus the underflow floor η of the dtype.
    ``F.elu(x) + 1`` at x = −4 in float32 errs by 2.6e-8 (1.4e-6 relative), where ``exp(x)``
    alone would be allowed 8.7e-9."""
    e = np.exp(np.minimum(x, 0.0))
    a = 1.0 - e
    neg = (1 + u) ** 2 * (2 * ulps * u * np.maximum(a, e) + u * a) + u * e
    return np.where(x > 0, u * (x + 1), neg + smallest_normal(u))


def _bound_log_elu_plus_one(x, params, config, u, ulps) -> np.ndarray:
    """``log1p(x)`` (one call: ``2·ulps·u·|log1p x|``) for x > 0; exactly ``x`` for x ≤ 0."""
    return np.where(x > 0, 2 * ulps * u * np.log1p(np.maximum(x, 0.0)), 0.0)


@mp_feature("elu_plus_one", log=True, error_bound=_bound_log_elu_plus_one)
def _log_elu_plus_one(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    return np.frompyfunc(lambda v: mpmath.log1p(v) if v > 0 else v, 1, 1)(x_mp)


@mp_feature("elu_plus_one", error_bound=_bound_elu_plus_one)
def _elu_plus_one(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    return np.frompyfunc(lambda v: v + 1 if v > 0 else mpmath.exp(v), 1, 1)(x_mp)


@mp_feature("relu", error_bound=_bound_zero)
def _relu(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    return mp_max0(x_mp)


def _bound_square(x, params, config, u, ulps) -> np.ndarray:
    """One rounded product: ``u·x²``."""
    return u * x * x


@mp_feature("square", error_bound=_bound_square)
def _square(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    return x_mp * x_mp


def _bound_cosformer(x, params, config, u, ulps, *, positions=None) -> np.ndarray:
    """``relu(x)·sin(a)``, ``a = (π/2M)·i``: ``a`` carries 3 roundings (π, the division, the
    product; float64), sin/cos are 1-Lipschitz (absolute ``γ_3·a``) plus one call and one cast
    (``(2·ulps + 1)u`` relative); then one rounded product with the exact ``relu(x)``."""
    pos, big_m = _positions(positions, x.shape[-2], config["M"])
    angle = (math.pi / (2 * big_m)) * pos.astype(np.float64)
    parts = []
    for f in (np.sin, np.cos):
        val = f(angle)[:, None]
        err = gamma(3, u) * angle[:, None] + (2 * ulps + 1) * u * np.abs(val)
        r = _term(np.maximum(x, 0.0), 0.0, u, ulps)
        s = _bc(_term(val, err, u, ulps), x.shape)
        parts.append((r * s).e)
    return np.concatenate(parts, axis=-1)


@mp_feature("cosformer", error_bound=_bound_cosformer)
def _cosformer(
    x_mp: np.ndarray, params: Params, config: Mapping, *, positions: Any = None
) -> np.ndarray:
    pos, big_m = _positions(positions, x_mp.shape[-2], config["M"])
    angle = np.array([mpmath.pi * int(i) / (2 * big_m) for i in pos], dtype=object)[:, None]
    r = mp_max0(x_mp)
    return np.concatenate([r * mp_sin(angle), r * mp_cos(angle)], axis=-1)


def _bound_dpfp(x, params, config, u, ulps) -> np.ndarray:
    """``r_k·r_(k−j)`` of exact clamps: one rounding, ``u·|φ|``."""
    nu = int(config["nu"])
    r = np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], axis=-1)
    phi = np.concatenate([r * np.roll(r, j, axis=-1) for j in range(1, nu + 1)], axis=-1)
    return u * phi


@mp_feature("dpfp", error_bound=_bound_dpfp)
def _dpfp(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    nu = config["nu"]
    if isinstance(nu, bool) or not isinstance(nu, int) or nu < 1:
        raise ValueError(f"nu must be an integer >= 1, got {nu!r}")
    return mp_dpfp(x_mp, nu)


def _hedgehog_log_term(x, params, config, u, ulps) -> ErrorTerm:
    """Error of ``L = s − log Σ exp(s)``, ``s = z − max z``, ``z = Wx + b``.

    * ``z``: dot of length d, bias add, casts of W and b: ``E_i = γ_(d+4)(Σ|W_ij x_j| + |b_i|)``;
      with ``E = max_i E_i`` (per row), ``max z`` is off by ≤ E (max is 1-Lipschitz), so
      ``|Δs_i| ≤ 2E + u|s_i|`` (the subtraction's rounding).
    * ``exp(s_i)`` relative ``expm1(2E + u|s_i|) + 2·ulps·u``; the sum of d positive terms adds
      ``γ_d``: ``ρ_S = (1 + max_i ρ_i)(1 + γ_d) − 1``.
    * ``log S``: ``−log(1 − ρ_S) + 2·ulps·u·|log S|``; the final subtraction rounds once more:
      ``u·(|s_i| + |log S|)``."""
    w, b = _hedgehog_weights(params, x.shape[-1])
    z = x @ w.T + b
    e_z = gamma(x.shape[-1] + 4, u) * (np.abs(x) @ np.abs(w).T + np.abs(b))
    out_v, out_e = [], []
    for zz in (z, -z):
        s = zz - zz.max(axis=-1, keepdims=True)
        big_e = e_z.max(axis=-1, keepdims=True)
        e_s = 2 * big_e + u * np.abs(s)
        rho = np.expm1(e_s) + 2 * ulps * u
        rho_s = (1 + rho.max(axis=-1, keepdims=True)) * (1 + gamma(x.shape[-1], u)) - 1
        log_s = np.log(np.sum(np.exp(s), axis=-1, keepdims=True))
        e_log = -np.log1p(-rho_s) + 2 * ulps * u * np.abs(log_s)
        out_v.append(s - log_s)
        out_e.append(e_s + e_log + u * (np.abs(s) + np.abs(log_s)))
    return _term(np.concatenate(out_v, axis=-1), np.concatenate(out_e, axis=-1), u, ulps)


_bound_log_hedgehog, _bound_hedgehog = exp_of_log_bounds(_hedgehog_log_term)


def _hedgehog_weights(params: Params, d: int) -> tuple[np.ndarray, np.ndarray]:
    """``W (d, d)`` and ``b (d,)`` from the parameter draw."""
    check_params("params", params, {"W": (d, d), "b": (d,)})
    return np.asarray(params["W"], dtype=np.float64), np.asarray(params["b"], dtype=np.float64)


def _mp_hedgehog_weights(params: Params, d: int) -> tuple[np.ndarray, np.ndarray]:
    w, b = _hedgehog_weights(params, d)
    return to_mp(w), to_mp(b)


@mp_feature("hedgehog", log=True, error_bound=_bound_log_hedgehog)
def _log_hedgehog(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    return mp_hedgehog_log(x_mp, *_mp_hedgehog_weights(params, x_mp.shape[-1]))


@mp_feature("hedgehog", error_bound=_bound_hedgehog)
def _hedgehog(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    return mp_exp(_log_hedgehog(x_mp, params, config))


# ------------------------------------------------------------------- learned maps (§7)
def _trig_features(proj: ErrorTerm, scale: ErrorTerm) -> np.ndarray:
    trig = proj.cos().concat(proj.sin())
    return (_bc(scale, trig.v.shape) * trig).e


def _projection(x: np.ndarray, omega: np.ndarray, e_omega: np.ndarray, u, ulps) -> ErrorTerm:
    """``ω_iᵀx`` with ω known to ``e_ω``: ``γ_d Σ|ω||x| + (1 + γ_d) Σ e_ω|x|``."""
    g = gamma(x.shape[-1], u)
    e = g * (np.abs(x) @ np.abs(omega).T) + (1 + g) * (np.abs(x) @ e_omega.T)
    return _term(x @ omega.T, e, u, ulps)


def _gmm_draw(params: Params, d: int) -> dict[str, np.ndarray]:
    """``eps (m, d)``, ``pi (C,)``, ``mu (C, d)``, ``L (C, d, d)`` from the parameter draw; the
    weights must be > 0 (the twin uses them as given, so weights that do not sum to 1 show up as
    a mismatch with the kernel)."""
    c = np.shape(params["pi"])[0] if "pi" in params else None
    check_params(
        "params", params, {"eps": (None, d), "pi": (c,), "mu": (c, d), "L": (c, d, d)}
    )
    g = {k: np.asarray(params[k], dtype=np.float64) for k in ("eps", "pi", "mu", "L")}
    if np.any(g["pi"] <= 0):
        raise ValueError(f"mixture weights pi must all be > 0, got {g['pi']}")
    return g


def _gmm_omega(x, params, config, tag, u) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``ω = μ_c + L_cᵀε`` (dot of length d, the add, casts of μ, L, ε and of ω):
    ``e_ω = γ_(d+5)(|μ_c| + Σ_k|L_c,kj ε_k|)``; and the exact ``a² = π_c/m_c``."""
    g = _gmm_draw(params, x.shape[-1])
    eps = g["eps"]
    comps, counts = _layout(eps.shape[0], g["pi"].shape[0])
    omega = g["mu"][comps] + np.einsum("mkj,mk->mj", g["L"][comps], eps)
    mag = np.abs(g["mu"][comps]) + np.einsum("mkj,mk->mj", np.abs(g["L"][comps]), np.abs(eps))
    return omega, gamma(x.shape[-1] + 5, u) * mag, g["pi"][comps] / counts[comps]


def _bound_gmm_rks(x, params, config, u, ulps) -> np.ndarray:
    """``a_i[cos p_i, sin p_i]``: projection as in :func:`_projection` with ``e_ω`` of
    :func:`_gmm_omega`; ``a = √(π/m_c)`` with 3 roundings (cast of π, division, cast) and one
    sqrt call; one final product."""
    omega, e_omega, a2 = _gmm_omega(x, params, config, "gmm_rks", u)
    proj = _projection(x, omega, e_omega, u, ulps)
    a = _bc(proj.const(np.sqrt(a2), _g(3, u, ulps, 1)), proj.v.shape)
    return (a.concat(a) * proj.cos().concat(proj.sin())).e


def _mp_gmm(x_mp: np.ndarray, params: Params, config: Mapping, tag: str):
    g = {k: to_mp(v) for k, v in _gmm_draw(params, x_mp.shape[-1]).items()}
    eps = g["eps"]
    comps, counts = _layout(eps.shape[0], g["pi"].shape[0])
    omega = g["mu"][comps] + np.einsum("mkj,mk->mj", g["L"][comps], eps)
    a2 = g["pi"][comps] / np.array([mpmath.mpf(int(c)) for c in counts[comps]], dtype=object)
    return x_mp @ omega.T, a2


@mp_feature("gmm_rks", error_bound=_bound_gmm_rks)
def _gmm_rks(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    proj, a2 = _mp_gmm(x_mp, params, config, "gmm_rks")
    a = np.frompyfunc(mpmath.sqrt, 1, 1)(a2)
    return np.concatenate([a * mp_cos(proj), a * mp_sin(proj)], axis=-1)


def _gmm_prf_log_term(x, params, config, u, ulps) -> ErrorTerm:
    """``p − ‖x‖²/2 + ½ log a²``: projection (:func:`_projection`), the half squared norm
    (``γ_(d+1)`` relative: d squares, a nonnegative sum, ×½ exact), ``½ log a²`` with ``a²``
    from 3 roundings (``−log(1 − γ_3)`` absolute after the log) plus one log call; two rounded
    additions."""
    omega, e_omega, a2 = _gmm_omega(x, params, config, "gmm_prf", u)
    proj = _projection(x, omega, e_omega, u, ulps)
    half = 0.5 * np.sum(x * x, axis=-1, keepdims=True)
    half_t = _bc(_term(half, gamma(x.shape[-1] + 1, u) * half, u, ulps), proj.v.shape)
    log_a = 0.5 * np.log(a2)
    e_log = 0.5 * (-np.log1p(-gamma(3, u)) + 2 * ulps * u * np.abs(np.log(a2)))
    log_t = _bc(_term(log_a, e_log, u, ulps), proj.v.shape)
    return proj - half_t + log_t


_bound_log_gmm_prf, _bound_gmm_prf = exp_of_log_bounds(_gmm_prf_log_term)


@mp_feature("gmm_prf", log=True, error_bound=_bound_log_gmm_prf)
def _log_gmm_prf(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    proj, a2 = _mp_gmm(x_mp, params, config, "gmm_prf")
    half = (x_mp * x_mp).sum(axis=-1, keepdims=True) / 2
    return proj - half + np.frompyfunc(mpmath.log, 1, 1)(a2) / 2


@mp_feature("gmm_prf", error_bound=_bound_gmm_prf)
def _gmm_prf(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    return mp_exp(_log_gmm_prf(x_mp, params, config))


def _bound_fastfood(x, params, config, u, ulps) -> np.ndarray:
    """W per block: ``S·(H G)`` (1 rounding), the length-p product with ``Π H B`` (γ_p on
    ``Σ_k|G_k||B_j|``), ``/√p`` (division + sqrt call), casts of S, G, B and of W:
    ``e_W,ij = γ(p + 6 + 2·ulps)·|S_i|Σ_k|G_k||B_j|/√p``. Projection of ``x/σ`` (one more
    rounding): ``γ_(d+2)Σ|W||x|/σ + (1 + γ_(d+2))Σ e_W|x|/σ``. Then cos/sin and the scale
    ``1/√rows`` (3 roundings, one sqrt call)."""
    sigma = float(config["sigma"])
    d = x.shape[-1]
    s, g, b, perm = (params[k] for k in ("S", "G", "B", "perm"))
    w = _fastfood_matrix_f64(s, g, b, perm, d)
    p = s.shape[-1]
    mag = np.concatenate(
        [np.abs(s[k])[:, None] * np.abs(g[k]).sum() * np.abs(b[k])[None, :] / math.sqrt(p)
         for k in range(s.shape[0])],
        axis=0,
    )[:, :d]
    e_w = _g(p + 6, u, ulps, 1) * mag
    gd = gamma(d + 2, u)
    xs = x / sigma
    e = gd * (np.abs(xs) @ np.abs(w).T) + (1 + gd) * (np.abs(xs) @ e_w.T)
    proj = _term(xs @ w.T, e, u, ulps)
    scale = proj.const(1 / math.sqrt(w.shape[0]), _g(3, u, ulps, 1))
    return _trig_features(proj, scale)


@mp_feature("fastfood", error_bound=_bound_fastfood)
def _fastfood(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    sigma = mpmath.mpf(float(config["sigma"]))
    s, g, b = (to_mp(params[k]) for k in ("S", "G", "B"))
    _perm(params["perm"])
    w = mp_fastfood_matrix(s, g, b, params["perm"], x_mp.shape[-1])
    proj = (x_mp / sigma) @ w.T
    return np.concatenate([mp_cos(proj), mp_sin(proj)], axis=-1) / mpmath.sqrt(w.shape[0])


def _generative_weights(params: Params, d: int) -> tuple[np.ndarray, ...]:
    """``W1 (h, k)``, ``b1 (h,)``, ``W2 (d, h)``, ``b2 (d,)`` and ``eps (m, k)`` from the draw."""
    h, k = np.shape(params["W1"]) if "W1" in params else (None, None)
    check_params(
        "params", params,
        {"W1": (h, k), "b1": (h,), "W2": (d, h), "b2": (d,), "eps": (None, k)},
    )
    return tuple(
        np.asarray(params[key], dtype=np.float64) for key in ("W1", "b1", "W2", "b2", "eps")
    )


def _bound_generative(x, params, config, u, ulps) -> np.ndarray:
    """``a = W1ε + b1``: ``e_a = γ_(k+4)(Σ|W1||ε| + |b1|)`` (dot of length k, the add, casts of
    ε, W1, b1); ``t = sin a``: ``e_t = e_a + 2·ulps·u·(|t| + e_a)`` (1-Lipschitz, one call);
    ``ω = W2 t + b2``: ``e_ω = Σ_h|W2|e_t + γ_(h+4)(Σ_h|W2|(|t| + e_t) + |b2|)`` (dot of length h,
    the add, casts of W2, b2 and of ω); projection (:func:`_projection`), cos/sin and ``1/√m``."""
    w1, b1, w2, b2, eps = _generative_weights(params, x.shape[-1])
    k, h = w1.shape[1], w1.shape[0]
    a = eps @ w1.T + b1
    e_a = gamma(k + 4, u) * (np.abs(eps) @ np.abs(w1).T + np.abs(b1))
    t = np.sin(a)
    e_t = e_a + 2 * ulps * u * (np.abs(t) + e_a)
    omega = t @ w2.T + b2
    e_omega = e_t @ np.abs(w2).T + gamma(h + 4, u) * ((np.abs(t) + e_t) @ np.abs(w2).T + np.abs(b2))
    proj = _projection(x, omega, e_omega, u, ulps)
    scale = proj.const(1 / math.sqrt(eps.shape[0]), _g(3, u, ulps, 1))
    return _trig_features(proj, scale)


@mp_feature("generative", error_bound=_bound_generative)
def _generative(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    w1, b1, w2, b2, eps = (to_mp(a) for a in _generative_weights(params, x_mp.shape[-1]))
    omega = mp_generative_frequencies(eps, w1, b1, w2, b2)
    proj = x_mp @ omega.T
    return np.concatenate([mp_cos(proj), mp_sin(proj)], axis=-1) / mpmath.sqrt(omega.shape[0])


# ------------------------------------------------------------------- polysketch (§18)
def _bound_polysketch(x, params, config, u, ulps) -> np.ndarray:
    """``z = Sx`` then ``zᵢzⱼ``: with ``aᵢ = Σⱼ|Sᵢⱼxⱼ|``, the projection (``S`` cast once to the
    compute dtype, a length-d dot product) is within ``γ_(d+1)·aᵢ`` of ``zᵢ``, and the rounded
    product within ``((1 + γ_(d+1))²(1 + u) − 1)·aᵢaⱼ ≤ γ_(2d+3)·aᵢaⱼ`` of ``zᵢzⱼ`` (``|zᵢ| ≤ aᵢ``);
    plus the smallest normal ``η`` for a product that underflows."""
    s = np.asarray(params["S"], dtype=np.float64)
    a = np.abs(x) @ np.abs(s).T
    d = x.shape[-1]
    outer = (a[..., :, None] * a[..., None, :]).reshape(*a.shape[:-1], -1)
    return outer * gamma(2 * d + 3, u) + smallest_normal(u)


@mp_feature("polysketch", error_bound=_bound_polysketch, not_derived={
    "backward": "no derived backward bound for PolySketch: its gradient is checked by finite "
                "differences (test_gradcheck_float64_feature_map)",
    "jacobian": "no closed Jacobian for PolySketch: the finite differences check the gradient"})
def _polysketch(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    check_params("params", dict(params), {"S": (None, x_mp.shape[-1])})
    z = x_mp @ to_mp(params["S"]).T
    return (z[..., :, None] * z[..., None, :]).reshape(*z.shape[:-1], -1)


# ------------------------------------------------------------------- random_maclaurin (§18)
def _maclaurin_setup(params: Params, config: Mapping, d: int
                     ) -> tuple[np.ndarray, np.ndarray, float]:
    check_params("params", dict(params), {"degree": (None,), "W": (None, None, d)})
    deg = np.asarray(params["degree"], dtype=np.float64)
    w = np.asarray(params["W"], dtype=np.float64)
    if deg.shape[0] != w.shape[0] or not (np.all(deg == np.floor(deg)) and np.all(deg >= 0)
                                          and np.all(deg <= w.shape[1])):
        raise ValueError("params['degree'] must hold one integer in [0, K] per row of W (m, K, d)")
    p = float(config["p"])
    if not (p > 1 and p < float("inf")):
        raise ValueError(f"config['p'] must be a finite number > 1, got {p}")
    return deg.astype(np.int64), w, p


def _bound_random_maclaurin(x, params, config, u, ulps) -> np.ndarray:
    """``√(c_N/m)·Π_(j<N) w_jᵀx`` with ``A = Σ|xᵢ| ≥ |w_jᵀx|`` (±1 weights, exact in every
    dtype): each projection within ``γ_d·A``, the ``N − 1`` products and the final one, and the
    coefficient ``p^N/(N!(1 − 1/p))/m`` (``≤ 2N + 6`` roundings, a sqrt and a cast) give
    ``|φ̂ − φ| ≤ √(c_N/m)·((A(1 + γ_d))^N(1 + γ_(3N+10)) − A^N) ≤ √(c_N/m)·A^N·γ_(dN+3N+10)``
    (``Π(|z_j| + e) − Π|z_j|`` grows with ``|z_j| ≤ A``); plus ``η`` for an underflow."""
    deg, w, p = _maclaurin_setup(params, config, x.shape[-1])
    m = w.shape[0]
    coef = np.array([p**n / math.factorial(n) / (1 - 1 / p) for n in deg]) / m
    a = np.sum(np.abs(x), axis=-1, keepdims=True)
    d = x.shape[-1]
    rel = np.array([gamma(d * n + 3 * n + 10, u) for n in deg])
    return np.sqrt(coef) * a ** deg * rel + smallest_normal(u)


@mp_feature("random_maclaurin", error_bound=_bound_random_maclaurin, not_derived={
    "backward": "no derived backward bound for random Maclaurin features: its gradient is "
                "checked by finite differences (test_gradcheck_float64_feature_map)",
    "jacobian": "no closed Jacobian for random Maclaurin features: the finite differences "
                "check the gradient"})
def _random_maclaurin(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    deg, w, p = _maclaurin_setup(params, config, x_mp.shape[-1])
    m = w.shape[0]
    pm = mpmath.mpf(p)
    out = np.empty((*x_mp.shape[:-1], m), dtype=object)
    for i, n in enumerate(deg):
        coef = mpmath.sqrt(pm**int(n) / mpmath.factorial(int(n)) / (1 - 1 / pm) / m)
        col = np.full(x_mp.shape[:-1], coef, dtype=object)
        for j in range(int(n)):
            col = col * (x_mp @ to_mp(w[i, j]))
        out[..., i] = col
    return out


# ------------------------------------------------------------------- sderf (§20)
def _sderf_float64(params, config, d: int):
    """``A``, ``B = (I − 4A)^(1/2)`` and ``log D`` in float64 (magnitudes for the bound)."""
    alpha, beta = float(config["alpha"]), float(config["beta"])
    a = alpha * np.eye(d) + (beta / d) * np.ones((d, d))
    lam, q = np.linalg.eigh(a)
    k = 1 - 4 * lam
    return a, (q * np.sqrt(k)) @ q.T, 0.25 * float(np.sum(np.log(k))), lam


def _log_term_sderf(x, params, config, u, ulps) -> ErrorTerm:
    """``x(WB)ᵀ + row + xᵀCx``: the projection by ``WB`` (formed in float64, its own error
    ``e_WB`` carried through the length-d dot product), the row term ``ωᵢᵀAωᵢ + log D −
    ½ log m`` (a (2d+16)-rounding float64 sum and three log calls, relative to the sum of the
    magnitudes, plus the eigenvalues' error through ``log(1 − 4λ)``), ``xᵀCx = −‖x‖²/2`` as a
    d²-term sum of which d are nonzero (``γ_(d+3)``), then two rounded additions."""
    from kernel_verify.verify.references.features import _const_rel, _projection_term

    w = np.asarray(params["W"], dtype=np.float64)
    m, d = w.shape
    a, b, log_d, lam = _sderf_float64(params, config, d)
    u64 = 2.0**-53
    wb = w @ b
    # WB formed in float64 from an eigh-based square root: entrywise within γ_(16d+32)(u64)·
    # (|W||B|) plus 64·d·u64·max|B|·‖ωᵢ‖₁ (the eigendecomposition's backward error)
    e_wb = (gamma(16 * d + 32, u64) * (np.abs(w) @ np.abs(b))
            + 64 * d * u64 * np.abs(b).max() * np.abs(w).sum(axis=1, keepdims=True))
    p = _projection_term(x, wb, 1.0, u, ulps)
    p = p._new(p.v, p.e + (1 + gamma(d + 3, u)) * (np.abs(x) @ e_wb.T))
    quad_rows = np.einsum("id,de,ie->i", w, a, w)
    row_v = quad_rows + log_d - 0.5 * np.log(m)
    k_min = float(np.min(1 - 4 * lam))
    row_mag = (np.einsum("id,de,ie->i", np.abs(w), np.abs(a), np.abs(w)) + abs(log_d)
               + 0.5 * np.log(m) + d * d * 64 * u64 * np.abs(a).max() / k_min)
    row = p._new(np.broadcast_to(row_v, p.v.shape),
                 np.broadcast_to(_const_rel(p, 2 * d + 16, 3) * row_mag, p.v.shape))
    half = 0.5 * np.sum(x * x, axis=-1, keepdims=True)
    quad = p._new(np.broadcast_to(-half, p.v.shape),
                  np.broadcast_to(gamma(d + 3, u) * half, p.v.shape))
    return p + row + quad


_bound_log_sderf, _bound_sderf = exp_of_log_bounds(_log_term_sderf)


def _mp_sderf_log(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    from kernel_verify.verify.references.dense_exponential import sderf_parameters

    check_params("params", dict(params), {"W": (None, x_mp.shape[-1])})
    w = to_mp(params["W"])
    m, d = w.shape
    p = sderf_parameters(config, d)
    a = np.array(p["A"].tolist(), dtype=object)
    b = np.array(p["B1"].tolist(), dtype=object)
    row = (w @ a * w).sum(axis=-1) + p["log_D"] - mpmath.log(m) / 2
    return x_mp @ (w @ b).T + row - (x_mp * x_mp).sum(axis=-1, keepdims=True) / 2


@mp_feature("sderf", log=True, error_bound=_bound_log_sderf)
def _log_sderf(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    return _mp_sderf_log(x_mp, params, config)


@mp_feature("sderf", error_bound=_bound_sderf)
def _sderf(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    return mp_exp(_mp_sderf_log(x_mp, params, config))


# ReBased and DARKFormer (docs/math.md §21): twins, kernels and bounds in their own module
from kernel_verify.verify.references import features_learned_attention  # noqa: E402, F401
