"""The prepared GPU run (``make gpu``): a correctness gate, then the benchmarks that matter on a
GPU, the previous commit alternated with the current one cell by cell in one process.

Modules, one job each: :mod:`.plan` (the cells and their sizes per device), :mod:`.versions`
(two code versions loaded side by side in one interpreter), :mod:`.timing` (CUDA-event or
wall-clock samples, warm-up, the budget), :mod:`.stats` (the paired sign test and the verdict
rule), :mod:`.gate` (the CUDA cases of the guarding properties, in process),
:mod:`.asv_results` (results in asv's format), :mod:`.summary` (the Markdown summary),
:mod:`.run` (the command). ``docs/benchmarks.md`` ("The prepared GPU run") explains the design.
"""
