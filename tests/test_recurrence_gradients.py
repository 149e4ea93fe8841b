"""The float64 gradient of the one recurrence (``verify/recurrence_gradients.py``) against a
second route: central differences of the exact reference in mpmath
(``verify/references/recurrence.py``, ``recurrence_mp`` at 40 digits), along random directions
of every input, for every transition; and its float32 evaluation a plain float32 one (close to
float64, not equal)."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.verify.recurrence_gradients import TRANSITIONS, recurrence_vjp
from kernel_verify.verify.references.recurrence import recurrence_mp

B, H, T, D, DV = 1, 2, 4, 3, 2


def _inputs(transition: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    x = {"fq": rng.standard_normal((B, H, T, D)), "fk": rng.standard_normal((B, H, T, D)) / 2,
         "v": rng.standard_normal((B, H, T, DV))}
    if transition in ("decay", "gated_delta", "comba"):
        x["g"] = -rng.uniform(0.05, 1.0, (B, H, T))
    if transition in ("kda", "rwkv7"):
        x["g"] = -rng.uniform(0.05, 1.0, (B, H, T, D))
    if transition in ("delta", "gated_delta", "kda", "comba"):
        x["beta"] = rng.uniform(0.1, 0.9, (B, H, T))
    if transition == "comba":
        x["p"] = rng.standard_normal((B, H, T, D)) / 2
    if transition == "rwkv7":
        x["a"] = rng.standard_normal((B, H, T, D)) / 4
        x["b"] = rng.standard_normal((B, H, T, D)) / 4
    return x


def _loss_mp(transition: str, x: dict[str, np.ndarray], w: np.ndarray) -> float:
    kw = {n: x[n] for n in ("g", "beta", "p", "a", "b") if n in x}
    o, _ = recurrence_mp(x["fq"], x["fk"], x["v"], transition=transition, dps=40, **kw)
    return float((o * w).sum())


@pytest.mark.parametrize("transition", TRANSITIONS)
def test_float64_gradient_meets_central_differences_of_the_exact_recurrence(transition):
    rng = np.random.default_rng(7)
    x = _inputs("decay" if transition == "identity" else transition, rng)
    if transition == "identity":
        x.pop("g")
    w = rng.standard_normal((B, H, T, DV))
    grads = recurrence_vjp(x["fq"], x["fk"], x["v"], w, transition=transition, dtype="float64",
                           g=x.get("g"), inputs={n: x[n] for n in ("beta", "p", "a", "b")
                                                 if n in x})
    assert set(grads) == set(x)
    h = 1e-5  # central differences of an analytic function: error O(h²) ≈ 1e-10 relative
    for _ in range(3):
        u = {n: rng.standard_normal(a.shape) for n, a in x.items()}
        plus = _loss_mp(transition, {n: a + h * u[n] for n, a in x.items()}, w)
        minus = _loss_mp(transition, {n: a - h * u[n] for n, a in x.items()}, w)
        fd = (plus - minus) / (2 * h)
        ad = sum(float((grads[n] * u[n]).sum()) for n in x)
        assert abs(fd - ad) <= 1e-7 * max(1.0, abs(fd)), (transition, fd, ad)


def test_beta_logit_is_differentiated_through_the_sigmoid():
    rng = np.random.default_rng(3)
    x = _inputs("gated_delta", rng)
    w = rng.standard_normal((B, H, T, DV))
    logit = rng.uniform(-2, 2, (B, H, T))
    beta = 1 / (1 + np.exp(-logit))
    common = {"transition": "gated_delta", "dtype": "float64", "g": x["g"]}
    by_logit = recurrence_vjp(x["fq"], x["fk"], x["v"], w, inputs={"beta": logit},
                              beta_logit=True, **common)
    by_value = recurrence_vjp(x["fq"], x["fk"], x["v"], w, inputs={"beta": beta}, **common)
    np.testing.assert_allclose(by_logit["beta"], by_value["beta"] * beta * (1 - beta),
                               rtol=1e-12, atol=1e-15)


def test_beta_logit_with_negative_eigenvalues_is_twice_the_sigmoid():
    """β = 2σ(logit) (fla's allow_neg_eigval): the gradients equal those of the recurrence given
    β = 2σ directly, the logit's by the chain rule 2σ(1 − σ) (a reference taking σ alone made
    every correct sigmoid-β target with negative eigenvalues fail in float32)."""
    rng = np.random.default_rng(4)
    x = _inputs("delta", rng)
    w = rng.standard_normal((B, H, T, DV))
    logit = rng.uniform(-2, 2, (B, H, T))
    sig = 1 / (1 + np.exp(-logit))
    common = {"transition": "delta", "dtype": "float64"}
    by_logit = recurrence_vjp(x["fq"], x["fk"], x["v"], w, inputs={"beta": logit},
                              beta_logit=True, beta_top=2.0, **common)
    by_value = recurrence_vjp(x["fq"], x["fk"], x["v"], w, inputs={"beta": 2 * sig}, **common)
    for name in ("fq", "fk", "v"):
        np.testing.assert_allclose(by_logit[name], by_value[name], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(by_logit["beta"], by_value["beta"] * 2 * sig * (1 - sig),
                               rtol=1e-12, atol=1e-15)
    one = recurrence_vjp(x["fq"], x["fk"], x["v"], w, inputs={"beta": logit}, beta_logit=True,
                         **common)
    assert np.abs(one["fq"] - by_logit["fq"]).max() > 1e-3  # the factor 2 is seen


def test_float32_evaluation_is_close_to_float64_and_not_equal():
    rng = np.random.default_rng(5)
    x = _inputs("kda", rng)
    w = rng.standard_normal((B, H, T, DV))
    args = (x["fq"], x["fk"], x["v"], w)
    kw = {"transition": "kda", "g": x["g"], "inputs": {"beta": x["beta"]}}
    g64, g32 = recurrence_vjp(*args, dtype="float64", **kw), recurrence_vjp(*args,
                                                                           dtype="float32", **kw)
    for n in g64:
        err = np.abs(g32[n] - g64[n]).max()
        assert 0 < err <= 1e-5 * max(1.0, np.abs(g64[n]).max()), (n, err)


@pytest.mark.parametrize(("kw", "match"), [
    ({"transition": "nope", "dtype": "float64"}, "transition must be one of"),
    ({"transition": "delta", "dtype": "float16"}, "dtype must be"),
])
def test_bad_arguments_are_named(kw, match):
    z = np.zeros((1, 1, 2, 2))
    with pytest.raises(ValueError, match=match):
        recurrence_vjp(z, z, z, z, **kw)
