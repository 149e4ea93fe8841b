"""The model target kind: a causal language model as the model properties see it
(``properties/test_models.py``; docs/math.md §15).

A :class:`ModelTarget` is a **factory** plus the **calls** the model offers. The suite builds
models itself, at seeds and init scales it chooses, and compares the calls with each other and,
where the model runs in float64, with its float64 run. The model object is opaque: the suite
only hands it back to the target's own calls.

* ``build(seed, *, init_scale, dtype) -> model``: the model at a seeded random init (the same
  seed gives the same weights). ``init_scale`` multiplies the spread of the model's own
  initialisation (1.0: the model's default); the suite raises it until each check's planted
  defect fails (the power control). ``dtype`` is ``"float32"`` or ``"float64"``; with the claim
  ``float64`` the float64 model has exactly the float32 model's weights, cast.
* ``forward(model, ids) -> logits``: the full forward, ``ids (B, T)`` int64 torch tensor,
  logits ``(B, T, V)`` torch tensor in the model's dtype. Required.
* ``prefill(model, ids) -> (logits, cache)``: the full forward that also returns the cache or
  recurrent state; ``step(model, cache, ids_t) -> (logits (B, V), cache)``: one token per row,
  ``ids_t (B,)``. The cache is opaque; the suite never reuses a cache it has passed on.
* ``generate(model, ids, max_new_tokens) -> (tokens (B, n), scores (B, n, V))``: greedy
  generation with the cache; ``scores[:, i]`` are the logits that chose ``tokens[:, i]``.
* ``packed(model, ids, cu_seqlens) -> logits``: N sequences packed along time in a batch of
  one, ``ids (1, T)``, ``cu_seqlens (N + 1,)`` int64, ``0 = c_0 < … < c_N = T``.
* ``padded(model, ids, attention_mask) -> logits``: ``attention_mask (B, T)`` int64, 1 at valid
  positions; with the claim ``left_padding`` the suite passes masks whose valid positions are a
  suffix of each row, with ``right_padding`` a prefix. Logits at padded positions are not
  checked.
* ``parameters(model) -> list of tensors``: what the gradient properties differentiate
  (default: ``list(model.parameters())``).

Each optional call is None unless the model offers it; a property needing a call the target
does not offer is skipped with the field's name. ``max_len`` bounds the sequence lengths the
suite draws; ``init_scales`` is the ladder of init scales the power control climbs (first: the
scale verdicts are first sought at). ``call_seconds`` (the wall time of one forward at the
suite's sizes) makes the ``ci`` profiles run fewer Hypothesis examples, as for attention
targets. ``known_failures`` as every target.

An HF-style model (``model(input_ids, past_key_values=…, use_cache=True)``, ``.generate``)
gets these calls from :func:`kernel_verify.adapters.hf_models.hf_model_target`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kernel_verify.impls.systems import SYSTEM_CLAIMS, TARGET_CLAIM_WORDS
from kernel_verify.impls.validation import check_call_seconds as _check_call_seconds
from kernel_verify.impls.validation import check_callable_field as _check_callable
from kernel_verify.impls.validation import check_claim_set as _check_claims
from kernel_verify.impls.validation import check_count_field as _check_count
from kernel_verify.impls.validation import check_known_failures as _check_known_failures
from kernel_verify.impls.validation import check_target_name as _check_name
from kernel_verify.impls.validation import target_error as _fail

__all__ = ["MODEL_CALLS", "MODEL_CLAIMS", "MODEL_DTYPES", "ModelTarget"]

#: The claims a model target takes: words of the one vocabulary
#: (:data:`kernel_verify.impls.systems.SYSTEM_CLAIMS`).
MODEL_CLAIMS = {w: SYSTEM_CLAIMS[w] for w in TARGET_CLAIM_WORDS["model"]}
#: The optional calls of a model target.
MODEL_CALLS = ("prefill", "step", "generate", "packed", "padded")
MODEL_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class ModelTarget:
    """A causal LM as a factory and its calls (module docstring)."""

    name: str
    build: Callable[..., Any]
    forward: Callable[..., Any]
    vocab_size: int
    claims: frozenset[str] = frozenset()
    prefill: Callable[..., Any] | None = None
    step: Callable[..., Any] | None = None
    generate: Callable[..., Any] | None = None
    packed: Callable[..., Any] | None = None
    padded: Callable[..., Any] | None = None
    parameters: Callable[[Any], list] | None = None
    max_len: int = 12
    init_scales: tuple[float, ...] = (1.0, 4.0, 16.0, 64.0)
    call_seconds: float | None = None
    known_failures: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_name(self.name)
        for name in ("build", "forward"):
            _check_callable(self.name, name, getattr(self, name), optional=False)
        for name in (*MODEL_CALLS, "parameters"):
            _check_callable(self.name, name, getattr(self, name), optional=True)
        _check_claims(self.name, self.claims, MODEL_CLAIMS)
        _check_count(self.name, "vocab_size", self.vocab_size)
        if self.vocab_size < 2:
            raise _fail(ValueError, self.name, "vocab_size", f"must be at least 2, got "
                        f"{self.vocab_size}")
        _check_count(self.name, "max_len", self.max_len)
        if self.max_len < 4:
            raise _fail(ValueError, self.name, "max_len", "must be at least 4 (a prefill, two "
                        f"steps and a split to draw), got {self.max_len}")
        scales = self.init_scales
        if isinstance(scales, str) or not isinstance(scales, tuple | list) or not scales:
            raise _fail(TypeError, self.name, "init_scales", "must be a non-empty tuple of "
                        f"positive numbers, got {scales!r}")
        for s in scales:
            if isinstance(s, bool) or not isinstance(s, int | float) or not s > 0:
                raise _fail(ValueError, self.name, "init_scales", f"must hold positive "
                            f"numbers, got {s!r}")
        if list(scales) != sorted(scales):
            raise _fail(ValueError, self.name, "init_scales", f"must rise, got {scales!r}")
        if (self.prefill is None) != (self.step is None):
            missing = "step" if self.step is None else "prefill"
            raise _fail(ValueError, self.name, missing, "is None but "
                        f"{'prefill' if missing == 'step' else 'step'} is given: decoding "
                        "needs both (a prefill that returns the cache and a step that takes it)")
        for claim in ("left_padding", "right_padding"):
            if claim in self.claims and self.padded is None:
                raise _fail(ValueError, self.name, "claims", f"has {claim!r} but the target "
                            "has no padded call")
        if self.padded is not None and not {"left_padding", "right_padding"} & self.claims:
            raise _fail(ValueError, self.name, "padded", "is given but claims name neither "
                        "'left_padding' nor 'right_padding' (which masks it takes)")
        _check_known_failures(self.name, self.known_failures, type(self).__name__)
        _check_call_seconds(self.name, self.call_seconds)

    def has(self, claim: str) -> bool:
        return claim in self.claims

    def offers(self, call: str) -> bool:
        """Whether the target offers ``call`` (one of :data:`MODEL_CALLS`)."""
        if call not in MODEL_CALLS:
            raise ValueError(f"call must be one of {', '.join(MODEL_CALLS)}, got {call!r}")
        return getattr(self, call) is not None

    def params_of(self, model: Any) -> list:
        """The tensors the gradient properties differentiate."""
        if self.parameters is not None:
            return list(self.parameters(model))
        return [p for p in model.parameters() if p.requires_grad]
