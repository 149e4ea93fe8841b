"""Model-level mutants: the tiny causal LM (:mod:`kernel_verify.impls.torch.tiny_lm`) with one
defect each, of the kinds the field reported for linear-attention and state-space LMs, and
their correct twin (docs/math.md §15).

Each mutant is a subclass of :class:`~kernel_verify.impls.torch.tiny_lm.TinyLM` that overrides
one call; the control (``control_model_tiny_lm``) is the same target built from the unchanged
class. Run one: ``kernel-verify check kernel_verify.mutants.models:target_<name> --profile
mutants`` (the twin: ``kernel_verify.mutants.models:control_model_tiny_lm``).

* ``model_packed_state_carried``: ``cu_seqlens`` is accepted and each sequence starts from the
  previous one's final state (convolution window and attention state carried across the
  boundary) — the packed input run as one sequence;
* ``model_padding_leaks_into_state``: the attention mask only zeroes the logits; the padded
  positions are run as token 0, so left padding enters the convolution window and the state;
* ``model_cache_ignored_after_first_step``: ``step`` returns the cache it was given instead
  of the updated one: the first decoded token is right, every later one misses the tokens
  decoded since the prefill;
* ``model_cache_updated_in_place``: ``step`` adds the new token to the cache's ``S`` and ``z``
  in place (``add_``) before reading them: every value is right, but a tensor the previous
  step saved for backward has been overwritten, so backward through two or more cached steps
  raises;
* ``model_split_off_by_one``: the prefill returns the state after its first ``T − 1`` tokens
  (its logits are right): decoding continues without the prompt's last token.
* ``model_right_padding_read_as_left``: a padded row runs its last ``n`` tokens (``n`` valid
  positions): right for left padding, the pad tokens for right padding;
* ``model_final_norm_over_batch``: the final RMSNorm takes its statistics over the batch and
  the features: each row's logits depend on the other rows;
* ``model_exp_features_overflow``: the attention features are ``exp(x)`` without a shift
  (right kernel where it does not overflow; ∞/∞ = NaN at large weights);
* ``model_init_ignores_seed``: the weights come from the global torch generator, not from the
  seed: two builds from one seed differ.

Serving-time state (docs/math.md §15.1; one serving call of the built-in target replaced,
:func:`kernel_verify.properties.builtin_models.serving_calls`):

* ``model_restore_at_chunk_boundary``: a restored state is read from the wrong position: the
  saved copy is the state at the last multiple of the chunk size reached (a prefix cache kept
  in whole chunks), right only when the save point is a chunk boundary;
* ``model_rollback_keeps_rejected_token``: ``rollback(n)`` drops ``n − 1`` tokens: after a
  partial acceptance one rejected draft stays in the state;
* ``model_padded_prefill_state_leaks``: the masked prefill's logits are right, but its state is
  that of the padded rows run whole: the pad tokens enter the state decoding continues from;
* ``model_extend_updates_cache_in_place``: ``extend`` writes the new state into the tensors of
  the cache it was given (``copy_``): every value it returns is right, but a saved copy that
  shares those tensors now holds the later state;
* ``model_chunk_window_not_carried``: ``extend`` from a cache carries the attention state but
  starts the convolution from an empty window (the window of the previous chunk dropped):
  one-shot prefill and one-token steps are right, a prefill in chunks is not;
* ``model_saved_state_in_bfloat16``: a saved state is kept in bfloat16 (a prefix cache in a
  lower precision than the model's): the live cache is exact, a restored one is rounded;
* ``model_short_chunk_overwrites_window``: a chunk shorter than the convolution's window
  (fewer than ``W − 1`` tokens) shifts itself into the given cache's window in place (the
  short-chunk path of a ring buffer): a state saved before it is overwritten by the later,
  shorter chunk.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Callable

from kernel_verify.mutants.base import Mutant
from kernel_verify.properties.protocol import Target

FAMILY = "models"
LOADER = "kernel_verify.mutants.models:target_"
CONTROL_LOADER = "kernel_verify.mutants.models:control_"


def _step_in_place(model, ids_t, cache):
    """The decode step of ``model_cache_updated_in_place``: the state ``(S, z)`` of the cache
    updated in place (``add_``), so the caller's cache changes under it."""
    from kernel_verify.impls.torch.tiny_lm import _rmsnorm

    h = model.embed(ids_t.reshape(-1))[:, None]
    new = []
    for blk, (window, s, z) in zip(model.blocks, cache, strict=True):
        u, window = blk.convolve(window, _rmsnorm(h, blk.norm1))
        fq, fk, v = (x[:, :, 0] for x in blk._heads(u))
        s.add_(fk.unsqueeze(-1) * v.unsqueeze(-2))
        z.add_(fk)
        num = (fq.unsqueeze(-2) @ s).squeeze(-2)
        den = (fq * z).sum(-1, keepdim=True)
        h = blk._finish(h, (num / den).unsqueeze(2))
        new.append((window, s, z))
    return model._logits(h)[:, 0], new


def _right_padding_read_as_left(model, ids, attention_mask):
    """``model_right_padding_read_as_left``'s padded forward: each row runs on its last n tokens
    (where left padding would put the valid ones), its outputs written at the valid positions."""
    import torch

    rows, caches = [], []
    for b in range(ids.shape[0]):
        valid = attention_mask[b].bool()
        n = int(valid.sum())
        out, cache = model(ids[b:b + 1, ids.shape[1] - n:])  # the last n tokens
        row = out.new_zeros(1, ids.shape[1], out.shape[-1])
        row[0, valid] = out[0]
        rows.append(row)
        caches.append(cache)
    return torch.cat(rows, dim=0), model.stack(caches)


def _classes() -> dict[str, type]:
    """The mutant classes (built lazily: importing torch only when a mutant runs)."""
    import torch

    from kernel_verify.impls.torch.tiny_lm import TinyLM

    class PackedStateCarried(TinyLM):
        def forward_packed(self, ids, cu_seqlens):
            bounds = [int(c) for c in cu_seqlens.tolist()]
            outs, cache = [], None
            for a, b in itertools.pairwise(bounds):
                out, cache = self(ids[:, a:b], cache)
                outs.append(out)
            return torch.cat(outs, dim=1), cache

    class PaddingLeaks(TinyLM):
        def forward_padded(self, ids, attention_mask):
            mask = attention_mask.bool()
            logits, cache = self(ids.masked_fill(~mask, 0))
            return logits * mask[..., None], cache

    class CacheIgnoredAfterFirstStep(TinyLM):
        def step(self, ids_t, cache):
            logits, new = super().step(ids_t, cache)
            return logits, (new if cache is None else cache)

    class CacheUpdatedInPlace(TinyLM):
        def step(self, ids_t, cache):
            if cache is None:
                return super().step(ids_t, cache)
            return _step_in_place(self, ids_t, cache)

    class SplitOffByOne(TinyLM):
        def forward(self, ids, cache=None):
            logits, new = super().forward(ids, cache)
            if ids.shape[1] > 1:
                _, new = super().forward(ids[:, :-1], cache)
            return logits, new

    class RightPaddingReadAsLeft(TinyLM):
        def forward_padded(self, ids, attention_mask):
            return _right_padding_read_as_left(self, ids, attention_mask)

    class NormOverBatch(TinyLM):
        def _logits(self, h):
            scale = torch.rsqrt(h.pow(2).mean(dim=(0, -1), keepdim=True) + 1e-6)
            return self.head(h * scale * self.norm)

    class ExpFeatures(TinyLM):
        def __init__(self, cfg):
            super().__init__(cfg)
            for blk in self.blocks:
                blk._heads = types.MethodType(_exp_heads, blk)

    return {"model_packed_state_carried": PackedStateCarried,
            "model_right_padding_read_as_left": RightPaddingReadAsLeft,
            "model_final_norm_over_batch": NormOverBatch,
            "model_exp_features_overflow": ExpFeatures,
            "model_padding_leaks_into_state": PaddingLeaks,
            "model_cache_ignored_after_first_step": CacheIgnoredAfterFirstStep,
            "model_cache_updated_in_place": CacheUpdatedInPlace,
            "model_split_off_by_one": SplitOffByOne,
            "model_tiny_lm": TinyLM}


def _exp_heads(blk, u):
    """``φ = exp`` without a shift: overflows to ∞ (then ∞/∞ = NaN) at large activations."""
    import torch

    b, t, d = u.shape
    h = blk.cfg.n_heads
    q, k, v = blk.qkv(u).split(d, dim=-1)
    q, k, v = (x.reshape(b, t, h, d // h).transpose(1, 2) for x in (q, k, v))
    return torch.exp(q), torch.exp(k), v


def _unseeded_build(seed: int, *, init_scale: float = 1.0, dtype: str = "float32"):
    """The tiny LM drawn from the global torch generator: the seed is ignored."""
    import torch

    from kernel_verify.impls.torch.tiny_lm import build_tiny_lm

    return build_tiny_lm(int(torch.randint(0, 2**31 - 1, ())), init_scale=init_scale,
                         dtype=getattr(torch, dtype))


def _serving_overrides(name: str) -> dict:
    """The serving call a serving mutant replaces (module docstring), as target fields."""
    import torch

    from kernel_verify.properties.builtin_models import ServingCache, serving_calls

    calls = serving_calls()
    extend, copy_cache, rollback = calls["extend"], calls["copy_cache"], calls["rollback"]

    def boundary_extend(model, cache, ids):
        logits, new = extend(model, cache, ids)
        pos0, q = cache.pos if cache is not None else 0, model.cfg.chunk_size
        last = (new.pos // q) * q
        if last > pos0:
            new.boundary = extend(model, cache, ids[:, :last - pos0])[1]
        else:
            new.boundary = (getattr(cache, "boundary", None) if cache is not None else
                            ServingCache(model.empty_cache(ids.shape[0]), 0))
        return logits, new

    def boundary_copy(cache):
        saved = getattr(cache, "boundary", None)
        return copy_cache(cache if saved is None else saved)

    def keeps_rejected(model, cache, n):
        return rollback(model, cache, max(int(n) - 1, 0))

    def leaky_padded_prefill(model, ids, attention_mask):
        logits, _ = model.forward_padded(ids, attention_mask)
        return logits, ServingCache(model(ids)[1], None)

    def in_place_extend(model, cache, ids):
        logits, new = extend(model, cache, ids)
        if cache is None:
            return logits, new
        for old, fresh in zip(cache, new, strict=True):
            for a, b in zip(old, fresh, strict=True):
                a.copy_(b)
        return logits, ServingCache(cache, new.pos, new.prev, new.last)

    def window_dropped_extend(model, cache, ids):
        if cache is None:
            return extend(model, cache, ids)
        empty = [(w.new_zeros(w.shape), st, z) for w, st, z in cache]
        logits, new = extend(model, ServingCache(empty, cache.pos), ids)
        new.prev = ServingCache(cache, cache.pos)
        return logits, new

    def bfloat16_copy(cache):
        states = [tuple(x.to(torch.bfloat16).to(x.dtype) for x in st) for st in cache]
        return ServingCache(states, cache.pos, cache.prev, cache.last)

    def short_chunk_extend(model, cache, ids):
        logits, new = extend(model, cache, ids)
        if cache is None or ids.shape[1] >= model.cfg.conv_width - 1:
            return logits, new
        states = []
        for old, fresh in zip(cache, new, strict=True):
            old[0].copy_(fresh[0])
            states.append((old[0], *fresh[1:]))
        return logits, ServingCache(states, new.pos, new.prev, new.last)

    return {
        "model_restore_at_chunk_boundary": {"extend": boundary_extend,
                                            "copy_cache": boundary_copy},
        "model_rollback_keeps_rejected_token": {"rollback": keeps_rejected},
        "model_padded_prefill_state_leaks": {"padded_prefill": leaky_padded_prefill},
        "model_extend_updates_cache_in_place": {"extend": in_place_extend},
        "model_chunk_window_not_carried": {"extend": window_dropped_extend},
        "model_saved_state_in_bfloat16": {"copy_cache": bfloat16_copy},
        "model_short_chunk_overwrites_window": {"extend": short_chunk_extend},
    }[name]


#: The mutants that replace a serving call (the rest subclass the model).
SERVING_MUTANTS = ("model_restore_at_chunk_boundary", "model_rollback_keeps_rejected_token",
                   "model_padded_prefill_state_leaks", "model_extend_updates_cache_in_place",
                   "model_chunk_window_not_carried", "model_saved_state_in_bfloat16",
                   "model_short_chunk_overwrites_window")

#: name → (description, intended killers: ``models::<property>``).
MODEL_MUTANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "model_packed_state_carried": (
        "tiny LM: packed sequences continue from the previous sequence's state",
        ("models::test_packed_sequences_equal_separate_runs",)),
    "model_padding_leaks_into_state": (
        "tiny LM: padded positions run as token 0 (left padding enters the state)",
        ("models::test_left_padding_equals_unpadded",)),
    "model_cache_ignored_after_first_step": (
        "tiny LM: step returns the cache it was given, not the updated one",
        ("models::test_decode_equals_full_forward_at_every_split",
         "models::test_greedy_generate_with_cache_equals_without",
         "models::test_gradients_through_the_cache_equal_full_forward")),
    "model_cache_updated_in_place": (
        "tiny LM: step updates the cache's S and z in place (backward breaks)",
        ("models::test_gradients_through_the_cache_equal_full_forward",
         "models::test_second_backward_through_the_cache")),
    "model_right_padding_read_as_left": (
        "tiny LM: a padded row runs its last n tokens (masks read as left padding)",
        ("models::test_right_padding_equals_unpadded",)),
    "model_final_norm_over_batch": (
        "tiny LM: the final RMSNorm takes its statistics over the whole batch",
        ("models::test_batch_elements_are_independent",)),
    "model_exp_features_overflow": (
        "tiny LM: attention features exp(x) without a shift (overflow at large weights)",
        ("models::test_outputs_stay_finite_over_an_init_scale_sweep",)),
    "model_init_ignores_seed": (
        "tiny LM: weights drawn from the global generator, the seed ignored",
        ("models::test_same_seed_and_input_give_the_same_output",)),
    "model_split_off_by_one": (
        "tiny LM: the prefill's cache holds T - 1 tokens",
        ("models::test_decode_equals_full_forward_at_every_split",
         "models::test_greedy_generate_with_cache_equals_without",
         "models::test_gradients_through_the_cache_equal_full_forward")),
    "model_restore_at_chunk_boundary": (
        "tiny LM: a saved state is the one at the last chunk boundary (wrong position)",
        ("models::test_restored_state_continues_as_if_never_stopped",
         "models::test_continuations_from_one_saved_state_are_independent")),
    "model_rollback_keeps_rejected_token": (
        "tiny LM: rollback(n) drops n - 1 tokens (one rejected draft kept)",
        ("models::test_speculative_rollback_equals_the_accepted_state",)),
    "model_padded_prefill_state_leaks": (
        "tiny LM: a masked prefill's state includes the pad tokens",
        ("models::test_padded_prefill_then_decoding_equals_unpadded",)),
    "model_extend_updates_cache_in_place": (
        "tiny LM: extend writes the new state into the given cache's tensors",
        ("models::test_restored_state_continues_as_if_never_stopped",
         "models::test_continuations_from_one_saved_state_are_independent",
         "models::test_speculative_rollback_equals_the_accepted_state")),
    "model_chunk_window_not_carried": (
        "tiny LM: extend from a cache starts the convolution from an empty window",
        ("models::test_chunked_prefill_equals_one_prefill",)),
    "model_saved_state_in_bfloat16": (
        "tiny LM: a saved state is kept in bfloat16 (lower than the model's precision)",
        ("models::test_restored_state_continues_as_if_never_stopped",
         "models::test_continuations_from_one_saved_state_are_independent")),
    "model_short_chunk_overwrites_window": (
        "tiny LM: a chunk shorter than the window overwrites the given cache's window",
        ("models::test_restored_state_continues_as_if_never_stopped",)),
}


def _make(name: str, prefix: str) -> Callable[[], list[Target]]:
    def make() -> list[Target]:
        from kernel_verify.properties.builtin_models import tiny_lm_target

        if name == "model_init_ignores_seed":
            return [tiny_lm_target(f"{prefix}:{name}", build=_unseeded_build)]
        if name in SERVING_MUTANTS:
            return [tiny_lm_target(f"{prefix}:{name}", **_serving_overrides(name))]
        return [tiny_lm_target(f"{prefix}:{name}", cls=_classes()[name])]

    return make


MUTANTS: list[Mutant] = [
    Mutant(name, "model", desc, _make(name, "mutant"), killers, loader=LOADER)
    for name, (desc, killers) in MODEL_MUTANTS.items()
]
CONTROLS: list[Mutant] = [
    Mutant("model_tiny_lm", "model", "tiny LM with every defect off (the mutants' skeleton)",
           _make("model_tiny_lm", "control"), loader=CONTROL_LOADER),
]
_MUTANTS = {m.name: m for m in MUTANTS}
_CONTROLS = {c.name: c for c in CONTROLS}


def __getattr__(attr: str) -> list[Target]:
    """``target_<name>``: a mutant's targets; ``control_<name>``: its twin's."""
    if attr.startswith("target_") and attr.removeprefix("target_") in _MUTANTS:
        return _MUTANTS[attr.removeprefix("target_")].targets
    if attr.startswith("control_") and attr.removeprefix("control_") in _CONTROLS:
        return _CONTROLS[attr.removeprefix("control_")].targets
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


__all__ = ["CONTROLS", "MODEL_MUTANTS", "MUTANTS"]
