"""Registry entries of the learned linear-attention maps ReBased and DARKFormer (docs/math.md §21).

=============  ==============  =================================================================
entry          kernel id       kernel (kernel params)
=============  ==============  =================================================================
rebased        ``rebased``     ``s·(x̃ᵀỹ)²``, ``x̃ = γ ⊙ norm(x) + β`` (gamma, beta, eps, scale)
darkformer     ``darkformer``  ``exp(xᵀMᵀMy)`` (M): unbiased positive random features
=============  ==============  =================================================================

ReBased is deterministic (its learned γ, β are resolved from ``config`` into ``params`` by the
draw, as Hedgehog's weights); DARKFormer draws ``ε (m, d)`` and carries its learned ``M``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernel_verify.impls.catalogue.learned import learned_map
from kernel_verify.impls.numpy import learned_attention as np_la
from kernel_verify.impls.registry import register
from kernel_verify.impls.torch import learned_attention as torch_la
from kernel_verify.impls.validation import config_value


def _rebased_kernel_params(config: Mapping[str, Any], d: int) -> dict[str, Any]:
    return {**np_la.rebased_affine(config, d), "eps": float(config_value(config, "eps")),
            "scale": float(config_value(config, "scale"))}


register(
    learned_map(
        "rebased",
        (np_la.rebased, torch_la.rebased),
        {"learned", "deterministic", "exact_finite"},
        output_dim=lambda d, m: d * d,
        draw=np_la.draw_rebased,
        config={"init_seed": 0, "eps": 1e-5, "scale": 1.0, "gamma": None, "beta": None},
        kernel_params=_rebased_kernel_params,
        description="ReBased vec(x̃x̃ᵀ), x̃ = γ⊙(x−x̄)/√(var x + eps) + β (learned γ, β): "
        "kernel s·(x̃ᵀỹ)²",
        source="Aksenov et al. 2024 (ReBased); docs/math.md §21",
    )
)
register(
    learned_map(
        "darkformer",
        (np_la.darkformer, torch_la.darkformer),
        {"learned", "unbiased", "positive", "log_features"},
        log_functions=(np_la.log_darkformer, torch_la.log_darkformer),
        output_dim=lambda d, m: m,
        draw=np_la.draw_darkformer,
        config={"init_seed": 0, "spread": 0.5},
        kernel_params=lambda config, d: {"M": np_la.darkformer_matrix(config, d)},
        attention_prescale=True,
        description="DARKFormer exp(εᵀMx − ‖Mx‖²/2)/√m, ω = Mᵀε ~ N(0, MᵀM) (learned M): "
        "kernel exp(xᵀMᵀMy)",
        source="Farzam et al. 2026 (DARKFormer, arXiv 2603.04127); docs/math.md §21",
    )
)
