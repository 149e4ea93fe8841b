"""Attention targets × backends: which cases the attention properties run, how they call a
target on a backend, and the derived error bound of one correct output in that backend's dtype.

A case is ``(target, backend)`` for every backend of the axis (:mod:`kernel_verify.verify.backends`)
in a library and dtype the target accepts (``AttentionTarget.backends``/``dtypes``); backends
unavailable here stay as cases skipped with their reason.

Tolerance model (black box). A correct normalised attention computes each output as a convex
combination of values whose weights come from log-weights ``ℓ_ij`` (``log φ(q_i)ᵀφ(k_j)``, or the
scores of exact attention), unit roundoff ``u_c`` of the *compute* dtype. Each log-weight is a
logsumexp over at most ``M`` feature terms ``a_ik + b_jk``, each argument a sum of at most
``2d + 3`` rounded terms (``wᵀx'``: d products; ``‖x'‖²/2``: d squares; the ``½ log m``
constant; the sum of the query and key parts) whose absolute values add up to at most ``Z``
(below), so its error is ``≤ γ_(2d+3)(u_c)·Z`` (Higham Lemma 3.1 on each dot product; exact
attention's score ``q'ᵀk'`` is a d-term dot product, ``≤ γ_d·X²``); the exponential (within
``ulps[exp]`` of the compute dtype) and the sums over at most ``N = n + M + 6`` positive terms
(features, keys, normaliser) add a relative error ``≤ γ_N(u_c)``, i.e. ``≤ γ_N`` in the log.
So every logit has an absolute error ``≤ δ = γ_(2d+3)(u_c)·Z + γ_N(u_c) + ulps[exp]·u_c``
(the analysis of the stable evaluation in ``tests/test_attention.py``, with the argument's error
taken from its own dot products rather than charged ``N`` times), hence weights with relative
error ``≤ e^(2δ) − 1`` and an output error ``≤ ε₀ = (e^(4δ) − 1 + 2γ_N + u_c)·max|v|`` (the last
terms: the plain feature path's ``2γ_N`` bound for positive features,
:mod:`kernel_verify.verify.attention_bounds`, and the final rounding). Half types are
computed in float32 and cast back (README, "Low precision"; ``verify.tolerance.BUDGETS``):
``+ u_out·(max|v| + ε₀)`` for the cast. Not knowing the target's features, the suite assumes at most
``M = 4096`` features and bounds the log-weights by ``Z = 2(√d + 8)·X + X² + log(nM)`` with ``X``
the largest pre-scaled input norm ``‖q‖·d^(-1/4)`` (softmax-family features ``wᵀx − ‖x‖²/2`` with
‖w‖ ≤ √d + 8, which fails with probability < e^(-32) per row by Gaussian concentration; exact
attention's scores ``xᵀy ≤ X²``).
Every bound is computed from the inputs *as the target saw them* (rounded to the dtype), so
input rounding is no error. Two outputs that must agree may differ by ``2ε``.

Smallest detectable defect. Two outputs that must agree are compared within ``2ε``; a defect
that moves an output by more than ``2ε`` fails. The table gives ``2ε/max|v|`` for the worst
inputs the identities draw (every entry of q, k at ``2·scale``, |v| = 2, d = n = 8) at
each scale they sweep; :func:`detectable_defect` computes it and
``tests/test_attention_bounds_table.py`` checks this table against it:

==========  =========  =========  =========  =========
dtype       scale 0.1  scale 0.5  scale 1    scale 30
==========  =========  =========  =========  =========
float64     6e-12      6e-12      7e-12      2e-10
float32     3e-03      3e-03      4e-03      1e-01
float16     4e-03      4e-03      5e-03      1e-01
bfloat16    1e-02      1e-02      1e-02      1e-01
==========  =========  =========  =========  =========

A planted defect that shifts an output by more than this fraction of ``max|v|`` fails; the
bound is computed from each drawn input, so typical draws (entries uniform in the range) detect
smaller ones. Half types are computed in float32 and cast back (their floor: the cast's
``2^-p``). At scale 30 in low precision the ``γ_(2d+3)·Z`` term dominates (``Z ≈ 1.2e4``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from kernel_verify.properties.backends import backend_param
from kernel_verify.properties.strategies import QKV
from kernel_verify.properties.targets import attentions_with, missing_form_param, none_param
from kernel_verify.verify.backends import AXIS, Backend
from kernel_verify.verify.tolerance import FORMATS, gamma

M_MAX = 4096


def feature_count(target) -> int | None:
    """The number of features behind ``target``'s outputs: its declared ``feature_count`` (0:
    exact attention, no features), else the last axis of its declared ``features`` (evaluated
    on one token of width 4), else None (unknown: the bounds then assume :data:`M_MAX`)."""
    declared = getattr(target, "feature_count", None)
    if declared is not None:
        return int(declared)
    features = getattr(target, "features", None)
    if features is None:
        return None
    try:
        return int(np.shape(features(np.full((1, 1, 1, 4), 0.5), 0))[-1])
    except Exception:  # a features function that cannot run at d = 4: count unknown
        return None


def features_or_max(m: int | None) -> int:
    """``m`` when known, else :data:`M_MAX` (the assumption the bounds make without it)."""
    return M_MAX if m is None else int(m)


def unknown_count_note(target) -> str | None:
    """What an unknown feature count costs (for the verdict), or None when it is known."""
    if feature_count(target) is not None:
        return None
    return (f"{target.name} declares neither feature_count nor features: the bounds assume "
            f"M_MAX = {M_MAX} features, about (n + {M_MAX})/(n + m) times looser than with its "
            "true m; measured at the low-precision gradient test's size (n = 4): ∂L/∂q,k within "
            "0.43·max|∂L/∂q,k| in float32, float16 and bfloat16 alike, so only defects of about "
            "40 % and more can fail there (against 3e-4 in float32 for exact attention declared "
            "with feature_count = 0); declare AttentionTarget.feature_count (0: exact attention)")


def cases(*claims: str) -> list[Any]:
    """``pytest.param(target, backend)`` for every attention target with ``claims`` and every
    backend it accepts; skipped (with the reason) where the backend is unavailable, or, when no
    target qualifies, one skipped param saying so."""
    targets, skip = attentions_with(claims)
    if skip is not None:
        return none_param(skip, values=2)
    out = []
    for t in targets:
        out.extend(backend_param(t, backend=for_target(t, b), id=f"{t.name}-{b.id}")
                   for b in AXIS if t.accepts(b.library, b.dtype))
    return out


def form_cases(*need: str, any_of: tuple[str, ...] = ()) -> list:
    """``pytest.param(target, backend)`` for causal attention targets × accepted backends;
    targets lacking a form in ``need`` (or all of ``any_of``) are one skipped param naming the
    protocol field that would add the property."""
    targets, skip = attentions_with(("causal",))
    if skip is not None:
        return none_param(skip, values=2)
    out = []
    for t in targets:
        skipped = missing_form_param(t, need, any_of, "AttentionTarget",
                                     "the forms protocol, docs/math.md §13",
                                     lambda t, f: t.offers(f))
        if skipped is not None:
            out.append(skipped)
            continue
        out.extend(backend_param(t, backend=for_target(t, b), id=f"{t.name}-{b.id}")
                   for b in AXIS if t.accepts(b.library, b.dtype))
    return out


HALF = ("float16", "bfloat16")


def for_target(target, backend: Backend) -> Backend:
    """``backend`` as the properties judge ``target`` on it: in a half dtype, a target that does
    not claim ``half_in_float32`` may round every operation to the half type, so its budget is
    the native one (:func:`~kernel_verify.verify.tolerance.native_budget_for`)."""
    if backend.dtype in HALF and not target.has("half_in_float32"):
        return replace(backend, native_half=True)
    return backend


def void_bound_reason(backend: Backend, terms: int) -> str:
    """Why no identity is credited on ``backend``: its bound over ``terms`` rounded operations
    is void (``n·u ≥ 1``)."""
    return (f"not credited on {backend.id}: the target does not claim half_in_float32, so every "
            f"operation may round to {backend.dtype}, and the derived bound over up to {terms} "
            "terms (M_MAX features + keys) is void (n·u ≥ 1): no identity can fail here. Claim "
            "half_in_float32 if half inputs are computed in float32")


def value_spread(*values: np.ndarray) -> float:
    """``max_c (max_j v_jc − min_j v_jc)`` over every value array given (all batch elements,
    heads and rows together): each output of a normalised attention is a convex combination of
    values, so two such outputs differ, entry by entry, by at most this (the diameter of the
    values' convex hull in the max norm; ``≤ 2·max|v|``)."""
    rows = np.concatenate([v.reshape(-1, v.shape[-1]) for v in values])
    return float(np.ptp(rows, axis=0).max())


def credit_case(request, tol: float, values: tuple[np.ndarray, ...], backend: Backend,
                scale: Any, prop: str) -> bool:
    """Whether this example of a comparison property can fail; recorded for the verdict.

    Two outputs are compared within ``tol`` (``2ε`` of :func:`output_error_bound`). Where
    ``tol ≥`` :func:`value_spread` of the values involved, any two outputs inside the values'
    convex hull agree within ``tol``: the comparison cannot fail for a target whose outputs
    stay in the hull (it only catches non-finite outputs and excursions beyond the hull), so
    the example is not credited. It still runs. A test case (target, backend) none of whose
    examples was credited records ``kv_uncredited`` with the reason (verdict ``not credited``,
    never ``pass``); a single credited example lifts it. The state lives on the pytest item
    across Hypothesis' examples (``request.node``): the entry is appended at the first
    uncredited example and removed at the first credited one, and the call's report reads
    ``user_properties`` as they stand when the test returns. With the bounds of this module no
    swept (dtype, scale) cell is void for values spread over [−2, 2]: ``2ε`` is at most ~0.09
    (bfloat16, scale 30; the table above × max|v|) against spreads of order 4; an example is
    void where its values barely spread (one key, as with n = 1 and one batch element and
    head; nearly equal values), and a half-type case without ``half_in_float32`` is skipped as
    void before (:func:`void_bound_reason`)."""
    spread = value_spread(*values)
    node = request.node
    state = node.__dict__.setdefault("_kv_credit", {"credited": False, "entry": None})
    props = node.user_properties
    if tol < spread:
        state["credited"] = True
        if state["entry"] in props:
            props.remove(state["entry"])
        return True
    if not state["credited"] and state["entry"] is None:
        state["entry"] = ("kv_uncredited", (
            f"not credited on {backend.id} at input scale {scale}: the derived bound "
            f"2ε = {tol:.3g} is at least the spread {spread:.3g} of the values (max − min per "
            f"column), so {prop} cannot fail for outputs inside the values' convex hull; only "
            "non-finite outputs or outputs beyond the hull would fail (the bound is derived, "
            "not narrowed: a smaller input scale or float64 is where this property is "
            "credited)"))
        props.append(state["entry"])
    return False


def modes(target) -> list[bool]:
    """The ``causal`` values a target supports (non-causal when it claims neither)."""
    out = [c for c, claim in ((False, "noncausal"), (True, "causal")) if target.has(claim)]
    return out or [False]


def seen(x: QKV, backend: Backend) -> QKV:
    """``x`` as the target sees it on ``backend`` (rounded once to its dtype)."""
    q = backend.seen(x.q)
    k = q if x.self_attention else backend.seen(x.k)
    return QKV(q, k, backend.seen(x.v), x.scale, x.self_attention)


def call(target, backend: Backend, x: QKV, *, causal: bool, seed: int, **kw: Any) -> np.ndarray:
    """``target`` on ``backend``: inputs converted (``k is q`` for self-attention inputs), the
    output widened to float64 NumPy. Outputs of another shape are an ``AssertionError``."""
    q = backend.from_numpy(x.q)
    k = q if x.self_attention else backend.from_numpy(x.k)
    out = target(q, k, backend.from_numpy(x.v), causal=causal, seed=seed, **kw)
    want = (*x.q.shape[:-1], x.v.shape[-1])
    assert out.shape == want, (f"{target.name} on {backend.id}: output shape {out.shape}, "
                               f"expected {want}")
    return out


def output_error_bound(x: QKV, backend: Backend, m: int | None = None) -> float:
    """``ε`` of the module docstring for the (already rounded) inputs ``x`` on ``backend``,
    with ``m`` features (``None``: unknown, :data:`M_MAX`; ``0``: exact attention, whose
    log-weights are the scores themselves, still bounded by the same ``Z``)."""
    q, k, v = x.q, x.k, x.v
    d, n = q.shape[-1], k.shape[-2]
    b = backend.budget
    u_c = b.u_compute
    mm = features_or_max(m)
    xn = max(np.linalg.norm(q, axis=-1).max(), np.linalg.norm(k, axis=-1).max()) * d**-0.25
    z = 2 * (math.sqrt(d) + 8) * xn + xn * xn + math.log(n * max(mm, 1))
    if (n + mm + 6) * u_c >= 1:
        pytest.skip(void_bound_reason(backend, n + mm + 6))
    g = gamma(n + mm + 6, u_c)
    delta = gamma(2 * d + 3, u_c) * z + g + b.ulps["exp"] * u_c
    vmax = max(float(np.abs(v).max()), 1.0)
    eps = (math.expm1(min(4 * delta, 700.0)) + 2 * g + u_c) * vmax
    if b.output_round:
        eps += FORMATS[b.dtype].u * (vmax + eps)
    return float(eps)


def rounding_floor(backend: Backend):
    """``floor(q, k, v)`` for
    :func:`~kernel_verify.properties.checks.convergence.convergence_failures`:
    ``2ε`` of a correct output on ``backend`` (the target's rounding plus the float64 reference's,
    far below ε), or 0 where the bound is void (a half type without ``half_in_float32``)."""
    def floor(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> float:
        n = k.shape[-2]
        if (n + M_MAX + 6) * backend.budget.u_compute >= 1:
            return 0.0
        return 2 * output_error_bound(QKV(q, k, v, 1.0), backend)
    return floor


#: The scales the identities sweep (``qkv_sets`` defaults and ``SCALE_PAIRS``).
SWEPT_SCALES = (0.1, 0.5, 1.0, 30.0)


def detectable_defect(backend: Backend, scale: float, d: int = 8, n: int = 8) -> float:
    """``2ε/max|v|`` for the worst input drawn at ``scale`` (every entry of q and k at
    ``2·scale``, |v| = 2): the smallest relative output shift an identity detects there."""
    q = np.full((1, 1, n, d), 2.0 * scale)
    v = np.full((1, 1, n, 2), 2.0)
    return 2 * output_error_bound(QKV(q, q, v, scale), backend) / 2.0


def describe(target, backend: Backend, causal: bool, seed: int, x: QKV) -> str:
    return (f"{target.name} on {backend.id} (causal={causal}, seed={seed}, shape={x.shape}, "
            f"scale={x.scale})")
