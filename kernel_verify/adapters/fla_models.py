"""flash-linear-attention's causal LMs (``fla.models``, the ``flash-linear-attention``
distribution on top of ``fla-core``) as :class:`~kernel_verify.properties.model_protocol.
ModelTarget` s, at tiny configs and random init (nothing downloaded), float32, their Triton
kernels run under Triton's interpreter on a CPU with the workarounds of
:mod:`kernel_verify.adapters._triton_interpreter` (see :mod:`kernel_verify.adapters.fla`).

``kernel-verify check kernel_verify.adapters.fla_models:targets``. Each family is built from its
own config class with ``hidden_size=32``, 2 layers, ``vocab_size=64`` and its
``initializer_range`` default, through :func:`kernel_verify.adapters.hf_models.hf_model_target`:
``model(input_ids, past_key_values=cache, use_cache=True)`` for prefill and one-token decoding,
``generate`` (fla's ``FLAGenerationMixin``), packed input through the ``cu_seqlens`` keyword fla's
models pass to their layers, and ``attention_mask`` for left padding (fla's layers unpad by the
mask; fla supports left padding only, so right padding is not claimed). Not float64: fla's kernels
accumulate in float32 (tolerances: the stated float32 assumption of
:mod:`kernel_verify.properties.model_checks`).

Families (:data:`FAMILIES`): linear attention, GLA, RetNet, HGRN2, Mamba2, RWKV7 — and which fla
families do not run here, with the reason (:data:`NOT_RUN`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import cache
from typing import Any

from kernel_verify.adapters import _triton_interpreter as interp
from kernel_verify.adapters._lazy import need
from kernel_verify.adapters.hf_models import hf_model_target
from kernel_verify.properties.model_protocol import ModelTarget

if "triton" not in sys.modules:  # before anything imports triton (the check's subprocess)
    interp.enable()

HIDDEN, LAYERS, VOCAB = 32, 2, 64
#: Family → (config class, model class, extra config fields) in ``fla.models``.
FAMILIES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "linear_attn": ("LinearAttentionConfig", "LinearAttentionForCausalLM", {"num_heads": 2}),
    "gla": ("GLAConfig", "GLAForCausalLM", {"num_heads": 2}),
    "retnet": ("RetNetConfig", "RetNetForCausalLM", {"num_heads": 2}),
    "hgrn2": ("HGRN2Config", "HGRN2ForCausalLM", {"num_heads": 2, "expand_ratio": 16}),
    "mamba2": ("Mamba2Config", "Mamba2ForCausalLM", {"num_heads": 4, "head_dim": 16,
                                                     "state_size": 16, "expand": 2,
                                                     "n_groups": 1, "chunk_size": 8}),
    "rwkv7": ("RWKV7Config", "RWKV7ForCausalLM", {"head_dim": 16}),
}
#: fla model families that do not run here, and why (measured with fla 0.6.0, triton 3.9.0).
NOT_RUN: dict[str, str] = {
    "based": "fla 0.6.0 ships Based as a layer (fla.layers.BasedLinearAttention), with no "
             "causal-LM model class in fla.models",
    "hgrn": "HGRN's training-mode kernel fails under Triton's interpreter ('mask has "
            "unsupported dtype')",
    "delta_net": "DeltaNet's chunk kernels refuse float32 inputs on this path",
    "gated_deltanet": "GatedDeltaNet's chunk kernels refuse float32 inputs on this path",
}
#: Seconds of one forward at the suite's sizes under the interpreter (order of magnitude,
#: measured on the 2-core machine): the ci profiles run fewer examples of each property.
CALL_SECONDS = {"rwkv7": 2.0}
#: The longest sequence drawn (each decoded token is a kernel launch under the interpreter).
MAX_LEN = 8
#: The init-scale ladder of the power controls (a short one: every rung costs calls).
INIT_SCALES = (1.0, 4.0, 16.0)
#: fla's RWKV7 initialises its output projection and feed-forward value matrix to zero (a fresh
#: block is the identity, no context reaches the logits): they get N(0, 0.02²) entries, the
#: models' ``initializer_range`` (hf_models.scale_weights).
ZERO_STD = 0.02
CLAIMS = frozenset({"differentiable", "left_padding"})
#: Families whose packed input ignores ``cu_seqlens`` (conformance findings, confirmed by
#: ``python -m kernel_verify.adapters._model_confirm fla_models_cu_seqlens``).
PACKING_DROPPED = {"linear_attn": "LinearAttentionForCausalLM accepts `cu_seqlens` and drops it",
                   "mamba2": "fla's Mamba2 layer ignores `cu_seqlens` on every path"}
#: The first transformers release whose ``generate`` passes the cache as ``cache=`` (fla's
#: models read ``past_key_values``): 5.23.0 still passes ``past_key_values``.
CACHE_RENAMED_IN = (5, 24)
#: Families whose ``generate`` loses the cache from that release on (measured with 5.24.0).
GENERATE_AFFECTED = ("linear_attn", "gla", "retnet", "hgrn2", "mamba2", "rwkv7")


def _transformers_version() -> tuple[int, ...]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return tuple(int(p) for p in version("transformers").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return (0,)


def known_failures(family: str) -> dict[str, str]:
    """The declared known failures of one family (reports/conformance/fla_models.md), read
    without importing fla or transformers (the transformers version from its metadata)."""
    page = "reports/conformance/fla_models.md"
    out = {}
    if family in PACKING_DROPPED:
        out["test_packed_sequences_equal_separate_runs"] = (
            f"{PACKING_DROPPED[family]} ({page}, finding 'fla_models_cu_seqlens')")
    if family in GENERATE_AFFECTED and _transformers_version() >= CACHE_RENAMED_IN:
        out["test_greedy_generate_with_cache_equals_without"] = (
            "generate() drops the cache with transformers >= 5.24: every step after the first "
            f"sees only its own token ({page}, finding 'fla_models_generate_cache')")
    return out


@cache
def _fla_models():
    """``fla.models`` imported under the interpreter with the workarounds applied."""
    try:
        interp.enable()
    except interp.TritonAlreadyImported as err:
        raise RuntimeError(f"fla model targets: {err}") from None
    models = need("fla_models")
    interp.patch_autotuner()
    interp.patch_nested_lang()
    interp.patch_kernel_modules("fla.")
    return models


def _maker(family: str) -> Callable[[], Any]:
    cfg_name, model_name, extra = FAMILIES[family]

    def make():
        fm = _fla_models()
        cfg = getattr(fm, cfg_name)(hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                    vocab_size=VOCAB, **extra)
        return getattr(fm, model_name)(cfg)

    return make


def family_target(family: str) -> ModelTarget:
    """One fla family as a model target."""
    if family not in FAMILIES:
        raise ValueError(f"fla family must be one of {', '.join(FAMILIES)}, got {family!r}")
    return hf_model_target(f"fla.models:{family}", _maker(family), vocab_size=VOCAB,
                           claims=CLAIMS, packed_arg="cu_seqlens",
                           call_seconds=CALL_SECONDS.get(family, 0.5), max_len=MAX_LEN,
                           init_scales=INIT_SCALES, zero_std=ZERO_STD,
                           known_failures=known_failures(family))


def targets() -> list[ModelTarget]:
    """Every family of :data:`FAMILIES`."""
    return [family_target(f) for f in FAMILIES]


def __getattr__(attr: str) -> ModelTarget:
    """``target_<family>``: one family (``kernel-verify check
    kernel_verify.adapters.fla_models:target_gla``)."""
    if attr.startswith("target_") and attr.removeprefix("target_") in FAMILIES:
        return family_target(attr.removeprefix("target_"))
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
