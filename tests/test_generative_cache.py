"""The generative kernel's quadrature values in the file cache
(:mod:`kernel_verify.verify.references.kernels_catalogue`): a value read back is the very number
the quadrature returns (same mantissa and exponent), it is read instead of recomputed, and other
inputs or precisions are other entries."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.impls.numpy.learned_maps import generative_params
from kernel_verify.verify.references import kernels_catalogue as kc
from kernel_verify.verify.references.kernels import kernel_mp

CONFIG = {"init_seed": 0, "latent_dim": 2, "hidden": 8,
          "W1": None, "b1": None, "W2": None, "b2": None}
X, Y = np.array([0.3, -0.2]), np.array([-0.1, 0.25])


def _value(x=X, y=Y, dps=None):
    kc._generative_value.cache_clear()  # the in-memory memo: only the file cache remains
    return kernel_mp("generative", x, y, dps=dps, **generative_params(CONFIG, 2))


def test_a_stored_value_is_the_computed_one_and_is_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("KV_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KV_NO_FILE_CACHE", raising=False)
    first = _value()
    assert len(list((tmp_path / "generative-kernel").glob("*.json"))) == 1

    def recompute(*args):
        raise AssertionError("recomputed although the value is stored")

    monkeypatch.setattr(kc, "_generative_quadrature", recompute)
    again = _value()
    assert again._mpf_ == first._mpf_
    assert _value(Y, X)._mpf_ == first._mpf_  # the kernel is even: one entry for ±δ
    with pytest.raises(AssertionError, match="recomputed"):
        _value(dps=30)  # another precision is another entry
    with pytest.raises(AssertionError, match="recomputed"):
        _value(X, Y + 1e-3)
    monkeypatch.undo()
    monkeypatch.setenv("KV_NO_FILE_CACHE", "1")
    assert _value()._mpf_ == first._mpf_  # no file cache: the same number, computed
    kc._generative_value.cache_clear()
