"""PSD checks (verify/psd.py) on exact kernels (docs/math.md §10), implemented here in mpmath.

PSD kernels (accepted on random point sets, in mpmath and as float Grams): Gaussian, softmax
``exp(xᵀy)``, linear, cosine, polynomial ``(xᵀy + c)^p`` with c ≥ 0, arc-cosine of order 1,
Taylor ``1 + t + t²/2`` (``t = xᵀy/√d``). With ``n = 10`` points in ``d = 3`` several Grams are
exactly singular, with ranks derived from their feature maps: linear and cosine ``d = 3``,
homogeneous quadratic ``d(d+1)/2 = 6`` (symmetric 2-tensors), for generic points.

Negative control: the sigmoid kernel ``tanh(a·xᵀy + c)``. Derived indefinite sets:
* two collinear points ``x = 0.1e₁``, ``y = 2e₁`` with ``a = 1, c = 0``: the Gram
  ``[[tanh 0.01, tanh 0.2], [tanh 0.2, tanh 4]]`` has determinant
  ``0.0099997·0.99933 − 0.19738² ≈ −0.029 < 0``: one negative eigenvalue;
* ``c < 0``: any point with ``a‖x‖² < −c`` has a negative diagonal entry ``tanh(a‖x‖² + c)``.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch

from kernel_verify.verify.psd import psd_float, psd_mp
from kernel_verify.verify.references.mp import to_float, to_mp, working_precision
from kernel_verify.verify.tolerance import budget_for, dot_error_bound

DPS = 40


def _dot(x, y):
    return sum((a * b for a, b in zip(x, y, strict=True)), mpmath.mpf(0))


def _norm(x):
    return mpmath.sqrt(_dot(x, x))


def gaussian(x, y):
    d = [a - b for a, b in zip(x, y, strict=True)]
    return mpmath.exp(-_dot(d, d) / 2)


def softmax(x, y):
    return mpmath.exp(_dot(x, y))


def linear(x, y):
    return _dot(x, y)


def cosine(x, y):
    return _dot(x, y) / (_norm(x) * _norm(y))


def poly(c, p):
    def k(x, y):
        return (_dot(x, y) + c) ** p

    return k


def arccos1(x, y):
    nx, ny = _norm(x), _norm(y)
    cos_t = max(min(_dot(x, y) / (nx * ny), mpmath.mpf(1)), mpmath.mpf(-1))
    theta = mpmath.acos(cos_t)
    return nx * ny * (mpmath.sin(theta) + (mpmath.pi - theta) * cos_t) / (2 * mpmath.pi)


def taylor(x, y):
    t = _dot(x, y) / mpmath.sqrt(len(x))
    return 1 + t + t * t / 2


def sigmoid(a, c):
    def k(x, y):
        return mpmath.tanh(a * _dot(x, y) + c)

    return k


PSD_KERNELS = {
    "gaussian": (gaussian, None),
    "softmax": (softmax, None),
    "linear": (linear, 3),
    "cosine": (cosine, 3),
    "poly c=0 p=2": (poly(0, 2), 6),
    "poly c=1 p=3": (poly(1, 3), None),
    "poly c=0.5 p=2": (poly(mpmath.mpf("0.5"), 2), None),
    "arccos1": (arccos1, None),
    "taylor": (taylor, None),
}


def _points(seed, n=10, d=3, scale=0.7):
    return np.random.default_rng(seed).standard_normal((n, d)) * scale


def _gram(kernel, points) -> np.ndarray:
    with working_precision(DPS):
        xs = [to_mp(p) for p in points]
        return np.array([[kernel(a, b) for b in xs] for a in xs], dtype=object)


@pytest.mark.parametrize("name", list(PSD_KERNELS))
@pytest.mark.parametrize("seed", [1, 2])
def test_mp_accepts_psd_kernels(name, seed):
    kernel, rank = PSD_KERNELS[name]
    pts = _points([seed, 5])
    r = psd_mp(kernel, pts, dps=DPS)
    assert r.is_psd, r.explain()
    assert r.rank == (rank if rank is not None else len(pts)), r.explain()


@pytest.mark.parametrize("name", list(PSD_KERNELS))
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_float_accepts_rounded_psd_grams(name, dtype):
    kernel, _ = PSD_KERNELS[name]
    k = to_float(_gram(kernel, _points([3, 5])), dtype)
    r = psd_float(k, dtype)
    assert r.is_psd, r.explain()


def test_float_accepts_computed_grams_with_their_error_bound():
    """Grams computed in float32 (not rounded from exact values): X Xᵀ and ΦΦᵀ of random
    features, with entry errors from dot_error_bound over the reduction length."""
    rng = np.random.default_rng(7)
    b = budget_for("float32")
    for n, d in ((30, 4), (12, 40)):
        x = rng.standard_normal((n, d)).astype(np.float32)
        k = x @ x.T
        ax = np.abs(x.astype(np.float64))
        r = psd_float(k, "float32", entry_error=dot_error_bound(ax @ ax.T, d, b))
        assert r.is_psd, r.explain()
    w = rng.standard_normal((64, 3))
    x = rng.standard_normal((20, 3)).astype(np.float32)
    u = x @ w.T.astype(np.float32)
    phi = np.concatenate([np.cos(u), np.sin(u)], axis=1) / np.float32(8.0)
    ap = np.abs(phi.astype(np.float64))
    r = psd_float(phi @ phi.T, "float32", entry_error=dot_error_bound(ap @ ap.T, 128, b))
    assert r.is_psd, r.explain()
    # torch input, computed in bfloat16's compute dtype and stored as bfloat16
    kt = torch.from_numpy(to_float(_gram(gaussian, _points(9)), np.float64)).to(torch.bfloat16)
    assert psd_float(kt, torch.bfloat16).is_psd


SIGMOID_SETS = {
    "two collinear points, a=1, c=0": (sigmoid(1, 0), np.array([[0.1, 0, 0], [2.0, 0, 0]])),
    "one point, a=1, c=-1": (sigmoid(1, -1), np.array([[0.5, 0.0]])),
    "random, a=1, c=-1": (sigmoid(1, -1), _points(11, scale=0.3)),
    "random + the collinear pair, a=1, c=0": (
        sigmoid(1, 0),
        np.concatenate([_points(12, n=6), [[0.1, 0, 0], [2.0, 0, 0]]]),
    ),
}


@pytest.mark.parametrize("case", list(SIGMOID_SETS))
def test_sigmoid_kernel_is_rejected(case):
    kernel, pts = SIGMOID_SETS[case]
    r = psd_mp(kernel, pts, dps=DPS)
    assert not r.is_psd, r.explain()
    assert r.witness is not None and r.witness_value < 0
    # the witness is real: zᵀKz < 0 recomputed here in mpmath
    g = _gram(kernel, pts)
    with working_precision(DPS):
        z = to_mp(r.witness)
        assert z @ g @ z < 0
    for dtype in ("float64", "float32"):
        rf = psd_float(to_float(g, dtype), dtype)
        assert not rf.is_psd and rf.witness_value < 0, rf.explain()
        assert rf.value < -rf.threshold


def test_two_point_sigmoid_matches_the_derivation():
    """λ_min of the derived 2×2 Gram: det/trace bound and the exact eigenvalue."""
    kernel, pts = SIGMOID_SETS["two collinear points, a=1, c=0"]
    a, b, c = np.tanh(0.01), np.tanh(0.2), np.tanh(4.0)
    lam_min = (a + c) / 2 - np.hypot((a - c) / 2, b)
    r = psd_float(to_float(_gram(kernel, pts), "float64"), "float64")
    assert a * c - b * b < -0.028
    assert r.value == pytest.approx(lam_min, rel=1e-12)


def test_float_threshold_is_sharp():
    """An exactly singular PSD Gram moved by −s·zzᵀ along its null vector z has λ_min = −s:
    rejected at s = 4τ (the threshold is not loose), accepted at s = 0."""
    pts = _points(13)
    g = _gram(linear, pts)  # rank 3, exact
    z = np.linalg.svd(pts.T)[2][-1]  # Xᵀz = 0 up to float64 rounding of z
    for dtype in ("float64", "float32"):
        base = psd_float(to_float(g, dtype), dtype)
        assert base.is_psd, base.explain()
        s = 4 * base.threshold
        with working_precision(DPS):
            zm = to_mp(z)
            moved = g - np.outer(zm, zm) * mpmath.mpf(s)
        r = psd_float(to_float(moved, dtype), dtype)
        assert not r.is_psd, r.explain()


def test_mp_edge_cases():
    one = mpmath.mpf(1)
    r = psd_mp(np.array([[one, one], [one, one]], dtype=object), dps=DPS)
    assert r.is_psd and r.rank == 1 and r.value == 0.0  # remainder 1 − 1·1/1 = 0 exactly
    r = psd_mp(np.array([[0.0, 1.0], [1.0, 0.0]]), dps=DPS)
    assert not r.is_psd and "2×2" in r.reason and r.witness_value < 0
    # tolerance semantics: n·10^(guard − dps)·max|K| = 2e-30 at dps 40, guard 10
    r = psd_mp(np.array([[1.0, 0.0], [0.0, -1e-30]]), dps=DPS)
    assert r.is_psd and r.rank == 1
    r = psd_mp(np.array([[1.0, 0.0], [0.0, -1e-20]]), dps=DPS)
    assert not r.is_psd and r.witness_value < 0
    assert "NOT PSD" in r.explain()


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: psd_float(np.zeros((2, 3)), "float64"), ValueError, "square"),
        (lambda: psd_float(np.array([[1.0, np.nan], [np.nan, 1.0]]), "float64"), ValueError, "NaN"),
        (lambda: psd_float(np.eye(2), "float8"), KeyError, "known"),
        (lambda: psd_float(np.eye(2), "float64", entry_error=-1.0), ValueError, "entry_error"),
        (lambda: psd_mp(linear), ValueError, "points"),
        (lambda: psd_mp(linear, np.array([[np.inf, 0.0]])), ValueError, "NaN or Inf"),
        (lambda: psd_mp(np.eye(2), np.eye(2)), ValueError, "only used"),
        (lambda: psd_mp(np.array([[1, 2], [3, 4]], dtype=object)), ValueError, "symmetric"),
        (lambda: psd_mp(np.eye(2), dps=20, guard=16), ValueError, "guard"),
    ],
)
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_asymmetry_beyond_the_entry_error_is_reported():
    k = np.array([[2.0, 1.0], [1.0 + 1e-6, 2.0]])
    r = psd_float(k, "float64")
    assert not r.is_psd and "not symmetric" in r.reason
    assert psd_float(k, "float16").is_psd  # within float16 rounding of the entries
