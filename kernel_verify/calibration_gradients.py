"""Former home of the gradient calibration rows: now :mod:`kernel_verify.calibration.gradients`
(and :func:`kernel_verify.calibration.run.not_run_here`). Re-exported for callers of the old path
during the refactor of issue #28; new code imports the package's modules."""

from __future__ import annotations

from kernel_verify.calibration.gradients import (  # noqa: F401
    CHECK,
    FD_CHECK,
    GRADIENT_TARGET,
    LOW_CHECK,
    LOW_DTYPES,
    STATE_CHECK,
    WHERE,
    fd_attention_rows,
    fd_attention_targets,
    fd_map_trials,
    fd_rows,
    fd_targets,
    gradient_rows,
    gradient_trials,
    low_precision_cells,
    low_precision_rows,
    low_precision_targets,
    state_gradient_rows,
    state_gradient_targets,
)
from kernel_verify.calibration.run import not_run_here  # noqa: F401
