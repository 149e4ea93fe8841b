"""pytorch-fast-transformers (idiap): no targets yet.

The library is a source distribution (``pytorch-fast-transformers 0.4.0``, 2021) whose
``setup.py`` compiles C++ extensions (hashing, aggregation, clustering, sparse/local/causal
products) and, when ``nvcc`` is on ``PATH``, CUDA ones that need ``CUDA_HOME``. On the 2-core
machine this adapter was written on, the CPU-only build (``nvcc`` kept off ``PATH``,
``--no-build-isolation`` against the installed torch) compiled without errors but did not finish
within its 10-minute time box (4 of the extensions done), so no adapter was written against an
API that could not be run: an untested adapter would report on itself, not on the library.
Its feature maps (``Favor``, ``RandomFourierFeatures``, ``SmoothedRandomFourierFeatures``,
``GeneralizedRandomFeatures``) and ``LinearAttention``/``CausalLinearAttention`` are the next
targets once a build is available (install: ``pip install --no-build-isolation
'kernel-verify[fast-transformers]'`` with ``nvcc`` off ``PATH``).
"""

from __future__ import annotations

from kernel_verify.adapters.library import Library
from kernel_verify.properties.protocol import Target

targets: list[Target] = []


# ---------------------------------------------------------------------- the library's record
# What is known about the library (kernel_verify.adapters.library): the conformance page's text,
# the confirmed findings (its known failures derive from them) and their measurements.
_MINOR = (
    "pytorch-fast-transformers 0.4.0 (2021) is a source distribution. With `nvcc` on "
    "`PATH` its setup.py builds CUDA extensions and stops asking for CUDA_HOME; with `nvcc` "
    "kept off `PATH` (`env PATH=/usr/bin:/bin pip install --no-build-isolation --no-deps "
    "pytorch-fast-transformers`, against the installed torch 2.13.0) the CPU extensions "
    "compile without errors, but on the 2-core machine this was tried on the build did not "
    "finish within its 10-minute time box (hashing, aggregation and two clustering "
    "extensions done; sparse, local and causal products not reached). No adapter was "
    "written against an API that could not be run. performer-pytorch's causal mode tries to "
    "import this library's CUDA kernel and falls back to its own torch code without it.")
LIBRARY = Library(
    key="fast_transformers", title="pytorch-fast-transformers", module="fast_transformers",
    dist="pytorch-fast-transformers", extra="fast-transformers",
    dependencies=(),
    in_adapters_extra=False,
    minor=_MINOR,
    confirmations=(),
)
