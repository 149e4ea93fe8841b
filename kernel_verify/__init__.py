"""kernel-verify: numerical verification and property testing for kernel feature maps.

The installed distribution is this one namespace. Its parts live in the repository's top-level
folders and are mapped into it by ``pyproject.toml``:

* :mod:`kernel_verify.impls` (``impls/``): the implementations under test and the registry;
* :mod:`kernel_verify.verify` (``verify/``): the truth (mpmath references, exact moments,
  tolerances, statistics) and the drivers on top of it (CLI, check runner, reports, mutants);
* :mod:`kernel_verify.properties` (``properties/``): the shipped Hypothesis property suite, run
  by ``kernel-verify check`` and by ``pytest --kv-target module:attr`` (pytest plugin
  :mod:`kernel_verify.properties.plugin`).

Shipped adapters of widely used third-party libraries live in :mod:`kernel_verify.adapters`
(``kernel-verify conformance``).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kernel-verify")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
