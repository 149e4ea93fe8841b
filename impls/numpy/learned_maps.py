"""Learned-kernel feature maps (Chowdhury et al. 2021, "On Learning the Transformer Kernel"),
NumPy. docs/math.md §7.

With its learned parameters fixed, each map is an estimator of a known kernel. The learned values
(mixture weights π, means μ, factors L, Fastfood diagonals, MLP weights) come from ``config`` and
the random part (standard normals ε, Fastfood permutations) from ``params``, so the frequencies are
built here, e.g. ``ω = μ_c + L_cᵀε``; the torch modules of
:mod:`kernel_verify.impls.torch.learned_maps` hold the same values as trainable parameters.

Learned values in ``config``: a ``None`` entry means "the seeded default for this d", drawn from
``numpy.random.default_rng([init_seed, d, tag])`` (deterministic, cached, independent of the
caller's generator); an array supplied by the user is validated against d. So one registry entry
serves every d and ``with_config(mu=..., L=...)`` substitutes trained values.

The registry entries' ``draw`` functions resolve these values into ``params`` next to the random
part (:func:`draw_gmm`, :func:`draw_generative`), so a parameter draw is complete: the mpmath
reference computes from ``params`` alone. The maps read the learned values from ``params`` when
they are there and resolve ``config`` themselves otherwise (:func:`gmm_values`,
:func:`generative_values`).

* **GMM-RKS** (:func:`gmm_rks`): C components, the m frequencies split round-robin (``c_i = i mod
  C``, ``m_c`` of them in component c): ``ω_i = μ_(c_i) + L_(c_i)ᵀε_i``, features
  ``a_i[cos ω_iᵀx, sin ω_iᵀx]`` with ``a_i² = π_(c_i)/m_(c_i)``. Unbiased for the spectral mixture
  ``Σ_c π_c exp(−δᵀΣ_cδ/2) cos(μ_cᵀδ)``, ``Σ_c = L_cᵀL_c`` (``E cos(ωᵀδ)`` for ``ω ~ N(μ, Σ)``).
* **GMM-PRF** (:func:`gmm_prf`): ``a_i·exp(ω_iᵀx − ‖x‖²/2)``, unbiased for
  ``Σ_c π_c exp(μ_cᵀs + ½sᵀΣ_cs − ‖x‖²/2 − ‖y‖²/2)``, ``s = x + y`` (``E exp(ωᵀs) =
  exp(μᵀs + ½sᵀΣs)``); the softmax kernel when C = 1, μ = 0, Σ = I.
* **Fastfood** (:func:`fastfood`): blocks ``W_b = S H G Π H B/√p`` (±1 Hadamard H of size
  ``p = 2^⌈log₂ d⌉``, diagonals S, G, B, permutation Π), first d columns, features
  ``[cos(Wx/σ), sin(Wx/σ)]/√(rows)``. With learned (fixed) diagonals the kernel is the finite sum
  ``(1/rows)Σ_i cos(w_iᵀδ/σ)`` (deterministic); with the random initialisation
  (``B`` Rademacher, ``G ~ N(0, I)``, ``S_ii = s_i/‖G‖``, ``s_i ~ χ_p``) every row is
  ``N(0, I)`` in distribution for the Gaussian kernel (docs/math.md §3): unbiased.
* **Generative** (:func:`generative`): ``ω_i = g(ε_i)``, ``g(ε) = W₂ sin(W₁ε + b₁) + b₂``,
  ``ε ~ N(0, I_k)`` with a small latent dimension k; features ``[cos ωᵀx, sin ωᵀx]/√m``; kernel
  ``E_ε cos(g(ε)ᵀδ)`` (stationary, PSD, no closed form). The activation is ``sin`` (a SIREN-style
  generator), not tanh: with sin the integrand is entire, and a Gauss–Hermite product rule
  converges super-geometrically (tanh's complex poles limit it to ``~exp(−c√n)``: measured
  ~1e-10 at 64 nodes per dimension against ~1e-16 at 32 with sin).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.linalg import hadamard

from kernel_verify.impls.validation import (
    Config,
    NumpyParams,
    check_array,
    check_drawn_for,
    check_last_dim,
    check_params,
    check_positive_int,
    check_scalar,
    config_value,
)

__all__ = [
    "PI_SUM_ULPS",
    "check_perm",
    "draw_fastfood",
    "draw_generative",
    "draw_gmm",
    "fastfood",
    "fastfood_learned_params",
    "fastfood_matrix",
    "generative",
    "generative_frequencies",
    "generative_params",
    "generative_values",
    "gmm_frequencies",
    "gmm_params",
    "gmm_prf",
    "gmm_rks",
    "gmm_values",
    "log_gmm_prf",
    "mixture_layout",
    "padded_size",
]

#: |Σπ − 1| ≤ PI_SUM_ULPS·C·u: a weight vector normalised in float64 (π = a/Σa) has each entry
#: within 1 u of exact and the float sum adds C−1 more roundings, so 2C·u covers it; 4C·u leaves a
#: factor 2 margin while still rejecting any weights that are off by more than rounding.
PI_SUM_ULPS = 4


def padded_size(d: int) -> int:
    """``p = 2^⌈log₂ d⌉``: the Hadamard size of Fastfood blocks."""
    d = check_positive_int("d", d)
    return 1 << max(0, (d - 1).bit_length())


def _seed(config: Mapping[str, Any]) -> int:
    return check_positive_int("init_seed", config_value(config, "init_seed"), minimum=0)


def _config_array(config: Config, key: str, default: np.ndarray, shape: tuple) -> np.ndarray:
    value = config[key]
    if value is None:
        return default.copy()  # the cached default stays read-only
    if not isinstance(value, np.ndarray):
        raise TypeError(
            f"config[{key!r}] must be a numpy.ndarray or None, got {type(value).__name__}"
        )
    check_array(f"config[{key!r}]", value, min_ndim=len(shape))
    if value.shape != shape:
        raise ValueError(f"config[{key!r}] must have shape {shape}, got {value.shape}")
    return value.astype(np.float64)


def _frozen(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    for a in arrays:
        a.setflags(write=False)
    return arrays


# ---------------------------------------------------------------------------------- mixtures
_GMM_DEFAULT_SCALE = {"gmm_rks": (0.5, 0.8, 0.2), "gmm_prf": (0.1, 0.9, 0.1)}


@lru_cache(maxsize=64)
def _default_gmm(seed: int, d: int, c: int, tag: str) -> tuple[np.ndarray, ...]:
    mu_scale, l_diag, l_noise = _GMM_DEFAULT_SCALE[tag]
    rng = np.random.default_rng([seed, d, c, sum(map(ord, tag))])
    a = 1.0 + rng.uniform(size=c)
    pi = a / a.sum()
    mu = mu_scale * rng.standard_normal((c, d))
    lower = l_diag * np.eye(d) + l_noise * rng.standard_normal((c, d, d)) / math.sqrt(d)
    return _frozen(pi, mu, lower)


def gmm_params(config: Mapping[str, Any], d: int, tag: str) -> dict[str, np.ndarray]:
    """``{"pi": (C,), "mu": (C, d), "L": (C, d, d)}`` from ``config`` (``tag`` = "gmm_rks" or
    "gmm_prf" picks the default scales). π must be > 0 and sum to 1 within ``PI_SUM_ULPS·C·u``."""
    c = check_positive_int("n_components", config_value(config, "n_components"))
    pi0, mu0, l0 = _default_gmm(_seed(config), d, c, tag)
    pi = _config_array(config, "pi", pi0, (c,))
    mu = _config_array(config, "mu", mu0, (c, d))
    lower = _config_array(config, "L", l0, (c, d, d))
    if np.any(pi <= 0):
        raise ValueError(f"mixture weights pi must all be > 0, got {pi}")
    tol = PI_SUM_ULPS * c * np.finfo(np.float64).eps / 2
    if abs(float(np.sum(pi)) - 1.0) > tol:
        raise ValueError(
            f"mixture weights pi must sum to 1 (within {tol:.1e}), got sum {np.sum(pi)!r}"
        )
    return {"pi": pi, "mu": mu, "L": lower}


def draw_gmm(tag: str, rng: np.random.Generator, d: int, m: int, config: Config) -> dict:
    """A complete GMM draw: ``eps (m, d) ~ N(0, I)`` and the learned ``pi, mu, L`` of
    :func:`gmm_params` (copies)."""
    m = check_positive_int("m", m)
    g = gmm_params(config, d, tag)
    mixture_layout(m, g["pi"].shape[0])
    eps = rng.standard_normal((m, d))
    return {"eps": eps, **{k: np.array(v, dtype=np.float64) for k, v in g.items()}}


def gmm_values(params: NumpyParams, config: Config, d: int, tag: str, *,
    backend: str | None = None) -> dict[str, Any]:
    """``pi, mu, L``: from ``params`` (the entry's draw) when present, else from ``config``
    (which is validated either way: a bad config is an error even when params carry the
    weights)."""
    check_params("params", params, {}, backend=backend)
    from_config = gmm_params(config, d, tag)
    if not {"pi", "mu", "L"} & set(params):
        return from_config
    c = params["pi"].shape[0] if "pi" in params else None
    check_params("params", params, {"mu": (None, None)}, backend=backend)
    check_drawn_for("x", d, params["mu"].shape[1])
    check_params("params", params, {"pi": (c,), "mu": (c, d), "L": (c, d, d)}, backend=backend)
    return {"pi": params["pi"], "mu": params["mu"], "L": params["L"]}


def mixture_layout(m: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """``(comps, counts)``: frequency i belongs to component ``i mod C``; needs ``m >= C``."""
    m = check_positive_int("m", m)
    c = check_positive_int("c", c)
    if m < c:
        raise ValueError(
            f"m (= {m}) must be >= n_components (= {c}): every component needs a frequency"
        )
    comps = np.arange(m) % c
    return comps, np.bincount(comps, minlength=c)


def gmm_frequencies(
    eps: np.ndarray, pi: np.ndarray, mu: np.ndarray, lower: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(ω, a²)``: ``ω_i = μ_(c_i) + L_(c_i)ᵀε_i`` (m, d), weights ``a_i² = π_(c_i)/m_(c_i)``."""
    comps, counts = mixture_layout(eps.shape[0], pi.shape[0])
    omega = mu[comps] + np.einsum("mkj,mk->mj", lower[comps], eps)
    return omega, pi[comps] / counts[comps]


def _gmm_setup(
    x: np.ndarray, params: NumpyParams, config: Config, tag: str
) -> tuple[np.ndarray, np.ndarray]:
    check_array("x", x, min_ndim=2, backend="numpy")
    d = x.shape[-1]
    check_params("params", params, {"eps": (None, None)}, backend="numpy")
    check_last_dim("x", x, params["eps"].shape[1])  # ε was drawn for this d
    g = gmm_values(params, config, d, tag, backend="numpy")
    omega, a2 = gmm_frequencies(params["eps"], g["pi"], g["mu"], g["L"])
    return x @ omega.astype(x.dtype).T, a2.astype(x.dtype)


def gmm_rks(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``a_i[cos ω_iᵀx, sin ω_iᵀx]``: unbiased for the spectral mixture kernel (docs/math.md §7)."""
    u, a2 = _gmm_setup(x, params, config, "gmm_rks")
    a = np.sqrt(a2)
    return np.concatenate([a * np.cos(u), a * np.sin(u)], axis=-1)


def log_gmm_prf(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``log φ_i = ω_iᵀx − ‖x‖²/2 + ½ log a_i²``."""
    u, a2 = _gmm_setup(x, params, config, "gmm_prf")
    return u - 0.5 * np.sum(x * x, axis=-1, keepdims=True) + 0.5 * np.log(a2)


def gmm_prf(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``a_i·exp(ω_iᵀx − ‖x‖²/2)``, ``ω ~ Σ_c π_c N(μ_c, Σ_c)``: positive, unbiased (§7)."""
    return np.exp(log_gmm_prf(x, params, config))


# ---------------------------------------------------------------------------------- Fastfood
def check_perm(perm: np.ndarray) -> np.ndarray:
    as_int = perm.astype(np.intp)
    if np.any(as_int != perm) or np.any(np.sort(as_int, axis=-1) != np.arange(perm.shape[-1])):
        raise ValueError("Fastfood 'perm' rows must each be a permutation of 0..p-1")
    return as_int


def fastfood_matrix(
    s: np.ndarray, g: np.ndarray, b: np.ndarray, perm: np.ndarray, d: int
) -> np.ndarray:
    """Rows of ``S H G Π H B/√p`` for every block (arrays of shape ``(blocks, p)``), first d
    columns: an ``(blocks·p, d)`` matrix."""
    p = s.shape[-1]
    h = hadamard(p).astype(np.float64)
    perm_i = check_perm(perm)
    blocks = [
        (s[k][:, None] * (h * g[k])) @ (h * b[k])[perm_i[k], :] / math.sqrt(p)
        for k in range(s.shape[0])
    ]
    return np.concatenate(blocks, axis=0)[:, :d]


def draw_fastfood(rng: np.random.Generator, d: int, blocks: int) -> dict[str, np.ndarray]:
    """Random Fastfood diagonals (docs/math.md §3): B Rademacher, Π uniform, G ~ N(0, I),
    ``S_ii = s_i/‖G‖``, ``s_i ~ χ_p``; arrays ``(blocks, p)`` (perm stored as float)."""
    p = padded_size(d)
    out: dict[str, list[np.ndarray]] = {"S": [], "G": [], "B": [], "perm": []}
    for _ in range(blocks):
        b = rng.choice(np.array([-1.0, 1.0]), size=p)
        perm = rng.permutation(p).astype(np.float64)
        g = rng.standard_normal(p)
        s = np.sqrt(rng.chisquare(p, size=p)) / np.linalg.norm(g)
        for key, value in (("S", s), ("G", g), ("B", b), ("perm", perm)):
            out[key].append(value)
    return {key: np.stack(values) for key, values in out.items()}


@lru_cache(maxsize=32)
def _default_fastfood(seed: int, d: int) -> tuple[np.ndarray, ...]:
    draw = draw_fastfood(np.random.default_rng([seed, d, 0xFF]), d, 1)
    return _frozen(*(draw[k][0] for k in ("S", "G", "B", "perm")))


def fastfood_learned_params(config: Mapping[str, Any], d: int) -> dict[str, np.ndarray]:
    """The learned diagonals ``S, G, B`` and permutation ``perm`` (each ``(p,)``, one block) from
    ``config``; ``None`` = the seeded random initialisation of :func:`draw_fastfood`."""
    p = padded_size(d)
    defaults = dict(zip(("S", "G", "B", "perm"), _default_fastfood(_seed(config), d), strict=True))
    out = {k: _config_array(config, k, defaults[k], (p,)) for k in defaults}
    check_perm(out["perm"])
    return out


def fastfood(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``[cos(Wx/σ), sin(Wx/σ)]/√rows`` with W built from the Fastfood blocks in ``params``."""
    check_array("x", x, min_ndim=2, backend="numpy")
    sigma = check_scalar("sigma", config_value(config, "sigma"), positive=True)
    d = x.shape[-1]
    p = padded_size(d)
    check_params("params", params, {k: (None, p) for k in ("S", "G", "B", "perm")}, backend="numpy")
    w = fastfood_matrix(params["S"], params["G"], params["B"], params["perm"], d)
    u = (x / x.dtype.type(sigma)) @ w.astype(x.dtype).T
    scale = x.dtype.type(1.0 / math.sqrt(w.shape[0]))
    return scale * np.concatenate([np.cos(u), np.sin(u)], axis=-1)


# -------------------------------------------------------------------------------- generative
@lru_cache(maxsize=32)
def _default_generative(seed: int, d: int, k: int, hidden: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng([seed, d, k, hidden, 0x6E])
    w1 = 0.5 * rng.standard_normal((hidden, k)) / math.sqrt(k)
    b1 = 0.1 * rng.standard_normal(hidden)
    w2 = rng.standard_normal((d, hidden)) / math.sqrt(hidden)
    b2 = 0.1 * rng.standard_normal(d)
    return _frozen(w1, b1, w2, b2)


def generative_params(config: Mapping[str, Any], d: int) -> dict[str, np.ndarray]:
    """MLP weights ``W1 (h, k)``, ``b1 (h,)``, ``W2 (d, h)``, ``b2 (d,)`` from ``config``
    (``latent_dim`` k, ``hidden`` h); ``None`` = seeded default ``W1 ~ N(0, 1/(4k))``,
    ``W2 ~ N(0, 1/h)``, biases ``N(0, 0.1²)``. The small ``W1`` keeps the growth of
    ``sin(W1ε + b1)`` off the real axis slow, so the Gauss–Hermite reference of the kernel
    converges in few nodes."""
    k = check_positive_int("latent_dim", config_value(config, "latent_dim"))
    h = check_positive_int("hidden", config_value(config, "hidden"))
    w1, b1, w2, b2 = _default_generative(_seed(config), d, k, h)
    return {
        "W1": _config_array(config, "W1", w1, (h, k)),
        "b1": _config_array(config, "b1", b1, (h,)),
        "W2": _config_array(config, "W2", w2, (d, h)),
        "b2": _config_array(config, "b2", b2, (d,)),
    }


def draw_generative(rng: np.random.Generator, d: int, m: int, config: Config) -> dict:
    """A complete generative draw: ``eps (m, k) ~ N(0, I)`` and the MLP weights of
    :func:`generative_params` (copies)."""
    m = check_positive_int("m", m)
    weights = generative_params(config, d)
    eps = rng.standard_normal((m, weights["W1"].shape[1]))
    return {"eps": eps, **{k: np.array(v, dtype=np.float64) for k, v in weights.items()}}


def generative_values(params: NumpyParams, config: Config, d: int, *,
    backend: str | None = None) -> dict[str, Any]:
    """``W1, b1, W2, b2``: from ``params`` (the entry's draw) when present, else from
    ``config``."""
    keys = ("W1", "b1", "W2", "b2")
    check_params("params", params, {}, backend=backend)
    from_config = generative_params(config, d)  # validates config either way
    if not set(keys) & set(params):
        return from_config
    h, k = params["W1"].shape if "W1" in params else (None, None)
    check_params("params", params, {"W2": (None, None)}, backend=backend)
    check_drawn_for("x", d, params["W2"].shape[0])
    check_params("params", params, {"W1": (h, k), "b1": (h,), "W2": (d, h), "b2": (d,)},
                 backend=backend)
    return {key: params[key] for key in keys}


def generative_frequencies(eps: np.ndarray, weights: Mapping[str, np.ndarray]) -> np.ndarray:
    """``ω_i = W₂ sin(W₁ε_i + b₁) + b₂`` for each row of ``eps`` (m, k) → (m, d)."""
    return np.sin(eps @ weights["W1"].T + weights["b1"]) @ weights["W2"].T + weights["b2"]


def generative(x: np.ndarray, params: NumpyParams, config: Config) -> np.ndarray:
    """``[cos ω_iᵀx, sin ω_iᵀx]/√m``, ``ω_i = g(ε_i)``: unbiased for ``E_ε cos(g(ε)ᵀδ)``."""
    check_array("x", x, min_ndim=2, backend="numpy")
    d = x.shape[-1]
    weights = generative_values(params, config, d, backend="numpy")
    check_params("params", params, {"eps": (None, weights["W1"].shape[1])}, backend="numpy")
    omega = generative_frequencies(params["eps"], weights)
    check_last_dim("x", x, omega.shape[1])
    u = x @ omega.astype(x.dtype).T
    scale = x.dtype.type(1.0 / math.sqrt(u.shape[-1]))
    return scale * np.concatenate([np.cos(u), np.sin(u)], axis=-1)
