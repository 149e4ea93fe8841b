"""The built-in kernel approximations as
:class:`~kernel_verify.properties.protocol.KernelApproxTarget`.

Landmark Nyström ``K̃ = C W⁺ Cᵀ`` (docs/math.md §8) from :mod:`kernel_verify.impls.numpy.nystrom` and
:mod:`kernel_verify.impls.torch.nystrom` (torch on the CPU, float64), with ``rank`` landmarks chosen
by a seeded rule (``uniform``: without replacement from the given generator; ``strided``:
``⌊i·n/s⌋``). Each target claims what docs/math.md §8 proves for a PSD kernel:

* ``psd``: ``K̃ = C W⁺ Cᵀ ⪰ 0``;
* ``schur_residual``: ``K − K̃`` is the generalised Schur complement of W, hence ``⪰ 0``;
* ``exact_on_landmarks``: ``K̃[:, S] = C W⁺ W = C`` (the columns of C lie in the range of W).

The truncated SVD ``U_r Σ_r V_rᵀ`` of the Gram matrix (:func:`truncated_svd_target`, both
backends, no landmarks) claims ``optimal_rank``: ``‖K − K̃‖₂ = σ_(r+1)`` (Eckart–Young).
Every target takes its name and claims from its descriptor (:mod:`kernel_verify.impls.systems`).

The property suite (``properties/test_psd_properties.py``,
``properties/test_nystrom_properties.py``) runs them like any third-party adapter.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kernel_verify.impls.numpy import nystrom as np_nystrom
from kernel_verify.impls.systems import get_system
from kernel_verify.impls.validation import check_array, check_positive_int
from kernel_verify.properties.protocol import KernelApproxTarget

__all__ = ["CLAIMS", "approximation_targets", "nystrom_target", "truncated_svd_target"]

#: What every built-in Nyström target claims (docs/math.md §8): its descriptor's claims
#: (:mod:`kernel_verify.impls.systems`).
CLAIMS = get_system("nystrom").target_claims()

Kernel = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _check(X: np.ndarray, kernel: Kernel, rng: np.random.Generator) -> None:
    check_array("X", X, min_ndim=2, backend="numpy")
    if X.ndim != 2:
        raise ValueError(f"X must be (n, d), got shape {X.shape}")
    if not callable(kernel):
        raise TypeError(f"kernel must be a callable (A, B) -> Gram, got {type(kernel).__name__}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")


def nystrom_target(rule: str = "uniform", rank: int = 4, backend: str = "numpy"
                   ) -> KernelApproxTarget:
    """Nyström with ``min(rank, n)`` landmarks chosen by ``rule``, on ``backend``
    (``"numpy"`` or ``"torch:cpu"``)."""
    rank = check_positive_int("rank", rank)
    if rule not in np_nystrom.LANDMARK_RULES:
        raise ValueError(f"rule must be one of {sorted(np_nystrom.LANDMARK_RULES)}, got {rule!r}")
    if backend not in ("numpy", "torch:cpu"):
        raise ValueError(f"backend must be 'numpy' or 'torch:cpu', got {backend!r}")

    def approximate(X: np.ndarray, kernel: Kernel, rng: np.random.Generator):
        _check(X, kernel, rng)
        n = X.shape[0]
        idx = np_nystrom.choose_landmarks(n, min(rank, n), rule=rule, rng=rng)
        gram = np.asarray(kernel(X, X), dtype=np.float64)
        if backend == "numpy":
            return np_nystrom.nystrom_from_gram(gram, idx), idx
        import torch

        from kernel_verify.impls.torch import nystrom as torch_nystrom

        out = torch_nystrom.nystrom_from_gram(torch.as_tensor(gram), idx)
        return out.numpy(), idx

    return KernelApproxTarget(f"nystrom[{rule},{backend}]", approximate, CLAIMS, rank=rank)


def truncated_svd_target(rank: int = 4, backend: str = "numpy") -> KernelApproxTarget:
    """The truncated SVD ``U_r Σ_r V_rᵀ`` of the Gram matrix with ``r = min(rank, n)``, on
    ``backend``: a landmark-free approximation (it returns no landmark indices), so it takes of
    its descriptor's claims the one whose property reads only ``K̃`` and ``rank``:
    ``optimal_rank`` (``properties/claim_tests.py`` says why ``psd`` is not tested)."""
    rank = check_positive_int("rank", rank)
    if backend not in ("numpy", "torch:cpu"):
        raise ValueError(f"backend must be 'numpy' or 'torch:cpu', got {backend!r}")
    system = get_system("truncated_svd")

    def approximate(X: np.ndarray, kernel: Kernel, rng: np.random.Generator):
        _check(X, kernel, rng)
        gram = np.asarray(kernel(X, X), dtype=np.float64)
        r = min(rank, X.shape[0])
        if backend == "numpy":
            return system.resolve("numpy")(gram, r), np.arange(0)
        import torch

        return system.resolve("torch")(torch.as_tensor(gram), r).numpy(), np.arange(0)

    return KernelApproxTarget(f"{system.name}[{backend}]", approximate,
                              system.target_claims() - {"psd"}, rank=rank)


def approximation_targets() -> list[KernelApproxTarget]:
    """Every built-in kernel approximation (used by ``properties/targets.py``)."""
    return [
        nystrom_target("uniform", 4, "numpy"),
        nystrom_target("strided", 4, "numpy"),
        nystrom_target("uniform", 4, "torch:cpu"),
        truncated_svd_target(4, "numpy"),
        truncated_svd_target(4, "torch:cpu"),
    ]
