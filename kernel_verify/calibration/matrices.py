"""Calibration part ``matrices``: the row-law checks of the random-matrix constructions."""

from __future__ import annotations

from kernel_verify.calibration.certify import (
    NUMPY64,
    Row,
    _builtin,
    _seed,
    ladder_row,
    rungs,
)


def matrix_rows(name: str, n: int, entropy: int, assumption_trials: int) -> list[Row]:
    """The nine row-law checks (``properties/test_random_matrices.py``) on one built-in
    construction claiming Gaussian rows (d = m = 4, the property's draws), at every rung."""
    from kernel_verify.properties.checks.row_law import draw_stack, orthonormal_pair, row_law_checks

    target = _builtin(name)
    d = m = 4
    levels = rungs(n)
    counts: dict[str, dict[float, int]] = {}
    exact: set[str] = set()
    for i in range(n):
        seed = _seed(entropy, "row_law", name, i)
        w = draw_stack(target, seed, m, d)
        z1, z2 = orthonormal_pair(seed, d)
        for a in levels:
            for r in row_law_checks(w, z1, z2, alpha=a, seed=seed, name=target.name):
                label = r.label.split(": ", 1)[1]
                counts.setdefault(label, dict.fromkeys(levels, 0))[a] += not r.ok
                if "DKW" in r.test:
                    exact.add(label)
    # The distribution tests use DKW–Massart, P(sup|F_n − F| > t) ≤ 2·exp(−2nt²), which is
    # attained for continuous F: exact-level rows (Row.exact_level).
    return [ladder_row(f"random_matrices: {label}", name, NUMPY64, n, c,
                       exact_level=label in exact)
            for label, c in counts.items()]
