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
