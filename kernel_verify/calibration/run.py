"""The calibration run: its units (one group of checks on one target), the parts ``--part``
selects, the statistical properties each part calibrates, and the pool of processes that runs
the units."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from kernel_verify.calibration.blackbox import (
    blackbox_controls,
    blackbox_rows,
    frequency_rows,
    frequency_rows_controls,
    orthogonal_rows,
)
from kernel_verify.calibration.certify import Row, _builtin
from kernel_verify.calibration.convergence import (
    _attention_places,
    convergence_rows,
    convergence_targets,
)
from kernel_verify.calibration.estimators import (
    biased_rows,
    biased_targets,
    estimator_rows,
    estimator_targets,
    reference_mean_rows,
    reference_targets,
    sketch_law_rows,
    sketch_targets,
)
from kernel_verify.calibration.gradients import _state_places, state_gradient_targets
from kernel_verify.calibration.matrices import matrix_rows


@dataclass(frozen=True)
class Unit:
    """One group of checks on one target: ``fn(target, n, entropy, assumption_trials)``."""

    part: str
    target: str
    fn: Callable[[str, int, int, int], list[Row]]

    @property
    def id(self) -> str:
        return f"{self.part}:{self.fn.__name__.removesuffix('_rows')}:{self.target}"

    def run(self, n: int, entropy: int, assumption_trials: int) -> list[Row]:
        return self.fn(self.target, n, entropy, assumption_trials)


#: The groups of checks ``--part`` selects.
PARTS = ("matrices", "estimators", "reference_means", "convergence", "blackbox", "gradients",
         "gradient_assumptions", "same_precision")


def units(parts: Sequence[str] = PARTS) -> list[Unit]:
    """Every calibration unit of ``parts`` (the built-in targets, the calibrated maps, the
    black-box controls)."""
    from kernel_verify.properties.builtin import builtin_targets
    from kernel_verify.properties.protocol import RandomMatrixTarget

    out = []
    if "matrices" in parts:
        out += [Unit("matrices", t.name, matrix_rows) for t in builtin_targets()
                if isinstance(t, RandomMatrixTarget) and t.has("gaussian_rows")]
    if "estimators" in parts:
        out += [Unit("estimators", name, estimator_rows) for name in estimator_targets()]
        out += [Unit("estimators", name, biased_rows) for name in biased_targets()]
    if "reference_means" in parts:  # light (~20 s per 100 seeds): its own part, run apart
        out += [Unit("reference_means", name, reference_mean_rows)
                for name in reference_targets()]
        out += [Unit("reference_means", name, sketch_law_rows) for name in sketch_targets()]
    if "convergence" in parts:
        out += [Unit("convergence", name, convergence_rows) for name in convergence_targets()]
    if "blackbox" in parts:
        out += [Unit("blackbox", name, blackbox_rows) for name in blackbox_controls()]
        out.append(Unit("blackbox", "rff_pairs[orthogonal]", orthogonal_rows))
        out += [Unit("blackbox", name, frequency_rows) for name in frequency_rows_controls()]
    if "gradients" in parts:
        from kernel_verify.calibration.gradients import (
            GRADIENT_TARGET,
            blackbox_gradient_rows,
            fd_attention_rows,
            fd_attention_targets,
            fd_rows,
            fd_targets,
            gradient_rows,
        )

        out.append(Unit("gradients", GRADIENT_TARGET, gradient_rows))
        out.append(Unit("gradients", "grad_positive@blackbox", blackbox_gradient_rows))
        out += [Unit("gradients", name, fd_rows) for name in fd_targets()]
        out += [Unit("gradients", name, fd_attention_rows) for name in fd_attention_targets()]
    if "gradient_assumptions" in parts:  # light (~5 min at 2995 trials): its own part
        from kernel_verify.calibration.gradients import (
            low_precision_rows,
            low_precision_targets,
            state_gradient_rows,
            state_gradient_targets,
        )

        out += [Unit("gradient_assumptions", name, low_precision_rows)
                for name in low_precision_targets()]
        out += [Unit("gradient_assumptions", name, state_gradient_rows)
                for name in state_gradient_targets()]
    if "same_precision" in parts:  # ~3 min at 2995 trials: its own part (issue #44)
        from kernel_verify.calibration.same_precision import same_precision_rows, unit_names

        out += [Unit("same_precision", name, same_precision_rows) for name in unit_names()]
    return out


#: Every statistical property (``@pytest.mark.statistical``) → the prefix of the calibration
#: rows that run the check function it calls (tests/test_calibration.py keeps this complete and
#: checks that each prefix is produced by a unit).
CALIBRATED = {
    "test_random_matrices.py::test_rows_are_standard_gaussian": "random_matrices:",
    "test_feature_unbiased.py::test_unbiased_on_random_points": "feature_unbiased: mean_test",
    "test_feature_unbiased.py::test_unbiased_on_grid": "feature_unbiased: mean_test",
    "test_feature_unbiased.py::test_biased_mean_is_mean_kernel":
        "feature_unbiased (biased map): mean_test = mean_kernel",
    "test_feature_unbiased.py::test_biased_mean_is_reference_mean":
        "feature_unbiased (biased map): mean_test = reference mean",
    "test_feature_unbiased.py::test_bias_is_visible_where_theory_says_it_is_large":
        "feature_unbiased (biased map): bias visible",
    "test_feature_variance.py::test_sample_variance_matches_exact_variance":
        "feature_variance: variance_test = exact variance",
    "test_feature_variance.py::test_iid_variance_matches_exact_variance_by_fourth_moment":
        "feature_variance: variance_test by the exact μ₄",
    "test_attention_identities.py::test_error_to_softmax_attention_falls_as_m_grows":
        "attention: trial fails to halve the error",
    "test_blackbox_maps.py::test_unbiased_without_declared_family":
        "blackbox_maps: mean test, no family",
    "test_blackbox_maps.py::test_orthogonal_claim_has_the_orthogonal_variance":
        "blackbox_maps: orthogonal claim",
    "test_blackbox_maps.py::test_frequency_rows_have_the_declared_law":
        "blackbox_maps: frequency rows",
    "test_gradients.py::test_gradient_of_unbiased_estimator_is_unbiased":
        "gradients: median-of-means test",
    "test_sketch_law.py::test_sketch_norm_follows_its_chi_square_law":
        "feature_sketch_law: T = (m/‖x‖²)Σ‖Sx‖²",
}


def _run_unit(args: tuple[Unit, int, int, int]) -> tuple[list[Row], float]:
    unit, n, entropy, assumption_trials = args
    start = time.monotonic()
    return unit.run(n, entropy, assumption_trials), time.monotonic() - start


@contextmanager
def _threads_per_process(jobs: int):
    """The BLAS/OpenMP thread count of the worker processes: the CPUs shared out, at least one
    each (``OMP_NUM_THREADS`` etc. in the environment the spawned workers inherit, unless the
    caller set them). Without it every worker's torch and BLAS start one thread per CPU, and
    ``jobs`` workers on small tensors oversubscribe the machine (the gradients part, 2 workers on
    2 cores: 220 s with one thread each; unthrottled, 36 CPU-minutes and not finished)."""
    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    share = str(max(1, (os.cpu_count() or 1) // jobs))
    saved = {k: os.environ.get(k) for k in names}
    for k in names:
        os.environ.setdefault(k, share)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_units(todo: Sequence[Unit], n: int, entropy: int, assumption_trials: int,
              jobs: int = 1, *, per_unit: bool = False) -> list:
    """The rows of every unit, in order (``per_unit``: one list of rows per unit); ``jobs > 1``:
    in that many processes."""
    work = [(u, n, entropy, assumption_trials) for u in todo]
    if jobs <= 1 or len(work) <= 1:
        results = [_run_unit(w) for w in work]
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        # the slow units first, so that the two processes finish together
        order = sorted(range(len(work)),
                       key=lambda i: work[i][0].part not in ("estimators", "gradients"))
        with _threads_per_process(jobs), ProcessPoolExecutor(
                jobs, mp_context=mp.get_context("spawn")) as pool:
            done = dict(zip(order, pool.map(_run_unit, [work[i] for i in order]), strict=True))
        results = [done[i] for i in range(len(work))]
    if per_unit:
        return [rows for rows, _ in results]
    return [r for rows, _ in results for r in rows]


def not_run_here(parts) -> dict[str, list[str]]:
    """Per part, the cells its properties run in that this machine cannot (a backend not
    available here, e.g. CUDA without a GPU): listed in the report, never silently left out."""

    out: dict[str, list[str]] = {}
    if "convergence" in parts:
        for name in convergence_targets():
            for b, causal in _attention_places(_builtin(name), available=False):
                out.setdefault("convergence", []).append(
                    f"`{name}` on {b.library}:{b.device} {b.dtype}, "
                    f"{'causal' if causal else 'non-causal'}")
    if "gradient_assumptions" in parts:
        for name in state_gradient_targets():
            for b in _state_places(_builtin(name), available=False):
                out.setdefault("gradient_assumptions", []).append(
                    f"`{name}` forms state gradient on {b.library}:{b.device} {b.dtype}")
    return out
