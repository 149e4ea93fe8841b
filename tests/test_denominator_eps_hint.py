"""The diagnosis of the declared-features property (properties/checks/declared.py,
``denominator_eps_hint``): outputs that equal linear attention with an ε added to the normaliser
are named with that ε; other deviations get no such text."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify.properties.checks.declared import denominator_eps_hint, exact_attention

RNG = np.random.default_rng(5)
FQ, FK = RNG.uniform(0.1, 2.0, (1, 2, 6, 8)), RNG.uniform(0.1, 2.0, (1, 2, 6, 8))
V = RNG.standard_normal((1, 2, 6, 3))


def _with_eps(eps: float, causal: bool) -> np.ndarray:
    a = FQ @ np.swapaxes(FK, -1, -2)
    if causal:
        a = np.where(np.tril(np.ones(a.shape[-2:], dtype=bool)), a, 0.0)
    return (a @ V) / (a.sum(axis=-1, keepdims=True) + eps)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("eps", [1e-6, 1e-2])
def test_an_eps_in_the_normaliser_is_named(eps, causal):
    got = _with_eps(eps, causal)
    bound = np.full(got.shape, 1e-13)
    text = denominator_eps_hint(FQ, FK, V, got, causal, bound)
    assert f"ε ≈ {eps:.3g}" in text


@pytest.mark.parametrize("defect", ["scaled", "noise", "nan"])
def test_other_deviations_get_no_eps_text(defect):
    ref = exact_attention(FQ, FK, V, False)
    got = {"scaled": ref * (1 + 1e-3),
           "noise": ref + 1e-4 * np.random.default_rng(1).standard_normal(ref.shape),
           "nan": np.where(ref > 0, np.nan, ref)}[defect]
    assert denominator_eps_hint(FQ, FK, V, got, False, np.full(ref.shape, 1e-13)) == ""
