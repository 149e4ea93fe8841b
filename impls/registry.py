"""The one place that describes every feature map.

A :class:`FeatureMap` entry says what a map computes and what it claims; its NumPy and torch
functions compute ``φ(x; ω)`` for a parameter draw ``ω`` that is made once, in float64 NumPy,
by ``draw(rng, d, m, config)`` and handed to either backend (``impls.torch.convert.to_torch``).

Conventions every entry follows
-------------------------------
* ``x`` has shape ``(..., n, d)``; features have shape ``(..., n, output_dim(d, m))``.
* ``params`` is a ``dict[str, np.ndarray]`` (float64) for NumPy and the same keys as tensors for
  torch. ``config`` is a ``dict`` of Python scalars (σ, A, p, …); ``FeatureMap.config`` holds the
  defaults and ``with_config`` makes a variant.
* ``kernel`` is the id of the target kernel that ``verify`` resolves; ``kernel_params(config, d)``
  gives its keyword arguments. ``formula`` is the id of the map's formula (shared by every
  random-matrix variant of one map), which ``verify`` uses to find the mpmath twin of ``φ``.
* ``claims`` uses the vocabulary in :data:`CLAIMS`.
* A map with the ``log_features`` claim also has ``log_numpy_fn``/``log_torch_fn`` returning
  ``log φ`` (used by the stable attention path); ``exp(log φ) == φ``.
* ``attention_prescale``: attention applies ``q·d^(-1/4)``, ``k·d^(-1/4)`` before ``φ`` (softmax
  family: then ``SM(x, y) = exp(qᵀk/√d)``).

Adding a map means one :func:`register` call (see ``impls/catalogue/``); every property, report and
benchmark then covers it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kernel_verify.impls.validation import check_positive_int, check_rng

#: Vocabulary of claims. Properties select the entries they apply to by these words.
CLAIMS: dict[str, str] = {
    "unbiased": "E_ω[φ(x)ᵀφ(y)] equals the target kernel exactly",
    "biased": "E_ω[φ(x)ᵀφ(y)] equals `mean_kernel`, not the target kernel",
    "deterministic": "no random parameters: φ(x)ᵀφ(y) equals the kernel up to rounding",
    "learned": "parameters are trainable (torch nn.Module); fixed values make it deterministic",
    "positive": "every feature is > 0 (attention denominators are > 0)",
    "nonnegative": "every feature is >= 0 (denominators can be 0: guarded)",
    "bounded": "every feature is bounded in absolute value by a constant times m^(-1/2)",
    "orthogonal": "frequency rows are exactly orthogonal within blocks of d",
    "gaussian_rows": "every frequency row is marginally N(0, I_d)",
    "log_features": "log φ is available for the stable log-space attention path",
    "positional": "the map needs token positions (and the length M)",
    "exact_finite": "φ(x)ᵀφ(y) equals the kernel exactly (finite explicit map)",
    "psd_kernel": "the target kernel is positive semi-definite",
    "differentiable": "torch_fn (and log_torch_fn) is differentiable in x by autograd: the "
                      "gradient is ∂φ/∂x (almost everywhere for piecewise maps such as relu); "
                      "properties/test_gradients.py checks it against the exact derivative",
    "deterministic_backward": "two backward passes on the same inputs give bitwise equal "
                              "gradients",
}

#: The gradient claims every built-in torch map makes (``impls/catalogue``).
GRADIENT_CLAIMS = frozenset({"differentiable", "deterministic_backward"})

Draw = Callable[[np.random.Generator, int, int, Mapping[str, Any]], dict[str, np.ndarray]]
MapFn = Callable[..., Any]


def _no_params(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
    return {}


def _validated_draw(draw: Draw) -> Draw:
    """``draw`` with its arguments checked first (``rng`` a Generator, ``d, m >= 1``, ``config``
    a mapping), so that every registered map's parameter draw rejects bad input by name."""
    if getattr(draw, "_kv_validated", False) or draw is _no_params:
        return draw

    @functools.wraps(draw)
    def checked(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
        check_rng("rng", rng)
        d = check_positive_int("d", d)
        m = check_positive_int("m", m)
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a mapping, got {type(config).__name__}")
        return draw(rng, d, m, config)

    checked._kv_validated = True  # type: ignore[attr-defined]
    return checked


def _no_kernel_params(config: Mapping[str, Any], d: int) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class FeatureMap:
    """One registered feature map (see the module docstring for the conventions)."""

    name: str
    family: str
    formula: str
    kernel: str
    claims: frozenset[str]
    numpy_fn: MapFn
    torch_fn: MapFn
    output_dim: Callable[[int, int], int]
    draw: Draw = _no_params
    config: Mapping[str, Any] = field(default_factory=dict)
    kernel_params: Callable[[Mapping[str, Any], int], dict[str, Any]] = _no_kernel_params
    log_numpy_fn: MapFn | None = None
    log_torch_fn: MapFn | None = None
    matrix: str | None = None
    mean_kernel: str | None = None
    attention_prescale: bool = False
    #: smallest feature count ``m`` the parameter draw accepts (e.g. one frequency per mixture
    #: component); properties draw ``m >= min_m``.
    min_m: int = 1
    description: str = ""
    source: str = ""
    #: For maps whose output size depends on ``config`` (Taylor order, polynomial degree):
    #: ``output_dim_for_config(config)`` returns the ``output_dim`` function; it replaces
    #: ``output_dim`` at construction, so ``with_config`` keeps the two consistent.
    output_dim_for_config: Callable[[Mapping[str, Any]], Callable[[int, int], int]] | None = None
    #: Likewise for ``min_m`` (e.g. the number of mixture components).
    min_m_for_config: Callable[[Mapping[str, Any]], int] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "draw", _validated_draw(self.draw))
        if self.output_dim_for_config is not None:
            object.__setattr__(self, "output_dim", self.output_dim_for_config(self.config))
        if self.min_m_for_config is not None:
            object.__setattr__(self, "min_m", int(self.min_m_for_config(self.config)))
        unknown = set(self.claims) - set(CLAIMS)
        if unknown:
            raise ValueError(f"feature map {self.name!r}: unknown claims {sorted(unknown)}")
        lacks_log = self.log_numpy_fn is None or self.log_torch_fn is None
        if "log_features" in self.claims and lacks_log:
            raise ValueError(
                f"feature map {self.name!r} claims log_features but lacks log functions"
            )
        if "biased" in self.claims and "unbiased" in self.claims:
            raise ValueError(f"feature map {self.name!r} claims both biased and unbiased")

    def with_config(self, **overrides: Any) -> FeatureMap:
        """The same map with some configuration values replaced (unknown keys are an error)."""
        unknown = set(overrides) - set(self.config)
        if unknown:
            raise ValueError(
                f"feature map {self.name!r}: unknown config keys {sorted(unknown)}; "
                f"known: {sorted(self.config)}"
            )
        return replace(self, config={**self.config, **overrides})

    def has(self, claim: str) -> bool:
        if claim not in CLAIMS:
            raise ValueError(f"unknown claim {claim!r}; known: {sorted(CLAIMS)}")
        return claim in self.claims

    def describe(self, d: int = 4) -> dict[str, Any]:
        """JSON-ready description (used by ``kernel-verify list --json``)."""
        return {
            "name": self.name,
            "family": self.family,
            "formula": self.formula,
            "kernel": self.kernel,
            "kernel_params": {
                k: _jsonable(v) for k, v in self.kernel_params(self.config, d).items()
            },
            "mean_kernel": self.mean_kernel,
            "claims": sorted(self.claims),
            "matrix": self.matrix,
            "config": {k: _jsonable(v) for k, v in self.config.items()},
            "output_dim": f"{self.output_dim(d, 8)} at d={d}, m=8",
            "attention_prescale": self.attention_prescale,
            "description": self.description,
            "source": self.source,
            "kind": "feature_map",
            "math_section": math_section(self.source),
        }


def math_section(source: str) -> str:
    """The docs/math.md sections a source string cites (``"§3, §7"``; ``""`` if none)."""
    cited = re.findall(r"§(\d+)", source.partition("docs/math.md")[2])
    return ", ".join(f"§{n}" for n in dict.fromkeys(cited))


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return f"float64 array of shape {value.shape}"
    if isinstance(value, np.generic):
        return value.item()
    return value


_REGISTRY: dict[str, FeatureMap] = {}


def register(entry: FeatureMap) -> FeatureMap:
    """Add an entry; names are unique."""
    if entry.name in _REGISTRY:
        raise ValueError(f"feature map {entry.name!r} is registered twice")
    _REGISTRY[entry.name] = entry
    return entry


def _load_catalogue() -> None:
    # Importing the catalogue package registers every built-in map exactly once.
    import kernel_verify.impls.catalogue  # noqa: F401


def get(name: str) -> FeatureMap:
    """The entry called ``name``; the error lists the known names."""
    _load_catalogue()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no feature map {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def all_maps(*, claims: Iterable[str] = (), family: str | None = None) -> list[FeatureMap]:
    """Every registered entry (sorted by name) having all ``claims`` (and ``family``)."""
    _load_catalogue()
    wanted = set(claims)
    return [
        e
        for _, e in sorted(_REGISTRY.items())
        if wanted <= e.claims and (family is None or e.family == family)
    ]
