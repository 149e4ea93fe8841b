"""A-priori rounding-error bounds of a computed evaluation of the recurrence
``S_t = Diag(e^(λ_t)) S_(t−1) + x_t (y_tᵀ S_(t−1)) + w_t v_tᵀ``, ``o_t = S_tᵀ q_t`` of every
transition of verify/references/recurrence.py (docs/math.md §23): the delta rule (Yang et al.,
NeurIPS 2024, arXiv 2406.06484), Gated DeltaNet (Yang et al., ICLR 2025, arXiv 2412.06464),
KDA (Kimi Linear technical report, 2025), Comba (2025), RWKV-7 (arXiv 2503.14456).

Model (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §2.2, ch. 3 and
Thm 8.5): every ``+, −, ×`` is exact times ``(1 + δ)``, ``|δ| ≤ u``; an exponential of an exact
argument is within ``exp_ulps`` ulps of its value (``2·exp_ulps·u`` relative, counted as
``n_e = ⌈2·exp_ulps⌉`` roundings); the target forms ``x, y, w`` with ``n_x, n_y, n_w``
roundings (``βk``: 1; ``e^g βk``: ``n_e + 2``; ``e^g ⊙ k``: ``n_e + 1``; ``k, p, a, b``: 0;
plus ``extra_ulps`` each). A decay below the smallest normal ``tiny`` may be flushed to 0 or
rounded in the subnormal range: an absolute error ``≤ tiny``. (The other intermediates are
assumed to stay 0 or normal: inputs of order one.) The target's algorithm is unknown; the bound
is the elementwise maximum over the algorithms ``chunk_sizes`` names — ``1`` the token
recurrence, ``C > 1`` the generic chunked UT algorithm with chunks of ``C`` tokens
(verify/references/recurrence.py) — and for each algorithm the smaller of two valid bounds:

**Componentwise** (Higham §3.1: a computation of ``+, −, ×`` returns ``Σ_paths m_p Π(1 + δ)``,
so it errs by ``≤ γ_N Σ_p |m_p|``, ``N`` the most roundings on a path). ``Σ_p |m_p|`` is the
same algorithm run on absolute values, subtractions turned into additions (float64 here):
``Ŝ_t = e^(λ_t) ⊙ Ŝ_(t−1) + |x_t|(|y_t|ᵀŜ_(t−1)) + |w_t||v_t|ᵀ``, ``Ô_t = Ŝ_tᵀ|q_t|``; in the
chunked algorithm the triangular solve's absolute evaluation is ``(I − |L|)^(−1)(|Ŷ||S_0| +
|M||V|)`` (forward substitution on magnitudes). The largest counts ``N`` (``C`` the chunk
size; every sum of ``m`` terms in any order: ``m − 1`` roundings per term):

* token: ``n_step = max(n_e + 3, n_x + n_y + d + 3, n_w + 3) + 2`` per token (a decay and
  its product, the dot ``yᵀS``, ``x·u``, the three-term update; the 2 cover a re-association
  such as Gated DeltaNet's ``S ← e^g S``, ``v − Sᵀk``, ``×β``); ``N = t·n_step + d`` for
  ``o_t`` (the dot with ``q``), ``T·n_step`` for ``S_T``;
* chunked: ``n_L = n_x + n_y + n_e + d + 1`` (an entry of ``L``; ``M`` with ``n_w``,
  ``Ŷ``: ``n_y + n_e + 1``), ``n_U = max(n_Ŷ, n_M) + (d + 2C) + (C − 1)(n_L + d + 2C)``
  (a right-hand side, then up to ``C − 1`` levels of substitution), ``n_out = n_U + n_x +
  n_e + 2d + 2C + 1``, ``n_pass = n_U + max(n_x, n_w) + n_e + 2C + 3`` (into the next state);
  ``N = (c − 1)·n_pass + n_out`` for outputs of chunk ``c``, ``#chunks·n_pass`` for ``S_T``.

The chunked algorithm's decays are ``exp(fl(G_t) − fl(G_s))`` from chunk-local recursive
cumulative sums: ``fl(G_a) − fl(G_b) − (G_a − G_b) = Σ_(b<r≤a) ε_r`` with
``|ε_r| ≤ u|fl(G_r)|/(1 − u)``. The decays on one path inside a chunk cover disjoint ranges
(``Γ_(t,s)`` in the outputs, ``Γ_(t−1,s)`` down the chain of ``L``), so their exponents err in
total by at most ``δ_chunk = γ_2(1 + γ_C)(Σ_(r∈chunk) max_f A_rf + max_f A_Cf)``,
``A_rf = Σ_(r'≤r) |λ_r'f|`` chunk-local (Higham (3.4)); a path through chunks ``1..c`` carries
``Σ δ``, and ``θ = e^(Σδ)(1 + γ_N) − 1`` replaces ``γ_N``. A log-gate ``−∞`` is a decay of 0
that a chunked target must mask (``G_t − G_s`` would be NaN): ranges across it count 0.

**Normwise** (the delta rule's ``|I − βkkᵀ|`` is not a contraction, so the absolute evaluation
grows like ``Π(1 + β_t|k_t|ᵀ|k_(t−1)|)``, while ``‖I − βkkᵀ‖₂ ≤ 1`` for a unit key and
``β ∈ [0, 2]``). Each state column obeys ``e_t = A_t e_(t−1) + E_t`` exactly (the recurrence is
linear), ``E_t`` the local error of step ``t``: ``‖E_t‖ ≤ γ_(n_step)((max e^(λ_t) + ‖x_t‖‖y_t‖)
‖Ŝ_(t−1)‖ + ‖w_t‖|v_t|) + tiny·(1 + ‖x̃_t‖‖ỹ_t‖)‖Ŝ_(t−1)‖``. With ``α_t ≥ ‖A_t‖₂`` (float64
SVD, inflated by LAPACK's backward error taken as ``16(d + 4)u₆₄``) and ``σ_t ≥ ‖S_t‖`` per
column (the norms of a float64 run plus that run's own bound at ``u₆₄``, which may use the
a-priori ``σ_t = α_t σ_(t−1) + ‖w_t‖|v_t|``: it enters only times ``u₆₄``),
``ε_t = α_t ε_(t−1) + ‖E_t‖`` (``‖Ŝ‖ ≤ σ + ε``) bounds the error and
``|ô_t − o_t| ≤ ‖q_t‖(ε_t + γ_d(σ_t + ε_t))``. Chunked: the chunk map is linear in the entering
state, so an entering error is carried by ``Π α``; inside a chunk every coefficient (``Ŷ, L, M``,
the output and state coefficients) errs by ``κ|·|_abs + τ|·|_1`` (``κ`` from
``ρ = e^(δ_chunk)(1 + γ_(n_e)) − 1`` and its own roundings, ``τ`` the flushed decays, ``|·|_1``
with decays 1), ``R = ŶS_0 + MV`` by ``κ_R``, and forward substitution (Thm 8.5:
``(I − L̂ + ΔT)Û = R̂``, ``|ΔT| ≤ γ_C(I + |L̂|)``) gives, elementwise,
``|Û − U| ≤ X̄(|ΔR| + B(|U| + |Û − U|))`` with ``B ≥ |L̂ − L| + |ΔT|``,
``X̄ ≥ |(I − L)^(−1)|`` (a float64 inverse ``X`` verified by its residuals:
``K = ‖X‖₂/(1 − ‖I − X(I − L)‖) ≥ ‖(I − L)^(−1)‖₂``, ``X̄ = |X| + K‖I − (I − L)X‖``) and
``|u_tc| ≤ ‖y_t‖σ̃_(t−1,c)``; it is started from the normwise ``K(‖ΔR‖ + ‖B‖‖U‖)/(1 − K‖B‖)``
(required ``≤ ½``) and applied twice. The outputs and the next state collect ``|Û − U|``
through their coefficients ``|q_tᵀΓx_s|`` and ``Γ_(C,s)|x_s|``.

The magnitudes are computed in float64 (sums of non-negative terms, at most 10⁵ roundings on a
path): they err by less than 10⁻¹⁰ relative, absorbed by a final factor ``1 + 10⁻⁹``; the decay
magnitudes of the chunked algorithm are upper bounds (their exponents widened by their own
float64 error). ``γ_N`` with ``N·u ≥ ½`` is void: that part of the bound is infinite.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kernel_verify.verify.references.recurrence import (
    check_recurrence_inputs,
    gate_free_terms,
    gate_shifts,
)
from kernel_verify.verify.tolerance import U64, gamma

__all__ = ["recurrence_error_bound", "rounding_counts"]

_SAFETY = 1.0 + 1e-9
_INPUT_ROUNDINGS = {  # (n_x, n_y, n_w) without extra_ulps; "e" stands for n_e
    "identity": (0, 0, 0), "decay": (0, 0, 0), "delta": (1, 0, 1),
    "gated_delta": ("e+2", 0, 1), "kda": (1, "e+1", 1), "comba": (1, 0, 1),
    "rwkv7": (0, 0, 0),
}


def _gam(n: float, u: float) -> float:
    """``γ_n`` (``n`` rounded up), infinite where ``n·u ≥ ½`` (a void bound)."""
    n = math.ceil(n)
    return gamma(n, u) if n * u < 0.5 else math.inf


def _times(factor: Any, x: np.ndarray) -> np.ndarray:
    """``factor·x`` with ``·0 = 0`` even for an infinite factor (nothing to err), NaN → inf."""
    with np.errstate(invalid="ignore", over="ignore"):
        out = np.where(x == 0, 0.0, np.asarray(factor) * x)
    return np.where(np.isnan(out), np.inf, out)


def rounding_counts(transition: str, d: int, *, exp_ulps: float, extra_ulps: float = 0,
                    chunk_size: int = 1) -> dict[str, int]:
    """The rounding counts of the module docstring: ``n_e, n_x, n_y, n_w`` and, for the token
    recurrence (``chunk_size`` 1) ``n_step``, else ``n_L, n_U, n_out, n_pass``."""
    n_e = math.ceil(2 * exp_ulps)
    extra = math.ceil(extra_ulps)
    n_x, n_y, n_w = (
        (n_e + int(c[2:]) if isinstance(c, str) else c) + extra
        for c in _INPUT_ROUNDINGS[transition])
    out = {"n_e": n_e, "n_x": n_x, "n_y": n_y, "n_w": n_w}
    if chunk_size == 1:
        out["n_step"] = max(n_e + 3, n_x + n_y + d + 3, n_w + 3) + 2
        return out
    c = chunk_size
    n_l = n_x + n_y + n_e + d + 1
    n_m = n_w + n_y + n_e + d + 1
    n_u = max(n_y + n_e + 1, n_m) + (d + 2 * c) + (c - 1) * (n_l + d + 2 * c)
    out.update(n_L=n_l, n_M=n_m, n_U=n_u, n_out=n_u + n_x + n_e + 2 * d + 2 * c + 1,
               n_pass=n_u + max(n_x, n_w) + n_e + 2 * c + 3)
    return out


class _Terms:
    """The float64 data of one bound: ``lam, e = e^λ`` ``(..., T, d)``, gate-free signed
    ``xt, yt, wt``, gated magnitudes ``ax, ay`` (``aw = |wt|``), ``q, v, s0``."""

    def __init__(self, transition: str, arr: dict[str, np.ndarray]) -> None:
        self.lam, self.q, self.v, self.s0 = arr["lam"], arr["q"], arr["v"], arr["s0"]
        self.n, self.d = self.q.shape[-2:]
        self.rank_one = transition not in ("identity", "decay")
        self.gated = transition not in ("identity", "delta")
        self.xt, self.yt, self.wt = gate_free_terms(
            transition, arr["k"], beta=arr.get("beta"), p=arr.get("p"), a=arr.get("a"),
            b=arr.get("b"))
        self.sx, self.sy = gate_shifts(transition)
        self.e = np.exp(self.lam)
        self.ax = self.e * np.abs(self.xt) if self.sx else np.abs(self.xt)
        self.ay = self.e * np.abs(self.yt) if self.sy else np.abs(self.yt)
        self.aw = np.abs(self.wt)
        self.x = self.e * self.xt if self.sx else self.xt
        self.y = self.e * self.yt if self.sy else self.yt

    def step_norms(self) -> np.ndarray:
        """``α_t ≥ ‖A_t‖₂`` per token ``(..., T)`` (module docstring)."""
        emax = self.e.max(axis=-1)
        if not self.rank_one:
            return emax * (1 + 4 * U64)
        a = (self.e[..., :, None] * np.eye(self.d)
             + self.x[..., :, None] * self.y[..., None, :])
        finite = np.isfinite(a).all(axis=(-2, -1))
        a = np.where(finite[..., None, None], a, 0.0)
        sv = np.linalg.svd(a, compute_uv=False)[..., 0]
        slack = 16 * (self.d + 4) * U64 * (emax + _norm(self.x) * _norm(self.y))
        return np.where(finite, sv * (1 + 4 * U64) + slack, np.inf)


def _norm(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.sqrt(np.sum(x * x, axis=axis))


def _einsum(spec: str, *ops: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.einsum(spec, *ops)


# ------------------------------------------------------------------ the token recurrence
def _token_abs(e, ax, ay, aw, aq, av, s0):
    """The token recurrence on magnitudes: outputs ``(..., T, d_v)`` and final state."""
    s = s0.copy()
    out = np.empty((*aq.shape[:-1], av.shape[-1]))
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(aq.shape[-2]):
            u = _einsum("...f,...fc->...c", ay[..., t, :], s)
            s = (e[..., t, :, None] * s + ax[..., t, :, None] * u[..., None, :]
                 + aw[..., t, :, None] * av[..., t, None, :])
            out[..., t, :] = _einsum("...f,...fc->...c", aq[..., t, :], s)
    return out, s


def _token_componentwise(tm: _Terms, counts, u, tiny):
    n, d = tm.n, tm.d
    aq, av, as0 = np.abs(tm.q), np.abs(tm.v), np.abs(tm.s0)
    o_abs, s_abs = _token_abs(tm.e, tm.ax, tm.ay, tm.aw, aq, av, as0)
    one = np.ones(tm.e.shape)
    o_one, s_one = _token_abs(one, np.abs(tm.xt), np.abs(tm.yt), tm.aw, aq, av, as0)
    step = counts["n_step"]
    g_out = np.array([_gam((t + 1) * step + d, u) for t in range(n)])[:, None]
    g_state = _gam(n * step, u)
    out = _times(g_out, o_abs) + _times(tiny * (1 + g_out), o_one)
    state = _times(g_state, s_abs) + _times(tiny * (1 + g_state), s_one)
    return out, state


def _error_norms(tm: _Terms, n_step: int, u: float, tiny: float, alpha: np.ndarray,
                 sig: np.ndarray) -> np.ndarray:
    """``ε_t`` ``(..., T + 1, d_v)``: bounds on the column norms of the error of the token
    recurrence at unit roundoff ``u`` (module docstring), given ``σ_t ≥ ‖S_t‖`` per column."""
    av = np.abs(tm.v)
    g_step = _gam(n_step, u)
    emax = tm.e.max(axis=-1)
    xy = _norm(tm.x) * _norm(tm.y)
    xy1 = _norm(tm.xt) * _norm(tm.yt)
    wn = _norm(tm.wt)
    eps = [np.zeros(sig.shape[:-2] + sig.shape[-1:])]
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(tm.n):
            sn = sig[..., t, :] + eps[-1]
            upd = wn[..., t, None] * av[..., t, :]
            loc = (_times(g_step, (emax + xy)[..., t, None] * sn + upd)
                   + tiny * (1 + g_step) * (1 + xy1[..., t, None]) * sn)
            eps.append(_times(alpha[..., t, None], eps[-1]) + loc)
    return np.stack(eps, axis=-2)


def _state_norms(tm: _Terms, counts: dict[str, int], alpha: np.ndarray) -> np.ndarray:
    """``σ_t ≥ ‖S_t[:, c]‖`` ``(..., T + 1, d_v)`` for the exact states: the norms of a float64
    run of the token recurrence plus that run's own error bound (:func:`_error_norms` at
    ``u₆₄``, whose a-priori ``σ_t = α_t σ_(t−1) + ‖w_t‖|v_t|`` enters only times ``u₆₄``)."""
    av = np.abs(tm.v)
    wn = _norm(tm.wt)
    prior = [_norm(tm.s0, axis=-2)]
    s = tm.s0.copy()
    runs = [s]
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(tm.n):
            prior.append(_times(alpha[..., t, None], prior[-1]) + wn[..., t, None] * av[..., t, :])
            upd = tm.wt[..., t, :, None] * tm.v[..., t, None, :]
            if tm.rank_one:
                uu = _einsum("...f,...fc->...c", tm.y[..., t, :], s)
                s = tm.e[..., t, :, None] * s + tm.x[..., t, :, None] * uu[..., None, :] + upd
            else:
                s = tm.e[..., t, :, None] * s + upd
            runs.append(s)
    prior_arr = np.stack(prior, axis=-2)
    eps64 = _error_norms(tm, counts["n_step"], U64, 2.0**-1022, alpha, prior_arr)
    run_norms = _norm(np.stack(runs, axis=-3), axis=-2) * (1 + _gam(tm.d + 2, U64))
    out = np.fmin(run_norms + eps64, prior_arr)
    return np.where(np.isnan(out), np.inf, out)


def _token_normwise(tm: _Terms, counts, u, tiny, alpha, sig):
    """Normwise bound of the token recurrence: outputs ``‖q_t‖(ε_t + γ_d(σ_t + ε_t))``, state
    ``ε_T`` (module docstring)."""
    eps = _error_norms(tm, counts["n_step"], u, tiny, alpha, sig)
    qn = _norm(tm.q)[..., None]
    tot = sig[..., 1:, :] + eps[..., 1:, :]
    out = _times(qn, eps[..., 1:, :]) + _times(_gam(tm.d, u), qn * tot)
    return out, np.broadcast_to(eps[..., -1, None, :], tm.s0.shape)


# ------------------------------------------------------------------ the chunked algorithm
def _chunk_decays(lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decays of one chunk over local ranges ``(lo, hi]``, ``(..., n+1, n+1, d)`` indexed
    ``[lo, hi]``: upper bounds (exponent widened by its float64 error) and plain float64
    values, 0 across a −inf or for ``hi < lo``; and the chunk-local ``A_rf`` ``(..., n+1, d)``."""
    n = lam.shape[-2]
    fin = np.isfinite(lam)
    zero = np.zeros((*lam.shape[:-2], 1, lam.shape[-1]))
    acc = np.concatenate([zero, np.cumsum(np.where(fin, -lam, 0.0), axis=-2)], axis=-2)
    cnt = np.concatenate([zero, np.cumsum(~fin, axis=-2)], axis=-2)
    diff = acc[..., None, :, :] - acc[..., :, None, :]  # [lo, hi] = A_hi − A_lo
    idx = np.arange(n + 1)
    blocked = ((cnt[..., None, :, :] - cnt[..., :, None, :]) > 0) | (
        idx[None, :] < idx[:, None])[..., None]
    slack = 4 * gamma(n + 2, U64) * acc[..., None, :, :]
    with np.errstate(over="ignore", invalid="ignore"):
        upper = np.where(blocked, 0.0, np.exp(np.minimum(-diff + slack, 0.0)))
        plain = np.where(blocked, 0.0, np.exp(np.minimum(-diff, 0.0)))
    return upper, plain, acc


def _coefficients(dec, xt, yt, wt, q, sx, sy):
    """The chunk's coefficients from decays ``dec [lo, hi]`` (module docstring of
    verify/references/recurrence.py): ``Ŷ, L, M, Q_0, Q_x, Q_w, X_C, W_C, Γ_(C,0)``."""
    n = q.shape[-2]
    t = np.arange(1, n + 1)[:, None]
    s = np.arange(1, n + 1)[None, :]

    def pick(lo, hi, mask):
        sel = dec[..., np.clip(lo, 0, n), np.clip(hi, 0, n), :]
        return sel * mask[..., None]

    lower, upto = s < t, s <= t
    cols = np.arange(1, n + 1)
    return {
        "Y": dec[..., 0, cols - 1 + sy, :] * yt,
        "L": _einsum("...tf,...sf,...tsf->...ts", yt, xt, pick(s - sx, t - 1 + sy, lower)),
        "M": _einsum("...tf,...sf,...tsf->...ts", yt, wt, pick(s, t - 1 + sy, lower)),
        "Q0": dec[..., 0, cols, :] * q,
        "Qx": _einsum("...tf,...sf,...tsf->...ts", q, xt, pick(s - sx, t, upto)),
        "Qw": _einsum("...tf,...sf,...tsf->...ts", q, wt, pick(s, t, upto)),
        "XC": dec[..., cols - sx, n, :] * xt,
        "WC": dec[..., cols, n, :] * wt,
        "G0": dec[..., 0, n, :],
    }


def _forward(low: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``(I − low)^(−1) rhs`` by forward substitution (``low`` strictly lower triangular)."""
    out = np.zeros(rhs.shape)
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(rhs.shape[-2]):
            out[..., t, :] = rhs[..., t, :] + _einsum("...s,...sc->...c", low[..., t, :t],
                                                      out[..., :t, :])
    return out


def _abs_chunk(co, s_in, av):
    """The chunk on magnitudes: its outputs and the state after it."""
    with np.errstate(over="ignore", invalid="ignore"):
        r = co["Y"] @ s_in + co["M"] @ av
        uu = _forward(co["L"], r)
        out = co["Q0"] @ s_in + co["Qx"] @ uu + co["Qw"] @ av
        s_out = (co["G0"][..., :, None] * s_in + np.swapaxes(co["XC"], -1, -2) @ uu
                 + np.swapaxes(co["WC"], -1, -2) @ av)
    return out, s_out


def _chunk_exponent_error(acc: np.ndarray, u: float) -> np.ndarray:
    """``δ_chunk = γ_2(1 + γ_n)(Σ_r max_f A_rf + max_f A_nf)`` per sequence (``acc`` the
    chunk-local ``A`` with a leading 0 row)."""
    n = acc.shape[-2] - 1
    amax = acc.max(axis=-1)
    return _gam(2, u) * (1 + _gam(n, u)) * (amax[..., 1:].sum(axis=-1) + amax[..., -1])


def _chunked(tm: _Terms, chunk: int, counts, u, tiny, alpha, sig):
    """Componentwise and normwise bounds of the chunked algorithm at chunk size ``chunk``."""
    n_all = tm.n
    lead, dv = tm.q.shape[:-2], tm.v.shape[-1]
    aq, av = np.abs(tm.q), np.abs(tm.v)
    abs_x, abs_y, abs_w = np.abs(tm.xt), np.abs(tm.yt), tm.aw
    comp_o = np.empty((*lead, n_all, dv))
    norm_o = np.empty((*lead, n_all, dv))
    s_abs, s_one = np.abs(tm.s0), np.abs(tm.s0)
    delta_sum = np.zeros(lead)
    eps = np.zeros((*lead, dv))
    qn, yn = _norm(tm.q), _norm(tm.y)
    for c_idx, b in enumerate(range(0, n_all, chunk)):
        n = min(chunk, n_all - b)
        sl = slice(b, b + n)
        upper, plain, acc = _chunk_decays(tm.lam[..., sl, :])
        delta = _chunk_exponent_error(acc, u) if tm.gated else np.zeros(lead)
        ones = np.ones(upper.shape)
        co = _coefficients(upper, abs_x[..., sl, :], abs_y[..., sl, :], abs_w[..., sl, :],
                           aq[..., sl, :], tm.sx, tm.sy)
        co1 = _coefficients(ones, abs_x[..., sl, :], abs_y[..., sl, :], abs_w[..., sl, :],
                            aq[..., sl, :], tm.sx, tm.sy)
        # componentwise
        o_abs, s_abs_next = _abs_chunk(co, s_abs, av[..., sl, :])
        o_one, s_one_next = _abs_chunk(co1, s_one, av[..., sl, :])
        delta_sum = delta_sum + delta
        with np.errstate(over="ignore"):
            grow = np.exp(np.minimum(delta_sum, 700.0))[..., None, None]
        theta = grow * (1 + _gam(c_idx * counts["n_pass"] + counts["n_out"], u)) - 1
        comp_o[..., sl, :] = _times(theta, o_abs) + _times(tiny * (1 + theta), o_one)
        s_abs, s_one = s_abs_next, s_one_next
        # normwise
        out_b, eps = _chunk_normwise(tm, co, co1, plain, sl, n, eps, sig[..., b:b + n + 1, :],
                                     delta, alpha[..., sl], qn[..., sl], yn[..., sl],
                                     av[..., sl, :], counts, u, tiny)
        norm_o[..., sl, :] = out_b
    n_chunks = -(-n_all // chunk)
    with np.errstate(over="ignore"):
        grow = np.exp(np.minimum(delta_sum, 700.0))[..., None, None]
    theta = grow * (1 + _gam(n_chunks * counts["n_pass"], u)) - 1
    comp_s = _times(theta, s_abs) + _times(tiny * (1 + theta), s_one)
    norm_s = np.broadcast_to(eps[..., None, :], tm.s0.shape)
    return comp_o, comp_s, norm_o, norm_s


def _fro(m: np.ndarray) -> np.ndarray:
    return np.sqrt(np.sum(m * m, axis=(-2, -1)))


def _inverse_bounds(low: np.ndarray, low_abs: np.ndarray, low_one: np.ndarray,
                    kappa64: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(K, X̄)``: ``K ≥ ‖(I − L)^(−1)‖₂`` and ``X̄ ≥ |(I − L)^(−1)|`` elementwise for the exact
    ``L`` from its float64 value ``low`` (``‖low − L‖ ≤ η = κ₆₄‖|L|‖ + 2^(−1022)‖|L|_1‖``).
    The float64 inverse ``X`` is verified by its residuals, their own rounding included:
    ``ρ_l ≥ ‖I − X(I − L)‖ ≤ ½`` gives ``K = ‖X‖₂/(1 − ρ_l)``, and
    ``(I − L)^(−1) − X = (I − L)^(−1)(I − (I − L)X)`` gives ``X̄ = |X| + K·ρ_r`` (lower
    triangle: the inverse of a unit lower triangular matrix is one). Infinite where the
    verification fails."""
    n = low.shape[-1]
    eye = np.eye(n)
    finite = np.isfinite(low).all(axis=(-2, -1)) & np.isfinite(low_abs).all(axis=(-2, -1))
    tmat = eye - np.where(finite[..., None, None], low, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.linalg.inv(tmat)
        eta = kappa64 * _fro(low_abs) + 2.0**-1022 * _fro(low_one)
        g64, ax, at = _gam(n + 2, U64), np.abs(x), eye + np.abs(low)
        res_l = _fro(eye - x @ tmat) + g64 * _fro(ax @ at) + _fro(x) * eta
        res_r = _fro(eye - tmat @ x) + g64 * _fro(at @ ax) + _fro(x) * eta
        good = finite & np.isfinite(x).all(axis=(-2, -1))
        xn = np.linalg.svd(np.where(good[..., None, None], x, 0.0), compute_uv=False)[..., 0]
        xn = np.minimum(xn * (1 + 32 * (n + 4) * U64), _fro(x))
        ok = good & (res_l <= 0.5)
        k_inv = np.where(ok, xn / (1 - np.where(ok, res_l, 0.0)), np.inf)
        bar = np.tril(ax + _times(k_inv * res_r, np.ones(1))[..., None, None])
        bar = np.where(ok[..., None, None], bar, np.inf)
    return k_inv, np.where(np.isnan(bar), np.inf, bar)


def _chunk_normwise(tm, co, co1, plain, sl, n, eps_in, sig, delta, alpha, qn, yn, av,
                    counts, u, tiny):
    """Outputs of one chunk and the error norm bound after it (module docstring): ``sig``
    ``(..., n + 1, d_v)`` the state-norm bounds at the chunk's tokens, ``eps_in`` the error
    entering it. ``U`` and its error are bounded elementwise: ``|u_tc| ≤ ‖y_t‖σ̃_(t−1,c)``,
    ``|Û − U| ≤ X̄(|ΔR| + B(|U| + |Û − U|))`` (Thm 8.5), started from its normwise bound."""
    d = tm.d
    n_e, n_x, n_y, n_w = counts["n_e"], counts["n_x"], counts["n_y"], counts["n_w"]
    lead = eps_in.shape[:-1]
    with np.errstate(over="ignore", invalid="ignore"):
        rho = np.exp(np.minimum(delta, 700.0)) * (1 + _gam(n_e, u)) - 1  # (...,)
        k_y = (1 + rho) * (1 + _gam(1 + n_y, u)) - 1
        k_l = (1 + rho) * (1 + _gam(d + 1 + n_x + n_y, u)) - 1
        k_m = (1 + rho) * (1 + _gam(d + 1 + n_w + n_y, u)) - 1
        k_r = (1 + np.maximum(k_y, k_m)) * (1 + _gam(d + 2 * n, u)) - 1
        k_q = (1 + rho) * (1 + _gam(d + 1 + max(n_x, n_w), u)) - 1
        k_o = (1 + k_q) * (1 + _gam(d + 2 * n, u)) - 1
        k_x = (1 + rho) * (1 + _gam(1 + max(n_x, n_w), u)) - 1
        k_s = (1 + k_x) * (1 + _gam(2 * n + 2, u)) - 1
        tau = tiny * (1 + np.maximum.reduce([k_r, k_l, k_o, k_s]))
        e1, e2 = (lambda z: np.asarray(z)[..., None]), (lambda z: np.asarray(z)[..., None, None])
        carry = np.concatenate([np.ones((*lead, 1)), np.cumprod(alpha, axis=-1)], axis=-1)
        sn0 = sig[..., 0, :] + eps_in  # ‖Ŝ_0 column‖
        sig_t = sig + _times(carry[..., None], eps_in[..., None, :])  # exact run from Ŝ_0
        u_bar = yn[..., :, None] * sig_t[..., :-1, :]  # |U| (..., n, d_v)
        d_r = (_times(e2(k_r), _norm(co["Y"])[..., None] * sn0[..., None, :] + co["M"] @ av)
               + e2(tau) * (_norm(co1["Y"])[..., None] * sn0[..., None, :] + co1["M"] @ av))
        eye = np.eye(n)
        lab, l1 = co["L"], co1["L"]
        bmat = (_times(e2(k_l), lab) + e2(tau) * l1
                + _times(_gam(n, u), eye + (1 + e2(k_l)) * lab + e2(tau) * l1))
        if tm.rank_one:
            signed = _coefficients(plain, tm.xt[..., sl, :], tm.yt[..., sl, :],
                                   tm.wt[..., sl, :], tm.q[..., sl, :], tm.sx, tm.sy)["L"]
            absg = -np.where(np.isfinite(tm.lam[..., sl, :]), tm.lam[..., sl, :], 0.0)
            kappa64 = (np.exp(4 * gamma(n + 2, U64) * absg.sum(axis=(-2, -1)))
                       * (1 + _gam(d + 8, U64)) - 1)
            k_inv, x_bar = _inverse_bounds(signed, lab, l1, kappa64)
            lam_c = _fro(bmat)
            kl = k_inv * lam_c
            ok = kl <= 0.5
            first = np.where(e1(ok), e1(k_inv) * (_norm(d_r, axis=-2) + e1(lam_c)
                                                  * _norm(u_bar, axis=-2))
                             / (1 - e1(np.where(ok, kl, 0.0))), np.inf)
            d_u = np.broadcast_to(first[..., None, :], u_bar.shape)
            for _ in range(2):
                d_u = np.fmin(d_u, x_bar @ (d_r + bmat @ (u_bar + d_u)))
            d_u = np.where(u_bar + d_r == 0, 0.0, d_u)
            d_u = np.where(np.isnan(d_u), np.inf, d_u)
        else:
            d_u = np.zeros(u_bar.shape)
        u_hat = u_bar + d_u
        # outputs
        q0n, q01n = _norm(co["Q0"]), _norm(co1["Q0"])
        f_out = (_times(e2(k_o), q0n[..., None] * sn0[..., None, :] + co["Qx"] @ u_hat
                        + co["Qw"] @ av)
                 + co["Qx"] @ d_u
                 + e2(tau) * (q01n[..., None] * sn0[..., None, :] + co1["Qx"] @ u_hat
                              + co1["Qw"] @ av))
        out = _times((carry[..., 1:] * qn)[..., None], eps_in[..., None, :]) + f_out
        # the state after the chunk
        xc, xc1 = np.swapaxes(co["XC"], -1, -2), np.swapaxes(co1["XC"], -1, -2)
        wc, wc1 = np.swapaxes(co["WC"], -1, -2), np.swapaxes(co1["WC"], -1, -2)
        e_c = (_times(e1(k_s), co["G0"].max(axis=-1)[..., None] * sn0
                      + _norm(xc @ u_hat, axis=-2) + _norm(wc @ av, axis=-2))
               + _norm(xc @ d_u, axis=-2)
               + e1(tau) * (sn0 + _norm(xc1 @ u_hat, axis=-2) + _norm(wc1 @ av, axis=-2)))
        eps_out = _times(carry[..., -1, None], eps_in) + e_c
    return np.where(np.isnan(out), np.inf, out), np.where(np.isnan(eps_out), np.inf, eps_out)


# ------------------------------------------------------------------ the public bound
def _check_settings(u, exp_ulps, tiny, chunk_sizes, extra_ulps) -> tuple[int, ...]:
    def real(name, x, lo, hi=math.inf, open_lo=False):
        if isinstance(x, bool) or not isinstance(x, int | float | np.integer | np.floating):
            raise ValueError(f"{name} must be a real number, got {x!r}")
        x = float(x)
        if not (math.isfinite(x) and (x > lo if open_lo else x >= lo) and x < hi):
            raise ValueError(f"{name} must be in {'(' if open_lo else '['}{lo}, {hi}), "
                             f"got {x!r}")
        return x

    real("u", u, 0.0, 1.0, open_lo=True)
    real("exp_ulps", exp_ulps, 0.0)
    real("tiny", tiny, 0.0)
    real("extra_ulps", extra_ulps, 0.0)
    sizes = tuple(chunk_sizes) if isinstance(chunk_sizes, tuple | list) else None
    if not sizes or any(isinstance(c, bool) or not isinstance(c, int | np.integer) or c < 1
                        for c in sizes):
        raise ValueError(f"chunk_sizes must be a non-empty tuple of integers >= 1 (1: the "
                         f"token recurrence), got {chunk_sizes!r}")
    return tuple(int(c) for c in sizes)


def recurrence_error_bound(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, transition: str,
                           g: np.ndarray | None = None, beta: np.ndarray | None = None,
                           p: np.ndarray | None = None, a: np.ndarray | None = None,
                           b: np.ndarray | None = None,
                           initial_state: np.ndarray | None = None, u: float,
                           exp_ulps: float, tiny: float, chunk_sizes: tuple[int, ...] = (1,),
                           extra_ulps: float = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(bound on |ô − o| (..., T, d_v), bound on |Ŝ_T − S_T| (..., d, d_v))`` for an
    evaluation at unit roundoff ``u`` of the recurrence (module docstring) by the token
    recurrence (``1`` in ``chunk_sizes``) or the chunked algorithm at any ``C`` in
    ``chunk_sizes``, exponentials within ``exp_ulps`` ulps of the exact value, decays below
    ``tiny`` (the compute dtype's smallest normal) flushed, ``x, y, w`` formed with
    ``extra_ulps`` roundings beyond the table's. Inputs as the target saw them (float64
    arrays), checked as :func:`kernel_verify.verify.references.recurrence.recurrence_mp`
    checks them."""
    sizes = _check_settings(u, exp_ulps, tiny, chunk_sizes, extra_ulps)
    u, tiny = float(u), float(tiny)
    arr = check_recurrence_inputs(q, k, v, transition=transition, g=g, beta=beta, p=p, a=a,
                                  b=b, initial_state=initial_state)
    tm = _Terms(transition, arr)
    lead, dv = tm.q.shape[:-2], tm.v.shape[-1]
    if tm.n == 0:
        return np.zeros((*lead, 0, dv)), np.zeros(tm.s0.shape)
    alpha = tm.step_norms()
    best_o = np.zeros((*lead, tm.n, dv))
    best_s = np.zeros(tm.s0.shape)
    tok = rounding_counts(transition, tm.d, exp_ulps=exp_ulps, extra_ulps=extra_ulps)
    sig = _state_norms(tm, rounding_counts(transition, tm.d, exp_ulps=2), alpha)
    norm_o, norm_s = _token_normwise(tm, tok, u, tiny, alpha, sig)
    for c in sorted(set(sizes)):
        if c == 1:
            comp_o, comp_s = _token_componentwise(tm, tok, u, tiny)
            o, s = np.fmin(comp_o, norm_o), np.fmin(comp_s, norm_s)
        else:
            counts = rounding_counts(transition, tm.d, exp_ulps=exp_ulps,
                                     extra_ulps=extra_ulps, chunk_size=c)
            comp_o, comp_s, n_o, n_s = _chunked(tm, c, counts, u, tiny, alpha, sig)
            o, s = np.fmin(comp_o, n_o), np.fmin(comp_s, n_s)
        best_o, best_s = np.maximum(best_o, o), np.maximum(best_s, s)
    return best_o * _SAFETY, best_s * _SAFETY
