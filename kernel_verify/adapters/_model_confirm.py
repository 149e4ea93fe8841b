"""Second-route measurements behind the model conformance findings (fla's and transformers'
causal LMs; ``reports/conformance/fla_models.md`` and ``transformers_models.md``).

``python -m kernel_verify.adapters._model_confirm NAME [--quick]`` prints one measurement. Each
reaches its finding by a route other than the property that found it: what a layer actually
receives (a forward pre-hook), the shape a call returns, an exact equality with the defect's
prediction, or the source line. fla's models need ``TRITON_INTERPRET=1`` before triton is
imported, so this runs in its own process (:mod:`kernel_verify.adapters.confirm` calls it so).

* ``fla_models_cu_seqlens``: per fla family, whether the ``cu_seqlens`` given to the model
  reaches its first attention layer, and the packed logits against the separate runs and
  against the unpacked row (state carried) — exact equality with the latter is the dropped
  argument;
* ``fla_models_generate_cache``: ``generate(use_cache=True)``: the keywords each forward call
  receives, and the scores of the second generated token against the full forward of the
  prefix and against the forward of the last token alone;
* ``transformers_rwkv_batch_step``: one token with the state for batch 1 and 2: the logits'
  shape and the error against the full forward, row by row;
* ``transformers_cache_in_place``: for Mamba, Mamba2 and RWKV, whether a cache tensor is the
  same object after a step with its version counter advanced, and the backward through two
  cached steps;
* ``transformers_mamba_float64``: the float64 model's decode error against its own full
  forward, next to the float32 model's (float64 gains nothing), and the float32 casts;
* ``transformers_mamba_chunked_prefill``: a prompt fed in two chunks (the second one with the
  cache of the first) against one forward, by raw ``model(...)`` calls, batch 1, float32 and
  float64, per position; Mamba2 and RWKV beside it; and the source line of the scan;
* ``fla_models_delta_constant_state``: fla's ``fused_recurrent_delta_rule`` backward with an
  initial state that requires grad and with the same state constant (the kernel alone);
* ``transformers_qwen3_next_float64``, ``transformers_qwen3_next_cache_in_place``: Qwen3-Next's
  PyTorch delta rule on float64 inputs against an exact float64 recurrence, and its cache
  tensors' identity across a step (functions of the transformers adapter).
"""

from __future__ import annotations

import argparse
import os
import sys

if "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _ids(b: int, t: int, vocab: int = 64, seed: int = 1):
    import torch

    return torch.randint(0, vocab, (b, t), generator=torch.Generator().manual_seed(seed))


def _fla(family: str, scale: float):
    from kernel_verify.adapters import fla_models

    t = fla_models.family_target(family)
    return t, t.build(0, init_scale=scale)


def _versions(*dists: str) -> str:
    from kernel_verify.adapters._lazy import dist_version

    return ", ".join(f"{d} {dist_version(d)}" for d in dists)


def fla_models_cu_seqlens(quick: bool = False) -> str:
    import torch

    from kernel_verify.adapters import fla_models

    lines = [_versions("flash-linear-attention", "fla-core", "transformers", "triton"),
             "init scale 16 (weights x16), ids (1, 10), cu_seqlens [0, 5, 10]:"]
    families = ("linear_attn", "gla") if quick else tuple(fla_models.FAMILIES)
    for family in families:
        _, m = _fla(family, 16.0)
        ids, cu = _ids(1, 10), torch.tensor([0, 5, 10])
        seen: list[bool] = []
        base = getattr(m, "model", None) or getattr(m, "backbone", None)
        layer = base.layers[0]
        attn = getattr(layer, "attn", None) or getattr(layer, "mixer", None) or layer
        handle = attn.register_forward_pre_hook(
            lambda mod, args, kw, seen=seen: seen.append(kw.get("cu_seqlens") is not None),
            with_kwargs=True)
        with torch.no_grad():
            packed = m(input_ids=ids, cu_seqlens=cu, use_cache=False).logits
        handle.remove()
        with torch.no_grad():
            sep = torch.cat([m(input_ids=ids[:, :5], use_cache=False).logits,
                             m(input_ids=ids[:, 5:], use_cache=False).logits], 1)
            whole = m(input_ids=ids, use_cache=False).logits
        lines.append(
            f"  {family}: cu_seqlens reaches {type(attn).__name__}: {any(seen)}; "
            f"max|packed - separate| = {float((packed - sep).abs().max()):.3g}, "
            f"max|packed - unpacked row| = {float((packed - whole).abs().max()):.3g} "
            f"(max|logit| {float(sep.abs().max()):.3g})")
    return "\n".join(lines)


def fla_models_generate_cache(quick: bool = False) -> str:
    import torch

    from kernel_verify.adapters import fla_models

    lines = [_versions("flash-linear-attention", "transformers"),
             "init scale 16, prompt (1, 5), greedy generate(max_new_tokens=3, use_cache=True):"]
    families = ("linear_attn",) if quick else tuple(fla_models.FAMILIES)
    for family in families:
        _, m = _fla(family, 16.0)
        prompt = _ids(1, 5)
        calls: list[str] = []
        handle = m.register_forward_pre_hook(
            lambda mod, args, kw, calls=calls: calls.append(
                f"T={kw['input_ids'].shape[1]} past_key_values="
                f"{type(kw.get('past_key_values')).__name__} cache="
                f"{type(kw.get('cache')).__name__}"), with_kwargs=True)
        with torch.no_grad():
            out = m.generate(prompt, max_new_tokens=3, do_sample=False, output_logits=True,
                             return_dict_in_generate=True, use_cache=True,
                             attention_mask=torch.ones_like(prompt))
        handle.remove()
        seq = out.sequences
        with torch.no_grad():
            prefix = m(input_ids=seq[:, :6], use_cache=False).logits[:, -1]
            alone = m(input_ids=seq[:, 5:6], use_cache=False).logits[:, -1]
        got = out.logits[1]
        lines.append(
            f"  {family}: forward calls: {'; '.join(calls)}\n"
            f"    2nd token scores: max|generate - full forward of the prefix| = "
            f"{float((got - prefix).abs().max()):.3g}, max|generate - forward of the last "
            f"token alone| = {float((got - alone).abs().max()):.3g}")
    return "\n".join(lines)


def _tf_target(family: str):
    from kernel_verify.adapters import transformers_models

    return transformers_models.family_target(family)


def transformers_rwkv_batch_step(quick: bool = False) -> str:
    import torch

    t = _tf_target("rwkv")
    m = t.build(0)
    lines = [_versions("transformers", "torch"), "RwkvForCausalLM (hidden 32, 2 layers), "
             "prefill 6 tokens then one token with state=…:"]
    for b in (1, 2, 3):
        ids = _ids(b, 7)
        with torch.no_grad():
            full = m(input_ids=ids, use_cache=False).logits
            pre = m(input_ids=ids[:, :6], use_cache=True)
            step = m(input_ids=ids[:, 6:7], state=pre.state, use_cache=True).logits
        rows = [float((step[r, -1] - full[r, 6]).abs().max()) for r in range(b)]
        lines.append(f"  batch {b}: step logits shape {tuple(step.shape)} (expected "
                     f"({b}, 1, 64)); max|step - full| per row (last time index): "
                     + ", ".join(f"{e:.3g}" for e in rows))
    return "\n".join(lines)


def transformers_cache_in_place(quick: bool = False) -> str:
    import torch

    lines = [_versions("transformers", "torch"),
             "prefill 4 tokens then 2 cached steps, with gradients (float32):"]
    for family in ("mamba", "mamba2", "rwkv"):
        t = _tf_target(family)
        m = t.build(0)
        ids = _ids(2, 6)
        logits, cache = t.prefill(m, ids[:, :4])
        before = _first_tensor(cache[0])
        version = before._version if before is not None else None
        out1, cache = t.step(m, cache, ids[:, 4])
        after = _first_tensor(cache[0])
        same = before is not None and after is not None and before.data_ptr() == after.data_ptr()
        out2, cache = t.step(m, cache, ids[:, 5])
        loss = logits.sum() + out1.sum() + out2.sum()
        try:
            torch.autograd.grad(loss, t.params_of(m), allow_unused=True)
            result = "backward ran"
        except RuntimeError as err:
            result = f"backward raised RuntimeError: {str(err).splitlines()[0][:160]}"
        lines.append(f"  {family}: first cache tensor the same storage after a step: {same} "
                     f"(version {version} -> {after._version if after is not None else None});"
                     f" {result}")
    return "\n".join(lines)


def _first_tensor(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, list | tuple):
        for x in obj:
            found = _first_tensor(x)
            if found is not None:
                return found
        return None
    for name in ("layers", "recurrent_states", "ssm_states", "conv_states"):
        if hasattr(obj, name):
            found = _first_tensor(getattr(obj, name))
            if found is not None:
                return found
    return None


def transformers_mamba_float64(quick: bool = False) -> str:
    import torch

    lines = [_versions("transformers", "torch"),
             "decode (prefill 6, 6 steps) vs full forward, batch 2, init scale 16:"]
    for family in ("mamba", "mamba2"):
        t = _tf_target(family)
        ids = _ids(2, 12)
        errs = {}
        for dtype in ("float32", "float64"):
            m = t.build(0, init_scale=16.0, dtype=dtype)
            with torch.no_grad():
                full = t.forward(m, ids)
                _, cache = t.prefill(m, ids[:, :6])
                steps = []
                for i in range(6, 12):
                    o, cache = t.step(m, cache, ids[:, i])
                    steps.append(o)
            errs[dtype] = (float((torch.stack(steps, 1) - full[:, 6:]).abs().max()),
                           float(full.abs().max()))
        lines.append(f"  {family}: float32 {errs['float32'][0]:.3g}, float64 "
                     f"{errs['float64'][0]:.3g} (max|logit| {errs['float64'][1]:.3g}); "
                     "float64 rounding would give ~1e-13")
    import inspect

    from transformers.models.mamba import modeling_mamba

    src = inspect.getsource(modeling_mamba.MambaRMSNorm.forward)
    lines.append("  MambaRMSNorm.forward casts: "
                 + ("hidden_states.to(torch.float32)" if "to(torch.float32)" in src else "none"))
    return "\n".join(lines)


def transformers_mamba_chunked_prefill(quick: bool = False) -> str:
    import inspect

    import torch

    lines = [_versions("transformers", "torch"),
             "12 tokens, batch 1: model(ids[:, :c], use_cache=True), then model(ids[:, c:], "
             "<cache>=…, cache_position=arange(c, 12)) vs model(ids) (init scale 1):"]
    ids = _ids(1, 12)
    for family in ("mamba", "mamba2", "rwkv"):
        t = _tf_target(family)
        for dtype in ("float32", "float64"):
            m = t.build(0, dtype=dtype)
            kw_name = "state" if family == "rwkv" else "cache_params"
            with torch.no_grad():
                full = m(input_ids=ids, use_cache=False).logits
                for c in (4, 6):
                    first = m(input_ids=ids[:, :c], use_cache=True)
                    kw = {kw_name: getattr(first, kw_name)}
                    if family != "rwkv":
                        kw["cache_position"] = torch.arange(c, 12)
                    second = m(input_ids=ids[:, c:], use_cache=True, **kw).logits
                    err = (second - full[:, c:]).abs().amax(-1)[0]
                    lines.append(f"  {family} {dtype}, chunks [0, {c}) + [{c}, 12): max|second "
                                 f"chunk − full| {float(err.max()):.3g}, at its first token "
                                 f"{float(err[0]):.3g} (max|logit| {float(full.abs().max()):.3g})")
    from transformers.models.mamba import modeling_mamba

    src = inspect.getsource(modeling_mamba)
    marker = "does not take the past state"
    lines.append("  modeling_mamba says: " + next(
        (ln.strip() for ln in src.splitlines() if marker in ln), "(the comment is gone)"))
    return "\n".join(lines)


def fla_models_delta_constant_state(quick: bool = False) -> str:
    from kernel_verify.adapters import fla_models

    return (_versions("fla-core", "triton", "torch") + "\nfused_recurrent_delta_rule backward "
            "(B 1, T 3, H 1, K = V = 16), initial state requiring grad or constant:\n"
            + fla_models.constant_state_backward(quick))


def transformers_qwen3_next_float64(quick: bool = False) -> str:
    from kernel_verify.adapters import transformers_models

    return transformers_models.qwen3_next_float64(quick)


def transformers_qwen3_next_cache_in_place(quick: bool = False) -> str:
    from kernel_verify.adapters import transformers_models

    return transformers_models.qwen3_next_cache_in_place(quick)


FINDINGS = {
    "fla_models_cu_seqlens": fla_models_cu_seqlens,
    "fla_models_generate_cache": fla_models_generate_cache,
    "transformers_rwkv_batch_step": transformers_rwkv_batch_step,
    "transformers_cache_in_place": transformers_cache_in_place,
    "transformers_mamba_float64": transformers_mamba_float64,
    "transformers_mamba_chunked_prefill": transformers_mamba_chunked_prefill,
    "fla_models_delta_constant_state": fla_models_delta_constant_state,
    "transformers_qwen3_next_float64": transformers_qwen3_next_float64,
    "transformers_qwen3_next_cache_in_place": transformers_qwen3_next_cache_in_place,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernel_verify.adapters._model_confirm")
    parser.add_argument("name", choices=sorted(FINDINGS))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.name.startswith("fla"):
        from kernel_verify.adapters import _triton_interpreter as interp

        interp.enable()
    print(FINDINGS[args.name](args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
