"""Registry entries of the sketching maps of polynomial kernels (docs/math.md §18).

``polysketch[iid]`` is the non-negative degree-2 PolySketch of Kacham, Mirrokni & Zhong (ICML
2024): a Gaussian sketch ``S`` (m × d, entries ``N(0, 1/m)``, drawn as ``params["S"]``), ``z = Sx``
and the m² features ``φ(x) = vec(z zᵀ)``, so that ``φ(x)ᵀφ(y) = ((Sx)ᵀ(Sy))² ≥ 0``. It estimates
the kernel ``(xᵀy)²`` with an exactly known bias:
``E φ(x)ᵀφ(y) = (xᵀy)²(1 + 1/m) + ‖x‖²‖y‖²/m`` (derived in docs/math.md §18; the reference mean
and the exact variance are :func:`kernel_verify.verify.references.biased_means.sketch_moments`).

``random_maclaurin`` is Kar & Karnick's (2012) random Maclaurin map of ``exp(xᵀy)``: unbiased,
with the exact variance of :mod:`kernel_verify.verify.moments.maclaurin`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kernel_verify.impls.catalogue.builtin import builtin_map
from kernel_verify.impls.numpy import sketches as np_sk
from kernel_verify.impls.registry import register
from kernel_verify.impls.torch import sketches as torch_sk


def _draw_sketch(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
    """``S`` (m × d) with i.i.d. ``N(0, 1/m)`` entries."""
    return {"S": rng.standard_normal((m, d)) / np.sqrt(m)}


register(
    builtin_map(
        "polysketch[iid]",
        (np_sk.polysketch, torch_sk.polysketch),
        formula="polysketch",
        kernel="polynomial",
        family="sketch",
        claims={"biased", "psd_kernel"},
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


def _draw_maclaurin(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
    """Degrees ``Nᵢ`` with ``P(N = n) = (1 − 1/p)p^(−n)`` and Rademacher ``W (m, K, d)``,
    ``K = max(1, max Nᵢ)`` (rows past ``Nᵢ`` unused)."""
    p = float(config["p"])
    if not (p > 1 and p < float("inf")):
        raise ValueError(f"config['p'] must be a finite number > 1, got {p}")
    degree = rng.geometric(1.0 - 1.0 / p, size=m) - 1
    k = max(1, int(degree.max()))
    w = rng.integers(0, 2, size=(m, k, d)).astype(np.float64) * 2.0 - 1.0
    return {"degree": degree.astype(np.float64), "W": w}


register(
    builtin_map(
        "random_maclaurin",
        (np_sk.random_maclaurin, torch_sk.random_maclaurin),
        kernel="softmax",
        family="sketch",
        claims={"unbiased", "psd_kernel"},
        output_dim=lambda d, m: m,
        draw=_draw_maclaurin,
        config={"p": 2.0},
        kernel_params={},
        description="random Maclaurin features of exp(xᵀy): random degree N (P(N = n) = "
        "(1 − 1/p)p^(−n)), √(p^N/(N!(1 − 1/p)))·Π_(j<N) w_jᵀx/√m with Rademacher w_j: unbiased",
        source="Kar & Karnick 2012 (Random feature maps for dot product kernels); "
        "docs/math.md §18",
    )
)
