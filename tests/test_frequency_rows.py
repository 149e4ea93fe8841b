"""Reading a feature map's frequency rows off its outputs (properties/checks/frequencies.py):
the rows read from a black-box map are its draw's rows, in any column layout; maps without the
family's structure are refused with the reason; the pooled law checks reject the defects they
are for and pass correct rows (fixed seeds: each outcome below is deterministic)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kernel_verify.impls.registry import get
from kernel_verify.mutants.wrap import as_black_box
from kernel_verify.properties.checks.frequencies import (
    NotReadable,
    pooled_norm_checks,
    readable,
    whitened_rows,
)
from kernel_verify.verify import seeds

FAMILIES = ("rff_pairs[iid]", "rff_pairs[orthogonal]", "softmax_positive[iid]",
            "softmax_positive[orthogonal]", "softmax_hyperbolic[iid]", "softmax_trig[orthogonal]")


def _entry(name: str):
    e = get(name)
    return e.with_config(sigma=0.3) if "sigma" in e.config else e


@pytest.mark.parametrize("name", FAMILIES)
def test_rows_read_off_the_outputs_are_the_drawn_rows(name):
    white = _entry(name)
    black = as_black_box(white)
    assert readable(black) is None
    for d in (2, 5):
        a, b = whitened_rows(white, 11, d), whitened_rows(black, 11, d)
        assert a.shape == b.shape == (white.m, d)
        assert np.max(np.abs(a - b)) <= 1e-12 * np.max(np.abs(a)), name


def test_interleaved_cos_sin_columns_are_read_alike():
    black = as_black_box(_entry("rff_pairs[iid]"))
    m = black.m
    order = np.ravel(np.column_stack([np.arange(m), m + np.arange(m)]))  # c1 s1 c2 s2 ...
    interleaved = replace(black, sample_fn=lambda x, seed: black.sample_fn(x, seed)[..., order])
    np.testing.assert_allclose(whitened_rows(interleaved, 3, 4), whitened_rows(black, 3, 4),
                               rtol=0, atol=1e-12)


def test_columns_that_are_not_pairs_are_refused():
    black = as_black_box(_entry("rff_pairs[iid]"))

    def broken(x, seed):
        f = black.sample_fn(x, seed)
        return np.concatenate([f[..., : black.m], 2 * f[..., black.m:]], axis=-1)

    with pytest.raises(NotReadable, match="do not have one c"):
        whitened_rows(replace(black, sample_fn=broken), 0, 3)


def test_what_cannot_be_read_says_why():
    assert "matrix 'sorf'" in readable(get("rff_pairs[sorf]"))
    assert "formula 'taylor'" in readable(get("taylor2"))
    assert "estimates 'gaussian'" in readable(replace(get("rff_pairs[iid]"), kernel="softmax"))


def _rows(scale: float, fixed_norm: bool, d: int = 2, draws: int = 1000, m: int = 16):
    rng = seeds.rng(5, "test_frequency_rows")
    w = rng.standard_normal((draws * m, d))
    if fixed_norm:
        w *= np.sqrt(d) / np.linalg.norm(w, axis=1, keepdims=True)
    return scale * w


@pytest.mark.parametrize(("scale", "fixed_norm", "rejected"), [
    (1.0, False, set()),
    (1.05, False, {"χ²", "DKW"}),   # T/(Kd) = 1.1025, 13 standard deviations at K·d = 32000
    (1.0, True, {"DKW"}),           # every ‖ω‖² = d: the χ² sum is exact, the law is not
])
def test_pooled_checks_reject_what_they_are_for(scale, fixed_norm, rejected):
    results = pooled_norm_checks(_rows(scale, fixed_norm), 2, alpha=1e-5, label="rows")
    got = {("χ²" if "χ²" in r.test else "DKW") for r in results if not r.ok}
    assert got == rejected
