"""mpmath twins of every registered feature formula, and a-priori rounding-error bounds.

A *twin* computes the deterministic map ``φ(x; ω)`` of one registry ``formula`` for a given
parameter draw ``ω`` in mpmath (inputs converted exactly, see
:mod:`kernel_verify.verify.references.mp`), so a backend's output can be compared with the correctly
rounded value. Twins are registered with

    @mp_feature("rff_pairs", error_bound=bound_fn)
    def _rff_pairs(x_mp, params, config): ...          # object ndarray (..., n, D)

    @mp_feature("softmax_positive", log=True, error_bound=log_bound_fn)
    def _log_sm_pos(x_mp, params, config): ...         # log φ

Positional maps receive ``positions=`` as a keyword. Another module may register more twins
(``verify/references/features_catalogue.py`` is imported at the end of this module if present).

Error bounds
------------
``error_bound(x, params, config, u, ulps)`` returns, element-wise, an a-priori bound on
``|φ̂ − φ|`` for a float implementation that computes with unit roundoff ``u`` and elementary
functions (exp, log, cos, sin, sqrt) accurate to ``ulps`` ulps. A final cast to a narrower output
dtype (torch float16/bfloat16 computed in float32) adds ``u_out·|φ|``, which the caller adds.
The bounds are built by the forward error analysis of :class:`ErrorTerm` (Higham, *Accuracy and
Stability of Numerical Algorithms*, 2nd ed., §2–3), one rule per operation:

* every basic operation is exact then rounded: ``fl(a∘b) = (a∘b)(1+θ)``, ``|θ| ≤ u``;
* an elementary function ``f`` is accurate to ``ulps`` ulps: ``|f̂(a) − f(a)| ≤ ulps·ulp(f(a)) ≤
  2·ulps·u·|f(a)|`` (``ulp(y) ≤ 2u|y|`` for normal ``y``);
* a dot product of length ``k`` in any summation order (BLAS, FMA or not):
  ``|fl(aᵀb) − aᵀb| ≤ γ_k·Σ|a_j b_j|``, ``γ_k = ku/(1−ku)``; inputs that were themselves rounded
  once (``x/σ``, the float64 ``W`` cast to the compute dtype, ``σ`` cast) add one ``u`` each, so the
  projection ``wᵀx/σ`` has ``|ε| ≤ γ_(d+3)·Σ_j|w_j x_j|/σ``;
* propagation of an absolute argument error ``ε``: ``|exp(a+ε) − exp(a)| ≤ e^a·expm1(|ε|)``;
  ``|cos(a+ε) − cos(a)| ≤ min(|ε|, 2)`` (1-Lipschitz), the same for sin and for relu;
* products: ``|âb̂ − ab| ≤ |a|ε_b + |b|ε_a + ε_aε_b``; sums: ``ε_a + ε_b``; then the rounding of
  the result (``u`` times a bound on the computed magnitude).
* below the normal range an exp result can be flushed/underflow: ``η`` (the smallest normal of
  the dtype with unit roundoff ``u``) is added to every exp-based feature.

The exact magnitudes these rules need are evaluated in float64 from the exact formula; their own
relative rounding (~1e-16) changes the bound by a negligible relative amount.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.inputs import check_array, check_params, check_scalar
from kernel_verify.verify.references.mp import (
    mp_cos,
    mp_exp,
    mp_log,
    mp_max0,
    mp_sin,
    to_float,
    to_mp,
    working_precision,
)
from kernel_verify.verify.references.spec import MapSpec, require_map
from kernel_verify.verify.tolerance import real_gamma as gamma  # γ_k, real k (the rules)

__all__ = [
    "MP_FEATURES",
    "ErrorTerm",
    "MpFeature",
    "exp_of_log_bounds",
    "feature_error_bound",
    "features_mp",
    "features_reference",
    "mp_feature",
]

TwinFn = Callable[..., np.ndarray]
BoundFn = Callable[..., np.ndarray]
Params = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class MpFeature:
    """The mpmath twin of one formula: ``fn`` (φ), ``log_fn`` (log φ) and their error bounds."""

    formula: str
    fn: TwinFn | None = None
    log_fn: TwinFn | None = None
    error_bound: BoundFn | None = None
    log_error_bound: BoundFn | None = None
    #: facts of the truth this formula is declared not to have, with the reason (``"backward"``:
    #: no derived backward bound, ``"exact_variance"``, …): read into the formula's record
    #: (``properties/formulas.py``), where each becomes a verdict's "not tested (why)"
    not_derived: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)


#: formula id -> its twin. Filled by :func:`mp_feature`.
MP_FEATURES: dict[str, MpFeature] = {}


def mp_feature(
    formula: str, *, log: bool = False, error_bound: BoundFn | None = None,
    not_derived: Mapping[str, str] | None = None,
) -> Callable[[TwinFn], TwinFn]:
    """Register ``fn(x_mp, params, config[, positions=]) -> object ndarray (..., n, D)`` as the
    mpmath twin of ``formula`` (of ``log φ`` when ``log=True``), with its optional error bound
    and the facts the truth declares it does not derive for it (``not_derived``: fact -> why)."""
    if not isinstance(formula, str) or not formula:
        raise TypeError(f"formula must be a non-empty str, got {formula!r}")

    def decorate(fn: TwinFn) -> TwinFn:
        record = MP_FEATURES.get(formula, MpFeature(formula))
        slot, bound_slot = ("log_fn", "log_error_bound") if log else ("fn", "error_bound")
        if getattr(record, slot) is not None:
            kind = "log twin" if log else "twin"
            raise ValueError(f"the mp {kind} of formula {formula!r} is registered twice")
        MP_FEATURES[formula] = replace(record, **{slot: fn, bound_slot: error_bound},
                                       not_derived={**record.not_derived, **(not_derived or {})})
        return fn

    return decorate


def exp_of_log_bounds(log_term: Callable[..., ErrorTerm]) -> tuple[BoundFn, BoundFn]:
    """The two error bounds of a map computed as ``φ = exp(log φ)`` from the
    :class:`ErrorTerm` ``log_term(x, params, config, u, ulps)`` of its log features (whose
    docstring derives it): of ``log φ``, ``log_term(…).e``; of ``φ``, the exp rule of
    :class:`ErrorTerm`, ``φ·expm1(ε_log) + 2·ulps·u·φ̂ + η``. Returns ``(log bound, bound)``."""

    def log_bound(x, params, config, u, ulps) -> np.ndarray:
        return log_term(x, params, config, u, ulps).e

    def bound(x, params, config, u, ulps) -> np.ndarray:
        return log_term(x, params, config, u, ulps).exp().e

    return log_bound, bound


def _twin(entry: MapSpec) -> MpFeature:
    require_map(entry)
    try:
        return MP_FEATURES[entry.formula]
    except KeyError:
        raise KeyError(
            f"no mpmath twin for formula {entry.formula!r} (map {entry.name!r}); "
            f"known formulas: {', '.join(sorted(MP_FEATURES))}"
        ) from None


def _call(
    fn: TwinFn, entry: MapSpec, x: Any, params: Any, config: Any, positions: Any
) -> np.ndarray:
    kwargs = {}
    if entry.has("positional"):
        kwargs["positions"] = positions
    elif positions is not None:
        raise ValueError(f"positions given but map {entry.name!r} is not positional")
    return fn(x, params, config, **kwargs)


def _check_inputs(x: Any, params: Any, config: Any, entry: MapSpec) -> Mapping[str, Any]:
    if isinstance(x, np.ndarray) and x.dtype == object:  # already an mp array
        if x.ndim < 2:
            raise ValueError(f"x must have at least 2 dimensions, got shape {x.shape}")
    else:
        check_array("x", x, min_ndim=2, backend="numpy")
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping of arrays, got {type(params).__name__}")
    for key, value in params.items():
        if not isinstance(value, np.ndarray):
            raise TypeError(f"params[{key!r}] must be a numpy.ndarray, got {type(value).__name__}")
        check_array(f"params[{key!r}]", value, min_ndim=0)
    if config is None:
        return dict(entry.config)
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping, got {type(config).__name__}")
    return {**entry.config, **config}


def features_mp(
    entry: MapSpec,
    x: np.ndarray,
    params: Mapping[str, np.ndarray],
    config: Mapping[str, Any] | None = None,
    *,
    log: bool = False,
    positions: np.ndarray | None = None,
    dps: int | None = None,
) -> np.ndarray:
    """``φ(x; params)`` (or ``log φ``) of ``entry`` as an mp array at ``dps`` digits.

    ``x`` (``(..., n, d)``, any float dtype) is converted exactly (an mp array is used as is).
    A formula with only one twin registered gets the other by ``exp``/``log`` (log of a
    non-positive feature is an error).
    """
    twin = _twin(entry)
    config = _check_inputs(x, params, config, entry)
    with working_precision(dps):
        x_mp = x if x.dtype == object else to_mp(x)
        if log:
            if twin.log_fn is not None:
                return _call(twin.log_fn, entry, x_mp, params, config, positions)
            phi = _call(_need(twin.fn, entry), entry, x_mp, params, config, positions)
            if any(v <= 0 for v in phi.ravel()):
                raise ValueError(f"map {entry.name!r} has non-positive features: no log φ")
            return mp_log(phi)
        if twin.fn is not None:
            return _call(twin.fn, entry, x_mp, params, config, positions)
        return mp_exp(_call(_need(twin.log_fn, entry), entry, x_mp, params, config, positions))


def _need(fn: TwinFn | None, entry: MapSpec) -> TwinFn:
    if fn is None:
        raise KeyError(f"formula {entry.formula!r} has an mp record without any twin")
    return fn


def features_reference(
    entry: MapSpec,
    x: np.ndarray,
    params: Mapping[str, np.ndarray],
    config: Mapping[str, Any] | None = None,
    *,
    dtype: np.dtype | type = np.float64,
    log: bool = False,
    positions: np.ndarray | None = None,
    dps: int | None = None,
) -> np.ndarray:
    """The mp features rounded once to ``dtype`` (correctly rounded when dps is large enough)."""
    phi = features_mp(entry, x, params, config, log=log, positions=positions, dps=dps)
    return to_float(phi, dtype)


def feature_error_bound(
    entry: MapSpec,
    x: np.ndarray,
    params: Mapping[str, np.ndarray],
    config: Mapping[str, Any] | None,
    u: float,
    ulps: float,
    positions: np.ndarray | None = None,
    *,
    log: bool = False,
) -> np.ndarray:
    """Element-wise bound on ``|φ̂ − φ|`` (see the module docstring) for ``entry``'s formula."""
    twin = _twin(entry)
    config = _check_inputs(x, params, config, entry)
    u = check_scalar("u", u, positive=True, below=0.01)
    ulps = check_scalar("ulps", ulps, nonnegative=True)
    bound = twin.log_error_bound if log else twin.error_bound
    if bound is None:
        kind = "log-feature" if log else "feature"
        raise KeyError(f"formula {entry.formula!r} has no {kind} error bound registered")
    x64 = np.asarray(x, dtype=np.float64)
    kwargs = {"positions": positions} if entry.has("positional") else {}
    return np.asarray(bound(x64, params, config, u, ulps, **kwargs), dtype=np.float64)


# --------------------------------------------------------------------------------------------
# Forward error analysis (rules in the module docstring)


def smallest_normal(u: float) -> float:
    """The smallest positive normal number of the IEEE/bfloat16 format with unit roundoff ``u``."""
    table = {2.0**-53: 2.0**-1022, 2.0**-24: 2.0**-126, 2.0**-11: 2.0**-14, 2.0**-8: 2.0**-126}
    return table.get(u, 2.0**-126 if u > 2.0**-53 else 2.0**-1022)


@dataclass(frozen=True)
class ErrorTerm:
    """A quantity ``v`` (its exact value, evaluated in float64) and a bound ``e`` on
    ``|computed − exact|``, with the propagation rules of the module docstring."""

    v: np.ndarray
    e: np.ndarray
    u: float
    ulps: float

    def _new(self, v: Any, e: Any) -> ErrorTerm:
        return ErrorTerm(np.asarray(v, dtype=np.float64), np.asarray(e, dtype=np.float64),
                         self.u, self.ulps)

    def const(self, value: Any, rel: float = 0.0) -> ErrorTerm:
        value = np.asarray(value, dtype=np.float64)
        return self._new(value, np.abs(value) * rel)

    def _rounded(self, v: np.ndarray, e: np.ndarray) -> ErrorTerm:
        # rounding of the result: u times a bound on the computed magnitude |v| + e
        return self._new(v, e + self.u * (np.abs(v) + e))

    def __add__(self, other: ErrorTerm) -> ErrorTerm:
        return self._rounded(self.v + other.v, self.e + other.e)

    def __sub__(self, other: ErrorTerm) -> ErrorTerm:
        return self._rounded(self.v - other.v, self.e + other.e)

    def __neg__(self) -> ErrorTerm:
        return self._new(-self.v, self.e)

    def __mul__(self, other: ErrorTerm) -> ErrorTerm:
        e = np.abs(self.v) * other.e + np.abs(other.v) * self.e + self.e * other.e
        return self._rounded(self.v * other.v, e)

    def _elementary(self, value: np.ndarray, prop: np.ndarray) -> ErrorTerm:
        # |f̂(â) − f(a)| ≤ |f(â) − f(a)| + 2·ulps·u·|f(â)|, |f(â)| ≤ |f(a)| + prop
        return self._new(value, prop + 2 * self.ulps * self.u * (np.abs(value) + prop))

    def exp(self) -> ErrorTerm:
        value = np.exp(self.v)
        prop = value * np.expm1(self.e)
        out = self._elementary(value, prop)
        return self._new(out.v, out.e + smallest_normal(self.u))

    def cos(self) -> ErrorTerm:
        return self._elementary(np.cos(self.v), np.minimum(self.e, 2.0))

    def sin(self) -> ErrorTerm:
        return self._elementary(np.sin(self.v), np.minimum(self.e, 2.0))

    def relu(self) -> ErrorTerm:
        return self._new(np.maximum(self.v, 0.0), self.e)  # relu is exact and 1-Lipschitz

    def concat(self, other: ErrorTerm) -> ErrorTerm:
        return self._new(np.concatenate([self.v, other.v], axis=-1),
                         np.concatenate([self.e, other.e], axis=-1))


def _projection_term(x: np.ndarray, w: np.ndarray, sigma: float, u: float, ulps: float) -> Any:
    """``wᵢᵀx/σ`` with ``|ε| ≤ γ_(d+3)·Σ_j|w_ij x_j|/σ`` (dot product of length d, plus the
    roundings of ``x/σ``, of ``σ`` and of ``W`` cast to the compute dtype)."""
    d = w.shape[1]
    v = (x @ w.T) / sigma
    e = gamma(d + 3, u) * (np.abs(x) @ np.abs(w).T) / sigma
    return ErrorTerm(v, e, u, ulps)


def _half_sq_norm_term(x: np.ndarray, like: ErrorTerm) -> ErrorTerm:
    """``‖x‖²/2``: d rounded squares summed (all terms ≥ 0): relative ``γ_(d+1)``; ×½ is exact."""
    v = 0.5 * np.sum(x * x, axis=-1, keepdims=True)
    return like._new(v, gamma(x.shape[-1] + 1, like.u) * v)


def _const_rel(like: ErrorTerm, ops: int, functions: int = 0) -> float:
    """Relative error of a constant computed with ``ops`` roundings (in float64 or the compute
    dtype, whichever is coarser) and ``functions`` elementary-function calls."""
    return gamma(ops, like.u) + 2 * functions * like.ulps * like.u


def _broadcast(term: ErrorTerm, shape: tuple[int, ...]) -> ErrorTerm:
    return term._new(np.broadcast_to(term.v, shape), np.broadcast_to(term.e, shape))


# --------------------------------------------------------------------------------------------
# mp helpers


def _mp_projection(x_mp: np.ndarray, params: Params, sigma: Any = 1) -> np.ndarray:
    check_params("params", dict(params), {"W": (None, x_mp.shape[-1])})
    u = x_mp @ to_mp(params["W"]).T
    if sigma != 1:
        u = u / mpmath.mpf(float(sigma))
    return u


def _mp_half_sq_norm(x_mp: np.ndarray) -> np.ndarray:
    return (x_mp * x_mp).sum(axis=-1, keepdims=True) / 2


def _mp_cat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.concatenate([a, b], axis=-1)


def _sigma(config: Mapping[str, Any]) -> float:
    return check_scalar("sigma", config["sigma"], positive=True)


# --------------------------------------------------------------------------------------------
# rff_pairs: φ = m^(-1/2)[cos(wᵀx/σ), sin(wᵀx/σ)]  (docs/math.md §1)


def _bound_rff_pairs(x, params, config, u, ulps) -> np.ndarray:
    """``s·[cos p, sin p]``: ``s = 1/√m`` computed with 3 roundings (sqrt, division, cast) and one
    sqrt call; the projection ``p`` as in ``_projection_term``; one final product."""
    p = _projection_term(x, params["W"], _sigma(config), u, ulps)
    s = p.const(1 / np.sqrt(p.v.shape[-1]), _const_rel(p, 3, 1))
    trig = p.cos().concat(p.sin())
    return (_broadcast(s, trig.v.shape) * trig).e


@mp_feature("rff_pairs", error_bound=_bound_rff_pairs)
def _rff_pairs(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    u = _mp_projection(x_mp, params, _sigma(config))
    scale = 1 / mpmath.sqrt(u.shape[-1])
    return _mp_cat(mp_cos(u), mp_sin(u)) * scale


# --------------------------------------------------------------------------------------------
# rff_phase: φ = √(2/m)·cos(wᵀx/σ + b)  (docs/math.md §1)


def _bound_rff_phase(x, params, config, u, ulps) -> np.ndarray:
    """``s·cos(p + b)``: ``b`` cast to the compute dtype (relative ``u``), the sum rounded, ``s =
    √(2/m)`` with 3 roundings and one sqrt."""
    p = _projection_term(x, params["W"], _sigma(config), u, ulps)
    b = _broadcast(p.const(params["b"], u), p.v.shape)
    s = p.const(np.sqrt(2.0 / p.v.shape[-1]), _const_rel(p, 3, 1))
    c = (p + b).cos()
    return (_broadcast(s, c.v.shape) * c).e


@mp_feature("rff_phase", error_bound=_bound_rff_phase)
def _rff_phase(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    u = _mp_projection(x_mp, params, _sigma(config))
    check_params("params", dict(params), {"b": (u.shape[-1],)})
    return mpmath.sqrt(mpmath.mpf(2) / u.shape[-1]) * mp_cos(u + to_mp(params["b"]))


# --------------------------------------------------------------------------------------------
# softmax_trig: φ = exp(+‖x‖²/2)·m^(-1/2)[cos wᵀx, sin wᵀx]  (docs/math.md §2)


def _bound_softmax_trig(x, params, config, u, ulps) -> np.ndarray:
    """``(exp(‖x‖²/2)·s)·[cos p, sin p]``: the norm term (relative ``γ_(d+1)``), its exp, a
    division by ``√m`` (2 roundings, one sqrt), one final product."""
    p = _projection_term(x, params["W"], 1.0, u, ulps)
    half = _half_sq_norm_term(x, p)
    s = p.const(1 / np.sqrt(p.v.shape[-1]), _const_rel(p, 3, 1))
    scale = half.exp() * _broadcast(s, half.v.shape)
    trig = p.cos().concat(p.sin())
    return (_broadcast(scale, trig.v.shape) * trig).e


@mp_feature("softmax_trig", error_bound=_bound_softmax_trig)
def _softmax_trig(x_mp: np.ndarray, params: Params, config: Mapping) -> np.ndarray:
    u = _mp_projection(x_mp, params)
    scale = mp_exp(_mp_half_sq_norm(x_mp)) / mpmath.sqrt(u.shape[-1])
    return _mp_cat(mp_cos(u), mp_sin(u)) * scale


# --------------------------------------------------------------------------------------------
# softmax_positive: log φ = wᵀx − ‖x‖²/2 − ½ log m  (docs/math.md §2)


def _log_term_softmax_positive(x, params, config, u, ulps) -> ErrorTerm:
    """``(p − ‖x‖²/2) − ½log m``: two rounded subtractions; ``½ log m`` with one log call and 3
    roundings (log, ×½, cast)."""
    p = _projection_term(x, params["W"], 1.0, u, ulps)
    half = _broadcast(_half_sq_norm_term(x, p), p.v.shape)
    c = _broadcast(p.const(0.5 * np.log(p.v.shape[-1]), _const_rel(p, 3, 1)), p.v.shape)
    return p - half - c


_bound_log_softmax_positive, _bound_softmax_positive = exp_of_log_bounds(
    _log_term_softmax_positive)


@mp_feature("softmax_positive", log=True, error_bound=_bound_log_softmax_positive)
def _log_softmax_positive(x_mp: np.ndarray, params: Params, config: Mapping):
    u = _mp_projection(x_mp, params)
    return u - _mp_half_sq_norm(x_mp) - mpmath.log(u.shape[-1]) / 2


@mp_feature("softmax_positive", error_bound=_bound_softmax_positive)
def _softmax_positive(x_mp: np.ndarray, params: Params, config: Mapping):
    u = _mp_projection(x_mp, params)
    return mp_exp(u - _mp_half_sq_norm(x_mp)) / mpmath.sqrt(u.shape[-1])


# --------------------------------------------------------------------------------------------
# softmax_hyperbolic: log φ = [±wᵀx] − ‖x‖²/2 − ½ log 2m  (docs/math.md §2)


def _log_term_softmax_hyperbolic(x, params, config, u, ulps) -> ErrorTerm:
    """``[p, −p] − (‖x‖²/2 + ½ log 2m)``: the shift is one rounded sum, then one subtraction."""
    p = _projection_term(x, params["W"], 1.0, u, ulps)
    half = _half_sq_norm_term(x, p)
    c = _broadcast(p.const(0.5 * np.log(2 * p.v.shape[-1]), _const_rel(p, 3, 1)), half.v.shape)
    shift = half + c
    both = p.concat(-p)
    return both - _broadcast(shift, both.v.shape)


_bound_log_softmax_hyperbolic, _bound_softmax_hyperbolic = exp_of_log_bounds(
    _log_term_softmax_hyperbolic)


@mp_feature("softmax_hyperbolic", log=True, error_bound=_bound_log_softmax_hyperbolic)
def _log_softmax_hyperbolic(x_mp: np.ndarray, params: Params, config: Mapping):
    u = _mp_projection(x_mp, params)
    shift = _mp_half_sq_norm(x_mp) + mpmath.log(2 * u.shape[-1]) / 2
    return _mp_cat(u, -u) - shift


@mp_feature("softmax_hyperbolic", error_bound=_bound_softmax_hyperbolic)
def _softmax_hyperbolic(x_mp: np.ndarray, params: Params, config: Mapping):
    u = _mp_projection(x_mp, params)
    scale = mp_exp(-_mp_half_sq_norm(x_mp)) / mpmath.sqrt(2 * u.shape[-1])
    return _mp_cat(mp_exp(u), mp_exp(-u)) * scale


# --------------------------------------------------------------------------------------------
# relu_features: φ = m^(-1/2)·relu(Wx)  (docs/math.md §2)


def _bound_relu_features(x, params, config, u, ulps) -> np.ndarray:
    """``relu(p)·s``: relu is exact and 1-Lipschitz; ``s = 1/√m`` (3 roundings, one sqrt)."""
    p = _projection_term(x, params["W"], 1.0, u, ulps).relu()
    s = _broadcast(p.const(1 / np.sqrt(p.v.shape[-1]), _const_rel(p, 3, 1)), p.v.shape)
    return (p * s).e


@mp_feature("relu_features", error_bound=_bound_relu_features)
def _relu_features(x_mp: np.ndarray, params: Params, config: Mapping):
    u = _mp_projection(x_mp, params)
    return mp_max0(u) / mpmath.sqrt(u.shape[-1])


# --------------------------------------------------------------------------------------------
# gerf: log φ = log D + A‖w‖² + B wᵀx − ‖x‖²/2 − ½ log m,  B = √(1−4A), D = (1−4A)^(d/4)  (§4)


def _gerf_a(config: Mapping[str, Any]) -> float:
    return check_scalar("A", config["A"], below=0.25)


def _log_term_gerf(x, params, config, u, ulps) -> ErrorTerm:
    """``B·p + row − ‖x‖²/2`` with ``B`` (4 roundings, one sqrt) and the row term ``A‖w‖² + log D
    − ½log m`` (a length-d sum of squares, 2 log calls and ≤ 8 further roundings, bounded by
    ``γ_(d+8) + 4·ulps·u`` times the sum of the magnitudes of its three parts)."""
    w = params["W"]
    a = _gerf_a(config)
    m, d = w.shape
    p = _projection_term(x, w, 1.0, u, ulps)
    b = p.const(np.sqrt(1 - 4 * a), _const_rel(p, 4, 1))
    row_v = a * np.sum(w * w, axis=-1) + 0.25 * d * np.log1p(-4 * a) - 0.5 * np.log(m)
    row_mag = abs(a) * np.sum(w * w, axis=-1) + abs(0.25 * d * np.log1p(-4 * a)) + 0.5 * np.log(m)
    row = p._new(np.broadcast_to(row_v, p.v.shape),
                 np.broadcast_to(_const_rel(p, d + 8, 2) * row_mag, p.v.shape))
    half = _broadcast(_half_sq_norm_term(x, p), p.v.shape)
    return _broadcast(b, p.v.shape) * p + row - half


_bound_log_gerf, _bound_gerf = exp_of_log_bounds(_log_term_gerf)


@mp_feature("gerf", log=True, error_bound=_bound_log_gerf)
def _log_gerf(x_mp: np.ndarray, params: Params, config: Mapping):
    u = _mp_projection(x_mp, params)
    a = mpmath.mpf(_gerf_a(config))
    w = to_mp(params["W"])
    m, d = w.shape
    b = mpmath.sqrt(1 - 4 * a)
    log_d = mpmath.mpf(d) / 4 * mpmath.log(1 - 4 * a)
    row = a * (w * w).sum(axis=-1) + log_d - mpmath.log(m) / 2
    return b * u + row - _mp_half_sq_norm(x_mp)


@mp_feature("gerf", error_bound=_bound_gerf)
def _gerf(x_mp: np.ndarray, params: Params, config: Mapping):
    return mp_exp(_log_gerf(x_mp, params, config))


def _import_extension(name: str) -> None:
    # The catalogue modules register the remaining twins; they are part of the project, so a
    # missing one is an ImportError, never a silently smaller set of references.
    importlib.import_module(name)


_import_extension("kernel_verify.verify.references.features_catalogue")
