"""Built-in gated targets (:class:`~kernel_verify.properties.gated_protocol.GatedAttentionTarget`):
the project's gated forms (:mod:`kernel_verify.impls.numpy.gated_forms`,
:mod:`kernel_verify.impls.torch.gated_forms`) behind the gated forms protocol, one target per
gate kind, offering every form (parallel, stateful, chunked at any size, step, varlen, padded).

Features as in RetNet/GLA/fla: ``φ(q) = q·d^(−1/2)``, ``φ(k) = k`` (no normaliser), and one
normalised target with ``φ(x) = elu(x) + 1`` (positive features, ``z`` in the state).
``scalar_fixed`` gates ``g (H,)`` are repeated over batch and time before the forms run.
``varlen`` runs each packed sequence from its own initial state
(:func:`kernel_verify.impls.packed.run_packed`); ``padded`` runs each row on its valid positions
(padding removed with its gates), output 0 at padded positions.

Each target takes its name (``gated_attention:<system>``) and claims from its descriptor
(:mod:`kernel_verify.impls.systems`, kind ``gated_attention``).

Coverage (``make test`` budget): the per-token scalar kind on every backend × dtype; fixed, key
dimension and normalised kinds on NumPy float64 and torch float64 (the differentiable path)
and, for the key dimension, torch float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_verify.impls.systems import gated_system
from kernel_verify.impls.validation import is_torch
from kernel_verify.properties.builtin_hybrid import elu1
from kernel_verify.properties.gated_protocol import GatedAttentionTarget

__all__ = ["builtin_gated_targets", "gated_target"]

ALL = ("float64", "float32", "float16", "bfloat16")
COVERAGE: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "scalar": (("numpy", "torch"), ALL),
    "scalar_fixed": (("numpy", "torch"), ("float64",)),
    "key_dim": (("numpy", "torch"), ("float64", "float32")),
    "scalar+normalised": (("numpy", "torch"), ("float64",)),
}



def _mod(x: Any):
    if is_torch(x):
        from kernel_verify.impls.torch import gated_forms
    else:
        from kernel_verify.impls.numpy import gated_forms
    return gated_forms


def _up(*xs):
    """Half inputs computed in float32 (features included: ``half_in_float32``)."""
    if not is_torch(xs[0]):
        return xs
    from kernel_verify.impls.torch.convert import compute_dtype

    return tuple(x.to(compute_dtype(x.dtype)) for x in xs)


def _down(res, like, first=True):
    """The output of ``res`` (``(out, state)``, or ``(state, out)`` with ``first=False``) back in
    ``like``'s dtype."""
    out, state = res if first else res[::-1]
    out = out.to(like.dtype) if is_torch(out) else out
    return (out, state) if first else (state, out)


def _fixed_over_batch_and_time(g, like):
    """``scalar_fixed`` gates ``(H,)`` repeated to ``(B, H, T)`` of ``like``."""
    if is_torch(g):
        return g[None, :, None].expand(like.shape[0], g.shape[0], like.shape[2])
    return np.broadcast_to(g[None, :, None], (like.shape[0], g.shape[0], like.shape[2]))


def _fixed_over_batch(g, like):
    """``scalar_fixed`` gates ``(H,)`` repeated to ``(B, H)`` of one step's ``like``."""
    if is_torch(g):
        return g[None, :].expand(like.shape[0], g.shape[0])
    return np.broadcast_to(g[None, :], (like.shape[0], g.shape[0]))


def make_forms(kind: str, normalise: bool = False, *, phi=None,
               expand_fixed=None) -> dict[str, Any]:
    """The forms of a gated target of ``kind`` over the impls (module docstring); ``phi(x, role)``
    the features (default: ``q·d^(−1/2)``, ``k``, or elu + 1 when ``normalise``)."""

    def default_phi(x, role):
        if normalise:
            return elu1(x)  # x + 1 or e^x: elu(x) + 1 cancels for x << 0
        return x * (float(x.shape[-1]) ** -0.5) if role == "q" else x

    phi = phi or default_phi

    def gates(g, like):
        return _fixed_over_batch_and_time(g, like) if kind == "scalar_fixed" else g

    def gate_t(g, like):
        return _fixed_over_batch(g, like) if kind == "scalar_fixed" else g

    def chunked(q, k, v, g, *, chunk_size, initial_state=None, seed=0):
        qq, kk, vv, gg = _up(q, k, v, gates(g, q))
        return _down(_mod(q).gated_attention_chunked(phi(qq, "q"), phi(kk, "k"), vv, gg,
                                                    chunk_size=chunk_size,
                                                    initial_state=initial_state,
                                                    normalise=normalise), v)

    def parallel(q, k, v, g, *, initial_state=None, seed=0):
        qq, kk, vv, gg = _up(q, k, v, gates(g, q))
        return _down(_mod(q).gated_attention_parallel(phi(qq, "q"), phi(kk, "k"), vv, gg,
                                                     initial_state=initial_state,
                                                     normalise=normalise), v)

    def stateful(q, k, v, g, *, initial_state=None, seed=0):
        return chunked(q, k, v, g, chunk_size=64, initial_state=initial_state)

    def step(state, q_t, k_t, v_t, g_t, *, seed=0):
        qq, kk, vv, gg = _up(q_t, k_t, v_t, gate_t(g_t, q_t))
        return _down(_mod(q_t).gated_attention_step(state, phi(qq, "q"), phi(kk, "k"), vv, gg,
                                                   normalise=normalise), v_t, first=False)

    def varlen(q, k, v, g, *, cu_seqlens, initial_state=None, seed=0):
        from kernel_verify.impls.packed import run_packed

        if kind == "scalar_fixed":  # one gate per head: every sequence takes it whole
            return run_packed(lambda a, b, c, st: stateful(a, b, c, g, initial_state=st),
                              (q, k, v), ("q", "k", "v"), cu_seqlens=cu_seqlens,
                              initial_state=initial_state)
        gl = g if kind == "key_dim" else g[..., None]  # time on axis −2, as for q, k, v

        def form(a, b, c, gg, st):
            return stateful(a, b, c, gg if kind == "key_dim" else gg[..., 0], initial_state=st)

        return run_packed(form, (q, k, v, gl), ("q", "k", "v", "log_gates"),
                          cu_seqlens=cu_seqlens, initial_state=initial_state)

    def padded(q, k, v, g, *, mask, initial_state=None, seed=0):
        from kernel_verify.impls.packed import run_padded
        from kernel_verify.impls.sequence_validation import check_mask

        keep = check_mask(mask, batch=int(q.shape[0]), length=int(q.shape[2]))
        if kind == "scalar_fixed":  # one gate per head: every row takes it whole
            return run_padded(lambda a, b, c, st: stateful(a, b, c, g, initial_state=st),
                              (q, k, v), keep, out_like=v, initial_state=initial_state)
        return run_padded(lambda a, b, c, gb, st: stateful(a, b, c, gb, initial_state=st),
                          (q, k, v, g), keep, out_like=v, initial_state=initial_state)

    def features(x, role):
        return _float64_features(x, role, normalise)

    return {"parallel": parallel, "stateful": stateful, "chunked": chunked, "step": step,
            "varlen": varlen, "padded": padded, "features": features, "state_sums": _state_sums}


def _float64_features(x, role: str, normalise: bool) -> np.ndarray:
    """The default features in float64: elu + 1 (``normalise``), else ``q·d^(−1/2)`` and ``k``."""
    x = np.asarray(x, dtype=np.float64)
    if normalise:
        return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))
    return x * (float(x.shape[-1]) ** -0.5) if role == "q" else x


def _state_sums(state) -> tuple[np.ndarray, np.ndarray]:
    """``(S, z)`` of a gated form's state in float64."""
    s, z = (np.asarray(a.detach().to("cpu").double().numpy() if is_torch(a) else a,
                       dtype=np.float64) for a in state)
    return s, z


def gated_target(kind: str, *, normalise: bool = False, backends=("numpy",),
                 dtypes=("float64",), name: str | None = None) -> GatedAttentionTarget:
    """A built-in gated target of ``kind`` (module docstring), named and claiming as its
    descriptor (:func:`kernel_verify.impls.systems.gated_system`) says: every claim a gated
    target takes, ``differentiable`` only where ``backends`` include torch."""
    system = gated_system(kind, normalise)
    claims = system.target_claims()
    if "torch" not in backends:
        claims -= {"differentiable"}
    label = name or f"{system.kind}:{system.name}"
    return GatedAttentionTarget(label, gates=kind, claims=claims,
                                backends=tuple(backends), dtypes=tuple(dtypes),
                                # elu + 1: exp within 4 ulps, the +1 one more (float32 table)
                                feature_ulps=6 if normalise else 1,
                                **make_forms(kind, normalise))


def builtin_gated_targets() -> list[GatedAttentionTarget]:
    """The built-in recurrent targets: the decay transition with its coverage
    (:data:`COVERAGE`), then the delta rule and its relatives
    (:func:`kernel_verify.properties.builtin_delta.builtin_delta_targets`)."""
    from kernel_verify.properties.builtin_delta import builtin_delta_targets

    out = []
    for key, (libs, dtypes) in COVERAGE.items():
        kind, _, extra = key.partition("+")
        out.append(gated_target(kind, normalise=extra == "normalised", backends=libs,
                                dtypes=dtypes))
    return out + builtin_delta_targets()
