"""Adapters for tests/test_known_failures.py: a broken matrix declared as a known failure of the
property that catches it, and a correct one declaring a known failure that no longer happens."""

from __future__ import annotations

import numpy as np

from kernel_verify.properties.protocol import RandomMatrixTarget


def _scaled(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    return 2.0 * rng.standard_normal((m, d))  # rows N(0, 4 I): not standard Gaussian


def _gaussian(rng: np.random.Generator, m: int, d: int) -> np.ndarray:
    return rng.standard_normal((m, d))


LAW = "test_rows_are_standard_gaussian"

known = [RandomMatrixTarget("scaled_rows", _scaled, frozenset({"gaussian_rows"}),
                            known_failures={LAW: "rows have variance 4 (issue #1)"})]
stale = [RandomMatrixTarget("fixed_rows", _gaussian, frozenset({"gaussian_rows"}),
                            known_failures={LAW: "was biased before the fix (issue #2)"})]
#: Both, for one suite run (tests/test_known_failures.py).
both = known + stale
