"""A target that accepts no float64 still gets its low-precision gradients checked: against the
float64 gradient of the formula it declares (its ``features``; exact softmax attention for
``feature_count = 0``), with the same bounds and same-precision criterion
(properties/test_gradients.py::test_low_precision_gradients_near_float64)."""

from __future__ import annotations

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from kernel_verify.calibration.power import _base  # noqa: E402
from kernel_verify.mutants.attention import scale_gradient  # noqa: E402
from kernel_verify.properties.test_gradients import (  # noqa: E402
    test_low_precision_gradients_near_float64 as low_precision,
)


def _only(dtypes, dk=1.0):
    base = _base()

    def attention(q, k, v, **kw):
        return base.attention(q, scale_gradient(k, dk) if dk != 1.0 else k, v, **kw)

    return replace(base, name=f"only_{'_'.join(dtypes)}", dtypes=dtypes, attention=attention)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_correct_target_without_float64_passes(dtype):
    low_precision(_only((dtype,)), dtype, record_property=lambda *a: None)


@pytest.mark.parametrize(("dtype", "dk"), [("float32", 1.001), ("float16", 1.02)])
def test_a_scaled_key_gradient_without_float64_fails(dtype, dk):
    with pytest.raises(AssertionError, match="the declared formula in float64"):
        low_precision(_only((dtype,), dk), dtype, record_property=lambda *a: None)


def test_no_formula_and_no_float64_skips_with_the_reason():
    t = replace(_only(("float32",)), features=None, feature_count=None)
    with pytest.raises(pytest.skip.Exception, match="no formula"):
        low_precision(t, "float32", record_property=lambda *a: None)
