"""Exact derivatives in mpmath: feature Jacobians, kernel gradients, attention gradients.

docs/math.md §14. Everything here is computed from a map's description ``(formula, config,
params)`` and the mpmath twins of :mod:`kernel_verify.verify.references.features` and
:mod:`kernel_verify.verify.references.kernels`; nothing imports the code under test.

* :func:`feature_jacobian_mp` — ``J[..., i, f, j] = ∂φ_f(x_i)/∂x_ij`` (or of ``log φ``). Closed
  forms (docs/math.md §14) where they are short (:data:`CLOSED_JACOBIANS`): positive,
  hyperbolic and GERF features ``∂φ_f/∂x = φ_f·(B s_f w_f + 2C x)`` (``s_f = ±1``), random
  Fourier pairs and phases, the trigonometric softmax map, ReLU features and the deterministic
  maps linear, identity, relu, square, elu+1. Every other formula is differentiated
  numerically from its twin (:func:`numeric_jacobian_mp`).
* :func:`kernel_grad_mp` — ``∇ₓ k(x, y)`` of every registered mp kernel, numerically from the
  kernel's twin; closed forms for softmax, Gaussian, linear and Taylor
  (:func:`kernel_grad_closed_mp`) check it (``tests/test_gradient_truth.py``).
* :func:`softmax_attention_grads_mp`, :func:`feature_attention_grads_mp` — exact
  ``(∂L/∂q, ∂L/∂k, ∂L/∂v)`` of ``L = Σ_i G_iᵀo_i`` for normalised attention
  ``o_i = Σ_j a_ij v_j / Σ_j a_ij`` (causal: ``j ≤ i``): ``∂L/∂v_j = Σ_i (a_ij/D_i) G_i``,
  ``∂L/∂a_ij = G_iᵀ(v_j − o_i)/D_i``, then the chain rule through ``a_ij`` (softmax:
  ``exp(s·q_iᵀk_j)``; linear: ``φ(q_i)ᵀφ(k_j)`` with the map's Jacobian).

**Numerical differentiation at high precision** (the error stated): the central difference
``(f(x + h e_j) − f(x − h e_j))/(2h)`` has truncation error ``h²|f'''(ξ)|/6`` and rounding error
``≤ 10^(−P)·max|f|/h`` at ``P`` working digits. With ``h = 10^(−D−5)`` and ``P = 3D + 20``
(``D`` the requested digits, default 30) both terms are below ``10^(−2D)·(|f'''| + max|f|)``:
``1e-60`` relative for the smooth maps here at inputs of norm ≤ 30, far below the float64
rounding of the reference (``1.1e-16``). Where the derivative does not exist (a ReLU argument
exactly 0) the central difference returns the mean of the one-sided derivatives; the properties
draw inputs off those sets (probability 0 for continuous draws).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.references.features import features_mp
from kernel_verify.verify.references.kernels import MP_KERNELS
from kernel_verify.verify.references.kernels_catalogue import taylor_scale
from kernel_verify.verify.references.mp import (
    mp_cos,
    mp_exp,
    mp_sin,
    to_mp,
    working_precision,
)
from kernel_verify.verify.references.spec import MapSpec, require_map

__all__ = [
    "CLOSED_JACOBIANS",
    "feature_attention_grads_mp",
    "feature_jacobian_mp",
    "kernel_grad_closed_mp",
    "kernel_grad_mp",
    "normalised_attention_grads_mp",
    "numeric_jacobian_mp",
    "softmax_attention_grads_mp",
]

#: Digits of the numerical derivatives (module docstring).
NUMERIC_DIGITS = 30

Params = Mapping[str, np.ndarray]
JacobianFn = Callable[[np.ndarray, Params, Mapping[str, Any], bool], np.ndarray]


def _mp(a: Any) -> np.ndarray:
    if isinstance(a, np.ndarray) and a.dtype == object:
        return a
    return to_mp(np.asarray(a, dtype=np.float64))


def _eye_mp(d: int) -> np.ndarray:
    out = np.empty((d, d), dtype=object)
    for i in range(d):
        for j in range(d):
            out[i, j] = mpmath.mpf(int(i == j))
    return out


# ------------------------------------------------------------------------- closed Jacobians
def _log_jacobian_exp_affine(x: np.ndarray, bw: np.ndarray, c: Any) -> np.ndarray:
    """``∂ℓ_f/∂x_j = (B s_f w_f)_j + 2C x_j`` for ``ℓ_f = B s_f w_fᵀx + C‖x‖² + const_f``;
    ``bw`` holds the rows ``B s_f w_f`` (D, d). Shape ``(..., n, D, d)``."""
    return bw + (2 * c) * x[..., :, None, :]


RowsFn = Callable[[np.ndarray, Mapping[str, Any]], np.ndarray]


def _gerf_rows(w: np.ndarray, config: Mapping[str, Any]) -> np.ndarray:
    """GERF: ``B·w_f``, ``B = √(1 − 4A)``."""
    a = mpmath.mpf(float(config["A"]))
    return w * mpmath.sqrt(1 - 4 * a)


def _sderf_rows(w: np.ndarray, config: Mapping[str, Any]) -> np.ndarray:
    """SDERF: rows ``Bᵀω_f = (WB)_f``, ``B = (I − 4A)^(1/2)`` exact in mp (docs/math.md §20)."""
    from kernel_verify.verify.references.dense_exponential import sderf_parameters

    b = sderf_parameters(config, w.shape[1])["B1"]
    return w @ np.array(b.tolist(), dtype=object)


def _jac_exp_affine(formula: str, rows: RowsFn) -> JacobianFn:
    """The closed Jacobian of an exp-affine formula whose rows ``B s_f w_f`` are ``rows(W_mp,
    config)``."""
    def jac(x: np.ndarray, params: Params, config: Mapping[str, Any], log: bool) -> np.ndarray:
        bw = rows(to_mp(params["W"]), config)
        lj = _log_jacobian_exp_affine(x, bw, mpmath.mpf(-0.5))
        if log:
            return lj
        phi = features_mp(_Spec(formula, config), x, params, config)
        return phi[..., :, :, None] * lj

    return jac


def _jac_rff_pairs(x, params, config, log):
    sigma = mpmath.mpf(float(config["sigma"]))
    w = to_mp(params["W"]) / sigma  # (m, d)
    u = x @ w.T  # (..., n, m)
    s = 1 / mpmath.sqrt(w.shape[0])
    dcos = (-s * mp_sin(u))[..., :, :, None] * w
    dsin = (s * mp_cos(u))[..., :, :, None] * w
    return np.concatenate([dcos, dsin], axis=-2)


def _jac_rff_phase(x, params, config, log):
    sigma = mpmath.mpf(float(config["sigma"]))
    w = to_mp(params["W"]) / sigma
    u = x @ w.T + to_mp(params["b"])
    s = mpmath.sqrt(mpmath.mpf(2) / w.shape[0])
    return (-s * mp_sin(u))[..., :, :, None] * w


def _jac_softmax_trig(x, params, config, log):
    """``φ = e^{‖x‖²/2}/√m [cos wᵀx, sin wᵀx]``: ``∂cos-part = e^{‖x‖²/2}/√m (x cos − w sin)``,
    ``∂sin-part = e^{‖x‖²/2}/√m (x sin + w cos)`` (docs/math.md §14)."""
    w = to_mp(params["W"])
    u = x @ w.T
    h = mp_exp((x * x).sum(axis=-1, keepdims=True) / 2) / mpmath.sqrt(w.shape[0])  # (..., n, 1)
    c, s = mp_cos(u), mp_sin(u)
    xe = x[..., :, None, :]
    dcos = h[..., :, :, None] * (c[..., :, :, None] * xe - s[..., :, :, None] * w)
    dsin = h[..., :, :, None] * (s[..., :, :, None] * xe + c[..., :, :, None] * w)
    return np.concatenate([dcos, dsin], axis=-2)


def _jac_relu_features(x, params, config, log):
    w = to_mp(params["W"])
    u = x @ w.T
    s = 1 / mpmath.sqrt(w.shape[0])
    step = np.frompyfunc(lambda t: mpmath.mpf(1) if t > 0 else mpmath.mpf(0), 1, 1)(u)
    return (s * step)[..., :, :, None] * w


def _diag(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    d = x.shape[-1]
    return values[..., :, :, None] * _eye_mp(d)


def _jac_linear(x, params, config, log):
    return _diag(x, np.frompyfunc(lambda t: mpmath.mpf(1), 1, 1)(x))


def _jac_relu(x, params, config, log):
    return _diag(x, np.frompyfunc(lambda t: mpmath.mpf(1) if t > 0 else mpmath.mpf(0), 1, 1)(x))


def _jac_square(x, params, config, log):
    return _diag(x, 2 * x)


def _jac_elu_plus_one(x, params, config, log):
    if log:  # log φ = log1p(x) (x > 0), x (x ≤ 0)
        f = np.frompyfunc(lambda t: 1 / (1 + t) if t > 0 else mpmath.mpf(1), 1, 1)
    else:
        f = np.frompyfunc(lambda t: mpmath.mpf(1) if t > 0 else mpmath.exp(t), 1, 1)
    return _diag(x, f(x))


#: formula -> closed-form Jacobian ``fn(x_mp, params, config, log) -> (..., n, D, d)``
#: (``log=True``: of ``log φ``; only formulas with log features are asked for it).
CLOSED_JACOBIANS: dict[str, JacobianFn] = {
    "softmax_positive": _jac_exp_affine("softmax_positive", lambda w, config: w),
    "softmax_hyperbolic": _jac_exp_affine("softmax_hyperbolic",
                                          lambda w, config: np.concatenate([w, -w], axis=0)),
    "gerf": _jac_exp_affine("gerf", _gerf_rows),
    "sderf": _jac_exp_affine("sderf", _sderf_rows),
    "rff_pairs": _jac_rff_pairs,
    "rff_phase": _jac_rff_phase,
    "softmax_trig": _jac_softmax_trig,
    "relu_features": _jac_relu_features,
    "linear": _jac_linear,
    "identity": _jac_linear,
    "relu": _jac_relu,
    "square": _jac_square,
    "elu_plus_one": _jac_elu_plus_one,
}


class _Spec:
    """A minimal :class:`MapSpec` for a formula (the twins read only formula and config)."""

    def __init__(self, formula: str, config: Mapping[str, Any]) -> None:
        self.name = formula
        self.formula = formula
        self.kernel = ""
        self.claims: frozenset[str] = frozenset()
        self.config = dict(config)
        self.matrix = None
        self.mean_kernel = None
        self.attention_prescale = False

    def kernel_args(self, d: int) -> dict:
        return {}

    def has(self, claim: str) -> bool:
        return claim in self.claims


# -------------------------------------------------------------------------- numeric Jacobian
def numeric_jacobian_mp(
    entry: MapSpec, x: np.ndarray, params: Params, config: Mapping[str, Any] | None = None, *,
    log: bool = False, positions: np.ndarray | None = None, digits: int = NUMERIC_DIGITS,
) -> np.ndarray:
    """``∂φ_f(x_i)/∂x_ij`` by central differences of the mp twin (module docstring: step
    ``10^(−digits−5)`` at ``3·digits + 20`` working digits, error ``≤ 10^(−2·digits)`` relative to
    the derivative scale). Rows are perturbed together (each row's features depend on that row
    only). Returns an mp array ``(..., n, D, d)`` at the caller's precision."""
    require_map(entry)
    x_mp = _mp(x)
    d = x_mp.shape[-1]
    cols = []
    with working_precision(3 * digits + 20):
        h = mpmath.mpf(10) ** (-(digits + 5))
        for j in range(d):
            plus, minus = x_mp.copy(), x_mp.copy()
            plus[..., j] = plus[..., j] + h
            minus[..., j] = minus[..., j] - h
            fp = features_mp(entry, plus, params, config, log=log, positions=positions,
                             dps=3 * digits + 20)
            fm = features_mp(entry, minus, params, config, log=log, positions=positions,
                             dps=3 * digits + 20)
            cols.append((fp - fm) / (2 * h))
    out = np.stack(cols, axis=-1)
    return np.frompyfunc(lambda t: +t, 1, 1)(out)  # round to the caller's precision


def feature_jacobian_mp(
    entry: MapSpec, x: np.ndarray, params: Params, config: Mapping[str, Any] | None = None, *,
    log: bool = False, positions: np.ndarray | None = None, dps: int | None = None,
    numeric: bool | None = None,
) -> np.ndarray:
    """The exact Jacobian ``J[..., i, f, j] = ∂φ_f(x_i)/∂x_ij`` (``log``: of ``log φ``) as an mp
    array at ``dps`` digits: the closed form of :data:`CLOSED_JACOBIANS` when the formula has one
    (``numeric=None`` or False), else (or with ``numeric=True``) :func:`numeric_jacobian_mp`."""
    require_map(entry)
    cfg = {**entry.config, **(config or {})}
    closed = CLOSED_JACOBIANS.get(entry.formula)
    with working_precision(dps):
        if closed is not None and not numeric:
            return closed(_mp(x), params, cfg, log)
        return numeric_jacobian_mp(entry, x, params, cfg, log=log, positions=positions)


# ------------------------------------------------------------------------- kernel gradients
def kernel_grad_mp(kernel_id: str, x: np.ndarray, y: np.ndarray, *, dps: int | None = None,
                   digits: int = NUMERIC_DIGITS, **kernel_params: Any) -> np.ndarray:
    """``∇ₓ k(x, y)`` (mp array (d,)) of the registered mp kernel ``kernel_id``, by central
    differences at high precision (module docstring)."""
    fn = MP_KERNELS.get(kernel_id)
    if fn is None:
        raise KeyError(f"no mpmath reference for kernel {kernel_id!r}; known: "
                       f"{', '.join(sorted(MP_KERNELS))}")
    params = {k: (to_mp(v) if isinstance(v, np.ndarray)
                  else mpmath.mpf(v) if isinstance(v, float) else v)
              for k, v in kernel_params.items()}  # floats exactly, as verify.references.kernels
    with working_precision(dps):
        x_mp, y_mp = _mp(x), _mp(y)
        grad = np.empty(x_mp.shape, dtype=object)
        with working_precision(3 * digits + 20):
            h = mpmath.mpf(10) ** (-(digits + 5))
            for j in range(x_mp.shape[-1]):
                plus, minus = x_mp.copy(), x_mp.copy()
                plus[j] += h
                minus[j] -= h
                grad[j] = (fn(plus, y_mp, **params) - fn(minus, y_mp, **params)) / (2 * h)
        return np.frompyfunc(lambda t: +t, 1, 1)(grad)


def kernel_grad_closed_mp(kernel_id: str, x: np.ndarray, y: np.ndarray,
                          **kernel_params: Any) -> np.ndarray:
    """Closed forms (docs/math.md §14): softmax ``y·exp(xᵀy)``; Gaussian ``−(x−y)/σ²·k``;
    linear ``y``; Taylor (order 2) ``(1 + t)·s·y``, ``t = s·xᵀy`` (``s = 1/√d`` unless the
    ``scale`` param gives it; general order p: ``Σ_{k<p} tᵏ/k!·s·y``)."""
    x_mp, y_mp = _mp(x), _mp(y)
    dot = mpmath.fsum(a * b for a, b in zip(x_mp, y_mp, strict=True))
    if kernel_id == "softmax":
        return y_mp * mpmath.exp(dot)
    if kernel_id == "gaussian":
        sigma = mpmath.mpf(float(kernel_params.get("sigma", 1.0)))
        delta = x_mp - y_mp
        k = mpmath.exp(-mpmath.fsum(t * t for t in delta) / (2 * sigma**2))
        return -delta / sigma**2 * k
    if kernel_id == "linear":
        return y_mp.copy()
    if kernel_id == "taylor":
        order = int(kernel_params.get("order", 2))
        s = taylor_scale(kernel_params.get("scale"), len(x_mp))
        t = dot * s
        series = mpmath.fsum(t**k / mpmath.factorial(k) for k in range(order))
        return series * y_mp * s
    raise KeyError(f"no closed-form gradient for kernel {kernel_id!r}")


# ---------------------------------------------------------------------- attention gradients
def normalised_attention_grads_mp(
    a: np.ndarray, v: np.ndarray, g: np.ndarray, *, causal: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For ``o_i = Σ_j a_ij v_j / D_i`` (``D_i = Σ_j a_ij``; causal: ``j ≤ i``) and upstream
    ``G``: ``(o, ∂L/∂a, ∂L/∂v)`` with ``∂L/∂a_ij = G_iᵀ(v_j − o_i)/D_i`` (0 above the diagonal
    when causal) and ``∂L/∂v_j = Σ_i (a_ij/D_i) G_i`` (docs/math.md §14). 2-D mp arrays."""
    a, v, g = _mp(a), _mp(v), _mp(g)
    n_q, n_k = a.shape
    if causal:
        a = a.copy()
        for i in range(n_q):
            for j in range(i + 1, n_k):
                a[i, j] = mpmath.mpf(0)
    den = a.sum(axis=-1)
    if any(dv == 0 for dv in den):
        raise ValueError("a zero attention denominator: the normalised output is undefined")
    p = a / den[:, None]
    o = p @ v
    ga = np.empty_like(a)
    for i in range(n_q):
        for j in range(n_k):
            if causal and j > i:
                ga[i, j] = mpmath.mpf(0)
            else:
                ga[i, j] = mpmath.fsum(gi * (vj - oi) for gi, vj, oi in
                                       zip(g[i], v[j], o[i], strict=True)) / den[i]
    gv = p.T @ g
    return o, ga, gv


def softmax_attention_grads_mp(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, *, causal: bool,
    scale: float | None = None, dps: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact ``(∂L/∂q, ∂L/∂k, ∂L/∂v)`` of softmax attention ``a_ij = exp(s·q_iᵀk_j)``,
    ``s = 1/√d`` by default: ``∂L/∂q_i = s Σ_j a_ij(∂L/∂a_ij) k_j``, ``∂L/∂k_j = s Σ_i
    a_ij(∂L/∂a_ij) q_i``. 2-D ``(n, d)`` inputs; mp arrays at ``dps`` digits."""
    with working_precision(dps):
        q, k = _mp(q), _mp(k)
        s = 1 / mpmath.sqrt(q.shape[-1]) if scale is None else mpmath.mpf(float(scale))
        a = mp_exp((q @ k.T) * s)
        _, ga, gv = normalised_attention_grads_mp(a, v, g, causal=causal)
        gs = ga * a
        return (gs @ k) * s, (gs.T @ q) * s, gv


def feature_attention_grads_mp(
    entry: MapSpec, params: Params, q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray,
    *, causal: bool, prescale: bool | None = None, positions: np.ndarray | None = None,
    dps: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact ``(∂L/∂q, ∂L/∂k, ∂L/∂v)`` of normalised linear attention with ``entry``'s features
    (``a_ij = φ(x_i)ᵀφ(y_j)``, ``x = s·q``, ``y = s·k``, ``s = d^(−1/4)`` when ``prescale``,
    default ``entry.attention_prescale``, else 1): ``∂L/∂φ(x_i) = Σ_j (∂L/∂a_ij) φ(y_j)``,
    ``∂L/∂φ(y_j) = Σ_i (∂L/∂a_ij) φ(x_i)``, then ``∂L/∂q_i = s·J(x_i)ᵀ ∂L/∂φ(x_i)``."""
    require_map(entry)
    pre = entry.attention_prescale if prescale is None else prescale
    with working_precision(dps):
        q, k = _mp(q), _mp(k)
        s = mpmath.power(q.shape[-1], mpmath.mpf(-0.25)) if pre else mpmath.mpf(1)
        xq, xk = q * s, k * s
        fq = features_mp(entry, xq, params, positions=positions, dps=dps)
        fk = features_mp(entry, xk, params, positions=positions, dps=dps)
        _, ga, gv = normalised_attention_grads_mp(fq @ fk.T, v, g, causal=causal)
        gfq, gfk = ga @ fk, ga.T @ fq
        jq = feature_jacobian_mp(entry, xq, params, positions=positions, dps=dps)
        jk = feature_jacobian_mp(entry, xk, params, positions=positions, dps=dps)
        gq = np.einsum("nf,nfd->nd", gfq, jq) * s
        gk = np.einsum("nf,nfd->nd", gfk, jk) * s
        return gq, gk, gv
