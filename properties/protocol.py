"""The adapter protocol: what a target under test looks like to the property suite.

The suite runs the same properties against the built-in registry and against any third-party
implementation (array-api-tests style). A *target* is one of five kinds:

* :class:`FeatureMapTarget`: ``φ``. One class for every feature map: it is defined in
  :mod:`kernel_verify.impls.descriptor` and is the registry's ``FeatureMap`` too, so a built-in
  map and a user's map are the same kind of object, read unchanged by every property (the
  fields are listed there). **White-box** when it exposes its random parameters (``draw`` +
  ``numpy_fn``/``torch_fn`` taking them; ``no_params`` for a map without any), so the exact
  reference comparison runs, with ``formula`` naming the registry formula its parameters
  follow. ``kernel_params`` is a mapping or a callable ``(config, d) -> mapping``.
  **Black-box** when it only gives features for a seed (``sample_fn(x, seed)``; the same seed
  must mean the same draw): the statistical and identity properties run. A black-box map
  may **declare its estimator family**: ``formula`` (a registry formula, e.g.
  ``"softmax_positive"``), ``matrix`` (``"iid"`` or ``"orthogonal"``) and ``config`` (the
  formula's constants, e.g. GERF's ``A``,
  RFF's ``sigma``). The declaration adds the tests that need it: the exact-variance mean test,
  the range (Hoeffding/Bernstein) tests of bounded families, the variance tests (including
  "orthogonal rows have the ORF variance") and, for deterministic formulas, the derived
  tolerance of φ(x)ᵀφ(y) = k(x, y). Without it, ``properties/test_blackbox_maps.py`` still tests
  every claim (reproducible draw, sign, float64 accuracy, the deterministic identity and the
  mean under a stated, calibrated assumption); skip reasons name the declaration that would add
  a test. ``m`` is the feature count ``sample_fn`` uses.

  **Gradients** (claim ``differentiable``, ``properties/test_gradients.py``): a white-box map's
  ``torch_fn(x, params, config)`` (and ``log_torch_fn``) must be differentiable in ``x`` by
  autograd; a black-box map claiming ``differentiable`` has a ``sample_fn`` that also takes a
  torch tensor ``x`` (any float dtype, any device, ``requires_grad``) and returns a torch tensor
  differentiable in ``x``. ``deterministic_backward``: two backward passes give bitwise equal
  gradients. An attention target claiming ``differentiable`` lists ``"torch"`` in ``backends``
  and returns, for torch inputs requiring grad, an output differentiable in q, k and v.
* :class:`AttentionTarget`: ``attention(q, k, v, causal=..., seed=...)``.
* :class:`RandomMatrixTarget`: ``draw(rng, m, d) -> W``.
* :class:`KernelApproxTarget`: ``approximate(X, kernel, rng) -> (K̃, landmark indices)``.
* :class:`ModelTarget`: a causal LM as a factory ``build(seed, init_scale, dtype)`` and its
  calls (full forward, prefill and step with a cache, generate, packed, padded), defined in
  :mod:`kernel_verify.properties.model_protocol`.

**Known defects as data**: every target takes ``known_failures``, a mapping from a property
(test function) name to the reason, with a link (the expected-failures file of array-api-tests,
kept on the target). The suite applies it at collection: such a property is reported as
*known*, never as a pass, and one that passes again is reported as *stale*
(:mod:`kernel_verify.properties.known`).

An adapter module exposes a target, or a list of targets, as a module attribute; run it with
``kernel-verify check module:attribute`` (README, "Verify your own implementation").
Every function receives and returns float64 NumPy arrays unless it declares torch.

**Dtype rule** (the one rule, applied everywhere by the suite): a function may return a *wider*
floating dtype than its input (float64 features for float32 input, e.g. ``x @ p["W"].T`` with a
float64 ``W``); the suite compares such a result as what it is — in the wider dtype, against the
bounds of the input dtype, which then hold a fortiori. A *narrower* result (float32 features for
float64 input) is a precision loss and fails
``blackbox_maps::test_float64_input_gives_float64_output``.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from kernel_verify.impls.descriptor import FeatureMapTarget
from kernel_verify.impls.systems import SYSTEM_CLAIMS, TARGET_CLAIM_WORDS
from kernel_verify.impls.validation import check_backends_and_dtypes as _check_backends_and_dtypes
from kernel_verify.impls.validation import check_call_seconds as _check_call_seconds
from kernel_verify.impls.validation import check_callable_field as _check_callable
from kernel_verify.impls.validation import check_choice_field as _check_choice
from kernel_verify.impls.validation import check_chunk_sizes as _check_chunk_sizes
from kernel_verify.impls.validation import check_claim_set as _check_claims
from kernel_verify.impls.validation import check_count_field as _check_count
from kernel_verify.impls.validation import check_form_result
from kernel_verify.impls.validation import check_known_failures as _check_known_failures
from kernel_verify.impls.validation import check_target_name as _check_name
from kernel_verify.impls.validation import set_known_property_check as _set_known_check
from kernel_verify.impls.validation import target_error as _fail
from kernel_verify.properties.model_protocol import MODEL_CLAIMS, ModelTarget
from kernel_verify.properties.property_index import check_known_properties
from kernel_verify.properties.sequence_target import SequenceTarget
from kernel_verify.properties.shape_contract import keep_to_contract
from kernel_verify.verify.backends import as_float64

__all__ = ["APPROX_CLAIMS", "ATTENTION_CLAIMS", "ATTENTION_FORMS", "LAYOUTS", "MATRIX_CLAIMS",
           "MODEL_CLAIMS", "AttentionTarget", "FeatureMapTarget", "KernelApproxTarget",
           "ModelTarget", "RandomMatrixTarget", "Target"]

# known_failures of every kind of target, FeatureMapTarget (defined in impls) included, must name
# properties of that kind: the suite's index of its own properties checks them.
_set_known_check(check_known_properties)

#: The claim words of each kind of target: selections of the one vocabulary of the systems
#: (:data:`kernel_verify.impls.systems.SYSTEM_CLAIMS`), so a word means the same for a built-in
#: system and for a third-party target.
ATTENTION_CLAIMS = {w: SYSTEM_CLAIMS[w] for w in TARGET_CLAIM_WORDS["attention"]}
#: The forms an attention target may offer besides ``attention`` (docs/math.md §13); each field
#: of :class:`AttentionTarget` with this name is an optional callable.
ATTENTION_FORMS = ("stateful", "chunked", "step", "varlen", "padded")
#: Layouts of the arrays an attention target takes: (batch, heads, time, dim) or fla's default
#: (batch, time, heads, dim).
LAYOUTS = ("BHTD", "BTHD")
MATRIX_CLAIMS = {w: SYSTEM_CLAIMS[w] for w in TARGET_CLAIM_WORDS["random_matrix"]}
APPROX_CLAIMS = {w: SYSTEM_CLAIMS[w] for w in TARGET_CLAIM_WORDS["kernel_approximation"]}


# --- Validation at construction (issue 13) -------------------------------------------------
# Every field of every target is checked in ``__post_init__``: a bad adapter fails at once with
# a ValueError/TypeError naming the target, the field and the problem (and the valid choices),
# never later inside a property with an unrelated error. The field checks are shared with the
# feature-map descriptor (``kernel_verify.impls.validation``), which also checks its kernel and
# formula names itself (``kernel_verify.impls.names``), whether or not this module was imported.


def _validate_simple_target(t: object, fn_field: str, vocabulary: Mapping[str, str]) -> None:
    name = getattr(t, "name", None)
    _check_name(name)
    _check_callable(name, fn_field, getattr(t, fn_field), optional=False)
    _check_claims(name, t.claims, vocabulary)  # type: ignore[attr-defined]


def _validate_forms(t: AttentionTarget) -> None:
    """The optional forms protocol of :class:`AttentionTarget` (docs/math.md §13)."""
    _check_choice(t.name, "layout", t.layout, set(LAYOUTS), optional=False)
    for field_name in (*ATTENTION_FORMS, "features", "state_sums"):
        _check_callable(t.name, field_name, getattr(t, field_name), optional=True)
    _check_chunk_sizes(t.name, t.chunk_sizes)
    if t.state_sums is not None and not any(getattr(t, f) is not None for f in ATTENTION_FORMS):
        raise _fail(ValueError, t.name, "state_sums", "is given but the target offers no form "
                    f"with a state ({', '.join(ATTENTION_FORMS)})")
    if "state_bitwise" in t.claims and t.stateful is None and t.chunked is None:
        raise _fail(ValueError, t.name, "claims", "has 'state_bitwise' but the target has no "
                    "stateful or chunked form to continue from a state")
    if not isinstance(t.dv_equals_d, bool):
        raise _fail(TypeError, t.name, "dv_equals_d", f"must be a bool, got "
                    f"{type(t.dv_equals_d).__name__}")
    for field_name in ("length_multiple_of", "min_length"):
        _check_count(t.name, field_name, getattr(t, field_name))
    if "differentiable" in t.claims and "torch" not in tuple(t.backends):
        raise _fail(ValueError, t.name, "claims", "has 'differentiable' but backends "
                    f"{tuple(t.backends)} has no 'torch': the gradient properties call the target "
                    "with torch tensors that require grad; add 'torch' or drop the claim")
    for form in ATTENTION_FORMS:
        if getattr(t, form) is not None:
            object.__setattr__(t, form, _checked_form(t, form))


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _contract_of_call(t: AttentionTarget, form: str, args: tuple, kwargs: dict) -> None:
    """Keep a form's call to the target's shape contract (``shape_contract``)."""
    if not t._has_contract():
        return
    names = ("state", "q_t", "k_t", "v_t") if form == "step" else ("q", "k", "v")
    got = dict(zip(names, args, strict=False)) | kwargs
    q, v = got.get(names[1] if form == "step" else "q"), got.get(names[3] if form == "step"
                                                               else "v")
    if not (_is_array(q) and _is_array(v)) or not len(q.shape) or not len(v.shape):
        return  # malformed input: the form's own checks name it
    d, dv = int(q.shape[-1]), int(v.shape[-1])
    if form == "step" or len(q.shape) < 3:
        keep_to_contract(t, t=None, d=d, dv=dv)
        return
    time_axis = -2 if t.layout == "BHTD" else 1
    lengths = [int(q.shape[time_axis])]
    cu = got.get("cu_seqlens")
    if form == "varlen" and hasattr(cu, "tolist"):
        bounds = cu.tolist()
        if (isinstance(bounds, list) and all(isinstance(b, int) for b in bounds)
                and bounds[:1] == [0] and bounds == sorted(bounds)):  # else: the form names it
            lengths = [b - a for a, b in itertools.pairwise(bounds)]
    for length in lengths:
        keep_to_contract(t, t=length, d=d, dv=dv)


def _checked_form(t: AttentionTarget, form: str) -> Callable[..., Any]:
    """The form ``form`` of ``t`` with the shape of its result checked at every call:
    ``(out, final_state)`` (``step``: ``(state, o_t)``), so that a form returning only the
    output, or a step returning ``(o_t, state)``, fails with the field's name instead of "not
    enough values to unpack" inside a property."""
    fn = getattr(t, form)
    fn = getattr(fn, "_kv_unchecked", fn)

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _contract_of_call(t, form, args, kwargs)
        result = fn(*args, **kwargs)
        check_form_result(t.name, form, result, state_optional=form == "padded")
        return result

    checked._kv_unchecked = fn  # type: ignore[attr-defined]
    return checked


# --- End of validation ------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionTarget(SequenceTarget):
    """``attention(q, k, v, *, causal: bool, seed: int) -> out`` on arrays of shape
    ``(batch, heads, n, d)``; ``seed`` fixes any randomness (ignored by exact attention).
    With ``approximates_softmax``, ``attention`` also accepts ``m=`` (feature count).

    Which arrays it accepts: ``backends`` (``"numpy"``, ``"torch"``: torch tensors on every
    device the machine has) × ``dtypes`` (``"float64"``, ``"float32"``, ``"float16"``,
    ``"bfloat16"``); the default is NumPy float64 only. Inputs arrive on the backend in the
    dtype; the output must come back as an array of the same backend (any dtype; it is widened
    to float64 exactly). ``self_attention_only``: q and k always come from one sequence (the
    suite then calls with ``k is q``, never 1 query against 2 keys). A causal-only target claims
    ``causal`` without ``noncausal``: every property then calls it with ``causal=True``.

    **Layout**: ``layout="BHTD"`` (default) or ``"BTHD"`` (fla's default): the axis order of
    every ``(…, T, …)`` array the target's functions take and return — ``attention`` and every
    form below. The suite converts (``swapaxes(1, 2)``) on the way in and out.

    **Forms of causal attention** (docs/math.md §13; ``properties/test_attention_forms.py``).
    Optional, each ``None`` unless the target offers it; a property that needs a form the target
    does not offer is skipped with the field's name. All are causal, take arrays of one backend
    and dtype (as ``attention``) and a ``seed`` that fixes the same features as ``attention``'s:

    * ``stateful(q, k, v, *, initial_state=None, seed=0) -> (out, final_state)``: the causal
      full-sequence call with the state in and out;
    * ``chunked(q, k, v, *, chunk_size, initial_state=None, seed=0) -> (out, final_state)``:
      the chunked form; ``chunk_sizes`` lists the sizes it accepts (None: every ``C ≥ 1``).
      A target without a chunked form may declare ``chunk_sizes`` too: the block sizes its
      kernels work in inside (fla's ``chunk`` kernels: 64). Either way, the forms, packed and
      identity properties run fixed layouts around them (``T = C ± 1``, ``2C + 1``; splits and
      packed boundaries at ``C − 1``, ``C``, ``C + 1``: :mod:`kernel_verify.properties.layouts`)
      before their random draws;
    * ``step(state, q_t, k_t, v_t, *, seed=0) -> (state, o_t)``: one token of the recurrence;
      ``q_t, k_t (B, H, d)``, ``v_t, o_t (B, H, d_v)`` (no time axis, so in either layout);
      ``state=None`` is the empty state;
    * ``varlen(q, k, v, *, cu_seqlens, initial_state=None, seed=0) -> (out, final_states)``:
      N sequences packed along time in a batch of 1; ``cu_seqlens`` (N + 1,) int64 array of the
      input's backend (and device), ``0 = c_0 < … < c_N = T`` (the suite draws non-empty
      sequences); ``initial_state`` and ``final_states`` hold one state per sequence along the
      batch axis. The rules a target should enforce on its callers (a 1-D integer array from 0
      to T, non-decreasing, a batch of one, one initial state per sequence) are
      :func:`kernel_verify.impls.sequence_validation.check_cu_seqlens` and its neighbours, which
      the built-in targets and the fla adapter use;
    * ``padded(q, k, v, *, mask, initial_state=None, seed=0) -> (out, final_state)``: ``mask``
      (B, T) bool array of the input's backend, True at valid positions (exactly (B, T), bool
      or 0/1 integers: :func:`kernel_verify.impls.sequence_validation.check_mask`; the suite
      passes masks whose valid positions are a prefix — right padding — or a suffix — left
      padding — of each row); outputs at padded positions are not checked; ``final_state``
      may be None when the target returns no state for padded input.

    **The state** is a tuple of arrays of the input's backend (and device) whose first axis is
    the batch, of a size independent of T; it is opaque to the suite, which hands it back to
    the target's own forms (any form's state to any other form), slices and concatenates it
    along the batch axis, compares states of two forms of the same target through their
    continuations (the same probe tokens from each must give the same outputs) and checks that
    its size does not grow with T. The claim ``state_bitwise`` asks for bitwise split
    invariance. White-box extras, adding the comparisons with the exact mpmath recurrence:
    ``features(x, seed) -> φ(x)`` (float64 NumPy ``(B, H, T, m)`` for ``x (B, H, T, d)`` in
    BHTD, the exact features behind the outputs, after any pre-scale) and
    ``state_sums(state) -> (S, z)`` (float64 NumPy ``S = Σ_j φ(k_j) v_jᵀ (B, H, m, d_v)`` and
    ``z = Σ_j φ(k_j) (B, H, m)``, or None for a target without a normaliser state).

    **Feature count** (issue #29): ``feature_count``, the number ``m`` of features behind the
    outputs (``0``: exact attention, softmax of the scores, with no features). The low-precision
    and forms bounds charge ``γ`` over the keys plus this many feature terms; ``None`` (the
    default) with ``features`` declared: measured from ``features`` (its last axis); ``None``
    without ``features``: unknown, the suite assumes at most ``M_MAX = 4096`` features
    (``properties/attention_cases.py``) and the verdict states the power that costs.

    **Cost** (issue #20): ``call_seconds``, the wall time of one ``attention`` call at the suite's
    sizes (batch and heads ≤ 3, T ≤ 12, d ≤ 6) on a CPU core, for a target whose every call is
    slow (Triton's interpreter, a layer with 256 landmarks). The ``ci`` profiles then run fewer
    Hypothesis examples of each of its properties (never none;
    :func:`kernel_verify.properties.profiles.examples_for_cost`) and every verdict obtained so
    says how many (``reduced``). None (the default): calls are fast.

    **Shape contract** (issue #30): the shapes the target accepts, besides
    ``self_attention_only``: ``dv_equals_d`` (values as wide as queries and keys),
    ``length_multiple_of`` (T a multiple of a block) and ``min_length`` (T at least this). The
    suite does not call the target outside them: such an input is not an example (rejected inside
    a Hypothesis property, a skip elsewhere), and every verdict says which shapes were not drawn
    (:mod:`kernel_verify.properties.shape_contract`)."""

    FORMS: ClassVar[tuple[str, ...]] = ATTENTION_FORMS
    name: str
    attention: Callable[..., Any]
    claims: frozenset[str]
    backends: tuple[str, ...] = ("numpy",)
    dtypes: tuple[str, ...] = ("float64",)
    self_attention_only: bool = False
    known_failures: Mapping[str, str] = field(default_factory=dict)
    layout: str = "BHTD"
    stateful: Callable[..., Any] | None = None
    chunked: Callable[..., Any] | None = None
    step: Callable[..., Any] | None = None
    varlen: Callable[..., Any] | None = None
    padded: Callable[..., Any] | None = None
    chunk_sizes: tuple[int, ...] | None = None
    features: Callable[[np.ndarray, int], np.ndarray] | None = None
    state_sums: Callable[[tuple], tuple[np.ndarray, np.ndarray | None]] | None = None
    call_seconds: float | None = None
    feature_count: int | None = None
    dv_equals_d: bool = False
    length_multiple_of: int = 1
    min_length: int = 1

    def __post_init__(self) -> None:
        _validate_simple_target(self, "attention", ATTENTION_CLAIMS)
        if self.feature_count is not None and (
                isinstance(self.feature_count, bool) or not isinstance(self.feature_count, int)
                or self.feature_count < 0):
            raise TypeError(f"target {self.name!r}: feature_count must be a non-negative int "
                            f"(0: exact attention without features) or None (unknown), got "
                            f"{self.feature_count!r}")
        _check_known_failures(self.name, self.known_failures, type(self).__name__)
        _check_backends_and_dtypes(self.name, self.backends, self.dtypes)
        if not isinstance(self.self_attention_only, bool):
            raise TypeError(f"target {self.name!r}: self_attention_only must be a bool, got "
                            f"{type(self.self_attention_only).__name__}")
        _validate_forms(self)
        _check_call_seconds(self.name, self.call_seconds)

    def _has_contract(self) -> bool:
        """Whether the target declares a shape contract (``shape_contract``)."""
        return self.dv_equals_d or self.length_multiple_of > 1 or self.min_length > 1

    def __call__(self, q, k, v, *, causal: bool, seed: int = 0, **kw: Any) -> np.ndarray:
        """The output as a float64 NumPy array (exact widening from any backend and dtype),
        ``(B, H, T, d_v)`` whatever the target's layout."""
        if self._has_contract():
            for x in (q, k):
                if _is_array(x) and _is_array(q) and _is_array(v) and len(x.shape) >= 2:
                    keep_to_contract(self, t=int(x.shape[-2]), d=int(q.shape[-1]),
                                     dv=int(v.shape[-1]))
        t = self.to_layout
        tq = t(q)
        tk = tq if k is q else t(k)
        return as_float64(t(self.attention(tq, tk, t(v), causal=causal, seed=seed, **kw)))


@dataclass(frozen=True)
class RandomMatrixTarget:
    """``draw(rng, m, d) -> W (m, d)`` float64."""

    name: str
    draw: Callable[[np.random.Generator, int, int], np.ndarray]
    claims: frozenset[str]
    known_failures: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _validate_simple_target(self, "draw", MATRIX_CLAIMS)
        _check_known_failures(self.name, self.known_failures, type(self).__name__)

    def has(self, claim: str) -> bool:
        return claim in self.claims


@dataclass(frozen=True)
class KernelApproxTarget:
    """``approximate(X (n, d), kernel, rng) -> (K̃ (n, n), landmark indices)``, where
    ``kernel(A, B)`` returns the float64 Gram matrix of the exact kernel. A landmark-free
    approximation (a truncated SVD) returns an empty index array and claims only words whose
    properties read ``K̃`` and ``rank`` alone (``optimal_rank``: ``‖K − K̃‖₂ = σ_(r+1)``,
    ``r = min(rank, n)``)."""

    name: str
    approximate: Callable[..., tuple[np.ndarray, np.ndarray]]
    claims: frozenset[str]
    rank: int = 4
    known_failures: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _validate_simple_target(self, "approximate", APPROX_CLAIMS)
        _check_count(self.name, "rank", self.rank)
        _check_known_failures(self.name, self.known_failures, type(self).__name__)

    def has(self, claim: str) -> bool:
        return claim in self.claims


Target = (FeatureMapTarget | AttentionTarget | RandomMatrixTarget | KernelApproxTarget
          | ModelTarget)
