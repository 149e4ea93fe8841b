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
* ``fused_recurrent_rwkv7(r, w, k, v, a, b)`` (``rwkv7``): fla's generalized delta rule
  ``S ← Diag(e^w) S + b (aᵀS) + k vᵀ`` with ``w`` the log-decay (``exp(w)``, not
  ``exp(−exp(w))``), i.e. ``A = Diag(e^w) + b aᵀ`` with the suite's ``a``, ``b`` as they are;
  called with ``scale=1.0`` (RWKV-7's receptance unscaled; fla's default would be
  ``K^(−1/2)``): identity features.

The chunked kernels' block along time: ``chunk_gated_delta_rule`` takes ``chunk_size`` 16, 32
or 64 and ``chunk_kda`` 32 or 64 (a ``chunked`` form at those sizes); ``chunk_comba`` fixes 64
(``stateful``). The suite's layouts then cross the 64-token block (T = 63, 65, 129).
``differentiable`` is claimed where fla has a backward pass: the chunk kernels and
``fused_recurrent_delta_rule`` (the other fused recurrent kernels raise NotImplementedError in
backward: inference only). The transitions with β claim ``negative_eigenvalues`` (β ∈ [0, 2]:
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
from kernel_verify.properties.gated_protocol import GatedAttentionTarget, l2_features

__all__ = ["CALL_SECONDS", "COMBA_NAIVE", "DELTA_KERNELS", "NAIVE", "NOT_EXPRESSIBLE",
           "NOT_RUNNABLE", "delta_ops", "delta_targets"]

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
#: ``chunk_gated_delta_rule`` 16/32/64, ``chunk_kda`` 32/64), ``chunk_comba``'s fixed 64, the
#: references' fixed blocks (``delta_rule_chunkwise``'s default 32, ``delta_rule_parallel``'s
#: ``BN = 32``, ``BM = 128``); None: a token loop, or a reference taking any chunk size.
CHUNK_SIZES: dict[str, tuple[int, ...] | None] = {
    "chunk_gated_delta_rule": (64, 32, 16), "chunk_kda": (64, 32), "chunk_comba": (64,),
    "delta_rule_chunkwise": (32,), "delta_rule_parallel": (32, 128)}
#: Seconds of one kernel call under the interpreter at T = 65, B = 2, H = 3, d = 4, d_v = 3
#: (process CPU, measured on the 2-core machine with another job running): the ci profile then
#: runs fewer examples of each property (at least 3). The references run in milliseconds.
CALL_SECONDS: dict[str, float] = {
    "fused_recurrent_delta_rule": 0.7, "chunk_gated_delta_rule": 1.2,
    "fused_recurrent_gated_delta_rule": 0.6, "fused_recurrent_gated_delta_rule+gk": 0.6,
    "chunk_kda": 6.0, "fused_recurrent_kda": 0.6, "chunk_comba": 0.8,
    "fused_recurrent_comba": 0.5, "fused_recurrent_rwkv7": 0.6}
#: Kernels with a backward pass (the other fused recurrent kernels raise NotImplementedError).
_BACKWARD = frozenset({"fused_recurrent_delta_rule", "chunk_gated_delta_rule", "chunk_kda",
                       "chunk_comba"})

#: What the interpreter does not run here (fla-core 0.6.0, triton 3.9.0, float32, CPU).
NOT_RUNNABLE: dict[str, str] = {
    "chunk_delta_rule": (
        "refuses float32 before any launch: `AssertionError: ChunkDeltaRuleFunction does not "
        "support float32. Please use bfloat16.` (fla.ops.delta_rule.chunk); in bfloat16 the "
        "interpreter's tl.dot is unusable (it multiplies raw bit patterns), so DeltaNet's chunk "
        "path needs a GPU; fused_recurrent_delta_rule is its target here"),
    "chunk_rwkv7": (
        "`InterpreterError: ValueError('Did you forget to add @triton.jit ? (`_semantic` "
        "argument must be provided outside of JIT functions.)')` in "
        "chunk_dplr_fwd_A_kernel_intra_sub_intra: fla binds `gather = tl.gather` at import "
        "(fla.ops.utils.op, imported by the dplr chunk modules), which the interpreter's "
        "launch-time patching of triton.language does not reach. Rebinding `gather` in those "
        "modules to a @triton.jit helper that calls tl.gather at run time lets it run (measured: "
        "within 6.5e-7 of the exact recurrence at T = 9) — not applied here"),
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
_COMBA_NAIVE_KNOWN = {"test_gated_forms_meet_the_exact_recurrence": COMBA_NAIVE,
                      "test_gated_split_invariance": COMBA_NAIVE,
                      "test_gated_prefill_then_decode": COMBA_NAIVE}


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


def _kernel_target(kernel: str) -> GatedAttentionTarget:
    _, _, transition, gates = DELTA_KERNELS[kernel]
    chunk_sizes = CHUNK_SIZES.get(kernel)
    spec = _Spec(f"fla.{kernel}", transition, gates, "BTHD",
                 "chunked" if chunk_sizes is not None and len(chunk_sizes) > 1 else "stateful",
                 _kernel_call(kernel), varlen=True)
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
    known = _COMBA_NAIVE_KNOWN if ref == "naive_recurrent_comba" else {}
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
