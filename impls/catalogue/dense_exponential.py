"""Registry entry of FAVOR#'s symmetric dense-exponential features (SDERF, docs/math.md §20).

``sderf[iid]``: ``A = αI + β·11ᵀ/d`` (config ``alpha``, ``beta``), iid Gaussian rows; unbiased
for ``exp(xᵀy)``. The asymmetric ADERF has two maps (query and key side) and is no registry
entry: :mod:`kernel_verify.impls.numpy.dense_exponential`.
"""

from __future__ import annotations

from kernel_verify.impls.catalogue.builtin import builtin_map
from kernel_verify.impls.catalogue.random_features import _draw_for
from kernel_verify.impls.numpy import dense_exponential as np_de
from kernel_verify.impls.registry import register
from kernel_verify.impls.torch import dense_exponential as torch_de

register(
    builtin_map(
        "sderf[iid]",
        (np_de.sderf, torch_de.sderf),
        log_functions=(np_de.log_sderf, torch_de.log_sderf),
        formula="sderf",
        kernel="softmax",
        family="softmax",
        claims={"positive", "log_features", "psd_kernel", "unbiased",
                          "gaussian_rows"},
        output_dim=lambda d, m: m,
        draw=_draw_for("iid", False),
        config={"alpha": -0.1, "beta": -0.15},
        kernel_params={},
        matrix="iid",
        attention_prescale=True,
        description="SDERF (FAVOR#) positive features D·exp(ωᵀAω + ωᵀ(I−4A)^(1/2)x − |x|²/2)/√m, "
                    "A = αI + β11ᵀ/d dense; frequencies: iid",
        source="Likhosherstov et al. 2023 (FAVOR#, arXiv 2302.00787); docs/math.md §20",
    )
)
