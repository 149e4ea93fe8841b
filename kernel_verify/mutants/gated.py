"""Broken gated linear attention (docs/math.md §16): the defects the field reported where decays
meet chunk boundaries, state updates and packed sequences, as
:class:`~kernel_verify.properties.gated_protocol.GatedAttentionTarget` mutants.

One skeleton in NumPy (float64 and float32 inputs, computed in float64), chunk by chunk
with an explicit state (the structure of fla's chunked kernels), scalar per-token log-gates,
``φ(q) = q·d^(−1/2)``, ``φ(k) = k``, no normaliser, offering every form: ``parallel`` (one
chunk), ``stateful`` (chunks of 3), ``chunked``, ``step``, ``varlen``, ``padded``. Each mutant
flips one switch; the control (``kernel_verify.mutants.gated:control_gated_correct``) runs
the same code with every switch off, ``control_gated_correct_key_dim`` with per-key-dimension
gates.

* ``gated_late_boundary_decay``: the first row of each chunk reads the carried state without its
  own gate (the decay applied one position late at the boundary: ``e^(Gl_t − g_b)`` instead of
  ``e^(Gl_t)``);
* ``gated_gate_after_update``: ``S_t = a_t (S_(t−1) + φ(k_t)v_tᵀ)`` in every form (each token's own
  pair decayed by its gate: consistent across forms, wrong against the recurrence);
* ``gated_chunk_decay_first_token``: the state crosses a chunk boundary with the decay up to the
  chunk's *first* token instead of its last;
* ``gated_half_cumsum``: the in-chunk cumulative log-gates summed in float16 (chunked forms; the
  step is exact);
* ``gated_linear_space_decay``: the in-chunk decays as ``e^(Gl_t)·e^(−Gl_s)`` in the input's
  dtype instead of ``e^(Gl_t − Gl_s)``: exact in real arithmetic, in float32 a run of strong
  decay overflows ``e^(−Gl_s)`` (past ``e^88.7``) and gives ``0·∞`` = NaN;
* ``gated_packed_state_not_reset``: packed sequences (``cu_seqlens``) continue from the previous
  sequence's final state;
* ``gated_packed_cumsum_not_reset``: packed sequences with given initial states, the
  cumulative log-gate taken once over the packed row: each sequence's initial state is also
  decayed by every earlier sequence's gates (a new user's varlen form; with fresh states, or
  one sequence, it is right);
* ``gated_parallel_drops_initial_state``: the ``parallel`` form ignores its ``initial_state``
  (every other form honours it: the split runs the chunked form, so only a property that
  continues the parallel form from a state sees it — a new user's parallel-plus-step target
  with this defect passed every property before there was one);
* ``gated_step_state_in_place``: the ``step`` form updates the state it is given in place
  (``S *= a; S += k vᵀ``) and returns it: outputs and returned state are right, the caller's
  state is overwritten.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np

from kernel_verify.impls.packed import run_padded
from kernel_verify.properties.gated_protocol import GatedAttentionTarget

__all__ = ["GATED_CONTROLS", "GATED_KILLERS", "GATED_MUTANTS", "Switches", "make_target"]

CLAIMS = frozenset({"validates_input"})


@dataclasses.dataclass(frozen=True)
class Switches:
    """The defects (all off: the correct control)."""

    late_boundary_decay: bool = False
    gate_after_update: bool = False
    chunk_decay_first_token: bool = False
    half_cumsum: bool = False
    linear_space_decay: bool = False
    packed_no_reset: bool = False
    packed_cumsum_not_reset: bool = False
    parallel_drops_initial_state: bool = False
    step_state_in_place: bool = False


def _features(x, role):
    x = np.asarray(x, dtype=np.float64)
    return x * x.shape[-1] ** -0.5 if role == "q" else x


def _check(q, k, v, g, kind):
    for name, a in (("q", q), ("k", k), ("v", v), ("g", g)):
        if not isinstance(a, np.ndarray) or not np.isfinite(a).all():
            raise ValueError(f"{name} must be a finite NumPy array")
    if q.shape != k.shape or v.shape[:-1] != q.shape[:-1]:
        raise ValueError(f"q, k, v shapes disagree: {q.shape}, {k.shape}, {v.shape}")
    want = q.shape[:-1] if kind == "scalar" else q.shape
    if g.shape != want:
        raise ValueError(f"g must have shape {want}, got {g.shape}")
    if (g > 0).any():
        raise ValueError("g (log-gates) must be <= 0")


def _empty(lead, m, dv):
    return np.zeros((*lead, m, dv)), np.zeros((*lead, m))


def _chunked_form(sw: Switches, kind: str, q, k, v, g, chunk_size, initial_state):
    """The chunked gated recurrence (state ``(S, z)``, log-gates ``g``) under ``sw``."""
    _check(q, k, v, g, kind)
    fq, fk = _features(q, "q"), _features(k, "k")
    gm = np.broadcast_to(g[..., None], k.shape) if kind == "scalar" else g
    lead, n, m, dv = q.shape[:-2], q.shape[-2], q.shape[-1], v.shape[-1]
    s, z = _empty(lead, m, dv) if initial_state is None else (
        np.array(initial_state[0], dtype=np.float64), np.array(initial_state[1]))
    out = np.zeros((*lead, n, dv))
    for b in range(0, n, chunk_size):
        e = min(b + chunk_size, n)
        gc = gm[..., b:e, :]
        gl = (np.cumsum(gc.astype(np.float16), axis=-2, dtype=np.float16).astype(np.float64)
              if sw.half_cumsum else np.cumsum(gc, axis=-2))
        c = e - b
        causal = np.tril(np.ones((c, c), dtype=bool))[..., None]
        diff = gl[..., :, None, :] - gl[..., None, :, :]
        own = gc[..., None, :, :] if sw.gate_after_update else 0.0
        decay = np.where(causal, np.exp(np.where(causal, diff + own, 0.0)), 0.0)
        if sw.linear_space_decay:  # e^(G_t)·e^(−G_s) in the input's dtype
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                et, inv = np.exp(gl.astype(q.dtype)), np.exp(-gl.astype(q.dtype))
                decay = np.where(causal, et[..., :, None, :] * inv[..., None, :, :], 0.0)
        pair = np.einsum("...tf,...tsf,...sf->...ts", fq[..., b:e, :], decay, fk[..., b:e, :])
        read = gl - gc[..., :1, :] if sw.late_boundary_decay else gl
        out[..., b:e, :] = (fq[..., b:e, :] * np.exp(read)) @ s + pair @ v[..., b:e, :]
        carry = np.exp(gl[..., 0, :] if sw.chunk_decay_first_token else gl[..., -1, :])
        k_own = gc if sw.gate_after_update else 0.0
        k_dec = fk[..., b:e, :] * np.exp(gl[..., -1:, :] - gl + k_own)
        s = carry[..., None] * s + np.swapaxes(k_dec, -1, -2) @ v[..., b:e, :]
        z = carry * z + k_dec.sum(axis=-2)
    return out, (s, z)


def make_forms(sw: Switches, kind: str = "scalar", stateful_chunk: int = 3) -> dict:
    def chunked(q, k, v, g, *, chunk_size, initial_state=None, seed=0):
        return _chunked_form(sw, kind, q, k, v, g, chunk_size, initial_state)

    def parallel(q, k, v, g, *, initial_state=None, seed=0):
        if sw.parallel_drops_initial_state:
            initial_state = None
        return chunked(q, k, v, g, chunk_size=max(q.shape[-2], 1), initial_state=initial_state)

    def stateful(q, k, v, g, *, initial_state=None, seed=0):
        return chunked(q, k, v, g, chunk_size=stateful_chunk, initial_state=initial_state)

    def step(state, q_t, k_t, v_t, g_t, *, seed=0):
        _check(q_t[..., None, :], k_t[..., None, :], v_t[..., None, :],
               g_t[..., None] if kind == "scalar" else g_t[..., None, :], kind)
        fq, fk = _features(q_t, "q"), _features(k_t, "k")
        a = np.exp(g_t[..., None] if kind == "scalar" else g_t)
        s, z = _empty(q_t.shape[:-1], q_t.shape[-1], v_t.shape[-1]) if state is None else state
        upd = fk[..., :, None] * v_t[..., None, :]
        if sw.step_state_in_place and state is not None:  # the caller's state overwritten
            s *= a[..., None]
            s += upd
            z *= a
            z += fk
        elif sw.gate_after_update:
            s, z = a[..., None] * (s + upd), a * (z + fk)
        else:
            s, z = a[..., None] * s + upd, a * z + fk
        return (s, z), (fq[..., None, :] @ s)[..., 0, :]

    def varlen(q, k, v, g, *, cu_seqlens, initial_state=None, seed=0):
        bounds = [int(c) for c in np.asarray(cu_seqlens).tolist()]
        if bounds[0] != 0 or bounds[-1] != q.shape[-2] or any(
                b <= a for a, b in itertools.pairwise(bounds)):
            raise ValueError(f"cu_seqlens must rise strictly from 0 to T, got {bounds}")
        outs, states, prev = [], [], None
        for i, (a, b) in enumerate(itertools.pairwise(bounds)):
            init = None if initial_state is None else tuple(x[i:i + 1] for x in initial_state)
            if sw.packed_no_reset and prev is not None:
                init = prev
            if sw.packed_cumsum_not_reset and init is not None and a > 0:
                # the decay of the earlier sequences' gates, as a cumsum over the packed row
                earlier = np.exp(g[..., :a].sum(-1) if kind == "scalar" else
                                 g[..., :a, :].sum(-2))
                init = (init[0] * (earlier[..., None, None] if kind == "scalar" else
                                   earlier[..., :, None]),
                        init[1] * (earlier[..., None] if kind == "scalar" else earlier))
            gi = g[..., a:b] if kind == "scalar" else g[..., a:b, :]
            o, st = stateful(q[..., a:b, :], k[..., a:b, :], v[..., a:b, :], gi,
                             initial_state=init)
            outs.append(o)
            states.append(st)
            prev = st
        return (np.concatenate(outs, axis=-2),
                tuple(np.concatenate([s[j] for s in states]) for j in range(2)))

    def padded(q, k, v, g, *, mask, initial_state=None, seed=0):
        mask = np.asarray(mask, dtype=bool)
        rows = [mask[b] for b in range(q.shape[0])]
        return run_padded(lambda a, b, c, gb, st: stateful(a, b, c, gb, initial_state=st),
                          (q, k, v, g), rows, out_like=np.zeros(v.shape),
                          initial_state=initial_state)

    def state_sums(state):
        return np.asarray(state[0], dtype=np.float64), np.asarray(state[1], dtype=np.float64)

    return {"parallel": parallel, "stateful": stateful, "chunked": chunked, "step": step,
            "varlen": varlen, "padded": padded, "state_sums": state_sums}


def make_target(name: str, sw: Switches, kind: str = "scalar") -> GatedAttentionTarget:
    """A gated target of the skeleton with switches ``sw`` (module docstring)."""
    return GatedAttentionTarget(name, gates=kind, claims=CLAIMS, features=_features,
                                dtypes=("float64", "float32"), **make_forms(sw, kind))


GATED_MUTANTS: dict[str, tuple[str, Switches]] = {
    "gated_late_boundary_decay": (
        "the first row of each chunk reads the carried state without its own gate: the decay "
        "applied one position late at a chunk boundary", Switches(late_boundary_decay=True)),
    "gated_gate_after_update": (
        "S_t = a_t (S_(t-1) + k_t v_t^T): the gate applied after the update, in every form",
        Switches(gate_after_update=True)),
    "gated_chunk_decay_first_token": (
        "the state crosses a chunk boundary with the decay up to the chunk's first token "
        "instead of its last", Switches(chunk_decay_first_token=True)),
    "gated_half_cumsum": (
        "in-chunk cumulative log-gates summed in float16 (chunked forms)",
        Switches(half_cumsum=True)),
    "gated_linear_space_decay": (
        "in-chunk decays e^(G_t) * e^(-G_s) in the input's dtype (overflow/underflow under "
        "strong decay in float32)", Switches(linear_space_decay=True)),
    "gated_packed_state_not_reset": (
        "packed sequences continue from the previous sequence's final state",
        Switches(packed_no_reset=True)),
    "gated_packed_cumsum_not_reset": (
        "packed sequences with given initial states: each initial state also decayed by the "
        "earlier sequences' gates (the cumulative log-gate not reset at boundaries)",
        Switches(packed_cumsum_not_reset=True)),
    "gated_parallel_drops_initial_state": (
        "the parallel form ignores its initial_state (the other forms honour it)",
        Switches(parallel_drops_initial_state=True)),
    "gated_step_state_in_place": (
        "the step form updates the state it is given in place (right outputs and returned "
        "state; the caller's state is overwritten, as a decode cache updated in place)",
        Switches(step_state_in_place=True)),
}

#: The property each gated mutant is written for: the exact recurrence, but for the packed one.
GATED_KILLERS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(GATED_MUTANTS, ("gated_forms::test_gated_forms_meet_the_exact_recurrence",)),
    **dict.fromkeys(("gated_packed_state_not_reset", "gated_packed_cumsum_not_reset"), (
        "gated_forms::test_gated_packed_sequences_equal_separate_runs",)),
    "gated_parallel_drops_initial_state": (
        "gated_forms::test_gated_every_form_continues_from_a_state",),
    "gated_step_state_in_place": (
        "inputs_unchanged::test_gated_forms_leave_their_inputs_unchanged",),
}

#: Correct twins: every switch off (scalar gates; per key dimension).
GATED_CONTROLS: dict[str, Callable[[], list]] = {
    "gated_correct": lambda: [make_target("control:gated_correct", Switches())],
    "gated_correct_key_dim": lambda: [make_target("control:gated_correct_key_dim", Switches(),
                                                  kind="key_dim")],
}


def __getattr__(attr: str) -> list:
    """``<mutant name>`` / ``control_<name>``: the targets (``kernel-verify check
    kernel_verify.mutants.gated:gated_half_cumsum``)."""
    if attr in GATED_MUTANTS:
        _, sw = GATED_MUTANTS[attr]
        return [make_target(f"mutant:{attr}", sw)]
    if attr.startswith("control_") and attr.removeprefix("control_") in GATED_CONTROLS:
        return GATED_CONTROLS[attr.removeprefix("control_")]()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
