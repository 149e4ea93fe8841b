"""The forms protocol (:class:`AttentionTarget`, docs/math.md §13) for the built-in attention
with a registry map: the keyword arguments that make an attention target offer every form.

The forms run :mod:`kernel_verify.impls.numpy.forms` / :mod:`kernel_verify.impls.torch.forms` on the
map's features (after the entry's ``d^(−1/4)`` pre-scale): the log-space forms with state
``(L, V̄)`` for maps claiming ``log_features``, the plain forms with state ``(S, z)`` otherwise
(Based's Taylor map: signed features whose kernel ``1 + t + t²/2`` is positive, state
``(1 + d + d²) × d_v``). ``varlen`` runs each packed sequence from its own initial state; ``padded``
runs each row on its valid positions only (padding is removed, never zero-filled: ``φ(0) ≠ 0``),
output 0 at padded positions. Both validate ``cu_seqlens``, ``mask`` and the per-sequence initial
states with :mod:`kernel_verify.impls.sequence_validation` (an empty sequence, or a row with no
valid position, keeps its initial state: the state after zero tokens). ``features``/``state_sums``
expose the exact features and the state as sums, so the suite compares with the mpmath recurrence
(:mod:`kernel_verify.verify.references.forms`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_verify.impls.attention import map_features
from kernel_verify.impls.attention_checks import check_attention_inputs
from kernel_verify.impls.forms_checks import check_state, check_step_inputs
from kernel_verify.impls.packed import run_packed, run_padded
from kernel_verify.impls.registry import FeatureMap
from kernel_verify.impls.sequence_validation import check_mask, check_state_count
from kernel_verify.impls.validation import (
    check_array,
    check_one_backend,
    check_positive_int,
    is_torch,
)

__all__ = ["registry_forms"]



def _forms_module(x: Any):
    if is_torch(x):
        from kernel_verify.impls.torch import forms

        return forms
    from kernel_verify.impls.numpy import forms

    return forms


def _check_bhtd(q, k, v) -> None:
    """One backend, valid causal attention inputs, and the ``(B, H, T, d)`` layout of the
    packed and padded forms."""
    check_one_backend(("q", "k", "v"), q, k, v)
    check_attention_inputs(q, k, v, causal=True, names=("q", "k", "v"),
                           backend="torch" if is_torch(q) else "numpy")
    if q.ndim != 4:
        raise ValueError(f"q, k, v must be 4-d (B, H, T, d) arrays, got shape "
                         f"{tuple(q.shape)}")


def _float64_features(entry: FeatureMap, m: int, x: np.ndarray, seed: int) -> np.ndarray:
    """The features every form uses (the attention prescale included), float64."""
    check_array("x", x, backend="numpy")
    seed = check_positive_int("seed", seed, minimum=0)
    params = entry.draw(np.random.default_rng(seed), x.shape[-1], m, entry.config)
    if entry.attention_prescale:
        x = x * (float(x.shape[-1]) ** -0.25)
    return np.asarray(map_features(entry, x, params), dtype=np.float64)


def _state_sums(state, log: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(S, z)`` in float64 from a form's state: ``(S, z)`` itself, or ``(e^L V̄, e^L)`` from the
    log-space state ``(L, V̄)``."""
    if (not isinstance(state, tuple | list) or len(state) != 2
            or not all(hasattr(s, "shape") and len(s.shape) >= 1 for s in state)):
        raise TypeError(f"state must be a pair of arrays {'(L, V̄)' if log else '(S, z)'} "
                        f"from a form of this target, got {type(state).__name__}")
    head, tail = (state[0], state[1]) if log else (state[1], state[0])  # (…, m) and (…, m, d_v)
    check_state(state, lead=tuple(head.shape[:-1]), m=int(head.shape[-1]),
                dv=int(tail.shape[-1]), log=log,
                backend="torch" if is_torch(state[0]) else "numpy", like=state[0],
                name="state")
    first, second = (np.asarray(s.detach().to("cpu").double().numpy() if is_torch(s)
                                else s, dtype=np.float64) for s in state)
    if log:  # (L, V̄) → (e^L V̄, e^L)
        z = np.exp(first)
        return z[..., None] * second, z
    return first, second


def registry_forms(entry: FeatureMap, m: int) -> dict[str, Any]:
    """``stateful``, ``chunked``, ``step``, ``varlen``, ``padded``, ``features`` and
    ``state_sums`` of attention with ``entry`` at ``m`` features (module docstring)."""
    log = entry.has("log_features")

    def params_for(x: Any, seed: int) -> dict:
        seed = check_positive_int("seed", seed, minimum=0)
        p = entry.draw(np.random.default_rng(seed), x.shape[-1], m, entry.config)
        if is_torch(x):
            from kernel_verify.impls.torch.convert import to_torch

            p = to_torch(p, device=x.device)
        return p

    def phi(x: Any, params: dict) -> Any:
        if entry.attention_prescale:
            x = x * (float(x.shape[-1]) ** -0.25)
        return map_features(entry, x, params, log=log)

    def as_work(v: Any, like: Any) -> Any:
        return v.to(like.dtype) if is_torch(v) else v.astype(like.dtype, copy=False)

    def back(out: Any, v: Any) -> Any:
        return out.to(v.dtype) if is_torch(v) else out.astype(v.dtype, copy=False)

    def upcast(x: Any) -> Any:
        """Half inputs computed in float32 (the claim ``half_in_float32``: the state a form
        returns stays float32, the output is cast back once)."""
        if is_torch(x) and str(x.dtype) in ("torch.float16", "torch.bfloat16"):
            import torch

            return x.to(torch.float32)
        return x

    def chunked(q, k, v, *, chunk_size, initial_state=None, seed=0):
        check_one_backend(("q", "k", "v"), q, k, v)
        check_attention_inputs(q, k, v, causal=True, names=("q", "k", "v"),
                               backend="torch" if is_torch(q) else "numpy")
        params = params_for(q, seed)
        fq, fk = phi(upcast(q), params), phi(upcast(k), params)
        mod = _forms_module(q)
        fn = mod.log_linear_attention_chunked if log else mod.linear_attention_chunked
        out, state = fn(fq, fk, as_work(v, fq), chunk_size=chunk_size,
                        initial_state=initial_state)
        return back(out, v), state

    def stateful(q, k, v, *, initial_state=None, seed=0):
        return chunked(q, k, v, chunk_size=64, initial_state=initial_state, seed=seed)

    def step(state, q_t, k_t, v_t, *, seed=0):
        check_one_backend(("q_t", "k_t", "v_t"), q_t, k_t, v_t)
        check_step_inputs(q_t, k_t, v_t, names=("q_t", "k_t", "v_t"),
                          backend="torch" if is_torch(q_t) else "numpy")
        params = params_for(q_t, seed)
        fq, fk = phi(upcast(q_t), params), phi(upcast(k_t), params)
        mod = _forms_module(q_t)
        fn = mod.log_linear_attention_step if log else mod.linear_attention_step
        state, out = fn(state, fq, fk, as_work(v_t, fq))
        return state, back(out, v_t)

    def varlen(q, k, v, *, cu_seqlens, initial_state=None, seed=0):
        _check_bhtd(q, k, v)
        return run_packed(lambda a, b, c, s: stateful(a, b, c, initial_state=s, seed=seed),
                          (q, k, v), ("q", "k", "v"), cu_seqlens=cu_seqlens,
                          initial_state=initial_state)

    def padded(q, k, v, *, mask, initial_state=None, seed=0):
        _check_bhtd(q, k, v)
        rows = check_mask(mask, batch=int(q.shape[0]), length=int(q.shape[-2]))
        check_state_count(initial_state, int(q.shape[0]), what="rows in mask")
        return run_padded(lambda a, b, c, st: stateful(a, b, c, initial_state=st, seed=seed),
                          (q, k, v), rows, out_like=v, initial_state=initial_state)

    def features(x: np.ndarray, seed: int) -> np.ndarray:
        return _float64_features(entry, m, x, seed)

    def state_sums(state) -> tuple[np.ndarray, np.ndarray]:
        return _state_sums(state, log)

    return {"stateful": stateful, "chunked": chunked, "step": step, "varlen": varlen,
            "padded": padded, "features": features, "state_sums": state_sums}
