"""Black-box RFF maps whose defect is the kernel's length scale (issue #44, item 3).

A Gaussian-kernel map declaring ``sigma = σ ≠ 1`` whose features use another scale: ``σ²`` in
place of ``σ`` (a lengthscale/variance mix-up; ``DEFECTS`` also has σ ignored). Both are exact
RFF pairs of *some* Gaussian kernel, so every per-draw identity holds (``‖φ(x)‖² = 1``,
stationarity) and only a mean or variance compared with ``k_σ`` can see the defect.

Measured with unit-ball points (before the suite drew at the kernel's length,
``properties/kernel_scale.py``): at σ = 0.05 without a declared family both kernels are ≈ 0 at
every pair the pilot-variance mean test drew, and the σ² map passed it (its only statistical
test); at σ = 0.2 and σ = 5 (and with the family declared) the grid's small case, the pilot test
or the fourth-moment variance test already caught it. At points of norm ``(0.2–0.8)·σ`` every one
is caught by the mean test written for it.

Each mutant is the registry's ``rff_pairs[iid]`` with ``config = {"sigma": σ}`` (the declared
kernel ``gaussian(σ)`` follows from it), its NumPy function replaced, seen through ``sample_fn``
only (:func:`kernel_verify.mutants.wrap.as_black_box`), with or without the family declared. The
correct twins (:func:`scaled_rff_pairs` with ``defect=None``, :data:`SCALE_TWINS`) run the same
code with the declared σ; they are controls of the catalogue (``kernel_verify.mutants.controls``).

**An anisotropic (ARD) spectral mixture** (:func:`ard_mixture`): the spectral mixture kernel
``½·exp(−‖L₀δ‖²/2) + ½·exp(−‖δ‖²/2)``, ``L₀ = diag(1/0.1, 1/10, …, 1/10)`` (lengths 0.1 along the
first axis, 10 along the others), declared through ``kernel_params`` (no estimator family), and
its random Fourier features (``ω = L_cᵀε``, weights ``√(π_c/m_c)``); the defect uses 100 for the
long lengths (a length squared). With one length per component (``√d/‖L₀‖_F ≈ 0.14``) the long
axes were seen at ~1 % of their length and the defect passed every property (found by a
new-user run, 6 passed); with the points mapped by ``L_c⁻¹`` (``properties/kernel_scale.py``) the
pilot-variance mean test sees it. Its correct twin is a control.

**A frequency law right along every axis** (:func:`orf_blocks`): black-box orthogonal random
features of the Gaussian kernel (σ = 1, no family declared) whose frequencies are the *columns*
of ``diag(s)Q`` (``Q`` Haar orthogonal, ``sᵢ ~ χ_d``) instead of its rows, a transposition seen in
a released library. Each frequency ``(s₁Q₁ⱼ, …, s_dQ_dj)`` has Gaussian marginals (``sᵢQᵢⱼ`` has
the law of ``χ_d·uᵢ``) and the right second moments, so the estimate is right along every axis;
its joint law is not isotropic (``E ω₁²ω₂² = d/(d + 2)`` instead of 1), and on the diagonal at
``‖x − y‖ = 3`` (d = 2) the estimate is off by −0.14, about two per-draw standard deviations:
only a mean test in the kernel's tail off the axes sees it. Its correct twin (rows) is a control.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from kernel_verify.impls.numpy import random_features as np_rf
from kernel_verify.impls.numpy.learned_maps import gmm_frequencies
from kernel_verify.mutants.features import feature_mutant
from kernel_verify.mutants.wrap import as_black_box
from kernel_verify.properties.protocol import FeatureMapTarget, Target
from kernel_verify.verify.seeds import rng as seeded

#: defect -> (what the features use for σ, description)
DEFECTS = {
    "sigma_squared": (lambda s: s * s, "σ² in place of σ"),
    "sigma_ignored": (lambda s: 1.0, "σ = 1 (the declared σ ignored)"),
}


def scaled_rff_pairs(name: str, sigma: float, defect: str | None = None, *,
                     family: bool = True) -> list[Target]:
    """The black-box RFF-pairs map of ``gaussian(sigma)``, its features computed with the scale
    of ``defect`` (:data:`DEFECTS`; None: the declared σ, the twin); ``family``: the estimator
    family (formula, matrix, config) declared, else only the kernel and its σ."""
    if not (isinstance(sigma, float | int) and sigma > 0):
        raise ValueError(f"sigma must be a positive number, got {sigma!r}")
    if defect is not None and defect not in DEFECTS:
        raise ValueError(f"defect must be one of {sorted(DEFECTS)} or None, got {defect!r}")
    used = (lambda s: s) if defect is None else DEFECTS[defect][0]

    def fn(x: np.ndarray, params: Any, config: Any) -> np.ndarray:
        return np_rf.rff_pairs(x, params, {**config, "sigma": used(float(config["sigma"]))})

    (white,) = feature_mutant(name, "rff_pairs[iid]", fn, config={"sigma": float(sigma)})
    black = as_black_box(white, family=family, name=f"mutant:{name}")
    return [replace(black, claims=black.claims - {"differentiable", "deterministic_backward"})]


#: (name, σ, defect, family declared) of the catalogue's scale mutants (module docstring).
_ROWS = (
    ("blackbox_nofamily_rff_sigma0_05_sigma_squared", 0.05, "sigma_squared", False),
    ("blackbox_nofamily_rff_sigma0_2_sigma_squared", 0.2, "sigma_squared", False),
    ("blackbox_nofamily_rff_sigma5_sigma_squared", 5.0, "sigma_squared", False),
    ("blackbox_rff_sigma5_sigma_squared", 5.0, "sigma_squared", True),
)

#: name -> (description, make(name)); merged into the feature mutants by the catalogue.
SCALE_MUTANTS = {
    name: (f"black-box RFF pairs declaring the Gaussian kernel with σ = {sigma:g} "
           f"({'family declared' if fam else 'no family declared'}) whose features use "
           f"{DEFECTS[defect][1]}",
           lambda n, s=sigma, dfc=defect, f=fam: scaled_rff_pairs(n, s, dfc, family=f))
    for name, sigma, defect, fam in _ROWS
}

#: The properties written for them: the mean tests at points of the kernel's scale (without a
#: family, the pilot-variance mean test is the only statistical one).
SCALE_KILLERS = {
    name: (("blackbox_maps::test_unbiased_without_declared_family",) if not fam else
           ("feature_unbiased::test_unbiased_on_random_points",
            "feature_unbiased::test_unbiased_on_grid",
            "feature_variance::test_iid_variance_matches_exact_variance_by_fourth_moment"))
    for name, _, _, fam in _ROWS
}

#: The correct twins: (control name, σ, family declared).
SCALE_TWINS = (("blackbox_nofamily_rff_sigma0_05", 0.05, False),
               ("blackbox_nofamily_rff_sigma5", 5.0, False),
               ("blackbox_rff_sigma5", 5.0, True))


# --------------------------------------------------------------- anisotropic spectral mixture
#: The ARD component's lengths: (short axis, long axes); the defect's long length.
ARD_LENGTHS = (0.1, 10.0)
ARD_WRONG_LONG = 100.0
ARD_M = 64


def ard_factors(d: int, long_length: float = ARD_LENGTHS[1]) -> dict[str, np.ndarray]:
    """``pi, mu, L`` of the two-component mixture of the module docstring at dimension ``d``."""
    first = np.diag([1 / ARD_LENGTHS[0]] + [1 / long_length] * (d - 1))
    return {"pi": np.array([0.5, 0.5]), "mu": np.zeros((2, d)), "L": np.array([first, np.eye(d)])}


def ard_mixture(name: str, defect: bool) -> list[Target]:
    """The black-box RFF map of the ARD spectral mixture (module docstring); ``defect``: its
    features use the long length 100 instead of the declared 10."""
    used = ARD_WRONG_LONG if defect else ARD_LENGTHS[1]

    def sample(x: np.ndarray, seed: int) -> np.ndarray:
        p = ard_factors(x.shape[-1], used)
        eps = seeded(seed, "ard_mixture").standard_normal((ARD_M, x.shape[-1]))
        omega, a2 = gmm_frequencies(eps, p["pi"], p["mu"], p["L"])
        u, a = x @ omega.T, np.sqrt(a2)
        return np.concatenate([a * np.cos(u), a * np.sin(u)], axis=-1)

    return [FeatureMapTarget(f"mutant:{name}", "spectral_mixture",
                             frozenset({"unbiased", "bounded", "psd_kernel"}),
                             kernel_params=lambda config, d: ard_factors(d), m=ARD_M,
                             output_dim=lambda d, m: 2 * m, sample_fn=sample)]


ARD_MUTANT = "blackbox_nofamily_ard_mixture_long_length_squared"
#: The correct twin's control name.
ARD_TWIN = "blackbox_nofamily_ard_mixture"
SCALE_MUTANTS[ARD_MUTANT] = (
    "black-box RFF of an anisotropic spectral mixture (lengths 0.1 and 10, no family declared) "
    "whose features use 100 for the long lengths", lambda n: ard_mixture(n, True))
SCALE_KILLERS[ARD_MUTANT] = ("blackbox_maps::test_unbiased_without_declared_family",)


# ------------------------------------------------------- orthogonal blocks, rows vs columns
ORF_M = 64
ORF_MUTANT = "blackbox_nofamily_orf_columns_of_diag_s_q"
#: The correct twin's control name.
ORF_TWIN = "blackbox_nofamily_orf_rows"


def orf_frequencies(rng: np.random.Generator, d: int, m: int, rows: bool) -> np.ndarray:
    """``m`` frequencies (``(m, d)``) from ``⌈m/d⌉`` blocks ``diag(s)Q`` (``Q`` Haar orthogonal
    by a sign-corrected QR, ``sᵢ ~ χ_d`` independent): the block's rows (``rows=True``, the
    orthogonal random features of the Gaussian kernel) or its columns (the defect)."""
    blocks = []
    for _ in range(-(-m // d)):
        q, r = np.linalg.qr(rng.standard_normal((d, d)))
        q = q * np.sign(np.diag(r))  # Haar: Q's column signs follow R's diagonal
        block = np.sqrt(rng.chisquare(d, size=d))[:, None] * q
        blocks.append(block if rows else block.T)
    return np.vstack(blocks)[:m]


def orf_blocks(name: str, defect: bool) -> list[Target]:
    """The black-box ORF map of the Gaussian kernel (σ = 1, no family declared), features
    ``[cos ωᵢᵀx, sin ωᵢᵀx]/√m``; ``defect``: the blocks' columns as frequencies (module
    docstring)."""

    def sample(x: np.ndarray, seed: int) -> np.ndarray:
        omega = orf_frequencies(seeded(seed, "orf_blocks"), x.shape[-1], ORF_M, not defect)
        u = x @ omega.T
        return np.concatenate([np.cos(u), np.sin(u)], axis=-1) / np.sqrt(ORF_M)

    return [FeatureMapTarget(f"mutant:{name}", "gaussian",
                             frozenset({"unbiased", "bounded", "psd_kernel"}), m=ORF_M,
                             output_dim=lambda d, m: 2 * m, sample_fn=sample)]


SCALE_MUTANTS[ORF_MUTANT] = (
    "black-box orthogonal random features of the Gaussian kernel (σ = 1, no family declared) "
    "whose frequencies are the columns of diag(s)Q instead of its rows",
    lambda n: orf_blocks(n, True))
SCALE_KILLERS[ORF_MUTANT] = ("blackbox_maps::test_unbiased_without_declared_family",)
