"""The tolerance model: per-dtype, per-device error budgets, all in one table.

Every accuracy assertion of the suite takes its tolerance from here, so that no dtype or device
falls back to a default by accident (an unknown ``(dtype, device)`` is a ``KeyError`` that lists
what exists).

Model (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §2.2 and §3.1):

* ``u = 2^-p`` is the unit roundoff of a format with ``p`` significand bits (round to nearest):
  float64 ``2^-53``, float32 ``2^-24``, float16 ``2^-11``, bfloat16 ``2^-8``.
* ``γ_n = n·u/(1 − n·u)``. A dot product or sum of ``n`` terms computed in *any* order satisfies
  ``|fl(Σ tᵢ) − Σ tᵢ| ≤ γ_n·Σ|tᵢ|`` (Higham eq. 3.5; with FMA or pairwise/blocked summation the
  bound only improves). The bound uses ``Σ|tᵢ|``, not ``|Σ tᵢ|``: cancellation cannot cause a false
  alarm, and an error larger than the bound is a real error.
* Elementary functions (exp, log, cos, sin, sqrt) are measured in ulps of the *compute* dtype
  against the correctly rounded value. half types (float16, bfloat16) are computed in float32 and
  rounded once more to the half type: ``+0.5`` ulp of the half type (``impls.torch.convert``).

The ulp figures per (dtype, device), and where they come from:

* CPU float64: 1 ulp for exp/log/cos/sin — glibc libm ("Known Maximum Errors in Math Functions"),
  NumPy's own accuracy tables (``numpy/_core/tests/data/umath-validation-set-*.csv``: 1 ulp for
  float64) and SLEEF ``u10`` kernels used by torch (1.0 ulp). sqrt: IEEE 754 requires a correctly
  rounded sqrt (0.5 ulp), but torch's vectorised CPU sqrt was measured at 1.0 ulp on this suite's
  machine (``tests/test_tolerance.py`` checks every entry empirically), so the table says 1.
* CPU float32: 4 ulp for exp/log/cos/sin — NumPy's AVX2/AVX-512 float32 paths are validated at
  3 (exp), 4 (log), 2 (sin, cos) ulp in the same tables; torch's SLEEF ``u10`` paths are 1 ulp.
  sqrt 1 ulp (as for float64).
* CUDA (standard, non-fast-math device functions; CUDA C++ Programming Guide, appendix
  "Mathematical Functions", maximum ulp error tables **[recall]**): float32 expf 2, logf 1,
  sinf 2, cosf 2, sqrtf 0 (correctly rounded by default, ``-prec-sqrt=true``); float64 exp 1,
  log 1, sin 2, cos 2, sqrt 0. Measured against the correctly rounded value, a correctly rounded
  result is 0.5 ulp away, so the table stores ``max(listed, 0.5)``. Fast-math intrinsics
  (``__expf``, ``__sinf``) have no ulp bound and are not covered: accuracy checks must not run
  with ``--use_fast_math`` builds. Matrix products on CUDA must run with TF32 disabled (the
  property suite does this in ``properties/conftest.py``): TF32 has ``u = 2^-11``.

The reference of every comparison is the exact value rounded to float64, which is itself up to
0.5 ulp (float64) away from the exact value; every bound here adds that term.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

__all__ = [
    "BUDGETS",
    "ELEMENTARY",
    "EPS64",
    "FORMATS",
    "U64",
    "Budget",
    "budget_for",
    "device_name",
    "dot_error_bound",
    "dtype_name",
    "elementwise_bound",
    "gamma",
    "native_budget_for",
    "real_gamma",
    "ulp",
    "unit_roundoff",
]


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: ``p`` significand bits (implicit bit included),
    exponents of normal numbers in ``[emin, emax]``."""

    name: str
    p: int
    emin: int
    emax: int

    @property
    def u(self) -> float:
        """Unit roundoff ``2^-p`` (round to nearest)."""
        return math.ldexp(1.0, -self.p)

    @property
    def tiny(self) -> float:
        """The smallest positive subnormal ``2^(emin − p + 1)``."""
        return math.ldexp(1.0, self.emin - self.p + 1)


#: The formats the suite knows (IEEE 754 binary64/32/16 and Google's bfloat16).
FORMATS: Mapping[str, FloatFormat] = MappingProxyType(
    {
        "float64": FloatFormat("float64", 53, -1022, 1023),
        "float32": FloatFormat("float32", 24, -126, 127),
        "float16": FloatFormat("float16", 11, -14, 15),
        "bfloat16": FloatFormat("bfloat16", 8, -126, 127),
    }
)

#: The elementary functions every budget covers.
ELEMENTARY = ("exp", "log", "cos", "sin", "sqrt")

_F64_REF_ULPS = 0.5  # the float64 reference is the exact value rounded to nearest


def dtype_name(dtype: Any) -> str:
    """``'float64'`` … for a NumPy dtype or scalar type, a torch dtype, an array/tensor, or a
    name (``'float32'``, ``'torch.bfloat16'``). Unknown dtypes are a ``KeyError`` listing the
    known ones; an object that is no dtype at all is a ``TypeError``."""
    if hasattr(dtype, "dtype") and not isinstance(dtype, type | np.dtype):
        dtype = dtype.dtype  # an array or tensor
    if isinstance(dtype, str):
        name = dtype.removeprefix("torch.").removeprefix("numpy.")
    elif type(dtype).__module__.startswith("torch"):
        name = str(dtype).removeprefix("torch.")
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            raise TypeError(
                f"dtype must be a NumPy/torch dtype or a dtype name, got {type(dtype).__name__}"
            ) from None
    if name not in FORMATS:
        raise KeyError(f"unknown dtype {name!r}; known: {', '.join(FORMATS)}")
    return name


def device_name(device: Any) -> str:
    """``'cpu'`` or ``'cuda'`` for ``'cpu'``, ``'cuda:1'``, a ``torch.device``, or a backend name
    (``'numpy'``, ``'torch:cpu'``, ``'torch:cuda'``). Anything else is a ``KeyError``."""
    text = str(device).removeprefix("torch:")
    if text == "numpy":
        return "cpu"
    kind = text.split(":", 1)[0]
    if kind not in ("cpu", "cuda"):
        raise KeyError(f"unknown device {device!r}; known: cpu, cuda (and numpy, torch:<device>)")
    return kind


#: Unit roundoff of float64, ``u₆₄ = 2⁻⁵³`` (round to nearest; Higham §2.1): the one definition
#: every check imports. ``EPS64 = 2u₆₄ = 2⁻⁵²`` is float64's machine epsilon (LAPACK's ε).
U64: float = 2.0**-53
EPS64: float = 2.0**-52


def unit_roundoff(dtype: Any) -> float:
    """``u = 2^-p`` of ``dtype`` (float64 ``2^-53``, float32 ``2^-24``, float16 ``2^-11``,
    bfloat16 ``2^-8``); Higham §2.1."""
    return FORMATS[dtype_name(dtype)].u


#: Slack for a bound evaluated in floating point: ``1 + 2⁻²³``. A bound summed and multiplied
#: from non-negative float64 terms with ``k`` roundings (each relative ≤ u = 2⁻⁵³) is at least
#: ``(1 − u)^k ≥ 1 − 1.01·k·u`` times its exact value (Higham Lemma 3.1), and
#: ``1 + 2⁻²³ ≥ 1/(1 − 1.01·k·u)`` for every ``k ≤ 10⁹``; multiplying by it restores a bound
#: whose evaluation took up to 10⁹ roundings (the checks here take at most thousands).
EVALUATION_SLACK = 1.0 + 2.0**-23


def reference_rounding(ref, u: float = 2.0**-53):
    """Bound term for a high-precision reference ``r`` rounded once to nearest float64:
    ``ref = fl(r)`` has ``|ref − r| ≤ u|r| ≤ u/(1 − u)·|ref|`` (Higham (2.4)), and
    ``u/(1 − u) < EVALUATION_SLACK·u`` (:data:`EVALUATION_SLACK` ≫ 1/(1 − u)), which also covers
    this term's own evaluation. Elementwise on arrays."""
    return EVALUATION_SLACK * u * np.abs(ref)


def real_gamma(k: float, u: float) -> float:
    """``γ_k = k·u/(1 − k·u)`` for a real count ``k ≥ 0`` (Higham Lemma 3.1): the forward error
    rules count an elementary function's ulps as fractional roundings, so ``k`` need not be an
    integer (:mod:`kernel_verify.verify.references.features`). ``ValueError`` when ``k·u ≥ 1``.
    :func:`gamma` is the same for an integer count, with its arguments checked."""
    if k * u >= 1:
        raise ValueError(f"gamma_k undefined: k*u = {k * u} >= 1")
    return k * u / (1 - k * u)


def gamma(n: int, u: float) -> float:
    """``γ_n = n·u/(1 − n·u)`` (Higham Lemma 3.1); a ``ValueError`` when ``n·u ≥ 1``."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise TypeError(f"n must be an integer, got {type(n).__name__}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not (isinstance(u, int | float | np.floating) and 0.0 < float(u) < 1.0):
        raise ValueError(f"u must be a unit roundoff in (0, 1), got {u!r}")
    nu = int(n) * float(u)
    if nu >= 1.0:
        raise ValueError(f"gamma is undefined for n·u >= 1 (n={n}, u={u}): the bound is void")
    return real_gamma(int(n), float(u))


def ulp(x: Any, dtype: Any) -> np.ndarray:
    """The spacing of ``dtype`` at ``|x|``: ``2^(max(e, emin) − p + 1)`` with ``e = ⌊log₂|x|⌋``.

    ``ulp(0)`` is the smallest subnormal. Works on float64 values of any magnitude (the answer
    is a float64 array); infinities and NaN give NaN."""
    fmt = FORMATS[dtype_name(dtype)]
    a = np.abs(np.asarray(x, dtype=np.float64))
    finite = np.isfinite(a)
    _, e = np.frexp(np.where(finite, a, 1.0))  # a = m·2^e, m ∈ [0.5, 1): ⌊log₂ a⌋ = e − 1
    e = np.maximum(np.where(a > 0, e - 1, fmt.emin), fmt.emin)
    out = np.ldexp(1.0, (e - (fmt.p - 1)).astype(np.int64))
    return np.where(finite, out, np.nan)


@dataclass(frozen=True)
class Budget:
    """The error budget of one (dtype, device).

    ``ulps[f]`` is the maximum error of elementary function ``f`` in ulps of ``compute_dtype``
    (against the correctly rounded value); ``output_round`` is the extra rounding, in ulps of
    ``dtype``, when the result is cast from ``compute_dtype`` back to ``dtype`` (0.5 for half
    types, else 0). ``source`` says where the figures come from."""

    dtype: str
    device: str
    compute_dtype: str
    ulps: Mapping[str, float]
    output_round: float
    source: str
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        missing = set(ELEMENTARY) - set(self.ulps)
        if missing:
            raise ValueError(f"budget {self.dtype}/{self.device} lacks ulps for {sorted(missing)}")

    @property
    def u(self) -> float:
        """Unit roundoff of the storage dtype."""
        return FORMATS[self.dtype].u

    @property
    def u_compute(self) -> float:
        """Unit roundoff of the dtype the arithmetic runs in."""
        return FORMATS[self.compute_dtype].u

    def describe(self) -> str:
        ulps = ", ".join(f"{k} {v:g}" for k, v in self.ulps.items())
        text = (
            f"{self.dtype} on {self.device} (computed in {self.compute_dtype}, u={self.u:.3g}, "
            f"u_compute={self.u_compute:.3g}); ulps: {ulps}"
        )
        if self.output_round:
            text += f"; +{self.output_round:g} ulp {self.dtype} for the cast back"
        return f"{text}. Source: {self.source}"


_CPU64 = "glibc libm ≤1 ulp; NumPy umath-validation-set float64 1 ulp; SLEEF u10 1 ulp (torch)"
_CPU32 = "NumPy umath-validation-set float32: exp 3, log 4, sin/cos 2 ulp; SLEEF u10 1 ulp"
_CUDA = "CUDA C++ Programming Guide, Mathematical Functions, max ulp tables [recall]"
_SQRT_CPU = "sqrt: IEEE correctly rounded in NumPy; torch CPU measured at 1 ulp"
_TF32 = "matmul accuracy assumes TF32 disabled (torch.backends.cuda.matmul.allow_tf32 = False)"


def _ulps(exp: float, log: float, cos: float, sin: float, sqrt: float) -> Mapping[str, float]:
    return MappingProxyType(
        {k: max(v, 0.5) for k, v in zip(ELEMENTARY, (exp, log, cos, sin, sqrt), strict=True)}
    )


def _build_budgets() -> dict[tuple[str, str], Budget]:
    cpu64 = _ulps(1, 1, 1, 1, 1)
    cpu32 = _ulps(4, 4, 4, 4, 1)
    cuda64 = _ulps(1, 1, 2, 2, 0)
    cuda32 = _ulps(2, 1, 2, 2, 0)
    half_note = "computed in float32 and rounded to the half type (impls.torch.convert)"
    table: dict[tuple[str, str], Budget] = {}
    for dev, u64, u32, src64, src32, notes in (
        ("cpu", cpu64, cpu32, _CPU64, _CPU32, (_SQRT_CPU,)),
        ("cuda", cuda64, cuda32, _CUDA, _CUDA, (_TF32,)),
    ):
        table["float64", dev] = Budget("float64", dev, "float64", u64, 0.0, src64, notes)
        table["float32", dev] = Budget("float32", dev, "float32", u32, 0.0, src32, notes)
        for half in ("float16", "bfloat16"):
            table[half, dev] = Budget(
                half, dev, "float32", u32, 0.5, f"{src32}; {half_note}", notes
            )
    return table


#: Every (dtype, device) the suite knows; nothing else has a budget.
BUDGETS: Mapping[tuple[str, str], Budget] = MappingProxyType(_build_budgets())


def budget_for(dtype: Any, device: Any = "cpu") -> Budget:
    """The budget of ``dtype`` (NumPy/torch dtype or name) on ``device`` (``'cpu'``, ``'cuda:0'``,
    a ``torch.device`` or a backend name). Unknown pairs are a ``KeyError`` naming what exists."""
    key = (dtype_name(dtype), device_name(device))
    try:
        return BUDGETS[key]
    except KeyError:
        known = ", ".join(f"{d}/{v}" for d, v in BUDGETS)
        raise KeyError(f"no budget for {key[0]}/{key[1]}; known: {known}") from None


def native_budget_for(dtype: Any, device: Any = "cpu") -> Budget:
    """The budget of a computation that runs *in* ``dtype`` itself: every intermediate rounded to
    ``dtype``, as third-party code does when it never upcasts a half type.

    For float64/float32 it is :func:`budget_for`'s. For float16/bfloat16 the compute dtype is
    the half type: each elementary operation is evaluated in float32 (torch's CPU and CUDA
    kernels upcast per operation) within the float32 table's ulps and rounded once to the half
    type, so its error is ≤ 0.5 ulp of the half type + ``k·2^-(p32-p_half)`` ulps of it
    (``k`` ≤ 4 float32 ulps; 2^-13 for float16, 2^-16 for bfloat16) < 1 ulp: the table says 1.
    The final ``output_round`` of 0.5 ulp is kept: it also covers a result in the half type's
    subnormal range (spacing ``2^(emin-p+1)``). This bound dominates :func:`budget_for`'s for
    half types (``u_half ≥ u_32``), so it holds for code that upcasts too.
    """
    base = budget_for(dtype, device)
    if base.compute_dtype == base.dtype:
        return base
    return Budget(base.dtype, base.device, base.dtype, _ulps(1, 1, 1, 1, 1), 0.5,
                  f"each operation in float32, rounded to {base.dtype} ({base.source})",
                  base.notes)


def _check_budget(budget: Any) -> Budget:
    if not isinstance(budget, Budget):
        raise TypeError(f"budget must be a Budget (see budget_for), got {type(budget).__name__}")
    return budget


def _nonneg_array(name: str, value: Any) -> np.ndarray:
    a = np.asarray(value, dtype=np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or Inf")
    if (a < 0).any():
        raise ValueError(f"{name} must be >= 0 (a sum of magnitudes)")
    return a


def dot_error_bound(abs_terms_sum: Any, n: int, budget: Budget) -> np.ndarray:
    """Absolute bound on ``|computed Σᵢ tᵢ − ref|`` for a sum or dot product of ``n`` terms.

    ``abs_terms_sum`` is ``Σ|tᵢ|`` (for a dot product ``Σ|xᵢ||yᵢ|``, e.g. ``|X| @ |Y|ᵀ``), ``ref``
    the exact value rounded to float64. The bound is (Higham eq. 3.5, with underflow)

        γ_n(u_c)·S + n·η_c                     the accumulation in the compute dtype
        + u_out·(1 + γ_n(u_c))·S + η_out        the cast back to a half type (if any)
        + u_64·S                                the float64 rounding of the reference

    with ``S = Σ|tᵢ|`` and ``η`` the smallest subnormal (each of the ``n`` products/sums can
    underflow by at most ``η``). ``n`` counts the terms of one reduction (``d`` for ``X @ Yᵀ``).
    """
    b = _check_budget(budget)
    s = _nonneg_array("abs_terms_sum", abs_terms_sum)
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"n must be an integer >= 1 (the reduction length), got {n!r}")
    comp = FORMATS[b.compute_dtype]
    g = gamma(int(n), comp.u)
    bound = g * s + n * comp.tiny
    if b.output_round:
        out = FORMATS[b.dtype]
        bound = bound + out.u * (1.0 + g) * s + out.tiny
    return bound + FORMATS["float64"].u * s


def elementwise_bound(ref: Any, budget: Budget, ulps: float | str | None = None) -> np.ndarray:
    """Absolute bound on ``|computed f(x) − ref|`` for an element-wise function, ``ref`` being the
    exact ``f(x)`` rounded to float64 (and ``x`` the same input for both).

    ``ulps`` is the function's error in ulps of the compute dtype: a number, an elementary
    function name (``'exp'`` … looked up in ``budget.ulps``) or None for the largest entry of
    ``budget.ulps``. The bound is

        k·ulp_c(|ref|)  +  r·ulp_out(|ref|·(1 + 2k·u_c))  +  0.5·ulp_64(ref)

    (k ulps in the compute dtype; ``r = budget.output_round`` ulps of the storage dtype for the
    cast back, taken at the upper end of the computed value's range so that crossing a binade
    cannot shrink it; the float64 rounding of the reference)."""
    b = _check_budget(budget)
    r = np.asarray(ref, dtype=np.float64)
    if not np.isfinite(r).all():
        raise ValueError("ref contains NaN or Inf: compare non-finite values separately")
    if ulps is None:
        k = max(b.ulps.values())
    elif isinstance(ulps, str):
        if ulps not in b.ulps:
            raise KeyError(f"no ulp figure for {ulps!r}; known: {', '.join(b.ulps)}")
        k = b.ulps[ulps]
    else:
        k = float(ulps)
        if not math.isfinite(k) or k < 0:
            raise ValueError(f"ulps must be a finite number >= 0, got {ulps!r}")
    a = np.abs(r)
    bound = k * ulp(a, b.compute_dtype) + _F64_REF_ULPS * ulp(a, "float64")
    if b.output_round:
        bound = bound + b.output_round * ulp(a * (1.0 + 2.0 * k * b.u_compute), b.dtype)
    return bound
