"""The stationary kernels a user may declare without a built-in map (docs/math.md §24):
``laplacian(sigma)``, ``matern(nu, lengthscale)`` (ν ∈ {1/2, 3/2, 5/2}), ``cauchy(sigma)``.

1. Each mpmath reference meets an independent second route at 40 digits to 1e-25 relative:
   Matérn's closed form against the general Bessel form ``2^(1−ν)/Γ(ν)·u^ν·K_ν(u)``
   (``mpmath.besselk``; Rasmussen & Williams 2006, §4.2); the Laplacian against the product
   of one-dimensional exponentials, each by that Bessel form at ν = 1/2; the Cauchy kernel
   against the quadrature of its spectral law's Gaussian scale mixture,
   ``∫₀^∞ e^(−w)·e^(−w‖δ‖²/σ²) dw`` (``ω = √(2W)/σ·z``, ``W ~ Exp(1)``).
2. A correct black-box random-Fourier-feature map of each (frequencies from the spectral law,
   ``[cos, sin]/√m``), declared with only ``kernel=``, its parameters and ``sample_fn`` (no
   family), passes every property ``kernel_verify.check`` runs on it.
3. The same map at a wrong length (ℓ × 1.5 in its frequencies) fails
   ``blackbox_maps::test_unbiased_without_declared_family``; so does a Cauchy map drawing its
   frequencies from the density ``∝ exp(−σ‖ω‖)`` (the "multivariate exponential" law, whose
   characteristic function is ``(1 + ‖δ‖²/σ²)^(−(d+1)/2)``: right only at d = 1).

Statistical: each ``check`` runs the pilot-variance mean test at the run's per-assertion α
(its false-alarm rate is the suite's, ``kernel-verify calibrate``); a wrong map's failure is
the test's power, measured here (about 4–9 s per check on one core).
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kernel_verify import FeatureMapTarget, check
from kernel_verify.impls.names import DECLARED_KERNELS
from kernel_verify.verify.psd import psd_mp
from kernel_verify.verify.references.kernels import gram_mp, kernel_mp
from kernel_verify.verify.references.mp import to_mp, working_precision

DPS, TOL = 40, 1e-25
#: Random features per draw of the test maps (2m outputs: ``[cos, sin]``).
M = 64
UNBIASED = "blackbox_maps::test_unbiased_without_declared_family"

#: (kernel, kernel_params) of every case: each declared kernel, each Matérn ν.
CASES = (
    ("laplacian", {"sigma": 0.7}),
    ("matern", {"nu": 0.5, "lengthscale": 0.7}),
    ("matern", {"nu": 1.5, "lengthscale": 0.7}),
    ("matern", {"nu": 2.5, "lengthscale": 0.7}),
    ("cauchy", {"sigma": 0.7}),
)
IDS = [f"{k}-{'-'.join(f'{n}{v:g}' for n, v in p.items())}" for k, p in CASES]


def _length(params: dict) -> float:
    return params["sigma"] if "sigma" in params else params["lengthscale"]


# ------------------------------------------------------------------------ second routes (mp)
def matern_bessel(r, nu, ell):
    """``2^(1−ν)/Γ(ν)·u^ν·K_ν(u)``, ``u = √(2ν)·r/ℓ`` (1 at r = 0, its limit)."""
    if r == 0:
        return mpmath.mpf(1)
    u = mpmath.sqrt(2 * nu) * r / ell
    return 2 ** (1 - nu) / mpmath.gamma(nu) * u**nu * mpmath.besselk(nu, u)


def laplacian_product(delta, sigma):
    """``Π_i exp(−|δ_i|/σ)``, each factor by the Bessel form at ν = 1/2."""
    return mpmath.fprod(matern_bessel(abs(t), mpmath.mpf(1) / 2, sigma) for t in delta)


def cauchy_mixture(delta, sigma):
    """``E_W exp(−W‖δ‖²/σ²)``, ``W ~ Exp(1)``: the Gaussian characteristic function averaged
    over the spectral law's scale (module docstring), by quadrature."""
    s = mpmath.fsum(t * t for t in delta) / sigma**2
    return mpmath.quad(lambda w: mpmath.exp(-w * (1 + s)), [0, 1, mpmath.inf])


def second_route(kernel: str, delta, params: dict):
    p = {k: mpmath.mpf(v) for k, v in params.items()}
    if kernel == "laplacian":
        return laplacian_product(delta, p["sigma"])
    if kernel == "matern":
        r = mpmath.sqrt(mpmath.fsum(t * t for t in delta))
        return matern_bessel(r, p["nu"], p["lengthscale"])
    return cauchy_mixture(delta, p["sigma"])


def test_cases_cover_every_declared_kernel():
    """Each kernel no registered map uses (``DECLARED_KERNELS``) is exercised here."""
    assert {k for k, _ in CASES} == DECLARED_KERNELS


coords = st.floats(-2.0, 2.0, allow_nan=False, allow_subnormal=False)


@pytest.mark.parametrize(("kernel", "params"), CASES, ids=IDS)
@settings(max_examples=25, deadline=None)
@given(d=st.integers(1, 5), data=st.data())
@example(d=3, data=None)
def test_reference_meets_its_second_route(kernel, params, d, data):
    """mp reference = second route to 1e-25 relative at 40 digits; x, y drawn, with a random
    subset of the coordinates of x − y zero (the Laplacian's kinks); the explicit example is
    x = y (k = 1)."""
    if data is None:
        x = y = np.full(d, 0.3)
    else:
        x = np.array(data.draw(st.lists(coords, min_size=d, max_size=d), label="x"))
        y = np.array(data.draw(st.lists(coords, min_size=d, max_size=d), label="y"))
        same = np.array(data.draw(st.lists(st.booleans(), min_size=d, max_size=d), label="0"))
        y = np.where(same, x, y)
    ref = kernel_mp(kernel, x, y, dps=DPS, **params)
    with working_precision(DPS):
        other = second_route(kernel, to_mp(x) - to_mp(y), params)
        err = abs(ref - other) / abs(other)
    assert err <= TOL, f"{kernel}{params} at x={x.tolist()}, y={y.tolist()}: {ref} vs {other}"


def test_closed_forms_at_known_values():
    """r = ℓ: e^(−1); (1 + √3)e^(−√3); (1 + √5 + 5/3)e^(−√5); Cauchy 1/2; Laplacian at
    δ = (σ, −σ): e^(−2)."""
    x, e1 = np.zeros(2), np.array([0.7, 0.0])
    with working_precision(DPS):
        want = {0.5: mpmath.exp(-1), 1.5: (1 + mpmath.sqrt(3)) * mpmath.exp(-mpmath.sqrt(3)),
                2.5: (1 + mpmath.sqrt(5) + mpmath.mpf(5) / 3) * mpmath.exp(-mpmath.sqrt(5))}
        for nu, value in want.items():
            got = kernel_mp("matern", e1, x, dps=DPS, nu=nu, lengthscale=0.7)
            assert abs(got - value) <= TOL * value
        assert abs(kernel_mp("cauchy", e1, x, dps=DPS, sigma=0.7) - mpmath.mpf(1) / 2) <= TOL
        lap = kernel_mp("laplacian", np.array([0.7, -0.7]), x, dps=DPS, sigma=0.7)
        assert abs(lap - mpmath.exp(-2)) <= TOL * lap


@pytest.mark.parametrize("bad", [0.0, 1.0, 2.0, 3.5, True, "1.5"])
def test_matern_without_a_closed_form_is_refused(bad):
    with pytest.raises(ValueError, match=r"nu must be one of 0\.5, 1\.5, 2\.5"):
        kernel_mp("matern", np.zeros(2), np.ones(2), nu=bad)


@pytest.mark.parametrize(("kernel", "params"), CASES, ids=IDS)
def test_gram_matrix_is_psd(kernel, params):
    """Bochner: each kernel is PSD; the 40-digit Gram of 8 random points passes ``psd_mp``."""
    pts = np.random.default_rng(0).uniform(-1.0, 1.0, (8, 3))
    result = psd_mp(gram_mp(kernel, pts, pts, dps=DPS, **params), dps=DPS)
    assert result.is_psd, str(result)


# --------------------------------------------------------------- black-box RFF maps (NumPy)
def laplacian_rows(rng, m, d, params, factor):
    """i.i.d. Cauchy(0, 1/σ) coordinates (Rahimi & Recht 2007)."""
    return rng.standard_cauchy((m, d)) / (params["sigma"] * factor)


def matern_rows(rng, m, d, params, factor):
    """Multivariate Student t with 2ν degrees of freedom, scaled by 1/ℓ: z/√(g/2ν)/ℓ."""
    two_nu = 2 * params["nu"]
    scale = np.sqrt(rng.chisquare(two_nu, m) / two_nu)[:, None]
    return rng.standard_normal((m, d)) / scale / (params["lengthscale"] * factor)


def cauchy_rows(rng, m, d, params, factor):
    """Symmetric multivariate Laplace: √(2W)·z/σ, W ~ Exp(1), z ~ N(0, I)."""
    radius = np.sqrt(2 * rng.standard_exponential(m))[:, None]
    return rng.standard_normal((m, d)) * radius / (params["sigma"] * factor)


def radial_exponential_rows(rng, m, d, params, factor):
    """The wrong law for the Cauchy kernel at d ≥ 2: density ∝ exp(−σ‖ω‖), i.e. a uniform
    direction times ‖ω‖ ~ Gamma(d, 1/σ)."""
    u = rng.standard_normal((m, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return u * rng.gamma(d, 1.0, (m, 1)) / (params["sigma"] * factor)


ROWS = {"laplacian": laplacian_rows, "matern": matern_rows, "cauchy": cauchy_rows}


def rff_target(kernel, params, *, factor=1.0, rows=None, name=None):
    """A black-box map: ``[cos Wx, sin Wx]/√m`` with W drawn from ``rows`` (default: the
    kernel's spectral law) at the length × ``factor``; declared by kernel and parameters
    only."""
    draw = rows or ROWS[kernel]

    def sample(x, seed):
        x = np.asarray(x, dtype=np.float64)
        w = draw(np.random.default_rng(seed), M, x.shape[-1], params, factor)
        u = x @ w.T
        return np.concatenate([np.cos(u), np.sin(u)], axis=-1) / np.sqrt(M)

    return FeatureMapTarget(name or f"rff_{kernel}", kernel,
                            frozenset({"unbiased", "bounded", "psd_kernel"}),
                            kernel_params=dict(params), m=M, sample_fn=sample,
                            output_dim=lambda d, m: 2 * m)


def _outcomes(result) -> dict[str, str]:
    return {f"{v.family}::{v.prop}": v.outcome for v in result.verdicts}


@pytest.mark.statistical(assertions=5)
@pytest.mark.parametrize(("kernel", "params"), CASES, ids=IDS)
def test_correct_rff_map_passes_the_suite(kernel, params):
    result = check([rff_target(kernel, params)], profile="ci", progress=False)
    outcomes = _outcomes(result)
    assert result.ok, result
    assert outcomes.get(UNBIASED) == "pass", outcomes


@pytest.mark.statistical(assertions=1)
@pytest.mark.parametrize(("kernel", "params"), CASES, ids=IDS)
def test_wrong_length_fails_the_mean_test(kernel, params):
    target = rff_target(kernel, params, factor=1.5, name=f"rff_{kernel}_length_x1_5")
    result = check([target], profile="ci", keyword="test_unbiased_without_declared_family",
                   progress=False)
    assert _outcomes(result) == {UNBIASED: "fail"}, result


@pytest.mark.statistical(assertions=1)
def test_radial_exponential_law_is_not_the_cauchy_kernels():
    target = rff_target("cauchy", {"sigma": 0.7}, rows=radial_exponential_rows,
                        name="rff_cauchy_radial_exponential")
    result = check([target], profile="ci", keyword="test_unbiased_without_declared_family",
                   progress=False)
    assert _outcomes(result) == {UNBIASED: "fail"}, result


def test_declaration_with_matern_nu_two_is_refused_before_the_suite():
    with pytest.raises(ValueError, match="kernel 'matern' refuses"):
        check([rff_target("matern", {"nu": 2.0, "lengthscale": 0.7}, rows=matern_rows)],
              profile="ci", progress=False)
