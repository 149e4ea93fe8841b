"""NumPy and torch-CPU compute the same features for the same float64 parameter draw.

Derived bound: each implementation is within its a-priori rounding bound of the exact value
(:func:`kernel_verify.verify.references.features.feature_error_bound`, derivation in that module,
with the float64 CPU budget of :mod:`kernel_verify.verify.tolerance`), so
``|φ_numpy − φ_torch| ≤ b_numpy + b_torch``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernel_verify.impls.attention import map_features
from kernel_verify.impls.registry import all_maps, get
from kernel_verify.impls.torch.convert import to_torch
from kernel_verify.verify.references.features import feature_error_bound
from kernel_verify.verify.tolerance import budget_for

BUDGET = budget_for("float64", "cpu")
ULPS = max(BUDGET.ulps.values())
NAMES = [m.name for m in all_maps()]


@pytest.mark.parametrize("name", NAMES)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 6),
    d=st.integers(1, 8),
    m=st.integers(1, 24),
    scale=st.sampled_from([0.1, 0.5, 1.0, 2.0]),
)
def test_numpy_and_torch_cpu_agree_in_float64(name, seed, n, d, m, scale):
    entry = get(name)
    rng = np.random.default_rng(seed)
    m = max(m, entry.min_m)
    params = entry.draw(rng, d, m, entry.config)
    x = scale * rng.standard_normal((2, n, d))
    pos = np.arange(n) if entry.has("positional") else None
    got_np = map_features(entry, x, params, positions=pos)
    got_t = map_features(entry, torch.tensor(x), to_torch(params), positions=pos).numpy()
    bound = 2 * feature_error_bound(entry, x, params, entry.config, BUDGET.u, ULPS, positions=pos)
    err = np.abs(got_np - got_t)
    i = np.unravel_index(np.argmax(err - bound), err.shape)
    assert np.all(err <= bound), (
        f"{name}: |numpy − torch| = {err[i]:.3e} > bound {bound[i]:.3e} at {i} "
        f"(seed={seed}, n={n}, d={d}, m={m}, scale={scale})"
    )
    if entry.has("log_features"):
        lnp = map_features(entry, x, params, log=True)
        lt = map_features(entry, torch.tensor(x), to_torch(params), log=True).numpy()
        lb = 2 * feature_error_bound(entry, x, params, entry.config, BUDGET.u, ULPS, log=True)
        assert np.all(np.abs(lnp - lt) <= lb), f"{name}: log-features disagree"
