"""flash-linear-attention's delta-rule kernels (``fla-core`` 0.6.0) under Triton's interpreter,
and fla's own pure-torch references of the same recurrences, as
:class:`~kernel_verify.properties.gated_protocol.GatedAttentionTarget` s with a ``transition``
(docs/math.md §23): ``S_t = A_t S_(t−1) + w_t v_tᵀ``, ``o_t = S_tᵀ φ(q_t)``, fla's state
``(N, H, K, V)`` key-first as the suite's (no transpose), torch float32 only (the kernels
accumulate in ``tl.float32``; the references cast their inputs to float32), layout ``BTHD``
(``BHTD`` for the references that take it: ``delta_rule_*`` and ``dplr_*``). Every fla function
is called by keyword (their positional orders differ: ``fused_recurrent_comba(q, k, p, v, …)``,
``chunk_comba(q, k, v, p, …)``).

**Kernels** (``DELTA_KERNELS``), each with the initial state and the final state
(``output_final_state=True``), one token at a time (``step``: the same kernel at T = 1 from the
state) and packed sequences (``varlen``: ``cu_seqlens``, batch 1, one state per sequence,
checked by :func:`kernel_verify.adapters.fla_gated.check_varlen` since fla reads it unchecked):

* ``fused_recurrent_delta_rule`` (``delta``, no gate) and ``chunk_gated_delta_rule``,
  ``fused_recurrent_gated_delta_rule`` (``gated_delta``, one log-gate per token and head ``g``;
  ``A = e^g(I − βkkᵀ)``), ``chunk_kda``, ``fused_recurrent_kda`` (``kda``, per key dimension;
  ``A = (I − βkkᵀ)Diag(e^g)``): q and k L2-normalised by fla itself
  (``use_qk_l2norm_in_kernel=True``: ``x/√(Σx² + 10⁻⁶)``, the convention ``sum_inside``) and q
  scaled by fla's default ``K^(−1/2)``: features :func:`~kernel_verify.properties.gated_protocol.
  l2_features` ``(eps=1e-6)``;
* ``fused_recurrent_gated_delta_rule`` with per-key-dimension gates ``gk`` (target
  ``fla.fused_recurrent_gated_delta_rule+gk``): the kernel decays the state first and then
  applies the delta rule, ``S ← Diag(e^(gk)) S``, ``S ← S + βk(v − Sᵀk)ᵀ``, so its transition is
  ``(I − βkkᵀ)Diag(e^(gk))`` — the suite's ``kda`` (with scalar gates both orders agree; the
  suite's ``gated_delta`` with key-dimension gates, ``Diag(e^g)(I − βkkᵀ)``, is not what it
  computes: measured 4e-2 to 1e-1 apart at T = 9 to 129);
* ``chunk_comba``, ``fused_recurrent_comba`` (``comba``, ``A = e^g I − βkpᵀ``, ``w = βk``):
  fla's in-kernel L2 norm would normalise ``p`` too, so the adapter normalises q and k itself
  (torch float32, ``x/√(Σx² + 10⁻⁶)``, the same convention) and passes ``p`` as given;
* ``fused_recurrent_rwkv7(r, w, k, v, a, b)`` and ``chunk_rwkv7`` (same signature; fla's block
  of 16 tokens without ``lower_bound``; it runs once ``tl.gather`` is rebound,
  :func:`~kernel_verify.adapters._triton_interpreter.patch_gather`) (``rwkv7``): fla's
  generalized delta rule
  ``S ← Diag(e^w) S + b (aᵀS) + k vᵀ`` with ``w`` the log-decay (``exp(w)``, not
  ``exp(−exp(w))``), i.e. ``A = Diag(e^w) + b aᵀ`` with the suite's ``a``, ``b`` as they are;
  called with ``scale=1.0`` (RWKV-7's receptance unscaled; fla's default would be
  ``K^(−1/2)``): identity features.

The chunked kernels' block along time: ``chunk_gated_delta_rule`` takes ``chunk_size`` 16, 32
or 64 (a ``chunked`` form at those sizes); ``chunk_kda`` runs at its default 64 (``stateful``;
its 32 is run by :func:`gradient_check`, forward and backward, to keep the page within its
time budget), ``chunk_comba`` fixes 64, ``chunk_rwkv7`` 16. The suite's layouts then cross
the blocks (T = 63, 65, 129 for 64).
``differentiable`` is claimed where fla has a backward pass: the chunk kernels and
``fused_recurrent_delta_rule`` (the other fused recurrent kernels are inference only:
:data:`NO_BACKWARD`). The suite's gradient properties of these transitions run in torch
float64, which fla's kernels do not declare, so the backward is checked by
:func:`gradient_check` (fla's gradients w.r.t. every input and the initial state against
float64 autograd through the suite's torch recurrence, within a stated normwise tolerance;
``tests/test_adapter_fla_delta.py`` and the measurement ``fla_delta_backward``).
The transitions with β claim ``negative_eigenvalues`` (β ∈ [0, 2]:
fla's ``allow_neg_eigval`` feeds ``2σ(·)`` to the same kernels).

**fla's references** (``NAIVE``; plain torch, no Triton launch, but importing them imports the
kernels' packages, so the interpreter set-up is the same): ``naive_recurrent_gated_delta_rule``,
``naive_chunk_gated_delta_rule``, ``delta_rule_recurrence``, ``delta_rule_chunkwise``,
``delta_rule_parallel``, ``naive_recurrent_kda``, ``naive_chunk_kda``, ``naive_recurrent_comba``,
``naive_chunk_comba``, ``dplr_recurrence`` and ``dplr_chunkwise`` (fla's reference of the RWKV-7
transition; they scale q by ``K^(−1/2)`` themselves). They take q and k as given, so the adapter
L2-normalises them (as above); the chunked ones at any chunk size (``chunked``), the adapter
padding T to a multiple of the chunk with zero tokens where the function requires it (a zero
key, β, value, ``a``, ``b`` and log-gate leave the state and every earlier output unchanged:
exact). ``delta_rule_chunkwise`` and ``delta_rule_parallel`` take no initial state
(``parallel`` form only; ``delta_rule_parallel`` returns no state).

**Finding** (:data:`COMBA_NAIVE`): ``naive_recurrent_comba`` computes
``A = e^g(I − βkpᵀ)`` — the error term ``v − Sᵀp`` read from the state *after* the decay — while
``fused_recurrent_comba``, ``chunk_comba`` and ``naive_chunk_comba`` compute
``A = e^g I − βkpᵀ`` (the suite's ``comba``); in the suite's table that is ``comba`` with ``p``
replaced by ``e^g p``. Its target declares the properties that compare it with the exact
``comba`` recurrence as known failures.

Not targets (:data:`NOT_RUNNABLE`, :data:`NOT_EXPRESSIBLE`): kernels the interpreter does not
run here, with the error, and references the transition table cannot express.

**Conformance page** (``LIBRARY``, key ``fla_delta``: ``kernel-verify conformance fla_delta``,
``reports/conformance/fla_delta.md``; its own budget, apart from ``kernel_verify.adapters.fla``):
``targets`` is :func:`delta_targets`; the measurements ``python -m
kernel_verify.adapters.fla_delta fla_comba_naive | fla_delta_backward [--quick]``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from kernel_verify.adapters import _triton_interpreter as interp
from kernel_verify.adapters._lazy import need
from kernel_verify.adapters.fla_gated import check_varlen
from kernel_verify.adapters.library import Finding, Library, Scope
from kernel_verify.properties.gated_protocol import GatedAttentionTarget, l2_features

__all__ = ["CALL_SECONDS", "COMBA_NAIVE", "DELTA_KERNELS", "GRADIENT_KERNELS", "LIBRARY",
           "NAIVE", "NOT_EXPRESSIBLE", "NOT_RUNNABLE", "NO_BACKWARD", "delta_ops",
           "delta_targets", "gradient_check", "targets"]

if "triton" not in sys.modules:  # before anything imports triton (the check's subprocess)
    interp.enable()

#: fla's L2-normalisation epsilon (``fla.modules.norm.l2norm``'s default and the fused kernels'
#: ``1e-6``), inside the root on the sum of squares.
EPS = 1e-6
#: L2 normalisation in float32 (a sum of d squares, ε, the root, the division) and the q scale:
#: at most ``d/2 + 4`` ulps at the suite's widths (d ≤ 4), as the built-in delta targets declare.
L2_ULPS = 6

#: kernel -> (fla.ops module, fla function, transition, gates)
DELTA_KERNELS: dict[str, tuple[str, str, str, str]] = {
    "fused_recurrent_delta_rule": ("delta_rule", "fused_recurrent_delta_rule", "delta", "none"),
    "chunk_gated_delta_rule": ("gated_delta_rule", "chunk_gated_delta_rule", "gated_delta",
                               "scalar"),
    "fused_recurrent_gated_delta_rule": ("gated_delta_rule", "fused_recurrent_gated_delta_rule",
                                         "gated_delta", "scalar"),
    "fused_recurrent_gated_delta_rule+gk": ("gated_delta_rule",
                                            "fused_recurrent_gated_delta_rule", "kda",
                                            "key_dim"),
    "chunk_kda": ("kda", "chunk_kda", "kda", "key_dim"),
    "fused_recurrent_kda": ("kda", "fused_recurrent_kda", "kda", "key_dim"),
    "chunk_comba": ("comba", "chunk_comba", "comba", "scalar"),
    "fused_recurrent_comba": ("comba", "fused_recurrent_comba", "comba", "scalar"),
    "fused_recurrent_rwkv7": ("rwkv7", "fused_recurrent_rwkv7", "rwkv7", "key_dim"),
    "chunk_rwkv7": ("rwkv7", "chunk_rwkv7", "rwkv7", "key_dim"),
}
#: reference -> (fla.ops module, transition, gates, layout, full-sequence form)
NAIVE: dict[str, tuple[str, str, str, str, str]] = {
    "naive_recurrent_gated_delta_rule": ("gated_delta_rule.naive", "gated_delta", "scalar",
                                         "BTHD", "stateful"),
    "naive_chunk_gated_delta_rule": ("gated_delta_rule.naive", "gated_delta", "scalar", "BTHD",
                                     "chunked"),
    "delta_rule_recurrence": ("delta_rule.naive", "delta", "none", "BHTD", "stateful"),
    "delta_rule_chunkwise": ("delta_rule.naive", "delta", "none", "BHTD", "parallel"),
    "delta_rule_parallel": ("delta_rule.naive", "delta", "none", "BHTD", "parallel"),
    "naive_recurrent_kda": ("kda.naive", "kda", "key_dim", "BTHD", "stateful"),
    "naive_chunk_kda": ("kda.naive", "kda", "key_dim", "BTHD", "chunked"),
    "naive_recurrent_comba": ("comba.naive", "comba", "scalar", "BTHD", "stateful"),
    "naive_chunk_comba": ("comba.naive", "comba", "scalar", "BTHD", "chunked"),
    "dplr_recurrence": ("generalized_delta_rule.dplr.naive", "rwkv7", "key_dim", "BHTD",
                        "stateful"),
    "dplr_chunkwise": ("generalized_delta_rule.dplr.naive", "rwkv7", "key_dim", "BHTD",
                       "chunked"),
}
#: The block sizes along time: a ``chunked`` form's accepted sizes (fla's checks:
#: ``chunk_gated_delta_rule`` 16/32/64), ``chunk_kda``'s default 64 (it also takes 32, which
#: :data:`GRADIENT_KERNELS` runs: a chunked form at both sizes cost 94 s of the page's 205 s of
#: CPU, the budget is 3 min), ``chunk_comba``'s fixed 64, ``chunk_rwkv7``'s 16, the
#: references' fixed blocks (``delta_rule_chunkwise``'s default 32, ``delta_rule_parallel``'s
#: ``BN = 32``, ``BM = 128``); None: a token loop, or a reference taking any chunk size.
CHUNK_SIZES: dict[str, tuple[int, ...] | None] = {
    "chunk_gated_delta_rule": (64, 32, 16), "chunk_kda": (64,), "chunk_comba": (64,),
    "delta_rule_chunkwise": (32,), "delta_rule_parallel": (32, 128), "chunk_rwkv7": (16,)}
#: Seconds of one kernel call under the interpreter at T = 65, B = 2, H = 3, d = 4, d_v = 3
#: (process CPU, measured on the 2-core machine with another job running): the ci profile then
#: runs fewer examples of each property (at least 3). The references run in milliseconds.
CALL_SECONDS: dict[str, float] = {
    "fused_recurrent_delta_rule": 0.7, "chunk_gated_delta_rule": 1.2,
    "fused_recurrent_gated_delta_rule": 0.6, "fused_recurrent_gated_delta_rule+gk": 0.6,
    "chunk_kda": 6.0, "fused_recurrent_kda": 0.6, "chunk_comba": 0.8,
    "fused_recurrent_comba": 0.5, "fused_recurrent_rwkv7": 0.6, "chunk_rwkv7": 1.0}
#: Kernels with a backward pass (the other fused recurrent kernels raise NotImplementedError).
_BACKWARD = frozenset({"fused_recurrent_delta_rule", "chunk_gated_delta_rule", "chunk_kda",
                       "chunk_comba", "chunk_rwkv7"})

#: What the interpreter does not run here (fla-core 0.6.0, triton 3.9.0, float32, CPU).
NOT_RUNNABLE: dict[str, str] = {
    "chunk_delta_rule": (
        "refuses float32 before any launch: `AssertionError: ChunkDeltaRuleFunction does not "
        "support float32. Please use bfloat16.` (fla.ops.delta_rule.chunk). In bfloat16, with "
        "the interpreter's tl.dot repaired (`patch_bf16_dot`), its outputs are still ~1e36 "
        "where the exact recurrence gives ~1 (T = 65, d = d_v = 1, the gated forms properties, "
        "2026-12-07); whether another bfloat16 path of the interpreter or the kernel is at "
        "fault was not diagnosed, so DeltaNet's chunk path needs a GPU; "
        "fused_recurrent_delta_rule is its target here"),
    "fused_chunk_delta_rule": (
        "`NotImplementedError: fused_chunk_delta_rule is deprecated. Please use "
        "chunk_delta_rule instead.`"),
}
#: fla references the transition table cannot express.
NOT_EXPRESSIBLE: dict[str, str] = {
    "iplr_recurrence": (
        "fla.ops.generalized_delta_rule.iplr: S ← S + b(aᵀS) + k vᵀ, RWKV-7's transition "
        "without a decay; the table's rwkv7 takes key-dimension gates only (no gates='none')"),
    "iplr_chunkwise": "as iplr_recurrence",
}
#: naive_recurrent_comba against the suite's comba (module docstring).
COMBA_NAIVE = (
    "fla.ops.comba.naive.naive_recurrent_comba decays the state before reading the error "
    "term (h ← e^g h; v' = v − hᵀp), i.e. A = e^g(I − βkpᵀ), while fused_recurrent_comba, "
    "chunk_comba and naive_chunk_comba compute A = e^g I − βkpᵀ (the suite's comba): O(1) apart "
    "wherever g ≠ 0 (measured 0.14 at T = 9 with g ∈ [−1, 0]); it equals the suite's comba with "
    "p replaced by e^g·p")


@cache
def delta_ops() -> dict[str, Callable[..., Any]]:
    """fla's delta-rule kernels and references under the interpreter (the workarounds of
    :mod:`~kernel_verify.adapters._triton_interpreter`, once per process), by target name."""
    try:
        interp.enable()
    except interp.TritonAlreadyImported as err:
        raise RuntimeError(f"fla delta-rule targets: {err}") from None
    mods = {m: need("fla", f"ops.{m}") for m in
            {*(s[0] for s in DELTA_KERNELS.values()), *(s[0] for s in NAIVE.values())}}
    interp.patch_autotuner()
    interp.patch_nested_lang()
    interp.patch_kernel_modules("fla.")
    interp.patch_gather("fla.")  # chunk_rwkv7's DPLR kernels (fla binds tl.gather at import)
    out = {k: getattr(mods[m], f) for k, (m, f, _, _) in DELTA_KERNELS.items()}
    out.update({k: getattr(mods[m], k) for k, (m, *_rest) in NAIVE.items()})
    return out


# ------------------------------------------------------------------ features
def _l2(x):
    """fla's ``l2norm`` convention in torch (float32 in, float32 out): ``x/√(Σx² + ε)``."""
    import torch

    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + EPS)


def _identity_features(x: np.ndarray, role: str) -> np.ndarray:
    """RWKV-7's kernel at ``scale=1.0``: q (receptance) and k as they are."""
    return np.asarray(x, dtype=np.float64)


def _scaled_q_features(x: np.ndarray, role: str) -> np.ndarray:
    """fla's dplr references: q scaled by ``K^(−1/2)``, k as it is."""
    x = np.asarray(x, dtype=np.float64)
    return x * x.shape[-1] ** -0.5 if role == "q" else x


# ------------------------------------------------------------------ checks and padding
_VECTORS = ("p", "a", "b")


def _check(name: str, layout: str, transition: str, gates: str, q, k, v, g,
           kw: dict[str, Any]) -> None:
    """Shapes (in ``layout``): q, k ``(B, T, H, K)`` alike, v ``(B, T, H, V)``, the gates
    ``(B, T, H)`` or ``(B, T, H, K)`` (None without), β ``(B, T, H)``, p, a, b like q; and
    exactly the transition's inputs by keyword."""
    from kernel_verify.impls.systems import TRANSITIONS

    want = {n for n in TRANSITIONS[transition][1] if n != "g"}
    if set(kw) != want:
        raise TypeError(f"{name}: takes the keyword inputs {sorted(want)}, got {sorted(kw)}")
    if q.ndim != 4 or tuple(k.shape) != tuple(q.shape) or v.ndim != 4 \
            or tuple(v.shape[:3]) != tuple(q.shape[:3]):
        raise ValueError(f"{name}: q, k {'(B, T, H, K)' if layout == 'BTHD' else '(B, H, T, K)'}"
                         f" alike and v with their first three axes; got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    if gates == "none":
        if g is not None:
            raise ValueError(f"{name}: transition {transition!r} takes no gates (g=None)")
    else:
        shape = tuple(q.shape[:3]) if gates == "scalar" else tuple(q.shape)
        if g is None or tuple(g.shape) != shape:
            raise ValueError(f"{name}: log-gates must have shape {shape}, got "
                             f"{None if g is None else tuple(g.shape)}")
    if "beta" in kw and tuple(kw["beta"].shape) != tuple(q.shape[:3]):
        raise ValueError(f"{name}: beta must have shape {tuple(q.shape[:3])}, got "
                         f"{tuple(kw['beta'].shape)}")
    for n in _VECTORS:
        if n in kw and tuple(kw[n].shape) != tuple(q.shape):
            raise ValueError(f"{name}: {n} must have q's shape {tuple(q.shape)}, got "
                             f"{tuple(kw[n].shape)}")


def _pad_time(x, n: int, axis: int):
    """``x`` with ``n`` zero tokens appended along ``axis`` (None stays None)."""
    if x is None or n == 0:
        return x
    import torch

    shape = list(x.shape)
    shape[axis] = n
    return torch.cat([x, x.new_zeros(shape)], dim=axis)


def _state_in(initial_state):
    return None if initial_state is None else initial_state[0].clone()


def _state_sums(state: tuple) -> tuple[np.ndarray, None]:
    """fla's state ``(N, H, K, V)`` (key-first, the suite's orientation) as float64 ``S``."""
    return state[0].detach().to("cpu").double().numpy(), None


# ------------------------------------------------------------------ calls
def _kernel_call(kernel: str) -> Callable[..., Any]:
    """``call(q, k, v, g, kw, s0, cu, chunk) -> (o, S)``: one fla kernel by keyword."""
    _, _, transition, _ = DELTA_KERNELS[kernel]

    def call(q, k, v, g, kw, s0, cu, chunk):
        fn = delta_ops()[kernel]
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        args: dict[str, Any] = {"v": v, "initial_state": s0, "output_final_state": True,
                                "cu_seqlens": cu}
        if transition == "rwkv7":
            args.update(r=q, k=k, w=g.contiguous(), a=kw["a"].contiguous(),
                        b=kw["b"].contiguous(), scale=1.0)
        elif transition == "comba":
            args.update(q=_l2(q), k=_l2(k), p=kw["p"].contiguous(), g=g.contiguous(),
                        beta=kw["beta"].contiguous())
        else:
            args.update(q=q, k=k, beta=kw["beta"].contiguous(), use_qk_l2norm_in_kernel=True)
            if g is not None:
                args["gk" if kernel.endswith("+gk") else "g"] = g.contiguous()
        if chunk is not None:
            args["chunk_size"] = chunk
        o, s = fn(**args)
        return o, s

    return call


def _naive_call(ref: str) -> Callable[..., Any]:
    """``call(q, k, v, g, kw, s0, cu, chunk) -> (o, S or None)``: one fla reference by
    keyword, on L2-normalised q, k (except dplr), T padded to a multiple of the chunk where the
    reference requires it."""
    _, transition, _, layout, _ = NAIVE[ref]
    axis = 1 if layout == "BTHD" else 2

    def call(q, k, v, g, kw, s0, cu, chunk):
        if cu is not None:
            raise ValueError(f"fla.{ref} takes no cu_seqlens")
        fn = delta_ops()[ref]
        if transition != "rwkv7":
            q, k = _l2(q), _l2(k)
        n = int(q.shape[axis])
        block = {"delta_rule_chunkwise": 32, "delta_rule_parallel": 128}.get(ref, chunk)
        pad = 0
        if ref in ("delta_rule_chunkwise", "delta_rule_parallel", "naive_chunk_kda",
                   "dplr_chunkwise"):
            pad = -n % block
        q, k, v, g = (_pad_time(x, pad, axis) for x in (q, k, v, g))
        kw = {name: _pad_time(x, pad, axis) for name, x in kw.items()}
        if ref == "naive_recurrent_gated_delta_rule":
            o, s = fn(q=q, k=k, v=v, beta=kw["beta"], g=g, initial_state=s0,
                      output_final_state=True)
        elif ref == "naive_chunk_gated_delta_rule":
            o, s = fn(q=q, k=k, v=v, g=g, beta=kw["beta"], chunk_size=chunk, initial_state=s0,
                      output_final_state=True)
        elif ref == "delta_rule_recurrence":
            o, s = fn(q=q, k=k, v=v, beta=kw["beta"], initial_state=s0, output_final_state=True)
        elif ref == "delta_rule_chunkwise":
            o, s = fn(q=q, k=k, v=v, beta=kw["beta"], chunk_size=block)
        elif ref == "delta_rule_parallel":
            o, s = fn(q=q, k=k, v=v, beta=kw["beta"])[0], None
        elif ref == "naive_recurrent_kda":
            o, s = fn(q=q, k=k, v=v, g=g, beta=kw["beta"], initial_state=s0,
                      output_final_state=True)
        elif ref == "naive_chunk_kda":
            o, s = fn(q=q, k=k, v=v, g=g, beta=kw["beta"], initial_state=s0,
                      output_final_state=True, chunk_size=chunk)
        elif ref == "naive_recurrent_comba":
            o, s = fn(q=q, k=k, v=v, p=kw["p"], beta=kw["beta"], g=g, initial_state=s0,
                      output_final_state=True)
        elif ref == "naive_chunk_comba":
            o, s = fn(q=q, k=k, v=v, p=kw["p"], g=g, beta=kw["beta"], chunk_size=chunk,
                      initial_state=s0, output_final_state=True)
        elif ref == "dplr_recurrence":
            o, s = fn(q=q, k=k, v=v, alpha=kw["a"], beta=kw["b"], gk=g, initial_state=s0,
                      output_final_state=True)
        else:  # dplr_chunkwise
            o, s = fn(q=q, k=k, v=v, alpha=kw["a"], beta=kw["b"], gk=g, initial_state=s0,
                      output_final_state=True, chunk_size=chunk)
        if pad:
            o = o.narrow(axis, 0, n)
        return o, s

    return call


# ------------------------------------------------------------------ forms
@dataclass(frozen=True)
class _Spec:
    name: str
    transition: str
    gates: str
    layout: str
    full: str  # "stateful", "chunked" or "parallel"
    call: Callable[..., Any]
    varlen: bool
    default_chunk: int | None = None  # the chunk of a step call (chunked references)


def _forms(spec: _Spec) -> dict[str, Any]:
    name, axis = spec.name, 1 if spec.layout == "BTHD" else 2

    def run(q, k, v, g, kw, initial_state=None, cu=None, chunk=None):
        _check(name, spec.layout, spec.transition, spec.gates, q, k, v, g, kw)
        o, s = spec.call(q, k, v, g, kw, _state_in(initial_state), cu, chunk)
        return o, (None if s is None else (s,))

    forms: dict[str, Any] = {}
    if spec.full == "stateful":
        def stateful(q, k, v, g, *, initial_state=None, seed=0, **kw):
            return run(q, k, v, g, kw, initial_state)

        forms["stateful"] = stateful
    elif spec.full == "chunked":
        def chunked(q, k, v, g, *, chunk_size, initial_state=None, seed=0, **kw):
            return run(q, k, v, g, kw, initial_state, chunk=int(chunk_size))

        forms["chunked"] = chunked
    else:
        def parallel(q, k, v, g, *, initial_state=None, seed=0, **kw):
            if initial_state is not None:
                raise ValueError(f"{name} takes no initial state")
            return run(q, k, v, g, kw)

        forms["parallel"] = parallel
    if spec.full != "parallel":
        def step(state, q_t, k_t, v_t, g_t, *, seed=0, **kw):
            def one(x):
                return None if x is None else x.unsqueeze(axis)
            o, new = run(one(q_t), one(k_t), one(v_t), one(g_t),
                         {n: one(x) for n, x in kw.items()}, state, chunk=spec.default_chunk)
            return new, o.squeeze(axis)

        forms["step"] = step
    if spec.varlen:
        def varlen(q, k, v, g, *, cu_seqlens, initial_state=None, seed=0, **kw):
            _check(name, spec.layout, spec.transition, spec.gates, q, k, v, g, kw)
            check_varlen(name, q, cu_seqlens, initial_state)
            return run(q, k, v, g, kw, initial_state, cu=cu_seqlens.to("cpu").long())

        forms["varlen"] = varlen
    return forms


def _claims(transition: str, differentiable: bool) -> frozenset[str]:
    out = {"differentiable"} if differentiable else set()
    if transition in ("delta", "gated_delta", "kda"):
        out.add("negative_eigenvalues")
    return frozenset(out)


def _kernel_target(kernel: str, call: Callable[..., Any] | None = None,
                   name: str | None = None) -> GatedAttentionTarget:
    """The target of ``kernel``; ``call`` (default :func:`_kernel_call`) and ``name`` replaced
    for a planted defect (tests/test_adapter_fla_delta.py)."""
    _, _, transition, gates = DELTA_KERNELS[kernel]
    chunk_sizes = CHUNK_SIZES.get(kernel)
    spec = _Spec(name or f"fla.{kernel}", transition, gates, "BTHD",
                 "chunked" if chunk_sizes is not None and len(chunk_sizes) > 1 else "stateful",
                 call or _kernel_call(kernel), varlen=True)
    rwkv = transition == "rwkv7"
    return GatedAttentionTarget(
        spec.name, gates=gates, transition=transition,
        claims=_claims(transition, kernel in _BACKWARD),
        features=_identity_features if rwkv else l2_features(eps=EPS),
        feature_ulps=0 if rwkv else L2_ULPS, backends=("torch",), dtypes=("float32",),
        layout="BTHD", chunk_sizes=chunk_sizes, state_sums=_state_sums,
        call_seconds=CALL_SECONDS[kernel], **_forms(spec))


def _naive_target(ref: str) -> GatedAttentionTarget:
    _, transition, gates, layout, full = NAIVE[ref]
    known = LIBRARY.known_failures() if ref == "naive_recurrent_comba" else {}
    spec = _Spec(f"fla.{ref}", transition, gates, layout, full, _naive_call(ref),
                 varlen=False, default_chunk=1 if full == "chunked" else None)
    rwkv = transition == "rwkv7"
    return GatedAttentionTarget(
        spec.name, gates=gates, transition=transition, claims=_claims(transition, True),
        features=_scaled_q_features if rwkv else l2_features(eps=EPS),
        feature_ulps=1 if rwkv else L2_ULPS, backends=("torch",), dtypes=("float32",),
        layout=layout, chunk_sizes=CHUNK_SIZES.get(ref),
        state_sums=None if ref == "delta_rule_parallel" else _state_sums,
        known_failures=known, **_forms(spec))


def delta_targets() -> list[GatedAttentionTarget]:
    """One target per kernel of :data:`DELTA_KERNELS` and per reference of :data:`NAIVE`
    (``KV_TARGET=kernel_verify.adapters.fla_delta:delta_targets``)."""
    return [*(_kernel_target(k) for k in DELTA_KERNELS), *(_naive_target(r) for r in NAIVE)]


# ------------------------------------------------------------------ backward
#: Kernels whose backward :func:`gradient_check` runs (:data:`_BACKWARD`), with the chunk sizes
#: it passes (None: the kernel's own block).
GRADIENT_KERNELS: dict[str, tuple[int | None, ...]] = {
    "chunk_gated_delta_rule": (16, 64), "chunk_kda": (32,), "chunk_comba": (None,),
    "chunk_rwkv7": (None,), "fused_recurrent_delta_rule": (None,)}
#: Why the other kernels have no gradient here (measured, fla-core 0.6.0).
NO_BACKWARD: dict[str, str] = {
    "fused_recurrent_gated_delta_rule": "backward raises `NotImplementedError: Backward pass is "
    "not implemented yet ...` (inference only)",
    "fused_recurrent_gated_delta_rule+gk": "as fused_recurrent_gated_delta_rule",
    "fused_recurrent_comba": "backward raises NotImplementedError (inference only)",
    "fused_recurrent_rwkv7": "backward raises `NotImplementedError: Backward pass for "
    "fused_recurrent_dplr_delta_rule is not implemented ...` (inference only)",
    "fused_recurrent_kda": "its output is detached from autograd (`element 0 of tensors does "
    "not require grad`): inference only",
}
#: The constant of :func:`gradient_check`'s tolerance (its docstring).
GRAD_PASSES = 16


@dataclass(frozen=True)
class GradientRow:
    """One input's gradient: max |fla − reference|, the tolerance, max |reference|."""

    name: str
    error: float
    tol: float
    scale: float

    @property
    def ok(self) -> bool:
        return bool(self.error <= self.tol)


def _growth(transition: str, fk, g, kw) -> float:
    """``Γ = max_(s ≤ t) ‖A_t ⋯ A_s‖₂`` of the sequence's transitions (float64, every batch and
    head; at least 1): how much a rounding error made at token s can grow by token t."""
    import torch

    from kernel_verify.impls.torch.recurrence import transition_terms

    lam, x, y, _ = transition_terms(transition, fk, g=g, **kw)
    eye = torch.eye(fk.shape[-1], dtype=torch.float64)
    a = torch.diag_embed(torch.exp(lam)) + x[..., :, None] * y[..., None, :]  # (B, H, T, d, d)
    top = 1.0
    n = a.shape[-3]
    for s in range(n):
        prod = eye.expand(a[..., 0, :, :].shape)
        for t in range(s, n):
            prod = a[..., t, :, :] @ prod
            top = max(top, float(torch.linalg.matrix_norm(prod, ord=2).max()))
    return top


def gradient_inputs(kernel: str, *, t: int, seed: int = 0, b: int = 1, h: int = 2, d: int = 4,
                    dv: int = 3) -> dict[str, Any]:
    """float32 inputs of one backward check (layout BTHD): q, k, v standard normal, log-gates in
    ``[−1, 0]``, β in ``[0, 1]``, ``p`` a random direction of norm in ``[0, 1]``, RWKV-7's
    ``a = −κ``, ``b = κ·U(0, 1)`` (κ a unit vector), an initial state, and the cotangents of the
    output and of the final state."""
    import torch

    _, _, transition, gates = DELTA_KERNELS[kernel]
    gen = torch.Generator().manual_seed(seed)

    def rn(*shape):
        return torch.randn(*shape, generator=gen)

    def ru(*shape):
        return torch.rand(*shape, generator=gen)

    x: dict[str, Any] = {"q": rn(b, t, h, d), "k": rn(b, t, h, d), "v": rn(b, t, h, dv)}
    if gates != "none":
        x["g"] = -ru(*((b, t, h, d) if gates == "key_dim" else (b, t, h)))
    if transition in ("delta", "gated_delta", "kda", "comba"):
        x["beta"] = ru(b, t, h)
    if transition == "comba":
        x["p"] = _l2(rn(b, t, h, d)) * ru(b, t, h, 1)
    if transition == "rwkv7":
        kappa = _l2(rn(b, t, h, d))
        x["a"], x["b"] = -kappa, kappa * ru(b, t, h, d)
    x["h0"] = rn(b, h, d, dv)
    x["do"], x["dh"] = rn(b, t, h, dv), rn(b, h, d, dv)
    return x


def gradient_check(kernel: str, *, t: int, chunk: int | None = None, seed: int = 0,
                   call: Callable[..., Any] | None = None) -> tuple[list[GradientRow], float]:
    """fla's autograd gradients of ``L = Σ dO⊙o + Σ dH⊙S_T`` w.r.t. q, k, v, the log-gates,
    the transition's inputs (β, p, a, b) and the initial state, for one call of ``kernel``
    (float32, inputs of :func:`gradient_inputs`, ``chunk`` passed as ``chunk_size``), against
    float64 torch autograd through :func:`kernel_verify.impls.torch.recurrence.recurrent` on
    the same float32 values, with the declared features (fla's L2 normalisation
    ``x/√(Σx² + 10⁻⁶)`` and ``d^(−1/2)`` on q; identity for RWKV-7) applied in float64.
    ``call``: the kernel call to judge (default :func:`_kernel_call`; a planted defect wraps it).

    Tolerance of input X (normwise, first order): ``GRAD_PASSES · n · u · Γ² · max|∇_X L|``
    with ``u = 2⁻²⁴``, ``n = T(d + d_v) + d`` the terms one state entry accumulates along the
    sequence (plus the normalisation's d), ``Γ`` (:func:`_growth`) the largest norm of a
    product of consecutive transitions — an error made at one token reaches a later one
    through such a product, once in the forward state and once in the reverse-time state of
    the backward (Γ²; 1 for a contraction: gated DeltaNet's and KDA's transitions with
    β ∈ [0, 1] and unit keys) — and ``GRAD_PASSES = 16`` passes over each term (the forward,
    its recomputation in the backward, the reverse recurrence, the gradient's own products,
    the gates' exponentials and the normalisation's Jacobian, each a few roundings). The rows
    ``o`` and ``S_T`` compare the forward (output, final state) by the same scheme. Returns
    the rows and Γ."""
    import torch

    from kernel_verify.impls.torch.recurrence import recurrent

    transition = DELTA_KERNELS[kernel][2]
    x = gradient_inputs(kernel, t=t, seed=seed)
    names = [n for n in ("q", "k", "v", "g", "beta", "p", "a", "b", "h0") if n in x]
    leaves = {n: x[n].clone().requires_grad_(True) for n in names}
    extra = {n: leaves[n] for n in ("beta", "p", "a", "b") if n in leaves}
    fn = call or _kernel_call(kernel)
    o, s = fn(leaves["q"], leaves["k"], leaves["v"], leaves.get("g"), extra, leaves["h0"],
              None, chunk)
    loss = (o * x["do"]).sum() + (s * x["dh"]).sum()
    got = torch.autograd.grad(loss, [leaves[n] for n in names], allow_unused=True)

    ref = {n: x[n].double().requires_grad_(True) for n in names}

    def bhtd(z):
        return None if z is None else z.transpose(1, 2)

    if transition == "rwkv7":
        fq, fk = ref["q"], ref["k"]
    else:
        fq, fk = _l2(ref["q"]) * x["q"].shape[-1] ** -0.5, _l2(ref["k"])
    kw = {n: bhtd(ref[n]) for n in ("beta", "p", "a", "b") if n in ref}
    o64, s64 = recurrent(bhtd(fq), bhtd(fk), bhtd(ref["v"]), transition=transition,
                         g=bhtd(ref.get("g")), initial_state=ref["h0"], **kw)
    loss64 = (bhtd(o64) * x["do"].double()).sum() + (s64 * x["dh"].double()).sum()
    want = torch.autograd.grad(loss64, [ref[n] for n in names])
    with torch.no_grad():
        gamma = _growth(transition, bhtd(fk), bhtd(ref.get("g")), kw)
    n_terms = t * (x["q"].shape[-1] + x["v"].shape[-1]) + x["q"].shape[-1]
    rel = GRAD_PASSES * n_terms * 2.0**-24 * gamma**2
    rows = []
    for n, a, w in (("o", o, bhtd(o64)), ("S_T", s, s64)):  # the forward, same scheme
        w = w.detach()
        err = float((a.detach().double() - w).abs().max())
        rows.append(GradientRow(n, err, rel * float(w.abs().max()), float(w.abs().max())))
    for n, a, w in zip(names, got, want, strict=True):
        w = w.detach()
        a = torch.zeros_like(w) if a is None else a.detach().double()
        scale = float(w.abs().max())
        err = float((a - w).abs().max()) if torch.isfinite(a).all() else float("inf")
        rows.append(GradientRow(n, err, rel * scale, scale))
    return rows, gamma


# ------------------------------------------------------------------ measurements
def _comba_loop(q, k, v, p, beta, g, s0, *, decay_first: bool) -> np.ndarray:
    """Comba token by token in float64 NumPy (BHTD inputs, features applied): the second route
    of :func:`fla_comba_naive`, written from the two formulas, independent of the suite's
    references. ``decay_first``: ``S ← e^g S`` before the error term ``v − Sᵀp`` (fla's
    ``naive_recurrent_comba``); otherwise ``S ← e^g S − βk(pᵀS) + βkvᵀ``."""
    s = np.array(s0, dtype=np.float64)
    out = np.zeros((*q.shape[:-1], v.shape[-1]))
    for t in range(q.shape[-2]):
        e = np.exp(g[..., t])[..., None, None]
        pt, kt, bt = p[..., t, :], k[..., t, :], beta[..., t][..., None]
        if decay_first:
            s = e * s
            err = v[..., t, :] - np.einsum("...f,...fj->...j", pt, s)
        else:
            err = v[..., t, :] - np.einsum("...f,...fj->...j", pt, s)
            s = e * s
        s = s + (bt * kt)[..., :, None] * err[..., None, :]
        out[..., t, :] = np.einsum("...f,...fj->...j", q[..., t, :], s)
    return out


def fla_comba_naive(quick: bool = False) -> str:
    """The Comba finding: each of fla's four Comba implementations against the exact Comba
    recurrence (``A = e^g I − βkpᵀ``, mpmath) and against the same recurrence with the decay
    before the error term (``A = e^g(I − βkpᵀ)``, i.e. ``p → e^g p``), and, as a second route,
    against a float64 NumPy loop of each formula; seeds independent, T crossing
    ``chunk_comba``'s 64-token block."""
    import torch

    from kernel_verify.adapters.confirm import fmt_ci, mean_ci
    from kernel_verify.verify.references.recurrence import recurrence_mp

    seeds = range(8 if quick else 16)
    t_len, b, h, d, dv = (9, 1, 2, 4, 3) if quick else (65, 1, 2, 4, 3)
    impls = {"fused_recurrent_comba": _kernel_call("fused_recurrent_comba"),
             "chunk_comba": _kernel_call("chunk_comba"),
             "naive_recurrent_comba": _naive_call("naive_recurrent_comba"),
             "naive_chunk_comba": _naive_call("naive_chunk_comba")}
    errs: dict[tuple[str, str], list[float]] = {}
    routes = 0.0
    for seed in seeds:
        rng = np.random.default_rng(seed)

        def r32(a):
            return torch.tensor(a, dtype=torch.float32)

        q, k = (r32(rng.standard_normal((b, h, t_len, d))) for _ in range(2))
        v = r32(rng.standard_normal((b, h, t_len, dv)))
        g, beta = r32(-rng.uniform(0, 1, (b, h, t_len))), r32(rng.uniform(0, 1, (b, h, t_len)))
        pd = rng.standard_normal((b, h, t_len, d))
        p = r32(pd / np.linalg.norm(pd, axis=-1, keepdims=True)
                * rng.uniform(0, 1, (b, h, t_len, 1)))
        s0 = r32(rng.standard_normal((b, h, d, dv)))
        f = l2_features(eps=EPS)
        fq, fk = f(q.double().numpy(), "q"), f(k.double().numpy(), "k")
        n64 = {n: x.double().numpy() for n, x in (("v", v), ("g", g), ("beta", beta), ("p", p),
                                                  ("s0", s0))}
        want = {}
        for label, pp in (("e^g I − βkpᵀ", n64["p"]),
                          ("e^g(I − βkpᵀ)", n64["p"] * np.exp(n64["g"])[..., None])):
            want[label] = recurrence_mp(fq, fk, n64["v"], transition="comba", g=n64["g"],
                                        beta=n64["beta"], p=pp, initial_state=n64["s0"])[0]
            loop = _comba_loop(fq, fk, n64["v"], n64["p"], n64["beta"], n64["g"], n64["s0"],
                               decay_first=label.startswith("e^g("))
            routes = max(routes, float(np.abs(loop - want[label]).max()))

        def bthd(x):
            return x.transpose(1, 2).contiguous()

        for name, call in impls.items():
            chunk = 4 if name == "naive_chunk_comba" else None
            o, _ = call(bthd(q), bthd(k), bthd(v), bthd(g), {"beta": bthd(beta), "p": bthd(p)},
                        s0.clone(), None, chunk)
            o = o.transpose(1, 2).double().numpy()
            for label, w in want.items():
                errs.setdefault((name, label), []).append(float(np.abs(o - w).max()))
    lines = [f"Comba, T = {t_len}, B = {b}, H = {h}, d = {d}, d_v = {dv}, g ∈ [−1, 0], "
             f"β ∈ [0, 1], |p| ≤ 1, an initial state, {len(seeds)} seeds, float32 (kernels "
             "under the Triton interpreter). max |o − exact| per seed, mean (95 % CI):"]
    for (name, label), e in errs.items():
        lines.append(f"{name:24s} vs A = {label:14s}: {fmt_ci(*mean_ci(np.array(e)))}")
    lines.append("second route (float64 NumPy loop of each formula, not the suite's code) "
                 f"against the exact recurrence: max difference {routes:.1e}")
    return "\n".join(lines)


def fla_delta_backward(quick: bool = False) -> str:
    """:func:`gradient_check` of every kernel with a backward (:data:`GRADIENT_KERNELS`) at
    T = 65 (and 129 without ``quick``): per input, max |fla − float64 autograd| and the
    tolerance."""
    lines = ["fla's backward against float64 autograd through the suite's torch recurrence "
             "(L = Σ dO⊙o + Σ dH⊙S_T, B = 1, H = 2, d = 4, d_v = 3, an initial state, "
             f"float32, Triton interpreter); tolerance {GRAD_PASSES}·n·u·Γ²·max|∇| "
             "(fla_delta.gradient_check). Per input: max error / tolerance (max |∇|):"]
    for t_len in (65,) if quick else (65, 129):
        for kernel, chunks in GRADIENT_KERNELS.items():
            for chunk in chunks:
                rows, gamma = gradient_check(kernel, t=t_len, chunk=chunk)
                cells = ", ".join(f"{r.name} {r.error:.1e} / {r.tol:.1e} ({r.scale:.2g})"
                                  for r in rows)
                ok = "within" if all(r.ok for r in rows) else "OUTSIDE"
                lines.append(f"{kernel} T={t_len}"
                             f"{'' if chunk is None else f' C={chunk}'} Γ={gamma:.2f}: {ok}: "
                             f"{cells}")
    lines += [f"no backward here: {k}: {why}" for k, why in NO_BACKWARD.items()]
    return "\n".join(lines)


MEASUREMENTS: dict[str, Callable[[bool], str]] = {"fla_comba_naive": fla_comba_naive,
                                                   "fla_delta_backward": fla_delta_backward}


def main(argv: list[str] | None = None) -> int:
    """``python -m kernel_verify.adapters.fla_delta NAME [--quick]``: one measurement."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m kernel_verify.adapters.fla_delta")
    parser.add_argument("name", choices=sorted(MEASUREMENTS))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    print(MEASUREMENTS[args.name](args.quick))
    return 0


# ---------------------------------------------------------------------- the library's record
# What is known about the library (kernel_verify.adapters.library): the conformance page's text,
# the confirmed findings (its known failures derive from them) and their measurements.
def _listing(items: dict[str, str]) -> str:
    return "; ".join(f"`{k}`: {v}" for k, v in items.items())


_RIGHT = (
    "**Delta-rule kernels** (fla-core's Triton code under the interpreter, float32, layout "
    "BTHD, every call by keyword): `fused_recurrent_delta_rule` (DeltaNet), "
    "`chunk_gated_delta_rule` (chunk sizes 64, 32, 16) and `fused_recurrent_gated_delta_rule` "
    "(Gated DeltaNet, A = e^g(I − βkkᵀ)), the same fused kernel with key-dimension gates `gk` "
    "(its transition is KDA's (I − βkkᵀ)Diag(e^g): it decays before the delta rule), "
    "`chunk_kda` (at its default 64; its 32 in the backward measurement) and "
    "`fused_recurrent_kda` (KDA), `chunk_comba` (its fixed 64) and "
    "`fused_recurrent_comba` (Comba, A = e^g I − βkpᵀ), `fused_recurrent_rwkv7` and "
    "`chunk_rwkv7` (RWKV-7's A = Diag(e^w) + baᵀ, fla's block 16), each with its initial "
    "state, final state, one-token steps (the same kernel at T = 1 from the state) and packed "
    "sequences (`cu_seqlens`), run the gated forms properties "
    "(properties/test_gated_forms.py): every form against the exact recurrence of the "
    "declared transition and features within the derived float32 bound, under decays near 1, "
    "near 0, mixed and runs of strong decay; split with the state carried; prefill then "
    "decode; packed equals separate runs; bitwise causality; state size. The layouts cross "
    "each kernel's blocks (T = C − 1, C + 1, 2C + 1: 63, 65, 129 for the 64-token block). "
    "q and k are L2-normalised by fla (`use_qk_l2norm_in_kernel=True`, x/√(Σx² + 10⁻⁶), "
    "declared `l2_features(eps=1e-6)`), or by the adapter in the same convention for Comba "
    "(fla's in-kernel norm would normalise p too). **Backward**: the suite's gradient "
    "properties for these transitions run in torch float64 (finite differences) and fla's "
    "kernels are float32 only, so the backward is measured instead (`fla_delta_backward` "
    "below, also `tests/test_adapter_fla_delta.py`): fla's autograd gradients w.r.t. q, k, v, "
    "the gates, β, p, a, b and the initial state, with a cotangent on the final state, against "
    "float64 autograd through the suite's torch recurrence, for every kernel that has a "
    "backward. **fla's own references** (`naive_*`, `delta_rule_*`, `dplr_*`: plain torch, "
    "no interpreter) are targets of the same exact recurrence, called by keyword; where two "
    "implementations of one recurrence disagree (Comba, the finding) the exact reference and a "
    "second route say which is right. **chunk_rwkv7** runs with one more interpreter "
    "workaround (`tl.gather` rebound, listed above). "
    "**Not run here**: " + _listing(NOT_RUNNABLE) + ". **Not expressible** in the transition "
    "table: " + _listing(NOT_EXPRESSIBLE) + ". **No backward** (inference-only kernels): "
    + _listing(NO_BACKWARD) + ". These, and every kernel in bfloat16 against the float64 "
    "reference, are for a GPU run.")
_MINOR = (
    "Versions: the `fla` extra pins `fla-core>=0.6,<0.7`; the package index has 0.6.0 only "
    "in that range (`pip index versions fla-core`: 0.6.0, 0.5.2, 0.5.1, 0.5.0, 0.4.x, "
    "0.3.2), so the oldest and newest allowed pins are the same release, 0.6.0, the one this "
    "page ran. The newest release below the pin, 0.5.2 (installed with `pip install --no-deps "
    "--target DIR fla-core==0.5.2` and put first on `PYTHONPATH`), does not import with the "
    "extra's triton 3.9.0: `ValueError: key contains names that are not kernel arguments: BT` "
    "from the `@triton.autotune` of `fla/ops/cp/chunk_delta_h.py`, so no verdict exists for "
    "it here. `chunk_rwkv7` warns in float32 that its chunk function does not support "
    "float32 on some platforms; here it meets the exact recurrence and its backward the "
    "float64 one.")
_FINDINGS = (
    Finding(
        "naive_recurrent_comba decays the state before the error term: A = e^g(I − βkpᵀ), "
        "while fla's Comba kernels compute e^g I − βkpᵀ",
        "fla_comba_naive",
        "`fla.ops.comba.naive.naive_recurrent_comba` runs `h = h * g.exp()` and then "
        "`v' = v − hᵀp`: the error term reads the state after the decay, so its transition is "
        "e^g(I − βkpᵀ) — Comba with p replaced by e^g·p. `fused_recurrent_comba`, "
        "`chunk_comba` and `naive_chunk_comba` read it before the decay: e^g I − βkpᵀ. The "
        "exact recurrence sides with the kernels: they meet the exact Comba recurrence to "
        "float32 rounding and naive_recurrent_comba meets the other one (table below; the "
        "second route, a float64 loop of each formula written in the measurement, agrees with "
        "the exact references to float64 rounding). The two differ by O(1) wherever g ≠ 0. "
        "The target declares the three properties that "
        "compare it with the exact Comba recurrence as known failures.",
        "In `naive_recurrent_comba`, compute `b_v = b_v - (h * b_p[..., None]).sum(-2)` before "
        "`h = h * g[:, :, i].exp()[..., None, None]` (read the error term from the undecayed "
        "state), as `naive_chunk_comba` and the kernels do.",
        ("test_gated_forms_meet_the_exact_recurrence", "test_gated_split_invariance",
         "test_gated_prefill_then_decode"),
        ("fla.naive_recurrent_comba",)),
)
_SCOPE = Scope(
    ("fla.chunk_", "fla.fused_"), interp.TAG,
    "fla's delta-rule kernels are Triton code. Here they run under Triton's interpreter "
    "(`TRITON_INTERPRET=1`), which executes each kernel's algorithm — indexing, masks, chunk "
    "boundaries, the UT transform's triangular solves, state passing, the backward "
    "mathematics — program by program in NumPy on a CPU, in float32. GPU-specific behaviour "
    "(TF32 and tensor-core accumulation order, bfloat16 `tl.dot`, the block sizes a GPU's "
    "autotuner would pick) is not exercised, and the table says so beside each kernel "
    "verdict; fla's naive references are plain torch. Interpreter workarounds, none of which "
    "changes what a kernel computes (`kernel_verify/adapters/_triton_interpreter.py`):",
    (*interp.WORKAROUNDS, interp.GATHER_WORKAROUND))
LIBRARY = Library(
    key="fla_delta", title="flash-linear-attention (fla-core): the delta-rule kernels",
    module="fla", dist="fla-core", extra="fla",
    dependencies=("triton", "einops"),
    right=_RIGHT,
    minor=_MINOR,
    findings=_FINDINGS,
    measured=("fla_delta_backward",),
    scope=_SCOPE,
    confirmations=("fla_comba_naive", "fla_delta_backward"),
    confirm_module="kernel_verify.adapters.fla_delta", confirm_in_subprocess=True,
)

#: Every delta-rule target (``kernel-verify check kernel_verify.adapters.fla_delta:targets``).
targets = delta_targets()

if __name__ == "__main__":
    raise SystemExit(main())
