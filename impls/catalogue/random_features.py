"""Registry entries of the random-feature maps: every map × every random-matrix construction.

Entry names are ``"<map>[<matrix>]"``, e.g. ``"softmax_positive[orthogonal]"``. Constructions
whose rows are not marginally N(0, I) (fixed-norm ORF, SORF) make every map biased; their entries
claim ``biased`` and, where docs/math.md §3 gives it, name the kernel their mean equals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernel_verify.impls.catalogue.builtin import builtin_map
from kernel_verify.impls.descriptor import MapFn
from kernel_verify.impls.numpy import random_features as np_rf
from kernel_verify.impls.random_matrices import (
    MATRICES,
    ORTHOGONAL_MATRICES,
    SIMPLEX_MATRICES,
    UNBIASED_MATRICES,
    draw_matrix,
)
from kernel_verify.impls.registry import FeatureMap, register
from kernel_verify.impls.torch import random_features as torch_rf
from kernel_verify.impls.validation import config_value


def _sigma(config: Mapping[str, Any], d: int) -> dict[str, Any]:
    return {"sigma": config_value(config, "sigma")}


def _none(config: Mapping[str, Any], d: int) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class _MapTemplate:
    """One random-feature formula; :func:`_entry` makes its entry for each random matrix."""

    formula: str
    functions: tuple[MapFn, MapFn]
    family: str
    kernel: str
    claims: frozenset[str]
    output_dim: Callable[[int, int], int]
    description: str
    source: str
    config: Mapping[str, Any] = field(default_factory=dict)
    kernel_params: Callable[[Mapping[str, Any], int], dict[str, Any]] = _none
    #: the log-space ``(numpy, torch)`` functions of a positive map (claim ``log_features``)
    log_functions: tuple[MapFn, MapFn] | None = None
    #: the draw adds a uniform phase ``b`` to the frequencies ``W``
    with_phase: bool = False
    #: attention applies ``d^(-1/4)`` to queries and keys first (softmax kernels)
    prescale: bool = False
    #: the kernel the mean equals with fixed-norm orthogonal rows (docs/math.md §3), if derived
    fixed_norm_mean: str | None = None


def _gaussian(formula: str, functions: tuple[MapFn, MapFn], output_dim: Callable[[int, int], int],
              description: str, *, with_phase: bool = False) -> _MapTemplate:
    """Bounded random Fourier features of the Gaussian kernel of bandwidth ``sigma``."""
    return _MapTemplate(
        formula, functions, "rff", "gaussian", frozenset({"bounded", "psd_kernel"}), output_dim,
        description, "Rahimi & Recht 2007; docs/math.md §1",
        config={"sigma": 1.0},
        kernel_params=_sigma,
        with_phase=with_phase,
        fixed_norm_mean="gaussian_fixed_norm",
    )


def _softmax(formula: str, functions: tuple[MapFn, MapFn], claims: set[str],
             output_dim: Callable[[int, int], int], description: str, source: str,
             **fields: Any) -> _MapTemplate:
    """Random features of the softmax kernel ``exp(xᵀy)``, prescaled in attention."""
    claims = frozenset(claims | {"psd_kernel"})
    return _MapTemplate(formula, functions, "softmax", "softmax", claims, output_dim, description,
                        source, prescale=True, **fields)


_PERFORMER = "Choromanski et al. 2021 (Performer)"

_TEMPLATES = [
    _gaussian(
        "rff_pairs", (np_rf.rff_pairs, torch_rf.rff_pairs), lambda d, m: 2 * m,
        "[cos, sin] random Fourier features of the Gaussian kernel exp(-|x-y|²/(2σ²))",
    ),
    _gaussian(
        "rff_phase", (np_rf.rff_phase, torch_rf.rff_phase), lambda d, m: m,
        "random-phase cosine features √(2/m)cos(wᵀx/σ + b) of the Gaussian kernel",
        with_phase=True,
    ),
    _softmax(
        "softmax_trig", (np_rf.softmax_trig, torch_rf.softmax_trig), set(), lambda d, m: 2 * m,
        "trigonometric softmax features exp(|x|²/2)[cos wᵀx, sin wᵀx]/√m",
        f"{_PERFORMER}, Lemma 1; docs/math.md §2",
    ),
    _softmax(
        "softmax_positive", (np_rf.softmax_positive, torch_rf.softmax_positive),
        {"positive", "log_features"}, lambda d, m: m,
        "positive softmax features (SM⁺, FAVOR+) exp(wᵀx - |x|²/2)/√m",
        f"{_PERFORMER}, Lemma 1; docs/math.md §2",
        log_functions=(np_rf.log_softmax_positive, torch_rf.log_softmax_positive),
        fixed_norm_mean="softmax_fixed_norm",
    ),
    _softmax(
        "softmax_hyperbolic", (np_rf.softmax_hyperbolic, torch_rf.softmax_hyperbolic),
        {"positive", "log_features"}, lambda d, m: 2 * m,
        "hyperbolic positive features (SM⁺ₕ) exp(-|x|²/2)[exp(wᵀx), exp(-wᵀx)]/√(2m)",
        f"{_PERFORMER}, Lemma 2; docs/math.md §2",
        log_functions=(np_rf.log_softmax_hyperbolic, torch_rf.log_softmax_hyperbolic),
        fixed_norm_mean="softmax_fixed_norm",
    ),
    _MapTemplate(
        "relu_features",
        (np_rf.relu_features, torch_rf.relu_features),
        "arccos",
        "arccos1",
        frozenset({"nonnegative", "psd_kernel"}),
        lambda d, m: m,
        "ReLU random features relu(Wx)/√m of the order-1 arc-cosine kernel, "
        "E relu(wᵀx)relu(wᵀy) (half of Cho & Saul's k₁: √(2/m)·relu(Wx) estimates theirs)",
        "Cho & Saul 2009; Performer generalized attention; docs/math.md §0, §2",
        fixed_norm_mean="arccos1",
    ),
    _softmax(
        "gerf", (np_rf.gerf, torch_rf.gerf), {"positive", "log_features"}, lambda d, m: m,
        "GERF/FAVOR++ positive features D·exp(A|w|² + B wᵀx - |x|²/2)/√m (A < 1/4)",
        "Likhosherstov et al. 2022 (Chefs' random tables); docs/math.md §4",
        log_functions=(np_rf.log_gerf, torch_rf.log_gerf),
        config={"A": -0.1},
    ),
]


def _draw_for(matrix: str, with_phase: bool):
    def draw(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
        params = {"W": draw_matrix(matrix, rng, m, d)}
        if with_phase:
            params["b"] = rng.uniform(0.0, 2.0 * np.pi, size=m)
        return params

    return draw


def _entry(t: _MapTemplate, matrix: str) -> FeatureMap:
    claims = set(t.claims)
    mean_kernel = None
    # ReLU features are homogeneous of degree 2 in w, so with fixed norms √d (E‖w‖² = d, as
    # for Gaussian rows) their mean is still the arc-cosine kernel: unbiased.
    homogeneous_fixed_norm = matrix == "orthogonal_fixed_norm" and t.fixed_norm_mean == t.kernel
    if matrix in UNBIASED_MATRICES or homogeneous_fixed_norm:
        claims.add("unbiased")
        if matrix in UNBIASED_MATRICES:
            claims.add("gaussian_rows")
    else:
        claims.add("biased")
        if matrix == "orthogonal_fixed_norm":
            mean_kernel = t.fixed_norm_mean
    if matrix in ORTHOGONAL_MATRICES:
        claims.add("orthogonal")
    if matrix in SIMPLEX_MATRICES:
        claims.add("simplex")
    return builtin_map(
        f"{t.formula}[{matrix}]",
        t.functions,
        log_functions=t.log_functions,
        formula=t.formula,
        kernel=t.kernel,
        family=t.family,
        claims=claims,
        output_dim=t.output_dim,
        draw=_draw_for(matrix, t.with_phase),
        config=dict(t.config),
        kernel_params=t.kernel_params,
        matrix=matrix,
        mean_kernel=mean_kernel,
        attention_prescale=t.prescale,
        description=f"{t.description}; frequencies: {matrix}",
        source=(f"{t.source}; Reid et al. 2023 (SimRFs), docs/math.md §19"
                if matrix in SIMPLEX_MATRICES else t.source),
    )


for _template in _TEMPLATES:
    for _matrix in MATRICES:
        register(_entry(_template, _matrix))
