"""Registry entries of the random-feature maps: every map × every random-matrix construction.

Entry names are ``"<map>[<matrix>]"``, e.g. ``"softmax_positive[orthogonal]"``. Constructions
whose rows are not marginally N(0, I) (fixed-norm ORF, SORF) make every map biased; their entries
claim ``biased`` and, where docs/math.md §3 gives it, name the kernel their mean equals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernel_verify.impls.numpy import random_features as np_rf
from kernel_verify.impls.random_matrices import (
    MATRICES,
    ORTHOGONAL_MATRICES,
    SIMPLEX_MATRICES,
    UNBIASED_MATRICES,
    draw_matrix,
)
from kernel_verify.impls.registry import GRADIENT_CLAIMS, FeatureMap, register
from kernel_verify.impls.torch import random_features as torch_rf
from kernel_verify.impls.validation import config_value


@dataclass(frozen=True)
class _MapTemplate:
    formula: str
    family: str
    kernel: str
    claims: frozenset[str]
    output_dim: Callable[[int, int], int]
    config: Mapping[str, Any]
    kernel_params: Callable[[Mapping[str, Any], int], dict[str, Any]]
    with_phase: bool
    log: bool
    prescale: bool
    fixed_norm_mean: str | None
    description: str
    source: str


def _sigma(config: Mapping[str, Any], d: int) -> dict[str, Any]:
    return {"sigma": config_value(config, "sigma")}


def _none(config: Mapping[str, Any], d: int) -> dict[str, Any]:
    return {}


_TEMPLATES = [
    _MapTemplate(
        "rff_pairs",
        "rff",
        "gaussian",
        frozenset({"bounded", "psd_kernel"}),
        lambda d, m: 2 * m,
        {"sigma": 1.0},
        _sigma,
        with_phase=False, log=False, prescale=False,
        fixed_norm_mean="gaussian_fixed_norm",
        description="[cos, sin] random Fourier features of the Gaussian kernel exp(-|x-y|²/(2σ²))",
        source="Rahimi & Recht 2007; docs/math.md §1",
    ),
    _MapTemplate(
        "rff_phase",
        "rff",
        "gaussian",
        frozenset({"bounded", "psd_kernel"}),
        lambda d, m: m,
        {"sigma": 1.0},
        _sigma,
        with_phase=True, log=False, prescale=False,
        fixed_norm_mean="gaussian_fixed_norm",
        description="random-phase cosine features √(2/m)cos(wᵀx/σ + b) of the Gaussian kernel",
        source="Rahimi & Recht 2007; docs/math.md §1",
    ),
    _MapTemplate(
        "softmax_trig",
        "softmax",
        "softmax",
        frozenset({"psd_kernel"}),
        lambda d, m: 2 * m,
        {},
        _none,
        with_phase=False, log=False, prescale=True,
        fixed_norm_mean=None,
        description="trigonometric softmax features exp(|x|²/2)[cos wᵀx, sin wᵀx]/√m",
        source="Choromanski et al. 2021 (Performer), Lemma 1; docs/math.md §2",
    ),
    _MapTemplate(
        "softmax_positive",
        "softmax",
        "softmax",
        frozenset({"positive", "log_features", "psd_kernel"}),
        lambda d, m: m,
        {},
        _none,
        with_phase=False, log=True, prescale=True,
        fixed_norm_mean="softmax_fixed_norm",
        description="positive softmax features (SM⁺, FAVOR+) exp(wᵀx - |x|²/2)/√m",
        source="Choromanski et al. 2021 (Performer), Lemma 1; docs/math.md §2",
    ),
    _MapTemplate(
        "softmax_hyperbolic",
        "softmax",
        "softmax",
        frozenset({"positive", "log_features", "psd_kernel"}),
        lambda d, m: 2 * m,
        {},
        _none,
        with_phase=False, log=True, prescale=True,
        fixed_norm_mean="softmax_fixed_norm",
        description="hyperbolic positive features (SM⁺ₕ) exp(-|x|²/2)[exp(wᵀx), exp(-wᵀx)]/√(2m)",
        source="Choromanski et al. 2021 (Performer), Lemma 2; docs/math.md §2",
    ),
    _MapTemplate(
        "relu_features",
        "arccos",
        "arccos1",
        frozenset({"nonnegative", "psd_kernel"}),
        lambda d, m: m,
        {},
        _none,
        with_phase=False, log=False, prescale=False,
        fixed_norm_mean="arccos1",
        description="ReLU random features relu(Wx)/√m of the order-1 arc-cosine kernel, "
        "E relu(wᵀx)relu(wᵀy) (half of Cho & Saul's k₁: √(2/m)·relu(Wx) estimates theirs)",
        source="Cho & Saul 2009; Performer generalized attention; docs/math.md §0, §2",
    ),
    _MapTemplate(
        "gerf",
        "softmax",
        "softmax",
        frozenset({"positive", "log_features", "psd_kernel"}),
        lambda d, m: m,
        {"A": -0.1},
        _none,
        with_phase=False, log=True, prescale=True,
        fixed_norm_mean=None,
        description="GERF/FAVOR++ positive features D·exp(A|w|² + B wᵀx - |x|²/2)/√m (A < 1/4)",
        source="Likhosherstov et al. 2022 (Chefs' random tables); docs/math.md §4",
    ),
]


#: The NumPy and torch implementation of each formula, bound by object: a renamed function fails
#: here at import, never silently at a lookup by name.
_IMPLEMENTATIONS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "rff_pairs": (np_rf.rff_pairs, torch_rf.rff_pairs),
    "rff_phase": (np_rf.rff_phase, torch_rf.rff_phase),
    "softmax_trig": (np_rf.softmax_trig, torch_rf.softmax_trig),
    "softmax_positive": (np_rf.softmax_positive, torch_rf.softmax_positive),
    "softmax_hyperbolic": (np_rf.softmax_hyperbolic, torch_rf.softmax_hyperbolic),
    "relu_features": (np_rf.relu_features, torch_rf.relu_features),
    "gerf": (np_rf.gerf, torch_rf.gerf),
}
#: The log-space implementations of the formulas that have them (``log=True`` templates).
_LOG_IMPLEMENTATIONS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "softmax_positive": (np_rf.log_softmax_positive, torch_rf.log_softmax_positive),
    "softmax_hyperbolic": (np_rf.log_softmax_hyperbolic, torch_rf.log_softmax_hyperbolic),
    "gerf": (np_rf.log_gerf, torch_rf.log_gerf),
}


def _draw_for(matrix: str, with_phase: bool):
    def draw(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
        params = {"W": draw_matrix(matrix, rng, m, d)}
        if with_phase:
            params["b"] = rng.uniform(0.0, 2.0 * np.pi, size=m)
        return params

    return draw


def _entry(t: _MapTemplate, matrix: str) -> FeatureMap:
    claims = set(t.claims) | GRADIENT_CLAIMS
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
    log = t.log
    return FeatureMap(
        name=f"{t.formula}[{matrix}]",
        family=t.family,
        formula=t.formula,
        kernel=t.kernel,
        claims=frozenset(claims),
        numpy_fn=_IMPLEMENTATIONS[t.formula][0],
        torch_fn=_IMPLEMENTATIONS[t.formula][1],
        log_numpy_fn=_LOG_IMPLEMENTATIONS[t.formula][0] if log else None,
        log_torch_fn=_LOG_IMPLEMENTATIONS[t.formula][1] if log else None,
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
