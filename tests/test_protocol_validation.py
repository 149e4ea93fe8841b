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


# --- Declarations checked when a target is made (issue 30) ------------------------------------
import ast  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

import kernel_verify.properties as properties_pkg  # noqa: E402
from kernel_verify.properties.property_index import properties_by_kind  # noqa: E402


@pytest.mark.parametrize("make", [
    lambda known: _att(known_failures=known),
    lambda known: _fm(known_failures=known),
    lambda known: RandomMatrixTarget("m", lambda rng, m, d: rng.standard_normal((m, d)),
                                     frozenset(), known_failures=known),
    lambda known: KernelApproxTarget("a", lambda X, kernel, rng: (X, X), frozenset(),
                                     known_failures=known),
], ids=["attention", "feature_map", "random_matrix", "kernel_approx"])
def test_known_failures_must_name_properties_of_the_kind(make) -> None:
    with pytest.raises(ValueError, match="known_failures names 'test_partiton_of_unity', which "
                                         "is not a property of the suite"):
        make({"test_partiton_of_unity": "typo"})


def test_known_failures_typo_suggests_and_other_kind_is_named() -> None:
    with pytest.raises(ValueError, match="did you mean 'test_partition_of_unity'"):
        _att(known_failures={"test_partition_of_unit": "typo"})
    with pytest.raises(ValueError, match="is a property of feature-map targets, not of "
                                         "attention targets"):
        _att(known_failures={"test_features_match_reference": "wrong kind"})
    with pytest.raises(ValueError, match="is a property of attention targets, not of "
                                         "feature-map targets"):
        _fm(known_failures={"test_partition_of_unity": "wrong kind"})
    # a real property of the kind is accepted, also through dataclasses.replace
    t = _att(known_failures={"test_partition_of_unity": "declared"})
    assert dataclasses.replace(t, name="u").known_failures == t.known_failures


def test_the_property_index_covers_every_property_over_targets() -> None:
    """Derived, not listed: every ``test_…`` function of properties/test_*.py parametrised over a
    ``target`` is found under a kind, and each kind's properties include ones known to be of it."""
    index = properties_by_kind()
    indexed = set().union(*index.values())
    missed = []
    for path in Path(properties_pkg.__file__).parent.glob("test_*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and any(
                    a.arg in ("target", "first") for a in node.args.args):
                if node.name not in indexed:
                    missed.append(f"{path.name}::{node.name}")
    assert not missed, missed
    assert "test_partition_of_unity" in index["AttentionTarget"]
    assert "test_features_match_reference" in index["FeatureMapTarget"]
    assert "test_rows_are_orthogonal_within_blocks" in index["RandomMatrixTarget"]
    assert "test_nystrom_approximation_is_psd" in index["KernelApproxTarget"]
    assert "test_partition_of_unity" not in index["FeatureMapTarget"]


def _blackbox(m: int, returned: int, claims=frozenset({"unbiased", "positive"}), **kw):
    def sample_fn(x, seed):
        w = np.random.default_rng(seed).standard_normal((returned, x.shape[-1]))
        return np.exp(x @ w.T - 0.5 * (x * x).sum(-1, keepdims=True)) / np.sqrt(returned)

    return FeatureMapTarget("bb", "softmax", claims, m=m, sample_fn=sample_fn, **kw)


def test_declared_m_must_match_what_sample_fn_returns() -> None:
    """The issue's case (m = 8 declared, 9 features returned), at the first call; m = the count
    or ``output_dim``/the declared formula's count is accepted."""
    x = np.random.default_rng(0).standard_normal((3, 4))
    with pytest.raises(ValueError, match=r"target 'bb': m does not match sample_fn: m = 8 means "
                                         r"8 features, but sample_fn returned 9"):
        _blackbox(8, 9).sample_fn(x, 0)
    with pytest.raises(ValueError, match="formula 'softmax_positive' with d=4, m=8 means 8"):
        _blackbox(8, 9, formula="softmax_positive").sample_fn(x, 0)
    assert _blackbox(8, 8).sample_fn(x, 0).shape == (3, 8)
    assert _blackbox(8, 16, output_dim=lambda d, m: 2 * m).sample_fn(x, 0).shape == (3, 16)
    pairs = get("rff_pairs[iid]")

    def rff(x, seed):
        params = pairs.draw(np.random.default_rng(seed), x.shape[-1], 8, pairs.config)
        return pairs.numpy_fn(x, params, pairs.config)

    t = FeatureMapTarget("rff", "gaussian", frozenset({"unbiased"}), m=8, sample_fn=rff,
                         formula="rff_pairs", config=dict(pairs.config))
    assert t.sample_fn(x, 0).shape == (3, 16)  # 2m features: the formula says so
    with pytest.raises(ValueError, match="m does not match"):
        dataclasses.replace(t, m=16).sample_fn(x, 0)  # replace re-checks against the new m


def test_differentiable_needs_a_torch_path() -> None:
    with pytest.raises(ValueError, match="claims has 'differentiable' but the map has no "
                                         "torch_fn"):
        _fm(claims=frozenset({"unbiased", "differentiable"}))
    bb = _blackbox(8, 8, claims=frozenset({"unbiased", "differentiable"}))
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(TypeError, match=r"target 'bb': sample_fn failed on a torch tensor .*must "
                                        r"take torch tensors"):
        bb.sample_fn(x, 0)
    with pytest.raises(TypeError, match="sample_fn returned ndarray for a torch tensor"):
        dataclasses.replace(bb, sample_fn=lambda x, s: np.ones((3, 8))).sample_fn(x, 0)
    with pytest.raises(ValueError, match="has 'differentiable' but backends \\('numpy',\\) has "
                                         "no 'torch'"):
        _att(claims=frozenset({"causal", "differentiable"}))


def _stateful(q, k, v, *, initial_state=None, seed=0):
    return v, (np.zeros((q.shape[0], 2)),)


@pytest.mark.parametrize(("form", "fn", "message"), [
    ("stateful", lambda q, k, v, **kw: v, "stateful must return a pair \\(out, final_state\\), "
                                          "got one array"),
    ("chunked", lambda q, k, v, **kw: (v, (v,), 3), "chunked must return a pair \\(out, "
                                                    "final_state\\), got a tuple of length 3"),
    ("varlen", lambda q, k, v, **kw: (v, v), "varlen must return its state as a tuple of "
                                             "arrays, got an array"),
    ("step", lambda s, q, k, v, **kw: (v, (v,)), "step must return \\(state, o_t\\), got \\(array,"
                                                 " tuple\\): \\(o_t, state\\) swapped"),
    ("step", lambda s, q, k, v, **kw: ((v,), None), "step must return \\(state, o_t\\) with o_t "
                                                    "an array, got NoneType"),
])
def test_forms_must_return_what_the_protocol_says(form, fn, message) -> None:
    """A form returning only the output, or a step returning (o, state), fails at its first
    call with the field's name (it was "not enough values to unpack" inside a property)."""
    t = _att(claims=frozenset({"causal"}), **{form: fn})
    x = np.zeros((1, 1, 3, 2))
    args = (None, x[..., 0, :], x[..., 0, :], x[..., 0, :]) if form == "step" else (x, x, x)
    with pytest.raises(TypeError, match=f"target 'a': {message}"):
        getattr(t, form)(*args)
    good = _att(claims=frozenset({"causal"}), stateful=_stateful)
    out, state = good.stateful(x, x, x)
    assert out is x and state[0].shape == (1, 2)
    assert dataclasses.replace(good, name="u").stateful(x, x, x)[0] is x


# --- A declared shape contract (issue 30) ---------------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kernel_verify.properties.shape_contract import contract_note, refusal  # noqa: E402


@pytest.mark.parametrize(("changes", "exc", "words"), [
    ({"dv_equals_d": 1}, TypeError, ["dv_equals_d", "bool"]),
    ({"length_multiple_of": 0}, ValueError, ["length_multiple_of", ">= 1"]),
    ({"min_length": 2.5}, TypeError, ["min_length", "int"]),
])
def test_shape_contract_fields(changes, exc, words) -> None:
    with pytest.raises(exc) as info:
        _att(**changes)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_shape_contract_rules_and_note() -> None:
    t = _att(dv_equals_d=True, length_multiple_of=4, min_length=8, self_attention_only=True)
    assert refusal(t, t=8, d=3, dv=3) is None
    assert "d_v = 2 ≠ d = 3" in refusal(t, t=8, d=3, dv=2)
    assert "T = 6 is not a multiple of 4" in refusal(t, t=6, d=3, dv=3)
    assert "T = 4 < 8" in refusal(t, t=4, d=3, dv=3)
    note = contract_note(t)
    for part in ("d_v ≠ d", "T not a multiple of 4", "T < 8", "k ≠ q"):
        assert part in note
    assert contract_note(_att()) is None


def test_the_suite_calls_a_target_only_inside_its_contract() -> None:
    """A kernel needing d_v = d (a RuntimeError otherwise, as a library's would): declared, the
    properties' draws outside the contract are rejected before the call, never failures; the
    call inside it runs. Undeclared, the same draws reach the kernel and raise."""
    seen = []

    def kernel(q, k, v, *, causal, seed=0):
        if v.shape[-1] != q.shape[-1]:
            raise RuntimeError("shape mismatch inside the kernel")
        seen.append(v.shape[-1])
        return v

    declared = _att(attention=kernel, dv_equals_d=True)

    @settings(max_examples=30, database=None, derandomize=True)
    @given(d=st.integers(1, 3), dv=st.integers(1, 3))
    def prop(d, dv):
        x = np.zeros((1, 1, 2, d))
        declared(x, x, np.zeros((1, 1, 2, dv)), causal=True)

    prop()
    assert seen and set(seen) <= {1, 2, 3}
    with pytest.raises(RuntimeError, match="inside the kernel"):
        _att(attention=kernel)(np.zeros((1, 1, 2, 3)), np.zeros((1, 1, 2, 3)),
                               np.zeros((1, 1, 2, 2)), causal=True)
    with pytest.raises(pytest.skip.Exception, match="d_v = 2 ≠ d = 3"):  # outside Hypothesis
        declared(np.zeros((1, 1, 2, 3)), np.zeros((1, 1, 2, 3)), np.zeros((1, 1, 2, 2)),
                 causal=True)


def test_a_gated_form_without_final_states_may_return_none_for_them():
    """parallel, varlen and padded may return ``(out, None)`` (fla's parallel kernels' varlen
    does: the packed property then judges the outputs alone); stateful and chunked may not."""
    import numpy as np

    from kernel_verify.properties.builtin_gated import builtin_gated_targets
    from kernel_verify.properties.gated_protocol import _check_gated_result

    t = builtin_gated_targets()[0]
    out = np.zeros((1, 1, 2, 2))
    for form in ("parallel", "varlen", "padded"):
        _check_gated_result(t, form, (out, None))
    for form in ("stateful", "chunked"):
        with pytest.raises(TypeError, match=f"{form} must return its state as a tuple"):
            _check_gated_result(t, form, (out, None))
