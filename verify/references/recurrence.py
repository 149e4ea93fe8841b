"""The one exact reference of every state transition of linear attention — the delta rule and
its relatives — in mpmath, by three routes (docs/math.md §23).

Inputs (float arrays, leading dimensions ``...`` looped over): ``q, k (..., T, d)`` already
featurised, ``v (..., T, d_v)``, log-gates ``g ≤ 0`` (``−inf`` is a decay of 0) scalar
``(..., T)`` or per key dimension ``(..., T, d)``, ``beta (..., T)``, ``p, a, b (..., T, d)``,
an initial state ``S_0 (..., d, d_v)`` (None: zeros). Every transition is diagonal plus rank
one, ``A_t = Diag(e^(λ_t)) + x_t y_tᵀ``, and the recurrence is

    S_t = Diag(e^(λ_t)) S_(t−1) + x_t (y_tᵀ S_(t−1)) + w_t v_tᵀ,      o_t = S_tᵀ q_t,

with (:data:`TRANSITIONS`; the state is key-first, ``d × d_v``):

==============  ======  ===============  ===========  ======  ===============================
transition      λ       x                y            w       A
==============  ======  ===============  ===========  ======  ===============================
identity        0       0                0            k       I
decay           g       0                0            k       Diag(e^g)
delta           0       −βk              k            βk      I − βkkᵀ (DeltaNet)
gated_delta     g       −e^g βk          k            βk      e^g(I − βkkᵀ) (Gated DeltaNet)
kda             g       −βk              e^g ⊙ k      βk      (I − βkkᵀ)Diag(e^g) (KDA)
comba           g       −βk              p            βk      e^g I − βkpᵀ (Comba)
rwkv7           g       b                a            k       Diag(e^g) + b aᵀ (RWKV-7)
==============  ======  ===============  ===========  ======  ===============================

Sources: DeltaNet — Yang et al., *Parallelizing Linear Transformers with the Delta Rule over
Sequence Length*, NeurIPS 2024, arXiv 2406.06484; Gated DeltaNet — Yang et al., *Gated Delta
Networks*, ICLR 2025, arXiv 2412.06464 (the decay is applied before the error term: the error
is ``v − e^g Sᵀk``); KDA — Kimi Linear technical report, 2025; Comba — *Comba: Improving
Bilinear RNNs with Closed-loop Control*, 2025; RWKV-7 "Goose", arXiv 2503.14456 (its value-first
state ``S(diag(w) + a bᵀ) + v kᵀ`` is the transpose of the key-first state here).

A gate inside ``x`` (gated_delta) or ``y`` (kda) is written as a shift: ``x_t = e^(σ_x λ_t)
x̃_t``, ``y_t = e^(σ_y λ_t) ỹ_t`` with gate-free ``x̃, ỹ, w̃`` and ``σ ∈ {0, 1}``
(:func:`dplr_terms` returns the gated float64 vectors).

The three routes, each in mpmath at ``dps`` digits (every float input converted exactly,
results rounded once to float64):

* :func:`recurrence_mp` — token by token, ``O(T·d·d_v)`` per sequence;
* :func:`recurrence_products_mp` — the other association: ``S_t = P_(t,0) S_0 + Σ_(s≤t)
  P_(t,s) w_s v_sᵀ`` with ``P_(t,s) = A_t ⋯ A_(s+1)`` formed as explicit ``d × d`` matrices
  (``O(T²d³)``; a second route for tests, not for long sequences);
* :func:`recurrence_chunked_mp` — the generic chunked (UT-transform) algorithm, every decay
  the exponential of an *exact* sum of log-gates (integer arithmetic on the binary64 gates,
  rounded once to the working precision; a range containing ``−inf`` is a decay of exactly
  0). Inside a chunk entered with state ``S_0``, ``G_t = Σ_(r≤t) λ_r`` (chunk-local),
  ``Γ_(t,s) = Diag(e^(G_t − G_s))``, ``u_t = S_(t−1)ᵀ y_t``:

      L_ts = y_tᵀ Γ_(t−1,s) x_s,  M_ts = y_tᵀ Γ_(t−1,s) w_s  (s < t),  Ŷ_t = Γ_(t−1,0) y_t,
      U = (I − L)^(−1) (Ŷ S_0 + M V)                      (forward substitution),
      o_t = S_0ᵀ Γ_(t,0) q_t + Σ_(s≤t) [(q_tᵀ Γ_(t,s) x_s) u_s + (q_tᵀ Γ_(t,s) w_s) v_s],
      S_C = Γ_(C,0) S_0 + Σ_s Γ_(C,s) (x_s u_sᵀ + w_s v_sᵀ).

  (Derived: unrolling the recurrence inside the chunk gives ``S_t = Γ_(t,0) S_0 + Σ_(s≤t)
  Γ_(t,s)(x_s u_sᵀ + w_s v_sᵀ)``; reading it along ``y_(t+1)`` gives the triangular system
  for ``U``, along ``q_t`` the outputs.)

In the token route the gate products are the successive multiplications by ``e^(λ_t)`` at the
working precision; in the products route they are matrix products; in the chunked route one
exponential of an exact sum. The three agree to the working precision, so their float64
results agree to an ulp (``tests/test_recurrence_reference.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.references.mp import to_float, to_mp, working_precision

__all__ = ["TRANSITIONS", "TRANSITION_INPUTS", "check_recurrence_inputs", "dplr_terms",
           "gate_free_terms", "gate_shifts", "recurrence_chunked_mp", "recurrence_mp",
           "recurrence_products_mp"]

TRANSITIONS = ("identity", "decay", "delta", "gated_delta", "kda", "comba", "rwkv7")

#: The per-token inputs each transition requires (any other one given is an error).
TRANSITION_INPUTS: dict[str, tuple[str, ...]] = {
    "identity": (),
    "decay": ("g",),
    "delta": ("beta",),
    "gated_delta": ("g", "beta"),
    "kda": ("g", "beta"),
    "comba": ("g", "beta", "p"),
    "rwkv7": ("g", "a", "b"),
}

_OPTIONAL = ("g", "beta", "p", "a", "b")
_SHIFTS = {"gated_delta": (1, 0), "kda": (0, 1)}


def gate_shifts(transition: str) -> tuple[int, int]:
    """``(σ_x, σ_y)``: whether ``x_t`` (gated_delta) or ``y_t`` (kda) carries the gate
    ``e^(λ_t)`` (module docstring)."""
    _check_transition(transition)
    return _SHIFTS.get(transition, (0, 0))


def _check_transition(transition: Any) -> None:
    if not isinstance(transition, str) or transition not in TRANSITIONS:
        raise ValueError(f"transition must be one of {TRANSITIONS}, got {transition!r}")


def _float_array(name: str, x: Any) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise ValueError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"{name} must have a floating dtype, got {x.dtype.name}")
    return x.astype(np.float64)


def _finite(name: str, x: np.ndarray) -> None:
    if x.size and not bool(np.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or Inf")


def check_recurrence_inputs(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, transition: str,
                            g: np.ndarray | None = None, beta: np.ndarray | None = None,
                            p: np.ndarray | None = None, a: np.ndarray | None = None,
                            b: np.ndarray | None = None,
                            initial_state: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Check the inputs of a recurrence (module docstring) and return them as float64 arrays:
    ``q, k, v, s0`` (zeros for None), ``lam (..., T, d)`` (the log-gates per key dimension,
    zeros without gates) and ``beta, p, a, b`` where the transition takes them. A ValueError
    names the argument: an unknown transition, a required input missing or a foreign one
    given, a wrong shape, NaN or Inf (``g``: NaN, ``+inf`` or a positive value)."""
    _check_transition(transition)
    given = {"g": g, "beta": beta, "p": p, "a": a, "b": b}
    need = TRANSITION_INPUTS[transition]
    for name in _OPTIONAL:
        if name in need and given[name] is None:
            raise ValueError(f"transition {transition!r} needs {name} (its inputs: {need})")
        if name not in need and given[name] is not None:
            raise ValueError(f"transition {transition!r} takes no {name} (its inputs: {need})")
    q, k, v = _float_array("q", q), _float_array("k", k), _float_array("v", v)
    if q.ndim < 2:
        raise ValueError(f"q must have shape (..., T, d), got {q.shape}")
    if k.shape != q.shape:
        raise ValueError(f"k must have the shape of q {q.shape}, got {k.shape}")
    if v.ndim != q.ndim or v.shape[:-1] != q.shape[:-1]:
        raise ValueError(f"v must have shape {(*q.shape[:-1], 'd_v')}, got {v.shape}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        _finite(name, x)
    lead, d, dv = q.shape[:-2], q.shape[-1], v.shape[-1]
    out = {"q": q, "k": k, "v": v}
    if initial_state is None:
        out["s0"] = np.zeros((*lead, d, dv))
    else:
        s0 = _float_array("initial_state", initial_state)
        if s0.shape != (*lead, d, dv):
            raise ValueError(f"initial_state must have shape {(*lead, d, dv)}, got {s0.shape}")
        _finite("initial_state", s0)
        out["s0"] = s0
    if g is None:
        out["lam"] = np.zeros(q.shape)
    else:
        gg = _float_array("g", g)
        if gg.shape == q.shape[:-1]:
            gg = np.broadcast_to(gg[..., None], q.shape)
        elif gg.shape != q.shape:
            raise ValueError(f"g must have shape {q.shape[:-1]} (scalar gates) or {q.shape} "
                             f"(per key dimension), got {gg.shape}")
        if np.isnan(gg).any() or (gg > 0).any():
            raise ValueError("g must be log-gates ≤ 0 (decays in [0, 1]; −inf is a decay of "
                             "0), without NaN")
        out["lam"] = np.ascontiguousarray(gg)
    if beta is not None:
        bb = _float_array("beta", beta)
        if bb.shape != q.shape[:-1]:
            raise ValueError(f"beta must have shape {q.shape[:-1]}, got {bb.shape}")
        _finite("beta", bb)
        out["beta"] = bb
    for name, x in (("p", p), ("a", a), ("b", b)):
        if x is not None:
            xx = _float_array(name, x)
            if xx.shape != q.shape:
                raise ValueError(f"{name} must have shape {q.shape}, got {xx.shape}")
            _finite(name, xx)
            out[name] = xx
    return out


def _gate_free(transition: str, k, beta, p, a, b, mul: Callable, neg: Callable):
    """``(x̃, ỹ, w̃)`` (None for x̃, ỹ without a rank-one part) from the inputs, with the
    arithmetic ``mul(β, k)`` and ``neg`` of the caller (mp lists or float64 arrays)."""
    if transition in ("identity", "decay"):
        return None, None, k
    if transition == "rwkv7":
        return b, a, k
    w = mul(beta, k)
    return neg(w), (p if transition == "comba" else k), w


def gate_free_terms(transition: str, k: np.ndarray, *, beta: np.ndarray | None = None,
                    p: np.ndarray | None = None, a: np.ndarray | None = None,
                    b: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x̃, ỹ, w̃)``, each ``(..., T, d)`` float64: ``x, y, w`` without the gate that
    gated_delta puts in ``x`` and kda in ``y`` (:func:`gate_shifts`; zeros for ``x̃, ỹ``
    without a rank-one part). The inputs are those of :func:`check_recurrence_inputs`,
    already checked."""
    xt, yt, wt = _gate_free(transition, k, beta, p, a, b,
                            lambda bb, kv: bb[..., None] * kv, np.negative)
    if xt is None:
        return np.zeros(k.shape), np.zeros(k.shape), np.array(wt, dtype=np.float64)
    return (np.array(xt, dtype=np.float64), np.array(yt, dtype=np.float64),
            np.array(wt, dtype=np.float64))


def dplr_terms(transition: str, k: np.ndarray, *, g: np.ndarray | None = None,
               beta: np.ndarray | None = None, p: np.ndarray | None = None,
               a: np.ndarray | None = None, b: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(λ, x, y, w)``, each ``(..., T, d)`` float64, of ``A_t = Diag(e^(λ_t)) + x_t y_tᵀ``
    and the update ``w_t v_tᵀ`` (module docstring's table), evaluated in float64 (for bounds
    and magnitudes, not exact); ``x = y = 0`` for identity and decay, ``λ = −inf`` stays."""
    kk = _float_array("k", k)
    if kk.ndim < 2:
        raise ValueError(f"k must have shape (..., T, d), got {kk.shape}")
    _finite("k", kk)
    arr = check_recurrence_inputs(kk, kk, kk[..., :1], transition=transition, g=g, beta=beta,
                                  p=p, a=a, b=b)
    lam = arr["lam"]
    xt, yt, wt = gate_free_terms(transition, arr["k"], beta=arr.get("beta"), p=arr.get("p"),
                                 a=arr.get("a"), b=arr.get("b"))
    sx, sy = gate_shifts(transition)
    e = np.exp(lam)
    return lam.copy(), (e * xt if sx else xt), (e * yt if sy else yt), wt


class _Sequence:
    """One sequence of the inputs in mp: nested lists of mpf (``q, k, v, s0, xt, yt, wt``),
    the float64 log-gates and their exact range sums."""

    def __init__(self, transition: str, arr: dict[str, np.ndarray]) -> None:
        self.n, self.d = arr["q"].shape
        self.dv = arr["v"].shape[-1]
        self.q, self.k, self.v = (to_mp(arr[n]).tolist() for n in ("q", "k", "v"))
        self.s0 = to_mp(arr["s0"]).tolist()
        self.gated = transition not in ("identity", "delta")
        self.lam = arr["lam"]
        self.sx, self.sy = gate_shifts(transition)
        mp_in = {n: to_mp(arr[n]).tolist() for n in ("beta", "p", "a", "b") if n in arr}

        def mul(bb, kk):
            return [[bt * kf for kf in kr] for bt, kr in zip(bb, kk, strict=True)]

        def neg(w):
            return [[-x for x in row] for row in w]

        self.xt, self.yt, self.wt = _gate_free(transition, self.k, mp_in.get("beta"),
                                               mp_in.get("p"), mp_in.get("a"), mp_in.get("b"),
                                               mul, neg)
        self._exp: dict[float, Any] = {}
        self._range: dict[tuple[int, int, int], Any] = {}
        self._prefix: list[list[int]] | None = None

    def decay(self, t: int) -> list | None:
        """``[e^(λ_tf)]_f`` (one exponential per distinct gate value), None where λ ≡ 0."""
        if not self.gated:
            return None
        out = []
        for x in self.lam[t]:
            x = float(x)
            if x not in self._exp:
                self._exp[x] = mpmath.exp(mpmath.mpf(x))
            out.append(self._exp[x])
        return out

    def _prefixes(self) -> None:
        """Exact prefix sums of the finite log-gates as integers in units of ``2^(−E)``, and
        the count of ``−inf`` gates, per key dimension."""
        finite = self.lam[np.isfinite(self.lam)]
        self.scale = max([0] + [x.as_integer_ratio()[1].bit_length() - 1
                                for x in map(float, finite.ravel())])
        pre = [[0] * self.d]
        cnt = [[0] * self.d]
        for row in self.lam:
            z, c = list(pre[-1]), list(cnt[-1])
            for f, x in enumerate(map(float, row)):
                if np.isfinite(x):
                    num, den = x.as_integer_ratio()
                    z[f] += num << (self.scale - (den.bit_length() - 1))
                else:
                    c[f] += 1
            pre.append(z)
            cnt.append(c)
        self._prefix, self._count = pre, cnt

    def range_decay(self, lo: int, hi: int, f: int):
        """``exp(Σ_(lo ≤ r < hi) λ_rf)`` over global token indices: the exponential of the
        exact sum (rounded once to the working precision); 0 if the range holds a −inf, 1 if
        it is empty or the transition has no gates."""
        if not self.gated or hi <= lo:
            return mpmath.mpf(1)
        key = (lo, hi, f)
        if key not in self._range:
            if self._prefix is None:
                self._prefixes()
            if self._count[hi][f] - self._count[lo][f]:
                val = mpmath.mpf(0)
            else:
                z = self._prefix[hi][f] - self._prefix[lo][f]
                val = mpmath.exp(mpmath.ldexp(mpmath.mpf(z), -self.scale))
            self._range[key] = val
        return self._range[key]

    def gated_xy(self, t: int, e: list | None) -> tuple[list, list]:
        """``x_t, y_t`` with their gate (``e = [e^(λ_tf)]``) where the transition puts one."""
        x, y = self.xt[t], self.yt[t]
        if self.sx:
            x = [ef * xf for ef, xf in zip(e, x, strict=True)]
        if self.sy:
            y = [ef * yf for ef, yf in zip(e, y, strict=True)]
        return x, y


def _token_one(seq: _Sequence) -> tuple[list, list]:
    """Token by token: ``u = yᵀS``, ``S ← Diag(e^λ)S + x uᵀ + w vᵀ``, ``o = Sᵀq`` (the state
    kept as its ``d_v`` columns; every dot product one ``fdot``, rounded once)."""
    fdot = mpmath.fdot
    d, dv = range(seq.d), range(seq.dv)
    cols = [[seq.s0[f][c] for f in d] for c in dv]
    out = []
    for t in range(seq.n):
        e = seq.decay(t)
        w, vt = seq.wt[t], seq.v[t]
        if seq.xt is None:
            if e is None:
                cols = [[col[f] + w[f] * vt[c] for f in d] for c, col in enumerate(cols)]
            else:
                cols = [[fdot((e[f], w[f]), (col[f], vt[c])) for f in d]
                        for c, col in enumerate(cols)]
        else:
            x, y = seq.gated_xy(t, e)
            ee = [mpmath.mpf(1)] * seq.d if e is None else e
            new = []
            for c, col in enumerate(cols):
                uc = fdot(y, col)
                new.append([fdot((ee[f], x[f], w[f]), (col[f], uc, vt[c])) for f in d])
            cols = new
        out.append([fdot(seq.q[t], col) for col in cols])
    return out, [[cols[c][f] for c in dv] for f in d]


def _transition_matrix(seq: _Sequence, t: int) -> list[list]:
    """``A_t = Diag(e^(λ_t)) + x_t y_tᵀ`` as an explicit ``d × d`` mp matrix."""
    e = seq.decay(t)
    diag = [mpmath.mpf(1)] * seq.d if e is None else e
    if seq.xt is None:
        return [[diag[f] if f == j else mpmath.mpf(0) for j in range(seq.d)]
                for f in range(seq.d)]
    x, y = seq.gated_xy(t, e)
    return [[(diag[f] if f == j else 0) + x[f] * y[j] for j in range(seq.d)]
            for f in range(seq.d)]


def _products_one(seq: _Sequence) -> tuple[list, list]:
    """``S_t = P_(t,0)S_0 + Σ_(s≤t) P_(t,s) w_s v_sᵀ`` with explicit matrix products
    ``P_(t,s) = P_(t,s+1) A_(s+1)`` (right to left from ``P_(t,t) = I``), one sum per entry."""
    fsum = mpmath.fsum
    d, dv = range(seq.d), range(seq.dv)
    mats = [_transition_matrix(seq, t) for t in range(seq.n)]
    out = []
    s = [list(row) for row in seq.s0]
    for t in range(seq.n):
        prod = [[mpmath.mpf(1) if f == j else mpmath.mpf(0) for j in d] for f in d]
        terms: list[list[list]] = [[[] for _ in dv] for _ in d]
        for r in range(t, -1, -1):  # prod = P_(t,r) = A_t ⋯ A_(r+1)
            pw = [fsum(prod[f][j] * seq.wt[r][j] for j in d) for f in d]
            for f in d:
                for c in dv:
                    terms[f][c].append(pw[f] * seq.v[r][c])
            prod = [[fsum(prod[f][i] * mats[r][i][j] for i in d) for j in d] for f in d]
        for f in d:  # prod = P_(t,−1) = A_t ⋯ A_0
            for c in dv:
                terms[f][c].extend(prod[f][j] * seq.s0[j][c] for j in d)
        s = [[fsum(terms[f][c]) for c in dv] for f in d]
        out.append([fsum(seq.q[t][f] * s[f][c] for f in d) for c in dv])
    return out, s


def _chunk(seq: _Sequence, s0: list, start: int, n: int, out: list) -> list:
    """One chunk of the generic chunked algorithm (module docstring) on tokens
    ``[start, start + n)`` entered with state ``s0``: appends its outputs, returns its final
    state. Local positions ``1..n``; ``Γ`` over local ``(lo, hi]`` is the exact range decay of
    global tokens ``[start + lo, start + hi)``."""
    fsum = mpmath.fsum
    d, dv = range(seq.d), range(seq.dv)
    sx, sy = seq.sx, seq.sy

    def gam(lo: int, hi: int, f: int):
        return seq.range_decay(start + lo, start + hi, f)

    q, v = seq.q[start:start + n], seq.v[start:start + n]
    wt = seq.wt[start:start + n]
    rank_one = seq.xt is not None
    u: list[list] = []
    if rank_one:
        xt, yt = seq.xt[start:start + n], seq.yt[start:start + n]
        for t in range(1, n + 1):  # forward substitution, row t (local), index t − 1
            y = yt[t - 1]
            terms = [[gam(0, t - 1 + sy, f) * y[f] * s0[f][c] for f in d] for c in dv]
            for s in range(1, t):
                lts = fsum(y[f] * xt[s - 1][f] * gam(s - sx, t - 1 + sy, f) for f in d)
                mts = fsum(y[f] * wt[s - 1][f] * gam(s, t - 1 + sy, f) for f in d)
                for c in dv:
                    terms[c].append(lts * u[s - 1][c])
                    terms[c].append(mts * v[s - 1][c])
            u.append([fsum(terms[c]) for c in dv])
    for t in range(1, n + 1):
        qt = q[t - 1]
        terms = [[gam(0, t, f) * qt[f] * s0[f][c] for f in d] for c in dv]
        for s in range(1, t + 1):
            qw = fsum(qt[f] * wt[s - 1][f] * gam(s, t, f) for f in d)
            for c in dv:
                terms[c].append(qw * v[s - 1][c])
            if rank_one:
                qx = fsum(qt[f] * xt[s - 1][f] * gam(s - sx, t, f) for f in d)
                for c in dv:
                    terms[c].append(qx * u[s - 1][c])
        out.append([fsum(terms[c]) for c in dv])
    new = []
    for f in d:
        row = []
        for c in dv:
            terms = [gam(0, n, f) * s0[f][c]]
            terms += [gam(s, n, f) * wt[s - 1][f] * v[s - 1][c] for s in range(1, n + 1)]
            if rank_one:
                terms += [gam(s - sx, n, f) * xt[s - 1][f] * u[s - 1][c]
                          for s in range(1, n + 1)]
            row.append(fsum(terms))
        new.append(row)
    return new


def _chunked_one(seq: _Sequence, *, chunk: int) -> tuple[list, list]:
    out: list = []
    s = [list(row) for row in seq.s0]
    for start in range(0, seq.n, chunk):
        s = _chunk(seq, s, start, min(chunk, seq.n - start), out)
    return out, s


def _rounded(rows: list, shape: tuple[int, int]) -> np.ndarray:
    if not rows or not shape[1]:
        return np.zeros(shape)
    arr = np.empty(shape, dtype=object)
    arr[:] = rows
    return to_float(arr)


def _run(one: Callable, q, k, v, transition, g, beta, p, a, b, initial_state, dps,
         **kw) -> tuple[np.ndarray, np.ndarray]:
    """``one(seq, **kw)`` on each sequence (leading index) in mp at ``dps`` digits; outputs
    ``(..., T, d_v)`` and final state ``(..., d, d_v)`` rounded once to float64. (The shared
    :func:`kernel_verify.verify.references.forms.each_sequence` carries a normaliser ``z``
    this state does not have.)"""
    arr = check_recurrence_inputs(q, k, v, transition=transition, g=g, beta=beta, p=p, a=a,
                                  b=b, initial_state=initial_state)
    q = arr["q"]
    lead, n, d, dv = q.shape[:-2], q.shape[-2], q.shape[-1], arr["v"].shape[-1]
    out = np.zeros((*lead, n, dv))
    state = np.zeros((*lead, d, dv))
    with working_precision(dps):
        for idx in np.ndindex(*lead):
            seq = _Sequence(transition, {name: x[idx] for name, x in arr.items()})
            o, s = one(seq, **kw)
            out[idx] = _rounded(o, (n, dv))
            state[idx] = _rounded(s, (d, dv))
    return out, state


def recurrence_mp(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, transition: str,
                  g: np.ndarray | None = None, beta: np.ndarray | None = None,
                  p: np.ndarray | None = None, a: np.ndarray | None = None,
                  b: np.ndarray | None = None, initial_state: np.ndarray | None = None,
                  dps: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(outputs (..., T, d_v), final state (..., d, d_v))`` of the recurrence (module
    docstring) token by token in mp (``O(T·d·d_v)`` per sequence), rounded once to float64."""
    return _run(_token_one, q, k, v, transition, g, beta, p, a, b, initial_state, dps)


def recurrence_products_mp(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, transition: str,
                           g: np.ndarray | None = None, beta: np.ndarray | None = None,
                           p: np.ndarray | None = None, a: np.ndarray | None = None,
                           b: np.ndarray | None = None,
                           initial_state: np.ndarray | None = None,
                           dps: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The same from the explicit products ``P_(t,s) = A_t ⋯ A_(s+1)`` (module docstring;
    ``O(T²d³)`` per sequence)."""
    return _run(_products_one, q, k, v, transition, g, beta, p, a, b, initial_state, dps)


def recurrence_chunked_mp(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, transition: str,
                          chunk_size: int, g: np.ndarray | None = None,
                          beta: np.ndarray | None = None, p: np.ndarray | None = None,
                          a: np.ndarray | None = None, b: np.ndarray | None = None,
                          initial_state: np.ndarray | None = None,
                          dps: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The same by the generic chunked (UT-transform) algorithm with chunks of
    ``chunk_size`` tokens (module docstring), every decay the exponential of an exact sum of
    log-gates."""
    if (isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer)
            or chunk_size < 1):
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    return _run(_chunked_one, q, k, v, transition, g, beta, p, a, b, initial_state, dps,
                chunk=int(chunk_size))
