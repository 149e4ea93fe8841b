"""The overview's section on the 2021–2026 estimators (kernel_verify/report/overview_recent.py):
one finding per family, and the set panel's numbers obey FAVOR#'s ordering (docs/math.md §20)."""

from __future__ import annotations

import numpy as np

from kernel_verify.report import overview_recent as ov
from kernel_verify.report.settings import QUICK


def test_one_finding_per_family_with_the_figure(tmp_path):
    cap, findings = ov.recent_figure(QUICK, tmp_path)
    assert (tmp_path / "overview_recent.png").stat().st_size > 0
    assert cap
    for family in ("SDERF", "ADERF", "random Maclaurin", "PolySketch", "implex"):
        assert sum(family in f for f in findings) == 1, (family, findings)


def test_set_panel_is_ordered_as_favor_sharp_claims():
    """Mean relative variance over the pairs of two sets (the panel's quantity): the fitted
    SDERF and ADERF are no worse than the fitted GERF, which is no worse than FAVOR+ (the mean of
    exp(log E h²) is not the objective FAVOR# minimises, so this is a measured fact on this grid,
    not a theorem)."""
    for scale in (0.25, 1.0, 3.0):
        xs, ys = ov._sets(8, scale)
        rel = {k: ov._rel_variances(p, xs, ys, ov.M).mean() for k, p in ov._fitted(xs, ys).items()}
        assert rel["sderf"] <= rel["gerf"] <= rel["positive"], rel
        assert rel["aderf"] <= rel["gerf"], rel
        assert np.isfinite(list(rel.values())).all()
