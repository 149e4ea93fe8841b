"""A-priori rounding-error bounds of gated (decayed) causal linear attention in any of its
forms — parallel (masked decay matrix), chunked (inter-chunk decay of the state), recurrent —
with an initial state, split at any point (docs/math.md §16).

Log-gates ``g ≤ 0`` (``(..., T)`` scalar or ``(..., T, m)`` per key dimension), their absolute
cumulative sums ``A_t = Σ_(r≤t) |g_r|`` (per dimension), the exact decays
``D_tsf = exp(Σ_(s<r≤t) g_rf)``. Three evaluations of a decay occur in the forms:

* **log space** (parallel and chunked forms): ``exp(fl(G_t) − fl(G_s))`` from cumulative sums
  ``G`` (global, or restarted in each chunk: fewer terms). A recursive sum of ``t`` terms errs by
  ``≤ γ_t·A_t`` (Higham (3.4)), so the difference errs by ``≤ 2γ_t·A_t + u·A_t ≤ 2γ_(T+1)·A_t``;
  GLA's split ``(q_t ⊙ e^(B_t − B_ref))(k_s ⊙ e^(B_ref − B_s))`` takes two such differences
  (``≤ 4γ_(T+1)·A_t``). The exponential adds ``c_exp`` ulps of its result;
* **linear space** (recurrence, the state across chunks): a product of at most ``T + 1``
  factors ``fl(e^(g_r))``, each within ``c_exp·u`` relative, and at most ``T + 1`` roundings of
  the multiplication: ``≤ (T + 1)(c_exp + 1)·u`` in the exponent (first order; the ``γ``
  below absorbs the second);
* **mixed**: a chunked form multiplies a log-space in-chunk decay by linear-space products
  across chunks: the two budgets add.

So every computed decay is ``D_tsf·e^(θ)`` with ``|θ| ≤ δ_t = 4γ_(T+1)·A_t +
(T + 4)(c_exp + 2)·u`` (``A_t`` the largest over f), i.e. a relative error ``≤ e^(δ_t) − 1``.
The rest of every product term ``φq_tf·D_tsf·φk_sf·v_sc`` — two multiplications, the sums over
keys, chunks and features — is the plain linear-attention chain of at most ``N = 2T + m + 4``
operations (``verify/forms_bounds.py``; the gated recurrence adds one multiplication per step,
counted in ``δ``). Hence, with ``θ_t = e^(δ_t)(1 + γ_N) − 1``,

    |fl(num_tc) − num_tc| ≤ θ_t·A_tc + η·P_tc,
    A_tc = Σ_(s≤t) Σ_f |φq_tf| D_tsf |φk_sf| |v_sc| + Σ_f |φq_tf| D_t0f |S0_fc|,

and the same for the normaliser ``den_t`` with ``B_t`` (``|v|`` replaced by 1, ``|S0|`` by
``|z0|``). ``η·P_tc`` covers decays that underflow: a decay below the smallest normal number
``η`` of the compute dtype may be flushed to 0 or rounded in the subnormal range, an absolute
error ``≤ η`` per pair (``P_tc = Σ_(s≤t,f) |φq_tf φk_sf| |v_sc| + Σ_f |φq_tf| |S0_fc|``).
Without a normaliser the bound of ``o_t = num_t`` is the first line; with it
``|fl(o) − o| ≤ (e_num + |o|·e_den)/(|den| − e_den) + u|o|`` (infinite where
``|den| ≤ e_den``). The final state: ``|fl(S_T) − S_T| ≤ θ_T·(Σ_s D_Ts |φk_s||v_s| + D_T0|S_0|)
+ η·(Σ_s |φk_s||v_s| + |S_0|)`` (``γ_(T+2)`` for its chain), the same for ``z``.
"""

from __future__ import annotations

import numpy as np

from kernel_verify.verify.tolerance import gamma

__all__ = ["decay_exponent_error", "decay_matrix", "gated_forms_error_bound",
           "gated_state_error_bound", "smallest_normal"]


def _per_dim(log_gates: np.ndarray, phi_k: np.ndarray) -> np.ndarray:
    g = np.asarray(log_gates, dtype=np.float64)
    if g.shape == phi_k.shape[:-1]:
        return np.broadcast_to(g[..., None], phi_k.shape)
    if g.shape == phi_k.shape:
        return g
    raise ValueError(f"log_gates must have shape {phi_k.shape[:-1]} or {phi_k.shape}, got "
                     f"{g.shape}")


def decay_matrix(log_gates: np.ndarray, phi_k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(D (..., T, T, m), D0 (..., T, m))``: ``D_tsf = exp(Σ_(s<r≤t) g_rf)`` for ``s ≤ t``
    (0 above the diagonal) and ``D0_tf = exp(Σ_(r≤t) g_rf)``, in float64 from differences of
    cumulative sums (for the bounds' magnitudes only; the exact values are the mpmath
    reference's)."""
    g = _per_dim(log_gates, phi_k)
    cum = np.cumsum(g, axis=-2)  # (..., T, m)
    n = g.shape[-2]
    diff = cum[..., :, None, :] - cum[..., None, :, :]  # (..., t, s, m)
    causal = np.tril(np.ones((n, n), dtype=bool))[..., None]
    with np.errstate(over="ignore", invalid="ignore"):
        d = np.where(causal, np.exp(np.where(causal, diff, 0.0)), 0.0)
    return d, np.exp(cum)


def decay_exponent_error(log_gates: np.ndarray, phi_k: np.ndarray, *, u: float,
                         exp_ulps: float) -> np.ndarray:
    """``δ_t = 4γ_(T+1)·A_t + (T + 4)(c_exp + 2)·u`` per position ``(..., T)`` (module
    docstring), ``A_t`` the largest absolute cumulative log-gate over the key dimensions."""
    g = _per_dim(log_gates, phi_k)
    n = g.shape[-2]
    a = np.cumsum(np.abs(g), axis=-2).max(axis=-1)
    return 4 * gamma(n + 1, u) * a + (n + 4) * (exp_ulps + 2) * u


def gated_forms_error_bound(phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray,
                            log_gates: np.ndarray, *, u: float, exp_ulps: float, tiny: float,
                            normalise: bool = False,
                            initial_state: tuple[np.ndarray, np.ndarray] | None = None,
                            extra: int = 0) -> np.ndarray:
    """Per-entry bound ``|fl(o) − o|`` (..., T, d_v) of any form (module docstring) computed with
    unit roundoff ``u``, exponentials within ``exp_ulps`` ulps and smallest normal ``tiny``, on
    float64 inputs as the target saw them; ``extra``: further roundings per product term (features
    computed by the target within ``k`` ulps of the given ones add ``2k``)."""
    n, m = phi_q.shape[-2], phi_q.shape[-1]
    d, d0 = decay_matrix(log_gates, phi_k)
    delta = decay_exponent_error(log_gates, phi_k, u=u, exp_ulps=exp_ulps)
    theta = (np.exp(np.minimum(delta, 700.0)) * (1 + gamma(2 * n + m + 4 + extra, u))
             - 1)[..., None]
    aq, ak = np.abs(phi_q), np.abs(phi_k)
    pair_abs = np.einsum("...tf,...tsf,...sf->...ts", aq, d, ak)
    pair = np.einsum("...tf,...tsf,...sf->...ts", phi_q, d, phi_k)
    plain_abs = np.tril(aq @ np.swapaxes(ak, -1, -2))
    a = pair_abs @ np.abs(v)
    p = plain_abs @ np.abs(v)
    num = pair @ v
    b = pair_abs.sum(axis=-1, keepdims=True)
    pb = plain_abs.sum(axis=-1, keepdims=True)
    den = pair.sum(axis=-1, keepdims=True)
    if initial_state is not None:
        s0, z0 = (np.asarray(x, dtype=np.float64) for x in initial_state)
        a = a + (aq * d0) @ np.abs(s0)
        p = p + aq @ np.abs(s0)
        num = num + (phi_q * d0) @ s0
        b = b + ((aq * d0) * np.abs(z0)[..., None, :]).sum(axis=-1, keepdims=True)
        pb = pb + (aq * np.abs(z0)[..., None, :]).sum(axis=-1, keepdims=True)
        den = den + ((phi_q * d0) * z0[..., None, :]).sum(axis=-1, keepdims=True)
    e_num = theta * a + tiny * p
    if not normalise:
        return e_num
    e_den = theta * b + tiny * pb
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.abs(num / den)
    slack = np.abs(den) - e_den
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.where(slack > 0, (e_num + out * e_den) / np.where(slack > 0, slack, 1.0),
                         np.inf)
    return bound + u * np.where(np.isfinite(out), out, 0.0)


def gated_state_error_bound(phi_k: np.ndarray, v: np.ndarray, log_gates: np.ndarray, *,
                            u: float, exp_ulps: float, tiny: float,
                            initial_state: tuple[np.ndarray, np.ndarray] | None = None,
                            extra: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per-entry bounds of the final state ``(S_T, z_T)`` (module docstring); ``extra`` as for
    :func:`gated_forms_error_bound`."""
    n = phi_k.shape[-2]
    d, d0 = decay_matrix(log_gates, phi_k)
    last, last0 = d[..., -1, :, :], d0[..., -1, :]  # (..., s, m), (..., m)
    delta = decay_exponent_error(log_gates, phi_k, u=u, exp_ulps=exp_ulps)[..., -1]
    theta = (np.exp(np.minimum(delta, 700.0)) * (1 + gamma(n + 2 + extra, u)) - 1)[..., None]
    ak = np.abs(phi_k)
    s_abs = np.swapaxes(ak * last, -1, -2) @ np.abs(v)
    s_plain = np.swapaxes(ak, -1, -2) @ np.abs(v)
    z_abs = (ak * last).sum(axis=-2)
    z_plain = ak.sum(axis=-2)
    if initial_state is not None:
        s0, z0 = (np.abs(np.asarray(x, dtype=np.float64)) for x in initial_state)
        s_abs, s_plain = s_abs + last0[..., None] * s0, s_plain + s0
        z_abs, z_plain = z_abs + last0 * z0, z_plain + z0
    return (theta[..., None] * s_abs + tiny * s_plain,
            theta * z_abs + tiny * z_plain)


def smallest_normal(dtype: str) -> float:
    """The smallest positive normal number of ``dtype``."""
    return {"float64": 2.0**-1022, "float32": 2.0**-126, "float16": 2.0**-14,
            "bfloat16": 2.0**-126}[dtype]

