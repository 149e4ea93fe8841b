"""Planted defects of FAVOR#'s variance-optimal DERF parameters (docs/math.md §20).

Each function has the signature of its correct twin in
:mod:`kernel_verify.impls.numpy.dense_exponential` and one defect; the optimality check of
``tests/test_dense_exponential.py`` (the objective must not drop under small perturbations of the
returned parameters) kills each, and passes the twins.
"""

from __future__ import annotations

import numpy as np

from kernel_verify.impls.numpy import dense_exponential as np_de


def optimal_sderf_a_wrong_sign(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """SDERF's A with the root's sign flipped: ``(1 − 2s + √((2s+1)² + 8s))/16`` (the other
    root of the stationarity quadratic, ≥ 1/8: not even a finite variance) clipped to 0.1."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    m = xs.T @ xs / len(xs) + ys.T @ ys / len(ys)
    mu = np.outer(xs.mean(0), ys.mean(0))
    sv, su = np.linalg.eigh(m + mu + mu.T)
    sv = np.maximum(sv, 0.0)
    wrong = np.minimum((1 - 2 * sv + np.sqrt((2 * sv + 1) ** 2 + 8 * sv)) / 16, 0.1)
    return (su * wrong) @ su.T


def optimal_sderf_a_gerf_root(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """SDERF's A with every eigenvalue set to GERF's scalar optimum (the eigenvectors ignored):
    the dense A collapses to ``a*·I``."""
    return np_de.optimal_gerf_a_for_sets(xs, ys) * np.eye(np.asarray(xs).shape[1])


def optimal_aderf_p_inverted(xs: np.ndarray, ys: np.ndarray) -> tuple[float, np.ndarray]:
    """ADERF with ``P⁻¹`` where ``P`` belongs (the query and key statistics swapped in the
    geometric mean)."""
    a, p = np_de.optimal_aderf(xs, ys)
    return a, np.linalg.inv(p)


__all__ = ["optimal_aderf_p_inverted", "optimal_sderf_a_gerf_root", "optimal_sderf_a_wrong_sign"]
