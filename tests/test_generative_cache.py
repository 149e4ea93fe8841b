"""The generative kernel's quadrature values in the file cache
(:mod:`kernel_verify.verify.references.kernels_catalogue`): a value read back is the very number
the quadrature returns (same sign, mantissa and exponent), it is read instead of recomputed, and
other inputs or precisions are other entries — a mirror image of ``x − y`` included (issue #35:
the unsigned key of cache format 1 gave it the first one's value, and made the ±h probes of a
zero coordinate of ``δ`` read one entry: a zero gradient component)."""

from __future__ import annotations

import json

import mpmath
import numpy as np
import pytest

from kernel_verify.impls.numpy.learned_maps import generative_params
from kernel_verify.verify import cache
from kernel_verify.verify.references import kernels_catalogue as kc
from kernel_verify.verify.references.gradients import kernel_grad_mp
from kernel_verify.verify.references.kernels import gram_reference, kernel_mp
from kernel_verify.verify.references.mp import to_mp

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
    assert len(list((cache.cache_dir() / "generative-kernel").glob("*.json"))) == 1

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


# ---------------------------------------------------------------- signed keys and values (#35)
def test_exact_text_and_stored_values_are_signed():
    """mpmath keeps ``mpf.man`` unsigned: a key or a value built from it lost the sign. The
    exact text of ``−v`` differs from that of ``v``, and a stored value comes back bit for bit,
    negative, tiny and 110-digit ones included."""
    with mpmath.workdps(110):
        values = [mpmath.mpf(-0.75), mpmath.mpf(0.75), mpmath.mpf(-3) / 7, mpmath.mpf(0),
                  -mpmath.mpf(2) ** -1000, mpmath.sqrt(2)]
    for v in values:
        back = cache.mpf_from_json(json.loads(json.dumps(cache.mpf_to_json(v))))
        assert back._mpf_ == v._mpf_, (v, back)
        if v != 0:
            assert cache.exact_text((v,)) != cache.exact_text((-v,))
    assert cache.exact_text(np.array([0.5, -0.5])) != cache.exact_text(np.array([0.5, 0.5]))
    assert cache.exact_text(0.1) != cache.exact_text(0.1 + 2**-56)


def test_the_cache_format_is_versioned(tmp_path, monkeypatch):
    """Entries written under the unsigned keys of format 1 (directly under the root) are never
    read: the format's entries live in their own folder."""
    monkeypatch.setenv("KV_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KV_NO_FILE_CACHE", raising=False)
    assert cache.CACHE_FORMAT >= 2
    assert cache.cache_dir() == tmp_path / f"v{cache.CACHE_FORMAT}"


#: x − y = (0.7, −0.9, 0) and its mirror image (0.7, +0.9, 0) (issue #35): k = 0.897363 and
#: 0.820973 by the quadrature; the unsigned key gave the second the first one's value.
MIRROR_X = np.array([0.7, -0.9, 0.0])
MIRROR_Y = np.array([0.7, 0.9, 0.0])


#: a small difference with a zero coordinate: the quadrature converges at the first orders
SMALL_X = np.array([0.3, -0.4, 0.0])


def _kp3():
    return generative_params(CONFIG, 3)


def test_a_mirrored_difference_and_a_negative_value_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("KV_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KV_NO_FILE_CACHE", raising=False)
    zero = np.zeros(3)
    kc._generative_value.cache_clear()
    first = kernel_mp("generative", MIRROR_X, zero, **_kp3())
    kc._generative_value.cache_clear()
    mirror = kernel_mp("generative", MIRROR_Y, zero, **_kp3())  # read after the first is stored
    monkeypatch.setenv("KV_NO_FILE_CACHE", "1")
    kc._generative_value.cache_clear()
    fresh = [kernel_mp("generative", p, zero, **_kp3()) for p in (MIRROR_X, MIRROR_Y)]
    assert (first._mpf_, mirror._mpf_) == (fresh[0]._mpf_, fresh[1]._mpf_)
    assert abs(first - mirror) > 0.05, "the mirrored difference read the first one's entry"
    # a negative value is stored and read back negative
    monkeypatch.delenv("KV_NO_FILE_CACHE")
    negative = -mpmath.mpf(3) / 8
    monkeypatch.setattr(kc, "_generative_quadrature", lambda *a: negative)
    kc._generative_value.cache_clear()
    assert _value(X, Y + 0.5)._mpf_ == negative._mpf_  # computed (patched) and stored

    def recompute(*args):
        raise AssertionError("recomputed although the value is stored")

    monkeypatch.setattr(kc, "_generative_quadrature", recompute)
    assert _value(X, Y + 0.5)._mpf_ == negative._mpf_  # read back from the file, negative
    kc._generative_value.cache_clear()


def test_gram_and_gradient_agree_with_the_cache_on_and_off(tmp_path, monkeypatch):
    """The generative kernel's Gram and ∇ₓk, from an empty cache, from the filled cache and with
    the cache off, are the same numbers; at a pair whose difference has zero coordinates (the
    ±h probes of kernel_grad_mp are mirror images) ∇ₓk equals the quadrature of the gradient
    integrand, −E[sin(g(ε)ᵀδ) g(ε)] (:func:`generative_grad_mp`), to 1e-15 (both are validated
    to 1e-18 times the component's bound |g_j| ≤ 1.1)."""
    rng = np.random.default_rng(35)
    pts = 0.3 * rng.standard_normal((2, 3))
    kp = _kp3()

    def run():
        kc._generative_value.cache_clear()
        gram = gram_reference("generative", pts, pts, **kp)
        kc._generative_value.cache_clear()
        grad = kernel_grad_mp("generative", SMALL_X, np.zeros(3), digits=10, **kp)
        return gram, grad

    monkeypatch.setenv("KV_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KV_NO_FILE_CACHE", raising=False)
    empty, filled = run(), run()
    monkeypatch.setenv("KV_NO_FILE_CACHE", "1")
    off = run()
    for other in (filled, off):
        assert np.array_equal(empty[0], other[0])
        assert [v._mpf_ for v in empty[1]] == [v._mpf_ for v in other[1]]
    with mpmath.workdps(30):
        direct = kc.generative_grad_mp(to_mp(SMALL_X), to_mp(np.zeros(3)),
                                       *(to_mp(kp[k]) for k in ("W1", "b1", "W2", "b2")))
    assert abs(float(direct[2])) > 1e-3, "the third component is not 0 by symmetry"
    assert max(abs(float(a - b)) for a, b in zip(off[1], direct, strict=True)) <= 1e-15
    kc._generative_value.cache_clear()
