"""Registry entries of the exact finite maps (docs/math.md §5, §6): ``φ(x)ᵀφ(y)`` equals the kernel.

No random parameters (``draw`` returns ``{}``). Kernel ids for the references: ``taylor``
(``order``; ``Σ_(k≤p) tᵏ/k!`` with ``t = xᵀy/√d``), ``polynomial`` (``c``, ``p``), ``linear``,
``cosine`` (``k(0, y) = 0``). The Taylor maps scale by ``d^(-1/4)`` themselves (Based's
convention), so they do not ask attention to prescale. Output sizes that depend on the order or
degree follow ``config`` through ``output_dim_for_config``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kernel_verify.impls.catalogue.builtin import builtin_map
from kernel_verify.impls.descriptor import MapFn
from kernel_verify.impls.numpy import exact_maps as np_ex
from kernel_verify.impls.registry import FeatureMap, no_params, register
from kernel_verify.impls.torch import exact_maps as torch_ex
from kernel_verify.impls.validation import config_value

_CLAIMS = frozenset({"deterministic", "exact_finite", "psd_kernel"})


def _taylor_dim(config: Mapping[str, Any]) -> Callable[[int, int], int]:
    order = np_ex.check_order("order", config_value(config, "order"))
    return lambda d, m: np_ex.taylor_dim(d, order)


def _poly_dim(config: Mapping[str, Any]) -> Callable[[int, int], int]:
    p = np_ex.check_order("p", config_value(config, "p"))
    return lambda d, m: np_ex.polynomial_dim(d, p)


def _order(config: Mapping[str, Any], d: int) -> dict[str, Any]:
    return {"order": config_value(config, "order")}


def _exact(name: str, functions: tuple[MapFn, MapFn], family: str, description: str, source: str,
           **fields: Any) -> FeatureMap:
    """An entry of this module: an exact finite map (``_CLAIMS``) without random parameters."""
    return builtin_map(name, functions, family=family, claims=_CLAIMS, draw=no_params,
                       description=description, source=source, **fields)


_BASED = "Arora et al. 2024 (Based); docs/math.md §5"


def _taylor_entry(name: str, order: int, description: str) -> FeatureMap:
    return _exact(
        name, (np_ex.taylor, torch_ex.taylor), "taylor", description, _BASED,
        formula="taylor",
        output_dim=lambda d, m: np_ex.taylor_dim(d, order),
        output_dim_for_config=_taylor_dim,
        config={"order": order},
        kernel_params=_order,
    )


register(
    _taylor_entry(
        "taylor2",
        2,
        "Based's full Taylor map [1, x/d^(1/4), vec(xxᵀ)/(√2√d)]: 1 + t + t²/2, t = qᵀk/√d",
    )
)
register(
    _taylor_entry(
        "taylor3", 3, "tensor-power Taylor map of order 3: Σ_(k≤3) tᵏ/k!, t = qᵀk/√d"
    )
)
register(
    _exact(
        "taylor2_compressed", (np_ex.taylor2_compressed, torch_ex.taylor2_compressed), "taylor",
        "compressed (symmetric) Taylor map of size 1+d+d(d+1)/2: 1 + t + t²/2", _BASED,
        kernel="taylor",
        output_dim=lambda d, m: 1 + d + d * (d + 1) // 2,
        kernel_params=lambda config, d: {"order": 2},
    )
)
register(
    _exact(
        "polynomial", (np_ex.polynomial, torch_ex.polynomial), "polynomial",
        "explicit monomial map of (xᵀy + c)^p, size C(d+p, p); c >= 0", "docs/math.md §5",
        output_dim=lambda d, m: np_ex.polynomial_dim(d, 2),
        output_dim_for_config=_poly_dim,
        config={"c": 1.0, "p": 2},
        kernel_params=lambda config, d: {"c": config_value(config, "c"),
                                         "p": config_value(config, "p")},
    )
)
register(
    _exact(
        "linear", (np_ex.linear, torch_ex.linear), "linear", "linear kernel xᵀy, φ(x) = x",
        "docs/math.md §6",
        output_dim=lambda d, m: d,
    )
)
register(
    _exact(
        "cosine", (np_ex.cosine, torch_ex.cosine), "linear",
        "cosine kernel, φ(x) = x/‖x‖ with φ(0) = 0 (so k(0, y) = 0)", "docs/math.md §6",
        output_dim=lambda d, m: d,
    )
)
