"""Every registered feature map gets the attention identities or a stated reason (issue #18):
:mod:`kernel_verify.properties.builtin_attention`."""

from __future__ import annotations

from kernel_verify.impls.registry import all_maps, get
from kernel_verify.properties.builtin import builtin_targets
from kernel_verify.properties.builtin_attention import (
    DEFAULT_COVERAGE,
    EXAMPLES,
    FULL_COVERAGE,
    attention_not_meaningful,
    example_budget,
)


def _attention_targets() -> dict:
    return {t.name.removeprefix("attention:"): t for t in builtin_targets()
            if t.name.startswith("attention:") and t.name != "attention:exact_softmax"}


def test_every_map_has_an_attention_target_or_a_reason():
    targets = _attention_targets()
    for entry in all_maps():
        reason = attention_not_meaningful(entry)
        assert (entry.name in targets) == (reason is None), (entry.name, reason)
        assert reason is None or len(reason) > 40
    # the declarations decide: every positive map qualifies, so does the even-order Taylor
    # kernel; odd-order Taylor, signed and nonnegative maps do not
    assert {e.name for e in all_maps() if e.has("positive")} <= set(targets)
    assert {"taylor2", "taylor2_compressed"} <= set(targets)
    for name in ("taylor3", "rff_pairs[iid]", "softmax_trig[iid]", "relu_features[iid]",
                 "cosformer"):
        assert name not in targets, name
    assert "positional" in attention_not_meaningful(get("cosformer"))


def test_coverage_and_claims_come_from_the_declarations():
    targets = _attention_targets()
    for name, t in targets.items():
        dtypes, libraries = FULL_COVERAGE.get(name, DEFAULT_COVERAGE)
        assert (t.dtypes, t.backends) == (dtypes, libraries), name
        entry = get(name)
        assert t.has("approximates_softmax") == (entry.kernel == "softmax"
                                                 and entry.has("unbiased")), name
        assert t.has("positive_weights") and t.has("causal") and t.has("noncausal")
        # the reduced Hypothesis budget (ci profiles) only outside the hand-picked coverage
        assert example_budget(t) == (None if name in FULL_COVERAGE else EXAMPLES), name
    # the hand-picked maps keep their coverage (torch and NumPy, every dtype for SM⁺ iid)
    assert targets["softmax_positive[iid]"].dtypes == ("float64", "float32", "float16",
                                                       "bfloat16")
    assert not targets["softmax_positive[orthogonal_fixed_norm]"].has("approximates_softmax")
