"""A thin adapter from HF-style causal LMs to :class:`~kernel_verify.properties.model_protocol.
ModelTarget`: any ``torch.nn.Module`` called as ``model(input_ids=…, past_key_values=…,
use_cache=True)`` returning ``.logits`` and ``.past_key_values``, with a ``generate`` method
(transformers' ``GenerationMixin``). Duck-typed: nothing here imports transformers.

* **build**: ``make()`` constructs the model from its config (random init, nothing
  downloaded) under ``torch.manual_seed(seed)`` (the global generator is restored after);
  every parameter with two or more dimensions (embeddings, projections, convolutions) is then
  multiplied by ``init_scale``: the spread of the library's own init, scaled. One-dimensional
  parameters (norm weights, biases, decay and step parameters such as Mamba's ``A_log`` and
  ``dt_bias``) keep their init. With ``zero_std``, matrices the library initialises to exactly
  zero get ``N(0, zero_std²)`` entries first (:func:`scale_weights`). ``dtype="float64"``: the
  float32 model cast, so its weights are exactly the float32 model's.
* **forward**: ``model(input_ids=ids, use_cache=False).logits``.
* **prefill / step**: ``model(input_ids=ids, use_cache=True)``, then one token per call with
  the cache under the keyword ``cache_arg`` (``past_key_values``; ``"auto"``: read from the
  model's ``forward`` signature, :func:`cache_keyword`; transformers 4's Mamba takes
  ``cache_params`` and a ``cache_position``, given then). ``step`` with no cache runs the token
  from the empty state.
* **generate**: ``model.generate(ids, max_new_tokens=n, do_sample=False,
  output_logits=True, return_dict_in_generate=True, use_cache=True)`` with the end-of-sequence
  token unset (every row generates ``n`` tokens); the scores are the raw logits of each step.
* **packed**: ``model(input_ids=ids, <packed_arg>=cu_seqlens).logits`` where the library
  accepts packed input (fla's models: ``cu_seqlens``).
* **padded**: ``model(input_ids=ids, attention_mask=mask).logits``.
* **extend** (``serving=True``; docs/math.md §15.1): ``model(input_ids=chunk,
  <cache_arg>=cache, use_cache=True)`` advances by a chunk (with ``cache_position`` the
  chunk's positions where the model takes one); **copy_cache**: ``copy.deepcopy`` of the cache
  object (HF caches are updated in place, so a saved state must be a deep copy).
  ``chunk_sizes`` and ``conv_window`` declare the model's chunked scan and convolution, where
  the serving properties cut.
* **padded_prefill** (``padded_prefill=True``, with the claim ``left_padding``):
  ``model(input_ids=ids, attention_mask=mask, use_cache=True)``, then one-token steps with no
  mask: right for a recurrent model, whose state leaves the pads out; a model that keeps keys
  of the pads in its cache needs the mask at every step and should not declare it. With
  ``decode_mask=True`` the steps (and extends) after a masked prefill pass the mask extended
  by ones, as ``generate`` does at every step: for a model whose state leaves the pads out but
  whose positions count them (fla's RetNet: its rotary offset is the cache's length, corrected
  per row by the mask it is given; without it each row's positions run on from the padded
  length).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from kernel_verify.properties.model_protocol import ModelTarget

__all__ = ["cache_keyword", "hf_model_target", "scale_weights", "tiny_model_maker"]

#: The size of the HF-style models built for checking: hidden width, layers, vocabulary.
HIDDEN, LAYERS, VOCAB = 32, 2, 64


def tiny_model_maker(library: Callable[[], Any], config: str, model: str,
                     fields: Mapping[str, Any]) -> Callable[[], Any]:
    """``make()`` for :func:`hf_model_target`: ``library()`` (the module, imported when the model
    is first built) ``.<model>(<config>(hidden_size=HIDDEN, num_hidden_layers=LAYERS,
    vocab_size=VOCAB, **fields))``, randomly initialised (``fields`` may override the three)."""

    def make():
        lib = library()
        cfg = getattr(lib, config)(**{"hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
                                      "vocab_size": VOCAB, **fields})
        return getattr(lib, model)(cfg)

    return make


def scale_weights(model: Any, init_scale: float, zero_std: float | None = None) -> Any:
    """Multiply every parameter of ``model`` with ``ndim ≥ 2`` by ``init_scale`` (in place).

    ``zero_std``: a matrix the library initialises to exactly zero (RWKV7's output projection
    and its feed-forward value matrix, for instance, so that a fresh block is the identity) is
    first given ``N(0, zero_std²)`` entries, drawn from the seeded generator: otherwise no
    context reaches the logits at any init scale and no check of the cache, the packing or the
    padding could fail (the power control would say so). The identities checked hold for any
    weights."""
    import torch

    with torch.no_grad():
        for p in model.parameters():
            if p.ndim < 2:
                continue
            if zero_std is not None and not bool(p.any()):
                p.normal_(0.0, float(zero_std))
            if init_scale != 1.0:
                p.mul_(float(init_scale))
    return model


#: Cache keywords of HF-style models, in the order :func:`cache_keyword` tries them.
CACHE_KEYWORDS = ("past_key_values", "cache", "cache_params", "state")


def cache_keyword(model: Any) -> str:
    """The keyword ``model.forward`` takes its cache under (and its output holds it under):
    transformers 5 renamed ``past_key_values``/``cache_params``/``state`` to ``cache`` for some
    models; a library's own models may keep the old name."""
    params = inspect.signature(type(model).forward).parameters
    for name in CACHE_KEYWORDS:
        if name in params:
            return name
    raise TypeError(f"{type(model).__name__}.forward takes none of the cache keywords "
                    f"{', '.join(CACHE_KEYWORDS)}: {list(params)}")


def _quiet_generation(model: Any) -> None:
    """Greedy generation of exactly ``max_new_tokens``: no end-of-sequence token, a pad id."""
    cfg = getattr(model, "generation_config", None)
    if cfg is not None:
        cfg.eos_token_id = None
        if getattr(cfg, "pad_token_id", None) is None:
            cfg.pad_token_id = 0
        cfg.do_sample = False


def hf_model_target(name: str, make: Callable[[], Any], *, vocab_size: int,
                    claims: frozenset[str] = frozenset(), cache_arg: str = "past_key_values",
                    cache_position: bool = False, packed_arg: str | None = None,
                    generate: bool = True, float64: bool = False, max_len: int = 12,
                    init_scales: tuple[float, ...] = (1.0, 4.0, 16.0, 64.0),
                    call_seconds: float | None = None, zero_std: float | None = None,
                    known_failures: Mapping[str, str] | None = None, serving: bool = False,
                    padded_prefill: bool = False, chunk_sizes: tuple[int, ...] = (),
                    conv_window: int | None = None, decode_mask: bool = False,
                    cache_calls: bool = True) -> ModelTarget:
    """A :class:`ModelTarget` for the HF-style model ``make()`` builds (module docstring).
    ``claims``: what the model claims (``differentiable``, ``left_padding``,
    ``right_padding``; ``float64`` is added by ``float64=True``); padding claims make the
    ``padded`` call available. ``serving``: offer ``extend`` and ``copy_cache``;
    ``padded_prefill``: offer a masked prefill decoded from (needs the claim ``left_padding``;
    ``decode_mask``: its mask passed on to the steps after it, module docstring);
    ``chunk_sizes``, ``conv_window``: the declared boundaries the serving properties cut at.
    ``cache_calls=False``: a model that returns no cache (it keeps its state inside its
    modules, as transformers' RecurrentGemma does) offers no ``prefill``/``step`` and no
    serving calls; its full forward, ``generate`` and padding are still checked. A model that
    returns none while ``cache_calls`` is True is refused at its first cache call, naming
    the flag."""
    # the helper's own arguments (issue 45); the rest are checked by ModelTarget
    if not callable(make):
        raise TypeError(f"hf_model_target: make must be a callable that builds the model "
                        f"(make() -> model), got {type(make).__name__} {make!r}")
    if not isinstance(cache_arg, str) or cache_arg not in ("auto", *CACHE_KEYWORDS):
        raise (ValueError if isinstance(cache_arg, str) else TypeError)(
            f"hf_model_target: cache_arg must be 'auto' or one of {', '.join(CACHE_KEYWORDS)} "
            f"(the keyword the model takes its cache under), got {cache_arg!r}")
    if packed_arg is not None and (not isinstance(packed_arg, str)
                                   or not packed_arg.isidentifier()):
        raise (ValueError if isinstance(packed_arg, str) else TypeError)(
            f"hf_model_target: packed_arg must be None or the keyword the model takes "
            f"cu_seqlens under (e.g. 'cu_seqlens'), got {packed_arg!r}")
    for flag, value in (("cache_position", cache_position), ("generate", generate),
                        ("float64", float64), ("serving", serving),
                        ("padded_prefill", padded_prefill), ("decode_mask", decode_mask),
                        ("cache_calls", cache_calls)):
        if not isinstance(value, bool):
            raise TypeError(f"hf_model_target: {flag} must be a bool, got "
                            f"{type(value).__name__} {value!r}")
    if zero_std is not None and (isinstance(zero_std, bool)
                                 or not isinstance(zero_std, int | float)):
        raise TypeError(f"hf_model_target: zero_std must be None or a finite number > 0, got "
                        f"{type(zero_std).__name__} {zero_std!r}")
    if zero_std is not None and not 0 < zero_std < float("inf"):
        raise ValueError(f"hf_model_target: zero_std must be None or a finite number > 0 (the "
                         f"std of weights the library initialises to zero), got {zero_std!r}")
    for field_name, value in (("claims", claims), ("chunk_sizes", chunk_sizes)):
        # (a str would become a set or tuple of its letters)
        if isinstance(value, str | bytes) or not isinstance(value, set | frozenset | tuple | list):
            raise TypeError(f"hf_model_target: {field_name} must be a "
                            f"{'set of claim names' if field_name == 'claims' else 'tuple of ints'}"
                            f", got {type(value).__name__} {value!r}")
    if not cache_calls and (serving or padded_prefill):
        raise ValueError(f"hf_model_target: cache_calls=False (the model returns no cache) "
                         f"rules out serving={serving} and padded_prefill={padded_prefill}, "
                         "which continue from a cache")
    if known_failures is not None and not isinstance(known_failures, Mapping):
        raise TypeError(f"hf_model_target: known_failures must be None or a mapping property "
                        f"name -> reason, got {type(known_failures).__name__} {known_failures!r}")
    import torch

    def build(seed: int, *, init_scale: float = 1.0, dtype: str = "float32"):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            model = make()
            scale_weights(model, init_scale, zero_std)
        _quiet_generation(model)
        model = model.to(getattr(torch, dtype)).eval()
        return model

    def forward(model, ids):
        return model(input_ids=ids, use_cache=False).logits

    def keyword(model) -> str:
        return cache_keyword(model) if cache_arg == "auto" else cache_arg

    def cache_of(out, model, call: str):
        """The cache ``out`` holds under the model's keyword; a model returning none is a
        declaration problem named at the call (the probe refuses it before any property)."""
        kw = keyword(model)
        cache = getattr(out, kw, None)
        if cache is None:
            fields = [k for k in getattr(out, "keys", lambda: [])()]
            raise ValueError(
                f"target {name!r}: {call} found no cache under {kw!r} in what "
                f"{type(model).__name__} returned ({type(out).__name__}, fields "
                f"{fields}) with use_cache=True: the model keeps its state elsewhere (inside "
                "its modules) or returns it under another keyword; pass cache_arg= naming it, "
                "or cache_calls=False to check the full forward and generate only")
        return cache

    # The opaque cache: (the model's cache, tokens seen, the running mask or None).
    def prefill(model, ids):
        out = model(input_ids=ids, use_cache=True)
        return out.logits, (cache_of(out, model, "prefill"), ids.shape[1], None)

    def running_mask(cache, kw: dict[str, Any], k: int):
        """The mask of a masked prefill extended by ``k`` ones, passed on (``decode_mask``)."""
        if cache is None or cache[2] is None:
            return None
        mask = torch.cat([cache[2], cache[2].new_ones(cache[2].shape[0], k)], 1)
        kw["attention_mask"] = mask
        return mask

    def step(model, cache, ids_t):
        kw: dict[str, Any] = {"use_cache": True}
        slot = keyword(model)
        if cache is not None:
            kw[slot] = cache[0]
            if cache_position or slot == "cache_params":
                kw["cache_position"] = torch.tensor([cache[1]], dtype=torch.int64)
        mask = running_mask(cache, kw, 1)
        out = model(input_ids=ids_t.reshape(-1, 1), **kw)
        return out.logits[:, -1], (cache_of(out, model, "step"),
                                   1 if cache is None else cache[1] + 1, mask)

    def gen(model, ids, max_new_tokens):
        out = model.generate(ids, max_new_tokens=max_new_tokens, min_new_tokens=0,
                             do_sample=False, output_logits=True, return_dict_in_generate=True,
                             use_cache=True, attention_mask=torch.ones_like(ids))
        return out.sequences[:, ids.shape[1]:], torch.stack(tuple(out.logits), 1)

    def extend(model, cache, ids):
        kw: dict[str, Any] = {"use_cache": True}
        slot, pos = keyword(model), 0 if cache is None else cache[1]
        if cache is not None:
            kw[slot] = cache[0]
            if cache_position or slot == "cache_params":
                kw["cache_position"] = torch.arange(pos, pos + ids.shape[1], dtype=torch.int64)
        mask = running_mask(cache, kw, ids.shape[1])
        out = model(input_ids=ids, **kw)
        return out.logits, (cache_of(out, model, "extend"), pos + ids.shape[1], mask)

    def copy_cache(cache):
        return (copy.deepcopy(cache[0]), cache[1], cache[2])

    def masked_prefill(model, ids, attention_mask):
        out = model(input_ids=ids, attention_mask=attention_mask, use_cache=True)
        return out.logits, (cache_of(out, model, "padded_prefill"), ids.shape[1],
                            attention_mask if decode_mask else None)

    def packed(model, ids, cu_seqlens):
        return model(input_ids=ids, use_cache=False, **{packed_arg: cu_seqlens}).logits

    def padded(model, ids, attention_mask):
        return model(input_ids=ids, attention_mask=attention_mask, use_cache=False).logits

    all_claims = frozenset(claims) | ({"float64"} if float64 else set())
    padding = bool({"left_padding", "right_padding"} & all_claims)
    if padded_prefill and "left_padding" not in all_claims:
        raise ValueError(f"{name}: padded_prefill=True needs the claim 'left_padding' (the "
                         "masked prefill takes left-padded batches)")
    return ModelTarget(
        name, build=build, forward=forward, vocab_size=vocab_size, claims=all_claims,
        prefill=prefill if cache_calls else None, step=step if cache_calls else None,
        generate=gen if generate else None,
        packed=packed if packed_arg else None, padded=padded if padding else None,
        extend=extend if serving else None, copy_cache=copy_cache if serving else None,
        padded_prefill=masked_prefill if padded_prefill else None,
        chunk_sizes=tuple(chunk_sizes), conv_window=conv_window,
        max_len=max_len, init_scales=init_scales, call_seconds=call_seconds,
        known_failures=dict(known_failures or {}))
