"""The exact values, derived bounds and form calls behind the gated and hybrid system pages.

A library module cannot import the property files themselves (``properties/test_*.py``: their
collection-time code selects targets from ``KV_TARGET``; ``tests/test_layering.py``), so this
module composes the same library functions those files compose — the mpmath references of
:mod:`kernel_verify.verify.references`, the derived bounds of
:mod:`kernel_verify.verify.gated_bounds`, :mod:`kernel_verify.verify.recurrence_bounds` and
:mod:`kernel_verify.verify.hybrid_bounds`, the inputs of
:func:`kernel_verify.properties.checks.forms.draw_inputs` and the calling convention of
:class:`kernel_verify.properties.token_inputs.TokenInputs` — in the same way:

* :func:`gated_exact` is ``test_gated_forms.exact`` for targets that take log-gates (``gate_input
  = "log"``; a gate parametrisation's charged error is the property's business): the exact
  recurrence of the target's transition and features and the derived bound of a computed output
  in the backend's dtype, plus the cast back of a half type;
* :func:`hybrid_exact` is ``test_hybrid_attention.exact``; :func:`hybrid_inputs` its
  ``draw_inputs``.

``tests/test_report_pages.py`` holds each equal, bit for bit, to the property file's function on
the same inputs, so the two cannot drift apart unseen.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_verify.properties.checks.forms import Shape, draw_inputs
from kernel_verify.properties.strategies import QKV, generator
from kernel_verify.properties.token_inputs import TokenInputs
from kernel_verify.verify.backends import Backend, as_float64
from kernel_verify.verify.tolerance import FORMATS

__all__ = ["GATE_REGIMES", "gated_exact", "gated_inputs", "gated_run", "gated_steps",
           "hybrid_exact", "hybrid_inputs"]

#: The gate regimes of the report's draws: ``mixed`` (``g = max(−Exp(1), min_log_gate)``) and
#: ``strong_run`` (half the sequence, at least 3 tokens, at ``min_log_gate``, the rest in
#: ``[−10⁻³, 0]``): the first and the strong-decay regime of the gated property.
GATE_REGIMES = ("mixed", "strong_run")


def _gates(target: Any, shape: Shape, regime: str) -> np.ndarray | None:
    """Log-gates ``≤ 0`` of the regime, float64 (a fixed per-head decay: the target's own)."""
    if target.gates == "none":
        return None
    if target.fixed_log_gates is not None:
        return np.asarray(target.fixed_log_gates(shape.h), dtype=np.float64)
    size = {"scalar_fixed": (shape.h,), "scalar": (shape.b, shape.h, shape.t),
            "key_dim": (shape.b, shape.h, shape.t, shape.d)}[target.gates]
    rng = generator(shape.seed, f"report gates:{regime}")
    lo = float(target.min_log_gate)
    if regime == "mixed":
        return np.maximum(-rng.exponential(1.0, size), lo)
    if regime != "strong_run":
        raise ValueError(f"regime must be one of {GATE_REGIMES}, got {regime!r}")
    g = -rng.uniform(0.0, 1e-3, size)
    if target.gates == "scalar_fixed":
        g[rng.random(size) < 0.5] = lo
        return g
    run = min(shape.t, max(shape.t // 2, 3))
    start = int(rng.integers(0, shape.t - run + 1))
    g[:, :, start:start + run, ...] = lo
    return g


def _unit_rows(rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
    x = rng.standard_normal(size)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-300)


def gated_inputs(target: Any, backend: Backend, shape: Shape, regime: str
                 ) -> tuple[QKV, TokenInputs]:
    """``(q, k, v)`` and the token inputs as the target sees them (rounded to the backend's
    dtype, log-gates kept ≤ 0): the property's unit-scale inputs, the gates of ``regime`` and
    the transition's inputs drawn as the property draws them — β uniform in ``[0, β_max]``
    (``β_max`` 2 with ``negative_eigenvalues``, else 1; a logit where the target takes β
    through a sigmoid), comba's ``p`` (unit directions × U[0, 1]), RWKV-7's ``a = −κ̂``,
    ``b = κ̂ ⊙ c`` (``c ∈ [0, 1]^d``). Only targets that take log-gates."""
    if target.gate_input != "log":
        raise ValueError(f"{target.name}: gate_input {target.gate_input!r}: the report measures "
                         "targets that take log-gates only")
    x = draw_inputs(shape)
    x = QKV(backend.seen(x.q), backend.seen(x.k), backend.seen(x.v), x.scale)
    g = _gates(target, shape, regime)
    names = target.token_inputs()
    extra: dict[str, np.ndarray] = {}
    rng = generator(shape.seed, f"report transition:{regime}")
    vec = (shape.b, shape.h, shape.t, shape.d)
    if "beta" in names:
        top = 2.0 if target.has("negative_eigenvalues") else 1.0
        beta = rng.uniform(0.0, top, vec[:-1])
        if target.beta == "sigmoid":
            p = np.clip(beta / top, 3.3e-4, 1 - 3.3e-4)
            beta = np.log(p) - np.log1p(-p)
        extra["beta"] = beta
    if "p" in names:
        extra["p"] = _unit_rows(rng, vec) * rng.uniform(0.0, 1.0, (*vec[:-1], 1))
    if "a" in names:
        kappa = _unit_rows(rng, vec)
        extra["a"] = -kappa
        extra["b"] = kappa * rng.uniform(0.0, 1.0, vec)
    ti = TokenInputs(g, target.gates == "scalar_fixed", extra).map(backend.seen, fixed_too=True)
    if ti.g is not None:
        ti = TokenInputs(np.minimum(ti.g, 0.0), ti.fixed, ti.extra)
    return x, ti


def _chunk_sizes_run(target: Any, n: int) -> tuple[int, ...]:
    sizes = target.chunk_sizes or tuple(range(1, n + 1))
    return tuple(sorted({min(max(c, 1), max(n, 1)) for c in sizes} | {1}))


def gated_exact(target: Any, backend: Backend, x: QKV, g: TokenInputs
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(exact outputs, derived bound of a computed output)`` in the backend's dtype (module
    docstring; docs/math.md §16, §23)."""
    from kernel_verify.verify.gated_bounds import gated_forms_error_bound, smallest_normal

    b, _, n, _ = x.q.shape
    fq = np.asarray(target.features(x.q, "q"), dtype=np.float64)
    fk = np.asarray(target.features(x.k, "k"), dtype=np.float64)
    gg = g.per_token_gates(b, n)
    budget = backend.budget
    u, tiny = budget.u_compute, smallest_normal(budget.compute_dtype)
    if target.transition == "decay":
        from kernel_verify.verify.references.gated import gated_recurrence_mp

        normalise = target.has("normalised")
        ref, _ = gated_recurrence_mp(fq, fk, x.v, gg, normalise=normalise)
        bound = gated_forms_error_bound(fq, fk, x.v, gg, normalise=normalise, u=u,
                                        exp_ulps=budget.ulps["exp"], tiny=tiny,
                                        extra=2 * target.feature_ulps)
    else:
        from kernel_verify.verify.recurrence_bounds import recurrence_error_bound
        from kernel_verify.verify.references.recurrence import recurrence_mp

        inputs = {"g": gg, "beta": g.beta_values(target.beta == "sigmoid"),
                  **{k: a for k, a in g.extra.items() if k != "beta"}}
        inputs = {k: a for k, a in inputs.items() if a is not None}
        ref, _ = recurrence_mp(fq, fk, x.v, transition=target.transition, **inputs)
        bound, _ = recurrence_error_bound(
            fq, fk, x.v, transition=target.transition, **inputs, u=u,
            exp_ulps=budget.ulps["exp"], tiny=tiny, chunk_sizes=_chunk_sizes_run(target, n),
            extra_ulps=2 * target.feature_ulps + (4 if target.beta == "sigmoid" else 0))
    if budget.output_round:  # the cast back to the half type
        fmt = FORMATS[backend.dtype]
        bound = bound + fmt.u * (np.abs(ref) + bound) + fmt.tiny
    return ref, bound


def gated_run(target: Any, backend: Backend, x: QKV, g: TokenInputs, *, form: str, seed: int,
              chunk: int) -> np.ndarray:
    """The outputs (float64, BHTD) of one full-sequence form (``chunked``: at the target's own
    chunk size where it declares sizes)."""
    t = target.to_layout
    q, k, v = (t(backend.from_numpy(a)) for a in (x.q, x.k, x.v))
    gg, kw = g.arguments(target, backend.from_numpy)
    if form == "chunked":
        sizes = target.chunk_sizes
        size = chunk if sizes is None else sizes[chunk % len(sizes)]
        out, _ = target.chunked(q, k, v, gg, chunk_size=size, seed=seed, **kw)
    else:
        out, _ = getattr(target, form)(q, k, v, gg, seed=seed, **kw)
    out = backend.to_numpy(t(out))
    want = (*x.q.shape[:-1], x.v.shape[-1])
    if out.shape != want:
        raise AssertionError(f"{target.name} {form}: output shape {out.shape}, expected {want}")
    return np.asarray(out, dtype=np.float64)


def gated_steps(target: Any, backend: Backend, x: QKV, g: TokenInputs, *, seed: int
                ) -> np.ndarray:
    """The outputs (float64) of the step form, one token at a time from no state."""
    state, outs = None, []
    for i in range(x.q.shape[-2]):
        q, k, v = (backend.from_numpy(np.ascontiguousarray(a[..., i, :]))
                   for a in (x.q, x.k, x.v))
        gi, kw = g.at(i).arguments(target, backend.from_numpy, step=True)
        state, o = target.step(state, q, k, v, gi, seed=seed, **kw)
        outs.append(backend.to_numpy(o))
    return np.asarray(np.stack(outs, axis=-2), dtype=np.float64)


# ------------------------------------------------------------------ hybrid attention
def hybrid_inputs(backend: Backend, seed: int, t: int, *, h: int = 2, d: int = 3, dv: int = 2,
                  scale: float = 1.0) -> tuple[tuple, tuple]:
    """``(q, k, v)`` on the backend and the float64 values it sees: ``U(−1, 1)`` entries (q and
    k times ``scale``), the hybrid property's inputs."""
    rng = generator(seed, "hybrid inputs")
    raw = (rng.uniform(-1, 1, (1, h, t, d)) * scale, rng.uniform(-1, 1, (1, h, t, d)) * scale,
           rng.uniform(-1, 1, (1, h, t, dv)))
    arrays = tuple(backend.from_numpy(a) for a in raw)
    return arrays, tuple(as_float64(a) for a in arrays)


def hybrid_exact(target: Any, backend: Backend, seen: tuple, window: int,
                 reference: str = "hybrid") -> tuple[np.ndarray, np.ndarray]:
    """``(exact output, derived bound)`` of the whole sequence ``seen``: the exact hybrid
    (``reference="hybrid"``), causal softmax attention (``"softmax"``, a window ``≥ T``) or
    causal linear attention with the target's features (``"linear"``, ``w = 0``)."""
    from kernel_verify.verify.hybrid_bounds import hybrid_error_bound
    from kernel_verify.verify.references.attention import (
        feature_attention_mp,
        softmax_attention_mp,
    )
    from kernel_verify.verify.references.hybrid import hybrid_attention_mp
    from kernel_verify.verify.references.mp import to_float, working_precision

    if reference not in ("hybrid", "softmax", "linear"):
        raise ValueError(f"reference must be 'hybrid', 'softmax' or 'linear', got {reference!r}")
    q, k, v = seen
    fq, fk = target.features(q, "q"), target.features(k, "k")
    with working_precision():
        if reference == "softmax":
            ref = softmax_attention_mp(q, k, v, causal=True, scale=target.scale)
        elif reference == "linear":
            ref = feature_attention_mp(fq, fk, v, causal=True)
        else:
            ref = hybrid_attention_mp(q, k, v, fq, fk, window=window, mix=target.mix,
                                      scale=target.scale)
        ref = to_float(ref)
    bound = hybrid_error_bound(q, k, v, fq, fk, ref, window=window, dtype=backend.dtype,
                               mix=target.mix, scale=target.scale,
                               feature_ulps=target.feature_ulps)
    return ref, bound
