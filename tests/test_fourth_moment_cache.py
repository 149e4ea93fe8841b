"""The exact fourth moments by quadrature in the file cache
(:mod:`kernel_verify.verify.moments.fourth`): a value read back is the very number the
quadrature returns (same sign, mantissa and exponent), it is read instead of recomputed, other
inputs (a mirror image included) and other code are other entries, and the closed forms (cheap)
are not stored."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.verify import cache
from kernel_verify.verify.moments import fourth

X, Y = np.array([0.3, -0.2]), np.array([-0.1, 0.25])


@pytest.fixture
def file_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KV_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KV_NO_FILE_CACHE", raising=False)
    fourth._cached.cache_clear()  # the in-memory memo: only the file cache remains
    yield cache.cache_dir() / "fourth-moment"
    fourth._cached.cache_clear()


def _recomputing_fails(monkeypatch) -> None:
    def recompute(*args):
        raise AssertionError("recomputed although the value is stored")

    monkeypatch.setattr(fourth, "_moments", recompute)
    fourth._cached.cache_clear()


def test_a_stored_moment_is_the_computed_one_and_is_read_back(file_cache, monkeypatch):
    first = fourth.fourth_central_moment("softmax_positive", X, Y, {}, 8)
    assert len(list(file_cache.glob("*.json"))) == 1
    _recomputing_fails(monkeypatch)
    second = fourth.fourth_central_moment("softmax_positive", X, Y, {}, 8)
    assert [v._mpf_ for v in second] == [v._mpf_ for v in first]
    with pytest.raises(AssertionError, match="recomputed"):  # a mirror image is another entry
        fourth.fourth_central_moment("softmax_positive", X, -Y, {}, 8)


def test_other_code_is_another_entry(file_cache, monkeypatch):
    fourth.fourth_central_moment("softmax_positive", X, Y, {}, 8)
    monkeypatch.setattr(fourth, "_source_digest", lambda: "other code")
    _recomputing_fails(monkeypatch)
    with pytest.raises(AssertionError, match="recomputed"):
        fourth.fourth_central_moment("softmax_positive", X, Y, {}, 8)


def test_closed_forms_are_not_stored(file_cache):
    fourth.fourth_central_moment("softmax_positive", X, Y, {}, 8, method="closed")
    assert not file_cache.exists() or not list(file_cache.glob("*.json"))
