"""Gradients through the stable log-space path (which takes its exponentials in place) equal the
gradients through the plain path, float64, causal and not.

Both paths compute the same function; their values agree to the bounds of
``tests/test_attention.py``. Gradients are compared at 1e-9 relative to the largest gradient
entry: rounding differences are ~1e-14 here, a wrong in-place update (a shift that is not
detached, an exponential applied twice) changes gradients at order 1.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernel_verify.impls.attention import feature_map_attention
from kernel_verify.impls.registry import get


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", ["softmax_positive[iid]", "softmax_hyperbolic[orthogonal]",
                                  "gerf[iid]"])
def test_log_path_gradients_equal_plain_path_gradients(name, causal):
    entry = get(name)
    rng = np.random.default_rng(7)
    params = {"W": torch.tensor(entry.draw(rng, 8, 16, entry.config)["W"])}
    q, k, v = (torch.tensor(rng.standard_normal((2, 11, 8)), requires_grad=True)
               for _ in range(3))
    weights = torch.tensor(rng.standard_normal((2, 11, 8)))
    saved = [t.detach().clone() for t in (q, k, v)]
    grads = []
    for use_log in (True, False):
        out = feature_map_attention(entry, params, q, k, v, causal=causal, use_log=use_log)
        grads.append(torch.autograd.grad((out * weights).sum(), (q, k, v)))
    for g_log, g_plain in zip(*grads, strict=True):
        scale = g_plain.abs().max()
        assert (g_log - g_plain).abs().max() <= 1e-9 * scale
    for before, after in zip(saved, (q, k, v), strict=True):  # inputs are never overwritten
        assert torch.equal(before, after)
