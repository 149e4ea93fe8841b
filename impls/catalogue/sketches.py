"""Registry entries of the sketching maps of polynomial kernels (docs/math.md §18).

``polysketch[iid]`` is the non-negative degree-2 PolySketch of Kacham, Mirrokni & Zhong (ICML
2024): a Gaussian sketch ``S`` (m × d, entries ``N(0, 1/m)``, drawn as ``params["S"]``), ``z = Sx``
and the m² features ``φ(x) = vec(z zᵀ)``, so that ``φ(x)ᵀφ(y) = ((Sx)ᵀ(Sy))² ≥ 0``. It estimates
the kernel ``(xᵀy)²`` with an exactly known bias:
``E φ(x)ᵀφ(y) = (xᵀy)²(1 + 1/m) + ‖x‖²‖y‖²/m`` (derived in docs/math.md §18; the reference mean
and the exact variance are :func:`kernel_verify.verify.references.biased_means.sketch_moments`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kernel_verify.impls.numpy import sketches as np_sk
from kernel_verify.impls.registry import GRADIENT_CLAIMS, FeatureMap, register
from kernel_verify.impls.torch import sketches as torch_sk


def _draw_sketch(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
    """``S`` (m × d) with i.i.d. ``N(0, 1/m)`` entries."""
    return {"S": rng.standard_normal((m, d)) / np.sqrt(m)}


register(
    FeatureMap(
        name="polysketch[iid]",
        family="sketch",
        formula="polysketch",
        kernel="polynomial",
        claims=frozenset({"biased", "psd_kernel"}) | GRADIENT_CLAIMS,
        numpy_fn=np_sk.polysketch,
        torch_fn=torch_sk.polysketch,
        output_dim=lambda d, m: m * m,
        draw=_draw_sketch,
        config={},
        kernel_params={"c": 0.0, "p": 2},
        matrix="iid",
        description="non-negative degree-2 PolySketch vec((Sx)(Sx)ᵀ), S Gaussian m × d with "
        "entries N(0, 1/m): estimates (xᵀy)² with the exact bias "
        "((xᵀy)² + ‖x‖²‖y‖²)/m",
        source="Kacham, Mirrokni & Zhong 2024 (PolySketchFormer); docs/math.md §18",
    )
)
