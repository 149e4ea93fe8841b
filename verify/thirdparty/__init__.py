"""Running the property suite against implementations outside the registry.

See :mod:`kernel_verify.verify.thirdparty.protocol` for the adapter protocol and the README for an
example.
"""

from kernel_verify.verify.thirdparty.protocol import (
    AttentionTarget,
    FeatureMapTarget,
    KernelApproxTarget,
    RandomMatrixTarget,
    Target,
)

__all__ = [
    "AttentionTarget",
    "FeatureMapTarget",
    "KernelApproxTarget",
    "RandomMatrixTarget",
    "Target",
]
