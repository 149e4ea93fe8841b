"""Broken ReBased and DARKFormer maps (docs/math.md §21): white-box feature-map mutants.

Each keeps the registry entry's formula, kernel, claims, draw and configuration (the lie) and
replaces its NumPy function with a plausible slip of a hand-written implementation:

* ReBased: the variance with Bessel's correction (``torch.var``'s default), ``eps`` added
  outside the root, an RMS norm instead of the layer norm (no centring), the affine map applied
  before the normalisation (which then cancels β), the ``d(d+1)/2`` distinct products stored
  without the ``√2`` on the off-diagonal ones;
* DARKFormer: the Performer shift ``−‖x‖²/2`` kept instead of ``−‖Mx‖²/2`` (biased), ``M``
  applied transposed (``ω = Mε``: the kernel ``exp(xᵀMMᵀy)``), the covariance used as the
  projection (``z = MᵀMx``: ``ω ~ N(0, Σ²)``).

Also one PolySketch mutant (docs/math.md §18) whose 30 % bias only the exact sketch-law test
sees. The correct twins are the registry functions themselves (``kernel_verify.mutants.controls``:
``rebased``, ``darkformer``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from kernel_verify.impls.numpy import learned_attention as np_la
from kernel_verify.mutants.base import named
from kernel_verify.mutants.features import feature_mutant, log_feature_mutant
from kernel_verify.properties.protocol import Target

__all__ = ["LEARNED_KILLERS", "LEARNED_MUTANTS"]


def _affine(x: np.ndarray, params: Mapping[str, Any], config: Mapping[str, Any]):
    v = np_la.rebased_values(params, config, x.shape[-1], backend="numpy")
    return v["gamma"].astype(x.dtype), v["beta"].astype(x.dtype), v["eps"], v["scale"]


def _outer(t: np.ndarray, scale: float) -> np.ndarray:
    d = t.shape[-1]
    return (t[..., :, None] * t[..., None, :]).reshape(*t.shape[:-1], d * d) * np.sqrt(scale)


def _rebased_with(norm: Callable[[np.ndarray, float], np.ndarray], *, affine_first=False):
    def fn(x, params, config):
        g, b, eps, scale = _affine(x, params, config)
        t = norm(g * x + b, eps) if affine_first else g * norm(x, eps) + b
        return _outer(t, scale)

    return fn


def _layer_norm(x, eps, *, ddof=0, eps_inside=True):
    c = x - x.mean(axis=-1, keepdims=True)
    var = np.sum(c * c, axis=-1, keepdims=True) / (x.shape[-1] - ddof)
    return c / (np.sqrt(var + eps) if eps_inside else np.sqrt(var) + eps)


def _rms_norm(x, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def _rebased_triangle_without_sqrt2(x, params, config):
    """The ``d(d+1)/2`` distinct products ``x̃ᵢx̃ⱼ`` (i ≤ j), none scaled: the kernel is
    ``½(Σ(x̃ᵢỹᵢ)² + (x̃ᵀỹ)²)``, not ``(x̃ᵀỹ)²``."""
    g, b, eps, scale = _affine(x, params, config)
    t = g * _layer_norm(x, eps) + b
    i, j = np.triu_indices(t.shape[-1])
    # padded with zeros to the entry's d² features, so only the values are wrong
    tri = t[..., i] * t[..., j] * np.sqrt(scale)
    pad = np.zeros((*t.shape[:-1], t.shape[-1] ** 2 - tri.shape[-1]), dtype=x.dtype)
    return np.concatenate([tri, pad], axis=-1)


def _log_darkformer_with(project: Callable[[np.ndarray, np.ndarray], np.ndarray],
                         shift_of_x: bool = False):
    def log_fn(x, params, config):
        a = np.asarray(params["M"]).astype(x.dtype)
        w = np.asarray(params["W"]).astype(x.dtype)
        z = project(x, a)
        shifted = x if shift_of_x else z
        return (z @ w.T - 0.5 * np.sum(shifted * shifted, axis=-1, keepdims=True)
                - 0.5 * np.log(w.shape[0]))

    return log_fn


_LOG_SHIFT_OF_X = _log_darkformer_with(lambda x, a: x @ a.T, shift_of_x=True)
_LOG_TRANSPOSED = _log_darkformer_with(lambda x, a: x @ a)
_LOG_COVARIANCE = _log_darkformer_with(lambda x, a: x @ (a.T @ a).T)


def _rebased(fn) -> Callable[[str], list[Target]]:
    return named(feature_mutant, "rebased", fn)


def _darkformer(log_fn) -> Callable[[str], list[Target]]:
    # no FAVOR-style attention target: it would be judged against softmax attention, while
    # DARKFormer's attention converges to attention with exp(qᵀΣk) weights
    return named(log_feature_mutant, "darkformer", log_fn)


def _polysketch_wide_draw(name: str) -> list[Target]:
    """PolySketch whose draw makes entries ``N(0, 1.3^(1/2)/m)`` (``S`` scaled by ``1.3^(1/4)``)
    with the registry's map: every estimate 30 % too large. The twin reads the drawn ``S``, so
    the feature comparisons agree with it; the median-of-means test of the mean misses the bias
    at 500 draws (measured 0 of 40), the sketch's exact norm law
    (properties/test_sketch_law.py) does not."""
    from kernel_verify.impls.registry import get

    entry = get("polysketch[iid]")

    def draw(rng, d, m, config):
        params = entry.draw(rng, d, m, config)
        return {**params, "S": params["S"] * 1.3**0.25}

    return [replace(t, draw=draw) for t in feature_mutant(name, "polysketch[iid]", entry.numpy_fn)]


#: name -> (what is wrong, ``make(name)``: the targets, named ``mutant:<name>…``).
LEARNED_MUTANTS: dict[str, tuple[str, Callable[[str], list[Target]]]] = {
    "rebased_bessel_variance": (
        "ReBased normalised with the unbiased variance (÷(d−1), torch.var's default)",
        _rebased(_rebased_with(lambda x, eps: _layer_norm(x, eps, ddof=1)))),
    "rebased_eps_outside_root": (
        "ReBased with σ = √var + eps instead of √(var + eps)",
        _rebased(_rebased_with(lambda x, eps: _layer_norm(x, eps, eps_inside=False)))),
    "rebased_rms_norm": (
        "ReBased with an RMS norm (no centring) instead of the layer norm",
        _rebased(_rebased_with(_rms_norm))),
    "rebased_affine_before_norm": (
        "ReBased normalising γ⊙x + β instead of applying γ, β after the normalisation",
        _rebased(_rebased_with(_layer_norm, affine_first=True))),
    "rebased_triangle_without_sqrt2": (
        "ReBased storing the distinct products x̃ᵢx̃ⱼ (i ≤ j) without √2 off the diagonal",
        _rebased(_rebased_triangle_without_sqrt2)),
    "darkformer_shift_of_x": (
        "DARKFormer with Performer's −‖x‖²/2 instead of −‖Mx‖²/2",
        _darkformer(_LOG_SHIFT_OF_X)),
    "darkformer_transposed_m": (
        "DARKFormer projecting with Mᵀ (ω = Mε: kernel exp(xᵀMMᵀy))",
        _darkformer(_LOG_TRANSPOSED)),
    "darkformer_covariance_as_projection": (
        "DARKFormer projecting with Σ = MᵀM instead of M (ω ~ N(0, Σ²))",
        _darkformer(_LOG_COVARIANCE)),
    "polysketch_draw_too_wide": (
        "PolySketch drawing sketch entries of variance 1.3^(1/2)/m instead of 1/m (30 % bias)",
        _polysketch_wide_draw),
}

#: name -> the property families (or ``family::test_name``) expected to kill it: measured with
#: ``kernel-verify check kernel_verify.mutants.catalogue:target_<name> --profile mutants`` (every
#: ReBased mutant FAILs test_features_match_reference, test_kernel_estimate_matches_reference and
#: taylor's test_exact_map_equals_kernel; the DARKFormer ones test_features_match_reference,
#: test_log_features_match_reference and feature_unbiased's test_unbiased_on_grid).
_REBASED_KILLERS = ("feature_reference", "taylor")
_DARKFORMER_KILLERS = ("feature_reference", "feature_unbiased")
LEARNED_KILLERS: dict[str, tuple[str, ...]] = {
    **{name: _REBASED_KILLERS if name.startswith("rebased") else _DARKFORMER_KILLERS
       for name in LEARNED_MUTANTS},
    "polysketch_draw_too_wide": ("sketch_law",),
}


def __getattr__(attr: str) -> list[Target]:
    """``target_<name>``: the targets of one mutant (the third-party loader's spec)."""
    name = attr.removeprefix("target_")
    if attr.startswith("target_") and name in LEARNED_MUTANTS:
        return LEARNED_MUTANTS[name][1](name)
    raise AttributeError(attr)
