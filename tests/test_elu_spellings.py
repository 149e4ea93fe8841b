"""``elu(x) + 1`` in each of its usual spellings meets the derived feature bound; a wrong negative
branch does not (verify/references/features_catalogue.py, ``_bound_elu_plus_one``).

Found by a new user: ``F.elu(x) + 1``, the spelling of most linear-attention code, failed
``test_features_match_reference`` in float32 at x = −4 (error 2.6e-8 against a bound of 8.7e-9
that allowed only ``exp(x)``'s own rounding) and ``test_features_on_grid`` in float64 (12 ulp):
``expm1(x) + 1`` cancels, and the call's error relative to ``1 − eˣ`` becomes absolute in the
result.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kernel_verify import FeatureMapTarget  # noqa: E402
from kernel_verify.impls.descriptor import no_params  # noqa: E402
from kernel_verify.properties.checks.reference import check_features  # noqa: E402
from kernel_verify.verify.backends import get_backend  # noqa: E402

SPELLINGS = {
    "F.elu(x) + 1": lambda x: torch.nn.functional.elu(x) + 1,
    "where(x > 0, x + 1, exp(x))": lambda x: torch.where(x > 0, x + 1, torch.exp(x)),
    "(exp(x) − 1) + 1": lambda x: torch.where(x > 0, x, torch.exp(x) - 1) + 1,
}
X = np.array([[-4.0, -2.5, -0.3, 0.7], [-10.0, -20.0, 1.5, -1e-3]])


def _target(name, fn) -> FeatureMapTarget:
    return FeatureMapTarget(name, "elu_plus_one", frozenset({"deterministic", "positive"}),
                            m=4, draw=no_params, torch_fn=lambda x, p, c: fn(x),
                            formula="elu_plus_one")


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_every_spelling_meets_the_bound(spelling, dtype):
    check_features(_target(spelling, SPELLINGS[spelling]), X, {},
                   get_backend(f"torch:cpu-{dtype}"), hypothesis=False)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_one_percent_error_on_the_negative_branch_fails(dtype):
    # e^(1.01x) against e^x at x = −0.3: 0.3 % of 0.74, ~2e3 float32 roundings
    bad = _target("elu1_negative_slope", lambda x: torch.where(x > 0, x + 1, torch.exp(1.01 * x)))
    with pytest.raises(AssertionError, match="FAILED"):
        check_features(bad, X, {}, get_backend(f"torch:cpu-{dtype}"), hypothesis=False)
