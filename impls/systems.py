"""Every system this project implements that is not a feature map: one descriptor per system.

Feature maps are described by :class:`kernel_verify.impls.descriptor.FeatureMapTarget` (the
registry, :mod:`kernel_verify.impls.registry`). Every other system is described here, once, by a
descriptor of its kind: :class:`AttentionSystem`, :class:`GatedSystem`,
:class:`ApproximationSystem`, :class:`MatrixSystem` or :class:`ModelSystem`. A descriptor holds
what the system is, the kernel (or attention) it targets, what it claims (words of the one
vocabulary :data:`SYSTEM_CLAIMS`), the docs/math.md section with its formulas, its source, and
the functions that implement it on each backend (``"module:function"`` in the
:mod:`kernel_verify` namespace, resolved only on demand).
The same descriptor is read by ``kernel-verify list``, by the property suite's built-in targets
(``properties/builtin*.py`` take their name and claims from it), by the report and by the
mutants, so no second list of claims exists anywhere.

==========================  ===========================  ======================================
kind                        descriptor                   systems
==========================  ===========================  ======================================
``feature_map``             ``FeatureMapTarget``         every ``impls.registry.all_maps`` entry
``kernel_approximation``    :class:`ApproximationSystem` landmark Nyström, Nyströmformer,
                                                         truncated SVD, Linformer
``attention``               :class:`AttentionSystem`     exact softmax, linear, log-space linear,
                                                         hybrid, feature-map attention
``gated_attention``         :class:`GatedSystem`         causal linear attention with a decay or
                                                         gate per head, token or key dimension
``random_matrix``           :class:`MatrixSystem`        every construction of
                                                         ``impls.random_matrices.MATRICES``
``model``                   :class:`ModelSystem`         the tiny causal LM (impls/torch/tiny_lm)
                                                         and its hybrid (hybrid_lm)
==========================  ===========================  ======================================

**One claim vocabulary.** :data:`SYSTEM_CLAIMS` gives every claim word one meaning, for the
project's systems and for the third-party targets of the property suite alike: the suite's
target kinds accept the words of :data:`TARGET_CLAIM_WORDS` (their vocabularies,
``properties.protocol.ATTENTION_CLAIMS`` and its neighbours, are selections of this one). A
descriptor's kind limits the words it may use (:data:`KIND_CLAIM_WORDS`); which property tests
each word, or why none does, is the suite's business
(``properties/claim_tests.py``; ``tests/test_system_coverage.py`` fails for a claim with neither).

**A new system** adds one descriptor to the tuple of its kind below (``_APPROXIMATIONS``,
``_ATTENTION``, ``_GATED``, ``_MODELS``) and, for the suite, a built-in target made from it
(``properties/builtin*.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kernel_verify.impls.random_matrices import (
    MATRICES,
    ORTHOGONAL_MATRICES,
    SIMPLEX_MATRICES,
    UNBIASED_MATRICES,
)

__all__ = [
    "GATE_INPUTS",
    "GATE_KINDS",
    "KINDS",
    "KIND_CLAIM_WORDS",
    "SYSTEM_CLAIMS",
    "TARGET_CLAIM_WORDS",
    "TRANSITIONS",
    "ApproximationSystem",
    "AttentionSystem",
    "GatedSystem",
    "MatrixSystem",
    "ModelSystem",
    "SystemDescriptor",
    "all_systems",
    "gated_system",
    "get_system",
]

#: Kinds of registered systems, in the order ``kernel-verify list`` shows them.
KINDS: dict[str, str] = {
    "feature_map": "a feature map φ with φ(x)ᵀφ(y) ≈ k(x, y) (impls.registry)",
    "kernel_approximation": "a low-rank approximation of a Gram matrix or of attention",
    "attention": "an attention function (q, k, v) -> outputs",
    "gated_attention": "a causal linear attention with a state updated by a transition (a "
                       "decay, a gate, the delta rule and its relatives) (q, k, v, log-gates, "
                       "β, …) -> (outputs, state)",
    "random_matrix": "a construction of the (m, d) frequency matrix of random features",
    "model": "a causal language model (token ids -> logits) with a cache or recurrent state",
}

#: The one claim vocabulary of the systems that are not feature maps and of the suite's
#: attention, random-matrix and kernel-approximation targets: each word has one meaning.
SYSTEM_CLAIMS: dict[str, str] = {
    # attention
    "causal": "supports causal=True (row i depends only on keys/values ≤ i)",
    "noncausal": "supports causal=False (permutation equivariant in the keys)",
    "positive_weights": "outputs are convex combinations of values (partition of unity)",
    "exact": "computes its target exactly (up to rounding)",
    "shift_free": "log-space evaluation without a max-shift stabiliser",
    "approximates_softmax": "converges to softmax attention as its feature count m (or its "
                            "landmark count) grows",
    "batch_independent": "no batch element changes another's output",
    "validates_input": "NaN/Inf and mismatched shapes raise ValueError, and so do the bad values "
                       "of the kind's own arguments (positive log-gates, a negative window); "
                       "without this claim, how the target treats bad input is reported as an "
                       "input-policy note, not a failure",
    "state_bitwise": "continuing from a final state equals the full run bitwise (split "
                     "invariance, outputs and state; without it: within the derived bound)",
    "differentiable": "called with torch tensors that require grad (backends include 'torch'), "
                      "the output is differentiable by autograd w.r.t. q, k and v, and the "
                      "log-gates and initial state where the kind takes them "
                      "(properties/test_gradients.py, test_gated_forms.py, "
                      "test_hybrid_attention.py); a model's logits w.r.t. parameters(model) "
                      "through forward, prefill and step (gradients through the cache: "
                      "properties/test_models.py)",
    "normalised": "outputs are divided by φ(q_t)ᵀz_t, z_t the (gated) sum of key features",
    "deterministic_backward": "two backward passes on the same inputs give bitwise equal "
                              "gradients",
    "half_in_float32": "float16/bfloat16 inputs are computed in float32 and the output is "
                       "rounded once to the input dtype (a state returned stays float32): "
                       "the half-precision bounds assume that "
                       "(without it every operation may round to the half type, the identities' "
                       "bounds are void there and those cases are reported as not credited)",
    # models
    "float64": "build(..., dtype='float64') gives the float32 model's weights in float64 and "
               "every call runs in float64 (tolerances are then derived from the float64 run)",
    "left_padding": "padded() takes masks with the valid positions a suffix of each row",
    "right_padding": "padded() takes masks with the valid positions a prefix of each row",
    # random matrices
    "gaussian_rows": "every row is marginally N(0, I_d)",
    "orthogonal": "rows are exactly orthogonal within blocks of d",
    "simplex": "directions within blocks of d are the vertices of a regular simplex "
               "(pairwise cosine exactly -1/(d-1))",
    "biased": "rows are not Gaussian: estimators built on them are biased",
    # kernel approximations
    "psd": "K̃ is positive semi-definite for a PSD kernel",
    "schur_residual": "K − K̃ is PSD and rank K̃ ≤ |S| (Nyström's K̃ = C W⁺ Cᵀ: its residual is "
                      "the Schur complement of W)",
    "exact_on_landmarks": "K̃[:, S] equals K[:, S]",
    "optimal_rank": "the smallest 2-norm error of any rank-r matrix (Eckart–Young)",
    "best_rank_on_landmarks": "K̃[S, S] is the best rank-r approximation of W = K[S, S] "
                              "(a truncated Nyström K̃ = C W_r⁺ Cᵀ, r = rank: ‖W − K̃[S, S]‖₂ "
                              "= λ_(r+1)(W))",
    "pinv_iteration": "Z ≈ A⁺ by the order-7 iteration with E_(j+1) = ¼E_j³(3I + E_j)",
    # delta rule
    "negative_eigenvalues": "β may lie in [0, 2] (not only [0, 1]): the transition I − βkkᵀ has "
                            "an eigenvalue 1 − β in [−1, 0) along a unit key",
}

#: The words each kind of descriptor may claim.
KIND_CLAIM_WORDS: dict[str, frozenset[str]] = {
    "attention": frozenset({"causal", "noncausal", "positive_weights", "exact", "shift_free",
                            "approximates_softmax", "batch_independent", "validates_input",
                            "state_bitwise", "differentiable", "deterministic_backward",
                            "half_in_float32", "normalised"}),
    "random_matrix": frozenset({"gaussian_rows", "orthogonal", "simplex", "biased"}),
    "model": frozenset({"float64", "differentiable", "left_padding", "right_padding",
                        "batch_independent"}),
    "gated_attention": frozenset({"causal", "exact", "normalised", "differentiable",
                                  "state_bitwise", "validates_input", "half_in_float32",
                                  "negative_eigenvalues"}),
    "kernel_approximation": frozenset({"psd", "schur_residual", "exact_on_landmarks",
                                       "optimal_rank", "best_rank_on_landmarks",
                                       "pinv_iteration", "batch_independent"}),
}

#: The words each kind of the suite's targets accepts (``properties.protocol``: AttentionTarget,
#: RandomMatrixTarget, KernelApproxTarget), a selection of :data:`SYSTEM_CLAIMS` (the gated and
#: hybrid attention targets select theirs from it too: ``properties/gated_protocol.py``,
#: ``properties/hybrid_protocol.py``). A descriptor
#: claim outside its target kind's words is tested some other way or not at all, and says which
#: (``properties/claim_tests.py``).
TARGET_CLAIM_WORDS: dict[str, tuple[str, ...]] = {
    "attention": ("causal", "noncausal", "positive_weights", "approximates_softmax",
                  "batch_independent", "validates_input", "state_bitwise", "differentiable",
                  "deterministic_backward", "half_in_float32"),
    "gated_attention": ("normalised", "differentiable", "state_bitwise", "validates_input",
                        "half_in_float32", "negative_eigenvalues"),
    "random_matrix": ("gaussian_rows", "orthogonal", "simplex"),
    "kernel_approximation": ("psd", "schur_residual", "exact_on_landmarks", "optimal_rank",
                             "best_rank_on_landmarks"),
    "model": ("float64", "differentiable", "left_padding", "right_padding"),
}

#: What every attention function of this project offers besides its own claims (the torch code
#: is plain autograd; the argument checks of impls.validation run first).
_ATTENTION_COMMON = frozenset({"validates_input", "differentiable", "deterministic_backward",
                               "half_in_float32"})


@dataclass(frozen=True)
class SystemDescriptor:
    """What the descriptors of every kind hold (use the kind's class: :class:`AttentionSystem`,
    :class:`ApproximationSystem`, :class:`MatrixSystem`)."""

    kind: ClassVar[str] = ""
    name: str
    family: str
    kernel: str
    claims: frozenset[str]
    section: str
    source: str
    description: str
    #: backend name -> ``"module:function"`` (module relative to ``kernel_verify``)
    functions: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KIND_CLAIM_WORDS:
            raise TypeError(f"system {self.name!r}: describe it with the class of its kind "
                            "(AttentionSystem, GatedSystem, ApproximationSystem, MatrixSystem, "
                            "ModelSystem)")
        object.__setattr__(self, "claims", frozenset(self.claims))
        unknown = set(self.claims) - set(SYSTEM_CLAIMS)
        if unknown:
            raise ValueError(f"system {self.name!r}: unknown claims {sorted(unknown)}; known: "
                             f"{sorted(SYSTEM_CLAIMS)}")
        foreign = set(self.claims) - KIND_CLAIM_WORDS[self.kind]
        if foreign:
            raise ValueError(f"system {self.name!r}: claims {sorted(foreign)} are not claims of "
                             f"a {self.kind} system ({sorted(KIND_CLAIM_WORDS[self.kind])})")

    def has(self, claim: str) -> bool:
        return claim in self.claims

    def target_claims(self) -> frozenset[str]:
        """The claims the suite's target of this kind takes (:data:`TARGET_CLAIM_WORDS`); the
        rest are accounted for in ``properties/claim_tests.py``."""
        return self.claims & frozenset(TARGET_CLAIM_WORDS[self.kind])

    def resolve(self, backend: str) -> Callable[..., Any]:
        """The function implementing this system on ``backend`` (imported on demand)."""
        module, _, function = self.functions[backend].partition(":")
        return getattr(importlib.import_module(f"kernel_verify.{module}"), function)

    def describe(self) -> dict[str, Any]:
        """JSON-ready description (``kernel-verify list --json``)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "family": self.family,
            "kernel": self.kernel,
            "claims": sorted(self.claims),
            "math_section": self.section,
            "functions": dict(self.functions),
            "description": self.description,
            "source": self.source,
        }


@dataclass(frozen=True)
class AttentionSystem(SystemDescriptor):
    """An attention function ``(q, k, v, causal=...) -> outputs``."""

    kind: ClassVar[str] = "attention"


#: How a gated system's log-gates are shaped (``properties/gated_protocol.py``: the same words).
GATE_KINDS: dict[str, str] = {
    "scalar_fixed": "one decay per head, the same for every token (RetNet): g (H,)",
    "scalar": "one decay per token and head (Mamba2/SSD, simple GLA): g (B, H, T)",
    "key_dim": "one gate per token, head and key dimension (GLA): g (B, H, T, d)",
    "none": "no gate (DeltaNet): the forms take g=None",
}

#: How a gated system is given its gates (``properties/gated_protocol.py``'s ``gate_input``):
#: name -> (the log-gate ``g`` it computes from the raw input ``a`` the forms take in place of
#: ``g``, the per-head parameters passed by keyword). Shapes: ``A_log (H,)``; ``dt_bias (H,)``
#: for scalar gates, ``(H, d)`` for key-dimension gates.
GATE_INPUTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "log": ("the log-gates g ≤ 0 themselves", ()),
    "mamba": ("g = −exp(A_log)·softplus(a + dt_bias) (Mamba2, Gated DeltaNet, KDA)",
              ("A_log", "dt_bias")),
    "bounded": ("g = lower·σ(a), lower = gate_lower < 0 (RWKV-7: lower = −e^(−1/2))", ()),
    "bounded_affine": ("g = lower·σ(exp(A_log)·(a + dt_bias)) (KDA's lower-bounded gate)",
                       ("A_log", "dt_bias")),
}

#: The state transitions of one recurrence ``S_t = A_t S_(t−1) + w_t v_tᵀ`` (docs/math.md §23):
#: name -> (the transition, the per-token inputs besides q, k, v it takes, the gate kinds it
#: accepts). Every one is diagonal plus rank one, ``A_t = Diag(e^(λ_t)) + x_t y_tᵀ``.
TRANSITIONS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "decay": ("A = Diag(e^g) (no gate: identity), w = k: plain, RetNet, Mamba2/SSD, GLA",
              ("g",), ("scalar_fixed", "scalar", "key_dim")),
    "delta": ("A = I − βkkᵀ, w = βk: DeltaNet", ("beta",), ("none",)),
    "gated_delta": ("A = e^g(I − βkkᵀ), w = βk (the decay before the error term): Gated DeltaNet",
                    ("g", "beta"), ("scalar", "key_dim")),
    "kda": ("A = (I − βkkᵀ)Diag(e^g), w = βk: Kimi Delta Attention", ("g", "beta"),
            ("key_dim",)),
    "comba": ("A = e^g I − βkpᵀ, w = βk: Comba", ("g", "beta", "p"), ("scalar",)),
    "rwkv7": ("A = Diag(e^g) + b aᵀ, w = k: RWKV-7", ("g", "a", "b"), ("key_dim",)),
}


@dataclass(frozen=True)
class GatedSystem(SystemDescriptor):
    """A gated causal linear attention ``(q, k, v, g) -> (outputs, state)`` with log-gates
    ``g ≤ 0`` shaped as ``gates`` says (:data:`GATE_KINDS`)."""

    kind: ClassVar[str] = "gated_attention"
    gates: str = "scalar"
    #: the state transition (:data:`TRANSITIONS`)
    transition: str = "decay"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gates not in GATE_KINDS:
            raise ValueError(f"system {self.name!r}: gates must be one of {sorted(GATE_KINDS)}, "
                             f"got {self.gates!r}")
        if self.transition not in TRANSITIONS:
            raise ValueError(f"system {self.name!r}: transition must be one of "
                             f"{sorted(TRANSITIONS)}, got {self.transition!r}")
        if self.gates not in TRANSITIONS[self.transition][2]:
            raise ValueError(f"system {self.name!r}: transition {self.transition!r} takes gates "
                             f"{TRANSITIONS[self.transition][2]}, got {self.gates!r}")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "gates": self.gates, "transition": self.transition}


@dataclass(frozen=True)
class ApproximationSystem(SystemDescriptor):
    """A low-rank approximation of a Gram matrix or of attention."""

    kind: ClassVar[str] = "kernel_approximation"


@dataclass(frozen=True)
class MatrixSystem(SystemDescriptor):
    """A construction of the ``(m, d)`` frequency matrix of random features."""

    kind: ClassVar[str] = "random_matrix"


@dataclass(frozen=True)
class ModelSystem(SystemDescriptor):
    """A causal language model: ``functions`` name its factory ``build(seed, *, init_scale,
    dtype) -> model`` per backend."""

    kind: ClassVar[str] = "model"


def _both(module: str, function: str) -> dict[str, str]:
    return {
        "numpy": f"impls.numpy.{module}:{function}",
        "torch": f"impls.torch.{module}:{function}",
    }


_APPROXIMATIONS = (
    ApproximationSystem(
        "nystrom", "nystrom", "any PSD kernel (its Gram matrix)",
        frozenset({"psd", "schur_residual", "exact_on_landmarks"}), "§8",
        "Williams & Seeger 2001; docs/math.md §8",
        "landmark Nyström K̃ = C W⁺ Cᵀ, C = K[:, S], W = K[S, S] (eigen-cutoff pseudo-inverse)",
        _both("nystrom", "nystrom_from_gram"),
    ),
    ApproximationSystem(
        "nystromformer", "nystrom", "softmax attention",
        frozenset({"pinv_iteration", "batch_independent"}), "§8",
        "Xiong et al. 2021 (Nyströmformer); docs/math.md §8",
        "sm(Q K̃ᵀ)·Z·(sm(Q̃ Kᵀ)V), segment-mean landmarks, Z ≈ A_S⁺ by the iterative pinv; "
        "bidirectional, and not permutation equivariant in the keys (the landmarks are means "
        "of consecutive segments), so it does not claim noncausal",
        _both("nystrom", "nystromformer_attention"),
    ),
    ApproximationSystem(
        "truncated_svd", "lowrank", "any matrix (rank r)",
        frozenset({"optimal_rank", "psd"}), "§8",
        "Eckart & Young 1936; docs/math.md §8",
        "U_r Σ_r V_rᵀ: the best rank-r approximation, error σ_(r+1) in the 2-norm",
        _both("lowrank", "truncated_svd"),
    ),
    ApproximationSystem(
        "linformer", "lowrank", "softmax attention",
        frozenset({"batch_independent"}), "§8",
        "Wang et al. 2020 (Linformer); docs/math.md §8",
        "softmax(Q (E K)ᵀ/√d)(F V) with projections E, F of shape (r, n); bidirectional, and "
        "not permutation equivariant in the keys (E and F weight positions), so it does not "
        "claim noncausal",
        _both("lowrank", "linformer_attention"),
    ),
)

_ATTENTION = (
    AttentionSystem(
        "exact_softmax", "attention", "softmax exp(qᵀk/√d)",
        frozenset({"causal", "noncausal", "positive_weights", "exact", "batch_independent"})
        | _ATTENTION_COMMON,
        "§9", "Vaswani et al. 2017; docs/math.md §9",
        "softmax(QKᵀ/√d)V, optionally with the lower-triangular causal mask",
        _both("attention", "softmax_attention"),
    ),
    AttentionSystem(
        "linear_attention", "attention", "φ(q)ᵀφ(k) of the given features",
        frozenset({"causal", "noncausal", "exact", "batch_independent"}) | _ATTENTION_COMMON,
        "§9", "Katharopoulos et al. 2020; docs/math.md §9",
        "D̂⁻¹φ(Q)(φ(K)ᵀV) from given features; causal by chunked prefix sums",
        _both("attention", "linear_attention"),
    ),
    AttentionSystem(
        "log_linear_attention", "attention", "φ(q)ᵀφ(k) from log-features",
        frozenset({"causal", "noncausal", "positive_weights", "exact", "shift_free",
                   "batch_independent"}) | _ATTENTION_COMMON,
        "§9", "this project (README, stable positive features); docs/math.md §9",
        "Σ_f softmax_f(log φ(q)_f + L_f)·V̄_f: two softmaxes, no max-shift",
        _both("attention", "log_linear_attention"),
    ),
    AttentionSystem(
        "hybrid_attention", "attention",
        "γ·exp(s·qᵀk) over a window of w keys, φ(q)ᵀφ(k) before it",
        frozenset({"causal", "exact", "validates_input", "differentiable", "half_in_float32"}),
        "§22", "Zhang et al. 2024 (LoLCATs, arXiv 2410.10254); Arora et al. 2024 (Based); "
        "docs/math.md §22",
        "causal softmax over the w most recent keys plus linear attention with given features "
        "over the keys that left the window, one normaliser; w ≥ T is softmax attention, w = 0 "
        "linear attention; parallel form and one-token step with state",
        _both("hybrid_attention", "hybrid_attention"),
    ),
    AttentionSystem(
        "feature_map_attention", "attention", "the registry map's target kernel",
        frozenset({"causal", "noncausal", "approximates_softmax", "batch_independent"})
        | _ATTENTION_COMMON, "§9", "Choromanski et al. 2021 (Performer); docs/math.md §2, §9",
        "linear attention with a registry map and its parameter draw (d^(-1/4) pre-scale for "
        "the softmax family; log-space path for log_features maps)",
        {"numpy": "impls.attention:feature_map_attention",
         "torch": "impls.attention:feature_map_attention"},
    ),
)

#: What every built-in gated system offers (impls/{numpy,torch}/gated_forms.py: the argument
#: checks of impls.gated_checks first; torch is plain autograd; half inputs computed in float32;
#: every form — parallel, chunked, step — is the recurrence of docs/math.md §16, so causal).
_GATED_COMMON = frozenset({"causal", "exact", "validates_input", "differentiable",
                           "half_in_float32"})
_GATED_FUNCTIONS = _both("gated_forms", "gated_attention_chunked")
_GATED_FORMS_TEXT = ("; forms: masked decay matrix (gated_attention_parallel), chunked "
                     "(gated_attention_chunked, any chunk size), one token with state "
                     "(gated_attention_step)")

_GATED = (
    GatedSystem(
        "gated_fixed_decay", "gated", "φ(q)ᵀφ(k)·γ_h^(t−s), φ(q) = q·d^(−1/2), φ(k) = k",
        _GATED_COMMON, "§16", "Sun et al. 2023 (RetNet, arXiv 2307.08621); docs/math.md §16",
        "S_t = γ_h S_(t−1) + k_t v_tᵀ, o_t = φ(q_t)ᵀS_t with one log-decay per head for "
        "every token" + _GATED_FORMS_TEXT,
        _GATED_FUNCTIONS, gates="scalar_fixed",
    ),
    GatedSystem(
        "gated_scalar", "gated", "φ(q)ᵀφ(k)·e^(G_t − G_s), φ(q) = q·d^(−1/2), φ(k) = k",
        _GATED_COMMON, "§16",
        "Dao & Gu 2024 (Mamba2/SSD, arXiv 2405.21060); docs/math.md §16",
        "S_t = e^(g_t) S_(t−1) + k_t v_tᵀ, o_t = φ(q_t)ᵀS_t with one log-gate per token and "
        "head" + _GATED_FORMS_TEXT,
        _GATED_FUNCTIONS, gates="scalar",
    ),
    GatedSystem(
        "gated_key_dim", "gated", "Σ_f φ(q)_f φ(k)_f e^(G_tf − G_sf), φ(q) = q·d^(−1/2), φ(k) = k",
        _GATED_COMMON, "§16", "Yang et al. 2024 (GLA, arXiv 2312.06635); docs/math.md §16",
        "S_t = diag(e^(g_t)) S_(t−1) + k_t v_tᵀ, o_t = φ(q_t)ᵀS_t with one log-gate per token, "
        "head and key dimension (the key side of the state)" + _GATED_FORMS_TEXT,
        _GATED_FUNCTIONS, gates="key_dim",
    ),
    GatedSystem(
        "gated_scalar_normalised", "gated",
        "φ(q)ᵀφ(k)·e^(G_t − G_s) / Σ_s the same, φ(x) = elu(x) + 1",
        _GATED_COMMON | {"normalised"}, "§16",
        "Katharopoulos et al. 2020 (elu + 1 features); Dao & Gu 2024 (scalar gates); "
        "docs/math.md §16",
        "S_t = e^(g_t) S_(t−1) + φ(k_t)v_tᵀ, z_t = e^(g_t) z_(t−1) + φ(k_t), "
        "o_t = φ(q_t)ᵀS_t / φ(q_t)ᵀz_t with one log-gate per token and head" + _GATED_FORMS_TEXT,
        _GATED_FUNCTIONS, gates="scalar",
    ),
)


#: What every built-in delta-rule system offers (impls/{numpy,torch}/recurrence.py: the checks of
#: impls.recurrence_checks first; torch is plain autograd; half inputs computed in float32;
#: the chunked form and the step compute the one recurrence of docs/math.md §23, so causal).
_DELTA_COMMON = _GATED_COMMON
_DELTA_FUNCTIONS = _both("recurrence", "chunked")
_DELTA_FORMS_TEXT = ("; forms: chunked (the UT transform, any chunk size), token by token "
                     "(recurrent) and one token with state (recurrent_step); q and k "
                     "L2-normalised (ε = 1e-6 inside the root), q scaled by d^(−1/2)")

_DELTA = (
    GatedSystem(
        "delta_rule", "delta", "S_t = (I − β_t k_t k_tᵀ)S_(t−1) + β_t k_t v_tᵀ, o_t = S_tᵀq_t",
        _DELTA_COMMON | {"negative_eigenvalues"}, "§23",
        "Yang et al. 2024 (DeltaNet, NeurIPS, arXiv 2406.06484); docs/math.md §23",
        "the delta rule S_t = S_(t−1) + β_t k_t (v_t − S_(t−1)ᵀk_t)ᵀ with β in [0, 2]"
        + _DELTA_FORMS_TEXT, _DELTA_FUNCTIONS, gates="none", transition="delta",
    ),
    GatedSystem(
        "gated_delta_rule", "delta",
        "S_t = e^(g_t)(I − β_t k_t k_tᵀ)S_(t−1) + β_t k_t v_tᵀ, o_t = S_tᵀq_t",
        _DELTA_COMMON, "§23",
        "Yang et al. 2025 (Gated DeltaNet, ICLR, arXiv 2412.06464); docs/math.md §23",
        "the gated delta rule, one log-gate per token and head, the decay applied before the "
        "error term" + _DELTA_FORMS_TEXT, _DELTA_FUNCTIONS, gates="scalar",
        transition="gated_delta",
    ),
    GatedSystem(
        "kimi_delta_attention", "delta",
        "S_t = (I − β_t k_t k_tᵀ)Diag(e^(g_t))S_(t−1) + β_t k_t v_tᵀ, o_t = S_tᵀq_t",
        _DELTA_COMMON, "§23", "Kimi Linear technical report 2025 (KDA); docs/math.md §23",
        "the delta rule with one log-gate per token, head and key dimension applied to the "
        "state before the error term" + _DELTA_FORMS_TEXT, _DELTA_FUNCTIONS, gates="key_dim",
        transition="kda",
    ),
    GatedSystem(
        "comba", "delta", "S_t = (e^(g_t) I − β_t k_t p_tᵀ)S_(t−1) + β_t k_t v_tᵀ, o_t = S_tᵀq_t",
        _DELTA_COMMON, "§23", "Hu et al. 2025 (Comba, arXiv 2506.02475); docs/math.md §23",
        "a scalar decay plus a rank-one feedback along a separate key p_t" + _DELTA_FORMS_TEXT,
        _DELTA_FUNCTIONS, gates="scalar", transition="comba",
    ),
    GatedSystem(
        "rwkv7", "delta", "S_t = (Diag(e^(g_t)) + b_t a_tᵀ)S_(t−1) + k_t v_tᵀ, o_t = S_tᵀq_t",
        _DELTA_COMMON, "§23", "Peng et al. 2025 (RWKV-7 Goose, arXiv 2503.14456); "
        "docs/math.md §23",
        "a diagonal-plus-rank-one transition, a = −κ̂, b = κ̂ ⊙ a_iclr; q and k as given "
        "(no normalisation, no scale); forms: chunked (UT transform), recurrent, recurrent_step",
        _DELTA_FUNCTIONS, gates="key_dim", transition="rwkv7",
    ),
)

_MODELS = (
    ModelSystem(
        "tiny_lm", "model", "causal linear attention, φ(x) = elu(x) + 1, normalised",
        frozenset({"float64", "differentiable", "left_padding", "right_padding",
                   "batch_independent"}),
        "§15", "this project (the reference model target); docs/math.md §13, §15",
        "embeddings, blocks of a causal depthwise convolution, normalised elu + 1 linear "
        "attention (chunked forward, one-token step with a (conv, S, z) cache) and an MLP, "
        "then the head; forward, prefill, step, greedy generate, packed (cu_seqlens) and "
        "padded calls",
        {"torch": "impls.torch.tiny_lm:build_tiny_lm"},
    ),
    ModelSystem(
        "hybrid_lm", "model", "causal sliding-window softmax (window W) + linear attention, "
        "φ(x) = elu(x) + 1, one normalised quotient",
        frozenset({"float64", "differentiable", "left_padding", "right_padding",
                   "batch_independent"}),
        "§15", "this project (the tiny LM with the hybrid mixer of docs/math.md §22; LoLCATs, "
        "Zhang et al. 2024); docs/math.md §15, §22",
        "the tiny LM's blocks with the hybrid mixer: the last W tokens by softmax, older ones "
        "by the linear-attention state; parallel forward from a state, one-token step with a "
        "(conv, ring buffer of W keys/features/values, count, S, z) cache; the tiny LM's calls",
        {"torch": "impls.torch.hybrid_lm:build_hybrid_lm"},
    ),
)


def delta_system(transition: str) -> GatedSystem:
    """The built-in system of the delta-rule ``transition`` (:data:`TRANSITIONS`); the error
    names the argument and lists what exists."""
    for s in _DELTA:
        if s.transition == transition:
            return s
    raise ValueError(f"transition={transition!r}: no built-in delta-rule system; known: "
                     f"{', '.join(s.transition for s in _DELTA)}")


def gated_system(gates: str, normalised: bool = False) -> GatedSystem:
    """The built-in gated system with log-gates shaped as ``gates`` (:data:`GATE_KINDS`),
    normalised or not; the error names the arguments and lists what exists."""
    for s in _GATED:
        if s.gates == gates and s.has("normalised") == bool(normalised):
            return s
    known = ", ".join(f"{s.gates}{' (normalised)' if s.has('normalised') else ''}"
                      for s in _GATED)
    raise ValueError(f"gates={gates!r}, normalised={normalised!r}: no built-in gated system; "
                     f"known: {known}")


_MATRIX_TEXT = {
    "iid": ("Rahimi & Recht 2007", "rows w_i ~ N(0, I_d) independently"),
    "orthogonal": (
        "Yu et al. 2016 (ORF); Mezzadri 2007",
        "Haar-orthogonal blocks (QR with sign correction), independent χ_d row norms",
    ),
    "orthogonal_fixed_norm": (
        "Yu et al. 2016 (regularised ORF)",
        "Haar-orthogonal blocks with every row norm fixed to √d (not Gaussian)",
    ),
    "simplex": (
        "Reid et al. 2023 (SimRFs); docs/math.md §19",
        "Haar-rotated regular-simplex blocks (cosine -1/(d-1)), independent χ_d row norms",
    ),
    "sorf": ("Yu et al. 2016 (SORF)", "√p·H D₁ H D₂ H D₃ blocks, first d columns"),
    "fastfood": ("Le et al. 2013 (Fastfood)", "(1/√p)·S H G Π H B blocks, first d columns"),
}


def _matrix_system(kind: str) -> MatrixSystem:
    claims = set()
    if kind in UNBIASED_MATRICES:
        claims.add("gaussian_rows")
    else:
        claims.add("biased")
    if kind in ORTHOGONAL_MATRICES:
        claims.add("orthogonal")
    if kind in SIMPLEX_MATRICES:
        claims.add("simplex")
    source, description = _MATRIX_TEXT.get(kind, ("", kind))
    return MatrixSystem(
        kind, "random_matrix", "N(0, I_d) rows (Gaussian-kernel frequencies)",
        frozenset(claims), "§3", f"{source}; docs/math.md §3".lstrip("; "), description,
        {"numpy": "impls.random_matrices:draw_matrix"},
    )


def all_systems(*, kind: str | None = None, claims: Iterable[str] = ()) -> list[SystemDescriptor]:
    """Every non-feature-map system (in :data:`KINDS` order, then by name), optionally only one
    ``kind`` and only those with all ``claims``."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    systems = [*_APPROXIMATIONS, *_ATTENTION, *_GATED, *_DELTA,
               *(_matrix_system(k) for k in MATRICES), *_MODELS]
    wanted = set(claims)
    order = list(KINDS)
    return sorted(
        (s for s in systems if (kind is None or s.kind == kind) and wanted <= s.claims),
        key=lambda s: (order.index(s.kind), s.name),
    )


def get_system(name: str) -> SystemDescriptor:
    """The system called ``name``; the error names the argument and lists the known names."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a system name (str), got {type(name).__name__}")
    for s in all_systems():
        if s.name == name:
            return s
    known = ", ".join(s.name for s in all_systems())
    raise ValueError(f"name {name!r} is not a registered system; known: {known}")
