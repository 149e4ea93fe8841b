"""The built-in model targets: the tiny causal LM of :mod:`kernel_verify.impls.torch.tiny_lm`
(this project's linear-attention forms, a causal convolution, an MLP) and the hybrid LM of
:mod:`kernel_verify.impls.torch.hybrid_lm` (the same model with a sliding-window softmax +
linear-attention mixer, its window kept as a ring buffer) as
:class:`~kernel_verify.properties.model_protocol.ModelTarget` offering every call, float32 and
float64. :func:`tiny_lm_target` and :func:`hybrid_lm_target` also serve the model mutants (a
subclass of the model, or one call replaced, with one defect) and their correct twins.

The serving calls (``extend``, ``copy_cache``, ``rollback``, ``padded_prefill``) keep the
model's cache in a :class:`ServingCache`: the list of block states the model takes, with the
position reached and, for ``rollback``, the cache before the last call that advanced it and
that call's ids. ``extend`` is ``model(ids, cache)`` (the chunk-parallel form from a state);
``copy_cache`` shares the state tensors (the model never writes into a cache it is given);
``rollback(n)`` re-runs the last call's first ``k − n`` tokens from the cache it started from;
``padded_prefill`` is ``forward_padded`` (each row on its valid positions, one state per row).
Declared: ``chunk_sizes = (chunk_size,)`` (the chunked scan's block; the hybrid LM: its window
``W``, where the ring buffer fills and wraps) and ``conv_window = conv_width``.
"""

from __future__ import annotations

from typing import Any

from kernel_verify.impls.systems import get_system
from kernel_verify.properties.model_protocol import ModelTarget

__all__ = ["ServingCache", "hybrid_lm_calls", "hybrid_lm_target", "model_targets",
           "tiny_lm_calls", "tiny_lm_target"]

#: What the tiny LM claims: its descriptor's claims (:mod:`kernel_verify.impls.systems`).
CLAIMS = get_system("tiny_lm").target_claims()
#: What the hybrid LM claims (its descriptor's).
HYBRID_CLAIMS = get_system("hybrid_lm").target_claims()


class ServingCache(list):
    """The tiny LM's cache as the serving calls keep it (module docstring): the block states,
    ``pos`` (tokens consumed; None after a padded prefill, whose rows differ), ``prev`` (the
    cache before the last ``extend``/``step``/prefill, without its own history; None: the empty
    state) and ``last`` (that call's ids, ``(B, k)``)."""

    def __init__(self, states: Any, pos: int | None = 0, prev: ServingCache | None = None,
                 last: Any = None) -> None:
        super().__init__(states)
        self.pos, self.prev, self.last = pos, prev, last


def _states(cache: Any) -> list | None:
    return None if cache is None else list(cache)


def _advanced(states: list, before: Any, ids: Any) -> ServingCache:
    """The cache after ``ids (B, k)`` from ``before`` (None: the empty state)."""
    pos = 0 if before is None else getattr(before, "pos", None)
    prev = None if before is None else ServingCache(before, pos)
    return ServingCache(states, None if pos is None else pos + ids.shape[1], prev, ids)


def serving_calls() -> dict[str, Any]:
    """The tiny LM's ``prefill``/``step`` and serving calls over :class:`ServingCache`."""

    def prefill(model, ids):
        logits, states = model(ids)
        return logits, _advanced(states, None, ids)

    def step(model, cache, ids_t):
        logits, states = model.step(ids_t, _states(cache))
        return logits, _advanced(states, cache, ids_t.reshape(-1, 1))

    def extend(model, cache, ids):
        logits, states = model(ids, _states(cache))
        return logits, _advanced(states, cache, ids)

    def copy_cache(cache):
        return ServingCache(cache, cache.pos, cache.prev, cache.last)

    def rollback(model, cache, n):
        last = cache.last
        if last is None:
            raise ValueError("rollback: the cache was made by no extend or step")
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= last.shape[1]:
            raise ValueError(f"rollback: n must be an int in [0, {last.shape[1]}] (the "
                             f"tokens of the last extend), got {n!r}")
        if n == 0:
            return cache
        keep = last[:, :last.shape[1] - n]
        if keep.shape[1] == 0:
            return (ServingCache(model.empty_cache(last.shape[0]), 0) if cache.prev is None
                    else copy_cache(cache.prev))
        return extend(model, cache.prev, keep)[1]

    def padded_prefill(model, ids, attention_mask):
        logits, states = model.forward_padded(ids, attention_mask)
        return logits, ServingCache(states, None)

    return {"prefill": prefill, "step": step, "extend": extend, "copy_cache": copy_cache,
            "rollback": rollback, "padded_prefill": padded_prefill}


def _lm_calls(cls: Any, config: Any, chunk_sizes: tuple[int, ...]) -> dict[str, Any]:
    """The keyword arguments of a :class:`ModelTarget` for a :class:`TinyLM` subclass ``cls``
    at ``config``, declaring ``chunk_sizes`` and its convolution's width."""
    import torch

    from kernel_verify.impls.torch.tiny_lm import build_tiny_lm

    def build(seed: int, *, init_scale: float = 1.0, dtype: str = "float32"):
        return build_tiny_lm(seed, init_scale=init_scale, dtype=getattr(torch, dtype),
                             config=config, cls=cls)

    return {
        "build": build,
        "forward": lambda model, ids: model(ids)[0],
        **serving_calls(),
        "chunk_sizes": chunk_sizes,
        "conv_window": config.conv_width,
        "generate": lambda model, ids, max_new_tokens: model.generate(ids, max_new_tokens),
        "packed": lambda model, ids, cu_seqlens: model.forward_packed(ids, cu_seqlens)[0],
        "padded": lambda model, ids, attention_mask: model.forward_padded(ids,
                                                                          attention_mask)[0],
        "vocab_size": config.vocab_size,
    }


def tiny_lm_calls(cls: Any = None, config: Any = None) -> dict[str, Any]:
    """The keyword arguments of a :class:`ModelTarget` for :class:`TinyLM` (or subclass
    ``cls``) at ``config`` (default :class:`TinyLMConfig`)."""
    from kernel_verify.impls.torch.tiny_lm import TinyLM, TinyLMConfig

    config = config or TinyLMConfig()
    return _lm_calls(cls or TinyLM, config, (config.chunk_size,))


def hybrid_lm_calls(cls: Any = None, config: Any = None) -> dict[str, Any]:
    """The keyword arguments of a :class:`ModelTarget` for :class:`HybridLM` (or subclass
    ``cls``) at ``config`` (default :class:`HybridLMConfig`): the softmax window ``W`` declared
    as its chunk size, so the serving properties cut at ``W − 1, W, W + 1, 2W + 1`` (where the
    ring buffer fills and wraps around)."""
    from kernel_verify.impls.torch.hybrid_lm import HybridLM, HybridLMConfig

    config = config or HybridLMConfig()
    return _lm_calls(cls or HybridLM, config, (config.window,))


def tiny_lm_target(name: str = "model:tiny_lm", cls: Any = None, **kw: Any) -> ModelTarget:
    """The tiny LM (or a subclass ``cls``) as a model target; ``kw`` overrides fields."""
    fields = {**tiny_lm_calls(cls), "claims": CLAIMS, **kw}
    return ModelTarget(name, **fields)


def hybrid_lm_target(name: str = "model:hybrid_lm", cls: Any = None, **kw: Any) -> ModelTarget:
    """The hybrid LM (or a subclass ``cls``) as a model target; ``kw`` overrides fields."""
    fields = {**hybrid_lm_calls(cls), "claims": HYBRID_CLAIMS, **kw}
    return ModelTarget(name, **fields)


def model_targets() -> list[ModelTarget]:
    """The built-in model targets."""
    return [tiny_lm_target(), hybrid_lm_target()]
