"""The constructor of the catalogue's entries: a row states only what is its own.

Every built-in map is differentiable with a deterministic backward pass (``GRADIENT_CLAIMS``),
binds its NumPy and torch functions by object, as a pair, and most use their name as their
formula id and their formula id as their kernel id; :func:`builtin_map` fills those in, so a row
names its map once and its functions once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kernel_verify.impls.descriptor import GRADIENT_CLAIMS, FeatureMap, MapFn

__all__ = ["builtin_map"]


def builtin_map(
    name: str,
    functions: tuple[MapFn, MapFn],
    *,
    claims: Iterable[str],
    log_functions: tuple[MapFn, MapFn] | None = None,
    formula: str | None = None,
    kernel: str | None = None,
    **fields: Any,
) -> FeatureMap:
    """The :class:`FeatureMap` of a built-in map (registered by the caller).

    ``functions`` is its ``(numpy_fn, torch_fn)``, ``log_functions`` the ``(log_numpy_fn,
    log_torch_fn)`` of a map that claims ``log_features``; ``claims`` get ``GRADIENT_CLAIMS``
    added; ``formula`` defaults to ``name`` and ``kernel`` to the formula. The other fields go
    to :class:`FeatureMap` unchanged."""
    formula = formula or name
    log_numpy_fn, log_torch_fn = log_functions or (None, None)
    return FeatureMap(
        name=name,
        formula=formula,
        kernel=kernel or formula,
        claims=frozenset(claims) | GRADIENT_CLAIMS,
        numpy_fn=functions[0],
        torch_fn=functions[1],
        log_numpy_fn=log_numpy_fn,
        log_torch_fn=log_torch_fn,
        **fields,
    )
