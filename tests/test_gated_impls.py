"""The built-in gated forms (impls/{numpy,torch}/gated_forms.py, docs/math.md §16) against the
exact reference, their input checks, and the validation of
:class:`~kernel_verify.properties.gated_protocol.GatedAttentionTarget`.

Tolerance: the derived bound of verify/gated_bounds.py for float64 (u = 2⁻⁵³, exp within 1 ulp).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernel_verify.impls.numpy import gated_forms as npg
from kernel_verify.impls.torch import gated_forms as tg
from kernel_verify.properties.gated_protocol import GatedAttentionTarget
from kernel_verify.verify.gated_bounds import (
    gated_forms_error_bound,
    gated_state_error_bound,
    smallest_normal,
)
from kernel_verify.verify.references.gated import gated_recurrence_mp

U = 2.0**-53


def _case(t, kind, seed=0, strong=False):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, 2, t, 3)), rng.standard_normal((2, 2, t, 3))
    v = rng.standard_normal((2, 2, t, 2))
    g = -rng.uniform(0, 2, (2, 2, t) if kind == "scalar" else (2, 2, t, 3))
    if strong:
        g[..., 1:t // 2 + 1] = -30.0 if kind == "scalar" else g[..., 1:t // 2 + 1]
        if kind == "key_dim":
            g[..., 1:t // 2 + 1, :] = -30.0
    return q, k, v, g


@pytest.mark.parametrize("kind", ["scalar", "key_dim"])
@pytest.mark.parametrize(("t", "chunk"), [(1, 1), (7, 3), (9, 9), (40, 17)])
@pytest.mark.parametrize("strong", [False, True])
def test_every_form_meets_the_exact_recurrence(kind, t, chunk, strong):
    q, k, v, g = _case(t, kind, seed=t, strong=strong)
    rng = np.random.default_rng(1)
    s0 = (rng.standard_normal((2, 2, 3, 2)), rng.standard_normal((2, 2, 3)))
    ref, (s_ref, _) = gated_recurrence_mp(q, k, v, g, initial_state=s0)
    bound = gated_forms_error_bound(q, k, v, g, u=U, exp_ulps=1, tiny=smallest_normal("float64"),
                                    initial_state=s0)
    chunked, (s_fin, _) = npg.gated_attention_chunked(q, k, v, g, chunk_size=chunk,
                                                      initial_state=s0)
    s_bound, _ = gated_state_error_bound(k, v, g, u=U, exp_ulps=1,
                                         tiny=smallest_normal("float64"), initial_state=s0)
    assert np.all(np.abs(s_fin - s_ref) <= s_bound)
    outs = [chunked, npg.gated_attention_parallel(q, k, v, g, initial_state=s0)[0]]
    tt = [torch.tensor(a) for a in (q, k, v, g)]
    ts0 = tuple(torch.tensor(a) for a in s0)
    outs.append(tg.gated_attention_chunked(*tt, chunk_size=chunk, initial_state=ts0)[0].numpy())
    state, steps = s0, []
    for i in range(t):
        gi = g[..., i] if kind == "scalar" else g[..., i, :]
        state, o = npg.gated_attention_step(state, q[..., i, :], k[..., i, :], v[..., i, :], gi)
        steps.append(o)
    outs.append(np.stack(steps, axis=-2))
    for out in outs:
        assert np.all(np.abs(out - ref) <= bound)


def test_normalised_form_and_half_types():
    q, k, v, g = _case(9, "scalar")
    fq, fk = np.exp(0.3 * q), np.exp(0.3 * k)
    ref, _ = gated_recurrence_mp(fq, fk, v, g, normalise=True)
    out, _ = npg.gated_attention_chunked(fq, fk, v, g, chunk_size=4, normalise=True)
    bound = gated_forms_error_bound(fq, fk, v, g, u=U, exp_ulps=1,
                                    tiny=smallest_normal("float64"), normalise=True)
    assert np.all(np.abs(out - ref) <= bound)
    half = tg.gated_attention_chunked(*(torch.tensor(a, dtype=torch.bfloat16)
                                        for a in (q, k, v, g)), chunk_size=4)
    assert half[0].dtype == torch.bfloat16 and half[1][0].dtype == torch.float32


@pytest.mark.parametrize(("change", "words"), [
    (lambda a: {**a, "g": -a["g"] - 1.0}, "must be ≤ 0"),
    (lambda a: {**a, "g": a["g"][..., :-1]}, "log_gates must have shape"),
    (lambda a: {**a, "g": np.where(a["g"] < -1, np.nan, a["g"])}, "NaN or Inf"),
    (lambda a: {**a, "g": a["g"].astype(np.float32)}, "dtype"),
])
def test_bad_gates_are_named(change, words):
    q, k, v, g = _case(5, "scalar")
    a = change({"q": q, "k": k, "v": v, "g": g})
    with pytest.raises((ValueError, TypeError), match=words):
        npg.gated_attention_chunked(a["q"], a["k"], a["v"], a["g"], chunk_size=2)


def _target(**kw):
    base = {"gates": "scalar", "claims": frozenset(), "features": lambda x, r: x,
            "stateful": lambda *a, **k: None}
    return GatedAttentionTarget("t", **{**base, **kw})


@pytest.mark.parametrize(("kw", "words"), [
    ({"gates": "vector"}, "gates"), ({"gate_side": "value"}, "gate_side"),
    ({"claims": frozenset({"bogus"})}, "bogus"), ({"stateful": None}, "no form"),
    ({"min_log_gate": 0.0}, "min_log_gate"), ({"chunk_sizes": ()}, "chunk_sizes"),
    ({"fixed_log_gates": lambda h: np.zeros(h)}, "scalar_fixed"),
    ({"feature_ulps": -1}, "feature_ulps"), ({"dtypes": ("float128",)}, "dtypes"),
])
def test_protocol_validation_names_the_field(kw, words):
    with pytest.raises((ValueError, TypeError), match=words):
        _target(**kw)
