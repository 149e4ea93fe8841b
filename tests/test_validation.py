"""Bad input gets a clear error naming the argument, on every backend and entry point."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernel_verify.impls.attention import feature_map_attention, map_features
from kernel_verify.impls.numpy import attention as np_att
from kernel_verify.impls.random_matrices import MATRICES, draw_matrix
from kernel_verify.impls.registry import all_maps, get
from kernel_verify.impls.torch import attention as torch_att
from kernel_verify.impls.torch.convert import to_torch

ALL_MAPS = [m.name for m in all_maps()]
#: Maps whose parameter draw fixes the input dimension d (a frequency matrix W of shape (m, d) or
#: mixture means of dimension d). The others (Taylor, elu+1, learned maps resolved per d, …)
#: accept any d, so there is no "wrong" dimension to reject.
DIMENSION_FIXED = [m.name for m in all_maps() if m.matrix is not None] + ["gmm_prf", "gmm_rks"]


def _inputs(entry, backend, n=4, d=4, m=8):
    rng = np.random.default_rng(0)
    m = max(m, entry.min_m)
    params = entry.draw(rng, d, m, entry.config)
    x = rng.standard_normal((n, d))
    pos = np.arange(n) if entry.has("positional") else None
    if backend == "torch":
        return torch.tensor(x), to_torch(params), pos
    return x, params, pos


def _rejects(name: str, backend: str, spoil, error: type[Exception], pattern: str) -> None:
    """Map ``name`` on ``backend`` given its inputs with ``x`` replaced by ``spoil(x)`` raises
    ``error`` whose message matches ``pattern``."""
    entry = get(name)
    x, params, pos = _inputs(entry, backend)
    bad_x = spoil(x)
    with pytest.raises(error, match=pattern):
        map_features(entry, bad_x, params, positions=pos)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("name", ALL_MAPS)
@pytest.mark.parametrize("bad", ["nan", "inf"])
def test_non_finite_input_is_rejected(name, backend, bad):
    def one_non_finite(x):
        x[1, 2] = float(bad)
        return x

    _rejects(name, backend, one_non_finite, ValueError, r"\bx\b.*(NaN|Inf)")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("name", DIMENSION_FIXED)
def test_wrong_input_dimension_is_rejected(name, backend):
    _rejects(name, backend, lambda x: x[:, :3], ValueError, r"\bx\b.*(dimension|shape)")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("name", ALL_MAPS)
def test_integer_input_is_rejected(name, backend):
    _rejects(name, backend,
             lambda x: x.to(torch.int64) if backend == "torch" else x.astype(np.int64),
             TypeError, r"\bx\b.*floating")


@pytest.mark.parametrize("kind", sorted(MATRICES))
def test_matrix_rejects_bad_sizes_and_rng(kind):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="m must be >= 1"):
        draw_matrix(kind, rng, 0, 4)
    with pytest.raises(ValueError, match="d must be >= 1"):
        draw_matrix(kind, rng, 4, 0)
    with pytest.raises(TypeError, match="m must be an integer"):
        draw_matrix(kind, rng, 2.5, 4)
    with pytest.raises(TypeError, match=r"rng must be a numpy\.random\.Generator"):
        draw_matrix(kind, 0, 4, 4)


def test_unknown_matrix_kind():
    with pytest.raises(ValueError, match="matrix kind must be one of"):
        draw_matrix("hadamard", np.random.default_rng(0), 4, 4)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("sigma", [0.0, -1.0, float("nan"), float("inf")])
@pytest.mark.parametrize("name", ["rff_pairs[iid]", "rff_phase[iid]"])
def test_rff_rejects_bad_sigma(name, backend, sigma):
    entry = get(name).with_config(sigma=sigma)
    x, params, _ = _inputs(entry, backend)
    with pytest.raises(ValueError, match="sigma must be"):
        map_features(entry, x, params)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("a", [0.25, 0.3, float("nan")])
def test_gerf_rejects_a_outside_its_domain(backend, a):
    entry = get("gerf[iid]").with_config(A=a)
    x, params, _ = _inputs(entry, backend)
    with pytest.raises(ValueError, match="A must be"):
        map_features(entry, x, params)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_missing_or_malformed_parameters(backend):
    entry = get("softmax_positive[iid]")
    x, params, _ = _inputs(entry, backend)
    with pytest.raises(ValueError, match="missing parameter 'W'"):
        map_features(entry, x, {})
    bad = {"W": params["W"][0]}
    with pytest.raises(ValueError, match=r"params\['W'\] must have shape"):
        map_features(entry, x, bad)
    nan_w = {"W": params["W"] * np.nan}
    with pytest.raises(ValueError, match=r"params\['W'\] contains NaN"):
        map_features(entry, x, nan_w)


ATTENTION = [
    ("numpy", np_att, np.asarray),
    ("torch", torch_att, lambda a: torch.tensor(np.asarray(a))),
]


@pytest.mark.parametrize(("backend", "att", "arr"), ATTENTION)
@pytest.mark.parametrize("fn", ["softmax_attention", "linear_attention", "log_linear_attention"])
def test_attention_rejects_bad_input(backend, att, arr, fn):
    f = getattr(att, fn)
    good = np.ones((2, 5, 3))
    v = np.ones((2, 5, 4))
    nan = good.copy()
    nan[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="contains NaN or Inf"):
        f(arr(nan), arr(good), arr(v))
    with pytest.raises(ValueError, match="same last dimension"):
        f(arr(good), arr(np.ones((2, 5, 2))), arr(v))
    with pytest.raises(ValueError, match="same number of rows"):
        f(arr(good), arr(good), arr(np.ones((2, 4, 4))))
    with pytest.raises(ValueError, match="leading"):
        f(arr(good), arr(good), arr(np.ones((3, 5, 4))))
    with pytest.raises(ValueError, match="causal attention needs as many queries as keys"):
        f(arr(np.ones((2, 4, 3))), arr(good), arr(v), causal=True)
    with pytest.raises(TypeError, match="dtypes must match"):
        f(arr(good.astype(np.float32)), arr(good), arr(v))
    with pytest.raises(TypeError, match="floating dtype"):
        f(arr(good.astype(np.int64)), arr(good.astype(np.int64)), arr(v.astype(np.int64)))
    with pytest.raises(TypeError, match="causal must be a bool"):
        f(arr(good), arr(good), arr(v), causal="yes")
    if fn != "softmax_attention":
        with pytest.raises(ValueError, match="chunk_size must be >= 1"):
            f(arr(good), arr(good), arr(v), chunk_size=0)


def test_wrong_backend_type_is_named():
    entry = get("softmax_positive[iid]")
    x, params, _ = _inputs(entry, "numpy")
    with pytest.raises(TypeError, match=r"x must be a torch\.Tensor"):
        entry.torch_fn(x, to_torch(params), entry.config)
    with pytest.raises(TypeError, match=r"x must be a numpy\.ndarray"):
        entry.numpy_fn(torch.tensor(x), params, entry.config)


def test_zero_denominator_policy_is_validated():
    with pytest.raises(ValueError, match="zero_denominator must be one of"):
        np_att.linear_attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 1)),
                                zero_denominator="ignore")


def test_feature_map_attention_rejects_nan_queries():
    entry = get("softmax_positive[iid]")
    params = entry.draw(np.random.default_rng(0), 3, 4, entry.config)
    q = np.ones((4, 3))
    q[2, 1] = np.inf
    with pytest.raises(ValueError, match=r"\bq\b contains NaN or Inf"):
        feature_map_attention(entry, params, q, np.ones((4, 3)), np.ones((4, 2)))
