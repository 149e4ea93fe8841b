"""flash-linear-attention's gated kernels (``fla-core`` 0.6.0) under Triton's interpreter, as
:class:`~kernel_verify.properties.gated_protocol.GatedAttentionTarget` s (docs/math.md §16),
joined to :data:`kernel_verify.adapters.fla.targets`.

Every kernel computes ``o_t = Σ_(s≤t) (q_t·s)ᵀ(D_ts ⊙ k_s) v_s`` (+ the decayed initial state)
with fla's default scale ``s = K^(−1/2)``, no normaliser, layout ``(B, T, H, ·)`` (``BTHD``),
torch float32 (fla accumulates in ``tl.float32``: no float64 path), log-gates as fla takes them:

* simple GLA (``fla.ops.simple_gla``), one scalar gate per token and head, ``g (B, T, H)``:
  ``chunk_simple_gla`` and ``fused_recurrent_simple_gla`` (state in and out, ``cu_seqlens``),
  ``parallel_simple_gla`` (no state; ``cu_seqlens``);
* GLA (``fla.ops.gla``), one gate per key dimension, ``g (B, T, H, K)``: ``chunk_gla``,
  ``fused_recurrent_gla`` (``gk``);
* retention (``fla.ops.retention``), RetNet's fixed decay ``γ_h = 1 − 2^(−5−h)`` computed by fla
  in float32 (``fixed_log_gates`` gives exactly those values): ``chunk_retention``,
  ``fused_recurrent_retention`` (state, ``cu_seqlens``), ``parallel_retention`` (no state).

Forms: ``stateful`` (the kernel with ``initial_state`` and ``output_final_state``; fla's state
``(N, H, K, V)``), ``step`` (the same kernel at T = 1 from the state), ``varlen``
(``cu_seqlens``, batch 1, one state per sequence, checked by the adapter with
:mod:`kernel_verify.impls.sequence_validation` since fla reads it unchecked), ``parallel`` for
the parallel kernels; no ``padded`` (fla has no mask argument: padding is ``cu_seqlens``). The
chunked kernels' block along time is 64 (``chunk_sizes``), so the suite's layouts cross it
(``T = 63, 65, 129``). All claim ``differentiable`` (fla's hand-written backward passes).

Log-gates: the suite's default range, down to ``−30`` per token (runs of them underflow any
linear-space product). Measured (T = 65, d = 2, 40 tokens at ``g``, float32): the chunk kernels'
error grows with the in-chunk cumulative log-gate they sum in float32 — ``chunk_gla`` 2.1e-5,
3.7e-5, 6.5e-5, 1.3e-4 and ``chunk_simple_gla`` 6.9e-6 … 1.7e-4 at ``g = −5, −10, −30, −60`` —
while ``fused_recurrent_gla`` stays at 1–2e-7 (no cumulative sum): within the derived bound
(``4γ_(T+1)·Σ|g|``, docs/math.md §16), finite everywhere (no overflow of the key-side factor).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from kernel_verify.adapters import _triton_interpreter as interp
from kernel_verify.adapters._lazy import need
from kernel_verify.impls.sequence_validation import (
    check_cu_seqlens,
    check_packed_batch,
    check_state_count,
)
from kernel_verify.properties.gated_protocol import GatedAttentionTarget

__all__ = ["CALL_SECONDS", "GATED_KERNELS", "gated_targets"]

if "triton" not in sys.modules:  # before anything imports triton (the check's subprocess)
    interp.enable()

#: Seconds of one gated kernel call under the interpreter at T ≈ 65, d ≤ 4 (measured 0.1–0.6 s
#: of CPU on the 2-core machine): the ci profile runs fewer examples of each property.
CALL_SECONDS = 0.5
#: kernel -> (module, gate kind, offers a state)
GATED_KERNELS: dict[str, tuple[str, str, bool]] = {
    "chunk_simple_gla": ("simple_gla", "scalar", True),
    "fused_recurrent_simple_gla": ("simple_gla", "scalar", True),
    "parallel_simple_gla": ("simple_gla", "scalar", False),
    "chunk_gla": ("gla", "key_dim", True),
    "fused_recurrent_gla": ("gla", "key_dim", True),
    "chunk_retention": ("retention", "scalar_fixed", True),
    "fused_recurrent_retention": ("retention", "scalar_fixed", True),
    "parallel_retention": ("retention", "scalar_fixed", False),
}
CHUNK = 64


@cache
def gated_ops() -> dict[str, Callable[..., Any]]:
    """fla's gated kernels under the interpreter (the workarounds of
    :mod:`~kernel_verify.adapters._triton_interpreter`, once per process)."""
    try:
        interp.enable()
    except interp.TritonAlreadyImported as err:
        raise RuntimeError(f"fla gated kernel targets: {err}") from None
    mods = {m: need("fla", f"ops.{m}") for m in ("simple_gla", "gla", "retention")}
    interp.patch_autotuner()
    interp.patch_nested_lang()
    interp.patch_kernel_modules("fla.")
    return {k: getattr(mods[m], k) for k, (m, _, _) in GATED_KERNELS.items()}


def retention_log_gates(h: int) -> np.ndarray:
    """RetNet's log-decays as fla computes them (float32): ``log(1 − 2^(−5−h))``."""
    import torch

    g = (1 - 2.0 ** (-5.0 - torch.arange(h, dtype=torch.float))).log()
    return g.double().numpy()


def _features(x: np.ndarray, role: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x * x.shape[-1] ** -0.5 if role == "q" else x


def _check(name, q, k, v, g, kind) -> None:
    if q.ndim != 4 or tuple(k.shape) != tuple(q.shape) or tuple(v.shape[:3]) != tuple(q.shape[:3]):
        raise ValueError(f"{name}: q, k (B, T, H, K) alike and v (B, T, H, V) with their B, T, H; "
                         f"got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    want = {"scalar": tuple(q.shape[:3]), "key_dim": tuple(q.shape),
            "scalar_fixed": (q.shape[2],)}[kind]
    if g is not None and tuple(g.shape) != want:
        raise ValueError(f"{name}: log-gates must have shape {want}, got {tuple(g.shape)}")


def _forms(kernel: str) -> dict[str, Any]:
    mod, kind, stateful_kernel = GATED_KERNELS[kernel]
    name = f"fla.{kernel}"

    def call(q, k, v, g, initial_state=None, cu_seqlens=None):
        _check(name, q, k, v, g, kind)
        fn = gated_ops()[kernel]
        kw: dict[str, Any] = {"cu_seqlens": cu_seqlens}
        if mod == "simple_gla":
            kw["g"] = g
        elif mod == "gla":
            kw["gk" if kernel.startswith("fused_recurrent") else "g"] = g
        if stateful_kernel:
            kw.update(initial_state=None if initial_state is None else initial_state[0],
                      output_final_state=True)
            o, state = fn(q, k, v, **kw)
            return o, (state,)
        if initial_state is not None:
            raise ValueError(f"{name} takes no initial state")
        o, _ = fn(q, k, v, **kw)
        return o, None

    forms: dict[str, Any] = {}
    if stateful_kernel:
        def stateful(q, k, v, g, *, initial_state=None, seed=0):
            return call(q, k, v, g, initial_state)

        def step(state, q_t, k_t, v_t, g_t, *, seed=0):
            gt = g_t if kind == "scalar_fixed" else g_t[:, None]
            o, new = call(q_t[:, None], k_t[:, None], v_t[:, None], gt, state)
            return new, o[:, 0]

        forms.update(stateful=stateful, step=step)
    else:
        def parallel(q, k, v, g, *, initial_state=None, seed=0):
            return call(q, k, v, g, initial_state)

        forms["parallel"] = parallel

    def varlen(q, k, v, g, *, cu_seqlens, initial_state=None, seed=0):
        _check(name, q, k, v, g, kind)
        check_varlen(name, q, cu_seqlens, initial_state)
        return call(q, k, v, g, initial_state, cu_seqlens=cu_seqlens)

    forms["varlen"] = varlen
    return forms


def check_varlen(name: str, q: Any, cu_seqlens: Any, initial_state: Any) -> None:
    """The packed-sequence checks of an fla ``varlen`` form (fla reads ``cu_seqlens`` as given:
    a bad one gives wrong rows or states): one packed batch row in ``q``, ``cu_seqlens`` a torch
    tensor of valid boundaries over ``q``'s length, one initial state per sequence."""
    check_packed_batch("q", q)
    if type(cu_seqlens).__module__.split(".")[0] != "torch":
        raise TypeError(f"{name}: cu_seqlens must be a torch integer tensor on q's device, "
                        f"got {type(cu_seqlens).__name__}")
    n_seq = len(check_cu_seqlens(cu_seqlens, length=int(q.shape[1]))) - 1
    check_state_count(initial_state, n_seq, what="sequences in cu_seqlens")


def _state_sums(state: tuple) -> tuple[np.ndarray, None]:
    """fla's state ``(N, H, K, V)`` as float64 ``S``; no normaliser state."""
    return state[0].detach().to("cpu").double().numpy(), None


def _target(kernel: str) -> GatedAttentionTarget:
    _, kind, stateful_kernel = GATED_KERNELS[kernel]
    return GatedAttentionTarget(
        f"fla.{kernel}", gates=kind, claims=frozenset({"differentiable"}), features=_features,
        backends=("torch",), dtypes=("float32",), layout="BTHD",
        chunk_sizes=(CHUNK,) if not kernel.startswith("fused_recurrent") else None,
        state_sums=_state_sums if stateful_kernel else None,
        fixed_log_gates=retention_log_gates if kind == "scalar_fixed" else None,
        call_seconds=CALL_SECONDS, **_forms(kernel))


def gated_targets() -> list[GatedAttentionTarget]:
    """One target per kernel of :data:`GATED_KERNELS`."""
    return [_target(k) for k in GATED_KERNELS]


# ------------------------------------------------------------------ the page's measurement
#: Sizes of the measurement: batch, heads, key and value dimensions.
_B, _H, _D, _DV = 1, 2, 4, 4
#: Each kernel's second route in fla.
_TWIN = {"chunk_simple_gla": "fused_recurrent_simple_gla",
         "parallel_simple_gla": "chunk_simple_gla", "chunk_gla": "fused_recurrent_gla",
         "chunk_retention": "fused_recurrent_retention",
         "parallel_retention": "chunk_retention"}


def _draw(kind, n, seed, strong):
    """``q, k, v`` (0.5·N(0, 1)) and gates near 1 (``g ∈ [−10⁻³, 0]``; ``strong``: a run of
    ``g = −30`` over half the sequence); retention's own fixed gates."""
    rng = np.random.default_rng([32, n, seed])
    q, k, v = (0.5 * rng.standard_normal((_B, _H, n, w)) for w in (_D, _D, _DV))
    if kind == "scalar_fixed":
        return q, k, v, retention_log_gates(_H)
    g = -rng.uniform(0, 1e-3, (_B, _H, n) if kind == "scalar" else (_B, _H, n, _D))
    if strong:
        g[:, :, n // 4:n // 4 + max(n // 2, 1)] = -30.0
    return q, k, v, g


def _per_token(kind, g, n):
    return np.broadcast_to(g[None, :, None], (_B, _H, n)).copy() if kind == "scalar_fixed" \
        else g


def _run(t, q, k, v, g, state=None, cu=None):
    """The target's stateful (or parallel; ``cu``: varlen) form in float32 on (B, H, T, ·)
    inputs; the output back in (B, H, T, d_v) float64."""
    import torch

    ins = [torch.tensor(np.swapaxes(a, 1, 2), dtype=torch.float32) for a in (q, k, v)]
    gt = torch.tensor(g if t.gates == "scalar_fixed" else np.swapaxes(g, 1, 2),
                      dtype=torch.float32)
    fn = t.stateful or t.parallel
    if cu is not None:
        o, s = t.varlen(*ins, gt, cu_seqlens=torch.tensor(cu), initial_state=state)
    else:
        o, s = fn(*ins, gt, initial_state=state)
    return np.swapaxes(o.double().numpy(), 1, 2), s


def _ratio(got, q, k, g, v, kind, n):
    """``(max err/bound, max |err|)`` of ``got`` against the exact gated recurrence and its
    derived float32 bound."""
    from kernel_verify.verify.gated_bounds import gated_forms_error_bound, smallest_normal
    from kernel_verify.verify.references.gated import gated_recurrence_mp

    kw = {"u": 2.0**-24, "exp_ulps": 4, "tiny": smallest_normal("float32"), "extra": 2}
    gg = _per_token(kind, g, n)
    want, _ = gated_recurrence_mp(q * _D**-0.5, k, v, gg)
    bound = gated_forms_error_bound(q * _D**-0.5, k, v, gg, **kw)
    return float((np.abs(got - want) / bound).max()), float(np.abs(got - want).max())


def _length_lines(name, t, targets, lengths, worst) -> list[str]:
    """One line per length (gates near 1, a run of strong decay) against the exact recurrence
    and the kernel's second route."""
    import itertools

    lines = []
    for n, strong in itertools.product(lengths, (False, True)):
        q, k, v, g = _draw(t.gates, n, 0, strong)
        got, _ = _run(t, q, k, v, g)
        r, e = _ratio(got, q, k, g, v, t.gates, n)
        worst[name] = max(worst.get(name, 0.0), r)
        extra = ""
        if name in _TWIN:
            other, _ = _run(targets[_TWIN[name]], q, k, v, g)
            extra = f"; vs {_TWIN[name]}: max diff {np.abs(got - other).max():.1e}"
        label = ("own γ_h  " if t.gates == "scalar_fixed" else
                 "g=-30 run" if strong else "g near 0 ")
        if t.gates == "scalar_fixed" and strong:
            continue  # retention's decay is its own: one row per length
        lines.append(f"{name:27s} T={n:3d} {label}: "
                     f"max |o − exact| = {e:.1e}, err/bound = {r:.3f}{extra}")
    return lines


def _split_lines(name, t, quick, worst) -> list[str]:
    """A stateful kernel split with the state carried, and packed (``cu_seqlens``)."""
    import itertools

    n, cut = (65, 40) if quick else (129, 70)
    q, k, v, g = _draw(t.gates, n, 1, True)
    fixed = t.gates == "scalar_fixed"

    def gp(a, c, e, fixed=fixed):
        return a if fixed else a[:, :, c:e]
    o1, s1 = _run(t, q[:, :, :cut], k[:, :, :cut], v[:, :, :cut], gp(g, 0, cut))
    o2, _ = _run(t, q[:, :, cut:], k[:, :, cut:], v[:, :, cut:], gp(g, cut, n), state=s1)
    r, _ = _ratio(np.concatenate([o1, o2], axis=2), q, k, g, v, t.gates, n)
    worst[name] = max(worst[name], r)
    lines = [f"{name:27s} T={n} split at {cut} (state carried): err/bound = {r:.3f}"]
    cu = [0, 7, 57, n]  # three sequences, the second crossing the 64-token block
    one = [a[:1] for a in (q, k, v)]
    g1 = g if t.gates == "scalar_fixed" else g[:1]
    got, _ = _run(t, *one, g1, cu=cu)
    r = 0.0
    for a, e in itertools.pairwise(cu):
        r = max(r, _ratio(got[:, :, a:e], *(x[:, :, a:e] for x in one[:2]),
                          gp(g1, a, e), one[2][:, :, a:e], t.gates, e - a)[0])
    worst[name] = max(worst[name], r)
    lines.append(f"{name:27s} packed {cu}: err/bound = {r:.3f}")
    return lines


def fla_gated_exact(quick: bool = False) -> str:
    """Every gated kernel against the exact gated recurrence (mpmath) within the derived
    float32 bound of docs/math.md §16, at lengths across the 64-token block, with decays near 1
    (``g ∈ [−10⁻³, 0]``) and with a run of strong decay (``g = −30`` over half the sequence);
    the stateful kernels also split with the state carried and packed (``cu_seqlens``); and
    each kernel against its second route in fla (chunk ↔ fused recurrent, parallel ↔ chunk) on
    the same inputs. ``python -m kernel_verify.adapters._fla_confirm fla_gated_exact``."""
    import time

    lengths = (1, 65) if quick else (1, 63, 65, 129)
    targets = {t.name.removeprefix("fla."): t for t in gated_targets()}
    lines, worst, t0 = [], {}, time.time()
    for name, t in targets.items():
        lines += _length_lines(name, t, targets, lengths, worst)
        if t.stateful is not None:
            lines += _split_lines(name, t, quick, worst)
    ok = all(r <= 1 for r in worst.values())
    head = (f"d = d_v = {_D}, B = {_B}, H = {_H}, float32, Triton interpreter (NumPy on a CPU; "
            f"GPU rounding not exercised); gates near 1 and a run of g = -30; every output within "
            f"its derived bound: {'yes' if ok else 'NO'} ({time.time() - t0:.0f} s)")
    return "\n".join([head, *lines])
