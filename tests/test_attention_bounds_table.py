"""The table of smallest detectable defects in ``properties/attention_cases.py`` is what
:func:`detectable_defect` computes, and a defect of 15 % of ``max|v|`` is detectable at every
dtype and scale the attention identities sweep (the bound of one correct output never makes an
identity a mere finiteness test)."""

from __future__ import annotations

import re

import pytest

from kernel_verify.properties import attention_cases
from kernel_verify.properties.attention_cases import SWEPT_SCALES, detectable_defect
from kernel_verify.verify.backends import AXIS

CPU = {b.dtype: b for b in AXIS if b.device == "cpu"}


def _table() -> dict[str, list[float]]:
    rows = {}
    for line in attention_cases.__doc__.splitlines():
        m = re.match(r"^(float64|float32|float16|bfloat16)\s+(.*)$", line.strip())
        if m:
            rows[m.group(1)] = [float(x) for x in m.group(2).split()]
    return rows


def test_table_lists_every_cpu_dtype_and_swept_scale():
    table = _table()
    assert set(table) == set(CPU), (sorted(table), sorted(CPU))
    assert all(len(v) == len(SWEPT_SCALES) for v in table.values()), table


@pytest.mark.parametrize("dtype", sorted(CPU))
def test_table_matches_the_bound(dtype):
    for scale, stated in zip(SWEPT_SCALES, _table()[dtype], strict=True):
        got = detectable_defect(CPU[dtype], scale)
        assert f"{got:.0e}" == f"{stated:.0e}", (dtype, scale, got, stated)


@pytest.mark.parametrize("dtype", sorted(CPU))
def test_a_fifteen_percent_defect_is_detectable_everywhere(dtype):
    worst = max(detectable_defect(CPU[dtype], s) for s in SWEPT_SCALES)
    assert worst < 0.15, f"{dtype}: the identities miss defects below {worst:.2g}·max|v|"
