"""Registry entries of the learned kernels (Chowdhury et al. 2021; docs/math.md §7).

Design (d-dependent defaults): ``config`` holds a d-independent ``init_seed`` and the learned
arrays, each ``None`` by default; ``None`` is resolved, per d, to a deterministic seeded
default (``numpy.random.default_rng([init_seed, d, …])``, cached) by ``draw`` and
``kernel_params``. One entry thus serves every d, ``with_config(init_seed=1)`` gives another
fixed initialisation, and ``with_config(mu=trained_mu, …)`` substitutes trained values (validated
against d when used). ``draw(rng, d, m, config)`` draws the random part and adds the resolved
learned values, so a parameter draw is complete (the mpmath reference reads only it):

==================  ==========================  =============================================
entry               random part (``draw``)      kernel id (kernel params)
==================  ==========================  =============================================
gmm_rks             ``eps (m, d)``, pi, mu, L   ``spectral_mixture`` (pi, mu, L)
gmm_prf             ``eps (m, d)``, pi, mu, L   ``gmm_prf`` (pi, mu, L)
fastfood_learned    none (diagonals → params)   ``fastfood_learned`` (sigma, S, G, B, perm)
fastfood_random     S, G, B, perm (blocks, p)   ``gaussian`` (sigma)
generative          ``eps (m, k)``, W1 … b2     ``generative`` (W1, b1, W2, b2)
==================  ==========================  =============================================

``fastfood_learned`` is one Fastfood block: ``2p`` features (``p = 2^⌈log₂ d⌉``) whatever m, its
``draw`` copies the learned diagonals into ``params`` (no randomness). ``fastfood_random`` uses
``⌈m/p⌉`` whole blocks: ``2p⌈m/p⌉`` features.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from kernel_verify.impls.catalogue.builtin import builtin_map
from kernel_verify.impls.descriptor import MapFn
from kernel_verify.impls.numpy import learned_maps as np_lm
from kernel_verify.impls.registry import FeatureMap, register
from kernel_verify.impls.torch import learned_maps as torch_lm
from kernel_verify.impls.validation import check_positive_int, config_value

_CHOWDHURY = "Chowdhury et al. 2021; docs/math.md §7"


def learned_map(name: str, functions: tuple[MapFn, MapFn], claims: set[str],
                **fields: Any) -> FeatureMap:
    """An entry of the learned family (this module's and ReBased's, DARKFormer's): a PSD
    kernel, with ``claims`` on top; the other fields as for :func:`builtin_map`."""
    return builtin_map(name, functions, family="learned", claims={"psd_kernel"} | claims,
                       **fields)


def _draw_gmm(tag: str):
    def draw(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
        return np_lm.draw_gmm(tag, rng, d, m, config)

    return draw


def _n_components(config: Mapping[str, Any]) -> int:
    """Every mixture component needs at least one frequency: ``m >= n_components``."""
    return check_positive_int("n_components", config_value(config, "n_components"))


def _gmm_kernel_params(tag: str):
    def kernel_params(config: Mapping[str, Any], d: int) -> dict[str, Any]:
        return np_lm.gmm_params(config, d, tag)

    return kernel_params


def _gmm(name: str, functions: tuple[MapFn, MapFn], claims: set[str], **fields: Any) -> FeatureMap:
    """A mixture entry: ``n_components`` Gaussian components (default 2), at least one frequency
    each; its draw and kernel parameters are those of the mixture named ``name``."""
    return learned_map(
        name,
        functions,
        {"learned", "unbiased"} | claims,
        draw=_draw_gmm(name),
        config={"init_seed": 0, "n_components": 2, "pi": None, "mu": None, "L": None},
        kernel_params=_gmm_kernel_params(name),
        min_m=2,
        min_m_for_config=_n_components,
        source=_CHOWDHURY,
        **fields,
    )


register(
    _gmm(
        "gmm_rks", (np_lm.gmm_rks, torch_lm.gmm_rks), {"bounded"},
        kernel="spectral_mixture",
        output_dim=lambda d, m: 2 * m,
        description="GMM-RKS: ω = μ_c + L_cᵀε, √(π_c/m_c)[cos ωᵀx, sin ωᵀx]: spectral mixture "
        "Σ π_c exp(-δᵀΣ_cδ/2)cos(μ_cᵀδ)",
    )
)
register(
    _gmm(
        "gmm_prf", (np_lm.gmm_prf, torch_lm.gmm_prf), {"positive", "log_features"},
        log_functions=(np_lm.log_gmm_prf, torch_lm.log_gmm_prf),
        output_dim=lambda d, m: m,
        attention_prescale=True,
        description="GMM-PRF: √(π_c/m_c)exp(ωᵀx - |x|²/2), ω ~ N(μ_c, L_cᵀL_c): "
        "Σ π_c exp(μ_cᵀs + sᵀΣ_cs/2 - |x|²/2 - |y|²/2)",
    )
)


def _draw_learned_fastfood(
    rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]
) -> dict:
    return {k: v[None, :] for k, v in np_lm.fastfood_learned_params(config, d).items()}


def _fastfood_learned_kernel_params(config: Mapping[str, Any], d: int) -> dict[str, Any]:
    return {"sigma": config_value(config, "sigma"), **np_lm.fastfood_learned_params(config, d)}


def _draw_random_fastfood(
    rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]
) -> dict:
    m = check_positive_int("m", m)
    return np_lm.draw_fastfood(rng, d, math.ceil(m / np_lm.padded_size(d)))


def _fastfood(name: str, kernel: str, claims: set[str], **fields: Any) -> FeatureMap:
    """A Fastfood entry (formula ``fastfood``): bounded ``[cos, sin]`` features of blocks of
    size ``p = 2^⌈log₂ d⌉``."""
    return learned_map(
        name,
        (np_lm.fastfood, torch_lm.fastfood),
        {"bounded"} | claims,
        formula="fastfood",
        kernel=kernel,
        **fields,
    )


register(
    _fastfood(
        "fastfood_learned", "fastfood_learned", {"learned", "deterministic", "exact_finite"},
        output_dim=lambda d, m: 2 * np_lm.padded_size(d),
        draw=_draw_learned_fastfood,
        config={"init_seed": 0, "sigma": 1.0, "S": None, "G": None, "B": None, "perm": None},
        kernel_params=_fastfood_learned_kernel_params,
        description="Fastfood with learned (fixed) diagonals S, G, B: one block, deterministic "
        "kernel (1/p)Σ cos(w_iᵀδ/σ)",
        source="Le et al. 2013; Chowdhury et al. 2021; docs/math.md §3, §7",
    )
)
register(
    _fastfood(
        "fastfood_random", "gaussian", {"unbiased", "gaussian_rows"},
        output_dim=lambda d, m: 2 * np_lm.padded_size(d) * math.ceil(m / np_lm.padded_size(d)),
        draw=_draw_random_fastfood,
        config={"sigma": 1.0},
        kernel_params=lambda config, d: {"sigma": config_value(config, "sigma")},
        description="Fastfood at its random initialisation (whole blocks): Gaussian kernel",
        source="Le et al. 2013; docs/math.md §3, §7",
    )
)


register(
    learned_map(
        "generative",
        (np_lm.generative, torch_lm.generative),
        {"learned", "unbiased", "bounded"},
        output_dim=lambda d, m: 2 * m,
        draw=np_lm.draw_generative,
        config={
            "init_seed": 0, "latent_dim": 2, "hidden": 8,
            "W1": None, "b1": None, "W2": None, "b2": None,
        },
        kernel_params=lambda config, d: np_lm.generative_params(config, d),
        description="generative frequencies ω = W2 sin(W1 ε + b1) + b2, ε ~ N(0, I_k): "
        "kernel E_ε cos(g(ε)ᵀδ) (Gauss–Hermite reference)",
        source=_CHOWDHURY,
    )
)
