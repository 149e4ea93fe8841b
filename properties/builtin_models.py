"""The built-in model target: the tiny causal LM of :mod:`kernel_verify.impls.torch.tiny_lm`
(this project's linear-attention forms, a causal convolution, an MLP) as a
:class:`~kernel_verify.properties.model_protocol.ModelTarget` offering every call, float32 and
float64. :func:`tiny_lm_target` also serves the model mutants (a subclass of the model with one
defect) and their correct twins.
"""

from __future__ import annotations

from typing import Any

from kernel_verify.impls.systems import get_system
from kernel_verify.properties.model_protocol import ModelTarget

__all__ = ["model_targets", "tiny_lm_calls", "tiny_lm_target"]

#: What the tiny LM claims: its descriptor's claims (:mod:`kernel_verify.impls.systems`).
CLAIMS = get_system("tiny_lm").target_claims()


def tiny_lm_calls(cls: Any = None, config: Any = None) -> dict[str, Any]:
    """The keyword arguments of a :class:`ModelTarget` for :class:`TinyLM` (or subclass
    ``cls``) at ``config`` (default :class:`TinyLMConfig`)."""
    import torch

    from kernel_verify.impls.torch.tiny_lm import TinyLM, TinyLMConfig, build_tiny_lm

    cls = cls or TinyLM
    config = config or TinyLMConfig()

    def build(seed: int, *, init_scale: float = 1.0, dtype: str = "float32"):
        return build_tiny_lm(seed, init_scale=init_scale, dtype=getattr(torch, dtype),
                             config=config, cls=cls)

    return {
        "build": build,
        "forward": lambda model, ids: model(ids)[0],
        "prefill": lambda model, ids: model(ids),
        "step": lambda model, cache, ids_t: model.step(ids_t, cache),
        "generate": lambda model, ids, max_new_tokens: model.generate(ids, max_new_tokens),
        "packed": lambda model, ids, cu_seqlens: model.forward_packed(ids, cu_seqlens)[0],
        "padded": lambda model, ids, attention_mask: model.forward_padded(ids,
                                                                          attention_mask)[0],
        "vocab_size": config.vocab_size,
    }


def tiny_lm_target(name: str = "model:tiny_lm", cls: Any = None, **kw: Any) -> ModelTarget:
    """The tiny LM (or a subclass ``cls``) as a model target; ``kw`` overrides fields."""
    fields = {**tiny_lm_calls(cls), "claims": CLAIMS, **kw}
    return ModelTarget(name, **fields)


def model_targets() -> list[ModelTarget]:
    """The built-in model targets."""
    return [tiny_lm_target()]
