"""``attention_cases.credit_case``: an example whose derived bound ``2ε`` is at least the spread
of its values cannot fail a comparison for outputs inside the values' convex hull and is not
credited; a test case none of whose examples was credited records ``kv_uncredited`` (verdict
``not credited``), one credited example lifts it."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from kernel_verify.properties.attention_cases import credit_case, value_spread
from kernel_verify.verify.backends import AXIS

BACKEND = next(b for b in AXIS if b.id == "numpy-float32")
V = np.array([[[[0.0, 1.0], [2.0, -1.0]]]])  # spread per column: 2 and 2


def _request():
    return SimpleNamespace(node=SimpleNamespace(user_properties=[]))


def _uncredited(req):
    return [v for k, v in req.node.user_properties if k == "kv_uncredited"]


def test_value_spread_is_the_hull_diameter_per_column():
    assert value_spread(V) == 2.0
    assert value_spread(V[..., :1, :]) == 0.0  # one key: every normalised output equals it
    assert value_spread(V, 5 * V) == 10.0  # union: column 0 spans [0, 10], column 1 [-5, 5]


def test_all_void_examples_record_not_credited():
    req = _request()
    assert not credit_case(req, 3.0, (V,), BACKEND, 30.0, "causality")
    assert not credit_case(req, 2.0, (V,), BACKEND, 30.0, "causality")
    (reason,) = _uncredited(req)
    assert reason.startswith("not credited on numpy-float32 at input scale 30.0")
    assert "causality cannot fail" in reason


def test_one_credited_example_lifts_it_in_either_order():
    req = _request()
    credit_case(req, 3.0, (V,), BACKEND, 30.0, "causality")
    assert credit_case(req, 0.01, (V,), BACKEND, 0.5, "causality")
    assert _uncredited(req) == []
    credit_case(req, 3.0, (V,), BACKEND, 30.0, "causality")
    assert _uncredited(req) == []
