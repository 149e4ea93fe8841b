"""Registry entries of the deterministic linear-attention maps (docs/math.md §6).

Each declares the kernel it induces, ``k(x, y) = φ(x)ᵀφ(y)`` (claim ``exact_finite``):

=============  =================  ==========================================================
entry          kernel id          kernel
=============  =================  ==========================================================
elu_plus_one   ``elu_plus_one``   ``Σ (elu(x_i)+1)(elu(y_i)+1)``
relu           ``relu_dot``       ``relu(x)ᵀrelu(y)`` (can be 0: attention needs its guard)
square         ``square_dot``     ``Σ x_i² y_i²``
identity       ``linear``         ``xᵀy`` (negative control: normalisation is ill-posed)
cosformer      ``cosformer``      ``relu(x)ᵀrelu(y)·cos(π(i−j)/2M)``; kernel params ``M`` from
                                  config plus the positions ``i``, ``j`` of the two points,
                                  which the caller supplies
dpfp           ``dpfp``           ``Σ_(j≤ν) Σ_k r_k(x) r_(k−j)(x) r_k(y) r_(k−j)(y)`` (``nu``)
hedgehog       ``hedgehog``       ``φ(x)ᵀφ(y)`` of the given weights (``W``, ``b``)
=============  =================  ==========================================================

Hedgehog's weights live in ``config`` (``None`` = seeded default for d, see
:func:`kernel_verify.impls.numpy.deterministic_maps.hedgehog_weights`); its ``draw`` resolves them
into ``params`` (no randomness), which the mpmath reference reads. Its feature size is ``2d`` (W is
d×d, as in Zhang et al. 2024), whatever m.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kernel_verify.impls.catalogue.builtin import builtin_map
from kernel_verify.impls.descriptor import Draw, MapFn
from kernel_verify.impls.numpy import deterministic_maps as np_det
from kernel_verify.impls.registry import GRADIENT_CLAIMS, FeatureMap, no_params, register
from kernel_verify.impls.torch import deterministic_maps as torch_det
from kernel_verify.impls.validation import check_positive_int, config_value

_BASE = frozenset({"deterministic", "exact_finite", "psd_kernel"}) | GRADIENT_CLAIMS


def _deterministic(
    name: str,
    functions: tuple[MapFn, MapFn],
    claims: set[str],
    description: str,
    source: str,
    *,
    draw: Draw = no_params,
    output_dim: Callable[[int, int], int] = lambda d, m: d,
    **fields: Any,
) -> FeatureMap:
    """An entry of this family: the claims ``_BASE`` and ``claims``, no random parameters unless
    ``draw`` says otherwise, size ``d`` unless ``output_dim`` says otherwise."""
    return builtin_map(
        name,
        functions,
        family="deterministic",
        claims=_BASE | claims,
        draw=draw,
        output_dim=output_dim,
        description=description,
        source=source,
        **fields,
    )


def _hedgehog_kernel_params(config: Mapping[str, Any], d: int) -> dict[str, Any]:
    return np_det.hedgehog_weights(config, d)


def _dpfp_dim(config: Mapping[str, Any]) -> Callable[[int, int], int]:
    nu = check_positive_int("nu", config_value(config, "nu"))
    return lambda d, m: 2 * d * nu


register(
    _deterministic(
        "elu_plus_one", (np_det.elu_plus_one, torch_det.elu_plus_one),
        {"positive", "log_features"},
        "elu(x)+1 (PosELU): positive features, denominators > 0 in exact arithmetic; "
        "log φ = log1p(x) or x",
        "Katharopoulos et al. 2020; docs/math.md §6",
        log_functions=(np_det.log_elu_plus_one, torch_det.log_elu_plus_one),
    )
)
register(
    _deterministic(
        "relu", (np_det.relu, torch_det.relu), {"nonnegative"},
        "relu(x): nonnegative; denominators can be 0 (attention's zero_denominator guard)",
        "docs/math.md §6",
        kernel="relu_dot",
    )
)
register(
    _deterministic(
        "square", (np_det.square, torch_det.square), {"nonnegative"},
        "x⊙x: kernel Σ x_i² y_i²", "docs/math.md §6",
        kernel="square_dot",
    )
)
register(
    _deterministic(
        "identity", (np_det.identity, torch_det.identity), set(),
        "φ(x) = x: kernel xᵀy can be <= 0, so normalised linear attention is ill-posed "
        "(negative control)",
        "docs/math.md §6",
        kernel="linear",
    )
)
register(
    _deterministic(
        "cosformer", (np_det.cosformer, torch_det.cosformer), {"nonnegative", "positional"},
        "cosFormer [relu(x)sin(πi/2M), relu(x)cos(πi/2M)] at position i (0 <= i <= M); "
        "needs positions=",
        "Qin et al. 2022 (cosFormer); docs/math.md §6",
        output_dim=lambda d, m: 2 * d,
        config={"M": 256},
        kernel_params=lambda config, d: {"M": config_value(config, "M")},
    )
)
register(
    _deterministic(
        "dpfp", (np_det.dpfp, torch_det.dpfp), {"nonnegative"},
        "DPFP-ν: concat_(j≤ν) r⊙roll(r, j), r = [relu x, relu(-x)], size 2dν",
        "Schlag et al. 2021 (DPFP); docs/math.md §6",
        output_dim_for_config=_dpfp_dim,
        config={"nu": 1},
        kernel_params=lambda config, d: {"nu": config_value(config, "nu")},
    )
)
register(
    _deterministic(
        "hedgehog", (np_det.hedgehog, torch_det.hedgehog), {"positive", "learned", "log_features"},
        "Hedgehog [softmax(Wx+b), softmax(-(Wx+b))] with given weights (W d×d)",
        "Zhang et al. 2024 (Hedgehog); LoLCATs; docs/math.md §6",
        log_functions=(np_det.log_hedgehog, torch_det.log_hedgehog),
        draw=np_det.draw_hedgehog,
        output_dim=lambda d, m: 2 * d,
        config={"init_seed": 0, "W": None, "b": None},
        kernel_params=_hedgehog_kernel_params,
    )
)
