"""mpmath references of the catalogue kernels (exact, deterministic and learned maps).

Registered with :func:`kernel_verify.verify.references.kernels.mp_kernel`; each takes ``x``, ``y``
(object arrays (d,) of mpf) and the entry's kernel params (floats arrive as mpf, ints as int,
float64 arrays as mp arrays). docs/math.md §5–§7.

=====================  =====================================================================
kernel id              k(x, y)
=====================  =====================================================================
``taylor(order[, s])`` ``Σ_(k≤p) tᵏ/k!``, ``t = s·xᵀy``; ``s = 1/√d`` unless ``scale`` is given
                       (a map that leaves the 1/√d to its caller declares ``scale=1.0``)
``polynomial(c, p)``   ``(xᵀy + c)^p`` (``c ≥ 0``, integer ``p ≥ 0``)
``linear``             ``xᵀy``
``cosine``             ``xᵀy/(‖x‖‖y‖)``; **0 when x = 0 or y = 0** (the map sets φ(0) = 0)
``elu_plus_one``       ``Σ f(x_i)f(y_i)``, ``f(a) = a + 1`` (a > 0), ``eᵃ`` (a ≤ 0)
``relu_dot``           ``relu(x)ᵀrelu(y)``
``square_dot``         ``Σ x_i² y_i²``
``cosformer(M, i, j)`` ``relu(x)ᵀrelu(y)·cos(π(i−j)/2M)``: **the positions i of x and j of y are
                       kernel params too** (the entry's ``kernel_params`` gives ``M``; the caller
                       adds ``i``, ``j`` — see :func:`cosformer_gram_mp`)
``dpfp(nu)``           ``φ(x)ᵀφ(y)`` of DPFP-ν (its defining finite map)
``hedgehog(W, b)``     ``φ(x)ᵀφ(y)`` of Hedgehog with weights W, b
``spectral_mixture``   ``Σ_c π_c exp(−‖L_cδ‖²/2) cos(μ_cᵀδ)`` (``δᵀΣ_cδ = ‖L_cδ‖²``)
``gmm_prf``            ``Σ_c π_c exp(μ_cᵀs + ½‖L_cs‖² − ‖x‖²/2 − ‖y‖²/2)``, ``s = x + y``
``fastfood_learned``   ``(1/rows)Σ_i cos(w_iᵀδ/σ)``, rows of ``S H G Π H B/√p`` built exactly
``generative``         ``E_ε cos(g(ε)ᵀδ)``, ``g(ε) = W2 sin(W1ε + b1) + b2``, ``ε ~ N(0, I_k)``
=====================  =====================================================================

The generative kernel has no closed form: it is a k-dimensional Gauss–Hermite tensor-product
rule (:func:`generative_kernel_mp`), validated by comparing consecutive orders of the sequence
:data:`GENERATIVE_ORDERS` (nodes per dimension) until two agree to :data:`GENERATIVE_ABS_TOL`
absolutely (the kernel is bounded by 1 in absolute value, so this is 100 times below the
float64 rounding ``u = 1.1e-16`` of a value near 1; the higher order is returned, the more
accurate of the two since the integrand is entire); otherwise
:class:`~kernel_verify.verify.references.quadrature.QuadratureError` is raised. The frequencies
``g(ε)`` at the nodes are cached per (weights, order, dps), so a Gram matrix costs one ``cos`` per
node and pair; values are memoised per ``±δ``, in memory and in the file cache
(:mod:`kernel_verify.verify.cache`, exactly as computed, keyed by the exact, signed weights,
``δ``, ``dps`` and this module's source; only ``δ`` and ``−δ`` share an entry, by evenness).
Cost: about 3 s for the first value at k = 2 (node frequencies up to 64² nodes), ~0.1 s for
each further one; a stored value is read in ~1 ms.

The accuracy of a value is the validated ``GENERATIVE_ABS_TOL``, not the working precision: a
gradient by differences of these values
(:func:`~kernel_verify.verify.references.gradients.kernel_grad_mp`) is still exact to that order,
because both probes use the same rule (the value of one fixed rule is a smooth function of
``δ``, and its derivative is the same rule applied to the derivative of the integrand).
:func:`generative_grad_mp` applies the rule to ``−sin(g(ε)ᵀδ)·g(ε)`` directly: the second route
of ``tests/test_second_route.py``.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import mpmath
import numpy as np
from scipy.linalg import hadamard

from kernel_verify.verify.cache import (
    exact_text,
    file_cache_get,
    file_cache_put,
    mpf_from_json,
    mpf_to_json,
    source_digest,
)
from kernel_verify.verify.references import quadrature as quadrature_module
from kernel_verify.verify.references.kernels import gram_mp, mp_kernel
from kernel_verify.verify.references.mp import mp_cos, mp_exp
from kernel_verify.verify.references.quadrature import QuadratureError, hermite_rule

__all__ = [
    "GENERATIVE_ABS_TOL",
    "GENERATIVE_MAX_POINTS",
    "GENERATIVE_ORDERS",
    "cosformer_gram_mp",
    "generative_grad_mp",
    "generative_kernel_mp",
    "mp_dpfp",
    "mp_fastfood_matrix",
    "mp_generative_frequencies",
    "mp_hedgehog_log",
]

#: absolute accuracy to which the generative kernel's quadrature is validated.
GENERATIVE_ABS_TOL = 1e-18
#: Gauss–Hermite orders tried in turn (nodes per latent dimension).
GENERATIVE_ORDERS = (24, 32, 48, 64, 96, 128)
#: largest tensor-product rule tried (nodes in total, n^k).
GENERATIVE_MAX_POINTS = 20_000

mp_sin_ = np.frompyfunc(mpmath.sin, 1, 1)


def _dot(x: np.ndarray, y: np.ndarray) -> Any:
    return mpmath.fsum(a * b for a, b in zip(x, y, strict=True))


def _relu(a: np.ndarray) -> np.ndarray:
    return np.array([v if v > 0 else mpmath.mpf(0) for v in a], dtype=object)


def _int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def taylor_scale(scale: Any, d: int) -> Any:
    """The factor ``s`` of ``t = s·xᵀy`` in the Taylor kernel: ``1/√d`` when ``scale`` is None,
    else ``scale`` (a finite number > 0)."""
    if scale is None:
        return 1 / mpmath.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, int | float | mpmath.mpf | np.number):
        raise TypeError(f"scale must be a number (the factor s of t = s·xᵀy) or None (1/√d), "
                        f"got {type(scale).__name__}")
    value = mpmath.mpf(scale)
    if not (mpmath.isfinite(value) and value > 0):
        raise ValueError(f"scale must be finite and > 0 (the factor s of t = s·xᵀy), got {scale}")
    return value


# ----------------------------------------------------------------------- exact finite kernels
@mp_kernel("taylor")
def _taylor(x: np.ndarray, y: np.ndarray, *, order: int, scale: Any = None) -> Any:
    """Σ_(k≤order) tᵏ/k! with t = scale·xᵀy (scale = 1/√d unless given)"""
    order = _int("order", order, 0)
    t = _dot(x, y) * taylor_scale(scale, len(x))
    return mpmath.fsum(t**k / mpmath.factorial(k) for k in range(order + 1))


@mp_kernel("polynomial")
def _polynomial(x: np.ndarray, y: np.ndarray, *, c: Any, p: int) -> Any:
    p = _int("p", p, 0)
    if c < 0:
        raise ValueError(f"c must be >= 0 for the polynomial kernel's real feature map, got {c}")
    return (_dot(x, y) + c) ** p


@mp_kernel("linear")
def _linear(x: np.ndarray, y: np.ndarray) -> Any:
    return _dot(x, y)


@mp_kernel("cosine")
def _cosine(x: np.ndarray, y: np.ndarray) -> Any:
    nx, ny = mpmath.sqrt(_dot(x, x)), mpmath.sqrt(_dot(y, y))
    if nx == 0 or ny == 0:
        return mpmath.mpf(0)
    return _dot(x, y) / (nx * ny)


# ---------------------------------------------------------------------- deterministic kernels
def _elu1(a: np.ndarray) -> np.ndarray:
    return np.array([v + 1 if v > 0 else mpmath.exp(v) for v in a], dtype=object)


@mp_kernel("elu_plus_one")
def _elu_plus_one(x: np.ndarray, y: np.ndarray) -> Any:
    return _dot(_elu1(x), _elu1(y))


@mp_kernel("relu_dot")
def _relu_dot(x: np.ndarray, y: np.ndarray) -> Any:
    return _dot(_relu(x), _relu(y))


@mp_kernel("square_dot")
def _square_dot(x: np.ndarray, y: np.ndarray) -> Any:
    return _dot(x * x, y * y)


@mp_kernel("cosformer")
def _cosformer(x: np.ndarray, y: np.ndarray, *, M: int, i: int, j: int) -> Any:
    big_m = _int("M", M, 1)
    for name, pos in (("i", i), ("j", j)):
        if not 0 <= _int(name, pos, 0) <= big_m:
            raise ValueError(f"position {name} = {pos} must lie in [0, M={big_m}]")
    return _dot(_relu(x), _relu(y)) * mpmath.cos(mpmath.pi * (i - j) / (2 * big_m))


def cosformer_gram_mp(
    X: np.ndarray,
    Y: np.ndarray,
    pos_x: np.ndarray,
    pos_y: np.ndarray,
    M: int,
    *,
    dps: int | None = None,
) -> np.ndarray:
    """The cosFormer Gram matrix ``[k(X_a, Y_b; i = pos_x[a], j = pos_y[b])]`` (mp array)."""
    pos_x, pos_y = np.asarray(pos_x), np.asarray(pos_y)
    if pos_x.shape != (len(X),) or pos_y.shape != (len(Y),):
        raise ValueError("pos_x, pos_y must have one position per row of X, Y")
    out = np.empty((len(X), len(Y)), dtype=object)
    for a in range(len(X)):
        for b in range(len(Y)):
            out[a, b] = gram_mp(
                "cosformer", X[a : a + 1], Y[b : b + 1], dps=dps,
                M=int(M), i=int(pos_x[a]), j=int(pos_y[b]),
            )[0, 0]
    return out


def mp_dpfp(x_mp: np.ndarray, nu: int) -> np.ndarray:
    """DPFP-ν features of mp rows ``(..., d)``: ``concat_(j=1..ν) r ⊙ roll(r, j)``."""
    zero = mpmath.mpf(0)
    pos = np.frompyfunc(lambda v: v if v > 0 else zero, 1, 1)
    r = np.concatenate([pos(x_mp), pos(-x_mp)], axis=-1)
    return np.concatenate([r * np.roll(r, j, axis=-1) for j in range(1, nu + 1)], axis=-1)


@mp_kernel("dpfp")
def _dpfp(x: np.ndarray, y: np.ndarray, *, nu: int) -> Any:
    nu = _int("nu", nu, 1)
    return _dot(mp_dpfp(x, nu), mp_dpfp(y, nu))


def _mp_log_softmax(z: np.ndarray) -> np.ndarray:
    out = np.empty_like(z)
    for idx in np.ndindex(z.shape[:-1]):
        row = z[idx]
        lse = mpmath.log(mpmath.fsum(mpmath.exp(v) for v in row))
        out[idx] = row - lse
    return out


def mp_hedgehog_log(x_mp: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[log_softmax(z), log_softmax(−z)]``, ``z = Wx + b`` (mp; rows ``(..., d)``)."""
    z = x_mp @ w.T + b
    return np.concatenate([_mp_log_softmax(z), _mp_log_softmax(-z)], axis=-1)


@mp_kernel("hedgehog")
def _hedgehog(x: np.ndarray, y: np.ndarray, *, W: np.ndarray, b: np.ndarray) -> Any:
    fx = mp_exp(mp_hedgehog_log(x, W, b))
    fy = mp_exp(mp_hedgehog_log(y, W, b))
    return _dot(fx, fy)


# ---------------------------------------------------------------------------- learned kernels
def _mixture(pi: np.ndarray, mu: np.ndarray, lower: np.ndarray) -> int:
    c = len(pi)
    if mu.shape[0] != c or lower.shape[0] != c:
        raise ValueError("pi, mu and L must have the same number of components")
    if any(p <= 0 for p in pi):
        raise ValueError("mixture weights pi must all be > 0")
    return c


@mp_kernel("spectral_mixture")
def _spectral_mixture(
    x: np.ndarray, y: np.ndarray, *, pi: np.ndarray, mu: np.ndarray, L: np.ndarray
) -> Any:
    delta = x - y
    terms = []
    for c in range(_mixture(pi, mu, L)):
        ld = L[c] @ delta
        terms.append(pi[c] * mpmath.exp(-_dot(ld, ld) / 2) * mpmath.cos(_dot(mu[c], delta)))
    return mpmath.fsum(terms)


@mp_kernel("gmm_prf")
def _gmm_prf(x: np.ndarray, y: np.ndarray, *, pi: np.ndarray, mu: np.ndarray, L: np.ndarray) -> Any:
    s = x + y
    base = -(_dot(x, x) + _dot(y, y)) / 2
    terms = []
    for c in range(_mixture(pi, mu, L)):
        ls = L[c] @ s
        terms.append(pi[c] * mpmath.exp(_dot(mu[c], s) + _dot(ls, ls) / 2 + base))
    return mpmath.fsum(terms)


def mp_fastfood_matrix(
    s: np.ndarray, g: np.ndarray, b: np.ndarray, perm: np.ndarray, d: int
) -> np.ndarray:
    """Exact rows of ``S H G Π H B/√p`` per block (inputs ``(blocks, p)``; mp or float arrays),
    first d columns: an mp array ``(blocks·p, d)``."""
    s, g, b = (np.asarray(a, dtype=object) for a in (s, g, b))
    perm_i = np.asarray([[int(v) for v in row] for row in np.asarray(perm, dtype=object)])
    p = s.shape[-1]
    h = hadamard(p).astype(object)
    root = mpmath.sqrt(p)
    blocks = []
    for k in range(s.shape[0]):
        right = (h * b[k])[perm_i[k], :]
        blocks.append((s[k][:, None] * (h * g[k])) @ right / root)
    return np.concatenate(blocks, axis=0)[:, :d]


@mp_kernel("fastfood_learned")
def _fastfood_learned(
    x: np.ndarray, y: np.ndarray, *, sigma: Any, S: Any, G: Any, B: Any, perm: Any
) -> Any:
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    two_d = [np.atleast_2d(a) for a in (S, G, B, perm)]
    w = mp_fastfood_matrix(*two_d, len(x))
    u = w @ ((x - y) / sigma)
    return mpmath.fsum(mp_cos(u)) / w.shape[0]


def mp_generative_frequencies(eps: np.ndarray, w1, b1, w2, b2) -> np.ndarray:
    """``g(ε) = W2 sin(W1ε + b1) + b2`` for mp rows ``eps (N, k)`` → ``(N, d)``."""
    return mp_sin_(eps @ np.asarray(w1).T + b1) @ np.asarray(w2).T + b2


def _key(*arrays: np.ndarray) -> tuple:
    return tuple((a.shape, tuple(a.ravel())) for a in arrays)


@functools.lru_cache(maxsize=16)
def _generative_nodes(key: tuple, order: int, dps: int) -> tuple[np.ndarray, np.ndarray]:
    """``(sin(W1ε + b1) (N, h), weights (N,))`` over the tensor grid of ``order`` nodes per latent
    dimension. The sines use the angle-addition formula one dimension at a time,
    ``sin(a + W1_hj ε_j) = sin a cos(W1_hj ε_j) + cos a sin(W1_hj ε_j)``, so only ``order·h``
    sines and cosines per dimension are evaluated (exact identities; at ``dps`` digits the few
    extra roundings are ~10^-dps)."""
    (w1_shape, w1), (_, b1) = key[0], key[1]
    h, k = w1_shape
    w1 = np.array(w1, dtype=object).reshape(w1_shape)
    nodes, weights = hermite_rule(order, dps)
    with mpmath.workdps(dps + 5):
        node_arr = np.array(nodes, dtype=object)
        s = np.array([[mpmath.sin(v) for v in b1]], dtype=object)
        c = np.array([[mpmath.cos(v) for v in b1]], dtype=object)
        wts = np.array([mpmath.mpf(1)], dtype=object)
        for j in range(k):
            angle = np.outer(node_arr, w1[:, j])  # (order, h)
            st = np.frompyfunc(mpmath.sin, 1, 1)(angle)
            ct = np.frompyfunc(mpmath.cos, 1, 1)(angle)
            s, c = (
                (s[:, None, :] * ct[None] + c[:, None, :] * st[None]).reshape(-1, h),
                (c[:, None, :] * ct[None] - s[:, None, :] * st[None]).reshape(-1, h),
            )
            wts = np.outer(wts, np.array(weights, dtype=object)).ravel()
    return s, wts


def generative_kernel_mp(
    x: np.ndarray, y: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray
) -> Any:
    """``E_ε cos(g(ε)ᵀ(x − y))`` by a validated Gauss–Hermite product rule (module docstring).
    ``k(x, x) = 1`` exactly; values are memoised per ``±(x − y)`` (the kernel is even)."""
    arrays = [np.asarray(a, dtype=object) for a in (w1, b1, w2, b2)]
    delta = np.asarray(x, dtype=object) - np.asarray(y, dtype=object)
    if all(v == 0 for v in delta):
        return mpmath.mpf(1)
    flat = tuple(delta.ravel())  # mpf values are hashable: the key is exact
    flip = tuple(-v for v in flat)
    return _generative_value(_key(*arrays), min(flat, flip), mpmath.mp.dps)


@functools.cache
def _source_digest() -> str:
    """The source of this module and of the quadrature rules: a stored value is used only if it
    was computed by the same code."""
    return source_digest((__file__, quadrature_module.__file__))


@functools.lru_cache(maxsize=4096)
def _generative_value(key: tuple, delta_key: tuple, dps: int) -> Any:
    """The validated quadrature value (:func:`_generative_quadrature`), kept in the file cache
    (:mod:`kernel_verify.verify.cache`) under the exact weights, ``δ``, ``dps`` and the source
    digest, as its signed binary record: a stored value is the very number the quadrature returns
    (a failing quadrature raises and stores nothing). Key and value are signed
    (:func:`~kernel_verify.verify.cache.exact_text`,
    :func:`~kernel_verify.verify.cache.mpf_to_json`): ``δ`` and a mirror image of it (signs
    of some coordinates flipped) are different entries."""
    text = exact_text((_source_digest(), dps, key, delta_key))
    stored = file_cache_get("generative-kernel", text)
    if stored is not None:
        return mpf_from_json(stored)
    value = _generative_quadrature(key, delta_key, dps)
    file_cache_put("generative-kernel", text, mpf_to_json(value))
    return value


def _generative_quadrature(key: tuple, delta_key: tuple, dps: int) -> Any:
    """``g(ε)ᵀδ = (W2ᵀδ)ᵀ sin(W1ε + b1) + b2ᵀδ``: h products per node, then one cosine."""
    k = key[0][0][1]
    (w2_shape, w2), (_, b2) = key[2], key[3]
    delta = np.array(delta_key, dtype=object)
    v = np.array(w2, dtype=object).reshape(w2_shape).T @ delta  # (h,)
    c0 = _dot(np.array(b2, dtype=object), delta)
    tol = mpmath.mpf(GENERATIVE_ABS_TOL)

    def rule(order: int) -> Any:
        sines, wts = _generative_nodes(key, order, dps)
        phases = sines @ v + c0
        return mpmath.fsum(w * mpmath.cos(p) for w, p in zip(wts, phases, strict=True))

    orders = [n for n in GENERATIVE_ORDERS if n**k <= GENERATIVE_MAX_POINTS]
    prev = rule(orders[0])
    for order in orders[1:]:
        cur = rule(order)
        if abs(cur - prev) <= tol:
            return cur
        prev = cur
    raise QuadratureError(
        f"generative kernel: Gauss–Hermite ({orders[-1]}^{k} nodes) did not reach "
        f"{GENERATIVE_ABS_TOL} (MLP weights too large: the integrand grows too fast off the "
        "real axis)"
    )


def generative_grad_mp(
    x: np.ndarray, y: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray
) -> np.ndarray:
    """``∇ₓ k(x, y) = −E_ε[sin(g(ε)ᵀδ)·g(ε)]``, ``δ = x − y`` (differentiating under the
    integral: the integrand's derivative is bounded by ``‖g‖ ≤ ‖W2‖₁ + ‖b2‖``), by the
    Gauss–Hermite product rule of :func:`generative_kernel_mp`, validated the same way
    (consecutive orders agree to ``GENERATIVE_ABS_TOL`` times the bound ``Σ_h |W2_jh| + |b2_j|``
    of ``|g_j|`` in every component). Not cached; an mp array ``(d,)``."""
    arrays = [np.asarray(a, dtype=object) for a in (w1, b1, w2, b2)]
    key = _key(*arrays)
    delta = np.asarray(x, dtype=object) - np.asarray(y, dtype=object)
    w2m = np.array(key[2][1], dtype=object).reshape(key[2][0])
    b2v = np.array(key[3][1], dtype=object)
    v = w2m.T @ delta
    c0 = _dot(b2v, delta)
    scale = [mpmath.fsum(abs(t) for t in row) + abs(b) for row, b in zip(w2m, b2v, strict=True)]
    dps = max(mpmath.mp.dps, 30)  # the 1e-18 validation needs more than float64's digits
    with mpmath.workdps(dps):
        return _generative_grad_rule(key, v, c0, w2m, b2v, scale, dps)


def _generative_grad_rule(key, v, c0, w2m, b2v, scale, dps: int) -> np.ndarray:
    k = key[0][0][1]
    tol = mpmath.mpf(GENERATIVE_ABS_TOL)

    def rule(order: int) -> np.ndarray:
        sines, wts = _generative_nodes(key, order, dps)
        coef = np.array([-w * mpmath.sin(p) for w, p in zip(wts, sines @ v + c0, strict=True)],
                        dtype=object)
        return (coef @ sines) @ w2m.T + coef.sum() * b2v  # −Σ w sin(·) g(ε)

    orders = [n for n in GENERATIVE_ORDERS if n**k <= GENERATIVE_MAX_POINTS]
    prev = rule(orders[0])
    for order in orders[1:]:
        cur = rule(order)
        if all(abs(a - b) <= tol * s for a, b, s in zip(cur, prev, scale, strict=True)):
            return cur
        prev = cur
    raise QuadratureError(f"generative kernel gradient: Gauss–Hermite ({orders[-1]}^{k} nodes) "
                          f"did not reach {GENERATIVE_ABS_TOL}")


@mp_kernel("generative")
def _generative(
    x: np.ndarray, y: np.ndarray, *, W1: Any, b1: Any, W2: Any, b2: Any
) -> Any:
    if math.prod(np.shape(W1)) == 0:
        raise ValueError("W1 must not be empty")
    return generative_kernel_mp(x, y, W1, b1, W2, b2)


# ReBased and DARKFormer's kernels (docs/math.md §21) live with their twins
from kernel_verify.verify.references import features_learned_attention  # noqa: E402, F401
