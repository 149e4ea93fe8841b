"""Positive semi-definiteness (docs/math.md §8, §10).

* **Exact kernels** (claim ``psd_kernel``): the target kernel's Gram matrix on random point sets,
  formed in mpmath at 40 digits from exactly converted points, is decided PSD by the pivoted LDLᵀ
  of :func:`kernel_verify.verify.psd.psd_mp` (an indefinite matrix gives a witness ``zᵀKz < 0``).
  Marked ``kv_builtin_only``: the Gram matrix is the suite's own mpmath reference of the declared
  kernel (``verify/references/kernels*.py``), never the target's code, and every registered
  reference is PSD on the parameter domain it validates (σ > 0, c ≥ 0, mixture weights > 0,
  explicit feature maps) — no target can make it fail, so it is a check of the suite's truth and
  is not credited to targets.
* **ΦΦᵀ** of every map (white-box draw or black-box seed): PSD by construction for any real,
  finite features — the check catches maps whose features are not finite reals (NaN, ±inf,
  complex) or not one vector per input. Float check :func:`kernel_verify.verify.psd.psd_float` with
  entry errors ``dot_error_bound(|Φ||Φ|ᵀ, D)`` (the product is computed here in float64). The
  PSD assertion cannot fail for any target (the product is formed here from real finite
  features), so a passing case records ``kv_uncredited``: its verdict is ``not credited``, with
  that reason, never ``pass``.
* **Nyström** (``approximations("psd")``, ``approximations("schur_residual")``): ``K̃ ⪰ 0`` and
  ``K − K̃ ⪰ 0`` (a Schur complement), with entry errors from
  :func:`kernel_verify.properties.checks.nystrom.nystrom_error_bound` (its docstring
  derives them) plus ``u₆₄|K|`` for the rounded reference and ``u₆₄|K − K̃|`` for the subtraction.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kernel_verify.properties.checks.nystrom import (
    KERNELS,
    bounded_run,
    on_cases,
    point_set,
)
from kernel_verify.properties.protocol import FeatureMapTarget
from kernel_verify.properties.strategies import generator, points, seeds
from kernel_verify.properties.targets import approximations, feature_maps
from kernel_verify.verify.moments import QuadratureError
from kernel_verify.verify.psd import psd_float, psd_mp
from kernel_verify.verify.references.kernels import MP_KERNELS, gram_mp
from kernel_verify.verify.references.kernels_catalogue import cosformer_gram_mp
from kernel_verify.verify.tolerance import U64, budget_for, dot_error_bound

FEW = max(3, settings.default.max_examples // 5)


def exact_gram(target: FeatureMapTarget, X: np.ndarray) -> np.ndarray:
    """The mp Gram matrix of the target kernel on the rows of X (skip with the reason if none)."""
    if target.kernel not in MP_KERNELS:
        pytest.skip(f"{target.name}: no mpmath reference for kernel {target.kernel!r}")
    args = target.kernel_args(X.shape[-1])
    if target.has("positional"):
        if target.kernel != "cosformer":
            pytest.skip(f"{target.name}: positional kernel {target.kernel!r} without a Gram rule")
        pos = np.arange(X.shape[0])
        return cosformer_gram_mp(X, X, pos, pos, args["M"], dps=40)
    try:
        return gram_mp(target.kernel, X, X, dps=40, **args)
    except QuadratureError as exc:  # a quadrature-defined kernel outside its validated domain
        raise NoReference(str(exc)) from None


class NoReference(Exception):
    """The kernel's reference is a quadrature that did not validate at these points."""


# kv_builtin_only: the Gram matrix is the suite's reference of the declared kernel (module
# docstring); it checks the suite's truth, not the target.
@pytest.mark.kv_builtin_only
@pytest.mark.parametrize("target", feature_maps("psd_kernel"))
@settings(max_examples=FEW)
@given(n=st.integers(2, 5), d=st.integers(1, 4),
       scale=st.sampled_from([0.05, 0.3, 0.6]), data=st.data())
def test_exact_kernel_gram_is_psd(target, n, d, scale, data):
    """Every Gram matrix of a kernel claimed PSD is PSD (mpmath pivoted LDLᵀ, 40 digits)."""
    X = data.draw(points((n, d), scale), label="X")
    try:
        gram = exact_gram(target, X)
    except NoReference:
        assume(False)
    result = psd_mp(gram, dps=40)
    assert result.is_psd, f"{target.name}: kernel Gram not PSD at X={X.tolist()}\n{result}"


@pytest.mark.kv_builtin_only
@pytest.mark.parametrize("target", feature_maps("psd_kernel"))
def test_exact_kernel_gram_is_psd_on_edge_sets(target):
    """Deterministic sets: duplicates, opposite pairs, a zero vector, collinear rows."""
    v = np.array([0.24, -0.12, 0.36])
    X = np.vstack([v, v, -v, np.zeros(3), 2 * v, 0.5 * np.eye(3)[1]])
    result = psd_mp(exact_gram(target, X), dps=40)
    assert result.is_psd, f"{target.name}: kernel Gram not PSD on the edge set\n{result}"


def features(target: FeatureMapTarget, X: np.ndarray, seed: int) -> np.ndarray:
    pos = np.arange(X.shape[0]) if target.has("positional") else None
    if target.white_box:
        params = target.draw_params(generator(seed), X.shape[-1],  # the protocol's draw
                                    max(4, target.min_m))
        return target.features(X, params=params, positions=pos)
    return target.features(X, seed=seed, positions=pos)


#: Why the ΦΦᵀ property is never credited to a target (its verdict's reason).
FEATURE_GRAM_UNCREDITED = (
    "ΦΦᵀ is formed here in float64 from the target's features and is PSD for any real finite "
    "Φ: no feature map can fail it except by non-finite or misshapen features, which other "
    "properties own (not credited)")


@pytest.mark.parametrize("target", feature_maps())
@settings(max_examples=FEW,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=seeds, n=st.integers(2, 8), d=st.integers(1, 4),
       scale=st.sampled_from([1e-3, 0.5, 1.5]), data=st.data())
def test_feature_gram_is_psd(target, seed, n, d, scale, data, record_property):
    """ΦΦᵀ ⪰ 0 within the float64 rounding of the product (module docstring); recorded
    ``kv_uncredited`` (:data:`FEATURE_GRAM_UNCREDITED`)."""
    record_property("kv_uncredited", FEATURE_GRAM_UNCREDITED)
    X = data.draw(points((n, d), scale), label="X")
    phi = features(target, X, seed)
    assert phi.ndim == 2 and phi.shape[0] == n, f"{target.name}: features of shape {phi.shape}"
    assert np.isrealobj(phi) and np.isfinite(phi).all(), f"{target.name}: non-finite features"
    gram = phi @ phi.T
    err = dot_error_bound(np.abs(phi) @ np.abs(phi).T, phi.shape[1],
                          budget_for("float64", "cpu"))
    result = psd_float(gram, "float64", entry_error=err)
    assert result.is_psd, f"{target.name}: ΦΦᵀ not PSD (seed {seed}, X={X.tolist()})\n{result}"


# ---------------------------------------------------------------------------------- Nyström
def _assert_psd(matrix: np.ndarray, entry_error: np.ndarray, what: str) -> None:
    """``matrix`` is PSD up to ``entry_error`` per entry (:func:`psd_float`, float64), else
    ``what`` and the evidence."""
    result = psd_float(matrix, "float64", entry_error=entry_error)
    assert result.is_psd, f"{what}\n{result}"


@pytest.mark.parametrize("target", approximations("psd"))
@on_cases
def test_nystrom_approximation_is_psd(target, case):
    """K̃ ⪰ 0 within its entries' rounding bound: from the landmark block W for a Nyström
    approximation, :func:`~kernel_verify.properties.checks.nystrom.landmark_free_bound` for one
    without landmarks (a random-feature Gram ``Z Zᵀ``, a truncated eigendecomposition)."""
    seed, X, kernel = case
    _, k_tilde, _, bound = bounded_run(target, X, kernel, seed, landmarks=False)
    _assert_psd(k_tilde, bound, f"{target.name}: K̃ not PSD ({kernel}, case={case})")


@pytest.mark.parametrize("target", approximations("schur_residual"))
@on_cases
def test_nystrom_residual_is_psd(target, case):
    """K − K̃ is a Schur complement, hence PSD (and its trace ≥ 0)."""
    seed, X, kernel = case
    k_ref, k_tilde, _, bound = bounded_run(target, X, kernel, seed)
    resid = k_ref - k_tilde
    err = bound + U64 * np.abs(k_ref) + U64 * np.abs(resid)
    _assert_psd(resid, err, f"{target.name}: K − K̃ not PSD ({kernel}, case={case})")
    assert np.trace(resid) >= -np.trace(err) * (1 + 1e-12), f"{target.name}: tr(K − K̃) < 0"


def test_kernels_used_for_nystrom_are_psd_kernels():
    """The Nyström tests rely on PSD kernels: each one's Gram is PSD in mp on a fixed set."""
    X = point_set(3, 6, 3, 1.2)
    for kernel, params in KERNELS.items():
        result = psd_mp(gram_mp(kernel, X, X, dps=40, **params), dps=40)
        assert result.is_psd, f"{kernel}\n{result}"
