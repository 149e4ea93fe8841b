"""``kernel-verify calibrate``: the false-alarm rate of the statistical properties, measured.

Each statistical property has a threshold derived to give a false-alarm rate ≤ α on correct
code. This command runs *the same check functions the properties call* on correct built-in
implementations, over ``--seeds`` fresh seeds at a loose ``--alpha`` (0.05 by default, so that
rejections are frequent enough to count), and reports the observed rejection rate with a 95 %
Clopper–Pearson interval (:func:`verify.stats.rejection_rate_interval`). A check is **ok** when
the interval's lower end is ≤ α (the observed rate is not significantly above α); the bounds
are conservative (Hoeffding, Bernstein, DKW, median of means), so observed rates are usually far
below α.

Checks calibrated:

* ``properties/test_random_matrices.py``: the nine row-law checks (:func:`row_law_checks`) on
  every built-in construction claiming Gaussian rows (d = m = 4, the property's 1000 draws);
* ``properties/test_attention_identities.py``: the model assumption of the convergence property,
  ``P(error at m=1024 ≥ ½·error at m=16) ≤ P0`` per trial, on every built-in attention claiming
  ``approximates_softmax`` (the observed per-trial rate with its interval, against P0), and the
  resulting rejection rate of the binomial test at ``--alpha``;
* ``properties/test_blackbox_maps.py`` and the black-box mean tests
  (:mod:`verify.calibration_blackbox`), on correct maps wrapped black-box.

Writes ``reports/calibration.md``. Seeds come from fresh OS entropy, recorded in the report.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from kernel_verify.verify.paths import reports_dir
from kernel_verify.verify.stats import rejection_rate_interval


@dataclass(frozen=True)
class Row:
    check: str
    target: str
    trials: int
    rejections: int
    nominal: float

    @property
    def rate(self) -> float:
        return self.rejections / self.trials

    @property
    def interval(self) -> tuple[float, float]:
        return rejection_rate_interval(self.rejections, self.trials)

    @property
    def ok(self) -> bool:
        return self.interval[0] <= self.nominal


def _matrix_rows(n_seeds: int, alpha: float, entropy: int) -> list[Row]:
    from kernel_verify.verify.checks.row_law import draw_stack, orthonormal_pair, row_law_checks
    from kernel_verify.verify.thirdparty.builtin import builtin_targets
    from kernel_verify.verify.thirdparty.protocol import RandomMatrixTarget

    d = m = 4
    rows = []
    targets = [t for t in builtin_targets()
               if isinstance(t, RandomMatrixTarget) and t.has("gaussian_rows")]
    for target in targets:
        counts: dict[str, int] = {}
        for i in range(n_seeds):
            seed = int(np.random.SeedSequence([entropy, i]).generate_state(1)[0])
            w = draw_stack(target, seed, m, d)
            z1, z2 = orthonormal_pair(seed, d)
            for r in row_law_checks(w, z1, z2, alpha=alpha, seed=seed, name=target.name):
                label = r.label.split(": ", 1)[1]
                counts[label] = counts.get(label, 0) + (not r.ok)
        rows += [Row(f"random_matrices: {label}", target.name, n_seeds, k, alpha)
                 for label, k in counts.items()]
    return rows


def _convergence_rows(n_seeds: int, alpha: float, entropy: int) -> list[Row]:
    from kernel_verify.verify.checks.convergence import (
        CONV_SEEDS,
        P0,
        convergence_failures,
        convergence_threshold,
    )
    from kernel_verify.verify.thirdparty.builtin import builtin_targets
    from kernel_verify.verify.thirdparty.protocol import AttentionTarget

    rows = []
    targets = [t for t in builtin_targets()
               if isinstance(t, AttentionTarget) and t.has("approximates_softmax")]
    k_star = convergence_threshold(CONV_SEEDS, alpha)
    for target in targets:
        trials = failures = rejections = 0
        blocks = max(1, n_seeds // 10)
        for i in range(blocks):
            seed = int(np.random.SeedSequence([entropy, 1, i]).generate_state(1)[0]) % 2**31
            d = 2 + i % 5
            f = convergence_failures(target, seed, d)
            trials += CONV_SEEDS
            failures += f
            rejections += f >= k_star
        rows.append(Row("attention: trial fails to halve the error (model assumption P0)",
                        target.name, trials, failures, P0))
        rows.append(Row(f"attention: convergence test rejects (k* = {k_star} of {CONV_SEEDS})",
                        target.name, blocks, rejections, alpha))
    return rows


def _table(rows: list[Row]) -> list[str]:
    lines = ["| check | target | trials | rejections | observed | 95 % CP interval | nominal "
             "| ok |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lo, hi = r.interval
        lines.append(f"| {r.check} | `{r.target}` | {r.trials} | {r.rejections} | {r.rate:.4f} "
                     f"| [{lo:.4f}, {hi:.4f}] | {r.nominal:g} | {'yes' if r.ok else 'NO'} |")
    return lines


def run_calibration(args: argparse.Namespace) -> int:
    """``kernel-verify calibrate [--seeds N] [--alpha A]``; exit 1 if any check is not ok."""
    n_seeds, alpha = int(args.seeds), float(args.alpha)
    if n_seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {n_seeds}")
    if not 0 < alpha < 1:
        raise ValueError(f"--alpha must be in (0, 1), got {alpha}")
    entropy = int(np.random.SeedSequence().entropy) % 2**63
    start = time.monotonic()
    parts = getattr(args, "parts", None) or ["matrices", "convergence", "blackbox"]
    rows = []
    if "matrices" in parts:
        rows += _matrix_rows(n_seeds, alpha, entropy)
    if "convergence" in parts:
        rows += _convergence_rows(n_seeds, alpha, entropy)
    if "blackbox" in parts:
        from kernel_verify.verify.calibration_blackbox import blackbox_rows

        rows += blackbox_rows(n_seeds, alpha, entropy, Row)
    seconds = time.monotonic() - start
    bad = [r for r in rows if not r.ok]
    text = [
        "# Calibration of the statistical properties",
        "",
        f"`kernel-verify calibrate --seeds {n_seeds} --alpha {alpha} --part {' '.join(parts)}`: "
        f"{seconds:.0f} s, entropy "
        f"{entropy} (seeds are `SeedSequence([entropy, i])`). Each check runs at level α on "
        "correct implementations; *ok* means the Clopper–Pearson interval's lower end is ≤ the "
        "nominal rate (α, or the model assumption P0).",
        "",
        *_table(rows),
        "",
        f"**{len(rows) - len(bad)}/{len(rows)} ok**",
    ]
    suffix = "" if len(parts) == 3 else "_" + "_".join(parts)  # a partial run keeps the full one
    out = reports_dir() / f"calibration{suffix}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(text) + "\n")
    print("\n".join(text))
    print(f"\n(written to {out})")
    return 1 if bad else 0
