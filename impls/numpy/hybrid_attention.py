"""Causal hybrid attention: softmax over a sliding window, linear attention before it (NumPy).

docs/math.md §22 (LoLCATs, Zhang et al. 2024, arXiv 2410.10254; Based, Arora et al.
2024, a sliding window next to linear attention). For a window ``w ≥ 0`` and a mixing factor
``γ > 0`` (LoLCATs' learned window factor), query ``i`` weighs key ``j ≤ i`` by

* ``γ·exp(s·q_iᵀk_j)`` when ``i − w < j ≤ i`` (the ``w`` most recent keys, itself included),
* ``φ(q_i)ᵀφ(k_j)`` when ``j ≤ i − w`` (the keys that left the window),

and ``y_i = Σ_j a_ij v_j / Σ_j a_ij``. ``w ≥ T`` is exact softmax attention, ``w = 0`` linear
attention with φ. The exponentials are evaluated shifted by ``c_i = max(max_j s·q_iᵀk_j,
log|ℓ_i|)`` (``ℓ_i`` the linear denominator), applied to *both* parts, so nothing overflows and
the shift cancels exactly in the quotient (LoLCATs' code shifts the softmax part alone, which
changes the mixture by ``e^(−c_i)``; this module computes the formula above).

**State** ``(K_w, Φ_w, V_w, n, S, z)``: the window's last ``w`` keys, their features and values
(``(…, w, d)``, ``(…, w, m)``, ``(…, w, d_v)``, left-padded: the last ``n`` slots are valid), the
count ``n (…,)`` (exact small integers in the input dtype, one value for the whole batch), and
the linear state of the keys that left, ``S = Σ φ(k_j)v_jᵀ (…, m, d_v)``, ``z = Σ φ(k_j) (…, m)``.
Its size does not depend on T.

* :func:`hybrid_attention`: the parallel form over ``T`` tokens continuing from a state;
* :func:`hybrid_attention_step`: one token: the oldest key leaves a full window into ``(S, z)``,
  the new one enters, the query reads both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_verify.impls.attention_checks import (
    check_attention_inputs,
    check_scale,
    denominator_guard,
)
from kernel_verify.impls.forms_checks import check_step_inputs
from kernel_verify.impls.validation import check_positive_int, check_scalar

State = tuple[np.ndarray, ...]

__all__ = ["hybrid_attention", "hybrid_attention_step"]

#: The largest window buffer of a state, in bytes: a window whose ``(K_w, Φ_w, V_w)`` would
#: take more is refused by name before anything is allocated (``window = 10**12`` would
#: otherwise allocate until MemoryError). 4 GiB: far beyond any window a state is meant to hold.
MAX_WINDOW_BYTES = 2**32


def check_hybrid_options(window: Any, mix: Any, scale: Any) -> tuple[int, float, float | None]:
    """``window`` an integer ``≥ 0``, ``mix`` a finite number ``> 0``, ``scale`` None or ``> 0``."""
    return (check_positive_int("window", window, minimum=0),
            check_scalar("mix", mix, positive=True), check_scale(scale))


def check_window_size(window: int, lead: tuple[int, ...], d: int, m: int, dv: int,
                      itemsize: int) -> None:
    """The window buffer ``(K_w, Φ_w, V_w)`` of shapes ``(*lead, window, d | m | d_v)`` fits in
    :data:`MAX_WINDOW_BYTES`; else a ValueError naming ``window``."""
    rows = int(np.prod(lead, dtype=np.int64)) if lead else 1
    size = rows * int(window) * (int(d) + int(m) + int(dv)) * int(itemsize)
    if size > MAX_WINDOW_BYTES:
        raise ValueError(f"window = {window} is too large: the state's window buffer would take "
                         f"{size / 2**30:.3g} GiB for leading shape {tuple(lead)} (d = {d}, "
                         f"m = {m}, d_v = {dv}), more than {MAX_WINDOW_BYTES / 2**30:.3g} GiB; "
                         "a window past the sequence length acts as softmax attention, so pass "
                         "at most the longest length the state will see")


def empty_state(lead: tuple[int, ...], window: int, d: int, m: int, dv: int,
                dtype: Any) -> State:
    """The state before any token (module docstring)."""
    check_window_size(window, lead, d, m, dv, np.dtype(dtype).itemsize)
    z = np.zeros
    return (z((*lead, window, d), dtype), z((*lead, window, m), dtype),
            z((*lead, window, dv), dtype), z(lead, dtype), z((*lead, m, dv), dtype),
            z((*lead, m), dtype))


def check_hybrid_state(state: Any, *, lead: tuple, window: int, d: int, m: int, dv: int,
                       name: str = "initial_state") -> int:
    """A state of the module's shape for these sizes; returns its count ``n`` of valid window
    slots (one value for the whole batch, ``0 ≤ n ≤ window``)."""
    want = [(*lead, window, d), (*lead, window, m), (*lead, window, dv), tuple(lead),
            (*lead, m, dv), (*lead, m)]
    if not isinstance(state, tuple | list) or len(state) != 6:
        raise TypeError(f"{name} must be a tuple (K_w, Φ_w, V_w, n, S, z) of 6 arrays, got "
                        f"{type(state).__name__}")
    for i, (s, shape) in enumerate(zip(state, want, strict=True)):
        if not hasattr(s, "shape") or tuple(s.shape) != shape:
            got = tuple(s.shape) if hasattr(s, "shape") else type(s).__name__
            raise ValueError(f"{name}[{i}] must have shape {shape} (window={window}), got {got}")
        if not bool(_finite(s)):
            raise ValueError(f"{name}[{i}] contains NaN or Inf")
    counts = _values(state[3])
    if counts.size and (counts.min() != counts.max() or counts[0] != round(counts[0])
                        or not 0 <= counts[0] <= window):
        raise ValueError(f"{name}[3] (the window count) must be one integer in [0, {window}] "
                         f"for the whole batch, got {sorted(set(counts.tolist()))[:4]}")
    return int(counts[0]) if counts.size else 0


def _finite(x: Any) -> bool:
    if type(x).__module__.startswith("torch"):
        import torch

        return bool(torch.isfinite(x).all())
    return bool(np.isfinite(np.asarray(x)).all())


def _values(x: Any) -> np.ndarray:
    if type(x).__module__.startswith("torch"):
        return x.detach().double().cpu().numpy().reshape(-1)
    return np.asarray(x, dtype=np.float64).reshape(-1)


def check_feature_inputs(q: Any, phi_q: Any, phi_k: Any, v: Any, backend: str,
                         names: tuple[str, str, str] = ("phi_q", "phi_k", "v")) -> None:
    """Features of one width, one row per token of ``q``."""
    check_attention_inputs(phi_q, phi_k, v, causal=True, names=names, backend=backend)
    if tuple(phi_q.shape[:-1]) != tuple(q.shape[:-1]):
        raise ValueError(f"{names[0]} must have one row per query: shape (..., T, m) with the "
                         f"leading shape of q {tuple(q.shape[:-1])}, got {tuple(phi_q.shape)}")


def combine(scores: np.ndarray, lin_w: np.ndarray, vals: np.ndarray, lin_num: np.ndarray,
            lin_den: np.ndarray, mix: float, zero_denominator: str) -> np.ndarray:
    """``(γΣ e^(s−c) v + e^(−c)·ℓ_num) / (γΣ e^(s−c) + e^(−c)·ℓ_den)``: ``scores (…, T, N)``
    (−inf outside the window), ``lin_w (…, T, N)`` linear weights of buffered keys that left,
    ``vals (…, N, d_v)``, ``lin_num/lin_den`` the state's part (module docstring)."""
    num_l = lin_num + lin_w @ vals
    den_l = lin_den + lin_w.sum(axis=-1, keepdims=True)
    top = np.max(scores, axis=-1, keepdims=True) if scores.shape[-1] else np.full(
        den_l.shape, -np.inf)
    with np.errstate(divide="ignore"):
        c = np.maximum(top, np.log(np.abs(den_l)))
    c = np.where(np.isfinite(c), c, 0.0)
    e = np.exp(scores - c) * mix
    # rows whose linear part is exactly 0 (no key has left yet) take no factor: e^(−c) may
    # overflow there when every window score is very negative
    some = (den_l != 0) | np.any(num_l != 0, axis=-1, keepdims=True)
    with np.errstate(over="ignore"):
        f = np.where(some, np.exp(-c), 0.0)
    num = e @ vals + num_l * f
    den = e.sum(axis=-1, keepdims=True) + den_l * f
    return num / denominator_guard(den, zero_denominator)


def hybrid_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, phi_q: np.ndarray,
                     phi_k: np.ndarray, *, window: int, mix: float = 1.0,
                     scale: float | None = None, initial_state: State | None = None,
                     zero_denominator: str = "raise") -> tuple[np.ndarray, State]:
    """The parallel form (module docstring): ``q, k (…, T, d)``, ``v (…, T, d_v)``,
    ``phi_q, phi_k (…, T, m)``; ``scale`` defaults to ``1/√d``. Returns ``(out, final_state)``."""
    window, mix, scale = check_hybrid_options(window, mix, scale)
    check_attention_inputs(q, k, v, causal=True, names=("q", "k", "v"), backend="numpy")
    check_feature_inputs(q, phi_q, phi_k, v, "numpy")
    lead, t, d = q.shape[:-2], q.shape[-2], q.shape[-1]
    m, dv, dt = phi_q.shape[-1], v.shape[-1], q.dtype
    if initial_state is None:
        initial_state = empty_state(lead, window, d, m, dv, dt)
    n0 = check_hybrid_state(initial_state, lead=lead, window=window, d=d, m=m, dv=dv)
    kw, fw, vw, _, s0, z0 = (np.asarray(x, dtype=dt) for x in initial_state)
    keys = np.concatenate([kw[..., window - n0:, :], k], axis=-2)
    feats = np.concatenate([fw[..., window - n0:, :], phi_k], axis=-2)
    vals = np.concatenate([vw[..., window - n0:, :], v], axis=-2)
    pos_q = n0 + np.arange(t)[:, None]
    pos_k = np.arange(n0 + t)[None, :]
    in_window = (pos_k <= pos_q) & (pos_k > pos_q - window)
    left = pos_k <= pos_q - window
    s = dt.type(1.0 / np.sqrt(d) if scale is None else scale)
    scores = np.where(in_window, (q @ np.swapaxes(keys, -1, -2)) * s, -np.inf)
    lin_w = np.where(left, phi_q @ np.swapaxes(feats, -1, -2), 0.0)
    out = combine(scores, lin_w, vals, phi_q @ s0, phi_q @ z0[..., None], mix, zero_denominator)
    total = n0 + t
    keep = min(window, total)
    gone = total - keep
    state = empty_state(lead, window, d, m, dv, dt)
    for dst, src in zip(state[:3], (keys, feats, vals), strict=True):
        dst[..., window - keep:, :] = src[..., gone:, :]
    state[3][...] = keep
    state[4][...] = s0 + np.swapaxes(feats[..., :gone, :], -1, -2) @ vals[..., :gone, :]
    state[5][...] = z0 + feats[..., :gone, :].sum(axis=-2)
    return out.astype(dt, copy=False), state


def advance_window(parts: tuple, n: int, k_t: Any, phi_k_t: Any, v_t: Any, window: int,
                   cat: Any) -> tuple:
    """One token enters the window ``(K_w, Φ_w, V_w)`` (``n`` valid slots); with a full window
    the oldest key first leaves it for ``(S, z)`` (``window = 0``: the new key goes there at
    once). Array-generic (``cat`` joins along time); returns ``(K_w, Φ_w, V_w, S, z, n)``."""
    kw, fw, vw, s, z = parts
    if window == 0:
        return kw, fw, vw, s + phi_k_t[..., :, None] * v_t[..., None, :], z + phi_k_t, 0
    if n == window:
        s = s + fw[..., 0, :, None] * vw[..., 0, None, :]
        z = z + fw[..., 0, :]
    kw, fw, vw = (cat([b[..., 1:, :], x[..., None, :]])
                  for b, x in ((kw, k_t), (fw, phi_k_t), (vw, v_t)))
    return kw, fw, vw, s, z, min(n + 1, window)


def hybrid_attention_step(state: State | None, q_t: np.ndarray, k_t: np.ndarray, v_t: np.ndarray,
                          phi_q_t: np.ndarray, phi_k_t: np.ndarray, *, window: int,
                          mix: float = 1.0, scale: float | None = None,
                          zero_denominator: str = "raise") -> tuple[State, np.ndarray]:
    """One token (module docstring): ``q_t, k_t (…, d)``, ``v_t (…, d_v)``, ``phi_q_t,
    phi_k_t (…, m)``; ``state`` None is the empty state. Returns ``(state, o_t)``."""
    window, mix, scale = check_hybrid_options(window, mix, scale)
    check_step_inputs(q_t, k_t, v_t, names=("q_t", "k_t", "v_t"), backend="numpy")
    check_step_inputs(phi_q_t, phi_k_t, v_t, names=("phi_q_t", "phi_k_t", "v_t"),
                      backend="numpy")
    if q_t.dtype != phi_q_t.dtype:
        raise TypeError(f"dtypes must match: q_t={q_t.dtype}, phi_q_t={phi_q_t.dtype}")
    lead, d, m, dv, dt = q_t.shape[:-1], q_t.shape[-1], phi_q_t.shape[-1], v_t.shape[-1], q_t.dtype
    if tuple(phi_q_t.shape[:-1]) != tuple(lead):
        raise ValueError(f"phi_q_t must have the leading shape of q_t {tuple(lead)}, got "
                         f"{tuple(phi_q_t.shape)}")
    if state is None:
        state = empty_state(lead, window, d, m, dv, dt)
    n = check_hybrid_state(state, lead=lead, window=window, d=d, m=m, dv=dv, name="state")
    kw, fw, vw, _, s, z = (np.array(x, dtype=dt) for x in state)
    kw, fw, vw, s, z, n = advance_window((kw, fw, vw, s, z), n, k_t, phi_k_t, v_t, window,
                                         lambda xs: np.concatenate(xs, axis=-2))
    sc = dt.type(1.0 / np.sqrt(d) if scale is None else scale)
    valid = np.arange(window) >= window - n
    scores = np.where(valid, (kw @ q_t[..., :, None])[..., 0] * sc, -np.inf)[..., None, :]
    no_lin = np.zeros((*lead, 1, window), dt)
    o = combine(scores, no_lin, vw, (phi_q_t[..., None, :] @ s),
                (phi_q_t[..., None, :] @ z[..., :, None]), mix, zero_denominator)
    new = (kw, fw, vw, np.full(lead, n, dt), s, z)
    return new, o[..., 0, :].astype(dt, copy=False)
