"""Every field of every adapter-protocol target is validated at construction (issue 13): a bad
adapter fails at once, naming the target, the field and the problem, with the valid choices."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kernel_verify.impls.registry import get
from kernel_verify.properties.protocol import (
    AttentionTarget,
    FeatureMapTarget,
    KernelApproxTarget,
    RandomMatrixTarget,
)


def _draw(rng, d, m, config):
    return {"W": rng.standard_normal((m, d))}


def _fn(x, p, c):
    return np.exp(x @ p["W"].T)


GOOD_FM = {"name": "t", "kernel": "softmax", "claims": frozenset({"unbiased"}),
           "draw": _draw, "numpy_fn": _fn, "formula": "softmax_positive"}


def _by_dimension(d):  # the one-argument form: kernel_params takes (config, d)
    return {}


def _fm(**changes):
    return FeatureMapTarget(**{**GOOD_FM, **changes})


def test_good_targets_construct() -> None:
    assert _fm().white_box
    assert get("softmax_positive[iid]").formula == "softmax_positive"
    assert isinstance(get("softmax_positive[iid]"), FeatureMapTarget)
    AttentionTarget("a", lambda q, k, v, **kw: v, frozenset({"causal"}))
    RandomMatrixTarget("r", lambda rng, m, d: rng.standard_normal((m, d)), frozenset())
    KernelApproxTarget("k", lambda x, kern, rng: (kern(x, x), np.arange(2)), frozenset(), rank=2)


FM_CASES = [
    ({"kernel": "sofmax"}, ValueError, ["kernel", "'sofmax'", "softmax", "gaussian"]),
    ({"kernel": 3}, TypeError, ["kernel", "str"]),
    ({"formula": "softmax_postive"}, ValueError, ["formula", "'softmax_postive'",
                                                  "softmax_positive"]),
    ({"m": 0}, ValueError, ["m", ">= 1", "0"]),
    ({"m": -4}, ValueError, ["m", ">= 1"]),
    ({"m": 2.5}, TypeError, ["m", "int", "float"]),
    ({"m": True}, TypeError, ["m", "int", "bool"]),
    ({"numpy_fn": 42}, TypeError, ["numpy_fn", "callable", "int"]),
    ({"draw": "W"}, TypeError, ["draw", "callable"]),
    ({"sample_fn": 1.0}, TypeError, ["sample_fn", "callable"]),
    ({"claims": frozenset({"biased", "unbiased"})}, ValueError, ["biased", "unbiased"]),
    ({"claims": "unbiased"}, TypeError, ["claims", "set", "'unbiased'"]),
    ({"claims": frozenset({"unbaised"})}, ValueError, ["claims", "unbaised", "unbiased"]),
    ({"claims": frozenset({1})}, TypeError, ["claims", "strings"]),
    ({"matrix": "orthogonl"}, ValueError, ["matrix", "orthogonal"]),
    ({"mean_kernel": "nope"}, ValueError, ["mean_kernel", "'nope'"]),
    ({"config": [("sigma", 1)]}, TypeError, ["config", "mapping"]),
    ({"kernel_params": 3}, TypeError, ["kernel_params", "mapping"]),
    ({"attention_prescale": "yes"}, TypeError, ["attention_prescale", "bool"]),
    ({"kernel_params": _by_dimension}, TypeError, ["kernel_params", "(config, d)"]),
    ({"min_m": 0}, ValueError, ["min_m", ">= 1"]),
    ({"family": ""}, TypeError, ["family", "non-empty str"]),
    ({"name": ""}, TypeError, ["name", "non-empty"]),
    ({"draw": None, "sample_fn": None}, ValueError, ["white-box", "sample_fn"]),
    # a declared formula is evaluated with the target's config: a missing constant is named
    # here, not met as a KeyError inside a property module's collection
    ({"kernel": "gaussian", "formula": "rff_pairs", "config": {}}, ValueError,
     ["config", "'sigma'", "rff_pairs", "config={'sigma'"]),
]


def _case_id(changes: dict) -> str:
    """A test id independent of hash randomisation (sets are printed sorted), so that every
    pytest-xdist worker collects the same ids."""
    def show(v: object) -> str:
        if callable(v):
            return getattr(v, "__name__", type(v).__name__)
        if isinstance(v, set | frozenset):
            return "{" + ", ".join(sorted(map(repr, v))) + "}"
        return repr(v)
    return ", ".join(f"{k}={show(v)}" for k, v in changes.items())


@pytest.mark.parametrize(("changes", "exc", "words"), FM_CASES,
                         ids=[_case_id(c) for c, _, _ in FM_CASES])
def test_feature_map_target_fields(changes, exc, words) -> None:
    with pytest.raises(exc) as info:
        _fm(**changes)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


OTHER_CASES = [
    (lambda: AttentionTarget("a", None, frozenset({"causal"})), TypeError,
     ["attention", "callable", "None"]),
    (lambda: AttentionTarget("a", lambda *a, **k: 0, "causal"), TypeError, ["claims", "set"]),
    (lambda: AttentionTarget("a", lambda *a, **k: 0, frozenset({"casual"})), ValueError,
     ["claims", "casual", "causal"]),
    (lambda: RandomMatrixTarget("r", np.eye(3), frozenset()), TypeError, ["draw", "callable"]),
    (lambda: RandomMatrixTarget("r", lambda *a: 0, frozenset({"gaussian"})), ValueError,
     ["claims", "gaussian_rows"]),
    (lambda: KernelApproxTarget("k", lambda *a: 0, frozenset(), rank=0), ValueError,
     ["rank", ">= 1", "0"]),
    (lambda: KernelApproxTarget("k", lambda *a: 0, frozenset(), rank=2.0), TypeError,
     ["rank", "int"]),
    (lambda: KernelApproxTarget("k", "nystrom", frozenset()), TypeError,
     ["approximate", "callable"]),
    (lambda: KernelApproxTarget(None, lambda *a: 0, frozenset()), TypeError, ["name"]),
]


@pytest.mark.parametrize(("make", "exc", "words"), OTHER_CASES,
                         ids=[str(i) for i in range(len(OTHER_CASES))])
def test_other_targets_fields(make, exc, words) -> None:
    with pytest.raises(exc) as info:
        make()
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_replace_revalidates() -> None:
    """``dataclasses.replace`` (used by the mutant catalogue) goes through the same checks."""
    with pytest.raises(ValueError, match="m must be >= 1"):
        dataclasses.replace(_fm(), m=0)


def _att(**changes):
    return AttentionTarget(**{"name": "a", "attention": lambda q, k, v, **kw: v,
                              "claims": frozenset({"causal"}), **changes})


def _form(*a, **k):
    return None, None


FORM_CASES = [
    ({"layout": "BTDH"}, ValueError, ["layout", "'BTDH'", "BHTD", "BTHD"]),
    ({"layout": 1}, TypeError, ["layout", "str"]),
    ({"step": 3}, TypeError, ["step", "callable"]),
    ({"varlen": "yes"}, TypeError, ["varlen", "callable"]),
    ({"chunked": _form, "chunk_sizes": (0,)}, ValueError, ["chunk_sizes", ">= 1"]),
    ({"chunked": _form, "chunk_sizes": ()}, ValueError, ["chunk_sizes", "empty"]),
    ({"chunked": _form, "chunk_sizes": 64}, TypeError, ["chunk_sizes", "tuple"]),
    ({"state_sums": _form}, ValueError, ["state_sums", "no form"]),
    ({"claims": frozenset({"causal", "state_bitwise"}), "step": _form}, ValueError,
     ["state_bitwise", "stateful or chunked"]),
]


@pytest.mark.parametrize(("changes", "exc", "words"), FORM_CASES,
                         ids=[str(i) for i in range(len(FORM_CASES))])
def test_attention_forms_fields(changes, exc, words) -> None:
    """The forms protocol (docs/math.md §13): optional callables, a known layout, chunk sizes
    a non-empty tuple of sizes ≥ 1, state extras only with a form that has a state."""
    with pytest.raises(exc) as info:
        _att(**changes)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_attention_forms_offered_and_layout() -> None:
    t = _att(layout="BTHD", chunked=_form, chunk_sizes=(16, 64), step=_form,
             claims=frozenset({"causal", "state_bitwise"}))
    assert t.offers("chunked") and t.offers("step") and not t.offers("varlen")
    with pytest.raises(ValueError, match="form must be one of"):
        t.offers("recurrent")
    x = np.zeros((2, 3, 5, 4))
    assert t.to_layout(x).shape == (2, 5, 3, 4)
    assert _att().to_layout(x) is x
    # chunk sizes without a chunked form: the kernel's internal blocks (the layouts cross them)
    assert _att(chunk_sizes=(64,)).chunk_sizes == (64,)
    # __call__ converts to the target's layout and back.
    seen = []
    bthd = _att(layout="BTHD", attention=lambda q, k, v, **kw: seen.append(q.shape) or v)
    v = np.arange(2 * 3 * 5 * 4, dtype=float).reshape(2, 3, 5, 4)
    np.testing.assert_array_equal(bthd(x, x, v, causal=True), v)
    assert seen == [(2, 5, 3, 4)]
