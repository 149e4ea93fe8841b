"""One set of recurrent forms properties over every transition (issue #41; docs/math.md §13,
§16, §23). Plain, gated and delta-rule attention are one state update ``S_t = S_(t−1)·A_t +
v_t·k_tᵀ`` with different transitions ``A_t``; the bodies here run on any of them, called by
``properties/test_attention_forms.py`` (a plain AttentionTarget offering forms, seen through
:class:`IdentityForms` as the identity transition) and ``properties/test_gated_forms.py``
(every GatedAttentionTarget: decay, delta, gated_delta, kda, comba, rwkv7), whose draws
(layouts, chunk boundaries, gate regimes) stay their own. The forms are called through
:mod:`~kernel_verify.properties.checks.recurrent` (``run``, ``run_steps``, ``run_split``).

* every form (:func:`every_form`: parallel, stateful, chunked at the drawn C and more, the
  recurrence one token at a time over the last tokens, :func:`steps_tail`) meets the reference,
  the final state through ``state_sums`` the exact state (:func:`check_state_sums`);
* split invariance (:func:`split_invariance`): ``[0, t₀)`` then ``[t₀, T)`` from its state, and
  a probe continued from the final state, meet the whole run (bitwise under ``state_bitwise``);
* prefill then decode (:func:`prefill_then_decode`) meets the whole run;
* packed sequences (:func:`packed_sequences`: ``varlen``, ``cu_seqlens``, token inputs packed
  with them, fresh or given initial states) meet each sequence's own run: the state and the
  decay reset at every boundary;
* padding (:func:`padded_inputs`, :func:`padded_rows`: garbage values and gates at padded
  positions, right or left) leaves the valid outputs and the state those of the valid part;
* the state's size does not grow with T, and every form's state has one layout
  (:func:`state_sizes`).

A state is judged by what it does: the :data:`PROBE` tokens continued from it, in the ``read``
regime (:func:`probe_for`: a transition near the identity, so that the probe sees the state
undiminished whatever decays came before it). The reference and its bound are the *judge's*
(:class:`Judge`): ``ByTheTruth`` (:mod:`~kernel_verify.properties.checks.recurrent`; gated
targets, which declare their features) compares with the exact mpmath recurrence of the
target's transition within its derived bound; ``ByTheForms`` (the plain file; black-box
targets too) with the target's own full run or ``attention(causal=True)`` within ``2ε`` of the
inputs, a state with the reference run's state through their continuations. Both add the
same-precision criterion on float32 and half types where they have a plain reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kernel_verify.properties.checks.forms import Shape, draw_inputs
from kernel_verify.properties.checks.recurrent import (
    READ,
    STATEFUL,
    check_state_sums,
    draw_token_inputs,
    full_forms,
    run,
    run_any,
    run_split,
    run_steps,
    seen_gates,
    seen_inputs,
    split_form,
)
from kernel_verify.properties.strategies import QKV, generator, qkv_rows
from kernel_verify.properties.token_inputs import TokenInputs

__all__ = ["NO_GATES", "PROBE", "Expected", "IdentityForms", "Judge", "check_state_sums",
           "every_form", "packed_sequences", "padded_rows",
           "prefill_then_decode", "probe_for", "recurrent_view", "split_invariance",
           "state_sizes", "steps_tail", "where"]

#: The token inputs of the identity transition: no gates, no transition inputs.
NO_GATES = TokenInputs(None)
#: Probe tokens that compare two states through their continuations.
PROBE = 3


# ------------------------------------------------------------------ the identity transition
class IdentityForms:
    """A plain :class:`~kernel_verify.properties.protocol.AttentionTarget`'s forms in the calling
    convention of the gated protocol (``form(q, k, v, g, *, …)``): the identity transition, no
    gates (``g`` is always None and is not passed on), no transition inputs. Every other
    attribute is the target's own."""

    transition = "identity"
    gates = "none"
    gate_input = "log"

    def __init__(self, target: Any) -> None:
        self.target = target
        for name in ("stateful", "chunked", "step", "varlen", "padded"):
            fn = getattr(target, name)
            setattr(self, name, None if fn is None else self._drop_gates(fn, name))
        self.parallel = None  # attention(causal=True) takes no state

    @staticmethod
    def _drop_gates(fn, name: str):
        if name == "step":
            def step(state, q, k, v, g=None, **kw):
                return fn(state, q, k, v, **kw)
            return step

        def form(q, k, v, g=None, **kw):
            return fn(q, k, v, **kw)
        return form

    @staticmethod
    def token_inputs() -> tuple[str, ...]:
        return ()

    @staticmethod
    def gate_parameters() -> tuple[str, ...]:
        return ()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


def where(target: Any, backend: Any, shape: Shape, regime: str | None = None) -> str:
    """The target, backend and layout of a failure (and of a gated draw, the transition, the
    gate input and the regime)."""
    from kernel_verify.properties.checks.recurrent import chunk_of

    drawn = ""
    if regime is not None:
        drawn = "" if target.transition == "decay" else f"{target.transition} "
        if target.gate_input != "log":
            drawn += f"gate input {target.gate_input}, "
        drawn += f"gates {regime}, "
    # the chunk size is a layout fact only for a target with a chunked form
    chunk = (f"C={chunk_of(target, shape.chunk)}, "
             if getattr(target, "chunked", None) is not None else "")
    return (f"{target.name} on {backend.id} (B={shape.b}, H={shape.h}, T={shape.t}, d={shape.d}, "
            f"d_v={shape.dv}, {chunk}t0={shape.cut}, {drawn}seed={shape.seed})")


def recurrent_view(target: Any) -> Any:
    """``target`` in the gated calling convention: a gated target as it is, a plain one through
    :class:`IdentityForms`."""
    return target if hasattr(target, "transition") else IdentityForms(target)


def probe_for(target: Any, backend: Any, shape: Shape, b: int | None = None
              ) -> tuple[QKV, TokenInputs]:
    """The :data:`PROBE` tokens that read a state, as the target sees them: inputs of the layout
    (``b`` rows, default the layout's) and token inputs of the
    :data:`~kernel_verify.properties.checks.recurrent.READ` regime (decays near 1, β and the
    transition's other inputs near the identity; none for the identity transition), whatever the
    sequence's regime: a probe drawn in the sequence's regime reads a state erased by decays
    near 0 (issue #44)."""
    from dataclasses import replace

    view = recurrent_view(target)
    one = replace(shape, b=shape.b if b is None else b)
    x = seen_inputs(draw_inputs(one, t=PROBE, stream="probe"), backend)
    return x, seen_gates(draw_token_inputs(view, one, READ, t=PROBE, stream="probe gates"),
                         backend)


# ------------------------------------------------------------------ the judge
@dataclass(frozen=True)
class Expected:
    """What a judge expects of the rows of one run: ``out`` (float64, the rows judged), ``bound``
    (an array of ``out``'s shape or a scalar), the whole input they end (``context``: the rows
    themselves, or a prefix and the rows) and what the judge needs to judge a state after it
    (``state``: a reference run's final state, or nothing)."""

    out: np.ndarray
    bound: Any
    context: tuple[QKV, TokenInputs]
    state: Any = None
    extra: dict = field(default_factory=dict)


class Judge(Protocol):
    """What a run is compared with (module docstring): ``whole`` the expectation of a run (its
    ``context`` prefix, initial ``state``, ``chunk``, or ``form="attention"``), ``outputs`` and
    ``state`` the comparisons, ``continuation`` what a state does to a probe. ``relative``: the
    reference is the target's own full run (a bitwise equality with it is then everything)."""

    target: Any
    backend: Any
    seed: int
    relative: bool

    def whole(self, x: QKV, g: TokenInputs, **how: Any) -> Expected: ...
    def outputs(self, got: np.ndarray, want: Expected, what: str, start: int = 0) -> None: ...
    def state(self, state: Any, want: Expected, probe: tuple, what: str,
              same_precision: bool = False) -> None: ...
    def same_precision(self, got: np.ndarray, want: Expected, what: str,
                       start: int = 0) -> None: ...
    def continuation(self, state: Any, probe: tuple) -> np.ndarray: ...


# ------------------------------------------------------------------ the shared bodies
def steps_tail(target: Any, backend: Any, x: QKV, g: TokenInputs, *, seed: int, tokens: int,
               prefill_chunk: int | None = None) -> tuple[int, np.ndarray, Any]:
    """``(start, outputs of rows start…T−1, final state)`` of the recurrence one token at a time:
    from the empty state (``start = 0``) when ``T ≤ tokens`` or the target has no
    full-sequence form with a state, else over the last ``tokens`` tokens from the state its
    first full-sequence form with a state (``stateful``, else ``chunked`` at ``prefill_chunk``,
    default the prefix's length) reached after the first ``T − tokens``: a step of a slow kernel
    costs as much as a whole sequence."""
    view = recurrent_view(target)
    n = x.q.shape[-2]
    start = max(n - tokens, 0) if any(getattr(view, f) is not None for f in STATEFUL) else 0
    state = None
    if start:
        state = run_any(view, backend, qkv_rows(x, 0, start), g.rows(0, start), seed=seed,
                        chunk=prefill_chunk or start)[1]
    out, state = run_steps(view, backend, qkv_rows(x, start, n), g.rows(start, n), seed=seed,
                           state=state)
    return start, out, state


def every_form(target: Any, backend: Any, x: QKV, g: TokenInputs, *, seed: int,
               chunks: tuple[int, ...], step_tokens: int, prefill_chunk: int | None = None
               ) -> dict[str, tuple[np.ndarray, Any, int]]:
    """``{form: (outputs of rows start…, final state, start)}`` of every form the target offers:
    ``parallel`` (gated targets), ``stateful``, ``chunked`` at each chunk size of ``chunks``
    (as the target maps them: :func:`~kernel_verify.properties.checks.recurrent.chunk_of`), and
    the recurrence one token at a time over at most ``step_tokens`` final tokens
    (:func:`steps_tail`)."""
    from kernel_verify.properties.checks.recurrent import chunk_of

    view = recurrent_view(target)
    outs: dict[str, tuple[np.ndarray, Any, int]] = {}
    for form in ("parallel", "stateful"):
        if getattr(view, form) is not None:
            outs[form] = (*run(view, backend, x, g, form=form, seed=seed), 0)
    if view.chunked is not None:
        sizes: dict[int, int] = {}
        for c in chunks:
            sizes.setdefault(chunk_of(view, c), c)
        for size, c in sizes.items():
            outs[f"chunked(C={size})"] = (*run(view, backend, x, g, form="chunked", seed=seed,
                                               chunk=c), 0)
    if view.step is not None:
        start, out, state = steps_tail(view, backend, x, g, seed=seed, tokens=step_tokens,
                                       prefill_chunk=prefill_chunk)
        n = x.q.shape[-2]
        name = "step × T" if not start else (f"step × {n - start} (from the full-sequence "
                                             f"form's state after {start} tokens)")
        outs[name] = (out, state, start)
    return outs


def split_invariance(judge: Judge, x: QKV, g: TokenInputs, shape: Shape, where: str) -> None:
    """``[0, t₀)`` then ``[t₀, T)`` from its final state (the state form,
    :func:`~kernel_verify.properties.checks.recurrent.run_split`) meets the judge's whole run,
    outputs and the probe continued from the final state (with the same-precision criterion on
    float32 and half types where the judge has one). Under ``state_bitwise``: the split outputs
    equal the full run of the same form bitwise, and so do the probe's continuations from the
    two final states (for a judge whose reference is that full run, nothing else is left)."""
    view = recurrent_view(judge.target)
    backend = judge.backend
    cut, split, state = run_split(view, backend, x, g, shape)
    probe = probe_for(view, backend, shape)
    if g.fixed:  # one decay per head: the probe's is the sequence's
        probe = (probe[0], TokenInputs(g.g, True, probe[1].extra))
    if view.has("state_bitwise"):
        full, s_full = run(view, backend, x, g, form=split_form(view), seed=shape.seed,
                           chunk=shape.chunk)
        assert np.array_equal(split, full), (f"{where}: split at {cut} is not bitwise equal to "
                                             "the full run (the target claims state_bitwise)")
        a, b = judge.continuation(state, probe), judge.continuation(s_full, probe)
        assert np.array_equal(a, b), f"{where}: the two final states continue differently (bitwise)"
        if judge.relative:
            return
    want = judge.whole(x, g, chunk=shape.chunk)
    judge.outputs(split, want, f"{where}: split at {cut} (continued from the state of [0, {cut}))")
    judge.state(state, want, probe, f"{where}: the split run's final state", same_precision=True)
    judge.same_precision(split, want, f"{where}: split at {cut}")


def forms_left_to_split(target) -> list[str]:
    """The full-sequence forms (``parallel``, ``stateful``, ``chunked``) that
    :func:`split_invariance` does not run from a state: all of them when the target has no
    ``stateful``/``chunked`` form, else every one but :func:`split_form`'s."""
    has_split = any(getattr(target, f) is not None for f in STATEFUL)
    return [f for f in full_forms(target) if not (has_split and f == split_form(target))]


def every_form_from_a_state(judge: Judge, x: QKV, g: TokenInputs, shape: Shape,
                            where: str) -> None:
    """The state after ``[0, t₀)`` (by :func:`split_form`, else token by token) continues every
    form of :func:`forms_left_to_split` over ``[t₀, T)``, ``t₀ = min(max(cut, 1), T − 1)``:
    its rows meet the judge's whole run of ``[0, T)`` (at ``T = 1`` from the empty state: no form
    is called on zero tokens here). A form that drops its ``initial_state`` — a ``parallel`` form
    is never split otherwise — fails here."""
    view = recurrent_view(judge.target)
    backend = judge.backend
    n = x.q.shape[-2]
    cut = min(max(shape.cut, 1), n - 1) if n >= 2 else 0
    state = None  # one token: the continuation starts from the empty state (no call on 0 rows)
    if cut:
        _, state = run_any(view, backend, qkv_rows(x, 0, cut), g.rows(0, cut),
                           seed=shape.seed, chunk=shape.chunk)
    want = judge.whole(x, g, chunk=shape.chunk)
    refused, checked = None, 0
    for form in forms_left_to_split(view):
        try:
            out, _ = run(view, backend, qkv_rows(x, cut, n), g.rows(cut, n), form=form,
                         seed=shape.seed, chunk=shape.chunk, state=state)
        except BaseException as err:
            import pytest

            if not isinstance(err, pytest.skip.Exception):  # skip_state_not_taken's alone
                raise
            refused = err
            continue
        checked += 1
        judge.outputs(out, want, f"{where}: {form} over [{cut}, {n}) continued from the state "
                      f"of [0, {cut})", start=cut)
    if refused is not None and not checked:  # no form took the state: the verdict is a skip
        raise refused


def prefill_then_decode(judge: Judge, x: QKV, g: TokenInputs, cut: int, chunk: int,
                        where: str) -> None:
    """Prefill ``[0, cut)`` with the state form (from the empty state when ``cut = 0``), decode
    ``cut … T−1`` one token at a time from its state: the decoded rows meet the judge's whole
    run (for plain targets, ``attention(causal=True)``)."""
    view = recurrent_view(judge.target)
    backend = judge.backend
    n = x.q.shape[-2]
    state = None
    if cut:
        _, state = run(view, backend, qkv_rows(x, 0, cut), g.rows(0, cut), form=split_form(view),
                       seed=judge.seed, chunk=chunk)
    decoded, _ = run_steps(view, backend, qkv_rows(x, cut, n), g.rows(cut, n), seed=judge.seed,
                           state=state)
    judge.outputs(decoded, judge.whole(x, g, form="attention"), f"{where}: decoding after a "
                  f"prefill of {cut} tokens", start=cut)


def packed_sequences(judge: Judge, seqs: list[QKV], gates: list[TokenInputs], init: Any,
                     prefix: tuple[QKV, TokenInputs] | None, shape: Shape, where: str) -> None:
    """``varlen`` on the sequences packed along time (their token inputs packed with them; a
    fixed per-head decay shared), from the initial states ``init`` (one per sequence, the final
    states of ``prefix``'s rows; None: fresh): each sequence's rows meet its own whole run from
    its own initial state, and its final state continues a probe as that run does — the state
    (and the decay) reset at every boundary."""
    view = recurrent_view(judge.target)
    backend = judge.backend
    from kernel_verify.properties.strategies import qkv_join

    packed = qkv_join(*seqs)
    g_packed = TokenInputs.join(*gates)
    lengths = [s.q.shape[-2] for s in seqs]
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    t = view.to_layout
    q, k, v = (t(backend.from_numpy(a)) for a in (packed.q, packed.k, packed.v))
    gg, kw = g_packed.arguments(view, backend.from_numpy)
    out, states = view.varlen(q, k, v, gg, cu_seqlens=index_array(cu, backend),
                              initial_state=init, seed=judge.seed, **kw)
    out = backend.to_numpy(t(out))
    one = Shape(1, shape.h, shape.t, shape.d, shape.dv, shape.chunk, shape.cut, shape.seed)
    fixed = g_packed.fixed
    for i, x in enumerate(seqs):
        gi = g_packed if fixed else gates[i]
        context = None
        if prefix is not None:
            px, pg = prefix
            pgi = pg if fixed else pg.batch(i, i + 1)
            context = (qkv_join(QKV(*(getattr(px, f)[i:i + 1] for f in "qkv"), px.scale), x),
                       TokenInputs.join(pgi, gi))
        st_i = None if init is None else tuple(s[i:i + 1] for s in init)
        want = judge.whole(x, gi, context=context, state=st_i)
        judge.outputs(out[..., cu[i]:cu[i + 1], :], want, f"{where}: sequence {i} packed")
        if states is not None:
            judge.state(tuple(s[i:i + 1] for s in states), want, probe_for(view, backend, one),
                        f"{where}: sequence {i}'s final state packed")


def index_array(a: np.ndarray, backend: Any) -> Any:
    """An index array (``cu_seqlens``, a mask) on the backend's library and device."""
    if backend.library == "numpy":
        return a
    import torch

    return torch.as_tensor(a, device=backend.device)


def padded_rows(judge: Judge, x: QKV, g: TokenInputs, mask: np.ndarray, shape: Shape,
                where: str, *, grad: bool = False) -> tuple[Any, list]:
    """``padded`` on ``x`` and ``g`` with the positions ``mask`` marks False replaced by garbage
    (values ``30·N(0, 1)``; where the target takes them per token, gates anywhere in
    ``[min_log_gate, 0]`` and transition inputs ``30·N(0, 1)``, β in its range): every row's
    valid outputs meet the judge's whole run of the valid part alone, and its final state
    (unless None) continues a probe as that run does. Returns the outputs as returned (BHTD)
    and the q, k, v leaves (requiring a gradient with ``grad``)."""
    from kernel_verify.properties.checks.recurrent import draw_betas

    view, backend = recurrent_view(judge.target), judge.backend
    rng = generator(judge.seed, "padding")
    arrays = [backend.from_numpy(backend.seen(np.where(mask[:, None, :, None], a, 30 * rng.
                                                       standard_normal(a.shape))))
              for a in (x.q, x.k, x.v)]
    pg = g
    if view.gates not in ("scalar_fixed", "none") or g.extra:
        junk_g = None if g.g is None or g.fixed else rng.uniform(view.min_log_gate, 0.0,
                                                                 g.g.shape)
        junk_extra = {n: 30 * rng.standard_normal(a.shape) if n != "beta" else
                      draw_betas(view, a.shape, "uniform", rng) for n, a in g.extra.items()}
        pg = g.where(mask, seen_gates(TokenInputs(junk_g, g.fixed, junk_extra, raw=g.raw),
                                      backend))
    if grad:
        arrays = [a.detach().requires_grad_(True) for a in arrays]
    t = view.to_layout
    gg, kw = pg.arguments(view, backend.from_numpy)
    out, state = view.padded(*(t(a) for a in arrays), gg, mask=index_array(mask, backend),
                             seed=judge.seed, **kw)
    out = t(out)
    out_np = backend.to_numpy(out.detach() if grad else out)
    for b in range(mask.shape[0]):
        idx = np.flatnonzero(mask[b])
        xb = QKV(*(getattr(x, f)[b:b + 1][..., idx, :] for f in "qkv"), x.scale)
        want = judge.whole(xb, g.select(b, idx))
        judge.outputs(out_np[b:b + 1][..., idx, :], want, f"{where}: row {b} valid outputs")
        if state is not None:
            judge.state(tuple(s[b:b + 1] for s in state), want,
                        probe_for(view, backend, shape, b=1),
                        f"{where}: row {b} final state with padding vs the valid part alone")
    return out, arrays


def state_sizes(target: Any, backend: Any, runs: list[tuple[QKV, TokenInputs]], seed: int,
                chunk: int, where: str) -> None:
    """The state after each of ``runs`` (sequences of different lengths) by every full-sequence
    form with a state (``stateful``, ``chunked`` at ``chunk``) and after two steps of ``step``
    has the same arrays and shapes: the state's size does not grow with T, and every form's
    state has one layout."""
    view = recurrent_view(target)
    sizes = []
    for x, g in runs:
        for form in STATEFUL:
            if getattr(view, form) is not None:
                st_ = run(view, backend, x, g, form=form, seed=seed, chunk=chunk)[1]
                sizes.append((form, [tuple(s.shape) for s in st_]))
        if view.step is not None:
            st_ = run_steps(view, backend, qkv_rows(x, 0, 2), g.rows(0, 2), seed=seed)[1]
            sizes.append(("step × 2", [tuple(s.shape) for s in st_]))
    assert all(s == sizes[0][1] for _, s in sizes), (
        f"{where}: state shapes differ between lengths/forms: {sizes}")
