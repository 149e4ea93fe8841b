"""The one place that describes every feature map.

A :class:`FeatureMap` entry says what a map computes and what it claims. It is the one descriptor
of a feature map (:mod:`kernel_verify.impls.descriptor`): ``FeatureMap`` is another name of
``FeatureMapTarget``, the class a user's map under test is made of, so a registered map goes to
every property, the mpmath twin, the report, the benchmarks and the mutants unchanged. Its NumPy
and torch
functions compute ``φ(x; ω)`` for a parameter draw ``ω`` that is made once, in float64 NumPy,
by ``draw(rng, d, m, config)`` and handed to either backend (``impls.torch.convert.to_torch``).

Conventions every entry follows
-------------------------------
* ``x`` has shape ``(..., n, d)``; features have shape ``(..., n, output_dim(d, m))``.
* ``params`` is a ``dict[str, np.ndarray]`` (float64) for NumPy and the same keys as tensors for
  torch. ``config`` is a ``dict`` of Python scalars (σ, A, p, …); ``FeatureMap.config`` holds the
  defaults and ``with_config`` makes a variant.
* ``kernel`` is the id of the target kernel that ``verify`` resolves; ``kernel_args(d)`` gives
  its keyword arguments (from ``kernel_params``: a mapping or a callable ``(config, d)``).
  ``formula`` is the id of the map's formula (shared by every
  random-matrix variant of one map), which ``verify`` uses to find the mpmath twin of ``φ``.
* ``claims`` uses the vocabulary in :data:`CLAIMS`.
* ``draw`` is ``no_params`` for a map without random parameters.
* A map with the ``log_features`` claim also has ``log_numpy_fn``/``log_torch_fn`` returning
  ``log φ`` (used by the stable attention path); ``exp(log φ) == φ``.
* ``attention_prescale``: attention applies ``q·d^(-1/4)``, ``k·d^(-1/4)`` before ``φ`` (softmax
  family: then ``SM(x, y) = exp(qᵀk/√d)``).

Adding a map means one :func:`register` call (see ``impls/catalogue/``); every property, report and
benchmark then covers it.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernel_verify.impls.descriptor import (
    CLAIMS,
    GRADIENT_CLAIMS,
    FeatureMap,
    FeatureMapTarget,
    math_section,
    no_params,
)

__all__ = ["CLAIMS", "GRADIENT_CLAIMS", "FeatureMap", "FeatureMapTarget", "all_maps",
           "catalogue_loading", "get", "is_registered", "math_section", "no_params", "register"]

_REGISTRY: dict[str, FeatureMap] = {}


def register(entry: FeatureMap) -> FeatureMap:
    """Add a built-in map; names are unique. A built-in map is complete: white-box, with both
    backends (and both log functions when it claims ``log_features``), a family and an
    ``output_dim``."""
    if not isinstance(entry, FeatureMap):
        raise TypeError(f"register takes a FeatureMap, got {type(entry).__name__}")
    lacking = [f for f in ("draw", "numpy_fn", "torch_fn", "family", "output_dim")
               if getattr(entry, f) is None]
    if entry.has("log_features"):
        lacking += [f for f in ("log_numpy_fn", "log_torch_fn") if getattr(entry, f) is None]
    if lacking:
        raise ValueError(f"feature map {entry.name!r} cannot be registered without "
                         f"{', '.join(lacking)}")
    if entry.name in _REGISTRY:
        raise ValueError(f"feature map {entry.name!r} is registered twice")
    _REGISTRY[entry.name] = entry
    return entry


_LOADING: list[bool] = []


def _load_catalogue() -> None:
    # Importing the catalogue package registers every built-in map exactly once.
    if _LOADING:
        return
    _LOADING.append(True)
    try:
        import kernel_verify.impls.catalogue  # noqa: F401
    finally:
        _LOADING.clear()


def catalogue_loading() -> bool:
    """Whether the built-in catalogue is being imported (the registry is still partial)."""
    return bool(_LOADING)


def is_registered(entry: object) -> bool:
    """Whether ``entry`` is a built-in map itself (the object :func:`register` was given, not a
    variant made with ``replace``/``with_config`` nor a third-party map)."""
    _load_catalogue()
    name = getattr(entry, "name", None)
    return isinstance(name, str) and _REGISTRY.get(name) is entry


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
