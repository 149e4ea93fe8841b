"""Broken forms of causal linear attention in torch, differentiable (docs/math.md §13, §14): the
gradient defects the forms protocol can show, as white-box ``AttentionTarget`` mutants.

One correct skeleton: attention with the registry's SM⁺ map (``softmax_positive[iid]``,
``m = 16``, log-space state ``(L, V̄)``) through the project's own forms
(:func:`kernel_verify.properties.builtin_forms.registry_forms`: every form, ``features`` and
``state_sums``), NumPy and torch float64, claiming ``differentiable``. ``padded`` runs each row
on its valid positions, gathered by a hand-written autograd function (the way unpadding kernels
ship their own backward). Each mutant changes one thing; the control
(``kernel_verify.mutants.forms:control_forms_torch_correct``) runs the same code with nothing
changed.

* ``initial_state_log_normaliser_detached``: ``chunked``/``stateful`` take the initial state's
  log-normaliser ``L`` out of the graph (a fused kernel whose backward returns the gradient of
  the value state ``V̄`` but none for ``L``): the forward is right, the gradient that reaches
  the prefix through the state loses the normaliser's term;
* ``padded_gather_backward_left_aligned``: the unpadding gather's backward scatters the gradient
  of the ``r``-th valid token to position ``r`` instead of the ``r``-th valid position: right
  for right padding, padded positions receive gradient for left padding; the forward is right.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernel_verify.properties.protocol import AttentionTarget, Target

M = 16
CLAIMS = frozenset({"causal", "noncausal", "positive_weights", "differentiable",
                    "deterministic_backward"})


def _gather(misplaced: bool):
    """``x[..., idx, :]`` with a hand-written backward: the gradient scattered back to ``idx``
    (``misplaced``: to ``0, …, len(idx) − 1``)."""
    import torch

    class Gather(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, idx):
            ctx.save_for_backward(idx)
            ctx.shape = x.shape
            return x[..., idx, :]

        @staticmethod
        def backward(ctx, g):
            (idx,) = ctx.saved_tensors
            out = g.new_zeros(ctx.shape)
            if misplaced:
                out[..., : len(idx), :] = g
            else:
                out[..., idx, :] = g
            return out, None

    return Gather.apply


def _forms(*, detach_log_normaliser: bool = False,
           misplaced_gather: bool = False) -> dict[str, Any]:
    import torch

    from kernel_verify.impls.attention import feature_map_attention
    from kernel_verify.impls.registry import get
    from kernel_verify.properties.builtin_forms import registry_forms

    entry = get("softmax_positive[iid]")
    forms = registry_forms(entry, M)
    base_chunked, base_stateful = forms["chunked"], forms["stateful"]
    gather = _gather(misplaced_gather)

    def attention(q, k, v, *, causal, seed=0, **_: Any):
        params = entry.draw(np.random.default_rng(seed), q.shape[-1], M, entry.config)
        if not isinstance(q, np.ndarray):
            from kernel_verify.impls.torch.convert import to_torch

            params = to_torch(params, device=q.device)
        return feature_map_attention(entry, params, q, k, v, causal=causal)

    def _state(state):
        if detach_log_normaliser and state is not None and torch.is_tensor(state[0]):
            return (state[0].detach(), *state[1:])
        return state

    def chunked(q, k, v, *, chunk_size, initial_state=None, seed=0):
        return base_chunked(q, k, v, chunk_size=chunk_size, initial_state=_state(initial_state),
                            seed=seed)

    def stateful(q, k, v, *, initial_state=None, seed=0):
        return base_stateful(q, k, v, initial_state=_state(initial_state), seed=seed)

    def padded(q, k, v, *, mask, initial_state=None, seed=0):
        if not torch.is_tensor(q):
            return forms["padded"](q, k, v, mask=mask, initial_state=initial_state, seed=seed)
        out, states = v.new_zeros(v.shape), []
        for b, row in enumerate(mask.tolist()):
            idx = torch.tensor([t for t, keep in enumerate(row) if keep], dtype=torch.long,
                               device=q.device)
            qb, kb, vb = (gather(x[b:b + 1], idx) for x in (q, k, v))
            init = None if initial_state is None else tuple(s[b:b + 1] for s in initial_state)
            o, st = base_stateful(qb, kb, vb, initial_state=init, seed=seed)
            out[b:b + 1, :, idx] = o
            states.append(st)
        return out, tuple(torch.cat([s[j] for s in states]) for j in range(len(states[0])))

    return {**forms, "attention": attention, "chunked": chunked, "stateful": stateful,
            "padded": padded}


def _target(name: str, **defects: bool) -> list[Target]:
    return [AttentionTarget(name, claims=CLAIMS, backends=("numpy", "torch"),
                            dtypes=("float64",), **_forms(**defects))]


#: name -> (description, make)
TORCH_FORMS_MUTANTS: dict[str, tuple[str, Callable[[], list[Target]]]] = {
    "initial_state_log_normaliser_detached": (
        "torch forms whose chunked/stateful take the initial state's log-normaliser L out of "
        "the graph (the backward returns no gradient for it): forward right, the gradient "
        "through the state loses the normaliser's term",
        lambda: _target("mutant:initial_state_log_normaliser_detached",
                        detach_log_normaliser=True)),
    "padded_gather_backward_left_aligned": (
        "torch padded form whose unpadding gather scatters the gradient of the r-th valid "
        "token to position r: padded positions receive gradient under left padding; forward "
        "right",
        lambda: _target("mutant:padded_gather_backward_left_aligned", misplaced_gather=True)),
}

#: The property each one is written for.
TORCH_FORMS_KILLERS: dict[str, tuple[str, ...]] = {
    "initial_state_log_normaliser_detached": (
        "attention_forms::test_gradients_flow_through_the_state",),
    "padded_gather_backward_left_aligned": ("gradients::test_padded_inputs_get_zero_gradient",),
}


def control() -> list[Target]:
    """The skeleton with nothing changed (the right gather backward, the state in the graph)."""
    return _target("control:forms_torch_correct")
