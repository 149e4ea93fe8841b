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

from typing import Any

from kernel_verify.adapters.hf_models import VOCAB, hf_model_target, tiny_model_maker
from kernel_verify.adapters.library import Finding, Library
from kernel_verify.properties.model_protocol import ModelTarget

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


def family_target(family: str) -> ModelTarget:
    """One transformers family as a model target (the cache keyword is read from the model's
    ``forward`` when it is first called: building the list never imports transformers)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    config, model, fields, extra_claims = FAMILIES[family]
    claims = frozenset({"differentiable"}) | extra_claims
    return hf_model_target(f"transformers:{family}",
                           tiny_model_maker(_transformers, config, model, fields),
                           vocab_size=VOCAB, claims=claims, cache_arg="auto", float64=True,
                           call_seconds=CALL_SECONDS, known_failures=KNOWN.get(family, {}))


def targets() -> list[ModelTarget]:
    """Every family of :data:`FAMILIES`."""
    return [family_target(f) for f in FAMILIES]


# ---------------------------------------------------------------------- the library's record
# What is known about the library (kernel_verify.adapters.library): the conformance page's text,
# the confirmed findings (its known failures derive from them) and their measurements.
_RIGHT = (
    "Tiny random-init `MambaForCausalLM`, `Mamba2ForCausalLM` and `RwkvForCausalLM` on "
    "transformers' reference PyTorch path (no `mamba_ssm`/`causal_conv1d`), float32 and "
    "float64 with the same weights, so every tolerance is derived from the float64 run. "
    "Mamba and Mamba2: decoding with the cache equals the full forward at every drawn split "
    "(float32), greedy `generate` with the cache equals greedy decoding without it, left "
    "padding equals the unpadded rows, rows are independent, the same seed gives the same "
    "logits.")
_MINOR = (
    "Mamba's logits are not finite from 64× its default init, float32 and float64 alike: the "
    "reference selective scan forms Δ·B·x (`deltaB_u`) in float32 (`.float()`, whatever the "
    "model's dtype), unnormalised, and it overflows there (a forward hook finds the first "
    "non-finite output at the first mixer's `out_proj` input). Declared as a known failure "
    "of the finiteness sweep: weights 64× the init are not a realistic setting, but a float64 "
    "model should not overflow there.")
_FINDINGS = (
    Finding(
        "RWKV: one-token decoding with a batch of more than one row mixes the rows",
        "transformers_rwkv_batch_step",
        "In `RwkvSelfAttention.extract_key_value` and `RwkvFeedForward.forward`, a one-token "
        "call with a state takes `shifted = state[1][:, :, layer_id]` of shape (B, H) while "
        "`hidden` is (B, 1, H): `hidden * time_mix + shifted * (1 - time_mix)` broadcasts to "
        "(B, B, H), so the step's logits come back (B, B, V) and row b's last position mixes "
        "in another row's state. Batch 1 is right (2.98e-07); batch 2 and 3 are wrong in "
        "every row (0.8 to 1.8 at logits of ~1). Greedy `generate` with a batch inherits it. "
        "Present in 5.6.2 and 5.24.0.",
        "`shifted = state[1][:, :, self.layer_id].unsqueeze(1)` (and the same for `state[0]` in "
        "the feed-forward).",
        ("test_decode_equals_full_forward_at_every_split",
         "test_greedy_generate_with_cache_equals_without"), ("transformers:rwkv",)),
    Finding(
        "Cached decoding cannot be differentiated: the caches are updated in place",
        "transformers_cache_in_place",
        "Mamba, Mamba2 and RWKV update their cache tensors in place (`copy_`, kept at static "
        "addresses for CUDA graphs; RWKV writes `state[i][:, :, layer_id] = …`). A backward "
        "through two or more cached steps raises `RuntimeError: one of the variables needed "
        "for gradient computation has been modified by an inplace operation`. Nothing in the "
        "documentation says decoding is inference-only; training or fine-tuning through "
        "cached rollouts fails.",
        "Document the cache as inference-only, or out-of-place updates when grad is enabled "
        "(`torch.is_grad_enabled()`).",
        ("test_gradients_through_the_cache_equal_full_forward",
         "test_second_backward_through_the_cache")),
    Finding(
        "A float64 Mamba/Mamba2 decodes with float32 accuracy",
        "transformers_mamba_float64",
        "`MambaRMSNorm` casts to float32, `residual_in_fp32` keeps the residual in float32 and "
        "the reference scan and one-token update compute in float32 (`.float()`), whatever "
        "the model's dtype. In a float64 model decoding differs from the full forward by "
        "5.7e-6 (Mamba) and 2.7e-5 (Mamba2) at logits of ~30 (init scale 16), the size of "
        "the float32 model's own difference, where float64 rounding gives ~1e-13: a float64 "
        "user gets float32 results silently. Versions: with transformers 5.6.2 (the oldest the "
        "fla pin allows, laid over the environment with PYTHONPATH) Mamba's float64 decode, "
        "generate and left padding pass (a regression between 5.6.2 and 5.24.0) while "
        "Mamba2's fail as with 5.24.0; the RWKV batch step and the in-place caches fail with "
        "both (`kernel-verify check kernel_verify.adapters.transformers_models:targets "
        "--profile ci -k models`: 11 passed, 3 failed, 9 known with 5.6.2; 10, 5, 9 with "
        "5.24.0).",
        "Upcast to `torch.promote_types(dtype, torch.float32)` instead of `torch.float32`.",
        ("test_decode_equals_full_forward_at_every_split",
         "test_greedy_generate_with_cache_equals_without", "test_left_padding_equals_unpadded"),
        ("transformers:mamba", "transformers:mamba2")),
)
_EXPLAINED = {
"test_outputs_stay_finite_over_an_init_scale_sweep": (
"Mamba only: the reference selective scan forms Δ·B·x in float32 and overflows from 64× "
"the default init (see Minor); weights 64× the init are not a realistic setting"),
}
LIBRARY = Library(
    key="transformers_models", title="transformers (Mamba, Mamba2, RWKV models)",
    module="transformers", dist="transformers", extra="transformers-models",
    dependencies=("huggingface-hub", "safetensors"),
    in_adapters_extra=False,
    right=_RIGHT,
    minor=_MINOR,
    findings=_FINDINGS,
    explained=_EXPLAINED,
    confirmations=("transformers_rwkv_batch_step",
                   "transformers_cache_in_place",
                   "transformers_mamba_float64"),
    confirm_module="kernel_verify.adapters._model_confirm", confirm_in_subprocess=True,
)
