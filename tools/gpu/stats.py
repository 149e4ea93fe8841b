"""The regression rule of the prepared GPU run: a stated factor *and* an exact paired test.

Each round times both versions of a cell back to back, in an order drawn by a seeded coin, so
the paired ratio ``r_i = t_head,i / t_base,i`` sees the same machine state on both sides.  Under
the null hypothesis "no change" the two timings of a round are exchangeable once the order is
random, so ``P(r_i > 1) = 1/2`` exactly whatever the drift, the noise or its distribution: the
number of rounds with ``r_i > 1`` is Binomial(n, 1/2) and the one-sided sign test has the exact
false-alarm rate it states (no normality, no equal variances, no independence between rounds
beyond the coin).  A cell is

* ``regression`` iff the median paired ratio exceeds ``factor`` **and** the sign test of
  "head slower" rejects at ``alpha``;
* ``improvement`` iff the median ratio is below ``1/factor`` and the test of "head faster"
  rejects at ``alpha``;
* ``no change`` otherwise (the ratio and p-value are still reported).

The factor keeps a real but immaterial change from being flagged; the test keeps noise from being
flagged however large the factor of one unlucky round.  With ``n`` rounds the smallest attainable
p-value is ``2**-n``: :func:`min_rounds` gives the ``n`` a stated ``alpha`` needs.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

#: The default factor and level of ``make gpu`` (docs/benchmarks.md).
FACTOR = 1.2
ALPHA = 0.01


def sign_test_p(successes: int, n: int) -> float:
    """One-sided exact p-value ``P(Binomial(n, 1/2) >= successes)``."""
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, n={n}], got {successes}")
    return sum(math.comb(n, k) for k in range(successes, n + 1)) / 2.0**n


def min_rounds(alpha: float) -> int:
    """The fewest rounds whose all-one-way outcome has ``p = 2**-n <= alpha``."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    return math.ceil(math.log2(1.0 / alpha))


@dataclass(frozen=True)
class Comparison:
    """The verdict of one cell: paired ratios summarised, both one-sided p-values, the rule."""

    ratio: float  # median of the paired ratios head / base
    p_slower: float
    p_faster: float
    rounds: int
    verdict: str  # "regression" | "improvement" | "no change"


def compare(base: list[float], head: list[float], factor: float = FACTOR,
            alpha: float = ALPHA) -> Comparison:
    """Apply the rule above to paired samples (seconds per call, round ``i`` in both lists)."""
    if len(base) != len(head) or not base:
        raise ValueError(f"base and head must be paired samples of one length > 0, "
                         f"got {len(base)} and {len(head)}")
    if factor < 1:
        raise ValueError(f"factor must be >= 1, got {factor}")
    ratios = [h / b for b, h in zip(base, head, strict=True)]
    n = len(ratios)
    slower = sum(r > 1 for r in ratios)
    faster = sum(r < 1 for r in ratios)
    p_slower, p_faster = sign_test_p(slower, n), sign_test_p(faster, n)
    ratio = statistics.median(ratios)
    if ratio > factor and p_slower <= alpha:
        verdict = "regression"
    elif ratio < 1 / factor and p_faster <= alpha:
        verdict = "improvement"
    else:
        verdict = "no change"
    return Comparison(ratio, p_slower, p_faster, n, verdict)


def median_ci(samples: list[float], level: float = 0.99) -> tuple[float, float]:
    """A distribution-free interval for the median: order statistics ``(k, n+1-k)`` with
    ``P(Binomial(n, 1/2) < k) <= (1 - level)/2``; ``(min, max)`` when ``n`` is too small."""
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        raise ValueError("samples must not be empty")
    tail = (1 - level) / 2
    k = 0
    while k + 1 <= n // 2 and sum(math.comb(n, j) for j in range(k + 1)) / 2.0**n <= tail:
        k += 1
    return xs[max(k - 1, 0)], xs[min(n - k, n - 1)]
