"""Model-level mutants of the hybrid LM (:mod:`kernel_verify.impls.torch.hybrid_lm`: the tiny LM
with a sliding-window softmax + linear-attention mixer, the window kept at decode time as a ring
buffer of ``W`` keys/features/values), one defect of the window's buffer each, and their
correct twin (docs/math.md §15, §22).

Run one: ``kernel-verify check kernel_verify.mutants.hybrid_lm:target_<name> --profile
mutants`` (the twin: ``kernel_verify.mutants.hybrid_lm:control_model_hybrid_lm``, the same
target built from the unchanged model and calls).

* ``model_hybrid_ring_attends_w_plus_1``: the decode step attends over the ring *before* the
  oldest key leaves it (attend, then evict): ``W + 1`` keys by softmax once the ring is full,
  while the full forward uses ``W``; the cache it returns is right, only the logits of steps
  at positions ``≥ W`` are wrong;
* ``model_hybrid_ring_slot_after_wrap``: after the ring has wrapped around (``n ≥ W``), token
  ``n`` is written to slot ``(n + 1) mod W`` instead of ``n mod W`` (the token in that slot
  leaves for the linear state): the window holds one stale key and lacks a recent one;
* ``model_hybrid_window_not_restored``: the serving engine keeps one ring buffer per sequence,
  the one it last wrote: a saved copy or a rollback restores the recurrent state ``(S, z)``,
  the convolution's inputs and the count, but the window is read from the buffer as the live
  cache left it (later tokens, or the rejected drafts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel_verify.mutants.base import Mutant
from kernel_verify.properties.protocol import Target

LOADER = "kernel_verify.mutants.hybrid_lm:target_"
CONTROL_LOADER = "kernel_verify.mutants.hybrid_lm:control_"


def _classes() -> dict[str, type]:
    """The mutant model classes (built lazily: importing torch only when a mutant runs)."""
    import torch

    from kernel_verify.impls.torch.hybrid_lm import HybridBlock, HybridLM
    from kernel_verify.impls.torch.tiny_lm import _rmsnorm

    class AttendThenEvict(HybridBlock):
        def step(self, x, state):
            conv, kw, fw, vw, n, s, z = state
            u, conv = self.convolve(conv, _rmsnorm(x, self.norm1))
            q, k, v, fq, fk = (p[:, :, 0] for p in self._qkv(u))
            w = self.cfg.window
            keys = torch.cat([kw, k[:, :, None]], dim=2)
            vals = torch.cat([vw, v[:, :, None]], dim=2)
            valid = torch.cat([torch.arange(w, device=n.device) < n[:, None],
                               torch.ones_like(n[:, None], dtype=torch.bool)], dim=1)
            a = self._attend(q, fq, keys, vals, valid, s, z)  # the oldest key not yet out
            ring, s, z = self._write((kw, fw, vw), n, s, z, k, fk, v)
            return self._finish(x, a[:, :, None]), (conv, *ring, n + 1, s, z)

    class SlotAfterWrap(HybridBlock):
        def _slot(self, n):
            w = self.cfg.window
            return torch.where(n >= w, (n + 1) % w, n % w)

    class RingAttendsWPlus1(HybridLM):
        block_cls = AttendThenEvict

    class RingSlotAfterWrap(HybridLM):
        block_cls = SlotAfterWrap

    return {"model_hybrid_ring_attends_w_plus_1": RingAttendsWPlus1,
            "model_hybrid_ring_slot_after_wrap": RingSlotAfterWrap}


def _window_not_restored() -> dict[str, Any]:
    """``model_hybrid_window_not_restored``'s serving calls (module docstring): every cache of
    one sequence shares a box holding the ring buffers last written; ``extend`` and ``step``
    read the window from it, ``copy_cache`` shares it, ``rollback`` restores all but the
    window."""
    from kernel_verify.properties.builtin_models import ServingCache, serving_calls

    calls = serving_calls()

    def rings(states: Any) -> list:
        return [st[1:4] for st in states]

    def with_rings(cache: Any, box: list) -> ServingCache:
        states = [(st[0], *ring, *st[4:]) for st, ring in zip(cache, box[0], strict=True)]
        return ServingCache(states, cache.pos, cache.prev, cache.last)

    def boxed(new: Any, box: list | None) -> Any:
        box = [None] if box is None else box
        box[0] = rings(new)
        new.ring_box = box
        return new

    def prefill(model, ids):
        logits, new = calls["prefill"](model, ids)
        return logits, boxed(new, None)

    def advancing(call: Callable) -> Callable:
        def run(model, cache, ids):
            box = None if cache is None else getattr(cache, "ring_box", None)
            if box is not None:
                cache = with_rings(cache, box)
            logits, new = call(model, cache, ids)
            return logits, boxed(new, box)

        return run

    def copy_cache(cache):
        copy = calls["copy_cache"](cache)
        copy.ring_box = getattr(cache, "ring_box", None)
        return copy

    def rollback(model, cache, n):
        back = calls["rollback"](model, cache, n)
        box = getattr(cache, "ring_box", None)
        if back is cache or box is None:
            return back
        back = with_rings(back, box)
        back.ring_box = box
        return back

    return {"prefill": prefill, "step": advancing(calls["step"]),
            "extend": advancing(calls["extend"]), "copy_cache": copy_cache,
            "rollback": rollback}


#: name → (description, intended killers: ``models::<property>``).
HYBRID_LM_MUTANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "model_hybrid_ring_attends_w_plus_1": (
        "hybrid LM: the decode step attends before evicting (W + 1 keys once the ring is full)",
        ("models::test_decode_equals_full_forward_at_every_split",
         "models::test_greedy_generate_with_cache_equals_without")),
    "model_hybrid_ring_slot_after_wrap": (
        "hybrid LM: after wrap-around token n is written to ring slot (n + 1) mod W",
        ("models::test_decode_equals_full_forward_at_every_split",
         "models::test_greedy_generate_with_cache_equals_without")),
    "model_hybrid_window_not_restored": (
        "hybrid LM: copy/rollback restore the recurrent state but not the window's ring buffer",
        ("models::test_restored_state_continues_as_if_never_stopped",
         "models::test_continuations_from_one_saved_state_are_independent",
         "models::test_speculative_rollback_equals_the_accepted_state")),
}


def _make(name: str, prefix: str) -> Callable[[], list[Target]]:
    def make() -> list[Target]:
        from kernel_verify.properties.builtin_models import hybrid_lm_target

        if name == "model_hybrid_lm":
            return [hybrid_lm_target(f"{prefix}:{name}")]
        if name == "model_hybrid_window_not_restored":
            return [hybrid_lm_target(f"{prefix}:{name}", **_window_not_restored())]
        return [hybrid_lm_target(f"{prefix}:{name}", cls=_classes()[name])]

    return make


MUTANTS: list[Mutant] = [
    Mutant(name, "model", desc, _make(name, "mutant"), killers, loader=LOADER)
    for name, (desc, killers) in HYBRID_LM_MUTANTS.items()
]
CONTROLS: list[Mutant] = [
    Mutant("model_hybrid_lm", "model", "hybrid LM with every defect off (the mutants' twin)",
           _make("model_hybrid_lm", "control"), loader=CONTROL_LOADER),
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


__all__ = ["CONTROLS", "HYBRID_LM_MUTANTS", "MUTANTS"]
