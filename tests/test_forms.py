"""Unit tests of the forms of causal linear attention with explicit state
(``impls/{numpy,torch}/forms.py``, docs/math.md §13): every form against the masked quadratic
form of ``linear_attention(causal=True)``, the log-space forms against the plain ones, the exact
merge, the final state against its direct sum, half precision, bad input.

Tolerances: float64 inputs of unit scale, positive features; every compared value is a ratio of
sums of at most ``T + m`` positive terms (or a state sum of ``T`` terms), so the two evaluations
differ by at most ``2·(2γ_(T+m+2))·max|v|`` (verify/attention_bounds.py) — below ``1e-12`` for
the sizes here. The log-space evaluation adds ``(e^(4δ) − 1)·max|v|`` with
``δ = γ_(T+m+6)(Z + 1)`` and ``Z ≤ 20`` here (properties/attention_cases.py): also below 1e-12.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernel_verify.impls.numpy import attention as np_att
from kernel_verify.impls.numpy import forms as npf
from kernel_verify.impls.torch import forms as tf

TOL = 1e-12
SHAPES = [(1, 1), (2, 3), (5, 2), (7, 7), (8, 3), (9, 4), (13, 1), (13, 13), (13, 5)]


def _inputs(t: int, seed: int = 0, m: int = 5, dv: int = 3, lead=(2, 3)):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((*lead, t, m)), rng.standard_normal((*lead, t, m)),
            rng.standard_normal((*lead, t, dv)))


def _torch(*xs, dtype=torch.float64):
    return [torch.tensor(x, dtype=dtype) for x in xs]


@pytest.mark.parametrize(("t", "chunk"), SHAPES)
def test_every_form_equals_the_masked_quadratic_form(t, chunk) -> None:
    lq, lk, v = _inputs(t, seed=t * 31 + chunk)
    fq, fk = np.exp(lq), np.exp(lk)
    ref = np_att.linear_attention(fq, fk, v, causal=True)
    s_ref, z_ref = np.swapaxes(fk, -1, -2) @ v, fk.sum(axis=-2)
    outs = {
        "numpy chunked": npf.linear_attention_chunked(fq, fk, v, chunk_size=chunk),
        "numpy parallel": npf.linear_attention_parallel(fq, fk, v),
        "numpy log chunked": npf.log_linear_attention_chunked(lq, lk, v, chunk_size=chunk),
        "numpy log parallel": npf.log_linear_attention_parallel(lq, lk, v),
        "torch chunked": tf.linear_attention_chunked(*_torch(fq, fk, v), chunk_size=chunk),
        "torch parallel": tf.linear_attention_parallel(*_torch(fq, fk, v)),
        "torch log chunked": tf.log_linear_attention_chunked(*_torch(lq, lk, v),
                                                              chunk_size=chunk),
        "torch log parallel": tf.log_linear_attention_parallel(*_torch(lq, lk, v)),
    }
    for name, (out, state) in outs.items():
        out = np.asarray(out)
        assert np.abs(out - ref).max() <= TOL, name
        state = tuple(np.asarray(s) for s in state)
        s, z = (npf.log_state_sums(state) if "log" in name else state)
        assert np.abs(s - s_ref).max() <= TOL * np.abs(s_ref).max(), name
        assert np.abs(z - z_ref).max() <= TOL * np.abs(z_ref).max(), name


@pytest.mark.parametrize("t", [1, 4, 9])
def test_steps_split_and_chunks_agree(t) -> None:
    """One token at a time, and a prefix continued from its state, equal the chunked form."""
    lq, lk, v = _inputs(t, seed=t)
    fq, fk = np.exp(lq), np.exp(lk)
    ref, (s_ref, z_ref) = npf.linear_attention_chunked(fq, fk, v, chunk_size=2)
    lref, lstate = npf.log_linear_attention_chunked(lq, lk, v, chunk_size=3)
    st = lst = tst = None
    for i in range(t):
        st, o = npf.linear_attention_step(st, fq[..., i, :], fk[..., i, :], v[..., i, :])
        lst, lo = npf.log_linear_attention_step(lst, lq[..., i, :], lk[..., i, :], v[..., i, :])
        tst, to = tf.log_linear_attention_step(tst, *_torch(lq[..., i, :], lk[..., i, :],
                                                            v[..., i, :]))
        for got in (o, lo, to.numpy()):
            assert np.abs(got - ref[..., i, :]).max() <= TOL
    assert np.abs(st[0] - s_ref).max() <= TOL * np.abs(s_ref).max()
    assert np.abs(st[1] - z_ref).max() <= TOL * np.abs(z_ref).max()
    assert np.abs(lst[1] - lstate[1]).max() <= TOL
    for cut in range(t + 1):
        a, sa = npf.log_linear_attention_chunked(lq[..., :cut, :], lk[..., :cut, :],
                                                 v[..., :cut, :], chunk_size=2)
        b, sb = npf.log_linear_attention_chunked(lq[..., cut:, :], lk[..., cut:, :],
                                                 v[..., cut:, :], chunk_size=4, initial_state=sa)
        assert np.abs(np.concatenate([a, b], axis=-2) - lref).max() <= TOL
        assert np.abs(sb[1] - lstate[1]).max() <= TOL
        ta, tsa = tf.linear_attention_chunked(*_torch(fq[..., :cut, :], fk[..., :cut, :],
                                                      v[..., :cut, :]), chunk_size=3)
        tb, tsb = tf.linear_attention_chunked(*_torch(fq[..., cut:, :], fk[..., cut:, :],
                                                      v[..., cut:, :]), chunk_size=2,
                                              initial_state=tsa)
        assert np.abs(torch.cat([ta, tb], -2).numpy() - ref).max() <= TOL
        assert np.abs(tsb[0].numpy() - s_ref).max() <= TOL * np.abs(s_ref).max()


def test_log_merge_is_exact_and_associative() -> None:
    lq, lk, v = _inputs(9, seed=5)
    parts = [(0, 2), (2, 7), (7, 9)]
    states = [npf.log_linear_attention_parallel(lq[..., a:b, :], lk[..., a:b, :],
                                                v[..., a:b, :])[1] for a, b in parts]
    whole = npf.log_linear_attention_parallel(lq, lk, v)[1]
    left = npf.merge_log_states(npf.merge_log_states(states[0], states[1]), states[2])
    right = npf.merge_log_states(states[0], npf.merge_log_states(states[1], states[2]))
    for got in (left, right):
        assert np.abs(got[0] - whole[0]).max() <= TOL
        assert np.abs(got[1] - whole[1]).max() <= TOL
    empty = npf.empty_state((2, 3), 5, 3, log=True)
    same = npf.merge_log_states(empty, whole)
    assert np.array_equal(same[0], whole[0]) and np.abs(same[1] - whole[1]).max() == 0
    both_empty = npf.merge_log_states(empty, empty)
    assert np.isneginf(both_empty[0]).all() and not np.isnan(both_empty[1]).any()


def test_log_path_has_no_leak_across_chunks_at_extreme_scales() -> None:
    """Keys of later chunks 2000 larger in log space than earlier ones: outputs of the earlier
    rows equal those of the prefix alone (no shift over the sequence)."""
    lq, lk, v = _inputs(12, seed=2)
    lk[..., 6:, :] += 2000.0
    lq[..., 6:, :] -= 1500.0
    for backend in ("numpy", "torch"):
        if backend == "numpy":
            full, _ = npf.log_linear_attention_chunked(lq, lk, v, chunk_size=4)
            pre, _ = npf.log_linear_attention_chunked(lq[..., :6, :], lk[..., :6, :],
                                                      v[..., :6, :], chunk_size=4)
        else:
            full, _ = tf.log_linear_attention_chunked(*_torch(lq, lk, v), chunk_size=4)
            pre, _ = tf.log_linear_attention_chunked(*_torch(lq[..., :6, :], lk[..., :6, :],
                                                             v[..., :6, :]), chunk_size=4)
            full, pre = full.numpy(), pre.numpy()
        assert np.isfinite(full).all(), backend
        assert np.abs(full[..., :6, :] - pre).max() <= TOL, backend


def test_log_path_gradients_are_finite_where_outputs_are() -> None:
    """Log-features 300× spread (pair products underflow to 0 in float64, and a chunk's past
    weight p underflows): the entries recomputed by the exact log-sum-exp must not leak 0·inf =
    NaN into the backward (log 0 and 1/p of the overwritten entries)."""
    lq, lk, v = _inputs(12, seed=3)
    q, k, vt = (torch.tensor(a).requires_grad_(True) for a in (300.0 * lq, 300.0 * lk, v))
    out, (_, vbar) = tf.log_linear_attention_chunked(q, k, vt, chunk_size=4)
    assert torch.isfinite(out).all()
    grads = torch.autograd.grad(out.sum() + vbar.sum(), (q, k, vt))
    assert all(bool(torch.isfinite(g).all()) for g in grads)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_half_precision_is_computed_in_float32(dtype) -> None:
    lq, lk, v = _inputs(6, seed=3)
    out, state = tf.log_linear_attention_chunked(*_torch(lq, lk, v, dtype=dtype), chunk_size=4)
    assert out.dtype == dtype and all(s.dtype == torch.float32 for s in state)
    st, o = tf.linear_attention_step(None, *_torch(np.exp(lq[..., 0, :]), np.exp(lk[..., 0, :]),
                                                   v[..., 0, :], dtype=dtype))
    assert o.dtype == dtype and st[0].dtype == torch.float32
    ref, _ = npf.log_linear_attention_chunked(lq, lk, v)
    # float32 compute, one rounding to the output dtype: far inside 2^-6 at unit scale
    assert np.abs(out.double().numpy() - ref).max() < 2.0**-6


def test_empty_sequence_returns_the_initial_state() -> None:
    lq, lk, v = _inputs(3, seed=4)
    _, state = npf.log_linear_attention_parallel(lq, lk, v)
    out, same = npf.log_linear_attention_chunked(lq[..., :0, :], lk[..., :0, :], v[..., :0, :],
                                                 initial_state=state)
    assert out.shape == (2, 3, 0, 3) and np.array_equal(same[1], state[1])
    out, empty = tf.linear_attention_chunked(*_torch(lq[..., :0, :], lk[..., :0, :],
                                                     v[..., :0, :]))
    assert out.shape == (2, 3, 0, 3) and not empty[0].any()


BAD = [
    ({"chunk_size": 0}, ValueError, "chunk_size"),
    ({"chunk_size": True}, TypeError, "chunk_size"),
    ({"chunk_size": 2.0}, TypeError, "chunk_size"),
    ({"initial_state": (np.zeros((2, 3, 5, 3)),)}, TypeError, "initial_state"),
    ({"initial_state": (np.zeros((2, 3, 4, 3)), np.zeros((2, 3, 4)))}, ValueError,
     "initial_state[0]"),
    ({"initial_state": (np.zeros((2, 3, 5, 3)), np.full((2, 3, 5), np.nan))}, ValueError,
     "initial_state[1]"),
    ({"initial_state": (torch.zeros(2, 3, 5, 3), torch.zeros(2, 3, 5))}, TypeError,
     "initial_state[0]"),
    ({"initial_state": (np.zeros((2, 3, 5, 3), np.int64), np.zeros((2, 3, 5)))}, TypeError,
     "floating"),
]


@pytest.mark.parametrize(("kw", "exc", "word"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_is_a_named_error(kw, exc, word) -> None:
    lq, lk, v = _inputs(4)
    with pytest.raises(exc) as info:
        npf.linear_attention_chunked(np.exp(lq), np.exp(lk), v, **kw)
    assert word in str(info.value)


def test_bad_step_and_log_state() -> None:
    lq, lk, v = _inputs(2)
    with pytest.raises(ValueError, match="phi_q_t and phi_k_t must have the same shape"):
        npf.linear_attention_step(None, np.ones((2, 3, 5)), np.ones((2, 3, 4)), v[..., 0, :])
    with pytest.raises(ValueError, match="v_t must have the leading shape"):
        npf.linear_attention_step(None, np.ones((2, 3, 5)), np.ones((2, 3, 5)), np.ones((2, 3)))
    bad = (np.full((2, 3, 5), np.inf), np.zeros((2, 3, 5, 3)))
    with pytest.raises(ValueError, match=r"state\[0\] contains NaN or \+Inf"):
        npf.log_linear_attention_step(bad, lq[..., 0, :], lk[..., 0, :], v[..., 0, :])
    ok = (np.full((2, 3, 5), -np.inf), np.zeros((2, 3, 5, 3)))  # −∞: the empty state
    npf.log_linear_attention_step(ok, lq[..., 0, :], lk[..., 0, :], v[..., 0, :])
    with pytest.raises(ValueError, match="causal attention needs as many queries as keys"):
        tf.log_linear_attention_chunked(*_torch(lq, lk[..., :1, :], v[..., :1, :]))


# ------------------------------------------------------------------ the truth and its bounds
@pytest.mark.parametrize(("t", "chunk"), [(1, 1), (5, 2), (6, 6), (7, 3)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_forms_meet_the_exact_recurrence_within_the_derived_bounds(t, chunk, dtype) -> None:
    """verify/references/forms.py (mpmath) against every torch form, split at every point,
    within verify/forms_bounds.py for the dtype's unit roundoff."""
    from kernel_verify.verify.forms_bounds import (
        log_forms_delta,
        log_forms_error_bound,
        plain_forms_error_bound,
        plain_state_error_bound,
    )
    from kernel_verify.verify.references.forms import causal_recurrence_mp, log_state_of
    from kernel_verify.verify.tolerance import unit_roundoff

    lq, lk, v = _inputs(t, seed=7 * t + chunk, m=3, dv=2, lead=(1, 2))
    lq, lk, v = (torch.tensor(x, dtype=dtype).double().numpy() for x in (lq, lk, v))
    fq, fk = np.exp(lq), np.exp(lk)
    u = unit_roundoff(str(dtype).removeprefix("torch."))
    ref, (s_ref, z_ref) = causal_recurrence_mp(fq, fk, v)
    # features as the form sees them: exp(lq) rounded to the dtype (exact in float64 here)
    fq_d, fk_d = (torch.tensor(x, dtype=dtype) for x in (fq, fk))
    ref_d, (s_d, z_d) = causal_recurrence_mp(fq_d.double().numpy(), fk_d.double().numpy(), v)
    bound = plain_forms_error_bound(fq_d.double().numpy(), fk_d.double().numpy(), v, u=u)
    sb, zb = plain_state_error_bound(fk_d.double().numpy(), v, u=u)
    out, (s, z) = tf.linear_attention_chunked(fq_d, fk_d, torch.tensor(v, dtype=dtype),
                                              chunk_size=chunk)
    assert (np.abs(out.double().numpy() - ref_d) <= bound).all()
    assert (np.abs(s.double().numpy() - s_d) <= sb).all()
    assert (np.abs(z.double().numpy() - z_d) <= zb).all()
    lbound = log_forms_error_bound(lq, lk, v, u=u)
    l_ref, vb_ref = log_state_of((s_ref, z_ref))
    for cut in range(t + 1):
        a, st = tf.log_linear_attention_chunked(*_torch(lq[..., :cut, :], lk[..., :cut, :],
                                                        v[..., :cut, :], dtype=dtype),
                                                chunk_size=chunk)
        b, (ln, vb) = tf.log_linear_attention_chunked(
            *_torch(lq[..., cut:, :], lk[..., cut:, :], v[..., cut:, :], dtype=dtype),
            chunk_size=chunk, initial_state=st)
        got = torch.cat([a, b], dim=-2).double().numpy()
        assert np.abs(got - ref).max() <= lbound, (cut, np.abs(got - ref).max(), lbound)
        assert np.abs(vb.double().numpy() - vb_ref).max() <= lbound
        # L within δ; + the float64 rounding of the reference's exp (2 ulp relative in z)
        delta = log_forms_delta(lq, lk, u=u) + 4 * 2.0**-53
        assert np.abs(ln.double().numpy() - l_ref).max() <= delta
