"""Kernel approximations without landmarks and with full rank (properties/checks/nystrom.py,
properties/test_psd_properties.py, properties/test_nystrom_properties.py): new users' correct
targets that the Nyström properties failed — a random-feature Gram ``Z Zᵀ`` claiming ``psd``
(refused for returning no landmarks) and a FITC-style Nyström with its diagonal corrected
(full rank, judged by Eckart–Young under ``psd``)."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_verify import KernelApproxTarget
from kernel_verify.properties.checks.nystrom import bounded_run, point_set
from kernel_verify.properties.claim_tests import CLAIM_PROPERTIES
from kernel_verify.verify.psd import psd_float


def _rff_gram(X, kernel, rng):
    w = rng.standard_normal((64, X.shape[1]))
    b = rng.uniform(0, 2 * np.pi, 64)
    z = np.sqrt(2 / 64) * np.cos(X @ w.T + b)
    return z @ z.T, np.arange(0)


RFF = KernelApproxTarget("rff_gram", _rff_gram, frozenset({"psd"}))


@pytest.mark.parametrize("seed", range(5))
def test_a_landmark_free_gram_is_judged_psd(seed):
    X = point_set(seed, 7, 3, 0.8)
    _, k_tilde, idx, bound = bounded_run(RFF, X, "gaussian", seed, landmarks=False)
    assert idx.size == 0 and np.isfinite(bound).all()
    assert psd_float(k_tilde, "float64", entry_error=bound).is_psd
    # the allowance is rounding-sized: smallest eigenvalue moved to −1e-6 is not PSD
    lam = float(np.linalg.eigvalsh(k_tilde)[0])
    shifted = k_tilde - (lam + 1e-6) * np.eye(len(X))
    assert not psd_float(shifted, "float64", entry_error=bound).is_psd


def test_landmarks_are_still_required_where_a_property_needs_them():
    with pytest.raises(AssertionError, match="non-empty 1-D array"):
        bounded_run(RFF, point_set(0, 5, 2, 1.0), "gaussian", 0)


def test_eckart_young_belongs_to_the_claim_that_states_the_rank():
    """rank K̃ ≤ |S| is Nyström's (``schur_residual``), not every PSD approximation's."""
    ey = "nystrom_properties::test_error_is_at_least_eckart_young"
    assert ey in CLAIM_PROPERTIES["schur_residual"]
    assert ey not in CLAIM_PROPERTIES["psd"]
