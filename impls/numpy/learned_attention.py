"""Learned linear-attention feature maps in NumPy: ReBased and DARKFormer (docs/math.md §21).

* :func:`rebased` (Aksenov et al., ACL 2024, "Linear Transformers with Learnable Kernel Functions
  are Better In-Context Models"): ``x̃ = γ ⊙ (x − mean x)/√(var x + eps) + β`` (a layer norm
  without its own affine, then the learned affine γ, β), ``φ(x) = √s·vec(x̃x̃ᵀ)`` (``d²``
  features): kernel ``s·(x̃ᵀỹ)²``. ``var`` is the biased (population) variance, as in a layer
  norm; ``eps`` and the scale ``s`` come from ``config`` (defaults ``1e-5``, ``1``).
* :func:`darkformer` (Farzam et al. 2026, "Data-Aware Random Feature Kernel for Transformers",
  arXiv 2603.04127): frequencies ``ω ~ N(0, Σ)``, ``Σ = MᵀM`` learned; written ``ω = Mᵀε``,
  ``ε ~ N(0, I)``, ``φ(x) = m^(−1/2)·exp(εᵢᵀMx − ‖Mx‖²/2)``: positive random features of the
  data-aligned softmax kernel ``E φ(x)ᵀφ(y) = exp(xᵀΣy)``, i.e. FAVOR+ features of ``(Mx, My)``.

Learned values: ReBased's ``γ``, ``β`` and DARKFormer's ``M`` are resolved per d from ``config``
(``init_seed`` and, for ReBased, optional user arrays ``gamma``/``beta``; for DARKFormer the
scalar ``spread``: ``M = I + spread·G/√d`` with ``G`` seeded standard normal, so that the exact
moments, which read only scalars of ``config``, can rebuild it). The registry's ``draw`` puts the
resolved values into ``params`` (the mpmath twin reads only them); the maps read ``params`` when
present, else ``config``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from kernel_verify.impls.validation import (
    Config,
    Params,
    check_array,
    check_drawn_for,
    check_numpy_input,
    check_params,
    check_positive_int,
    check_scalar,
    config_value,
)

__all__ = ["darkformer", "darkformer_matrix", "draw_darkformer", "draw_rebased", "log_darkformer",
           "rebased", "rebased_affine", "rebased_values"]


# --------------------------------------------------------------------------------- ReBased
@lru_cache(maxsize=32)
def _default_affine(seed: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, d, 21])
    gamma = 1.0 + 0.25 * rng.standard_normal(d)
    beta = 0.25 * rng.standard_normal(d)
    gamma.setflags(write=False)
    beta.setflags(write=False)
    return gamma, beta


def rebased_affine(config: Config, d: int) -> dict[str, np.ndarray]:
    """``{"gamma": (d,), "beta": (d,)}`` from ``config``: user arrays (validated) or, for
    ``None``, the seeded default ``γ = 1 + 0.25·N(0, 1)``, ``β = 0.25·N(0, 1)`` drawn from
    ``default_rng([init_seed, d, 21])`` (deterministic, cached; a trained ReBased layer's values
    are not the identity affine, so neither is the default)."""
    seed = check_positive_int("init_seed", config_value(config, "init_seed"), minimum=0)
    g_default, b_default = _default_affine(seed, d)
    out = {}
    for name, default in (("gamma", g_default), ("beta", b_default)):
        value = config_value(config, name)
        value = default if value is None else np.asarray(value)
        check_array(f"config[{name!r}]", value)
        if value.shape != (d,):
            raise ValueError(f"config[{name!r}] must have shape ({d},) for d={d}, got "
                             f"{value.shape}")
        out[name] = value.astype(np.float64)
    return out


def draw_rebased(rng: np.random.Generator, d: int, m: int, config: Config) -> dict:
    """The registry ``draw`` of ReBased: no randomness, copies of :func:`rebased_affine`."""
    return {k: np.array(v, dtype=np.float64) for k, v in rebased_affine(config, d).items()}


def rebased_values(params: Params, config: Config, d: int, *, backend: str | None = None
                   ) -> dict[str, Any]:
    """``gamma``, ``beta`` (from ``params`` when drawn, else ``config``), ``eps`` and ``scale``
    (from ``config``), validated."""
    check_params("params", params, {}, backend=backend)
    if "gamma" in params or "beta" in params:
        check_params("params", params, {"gamma": (None,), "beta": (None,)}, backend=backend)
        check_drawn_for("x", d, params["gamma"].shape[0])
        check_params("params", params, {"gamma": (d,), "beta": (d,)}, backend=backend)
        affine = {"gamma": params["gamma"], "beta": params["beta"]}
    else:
        affine = rebased_affine(config, d)
    eps = check_scalar("eps", config_value(config, "eps"), nonnegative=True)
    scale = check_scalar("scale", config_value(config, "scale"), positive=True)
    return {**affine, "eps": eps, "scale": scale}


def rebased(x: np.ndarray, params: Params, config: Config) -> np.ndarray:
    """``φ(x) = √s·vec(x̃x̃ᵀ)``, ``x̃ = γ ⊙ (x − x̄)/√(var x + eps) + β`` (size ``d²``)."""
    check_numpy_input(x)
    d = x.shape[-1]
    v = rebased_values(params, config, d, backend="numpy")
    dt = x.dtype.type
    c = x - np.mean(x, axis=-1, keepdims=True)
    sigma = np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + dt(v["eps"]))
    t = v["gamma"].astype(x.dtype) * (c / sigma) + v["beta"].astype(x.dtype)
    outer = (t[..., :, None] * t[..., None, :]).reshape(*t.shape[:-1], d * d)
    return outer * dt(math.sqrt(v["scale"]))


# ------------------------------------------------------------------------------ DARKFormer
@lru_cache(maxsize=32)
def _default_alignment(seed: int, d: int, spread: float) -> np.ndarray:
    g = np.random.default_rng([seed, d, 2603]).standard_normal((d, d))
    out = np.eye(d) + spread * g / math.sqrt(d)
    out.setflags(write=False)
    return out


def darkformer_matrix(config: Config, d: int) -> np.ndarray:
    """``M = I + spread·G/√d`` (``G`` standard normal from ``default_rng([init_seed, d,
    2603])``): the learned square root of DARKFormer's covariance ``Σ = MᵀM`` (float64)."""
    seed = check_positive_int("init_seed", config_value(config, "init_seed"), minimum=0)
    spread = check_scalar("spread", config_value(config, "spread"), nonnegative=True)
    return np.array(_default_alignment(seed, d, float(spread)))


def draw_darkformer(rng: np.random.Generator, d: int, m: int, config: Config) -> dict:
    """``{"W": ε (m, d) iid N(0, 1), "M": (d, d)}``: the random part and the learned matrix."""
    return {"W": rng.standard_normal((m, d)), "M": darkformer_matrix(config, d)}


def _alignment(params: Params, config: Config, d: int, backend: str) -> Any:
    check_params("params", params, {"W": (None, None)}, backend=backend)
    check_drawn_for("x", d, params["W"].shape[1])
    if "M" in params:
        check_params("params", params, {"W": (None, d), "M": (d, d)}, backend=backend)
        return params["M"]
    return darkformer_matrix(config, d)


def log_darkformer(x: np.ndarray, params: Params, config: Config) -> np.ndarray:
    """``log φ(x) = εᵢᵀz − ‖z‖²/2 − ½ log m``, ``z = Mx``."""
    check_numpy_input(x)
    a = np.asarray(_alignment(params, config, x.shape[-1], "numpy")).astype(x.dtype)
    z = x @ a.T
    w = np.asarray(params["W"]).astype(x.dtype)
    log_phi = z @ w.T - np.sum(z * z, axis=-1, keepdims=True) / x.dtype.type(2)
    return log_phi - x.dtype.type(0.5 * math.log(w.shape[0]))


def darkformer(x: np.ndarray, params: Params, config: Config) -> np.ndarray:
    """``φ(x) = m^(−1/2)·exp(εᵢᵀz − ‖z‖²/2)``, ``z = Mx`` (positive; kernel ``exp(xᵀMᵀMy)``)."""
    return np.exp(log_darkformer(x, params, config))
