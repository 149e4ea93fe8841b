"""The bottom of the calibration: the Clopper–Pearson bounds, the α ladder, one row of a
calibration table, the seed of a trial (the criterion: :mod:`kernel_verify.calibration`).

Every part (:mod:`.matrices`, :mod:`.estimators`, :mod:`.convergence`, :mod:`.blackbox`,
:mod:`.gradients`) imports this module and nothing else of the package.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

from kernel_verify.verify import seeds

#: Fewest fresh seeds a calibration may use (``--seeds``); the default is :data:`DEFAULT_SEEDS`.
MIN_SEEDS = 20
DEFAULT_SEEDS = 100
#: One-sided confidence of every upper bound.
CONFIDENCE = 0.95
#: Levels at which the derived-threshold checks are calibrated (the rungs a trial count certifies).
LADDER = (0.2, 0.1, 0.05, 0.02, 0.01)
#: Stated per-example false-alarm rate of the deterministic model-assumption checks.
ASSUMPTION_LEVEL = 1e-3
NUMPY64 = "numpy float64"


def upper_bound(k: int, n: int, conf: float = CONFIDENCE) -> float:
    """One-sided Clopper–Pearson upper bound of a rate seen ``k`` times in ``n`` trials: it is
    ≥ the true rate with probability ≥ ``conf`` (exact, the Beta(k + 1, n − k) quantile)."""
    if not (isinstance(n, int | np.integer) and n >= 1):
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not (isinstance(k, int | np.integer) and 0 <= k <= n):
        raise ValueError(f"k must be an integer in [0, n={n}], got {k!r}")
    if not 0 < conf < 1:
        raise ValueError(f"conf must be in (0, 1), got {conf!r}")
    return 1.0 if k == n else float(sps.beta.ppf(conf, k + 1, n - k))


def lower_bound(k: int, n: int, conf: float = CONFIDENCE) -> float:
    """One-sided Clopper–Pearson lower bound of a rate seen ``k`` times in ``n`` trials (the
    Beta(k, n − k + 1) quantile at ``1 − conf``; 0 when ``k = 0``)."""
    upper_bound(k, n, conf)  # the same argument checks
    return 0.0 if k == 0 else float(sps.beta.ppf(1 - conf, k, n - k + 1))


def trials_to_certify(level: float, conf: float = CONFIDENCE) -> int:
    """The fewest trials whose upper bound can be ≤ ``level``: with 0 rejections the bound is
    ``1 − (1 − conf)^(1/n)``, ≤ level iff ``n ≥ ln(1 − conf)/ln(1 − level)``."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    n = math.ceil(math.log(1 - conf) / math.log1p(-level))
    while upper_bound(0, n, conf) > level:  # guard the rounding of the closed form
        n += 1
    return n


def rungs(n: int) -> tuple[float, ...]:
    """The levels of :data:`LADDER` that ``n`` trials certify with room for a few rejections
    (``n ≥ 3·trials_to_certify(level)``: a conservative check whose rate is a fraction of the
    level is then ok in most runs, not only when it never rejects); at least the loosest level,
    so that a small run still exercises every check (its rows are then not ok unless no trial
    rejects and ``n ≥ trials_to_certify``)."""
    return tuple(a for a in LADDER if 3 * trials_to_certify(a) <= n) or LADDER[:1]


def costly_trials(n: int) -> int:
    """Trials of a check that costs seconds per trial (fourth-moment quadrature, 2000-draw or
    orthogonal samples): a third of ``n``, at least :data:`MIN_SEEDS`; ``n`` itself in a small
    (test) run below MIN_SEEDS."""
    return max(MIN_SEEDS, n // 3) if n >= MIN_SEEDS else n


@dataclass(frozen=True)
class Row:
    """One check on one target in one place, at one or more levels: ``rejections[i]`` of
    ``trials`` at ``levels[i]``. ``levels`` empty: a measured rate with no stated level (reported,
    never ok)."""

    check: str
    target: str
    where: str
    trials: int
    levels: tuple[float, ...]
    rejections: tuple[int, ...]
    operating: str
    margin: str = ""
    unstated: int = field(default=-1)  # rejections of a measurement without a level
    #: A test whose bound is attained (DKW–Massart): its rate *equals* the level on correct
    #: code, so no trial count brings an upper bound below it. Its level is a theorem; the row is
    #: ok when the rate is not shown to exceed the level (lower bound ≤ level at every rung).
    exact_level: bool = False

    @property
    def uppers(self) -> tuple[float, ...]:
        return tuple(upper_bound(k, self.trials) for k in self.rejections)

    @property
    def lowers(self) -> tuple[float, ...]:
        return tuple(lower_bound(k, self.trials) for k in self.rejections)

    @property
    def ok(self) -> bool:
        """:meth:`ok_at` the per-row :data:`CONFIDENCE` (a row judged on its own)."""
        return self.ok_at(CONFIDENCE)

    def ok_at(self, exact_confidence: float) -> bool:
        """Every rung's 95 % upper bound is at most its level; an exact-level row instead: as
        many trials as certifying the level would take, and no rung's rate shown above its
        level at ``exact_confidence`` (:func:`exact_confidence` of the row's part, its
        family-wise share; a row without levels is never ok)."""
        if not self.levels:
            return False
        if self.exact_level:
            return self.trials >= trials_to_certify(min(self.levels)) and all(
                lower_bound(k, self.trials, exact_confidence) <= a
                for k, a in zip(self.rejections, self.levels, strict=True))
        return all(b <= a for b, a in zip(self.uppers, self.levels, strict=True))


#: The family-wise rate at which the exact-level rows of one part may read NO on correct code:
#: their comparisons (rows × rungs) share it (Bonferroni), since each row's rate *is* its level
#: and a 95 % lower bound per comparison would read NO in about one comparison in twenty.
EXACT_FAMILY_ALPHA = 0.01


def exact_confidence(rows: Sequence[Row]) -> float:
    """The confidence of each exact-level comparison among ``rows`` (one part):
    ``1 − EXACT_FAMILY_ALPHA/K`` for its ``K`` comparisons (exact-level rows × their rungs), so
    that all ``K`` lower bounds hold together with probability ≥ ``1 − EXACT_FAMILY_ALPHA``."""
    k = sum(len(r.levels) for r in rows if r.exact_level)
    return 1 - EXACT_FAMILY_ALPHA / max(k, 1)


def ladder_row(check: str, target: str, where: str, trials: int, counts: dict[float, int],
               operating: str = "α_op = α_total/N per assertion (derived for every α)",
               margin: str = "", exact_level: bool = False) -> Row:
    levels = tuple(sorted(counts, reverse=True))
    return Row(check, target, where, trials, levels, tuple(counts[a] for a in levels), operating,
               margin, exact_level=exact_level)


def _seed(entropy: int, *key: object) -> int:
    """One child seed of the run's entropy for ``key`` (verify/seeds.py)."""
    return seeds.child_seeds(entropy, 1, "calibrate", *key)[0]


def _builtin(name: str):
    from kernel_verify.properties.builtin import builtin_targets

    (target,) = [t for t in builtin_targets() if t.name == name]
    return target
