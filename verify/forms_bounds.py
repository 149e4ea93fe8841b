"""A-priori rounding-error bounds of the forms of causal linear attention (docs/math.md §13):
parallel, chunked and recurrent evaluations, with an initial state, split at any point.

**Plain features** (the error analysis of :mod:`kernel_verify.verify.attention_bounds`, Higham
§3.1). With an initial state ``(S_0, z_0)`` the output is ``o_i = num_i / den_i``,
``num_i = Σ_f φq_if S0_f + Σ_(j≤i) Σ_f φq_if φk_jf v_j`` and the same for ``den`` with ``z_0``
and 1. In every evaluation order of the forms each product term passes through at most two
multiplications and at most ``N = 2T + m + 4`` additions: the state before a chunk is a
cumulative sum over at most ``⌈T/C⌉ + 1`` entries of chunk sums of at most ``C`` terms (or, one
token at a time, a running sum of at most ``T + 1`` terms), a split run adds the prefix's own
accumulation (``≤ T_0 + 1``) in front of the continuation's, then one dot product over ``m``
features and, inside a chunk, at most ``C ≤ T`` terms; ``⌈T/C⌉ + C ≤ T + 1`` for ``1 ≤ C ≤ T``
(shorter chunks than T only make the chain shorter), so every chain has at most
``(T + 1) + (T + 1) + m + 2 ≤ N`` operations. Hence, with ``γ = γ_N(u)``,

    |fl(num_i) − num_i| ≤ γ·A_i,  A_i = Σ_f |φq_if| |S0_f| + Σ_(j≤i,f) |φq_if φk_jf| |v_j|,
    |fl(den_i) − den_i| ≤ γ·B_i,  B_i = Σ_f |φq_if| |z0_f| + Σ_(j≤i,f) |φq_if φk_jf|,
    |fl(o_i) − o_i| ≤ γ(A_i + |o_i| B_i) / (|den_i| − γ B_i) + u|o_i|.

The state: ``|fl(S) − S| ≤ γ_(T+2)·(|S_0| + Σ_j |φk_j| |v_j|ᵀ)``, ``|fl(z) − z| ≤
γ_(T+2)·(|z_0| + Σ_j |φk_j|)`` (T + 1 terms, one multiplication each).

**Log-space features** (the two-softmax form; the analysis of the log path in
``tests/test_attention.py``): every logit of the log-space forms — ``lq_if + L_f`` or
``lq_if + lk_jf`` and the log-sum-exps and merges above it — is a sum of at most three
log-features (or state entries) and of log-sum-exps over at most ``T + m + 1`` terms, plus at
most ``⌈log₂(T + 1)⌉ + 1`` exact-merge steps (each a ``logaddexp`` and two shifted exponentials)
or one ``logcumsumexp`` over ``T + 1`` entries; each rounding moves a logit by at most
``u·(|value| + 1)`` with ``|value| ≤ Z = max|lq| + max|lk| + max|L_0| + log((T + 1)·m)``, and
a chain has at most ``N_log = 2T + m + 14`` of them, so every logit has absolute error
``δ ≤ γ_(N_log)·(Z + 1)``. Weights of a softmax then have relative error ``≤ e^(2δ) − 1``, and
the output — a convex combination of the values and of ``V̄_0`` — moves by at most
``(e^(4δ) − 1)·max(|v|, |V̄_0|)``; forming that combination (at most ``T + m + 2`` products
and sums of nonnegative weights, then one division) adds ``(2γ_(N_log) + u)·max(|v|, |V̄_0|)``
(the positive-feature case of the plain bound). The state ``L`` is within ``δ`` and ``V̄`` (a
convex combination) within the same output bound.
"""

from __future__ import annotations

import math

import numpy as np

from kernel_verify.verify.tolerance import gamma

__all__ = ["log_forms_delta", "log_forms_error_bound", "plain_forms_error_bound",
           "plain_state_error_bound"]


def plain_forms_error_bound(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray, *, u: float,
                            initial_state: tuple[np.ndarray, np.ndarray] | None = None,
                            extra: int = 0) -> np.ndarray:
    """Per-entry bound ``|fl(o) − o|`` of any form (module docstring) for unit roundoff ``u``;
    float64 NumPy inputs ``(..., T, m)``, ``(..., T, m)``, ``(..., T, d_v)`` and the initial
    state as given to the form. Infinite where ``|den| ≤ γ·B`` (sign not reliable).
    ``extra``: further roundings per product term (features that carry ``k·u`` relative error
    of their own evaluation add ``2k``)."""
    n, m = phi_q.shape[-2], phi_q.shape[-1]
    g = gamma(2 * n + m + 4 + extra, u)
    pair = np.tril(np.abs(phi_q) @ np.swapaxes(np.abs(phi_k), -1, -2))
    signed = np.tril(phi_q @ np.swapaxes(phi_k, -1, -2))
    a = pair @ np.abs(v)
    b = pair.sum(axis=-1, keepdims=True)
    num = signed @ v
    den = signed.sum(axis=-1, keepdims=True)
    if initial_state is not None:
        s0, z0 = initial_state
        a = a + np.abs(phi_q) @ np.abs(s0)
        b = b + np.abs(phi_q) @ np.abs(z0)[..., None]
        num = num + phi_q @ s0
        den = den + phi_q @ z0[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.abs(num / den)
    slack = np.abs(den) - g * b
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.where(slack > 0, g * (a + out * b) / np.where(slack > 0, slack, 1.0), np.inf)
    return bound + u * np.where(np.isfinite(out), out, 0.0)


def plain_state_error_bound(phi_k: np.ndarray, v: np.ndarray, *, u: float,
                            initial_state: tuple[np.ndarray, np.ndarray] | None = None,
                            extra: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per-entry bounds of the final plain state ``(S, z)`` after ``T`` tokens (module
    docstring); ``extra`` as for :func:`plain_forms_error_bound`."""
    g = gamma(phi_k.shape[-2] + 2 + extra, u)
    s_abs = np.swapaxes(np.abs(phi_k), -1, -2) @ np.abs(v)
    z_abs = np.abs(phi_k).sum(axis=-2)
    if initial_state is not None:
        s_abs = s_abs + np.abs(initial_state[0])
        z_abs = z_abs + np.abs(initial_state[1])
    return g * s_abs, g * z_abs


def log_forms_delta(log_phi_q: np.ndarray, log_phi_k: np.ndarray, *, u: float,
                    initial_state: tuple[np.ndarray, np.ndarray] | None = None,
                    extra: float = 0.0) -> float:
    """``δ = γ_(2T+m+14)·(Z + 1) + extra``: the absolute error of every logit of the log-space
    forms (module docstring); ``extra``: the absolute error the log-features themselves carry
    (twice the error of one log-feature: a logit has one of q and one of k)."""
    n, m = log_phi_q.shape[-2], log_phi_q.shape[-1]
    z = float(np.abs(log_phi_q).max(initial=0.0) + np.abs(log_phi_k).max(initial=0.0))
    if initial_state is not None:
        finite = initial_state[0][np.isfinite(initial_state[0])]
        z += float(np.abs(finite).max(initial=0.0))
    z += math.log((n + 1) * m)
    return gamma(2 * n + m + 14, u) * (z + 1) + extra


def log_forms_error_bound(log_phi_q: np.ndarray, log_phi_k: np.ndarray, v: np.ndarray, *,
                          u: float, initial_state: tuple[np.ndarray, np.ndarray] | None = None,
                          extra: float = 0.0) -> float:
    """``(e^(4δ) − 1 + 2γ + u)·max(|v|, |V̄_0|)``: the bound of every output entry and of
    every entry of the final ``V̄`` of the log-space forms (module docstring)."""
    delta = log_forms_delta(log_phi_q, log_phi_k, u=u, initial_state=initial_state,
                            extra=extra)
    vmax = float(np.abs(v).max(initial=0.0))
    if initial_state is not None:
        vmax = max(vmax, float(np.abs(initial_state[1]).max(initial=0.0)))
    n, m = log_phi_q.shape[-2], log_phi_q.shape[-1]
    return (math.expm1(min(4 * delta, 700.0)) + 2 * gamma(2 * n + m + 14, u) + u) * vmax
