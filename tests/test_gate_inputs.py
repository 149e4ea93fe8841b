"""The gate parametrisations (verify/references/gate_inputs.py) against mpmath, their error
bound (verify/gate_input_bounds.py) against the ways the field evaluates them in float32 and
float64, and the bound's propagation through the recurrence against perturbed exact runs."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch

from kernel_verify.impls.recurrence_conventions import mamba_log_gate
from kernel_verify.verify.gate_input_bounds import (
    gate_input_error,
    gate_perturbation_bound,
    gate_rounding_factor,
)
from kernel_verify.verify.references.gate_inputs import log_gates_from_input
from kernel_verify.verify.references.recurrence import recurrence_mp

RNG = np.random.default_rng(20261205)
#: Raw inputs over the range the field meets, the extremes included.
A = np.concatenate([RNG.uniform(-40, 40, 400), [-80.0, -20.5, -1e-3, 0.0, 1e-3, 19.9, 20.1, 60]])


def _mp_gate(kind: str, a: float, a_log: float, dt: float, lower: float) -> float:
    with mpmath.workdps(50):
        x = mpmath.mpf(a)
        if kind == "mamba":
            return float(-mpmath.exp(a_log) * mpmath.log1p(mpmath.exp(x + dt)))
        if kind == "bounded":
            return float(lower / (1 + mpmath.exp(-x)))
        return float(lower / (1 + mpmath.exp(-mpmath.exp(a_log) * (x + dt))))


@pytest.mark.parametrize("kind", ["mamba", "bounded", "bounded_affine"])
def test_float64_gates_meet_mpmath(kind):
    """The float64 values the reference runs on are within the float64 half of the bound of
    the mpmath value (relative 1e-14 or the bound, whichever is larger, never more)."""
    a_log, dt, lower = 1.3, -2.7, -5.0
    got = log_gates_from_input(kind, A, A_log=np.float64(a_log), dt_bias=np.float64(dt),
                               lower=lower)
    want = np.array([_mp_gate(kind, a, a_log, dt, lower) for a in A])
    own = gate_input_error(kind, A, u=0.0, exp_ulps=0, tiny=0.0, A_log=np.float64(a_log),
                           dt_bias=np.float64(dt), lower=lower)
    assert np.all(np.abs(got - want) <= own), np.max(np.abs(got - want) / own)
    assert np.all(got <= 0)


def _torch_variants(kind, a, a_log, dt, lower):
    """The field's evaluations of each parametrisation in ``a``'s dtype."""
    if kind == "mamba":
        x = a + dt
        rate = torch.exp(a_log)
        return {"F.softplus (threshold 20)": -rate * torch.nn.functional.softplus(x),
                "log(1 + exp(x))": -rate * torch.log(1 + torch.exp(x)),
                "log1p(exp(x))": -rate * torch.log1p(torch.exp(x)),
                "impls mamba_log_gate": mamba_log_gate(a, A_log=a_log, dt_bias=dt)}
    if kind == "bounded":
        return {"torch.sigmoid": lower * torch.sigmoid(a),
                "1/(1 + exp(−a))": lower / (1 + torch.exp(-a))}
    y = torch.exp(a_log) * (a + dt)
    return {"torch.sigmoid": lower * torch.sigmoid(y),
            "1/(1 + exp(−y))": lower / (1 + torch.exp(-y))}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["mamba", "bounded", "bounded_affine"])
def test_the_fields_evaluations_stay_within_the_gate_error_bound(kind, dtype):
    """Every evaluation the field uses (torch, on the values as rounded to the dtype) is within
    :func:`gate_input_error` of the float64 values — and the bound is not vacuous: it is below
    1e-5 relative to |g| + 1e-30 in float32 wherever |x| ≤ 20."""
    tdt = getattr(torch, dtype)
    fin = torch.finfo(tdt)
    for a_log, dt in ((1.3, -2.7), (-0.8, 0.5), (2.7, -6.9)):
        a_t = torch.tensor(A, dtype=tdt)
        al, dtb = torch.tensor(a_log, dtype=tdt), torch.tensor(dt, dtype=tdt)
        a64, al64, dt64 = (x.double().numpy() for x in (a_t, al, dtb))
        want = log_gates_from_input(kind, a64, A_log=al64, dt_bias=dt64, lower=-5.0)
        bound = gate_input_error(kind, a64, u=fin.eps / 2, exp_ulps=1, tiny=float(fin.tiny),
                                 A_log=al64, dt_bias=dt64, lower=-5.0)
        for name, got in _torch_variants(kind, a_t, al, dtb, -5.0).items():
            err = np.abs(got.double().numpy() - want)
            assert np.all(err <= bound), (name, a_log, dt, float(np.max(err / bound)))
        if dtype == "float32" and kind == "mamba":
            mid = np.abs(a64 + dt64) <= 20
            assert np.all(bound[mid] <= 1e-5 * np.abs(want[mid]) + 1e-30 + 2e-6 * np.exp(al64))


def _inputs(transition, shape, rng):
    b, h, t, d, dv = shape
    k = rng.standard_normal((b, h, t, d))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    q = rng.standard_normal((b, h, t, d))
    v = rng.standard_normal((b, h, t, dv))
    kw = {}
    if transition in ("gated_delta", "kda", "comba"):
        kw["beta"] = rng.uniform(0, 1, (b, h, t))
    if transition == "comba":
        kw["p"] = k * rng.uniform(0, 1, (b, h, t, 1))
    if transition == "rwkv7":
        kw["a"], kw["b"] = -k, k * rng.uniform(0, 1, (b, h, t, d))
    key_dim = transition in ("kda", "rwkv7")
    g = -rng.exponential(1.0, (b, h, t, d) if key_dim else (b, h, t))
    return q, k, v, g, kw


@pytest.mark.parametrize("transition", ["decay", "gated_delta", "kda", "comba", "rwkv7"])
def test_perturbation_bound_holds_and_is_attained_in_order(transition):
    """Gates moved by ±δ (each sign drawn) move the exact outputs and final state by at most
    the bound; and by more than 1e-3 of it somewhere (the bound is not vacuous)."""
    rng = np.random.default_rng(7)
    q, k, v, g, kw = _inputs(transition, (2, 1, 6, 3, 2), rng)
    delta = 1e-4 * np.abs(g) + 1e-6
    out_b, st_b = gate_perturbation_bound(q, k, v, transition=transition, g=g, delta=delta,
                                          **kw)
    ref, s_ref = recurrence_mp(q, k, v, transition=transition, g=g, **kw)
    worst = 0.0
    for _ in range(4):
        moved = g + delta * rng.choice([-1.0, 1.0], g.shape)
        out, s = recurrence_mp(q, k, v, transition=transition, g=moved, **kw)
        assert np.all(np.abs(out - ref) <= out_b)
        assert np.all(np.abs(s - s_ref) <= st_b)
        live = out_b > 0  # the first token's output does not depend on the gates
        assert np.all(out[~live] == ref[~live])
        worst = max(worst, float(np.max(np.abs(out - ref)[live] / out_b[live])))
    assert worst > 1e-3, worst


def test_rounding_factor_and_bad_input():
    assert gate_rounding_factor(np.zeros((2, 3)), key_dim=False) == pytest.approx(1.0)
    f = gate_rounding_factor(np.full((1, 4, 2), 0.1), key_dim=True)
    assert f == pytest.approx(np.exp(0.4), rel=1e-6)
    with pytest.raises(ValueError, match="A_log is required"):
        log_gates_from_input("mamba", np.zeros(3))
    with pytest.raises(ValueError, match="lower must be"):
        log_gates_from_input("bounded", np.zeros(3), lower=0.5)
    with pytest.raises(ValueError, match="gate input kind"):
        log_gates_from_input("softplus", np.zeros(3))
    with pytest.raises(ValueError, match="dt_bias of shape"):
        log_gates_from_input("mamba", np.zeros((2, 3)), A_log=np.zeros(3), dt_bias=np.zeros(4))
