"""``kernel-verify calibrate``: the false-alarm rate of every statistical or assumption-based
check, measured on correct code, with a verdict that holds at a stated confidence.

**Criterion.** A row counts ``k`` rejections in ``n`` independent trials of one check at one
level ``L``, on correct built-in implementations, with the check functions the properties call.
It is **ok** when the one-sided Clopper–Pearson upper bound of the rate at confidence
:data:`CONFIDENCE` (95 %) is ≤ ``L`` (:func:`upper_bound`): then, with 95 % confidence, the
check's false-alarm rate at ``L`` is within ``L``. With no rejection that takes
``n ≥ ln(0.05)/ln(1 − L)`` trials (:func:`trials_to_certify`: 14 at L = 0.2, 59 at 0.05, 2995 at
1e-3); a row with fewer trials can never be ok, so a run never reports ok from too few seeds.

**Checks with a derived threshold** (the α ladder): the row-law checks, ``mean_test`` and
``variance_test`` of the feature properties, the biased-map checks, the black-box mean tests,
the orthogonal-claim test and the convergence test's binomial threshold. Their threshold
``t(α)`` comes from a bound that holds for every α (Hoeffding, Bernstein, DKW, median of means,
the binomial tail), and the properties run them at ``α_op = α_total/N`` per assertion
(``properties/alpha.py``; ≈ 1e-5 in the ci profile), a rate no feasible seed count measures.
So the threshold function is calibrated across α: each trial's samples are tested at every level
of :data:`LADDER` that the trial count can certify (:func:`rungs`), and the row is ok only when
the bound is within the level at *every* rung. That the rate stays ≤ α below the lowest rung is
what the bounds' derivation states (no asymptotic step); the rows show that the implementation
(sample sizes, exact moments, ranges, thresholds) matches that derivation where it can be seen.

**Exact-level tests.** The row-law distribution tests use the DKW–Massart bound
``P(sup|F_n − F| > t) ≤ 2·exp(−2nt²)``, which is attained for a continuous ``F``: on correct code
their rate *is* the level (measured 0.19 at 0.2 on iid rows), so no number of trials brings an
upper bound below it. Their level is Massart's theorem (1990), not an assumption; their rows
(``Row.exact_level``) are ok when the measured rate is not shown to exceed the level (the
Clopper–Pearson lower bound ≤ the level at every rung), which still catches an implementation
whose threshold does not match the bound it cites. Since each such row's rate *is* its level, a
95 % bound per comparison would read NO in about one comparison in twenty on correct code; the
K comparisons of one part (exact-level rows × rungs) share a family-wise 1 % instead (Bonferroni:
each bound at confidence 1 − 0.01/K; :func:`kernel_verify.calibration.report.row_ok`).

**Model assumptions** (a stated level, measured at that level):

* convergence (``properties/checks/convergence.py``): a trial fails to halve its error with
  probability ≤ ``P0`` = 0.1; ``P0`` is the number the binomial threshold is computed from, so
  the row at level P0 *is* its operating level. Run in every cell the property runs in: every
  built-in attention claiming ``approximates_softmax``, every backend × dtype it accepts that is
  available here (CUDA cells are listed in the report as not run when there is no GPU), in the
  one mode the property runs (``modes(target)[0]``), with the property's rounding floor;
* the float64-accuracy noise level, the 64-ulp feature assumption of the deterministic identity,
  the per-draw family identities (``IDENTITY_LEVEL``), the fifth-derivative assumption of the
  gradients' finite differences (per map and attention target and mode,
  ``calibration.gradients.fd_rows``, ``fd_attention_rows``), the no-cancellation assumption of
  the low-precision ``∂L/∂q,k`` bound (per attention target, dtype and mode,
  ``calibration.gradients.low_precision_rows``) and the finite differences of the forms' state
  gradients (per target and backend, ``calibration.gradients.state_gradient_rows``): a
  deterministic threshold whose
  false-alarm rate per example is stated as :data:`ASSUMPTION_LEVEL` = 1e-3 and measured with
  at least :func:`trials_to_certify` (1e-3) = 2995 trials, with the *margin* (the largest
  statistic seen over the threshold, or the rate at a 1000× tighter level);
* the pilot variance of the black-box mean test without a declared family (``σ² ≤ 4·s²`` of a
  200-draw pilot): the end-to-end test is on the α ladder, and the assumption itself (the event
  ``σ² > 4·s²``, on controls with an exact variance) is measured and reported with its bound as
  what the test adds to α: it has **no** certified level at ``α_op`` (it would take ~3·10⁵
  trials per map), and the report says so.

Each row names the backend, dtype and mode it ran in. Seeds come from fresh OS entropy, recorded
in the report with the commit the code came from. The run is split into units (one group of
checks on one target) that run in ``min(2, CPU count)`` processes. Writes
``reports/calibration.md``, one section per part (:data:`PARTS`) with the command, commit, time
and entropy of the run that produced it: ``--part P …`` reruns only those parts and replaces their
sections, keeping the others with their own stamps (:func:`merge_report`); exit status 1 if any
row of the run is not ok.
"""

# The package, bottom to top: ``certify`` (bounds, ladder, Row, seeds of a trial) <- the parts
# (``matrices``, ``estimators``, ``convergence``, ``blackbox``, ``gradients``: one module a
# group of checks, each importing ``certify`` only) <- ``run`` (units, PARTS, the process pool)
# <- ``report`` (reports/calibration.md and :func:`calibrate`). tests/test_layering.py keeps it so.
# The names below are re-exported for the callers of the former single module.
from kernel_verify.calibration.blackbox import orthogonal_rows
from kernel_verify.calibration.certify import (
    ASSUMPTION_LEVEL,
    CONFIDENCE,
    DEFAULT_SEEDS,
    LADDER,
    MIN_SEEDS,
    NUMPY64,
    Row,
    _builtin,  # noqa: F401
    _seed,  # noqa: F401
    costly_trials,
    ladder_row,
    lower_bound,
    rungs,
    trials_to_certify,
    upper_bound,
)
from kernel_verify.calibration.convergence import (  # noqa: F401
    _attention_places,
    convergence_targets,
)
from kernel_verify.calibration.report import (
    SECTION,
    _verdicts,  # noqa: F401
    calibrate,
    merge_report,
    section,
    table,
)
from kernel_verify.calibration.run import CALIBRATED, PARTS, Unit, run_units, units

__all__ = [
    "ASSUMPTION_LEVEL",
    "CALIBRATED",
    "CONFIDENCE",
    "DEFAULT_SEEDS",
    "LADDER",
    "MIN_SEEDS",
    "NUMPY64",
    "PARTS",
    "SECTION",
    "Row",
    "Unit",
    "calibrate",
    "convergence_targets",
    "costly_trials",
    "ladder_row",
    "lower_bound",
    "merge_report",
    "orthogonal_rows",
    "run_units",
    "rungs",
    "section",
    "table",
    "trials_to_certify",
    "units",
    "upper_bound",
]
