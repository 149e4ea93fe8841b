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

from kernel_verify.properties.protocol import Target

targets: list[Target] = []
