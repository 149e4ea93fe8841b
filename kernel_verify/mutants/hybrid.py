"""Hybrid attention mutants (sliding-window softmax + linear attention, docs/math.md §22): one
defect each, for ``properties/test_hybrid_attention.py``, with correct twins.

Two skeletons:

* a plain NumPy weights-matrix implementation (:func:`_masked_hybrid`) whose state is the whole
  history, with the window and linear masks and the exponentials' shift as switches — the
  correct twin ``hybrid_masks_correct`` uses the masks of the formula and the shift;
* the built-in targets (:mod:`kernel_verify.properties.builtin_hybrid`) with one step or state
  hand-off broken — twins ``hybrid_builtin_correct`` (NumPy) and ``hybrid_torch_correct``.

Run one with ``kernel-verify check kernel_verify.mutants.hybrid:<name> --profile mutants -k
hybrid`` (``control_<twin>`` for a twin).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kernel_verify.properties.builtin_hybrid import elu1, hybrid_target
from kernel_verify.properties.hybrid_protocol import HybridAttentionTarget
from kernel_verify.verify.backends import as_float64

__all__ = ["HYBRID_CONTROLS", "HYBRID_KILLERS", "HYBRID_MUTANTS"]

ALL = ("float64", "float32", "float16", "bfloat16")
BOTH = ("numpy", "torch")
Mask = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


def _window_right(i, j, w):
    return (j <= i) & (j > i - w)


def _left_right(i, j, w):
    return j <= i - w


def _masked_hybrid(name: str, window_mask: Mask = _window_right,
                   left_mask: Mask = _left_right, shift: bool = True) -> HybridAttentionTarget:
    """``y_i = Σ a_ij v_j / Σ a_ij`` from the weights matrix over the whole history, computed in
    NumPy float64 and rounded once to the input's backend and dtype (NumPy float64; torch in
    every dtype: the mask defects are seen on every dtype path), ``γ = 1``, scale ``1/√d``,
    φ = elu + 1; the state is the history ``(K, Φ, V)`` in float64."""

    def rows_out(q, keys, feats, vals, start, window):
        t, n = q.shape[-2], keys.shape[-2]
        i, j = start + np.arange(t)[:, None], np.arange(n)[None, :]
        score = (q @ np.swapaxes(keys, -1, -2)) / np.sqrt(q.shape[-1])
        with np.errstate(divide="ignore"):
            log_lin = np.log(elu1(q) @ np.swapaxes(feats, -1, -2))  # positive features
        # The two parts are added, not overwritten: a key both masks admit is counted twice.
        log_a = np.logaddexp(np.where(window_mask(i, j, window), score, -np.inf),
                             np.where(left_mask(i, j, window) & (j <= i), log_lin, -np.inf))
        top = np.max(log_a, axis=-1, keepdims=True) if shift else 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            a = np.exp(log_a - top)
            return (a @ vals) / a.sum(axis=-1, keepdims=True)

    def attention(q, k, v, *, window, initial_state=None):
        back = _back_to(v)
        q, k, v = (as_float64(x) for x in (q, k, v))
        hist = initial_state or (k[..., :0, :], elu1(k)[..., :0, :], v[..., :0, :])
        keys = np.concatenate([hist[0], k], axis=-2)
        feats = np.concatenate([hist[1], elu1(k)], axis=-2)
        vals = np.concatenate([hist[2], v], axis=-2)
        out = rows_out(q, keys, feats, vals, hist[0].shape[-2], window)
        return back(out), (keys, feats, vals)

    def step(state, q_t, k_t, v_t, *, window):
        out, state = attention(q_t[..., None, :], k_t[..., None, :], v_t[..., None, :],
                               window=window, initial_state=state)
        return state, out[..., 0, :]

    return HybridAttentionTarget(name, frozenset({"validates_input", "half_in_float32"}),
                                 attention,
                                 lambda x, role: elu1(np.asarray(x, dtype=np.float64)),
                                 step=step, backends=BOTH, dtypes=ALL)


def _back_to(like):
    """Rounds a float64 NumPy result once to ``like``'s backend, dtype and device."""
    if type(like).__module__.startswith("torch"):
        import torch

        return lambda x: torch.as_tensor(x, dtype=torch.float64).to(like.device, like.dtype)
    return lambda x: x.astype(like.dtype)


def _state_missing_exit(name: str) -> HybridAttentionTarget:
    """Built-in target (every backend and dtype) whose final state keeps the initial linear
    state: keys that left the window during the call never reach ``(S, z)``."""
    base = hybrid_target(name, backends=BOTH, dtypes=ALL)

    def attention(q, k, v, *, window, initial_state=None):
        out, state = base.attention(q, k, v, window=window, initial_state=initial_state)
        s0 = initial_state[4:] if initial_state is not None else (0 * state[4], 0 * state[5])
        return out, (*state[:4], *s0)

    return HybridAttentionTarget(name, base.claims, attention, base.features, step=base.step,
                                 backends=BOTH, dtypes=ALL)


def _step_missing_exit(name: str) -> HybridAttentionTarget:
    """Built-in target (every backend and dtype) whose step drops the key leaving a full window
    instead of adding it to ``(S, z)``."""
    base = hybrid_target(name, backends=BOTH, dtypes=ALL)

    def step(state, q_t, k_t, v_t, *, window):
        if state is not None and window > 0 and float(state[3].reshape(-1)[0]) == window:
            # the oldest slot is marked empty: the step appends without any key leaving
            state = (*state[:3], state[3] - 1, state[4], state[5])
        return base.step(state, q_t, k_t, v_t, window=window)

    return HybridAttentionTarget(name, base.claims, base.attention, base.features, step=step,
                                 backends=BOTH, dtypes=ALL)


def _torch_detached_features(name: str) -> HybridAttentionTarget:
    """Built-in torch float64 target whose features are computed on ``x.detach()``: the forward
    is right, the linear part's gradient is missing."""
    return hybrid_target(name, backends=("torch",), dtypes=("float64",),
                         phi=lambda x: elu1(x.detach()))


HYBRID_MUTANTS: dict[str, tuple[str, Callable[[str], HybridAttentionTarget]]] = {
    "hybrid_window_one_short": (
        "the window holds w − 1 keys (i − w + 1 < j ≤ i) and the linear part starts one key "
        "early: a consistent partition of the wrong width",
        lambda n: _masked_hybrid(n, lambda i, j, w: (j <= i) & (j > i - w + 1),
                                 lambda i, j, w: j <= i - w + 1)),
    "hybrid_key_in_both": (
        "key i − w is counted twice: in the window (i − w ≤ j ≤ i) and in the linear part",
        lambda n: _masked_hybrid(n, lambda i, j, w: (j <= i) & (j >= i - w))),
    "hybrid_window_sees_future": (
        "the window is centred (|i − j| < w): up to w − 1 future keys in every softmax part",
        lambda n: _masked_hybrid(n, lambda i, j, w: np.abs(i - j) < w)),
    "hybrid_unshifted_exponentials": (
        "the weights exp(s·qᵀk) are taken without a shift: right at moderate scores, inf/NaN "
        "once a score passes the exponential's range",
        lambda n: _masked_hybrid(n, shift=False)),
    "hybrid_state_missing_exit": (
        "the final state keeps the initial linear state: keys that left the window during "
        "the call are lost to the continuation", _state_missing_exit),
    "hybrid_step_missing_exit": (
        "the step form drops the key that leaves a full window instead of adding it to (S, z)",
        _step_missing_exit),
    "hybrid_detached_features": (
        "torch: the features are computed on detached inputs (no gradient through the linear "
        "part; the forward is right)", _torch_detached_features),
}

HYBRID_KILLERS: dict[str, tuple[str, ...]] = {
    "hybrid_window_one_short": ("hybrid_attention::test_full_window_is_softmax_attention",
                                "hybrid_attention::test_hybrid_meets_the_exact_reference"),
    "hybrid_key_in_both": ("hybrid_attention::test_zero_window_is_linear_attention",
                           "hybrid_attention::test_hybrid_meets_the_exact_reference"),
    "hybrid_window_sees_future": ("hybrid_attention::test_hybrid_outputs_ignore_the_future",
                                  "hybrid_attention::test_hybrid_meets_the_exact_reference"),
    "hybrid_unshifted_exponentials": (
        "hybrid_attention::test_hybrid_large_scores_meet_the_exact_reference",),
    "hybrid_state_missing_exit": ("hybrid_attention::test_hybrid_forms_agree_across_the_window",),
    "hybrid_step_missing_exit": ("hybrid_attention::test_hybrid_forms_agree_across_the_window",),
    "hybrid_detached_features": (
        "hybrid_attention::test_hybrid_gradients_match_finite_differences",),
}

#: Correct twins of the two skeletons.
HYBRID_CONTROLS: dict[str, Callable[[], list]] = {
    "hybrid_masks_correct": lambda: [_masked_hybrid("control:hybrid_masks_correct")],
    "hybrid_builtin_correct": lambda: [hybrid_target("control:hybrid_builtin_correct",
                                                     backends=BOTH, dtypes=ALL)],
    "hybrid_torch_correct": lambda: [hybrid_target("control:hybrid_torch_correct",
                                                   backends=("torch",), dtypes=("float64",))],
}


def __getattr__(attr: str) -> list:
    """``<mutant name>`` / ``control_<twin>``: the targets."""
    if attr in HYBRID_MUTANTS:
        return [HYBRID_MUTANTS[attr][1](f"mutant:{attr}")]
    if attr.startswith("control_") and attr.removeprefix("control_") in HYBRID_CONTROLS:
        return HYBRID_CONTROLS[attr.removeprefix("control_")]()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
