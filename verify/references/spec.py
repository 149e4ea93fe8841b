"""What the truth needs to know about a feature map, as a structural type.

The references and moments read a map's description (formula id, target kernel, claims, default
configuration, …) but never its implementation, so they take any object with these attributes
(:class:`MapSpec`) instead of importing the implementations' class: the one feature-map
descriptor (``impls.descriptor.FeatureMapTarget``, also called ``impls.registry.FeatureMap``) is
one, whether it is a built-in map or a third-party target; it is handed to the truth as it is.
:func:`require_map` checks the attributes up front so that a wrong argument fails with a clear
``TypeError`` rather than deep inside a twin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["MapSpec", "require_map"]


@runtime_checkable
class MapSpec(Protocol):
    """A feature map's description: the fields of ``impls.descriptor.FeatureMapTarget`` the
    truth reads."""

    name: str
    formula: str
    kernel: str
    claims: frozenset[str]
    config: Mapping[str, Any]
    matrix: str | None
    mean_kernel: str | None
    attention_prescale: bool
    def has(self, claim: str) -> bool: ...

    def kernel_args(self, d: int) -> dict[str, Any]:
        """Keyword arguments of the target kernel for inputs of dimension ``d``."""
        ...


_REQUIRED = ("name", "formula", "kernel", "claims", "config", "has")


def require_map(entry: Any, name: str = "entry") -> MapSpec:
    """``entry`` itself, once it is known to carry the attributes of :class:`MapSpec`."""
    missing = [a for a in _REQUIRED if not hasattr(entry, a)]
    if missing or isinstance(entry, str | Mapping):
        raise TypeError(
            f"{name} must describe a feature map (e.g. an impls.registry.FeatureMap), got "
            f"{type(entry).__name__} (missing {', '.join(missing) or 'attributes'})"
        )
    return entry
