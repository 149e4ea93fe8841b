"""fla's learned feature-map modules (``fla.modules.feature_map``) as targets, against the exact
kernels they claim (docs/math.md §6, §18, §21), and the measurements behind their findings.

* ``RebasedFeatureMap(d)`` (ReBased, Aksenov et al. 2024): fla's layer norm (Triton, run under the
  interpreter) with learned ``γ, β``, then the ``d(d+1)/2`` distinct products ``x̃ᵢx̃ⱼ`` scaled
  ``1/√d`` on the diagonal and ``√(2/d)`` off it: kernel ``rebased`` at ``s = 1/d``,
  ``(x̃ᵀỹ)²/d``. The adapter sets the module's ``γ, β`` to the registry's seeded values
  (``impls/numpy/learned_attention.rebased_affine``), not the identity affine it is created with,
  so a slip in how the affine map is applied can show.
* ``HedgehogFeatureMap(d)`` (its docstring: Hedgehog, Zhang et al. 2024): ``softmax([2z, −2z])``
  over all ``2d`` entries, ``z = Wx + b``, created as ``W = I``, ``b = 0``. Hedgehog's map is
  ``[softmax(z), softmax(−z)]``, each half normalised on its own (the registry's ``hedgehog``
  kernel at ``W = I``, ``b = 0``).
* ``LearnablePolySketchNonNegativeFeatureMap``'s final step, ``flatten_diag_outer_product(ψ, ψ)``
  ("do p=2 mapping to ensure non-negativity"): the PolySketch non-negative construction
  (Kacham et al. 2024, docs/math.md §18) is ``ψ ⊗ ψ``, whose inner products are ``(ψᵀψ')²``
  (the ``polynomial`` kernel with ``c = 0``, ``p = 2``). fla keeps the ``d(d+1)/2`` distinct
  products without the ``√2`` on the off-diagonal ones. The step is the target (its input is
  ``ψ``): the module's learned sketches before it have no exact kernel to compare with.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np

from kernel_verify.adapters import _triton_interpreter as interp
from kernel_verify.adapters._lazy import need
from kernel_verify.adapters.library import Finding
from kernel_verify.impls.numpy.learned_attention import rebased_affine
from kernel_verify.properties.protocol import FeatureMapTarget

__all__ = ["FEATURE_MAP_TARGETS", "fla_hedgehog_joint_softmax", "fla_polysketch_square",
           "fla_rebased_map"]

_EXACT = frozenset({"deterministic", "exact_finite", "psd_kernel"})
#: fla's layer-norm epsilon (``fla.modules.layernorm.layer_norm``'s default).
LAYER_NORM_EPS = 1e-5
_REBASED_CONFIG = {"init_seed": 0, "gamma": None, "beta": None}

if "triton" not in sys.modules:  # fla's layer norm is Triton: the interpreter, before import
    interp.enable()


def _rebased_draw(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
    """No randomness: the γ, β the adapter puts into the module (the twin reads them)."""
    return {k: np.array(v) for k, v in rebased_affine(config, d).items()}


@cache
def _ops_ready() -> None:
    """fla's layer norm is a Triton kernel: run it under the interpreter with the adapter's
    workarounds (:mod:`kernel_verify.adapters._triton_interpreter`)."""
    try:
        interp.enable()
    except interp.TritonAlreadyImported as err:
        raise RuntimeError(f"fla feature-map targets: {err}") from None
    need("fla", "modules.feature_map")
    interp.patch_autotuner()
    interp.patch_nested_lang()
    interp.patch_kernel_modules("fla.")


def rebased_module(d: int, config: Mapping[str, Any]):
    """fla's ``RebasedFeatureMap(d)`` with ``γ, β`` set to the registry's values for ``config``."""
    import torch

    _ops_ready()
    fm = need("fla", "modules.feature_map")
    module = fm.RebasedFeatureMap(d)
    affine = rebased_affine(config, d)
    with torch.no_grad():
        module.gamma.copy_(torch.as_tensor(affine["gamma"]))
        module.beta.copy_(torch.as_tensor(affine["beta"]))
    return module


def unpack_triangle(tri, d: int):
    """fla's ``d(d+1)/2`` products ``[√(1/d)·x̃ᵢ² (i), √(2/d)·x̃ᵢx̃ⱼ (i < j)]`` (diagonal first),
    written as the
    ``d²`` features ``vec(x̃x̃ᵀ)`` (×√d; each off-diagonal product ÷√2, in both (i, j) and (j, i)):
    an exact, reversible relayout (inner products unchanged up to the √d factor, one rounding per
    feature), so the registry's twin of ``rebased`` at ``s = 1`` checks fla's features one by
    one and its kernel ``(x̃ᵀỹ)²/d`` as ``d·`` that."""
    import torch

    diag, off = tri[..., :d], tri[..., d:]
    i, j = torch.triu_indices(d, d, 1)
    full = torch.zeros((*tri.shape[:-1], d, d), dtype=tri.dtype, device=tri.device)
    root_d = math.sqrt(d)
    full[..., i, j] = off * (root_d / math.sqrt(2.0))
    full[..., j, i] = full[..., i, j]
    idx = torch.arange(d)
    full[..., idx, idx] = diag * root_d
    return full.reshape(*tri.shape[:-1], d * d)


def _rebased_fn(x, params: Mapping[str, Any], config: Mapping[str, Any]):
    import torch

    module = rebased_module(x.shape[-1], config).to(x.dtype)
    with torch.no_grad():
        return unpack_triangle(module(x), x.shape[-1])


def _rebased_kernel_params(config: Mapping[str, Any], d: int) -> dict[str, Any]:
    return {**rebased_affine(config, d), "eps": LAYER_NORM_EPS, "scale": 1.0}


def _hedgehog_draw(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
    """The module's initial weights ``W = I``, ``b = 0`` (``init_weights_``)."""
    return {"W": np.eye(d), "b": np.zeros(d)}


def _hedgehog_fn(x, params: Mapping[str, Any], config: Mapping[str, Any]):
    import torch

    fm = need("fla", "modules.feature_map")
    module = fm.HedgehogFeatureMap(x.shape[-1]).to(x.dtype)  # W = I, b = 0 (its init)
    with torch.no_grad():
        return module(x)


_REFERENCE = ("test_features_match_reference", "test_features_on_grid",
              "test_kernel_estimate_matches_reference", "test_exact_map_equals_kernel",
              "test_attention_matches_estimator_reference")
#: The findings about these modules (joined into fla's LIBRARY record).
FINDINGS = (
    Finding(
        "HedgehogFeatureMap is one softmax over [2z, −2z], not Hedgehog's two softmaxes",
        "fla_hedgehog_joint_softmax",
        "`HedgehogFeatureMap` (its docstring cites the Hedgehog paper) returns "
        "`torch.cat([2z, −2z]).softmax(-1)`, z = Wx + b: one normalisation over all 2d "
        "entries and logits doubled. Hedgehog's map is [exp(z), exp(−z)], computed stably as "
        "[softmax(z), softmax(−z)] with each half normalised on its own (LoLCATs; the "
        "registry's `hedgehog`, docs/math.md §6). fla's map is exp([2z, −2z]) times a "
        "per-token factor 1/S(x): on the key side that factor does not cancel in normalised "
        "attention, and the doubled logits change the kernel itself (2Σcosh(2(zᵢ + z'ᵢ)) "
        "instead of 2Σcosh(zᵢ + z'ᵢ)). At W = I, b = 0 the kernel ratio to the per-half "
        "softmax form ranges over two orders of magnitude (measurement below).",
        "Normalise each half: `torch.cat([z.softmax(-1), (-z).softmax(-1)], -1)` (and drop "
        "the factor 2, or document it as a temperature).",
        _REFERENCE, ("fla.HedgehogFeatureMap",)),
    Finding(
        "RebasedFeatureMap computes float64 inputs in float32",
        "fla_rebased_map",
        "With its default `use_gamma = use_beta = normalize = True`, `RebasedFeatureMap` "
        "normalises with fla's Triton `layer_norm`, which accumulates in float32 whatever the "
        "input dtype: a float64 input comes back float64 with float32 rounding noise "
        "(about 1e-7 relative per feature, measured), and float16 products are formed in "
        "float16. The formula itself is right: ReBased's (x̃ᵀỹ)²/d with eps = 1e-5 inside the "
        "root, feature by feature within the derived float32 bound.",
        "Use `F.layer_norm` (or accumulate in the input's dtype) for float64 inputs; form the "
        "outer product in float32 for half inputs.",
        ("test_float64_input_is_computed_in_float64", *_REFERENCE),
        ("fla.RebasedFeatureMap",)),
    Finding(
        "PolySketch's non-negative step drops the √2 of the off-diagonal products",
        "fla_polysketch_square",
        "`LearnablePolySketchNonNegativeFeatureMap` ends with `flatten_diag_outer_product(ψ, "
        "ψ)`, the d(d+1)/2 products ψᵢψⱼ (i ≤ j) unscaled. PolySketch's non-negative "
        "features are ψ ⊗ ψ, whose inner products are (ψᵀψ')² (docs/math.md §18); the "
        "unscaled triangle gives ½(Σ(ψᵢψ'ᵢ)² + (ψᵀψ')²) instead (still ≥ 0, but not the "
        "polynomial kernel, and not a function of ψᵀψ'). Also: at `degree = 2` the module "
        "multiplies two sketches before squaring, so its features are of degree 4, the same "
        "structure as `degree = 4`. Not a target (the learned sketches before the step have "
        "no exact kernel); the measurement checks the step.",
        "Scale the off-diagonal products by √2 (as `RebasedFeatureMap` and `TaylorFeatureMap` "
        "do), and apply the degree-2 sketch only for degree ≥ 4.",
        ()),
)


def known_failures(target: str) -> dict[str, str]:
    """The ``known_failures`` of ``target`` derived from :data:`FINDINGS` (the reason format of
    :meth:`kernel_verify.adapters.library.Library.known_failures`)."""
    return {prop: f"{f.title} (reports/conformance/fla.md, finding '{f.confirm}')"
            for f in FINDINGS if target in f.targets for prop in f.properties}


FEATURE_MAP_TARGETS = [
    FeatureMapTarget("fla.RebasedFeatureMap", "rebased", _EXACT,
                     kernel_params=_rebased_kernel_params,
                     config={**_REBASED_CONFIG, "eps": LAYER_NORM_EPS, "scale": 1.0},
                     draw=_rebased_draw, torch_fn=_rebased_fn, formula="rebased",
                     known_failures=known_failures("fla.RebasedFeatureMap")),
    FeatureMapTarget("fla.HedgehogFeatureMap", "hedgehog", _EXACT | {"positive"},
                     kernel_params=lambda config, d: {"W": np.eye(d), "b": np.zeros(d)},
                     config={"init_seed": 0, "W": None, "b": None},
                     draw=_hedgehog_draw, torch_fn=_hedgehog_fn, formula="hedgehog",
                     known_failures=known_failures("fla.HedgehogFeatureMap")),
]


# ------------------------------------------------------------------------------ measurements
def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def _pairs(seed: int, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal((n, d))


def fla_rebased_map(quick: bool = False) -> str:
    """``RebasedFeatureMap`` (seeded γ, β) against ``(x̃ᵀỹ)²/d`` computed in float64 from the
    definition (two-pass layer norm, eps = 1e-5 inside the root), on float64 and float32
    inputs: the formula is right (float32-sized error on both)."""
    import torch

    lines = []
    for d in (4, 16) if quick else (4, 16, 64):
        x, y = _pairs(d, 64, d)
        aff = rebased_affine(_REBASED_CONFIG, d)

        def tilde(a, aff=aff):
            c = a - a.mean(-1, keepdims=True)
            return aff["gamma"] * c / np.sqrt((c * c).mean(-1, keepdims=True)
                                              + LAYER_NORM_EPS) + aff["beta"]

        exact = np.sum(tilde(x) * tilde(y), -1) ** 2 / d
        # error relative to ‖x̃‖²‖ỹ‖²/d, the kernel's size without cancellation
        size = np.sum(tilde(x) ** 2, -1) * np.sum(tilde(y) ** 2, -1) / d
        errs = []
        for dtype in (torch.float64, torch.float32):
            xs, ys = (torch.tensor(a).to(dtype) for a in (x, y))
            module = rebased_module(d, _REBASED_CONFIG).to(dtype)
            with torch.no_grad():
                fx, fy = module(xs).double().numpy(), module(ys).double().numpy()
            errs.append(float(np.max(np.abs(np.sum(fx * fy, -1) - exact) / size)))
        lines.append(f"d = {d}: max |φ(x)ᵀφ(y) − (x̃ᵀỹ)²/d| / (‖x̃‖²‖ỹ‖²/d): float64 "
                     f"input {errs[0]:.1e}, float32 input {errs[1]:.1e}")
    return "; ".join(lines) + " (float64 ≈ 1e-16 if computed in float64)"


def fla_hedgehog_joint_softmax(quick: bool = False) -> str:
    """``HedgehogFeatureMap`` (its identity init, float64) against Hedgehog's
    ``[softmax(z), softmax(−z)]`` and against the formula fla computes, ``softmax([2z, −2z])``
    (the second route: fla's output predicted to rounding)."""
    import torch

    d = 8
    x, y = _pairs(1, 256 if quick else 2048, d)
    fx = _hedgehog_fn(torch.tensor(x), {}, {}).numpy()
    fy = _hedgehog_fn(torch.tensor(y), {}, {}).numpy()

    def softmax(a):
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def hedgehog(a):
        return np.concatenate([softmax(a), softmax(-a)], -1)

    def joint(a):
        return softmax(np.concatenate([2 * a, -2 * a], -1))

    got = np.sum(fx * fy, -1)
    paper = np.sum(hedgehog(x) * hedgehog(y), -1)
    ratio = got / paper
    return (f"d = {d}, W = I, b = 0, {len(x)} pairs of N(0, I) points: fla's kernel / "
            f"Hedgehog's [softmax(z), softmax(−z)] kernel = {ratio.min():.3g} … {ratio.max():.3g} "
            f"(not a constant: attention does not cancel it); fla's features equal "
            f"softmax([2z, −2z]) to {_rel(fx, joint(x)):.1e} relative")


def fla_polysketch_square(quick: bool = False) -> str:
    """``flatten_diag_outer_product(ψ, ψ)`` against ``(ψᵀψ')²`` and against
    ``½(Σ(ψᵢψ'ᵢ)² + (ψᵀψ')²)`` (what the stored triangle computes: the second route)."""
    import torch

    fm = need("fla", "modules.feature_map")
    d = 16
    x, y = _pairs(2, 256 if quick else 2048, d)
    with torch.no_grad():
        fx = fm.flatten_diag_outer_product(torch.tensor(x), torch.tensor(x)).numpy()
        fy = fm.flatten_diag_outer_product(torch.tensor(y), torch.tensor(y)).numpy()
    got = np.sum(fx * fy, -1)
    dot = np.sum(x * y, -1)
    claimed = dot**2
    predicted = 0.5 * (np.sum((x * y) ** 2, -1) + claimed)
    ratio = got / claimed
    return (f"d = {d}, {len(x)} pairs of N(0, I) points: kernel / (ψᵀψ')² = "
            f"{np.median(ratio):.3g} median ({ratio.min():.3g} … {ratio.max():.3g}); "
            f"½(Σ(ψᵢψ'ᵢ)² + (ψᵀψ')²) predicts it to {_rel(got, predicted):.1e} relative; "
            f"scaling the off-diagonal products by √2 gives (ψᵀψ')² to "
            f"{_rel(2 * got - np.sum((x * y) ** 2, -1), claimed):.1e}")

