"""A-priori rounding-error bound for linear attention computed from given features.

For ``out_i = num_i / den_i`` with ``num_i = Σ_{j,f} φq_if φk_jf v_j`` and
``den_i = Σ_{j,f} φq_if φk_jf`` (j over all keys, or ``j ≤ i`` when causal), every product term
passes through two multiplications and at most ``n + m`` additions in any evaluation order used
here (factored ``φq(φkᵀV)``, chunked prefix sums, or the quadratic masked product), so the
standard bound (Higham, *Accuracy and Stability*, §3.1) gives, with ``N = n + m + 2`` and
``γ_N = N·u/(1 − N·u)``:

    |fl(num_i) − num_i| ≤ γ_N · Σ_{j,f} |φq_if φk_jf v_j| =: γ_N · A_i
    |fl(den_i) − den_i| ≤ γ_N · Σ_{j,f} |φq_if φk_jf|     =: γ_N · B_i

and for the quotient (one more rounding, first order made rigorous by the ``|den| − γB`` term):

    |fl(out_i) − out_i| ≤ γ_N (A_i + |out_i| B_i) / (|den_i| − γ_N B_i) + u |out_i|.

For positive features ``A_i ≤ B_i max|v|`` and ``B_i = den_i``, so this is about
``2γ_N max|v|``; for signed features cancellation in ``den`` inflates it, honestly. The bound is
infinite where ``|den_i| ≤ γ_N B_i`` (the computed sign of the denominator is not reliable).
"""

from __future__ import annotations

import numpy as np

from kernel_verify.verify.tolerance import gamma

__all__ = ["gamma", "linear_attention_error_bound"]


def linear_attention_error_bound(
    phi_q: np.ndarray, phi_k: np.ndarray, v: np.ndarray, *, causal: bool, u: float,
    extra: int = 0,
) -> np.ndarray:
    """Per-entry absolute bound ``|fl(out) − out|`` (module docstring) for one implementation
    working with unit roundoff ``u``; inputs float64 NumPy, shapes as for linear attention.
    ``extra``: further roundings per product term (features carrying ``k·u`` relative error of
    their own evaluation add ``2k``): ``γ_(N + extra)``."""
    n, m = phi_q.shape[-2], phi_q.shape[-1]
    g = gamma(n + m + 2 + extra, u)
    pair = np.abs(phi_q) @ np.swapaxes(np.abs(phi_k), -1, -2)
    signed = phi_q @ np.swapaxes(phi_k, -1, -2)
    if causal:
        pair, signed = np.tril(pair), np.tril(signed)
    a = pair @ np.abs(v)
    b = pair.sum(axis=-1, keepdims=True)
    den = signed.sum(axis=-1, keepdims=True)
    out = np.abs((signed @ v) / den)
    slack = np.abs(den) - g * b
    with np.errstate(divide="ignore"):
        bound = np.where(slack > 0, g * (a + out * b) / np.where(slack > 0, slack, 1.0), np.inf)
    return bound + u * out
