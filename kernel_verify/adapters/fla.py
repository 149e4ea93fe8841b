"""flash-linear-attention (``fla-core``): its feature-map modules that compute in plain torch.

``fla.modules.feature_map`` holds the maps its linear-attention layers apply to queries and
keys. Those with a fixed closed form are compared with the registry formula they implement
(white-box, no random parameters; docs/math.md §5, §6):

* ``TaylorFeatureMap(head_dim)``: ``[1, z, z_i²/√2, (z_i z_j)_(i<j)]``, ``z = x·d^(−1/4)``, the
  second-order Taylor map of Based, ``φ(x)ᵀφ(y) = 1 + t + t²/2``, ``t = xᵀy/√d`` (registry
  ``taylor2_compressed``, kernel ``taylor`` of order 2);
* ``DPFPFeatureMap(head_dim, nu=4)``: ``concat_(j=1..ν) r ⊙ roll(r, j)``,
  ``r = [relu x, relu(−x)]`` (Schlag et al. 2021; registry ``dpfp`` at the library's ν = 4);
* ``ReLUFeatureMap()``: ``relu(x)`` (registry ``relu``, kernel ``relu_dot``).

Not targets: ``HedgehogFeatureMap`` computes one softmax over ``[2(Wx+b), −2(Wx+b)]`` (2d
entries), while the registry's Hedgehog map (Zhang et al. 2024) normalises the two halves
separately, so there is no formula to compare it with; the other modules (T2R, Hadamard,
outer-product, PolySketch, Rebased) are learned layers. The package imports ``triton`` at import
time, so the ``fla`` extra installs it (a ~290 MB wheel); nothing here runs a triton kernel.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np

from kernel_verify.adapters._lazy import need
from kernel_verify.verify.thirdparty.protocol import FeatureMapTarget

DPFP_NU = 4  # DPFPFeatureMap's default


def no_params(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
    """Deterministic maps draw nothing."""
    return {}


@cache
def _module(name: str, d: int):
    fm = need("fla", "modules.feature_map")
    if name == "TaylorFeatureMap":
        return fm.TaylorFeatureMap(d)
    if name == "DPFPFeatureMap":
        return fm.DPFPFeatureMap(d, nu=DPFP_NU)
    return getattr(fm, name)()


def module_fn(name: str):
    """``torch_fn(x, params, config)``: the library module ``name`` applied to ``x``."""

    def fn(x, params: Mapping[str, Any], config: Mapping[str, Any]):
        import torch

        with torch.no_grad():
            return _module(name, x.shape[-1])(x)

    return fn


_EXACT = frozenset({"deterministic", "exact_finite", "psd_kernel"})

targets = [
    FeatureMapTarget("fla.TaylorFeatureMap", "taylor", _EXACT,
                     kernel_params={"order": 2}, config={"order": 2}, draw=no_params,
                     torch_fn=module_fn("TaylorFeatureMap"), formula="taylor2_compressed"),
    FeatureMapTarget("fla.DPFPFeatureMap", "dpfp", _EXACT | {"nonnegative"},
                     kernel_params={"nu": DPFP_NU}, config={"nu": DPFP_NU}, draw=no_params,
                     torch_fn=module_fn("DPFPFeatureMap"), formula="dpfp"),
    FeatureMapTarget("fla.ReLUFeatureMap", "relu_dot", _EXACT | {"nonnegative"},
                     draw=no_params, torch_fn=module_fn("ReLUFeatureMap"), formula="relu"),
]
