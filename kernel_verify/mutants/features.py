"""Broken feature maps: white-box ``FeatureMapTarget`` mutants of registry entries.

Each mutant keeps the entry's ``formula``, ``kernel``, claims, parameter draw and configuration
(that is the lie) and replaces the NumPy function (no torch function: torch properties skip it;
the ``entry`` link is dropped so no property can fall back on the correct code). For the softmax
family a FAVOR-style ``AttentionTarget`` built from the broken map is attached too, as a
third-party adapter exposing both would be (``examples/my_favor.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from kernel_verify.impls.descriptor import GRADIENT_CLAIMS
from kernel_verify.impls.numpy import learned_maps as np_lm
from kernel_verify.impls.numpy import random_features as np_rf
from kernel_verify.impls.numpy.attention import linear_attention, log_linear_attention
from kernel_verify.impls.registry import get
from kernel_verify.mutants.base import named
from kernel_verify.properties.protocol import AttentionTarget, FeatureMapTarget, Target
from kernel_verify.verify import seeds

Fn = Callable[[np.ndarray, Mapping[str, np.ndarray], Mapping[str, Any]], np.ndarray]


def _proj(x: np.ndarray, params: Mapping[str, np.ndarray], scale: float = 1.0) -> np.ndarray:
    return (x / scale) @ params["W"].T


def _half_sq(x: np.ndarray) -> np.ndarray:
    return 0.5 * np.sum(x * x, axis=-1, keepdims=True)


# ------------------------------------------------------------------ softmax family (log φ)
def log_positive_no_norm(x, params, config):
    """``Wx − ½ log m``: the ``−‖x‖²/2`` term is missing."""
    u = _proj(x, params)
    return u - 0.5 * np.log(u.shape[-1])


def log_positive_no_sqrt_m(x, params, config):
    """``Wx − ‖x‖²/2``: the ``m^(-1/2)`` normalisation is missing."""
    return _proj(x, params) - _half_sq(x)


def log_positive_float32(x, params, config):
    """The right formula, silently evaluated in float32."""
    out = np_rf.log_softmax_positive(x.astype(np.float32), params, config)
    return out.astype(x.dtype)


def log_positive_divided_by_m(x, params, config):
    """``Wx − ‖x‖²/2 − log m``: normalised by ``1/m`` where ``1/√m`` belongs."""
    u = _proj(x, params)
    return u - _half_sq(x) - np.log(u.shape[-1])


def log_hyperbolic_missing_inv_sqrt2(x, params, config):
    """SM⁺ₕ normalised by ``m^(-1/2)`` instead of ``(2m)^(-1/2)``: estimates 2·SM."""
    return np_rf.log_softmax_hyperbolic(x, params, config) + 0.5 * np.log(2.0)


def log_hyperbolic_half(x, params, config):
    """Only the ``exp(+wᵀx)`` half, still normalised by ``(2m)^(-1/2)``: estimates SM/2."""
    u = _proj(x, params)
    return u - _half_sq(x) - 0.5 * np.log(2 * u.shape[-1])


def _log_gerf_with(x, params, config, *, d_power: float, b_of_a: Callable[[float], float]):
    w = params["W"]
    a = config["A"]
    d = w.shape[1]
    log_d = d_power * d * np.log1p(-4 * a)
    row = a * np.sum(w * w, axis=-1) + log_d - 0.5 * np.log(w.shape[0])
    return b_of_a(a) * _proj(x, params) + row - _half_sq(x)


def log_gerf_wrong_d(x, params, config):
    """GERF with ``D = (1−4A)^(d/2)`` instead of ``(1−4A)^(d/4)``."""
    return _log_gerf_with(x, params, config, d_power=0.5, b_of_a=lambda a: np.sqrt(1 - 4 * a))


def log_gerf_wrong_b(x, params, config):
    """GERF with ``B = 1 − 4A`` instead of ``√(1−4A)``."""
    return _log_gerf_with(x, params, config, d_power=0.25, b_of_a=lambda a: 1 - 4 * a)


def _log_sderf_with(x, params, config, *, with_det: bool, sqrt_sign: float):
    from kernel_verify.impls.numpy import dense_exponential as np_de

    w = params["W"]
    d = w.shape[1]
    a = np_de.sderf_config_matrix(config, d)
    lam, q = np.linalg.eigh(a)
    b = (q * np.sqrt(np.maximum(1 + sqrt_sign * 4 * lam, 0.0))) @ q.T
    log_d = 0.25 * float(np.sum(np.log1p(-4 * lam))) if with_det else 0.0
    return np_de.log_dense_exponential(x, w, a, b, -0.5 * np.eye(d), log_d)


def log_sderf_missing_det_factor(x, params, config):
    """SDERF without ``D = det(I − 4A)^(1/4)`` (``D = 1``): every estimate is
    ``det(I − 4A)^(−1/2)`` times too small (``A ≺ 0``: too large)."""
    return _log_sderf_with(x, params, config, with_det=False, sqrt_sign=-1.0)


def log_sderf_sqrt_sign_flipped(x, params, config):
    """SDERF with ``B = (I + 4A)^(1/2)`` where ``(I − 4A)^(1/2)`` belongs (``D`` right): the sign
    of ``A`` flipped inside the square root; finite features, a biased estimate."""
    return _log_sderf_with(x, params, config, with_det=True, sqrt_sign=1.0)


def _exp_of(log_fn: Fn) -> Fn:
    def fn(x, params, config):
        return np.exp(log_fn(x, params, config))

    fn.__doc__ = f"exp of :func:`{log_fn.__name__}`"
    return fn


# ------------------------------------------------------------------ maps without log features
def trig_wrong_sign(x, params, config):
    """Trigonometric softmax features with ``exp(−‖x‖²/2)`` (should be ``+``)."""
    u = _proj(x, params)
    return np.exp(-_half_sq(x)) / np.sqrt(u.shape[-1]) * np.concatenate(
        [np.cos(u), np.sin(u)], axis=-1)


def rff_sigma_multiplied(x, params, config):
    """RFF pairs with ``x·σ`` instead of ``x/σ``."""
    u = _proj(x, params, 1.0 / config["sigma"])
    return np.concatenate([np.cos(u), np.sin(u)], axis=-1) / np.sqrt(u.shape[-1])


def rff_sqrt_sigma(x, params, config):
    """RFF pairs with ``x/√σ`` where ``x/σ`` belongs (σ = 4)."""
    u = _proj(x, params, np.sqrt(config["sigma"]))
    return np.concatenate([np.cos(u), np.sin(u)], axis=-1) / np.sqrt(u.shape[-1])


def rff_phase_without_phase(x, params, config):
    """Random-phase features ``√(2/m)cos(wᵀx/σ)``: the phase ``b`` is missing."""
    u = _proj(x, params, config["sigma"])
    return np.sqrt(2.0 / u.shape[-1]) * np.cos(u)


def rff_pairs_float32(x, params, config):
    """RFF pairs silently evaluated in float32."""
    return np_rf.rff_pairs(x.astype(np.float32), params, config).astype(x.dtype)


def rff_phase_missing_sqrt2(x, params, config):
    """Random-phase features ``√(1/m)cos(wᵀx/σ + b)`` (should be ``√(2/m)``)."""
    u = _proj(x, params, config["sigma"])
    return np.cos(u + params["b"]) / np.sqrt(u.shape[-1])


def rff_pairs_unit_rows(x, params, config):
    """Fixed-norm RFF pairs whose rows are normalised to the unit sphere (radius 1) where the
    construction puts them on the sphere of radius √d: the mean is the fixed-norm kernel at
    ``σ·√d``, not the declared ``gaussian_fixed_norm(σ)``."""
    w = params["W"]
    unit = w / np.linalg.norm(w, axis=-1, keepdims=True)
    return get("rff_pairs[orthogonal_fixed_norm]").numpy_fn(x, {**params, "W": unit}, config)


def rff_pairs_sorf_missing_sqrt_d(x, params, config):
    """SORF RFF pairs without the ``√d`` of ``√d·HD₁HD₂HD₃``: rows of unit norm where the
    construction's rows have norm ``√d`` (the frequencies ``√d`` times too small)."""
    w = params["W"]
    return get("rff_pairs[sorf]").numpy_fn(x, {**params, "W": w / np.sqrt(w.shape[-1])}, config)


def relu_features_abs(x, params, config):
    """``|Wx|/√m`` instead of ``relu(Wx)/√m``."""
    u = _proj(x, params)
    return np.abs(u) / np.sqrt(u.shape[-1])


def polysketch_scale_fourth_root(x, params, config):
    """PolySketch with sketch entries of variance ``1/√m`` (``S·m^(1/4)``) where ``N(0, 1/m)``
    belongs: every estimate ``((Sx)ᵀ(Sy))²`` is ``m`` times too large (right only at m = 1)."""
    s = params["S"]
    return get("polysketch[iid]").numpy_fn(x, {**params, "S": s * s.shape[0] ** 0.25}, config)


def maclaurin_missing_p_factor(x, params, config):
    """Random Maclaurin with the weight ``√(a_N·p^N)`` where ``√(a_N/P(N)) = √(a_N·p^(N+1)/(p−1))``
    belongs (Kar & Karnick's ``p^(N+1)`` read as ``p^N``, ``P(N)`` taken unnormalised): every
    estimate is ``1 − 1/p`` times the right one (half, at the default p = 2)."""
    p = float(config["p"])
    return get("random_maclaurin").numpy_fn(x, params, config) * np.sqrt(1.0 - 1.0 / p)


def _taylor2(x: np.ndarray, *, quad_scale: float, linear: bool) -> np.ndarray:
    d = x.shape[-1]
    z = x * d**-0.25
    quad = (z[..., :, None] * z[..., None, :]).reshape(*x.shape[:-1], d * d)
    lin = z if linear else np.zeros_like(z)
    return np.concatenate([np.ones((*x.shape[:-1], 1)), lin, quad * quad_scale], axis=-1)


def taylor2_missing_sqrt2(x, params, config):
    """Taylor-2 with ``vec(zzᵀ)`` unscaled (should be ``/√2``): ``1 + t + t²``."""
    return _taylor2(x, quad_scale=1.0, linear=True)


def taylor2_missing_linear(x, params, config):
    """Taylor-2 whose linear block is zero: ``1 + t²/2``."""
    return _taylor2(x, quad_scale=1.0 / np.sqrt(2.0), linear=False)


def taylor2_compressed_pairs_halved(x, params, config):
    """Compressed Taylor-2 with the pair block ``z_i z_j`` also divided by √2: half the cross
    terms of ``(qᵀk)²/2`` are lost."""
    d = x.shape[-1]
    z = x * d**-0.25
    i, j = np.triu_indices(d, k=1)
    return np.concatenate([np.ones((*x.shape[:-1], 1)), z, z * z / np.sqrt(2.0),
                           z[..., i] * z[..., j] / np.sqrt(2.0)], axis=-1)


def taylor2_float32(x, params, config):
    """Taylor-2 silently evaluated in float32."""
    return _taylor2(x.astype(np.float32), quad_scale=1.0 / np.sqrt(2.0),
                    linear=True).astype(x.dtype)


def elu_without_plus_one(x, params, config):
    """``elu(x)`` (the ``+1`` forgotten: features can be negative)."""
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def elu_plus_one_into_callers_x(x, params, config):
    """``elu(x) + 1``, right, computed through the caller's ``x`` as scratch space
    (``np.minimum(x, 0, out=x)``, as torch code writes ``F.elu(x, inplace=True) + 1``): the
    features are right, the caller's ``x`` holds ``expm1(min(x, 0))`` afterwards."""
    positive = np.maximum(x, 0.0)
    np.minimum(x, 0.0, out=x)
    np.expm1(x, out=x)
    return positive + x + 1.0


def gmm_rks_unnormalised(x, params, config):
    """GMM-RKS with mixture weights ``π_c/min π`` (not summing to 1)."""
    g = np_lm.gmm_params(config, x.shape[-1], "gmm_rks")
    pi = g["pi"] / g["pi"].min()
    omega, a2 = np_lm.gmm_frequencies(params["eps"], pi, g["mu"], g["L"])
    u = x @ omega.T
    a = np.sqrt(a2)
    return np.concatenate([a * np.cos(u), a * np.sin(u)], axis=-1)


# ------------------------------------------------------------------ an m that is not what it says
def _half_rows_twice(params: Mapping[str, np.ndarray]) -> dict:
    """The draw with its first ⌈m/2⌉ rows used twice: m outputs, m/2 independent rows."""
    w = params["W"]
    h = -(-len(w) // 2)
    return {**params, "W": np.concatenate([w[:h], w[:h]])[: len(w)]}


def log_positive_duplicated_rows(x, params, config):
    """SM⁺ whose m features come from ⌈m/2⌉ distinct rows: unbiased, twice the variance."""
    return np_rf.log_softmax_positive(x, _half_rows_twice(params), config)


def rff_pairs_duplicated_rows(x, params, config):
    """RFF pairs whose m frequencies are ⌈m/2⌉ distinct rows used twice: unbiased, twice the
    variance."""
    return get("rff_pairs[iid]").numpy_fn(x, _half_rows_twice(params), config)


# ------------------------------------------------------------------ building targets
def _attention_from(name: str, target: FeatureMapTarget) -> AttentionTarget:
    """FAVOR-style attention from the (broken) map: pre-scale, log-space path when available."""
    def attention(q, k, v, *, causal, seed=0, m=target.m):
        params = target.draw_params(seeds.rng(seed), q.shape[-1], m)
        s = q.shape[-1] ** -0.25
        if target.log_numpy_fn is not None:
            lq = target.log_numpy_fn(q * s, params, target.config)
            lk = target.log_numpy_fn(k * s, params, target.config)
            return log_linear_attention(lq, lk, v, causal=causal)
        fq = target.numpy_fn(q * s, params, target.config)
        fk = target.numpy_fn(k * s, params, target.config)
        return linear_attention(fq, fk, v, causal=causal)

    claims = {"causal", "noncausal", "positive_weights", "approximates_softmax"}
    return AttentionTarget(f"mutant:{name}:attention", attention, frozenset(claims))


def feature_mutant(name: str, entry_name: str, fn: Fn, *, log_fn: Fn | None = None,
                   config: Mapping[str, Any] | None = None,
                   attention: bool = False, draw_from: str | None = None) -> list[Target]:
    """The targets of one feature-map mutant (see the module docstring); ``draw_from`` names a
    registry entry whose parameter draw replaces the entry's (claims kept: the lie)."""
    entry = get(entry_name)
    if config:
        entry = entry.with_config(**config)
    draw = get(draw_from).draw if draw_from else entry.draw
    # NumPy only: no torch path, so no gradient claim (a target claiming 'differentiable' needs
    # torch_fn; the gradient mutants are in kernel_verify.mutants.gradients)
    target = replace(entry, name=f"mutant:{name}", numpy_fn=fn, torch_fn=None,
                     log_numpy_fn=log_fn, log_torch_fn=None, draw=draw,
                     claims=entry.claims - GRADIENT_CLAIMS)
    return [target, _attention_from(name, target)] if attention else [target]


def log_feature_mutant(name: str, entry_name: str, log_fn: Fn, **kwargs: Any) -> list[Target]:
    """:func:`feature_mutant` of a map given by its log features: ``φ = exp(log_fn)``, and
    ``log_fn`` offered as the log path."""
    return feature_mutant(name, entry_name, _exp_of(log_fn), log_fn=log_fn, **kwargs)


#: name -> (what is wrong, ``make(name)``: the targets, named ``mutant:<name>…``).
FEATURE_MUTANTS: dict[str, tuple[str, Callable[[str], list[Target]]]] = {
    "softmax_positive_missing_norm_term": (
        "SM⁺ without the −‖x‖²/2 term",
        named(log_feature_mutant, "softmax_positive[iid]", log_positive_no_norm, attention=True)),
    "softmax_positive_missing_inv_sqrt_m": (
        "SM⁺ without the 1/√m normalisation",
        named(log_feature_mutant, "softmax_positive[iid]", log_positive_no_sqrt_m, attention=True)),
    "softmax_positive_float32": (
        "SM⁺ silently computed in float32 inside a float64 map",
        named(log_feature_mutant, "softmax_positive[orthogonal]", log_positive_float32,
              attention=True)),
    "softmax_hyperbolic_missing_negative_half": (
        "SM⁺ₕ without the exp(−wᵀx) half (still normalised by (2m)^(-1/2))",
        named(log_feature_mutant, "softmax_hyperbolic[iid]", log_hyperbolic_half, attention=True)),
    "gerf_wrong_d": (
        "GERF with D = (1−4A)^(d/2)",
        named(log_feature_mutant, "gerf[iid]", log_gerf_wrong_d, attention=True)),
    "gerf_wrong_b": (
        "GERF with B = 1−4A instead of √(1−4A)",
        named(log_feature_mutant, "gerf[iid]", log_gerf_wrong_b, attention=True)),
    "sderf_missing_det_factor": (
        "SDERF without its determinant factor D = det(I−4A)^(1/4)",
        named(log_feature_mutant, "sderf[iid]", log_sderf_missing_det_factor, attention=True)),
    "sderf_sqrt_sign_flipped": (
        "SDERF with B = (I+4A)^(1/2) instead of (I−4A)^(1/2)",
        named(log_feature_mutant, "sderf[iid]", log_sderf_sqrt_sign_flipped, attention=True)),
    "softmax_trig_wrong_sign": (
        "trigonometric softmax features with exp(−‖x‖²/2)",
        named(feature_mutant, "softmax_trig[iid]", trig_wrong_sign)),
    "rff_sigma_multiplied": (
        "RFF pairs with x·σ instead of x/σ (σ = 2)",
        named(feature_mutant, "rff_pairs[iid]", rff_sigma_multiplied, config={"sigma": 2.0})),
    "rff_pairs_float32": (
        "RFF pairs silently computed in float32",
        named(feature_mutant, "rff_pairs[orthogonal]", rff_pairs_float32)),
    "rff_phase_missing_sqrt2": (
        "random-phase RFF scaled by √(1/m) instead of √(2/m)",
        named(feature_mutant, "rff_phase[iid]", rff_phase_missing_sqrt2)),
    "polysketch_scale_fourth_root": (
        "PolySketch with sketch entries N(0, 1/√m) instead of N(0, 1/m)",
        named(feature_mutant, "polysketch[iid]", polysketch_scale_fourth_root)),
    "maclaurin_missing_p_factor": (
        "random Maclaurin weighted √(a_N p^N) instead of √(a_N p^(N+1)/(p−1))",
        named(feature_mutant, "random_maclaurin", maclaurin_missing_p_factor)),
    "relu_features_abs": (
        "ReLU random features with |Wx| instead of relu(Wx)",
        named(feature_mutant, "relu_features[iid]", relu_features_abs)),
    "taylor2_missing_sqrt2": (
        "Taylor-2 map without the 1/√2 on the quadratic block",
        named(feature_mutant, "taylor2", taylor2_missing_sqrt2)),
    "taylor2_missing_linear_term": (
        "Taylor-2 map with the linear block missing (zeros)",
        named(feature_mutant, "taylor2", taylor2_missing_linear)),
    "softmax_positive_divided_by_m": (
        "SM⁺ normalised by 1/m instead of 1/√m",
        named(log_feature_mutant, "softmax_positive[iid]", log_positive_divided_by_m,
              attention=True)),
    "softmax_hyperbolic_missing_inv_sqrt2": (
        "SM⁺ₕ normalised by m^(-1/2) instead of (2m)^(-1/2) (missing 1/√2)",
        named(log_feature_mutant, "softmax_hyperbolic[iid]", log_hyperbolic_missing_inv_sqrt2,
              attention=True)),
    "rff_sqrt_sigma": (
        "RFF pairs with x/√σ where x/σ belongs (σ = 4)",
        named(feature_mutant, "rff_pairs[iid]", rff_sqrt_sigma, config={"sigma": 4.0})),
    "softmax_positive_duplicated_rows": (
        "SM⁺ with m outputs from m/2 distinct rows (unbiased, twice the variance: m is not what "
        "it says)",
        named(log_feature_mutant, "softmax_positive[iid]", log_positive_duplicated_rows)),
    "rff_pairs_duplicated_rows": (
        "RFF pairs with m frequencies from m/2 distinct rows (unbiased, twice the variance)",
        named(feature_mutant, "rff_pairs[iid]", rff_pairs_duplicated_rows)),
    "rff_phase_without_phase": (
        "random-phase RFF √(2/m)cos(wᵀx/σ) without the phase b",
        named(feature_mutant, "rff_phase[iid]", rff_phase_without_phase)),
    "rff_pairs_iid_claimed_orthogonal": (
        "RFF pairs claiming orthogonal rows (matrix 'orthogonal') whose rows are iid Gaussian",
        named(feature_mutant, "rff_pairs[orthogonal]", np_rf.rff_pairs,
              draw_from="rff_pairs[iid]")),
    "taylor2_compressed_pairs_halved": (
        "compressed Taylor-2 with the pair block z_i z_j also divided by √2",
        named(feature_mutant, "taylor2_compressed", taylor2_compressed_pairs_halved)),
    "taylor2_float32": (
        "Taylor-2 map silently computed in float32",
        named(feature_mutant, "taylor2", taylor2_float32)),
    "elu_without_plus_one": (
        "elu(x) instead of elu(x)+1 (claims positive)",
        named(feature_mutant, "elu_plus_one", elu_without_plus_one)),
    "elu_plus_one_overwrites_x": (
        "elu(x)+1, right, computed into the caller's x (np.minimum(x, 0, out=x); torch's "
        "F.elu(x, inplace=True) + 1): the caller's x is left holding expm1(min(x, 0))",
        named(feature_mutant, "elu_plus_one", elu_plus_one_into_callers_x)),
    "gmm_rks_unnormalised_weights": (
        "GMM-RKS with mixture weights not normalised to sum 1",
        named(feature_mutant, "gmm_rks", gmm_rks_unnormalised)),
}



# ------------------------------------------------------------------ black-box maps (sample_fn)
#: Features of the black-box SM⁺ maps below.
BLACKBOX_M = 16
_BLACKBOX_CLAIMS = frozenset({"unbiased", "positive", "gaussian_rows", "psd_kernel"})


def blackbox_positive(name: str, *, global_rng: bool = False,
                      dtype: type = np.float64, row_scale: float = 1.0) -> list[Target]:
    """A black-box SM⁺ map ``φ(x) = exp(Wx − ‖x‖²/2)/√m`` (``sample_fn`` only, ``W ~ N(0, I)``
    drawn from the seed, m = :data:`BLACKBOX_M`), as an adapter of a library that exposes no
    parameters would be. Defects: ``global_rng`` draws ``W`` from a generator the seed does not
    reach (a library's global random state); ``dtype`` computes and returns the features in that
    type (float32: a float64 input comes back narrower); ``row_scale`` multiplies every row (the
    rows' variance ``row_scale²``: a temperature or bandwidth applied twice, a wrong √d)."""

    def sample_fn(x, seed: int) -> np.ndarray:
        x = np.asarray(x)
        rng = np.random.default_rng() if global_rng else seeds.rng(seed)
        w = (row_scale * rng.standard_normal((BLACKBOX_M, x.shape[-1]))).astype(dtype)
        xw = x.astype(dtype)
        return np.exp(xw @ w.T - _half_sq(xw)) / dtype(np.sqrt(BLACKBOX_M))

    return [FeatureMapTarget(f"mutant:{name}", "softmax", _BLACKBOX_CLAIMS, sample_fn=sample_fn,
                             m=BLACKBOX_M, formula="softmax_positive", matrix="iid")]


def _blackbox_of(name: str, entry_name: str, fn: Fn, *, family: bool = True) -> list[Target]:
    """The white-box mutant ``fn`` of ``entry_name`` seen only through ``sample_fn`` (declared
    family kept, or dropped with ``family=False``: no ``formula``, ``matrix`` or ``config``), as
    a library exposing no parameters would be; a NumPy ``sample_fn`` has no autograd, so the
    gradient claims are dropped."""
    from kernel_verify.mutants.wrap import as_black_box

    (white,) = feature_mutant(name, entry_name, fn)
    black = as_black_box(white, family=family, name=f"mutant:{name}")
    return [replace(black, claims=black.claims - {"differentiable", "deterministic_backward"})]


FEATURE_MUTANTS.update({
    "blackbox_taylor2_missing_sqrt2": (
        "deterministic Taylor-2 map seen through sample_fn only, without the 1/√2 on the "
        "quadratic block",
        named(_blackbox_of, "taylor2", taylor2_missing_sqrt2)),
    "blackbox_positive_ignores_seed": (
        "black-box SM⁺ map drawing W from a global generator the seed does not reach",
        named(blackbox_positive, global_rng=True)),
    "blackbox_positive_returns_float32": (
        "black-box SM⁺ map computing in float32 and returning float32 features for float64 "
        "input",
        named(blackbox_positive, dtype=np.float32)),
    "blackbox_positive_rows_scaled_1_05": (
        "black-box SM⁺ map whose Gaussian rows are scaled by 1.05 (their variance 10 % high): a "
        "bias of a few percent, inside the mean tests' Monte Carlo noise at m = 16",
        named(blackbox_positive, row_scale=1.05)),
    "softmax_positive_orthogonal_fixed_norm_claimed_unbiased": (
        "SM⁺ (FAVOR+) claiming unbiased orthogonal rows (matrix 'orthogonal') whose rows have "
        "the fixed norm √d (the regularising row-norm option left on): biased for the softmax "
        "kernel",
        named(feature_mutant, "softmax_positive[orthogonal]", np_rf.softmax_positive,
              log_fn=np_rf.log_softmax_positive,
              draw_from="softmax_positive[orthogonal_fixed_norm]")),
    "blackbox_nofamily_rff_phase_missing_sqrt2": (
        "black-box random-phase RFF claiming unbiased, no family declared, scaled by √(1/m) "
        "instead of √(2/m) (estimates k/2)",
        named(_blackbox_of, "rff_phase[iid]", rff_phase_missing_sqrt2, family=False)),
    "rff_pairs_fixed_norm_unit_rows": (
        "fixed-norm RFF pairs (biased, declared mean kernel gaussian_fixed_norm) whose rows are "
        "normalised to radius 1 instead of √d",
        named(feature_mutant, "rff_pairs[orthogonal_fixed_norm]", rff_pairs_unit_rows)),
    "rff_pairs_fixed_norm_rows_not_fixed": (
        "RFF pairs claiming the fixed-norm construction (biased, declared mean kernel "
        "gaussian_fixed_norm) whose orthogonal rows keep their χ_d norms: unbiased for the "
        "Gaussian kernel, not biased as declared",
        named(feature_mutant, "rff_pairs[orthogonal_fixed_norm]", np_rf.rff_pairs,
              draw_from="rff_pairs[orthogonal]")),
    "softmax_positive_fixed_norm_rows_not_fixed": (
        "SM⁺ (FAVOR+) claiming the fixed-norm construction (biased, declared mean kernel "
        "softmax_fixed_norm) whose orthogonal rows keep their χ_d norms (the regularising "
        "row-norm option left off): unbiased for the softmax kernel, not biased as declared",
        named(feature_mutant, "softmax_positive[orthogonal_fixed_norm]", np_rf.softmax_positive,
              log_fn=np_rf.log_softmax_positive, draw_from="softmax_positive[orthogonal]")),
    "rff_pairs_sorf_missing_sqrt_d": (
        "SORF RFF pairs (biased, no mean kernel declared) without the √d of √d·HD₁HD₂HD₃: "
        "unit-norm rows",
        named(feature_mutant, "rff_pairs[sorf]", rff_pairs_sorf_missing_sqrt_d)),
})

_B = "blackbox_maps::test_"
#: The property each of these feature mutants is written for (the others: every feature-map
#: family, the catalogue's default).
def _simplex_fixed_norm(name: str, entry: str) -> list[Target]:
    """A map on simplex rows whose norms are fixed to √d (docs/math.md §19): the rows are not
    Gaussian, so the estimator is biased, while the entry claims unbiased."""
    from kernel_verify.mutants.matrices import simplex_normalised_norms

    def draw(rng, d, m, config):
        return {"W": simplex_normalised_norms(rng, m, d)}

    base = get(entry)
    [target] = feature_mutant(name, entry, base.numpy_fn, log_fn=base.log_numpy_fn)
    return [replace(target, draw=draw)]


FEATURE_MUTANTS.update({
    "rff_pairs_simplex_fixed_norm": (
        "RFF pairs claiming simplex rows (unbiased) whose simplex rows have norms fixed to √d "
        "instead of independent χ_d",
        named(_simplex_fixed_norm, "rff_pairs[simplex]")),
})


FEATURE_KILLERS: dict[str, tuple[str, ...]] = {
    "blackbox_taylor2_missing_sqrt2": (f"{_B}deterministic_black_box_map_equals_kernel",),
    "blackbox_positive_ignores_seed": (f"{_B}same_seed_gives_the_same_draw",),
    "blackbox_positive_returns_float32": (f"{_B}float64_input_gives_float64_output",),
    "blackbox_nofamily_rff_phase_missing_sqrt2": (f"{_B}unbiased_without_declared_family",),
    "blackbox_positive_rows_scaled_1_05": (f"{_B}frequency_rows_have_the_declared_law",),
    "softmax_positive_orthogonal_fixed_norm_claimed_unbiased": (
        f"{_B}frequency_rows_have_the_declared_law",),
    "rff_pairs_fixed_norm_unit_rows": ("feature_unbiased::test_biased_mean_is_mean_kernel",),
    "rff_pairs_fixed_norm_rows_not_fixed": (
        "feature_unbiased::test_bias_is_visible_where_theory_says_it_is_large",),
    "softmax_positive_fixed_norm_rows_not_fixed": (
        "feature_unbiased::test_bias_is_visible_where_theory_says_it_is_large",),
    "rff_pairs_sorf_missing_sqrt_d": ("feature_unbiased::test_biased_mean_is_reference_mean",),
    "polysketch_scale_fourth_root": ("feature_unbiased::test_biased_mean_is_reference_mean",),
    "maclaurin_missing_p_factor": ("feature_unbiased::test_unbiased_on_random_points",),
    "sderf_missing_det_factor": ("feature_unbiased::test_unbiased_on_random_points",),
    "sderf_sqrt_sign_flipped": ("feature_unbiased::test_unbiased_on_grid",),
    "rff_pairs_simplex_fixed_norm": ("feature_unbiased::test_unbiased_on_grid",
                                     f"{_B}random_features_are_distinct"),
    "elu_plus_one_overwrites_x": (
        "inputs_unchanged::test_feature_map_leaves_its_inputs_unchanged",),
}
