"""kernel-verify: numerical verification and property testing for kernel feature maps.

The installed distribution is this one namespace. Its parts live in the repository's top-level
folders and are mapped into it by ``pyproject.toml``:

* :mod:`kernel_verify.impls` (``impls/``): the implementations under test and the registry;
* :mod:`kernel_verify.verify` (``verify/``): the truth (mpmath references, exact moments,
  tolerances, statistics);
* :mod:`kernel_verify.properties` (``properties/``): the shipped Hypothesis property suite, run
  by ``kernel-verify check`` and by ``pytest --kv-target module:attr`` (pytest plugin
  :mod:`kernel_verify.properties.plugin`).

The application sits on top, in ``kernel_verify/`` itself: the Python API
(:mod:`kernel_verify.api`), the command line (:mod:`kernel_verify.cli`, every subcommand's
handler), the check runner, the report, the mutants, the calibration
(:mod:`kernel_verify.calibration`), provenance stamps (:mod:`kernel_verify.provenance`) and the
shipped adapters of widely used third-party libraries (:mod:`kernel_verify.adapters`,
``kernel-verify conformance``).

The Python API (:mod:`kernel_verify.api`)::

    from kernel_verify import AttentionTarget, FeatureMapTarget, check
    result = check("kernel_verify.examples.my_favor:targets", profile="ci")
    print(result); result.ok; result.failures; result.reproduce
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kernel-verify")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0+unknown"

#: The public API, imported on first use (the pytest plugin imports this package, so it stays
#: light): ``from kernel_verify import AttentionTarget, check``.
_LAZY = {
    "FeatureMapTarget": "kernel_verify.properties.protocol",
    "AttentionTarget": "kernel_verify.properties.protocol",
    "RandomMatrixTarget": "kernel_verify.properties.protocol",
    "KernelApproxTarget": "kernel_verify.properties.protocol",
    "GatedAttentionTarget": "kernel_verify.properties.gated_protocol",
    "RecurrentTarget": "kernel_verify.properties.gated_protocol",
    "l2_features": "kernel_verify.properties.gated_protocol",
    "HybridAttentionTarget": "kernel_verify.properties.hybrid_protocol",
    "ModelTarget": "kernel_verify.properties.model_protocol",
    "check": "kernel_verify.api",
    "CheckResult": "kernel_verify.api",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kernel_verify' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
