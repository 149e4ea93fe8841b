"""Built-in targets of the delta rule and its relatives
(:class:`~kernel_verify.properties.gated_protocol.GatedAttentionTarget` with a ``transition``
other than ``"decay"``, docs/math.md §23): the project's one recurrence
(:mod:`kernel_verify.impls.numpy.recurrence`, :mod:`kernel_verify.impls.torch.recurrence`)
behind the recurrent forms protocol, one target per transition, offering every form:
``parallel`` (one chunk of T), ``stateful`` (chunks of 64), ``chunked`` at any size (the UT
transform), ``step``, ``varlen`` and ``padded``.

Conventions, declared through ``features`` (:func:`~kernel_verify.properties.gated_protocol.
l2_features`): DeltaNet, Gated DeltaNet, KDA and Comba L2-normalise q and k with ε = 10⁻⁶
inside the root on the sum (fla's ``l2norm``) and scale q by ``d^(−1/2)``; RWKV-7 takes q
(its receptance) and k as they are. β is given, except for the Gated DeltaNet target that takes
its logit (``beta="sigmoid"``, as the models compute it); DeltaNet claims
``negative_eigenvalues`` (β ∈ [0, 2]). The state is ``(S,)``.

Each target takes its name (``gated_attention:<system>``) and claims from its descriptor
(:mod:`kernel_verify.impls.systems`, kind ``gated_attention``). Coverage (``make test``
budget): Gated DeltaNet on every backend × dtype; DeltaNet and KDA on NumPy and torch float64
and float32; Comba and RWKV-7 on NumPy and torch float64.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_verify.impls.systems import delta_system
from kernel_verify.impls.validation import is_torch
from kernel_verify.properties.gated_protocol import GatedAttentionTarget, l2_features

__all__ = ["DELTA_COVERAGE", "builtin_delta_targets", "delta_target", "gate_input_targets",
           "gates_from_input", "make_delta_forms"]

ALL = ("float64", "float32", "float16", "bfloat16")
#: transition -> (backends, dtypes) run by ``make test``.
DELTA_COVERAGE: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "gated_delta": (("numpy", "torch"), ALL),
    "delta": (("numpy", "torch"), ("float64", "float32")),
    "kda": (("numpy", "torch"), ("float64", "float32")),
    "comba": (("numpy", "torch"), ("float64",)),
    "rwkv7": (("numpy", "torch"), ("float64",)),
}
#: The transition's inputs besides q, k, v, by keyword.
_NAMES = ("beta", "p", "a", "b")
#: Time on axis −2 for packing (``run_packed``): a per-token scalar gets a trailing axis.
_SCALAR = ("beta",)


def _mod(x: Any):
    if is_torch(x):
        from kernel_verify.impls.torch import recurrence
    else:
        from kernel_verify.impls.numpy import recurrence
    return recurrence


def _up(x: Any) -> Any:
    """A half tensor in float32 (``half_in_float32``); anything else as it is."""
    if x is None or not is_torch(x):
        return x
    from kernel_verify.impls.torch.convert import compute_dtype

    return x.to(compute_dtype(x.dtype))


_PARAMS = ("A_log", "dt_bias")


def _head_axes(p: Any, a: Any, step: bool) -> Any:
    """A per-head parameter ``(H,)`` or ``(H, d)`` shaped to broadcast against the raw gate
    input ``a``: ``(B, H, T[, d])``, or one token's ``(B, H[, d])`` (``step``)."""
    key_dim = a.ndim == (3 if step else 4)
    if p.ndim == 1:
        p = p[:, None] if key_dim else p
        return p if step else p[:, None]
    return p if step else p[:, None, :]


def gates_from_input(gate_input: str, a: Any, kw: dict, *, lower: float | None,
                     step: bool = False) -> Any:
    """The log-gates of a raw gate input (``impls.recurrence_conventions``): ``"mamba"``
    ``−exp(A_log)·softplus(a + dt_bias)``, ``"bounded"`` ``lower·σ(a)``, ``"bounded_affine"``
    ``lower·σ(exp(A_log)·(a + dt_bias))``; ``"log"``: ``a`` itself."""
    from kernel_verify.impls.recurrence_conventions import bounded_log_gate, mamba_log_gate

    if gate_input == "log" or a is None:
        return a
    if gate_input == "bounded":
        return bounded_log_gate(a, lower=lower)
    a_log, dt = (_head_axes(_up(kw[n]), a, step) for n in _PARAMS)
    if gate_input == "mamba":
        return mamba_log_gate(a, A_log=a_log, dt_bias=dt)
    exp = a_log.exp() if is_torch(a_log) else np.exp(a_log)
    return bounded_log_gate(exp * (a + dt), lower=lower)


def make_delta_forms(transition: str, *, phi, beta: str = "given", gate_input: str = "log",
                     gate_lower: float | None = None,
                     negative_eigenvalues: bool = False) -> dict[str, Any]:
    """The forms of a delta-rule target of ``transition`` over the impls (module docstring):
    ``phi(x, role)`` the features applied to q and k on the backend; with ``gate_input`` other
    than ``"log"`` the forms take the raw gate input (and ``A_log``, ``dt_bias`` by keyword)
    and compute the log-gates themselves (:func:`gates_from_input`); with ``beta="sigmoid"``
    β = σ(logit), or 2σ(logit) with ``negative_eigenvalues``."""
    gated = transition != "delta"

    def prepared(q, k, v, g, kw, step=False):
        qq, kk, vv = _up(q), _up(k), _up(v)
        inputs = {n: _up(kw[n]) for n in _NAMES if kw.get(n) is not None}
        if "beta" in inputs and beta == "sigmoid":
            from kernel_verify.impls.recurrence_conventions import beta_from_logit

            inputs["beta"] = beta_from_logit(
                inputs["beta"], allow_negative_eigenvalues=negative_eigenvalues)
        if gated:
            inputs["g"] = gates_from_input(gate_input, _up(g), kw, lower=gate_lower, step=step)
        return phi(qq, "q"), phi(kk, "k"), vv, inputs

    def state_in(initial_state):
        if initial_state is None:
            return None
        return _up(initial_state[0])

    def down(out, like):
        return out.to(like.dtype) if is_torch(out) else out

    def chunked(q, k, v, g, *, chunk_size, initial_state=None, seed=0, **kw):
        fq, fk, vv, inputs = prepared(q, k, v, g, kw)
        out, s = _mod(q).chunked(fq, fk, vv, transition=transition, chunk_size=chunk_size,
                                 initial_state=state_in(initial_state), **inputs)
        return down(out, v), (s,)

    def parallel(q, k, v, g, *, initial_state=None, seed=0, **kw):
        return chunked(q, k, v, g, chunk_size=max(int(q.shape[2]), 1),
                       initial_state=initial_state, **kw)

    def stateful(q, k, v, g, *, initial_state=None, seed=0, **kw):
        return chunked(q, k, v, g, chunk_size=64, initial_state=initial_state, **kw)

    def step(state, q_t, k_t, v_t, g_t, *, seed=0, **kw):
        fq, fk, vv, inputs = prepared(q_t, k_t, v_t, g_t, kw, step=True)
        s, o = _mod(q_t).recurrent_step(state_in(state), fq, fk, vv, transition=transition,
                                        **{f"{n}_t": a for n, a in inputs.items()})
        return (s,), down(o, v_t)

    def varlen(q, k, v, g, *, cu_seqlens, initial_state=None, seed=0, **kw):
        from kernel_verify.impls.packed import run_packed

        names = [n for n in _NAMES if kw.get(n) is not None]
        params = {n: kw[n] for n in _PARAMS if n in kw}
        arrays = [q, k, v] + ([] if g is None else [g if g.ndim == 4 else g[..., None]])
        arrays += [kw[n][..., None] if n in _SCALAR else kw[n] for n in names]
        labels = ("q", "k", "v", *(() if g is None else ("g",)), *names)

        def form(*parts):
            *xs, st = parts
            qq, kk, vv, *rest = xs
            gg = None
            if g is not None:
                gg, rest = rest[0], rest[1:]
                gg = gg if g.ndim == 4 else gg[..., 0]
            extra = {n: (a[..., 0] if n in _SCALAR else a) for n, a in zip(names, rest,
                                                                           strict=True)}
            return stateful(qq, kk, vv, gg, initial_state=st, **extra, **params)

        return run_packed(form, tuple(arrays), labels, cu_seqlens=cu_seqlens,
                          initial_state=initial_state)

    def padded(q, k, v, g, *, mask, initial_state=None, seed=0, **kw):
        from kernel_verify.impls.packed import run_padded
        from kernel_verify.impls.sequence_validation import check_mask

        keep = check_mask(mask, batch=int(q.shape[0]), length=int(q.shape[2]))
        names = [n for n in _NAMES if kw.get(n) is not None]
        params = {n: kw[n] for n in _PARAMS if n in kw}
        arrays = [q, k, v] + ([] if g is None else [g]) + [kw[n] for n in names]

        def form(*parts):
            *xs, st = parts
            qq, kk, vv, *rest = xs
            gg = None
            if g is not None:
                gg, rest = rest[0], rest[1:]
            return stateful(qq, kk, vv, gg, initial_state=st,
                            **dict(zip(names, rest, strict=True)), **params)

        return run_padded(form, tuple(arrays), keep, out_like=v, initial_state=initial_state)

    return {"parallel": parallel, "stateful": stateful, "chunked": chunked, "step": step,
            "varlen": varlen, "padded": padded, "state_sums": _state_sums}


def _state_sums(state) -> tuple[np.ndarray, None]:
    """``(S, None)`` of a delta-rule state ``(S,)`` in float64."""
    (s,) = state
    return np.asarray(s.detach().to("cpu").double().numpy() if is_torch(s) else s,
                      dtype=np.float64), None


def _backend_features(convention: tuple[str, float] | None):
    """``φ`` on the backend: L2 normalisation (ε inside the root on the sum) and the q scale, or
    the identity (RWKV-7)."""
    def phi(x, role):
        if convention is None:
            return x
        from kernel_verify.impls.recurrence_conventions import l2_normalise

        y = l2_normalise(x, eps=convention[1], convention=convention[0])
        return y * (float(x.shape[-1]) ** -0.5) if role == "q" else y

    return phi


def _identity_features(x: np.ndarray, role: str) -> np.ndarray:
    """RWKV-7's features: q (the receptance) and k as they are."""
    return np.asarray(x, dtype=np.float64)


def delta_target(transition: str, *, backends=("numpy",), dtypes=("float64",),
                 beta: str = "given", name: str | None = None, gate_input: str = "log",
                 gate_lower: float | None = None) -> GatedAttentionTarget:
    """The built-in target of ``transition`` (module docstring), named and claiming as its
    descriptor (:func:`kernel_verify.impls.systems.delta_system`) says; ``differentiable`` only
    where ``backends`` include torch."""
    system = delta_system(transition)
    claims = system.target_claims()
    if "torch" not in backends:
        claims -= {"differentiable"}
    convention = None if transition == "rwkv7" else ("sum_inside", 1e-6)
    features = _identity_features if convention is None else l2_features(
        eps=convention[1], convention=convention[0])
    label = name or f"{system.kind}:{system.name}" + ("_beta_logit" if beta == "sigmoid" else "") \
        + ("" if gate_input == "log" else f"_{gate_input}_gate")
    # L2 normalisation: a sum of d squares, a root, a division, the q scale: ≤ d/2 + 4 ulps
    # for d ≤ 4 (the suite's widths); the identity: exact
    return GatedAttentionTarget(label, gates=system.gates, transition=transition, beta=beta,
                                claims=claims, features=features, backends=tuple(backends),
                                dtypes=tuple(dtypes), feature_ulps=0 if convention is None else 6,
                                gate_input=gate_input, gate_lower=gate_lower,
                                min_log_gate=-30.0 if gate_lower is None else 0.999 * gate_lower,
                                **make_delta_forms(transition, phi=_backend_features(convention),
                                                   beta=beta, gate_input=gate_input,
                                                   gate_lower=gate_lower,
                                                   negative_eigenvalues="negative_eigenvalues"
                                                   in claims))


def builtin_delta_targets() -> list[GatedAttentionTarget]:
    """The built-in delta-rule targets with their coverage (:data:`DELTA_COVERAGE`), and Gated
    DeltaNet once more taking β as a logit (NumPy and torch float64)."""
    out = [delta_target(t, backends=libs, dtypes=dtypes)
           for t, (libs, dtypes) in DELTA_COVERAGE.items()]
    out.append(delta_target("gated_delta", backends=("numpy", "torch"), dtypes=("float64",),
                            beta="sigmoid"))
    out.extend(gate_input_targets())
    return out


def gate_input_targets() -> list[GatedAttentionTarget]:
    """Targets that compute their gates from a raw input (``gate_input``, docs/math.md §23.1):
    Gated DeltaNet with Mamba's ``g = −exp(A_log)·softplus(a + dt_bias)`` (NumPy float64, torch
    float64 and float32), KDA with the lower-bounded ``g = −5·σ(exp(A_log)·(a + dt_bias))``
    per key dimension (torch float64 and float32), RWKV-7 with ``g = −e^(−1/2)·σ(a)`` (NumPy
    float64)."""
    from kernel_verify.impls.recurrence_conventions import RWKV7_LOWER

    return [delta_target("gated_delta", backends=("numpy", "torch"),
                         dtypes=("float64", "float32"), gate_input="mamba"),
            delta_target("kda", backends=("torch",), dtypes=("float64", "float32"),
                         gate_input="bounded_affine", gate_lower=-5.0),
            delta_target("rwkv7", backends=("numpy",), dtypes=("float64",),
                         gate_input="bounded", gate_lower=RWKV7_LOWER)]
