"""transformers' own state-space and RNN causal LMs (Mamba, Mamba2, RWKV) on their torch path,
as :class:`~kernel_verify.properties.model_protocol.ModelTarget` s: tiny configs, random init,
nothing downloaded (``kernel-verify check kernel_verify.adapters.transformers_models:targets``).

Without the ``mamba_ssm`` and ``causal_conv1d`` CUDA packages transformers runs its reference
PyTorch implementation (its own warning says so), which also runs in float64: these targets
claim ``float64``, so every tolerance is derived from the float64 run of the same weights.
Built through :func:`kernel_verify.adapters.hf_models.hf_model_target` with the cache keyword of
the installed transformers, read from the model's ``forward`` signature (``cache`` for Mamba
and Mamba2 in transformers 5.24, ``cache_params`` in 4.x; ``state`` for RWKV).
Mamba and Mamba2 take an ``attention_mask`` (claimed: left padding, the padding transformers'
generation uses); RWKV has no cache-aware mask and is not claimed for padding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel_verify.adapters.hf_models import hf_model_target
from kernel_verify.properties.model_protocol import ModelTarget

HIDDEN, LAYERS, VOCAB = 32, 2, 64
#: Family → (config class, model class, config fields, extra claims).
FAMILIES: dict[str, tuple[str, str, dict[str, Any], frozenset[str]]] = {
    "mamba": ("MambaConfig", "MambaForCausalLM",
              {"state_size": 8, "expand": 2, "conv_kernel": 4}, frozenset({"left_padding"})),
    "mamba2": ("Mamba2Config", "Mamba2ForCausalLM",
               {"state_size": 8, "expand": 2, "conv_kernel": 4, "num_heads": 4,
                "head_dim": 16, "n_groups": 1, "chunk_size": 4}, frozenset({"left_padding"})),
    "rwkv": ("RwkvConfig", "RwkvForCausalLM",
             {"attention_hidden_size": 32, "intermediate_size": 64, "context_length": 64},
             frozenset()),
}
CALL_SECONDS = 0.05
_PAGE = "reports/conformance/transformers_models.md"
_IN_PLACE = ("Cached decoding cannot be differentiated: the caches are updated in place "
             f"({_PAGE}, finding 'transformers_cache_in_place')")
_RWKV_BATCH = ("RWKV: one-token decoding with a batch of more than one row mixes the rows "
               f"({_PAGE}, finding 'transformers_rwkv_batch_step')")
#: Known failures as data: family → {property: reason} (the conformance page's findings).
KNOWN: dict[str, dict[str, str]] = {
    family: {"test_gradients_through_the_cache_equal_full_forward": _IN_PLACE,
             "test_second_backward_through_the_cache": _IN_PLACE}
    for family in ("mamba", "mamba2", "rwkv")
}
KNOWN["mamba"]["test_outputs_stay_finite_over_an_init_scale_sweep"] = (
    "the reference selective scan forms Δ·B·x in float32 and overflows from 64× the default "
    f"init, float64 models too ({_PAGE}, 'Minor')")
KNOWN["rwkv"].update({"test_decode_equals_full_forward_at_every_split": _RWKV_BATCH,
                      "test_greedy_generate_with_cache_equals_without": _RWKV_BATCH})


def _transformers():
    from kernel_verify.adapters._lazy import need

    return need("transformers_models")


def _maker(family: str) -> Callable[[], Any]:
    cfg_name, model_name, extra, _ = FAMILIES[family]

    def make():
        tf = _transformers()
        cfg = getattr(tf, cfg_name)(vocab_size=VOCAB, hidden_size=HIDDEN,
                                    num_hidden_layers=LAYERS, **extra)
        return getattr(tf, model_name)(cfg)

    return make


def family_target(family: str) -> ModelTarget:
    """One transformers family as a model target (the cache keyword is read from the model's
    ``forward`` when it is first called: building the list never imports transformers)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    claims = frozenset({"differentiable"}) | FAMILIES[family][3]
    return hf_model_target(f"transformers:{family}", _maker(family), vocab_size=VOCAB,
                           claims=claims, cache_arg="auto", float64=True,
                           call_seconds=CALL_SECONDS, known_failures=KNOWN.get(family, {}))


def targets() -> list[ModelTarget]:
    """Every family of :data:`FAMILIES`."""
    return [family_target(f) for f in FAMILIES]
