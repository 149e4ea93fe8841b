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

**Serving-time state** (the serving properties, docs/math.md §15.1): one call that advances by
several tokens and one that saves a state express chunked prefill, prefix caches and
speculative decoding:

* ``extend(model, cache, ids) -> (logits (B, k, V), cache)``: advance by the ``k ≥ 1`` tokens
  ``ids (B, k)`` from ``cache`` (None: the empty state). Chunked prefill is ``extend``
  repeated; its cache is taken by ``step`` and by ``extend`` again. Like ``step`` it may
  consume the cache it is given (a library that updates its cache in place does).
* ``copy_cache(cache) -> cache``: a saved state. Restoring is continuing from the copy; the
  copy must not change whatever is later done with the cache it was taken from (nor with
  another copy), and a copy may be continued from more than once only through further copies:
  the suite continues from ``copy_cache(saved)`` each time, and from ``saved`` itself last. A
  target whose calls never write into a cache they are given may share its tensors (the
  built-in LM does: that is the contract a cache updated in place breaks).
* ``rollback(model, cache, n) -> cache``: the state ``n`` tokens before the end of the last
  ``extend`` (or ``step``) that made ``cache``, ``0 ≤ n ≤`` its length: speculative decoding's
  rejection of the last ``n`` drafts. Without it the suite rolls back the engine's way: a copy
  taken before drafting, extended by the accepted tokens.
* ``padded_prefill(model, ids, attention_mask) -> (logits, cache)``: a left-padded batch
  (each row's valid positions a suffix, ``attention_mask`` 1 there) prefilled with its mask;
  ``step`` then continues every row from its own last valid token.
* ``chunk_sizes``: the model's declared chunk sizes (a chunked scan's block, a prefix cache's
  block); ``conv_window``: the width of its causal convolution (or a sliding window). The
  serving properties put chunk and save points at ``c − 1, c, c + 1, 2c + 1`` for each
  ``c`` and at ``conv_window − 1`` (those below ``max_len``), where a boundary bug shows.

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
MODEL_CALLS = ("prefill", "step", "generate", "packed", "padded", "extend", "copy_cache",
               "rollback", "padded_prefill")
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
    extend: Callable[..., Any] | None = None
    copy_cache: Callable[..., Any] | None = None
    rollback: Callable[..., Any] | None = None
    padded_prefill: Callable[..., Any] | None = None
    chunk_sizes: tuple[int, ...] = ()
    conv_window: int | None = None
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
            if isinstance(s, bool) or not isinstance(s, int | float) or not 0 < s < float("inf"):
                raise _fail(ValueError, self.name, "init_scales", f"must hold positive finite "
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
        self._check_serving()
        # (the suite's protocol module registers the known-failure names check; imported here
        # because it imports this module)
        from kernel_verify.properties import protocol as _protocol  # noqa: F401

        _check_known_failures(self.name, self.known_failures, type(self).__name__)
        _check_call_seconds(self.name, self.call_seconds)

    def _check_serving(self) -> None:
        """The serving calls need what they are continued with (module docstring)."""
        for call in ("extend", "padded_prefill"):
            if getattr(self, call) is not None and self.step is None:
                raise _fail(ValueError, self.name, call, "is given but step is None: the "
                            "serving properties decode from its cache with step")
        for call in ("copy_cache", "rollback"):
            if getattr(self, call) is not None and self.extend is None:
                raise _fail(ValueError, self.name, call, "is given but extend is None: a "
                            "saved or rolled-back state is continued with extend")
        sizes = self.chunk_sizes
        if isinstance(sizes, str) or not isinstance(sizes, tuple | list):
            raise _fail(TypeError, self.name, "chunk_sizes", "must be a tuple of positive "
                        f"ints, got {sizes!r}")
        for c in sizes:
            _check_count(self.name, "chunk_sizes", c)
        if self.conv_window is not None:
            _check_count(self.name, "conv_window", self.conv_window)
            if self.conv_window < 2:
                raise _fail(ValueError, self.name, "conv_window", "must be at least 2 (a "
                            f"window of one token holds no state), got {self.conv_window}")

    def cut_points(self) -> tuple[int, ...]:
        """The declared boundaries the serving properties cut at: ``c − 1, c, c + 1, 2c + 1``
        per chunk size ``c`` and ``conv_window − 1``, those in ``[1, max_len − 2]`` (room for
        a continuation of two tokens), ascending."""
        points = {p for c in self.chunk_sizes for p in (c - 1, c, c + 1, 2 * c + 1)}
        if self.conv_window is not None:
            points.add(self.conv_window - 1)
        return tuple(sorted(p for p in points if 1 <= p <= self.max_len - 2))

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
