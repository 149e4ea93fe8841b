"""transformers' own state-space, RNN and delta-rule causal LMs (Mamba, Mamba2, RWKV, Qwen3-Next) on
their torch path,
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

Qwen3-Next (``qwen3_next``): one gated-delta-rule layer then one full-attention layer
(``layer_types``), dense MLPs, on transformers' PyTorch delta rule (:data:`QWEN3_NEXT_NOTE`);
float64 claimed (the cast model runs), left padding claimed, packed input not (its PyTorch path
raises ``ValueError`` for ``cu_seqlens``: packing needs fla).
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
    # Qwen3-Next: gated-delta-rule layers and full (softmax) attention layers mixed by
    # ``layer_types``; dense MLPs (``mlp_only_layers``: QWEN3_NEXT_NOTE), the torch path of its
    # delta rule (:func:`_qwen3_next`).
    "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM",
                   {"layer_types": ["linear_attention", "full_attention"],
                    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
                    "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                    "linear_key_head_dim": 8, "linear_value_head_dim": 8,
                    "linear_conv_kernel_dim": 4, "intermediate_size": 64,
                    "mlp_only_layers": [0, 1], "num_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 16, "shared_expert_intermediate_size": 16,
                    "max_position_embeddings": 64}, frozenset({"left_padding"})),
}
#: Where each family's serving properties cut (docs/math.md §15.1): the chunk of a chunked scan
#: (Mamba2's ``chunk_size``; Qwen3-Next's PyTorch chunked delta rule, 64, is longer than the
#: suite's sequences) and the causal convolution's window (``conv_kernel``; RWKV has none).
SERVING_CUTS: dict[str, dict[str, Any]] = {
    "mamba": {"conv_window": 4},
    "mamba2": {"chunk_sizes": (4,), "conv_window": 4},
    "rwkv": {},
    "qwen3_next": {"conv_window": 4},
}
#: Families that do not declare a masked prefill decoded without the mask: Qwen3-Next's full
#: attention layers keep the pads' keys in their cache, so its one-token steps need the mask
#: (hf_models' ``padded_prefill`` contract); its left padding is still checked by ``padded``.
NO_PADDED_PREFILL = frozenset({"qwen3_next"})
#: Why the Qwen3-Next target has dense MLPs and how its delta rule is selected.
QWEN3_NEXT_NOTE = (
    "Qwen3-Next's sparse MoE routes each token to its top-k experts: a rounding-level difference "
    "between two equal computations (decoding vs the full forward) can flip an expert near a "
    "tie and change the logits by O(1), which no rounding tolerance covers, so the tiny model "
    "has dense MLPs in both layers (`mlp_only_layers`). transformers binds its gated delta rule "
    "at import to fla's Triton kernels when `fla` is importable (fla-core is: the fla "
    "adapter's extra) and to its own PyTorch functions otherwise; the adapter imports the "
    "model's module with `fla` made unimportable, so the model runs transformers' PyTorch path, "
    "what a user without fla runs")
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
    for family in ("mamba", "mamba2", "rwkv", "qwen3_next")
}
#: The serving identities compared at float64 tolerance (a float32 computation fails them in
#: float64 only).
SERVING_FLOAT64 = ("test_chunked_prefill_equals_one_prefill",
                   "test_restored_state_continues_as_if_never_stopped",
                   "test_continuations_from_one_saved_state_are_independent",
                   "test_padded_prefill_then_decoding_equals_unpadded",
                   "test_speculative_rollback_equals_the_accepted_state")
_QWEN_FLOAT32 = ("Qwen3-Next's PyTorch gated delta rule computes in float32 whatever the "
                 "model's dtype: a float64 model decodes with float32 accuracy "
                 f"({_PAGE}, 'Minor')")
# (not test_greedy_generate_with_cache_equals_without: generate returns float32 scores of a
# float64 model, by transformers' design, and the property judges them to one float32 rounding,
# where the float32 accuracy of the decoding does not show; the decode property sees it)
KNOWN["qwen3_next"].update({p: _QWEN_FLOAT32 for p in (
    "test_decode_equals_full_forward_at_every_split", "test_left_padding_equals_unpadded",
    *SERVING_FLOAT64)})
KNOWN["mamba"]["test_outputs_stay_finite_over_an_init_scale_sweep"] = (
    "the reference selective scan forms Δ·B·x in float32 and overflows from 64× the default "
    f"init, float64 models too ({_PAGE}, 'Minor')")
KNOWN["rwkv"].update({p: _RWKV_BATCH for p in (
    "test_decode_equals_full_forward_at_every_split",
    "test_greedy_generate_with_cache_equals_without",
    # the serving identities decode one token at a time from a batch of two
    "test_chunked_prefill_equals_one_prefill", "test_restored_state_continues_as_if_never_stopped",
    "test_continuations_from_one_saved_state_are_independent",
    "test_speculative_rollback_equals_the_accepted_state")})


def _transformers():
    from kernel_verify.adapters._lazy import need

    return need("transformers_models")


def _qwen3_next():
    """transformers with ``models.qwen3_next`` imported on its PyTorch path (QWEN3_NEXT_NOTE):
    the modeling module is imported while ``sys.modules['fla']`` is ``None`` (``import fla``
    raises ImportError, transformers' fallback), then checked."""
    import importlib
    import inspect
    import sys

    lib = _transformers()
    name = "transformers.models.qwen3_next.modeling_qwen3_next"
    if name not in sys.modules:
        saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "fla"}
        sys.modules["fla"] = None  # type: ignore[assignment]
        try:
            importlib.import_module(name)
        finally:
            del sys.modules["fla"]
            sys.modules.update(saved)
    module = sys.modules[name]
    for fn in ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule"):
        impl = inspect.getclosurevars(getattr(module, fn)).nonlocals.get("implementation")
        if impl is not None and getattr(impl, "__module__", name) != name:
            raise RuntimeError(f"{name}.{fn} is bound to {impl.__module__}.{impl.__name__}, not "
                               "transformers' PyTorch path: the module was imported before "
                               "the adapter (with fla importable); use a fresh process")
    return lib


def family_target(family: str) -> ModelTarget:
    """One transformers family as a model target (the cache keyword is read from the model's
    ``forward`` when it is first called: building the list never imports transformers)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    config, model, fields, extra_claims = FAMILIES[family]
    claims = frozenset({"differentiable"}) | extra_claims
    return hf_model_target(f"transformers:{family}",
                           tiny_model_maker(_qwen3_next if family == "qwen3_next"
                                            else _transformers, config, model, fields),
                           vocab_size=VOCAB, claims=claims, cache_arg="auto", float64=True,
                           call_seconds=CALL_SECONDS, known_failures=KNOWN.get(family, {}),
                           serving=True,
                           padded_prefill=("left_padding" in claims
                                           and family not in NO_PADDED_PREFILL),
                           **SERVING_CUTS[family])


def targets() -> list[ModelTarget]:
    """Every family of :data:`FAMILIES`."""
    return [family_target(f) for f in FAMILIES]


def __getattr__(attr: str) -> ModelTarget:
    """``target_<family>``: one family (``kernel-verify check
    kernel_verify.adapters.transformers_models:target_qwen3_next``)."""
    if attr.startswith("target_") and attr.removeprefix("target_") in FAMILIES:
        return family_target(attr.removeprefix("target_"))
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


# ------------------------------------------------------------- Qwen3-Next's second routes
# Measurements behind the Qwen3-Next entries of the page (to be registered in
# kernel_verify.adapters._model_confirm.FINDINGS; each prints one measurement).
def qwen3_next_float64(quick: bool = False) -> str:
    """transformers' PyTorch gated delta rule (``torch_chunk_gated_delta_rule`` and
    ``torch_recurrent_gated_delta_rule`` of the Qwen3-Next module) on float64 inputs against
    the exact recurrence in float64 (``D = e^(g_t) S_(t−1)``, ``S_t = D + β_t k_t (v_t −
    Dᵀk_t)ᵀ``, ``o_t = S_tᵀ q_t``, q and k L2-normalised, q scaled by K^(−1/2)): float64 gives
    float32 accuracy (the functions cast to ``torch.float32``); and the tiny float64 model's
    decode error against its own full forward."""
    import sys

    import torch

    _qwen3_next()
    mq = sys.modules["transformers.models.qwen3_next.modeling_qwen3_next"]
    g = torch.Generator().manual_seed(0)
    b, t, h, d = 1, 12, 2, 8
    q, k, v = (torch.randn(b, t, h, d, generator=g, dtype=torch.float64) for _ in range(3))
    beta = torch.rand(b, t, h, generator=g, dtype=torch.float64)
    lg = -torch.rand(b, t, h, generator=g, dtype=torch.float64)
    qn = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6) / d ** 0.5
    kn = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    state = torch.zeros(b, h, d, d, dtype=torch.float64)
    exact = torch.zeros(b, t, h, d, dtype=torch.float64)
    for i in range(t):
        state = state * lg[:, i].exp()[..., None, None]
        err = v[:, i] - torch.einsum("bhkv,bhk->bhv", state, kn[:, i])
        state = state + torch.einsum("bhk,bhv->bhkv", kn[:, i], err * beta[:, i, :, None])
        exact[:, i] = torch.einsum("bhkv,bhk->bhv", state, qn[:, i])
    lines = ["transformers " + str(_transformers().__version__)]
    for name in ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule"):
        out, last = getattr(mq, name)(q, k, v, g=lg, beta=beta, output_final_state=True,
                                      use_qk_l2norm_in_kernel=True)
        lines.append(f"  {name}: float64 in, out {out.dtype}, state {last.dtype}; max |out − "
                     f"exact float64| {float((out - exact).abs().max()):.3g} (max |exact| "
                     f"{float(exact.abs().max()):.3g})")
    target = family_target("qwen3_next")
    ids = torch.randint(0, VOCAB, (2, 8), generator=torch.Generator().manual_seed(1))
    for dtype in ("float32", "float64"):
        m = target.build(0, dtype=dtype)
        with torch.no_grad():
            full = target.forward(m, ids)
            _, cache = target.prefill(m, ids[:, :4])
            steps = []
            for i in range(4, 8):
                logits, cache = target.step(m, cache, ids[:, i])
                steps.append(logits)
        diff = float((torch.stack(steps, 1) - full[:, 4:]).abs().max())
        lines.append(f"  {dtype} model: decode (prefill 4, 4 steps) vs full forward {diff:.3g}")
    return "\n".join(lines)


def qwen3_next_cache_in_place(quick: bool = False) -> str:
    """The Qwen3-Next cache's recurrent state after one decoded token: the same tensor object
    with its version counter advanced (``copy_``), and the backward through two cached steps."""
    import torch

    target = family_target("qwen3_next")
    m = target.build(0)
    ids = torch.randint(0, VOCAB, (2, 6), generator=torch.Generator().manual_seed(1))
    _, (cache, n) = target.prefill(m, ids[:, :4])
    layer = cache.layers[0]
    before = layer.recurrent_states[0]
    version = before._version
    logits, (cache, n) = target.step(m, (cache, n), ids[:, 4])
    after = cache.layers[0].recurrent_states[0]
    lines = [f"  layer 0 recurrent state after a step: same object {after is before}, version "
             f"{version} -> {after._version}"]
    try:
        logits2, _ = target.step(m, (cache, n), ids[:, 5])
        (logits.sum() + logits2.sum()).backward()
        lines.append("  backward through two cached steps: ran")
    except RuntimeError as err:
        lines.append(f"  backward through two cached steps: RuntimeError: {str(err)[:120]}")
    return "\n".join(lines)


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
    "logits. Qwen3-Next (hidden 32, a gated-delta-rule layer then a full-attention layer, "
    "dense MLPs, transformers' PyTorch delta rule): in float32 decoding with the cache equals "
    "the full forward, greedy `generate` with the cache equals it without, left padding equals "
    "the unpadded rows (each ≤ 2.4e-8 at logits of ~0.4, against a float32 tolerance of "
    "~2e-6); its chunked and recurrent delta-rule functions meet an exact float64 recurrence "
    "to 8e-8 and 1.1e-7 (float32 rounding).")
_MINOR = (
    "Mamba's logits are not finite from 64× its default init, float32 and float64 alike: the "
    "reference selective scan forms Δ·B·x (`deltaB_u`) in float32 (`.float()`, whatever the "
    "model's dtype), unnormalised, and it overflows there (a forward hook finds the first "
    "non-finite output at the first mixer's `out_proj` input). Declared as a known failure "
    "of the finiteness sweep: weights 64× the init are not a realistic setting, but a float64 "
    "model should not overflow there. "
    "Qwen3-Next in float64: its PyTorch gated delta rule (`torch_chunk_gated_delta_rule`, "
    "`torch_recurrent_gated_delta_rule`) casts q, k, v, β and g to `torch.float32` and keeps "
    "the recurrent state in float32, whatever the model's dtype; the float64 model's decoding "
    "differs from its full forward by 2.4e-8 at logits of ~0.4 (float32's size: the float32 "
    "model 3.0e-8, the float64 model 2.9e-8 in the second route), where float64 rounding "
    "gives ~1e-15, so decode, generate and left padding fail in float64 only (declared known). "
    "Second route: the two functions on float64 inputs against an exact float64 recurrence, "
    "8.4e-8 and 1.1e-7 apart, their final state float32 "
    "(`kernel_verify.adapters.transformers_models.qwen3_next_float64`). Fix: compute in "
    "`torch.promote_types(dtype, torch.float32)`. " + QWEN3_NEXT_NOTE + ".")
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
        "addresses for CUDA graphs; RWKV writes `state[i][:, :, layer_id] = …`), and so does "
        "Qwen3-Next's linear-attention cache (`update_recurrent_state` copies into the same "
        "tensor: same object after a step, version counter 1 → 2, "
        "`kernel_verify.adapters.transformers_models.qwen3_next_cache_in_place`). A backward "
        "through two or more cached steps raises `RuntimeError: one of the variables needed "
        "for gradient computation has been modified by an inplace operation`. Nothing in the "
        "documentation says decoding is inference-only; training or fine-tuning through "
        "cached rollouts fails.",
        "Document the cache as inference-only, or out-of-place updates when grad is enabled "
        "(`torch.is_grad_enabled()`).",
        ("test_gradients_through_the_cache_equal_full_forward",
         "test_second_backward_through_the_cache")),
    Finding(
        "Mamba: a multi-token forward from a non-empty cache ignores the past recurrent state",
        "transformers_mamba_chunked_prefill",
        "`mamba_scan_forward` (modeling_mamba) takes the cache's recurrent state only for a "
        "one-token call; a call of two or more tokens with a non-empty cache runs "
        "`mamba_selective_scan`, which does not take the past state (the source says so in a "
        "TODO: 'it is WRONG if the cache is not empty'), while the convolution state is carried. "
        "So chunked prefill (a prompt fed in chunks), a multi-token continuation from a saved "
        "prefix (prefix caching) and verifying k draft tokens in one call (speculative "
        "decoding) give wrong logits from the second chunk on: 1.4e-3 at logits of 3.6 for "
        "chunks [0, 4) + [4, 12), the same in float32 and float64 (not rounding), from the "
        "chunk's first token. Mamba2 and RWKV continue a multi-token chunk from the cache to "
        "float32 rounding (second route, raw `model(...)` calls, batch 1: "
        "`python -m kernel_verify.adapters._model_confirm transformers_mamba_chunked_prefill`). "
        "Found by the serving identities (chunked prefill = one prefill; a restored state "
        "continues as if never stopped; continuations from one saved state; k drafts verified in "
        "one call). Measured with "
        "transformers 5.25.0.",
        "Pass the cache's recurrent state as the scan's initial state (`mamba_selective_scan` "
        "with an `initial_state`), or scan token by token when the cache is not empty.",
        ("test_chunked_prefill_equals_one_prefill",
         "test_restored_state_continues_as_if_never_stopped",
         "test_continuations_from_one_saved_state_are_independent",
         "test_speculative_rollback_equals_the_accepted_state"),
        ("transformers:mamba",)),
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
         "test_greedy_generate_with_cache_equals_without", "test_left_padding_equals_unpadded",
         *SERVING_FLOAT64),
        ("transformers:mamba", "transformers:mamba2")),
)
_EXPLAINED = {
"test_outputs_stay_finite_over_an_init_scale_sweep": (
"Mamba only: the reference selective scan forms Δ·B·x in float32 and overflows from 64× "
"the default init (see Minor); weights 64× the init are not a realistic setting"),
}
LIBRARY = Library(
    key="transformers_models", title="transformers (Mamba, Mamba2, RWKV, Qwen3-Next models)",
    module="transformers", dist="transformers", extra="transformers-models",
    dependencies=("huggingface-hub", "safetensors"),
    in_adapters_extra=False,
    right=_RIGHT,
    minor=_MINOR,
    findings=_FINDINGS,
    explained=_EXPLAINED,
    confirmations=("transformers_rwkv_batch_step",
                   "transformers_cache_in_place",
                   "transformers_mamba_float64",
                   "transformers_mamba_chunked_prefill",
                   "transformers_qwen3_next_float64",
                   "transformers_qwen3_next_cache_in_place"),
    confirm_module="kernel_verify.adapters._model_confirm", confirm_in_subprocess=True,
)
