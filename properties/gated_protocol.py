"""The recurrent forms protocol: :class:`GatedAttentionTarget`, a causal linear attention whose
state is updated by a **transition** ``S_t = A_t S_(t−1) + w_t v_tᵀ`` declared as data
(``transition``, docs/math.md §16 and §23): a decay or a gate (``"decay"``: RetNet,
Mamba2/SSD, simple GLA, GLA) or the delta rule and its relatives (``"delta"``: DeltaNet,
``"gated_delta"``: Gated DeltaNet, ``"kda"``: Kimi Delta Attention, ``"comba"``,
``"rwkv7"``), offering its forms with state, run by ``properties/test_gated_forms.py``: one set
of properties over every transition, one exact reference
(:mod:`kernel_verify.verify.references.recurrence`).

**Transitions** (:data:`kernel_verify.impls.systems.TRANSITIONS`): besides the log-gates each
form takes the transition's own per-token inputs *by keyword*, in the layout of the gates
(``BHTD``; ``BTHD`` swaps time and heads): ``beta (B, H, T)`` (delta, gated_delta, kda, comba;
drawn in ``[0, 1]``, ``[0, 2]`` with the claim ``negative_eigenvalues``; ``beta="sigmoid"``:
the suite passes the logit and the target applies the sigmoid, ``β = σ(logit)``, or
``β = 2σ(logit)`` with ``negative_eigenvalues``), ``p (B, H, T, d)`` (comba),
``a, b (B, H, T, d)`` (rwkv7). DeltaNet has no gate (``gates="none"``): its forms take
``g=None``. The transitions (the features ``φ`` applied to q and k first)::

    delta        A = I − βkkᵀ,            w = βk
    gated_delta  A = e^g(I − βkkᵀ),       w = βk   (the decay before the error term)
    kda          A = (I − βkkᵀ)Diag(e^g), w = βk
    comba        A = e^g I − βkpᵀ,        w = βk
    rwkv7        A = Diag(e^g) + b aᵀ,     w = k

A delta-rule target's ``features`` declares its normalisation convention of q and k (e.g.
:func:`l2_features`: ε inside the root on the sum, outside the root, or on the mean), and its
``state_sums`` returns ``(S, None)``.

**Gates** are given to every form as *log-gates* ``g ≤ 0`` (a decay ``e^g``; long products stay
exact as sums), in the dtype and on the backend/device of the inputs. ``gates`` declares which
kind the target takes, with these shapes in layout ``BHTD`` (``BTHD``: time and heads swapped
as for q, k, v):

* ``"scalar_fixed"``: one decay per head, the same for every token (RetNet): ``g (H,)``;
  one token's ``g_t (H,)``;
* ``"scalar"``: one decay per token and head (Mamba2/SSD, simple GLA): ``g (B, H, T)``;
  ``g_t (B, H)``;
* ``"key_dim"``: one gate per token, head and key dimension (GLA, ``diag(α_t)`` on the key side
  of the state): ``g (B, H, T, d)``; ``g_t (B, H, d)``.

**Gate inputs** (``gate_input``, :data:`kernel_verify.impls.systems.GATE_INPUTS`): a target
that computes its gates itself declares the parametrisation; every form then takes, in place
of ``g``, the raw input ``a`` (same shape) and, by keyword, the per-head parameters the
parametrisation names — ``"mamba"``: ``g = −exp(A_log)·softplus(a + dt_bias)`` with
``A_log (H,)`` and ``dt_bias (H,)`` (scalar gates) or ``(H, d)`` (key-dimension gates);
``"bounded"``: ``g = gate_lower·σ(a)``; ``"bounded_affine"``: ``g = gate_lower·σ(exp(A_log)·
(a + dt_bias))``. The suite draws the parameters and raw inputs whose gates fall in its gate
regimes, runs the exact recurrence on the gates computed in float64, and charges the derived
error of computing them in the target's dtype (:mod:`kernel_verify.verify.gate_input_bounds`).

``gate_side``: where the gate multiplies the state ``S (d × d_v)``: ``"key"`` (the rows; every
scalar kind is both sides at once) — the only side this protocol covers now.

**Forms** (each optional; a property needing a missing one is skipped naming the field):
``parallel(q, k, v, g, *, initial_state=None, seed=0) -> (out, state)`` (the masked decay matrix
form, or any full-sequence form), ``stateful`` (same signature: the production full-sequence
call), ``chunked(q, k, v, g, *, chunk_size, initial_state=None, seed=0)`` (``chunk_sizes``: the
sizes it accepts, None: any; without a chunked form: the kernel's own block sizes along time,
which the suite's layouts then cross),
``step(state, q_t, k_t, v_t, g_t, *, seed=0) -> (state, o_t)``,
``varlen(q, k, v, g, *, cu_seqlens, initial_state=None, seed=0) -> (out, states)`` (batch 1,
sequences packed along time, gates packed with them; states along the batch axis),
``padded(q, k, v, g, *, mask, initial_state=None, seed=0) -> (out, state)``. A form without a
state input (a library's quadratic ``parallel`` form often has none) raises
``NotImplementedError`` when given an ``initial_state``: a property continuing that form from a
state is then skipped naming the form (the form is still checked from the empty state).
States are opaque tuples of arrays with the batch first, as for
:class:`~kernel_verify.properties.protocol.AttentionTarget`.
Every call of a form is checked before the target runs (:func:`_check_gated_call`): q, k, v
(arrays of one backend, off the meta device, ``q`` of rank 4 — a step's ``q_t`` rank 3 —
``k`` of its shape, ``v`` of its leading shape), the gates (shape of the declared kind in the
target's layout, the queries' backend, floating, finite, ``≤ 0`` for log-gates; None for
``gates="none"``), the per-token inputs' shapes and the state (None or a tuple of arrays); a
bad one is a ValueError/TypeError naming it. What a form returns is checked after the call
(:func:`_check_gated_result`): ``(out, state)`` (``step``: ``(state, o_t)``), else a TypeError
naming the form. The target's own function stays reachable as ``form._kv_unchecked`` (to test
a target's own input checks).

**What the outputs are** (white box, needed for the derived bounds): ``features(x, role)``
returns the float64 features ``φ(x)`` the target applies to queries (``role="q"``: any scale
included, e.g. fla's ``d^(−1/2)``) and keys (``role="k"``), for ``x (B, H, T, d)`` in BHTD;
``o_t = Σ_(s≤t) Σ_f φ(q_t)_f D_tsf φ(k_s)_f v_s`` (+ the decayed initial state), divided by the
same sum with ``v ≡ 1`` when the target claims ``normalised``. ``state_sums(state) -> (S, z)``
(float64 ``(B, H, m, d_v)`` and ``(B, H, m)`` or None) exposes the state for the exact
comparison. ``feature_ulps``: how many ulps of the compute dtype the features the target
computes may differ from ``features`` (default 1: one rounding, e.g. ``q·d^(−1/2)``). Claims:
:data:`GATED_CLAIMS`. ``min_log_gate``: the most negative log-gate the
target is meant for (the suite draws down to it; default −30, decays down to ``e^(−30)``).
``fixed_log_gates(H) -> (H,)``: a target whose decay is its own constant (RetNet's
``γ_h = 1 − 2^(−5−h)``, ``gates="scalar_fixed"``) gives it here; the suite then passes exactly
these gates (float64 values of what the target uses) instead of drawing them.
``dv_equals_d``: the target accepts only ``d_v = d`` (a kernel that allocates its state square);
the suite then draws value widths equal to the key width.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from kernel_verify.impls.recurrence_conventions import L2_CONVENTIONS
from kernel_verify.impls.sequence_validation import check_qkv_call
from kernel_verify.impls.systems import GATE_INPUTS, SYSTEM_CLAIMS, TARGET_CLAIM_WORDS, TRANSITIONS
from kernel_verify.impls.systems import GATE_KINDS as _GATE_KINDS
from kernel_verify.impls.validation import check_backends_and_dtypes as _check_backends_and_dtypes
from kernel_verify.impls.validation import check_call_seconds as _check_call_seconds
from kernel_verify.impls.validation import check_callable_field as _check_callable
from kernel_verify.impls.validation import check_choice_field as _check_choice
from kernel_verify.impls.validation import check_chunk_sizes as _check_chunk_sizes
from kernel_verify.impls.validation import check_claim_set as _check_claims
from kernel_verify.impls.validation import check_form_result
from kernel_verify.impls.validation import check_known_failures as _check_known_failures
from kernel_verify.impls.validation import check_target_name as _check_name
from kernel_verify.impls.validation import check_ulps_field as _check_ulps
from kernel_verify.impls.validation import dtype_name as _dtype_name
from kernel_verify.impls.validation import is_torch as _is_torch
from kernel_verify.impls.validation import target_error as _fail
from kernel_verify.properties import protocol as _protocol  # noqa: F401  (known_failures check)
from kernel_verify.properties.sequence_target import SequenceTarget

__all__ = ["BETA_INPUTS", "GATED_CLAIMS", "GATED_FORMS", "GATE_INPUTS", "GATE_KINDS", "GATE_SIDES",
           "TRANSITIONS", "GatedAttentionTarget", "RecurrentTarget", "l2_features"]

#: The gate kinds (:data:`kernel_verify.impls.systems.GATE_KINDS`, where each is described).
GATE_KINDS = tuple(_GATE_KINDS)
GATE_SIDES = ("key",)
GATED_FORMS = ("parallel", "stateful", "chunked", "step", "varlen", "padded")
#: How a target takes β: the value itself, or the logit it applies a sigmoid to.
BETA_INPUTS = ("given", "sigmoid")


def l2_features(*, eps: float = 1e-6, convention: str = "sum_inside",
                q_scale: float | None = None) -> Callable[[np.ndarray, str], np.ndarray]:
    """Declared float64 features of a delta-rule target: q and k L2-normalised with ``eps``
    where ``convention`` puts it — ``"sum_inside"``: ``x/√(Σx² + ε)`` (fla's ``l2norm``),
    ``"root_outside"``: ``x/(√(Σx²) + ε)``, ``"mean_inside"``: ``x/√(Σx²/d + ε)`` (an RMS
    norm), ``"clamp"``: ``x/max(√(Σx²), ε)`` (``torch.nn.functional.normalize``, default
    ε = 1e-12) — and q then scaled by ``q_scale``
    (None: ``d^(−1/2)``, the convention of DeltaNet and Gated DeltaNet; docs/math.md §23)."""
    if convention not in L2_CONVENTIONS:
        raise ValueError(f"convention must be one of {', '.join(L2_CONVENTIONS)}, got "
                         f"{convention!r}")
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not eps >= 0:
        raise ValueError(f"eps must be a number >= 0, got {eps!r}")

    def features(x: np.ndarray, role: str) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        ss = np.sum(x * x, axis=-1, keepdims=True)
        if convention == "sum_inside":
            y = x / np.sqrt(ss + eps)
        elif convention == "root_outside":
            y = x / (np.sqrt(ss) + eps)
        elif convention == "clamp":
            y = x / np.maximum(np.sqrt(ss), eps)
        else:
            y = x / np.sqrt(ss / x.shape[-1] + eps)
        if role == "q":
            y = y * (float(x.shape[-1]) ** -0.5 if q_scale is None else q_scale)
        return y

    features.convention = (convention, eps, q_scale)  # type: ignore[attr-defined]
    return features
#: The claims a gated target takes: words of the one vocabulary
#: (:data:`kernel_verify.impls.systems.SYSTEM_CLAIMS`).
GATED_CLAIMS = {w: SYSTEM_CLAIMS[w] for w in TARGET_CLAIM_WORDS["gated_attention"]}


@dataclass(frozen=True)
class GatedAttentionTarget(SequenceTarget):
    """A gated causal linear attention (module docstring)."""

    FORMS: ClassVar[tuple[str, ...]] = GATED_FORMS
    name: str
    gates: str
    claims: frozenset[str]
    features: Callable[[np.ndarray, str], np.ndarray]
    transition: str = "decay"
    beta: str = "given"
    gate_input: str = "log"
    gate_lower: float | None = None
    gate_side: str = "key"
    backends: tuple[str, ...] = ("numpy",)
    dtypes: tuple[str, ...] = ("float64",)
    layout: str = "BHTD"
    parallel: Callable[..., Any] | None = None
    stateful: Callable[..., Any] | None = None
    chunked: Callable[..., Any] | None = None
    step: Callable[..., Any] | None = None
    varlen: Callable[..., Any] | None = None
    padded: Callable[..., Any] | None = None
    chunk_sizes: tuple[int, ...] | None = None
    state_sums: Callable[[tuple], tuple[np.ndarray, np.ndarray | None]] | None = None
    min_log_gate: float = -30.0
    fixed_log_gates: Callable[[int], np.ndarray] | None = None
    feature_ulps: int = 1
    known_failures: Mapping[str, str] = field(default_factory=dict)
    call_seconds: float | None = None
    dv_equals_d: bool = False

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_claims(self.name, self.claims, GATED_CLAIMS)
        _check_known_failures(self.name, self.known_failures, "GatedAttentionTarget")
        _check_choice(self.name, "transition", self.transition, set(TRANSITIONS),
                      optional=False)
        _check_choice(self.name, "gates", self.gates, set(GATE_KINDS), optional=False)
        if self.gates not in TRANSITIONS[self.transition][2]:
            raise _fail(ValueError, self.name, "gates", f"transition {self.transition!r} takes "
                        f"gates {' or '.join(map(repr, TRANSITIONS[self.transition][2]))}, "
                        f"got {self.gates!r}")
        _check_choice(self.name, "beta", self.beta, set(BETA_INPUTS), optional=False)
        self._check_gate_input()
        if self.has("normalised") and self.transition != "decay":
            raise _fail(ValueError, self.name, "claims", "'normalised' (a z in the state) is a "
                        f"claim of the decay transition, not of {self.transition!r}")
        if self.has("negative_eigenvalues") and "beta" not in self.token_inputs():
            raise _fail(ValueError, self.name, "claims", "'negative_eigenvalues' is about β: "
                        f"transition {self.transition!r} takes none")
        _check_choice(self.name, "gate_side", self.gate_side, set(GATE_SIDES), optional=False)
        _check_choice(self.name, "layout", self.layout, {"BHTD", "BTHD"}, optional=False)
        _check_callable(self.name, "features", self.features, optional=False)
        _check_callable(self.name, "fixed_log_gates", self.fixed_log_gates, optional=True)
        if self.fixed_log_gates is not None and self.gates != "scalar_fixed":
            raise _fail(ValueError, self.name, "fixed_log_gates", "is for gates='scalar_fixed' "
                        f"(one decay per head), not {self.gates!r}")
        for f in (*GATED_FORMS, "state_sums"):
            _check_callable(self.name, f, getattr(self, f), optional=True)
        if not any(getattr(self, f) is not None for f in ("parallel", "stateful", "chunked",
                                                          "step")):
            raise _fail(ValueError, self.name, "parallel,", "stateful, chunked, step are all "
                        "None: the target offers no form; give at least one")
        _check_backends_and_dtypes(self.name, self.backends, self.dtypes)
        _check_chunk_sizes(self.name, self.chunk_sizes)
        if isinstance(self.min_log_gate, bool) or not isinstance(self.min_log_gate,
                                                                 int | float):
            raise _fail(TypeError, self.name, "min_log_gate", "must be a number in [−1e4, 0), "
                        f"got {type(self.min_log_gate).__name__} {self.min_log_gate!r}")
        if not -1e4 <= self.min_log_gate < 0:
            raise _fail(ValueError, self.name, "min_log_gate", "must be a number in [−1e4, 0), "
                        f"got {self.min_log_gate!r}")
        _check_ulps(self.name, "feature_ulps", self.feature_ulps)
        _check_call_seconds(self.name, self.call_seconds)
        if not isinstance(self.dv_equals_d, bool):
            raise _fail(TypeError, self.name, "dv_equals_d", "must be a bool (the target takes "
                        f"only values as wide as the keys), got {self.dv_equals_d!r}")
        for f in GATED_FORMS:  # the gates, per-token inputs and states of every call (issue 45)
            if getattr(self, f) is not None:
                object.__setattr__(self, f, _checked_gated_form(self, f))
        if self.fixed_log_gates is not None:
            object.__setattr__(self, "fixed_log_gates", _checked_fixed_log_gates(self))

    def _check_gate_input(self) -> None:
        _check_choice(self.name, "gate_input", self.gate_input, set(GATE_INPUTS),
                      optional=False)
        bounded = self.gate_input in ("bounded", "bounded_affine")
        lower = self.gate_lower
        if bounded:
            if isinstance(lower, bool) or not isinstance(lower, int | float) \
                    or not -1e4 <= lower < 0:
                raise _fail(ValueError, self.name, "gate_lower", f"gate_input {self.gate_input!r} "
                            f"needs a bound in [−1e4, 0) (g = gate_lower·σ(…)), got {lower!r}")
        elif lower is not None:
            raise _fail(ValueError, self.name, "gate_lower", "is the bound of gate_input "
                        f"'bounded' or 'bounded_affine', not of {self.gate_input!r} (a floor "
                        "on plain log-gates, the most negative one the target is meant for, "
                        "is min_log_gate)")
        if self.gate_input == "log":
            return
        if self.gates not in ("scalar", "key_dim"):
            raise _fail(ValueError, self.name, "gate_input", f"{self.gate_input!r} computes a "
                        f"gate per token: gates must be 'scalar' or 'key_dim', got {self.gates!r}")
        if self.has("normalised"):
            raise _fail(ValueError, self.name, "gate_input", f"{self.gate_input!r} is not "
                        "covered with the claim 'normalised' (give the log-gates: "
                        "gate_input='log')")

    def gate_parameters(self) -> tuple[str, ...]:
        """The per-head parameters of the gate parametrisation, passed by keyword (``A_log``,
        ``dt_bias``), none for ``"log"`` and ``"bounded"``."""
        return GATE_INPUTS[self.gate_input][1]

    def token_inputs(self) -> tuple[str, ...]:
        """The per-token inputs of the transition passed by keyword (β, p, a, b): the gates
        are the positional ``g``."""
        return tuple(n for n in TRANSITIONS[self.transition][1] if n != "g")


# --- Checks of every call of a form (issue 45) -------------------------------------------------
# A form of a recurrent target takes its gates, per-token inputs and state in the shapes of the
# module docstring. Each call is checked against them before the target runs, so that a bad
# argument gets a ValueError/TypeError naming it (``g``, ``beta``, ``initial_state``, …)
# instead of a NumPy broadcasting error, an IndexError or a silently accepted extra token.


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _finite_and_sign(name: str, x: Any, *, log_gate: bool) -> None:
    """``x`` finite (and ``≤ 0`` for a log-gate); the values are read, never changed."""
    if _is_torch(x):
        import torch

        with torch.no_grad():
            finite = bool(torch.isfinite(x).all()) if x.numel() else True
            positive = bool((x > 0).any()) if (log_gate and finite and x.numel()) else False
    else:
        a = np.asarray(x)
        finite = bool(np.isfinite(a).all()) if a.size else True
        positive = bool((a > 0).any()) if (log_gate and finite and a.size) else False
    if not finite:
        raise ValueError(f"{name} contains NaN or Inf" + (
            ": log-gates must be finite (a decay of exactly 0 is not representable in log "
            "space; use a large negative log-gate)" if log_gate else ""))
    if positive:
        raise ValueError(f"{name} must be ≤ 0 (the log of a decay in (0, 1]: a log-gate > 0 "
                         "is a state that grows); got a positive entry")


def _check_input_array(name: str, x: Any, like: Any, shape: tuple[int, ...], what: str, *,
                       log_gate: bool) -> None:
    """``x`` an array of ``like``'s backend (not on the meta device), floating, of ``shape``,
    finite (and ``≤ 0`` for a log-gate)."""
    want = "torch.Tensor" if _is_torch(like) else "numpy.ndarray"
    if not _is_array(x):
        raise TypeError(f"{name} must be a {want} ({what}, shape {shape}), got "
                        f"{type(x).__name__}")
    if _is_torch(x) != _is_torch(like):
        raise TypeError(f"{name} must be a {want} like the queries ({what}), got "
                        f"{type(x).__module__.split('.')[0]}.{type(x).__name__}")
    if _is_torch(x) and getattr(x.device, "type", None) == "meta":
        raise ValueError(f"{name} is a tensor on the 'meta' device (a shape without data): pass "
                         "a tensor on the queries' device")
    kind = _dtype_name(x)
    if kind not in ("float64", "float32", "float16", "bfloat16"):
        raise TypeError(f"{name} must have a floating dtype ({what}), got {kind}")
    if tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)} ({what}, for queries of shape "
                         f"{tuple(like.shape)}), got {tuple(x.shape)}")
    _finite_and_sign(name, x, log_gate=log_gate)


def _check_gated_call(t: GatedAttentionTarget, form: str, args: tuple, kwargs: dict) -> None:
    """The gates, per-token inputs and state of one call of ``t``'s ``form`` (module
    docstring); a malformed query is left to the form, which names it."""
    step = form == "step"
    names = ("state", "q_t", "k_t", "v_t", "g_t") if step else ("q", "k", "v", "g")
    got = dict(zip(names, args, strict=False)) | kwargs
    q = _check_sequences(t, step, names[1:4] if step else names[:3], got)
    if q is None:
        return
    state_name = "state" if step else "initial_state"
    state = got.get(state_name)
    if state is not None and (not isinstance(state, tuple | list)
                              or not all(s is None or _is_array(s) for s in state)):
        raise TypeError(f"{state_name} must be None or a state the target returned: a tuple of "
                        f"arrays with the batch first, got {type(state).__name__}")
    g_name = names[-1]
    if g_name in got:
        g = got[g_name]
        if t.gates == "none":
            if g is not None:
                raise ValueError(f"{g_name} must be None: transition {t.transition!r} takes no "
                                 f"gate (gates='none'), got {type(g).__name__}")
        else:
            heads = q.shape[1] if step or t.layout == "BHTD" else q.shape[2]
            shape = {"scalar_fixed": (heads,), "scalar": tuple(q.shape[:-1]),
                     "key_dim": tuple(q.shape)}[t.gates]
            what = ("the gate input a" if t.gate_input != "log" else "log-gates") + \
                f" of gates={t.gates!r}"
            _check_input_array(g_name, g, q, shape, what, log_gate=t.gate_input == "log")
    for n in t.token_inputs():
        if kwargs.get(n) is not None:
            shape = tuple(q.shape[:-1]) if n == "beta" else tuple(q.shape)
            _check_input_array(n, kwargs[n], q, shape, f"transition {t.transition!r}'s "
                               f"{'one per token' if n == 'beta' else 'one per key dimension'}",
                               log_gate=False)


def _check_sequences(t: GatedAttentionTarget, step: bool, names: tuple[str, ...],
                     got: dict[str, Any]) -> Any:
    """The queries, keys and values of one call in the target's layout
    (:func:`~kernel_verify.impls.sequence_validation.check_qkv_call`); ``q`` or None."""
    axes = "(B, H, d)" if step else "(B, H, T, d)" if t.layout == "BHTD" else "(B, T, H, d)"
    return check_qkv_call(tuple(names), got, step=step, axes=f"{axes} in layout {t.layout}")


def _check_gated_result(t: GatedAttentionTarget, form: str, result: Any) -> None:
    """What a form returned: ``(out, final_state)`` (``step``: ``(state, o_t)``), the state a
    tuple of arrays (None entries allowed; ``parallel``, ``varlen`` and ``padded`` may return
    no state: a kernel without final states, whose packed outputs are still judged), so
    that a form returning the wrong tuple is named at its own call, not met as an unpacking
    error inside a property about another form."""
    check_form_result(t.name, form, result, none_entries=True,
                      state_optional=form in ("parallel", "varlen", "padded"))


def _checked_gated_form(t: GatedAttentionTarget, form: str) -> Callable[..., Any]:
    """``t``'s ``form`` with every call's inputs, gates, per-token inputs and state checked
    first, and what it returns checked after."""
    fn = getattr(t, form)
    fn = getattr(fn, "_kv_unchecked", fn)

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _check_gated_call(t, form, args, kwargs)
        result = fn(*args, **kwargs)
        _check_gated_result(t, form, result)
        return result

    checked._kv_unchecked = fn  # type: ignore[attr-defined]
    return checked


def _checked_fixed_log_gates(t: GatedAttentionTarget) -> Callable[[int], Any]:
    """``t.fixed_log_gates`` with its result checked where the suite calls it: ``H`` finite
    log-gates ``≤ 0`` (a decay that grows, ``g > 0``, is refused), returned unchanged."""
    fn = t.fixed_log_gates
    fn = getattr(fn, "_kv_unchecked", fn)

    @functools.wraps(fn)  # type: ignore[arg-type]
    def checked(h: int) -> Any:
        result = fn(h)  # type: ignore[misc]
        try:
            values = np.asarray(result, dtype=np.float64)
        except (TypeError, ValueError):
            raise _fail(TypeError, t.name, "fixed_log_gates", f"must return {h} log-gates (an "
                        f"array of shape ({h},)), got {type(result).__name__}") from None
        if values.shape != (h,):
            raise _fail(ValueError, t.name, "fixed_log_gates", f"must return one log-gate per "
                        f"head, shape ({h},) for H = {h}, got shape {values.shape}")
        if not np.isfinite(values).all():
            raise _fail(ValueError, t.name, "fixed_log_gates", f"must return finite log-gates, "
                        f"got {values.tolist()}")
        if (values > 0).any():
            raise _fail(ValueError, t.name, "fixed_log_gates", "must return log-gates ≤ 0 (a "
                        f"decay in (0, 1]); got {values.tolist()}: a decay > 1 grows the state")
        return result

    checked._kv_unchecked = fn  # type: ignore[attr-defined]
    return checked


#: The one protocol of a recurrence with its transition as data (the gated target's name kept).
RecurrentTarget = GatedAttentionTarget
