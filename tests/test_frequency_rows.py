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


def test_phase_rows_are_the_drawn_rows_up_to_one_sign_each():
    """``a·cos(ωᵀx + b)`` (rff_phase): the rows read from the outputs are the drawn rows of the
    columns with ``|cos b| ≥ ½ max``, each times ±1 (the sign of ``sin b``), to 1e-7."""
    from kernel_verify.properties.checks.frequencies import rows_keep_positions

    white = _entry("rff_phase[iid]")
    black = as_black_box(white)
    assert readable(black) is None and not rows_keep_positions(black)
    for d in (2, 5):
        drawn = whitened_rows(white, 11, d)
        read = whitened_rows(black, 11, d)
        assert 0 < len(read) <= len(drawn)
        for row in read:  # every read row is ± one drawn row
            gap = np.minimum(np.abs(drawn - row).max(axis=1), np.abs(drawn + row).max(axis=1))
            assert gap.min() <= 1e-7 * np.abs(drawn).max()


def test_a_phase_map_five_percent_off_in_bandwidth_is_rejected():
    """The rows of 300 draws of a phase map whose features use 1.05σ (the kernel's σ
    declared): pooled Σ‖σω‖² is rejected; the correct map's is not (fixed seeds)."""
    white = _entry("rff_phase[iid]")
    black = as_black_box(white)
    off = replace(black, sample_fn=lambda x, seed: black.sample_fn(x / 1.05, seed))
    for target, rejected in ((black, False), (off, True)):
        rows = np.concatenate([whitened_rows(target, s, 3)
                               for s in seeds.child_seeds(9, 300, "phase_rows")])
        chi2 = pooled_norm_checks(rows, 3, alpha=1e-6, label="rows")[0]
        assert chi2.ok is not rejected, chi2.label


def test_features_of_another_form_declared_as_phase_are_refused():
    """``exp(a·cos(ωᵀx + b))`` declared ``rff_phase`` misses the check at ``±2h``. (The cosine
    columns of a ``[cos, sin]`` map are phase features with ``b = 0`` and read as such.)"""
    black = as_black_box(_entry("rff_phase[iid]"))
    other = replace(black, sample_fn=lambda x, seed: np.exp(4 * black.sample_fn(x, seed)))
    with pytest.raises(NotReadable, match="not a·cos"):
        whitened_rows(other, 0, 3)
