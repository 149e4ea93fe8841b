"""asv benchmarks of kernel-verify (scipy-style; see ``docs/benchmarks.md``).

Every class declares the same ``params`` on every machine: the backend is a parameter
(``"numpy"``, ``"torch:cpu"``, ``"torch:cuda"``) and ``setup`` raises ``NotImplementedError``
where a device (or a dtype on a backend) is missing, which asv records as *skipped*. The workload
of a parameter combination never depends on the machine. CUDA timings synchronise inside the
timed function. Inputs and parameter draws come from seeded ``numpy.random.Generator`` objects in
``setup``; nothing is seeded globally.

Modules: :mod:`benchmarks.feature_maps` (registry entries), :mod:`benchmarks.random_matrices`
(frequency-matrix draws), :mod:`benchmarks.attention` (exact vs linear vs log-space attention,
time and peak memory), :mod:`benchmarks.references` (mpmath reference cost).
The pytest-benchmark files in ``benchmarks/pytest/`` (no ``__init__.py``: asv does not import
them, and the default ``pytest`` run, whose testpaths is ``properties/``, does not collect them)
are for quick local comparisons: ``pytest benchmarks/pytest``.
"""
