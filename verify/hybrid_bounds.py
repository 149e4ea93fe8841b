"""A-priori rounding-error bound of hybrid attention (docs/math.md §22).

The implementation computes ``y_i = Σ_j â_ij v_j / Σ_j â_ij`` with every weight scaled by one
common factor ``e^(−c_i)`` (which cancels). Per weight, with ``u`` the unit roundoff of the
compute dtype, ``u_e = (2k + 1)·u`` the relative error of its exponential (``k`` ulps of the
budget, plus the rounding of the argument's own value), ``N = T + m + 2``:

* window key: the score ``ŝ_ij = fl(fl(q_iᵀk_j)·s)`` is off by ``δ_ij ≤ γ_(d+2)·s·Σ_f |q_if k_jf|``
  (Higham, *Accuracy and Stability*, §3.1), the shift ``ŝ − c_i`` rounds by
  ``u(|s_ij| + δ_ij + C_i)`` with ``C_i ≥ |c_i|`` (``max_j |s_ij|`` over the window and
  ``|log|ℓ_i||``, ``ℓ_i`` the linear denominator), the exponential and the mixing factor add
  ``u_e`` and ``u``: ``|â − a| ≤ a·ρ_ij``,
  ``ρ_ij = e^(δ_ij + u(|s_ij| + δ_ij + C_i))(1 + u_e)(1 + u) − 1``;
* linear key: features computed with relative error ``ε_φ`` each (``feature_rel``), a sum of
  ``m`` products through the state (any order, ``≤ N`` roundings), then the factor ``e^(−c_i)``
  (``u_e``) and one product: ``|â − a| ≤ (|a| + Σ_f |φq_if φk_jf|)·ρ_l``,
  ``ρ_l = (1 + γ_N)(1 + ε_φ)²(1 + u_e)(1 + u) − 1``.

With ``η_j`` these per-weight errors and ``γ_(T+3)`` for the sums over keys and the two parts,
``E_num = Σ_j η_j|v_j| + γ_(T+3) Σ_j (|a_ij| + η_j)|v_j|``, ``E_den`` the same with ``|v| ≡ 1``, and

    |fl(y_i) − y_i| ≤ (E_num + |y_i| E_den) / (|den_i| − E_den) + u|y_i|

(infinite where ``|den_i| ≤ E_den``). All weights are taken in units of ``e^(c_i)`` (the common
factor of the implementation, which cancels), so the bound is finite at any score; a weight
that underflows there carries an absolute error of at most the compute dtype's smallest normal
number, added to every ``η_j``. Half inputs computed in float32 add the output's rounding
``u_half·(|y_i| + bound)``.
"""

from __future__ import annotations

import numpy as np

from kernel_verify.verify.tolerance import FORMATS, budget_for, gamma

__all__ = ["hybrid_error_bound"]


def hybrid_error_bound(q: np.ndarray, k: np.ndarray, v: np.ndarray, phi_q: np.ndarray,
                       phi_k: np.ndarray, out: np.ndarray, *, window: int, dtype: str,
                       mix: float = 1.0, scale: float | None = None,
                       feature_ulps: float = 0.0) -> np.ndarray:
    """Per-entry bound on ``|computed − exact|`` (module docstring) for an implementation
    taking ``dtype`` inputs (half types computed in float32); float64 inputs, ``out`` the exact
    output rounded to float64; ``feature_ulps``: the features' own error in ulps of the compute
    dtype (``ε_φ = 2·feature_ulps·u``)."""
    budget = budget_for(dtype)
    u = FORMATS[budget.compute_dtype].u
    u_e = (2 * budget.ulps["exp"] + 1) * u
    t, d, m = q.shape[-2], q.shape[-1], phi_q.shape[-1]
    s = 1.0 / np.sqrt(d) if scale is None else float(scale)
    i, j = np.arange(t)[:, None], np.arange(t)[None, :]
    in_window = (j <= i) & (j > i - window)
    left = j <= i - window
    score = (q @ np.swapaxes(k, -1, -2)) * s
    delta = gamma(d + 2, u) * s * (np.abs(q) @ np.swapaxes(np.abs(k), -1, -2))
    lin = phi_q @ np.swapaxes(phi_k, -1, -2)
    lin_abs = np.abs(phi_q) @ np.swapaxes(np.abs(phi_k), -1, -2)
    ell = np.where(left, lin, 0.0).sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        top = np.max(np.where(in_window, score, -np.inf), axis=-1, keepdims=True)
        log_ell = np.log(np.abs(ell))
    shift = np.maximum(top, log_ell)
    shift = np.where(np.isfinite(shift), shift, 0.0)
    big = np.maximum(np.max(np.where(in_window, np.abs(score), 0.0), axis=-1, keepdims=True),
                     np.abs(shift))
    # every weight in units of e^c (the same common factor as the implementation's): the
    # largest is about 1, so nothing overflows at any score
    lin_f = np.exp(np.minimum(-shift, 700.0))
    with np.errstate(under="ignore"):
        soft = mix * np.exp(np.where(in_window, score - shift, -np.inf))
        rho = np.expm1(delta + u * (np.abs(score) + delta + big)) * (1 + u_e) * (1 + u) \
            + (1 + u_e) * (1 + u) - 1
        lin_s = np.where(left, lin * lin_f, 0.0)
        lin_abs_s = np.where(left, lin_abs * lin_f, 0.0)
    eps_phi = 2 * feature_ulps * u
    rho_l = (1 + gamma(t + m + 2, u)) * (1 + eps_phi) ** 2 * (1 + u_e) * (1 + u) - 1
    a = soft + lin_s
    tiny = np.finfo(budget.compute_dtype).tiny  # a weight that underflows: absolute error
    eta = np.where(in_window, soft * rho, 0.0) + (np.abs(lin_s) + lin_abs_s) * rho_l \
        + np.where(j <= i, tiny, 0.0)
    g = gamma(t + 3, u)
    av = np.abs(v)
    e_num = eta @ av + g * ((np.abs(a) + eta) @ av)
    e_den = eta.sum(axis=-1, keepdims=True) + g * (np.abs(a) + eta).sum(axis=-1, keepdims=True)
    den = a.sum(axis=-1, keepdims=True)
    y = np.abs(out)
    slack = np.abs(den) - e_den
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.where(slack > 0, (e_num + y * e_den) / slack, np.inf) + u * y
    if budget.output_round:
        bound = bound + budget.output_round * 2 * FORMATS[dtype].u * (y + bound)
    return bound
