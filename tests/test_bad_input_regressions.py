"""Issue 13's examples of bad input, each now a clear error naming the argument or a correct
result (regression tests; the fuzz property in test_fuzz_api.py covers the rest)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernel_verify.impls.attention import feature_map_attention, map_features
from kernel_verify.impls.numpy import attention as na
from kernel_verify.impls.numpy.random_features import optimal_gerf_a, softmax_trig
from kernel_verify.impls.registry import get
from kernel_verify.impls.torch import attention as ta
from kernel_verify.impls.torch.convert import to_torch

FAVOR = "softmax_positive[iid]"


@pytest.fixture
def setup():
    rng = np.random.default_rng(0)
    entry = get(FAVOR)
    params = entry.draw(rng, 4, 8, entry.config)
    q, k, v = (rng.standard_normal((2, 5, d)) for d in (4, 4, 3))
    return entry, params, q, k, v


@pytest.mark.parametrize("use_log", [True, False])
def test_integer_v_is_the_same_type_error_on_both_paths(setup, use_log) -> None:
    entry, params, q, k, v = setup
    with pytest.raises(TypeError, match="v must have a floating dtype, got int64"):
        feature_map_attention(entry, params, q, k, (10 * v).astype(np.int64), use_log=use_log)


@pytest.mark.parametrize("use_log", [True, False])
def test_complex_v_is_rejected_not_truncated(setup, use_log) -> None:
    entry, params, q, k, v = setup
    with pytest.raises(TypeError, match="v must have a floating dtype, got complex128"):
        feature_map_attention(entry, params, q, k, v + 1j, use_log=use_log)


@pytest.mark.parametrize("mod", [na, ta], ids=["numpy", "torch"])
@pytest.mark.parametrize("scale", [float("nan"), float("inf"), -float("inf"), 0.0, -1.0, True,
                                   "0.5", 1e308])
def test_softmax_attention_scale(setup, mod, scale) -> None:
    _, _, q, k, v = setup
    if mod is ta:
        q, k, v = map(torch.as_tensor, (q, k, v))
    exc = TypeError if isinstance(scale, bool | str) else ValueError
    with pytest.raises(exc, match="scale"):
        mod.softmax_attention(q, k, v, scale=scale)


def test_softmax_attention_valid_scale_still_works(setup) -> None:
    _, _, q, k, v = setup
    assert np.allclose(na.softmax_attention(q, k, v, scale=0.5),
                       ta.softmax_attention(*map(torch.as_tensor, (q, k, v)), scale=0.5).numpy())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_trig_features_overflow_is_an_error_with_a_remedy_that_works(dtype) -> None:
    entry = get("softmax_trig[iid]")
    params = entry.draw(np.random.default_rng(1), 4, 8, entry.config)
    x = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x = 30 * x / x.norm(dim=-1, keepdim=True)
    if dtype == torch.float64:  # the remedy: float64 holds exp(‖x‖²/2) at ‖x‖ = 30
        out = map_features(entry, x, to_torch(params))
        ref = softmax_trig(x.numpy(), params, entry.config)
        assert torch.isfinite(out).all() and np.allclose(out.numpy(), ref, rtol=1e-12)
        return
    with pytest.raises(ValueError, match="overflow") as info:
        map_features(entry, x.to(dtype), to_torch(params))
    assert "float64" in str(info.value) and "log-space" in str(info.value)


def test_errors_about_k_name_k(setup) -> None:
    entry, params, q, k, v = setup
    k[0, 1, 2] = np.nan
    with pytest.raises(ValueError, match=r"^k contains NaN or Inf"):
        feature_map_attention(entry, params, q, k, v)


@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_mixing_torch_and_numpy(setup, which) -> None:
    entry, params, q, k, v = setup
    args = {"q": q, "k": k, "v": v}
    args[which] = torch.as_tensor(args[which])
    pattern = f"NumPy arrays or all torch tensors.*{which} is torch.Tensor"
    with pytest.raises(TypeError, match=pattern):
        feature_map_attention(entry, params, **args)


def test_torch_params_on_the_numpy_path(setup) -> None:
    entry, params, q, _, _ = setup
    with pytest.raises(TypeError, match=r"params\['W'\] must be a numpy.ndarray"):
        map_features(entry, q, to_torch(params))


def test_mismatched_dtypes(setup) -> None:
    entry, params, q, k, v = setup
    with pytest.raises(TypeError, match="dtypes must match: q=float64, k=float32"):
        feature_map_attention(entry, params, q, k.astype(np.float32), v)


def test_d_zero_is_a_value_error(setup) -> None:
    entry, params, _, _, v = setup
    empty = np.zeros((2, 5, 0))
    with pytest.raises(ValueError, match="q must have a last dimension d >= 1"):
        feature_map_attention(entry, params, empty, empty, v)
    with pytest.raises(ValueError, match="d must be >= 1"):
        optimal_gerf_a(1.0, 0)
    with pytest.raises(ValueError, match="q must have a last dimension >= 1"):
        na.softmax_attention(empty, empty, v)


def test_entry_by_name_gives_the_same_result(setup) -> None:
    entry, params, q, k, v = setup
    np.testing.assert_array_equal(feature_map_attention(FAVOR, params, q, k, v),
                                  feature_map_attention(entry, params, q, k, v))
    np.testing.assert_array_equal(map_features(FAVOR, q, params), map_features(entry, q, params))


@pytest.mark.parametrize(("bad", "exc", "words"), [
    ("softmax_postive[iid]", ValueError, ["no feature map", "softmax_positive[iid]"]),
    (42, TypeError, ["entry", "FeatureMap", "int"]),
])
def test_bad_entry(setup, bad, exc, words) -> None:
    _, params, q, k, v = setup
    with pytest.raises(exc) as info:
        feature_map_attention(bad, params, q, k, v)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize(("config", "exc", "words"), [
    ({}, ValueError, ["missing", "'sigma'", "config=None"]),
    ({"sigma": 1.0, "sigam": 2.0}, ValueError, ["unknown", "'sigam'"]),
    ([("sigma", 1.0)], TypeError, ["config", "mapping"]),
    ({"sigma": float("nan")}, ValueError, ["sigma", "finite"]),
    ({"sigma": 0.0}, ValueError, ["sigma", "> 0"]),
    ({"sigma": True}, TypeError, ["sigma", "bool"]),
])
def test_config(config, exc, words) -> None:
    entry = get("rff_pairs[iid]")
    params = entry.draw(np.random.default_rng(0), 4, 8, entry.config)
    x = np.random.default_rng(1).standard_normal((5, 4))
    with pytest.raises(exc) as info:
        map_features(entry, x, params, config=config)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_direct_map_function_without_a_config_key() -> None:
    entry = get("rff_pairs[iid]")
    params = entry.draw(np.random.default_rng(0), 4, 8, entry.config)
    with pytest.raises(ValueError, match="config is missing key 'sigma'"):
        entry.numpy_fn(np.ones((2, 4)), params, {})


def test_positive_feature_underflow_is_diagnosed_as_underflow(setup) -> None:
    """‖q‖ = ‖k‖ = 1e3 on the plain path: the message says underflow and points to the
    log-space path, which then returns a finite convex combination of the values."""
    entry, params, q, _, v = setup
    big = 1e3 * q / np.linalg.norm(q, axis=-1, keepdims=True)
    with pytest.raises(ValueError) as info:
        feature_map_attention(entry, params, big, big, v, use_log=False)
    message = str(info.value)
    assert "underflow" in message and "use_log=True" in message
    assert "not positive" not in message
    out = feature_map_attention(entry, params, big, big, v, use_log=True)
    assert np.isfinite(out).all()
    assert (out >= v.min(axis=-2, keepdims=True) - 1e-12).all()
    assert (out <= v.max(axis=-2, keepdims=True) + 1e-12).all()


def test_devices_must_match() -> None:
    """A tensor on another device is named before any value is read (``meta`` stands in for a
    GPU on a CPU-only machine)."""
    q = torch.randn(1, 3, 4)
    k = torch.empty(1, 3, 4, device="meta")
    with pytest.raises(ValueError, match="one device: q on cpu, k on meta"):
        ta.softmax_attention(q, k, q.clone())


@pytest.mark.parametrize("flag", ["causal", "use_log"])
def test_flags_must_be_bools(setup, flag) -> None:
    entry, params, q, k, v = setup
    with pytest.raises(TypeError, match=f"{flag} must be a bool"):
        feature_map_attention(entry, params, q, k, v, **{flag: 1})


@pytest.mark.parametrize("use_log", [True, False])
def test_zero_denominator_is_checked_on_both_paths(setup, use_log) -> None:
    entry, params, q, k, v = setup
    with pytest.raises(ValueError, match="zero_denominator must be one of"):
        feature_map_attention(entry, params, q, k, v, use_log=use_log, zero_denominator="zeros")


# --- Issue 30: sequences, masks, per-sequence states, the −Inf state's gradient ----------------
from kernel_verify.impls.numpy import forms as nf  # noqa: E402
from kernel_verify.impls.torch import forms as tf  # noqa: E402
from kernel_verify.properties.builtin_forms import registry_forms  # noqa: E402

FORMS = {name: registry_forms(get(name), 8) for name in (FAVOR, "taylor2_compressed")}


def _qkv(backend: str, b: int = 1, t: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    arrays = tuple(rng.standard_normal((b, 2, t, d)) for d in (3, 3, 2))
    return tuple(map(torch.as_tensor, arrays)) if backend == "torch" else arrays


def _index(a, backend: str):
    return torch.as_tensor(np.asarray(a)) if backend == "torch" else np.asarray(a)


#: The issue's silent wrong results of the built-in ``varlen``, each now an error naming
#: ``cu_seqlens`` (or the input / initial state) and the rule.
VARLEN_BAD = [
    ("negative", [0, -1, 6], ValueError, "cu_seqlens must be non-decreasing"),
    ("non-monotone", [0, 4, 2, 6], ValueError, "cu_seqlens must be non-decreasing"),
    ("not starting at 0", [1, 3, 6], ValueError, "cu_seqlens must start at 0"),
    ("not ending at T", [0, 3, 5], ValueError, "cu_seqlens must end at T = 6"),
    ("float 2.5", np.array([0, 2.5, 6]), TypeError, "cu_seqlens must have an integer dtype"),
    ("bool", np.array([False, True]), TypeError, "cu_seqlens must have an integer dtype"),
    ("one boundary", [0], ValueError, "cu_seqlens must hold at least 2 boundaries"),
    ("2-D", [[0, 3, 6]], ValueError, "cu_seqlens must be 1-D"),
]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize(("label", "cu", "exc", "message"), VARLEN_BAD,
                         ids=[c[0] for c in VARLEN_BAD])
def test_varlen_rejects_bad_cu_seqlens(backend, label, cu, exc, message) -> None:
    q, k, v = _qkv(backend)
    with pytest.raises(exc, match=message):
        FORMS[FAVOR]["varlen"](q, k, v, cu_seqlens=_index(cu, backend))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_varlen_rejects_a_batch_of_two_and_extra_initial_states(backend) -> None:
    form = FORMS[FAVOR]
    q, k, v = _qkv(backend, b=2)
    with pytest.raises(ValueError, match="with cu_seqlens, q must have batch size 1"):
        form["varlen"](q, k, v, cu_seqlens=_index([0, 3, 6], backend))
    three = form["stateful"](*_qkv(backend, b=3))[1]
    with pytest.raises(ValueError, match=r"initial_state must hold one state per sequence: 2 "
                                         r"sequences in cu_seqlens, but initial_state\[0\] has 3"):
        form["varlen"](*_qkv(backend), cu_seqlens=_index([0, 3, 6], backend),
                       initial_state=three)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("name", sorted(FORMS))
def test_an_empty_packed_sequence_keeps_its_initial_state(backend, name) -> None:
    """Empty sequences are allowed (documented in impls/sequence_validation.py): no rows, and the
    final state is the initial state, bit for bit; the other sequences equal separate runs."""
    form = FORMS[name]
    init = form["stateful"](*_qkv(backend, b=3, t=2, seed=5))[1]
    q, k, v = _qkv(backend)
    out, states = form["varlen"](q, k, v, cu_seqlens=_index([0, 2, 2, 6], backend),
                                 initial_state=init)
    assert tuple(out.shape) == tuple(v.shape)
    for got, want in zip(states, init, strict=True):
        np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
    for i, (a, b) in ((0, (0, 2)), (2, (2, 6))):
        ref, s_ref = form["stateful"](q[:, :, a:b], k[:, :, a:b], v[:, :, a:b],
                                      initial_state=tuple(s[i:i + 1] for s in init))
        np.testing.assert_array_equal(np.asarray(out[:, :, a:b]), np.asarray(ref))
        for got, want in zip(states, s_ref, strict=True):
            np.testing.assert_array_equal(np.asarray(got[i:i + 1]), np.asarray(want))


MASK_BAD = [
    ("B-1 rows", np.ones((1, 6), bool), ValueError, r"mask must have shape \(B, T\) = \(2, 6\)"),
    ("T+1 columns", np.ones((2, 7), bool), ValueError, r"mask must have shape \(B, T\)"),
    ("float 0.2", np.full((2, 6), 0.2), TypeError, "mask must be a bool array"),
    ("integer 2", np.full((2, 6), 2), ValueError, "mask must hold only 0 and 1"),
]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize(("label", "mask", "exc", "message"), MASK_BAD,
                         ids=[c[0] for c in MASK_BAD])
def test_padded_rejects_bad_masks(backend, label, mask, exc, message) -> None:
    with pytest.raises(exc, match=message):
        FORMS[FAVOR]["padded"](*_qkv(backend, b=2), mask=_index(mask, backend))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("name", sorted(FORMS))
def test_a_row_with_no_valid_position_keeps_its_initial_state(backend, name) -> None:
    """Defined and documented: its outputs are 0 and its final state is its initial state (the
    empty state when none is given); a 0/1 integer mask means the same as the bool mask."""
    form = FORMS[name]
    q, k, v = _qkv(backend, b=2)
    mask = np.array([[1, 1, 1, 0, 0, 0], [0] * 6])
    init = form["stateful"](*_qkv(backend, b=2, t=2, seed=3))[1]
    out, state = form["padded"](q, k, v, mask=_index(mask, backend), initial_state=init)
    assert not np.any(np.asarray(out[1]))
    for got, want in zip(state, init, strict=True):
        np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
    out_b, _ = form["padded"](q, k, v, mask=_index(mask.astype(bool), backend),
                              initial_state=init)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(out_b))
    empty = form["padded"](q, k, v, mask=_index(mask, backend))[1]
    ref = form["stateful"](q[1:2, :, :0], k[1:2, :, :0], v[1:2, :, :0])[1]
    for got, want in zip(empty, ref, strict=True):
        np.testing.assert_array_equal(np.asarray(got[1:2]), np.asarray(want))


FORM_FNS = [(mod, fn) for mod in (nf, tf) for fn in
            ("linear_attention_chunked", "linear_attention_parallel",
             "log_linear_attention_chunked", "log_linear_attention_parallel")]


@pytest.mark.parametrize(("mod", "fn"), FORM_FNS,
                         ids=[f"{m.__name__.split('.')[-2]}.{f}" for m, f in FORM_FNS])
def test_forms_refuse_an_empty_batch(mod, fn) -> None:
    shape = (0, 2, 5, 4)
    arrays = [np.ones(shape), np.ones(shape), np.ones((0, 2, 5, 2))]
    if mod is tf:
        arrays = [torch.as_tensor(a) for a in arrays]
    with pytest.raises(ValueError, match="phi_q has a batch \\(leading\\) axis of size 0"):
        getattr(mod, fn)(*arrays)


@pytest.mark.parametrize("fn", ["linear_attention_chunked", "log_linear_attention_parallel"])
def test_forms_refuse_meta_tensors(fn) -> None:
    x = torch.ones(1, 2, 5, 4, device="meta")
    with pytest.raises(ValueError, match="phi_q is a tensor on the 'meta' device"):
        getattr(tf, fn)(x, x, x)
    with pytest.raises(ValueError, match="q is a tensor on the 'meta' device"):
        FORMS[FAVOR]["stateful"](x[..., :3], x[..., :3], x[..., :2])


@pytest.mark.parametrize(("mod", "fn"), FORM_FNS,
                         ids=[f"{m.__name__.split('.')[-2]}.{f}" for m, f in FORM_FNS])
def test_forms_take_cu_seqlens(mod, fn) -> None:
    """The forms' own ``cu_seqlens``: each packed sequence equals its separate run (bitwise:
    the same computation), final states stacked along the batch; bad boundaries are named."""
    rng = np.random.default_rng(2)
    log = fn.startswith("log")
    a, b = (rng.standard_normal((1, 2, 7, 4)) for _ in range(2))
    a, b = (x if log else np.exp(x) for x in (a, b))
    v = rng.standard_normal((1, 2, 7, 3))
    arrays = [a, b, v] if mod is nf else [torch.as_tensor(x) for x in (a, b, v)]
    cu = np.array([0, 3, 3, 7])
    out, state = getattr(mod, fn)(*arrays, cu_seqlens=_index(cu, "torch" if mod is tf else ""))
    for s in state:
        assert s.shape[0] == 3
    for i in range(3):
        lo, hi = cu[i], cu[i + 1]
        ref, s_ref = getattr(mod, fn)(*(x[..., lo:hi, :] for x in arrays))
        np.testing.assert_array_equal(np.asarray(out[..., lo:hi, :]), np.asarray(ref))
        for got, want in zip(state, s_ref, strict=True):
            np.testing.assert_array_equal(np.asarray(got[i:i + 1]), np.asarray(want))
    with pytest.raises(ValueError, match="cu_seqlens must end at T = 7"):
        getattr(mod, fn)(*arrays, cu_seqlens=np.array([0, 3, 6]))


def _log_step_run(lq, lk, v, state):
    outs = []
    for t in range(lq.shape[-2]):
        state, o = tf.log_linear_attention_step(state, lq[..., t, :], lk[..., t, :], v[..., t, :])
        outs.append(o)
    return torch.stack(outs, dim=-2), state


@pytest.mark.parametrize("empty", ["one feature", "every feature"])
@pytest.mark.parametrize("t", [1, 4, 5])
@pytest.mark.parametrize("form", ["chunked", "parallel"])
def test_log_forms_gradient_at_an_empty_feature_is_that_of_the_step(form, t, empty) -> None:
    """An initial log-space state with ``L_f = −∞`` (an empty feature): the gradient of the
    chunked and parallel forms with respect to every input — q, k, v and the state — equals the
    recurrent step's, and it is exactly 0 at the empty entries (the limit ``w_f g → 0``,
    derived in the docstring of impls/torch/forms.py). Before the fix the chunked and parallel
    forms returned NaN there."""
    gen = torch.Generator().manual_seed(t)
    m, dv = 3, 2

    def leaves():
        lq, lk = (torch.randn(2, 1, t, m, dtype=torch.float64, generator=gen) for _ in "qk")
        v = torch.randn(2, 1, t, dv, dtype=torch.float64, generator=gen)
        big_l = torch.randn(2, 1, m, dtype=torch.float64, generator=gen)
        vb = torch.randn(2, 1, m, dv, dtype=torch.float64, generator=gen)
        hole = torch.zeros(m, dtype=torch.bool)
        hole[1] = True
        if empty == "every feature":
            hole[:] = True
        big_l[..., hole] = -float("inf")
        vb[..., hole, :] = 0.0
        return [x.requires_grad_(True) for x in (lq, lk, v, big_l, vb)], hole

    (lq, lk, v, big_l, vb), hole = leaves()
    cot = torch.randn(2, 1, t, dv, dtype=torch.float64, generator=gen)
    cot_s = torch.randn(2, 1, m, dv, dtype=torch.float64, generator=gen)
    fn = (tf.log_linear_attention_parallel if form == "parallel" else
          lambda *a, **kw: tf.log_linear_attention_chunked(*a, chunk_size=2, **kw))
    grads = {}
    for name, run in (("form", lambda a, b, c, s: fn(a, b, c, initial_state=s)),
                      ("step", _log_step_run)):
        xs = [x.detach().clone().requires_grad_(True) for x in (lq, lk, v, big_l, vb)]
        out, (_, vb_final) = run(*xs[:3], tuple(xs[3:]))
        loss = (out * cot).sum() + (vb_final * cot_s).sum()
        grads[name] = torch.autograd.grad(loss, xs)
    for label, g_form, g_step in zip(("q", "k", "v", "L", "V̄"), grads["form"], grads["step"],
                                     strict=True):
        assert torch.isfinite(g_form).all(), f"{label}: non-finite gradient {g_form}"
        # float64, T ≤ 5, m = 3: both routes round O(T·m) operations
        torch.testing.assert_close(g_form, g_step, rtol=1e-10, atol=1e-12, msg=label)
    assert (grads["form"][3][..., hole] == 0).all()


@pytest.mark.parametrize(("label", "cu", "exc", "message"), VARLEN_BAD[:6],
                         ids=[c[0] for c in VARLEN_BAD[:6]])
def test_fla_varlen_checks_cu_seqlens_before_the_kernel(label, cu, exc, message) -> None:
    """fla's kernels read ``cu_seqlens`` unchecked; the adapter refuses a bad one by name before
    any kernel runs (no Triton needed here)."""
    from kernel_verify.adapters import fla

    target = next(t for t in fla.attention_targets if t.varlen is not None)
    q, k, v = (torch.randn(1, 6, 2, 3) for _ in "qkv")
    with pytest.raises(exc, match=message):
        target.varlen(q, k, v, cu_seqlens=torch.as_tensor(np.asarray(cu)))
    with pytest.raises(ValueError, match="with cu_seqlens, q must have batch size 1"):
        target.varlen(*(torch.cat([x, x]) for x in (q, k, v)),
                      cu_seqlens=torch.tensor([0, 3, 6]))
