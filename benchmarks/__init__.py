"""asv benchmarks of kernel-verify (scipy-style; see ``docs/benchmarks.md``).

The backend is a parameter (``"numpy"``, ``"torch:cpu"``, ``"torch:cuda"``); parameter lists
hold only combinations that can run, and ``"torch:cuda"`` appears only on a machine with a GPU
(elsewhere :class:`benchmarks.devices.CudaDevice` skips once, with the reason; see
:mod:`benchmarks._common`), so a CUDA machine's results carry the CUDA series beside the CPU
ones under the same names. ``setup`` raises ``NotImplementedError`` where an optional library
is missing, which asv records as *skipped*. The workload of a parameter combination never
depends on the machine. CUDA timings synchronise inside the timed function. Inputs and parameter
draws come from seeded ``numpy.random.Generator`` objects in ``setup``; nothing is seeded
globally.

Modules: :mod:`benchmarks.feature_maps` (registry entries), :mod:`benchmarks.random_matrices`
(frequency-matrix draws), :mod:`benchmarks.attention` (exact vs linear vs log-space attention,
time and peak memory), :mod:`benchmarks.references` (mpmath reference cost),
:mod:`benchmarks.forms` (decode step and loop), :mod:`benchmarks.gated` (chunked gated forms),
:mod:`benchmarks.delta` (the delta rule), :mod:`benchmarks.fla_native` (fla's kernels, where
installed), :mod:`benchmarks.devices` (the CUDA axis), :mod:`benchmarks.suite` (the property
suite's own CI wall time per family); ``docs/benchmarks.md`` lists every class.
:mod:`benchmarks.ratios` is a script (the speed ratios of one run), not an asv module.
The pytest-benchmark files in ``benchmarks/pytest/`` (no ``__init__.py``: asv does not import
them, and the default ``pytest`` run, whose testpaths is ``properties/``, does not collect them)
are for quick local comparisons: ``pytest benchmarks/pytest``.
"""
