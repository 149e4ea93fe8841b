"""mpmath references of the target kernels ``k(x, y)``.

A kernel is registered with :func:`mp_kernel`::

    @mp_kernel("gaussian")
    def _gaussian(x, y, *, sigma):   # x, y: object arrays (d,) of mpf; returns an mpf
        ...

It runs at the working precision chosen by the caller (:func:`kernel_mp`, :func:`gram_mp`); its
inputs were converted exactly from floats, and :func:`gram_reference` rounds the result once.
``kernel_params`` values may be Python scalars (floats are converted exactly to mpf, ints stay
ints) or float64 arrays (converted exactly to mp arrays), for learned kernels.
Another module may register more kernels (``verify/references/kernels_catalogue.py`` is imported
at the end of this module if present).

Kernels here (docs/math.md §0–§3):

* ``gaussian(sigma)``: ``exp(−‖x−y‖²/(2σ²))``;
* ``softmax``: ``exp(xᵀy)``;
* ``arccos1``: ``‖x‖‖y‖(sin θ + (π−θ)cos θ)/(2π) = E relu(wᵀx)·relu(wᵀy)`` for
  ``w ~ N(0, I)``, ``θ = ∠(x, y)``; 0 if either vector is 0. Mind the convention: Cho & Saul
  (2009) define ``k₁ = ‖x‖‖y‖(sin θ + (π−θ)cos θ)/π``, twice this, the mean of features
  ``√(2/m)·relu(Wx)``; features ``relu(Wx)/√m`` (Performer's generalized attention) estimate
  this one;
* ``gaussian_fixed_norm(sigma)``: the mean of RFF with rows uniform on the sphere of radius √d,
  ``E cos(wᵀδ/σ) = Γ(d/2)(2/t)^(d/2−1) J_(d/2−1)(t) = ₀F₁(; d/2; −t²/4)``, ``t = √d‖δ‖/σ``
  (the ``₀F₁`` form is the series of ``J_ν`` and needs no special case at ``t = 0``);
* ``softmax_fixed_norm``: the mean of SM⁺ (and SM⁺ₕ) with fixed-norm rows,
  ``Λ·E exp(wᵀs) = Λ·₀F₁(; d/2; d‖s‖²/4)``, ``Λ = exp(−(‖x‖²+‖y‖²)/2)``.

Stationary kernels a user may declare (no built-in map; docs/math.md §24), each with a length
and its spectral law (Bochner: ``k(δ) = E cos(ωᵀδ)``):

* ``laplacian(sigma)``: ``exp(−‖x−y‖₁/σ)``, ω with i.i.d. Cauchy(0, 1/σ) coordinates (Rahimi &
  Recht 2007, Figure 1);
* ``matern(nu, lengthscale)``, ``ν ∈ {1/2, 3/2, 5/2}``: the closed forms of Rasmussen & Williams
  2006, §4.2, ``r = ‖x−y‖₂``; ω = t/ℓ with t multivariate Student t of 2ν degrees of freedom
  (its spectral density, ibid.);
* ``cauchy(sigma)``: ``1/(1 + ‖x−y‖²/σ²)`` (rational quadratic, α = 1; ibid.); ω the symmetric
  multivariate Laplace law ``√(2W)/σ·z``, ``W ~ Exp(1)``, ``z ~ N(0, I)`` (Kotz, Kozubowski &
  Podgórski 2001: characteristic function ``1/(1 + ½tᵀΣt)``; derived in docs/math.md §24).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.inputs import check_array
from kernel_verify.verify.references.mp import to_float, to_mp, working_precision
from kernel_verify.verify.references.spec import MapSpec, require_map

__all__ = [
    "MP_KERNELS",
    "gram_mp",
    "gram_reference",
    "kernel_formula",
    "kernel_mp",
    "matern_two_nu",
    "mean_gram",
    "mp_kernel",
    "target_gram",
]

KernelFn = Callable[..., Any]

#: kernel id -> ``fn(x, y, **kernel_params) -> mpf``. Filled by :func:`mp_kernel`.
MP_KERNELS: dict[str, KernelFn] = {}


def mp_kernel(kernel_id: str) -> Callable[[KernelFn], KernelFn]:
    """Register ``fn(x, y, **kernel_params) -> mpf`` as the reference of ``kernel_id``."""
    if not isinstance(kernel_id, str) or not kernel_id:
        raise TypeError(f"kernel_id must be a non-empty str, got {kernel_id!r}")

    def decorate(fn: KernelFn) -> KernelFn:
        if kernel_id in MP_KERNELS:
            raise ValueError(f"mp kernel {kernel_id!r} is registered twice")
        MP_KERNELS[kernel_id] = fn
        return fn

    return decorate


def _lookup(kernel_id: str) -> KernelFn:
    try:
        return MP_KERNELS[kernel_id]
    except KeyError:
        raise KeyError(
            f"no mpmath reference for kernel {kernel_id!r}; known: {', '.join(sorted(MP_KERNELS))}"
        ) from None


def kernel_formula(kernel_id: str, **kernel_params: Any) -> str:
    """``kernel_id(params)`` and, where its reference states one (the first line of its
    docstring), the formula the suite evaluates: for failure messages, so that a convention the
    kernel fixes (the Taylor kernel's ``t = xᵀy/√d``) is in front of the reader."""
    shown = ", ".join(f"{k}={v!r}" for k, v in kernel_params.items()
                      if not isinstance(v, np.ndarray))
    head = f"{kernel_id}({shown})"
    doc = (getattr(MP_KERNELS.get(kernel_id), "__doc__", None) or "").strip().splitlines()
    return f"{head}: {doc[0].strip()}" if doc else head


def _convert_params(kernel_params: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in kernel_params.items():
        if isinstance(value, bool):
            out[key] = value
        elif isinstance(value, int | np.integer):
            out[key] = int(value)
        elif isinstance(value, float | np.floating):
            if not np.isfinite(value):
                raise ValueError(f"kernel parameter {key!r} must be finite, got {value}")
            out[key] = mpmath.mpf(float(value))
        elif isinstance(value, np.ndarray):
            check_array(f"kernel parameter {key!r}", value, min_ndim=0)
            out[key] = to_mp(value)
        else:
            out[key] = value
    return out


def _as_points(name: str, a: Any, ndim: int) -> np.ndarray:
    if isinstance(a, np.ndarray) and a.dtype == object:
        if a.ndim != ndim:
            raise ValueError(f"{name} must have {ndim} dimensions, got shape {a.shape}")
        return a
    check_array(name, a, min_ndim=ndim, backend="numpy")
    if a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {a.shape}")
    return to_mp(a)


def kernel_mp(kernel_id: str, x: Any, y: Any, *, dps: int | None = None, **kernel_params: Any):
    """``k(x, y)`` as an mpf at ``dps`` digits; ``x``, ``y`` float arrays (d,) or mp arrays."""
    fn = _lookup(kernel_id)
    with working_precision(dps):
        xm, ym = _as_points("x", x, 1), _as_points("y", y, 1)
        if xm.shape != ym.shape:
            raise ValueError(f"x and y must have the same shape, got {xm.shape} and {ym.shape}")
        return fn(xm, ym, **_convert_params(kernel_params))


def gram_mp(kernel_id: str, X: Any, Y: Any, *, dps: int | None = None, **kernel_params: Any):
    """The Gram matrix ``[k(X_i, Y_j)]`` as an mp array ``(n_X, n_Y)``; X, Y of shape (n, d)."""
    fn = _lookup(kernel_id)
    with working_precision(dps):
        xm, ym = _as_points("X", X, 2), _as_points("Y", Y, 2)
        if xm.shape[1] != ym.shape[1]:
            raise ValueError(f"X and Y must share the last dimension, got {xm.shape}, {ym.shape}")
        params = _convert_params(kernel_params)
        out = np.empty((xm.shape[0], ym.shape[0]), dtype=object)
        for i in range(xm.shape[0]):
            for j in range(ym.shape[0]):
                out[i, j] = fn(xm[i], ym[j], **params)
        return out


def gram_reference(
    kernel_id: str,
    X: np.ndarray,
    Y: np.ndarray,
    *,
    dtype: np.dtype | type = np.float64,
    dps: int | None = None,
    **kernel_params: Any,
) -> np.ndarray:
    """:func:`gram_mp` rounded once to ``dtype``."""
    return to_float(gram_mp(kernel_id, X, Y, dps=dps, **kernel_params), dtype)


def _entry_check(entry: MapSpec) -> None:
    require_map(entry)


def target_gram(entry: MapSpec, X: np.ndarray, Y: np.ndarray, dps: int | None = None):
    """The mp Gram matrix of ``entry``'s target kernel (``entry.kernel`` with
    ``entry.kernel_args(d)``)."""
    _entry_check(entry)
    params = entry.kernel_args(np.shape(X)[-1])
    return gram_mp(entry.kernel, X, Y, dps=dps, **params)


def mean_gram(entry: MapSpec, X: np.ndarray, Y: np.ndarray, dps: int | None = None):
    """The mp Gram matrix of ``E φ(x)ᵀφ(y)``: ``entry.mean_kernel`` for a biased map that names
    one, the target kernel for an unbiased map; a ValueError otherwise."""
    _entry_check(entry)
    if entry.mean_kernel is not None:
        params = entry.kernel_args(np.shape(X)[-1])
        return gram_mp(entry.mean_kernel, X, Y, dps=dps, **params)
    if entry.has("unbiased") or entry.has("deterministic") or entry.has("exact_finite"):
        return target_gram(entry, X, Y, dps=dps)
    raise ValueError(f"map {entry.name!r} is biased and names no mean_kernel")


# --------------------------------------------------------------------------------------------


def _dot(x: np.ndarray, y: np.ndarray):
    return mpmath.fsum(a * b for a, b in zip(x, y, strict=True))


def _sigma(sigma: Any) -> Any:
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    return sigma


@mp_kernel("gaussian")
def _gaussian(x: np.ndarray, y: np.ndarray, *, sigma: Any = 1) -> Any:
    delta = x - y
    return mpmath.exp(-_dot(delta, delta) / (2 * _sigma(sigma) ** 2))


#: The Matérn smoothness values with a closed form (half-integers): ``2ν`` -> the coefficients
#: ``(a₀, a₁, a₂)`` (exact fractions) of the polynomial ``a₀ + a₁u + a₂u²`` in ``u = √(2ν)·r/ℓ``
#: that multiplies ``e^(−u)`` (Rasmussen & Williams 2006, §4.2).
MATERN_NU: dict[int, tuple[Fraction, Fraction, Fraction]] = {
    1: (Fraction(1), Fraction(0), Fraction(0)),
    3: (Fraction(1), Fraction(1), Fraction(0)),
    5: (Fraction(1), Fraction(1), Fraction(1, 3)),
}


def _positive(name: str, value: Any) -> Any:
    if isinstance(value, bool) or not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def matern_two_nu(nu: Any) -> int:
    """``2ν`` for ``nu`` among 1/2, 3/2, 5/2 (exactly: 0.5, 1.5, 2.5 or their mpf), else a
    ValueError naming the choices."""
    twice = None
    if not isinstance(nu, bool | str):
        try:
            twice = 2 * mpmath.mpf(nu)
        except (TypeError, ValueError):
            twice = None
    if twice is None or twice not in (1, 3, 5):
        raise ValueError("nu must be one of 0.5, 1.5, 2.5 (the closed-form Matérn kernels), "
                         f"got {nu}")
    return int(twice)


def _mpq(q: Fraction) -> Any:
    return mpmath.mpf(q.numerator) / q.denominator


@mp_kernel("laplacian")
def _laplacian(x: np.ndarray, y: np.ndarray, *, sigma: Any = 1) -> Any:
    """exp(−‖x − y‖₁/σ), the L1 distance (Rahimi & Recht 2007)"""
    l1 = mpmath.fsum(abs(a - b) for a, b in zip(x, y, strict=True))
    return mpmath.exp(-l1 / _positive("sigma", sigma))


@mp_kernel("matern")
def _matern(x: np.ndarray, y: np.ndarray, *, nu: Any, lengthscale: Any = 1) -> Any:
    """(1 + u·[ν ≥ 3/2] + u²/3·[ν = 5/2])·e^(−u), u = √(2ν)‖x − y‖₂/ℓ (Matérn, ν ∈ {1/2, 3/2, 5/2})

    With ``r = ‖x − y‖₂``: ``exp(−r/ℓ)``; ``(1 + √3r/ℓ)e^(−√3r/ℓ)``;
    ``(1 + √5r/ℓ + 5r²/(3ℓ²))e^(−√5r/ℓ)`` (:data:`MATERN_NU`; Rasmussen & Williams 2006, §4.2;
    docs/math.md §24)."""
    two_nu = matern_two_nu(nu)
    delta = x - y
    u = mpmath.sqrt(two_nu * _dot(delta, delta)) / _positive("lengthscale", lengthscale)
    a0, a1, a2 = (_mpq(a) for a in MATERN_NU[two_nu])
    return (a0 + a1 * u + a2 * u * u) * mpmath.exp(-u)


@mp_kernel("cauchy")
def _cauchy(x: np.ndarray, y: np.ndarray, *, sigma: Any = 1) -> Any:
    """1/(1 + ‖x − y‖²/σ²), the rational quadratic with α = 1 (Rasmussen & Williams 2006, §4.2)"""
    delta = x - y
    return 1 / (1 + _dot(delta, delta) / _positive("sigma", sigma) ** 2)


@mp_kernel("softmax")
def _softmax(x: np.ndarray, y: np.ndarray) -> Any:
    return mpmath.exp(_dot(x, y))


@mp_kernel("arccos1")
def _arccos1(x: np.ndarray, y: np.ndarray) -> Any:
    nxy = mpmath.sqrt(_dot(x, x) * _dot(y, y))  # one rounding: cos θ = −1 exactly for y = −x
    if nxy == 0:
        return mpmath.mpf(0)
    cos_t = min(max(_dot(x, y) / nxy, mpmath.mpf(-1)), mpmath.mpf(1))
    # sin θ = √(1−cos²θ), π − θ = acos(−cos θ): both exactly 0 for opposite vectors
    sin_t, rest = mpmath.sqrt(1 - cos_t * cos_t), mpmath.acos(-cos_t)
    return nxy * (sin_t + rest * cos_t) / (2 * mpmath.pi)


@mp_kernel("gaussian_fixed_norm")
def _gaussian_fixed_norm(x: np.ndarray, y: np.ndarray, *, sigma: Any = 1) -> Any:
    d = len(x)
    delta = x - y
    t2 = d * _dot(delta, delta) / _sigma(sigma) ** 2  # t² = d‖δ‖²/σ²
    return mpmath.hyp0f1(mpmath.mpf(d) / 2, -t2 / 4)


@mp_kernel("softmax_fixed_norm")
def _softmax_fixed_norm(x: np.ndarray, y: np.ndarray) -> Any:
    d = len(x)
    s = x + y
    log_lam = -(_dot(x, x) + _dot(y, y)) / 2
    return mpmath.exp(log_lam) * mpmath.hyp0f1(mpmath.mpf(d) / 2, d * _dot(s, s) / 4)


def _import_extension(name: str) -> None:
    # The catalogue modules register the remaining twins; they are part of the project, so a
    # missing one is an ImportError, never a silently smaller set of references.
    importlib.import_module(name)


_import_extension("kernel_verify.verify.references.kernels_catalogue")
