"""The input scale of a feature map's declared kernel: where the statistical properties draw
their points (issue #44, item 3).

A property that draws ``x, y`` in the unit ball tests a Gaussian kernel of bandwidth ``σ = 10``
where ``k ≈ 1`` and one of ``σ = 0.05`` where ``k ≈ 0``: the kernel hardly varies over the
inputs, and a map using the wrong scale (``σ²`` for ``σ``, a missing ``1/ℓ``) passes. So every
statistical property on a feature map draws its points at unit scale, as before, and multiplies
them by :func:`kernel_scales` — the characteristic length of the declared kernel
(``target.kernel`` with ``target.kernel_args(d)``):

* a **declared length parameter** (:data:`LENGTH_PARAMS`: ``sigma``, ``lengthscale``,
  ``length_scale``, ``ell``, ``bandwidth``; a positive scalar): that value. For a stationary
  kernel ``k_ℓ(x, y) = k_1(x/ℓ, y/ℓ)`` (Gaussian ``exp(−‖δ‖²/(2σ²))`` and its fixed-norm mean;
  the Laplacian and Cauchy kernels' ``sigma``, the Matérn kernel's ``lengthscale``:
  docs/math.md §24), so ``k_ℓ(ℓx, ℓy) = k_1(x, y)``: the scaled points see the kernel exactly
  where a unit-scale kernel is seen at the unit points (``k`` between ``e^(−1.6²/2) ≈ 0.28``
  and 1 over the unit ball; 0.03–1 at the norms up to 1.2 of the mean tests);
* a **spectral mixture** (Cholesky-type factors ``L`` of shape ``(C, d, d)`` with a stationary
  kernel, checked by :func:`_stationary`): one frame per component. The component
  ``exp(−‖L_cδ‖²/2)`` of a unit-scale difference ``δ_u`` is seen at the points
  ``x = L_c⁻¹x_u`` (:func:`to_kernel_scale`): ``‖L_c δ‖ = ‖δ_u‖`` along *every* direction, so an
  anisotropic (ARD) component with lengths 0.1 and 10 varies over the drawn points along both
  axes, and a map that gets one axis's length wrong shows where a single length would hide it
  (the points of norm 0.14 that ``√d/‖L_c‖_F`` gives see the long axis only at ~1 % of its
  length). A factor too ill-conditioned to invert (condition number above 1e8) falls back to the
  single length ``ℓ_c = √d/‖L_c‖_F``, the distance along a random direction at which the
  component reaches ``e^(−1/2)`` on average; :func:`kernel_scales` gives these single lengths
  (a scalar summary for messages and step sizes). A property picks one component per example
  (:func:`scale_for`, :func:`to_kernel_scale`), so the drawn points span every component;
* **otherwise 1**: dot-product and softmax-type kernels (``exp(xᵀy)``, arc-cosine, polynomial,
  Taylor: their scale is that of the inputs themselves, the unit scale the properties were
  written for), and learned stationary kernels whose length is not a declared parameter (the
  generative kernel's spectral MLP). Built-in maps of unit scale therefore draw exactly the
  points they drew before (the scale is the float 1.0 and ``1.0·x = x``), and keep their
  verdicts.

The false-alarm rates of the tests are unchanged: every test (Bernstein/Hoeffding with the
formula's range, median of means with the exact variance, the pilot-variance test) is derived
for *any* fixed inputs. The only input-dependent bounds are the ranges of the exponential and
ReLU maps (``point_range``: they read the scaled points themselves) and the exact moments
(evaluated at the scaled points); none assumes ``‖x‖ ≤ 1``. docs/math.md, "Inputs at the
kernel's scale".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["LENGTH_PARAMS", "curvature_length", "kernel_frames", "kernel_scales", "scale_for",
           "to_kernel_scale"]

#: Kernel parameters that are a length (a bandwidth of a stationary kernel).
LENGTH_PARAMS = ("sigma", "lengthscale", "length_scale", "ell", "bandwidth")


def _length(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def _stationary(kernel: str, params: dict[str, Any], d: int) -> bool:
    """``k(x + c, y + c) = k(x, y)`` at a fixed generic point, at 30 digits, to 1e-20 relative
    to ``|k(x, y)| + 1e-30`` (a shift-invariant kernel holds it to rounding; a softmax-type
    mixture such as GMM-PRF's misses it by O(1))."""
    from kernel_verify.verify.references.kernels import kernel_mp

    # dyadic points: x + c and y + c are exact in float64, so the shift is exact
    from kernel_verify.verify.seeds import rng as seeded

    rng = seeded(0, "kernel_scale", "stationarity_probe")
    x, y, c = (rng.integers(-8, 9, d) / 16.0 for _ in range(3))
    try:
        a = kernel_mp(kernel, x, y, dps=30, **params)
        b = kernel_mp(kernel, x + c, y + c, dps=30, **params)
    except Exception:  # a kernel that cannot be evaluated here has no scale
        return False
    return bool(abs(float(a - b)) <= 1e-20 * (abs(float(a)) + 1e-30))


#: A factor whose condition number exceeds this is not inverted (its single length is used).
MAX_CONDITION = 1e8

Frame = float | np.ndarray


def _compute(kernel: str, params: dict[str, Any], d: int) -> tuple[tuple[float, ...],
                                                                     tuple[Frame, ...]]:
    """(single lengths sorted, frames in component order)."""
    for name in LENGTH_PARAMS:
        if name in params and _length(params[name]) is not None:
            v = float(_length(params[name]))  # type: ignore[arg-type]
            return (v,), (v,)
    factors = params.get("L")
    if isinstance(factors, np.ndarray) and factors.ndim == 3 and factors.shape[1:] == (d, d):
        factors = factors.astype(np.float64)
        if np.isfinite(factors).all() and _stationary(kernel, params, d):
            lengths = [math.sqrt(d) / float(np.linalg.norm(f)) for f in factors]
            if all(math.isfinite(v) and v > 0 for v in lengths):
                frames: list[Frame] = []
                for f, single in zip(factors, lengths, strict=True):
                    if np.linalg.cond(f) <= MAX_CONDITION:
                        frames.append(np.linalg.inv(f))
                    else:
                        frames.append(single)
                return tuple(sorted(set(lengths))), tuple(frames)
    return (1.0,), (1.0,)


#: (kernel, exact key of its arguments, d) -> (lengths, frames) (the probe runs once).
_CACHE: dict[tuple, tuple[tuple[float, ...], tuple[Frame, ...]]] = {}


def _key(params: dict[str, Any]) -> tuple:
    """An exact, hashable key of the kernel's arguments (arrays by dtype, shape and bytes)."""
    parts = []
    for k in sorted(params):
        v = params[k]
        if isinstance(v, np.ndarray):
            parts.append((k, v.dtype.str, v.shape, v.tobytes()))
        else:
            parts.append((k, repr(v)))
    return tuple(parts)


def kernel_scales(target: Any, d: int) -> tuple[float, ...]:
    """The characteristic lengths of ``target``'s declared kernel at dimension ``d`` (module
    docstring): one value, or one per mixture component (sorted); ``(1.0,)`` for a kernel
    without a length. ``target``: anything with ``kernel`` and ``kernel_args(d)``."""
    return _computed(target, d)[0]


def _computed(target: Any, d: int) -> tuple[tuple[float, ...], tuple[Frame, ...]]:
    if not isinstance(d, int | np.integer) or isinstance(d, bool) or d < 1:
        raise ValueError(f"d must be a positive integer, got {d!r}")
    try:
        params = dict(target.kernel_args(int(d)))
    except Exception:  # kernel arguments that fail here fail in the property
        return (1.0,), (1.0,)
    key = (str(target.kernel), _key(params), int(d))
    if key not in _CACHE:
        _CACHE[key] = _compute(str(target.kernel), params, int(d))
    return _CACHE[key]


def kernel_frames(target: Any, d: int) -> tuple[Frame, ...]:
    """Per component of the declared kernel, the map from unit-scale points to its scale: a
    float (multiply) or a ``(d, d)`` matrix ``L_c⁻¹`` (module docstring)."""
    return _computed(target, d)[1]


#: (kernel, exact key of its arguments, d) -> curvature length or None.
_CURVATURE: dict[tuple, float | None] = {}


def curvature_length(target: Any, d: int) -> float | None:
    """The length over which the features of ``target``'s declared stationary kernel vary:
    ``ℓ_κ = √(d·k(0)/(−Δk(0)))``. For ``k(δ) = E cos(ωᵀδ)`` (Bochner), ``−Δk(0) = E‖ω‖²·k(0)``,
    so ``ℓ_κ = √d/ω_rms``: ``σ`` for a Gaussian of bandwidth σ, but much shorter than the
    kernel's decay length for a spectral-mixture component whose mean frequency ``μ`` is far
    from 0 (``ω_rms² = ‖μ‖² + tr Σ``), whose features oscillate at ``|μ|`` inside an envelope of
    length ℓ. Computed in mpmath (40 digits) by ``k(0) − k(h·e_i) = h²·E ω_i²/2 + O(h⁴)`` at
    ``h = 10⁻¹²`` (and ``2·10⁻¹²``, which must agree); None for a kernel that is not stationary,
    cannot be evaluated, or has no finite curvature (a kink at 0: Laplacian, Matérn ν = 1/2)."""
    try:
        params = dict(target.kernel_args(int(d)))
    except Exception:
        return None
    key = (str(target.kernel), _key(params), int(d))
    if key not in _CURVATURE:
        _CURVATURE[key] = _curvature(str(target.kernel), params, int(d))
    return _CURVATURE[key]


#: Two steps of the curvature's differences: a smooth kernel gives the same ``E‖ω‖²`` at both
#: (to ``O(h²)``), a kink at 0 (``k(0) − k(h·e) ∝ h``: ``E‖ω‖² = ∞``) twice as much at the first.
CURVATURE_STEPS = (1e-12, 2e-12)


def _second_moment(kernel: str, params: dict[str, Any], d: int, h: float) -> float:
    """``E‖ω‖²`` from ``k(0) − k(h·e_i) = h²·E ω_i²/2 + O(h⁴)`` at 40 digits."""
    from kernel_verify.verify.references.kernels import kernel_mp

    zero = np.zeros(d)
    k0 = kernel_mp(kernel, zero, zero, dps=40, **params)
    total = sum(k0 - kernel_mp(kernel, h * np.eye(d)[i], zero, dps=40, **params)
                for i in range(d))
    return float(2 * total / (h * h * k0))


def _curvature(kernel: str, params: dict[str, Any], d: int) -> float | None:
    """``√(d/E‖ω‖²)``, or None where ``E‖ω‖²`` is not finite: the two steps of
    :data:`CURVATURE_STEPS` disagree by more than 1e-6 relative (the Laplacian's and Matérn
    ν = 1/2's kink at 0, whose Cauchy and Student-t₁ frequencies have no second moment)."""
    if not _stationary(kernel, params, d):
        return None
    try:
        fine, coarse = (_second_moment(kernel, params, d, h) for h in CURVATURE_STEPS)
    except Exception:  # a kernel that cannot be evaluated here has no curvature length
        return None
    if not all(math.isfinite(r) and r > 0 for r in (fine, coarse)):
        return None
    if abs(fine - coarse) > 1e-6 * coarse:
        return None
    return math.sqrt(d / fine)


def scale_for(target: Any, d: int, choice: int) -> float:
    """One length of :func:`kernel_scales` for an example: the ``choice``-th (mod their count;
    ``choice`` is a value the example already drew, e.g. its seed), so that the examples of a
    property span every component of a mixture."""
    scales = kernel_scales(target, d)
    return scales[int(choice) % len(scales)]


def to_kernel_scale(target: Any, d: int, choice: int, points: Any) -> np.ndarray:
    """``points`` (``(..., d)``, drawn at unit scale) at the scale of one component of the
    declared kernel: the ``choice``-th frame of :func:`kernel_frames` (mod their count), a
    length times the points or ``L_c⁻¹`` applied to each point. Linear, so a difference of
    mapped points is the mapped difference."""
    frames = kernel_frames(target, d)
    frame = frames[int(choice) % len(frames)]
    x = np.asarray(points, dtype=np.float64)
    if isinstance(frame, np.ndarray):
        return x @ frame.T
    return x * frame
