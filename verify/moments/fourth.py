"""Exact fourth central moment of an estimator ``φ(x)ᵀφ(y) = (1/m)Σᵢ h(wᵢ)`` with iid rows
(docs/math.md §12).

With ``μ = E h``, ``V₁ = Var h`` and ``μ₄(h) = E(h − μ)⁴ = E h⁴ − 4μE h³ + 6μ²E h² − 3μ⁴``, the
mean of m iid terms has (expand ``(Σᵢ(hᵢ − μ))⁴``: only the m fourth powers and the ``3m(m−1)``
products of two squares have nonzero expectation)

    ``μ₄ = (μ₄(h) + 3(m − 1)·V₁²) / m³``.

The raw moments ``E hᵏ`` come from the docs/math.md §0 reduction applied to ``hᵏ`` written as an
exponential sum (:func:`kernel_verify.verify.moments.integrands.mul`; the Gaussian integral of each
term by :func:`kernel_verify.verify.moments.gauss_hermite.expect_exp_terms`), and for relu features
from the polar reduction ``E[relu(u)ᵏrelu(v)ᵏ]``. Independent closed forms for the positive and
hyperbolic softmax features (``w ~ N(0, I)``, ``s = x + y``, ``c = exp(−(‖x‖² + ‖y‖²)/2)``):

* positive, ``h = c·e^(wᵀs)``: ``E hᵏ = cᵏ·exp(k²‖s‖²/2)``;
* hyperbolic, ``h = c·cosh(wᵀs)``: ``E hᵏ = cᵏ2^(−k)Σⱼ C(k, j)·exp((k − 2j)²‖s‖²/2)``

(``wᵀs ~ N(0, ‖s‖²)`` and ``E e^(a·wᵀs) = e^(a²‖s‖²/2)``); ``tests/test_moments.py`` checks both
ways agree. Used where a variance test of an unbounded estimator needs ``Var((X − μ)²) = μ₄ − σ⁴``
(:func:`kernel_verify.verify.stats.variance_test`). Orthogonal rows are not covered (their fourth
moment needs the joint law of four dependent rows).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import mpmath
import numpy as np

from kernel_verify.verify.cache import (
    exact_text,
    file_cache_get,
    file_cache_put,
    mpf_from_json,
    mpf_to_json,
    source_digest,
)
from kernel_verify.verify.inputs import check_positive_int
from kernel_verify.verify.moments import aligned, dense_exponential
from kernel_verify.verify.moments.gauss_hermite import expect_relu_power
from kernel_verify.verify.moments.integrands import (
    FORMULAS_WITH_TERMS,
    integrand,
    power_moments,
)
from kernel_verify.verify.references.mp import to_mp

__all__ = ["CLOSED_RAW_FORMULAS", "FOURTH_MOMENT_FORMULAS", "closed_raw_moments",
           "fourth_central_moment", "raw_moments"]

def _sq(v) -> Any:
    return mpmath.fsum(t * t for t in v)


def _relu_raw(x, y, config: Mapping[str, Any], dps: int) -> list:
    """relu features: the polar reduction ``E[relu(u)ᵏrelu(v)ᵏ]``."""
    return [expect_relu_power(x, y, k, dps) for k in (1, 2, 3, 4)]


def _exp_sum_raw(formula: str, x, y, config: Mapping[str, Any], dps: int) -> list:
    """An exponential-sum integrand: ``hᵏ`` as an exponential sum, each term by quadrature."""
    return power_moments(integrand(formula, x, y, config), dps, 4)


#: formula -> ``(x, y, config, dps) -> [E h, …, E h⁴]`` by quadrature.
_RAW_MOMENTS: dict[str, Callable[..., list]] = {
    **{f: functools.partial(_exp_sum_raw, f) for f in sorted(FORMULAS_WITH_TERMS)},
    "relu_features": _relu_raw,
    "sderf": dense_exponential.raw_moments,  # 1-D quadratures in A's eigenbasis (§20)
    "darkformer": aligned.raw_moments,  # FAVOR+'s powers at (Mx, My) (§21)
}
FOURTH_MOMENT_FORMULAS = frozenset(_RAW_MOMENTS)


def raw_moments(formula: str, x, y, config: Mapping[str, Any], dps: int) -> list:
    """``[E h, E h², E h³, E h⁴]`` by quadrature (mp vectors ``x``, ``y``)."""
    raw = _RAW_MOMENTS.get(formula)
    if raw is None:
        raise KeyError(f"no exact fourth moment for {formula!r}; known: "
                       f"{sorted(FOURTH_MOMENT_FORMULAS)}")
    return raw(x, y, config, dps)


def _positive_raw(c, s2) -> list:
    """positive, ``h = c·e^(wᵀs)``: ``E hᵏ = cᵏ·exp(k²‖s‖²/2)``."""
    return [c**k * mpmath.exp(k * k * s2 / 2) for k in (1, 2, 3, 4)]


def _hyperbolic_raw(c, s2) -> list:
    """hyperbolic, ``h = c·cosh(wᵀs)``: ``E hᵏ = cᵏ2^(−k)Σⱼ C(k, j)·exp((k − 2j)²‖s‖²/2)``."""
    return [c**k / 2**k * mpmath.fsum(mpmath.binomial(k, j) * mpmath.exp((k - 2 * j) ** 2
                                                                       * s2 / 2)
                                      for j in range(k + 1)) for k in (1, 2, 3, 4)]


#: formula -> ``(c, ‖s‖²) -> [E h, …, E h⁴]`` in closed form (module docstring).
_CLOSED_RAW: dict[str, Callable[[Any, Any], list]] = {
    "softmax_positive": _positive_raw,
    "softmax_hyperbolic": _hyperbolic_raw,
}


#: formula -> ``(x, y, config) -> (formula, x', y')``: a formula whose per-frequency term is another
#: formula's at a transformed pair, so its closed raw moments are that formula's there.
_CLOSED_AT: dict[str, Callable[..., tuple[str, Any, Any]]] = {
    "darkformer": lambda x, y, config: ("softmax_positive", *aligned.aligned_pair(x, y, config)),
}
#: The formulas :func:`closed_raw_moments` covers.
CLOSED_RAW_FORMULAS = frozenset(_CLOSED_RAW) | frozenset(_CLOSED_AT)


def closed_raw_moments(formula: str, x, y, config: Mapping[str, Any] | None = None) -> list:
    """``[E h, …, E h⁴]`` in closed form for softmax_positive and softmax_hyperbolic (module
    docstring), and for darkformer as softmax_positive's at ``(Mx, My)`` (docs/math.md §21)."""
    if formula in _CLOSED_AT:
        formula, x, y = _CLOSED_AT[formula](x, y, config or {})
    closed = _CLOSED_RAW.get(formula)
    if closed is None:
        raise KeyError(f"no closed raw moments for {formula!r}")
    c = mpmath.exp(-(_sq(x) + _sq(y)) / 2)
    s2 = _sq([a + b for a, b in zip(x, y, strict=True)])
    return closed(c, s2)


def _central(raw: list) -> tuple[Any, Any, Any]:
    e1, e2, e3, e4 = raw
    return e1, e2 - e1**2, e4 - 4 * e1 * e3 + 6 * e1**2 * e2 - 3 * e1**4


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    """The code a quadrature moment depends on (every module of ``verify/moments`` and
    ``verify/references``, ``verify/inputs.py``) and mpmath's version: a stored value is used
    only if the same code computed it."""
    here = Path(__file__).resolve().parent
    return source_digest(sorted([*here.glob("*.py"), *(here.parent / "references").glob("*.py"),
                                 here.parent / "inputs.py"]), mpmath.__version__)


@functools.lru_cache(maxsize=1024)
def _cached(formula, xk, yk, config_items, m, dps, method) -> tuple[Any, Any]:
    """:func:`_moments`, memoised; by quadrature (seconds per point: SDERF's 1-D quadratures,
    the exponential sums) also kept in the file cache (:mod:`kernel_verify.verify.cache`) under
    the exact inputs and :func:`_source_digest`, as signed binary records: a value read back is
    the very number computed (a quadrature that fails raises and stores nothing)."""
    if method != "quadrature":
        return _moments(formula, xk, yk, config_items, m, dps, method)
    key = exact_text((_source_digest(), formula, xk, yk, config_items, m, dps))
    stored = file_cache_get("fourth-moment", key)
    if stored is not None:
        return mpf_from_json(stored[0]), mpf_from_json(stored[1])
    mu4, var = _moments(formula, xk, yk, config_items, m, dps, method)
    file_cache_put("fourth-moment", key, [mpf_to_json(mu4), mpf_to_json(var)])
    return mu4, var


def _moments(formula, xk, yk, config_items, m, dps, method) -> tuple[Any, Any]:
    with mpmath.workdps(dps + 10):
        x, y = to_mp(np.array(xk)), to_mp(np.array(yk))
        raw = (closed_raw_moments(formula, x, y, dict(config_items)) if method == "closed"
               else raw_moments(formula, x, y, dict(config_items), dps))
        _, v1, mu4_h = _central(raw)
        mu4 = (mu4_h + 3 * (m - 1) * v1**2) / mpmath.mpf(m) ** 3
    with mpmath.workdps(dps):
        return +mu4, +(v1 / m)


def fourth_central_moment(formula: str, x: np.ndarray, y: np.ndarray,
                          config: Mapping[str, Any] | None, m: int, *, dps: int = 30,
                          method: str = "quadrature") -> tuple[Any, Any]:
    """``(μ₄, σ²)`` of the iid-row estimator with m rows (module docstring), as mpf.
    ``method``: ``"quadrature"`` (every formula of :data:`FOURTH_MOMENT_FORMULAS`) or
    ``"closed"`` (:data:`CLOSED_RAW_FORMULAS`: softmax_positive, softmax_hyperbolic,
    darkformer). Raises KeyError for other formulas and
    :class:`kernel_verify.verify.moments.QuadratureError` where ``E h⁴`` is infinite or does not
    converge
    (e.g. GERF with a large ``A``)."""
    if formula not in FOURTH_MOMENT_FORMULAS:
        raise KeyError(f"no exact fourth moment for {formula!r}; known: "
                       f"{sorted(FOURTH_MOMENT_FORMULAS)}")
    if method not in ("quadrature", "closed"):
        raise ValueError(f"method must be 'quadrature' or 'closed', got {method!r}")
    m = check_positive_int("m", m)
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"x and y must be vectors of one length, got shapes {x.shape}, "
                         f"{y.shape}")
    items = tuple(sorted((k, float(v)) for k, v in (config or {}).items()))
    return _cached(formula, tuple(map(float, x)), tuple(map(float, y)), items, m, dps, method)
