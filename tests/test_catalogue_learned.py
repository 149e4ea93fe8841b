"""Learned kernels (issue 3; Chowdhury et al. 2021): GMM-RKS, GMM-PRF, Fastfood (learned and
random), generative.

* Backends against the mpmath twin within the derived forward bound (as in
  :mod:`tests.test_catalogue_exact`).
* The kernels the references evaluate are checked independently of the closed forms: for one
  mixture component, ``ωᵀz ~ N(μᵀz, zᵀΣz)`` is one-dimensional, so ``E cos(ωᵀδ)`` and
  ``E exp(ωᵀs)`` are computed by ``mpmath.quad`` against the normal density (tanh-sinh
  quadrature, 30 digits) and must agree with ``spectral_mixture``/``gmm_prf`` to 1e-25.
* Unbiasedness is statistical, with a known false-alarm rate: independent parameter draws
  give i.i.d. estimates of ``k(x, y)``. GMM-RKS, random Fastfood and the generative map have
  ``φ(x)ᵀφ(y) = Σ_i a_i² cos(·)`` with ``Σ a_i² = 1``, so every estimate lies in [−1, 1]:
  Hoeffding at the per-assertion α of the run-wide budget (:mod:`kernel_verify.properties.alpha`).
  GMM-PRF is unbounded: median of means with its exact variance (derived in
  :func:`_gmm_prf_variance`).
* Gradients reach every trainable parameter of the torch modules.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernel_verify.impls.numpy import learned_maps as np_lm
from kernel_verify.impls.registry import get
from kernel_verify.impls.torch.learned_maps import GMMPRF, GMMRKS, Fastfood, Generative
from kernel_verify.properties import alpha
from kernel_verify.properties.backends import backend_axis
from kernel_verify.verify.compare import assert_close
from kernel_verify.verify.references.features import feature_error_bound
from kernel_verify.verify.references.kernels import gram_reference, kernel_mp
from kernel_verify.verify.stats import mean_test
from kernel_verify.verify.tolerance import gamma
from tests.test_catalogue_exact import U64, check_against_mp, check_induced_kernel, inputs

LEARNED = ("gmm_rks", "gmm_prf", "fastfood_learned", "fastfood_random", "generative")
seeds = st.integers(0, 2**32 - 1)


@pytest.mark.parametrize("name", LEARNED)
@pytest.mark.parametrize("backend", backend_axis(("float64", "float32", "bfloat16")))
@given(seed=seeds, n=st.integers(1, 3), d=st.integers(1, 5), m=st.integers(2, 6),
       scale=st.sampled_from([0.1, 0.5, 1.0]))
def test_features_match_mp_twin(name, backend, seed, n, d, m, scale):
    entry = get(name)
    params = entry.draw(np.random.default_rng(seed), d, m, entry.config)
    x = inputs(seed, n, d, scale)
    check_against_mp(entry, x, params, backend)
    assert entry.numpy_fn(x, params, entry.config).shape[-1] == entry.output_dim(d, m)


@pytest.mark.parametrize("backend", backend_axis(("float64", "float32")))
@given(seed=seeds, d=st.integers(1, 4))
def test_gmm_prf_log_features_match_mp_twin(backend, seed, d):
    entry = get("gmm_prf")
    params = entry.draw(np.random.default_rng(seed), d, 4, entry.config)
    check_against_mp(entry, inputs(seed, 3, d, 0.5), params, backend, log=True)


@given(seed=seeds, d=st.integers(1, 5))
def test_fastfood_learned_kernel_is_induced(seed, d):
    """Learned (fixed) diagonals: a deterministic kernel (1/p)Σ cos(w_iᵀδ/σ), reproduced by the
    features within the inner-product bound."""
    entry = get("fastfood_learned").with_config(init_seed=seed % 1000, sigma=1.5)
    params = entry.draw(np.random.default_rng(0), d, 1, entry.config)
    check_induced_kernel(entry, inputs(seed, 3, d, 1.0), inputs(seed + 1, 2, d, 1.0), params)


# ------------------------------------------------------- kernels vs independent quadrature
def _normal_expectation(f, mean, var) -> mpmath.mpf:
    sd = mpmath.sqrt(var)
    return mpmath.quad(
        lambda z: f(mean + sd * z) * mpmath.exp(-z * z / 2) / mpmath.sqrt(2 * mpmath.pi),
        [-mpmath.inf, 0, mpmath.inf],
    )


@pytest.mark.parametrize("kernel", ["spectral_mixture", "gmm_prf"])
@given(seed=seeds, d=st.integers(1, 4))
def test_mixture_kernels_against_quadrature(kernel, seed, d):
    rng = np.random.default_rng(seed)
    mu, lower = 0.4 * rng.standard_normal((1, d)), rng.standard_normal((1, d, d)) / math.sqrt(d)
    x, y = 0.5 * rng.standard_normal(d), 0.5 * rng.standard_normal(d)
    got = kernel_mp(kernel, x, y, dps=30, pi=np.array([1.0]), mu=mu, L=lower)
    with mpmath.workdps(30):
        xm, ym = (np.array([mpmath.mpf(float(v)) for v in a], dtype=object) for a in (x, y))
        mum = np.array([mpmath.mpf(float(v)) for v in mu[0]], dtype=object)
        lm = np.array([[mpmath.mpf(float(v)) for v in row] for row in lower[0]], dtype=object)
        z = xm - ym if kernel == "spectral_mixture" else xm + ym
        lz = lm @ z
        mean, var = mpmath.fsum(mum * z), mpmath.fsum(lz * lz)
        if kernel == "spectral_mixture":
            expect = _normal_expectation(mpmath.cos, mean, var)
        else:
            base = -(mpmath.fsum(xm * xm) + mpmath.fsum(ym * ym)) / 2
            expect = _normal_expectation(mpmath.exp, mean, var) * mpmath.exp(base)
        assert abs(got - expect) <= mpmath.mpf(10) ** -25 * (1 + abs(expect)), (got, expect)


def test_gmm_prf_is_softmax_at_identity():
    """C = 1, μ = 0, Σ = I gives the softmax kernel exp(xᵀy) (docs/math.md §7)."""
    rng = np.random.default_rng(9)
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    got = kernel_mp("gmm_prf", x, y, dps=30, pi=np.array([1.0]), mu=np.zeros((1, 3)),
                    L=np.eye(3)[None])
    assert abs(got - kernel_mp("softmax", x, y, dps=30)) < mpmath.mpf(10) ** -25 * got


# --------------------------------------------------------------------------- unbiasedness
def _estimates(entry, x, y, d, m, n_draws, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty(n_draws)
    xy = np.stack([x, y])
    for i in range(n_draws):
        f = entry.numpy_fn(xy, entry.draw(rng, d, m, entry.config), entry.config)
        out[i] = f[0] @ f[1]
    return out


@pytest.mark.statistical(assertions=1)
@pytest.mark.parametrize(("name", "d", "m"), [("gmm_rks", 3, 4), ("fastfood_random", 3, 4),
                                              ("generative", 2, 3)])
def test_bounded_estimators_unbiased(name, d, m):
    """Σ a_i² = 1 ⇒ estimates in [−1, 1]: Hoeffding at the run's per-assertion α."""
    entry = get(name)
    seed = 20240 + d
    rng = np.random.default_rng(seed)
    x, y = 0.6 * rng.standard_normal(d), 0.6 * rng.standard_normal(d)
    target = float(gram_reference(entry.kernel, x[None], y[None],
                                  **entry.kernel_args(d))[0, 0])
    est = _estimates(entry, x, y, d, m, 4000, seed)
    mean_test(est, target, alpha=alpha.per_assertion(), bounds=(-1.0, 1.0),
              label=f"{name}: E φ(x)ᵀφ(y) = k(x, y)", seed=seed,
              repro=f"test_bounded_estimators_unbiased[{name}] seed={seed}").check()


def _gmm_prf_variance(entry, x, y, m) -> float:
    """Exact variance of φ(x)ᵀφ(y) = Σ_i a_i² e_i with independent ω_i ~ N(μ_(c_i), Σ_(c_i)),
    ``e_i = Λ exp(ω_iᵀs)``: ``Var = Σ_i a_i⁴ Λ²[exp(2μᵀs + 2sᵀΣs) − exp(2μᵀs + sᵀΣs)]``
    (``E exp(tωᵀs) = exp(tμᵀs + t²sᵀΣs/2)`` at t = 1, 2)."""
    g = np_lm.gmm_params(entry.config, x.shape[0], "gmm_prf")
    comps, counts = np_lm.mixture_layout(m, len(g["pi"]))
    s = x + y
    log_lam = -(x @ x + y @ y) / 2
    total = 0.0
    for c, cnt in zip(comps, counts[comps], strict=True):
        a4 = (g["pi"][c] / cnt) ** 2
        mus, ss = g["mu"][c] @ s, np.sum((g["L"][c] @ s) ** 2)
        base = 2 * log_lam + 2 * mus
        total += a4 * (math.exp(base + 2 * ss) - math.exp(base + ss))
    return total


@pytest.mark.statistical(assertions=1)
def test_gmm_prf_unbiased():
    entry = get("gmm_prf")
    d, m, seed = 3, 4, 777
    rng = np.random.default_rng(seed)
    x, y = 0.4 * rng.standard_normal(d), 0.4 * rng.standard_normal(d)
    target = float(gram_reference("gmm_prf", x[None], y[None],
                                  **entry.kernel_args(d))[0, 0])
    est = _estimates(entry, x, y, d, m, 4000, seed)
    mean_test(est, target, alpha=alpha.per_assertion(),
              variance=_gmm_prf_variance(entry, x, y, m), label="gmm_prf: E φ(x)ᵀφ(y) = k(x, y)",
              seed=seed, repro="test_gmm_prf_unbiased").check()


# ------------------------------------------------------------------ torch modules: training
def _module_cases(d: int, m: int):
    rng = np.random.default_rng(5)
    yield "gmm_rks", GMMRKS.from_config(get("gmm_rks").config, d, m, rng)
    yield "gmm_prf", GMMPRF.from_config(get("gmm_prf").config, d, m, rng)
    yield "fastfood_learned", Fastfood.from_config(get("fastfood_learned").config, d)
    yield "fastfood_random", Fastfood.random(rng, d, 2)
    yield "generative", Generative.from_config(get("generative").config, d, m, rng)


@pytest.mark.parametrize("case", range(5))
def test_gradients_flow(case):
    d, m = 3, 4
    name, module = list(_module_cases(d, m))[case]
    x = torch.as_tensor(inputs(case, 5, d, 0.7))
    out = module(x)
    gram = out @ out.T
    target = torch.eye(5, dtype=torch.float64)
    ((gram - target) ** 2).sum().backward()
    params = dict(module.named_parameters())
    assert params, name
    for pname, p in params.items():
        assert p.grad is not None, f"{name}: no gradient for {pname}"
        assert torch.isfinite(p.grad).all(), f"{name}: non-finite gradient for {pname}"
        assert p.grad.abs().sum() > 0, f"{name}: zero gradient for {pname}"
    opt = torch.optim.SGD(module.parameters(), lr=1e-3)
    loss0 = ((module(x) @ module(x).T - target) ** 2).sum()
    opt.zero_grad()
    loss0.backward()
    opt.step()
    assert ((module(x) @ module(x).T - target) ** 2).sum() < loss0, f"{name}: a step did not help"


def test_modules_match_registry_functions():
    """Same values → same features: the module's π = softmax(log π) differs from π by
    ``θ ≤ γ_(C+4) + 4·ulps·u·(1 + max|log π|)`` relative (log, exp, a C-term sum, a division);
    a feature ∝ √π then moves by ``≤ |φ|·θ``, on top of 2× the forward bound."""
    d, m = 3, 4
    x = inputs(8, 4, d, 0.7)
    for name, module in _module_cases(d, m):
        entry = get(name)
        if name in ("gmm_rks", "gmm_prf"):
            params = {"eps": module.eps.numpy(), **np_lm.gmm_params(entry.config, d, name)}
        elif name == "generative":
            params = {"eps": module.eps.numpy(), **np_lm.generative_params(entry.config, d)}
        else:
            params = {k: getattr(module, k).detach().numpy() for k in ("S", "G", "B")}
            params["perm"] = module.perm.numpy().astype(np.float64)
        ref = entry.numpy_fn(x, params, entry.config)
        got = module(torch.as_tensor(x)).detach().numpy()
        bound = 2 * feature_error_bound(entry, x, params, None, U64, 1.0)
        if name.startswith("gmm"):
            pi = np_lm.gmm_params(entry.config, d, name)["pi"]
            theta = gamma(len(pi) + 4, U64) + 4 * U64 * (1 + np.max(np.abs(np.log(pi))))
            bound = bound + np.abs(ref) * theta
        assert_close(got, ref, bound, label=f"{name} module vs registry function",
                     how="2 × forward bound (+ π reparameterisation)", repro="seed 5")


# ----------------------------------------------------------------------------- bad input
def test_mixture_weight_validation():
    e = get("gmm_rks")
    x = np.ones((2, 2))
    # The learned values are resolved (and validated) by the draw; a map called with only the
    # random part resolves them from config itself, with the same checks.
    params = {"eps": e.draw(np.random.default_rng(0), 2, 4, e.config)["eps"]}
    with pytest.raises(ValueError, match="must sum to 1"):
        e.draw(np.random.default_rng(0), 2, 4, {**e.config, "pi": np.array([0.5, 0.6])})
    with pytest.raises(ValueError, match="must sum to 1"):
        e.numpy_fn(x, params, {**e.config, "pi": np.array([0.5, 0.6])})
    with pytest.raises(ValueError, match="must all be > 0"):
        e.torch_fn(torch.as_tensor(x), params, {**e.config, "pi": np.array([1.5, -0.5])})
    with pytest.raises(ValueError, match=r"config\['mu'\] must have shape \(2, 2\)"):
        e.numpy_fn(x, params, {**e.config, "mu": np.zeros((3, 2))})
    with pytest.raises(ValueError, match="contains NaN"):
        e.numpy_fn(x, params, {**e.config, "L": np.full((2, 2, 2), np.nan)})
    with pytest.raises(TypeError, match=r"numpy\.ndarray or None"):
        e.numpy_fn(x, params, {**e.config, "pi": [0.5, 0.5]})
    with pytest.raises(ValueError, match=r"m \(= 1\) must be >= n_components \(= 2\)"):
        e.draw(np.random.default_rng(0), 2, 1, e.config)
    with pytest.raises(ValueError, match="unknown config keys"):
        e.with_config(weights=np.ones(2))
    with pytest.raises(ValueError, match="must all be > 0"):
        GMMRKS(np.array([1.0, 0.0]), np.zeros((2, 2)), np.ones((2, 2, 2)), np.ones((4, 2)))
    ok = e.with_config(n_components=1, pi=np.array([1.0]), mu=np.zeros((1, 2)), L=np.eye(2)[None])
    ok_params = ok.draw(np.random.default_rng(0), 2, 3, ok.config)
    assert ok.numpy_fn(x, ok_params, ok.config).shape == (2, 6)


def test_learned_bad_inputs():
    ff, gen = get("fastfood_learned"), get("generative")
    x = np.ones((2, 3))
    params = ff.draw(np.random.default_rng(0), 3, 1, ff.config)
    bad_perm = {**params, "perm": np.array([[0.0, 0.0, 1.0, 2.0]])}
    with pytest.raises(ValueError, match="permutation"):
        ff.numpy_fn(x, bad_perm, ff.config)
    with pytest.raises(ValueError, match="sigma must be > 0"):
        ff.torch_fn(torch.as_tensor(x), params, {**ff.config, "sigma": 0.0})
    with pytest.raises(ValueError, match=r"must have shape \(None, 4\)"):
        ff.numpy_fn(x, {k: v[:, :2] for k, v in params.items()}, ff.config)
    gp = gen.draw(np.random.default_rng(0), 3, 2, gen.config)
    with pytest.raises(ValueError, match=r"params\['eps'\] must have shape"):
        gen.numpy_fn(x, {"eps": np.ones((2, 5))}, gen.config)
    with pytest.raises(ValueError, match="x contains NaN or Inf"):
        gen.torch_fn(torch.as_tensor(np.full((2, 3), np.nan)), gp, gen.config)
    with pytest.raises(ValueError, match="latent_dim must be >= 1"):
        gen.draw(np.random.default_rng(0), 3, 2, {**gen.config, "latent_dim": 0})
    with pytest.raises(ValueError, match="latent_dim must be >= 1"):
        gen.numpy_fn(x, {"eps": gp["eps"]}, {**gen.config, "latent_dim": 0})
