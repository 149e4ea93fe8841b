"""The recurrent forms properties' library (``properties/test_gated_forms.py``, the report's
system pages): drawing the gates and the transition's inputs of a regime, calling a target's
forms, and the exact recurrence with its derived bound for the inputs as the target saw them
(docs/math.md §16, §23). A library module — no Hypothesis strategy and no collection-time
state — so that the application (``kernel_verify.report``) reuses it rather than a copy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_verify.properties.checks.forms import Shape
from kernel_verify.properties.strategies import QKV, generator
from kernel_verify.properties.token_inputs import TokenInputs
from kernel_verify.verify.backends import Backend
from kernel_verify.verify.gate_input_bounds import (
    gate_input_error,
    gate_perturbation_bound,
    gate_rounding_factor,
)
from kernel_verify.verify.gated_bounds import (
    gated_forms_error_bound,
    gated_state_error_bound,
    smallest_normal,
)
from kernel_verify.verify.references.gate_inputs import log_gates_from_input
from kernel_verify.verify.references.gated import gated_recurrence_mp
from kernel_verify.verify.tolerance import FORMATS

#: Gate regimes (the recurrent forms properties' docstring); the first is what the simplest
#: example draws.
REGIMES = ("mixed", "strong_runs", "near_zero", "near_one", "underflow_run")
#: The cumulative log-gate an ``underflow_run`` passes: below float64's smallest subnormal
#: (``e^(−745) → 0``), so a product of decays formed in linear space underflows even in float64.
UNDERFLOW_LOG = 760.0
#: The regime of the probe tokens that read a state (issue #44): a transition within
#: :data:`READ_FRACTION` of the identity — log-gates in ``[−10⁻³, 0]`` (decays near 1), β, comba's
#: ``p`` and RWKV-7's in-context rate ``c`` in at most ``READ_FRACTION`` of their range — whatever
#: the regime of the sequence before it, so that the probe reads the state nearly undiminished
#: (its first output sees ``S₀`` through a transition within ``READ_FRACTION·β_max`` of the
#: identity, times a decay ``≥ e^(−10⁻³)``). In the sequence's own regime a probe after decays
#: near 0 (log-gates down to −30) reads ``e^(−30)·S₀``: a wrong state passes.
READ = "read"
READ_FRACTION = 0.125
#: The longest run of strongest decay drawn for it (a target meant for weak decays only, whose
#: ``min_log_gate`` needs more tokens, draws ``strong_runs`` instead).
UNDERFLOW_MAX_RUN = 40
FULL = ("parallel", "stateful", "chunked")
#: The full-sequence forms that take and return a state.
STATEFUL = ("stateful", "chunked")


def chunk_of(target, c: int) -> int:
    sizes = target.chunk_sizes
    return c if sizes is None else sizes[c % len(sizes)]


def gate_shape(target, b: int, h: int, t: int, d: int) -> tuple[int, ...]:
    return {"scalar_fixed": (h,), "scalar": (b, h, t), "key_dim": (b, h, t, d)}[target.gates]


def draw_gates(target, shape: Shape, regime: str, t: int | None = None,
               stream: str = "gates", b: int | None = None) -> np.ndarray:
    """Log-gates ``≤ 0`` of the regime (module docstring; :data:`READ`: as ``near_one``),
    float64, in BHTD."""
    n = shape.t if t is None else t
    if target.fixed_log_gates is not None:  # the target's own decay (RetNet's γ_h)
        return np.asarray(target.fixed_log_gates(shape.h), dtype=np.float64)
    size = gate_shape(target, shape.b if b is None else b, shape.h, n, shape.d)
    rng = generator(shape.seed, f"{stream}:{regime}")
    lo = float(target.min_log_gate)
    if regime in ("near_one", READ):
        g = -rng.uniform(0.0, 1e-3, size)
    elif regime == "near_zero":
        g = rng.uniform(lo, lo / 2, size)
    elif regime == "mixed":
        g = np.maximum(-rng.exponential(1.0, size), lo)
    else:  # strong_runs: a run of half the sequence at the strongest decay, the rest near 1;
        # underflow_run: a run whose cumulative log-gate passes −UNDERFLOW_LOG
        g = -rng.uniform(0.0, 1e-3, size)
        if target.gates == "scalar_fixed":
            g[rng.random(size) < 0.5] = lo
        else:
            run = max(n // 2, min(n, 3))  # ≥ 3 tokens: 3·(−30) overflows e^(−G) in float32
            if regime == "underflow_run":
                run = min(n, underflow_run_length(target) or n)
            start = int(rng.integers(0, n - run + 1))
            g[:, :, start:start + run, ...] = lo
    return g


def underflow_run_length(target) -> int | None:
    """Tokens at ``min_log_gate`` whose log-gates sum below ``−UNDERFLOW_LOG``, or None when
    that needs more than ``UNDERFLOW_MAX_RUN`` tokens (or the target's decay is its own)."""
    if target.fixed_log_gates is not None or target.gates == "none":
        return None
    need = int(np.ceil(UNDERFLOW_LOG / abs(float(target.min_log_gate))))
    return need if need <= UNDERFLOW_MAX_RUN else None


def _unit_rows(rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
    x = rng.standard_normal(size)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-300)


def beta_top(target) -> float:
    """The largest β of ``target``: 2 with the claim ``negative_eigenvalues``, else 1. A target
    taking β through a sigmoid then computes ``β = top·σ(logit)`` (``2σ``: fla's
    ``allow_neg_eigval``, :func:`~kernel_verify.impls.recurrence_conventions.beta_from_logit`)."""
    return 2.0 if target.has("negative_eigenvalues") else 1.0


def beta_of(target, g) -> np.ndarray | None:
    """β in float64 as ``target`` computes it from the token inputs ``g``."""
    return g.beta_values(target.beta == "sigmoid", beta_top(target))


def draw_betas(target, size: tuple[int, ...], beta_regime: str,
               rng: np.random.Generator) -> np.ndarray:
    """β of the regime (:data:`BETA_REGIMES`): uniform in ``[0, β_max]``, or each token at an
    edge ``{0, 1}`` (and 2 with ``negative_eigenvalues``), ``β_max`` 2 with that claim, else 1;
    :data:`READ`: uniform in ``[0, READ_FRACTION·β_max]``; returned as the logit when the target
    takes β through a sigmoid (``top·σ``, :func:`beta_top`; edges then ±8)."""
    top = beta_top(target)
    if beta_regime == READ:
        beta = rng.uniform(0.0, READ_FRACTION * top, size)
    elif beta_regime == "edges":
        beta = rng.choice(np.array([0.0, 1.0, top]), size)
    else:
        beta = rng.uniform(0.0, top, size)
    if target.beta == "sigmoid":  # a logit in [−8, 8]: β in [3e-4, 1 − 3e-4]
        p = np.clip(beta / top, 3.3e-4, 1 - 3.3e-4)
        return np.log(p) - np.log1p(-p)
    return beta


def draw_gate_parameters(target, shape: Shape) -> dict[str, np.ndarray]:
    """The per-head parameters of the target's gate parametrisation, float64: ``A_log`` in
    ``[−1, 2.8]`` (Mamba2's ``A ∈ [1, 16]`` and below), ``dt_bias`` in ``[−7, 1]`` (``softplus``
    of it from 1e-3 to 1.3), one per head, or per head and key dimension for key-dimension
    gates. The same for every draw of one example (a probe, packed parts, padding)."""
    names = target.gate_parameters()
    if not names:
        return {}
    rng = generator(shape.seed, f"gate parameters:{target.gate_input}")
    return {"A_log": rng.uniform(-1.0, 2.8, (shape.h,)),
            "dt_bias": rng.uniform(-7.0, 1.0, (shape.h,) if target.gates == "scalar"
                                   else (shape.h, shape.d))}


def _per_head(x: np.ndarray, ndim: int) -> np.ndarray:
    """``(H,)`` or ``(H, d)`` parameters broadcast against gates ``(B, H, T[, d])``."""
    return x[None, :, None] if x.ndim == 1 and ndim == 3 else (
        x[None, :, None, None] if x.ndim == 1 else x[None, :, None, :])


def raw_gate_input(target, g: np.ndarray, params: dict[str, np.ndarray]) -> np.ndarray:
    """The raw input ``a`` whose gates (the target's ``gate_input``) are ``g`` — up to clipping
    where the parametrisation cannot reach ``g`` (``0`` and the bound itself)."""
    kind = target.gate_input
    if kind == "log":
        return g
    if kind == "mamba":
        y = np.maximum(-g / np.exp(_per_head(params["A_log"], g.ndim)), 1e-30)
        x = y + np.log(-np.expm1(-y))  # softplus⁻¹(y)
        return x - _per_head(params["dt_bias"], g.ndim)
    lower = float(target.gate_lower)
    p = np.clip(g / lower, 1e-30, 1 - 1e-12)
    logit = np.log(p) - np.log1p(-p)
    if kind == "bounded":
        return logit
    return logit / np.exp(_per_head(params["A_log"], g.ndim)) - _per_head(params["dt_bias"],
                                                                           g.ndim)


def log_gates_of(target, g: TokenInputs, b: int, n: int) -> tuple[np.ndarray | None,
                                                                    np.ndarray | None]:
    """``(log-gates, their error bound)`` the target works with, float64: the given gates
    (bound None), or those its ``gate_input`` computes from the raw input and parameters
    (docs/math.md §23.1) with the derived bound of the target's dtype."""
    gg = g.per_token_gates(b, n)
    if gg is None or target.gate_input == "log":
        return gg, None
    kw = {n_: _per_head(a, gg.ndim) for n_, a in g.params.items()}
    return log_gates_from_input(target.gate_input, gg, lower=target.gate_lower, **kw), kw


def draw_token_inputs(target, shape: Shape, regime: str, t: int | None = None,
                      stream: str = "gates", b: int | None = None) -> TokenInputs:
    """The log-gates (:func:`draw_gates`) and the transition's inputs of the regime
    (``"<gate regime>"`` or ``"<gate regime>, β <β regime>"``), float64, BHTD: β
    (:func:`draw_betas`), comba's ``p`` (unit directions scaled by U[0, 1]), RWKV-7's
    ``a = −κ̂``, ``b = κ̂ ⊙ c`` (``κ̂`` a unit direction, ``c ∈ [0, 1]^d``: RWKV-7's in-context
    learning rate). :data:`READ` (a probe reading a state): every input near the identity
    transition (β, ``p``'s scale and ``c`` in ``[0, READ_FRACTION]`` of their range)."""
    gate_regime, _, beta_regime = regime.partition(", β ")
    reach = READ_FRACTION if gate_regime == READ else 1.0
    if gate_regime == READ:
        beta_regime = READ
    g = None if target.gates == "none" else draw_gates(target, shape, gate_regime, t, stream, b)
    names = target.token_inputs()
    extra: dict[str, np.ndarray] = {}
    if names:
        n = shape.t if t is None else t
        bb = shape.b if b is None else b
        rng = generator(shape.seed, f"{stream}:{regime}:transition")
        if "beta" in names:
            extra["beta"] = draw_betas(target, (bb, shape.h, n), beta_regime or "uniform", rng)
        vec = (bb, shape.h, n, shape.d)
        if "p" in names:
            extra["p"] = _unit_rows(rng, vec) * rng.uniform(0.0, reach, (*vec[:-1], 1))
        if "a" in names:
            kappa = _unit_rows(rng, vec)
            extra["a"] = -kappa
            extra["b"] = kappa * rng.uniform(0.0, reach, vec)
    params = draw_gate_parameters(target, shape) if g is not None else {}
    raw = g is not None and target.gate_input != "log"
    if raw:
        g = raw_gate_input(target, g, params)
    return TokenInputs(g, target.gates == "scalar_fixed", extra, params, raw)


def seen_gates(g: TokenInputs, backend: Backend) -> TokenInputs:
    """The gates (log-gates kept ≤ 0; a raw gate input as it is), the transition's inputs and
    the gate parameters rounded to the backend's dtype."""
    out = g.map(backend.seen, fixed_too=True)
    if out.g is None or out.raw:
        return out
    return TokenInputs(np.minimum(out.g, 0.0), out.fixed, out.extra)


def seen_inputs(x: QKV, backend: Backend) -> QKV:
    return QKV(backend.seen(x.q), backend.seen(x.k), backend.seen(x.v), x.scale)


# ------------------------------------------------------------------ independent draws
class RandomDraws:
    """A stand-in for Hypothesis' ``data`` that draws each value uniformly from the strategy
    (integers, sampled_from, booleans, one_of) with a NumPy generator: the trials of a
    property written with ``st.data()`` are then independent draws of its own layouts."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def draw(self, strategy: Any, label: str | None = None) -> Any:
        s = getattr(strategy, "wrapped_strategy", strategy)
        kind = type(s).__name__
        if kind == "IntegersStrategy":
            return int(self.rng.integers(s.start, s.end + 1))
        if kind == "SampledFromStrategy":
            return s.elements[int(self.rng.integers(len(s.elements)))]
        if kind == "BooleansStrategy":
            return bool(self.rng.integers(2))
        if kind == "OneOfStrategy":
            branches = s.original_strategies
            return self.draw(branches[int(self.rng.integers(len(branches)))], label)
        if kind == "JustStrategy":
            return s.value
        raise TypeError(f"RandomDraws cannot draw {label or strategy!r} ({kind})")


# ------------------------------------------------------------------ calling the forms
def skip_state_not_taken(target, form: str, err: NotImplementedError) -> None:
    """Skip the running property: ``form`` raised ``NotImplementedError`` when given an
    ``initial_state`` — the protocol's way for a form without a state input (a library's
    quadratic ``parallel`` form often has none) to say so. Nothing is checked from a state
    through that form, and the verdict says which form and why, not pass and not fail."""
    import pytest

    pytest.skip(f"{target.name}: its {form} form takes no initial_state (it raised "
                f"NotImplementedError: {err}); nothing continued from a state through {form}")


def run(target, backend, x: QKV, g: TokenInputs, *, form: str, seed: int, chunk: int = 1,
        state=None):
    """``(out float64 (B, H, T, d_v), state)`` of one full-sequence form."""
    t = target.to_layout
    q, k, v = (t(backend.from_numpy(a)) for a in (x.q, x.k, x.v))
    gg, kw = g.arguments(target, backend.from_numpy)
    try:
        if form == "chunked":
            out, s = target.chunked(q, k, v, gg, chunk_size=chunk_of(target, chunk),
                                    initial_state=state, seed=seed, **kw)
        else:
            out, s = getattr(target, form)(q, k, v, gg, initial_state=state, seed=seed, **kw)
    except NotImplementedError as err:
        if state is None:
            raise
        skip_state_not_taken(target, form, err)
    out = backend.to_numpy(t(out))
    want = (*x.q.shape[:-1], x.v.shape[-1])
    assert out.shape == want, f"{target.name} {form}: output shape {out.shape}, expected {want}"
    return out, s


def split_form(target) -> str:
    """The form a state is carried by in the split, prefill and packed-prefix runs: ``chunked``
    where the target offers it (at the drawn chunk size), else ``stateful``."""
    return "chunked" if target.chunked is not None else "stateful"


def run_split(target, backend, x: QKV, g: TokenInputs, shape: Shape):
    """``(cut, outputs float64 (B, H, T, d_v), final state)`` of the target's chunked form (its
    stateful form where it has no chunked one) run on tokens ``[0, cut)`` and then, from that
    state, on ``[cut, T)``, with ``cut = min(shape.cut, T)``: the split-invariance run."""
    from kernel_verify.properties.strategies import qkv_rows

    cut = min(shape.cut, shape.t)
    form = split_form(target)
    first, state = run(target, backend, qkv_rows(x, 0, cut), g.rows(0, cut), form=form,
                       seed=shape.seed, chunk=shape.chunk)
    if cut == shape.t:
        return cut, first, state
    second, state = run(target, backend, qkv_rows(x, cut, shape.t), g.rows(cut, shape.t),
                        form=form, seed=shape.seed, chunk=shape.chunk, state=state)
    return cut, np.concatenate([first, second], axis=-2), state


def run_steps(target, backend, x: QKV, g: TokenInputs, *, seed: int, state=None):
    outs = []
    for i in range(x.q.shape[-2]):
        q, k, v = (backend.from_numpy(np.ascontiguousarray(a[..., i, :])) for a in (x.q, x.k, x.v))
        gi, kw = g.at(i).arguments(target, backend.from_numpy, step=True)
        state, o = target.step(state, q, k, v, gi, seed=seed, **kw)
        outs.append(backend.to_numpy(o))
    return np.stack(outs, axis=-2), state


def full_form(target) -> str:
    return next(f for f in ("stateful", "chunked", "parallel") if getattr(target, f) is not None)


def full_forms(target, among: tuple[str, ...] = ("stateful", "chunked", "parallel")
               ) -> list[str]:
    """Every full-sequence form of ``among`` the target offers, in :func:`full_form`'s order:
    the gradient properties differentiate each (a chunked kernel's backward is its own code,
    not the token loop's)."""
    return [f for f in among if getattr(target, f) is not None]


def run_any(target, backend, x, g, *, seed, chunk=1, state=None):
    """The first full-sequence form with a state the target offers (else the steps)."""
    if any(getattr(target, f) is not None for f in STATEFUL):
        return run(target, backend, x, g, form=full_form(target), seed=seed, chunk=chunk,
                   state=state)
    return run_steps(target, backend, x, g, seed=seed, state=state)


# ------------------------------------------------------------------ the truth and its bound
def _chunk_sizes_run(target, n: int) -> tuple[int, ...]:
    """The chunk sizes a form of ``target`` may run a sequence of ``n`` tokens at: its own
    declared sizes, else every size (1 is the token recurrence, ``n`` one chunk)."""
    sizes = target.chunk_sizes or tuple(range(1, n + 1))
    return tuple(sorted({min(max(c, 1), max(n, 1)) for c in sizes} | {1}))


def exact(target, backend, x: QKV, g: TokenInputs):
    """``(outputs, (S, z), bound, (S bound, z bound))``: the exact recurrence of the target's
    transition and features on ``x`` and ``g`` (already as the target saw them) and the derived
    bound of a computed output (docs/math.md §16, §23) in the backend's dtype (``z`` and its
    bound None for a transition other than ``decay``)."""
    b, _, n, _ = x.q.shape
    fq = np.asarray(target.features(x.q, "q"), dtype=np.float64)
    fk = np.asarray(target.features(x.k, "k"), dtype=np.float64)
    gg, gate_params = log_gates_of(target, g, b, n)
    if gg is not None and gg.ndim == 4 and gg.shape[-1] != fk.shape[-1]:
        raise AssertionError(f"{target.name}: key-dimension gates of width {gg.shape[-1]} for "
                             f"{fk.shape[-1]} features")
    budget = backend.budget
    u = budget.u_compute
    tiny = smallest_normal(budget.compute_dtype)
    if target.transition == "decay":
        normalise = target.has("normalised")
        ref, state = gated_recurrence_mp(fq, fk, x.v, gg, normalise=normalise)
        kw = {"u": u, "exp_ulps": budget.ulps["exp"], "tiny": tiny,
              "extra": 2 * target.feature_ulps}
        bound = gated_forms_error_bound(fq, fk, x.v, gg, normalise=normalise, **kw)
        s_b = gated_state_error_bound(fk, x.v, gg, **kw)
    else:
        from kernel_verify.verify.recurrence_bounds import recurrence_error_bound
        from kernel_verify.verify.references.recurrence import recurrence_mp

        inputs = {"g": gg, "beta": beta_of(target, g),
                  **{n_: a for n_, a in g.extra.items() if n_ != "beta"}}
        inputs = {n_: a for n_, a in inputs.items() if a is not None}
        ref, s_ref = recurrence_mp(fq, fk, x.v, transition=target.transition, **inputs)
        state = (s_ref, None)
        bound, sb = recurrence_error_bound(
            fq, fk, x.v, transition=target.transition, **inputs, u=u,
            exp_ulps=budget.ulps["exp"], tiny=tiny, chunk_sizes=_chunk_sizes_run(target, n),
            extra_ulps=2 * target.feature_ulps + (4 if target.beta == "sigmoid" else 0))
        s_b = (sb, None)
    if gate_params is not None:  # the target computes its gates: their error, carried
        bound, s_b = _charge_gate_input(target, g.per_token_gates(b, n), gg, gate_params,
                                        (fq, fk, x.v), g, bound, s_b, u=u, tiny=tiny,
                                        exp_ulps=budget.ulps["exp"])
    if budget.output_round:  # the cast back to the half type
        fmt = FORMATS[backend.dtype]
        bound = bound + fmt.u * (np.abs(ref) + bound) + fmt.tiny
    return ref, state, bound, s_b


def _charge_gate_input(target, raw, gg, params, fqkv, g: TokenInputs, bound, s_b, *, u, tiny,
                       exp_ulps):
    """The output and state bounds with the error of the target's own evaluation of its gate
    parametrisation added (:mod:`kernel_verify.verify.gate_input_bounds`, docs/math.md
    §23.1): the gates' error carried through the recurrence, and the rounding bound scaled by
    the factor the perturbed gates allow."""
    delta = gate_input_error(target.gate_input, raw, u=u, exp_ulps=exp_ulps, tiny=tiny,
                             lower=target.gate_lower, **params)
    trans = {"beta": beta_of(target, g),
             **{n_: a for n_, a in g.extra.items() if n_ != "beta"}}
    trans = {n_: a for n_, a in trans.items() if a is not None}
    moved, moved_s = gate_perturbation_bound(*fqkv, transition=target.transition, g=gg,
                                             delta=delta, **trans)
    factor = gate_rounding_factor(delta, key_dim=gg.ndim == 4)
    return bound * factor + moved, (s_b[0] * factor + moved_s, s_b[1])


# ------------------------------------------------------------------ the same-precision reference
def plain_terms(target, x: QKV, g: TokenInputs):
    """``(φq, φk, λ, x, y, w)``: the target's features of ``x`` and the terms of its
    transition (``dplr_terms`` of ``verify/references/recurrence.py``) from its gates and
    transition inputs as :func:`exact` takes them, float64."""
    from kernel_verify.verify.references.recurrence import dplr_terms

    b, _, n, _ = x.q.shape
    fq = np.asarray(target.features(x.q, "q"), dtype=np.float64)
    fk = np.asarray(target.features(x.k, "k"), dtype=np.float64)
    gg, _ = log_gates_of(target, g, b, n)
    transition = target.transition
    if transition == "decay":
        transition, inputs = ("identity", {}) if gg is None else ("decay", {"g": gg})
    else:
        inputs = {"g": gg, "beta": beta_of(target, g),
                  **{n_: a for n_, a in g.extra.items() if n_ != "beta"}}
        inputs = {n_: a for n_, a in inputs.items() if a is not None}
    lam, xx, yy, ww = dplr_terms(transition, fk, **inputs)
    return fq, fk, lam, xx, yy, ww


#: The transitions the same-precision criterion judges: those whose rank-one part, if any, is
#: symmetric up to β and the gate (``x ∝ y``: delta, gated_delta, kda), or absent. Comba
#: (``x = −βk``, ``y = p``) and RWKV-7 (``x = b``, ``y = a``) couple tokens through a general
#: rank-one term whose chunked evaluations (a triangular solve) were measured up to 172 times
#: less accurate than the plain ones on correct kernels (fla's chunk_comba, dplr_chunkwise):
#: no plain evaluation bounds them, and they keep the derived bound alone.
PLAIN_TRANSITIONS = ("identity", "decay", "delta", "gated_delta", "kda")


def plain(target, backend, x: QKV, g: TokenInputs, compute: str | None = None):
    """The same-precision references of the criterion of issue #44
    (:mod:`kernel_verify.verify.same_precision`): the target's recurrence (its transition, its
    features of ``x``, its gates and transition inputs, already as the target saw them) run
    plainly in the backend's compute dtype (``compute`` overrides it): token by token with the
    decays multiplied one by one, by the chunked (UT-transform) algorithm at the target's
    largest declared chunk size (else one chunk; its decays from float64 chunk-local sums,
    rounded once), and token by token with the decays formed from the running sum of log-gates
    in the dtype (marked by :func:`~kernel_verify.verify.same_precision.cumulative`: its error,
    the gates' running sums', counts ``c_G`` times, not ``c``); a tuple of float64
    ``(B, H, T, d_v)`` arrays (the criterion takes the largest error of each kind; the first
    is the token-by-token one). None on float64
    (the criterion is for float32 and half types; ``compute`` given: run anyway), for a
    transition outside :data:`PLAIN_TRANSITIONS`, or when a plain run is not finite (nothing to
    judge against)."""
    from kernel_verify.verify.same_precision import (
        cumulative,
        recurrence_chunked_plain,
        recurrence_plain,
    )

    if (compute is None and backend.dtype == "float64") or (
            target.transition not in PLAIN_TRANSITIONS):
        return None
    fq, fk, lam, xx, yy, ww = plain_terms(target, x, g)
    normalise = target.transition == "decay" and target.has("normalised")
    cd = compute or backend.budget.compute_dtype
    step, cum = (recurrence_plain(fq, x.v, lam, xx, yy, ww, compute=cd,
                                  normalise_k=fk if normalise else None, cumulative=c)
                 for c in (False, True))
    outs = (step,)
    if not normalise:  # the chunked (UT-transform) order, at the target's largest chunk
        n = x.q.shape[-2]
        chunk = max(target.chunk_sizes) if target.chunk_sizes else max(n, 1)
        chunked = recurrence_chunked_plain(fq, x.v, lam, xx, yy, ww, compute=cd, chunk=chunk)
        if chunked is not None:
            outs = (*outs, chunked)
    outs = (*outs, cumulative(cum))
    return outs if all(np.isfinite(o).all() for o in outs) else None


def check_plain(got: np.ndarray, ref: np.ndarray, same, backend, what: str,
                start: int = 0) -> None:
    """The same-precision reference criterion on ``got`` (rows ``start…`` of the sequence whose
    exact outputs are ``ref`` and plain same-precision outputs ``same``, :func:`plain`);
    nothing when ``same`` is None (float64, or no plain reference)."""
    if same is None:
        return
    from kernel_verify.properties.evidence import check_same_precision

    check_same_precision(got, ref[..., start:, :], [s[..., start:, :] for s in same],
                         compute=backend.budget.compute_dtype, output=backend.dtype, what=what)


# ------------------------------------------------------------------ the gated judge
def check_state_sums(target: Any, state: Any, want: tuple, bound: tuple, what: str, *,
                     z: bool) -> None:
    """A white-box target's final state through its ``state_sums``: ``S`` (and ``z`` with
    ``z``, where the target returns one) within the derived bounds ``bound`` of the exact
    ``want = (S, z)``; nothing without ``state_sums`` or a state."""
    from kernel_verify.properties.evidence import check_within

    if target.state_sums is None or state is None:
        return
    got = target.state_sums(state)
    for label, a, ref, b in zip("Sz", got, want, bound, strict=True):
        if a is not None and ref is not None and (label == "S" or z):
            check_within(np.asarray(a, dtype=np.float64), ref, b, f"{what} final state {label}")


def check_state(target, backend, state, x: QKV, g: TokenInputs, probe, what: str,
                seed: int, same_precision: bool = False) -> None:
    """``state`` (after ``x``) continues the probe ``(inputs, token inputs)`` as the exact run of
    ``x + probe`` does (within the derived bound; with ``same_precision``, on float32 and half
    types, also within the same-precision reference criterion, :func:`plain`). A fixed per-head
    decay is the sequence's in the probe too."""
    from kernel_verify.properties.evidence import check_within
    from kernel_verify.properties.strategies import qkv_join

    px, pg = probe
    if g.fixed:  # one decay per head: the probe's is the sequence's
        pg = TokenInputs(g.g, True, pg.extra)
    xj, gj = qkv_join(x, px), TokenInputs.join(g, pg)
    ref, _, bound, _ = exact(target, backend, xj, gj)
    got, _ = run_any(target, backend, px, pg, seed=seed, state=state)
    check_within(got, ref[..., x.q.shape[-2]:, :], bound[..., x.q.shape[-2]:, :],
                 f"{what}: the probe continued from the state")
    if same_precision:
        check_plain(got, ref, plain(target, backend, xj, gj), backend,
                    f"{what}: the probe continued from the state", start=x.q.shape[-2])


class ByTheTruth:
    """The judge of the gated forms properties
    (:class:`~kernel_verify.properties.checks.transition_forms.Judge`): every run against the
    exact recurrence of the target's transition and features (:func:`exact`) within its derived
    bound; a state by the probe continued from it against the exact run of the context and the
    probe (:func:`check_state`); on float32 and half types also the same-precision criterion
    (:func:`plain`, :func:`check_plain`)."""

    relative = False

    def __init__(self, target, backend, seed: int) -> None:
        self.target, self.backend, self.seed = target, backend, seed

    def whole(self, x: QKV, g: TokenInputs, *, context=None, **_):
        from kernel_verify.properties.checks.transition_forms import Expected

        cx, cg = (x, g) if context is None else context
        ref, s_ref, bound, s_b = exact(self.target, self.backend, cx, cg)
        off = cx.q.shape[-2] - x.q.shape[-2]
        return Expected(ref[..., off:, :], bound[..., off:, :], (cx, cg),
                        extra={"ref": ref, "off": off, "state": (s_ref, s_b)})

    def outputs(self, got, want, what: str, start: int = 0) -> None:
        from kernel_verify.properties.evidence import check_within

        check_within(got, want.out[..., start:, :], want.bound[..., start:, :], what)

    def state(self, state, want, probe, what: str, same_precision: bool = False) -> None:
        """The probe continued from ``state`` (:func:`check_state`) and, for a white-box target
        (``state_sums``), the state itself against the exact state after the context within its
        derived bound: a state scaled by ``1 + ε`` shows at ``ε`` near the state's own bound,
        where the probe sees only the state's share of each of its rows."""
        cx, cg = want.context
        if "state" in want.extra:  # first: the state itself, the more direct evidence
            s_ref, s_b = want.extra["state"]
            check_state_sums(self.target, state, s_ref, s_b, what,
                             z=self.target.has("normalised"))
        check_state(self.target, self.backend, state, cx, cg, probe, what, self.seed,
                    same_precision=same_precision)

    def same_precision(self, got, want, what: str, start: int = 0) -> None:
        if "same" not in want.extra:  # computed once per expectation
            want.extra["same"] = plain(self.target, self.backend, *want.context)
        check_plain(got, want.extra["ref"], want.extra["same"], self.backend, what,
                    start=want.extra["off"] + start)

    def continuation(self, state, probe):
        px, pg = probe
        return run_any(self.target, self.backend, px, pg, seed=self.seed, state=state)[0]


# ------------------------------------------------------------------ gradients through the state
def differentiable_parts(ti: TokenInputs) -> list[str]:
    """The token inputs gradients are taken w.r.t.: the gates (unless fixed) and every
    transition input."""
    return ([] if ti.g is None or ti.fixed else ["g"]) + list(ti.extra)


def rebuild_inputs(ti: TokenInputs, names: list[str], arrays) -> TokenInputs:
    """``ti`` with the parts ``names`` replaced by ``arrays`` (in that order)."""
    parts = dict(zip(names, arrays, strict=True))
    extra = {n: parts.get(n, a) for n, a in ti.extra.items()}
    return TokenInputs(parts.get("g", ti.g), ti.fixed, extra, ti.params, ti.raw)


def call_tensors(target, form: str, shape: Shape, q, k, v, ti_t, state=None):
    """A full-sequence form on torch tensors (BHTD) and token inputs given as tensors."""
    import torch

    t = target.to_layout
    ga = None if ti_t.g is None else (ti_t.g if ti_t.fixed else t(ti_t.g))
    params = {n: torch.as_tensor(a, dtype=q.dtype, device=q.device)
              for n, a in ti_t.params.items()}
    kw = {**{n: t(a) for n, a in ti_t.extra.items()}, **params}
    if form == "chunked":
        return target.chunked(t(q), t(k), t(v), ga, chunk_size=chunk_of(target, shape.chunk),
                              initial_state=state, seed=shape.seed, **kw)
    return getattr(target, form)(t(q), t(k), t(v), ga, initial_state=state, seed=shape.seed,
                                 **kw)


def continuation_gradcheck(target, backend, shape: Shape, x: QKV, ti: TokenInputs,
                           form: str) -> bool | None:
    """Whether float64 central differences agree with autograd
    (:func:`~kernel_verify.properties.checks.forms.gradcheck_f64`) for the outputs after the
    split point ``min(shape.cut, T − 1)``, continued by ``form`` from the prefix's final state,
    as a function of the prefix's q, k, v and differentiable token inputs (gates, unless one
    fixed decay per head is shared with the rest, and the transition's inputs): they reach the
    outputs only through the state, so a state detached from the graph fails. None when the
    sequence has no split point (``T = 1``)."""
    from kernel_verify.properties.checks.forms import gradcheck_f64

    if shape.t < 2:
        return None
    cut = min(shape.cut, shape.t - 1)

    def tensors(a):
        return backend.from_numpy(np.ascontiguousarray(a))

    post = [tensors(a[..., cut:, :]) for a in (x.q, x.k, x.v)]
    ti_post = ti.rows(cut, shape.t).map(tensors, fixed_too=True)
    pre = [tensors(a[..., :cut, :]).requires_grad_(True) for a in (x.q, x.k, x.v)]
    ti_pre = ti.rows(0, cut)
    names = differentiable_parts(ti_pre)
    if ti_pre.fixed:  # one decay per head, the same tensor before and after the split
        names = ["g", *names]
    parts = [tensors(ti_pre.g if n == "g" else ti_pre.extra[n]).requires_grad_(True)
             for n in names]
    as_t = ti_pre.map(tensors, fixed_too=True)

    def continued(q, k, v, *tok):
        tt = rebuild_inputs(as_t, names, tok)
        _, state = call_tensors(target, form, shape, q, k, v, tt)
        after = TokenInputs(tt.g, True, ti_post.extra) if tt.fixed else ti_post
        return target.to_layout(call_tensors(target, form, shape, *post, after, state)[0])

    return gradcheck_f64(continued, [*pre, *parts])
