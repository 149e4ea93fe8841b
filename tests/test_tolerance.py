"""The tolerance model (verify/tolerance.py): formats, γ_n, the budget table, and the bounds.

The elementary-function budgets are checked empirically against correctly rounded mpmath
references on this machine, for NumPy and torch on every dtype each supports; the dot-product
bound is checked on sums with heavy cancellation (the case where an rtol·|result| check breaks).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

from kernel_verify.verify.references.mp import to_float, to_mp, working_precision
from kernel_verify.verify.tolerance import (
    BUDGETS,
    ELEMENTARY,
    FORMATS,
    Budget,
    budget_for,
    dot_error_bound,
    dtype_name,
    elementwise_bound,
    gamma,
    ulp,
    unit_roundoff,
)

DTYPES = ("float64", "float32", "float16", "bfloat16")


# --- formats, u, γ ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("float64", 2.0**-53), (np.float64, 2.0**-53), (np.dtype("float32"), 2.0**-24),
        ("float16", 2.0**-11), (torch.float16, 2.0**-11), (torch.bfloat16, 2.0**-8),
        ("torch.bfloat16", 2.0**-8), (torch.float32, 2.0**-24),
    ],
)
def test_unit_roundoff_is_half_the_gap_above_one(spec, expected):
    # u = 2^-p: the gap between 1 and the next float is 2^(1-p) = 2u (checked via nextafter
    # for the NumPy formats, via torch.finfo for bfloat16).
    assert unit_roundoff(spec) == expected
    name = dtype_name(spec)
    if name == "bfloat16":
        assert torch.finfo(torch.bfloat16).eps == 2 * expected
    else:
        one = np.array(1.0, dtype=name)
        assert float(np.nextafter(one, np.array(2.0, dtype=name))) - 1.0 == 2 * expected


def test_unknown_dtypes_are_errors():
    with pytest.raises(KeyError, match="known: float64"):
        unit_roundoff("float128")
    with pytest.raises(KeyError, match="int32"):
        unit_roundoff(np.int32)
    with pytest.raises(TypeError, match="dtype"):
        unit_roundoff(object())


def test_gamma():
    u = 2.0**-24
    assert gamma(0, u) == 0.0
    assert gamma(10, u) == pytest.approx(10 * u / (1 - 10 * u), rel=1e-15)
    assert gamma(10, u) > 10 * u  # γ_n > n·u (first-order term plus a positive remainder)
    with pytest.raises(ValueError, match="n·u >= 1"):
        gamma(2**24, u)
    with pytest.raises(ValueError, match="n must be >= 0"):
        gamma(-1, u)
    with pytest.raises(ValueError, match="unit roundoff"):
        gamma(3, 1.5)
    with pytest.raises(TypeError, match="integer"):
        gamma(2.5, u)


def test_ulp_matches_nextafter_spacing():
    rng = np.random.default_rng(101)
    for name in ("float64", "float32", "float16"):
        finfo = np.finfo(name)
        x = np.concatenate(
            [np.exp(rng.uniform(-20, 20, 200)), [1.0, 2.0, 0.75, float(finfo.tiny)]]
        )
        x = x[x < float(finfo.max)].astype(name)
        x = x[x > 0]
        spacing = np.nextafter(x, np.array(np.inf, dtype=name)) - x  # exact in the format
        assert np.array_equal(ulp(x.astype(np.float64), name), spacing.astype(np.float64))
        assert ulp(0.0, name) == np.nextafter(np.array(0.0, dtype=name), 1).astype(np.float64)
    # bfloat16: p = 8, so ulp(1) = 2^-7, and the smallest subnormal is 2^(-126-7).
    assert ulp(1.0, "bfloat16") == 2.0**-7
    assert ulp(0.0, "bfloat16") == 2.0**-133


# --- the budget table ------------------------------------------------------------------------

def test_table_covers_every_dtype_and_device_and_nothing_else():
    assert set(BUDGETS) == {(d, v) for d in DTYPES for v in ("cpu", "cuda")}
    for (dtype, device), b in BUDGETS.items():
        assert (b.dtype, b.device) == (dtype, device)
        assert set(b.ulps) == set(ELEMENTARY)
        assert all(0.5 <= v <= 4 for v in b.ulps.values())
        # half types are computed in float32 and rounded once more (impls/torch/convert.py)
        half = dtype in ("float16", "bfloat16")
        assert b.compute_dtype == ("float32" if half else dtype)
        assert b.output_round == (0.5 if half else 0.0)
        assert b.source and b.describe()


@pytest.mark.parametrize(
    ("dtype", "device", "key"),
    [
        (np.float32, "numpy", ("float32", "cpu")),
        (torch.bfloat16, "torch:cuda", ("bfloat16", "cuda")),
        ("float16", torch.device("cpu"), ("float16", "cpu")),
        ("float64", "cuda:1", ("float64", "cuda")),
    ],
)
def test_budget_for_normalises_names(dtype, device, key):
    b = budget_for(dtype, device)
    assert (b.dtype, b.device) == key


def test_budget_for_unknown_pairs_name_what_exists():
    with pytest.raises(KeyError, match="unknown device 'mps'"):
        budget_for("float32", "mps")
    with pytest.raises(KeyError, match="known: float64"):
        budget_for("float8_e4m3fn", "cpu")
    with pytest.raises(ValueError, match="lacks ulps"):
        Budget("float32", "cpu", "float32", {"exp": 1.0}, 0.0, "test")


# --- element-wise budgets, measured on this machine ------------------------------------------

def _inputs(fn: str, rng: np.random.Generator, dtype: str) -> np.ndarray:
    """Inputs spread over the function's useful range in ``dtype`` (no overflow)."""
    size = 400
    if fn in ("log", "sqrt"):
        lim = {"float16": 10, "bfloat16": 60, "float32": 60, "float64": 300}[dtype]
        x = np.exp(rng.uniform(-lim, lim, size))
    elif fn == "exp":
        lim = {"float16": 10, "bfloat16": 80, "float32": 80, "float64": 700}[dtype]
        x = rng.uniform(-lim, lim, size)
    else:
        x = rng.uniform(-1, 1, size) * 10.0 ** rng.uniform(-3, 3, size)
    return x


def _reference(fn: str, x64: np.ndarray) -> np.ndarray:
    """``fn(x)`` exactly rounded to float64 (mpmath at 40 digits, rounded once)."""
    with working_precision(40):
        f = np.frompyfunc(getattr(mpmath, fn), 1, 1)
        return to_float(f(to_mp(x64)), np.float64)


def _numpy_cases():
    return [("numpy", d) for d in ("float64", "float32", "float16")]


def _torch_cases():
    return [("torch", d) for d in DTYPES]


@pytest.mark.parametrize("fn", ELEMENTARY)
@pytest.mark.parametrize(("backend", "dtype"), _numpy_cases() + _torch_cases())
def test_elementary_functions_stay_within_the_cpu_budget(fn, backend, dtype):
    """The table's ulp figures hold for NumPy and torch on this CPU. Reference: mpmath on the
    exact (already rounded) input, rounded once to float64; the bound adds its 0.5 ulp."""
    rng = np.random.default_rng([7, ELEMENTARY.index(fn), DTYPES.index(dtype)])
    x = _inputs(fn, rng, dtype)
    if backend == "numpy":
        xd = x.astype(dtype)
        x64 = xd.astype(np.float64)
        got = getattr(np, fn)(xd).astype(np.float64)
    else:
        xt = torch.as_tensor(x, dtype=torch.float64).to(getattr(torch, dtype))
        x64 = xt.double().numpy()
        got = getattr(torch, fn)(xt).double().numpy()
    ref = _reference(fn, x64)
    keep = np.isfinite(ref) & (np.abs(ref) < float(torch.finfo(getattr(torch, dtype)).max) / 2)
    bound = elementwise_bound(ref[keep], budget_for(dtype, "cpu"), fn)
    err = np.abs(got[keep] - ref[keep])
    worst = int(np.argmax(err / bound))
    assert (err <= bound).all(), (
        f"{backend} {fn} {dtype}: |err| {err[worst]:.3e} > bound {bound[worst]:.3e} at "
        f"x = {x64[keep][worst]!r} (ref {ref[keep][worst]!r}, got {got[keep][worst]!r})"
    )


def test_elementwise_bound_is_tight_enough_to_catch_a_few_ulps():
    """A float32 exp wrong by 16 ulps (factor 1 + 2^-19) breaks the 4-ulp float32 budget."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-20, 20, 300).astype(np.float32)
    ref = _reference("exp", x.astype(np.float64))
    bad = (np.exp(x).astype(np.float64) * (1 + 2.0**-19)).astype(np.float32)
    bound = elementwise_bound(ref, budget_for("float32"), "exp")
    assert (np.abs(bad.astype(np.float64) - ref) > bound).mean() > 0.9


def test_elementwise_bound_composition():
    b16 = budget_for("float16")
    ref = np.array([1.0, 1000.0, 1e-6, 0.0])
    # k ulps of float32 + 0.5 ulp float16 (at the top of the range) + 0.5 ulp float64
    expected = (
        4 * ulp(ref, "float32")
        + 0.5 * ulp(ref * (1 + 8 * 2.0**-24), "float16")
        + 0.5 * ulp(ref, "float64")
    )
    assert np.array_equal(elementwise_bound(ref, b16, "exp"), expected)
    assert np.array_equal(elementwise_bound(ref, b16), expected)  # None = the largest (4)
    assert np.array_equal(
        elementwise_bound(ref, budget_for("float64"), 2.0),
        2.5 * ulp(ref, "float64"),
    )
    with pytest.raises(KeyError, match="tanh"):
        elementwise_bound(ref, b16, "tanh")
    with pytest.raises(ValueError, match="NaN"):
        elementwise_bound([np.nan], b16)
    with pytest.raises(TypeError, match="Budget"):
        elementwise_bound(ref, "float32")


# --- sums and dot products -------------------------------------------------------------------

def _exact_dot(x: np.ndarray, y: np.ndarray) -> float:
    """The exact dot product of float32 vectors, correctly rounded to float64: products of two
    24-bit significands fit in 48 < 53 bits (exact in float64), and math.fsum rounds the exact
    sum once."""
    return math.fsum((x.astype(np.float64) * y.astype(np.float64)).tolist())


def _cancelling_pairs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Float32 vectors whose dot product nearly cancels: big ±terms plus small noise."""
    x = rng.standard_normal(n).astype(np.float32) * np.float32(1e4)
    y = rng.standard_normal(n).astype(np.float32)
    half = n // 2
    x[half : 2 * half] = x[:half]
    y[half : 2 * half] = -y[:half] * np.float32(1 + 1e-6)
    return x, y


@pytest.mark.parametrize("n", [8, 64, 1000])
def test_dot_bound_survives_cancellation(n):
    rng = np.random.default_rng([13, n])
    b = budget_for("float32")
    for _ in range(50):
        x, y = _cancelling_pairs(rng, n)
        ref = _exact_dot(x, y)
        s = float(np.abs(x.astype(np.float64)) @ np.abs(y.astype(np.float64)))
        bound = float(dot_error_bound(s, n, b))
        via_torch = float(torch.from_numpy(x) @ torch.from_numpy(y))
        for got in (float(x @ y), float(np.sum(x * y)), via_torch):
            assert abs(got - ref) <= bound, (n, got, ref, bound)
        # A relative-only check would fail here: the result is far smaller than its terms.
        assert abs(ref) < 1e-3 * s


def test_dot_bound_catches_a_lower_precision_sum():
    """Summing the float32 products in float16 (a silent precision drop) breaks the bound."""
    rng = np.random.default_rng(17)
    n = 256
    caught = 0
    for _ in range(20):
        x = rng.uniform(0.5, 1.0, n).astype(np.float32)
        y = rng.uniform(0.5, 1.0, n).astype(np.float32)
        ref = _exact_dot(x, y)
        s = float(np.abs(x.astype(np.float64)) @ np.abs(y.astype(np.float64)))
        bad = float(np.sum((x * y).astype(np.float16), dtype=np.float16))
        caught += abs(bad - ref) > float(dot_error_bound(s, n, budget_for("float32")))
    assert caught == 20


def test_dot_bound_for_half_types_includes_the_cast_back():
    s = np.array([1.0, 10.0])
    b = budget_for("bfloat16")
    g = gamma(16, 2.0**-24)
    expected = g * s + 16 * FORMATS["float32"].tiny + 2.0**-8 * (1 + g) * s
    expected += FORMATS["bfloat16"].tiny + 2.0**-53 * s
    assert np.allclose(dot_error_bound(s, 16, b), expected, rtol=1e-15, atol=0)
    with pytest.raises(ValueError, match=">= 0"):
        dot_error_bound(-1.0, 4, b)
    with pytest.raises(ValueError, match="reduction length"):
        dot_error_bound(1.0, 0, b)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize("fn", ELEMENTARY)
@pytest.mark.parametrize("dtype", DTYPES)
def test_elementary_functions_stay_within_the_cuda_budget(fn, dtype):
    rng = np.random.default_rng([19, ELEMENTARY.index(fn), DTYPES.index(dtype)])
    x = _inputs(fn, rng, dtype)
    xt = torch.as_tensor(x, dtype=torch.float64).to(getattr(torch, dtype))
    got = getattr(torch, fn)(xt.to("cuda")).double().cpu().numpy()
    ref = _reference(fn, xt.double().numpy())
    keep = np.isfinite(ref) & (np.abs(ref) < float(torch.finfo(getattr(torch, dtype)).max) / 2)
    bound = elementwise_bound(ref[keep], budget_for(dtype, "cuda"), fn)
    assert (np.abs(got[keep] - ref[keep]) <= bound).all()
