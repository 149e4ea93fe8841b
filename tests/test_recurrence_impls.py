"""The delta rule and its relatives (impls/{numpy,torch}/recurrence.py): the chunked (UT
transform) form against the token-by-token recurrence for every transition, split invariance,
NumPy against torch, the ``decay`` transition against the gated forms, strong gates in float32,
gradients, identities of the delta rule, the input checks (impls/recurrence_checks.py) and the
conventions of impls/recurrence_conventions.py against their formulas.

Tolerance: 1e-12 in float64 on inputs of order 1 (unit keys, β and decays in (0, 1]), where every
form is a few hundred rounding errors of 2⁻⁵³ from the others.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from kernel_verify.impls import recurrence_conventions as conv
from kernel_verify.impls.numpy import gated_forms as npg
from kernel_verify.impls.numpy import recurrence as npr
from kernel_verify.impls.recurrence_checks import REQUIRED_INPUTS, TRANSITIONS
from kernel_verify.impls.torch import recurrence as tr

TOL = 1e-12
LEAD, D, DV = (2, 3), 4, 3

#: (transition, gate kind): scalar and per-key-dimension gates where the transition has a gate
CASES = [(t, kind) for t in TRANSITIONS
         for kind in (("scalar", "key_dim") if "g" in REQUIRED_INPUTS[t] else (None,))]


def _inputs(transition, kind, t, seed=0, lead=LEAD, d=D, dv=DV):
    """q, k, v and the transition's inputs (a dict) as float64 NumPy arrays: unit keys,
    β ∈ (0, 1), log-gates in (−1, 0], RWKV-7's ``a = −κ̂``, ``b = κ̂ ⊙ α`` with α ∈ (0, 1)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((*lead, t, d))
    k = rng.standard_normal((*lead, t, d))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.standard_normal((*lead, t, dv))
    make = {
        "g": lambda: -rng.uniform(0, 1, (*lead, t) if kind == "scalar" else (*lead, t, d)),
        "beta": lambda: rng.uniform(0, 1, (*lead, t)),
        "p": lambda: k + 0.3 * rng.standard_normal(k.shape),
        "a": lambda: -k,
        "b": lambda: k * rng.uniform(0, 1, k.shape),
    }
    return q, k, v, {n: make[n]() for n in REQUIRED_INPUTS[transition]}


def _state(seed=1, lead=LEAD, d=D, dv=DV):
    return np.random.default_rng(seed).standard_normal((*lead, d, dv))


def _close(a, b, tol=TOL):
    a, b = (x.detach().numpy() if isinstance(x, torch.Tensor) else x for x in (a, b))
    assert a.shape == b.shape
    assert np.max(np.abs(a - b), initial=0.0) <= tol


def _t(x):
    return None if x is None else torch.tensor(x)


def _tkw(kw):
    return {n: _t(x) for n, x in kw.items()}


# ------------------------------------------------------------------------------ the forms
@pytest.mark.parametrize(("transition", "kind"), CASES)
def test_chunked_equals_recurrent(transition, kind):
    t = 11
    q, k, v, kw = _inputs(transition, kind, t)
    for s0 in (None, _state()):
        o_ref, s_ref = npr.recurrent(q, k, v, transition=transition, initial_state=s0, **kw)
        for chunk in (1, 2, 3, 4, 5, t, t + 1, 64):
            o, s = npr.chunked(q, k, v, transition=transition, chunk_size=chunk,
                               initial_state=s0, **kw)
            _close(o, o_ref)
            _close(s, s_ref)


@pytest.mark.parametrize(("transition", "kind"),
                         [("kda", "key_dim"), ("rwkv7", "key_dim"), ("gated_delta", "scalar")])
def test_long_chunks_with_strong_gates(transition, kind):
    """Chunks longer than the blocks of 16 columns of the per-key in-chunk products (the
    product factored at a block's last column), with runs of log-gates −30 inside."""
    t = 40
    q, k, v, kw = _inputs(transition, kind, t, seed=12)
    g = kw["g"] if kind == "key_dim" else kw["g"][..., None]  # a view: (..., T, e)
    g[..., 10:14, :] = -30.0
    g[..., 30:, :] = -30.0
    s0 = _state()
    o_ref, s_ref = npr.recurrent(q, k, v, transition=transition, initial_state=s0, **kw)
    for chunk in (17, 33, 40):
        o, s = npr.chunked(q, k, v, transition=transition, chunk_size=chunk, initial_state=s0,
                           **kw)
        _close(o, o_ref)
        _close(s, s_ref)
        to, ts = tr.chunked(_t(q), _t(k), _t(v), transition=transition, chunk_size=chunk,
                            initial_state=_t(s0), **_tkw(kw))
        _close(to, o_ref)
        _close(ts, s_ref)


@pytest.mark.parametrize(("transition", "kind"), CASES)
def test_steps_and_split_invariance(transition, kind):
    t, t0 = 9, 4
    q, k, v, kw = _inputs(transition, kind, t, seed=2)
    s0 = _state()
    o_ref, s_ref = npr.recurrent(q, k, v, transition=transition, initial_state=s0, **kw)
    state, outs = s0, []
    for i in range(t):
        one = {f"{n}_t": x[..., i] if x.ndim == q.ndim - 1 else x[..., i, :]
               for n, x in kw.items()}
        state, o = npr.recurrent_step(state, q[..., i, :], k[..., i, :], v[..., i, :],
                                      transition=transition, **one)
        outs.append(o)
    _close(np.stack(outs, axis=-2), o_ref)
    _close(state, s_ref)

    def cut(x, lo, hi):
        return x[..., lo:hi] if x.ndim == q.ndim - 1 else x[..., lo:hi, :]

    for form, extra in ((npr.recurrent, {}), (npr.chunked, {"chunk_size": 3})):
        first = {n: cut(x, 0, t0) for n, x in kw.items()}
        second = {n: cut(x, t0, t) for n, x in kw.items()}
        o1, s1 = form(q[..., :t0, :], k[..., :t0, :], v[..., :t0, :], transition=transition,
                      initial_state=s0, **first, **extra)
        o2, s2 = form(q[..., t0:, :], k[..., t0:, :], v[..., t0:, :], transition=transition,
                      initial_state=s1, **second, **extra)
        _close(np.concatenate([o1, o2], axis=-2), o_ref)
        _close(s2, s_ref)


@pytest.mark.parametrize(("transition", "kind"), CASES)
def test_numpy_equals_torch_float64(transition, kind):
    q, k, v, kw = _inputs(transition, kind, 10, seed=3)
    s0 = _state()
    for np_form, t_form, extra in ((npr.chunked, tr.chunked, {"chunk_size": 4}),
                                   (npr.recurrent, tr.recurrent, {})):
        o, s = np_form(q, k, v, transition=transition, initial_state=s0, **kw, **extra)
        to, ts = t_form(_t(q), _t(k), _t(v), transition=transition, initial_state=_t(s0),
                        **_tkw(kw), **extra)
        assert to.dtype == torch.float64 and ts.dtype == torch.float64
        _close(to, o)
        _close(ts, s)
    one = {f"{n}_t": x[..., 0] if x.ndim == q.ndim - 1 else x[..., 0, :] for n, x in kw.items()}
    s, o = npr.recurrent_step(s0, q[..., 0, :], k[..., 0, :], v[..., 0, :],
                              transition=transition, **one)
    ts, to = tr.recurrent_step(_t(s0), _t(q[..., 0, :]), _t(k[..., 0, :]), _t(v[..., 0, :]),
                               transition=transition, **_tkw(one))
    _close(to, o)
    _close(ts, s)


def test_no_leading_axes_and_scalar_gates_of_one_token():
    """``q (T, d)``: the step takes ``g[t]``, ``beta[t]`` (NumPy scalars) as 0-d arrays."""
    q, k, v, kw = _inputs("gated_delta", "scalar", 6, lead=())
    o_ref, s_ref = npr.recurrent(q, k, v, transition="gated_delta", **kw)
    _close(npr.chunked(q, k, v, transition="gated_delta", chunk_size=4, **kw)[0], o_ref)
    state = None
    for i in range(6):
        state, o = npr.recurrent_step(state, q[i], k[i], v[i], transition="gated_delta",
                                      g_t=kw["g"][i], beta_t=kw["beta"][i])
        _close(o, o_ref[i])
    _close(state, s_ref)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_inputs_are_computed_in_float32(dtype):
    """The house policy (impls/torch/convert.py): outputs in the input dtype, the state in
    float32, the values those of the float32 computation on the rounded inputs."""
    q, k, v, kw = _inputs("gated_delta", "scalar", 6, seed=14)
    half = [torch.tensor(x).to(dtype) for x in (q, k, v, kw["g"], kw["beta"])]
    o, s = tr.chunked(*half[:3], transition="gated_delta", g=half[3], beta=half[4], chunk_size=4)
    assert o.dtype == dtype and s.dtype == torch.float32
    o32, s32 = tr.recurrent(*(x.float() for x in half[:3]), transition="gated_delta",
                            g=half[3].float(), beta=half[4].float())
    _close(s, s32, tol=1e-5)
    _close(o.float(), o32.to(dtype).float(), tol=0.02)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_empty_sequence_returns_the_initial_state(backend):
    q, k, v, kw = _inputs("gated_delta", "scalar", 0)
    s0 = _state()
    mod, wrap = (npr, lambda x: x) if backend == "numpy" else (tr, _t)
    for form in (mod.chunked, mod.recurrent):
        o, s = form(wrap(q), wrap(k), wrap(v), transition="gated_delta", initial_state=wrap(s0),
                    **{n: wrap(x) for n, x in kw.items()})
        assert tuple(o.shape) == (*LEAD, 0, DV)
        _close(s, s0, tol=0.0)
        o, s = form(wrap(q), wrap(k), wrap(v), transition="gated_delta",
                    **{n: wrap(x) for n, x in kw.items()})
        _close(s, np.zeros((*LEAD, D, DV)), tol=0.0)


@pytest.mark.parametrize("kind", ["scalar", "key_dim"])
def test_decay_equals_the_gated_forms(kind):
    q, k, v, kw = _inputs("decay", kind, 13, seed=4)
    s0 = _state()
    o, s = npr.chunked(q, k, v, transition="decay", chunk_size=5, initial_state=s0, **kw)
    o_ref, (s_ref, _) = npg.gated_attention_chunked(
        q, k, v, kw["g"], chunk_size=5, initial_state=(s0, np.zeros((*LEAD, D))),
        normalise=False)
    _close(o, o_ref)
    _close(s, s_ref)


def test_transition_terms_build_the_stated_matrices():
    """``Diag(e^λ) + x yᵀ`` is the matrix of the module docstring's table."""
    _, k, _, kw = _inputs("comba", "scalar", 3, seed=5)
    g, beta, p = kw["g"], kw["beta"], kw["p"]
    eye = np.eye(D)
    kk = k[..., :, None] * k[..., None, :]
    e = np.exp(g)[..., None, None]
    gk = -np.random.default_rng(6).uniform(0, 1, k.shape)
    b_ = k * 0.5
    want = {
        "identity": ({}, np.broadcast_to(eye, kk.shape)),
        "decay": ({"g": g}, e * eye),
        "delta": ({"beta": beta}, eye - beta[..., None, None] * kk),
        "gated_delta": ({"g": g, "beta": beta}, e * (eye - beta[..., None, None] * kk)),
        "kda": ({"g": gk, "beta": beta},
                (eye - beta[..., None, None] * kk) @ (np.exp(gk)[..., :, None] * eye)),
        "comba": ({"g": g, "beta": beta, "p": p},
                  e * eye - beta[..., None, None] * k[..., :, None] * p[..., None, :]),
        "rwkv7": ({"g": gk, "a": -k, "b": b_},
                  np.exp(gk)[..., :, None] * eye + b_[..., :, None] * (-k)[..., None, :]),
    }
    for transition, (inputs, matrix) in want.items():
        lam, x, y, w = npr.transition_terms(transition, k, **inputs)
        assert lam.shape == k.shape
        _close(np.exp(lam)[..., :, None] * eye + x[..., :, None] * y[..., None, :], matrix)
        _close(w, (k if transition in ("identity", "decay", "rwkv7")
                   else beta[..., None] * k))
        t_terms = tr.transition_terms(transition, _t(k), **_tkw(inputs))
        for a, b in zip(t_terms, (lam, x, y, w), strict=True):
            _close(a, b)


# ------------------------------------------------------------------ strong gates, gradients
@pytest.mark.parametrize(("transition", "kind"),
                         [("gated_delta", "scalar"), ("kda", "key_dim"), ("comba", "scalar"),
                          ("rwkv7", "key_dim"), ("decay", "key_dim")])
def test_strong_gates_in_float32_stay_finite(transition, kind):
    """A run of log-gates −30 over 8 tokens: cumulative −240, far below float32's exp range;
    the chunked form only exponentiates differences, so nothing overflows to NaN."""
    q, k, v, kw = _inputs(transition, kind, 8, seed=7)
    kw["g"][:] = -30.0
    s0 = _state()
    f32 = {n: torch.tensor(x, dtype=torch.float32) for n, x in kw.items()}
    o, s = tr.chunked(*(torch.tensor(x, dtype=torch.float32) for x in (q, k, v)),
                      transition=transition, chunk_size=8,
                      initial_state=torch.tensor(s0, dtype=torch.float32), **f32)
    assert o.dtype == torch.float32
    assert bool(torch.isfinite(o).all()) and bool(torch.isfinite(s).all())
    o_ref, s_ref = npr.recurrent(q, k, v, transition=transition, initial_state=s0, **kw)
    _close(o, o_ref, tol=1e-5)
    _close(s, s_ref, tol=1e-5)
    o_np, _ = npr.chunked(*(x.astype(np.float32) for x in (q, k, v)), transition=transition,
                          chunk_size=8, **{n: x.astype(np.float32) for n, x in kw.items()})
    assert o_np.dtype == np.float32 and np.isfinite(o_np).all()


@pytest.mark.parametrize(("transition", "kind"), [("gated_delta", "scalar"), ("kda", "key_dim")])
def test_gradcheck_through_chunked(transition, kind):
    q, k, v, kw = _inputs(transition, kind, 5, seed=8, lead=(1, 2), d=3, dv=2)
    s0 = _state(lead=(1, 2), d=3, dv=2)
    names = list(kw)
    args = [torch.tensor(x, requires_grad=True) for x in (q, k, v, *kw.values(), s0)]

    def fn(q, k, v, *rest):
        return tr.chunked(q, k, v, transition=transition, chunk_size=2,
                          initial_state=rest[-1], **dict(zip(names, rest[:-1], strict=True)))

    assert torch.autograd.gradcheck(fn, tuple(args), fast_mode=True)


def test_gradients_of_long_chunks_and_strong_gates():
    """gradcheck through a chunk of 20 per-key gates (the factored blocks); in float32 a run of
    log-gates −30 gives finite gradients (decays masked before the exponential)."""
    q, k, v, kw = _inputs("kda", "key_dim", 20, seed=13, lead=(1,), d=3, dv=2)
    args = [torch.tensor(x, requires_grad=True) for x in (q, k, v, kw["g"], kw["beta"])]

    def fn(q, k, v, g, beta):
        return tr.chunked(q, k, v, transition="kda", g=g, beta=beta, chunk_size=20)

    assert torch.autograd.gradcheck(fn, tuple(args), fast_mode=True)
    kw["g"][..., 3:12, :] = -30.0
    args = [torch.tensor(x, dtype=torch.float32, requires_grad=True)
            for x in (q, k, v, kw["g"], kw["beta"])]
    o, s = fn(*args)
    (o.sum() + s.sum()).backward()
    assert all(bool(torch.isfinite(a.grad).all()) for a in args)


# ----------------------------------------------------------------------------- identities
def test_zero_beta_keeps_the_decayed_state():
    q, k, v, kw = _inputs("gated_delta", "scalar", 6, seed=9)
    s0 = _state()
    kw["beta"] = np.zeros_like(kw["beta"])
    for transition in ("gated_delta", "kda"):
        o, s = npr.chunked(q, k, v, transition=transition, chunk_size=4, initial_state=s0, **kw)
        decay = np.exp(np.cumsum(kw["g"], axis=-1))  # (..., T)
        _close(s, decay[..., -1, None, None] * s0)
        _close(o, decay[..., None] * (q @ s0))


def test_delta_rule_with_unit_key_and_beta_one_writes_the_value():
    q, k, v, kw = _inputs("delta", None, 7, seed=10)
    beta = np.ones_like(kw["beta"])
    state = _state()
    for i in range(7):
        state, _ = npr.recurrent_step(state, q[..., i, :], k[..., i, :], v[..., i, :],
                                      transition="delta", beta_t=beta[..., i])
        read = (k[..., i, None, :] @ state)[..., 0, :]
        _close(read, v[..., i, :])


# ---------------------------------------------------------------------------- bad inputs
def _call(change, form="chunked", transition="gated_delta"):
    q, k, v, kw = _inputs("gated_delta", "scalar", 5)
    args = {"q": q, "k": k, "v": v, "transition": transition, "initial_state": _state(),
            "chunk_size": 2, **kw}
    args = change(args)
    if form == "recurrent":
        args.pop("chunk_size")
    return getattr(npr, form)(args.pop("q"), args.pop("k"), args.pop("v"), **args)


BAD = [
    (lambda a: {**a, "transition": "mamba"}, "transition 'mamba' is unknown"),
    (lambda a: {**a, "transition": 3}, "transition must be a str"),
    (lambda a: {**a, "g": None}, "needs g"),
    (lambda a: {**a, "beta": None}, "needs beta"),
    (lambda a: {**a, "p": a["k"]}, "takes no p"),
    (lambda a: {**a, "transition": "delta"}, "takes no g"),
    (lambda a: {**a, "g": -a["g"] - 0.5}, "g must be ≤ 0"),
    (lambda a: {**a, "g": np.where(a["g"] < -0.5, np.nan, a["g"])}, "g contains NaN"),
    (lambda a: {**a, "g": a["g"][..., :-1]}, "g must have shape"),
    (lambda a: {**a, "g": a["g"].astype(np.float32)}, "g must have the dtype of k"),
    (lambda a: {**a, "beta": a["beta"][..., None]}, "beta must have shape"),
    (lambda a: {**a, "beta": np.full_like(a["beta"], np.inf)}, "beta contains NaN or Inf"),
    (lambda a: {**a, "beta": torch.tensor(a["beta"])}, "beta must be a numpy.ndarray"),
    (lambda a: {**a, "q": a["q"][..., :-1]}, "q and k must have the same last dimension"),
    (lambda a: {**a, "v": a["v"][..., :-1, :]}, "k and v must have the same number of rows"),
    (lambda a: {**a, "k": np.where(a["k"] > 0.5, np.inf, a["k"])}, "k contains NaN or Inf"),
    (lambda a: {**a, "v": a["v"].astype(np.int64)}, "v must have a floating dtype"),
    (lambda a: {**a, "chunk_size": 0}, "chunk_size must be >= 1"),
    (lambda a: {**a, "chunk_size": 2.0}, "chunk_size must be an integer"),
    (lambda a: {**a, "chunk_size": True}, "chunk_size must be an integer"),
    (lambda a: {**a, "initial_state": a["initial_state"][..., :-1]}, "initial_state must have "
     "shape"),
    (lambda a: {**a, "initial_state": (a["initial_state"], None)}, "initial_state must be one"),
    (lambda a: {**a, "initial_state": a["initial_state"] * np.nan}, "initial_state contains"),
]


@pytest.mark.parametrize(("change", "words", "form"),
                         [(c, w, f) for c, w in BAD for f in ("chunked", "recurrent")
                          if f == "chunked" or not w.startswith("chunk_size")])
def test_bad_inputs_are_named(change, words, form):
    with pytest.raises((ValueError, TypeError), match=words):
        _call(change, form)


def test_bad_inputs_are_named_in_torch_and_in_a_step():
    q, k, v, kw = _inputs("kda", "key_dim", 4)
    tq, tk, tv = _t(q), _t(k), _t(v)
    with pytest.raises(TypeError, match=r"g must be a torch\.Tensor"):
        tr.chunked(tq, tk, tv, transition="kda", g=kw["g"], beta=_t(kw["beta"]))
    with pytest.raises(ValueError, match="g must be ≤ 0"):
        tr.recurrent(tq, tk, tv, transition="kda", g=-_t(kw["g"]) + 1, beta=_t(kw["beta"]))
    with pytest.raises(ValueError, match="needs a"):
        tr.chunked(tq, tk, tv, transition="rwkv7", g=_t(kw["g"]), b=tk)
    with pytest.raises(ValueError, match="g_t must be ≤ 0"):
        npr.recurrent_step(None, q[..., 0, :], k[..., 0, :], v[..., 0, :], transition="kda",
                           g_t=-kw["g"][..., 0, :] + 1, beta_t=kw["beta"][..., 0])
    with pytest.raises(ValueError, match="takes no beta_t"):
        tr.recurrent_step(None, tq[..., 0, :], tk[..., 0, :], tv[..., 0, :], transition="decay",
                          g_t=_t(kw["g"][..., 0, :]), beta_t=_t(kw["beta"][..., 0]))
    with pytest.raises(ValueError, match="state must have shape"):
        npr.recurrent_step(np.zeros((2, 3, 4, 4)), q[..., 0, :], k[..., 0, :], v[..., 0, :],
                           transition="identity")
    with pytest.raises(ValueError, match="q has a batch"):
        npr.chunked(q[:0], k[:0], v[:0], transition="identity")


# --------------------------------------------------------------------------- conventions
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_l2_normalise_conventions(backend):
    x = np.random.default_rng(11).standard_normal((3, 5, 6))
    wrap = (lambda a: a) if backend == "numpy" else _t
    sq = np.sum(x * x, axis=-1, keepdims=True)
    eps = 1e-6
    want = {"sum_inside": x / np.sqrt(sq + eps), "root_outside": x / (np.sqrt(sq) + eps),
            "mean_inside": x / np.sqrt(sq / 6 + eps), "clamp": x / np.sqrt(sq)}
    for convention, ref in want.items():
        out = conv.l2_normalise(wrap(x), eps=eps, convention=convention)
        assert type(out) is type(wrap(x))
        _close(out, ref, tol=1e-15)
    norms = np.linalg.norm(conv.l2_normalise(x, convention="mean_inside"), axis=-1)
    assert np.allclose(norms, math.sqrt(6), rtol=1e-5)
    tiny = 1e-4 * x[0, 0] / np.linalg.norm(x[0, 0])
    a = np.linalg.norm(conv.l2_normalise(wrap(tiny), eps=eps, convention="sum_inside"))
    b = np.linalg.norm(conv.l2_normalise(wrap(tiny), eps=eps, convention="root_outside"))
    assert abs(a - 1e-4 / math.sqrt(1e-8 + 1e-6)) < 1e-12  # ≈ 0.0995
    assert abs(b - 1e-4 / (1e-4 + 1e-6)) < 1e-12  # ≈ 0.990
    c = conv.l2_normalise(wrap(tiny), eps=1e-3, convention="clamp")  # ‖x‖ < ε: x/ε
    _close(c, tiny / 1e-3, tol=1e-15)
    _close(conv.l2_normalise(wrap(x), eps=1e-12, convention="clamp"),
           torch.nn.functional.normalize(torch.as_tensor(x), dim=-1).numpy(), tol=1e-15)
    with pytest.raises(ValueError, match="sum_inside, root_outside, mean_inside"):
        conv.l2_normalise(wrap(x), convention="rms")
    with pytest.raises(ValueError, match="eps must be > 0"):
        conv.l2_normalise(wrap(x), eps=0.0)
    with pytest.raises(ValueError, match="x contains NaN"):
        conv.l2_normalise(wrap(x * np.nan))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_beta_and_log_gates(backend):
    wrap = (lambda a: a) if backend == "numpy" else _t
    x = np.array([-1000.0, -30.0, -1.0, 0.0, 0.5, 30.0, 1000.0])
    sig = np.array([0.0, *(1 / (1 + np.exp(-x[1:-1]))), 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        beta = conv.beta_from_logit(wrap(x))
        _close(beta, sig, tol=1e-15)
        _close(conv.beta_from_logit(wrap(x), allow_negative_eigenvalues=True), 2 * sig,
               tol=1e-15)
        a_log = np.array([0.3])
        dt_bias = np.array([-0.2])
        g = conv.mamba_log_gate(wrap(x), A_log=wrap(a_log), dt_bias=wrap(dt_bias))
        softplus = np.array([0.0, *np.log1p(np.exp(x[1:-1] - 0.2)), 1000.0 - 0.2])
        _close(g, -np.exp(0.3) * softplus, tol=1e-12)
        assert bool((g <= 0).all())
        lower = conv.RWKV7_LOWER
        _close(conv.bounded_log_gate(wrap(x), lower=lower), lower * sig, tol=1e-15)
    with pytest.raises(ValueError, match="lower must be < 0"):
        conv.bounded_log_gate(wrap(x), lower=0.5)
    with pytest.raises(ValueError, match="A_log of shape"):
        conv.mamba_log_gate(wrap(x), A_log=wrap(np.zeros(3)), dt_bias=wrap(dt_bias))
    with pytest.raises(TypeError, match="allow_negative_eigenvalues must be a bool"):
        conv.beta_from_logit(wrap(x), allow_negative_eigenvalues=1)


def test_torch_conventions_are_differentiable():
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    a_log = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    dt = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: conv.l2_normalise(t), (x,), fast_mode=True)
    assert torch.autograd.gradcheck(lambda t, a, b: conv.mamba_log_gate(t, A_log=a, dt_bias=b),
                                    (x, a_log, dt), fast_mode=True)
