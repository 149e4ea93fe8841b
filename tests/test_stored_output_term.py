"""The allowance for a backward that reads the output as stored in a half type
(``verify.softmax_bounds.stored_output_gradient_term``, FlashAttention-2's ``D = rowsum(dO∘O)``):
the gradients computed in float64 from ``D`` of the rounded output differ from the exact ones
by at most the term, and the term is not vacuous (the difference reaches a tenth of it)."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.verify.softmax_bounds import (
    softmax_attention_reference,
    softmax_gradients_reference,
    stored_output_gradient_term,
)
from kernel_verify.verify.tolerance import FORMATS


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
def test_stored_output_term_bounds_the_effect_of_a_rounded_output(dtype, causal):
    if dtype == "bfloat16":
        torch = pytest.importorskip("torch")

        def rnd(a):
            return torch.as_tensor(a).to(torch.bfloat16).double().numpy()

        u = FORMATS["bfloat16"].u
        cast = rnd
    else:
        u = FORMATS["float16"].u

        def cast(a):
            return a.astype(np.float16).astype(np.float64)

    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 1, 2, 9, 4))
    v, g = rng.standard_normal((2, 1, 2, 9, 3))
    exact = softmax_gradients_reference(q, k, v, g, causal=causal)
    sc = q.shape[-1] ** -0.5
    o, p = softmax_attention_reference(q, k, v, causal=causal)
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - np.sum(g * cast(o), axis=-1, keepdims=True))
    got = (sc * ds @ k, sc * np.swapaxes(ds, -1, -2) @ q)
    term = stored_output_gradient_term(q, k, v, g, causal=causal, u_io=u)
    worst = 0.0
    for a, b, t in zip(got, exact, term, strict=False):
        diff = np.abs(a - b)
        assert np.all(diff <= t + 1e-13 * (np.abs(b) + 1)), "the term does not bound the effect"
        worst = max(worst, float(np.max(diff / (t + 1e-300))))
    assert worst >= 0.1, f"the term is vacuous here: the effect reaches {worst:.3g} of it"
    assert not np.any(term[2])
