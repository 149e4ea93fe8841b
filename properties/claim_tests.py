"""Which properties test each claim of the project's systems, or why none does.

Every system that is not a feature map has one descriptor
(:mod:`kernel_verify.impls.systems`) whose claims are words of the one vocabulary
``SYSTEM_CLAIMS``. Each claim a built-in system makes is accounted for here, in one of two ways:

* :data:`CLAIM_PROPERTIES`: the properties (``"<module stem without test_>::<function>"``) that
  test the word on every target of the suite holding it; the built-in target made from the
  descriptor carries the claim (``properties/builtin*.py``), so the suite runs them on it;
* :data:`SYSTEM_CLAIM_TESTS`, per system: for a claim no target of that system carries (a word
  outside its target kind's words, or a system without a target of its own), either the
  properties that test the project's own functions for it (a tuple), or why it is not tested
  (a string).

``tests/test_system_coverage.py`` fails for a claim with neither, naming the system, the claim
and this file; and for a name here that is not a property of the suite.
"""

from __future__ import annotations

from typing import Any

from kernel_verify.impls.systems import all_systems

__all__ = ["CLAIM_PROPERTIES", "GATED_CLAIM_PROPERTIES", "MODEL_CLAIM_PROPERTIES",
           "SYSTEM_CLAIM_TESTS", "claim_evidence", "claim_properties", "targets_of"]

#: Batch independence compared bitwise (properties/test_batch_independence.py).
_BITWISE = "batch_independence::test_batch_elements_alone_give_their_batch_outputs_bitwise"

#: Claim word -> the properties that test it on a target holding it.
CLAIM_PROPERTIES: dict[str, tuple[str, ...]] = {
    "causal": ("attention_identities::test_past_outputs_ignore_the_future",),
    "noncausal": ("attention_identities::test_permutation_equivariance",),
    "positive_weights": ("attention_identities::test_partition_of_unity",
                         "attention_identities::"
                         "test_outputs_are_convex_combinations_of_visible_values"),
    "approximates_softmax": (
        "attention_identities::test_error_to_softmax_attention_falls_as_m_grows",
        "attention_identities::test_large_scale_keeps_the_argmax_value"),
    "batch_independent": (_BITWISE,
                          "attention_identities::test_batch_elements_and_heads_are_independent"),
    "validates_input": ("attention_identities::test_non_finite_input_is_rejected",
                        "attention_identities::test_mismatched_shapes_are_rejected"),
    "state_bitwise": ("attention_forms::test_split_invariance",),
    "differentiable": ("gradients::test_gradcheck_float64_attention",
                       "gradients::test_forward_mode_matches_reverse_mode_attention"),
    "deterministic_backward": ("gradients::test_attention_backward_is_deterministic",),
    "half_in_float32": ("gradients::test_low_precision_gradients_near_float64",
                        "attention_identities::test_partition_of_unity"),
    "gaussian_rows": ("random_matrices::test_rows_are_standard_gaussian",),
    "orthogonal": ("random_matrices::test_rows_are_orthogonal_within_blocks",),
    "simplex": ("random_matrices::test_rows_form_a_regular_simplex_within_blocks",),
    "psd": ("psd_properties::test_nystrom_approximation_is_psd",),
    "schur_residual": ("psd_properties::test_nystrom_residual_is_psd",
                       "nystrom_properties::test_error_is_at_least_eckart_young"),
    "exact_on_landmarks": ("nystrom_properties::test_exact_on_landmark_columns",
                           "nystrom_properties::test_exact_when_every_point_is_a_landmark"),
    "optimal_rank": ("nystrom_properties::test_error_is_eckart_young_for_optimal_rank",),
    "best_rank_on_landmarks": (
        "nystrom_properties::test_truncation_is_the_best_rank_r_on_the_landmarks",),
}

#: Claim word -> the properties that test it on a gated target holding it
#: (:class:`~kernel_verify.properties.gated_protocol.GatedAttentionTarget`).
GATED_CLAIM_PROPERTIES: dict[str, tuple[str, ...]] = {
    "normalised": ("gated_forms::test_gated_forms_meet_the_exact_recurrence",),
    "state_bitwise": ("gated_forms::test_gated_split_invariance",),
    "differentiable": ("gated_forms::test_gated_gradients_with_respect_to_the_gates",
                       "gated_forms::test_gated_gradients_flow_through_the_state",
                       "gated_forms::test_gated_gradients_meet_the_float64_reference"),
    "half_in_float32": ("gated_forms::test_gated_forms_meet_the_exact_recurrence",),
    # β drawn in [0, 2] (uniform and at the edges 0, 1, 2) for every form against the exact
    # recurrence
    "negative_eigenvalues": ("gated_forms::test_gated_forms_meet_the_exact_recurrence",),
}


#: Claim word -> the properties that test it on a model target holding it
#: (:class:`~kernel_verify.properties.model_protocol.ModelTarget`). ``float64``: the tolerance
#: of every model property asserts that the float64 model computes the float32 model's function.
MODEL_CLAIM_PROPERTIES: dict[str, tuple[str, ...]] = {
    "float64": ("models::test_decode_equals_full_forward_at_every_split",
                "models::test_packed_sequences_equal_separate_runs"),
    "differentiable": ("models::test_gradients_through_the_cache_equal_full_forward",
                       "models::test_second_backward_through_the_cache"),
    "left_padding": ("models::test_left_padding_equals_unpadded",),
    "right_padding": ("models::test_right_padding_equals_unpadded",),
}


def claim_properties(kind: str) -> dict[str, tuple[str, ...]]:
    """Claim word -> the properties that test it on a built-in target of a descriptor of
    ``kind`` (:data:`GATED_CLAIM_PROPERTIES` for gated systems, :data:`MODEL_CLAIM_PROPERTIES`
    for models, else :data:`CLAIM_PROPERTIES`)."""
    return {"gated_attention": GATED_CLAIM_PROPERTIES,
            "model": MODEL_CLAIM_PROPERTIES}.get(kind, CLAIM_PROPERTIES)


_BATCH = ("attention_identities::test_batch_elements_and_heads_are_independent",)
_EXACT_ATTENTION = (
    "no property compares an attention target's outputs with an "
    "exact reference unless the target declares its features (the forms' exact recurrence); "
    "tests/test_attention.py compares the project's functions with the quadratic form")


def _through_map_targets(*claims: str) -> dict[str, tuple[str, ...]]:
    """Claims tested through the attention:<map> targets, which run feature_map_attention and
    through it linear_attention (maps without log features) or log_linear_attention (with).
    They do not claim batch_independent (the bitwise property would run on every map × backend
    × dtype); the batch property that runs on every attention target, claim or not, tests it."""
    return {claim: _BATCH if claim == "batch_independent" else CLAIM_PROPERTIES[claim]
            for claim in claims}


_MAP_TARGET_CLAIMS = ("causal", "noncausal", "batch_independent", "validates_input",
                      "differentiable", "deterministic_backward", "half_in_float32")
#: The claims every built-in gated system makes that no gated target carries: every form of
#: its targets is compared with the exact recurrence (causal by construction) within the
#: derived bound, and continued from a prefix's state.
_GATED_SYSTEM_CLAIMS: dict[str, tuple[str, ...] | str] = {
    "exact": ("gated_forms::test_gated_forms_meet_the_exact_recurrence",),
    "causal": ("gated_forms::test_gated_forms_meet_the_exact_recurrence",
               "gated_forms::test_gated_prefill_then_decode"),
    "validates_input": "no property of the suite feeds a gated target bad input; "
                       "tests/test_gated_impls.py::test_bad_gates_are_named checks that the "
                       "project's gated forms name bad log-gates (positive, NaN/Inf, wrong "
                       "shape or dtype)",
}

#: System -> claim -> the properties that test the project's functions for it, or why none does
#: (claims no target of the system carries; the module docstring).
SYSTEM_CLAIM_TESTS: dict[str, dict[str, tuple[str, ...] | str]] = {
    "exact_softmax": {
        "exact": "exact softmax attention is the reference "
                 "the approximates_softmax properties measure other targets against, and "
                 "tests/test_attention.py checks it against the quadratic form",
    },
    "hybrid_attention": {  # its targets are HybridAttentionTarget (properties/hybrid_protocol.py)
        "causal": ("hybrid_attention::test_hybrid_outputs_ignore_the_future",),
        "exact": ("hybrid_attention::test_hybrid_meets_the_exact_reference",),
        "differentiable": ("hybrid_attention::test_hybrid_gradients_match_finite_differences",),
        "half_in_float32": ("hybrid_attention::test_hybrid_meets_the_exact_reference",),
        "validates_input": "no property of the suite feeds a hybrid target bad input; "
                           "tests/test_fuzz_api.py checks that the project's hybrid functions "
                           "name every bad argument",
    },
    "linear_attention": {**_through_map_targets(*_MAP_TARGET_CLAIMS),
                         "exact": _EXACT_ATTENTION},
    "log_linear_attention": {
        **_through_map_targets(*_MAP_TARGET_CLAIMS, "positive_weights"),
        "exact": _EXACT_ATTENTION,
        "shift_free": (
            "attention_identities::test_stabiliser_shifts_cancel_in_log_space_attention",),
    },
    "feature_map_attention": _through_map_targets(*_MAP_TARGET_CLAIMS, "approximates_softmax"),
    "nystromformer": {
        "pinv_iteration": ("nystrom_properties::test_nystromformer_iteration_error_recursion",
                           "nystrom_properties::test_iterative_pinv_initialises_per_matrix"),
        "batch_independent": (_BITWISE,),  # on lowrank:nystromformer (builtin_lowrank.py)
    },
    "truncated_svd": {
        "psd": "the PSD property's rounding bound is built from the "
               "landmark block W of a Nyström approximation, and a truncated SVD has no "
               "landmarks; K_r = U_r Σ_r U_rᵀ of a PSD K is PSD by construction "
               "(tests/test_nystrom.py::test_schur_complement_and_eckart_young checks the "
               "project's function)",
    },
    "linformer": {"batch_independent": (_BITWISE,)},  # on lowrank:linformer
    **{s.name: _GATED_SYSTEM_CLAIMS for s in all_systems(kind="gated_attention")},
    # runs on every model target, claim or not (no model target takes the word)
    **{lm: {"batch_independent": ("models::test_batch_elements_are_independent",)}
       for lm in ("tiny_lm", "hybrid_lm")},
    **{kind: {"biased": "a negative claim (no Gaussian rows promised): the suite withholds the "
                        "unbiasedness properties of maps built on such rows instead of testing "
                        "the matrix (properties/unbiased_checks.py)"}
       for kind in ("orthogonal_fixed_norm", "sorf")},
}


def targets_of(system: str) -> list[Any]:
    """The built-in targets named for a system: ``<kind>:<system>`` or ``<system>[<variant>]``."""
    from kernel_verify.properties.builtin import builtin_targets
    from kernel_verify.properties.builtin_gated import builtin_gated_targets

    return [t for t in (*builtin_targets(), *builtin_gated_targets())
            if t.name.split(":", 1)[-1] == system or t.name.startswith(f"{system}[")]


def claim_evidence(system: Any) -> dict[str, tuple[str, ...] | str | None]:
    """Claim of a descriptor -> the properties that test it (a tuple: run on a built-in target
    that carries the claim, or on the project's function), why it is not tested (a string), or
    None where this file has neither (``tests/test_system_coverage.py`` fails then)."""
    from kernel_verify.properties.property_index import properties_by_kind

    declared = SYSTEM_CLAIM_TESTS.get(system.name, {})
    by_kind = properties_by_kind()
    targets = targets_of(system.name)
    evidence: dict[str, tuple[str, ...] | str | None] = {}
    for claim in sorted(system.claims):
        wanted = claim_properties(system.kind).get(claim, ())
        names = {p.split("::")[-1] for p in wanted}
        carried = any(t.has(claim) and names
                      and names <= by_kind.get(type(t).__name__, frozenset()) for t in targets)
        evidence[claim] = declared.get(claim, wanted if carried else None)
    return evidence
