"""mpmath twins, kernels and a-priori rounding-error bounds of ReBased and DARKFormer
(docs/math.md §21), under the rules of :mod:`kernel_verify.verify.references.features`.

* ``rebased``: ``φ(x) = √s·vec(x̃x̃ᵀ)``, ``x̃ = γ ⊙ (x − x̄)/√(var x + eps) + β`` (biased variance);
  kernel ``rebased(gamma, beta, eps, scale) = s·(x̃ᵀỹ)²`` (Aksenov et al., ACL 2024).
* ``darkformer``: ``φ(x) = m^(−1/2)·exp(εᵢᵀz − ‖z‖²/2)``, ``z = Mx``; kernel
  ``darkformer(M) = exp(xᵀMᵀMy) = exp(zᵀz')`` (Farzam et al. 2026, arXiv 2603.04127).

The twins read the learned values from the parameter draw only (``gamma``, ``beta``; ``M`` and
``W`` = ε), the scalars ``eps`` and ``scale`` from ``config``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.inputs import check_params
from kernel_verify.verify.references.features import ErrorTerm, exp_of_log_bounds, gamma, mp_feature
from kernel_verify.verify.references.kernels import mp_kernel
from kernel_verify.verify.references.mp import mp_exp, to_mp

Params = Mapping[str, np.ndarray]

_NO_BACKWARD = {
    "backward": "no derived backward bound for this formula: its gradient is checked by finite "
                "differences (test_gradcheck_float64_feature_map)",
    "jacobian": "no closed Jacobian for this formula: the finite differences check the gradient"}


# ------------------------------------------------------------------------------------ ReBased
def mp_rebased_affine(x_mp: np.ndarray, gamma_mp: np.ndarray, beta_mp: np.ndarray,
                      eps: Any) -> np.ndarray:
    """``x̃ = γ ⊙ (x − x̄)/√(var x + eps) + β`` row by row (mp, exact up to the working digits)."""
    d = x_mp.shape[-1]
    out = np.empty_like(x_mp)
    for idx in np.ndindex(x_mp.shape[:-1]):
        row = x_mp[idx]
        c = row - mpmath.fsum(row) / d
        sigma = mpmath.sqrt(mpmath.fsum(v * v for v in c) / d + eps)
        out[idx] = gamma_mp * (c / sigma) + beta_mp
    return out


@mp_kernel("rebased")
def _rebased_kernel(x: np.ndarray, y: np.ndarray, *, gamma: np.ndarray, beta: np.ndarray,
                    eps: Any, scale: Any) -> Any:
    tx = mp_rebased_affine(x[None, :], gamma, beta, eps)[0]
    ty = mp_rebased_affine(y[None, :], gamma, beta, eps)[0]
    return scale * mpmath.fsum(a * b for a, b in zip(tx, ty, strict=True)) ** 2


def _affine_params(params: Params, d: int) -> tuple[np.ndarray, np.ndarray]:
    check_params("params", dict(params), {"gamma": (d,), "beta": (d,)})
    return (np.asarray(params["gamma"], dtype=np.float64),
            np.asarray(params["beta"], dtype=np.float64))


def _rebased_affine_term(x, params, config, u, ulps) -> ErrorTerm:
    """``x̃`` and a bound on its computed error (float64 magnitudes of the exact formula).

    * ``x̄ = Σx/d``: a length-d sum and one division, ``|Δx̄| ≤ γ_(d+1)·Σ|x|/d``;
    * ``c = x − x̄``: ``e_c = |Δx̄| + u(|c| + |Δx̄|)``;
    * ``v = Σc²/d + eps``: propagated ``Σ(2|c|e_c + e_c²)/d``, plus ``γ_(d+3)`` relative (d
      squares, the sum, the division, eps cast and added) on the computed magnitude;
    * ``σ = √v``: ``|√v̂ − √v| ≤ e_v/(√v + √(v − e_v))`` plus one call (``2·ulps·u``);
    * ``r = c/σ``: ``(e_c + |r|e_σ)/(σ − e_σ)`` plus one rounding;
    * ``x̃ = γr + β``: one product and one sum, γ and β cast (one ``u`` each)."""
    d = x.shape[-1]
    g, b = _affine_params(params, d)
    eps = float(config["eps"])
    e_mean = gamma(d + 1, u) * np.sum(np.abs(x), axis=-1, keepdims=True) / d
    c = x - np.mean(x, axis=-1, keepdims=True)
    e_c = e_mean + u * (np.abs(c) + e_mean)
    v = np.mean(c * c, axis=-1, keepdims=True) + eps
    e_v = (np.sum(2 * np.abs(c) * e_c + e_c * e_c, axis=-1, keepdims=True) / d
           + gamma(d + 3, u) * (np.mean((np.abs(c) + e_c) ** 2, axis=-1, keepdims=True) + eps))
    sigma = np.sqrt(v)
    if np.any(e_v >= v):
        raise ValueError("rebased: the variance's rounding bound reaches the variance itself "
                         "(constant rows with eps = 0): no forward error bound")
    e_sigma = e_v / (sigma + np.sqrt(v - e_v))
    e_sigma = e_sigma + 2 * ulps * u * (sigma + e_sigma)
    r = c / sigma
    e_r = (e_c + np.abs(r) * e_sigma) / (sigma - e_sigma)
    e_r = e_r + u * (np.abs(r) + e_r)
    rt = ErrorTerm(r, e_r, u, ulps)
    return rt.const(g, u) * rt + rt.const(np.broadcast_to(b, r.shape), u)


def _bound_rebased(x, params, config, u, ulps) -> np.ndarray:
    """``x̃_i x̃_j`` (product rule of :class:`ErrorTerm`) times ``√s`` (sqrt call, cast, product)."""
    t = _rebased_affine_term(x, params, config, u, ulps)
    d = x.shape[-1]
    outer = ErrorTerm(t.v[..., :, None], t.e[..., :, None], u, ulps) * ErrorTerm(
        t.v[..., None, :], t.e[..., None, :], u, ulps)
    root = math.sqrt(float(config["scale"]))
    scaled = outer * outer.const(root, gamma(2, u) + 2 * ulps * u)
    return scaled.e.reshape(*x.shape[:-1], d * d)


@mp_feature("rebased", error_bound=_bound_rebased, not_derived=_NO_BACKWARD)
def _rebased(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    g, b = _affine_params(params, x_mp.shape[-1])
    t = mp_rebased_affine(x_mp, to_mp(g), to_mp(b), mpmath.mpf(float(config["eps"])))
    d = x_mp.shape[-1]
    root = mpmath.sqrt(mpmath.mpf(float(config["scale"])))
    return (t[..., :, None] * t[..., None, :]).reshape(*x_mp.shape[:-1], d * d) * root


# --------------------------------------------------------------------------------- DARKFormer
@mp_kernel("darkformer")
def _darkformer_kernel(x: np.ndarray, y: np.ndarray, *, M: np.ndarray) -> Any:
    return mpmath.exp(mpmath.fsum(a * b for a, b in zip(M @ x, M @ y, strict=True)))


def _darkformer_params(params: Params, d: int) -> tuple[np.ndarray, np.ndarray]:
    check_params("params", dict(params), {"W": (None, d), "M": (d, d)})
    return (np.asarray(params["W"], dtype=np.float64),
            np.asarray(params["M"], dtype=np.float64))


def _log_term_darkformer(x, params, config, u, ulps) -> ErrorTerm:
    """``log φ = εᵀz − ‖z‖²/2 − ½ log m``, ``z = Mx`` computed with
    ``e_z = γ_(d+1)·|x||M|ᵀ`` (length-d dot, M cast). The projection ``εᵀẑ`` adds
    ``γ_(d+1)·(|z| + e_z)|ε|ᵀ`` and carries ``e_z|ε|ᵀ``; ``‖ẑ‖²/2`` adds ``γ_(d+1)`` relative
    on ``‖|z| + e_z‖²/2`` and carries ``Σ|z|e_z + ½Σe_z²``; ``½ log m``: log call, 3 roundings;
    two rounded subtractions (:class:`ErrorTerm`)."""
    d = x.shape[-1]
    w, a = _darkformer_params(params, d)
    z = x @ a.T
    e_z = gamma(d + 1, u) * (np.abs(x) @ np.abs(a).T)
    big = np.abs(z) + e_z
    proj = ErrorTerm(z @ w.T, gamma(d + 1, u) * (big @ np.abs(w).T) + e_z @ np.abs(w).T, u, ulps)
    half_v = 0.5 * np.sum(z * z, axis=-1, keepdims=True)
    half_e = (gamma(d + 1, u) * 0.5 * np.sum(big * big, axis=-1, keepdims=True)
              + np.sum(np.abs(z) * e_z + 0.5 * e_z * e_z, axis=-1, keepdims=True))
    shape = proj.v.shape
    half = ErrorTerm(np.broadcast_to(half_v, shape), np.broadcast_to(half_e, shape), u, ulps)
    log_m = 0.5 * math.log(w.shape[0])
    c = proj.const(np.full(shape, log_m), gamma(3, u) + 2 * ulps * u)
    return proj - half - c


_bound_log_darkformer, _bound_darkformer = exp_of_log_bounds(_log_term_darkformer)


@mp_feature("darkformer", log=True, error_bound=_bound_log_darkformer, not_derived=_NO_BACKWARD)
def _log_darkformer(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    w, a = _darkformer_params(params, x_mp.shape[-1])
    z = x_mp @ to_mp(a).T
    proj = z @ to_mp(w).T
    return proj - (z * z).sum(axis=-1, keepdims=True) / 2 - mpmath.log(w.shape[0]) / 2


@mp_feature("darkformer", error_bound=_bound_darkformer)
def _darkformer(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    return mp_exp(_log_darkformer(x_mp, params, config))
