"""The exact reference of every state transition (verify/references/recurrence.py, docs/math.md
§23) and its rounding-error bound (verify/recurrence_bounds.py).

Tolerances: every route rounds once to float64 from 40 digits, so two routes agree within one
float64 ulp per entry (``4u₆₄|x|`` + the smallest normal, a margin of 2); identities whose two
sides are the same mp computation are checked bit for bit. The bound is checked against float32
(and float64) NumPy evaluations, written here, of the token recurrence and of the generic
chunked algorithm: it must cover every entry of 200 random cases per transition, and it must be
small enough to matter (below 10⁻³ of the largest output at T = 10, d = 4 in float32, where the
observed errors are ~10⁻⁷) and to reject a planted defect.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.verify.recurrence_bounds import recurrence_error_bound, rounding_counts
from kernel_verify.verify.references.gated import gated_recurrence_mp
from kernel_verify.verify.references.recurrence import (
    TRANSITION_INPUTS,
    TRANSITIONS,
    dplr_terms,
    recurrence_chunked_mp,
    recurrence_mp,
    recurrence_products_mp,
)
from kernel_verify.verify.tolerance import U64

U32 = 2.0**-24
GATED = [t for t in TRANSITIONS if "g" in TRANSITION_INPUTS[t]]
DELTA_LIKE = ["delta", "gated_delta", "kda", "comba"]


def _unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _draw(transition, *, lead=(2,), t=7, d=4, dv=3, seed=0, per_dim=None, strong=False,
          minus_inf=0.0, float32=False):
    """Inputs as the suite draws them: unit q, k, β ∈ [0, 2], log-gates in [−1, 0] (strong:
    [−100, 0]), comba's p = c·unit(k + noise), rwkv7's unit a with b = −c·a, c ∈ [0, 1]."""
    rng = np.random.default_rng(seed)
    q, k = _unit(rng.standard_normal((*lead, t, d))), _unit(rng.standard_normal((*lead, t, d)))
    v, s0 = rng.standard_normal((*lead, t, dv)), rng.standard_normal((*lead, d, dv))
    need = TRANSITION_INPUTS[transition]
    kw = {}
    if "g" in need:
        if per_dim is None:
            per_dim = transition in ("kda", "rwkv7")
        g = -rng.uniform(0, 100 if strong else 1, (*lead, t, d) if per_dim else (*lead, t))
        g[rng.uniform(size=g.shape) < minus_inf] = -np.inf
        kw["g"] = g
    if "beta" in need:
        kw["beta"] = rng.uniform(0, 2, (*lead, t))
    if "p" in need:
        kw["p"] = (_unit(k + 0.2 * rng.standard_normal(k.shape))
                   * rng.uniform(0, 1, (*lead, t, 1)))
    if "a" in need:
        a = _unit(rng.standard_normal((*lead, t, d)))
        kw["a"], kw["b"] = a, -a * rng.uniform(0, 1, (*lead, t, 1))
    if float32:
        q, k, v, s0 = (x.astype(np.float32).astype(np.float64) for x in (q, k, v, s0))
        kw = {n: x.astype(np.float32).astype(np.float64) for n, x in kw.items()}
    return q, k, v, s0, kw


def _close(a, b):
    return bool(np.all(np.abs(a - b) <= 4 * U64 * np.abs(b) + 1e-300))


# ------------------------------------------------------------------ the three routes
@pytest.mark.parametrize(("transition", "per_dim"),
                         [(t, False) for t in TRANSITIONS] + [(t, True) for t in GATED])
def test_the_three_routes_agree(transition, per_dim):
    """Every transition, scalar and per-dimension gates (with −inf gates among the latter),
    an initial state, chunk sizes 1, 2, 3, T and T + 1."""
    q, k, v, s0, kw = _draw(transition, per_dim=per_dim, seed=1 + per_dim,
                            minus_inf=0.1 if per_dim else 0.0)
    out, state = recurrence_mp(q, k, v, transition=transition, initial_state=s0, **kw)
    par, par_s = recurrence_products_mp(q, k, v, transition=transition, initial_state=s0, **kw)
    assert _close(par, out) and _close(par_s, state)
    for chunk in (1, 2, 3, 7, 8):
        chk, chk_s = recurrence_chunked_mp(q, k, v, transition=transition, chunk_size=chunk,
                                           initial_state=s0, **kw)
        assert _close(chk, out) and _close(chk_s, state), chunk


def test_chunked_equals_recurrent_for_every_chunk_size():
    q, k, v, s0, kw = _draw("kda", t=11, seed=4)
    out, state = recurrence_mp(q, k, v, transition="kda", initial_state=s0, **kw)
    for chunk in range(1, 13):
        chk, chk_s = recurrence_chunked_mp(q, k, v, transition="kda", chunk_size=chunk,
                                           initial_state=s0, **kw)
        assert _close(chk, out) and _close(chk_s, state), chunk


def test_the_reference_meets_an_independent_float64_evaluation_within_the_bound():
    """``A_t`` built from the table of docs/math.md §23 (not from the reference's terms), run
    in float64: within the derived bound at ``u₆₄`` of the exact reference."""
    for transition in TRANSITIONS:
        q, k, v, s0, kw = _draw(transition, lead=(), t=9, seed=5, per_dim=True)
        out, state = recurrence_mp(q, k, v, transition=transition, initial_state=s0, **kw)
        bound, s_bound = recurrence_error_bound(q, k, v, transition=transition, initial_state=s0,
                                                u=U64, exp_ulps=1, tiny=2.0**-1022, **kw)
        s = s0.copy()
        mine = []
        for t in range(q.shape[0]):
            eye, kt = np.eye(4), k[t]
            dg = np.diag(np.exp(kw["g"][t])) if "g" in kw else eye
            bt = kw["beta"][t] if "beta" in kw else 0.0
            a_t = {"identity": eye, "decay": dg, "delta": eye - bt * np.outer(kt, kt),
                   "gated_delta": dg @ (eye - bt * np.outer(kt, kt)),
                   "kda": (eye - bt * np.outer(kt, kt)) @ dg,
                   "comba": dg - bt * np.outer(kt, kw["p"][t]) if "p" in kw else None,
                   "rwkv7": dg + np.outer(kw["b"][t], kw["a"][t]) if "a" in kw else None,
                   }[transition]
            w_t = kt if transition in ("identity", "decay", "rwkv7") else bt * kt
            s = a_t @ s + np.outer(w_t, v[t])
            mine.append(s.T @ q[t])
        # another association (A_t formed, then A_t @ S): at most 15 roundings per step where
        # the bound counts 13 (gated_delta, exp_ulps 1), so γ grows by < 2: twice the bound
        assert np.all(np.abs(np.array(mine) - out) <= 2 * bound), transition
        assert np.all(np.abs(s - state) <= 2 * s_bound), transition


def test_dplr_terms_follow_the_table():
    _, k, _, _, kw = _draw("gated_delta", lead=(), t=3, seed=6)
    lam, x, y, w = dplr_terms("gated_delta", k, **kw)
    t = 1
    a_t = np.diag(np.exp(lam[t])) + np.outer(x[t], y[t])
    want = np.exp(kw["g"][t]) * (np.eye(4) - kw["beta"][t] * np.outer(k[t], k[t]))
    assert np.allclose(a_t, want, rtol=0, atol=1e-15)
    assert np.allclose(w[t], kw["beta"][t] * k[t])
    lam, x, y, w = dplr_terms("identity", k)
    assert not lam.any() and not x.any() and not y.any() and np.array_equal(w, k)


# ------------------------------------------------------------------ identities
@pytest.mark.parametrize("kind", ["scalar", "key_dim"])
def test_decay_is_the_gated_reference_and_identity_is_g_zero(kind):
    q, k, v, s0, kw = _draw("decay", per_dim=kind == "key_dim", seed=7)
    z0 = np.zeros(s0.shape[:-1])
    out, state = recurrence_mp(q, k, v, transition="decay", initial_state=s0, **kw)
    ref, (ref_s, _) = gated_recurrence_mp(q, k, v, kw["g"], initial_state=(s0, z0))
    assert _close(out, ref) and _close(state, ref_s)
    out, state = recurrence_mp(q, k, v, transition="identity", initial_state=s0)
    ref, (ref_s, _) = gated_recurrence_mp(q, k, v, np.zeros(kw["g"].shape),
                                          initial_state=(s0, z0))
    assert _close(out, ref) and _close(state, ref_s)


@pytest.mark.parametrize("transition", DELTA_LIKE)
def test_beta_zero_leaves_the_decayed_state(transition):
    q, k, v, s0, kw = _draw(transition, seed=8)
    kw["beta"] = np.zeros(kw["beta"].shape)
    out, state = recurrence_mp(q, k, v, transition=transition, initial_state=s0, **kw)
    if "g" in kw:
        ref, ref_s = recurrence_mp(q, k, 0 * v, transition="decay", g=kw["g"], initial_state=s0)
    else:
        ref, ref_s = recurrence_mp(q, k, 0 * v, transition="identity", initial_state=s0)
    assert np.array_equal(out, ref) and np.array_equal(state, ref_s)


@pytest.mark.parametrize("transition", ["delta", "gated_delta", "kda"])
def test_a_unit_key_with_beta_one_stores_its_value(transition):
    """``S_tᵀk_t = v_t`` for an exactly unit key (±½ in four coordinates, or a basis vector)
    and ``β_t = 1``: the value stored along the key is replaced (exactly, so bit for bit)."""
    rng = np.random.default_rng(9)
    t, d = 8, 4
    k = np.where(rng.uniform(size=(1, t, d)) < 0.5, -0.5, 0.5)
    k[0, ::3] = np.eye(d)[rng.integers(0, d, size=len(k[0, ::3]))]
    v, s0 = rng.standard_normal((1, t, 3)), rng.standard_normal((1, d, 3))
    kw = {"beta": np.ones((1, t))}
    if transition != "delta":
        kw["g"] = -rng.uniform(0, 1, (1, t, d) if transition == "kda" else (1, t))
    out, _ = recurrence_mp(k, k, v, transition=transition, initial_state=s0, **kw)
    assert np.array_equal(out, v)


def test_a_minus_inf_gate_forgets_everything_before_it():
    q, k, v, s0, kw = _draw("gated_delta", t=9, seed=10)
    t0 = 4
    kw["g"][..., t0] = -np.inf
    out, state = recurrence_mp(q, k, v, transition="gated_delta", initial_state=s0, **kw)
    tail = {n: x[..., t0:] for n, x in kw.items()}
    ref, ref_s = recurrence_mp(q[..., t0:, :], k[..., t0:, :], v[..., t0:, :],
                               transition="gated_delta", **tail)
    assert np.array_equal(out[..., t0:, :], ref) and np.array_equal(state, ref_s)
    chk, chk_s = recurrence_chunked_mp(q, k, v, transition="gated_delta", chunk_size=3,
                                       initial_state=s0, **kw)
    assert _close(chk, out) and _close(chk_s, state)


@pytest.mark.parametrize("transition", ["delta", "kda", "rwkv7"])
def test_outputs_are_causal_exactly(transition):
    q, k, v, s0, kw = _draw(transition, t=8, seed=11)
    t0 = 4
    q2, k2, v2 = (x.copy() for x in (q, k, v))
    kw2 = {n: x.copy() for n, x in kw.items()}
    for x in (q2, k2, v2, *kw2.values()):
        later = x[..., t0 + 1:, :] if x.ndim == q.ndim else x[..., t0 + 1:]
        later[...] = -np.abs(later) * 0.5
    for route, extra in ((recurrence_mp, {}), (recurrence_products_mp, {}),
                         (recurrence_chunked_mp, {"chunk_size": 3})):
        a, _ = route(q, k, v, transition=transition, initial_state=s0, **kw, **extra)
        b, _ = route(q2, k2, v2, transition=transition, initial_state=s0, **kw2, **extra)
        assert np.array_equal(a[..., :t0 + 1, :], b[..., :t0 + 1, :])


# ------------------------------------------------------------------ bad input
def _bad_cases():
    q, k, v, s0, kw = _draw("comba", seed=12)
    base = {"q": q, "k": k, "v": v, "transition": "comba", **kw}
    yield {**base, "transition": "mamba"}, "transition must be one of"
    yield {**base, "p": None}, "needs p"
    yield {**base, "a": k}, "takes no a"
    yield {**base, "k": k[..., :3]}, "k must have the shape of q"
    yield {**base, "v": v[..., :5, :]}, "v must have shape"
    yield {**base, "g": -kw["g"] - 0.5}, "g must be log-gates ≤ 0"
    yield {**base, "g": np.where(kw["g"] < -0.5, np.nan, kw["g"])}, "g must be log-gates"
    yield {**base, "g": kw["g"][..., :-1]}, "g must have shape"
    yield {**base, "beta": kw["beta"][..., None]}, "beta must have shape"
    yield {**base, "beta": kw["beta"] * np.inf}, "beta contains NaN or Inf"
    yield {**base, "p": kw["p"][..., :2]}, "p must have shape"
    nan_q = q.copy()
    nan_q[0, 0, 0] = np.nan
    yield {**base, "q": nan_q}, "q contains NaN or Inf"
    yield {**base, "q": q.tolist()}, "q must be a numpy.ndarray"
    yield {**base, "v": v.astype(int)}, "v must have a floating dtype"
    yield {**base, "initial_state": s0[..., :2]}, "initial_state must have shape"
    yield {**base, "initial_state": s0 * np.inf}, "initial_state contains NaN or Inf"


@pytest.mark.parametrize(("kwargs", "match"), list(_bad_cases()),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_bad_input_is_named(kwargs, match):
    kwargs = {n: x for n, x in kwargs.items() if x is not None}
    with pytest.raises(ValueError, match=match):
        recurrence_mp(**kwargs)
    with pytest.raises(ValueError, match=match):
        recurrence_error_bound(**kwargs, u=U32, exp_ulps=3, tiny=2.0**-126)


def test_bad_settings_are_named():
    q, k, v, _, kw = _draw("delta", seed=13)
    for bad, match in (({"chunk_size": 0}, "chunk_size"), ({"chunk_size": 2.0}, "chunk_size"),
                       ({"chunk_size": 2, "dps": 10}, "dps")):
        with pytest.raises(ValueError, match=match):
            recurrence_chunked_mp(q, k, v, transition="delta", **kw, **bad)
    good = {"u": U32, "exp_ulps": 3, "tiny": 2.0**-126}
    for bad, match in (({"u": 0.0}, "u must be"), ({"u": 1.5}, "u must be"),
                       ({"exp_ulps": -1}, "exp_ulps"), ({"tiny": np.nan}, "tiny"),
                       ({"chunk_sizes": ()}, "chunk_sizes"), ({"chunk_sizes": (0,)}, "chunk_sizes"),
                       ({"chunk_sizes": 4}, "chunk_sizes"), ({"extra_ulps": -2}, "extra_ulps")):
        with pytest.raises(ValueError, match=match):
            recurrence_error_bound(q, k, v, transition="delta", **kw, **{**good, **bad})
    with pytest.raises(ValueError, match="needs beta"):
        dplr_terms("delta", k)


# ------------------------------------------------------------------ the bound
def _formed(transition, k, kw, dt):
    """``e^λ, x, y, w`` formed in ``dt`` as a target forms them (gates inside ``x`` or ``y``)."""
    k = k.astype(dt)
    g = kw.get("g")
    lam = np.zeros(k.shape, dt) if g is None else (
        np.broadcast_to(g[..., None], k.shape) if g.ndim == k.ndim - 1 else g).astype(dt)
    e = np.exp(lam)
    if transition in ("identity", "decay"):
        return lam, e, None, None, k
    if transition == "rwkv7":
        return lam, e, kw["b"].astype(dt), kw["a"].astype(dt), k
    w = kw["beta"].astype(dt)[..., None] * k
    x = -(e * w) if transition == "gated_delta" else -w
    y = kw["p"].astype(dt) if transition == "comba" else (e * k if transition == "kda" else k)
    return lam, e, x, y, w


def _token_eval(transition, q, k, v, s0, kw, dt, defect=None):
    """The token recurrence in ``dt``: ``u = yᵀS``, ``S ← e ⊙ S + x uᵀ + w vᵀ``, ``o = Sᵀq``.
    ``defect="decay_after_error"``: Gated DeltaNet's error read from the undecayed state."""
    _, e, x, y, w = _formed(transition, k, kw, dt)
    q, v, s = q.astype(dt), v.astype(dt), s0.astype(dt)
    if defect == "decay_after_error":
        x = -w  # the error v − Sᵀk: no decay on the state it reads
    outs = []
    for t in range(q.shape[-2]):
        upd = w[..., t, :, None] * v[..., t, None, :]
        if x is None:
            s = e[..., t, :, None] * s + upd
        else:
            u = np.einsum("...f,...fc->...c", y[..., t, :], s)
            s = e[..., t, :, None] * s + x[..., t, :, None] * u[..., None, :] + upd
        outs.append(np.einsum("...f,...fc->...c", q[..., t, :], s))
    return np.stack(outs, -2).astype(np.float64), s.astype(np.float64)


def _chunked_eval(transition, q, k, v, s0, kw, dt, chunk):
    """The generic chunked algorithm of docs/math.md §23 in ``dt``: chunk-local cumulative
    log-gates (a range across a −inf masked to 0), ``L, M, Ŷ``, forward substitution, outputs
    and the state after each chunk."""
    lam, _, x, y, w = _formed(transition, k, kw, dt)
    q, v, s = q.astype(dt), v.astype(dt), s0.astype(dt)
    outs = []
    for b in range(0, q.shape[-2], chunk):
        n = min(chunk, q.shape[-2] - b)
        sl = slice(b, b + n)
        fin = np.isfinite(lam[..., sl, :])
        zero = np.zeros((*lam.shape[:-2], 1, lam.shape[-1]), dt)
        cum = np.concatenate([zero, np.cumsum(np.where(fin, lam[..., sl, :], 0), -2)], -2)
        cnt = np.concatenate([zero, np.cumsum(~fin, -2).astype(dt)], -2)

        def gam(t, r, cum=cum, cnt=cnt):
            return np.where(cnt[..., t, :] > cnt[..., r, :], dt(0),
                            np.exp(cum[..., t, :] - cum[..., r, :]))

        qq, vv, ww = q[..., sl, :], v[..., sl, :], w[..., sl, :]
        uu = []
        if x is not None:
            xx, yy = x[..., sl, :], y[..., sl, :]
            for t in range(1, n + 1):
                r = np.einsum("...f,...fc->...c", gam(t - 1, 0) * yy[..., t - 1, :], s)
                for j in range(1, t):
                    m = np.sum(yy[..., t - 1, :] * gam(t - 1, j) * ww[..., j - 1, :], -1)
                    r = r + m[..., None] * vv[..., j - 1, :]
                for j in range(1, t):
                    low = np.sum(yy[..., t - 1, :] * gam(t - 1, j) * xx[..., j - 1, :], -1)
                    r = r + low[..., None] * uu[j - 1]
                uu.append(r)
        for t in range(1, n + 1):
            o = np.einsum("...f,...fc->...c", gam(t, 0) * qq[..., t - 1, :], s)
            for j in range(1, t + 1):
                o = o + np.sum(qq[..., t - 1, :] * gam(t, j) * ww[..., j - 1, :],
                               -1)[..., None] * vv[..., j - 1, :]
                if x is not None:
                    o = o + np.sum(qq[..., t - 1, :] * gam(t, j) * xx[..., j - 1, :],
                                   -1)[..., None] * uu[j - 1]
            outs.append(o)
        new = gam(n, 0)[..., :, None] * s
        for j in range(1, n + 1):
            new = new + (gam(n, j) * ww[..., j - 1, :])[..., :, None] * vv[..., j - 1, None, :]
            if x is not None:
                new = new + (gam(n, j) * xx[..., j - 1, :])[..., :, None] * uu[j - 1][..., None, :]
        s = new
    return np.stack(outs, -2).astype(np.float64), s.astype(np.float64)


F32 = {"u": U32, "exp_ulps": 3, "tiny": 2.0**-126}  # NumPy's float32 exp: ≤ 2.4 ulp measured


@pytest.mark.parametrize("transition", TRANSITIONS)
def test_the_bound_holds_for_200_float32_evaluations_and_has_power(transition):
    """200 sequences of T = 10, d = 4, d_v = 3: the token recurrence and the chunked algorithm
    (C = 4) in float32 are within the bound at every output and state entry; the bound is below
    10⁻³ of each sequence's largest output (measured: ≤ 1.2·10⁻⁴), so a defect of relative size
    10⁻³ is visible."""
    q, k, v, s0, kw = _draw(transition, lead=(200,), t=10, seed=14, float32=True)
    ref, ref_s = recurrence_mp(q, k, v, transition=transition, initial_state=s0, **kw)
    bound, s_bound = recurrence_error_bound(q, k, v, transition=transition, initial_state=s0,
                                            chunk_sizes=(1, 4), **kw, **F32)
    for out, state in (_token_eval(transition, q, k, v, s0, kw, np.float32),
                       _chunked_eval(transition, q, k, v, s0, kw, np.float32, 4)):
        assert np.all(np.abs(out - ref) <= bound)
        assert np.all(np.abs(state - ref_s) <= s_bound)
    scale = np.abs(ref).max(axis=(-2, -1))
    assert np.all(bound.max(axis=(-2, -1)) <= 1e-3 * scale)


@pytest.mark.parametrize("transition", ["decay", "gated_delta", "kda", "rwkv7"])
def test_the_bound_holds_in_hard_regimes(transition):
    """Decays down to e^(−100) (below float32's normal range: flushed or subnormal) with −inf
    gates sprinkled in, T = 40, chunks of 16, float32 and float64."""
    q, k, v, s0, kw = _draw(transition, lead=(3,), t=40, seed=15, strong=True, minus_inf=0.05,
                            float32=True)
    ref, ref_s = recurrence_mp(q, k, v, transition=transition, initial_state=s0, **kw)
    for dt, setting in ((np.float32, F32),
                        (np.float64, {"u": U64, "exp_ulps": 1, "tiny": 2.0**-1022})):
        bound, s_bound = recurrence_error_bound(q, k, v, transition=transition,
                                                initial_state=s0, chunk_sizes=(1, 16), **kw,
                                                **setting)
        with np.errstate(under="ignore"):
            evals = (_token_eval(transition, q, k, v, s0, kw, dt),
                     _chunked_eval(transition, q, k, v, s0, kw, dt, 16))
        for out, state in evals:
            assert np.all(np.abs(out - ref) <= bound)
            assert np.all(np.abs(state - ref_s) <= s_bound)


def test_the_bound_rejects_gated_deltanet_with_the_decay_after_the_error_term():
    """The error term read from the undecayed state (``v − Sᵀk`` instead of ``v − e^g Sᵀk``)
    is outside the float32 bound; the correct evaluation of the same inputs is inside."""
    q, k, v, s0, kw = _draw("gated_delta", lead=(20,), t=10, seed=16, float32=True)
    ref, _ = recurrence_mp(q, k, v, transition="gated_delta", initial_state=s0, **kw)
    bound, _ = recurrence_error_bound(q, k, v, transition="gated_delta", initial_state=s0,
                                      **kw, **F32)
    good, _ = _token_eval("gated_delta", q, k, v, s0, kw, np.float32)
    bad, _ = _token_eval("gated_delta", q, k, v, s0, kw, np.float32, defect="decay_after_error")
    assert np.all(np.abs(good - ref) <= bound)
    assert np.all(np.any(np.abs(bad - ref) > bound, axis=(-2, -1)))


def test_rounding_counts_are_those_of_the_docstring():
    c = rounding_counts("gated_delta", 4, exp_ulps=3, extra_ulps=1)
    assert (c["n_e"], c["n_x"], c["n_y"], c["n_w"]) == (6, 9, 1, 2)
    assert c["n_step"] == max(6 + 3, 9 + 1 + 4 + 3, 2 + 3) + 2
    c = rounding_counts("delta", 4, exp_ulps=1, chunk_size=4)
    n_u = max(0 + 2 + 1, 1 + 0 + 2 + 4 + 1) + (4 + 8) + 3 * ((1 + 0 + 2 + 4 + 1) + 4 + 8)
    assert c["n_U"] == n_u and c["n_pass"] == n_u + 1 + 2 + 8 + 3
