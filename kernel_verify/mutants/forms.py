"""Broken forms of causal linear attention (docs/math.md §13): the defects the field reported
where the parallel, chunked and recurrent forms meet, as black-box ``AttentionTarget`` mutants.

One correct skeleton, FAVOR+ positive features ``φ(x) = exp(Wx − ‖x‖²/2)/√m`` of
``x = q·d^(−1/4)`` (frequencies drawn from ``seed``; ``φ(0) = 1/√m ≠ 0``), in NumPy float64
with every form of the protocol: ``attention`` (the stable log-space kernel of ``impls``),
``chunked``/``stateful`` (chunk loop with the plain state ``(S, z)``), ``step``, ``varlen``,
``padded``. Each mutant flips one switch; the controls (:data:`FORMS_CONTROLS`, spec
``kernel_verify.mutants.forms:control_<name>``) run the same code with every switch off
(also behind a BTHD interface, and once with the recurrence as its full-sequence form, claiming
``state_bitwise``).

* ``zero_padded_tail_updates_state``: the tail chunk is padded with zero *inputs* (not zero
  features), whose ``φ(0)`` enters the state (transformers issue 46190);
* ``final_state_from_full_chunks``: the final state sums full chunks only (wrong whenever
  ``C ∤ T``);
* ``initial_state_ignored``: every form starts from the empty state;
* ``eps_only_in_decode``: the decode step divides by ``den + 1e-6`` (torchscale issue 40);
* ``decode_other_prescale``: the decode step pre-scales by ``1/√d`` instead of ``d^(−1/4)``
  (fla issues 285, 494);
* ``packed_state_not_reset``: packed sequences continue from the previous sequence's state
  (NeMo Automodel PR 2147);
* ``cumsum_over_wrong_axis``: the prefix states come from a cumulative sum over the heads
  instead of the chunks (a layout mix-up, fla issue 547);
* ``padding_keys_in_normaliser``: padded positions are zero-filled and still enter the
  normaliser through ``φ(0)`` (fla issue 1263);
* ``state_keeps_every_chunk``: the returned state is the stack of every chunk's prefix state
  (the cumulative sums without their last-chunk index), so it grows with the length;
* ``packed_reset_one_token_late``: packed sequences reset the state one token late (the first
  token of each later sequence continues the previous one): an off-by-one in ``cu_seqlens``
  handling, seen only with two or more sequences;
* ``eps_in_every_denominator``: every form (the full-sequence one evaluated as one chunk, the
  chunked one, the decode step) divides by ``φ(q)ᵀz + 10⁻⁶``: the forms agree with each other,
  the outputs are off the exact recurrence by ``≈ 10⁻⁶/φ(q)ᵀz`` relative. This target is
  white-box (``features``, ``state_sums``: the exact recurrence is compared), as is its control
  ``forms_correct_whitebox``.

Differentiable torch forms (gradients through the state, padded gradients):
:mod:`kernel_verify.mutants.torch_forms`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np

from kernel_verify.impls.attention_checks import check_attention_inputs
from kernel_verify.impls.numpy.attention import log_linear_attention
from kernel_verify.impls.packed import run_padded
from kernel_verify.properties.protocol import AttentionTarget, Target
from kernel_verify.verify import seeds

M = 16
CLAIMS = frozenset({"causal", "validates_input"})


@dataclasses.dataclass(frozen=True)
class Switches:
    """The defects (all off: the correct control)."""

    pad_tail_with_zero_inputs: bool = False
    final_from_full_chunks: bool = False
    ignore_initial_state: bool = False
    decode_eps: float = 0.0
    decode_prescale_sqrt: bool = False
    packed_no_reset: bool = False
    cumsum_heads: bool = False
    padding_in_normaliser: bool = False
    state_per_chunk: bool = False
    den_eps: float = 0.0
    packed_reset_one_late: bool = False
    state_in_place: bool = False


def _log_features(x: np.ndarray, seed: int, scale: float) -> np.ndarray:
    w = seeds.rng(seed).standard_normal((M, x.shape[-1]))
    xs = x * scale
    return xs @ w.T - 0.5 * np.sum(xs * xs, axis=-1, keepdims=True) - 0.5 * np.log(M)


def _features(x: np.ndarray, seed: int, scale: float | None = None) -> np.ndarray:
    return np.exp(_log_features(x, seed, x.shape[-1] ** -0.25 if scale is None else scale))


def _empty(lead: tuple[int, ...], dv: int) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((*lead, M, dv)), np.zeros((*lead, M))


def _chunked_form(sw: Switches, q, k, v, chunk_size, initial_state, seed):
    """The chunk loop with the plain state ``(S, z)`` under the switches ``sw``."""
    check_attention_inputs(q, k, v, causal=True, names=("q", "k", "v"), backend="numpy")
    lead, n, dv = q.shape[:-2], q.shape[-2], v.shape[-1]
    s0, z0 = (_empty(lead, dv) if initial_state is None or sw.ignore_initial_state
              else initial_state)
    if n == 0:
        return np.zeros((*lead, 0, dv)), (s0, z0)
    c = min(chunk_size, n)
    nc = -(-n // c)
    pad = nc * c - n
    widths = [(0, 0)] * (q.ndim - 2) + [(0, pad), (0, 0)]
    if sw.pad_tail_with_zero_inputs:  # zero inputs: φ(0) ≠ 0 enters the state
        fq = _features(np.pad(q, widths), seed)
        fk = _features(np.pad(k, widths), seed)
    else:  # zero features: nothing enters
        fq, fk = np.pad(_features(q, seed), widths), np.pad(_features(k, seed), widths)
    vv = np.pad(v, widths)
    shape = (*lead, nc, c)
    fq, fk = fq.reshape(*shape, M), fk.reshape(*shape, M)
    vv = vv.reshape(*shape, dv)
    kv = np.swapaxes(fk, -1, -2) @ vv  # (..., nc, m, dv)
    ks = fk.sum(axis=-2)  # (..., nc, m)
    if sw.cumsum_heads:  # the prefix over the heads axis instead of the chunks
        s_inc, z_inc = np.cumsum(kv, axis=1), np.cumsum(ks, axis=1)
    else:
        s_inc, z_inc = np.cumsum(kv, axis=-3), np.cumsum(ks, axis=-2)
    s_prev = s0[..., None, :, :] + s_inc - kv
    z_prev = z0[..., None, :] + z_inc - ks
    within = np.tril(fq @ np.swapaxes(fk, -1, -2))
    num = fq @ s_prev + within @ vv
    den = (fq @ z_prev[..., None])[..., 0] + within.sum(axis=-1) + sw.den_eps
    out = (num / den[..., None]).reshape(*lead, nc * c, dv)[..., :n, :]
    if sw.state_per_chunk:  # every chunk's prefix state kept: grows with the length
        return out, (s0[..., None, :, :] + s_inc, z0[..., None, :] + z_inc)
    full = nc - (1 if sw.final_from_full_chunks and n % c else 0)
    if sw.state_in_place and initial_state is not None:  # accumulated into the caller's state
        s0 += kv[..., :full, :, :].sum(axis=-3)
        z0 += ks[..., :full, :].sum(axis=-2)
        return out, (s0, z0)
    s_fin = s0 + kv[..., :full, :, :].sum(axis=-3)
    z_fin = z0 + ks[..., :full, :].sum(axis=-2)
    return out, (s_fin, z_fin)


def _varlen_form(sw: Switches, stateful: Callable, q, k, v, cu_seqlens, initial_state,
                 seed):
    """Packed sequences run one by one through ``stateful`` (each from its own initial
    state, unless a packing switch carries the previous one)."""
    bounds = [int(c) for c in np.asarray(cu_seqlens).tolist()]
    outs, states, carried = [], [], None
    for i, (a, b) in enumerate(itertools.pairwise(bounds)):
        init = None if initial_state is None else tuple(s[i:i + 1] for s in initial_state)
        if sw.packed_no_reset and carried is not None:
            init = carried
        if sw.packed_reset_one_late and carried is not None:
            # off by one: the first token of sequence i still continues sequence i − 1,
            # the reset (to sequence i's own initial state) comes one token late
            head, _ = stateful(q[:, :, a:a + 1], k[:, :, a:a + 1], v[:, :, a:a + 1],
                               initial_state=carried, seed=seed)
            tail, st = stateful(q[:, :, a + 1:b], k[:, :, a + 1:b], v[:, :, a + 1:b],
                                initial_state=init, seed=seed)
            outs.append(np.concatenate([head, tail], axis=2))
            states.append(st)
            carried = st
            continue
        out, st = stateful(q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], initial_state=init,
                           seed=seed)
        outs.append(out)
        states.append(st)
        carried = st
    return (np.concatenate(outs, axis=2),
            tuple(np.concatenate([s[j] for s in states]) for j in range(2)))


def make_forms(sw: Switches) -> dict[str, Callable]:
    """The protocol's functions for the switches ``sw``."""

    def attention(q, k, v, *, causal, seed=0, **_):
        check_attention_inputs(q, k, v, causal=causal, names=("q", "k", "v"), backend="numpy")
        s = q.shape[-1] ** -0.25
        return log_linear_attention(_log_features(q, seed, s), _log_features(k, seed, s), v,
                                    causal=causal)

    def chunked(q, k, v, *, chunk_size, initial_state=None, seed=0):
        return _chunked_form(sw, q, k, v, chunk_size, initial_state, seed)

    def stateful(q, k, v, *, initial_state=None, seed=0):
        return chunked(q, k, v, chunk_size=4, initial_state=initial_state, seed=seed)

    def step(state, q_t, k_t, v_t, *, seed=0):
        lead, dv = q_t.shape[:-1], v_t.shape[-1]
        s, z = _empty(lead, dv) if state is None else state
        scale = q_t.shape[-1] ** (-0.5 if sw.decode_prescale_sqrt else -0.25)
        fq, fk = _features(q_t, seed, scale), _features(k_t, seed, scale)
        s = s + fk[..., :, None] * v_t[..., None, :]
        z = z + fk
        num = (fq[..., None, :] @ s)[..., 0, :]
        den = np.sum(fq * z, axis=-1, keepdims=True) + sw.decode_eps + sw.den_eps
        return (s, z), num / den

    def varlen(q, k, v, *, cu_seqlens, initial_state=None, seed=0):
        return _varlen_form(sw, stateful, q, k, v, cu_seqlens, initial_state, seed)

    def padded(q, k, v, *, mask, initial_state=None, seed=0):
        mask = np.asarray(mask, dtype=bool)
        if sw.padding_in_normaliser:  # zero-filled padding runs through the whole sequence
            keep = mask[:, None, :, None]
            return stateful(np.where(keep, q, 0.0), np.where(keep, k, 0.0),
                            np.where(keep, v, 0.0), initial_state=initial_state, seed=seed)
        return run_padded(lambda a, b, c, st: stateful(a, b, c, initial_state=st, seed=seed),
                          (q, k, v), mask, out_like=np.zeros(v.shape), initial_state=initial_state)

    def one_chunk(q, k, v, *, causal, seed=0, **_):
        # the full-sequence form as one chunk of the chunked form (the same denominator)
        return chunked(q, k, v, chunk_size=max(q.shape[-2], 1), seed=seed)[0]

    return {"attention": one_chunk if sw.den_eps else attention, "stateful": stateful,
            "chunked": chunked, "step": step, "varlen": varlen, "padded": padded}


def _features_of(x: np.ndarray, seed: int) -> np.ndarray:
    """The features every form uses, float64 (white-box targets)."""
    return _features(np.asarray(x, dtype=np.float64), seed)


def _state_sums(state) -> tuple[np.ndarray, np.ndarray]:
    s, z = state
    return np.asarray(s, dtype=np.float64), np.asarray(z, dtype=np.float64)


def _sequential(fns: dict[str, Callable]) -> dict[str, Callable]:
    """``stateful`` as the recurrence one token at a time (the same operations in the same order
    wherever the sequence is split: split invariance holds bitwise); no ``chunked`` form."""
    step = fns["step"]

    def stateful(q, k, v, *, initial_state=None, seed=0):
        check_attention_inputs(q, k, v, causal=True, names=("q", "k", "v"), backend="numpy")
        state, outs = initial_state, []
        for i in range(q.shape[-2]):
            state, o = step(state, q[..., i, :], k[..., i, :], v[..., i, :], seed=seed)
            outs.append(o)
        if state is None:
            state = _empty(q.shape[:-2], v.shape[-1])
        return np.stack(outs, axis=-2) if outs else np.zeros((*v.shape[:-2], 0, v.shape[-1])), state

    return {**fns, "stateful": stateful, "chunked": None}


def _target(name: str, sw: Switches, layout: str = "BHTD", *,
            sequential: bool = False, whitebox: bool = False) -> AttentionTarget:
    fns = make_forms(sw)
    if whitebox:
        fns = {**fns, "features": _features_of, "state_sums": _state_sums}
    claims = CLAIMS
    if sequential:
        fns, claims = _sequential(fns), CLAIMS | {"state_bitwise"}
        return AttentionTarget(name, claims=claims, **fns)
    if layout == "BTHD":  # the same functions behind a (B, T, H, D) interface
        fns = {k: _bthd(f) if k not in ("step",) else f for k, f in fns.items()}
    return AttentionTarget(name, claims=CLAIMS, layout=layout, **fns)


def _bthd(fn: Callable) -> Callable:
    def wrapped(q, k, v, **kw):
        out = fn(q.swapaxes(1, 2), k.swapaxes(1, 2), v.swapaxes(1, 2), **kw)
        if isinstance(out, tuple):
            return out[0].swapaxes(1, 2), out[1]
        return out.swapaxes(1, 2)

    return wrapped


FORMS_MUTANTS: dict[str, tuple[str, Switches]] = {
    "zero_padded_tail_updates_state": (
        "chunked form padding the tail chunk with zero inputs: φ(0) = 1/√m enters the final "
        "state (transformers issue 46190)", Switches(pad_tail_with_zero_inputs=True)),
    "final_state_from_full_chunks": (
        "final state summed over full chunks only: wrong whenever C does not divide T",
        Switches(final_from_full_chunks=True)),
    "initial_state_ignored": (
        "every form silently starts from the empty state", Switches(ignore_initial_state=True)),
    "eps_only_in_decode": (
        "the decode step divides by φ(q)ᵀz + 1e-6, the other forms by φ(q)ᵀz (torchscale "
        "issue 40)", Switches(decode_eps=1e-6)),
    "decode_other_prescale": (
        "the decode step pre-scales q, k by 1/√d instead of d^(−1/4) (prefill and decode "
        "disagree: fla issues 285, 494)", Switches(decode_prescale_sqrt=True)),
    "packed_state_not_reset": (
        "packed sequences (cu_seqlens) continue from the previous sequence's state (NeMo "
        "Automodel PR 2147)", Switches(packed_no_reset=True)),
    "cumsum_over_wrong_axis": (
        "prefix states from a cumulative sum over the heads axis instead of the chunks (a "
        "layout mix-up; fla issue 547)", Switches(cumsum_heads=True)),
    "padding_keys_in_normaliser": (
        "padded positions zero-filled and run through: their φ(0) stays in the normaliser "
        "and the state (fla issue 1263)", Switches(padding_in_normaliser=True)),
    "state_keeps_every_chunk": (
        "the returned state stacks every chunk's prefix state (the cumulative sums without "
        "their last index): it grows with the sequence length", Switches(state_per_chunk=True)),
    "eps_in_every_denominator": (
        "every form divides by φ(q)ᵀz + 1e-6 (white-box target: features and state sums "
        "exposed): the forms agree, the exact recurrence does not",
        Switches(den_eps=1e-6)),
    "packed_reset_one_token_late": (
        "packed sequences (cu_seqlens) reset the state one token late: the first token of each "
        "later sequence still continues the previous one, and its own state starts after it "
        "(an off-by-one at the boundaries)", Switches(packed_reset_one_late=True)),
    "chunked_state_accumulated_in_place": (
        "the chunked form adds the chunks' sums into the initial_state it is given and returns "
        "it (S0 += Σ φ(k)vᵀ): outputs and returned state right, the caller's state overwritten",
        Switches(state_in_place=True)),
}
#: Mutants whose target is white-box (``features``, ``state_sums``).
_WHITEBOX = {"eps_in_every_denominator"}

#: The property each forms mutant is written for, where it is one property (the others: the
#: whole attention_forms family, the catalogue's default).
FORMS_KILLERS: dict[str, tuple[str, ...]] = {
    "state_keeps_every_chunk": ("attention_forms::test_state_size_does_not_grow_with_length",),
    "eps_in_every_denominator": ("attention_forms::test_forms_meet_the_exact_recurrence",),
    "packed_reset_one_token_late": ("attention_forms::test_packed_sequences_equal_separate_runs",),
    "chunked_state_accumulated_in_place": (
        "inputs_unchanged::test_attention_forms_leave_their_inputs_unchanged",),
}

#: Correct controls: the same code with every switch off (BHTD, and behind a BTHD interface).
FORMS_CONTROLS: dict[str, Callable[[], list[Target]]] = {
    "forms_correct": lambda: [_target("control:forms_correct", Switches())],
    "forms_correct_bthd": lambda: [_target("control:forms_correct_bthd", Switches(), "BTHD")],
    # claims state_bitwise: its full-sequence form is the recurrence itself
    "forms_sequential_bitwise": lambda: [_target("control:forms_sequential_bitwise", Switches(),
                                                 sequential=True)],
    "forms_correct_whitebox": lambda: [_target("control:forms_correct_whitebox", Switches(),
                                               whitebox=True)],
    "forms_torch_correct": lambda: _torch_control(),
}


def _torch_control() -> list[Target]:
    from kernel_verify.mutants.torch_forms import control

    return control()


def mutant_targets(name: str) -> list[Target]:
    _, sw = FORMS_MUTANTS[name]
    return [_target(f"mutant:{name}", sw, whitebox=name in _WHITEBOX)]


def __getattr__(attr: str) -> list[Target]:
    """``control_<name>``: the targets of one control (a ``kernel-verify check`` spec)."""
    if attr.startswith("control_") and attr.removeprefix("control_") in FORMS_CONTROLS:
        return FORMS_CONTROLS[attr.removeprefix("control_")]()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


__all__ = ["FORMS_CONTROLS", "FORMS_MUTANTS", "Switches", "make_forms", "mutant_targets"]
