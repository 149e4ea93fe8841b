"""Comparisons and their failure reports (verify/compare.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernel_verify.impls import registry
from kernel_verify.verify.compare import assert_close, compare, ulp_distance
from kernel_verify.verify.references.mp import mp_cos, mp_sin, to_float, to_mp, working_precision
from kernel_verify.verify.tolerance import budget_for, dot_error_bound, elementwise_bound


def test_ulp_distance_counts_representable_steps():
    one = np.float64(1.0)
    steps = np.array([one, np.nextafter(one, 2.0), np.nextafter(np.nextafter(one, 2.0), 2.0)])
    assert np.array_equal(ulp_distance(steps, np.ones(3), "float64"), [0.0, 1.0, 2.0])
    f = np.float32(3.0)
    up = np.nextafter(f, np.float32(4.0))
    assert ulp_distance(np.array([up]), np.array([3.0]), "float32")[0] == 1.0
    # Just below a power of two the spacing halves: 1 − 2^-24 is one float32 step below 1, but
    # measured in ulps of the reference 1.0 (spacing 2^-23) it is half an ulp.
    assert ulp_distance(np.array([1 - 2.0**-24]), np.array([1.0]), "float32")[0] == 0.5
    # mp references are rounded to float64 once.
    with working_precision(30):
        third = to_mp(np.array([1.0])) / 3
    assert ulp_distance(np.array([1 / 3]), third, "float64")[0] == 0.0
    # non-finite values
    got = np.array([np.inf, np.nan, 1.0, np.nan])
    d = ulp_distance(got, np.array([np.inf, np.nan, np.inf, 1.0]), "float64")
    assert d[0] == 0.0 and d[1] == 0.0 and d[2] == np.inf and d[3] == np.inf
    with pytest.raises(ValueError, match="same shape"):
        ulp_distance(np.zeros(2), np.zeros(3), "float64")


def test_compare_passes_within_bound_and_reports_errors():
    expected = np.array([1.0, 2.0, 4.0])
    got = expected + np.array([1e-16, -4e-16, 0.0])
    r = compare(got, expected, 1e-15, label="toy", how="1e-15 absolute (test)", repro="toy()")
    assert r.ok and r.n_failed == 0
    assert r.max_abs_error == pytest.approx(4e-16, rel=0.05)
    assert r.max_rel_error == pytest.approx(2e-16, rel=0.05)
    # 4e-16 ≈ 1 ulp at 2 (spacing 2^-51 ≈ 4.44e-16) after rounding 2 − 4e-16 to float64
    assert r.max_ulp_error == pytest.approx(1.0, abs=0.01)


def test_failure_message_has_everything():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 3))
    expected = np.sin(x)
    got = expected.copy()
    got[1, 2, 0] += 1e-9  # one wrong element
    got[0, 0, 1] += 1e-13  # one slightly off, within the bound
    bound = np.full(got.shape, 1e-12)
    with pytest.raises(AssertionError) as info:
        assert_close(
            got, expected, bound, inputs={"x": x, "scale": 2.0, "W": rng.standard_normal((40, 3))},
            label="sin features", how="1e-12 absolute (test bound)",
            repro="pytest properties/test_compare.py -k message  # seed 3",
        )
    msg = str(info.value)
    for needle in (
        "sin features: FAILED at 1 of 30 elements",
        "max abs error 1.000e-09", "max rel error", "max ulp error",
        "bound: 1e-12 absolute (test bound)",
        "at (1, 2, 0)",
        "x = ", "scale = 2.0", "W = <array of shape (40, 3)>",
        "reproduce: pytest properties/test_compare.py -k message  # seed 3",
    ):
        assert needle in msg, (needle, msg)
    # the element's own input is shown (x has the output's shape here)
    assert repr(float(x[1, 2, 0])) in msg
    # the worst point is listed first; points with no error at all are left out
    assert "worst 2 point(s)" in msg
    assert msg.index("at (1, 2, 0)") < msg.index("at (0, 0, 1)")


def test_row_inputs_are_aligned_with_feature_outputs():
    x = np.arange(12.0).reshape(4, 3)  # (n, d)
    expected = np.zeros((4, 6))  # (n, D)
    got = expected.copy()
    got[2, 5] = 1.0
    r = compare(got, expected, 0.5, inputs={"x": x}, label="phi", how="h", repro="r", worst=1)
    assert not r.ok
    assert np.array_equal(r.worst[0].inputs["x"], x[2])
    assert r.worst[0].index == (2, 5)


def test_non_finite_results_always_fail():
    r = compare(np.array([np.nan, 1.0]), np.array([1.0, 1.0]), 1e300, label="l", how="h", repro="r")
    assert not r.ok and r.n_failed == 1 and "non-finite" in r.message()
    r = compare(np.array([np.inf]), np.array([1.0]), 1e300, label="l", how="h", repro="r")
    assert not r.ok


def test_zero_bound_means_exact():
    assert compare(np.array([1.0]), np.array([1.0]), 0.0, label="l", how="h", repro="r").ok
    assert not compare(np.array([1.0 + 2**-52]), np.array([1.0]), 0.0, label="l", how="h",
                       repro="r").ok


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"got": np.zeros(2), "expected": np.zeros(3), "bound": 1.0}, ValueError, "same shape"),
        ({"got": np.zeros(2), "expected": np.zeros(2), "bound": -1.0}, ValueError, "bound"),
        ({"got": np.zeros(2), "expected": np.zeros(2), "bound": np.nan}, ValueError, "bound"),
        ({"got": np.zeros(2), "expected": np.zeros(2), "bound": np.ones(3)}, ValueError, "broad"),
        ({"got": np.zeros(2), "expected": np.array([0, np.nan]), "bound": 1.0}, ValueError, "NaN"),
        ({"got": np.array(["a"]), "expected": np.zeros(1), "bound": 1.0}, TypeError, "real"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        compare(**kwargs, label="l", how="h", repro="r")


def test_labels_are_required():
    with pytest.raises(ValueError, match="repro"):
        compare(np.zeros(1), np.zeros(1), 1.0, label="l", how="h", repro=" ")


# --- end to end: a real feature map against its mpmath twin ------------------------------------

def _rff_pairs_mp(x: np.ndarray, w: np.ndarray, sigma: float) -> np.ndarray:
    """docs/math.md §1 pairs map, mpmath: m^(-1/2)[cos(wᵢᵀx/σ), sin(wᵢᵀx/σ)], rounded to float64."""
    with working_precision(40):
        u = (to_mp(x) / sigma) @ to_mp(w).T
        m = w.shape[0]
        out = np.concatenate([mp_cos(u), mp_sin(u)], axis=-1) / np.sqrt(to_mp(np.array(m)))
        return to_float(out, np.float64)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_rff_pairs_within_derived_bound(backend, dtype):
    """φ of rff_pairs[iid] against mpmath with a bound derived from the budget:
    u = x'ᵀw (x' = x/σ rounded, d-term dot) has |Δu| ≤ dot bound + u_c|x'|·|w| (the division by
    σ), cos/sin are 1-Lipschitz so that carries over, plus k ulps for cos/sin, plus the scaling
    by m^(-1/2) (one more rounding, ≤ 2u_c relative with the rounded constant)."""
    entry = registry.get("rff_pairs[iid]")
    seed = 2024
    rng = np.random.default_rng(seed)
    d, m, n = 5, 16, 7
    params = entry.draw(rng, d, m, entry.config)
    x = rng.standard_normal((n, d)).astype(dtype)
    sigma = entry.config["sigma"]
    if backend == "numpy":
        got = entry.numpy_fn(x, params, entry.config)
    else:
        got = entry.torch_fn(torch.from_numpy(x), params, entry.config)
    w = params["W"].astype(dtype).astype(np.float64)  # the maps round W to the compute dtype
    ref = _rff_pairs_mp(x.astype(np.float64), w, sigma)
    b = budget_for(dtype, "cpu")
    s = (np.abs(x.astype(np.float64)) / sigma) @ np.abs(w).T
    du = dot_error_bound(s, d, b) + b.u_compute * s  # + rounding of x/σ
    du = np.concatenate([du, du], axis=-1)
    unscaled = np.abs(ref) * np.sqrt(m)  # |cos u|, |sin u| (to float64 rounding)
    # cos/sin ulps taken at |f(u)| + |Δu| so that f(û) crossing a binade cannot shrink them
    trig = du + elementwise_bound(unscaled + du, b, "cos")
    bound = trig / np.sqrt(m) + 2.01 * b.u_compute * (unscaled + trig) / np.sqrt(m)
    assert_close(
        got, ref, bound, inputs={"x": x}, label=f"rff_pairs[iid] {backend} {dtype}",
        how="dot bound on wᵀx/σ (1-Lipschitz cos/sin) + cos ulps + scaling rounding",
        repro=f"properties/test_compare.py::test_rff_pairs_within_derived_bound seed={seed}",
    )
    # and the same bound rejects a map that forgot the m^(-1/2) (a classic mutant)
    wrong = np.asarray(got if backend == "numpy" else got.numpy(), dtype=np.float64) * np.sqrt(m)
    assert not compare(wrong, ref, bound, label="mutant", how="same", repro="-").ok
