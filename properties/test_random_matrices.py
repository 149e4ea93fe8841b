"""Properties of random frequency matrices (``RandomMatrixTarget``; docs/math.md §3).

What makes every random-feature estimator unbiased is that each frequency row is marginally
``N(0, I_d)``. For a target claiming ``gaussian_rows`` the suite draws ``N`` independent matrices
and, for **every row position i separately** (a construction can be right for most rows and wrong
for one, as a Householder QR without the sign correction is for row 0), checks:

* **projection law**: for fixed orthonormal ``z₁, z₂``, ``s = wᵢᵀz₁`` is ``N(0, 1)``: sign symmetry
  ``E 1{s > 0} = ½`` and ``E cos s = e^(-1/2)`` (bounded: Hoeffding/Bernstein with the exact
  variance ``Var cos s = (1 + e^(-2))/2 − e^(-1)``), the whole distribution function (DKW
  inequality with Massart's constant), mean 0 and variance 1 (median of means with the exact
  variance 1 and fourth moment 3);
* **isotropy** ``E[wwᵀ] = I``: the cross moment ``E[(wᵀz₁)(wᵀz₂)] = 0`` (variance 1: median of
  means), beside ``E (wᵀz₁)² = 1`` above;
* **norms**: ``‖wᵢ‖²`` follows ``χ²_d`` (DKW) with mean ``d`` (median of means, variance ``2d``);
* **independence of norm and direction**: with ``u = w/‖w‖``, ``f(u) = Σ_k c_k u_k²``
  (``c_k`` evenly spaced in [−1, 1], so ``E f = 0`` for any isotropic direction) and
  ``g = sign(‖w‖² − d)``, ``E[f·g] = E f·E g = 0`` when norm and direction are independent; the
  product lies in [−1, 1] and has variance ``E f²·E g² ≤ E f² = 2Σc_k²/(d(d+2))`` (moments of the
  uniform sphere), so Bernstein applies. This is what catches norms taken from the Gaussian
  matrix that was factorised (``E[‖g‖² | u] = Σ_k (2(d−k)+1)u_k²``, not constant).

Every check tests all ``m`` row positions at level ``α/m`` (Bonferroni inside the check), so each
check is one assertion at level ``α = properties.alpha.per_assertion()``; the samples are i.i.d.
over the ``N`` draws (rows of one draw are dependent, so they are never pooled).

For a target claiming ``orthogonal``, rows inside each block of ``d`` are orthogonal up to a
derived rounding bound (see :func:`orthogonality_bound`). For a target claiming ``simplex``
(SimRFs, docs/math.md §19), the cosine of every two rows inside a block of ``d`` is ``−1/(d−1)``
up to a derived rounding bound (see :func:`simplex_cosine_bound`): a wrong simplex angle, ORF
directions, or a simplex without its rotation's block structure fail it.

The statistical checks are module-level functions so that ``kernel-verify calibrate`` runs exactly
the code the properties run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kernel_verify.properties import alpha as alpha_budget
from kernel_verify.properties.checks.row_law import (
    N_DRAWS,
    N_ROW_CHECKS,
    draw_stack,
    orthonormal_pair,
    row_law_checks,
)
from kernel_verify.properties.targets import matrices
from kernel_verify.verify.tolerance import U64, gamma

#: Examples of the statistical property: a quarter of the profile's budget (ci: 6).
STAT_EXAMPLES = max(1, settings.default.max_examples // 4)

#: Head dimensions: small ones, and 16 and 32 (a construction that changes with d — blocks of
#: d rows, a norm fixed only from some d on — shows at the dimensions models use).
sizes = st.one_of(st.integers(2, 8), st.sampled_from([16, 32])).flatmap(
    lambda d: st.tuples(st.integers(0, 2**32 - 1), st.just(d), st.integers(1, 3 * d))
)
#: Always run, whatever the draws: d = 16 with a partial second block.
AT_HEAD_DIM_16 = (20261207, 16, 20)










def orthogonality_bound(w: np.ndarray) -> np.ndarray:
    """Bound on ``|ŵᵢᵀŵⱼ|`` (i ≠ j in one block) for rows ``ŵ = rᵢ·q̂ᵢ`` computed in float64.

    * The computed Householder factor satisfies ``Q̂ = Q + ΔQ`` with ``Q`` exactly orthogonal and
      ``‖ΔQ‖_F ≤ √d·γ_(d²)`` (Higham, *Accuracy and Stability*, 2nd ed., Thm 19.4 and §19.3, with
      the constant of γ̃ taken as 1 **[recall]**), so ``|q̂ᵢᵀq̂ⱼ| ≤ 2‖ΔQ‖ + ‖ΔQ‖²``.
    * Scaling by ``rᵢ`` rounds each entry once (``u``), and the dot product of the check itself
      errs by ``≤ γ_d·Σ|ŵᵢₖŵⱼₖ| ≤ γ_d‖ŵᵢ‖‖ŵⱼ‖`` (Higham eq. 3.5).
    Together: ``(2e + e² + 2u + u² + γ_d)·‖ŵᵢ‖‖ŵⱼ‖``, ``e = √d·γ_(d²)``. Observed errors on
    this machine are about ``6u``, far inside the bound (d = 2…32)."""
    d = w.shape[-1]
    e = math.sqrt(d) * gamma(d * d, U64)
    rel = 2 * e + e * e + 2 * U64 + U64 * U64 + gamma(d, U64)
    norms = np.linalg.norm(w, axis=-1)
    return rel * norms[..., :, None] * norms[..., None, :]


def simplex_cosine_bound(d: int) -> float:
    """Bound on ``|cos(ŵᵢ, ŵⱼ) + 1/(d−1)|`` (i ≠ j in one block) for rows ``ŵ = rᵢ·fl(ŝᵢᵀQ̂)``
    computed in float64 (docs/math.md §19).

    * ``Q̂ = Q + ΔQ``, ``‖ΔQ‖_F ≤ e = √d·γ_(d²)`` as in :func:`orthogonality_bound`; the simplex
      rows ``ŝᵢ`` (a few roundings each) have ``‖ŝᵢ − sᵢ‖ ≤ γ₄``; the product errs by at most
      ``γ_d·‖ŝᵢ‖·‖Q̂‖_F`` (Higham eq. 3.5). So ``ûᵢ = sᵢᵀQ + δᵢ`` with ``uᵢ = sᵢᵀQ`` exactly
      unit at cosine ``c`` and ``‖δᵢ‖ ≤ η = e + γ₄(1 + e) + γ_d(1 + γ₄)(√d + e)``.
    * Then ``|ûᵢᵀûⱼ − c| ≤ 2η + η²`` and ``|‖ûᵢ‖‖ûⱼ‖ − 1| ≤ 2η + η²``, so the exact cosine of
      ``ûᵢ, ûⱼ`` is within ``(4η + 2η²)/(1 − η)²`` of c; scaling by ``rᵢ`` (one rounding per
      entry) moves it by ≤ ``4u``, and the check's own dot product, two norms and division by
      ≤ ``γ_(3d+4)``."""
    e = math.sqrt(d) * gamma(d * d, U64)
    g4 = gamma(4, U64)
    eta = e + g4 * (1 + e) + gamma(d, U64) * (1 + g4) * (math.sqrt(d) + e)
    return (4 * eta + 2 * eta * eta) / (1 - eta) ** 2 + 4 * U64 + gamma(3 * d + 4, U64)


@pytest.mark.parametrize("target", matrices())
@given(size=sizes)
def test_draw_has_the_requested_shape_and_is_finite(target, size):
    seed, d, m = size
    w = target.draw(np.random.default_rng(seed), m, d)
    assert isinstance(w, np.ndarray), f"{target.name}: draw returned {type(w).__name__}"
    assert w.shape == (m, d), f"{target.name}: draw(m={m}, d={d}) has shape {w.shape}"
    assert w.dtype == np.float64, f"{target.name}: dtype {w.dtype}, expected float64"
    assert np.isfinite(w).all(), f"{target.name}: non-finite entries"


@pytest.mark.parametrize("target", matrices())
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(1, 8), m=st.integers(1, 24))
def test_same_generator_state_gives_the_same_matrix(target, seed, d, m):
    """Randomness is an input: the draw is a function of the generator state only."""
    a = target.draw(np.random.default_rng(seed), m, d)
    b = target.draw(np.random.default_rng(seed), m, d)
    np.testing.assert_array_equal(a, b, err_msg=f"{target.name}: same seed, different draws")


@pytest.mark.parametrize("target", matrices("orthogonal"))
@given(size=sizes)
def test_rows_are_orthogonal_within_blocks(target, size):
    seed, d, m = size
    w = target.draw(np.random.default_rng(seed), m, d)
    for start in range(0, m, d):
        block = w[start:start + d]
        gram = block @ block.T
        off = np.abs(gram - np.diag(np.diag(gram)))
        bound = orthogonality_bound(block)
        np.fill_diagonal(bound, np.inf)
        i, j = np.unravel_index(np.argmax(off - bound), off.shape)
        assert np.all(off <= bound), (
            f"{target.name} (seed={seed}, m={m}, d={d}): rows {start + i} and {start + j} of one "
            f"block have |wᵢᵀwⱼ| = {off[i, j]:.3e} > bound {bound[i, j]:.3e} "
            "((2e + e² + 2u + γ_d)‖wᵢ‖‖wⱼ‖, e = √d·γ_(d²); see orthogonality_bound)"
        )


@pytest.mark.parametrize("target", matrices("gaussian_rows"))
@given(size=sizes)
def test_rows_of_one_draw_are_distinct(target, size):
    """No two rows of one draw coincide: rows with a continuous law repeat with probability
    zero, so a repeated row (a block copied, ``m`` filled by tiling fewer rows) means fewer
    random rows than ``m`` — each row still marginally ``N(0, I_d)``, the estimator built on
    them with the variance of a smaller ``m``. Exact check (``1e-12`` relative), no
    statistics; ``±w`` pairs are distinct rows and pass. Nor do two rows point the same way
    (``cos = 1`` to ``1e-12``, ``d ≥ 2``): one direction with two norms, as when one orthogonal
    block is reused with fresh χ norms (antithetic ``−w`` still passes)."""
    seed, d, m = size
    w = np.asarray(target.draw(np.random.default_rng(seed), m, d), dtype=np.float64)
    scale = float(np.abs(w).max(initial=0.0))
    gap = np.abs(w[:, None, :] - w[None, :, :]).max(axis=-1)
    np.fill_diagonal(gap, np.inf)
    i, j = np.unravel_index(np.argmin(gap), gap.shape)
    assert m < 2 or gap[i, j] > 1e-12 * scale, (
        f"{target.name} (seed={seed}, m={m}, d={d}): rows {min(i, j)} and {max(i, j)} of one "
        f"draw coincide (max |Δ| = {gap[i, j]:.3g}): a construction claiming gaussian_rows "
        "draws m distinct random rows")
    if d >= 2 and m >= 2:  # one direction with two norms: also probability zero (d ≥ 2)
        norms = np.linalg.norm(w, axis=1)
        cos = (w @ w.T) / np.outer(norms, norms)
        np.fill_diagonal(cos, -np.inf)
        i, j = np.unravel_index(np.argmax(cos), cos.shape)
        assert cos[i, j] < 1 - 1e-12, (
            f"{target.name} (seed={seed}, m={m}, d={d}): rows {min(i, j)} and {max(i, j)} of "
            f"one draw point the same way (cos = {cos[i, j]:.15g}, norms {norms[i]:.6g} and "
            f"{norms[j]:.6g}): one direction drawn twice — e.g. one orthogonal block reused "
            "with fresh χ norms — so fewer random directions than m")


@pytest.mark.parametrize("target", matrices("simplex"))
@given(size=sizes)
def test_rows_form_a_regular_simplex_within_blocks(target, size):
    seed, d, m = size
    w = target.draw(np.random.default_rng(seed), m, d)
    c, bound = -1.0 / (d - 1), simplex_cosine_bound(d)
    for start in range(0, m, d):
        block = w[start:start + d]
        norms = np.linalg.norm(block, axis=1)
        cos = (block @ block.T) / (norms[:, None] * norms[None, :])
        err = np.abs(cos - c)
        np.fill_diagonal(err, 0.0)
        i, j = np.unravel_index(np.argmax(err), err.shape)
        assert err[i, j] <= bound, (
            f"{target.name} (seed={seed}, m={m}, d={d}): rows {start + i} and {start + j} of one "
            f"block have cosine {cos[i, j]:.6g}, not -1/(d-1) = {c:.6g} (|error| "
            f"{err[i, j]:.3e} > bound {bound:.3e}; see simplex_cosine_bound)"
        )


@pytest.mark.statistical(assertions=N_ROW_CHECKS)
@pytest.mark.parametrize("target", matrices("gaussian_rows"))
@settings(max_examples=STAT_EXAMPLES)
@given(size=sizes)
@example(size=AT_HEAD_DIM_16)
def test_rows_are_standard_gaussian(target, size):
    seed, d, m = size
    w = draw_stack(target, seed, m, d)
    z1, z2 = orthonormal_pair(seed, d)
    failures = [r for r in row_law_checks(w, z1, z2, alpha=alpha_budget.per_assertion(),
                                          seed=seed, name=target.name) if not r.ok]
    assert not failures, (
        f"{target.name} (seed={seed}, m={m}, d={d}, {N_DRAWS} draws): rows are not N(0, I):\n"
        + "\n".join(r.explain() for r in failures)
    )
