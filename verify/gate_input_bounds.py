"""What a target's own evaluation of its gate parametrisation may change in its outputs
(docs/math.md §23.1): the error of the log-gates it computes from a raw gate input
(:mod:`kernel_verify.verify.references.gate_inputs`), and that error carried through the
recurrence ``S_t = A_t S_(t−1) + w_t v_tᵀ``, ``o_t = S_tᵀ q_t``.

**The gates' error** (:func:`gate_input_error`), in the model of
:mod:`kernel_verify.verify.recurrence_bounds` (every ``+, −, ×, /`` exact times ``1 + ε``,
``|ε| ≤ u``; ``exp``, ``log``, ``log1p`` within ``c·u`` relative, ``c = 2·exp_ulps``; a result
below the smallest normal ``tiny`` off by at most ``tiny``), for every way the field evaluates
softplus: ``log1p(exp(x))`` (relative ``2c·u``), ``log(1 + exp(x))`` (``1 + e^x`` rounded:
absolute ``(c + 1)u``, which is all of ``softplus`` once ``e^x < u``), ``logaddexp(0, x)``, and
torch's threshold ``softplus(x) = x`` for ``x > 20`` (absolute ``log(1 + e^(−x)) ≤ e^(−x)``);
the input ``x = a + dt_bias`` is itself rounded (``|x̂ − x| ≤ u|x|``, moving softplus by
``≤ σ(x + u|x|)·u|x|``; ``σ`` by ``≤ σ(y)(1 − σ(y))·|y|θ·e^(|y|θ)`` for ``ŷ = y(1 + θ)``):

* ``mamba``: ``|ĝ − g| ≤ 1.01·E·(s(3c + 1)u + (c + 1)u + σ(x + u|x|)·u|x| + [x > 20]e^(−x))``,
  ``E = exp(A_log)``, ``s = softplus(x)``;
* ``bounded``: ``|ĝ − g| ≤ 1.01·|L|·(σ(a)(c + 4)u + tiny)`` (the bound ``L`` itself rounded);
* ``bounded_affine``: ``y = E·(a + dt_bias)``, ``θ = 1.01(c + 2)u``:
  ``|ĝ − g| ≤ 1.01·|L|·(σ(y)(1 − σ(y))|y|θe^(|y|θ) + σ(y)(c + 4)u + tiny)``.

The factor 1.01 covers the products of two or more ``ε`` (``u ≤ 2⁻⁸``). The float64 values the
reference runs on err by the same bound at float64 (``c = 2``); both are added.

**Carried through the recurrence** (:func:`gate_perturbation_bound`): a log-gate off by
``δ_tf`` multiplies each gate factor ``e^(g_tf)`` of ``A_t = Diag(e^(λ_t)) + x_t y_tᵀ`` by
``e^(δ_tf)``; with ``ρ_tf = e^(|δ_tf|) − 1``, ``‖Â_t − A_t‖₂ ≤ ν_t = max_f e^(λ_tf)ρ_tf +
[gated_delta, kda] max_f ρ_tf ‖x_t‖‖y_t‖`` (the rank-one part carries the gate in Gated
DeltaNet's ``x`` and KDA's ``y``; the update ``w_t v_tᵀ`` carries none). The state error
``E_t = Â_t E_(t−1) + (Â_t − A_t)S_(t−1)`` (exactly), so ``‖E_t‖_F ≤ ε_t = (α_t + ν_t)ε_(t−1) +
ν_t σ_(t−1)``, ``α_t ≥ ‖A_t‖₂`` (float64 SVD inflated by ``16(d + 4)u₆₄``), ``σ_t = α_t σ_(t−1)
+ ‖w_t‖‖v_t‖ ≥ ‖S_t‖_F``; every output ``|ô_tj − o_tj| ≤ ‖q_t‖ε_t`` and every state entry
``≤ ε_T`` (a factor ``1 + 10⁻⁹`` covers the float64 evaluation of these sums of positive
terms). The rounding bound of the target's algorithm, derived at the exact gates, holds at the
perturbed ones within the factor :func:`gate_rounding_factor` ``= e^(Σ_t max_f |δ_tf|)`` (every
magnitude it sums is a product of gate factors over disjoint tokens).
"""

from __future__ import annotations

import numpy as np

from kernel_verify.verify.references.gate_inputs import (
    gate_input_arrays,
    sigmoid,
    softplus,
)
from kernel_verify.verify.references.recurrence import dplr_terms

__all__ = ["gate_input_error", "gate_perturbation_bound", "gate_rounding_factor"]

_U64 = 2.0**-53
_TINY64 = float(np.finfo(np.float64).tiny)
#: Margin for the float64 evaluation of sums and products of positive terms.
_MARGIN = 1.0 + 1e-9


def _one_side(kind: str, arr: dict, u: float, c: float, tiny: float) -> np.ndarray:
    a = arr["a"]
    if kind == "mamba":
        x = a + arr["dt_bias"]
        e = np.exp(arr["A_log"])
        s = softplus(x)
        thr = np.where(x > 20, np.exp(-np.minimum(x, 745.0)), 0.0)
        return 1.01 * e * (s * (3 * c + 1) * u + (c + 1) * u
                           + sigmoid(x + u * np.abs(x)) * u * np.abs(x) + thr)
    lower = abs(arr["lower"])
    if kind == "bounded":
        return 1.01 * lower * (sigmoid(a) * (c + 4) * u + tiny)
    y = np.exp(arr["A_log"]) * (a + arr["dt_bias"])
    sy = sigmoid(y)
    theta = 1.01 * (c + 2) * u
    spread = sy * sigmoid(-y) * np.abs(y) * theta * np.exp(np.minimum(np.abs(y) * theta, 700.0))
    return 1.01 * lower * (spread + sy * (c + 4) * u + tiny)


def gate_input_error(kind: str, a: np.ndarray, *, u: float, exp_ulps: float, tiny: float,
                     A_log: np.ndarray | None = None, dt_bias: np.ndarray | None = None,
                     lower: float | None = None) -> np.ndarray:
    """``|ĝ − g₆₄|`` elementwise (the shape of ``a``): the log-gates a target computes at unit
    roundoff ``u`` from the raw input ``a`` by the parametrisation ``kind`` against the float64
    values of :func:`~kernel_verify.verify.references.gate_inputs.log_gates_from_input`
    (module docstring); zeros for ``"log"`` (the gates are given)."""
    arr = gate_input_arrays(kind, a, A_log=A_log, dt_bias=dt_bias, lower=lower)
    if kind == "log":
        return np.zeros(arr["a"].shape)
    for name, value in (("u", u), ("exp_ulps", exp_ulps), ("tiny", tiny)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    target = _one_side(kind, arr, float(u), 2.0 * float(exp_ulps), float(tiny))
    return target + _one_side(kind, arr, _U64, 2.0, _TINY64)


def gate_rounding_factor(delta: np.ndarray, *, key_dim: bool) -> float:
    """``e^(max Σ_t max_f |δ_tf|)`` over the sequences: the factor by which a rounding bound
    derived at the exact gates may grow at gates off by ``δ`` (module docstring). ``delta``:
    ``(..., T)``, or ``(..., T, d)`` with ``key_dim``."""
    d = np.abs(np.asarray(delta, dtype=np.float64))
    per_token = d.max(axis=-1) if key_dim else d
    total = per_token.sum(axis=-1) if per_token.ndim else per_token
    return float(np.exp(min(float(np.max(total, initial=0.0)), 700.0)) * _MARGIN)


def gate_perturbation_bound(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, transition: str,
                            g: np.ndarray, delta: np.ndarray, beta: np.ndarray | None = None,
                            p: np.ndarray | None = None, a: np.ndarray | None = None,
                            b: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(output bound (..., T, d_v), state bound (..., d, d_v))``: how far the outputs and
    the final state of the recurrence move when each log-gate ``g`` (``(..., T)`` or
    ``(..., T, d)``) is off by at most ``delta`` (same shape), from a zero initial state
    (module docstring). ``q, k`` the features, ``(..., T, d)``; ``v (..., T, d_v)``."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    g = np.asarray(g, dtype=np.float64)
    delta = np.abs(np.asarray(delta, dtype=np.float64))
    if delta.shape != g.shape:
        raise ValueError(f"delta must have the shape of g {g.shape}, got {delta.shape}")
    lam, x, y, w = dplr_terms(transition, k, g=g, beta=beta, p=p, a=a, b=b)
    rho = np.expm1(delta if delta.ndim == k.ndim else delta[..., None] * np.ones(k.shape))
    decay = np.exp(lam)
    nu = (decay * rho).max(axis=-1)
    if transition in ("gated_delta", "kda"):
        nu = nu + rho.max(axis=-1) * np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1)
    d = k.shape[-1]
    mats = decay[..., :, None] * np.eye(d) + x[..., :, None] * y[..., None, :]
    alpha = np.linalg.norm(mats, ord=2, axis=(-2, -1)) * (1 + 16 * (d + 4) * _U64)
    wv = np.linalg.norm(w, axis=-1) * np.linalg.norm(v, axis=-1)
    n = k.shape[-2]
    sig = np.zeros(k.shape[:-2])
    eps = np.zeros(k.shape[:-2])
    outs = np.empty(k.shape[:-1])
    for t in range(n):
        eps = (alpha[..., t] + nu[..., t]) * eps + nu[..., t] * sig
        sig = alpha[..., t] * sig + wv[..., t]
        outs[..., t] = np.linalg.norm(q[..., t, :], axis=-1) * eps
    out = np.broadcast_to((outs * _MARGIN)[..., None], (*k.shape[:-1], v.shape[-1])).copy()
    state = np.broadcast_to((eps * _MARGIN)[..., None, None],
                            (*k.shape[:-2], d, v.shape[-1])).copy()
    return out, state
