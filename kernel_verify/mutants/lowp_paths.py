"""Mutants on the low-precision dtype paths (issue #44 item 6; docs/math.md §9, §13, §14): the
identity, gradient and forms properties credited on float32 and on half precision only where a
mutant *on that path* is killed there (:mod:`kernel_verify.mutants.paths`). Every target here
declares float32 only, or float16 and bfloat16 only — no float64 path to fall back on, as a
float32-only library kernel or a model's half-precision attention — and carries one defect of
the field, sized to be a real bug (a whole token, a whole batch element, a denominator off by
one), not a rounding-sized nudge.

Skeletons (each twin below runs the same code with the defect off):

* **exact softmax attention computed in float32** (torch, BHTD, ``feature_count = 0``):
  ``O = softmax(QKᵀ/√d − mask)·V`` with the row maximum subtracted, causal and non-causal;
  declared ``dtypes=("float32",)``, or ``("float16", "bfloat16")`` with half inputs upcast to
  float32 and the output rounded once (claim ``half_in_float32``). Backward defects use a
  hand-written ``torch.autograd.Function`` (a fused kernel's own backward, recomputing the
  forward in float32) with a hand-written forward-mode rule;
* **Taylor linear attention in float32 with its forms** (:func:`kernel_verify.mutants.gradients.
  taylor_forms`: ``stateful``, ``step``, the declared features and state sums) plus a
  ``varlen`` form running each packed sequence through ``stateful`` from its own state.

Defects (mutant → the property written to kill it, on its path):

* ``lowp_f32_mask_admits_next`` / ``lowp_half_mask_admits_next``: the causal mask is
  ``triu(2)`` instead of ``triu(1)`` — token i also sees token i + 1 →
  ``test_past_outputs_ignore_the_future`` (and, float32, ``test_attention_gradient_locality``);
* ``lowp_f32_key_position_bias`` / ``lowp_half_key_position_bias``: a bias ``−0.5·j`` on the
  score of key j (a recency bias left on in a position-free attention) →
  ``test_permutation_equivariance``;
* ``lowp_f32_softmax_plus_one`` / ``lowp_half_softmax_plus_one``: the denominator
  ``Σ_j e_ij + 1`` ("softmax₁": the weights sum to ``1 − 1/(Σe + 1)``) →
  ``test_partition_of_unity``, ``test_outputs_are_convex_combinations_of_visible_values``;
* ``lowp_f32_dropout_left_on`` / ``lowp_half_dropout_left_on``: attention dropout (p = 0.1,
  the global torch RNG) active at inference → ``test_same_seed_gives_same_output``;
* ``lowp_f32_batch_heads_swapped`` / ``lowp_half_batch_heads_swapped``: keys and values read
  with the batch and heads axes swapped (``k.transpose(0, 1).reshape(k.shape)``: a (H, B)
  buffer read as (B, H)) → ``test_batch_elements_and_heads_are_independent`` (and, float32,
  ``test_attention_gradients_batch_and_head_independent``);
* ``lowp_half_exp_in_half``: the unshifted exponential ``exp(s)`` evaluated in the half type
  (overflows at ``s > 11`` in float16, ``> 88`` in bfloat16), ``inf/inf`` →
  ``test_outputs_stay_finite_across_input_scales``;
* ``lowp_f32_backward_atomic``: ``∂L/∂v = Pᵀ G`` accumulated over the queries in a
  call-dependent order (atomic adds) while claiming ``deterministic_backward`` →
  ``test_attention_backward_is_deterministic``;
* ``lowp_f32_jvp_weights_constant``: right backward, forward-mode rule ``dO = P·dV`` (the
  weights held constant) → ``test_forward_mode_matches_reverse_mode_attention``;
* ``lowp_f32_backward_no_inv_sqrt_d``: the backward's chain rule through ``S = QKᵀ/√d`` without
  the ``1/√d`` (``∂L/∂q``, ``∂L/∂k`` × √d) → ``test_gradcheck_float64_attention`` (float32
  differences: the work dtype of a float32-only target);
* ``lowp_f32_backward_unshifted``: the backward recomputes ``exp(s)/Σexp(s)`` without the row
  maximum: ``inf/inf`` at large scores where the forward is finite →
  ``test_attention_gradients_finite_where_outputs_are``;
* ``lowp_f32_packed_state_not_reset``: ``varlen`` continues each packed sequence from the
  previous one's final state → ``test_packed_sequences_equal_separate_runs``;
* ``lowp_f32_state_keeps_every_token``: ``stateful``/``step`` return the running sums of every
  token (the state's time axis kept) → ``test_state_size_does_not_grow_with_length``.

**Taylor linear attention taking float64 and float32** (declared ``features``, no forms;
:func:`make_float32_backward_target`): the exception to "no float64 path" above, because
``test_low_precision_gradients_near_float64`` judges a float32 gradient against the target's
own float64 gradient, so its mutant must have both; the defect is on the float32 path only:

* ``lowp_f32_dk_times_1_001``: the float32 backward's ``∂L/∂k`` is 1.001 times the true one
  (a fused kernel's backward off by 0.1 %), float64 right → killed by
  ``test_low_precision_gradients_near_float64`` through its same-precision criterion
  (docs/math.md §13.2: the gradient's error against float64 within 128 times a plain float32
  evaluation's); its derived bound alone (``4ρ'·n·max|g₆₄|``) lets 1e-3 through.

**A float32-only Gated DeltaNet** (the built-in torch recurrence of
``properties/builtin_delta.py``, declared L2 features, claiming ``differentiable``;
:func:`make_float32_delta_target`, twin ``control_lowp_f32_delta``): finite differences need
float64, so its backward meets only ``test_gated_low_precision_gradients_near_float64`` (the
float64 gradient of the recurrence, the same-precision criterion):

* ``lowp_f32_delta_dk_times_1_001``: the backward's ``∂L/∂k`` is 1.001 times the true one in
  its full-sequence forms (a fused kernel's backward off by 0.1 %) → killed by
  ``gated_forms::test_gated_low_precision_gradients_near_float64``.

Black-box SM⁺ feature maps computing in float32 / float16 (:data:`LOWP_MAP_MUTANTS`; twin
``control_blackbox_positive``, the same formula in float64):
``blackbox_positive_float{32,16}_ignores_seed`` (``W`` from a global generator) →
``blackbox_maps::test_same_seed_gives_the_same_draw``;
``blackbox_positive_float{32,16}_repeated_rows`` (8 rows used twice) →
``test_random_features_are_distinct``; ``blackbox_positive_float16`` (``exp`` underflows to 0
below ``e^(−17)``, while the map claims positive features) → ``test_claimed_sign_of_features``.
Feature maps declare no dtypes, so their names carry the dtype (the path of their cases).

Attention names carry ``f32``/``half``, never a dtype's full name:
:func:`kernel_verify.mutants.paths.case_path` would read a dtype inside a target's name as the
path of a case whose id names no backend. Run with ``kernel-verify mutants --only <name>``;
twins: ``kernel-verify check kernel_verify.mutants.lowp_paths:control_<twin>``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from kernel_verify.properties.protocol import AttentionTarget, Target

__all__ = ["DK_FACTOR", "LOWP_MAP_MUTANTS", "LOWP_PATH_CONTROLS", "LOWP_PATH_KILLERS",
           "LOWP_PATH_MUTANTS", "make_float32_backward_target", "make_forms_target",
           "make_target", "positive_map"]

F32 = ("float32",)
HALF = ("float16", "bfloat16")
_CLAIMS = frozenset({"causal", "noncausal", "positive_weights", "differentiable",
                     "deterministic_backward"})
#: Defects of the hand-written backward / forward-mode rule (the custom Function runs).
_BACKWARD = {"custom", "atomic", "jvp_constant", "no_inv_sqrt_d", "unshifted"}

_AI = "attention_identities::test_"
_G = "gradients::test_"
_F = "attention_forms::test_"
_B = "blackbox_maps::test_"

_CALLS = itertools.count()


def _scores(q, k, causal: bool, defect: str):
    """``S = QKᵀ/√d`` (float32) with the defect's bias and the causal mask (``−inf`` above the
    diagonal; ``mask_next``: above the first superdiagonal)."""
    import torch

    n, m = q.shape[-2], k.shape[-2]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if defect == "position_bias":
        s = s - 0.5 * torch.arange(m, dtype=s.dtype, device=s.device)
    if causal:
        future = torch.ones(n, m, dtype=torch.bool, device=s.device).triu(
            2 if defect == "mask_next" else 1)
        s = s.masked_fill(future, float("-inf"))
    return s


def _weights(s, defect: str, half_dtype=None):
    """``P = softmax(S)`` (row maximum subtracted) under the defect."""
    import torch

    if defect == "exp_in_half" and half_dtype is not None:
        e = torch.exp(s.to(half_dtype)).float()  # unshifted, in the half type: overflows
        return e / e.sum(-1, keepdim=True)
    e = torch.exp(s - s.amax(-1, keepdim=True).detach())
    den = e.sum(-1, keepdim=True)
    if defect == "plus_one":
        den = den + 1.0
    p = e / den
    if defect == "dropout":  # inference with dropout on: the global RNG, call by call
        keep = (torch.rand(p.shape, device=p.device) >= 0.1).to(p.dtype)
        p = p * keep / 0.9
    return p


def _plain(q, k, v, causal: bool, defect: str, half_dtype=None):
    """The float32 forward in differentiable torch operations."""
    if defect == "batch_heads_swapped":
        k = k.transpose(0, 1).reshape(k.shape)
        v = v.transpose(0, 1).reshape(v.shape)
    return _weights(_scores(q, k, causal, defect), defect, half_dtype) @ v


def _rotating_matmul(a, b):
    """``a @ b`` summed over the inner index in an order that rotates from call to call (a
    reduction by atomic adds in arrival order)."""
    import torch

    n = a.shape[-1]
    start = next(_CALLS) % n
    out = torch.zeros(*a.shape[:-1], b.shape[-1], dtype=a.dtype, device=a.device)
    for j in [*range(start, n), *range(start)]:
        out = out + a[..., j:j + 1] * b[..., j:j + 1, :]
    return out


def _function(defect: str):
    """Softmax attention (float32) with a hand-written backward and forward-mode rule."""
    import torch

    class Softmax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal):
            ctx.causal = causal
            ctx.save_for_backward(q, k, v)
            ctx.save_for_forward(q, k, v)
            return _plain(q, k, v, causal, "none")

        @staticmethod
        def jvp(ctx, tq, tk, tv, _tc):
            """``dO = dP·V + P·dV``, ``dP = P ⊙ (dS − rowsum(P ⊙ dS))``, ``dS = (dQ·Kᵀ +
            Q·dKᵀ)/√d`` masked like ``S`` (``jvp_constant``: ``P·dV`` only)."""
            q, k, v = ctx.saved_tensors
            p = _weights(_scores(q, k, ctx.causal, "none"), "none")
            out = p @ tv
            if defect != "jvp_constant":
                ds = (tq @ k.transpose(-1, -2) + q @ tk.transpose(-1, -2)) / math.sqrt(
                    q.shape[-1])
                ds = torch.where(torch.isfinite(_scores(q, k, ctx.causal, "none")), ds, 0.0)
                dp = p * (ds - (p * ds).sum(-1, keepdim=True))
                out = out + dp @ v
            return out

        @staticmethod
        def backward(ctx, g):
            q, k, v = (t.detach().requires_grad_(True) for t in ctx.saved_tensors)
            with torch.enable_grad():
                s = _scores(q, k, ctx.causal, "none")
                if defect == "unshifted":  # no row maximum: exp overflows in float32
                    e = torch.exp(s)
                    p = e / e.sum(-1, keepdim=True)
                else:
                    p = _weights(s, "none")
                gq, gk, gv = torch.autograd.grad(p @ v, (q, k, v), g)
            if defect == "no_inv_sqrt_d":
                gq, gk = gq * math.sqrt(q.shape[-1]), gk * math.sqrt(q.shape[-1])
            if defect == "atomic":
                gv = _rotating_matmul(p.detach().transpose(-1, -2), g)
            return gq, gk, gv, None

    return Softmax.apply


def make_target(name: str, defect: str = "none", dtypes: tuple[str, ...] = F32
                ) -> AttentionTarget:
    """Exact softmax attention computed in float32 (torch, ``feature_count = 0``) taking
    ``dtypes`` only (half inputs upcast, the output rounded once: ``half_in_float32``), with
    ``defect`` (``none``; forward: ``mask_next``, ``position_bias``, ``plus_one``, ``dropout``,
    ``batch_heads_swapped``, ``exp_in_half``; backward: ``custom`` — the right hand-written
    backward —, ``atomic``, ``jvp_constant``, ``no_inv_sqrt_d``, ``unshifted``)."""
    fn = _function(defect) if defect in _BACKWARD else None

    def attention(q, k, v, *, causal: bool, seed: int = 0, **_: Any):
        import torch

        for arg, x in (("q", q), ("k", k), ("v", v)):
            if x.ndim != 4:
                raise ValueError(f"{arg} must have shape (batch, heads, n, d), got "
                                 f"{tuple(x.shape)}")
        out_dtype = v.dtype
        half = out_dtype if out_dtype in (torch.float16, torch.bfloat16) else None
        q32, k32, v32 = q.float(), k.float(), v.float()
        if fn is not None:
            out = fn(q32, k32, v32, causal)
        else:
            out = _plain(q32, k32, v32, causal, defect, half)
        return out.to(out_dtype)

    claims = _CLAIMS | ({"half_in_float32"} if set(dtypes) & set(HALF) else set())
    return AttentionTarget(name, attention, claims, backends=("torch",), dtypes=dtypes,
                           feature_count=0)


# ------------------------------------------------------------ float32 Taylor forms with varlen
def make_forms_target(name: str, defect: str = "none") -> AttentionTarget:
    """Float32-only Taylor linear attention (:func:`kernel_verify.mutants.gradients.
    taylor_forms`: ``attention``, ``stateful``, ``step``, declared ``features`` and
    ``state_sums``) with a ``varlen`` form (none with a growing state); ``defect``: ``none``,
    ``packed_no_reset`` (each packed sequence starts from the previous one's final state),
    ``state_every_token`` (the state keeps the running sums of every token:
    ``(S_1…S_T, z_1…z_T)``)."""
    import torch

    from kernel_verify.impls.sequence_validation import check_cu_seqlens
    from kernel_verify.mutants.gradients import _taylor_core, taylor_forms

    f = taylor_forms()
    stateful, step = f["stateful"], f["step"]
    if defect == "state_every_token":
        def stateful(q, k, v, *, initial_state=None, seed: int = 0):
            # a grown state is read through its last token's sums
            init = None if initial_state is None else tuple(s[:, :, -1] for s in initial_state)
            out, _ = _taylor_core(q, k, v, init, True, 0.5)
            return out, _running(k, v, init)  # every token's sums: the time axis kept

        def step(state, q_t, k_t, v_t, *, seed: int = 0):
            out, new = stateful(q_t[..., None, :], k_t[..., None, :], v_t[..., None, :],
                                initial_state=state)
            if state is not None:  # append the new token's sums to the stored ones
                new = tuple(torch.cat([a, b], dim=2) for a, b in zip(state, new, strict=True))
            return new, out[..., 0, :]

    def varlen(q, k, v, *, cu_seqlens, initial_state=None, seed: int = 0):
        check_cu_seqlens(cu_seqlens, length=q.shape[-2])
        bounds = [int(c) for c in cu_seqlens.tolist()]
        outs, states, carried = [], [], None
        for i, (a, b) in enumerate(itertools.pairwise(bounds)):
            init = None if initial_state is None else tuple(s[i:i + 1] for s in initial_state)
            if defect == "packed_no_reset" and carried is not None:
                init = carried
            out, st = stateful(q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], initial_state=init,
                               seed=seed)
            outs.append(out)
            states.append(st)
            carried = st
        return (torch.cat(outs, dim=2),
                tuple(torch.cat([s[j] for s in states]) for j in range(2)))

    def state_sums(state):
        if defect == "state_every_token":
            state = tuple(s[:, :, -1] for s in state)
        return f["state_sums"](state)

    return AttentionTarget(name, f["attention"], frozenset(_CLAIMS | {"causal"}),
                           backends=("torch",), dtypes=F32, stateful=stateful, step=step,
                           varlen=varlen, features=f["features"], state_sums=state_sums)


def _running(k, v, initial_state):
    """``(S_j, z_j)`` for every token j (B, H, T, m, d_v), (B, H, T, m): the Taylor map's
    running sums from ``initial_state``."""
    import torch

    from kernel_verify.mutants.gradients import _taylor_torch

    fk = _taylor_torch(k)
    s_run = torch.cumsum(fk[..., :, None] * v[..., None, :], dim=-3)
    z_run = torch.cumsum(fk, dim=-2)
    if initial_state is not None:
        s_run = s_run + initial_state[0][..., None, :, :]
        z_run = z_run + initial_state[1][..., None, :]
    return s_run, z_run


# ------------------------------------- Taylor attention on float64 and float32, float32 backward
#: The factor of ``lowp_f32_dk_times_1_001``'s float32 ``∂L/∂k``.
DK_FACTOR = 1.001


def make_float32_backward_target(name: str, dk_factor: float = 1.0) -> AttentionTarget:
    """Taylor linear attention (:func:`kernel_verify.mutants.gradients.taylor_forms`, declared
    ``features``, no forms) taking torch float64 and float32, whose float32 backward multiplies
    ``∂L/∂k`` by ``dk_factor`` (the forward and the float64 path unchanged; ``1``: the twin)."""
    import numpy as np

    from kernel_verify.mutants.gradients import _grad_scale, taylor_forms

    f = taylor_forms()

    def attention(q, k, v, *, causal: bool, seed: int = 0, **_: Any):
        import torch

        if (dk_factor != 1.0 and not isinstance(q, np.ndarray)
                and q.dtype == torch.float32):
            q, k, v = _grad_scale({"k": dk_factor})(q, k, v)
        return f["attention"](q, k, v, causal=causal, seed=seed)

    return AttentionTarget(name, attention, _CLAIMS, backends=("torch",),
                           dtypes=("float64", "float32"), features=f["features"])


# ------------------------------------------------ a float32-only Gated DeltaNet, float32 backward
def make_float32_delta_target(name: str, dk_factor: float = 1.0):
    """The built-in torch Gated DeltaNet (``properties/builtin_delta.py``) on torch float32
    only, whose full-sequence forms (``parallel``, ``stateful``, ``chunked``) multiply the
    backward's ``∂L/∂k`` by ``dk_factor`` (the forward unchanged; ``1``: the twin)."""
    import dataclasses

    from kernel_verify.mutants.gradients import _grad_scale
    from kernel_verify.properties.builtin_delta import delta_target

    t = delta_target("gated_delta", backends=("torch",), dtypes=("float32",), name=name)

    def scaled(form):
        def run(q, k, v, *args, **kw):
            if dk_factor != 1.0:
                q, k, v = _grad_scale({"k": dk_factor})(q, k, v)
            return form(q, k, v, *args, **kw)

        return run

    return dataclasses.replace(t, **{f: scaled(getattr(t, f))
                                     for f in ("parallel", "stateful", "chunked")})


# ------------------------------------------------ black-box SM⁺ maps computing in float32 / float16
def positive_map(name: str, dtype: str, *, global_rng: bool = False,
                 repeated_rows: bool = False) -> list[Target]:
    """A black-box SM⁺ map ``φ(x) = exp(Wx − ‖x‖²/2)/√m`` (``sample_fn`` only, m = 16, formula
    ``softmax_positive``, iid rows) that computes and returns its features in ``dtype``
    (``float32``, ``float16``), with the defects ``global_rng`` (``W`` from a generator the seed
    does not reach) and ``repeated_rows`` (8 rows drawn, each used twice: m = 16 features of 8
    random rows). Feature maps declare no dtypes: the path of their cases is the dtype named in
    the mutant's name (:func:`kernel_verify.mutants.paths.case_path`), so these names carry it.
    Its twin is ``control_blackbox_positive`` (the same formula in float64, no defect): a map
    computing float64 input in float32 or float16 fails ``test_float64_input_is_computed_in_
    float64`` whatever else it does."""
    import numpy as np

    from kernel_verify.mutants.features import _BLACKBOX_CLAIMS
    from kernel_verify.properties.protocol import FeatureMapTarget
    from kernel_verify.verify import seeds

    work = np.dtype(dtype).type
    m = 16

    def sample_fn(x, seed: int):
        x = np.asarray(x)
        rng = np.random.default_rng() if global_rng else seeds.rng(seed)
        rows = rng.standard_normal((m // 2 if repeated_rows else m, x.shape[-1]))
        w = np.concatenate([rows, rows]) if repeated_rows else rows
        xw, ww = x.astype(work), w.astype(work)
        arg = xw @ ww.T - (xw * xw).sum(-1, keepdims=True) / work(2)
        return np.exp(arg) / work(np.sqrt(m))

    return [FeatureMapTarget(name, "softmax", _BLACKBOX_CLAIMS, sample_fn=sample_fn, m=m,
                             formula="softmax_positive", matrix="iid")]


def _map(dtype: str, **defect: bool) -> Callable[[str], list[Target]]:
    return lambda name: positive_map(name, dtype, **defect)


def _att(defect: str, dtypes: tuple[str, ...]) -> Callable[[str], list[Target]]:
    return lambda name: [make_target(name, defect, dtypes)]


def _forms(defect: str) -> Callable[[str], list[Target]]:
    return lambda name: [make_forms_target(name, defect)]


#: name -> (description, make(target name) -> targets).
LOWP_PATH_MUTANTS: dict[str, tuple[str, Callable[[str], list[Target]]]] = {
    "lowp_f32_mask_admits_next": (
        "float32-only exact attention whose causal mask is triu(2): token i also sees i + 1",
        _att("mask_next", F32)),
    "lowp_half_mask_admits_next": (
        "half-only exact attention (float32 inside) whose causal mask is triu(2): token i "
        "also sees i + 1", _att("mask_next", HALF)),
    "lowp_f32_key_position_bias": (
        "float32-only exact attention with a score bias −0.5·j on key j (a recency bias left "
        "on)", _att("position_bias", F32)),
    "lowp_half_key_position_bias": (
        "half-only exact attention with a score bias −0.5·j on key j",
        _att("position_bias", HALF)),
    "lowp_f32_softmax_plus_one": (
        "float32-only exact attention dividing by Σ_j e_ij + 1 (softmax₁): weights sum below 1",
        _att("plus_one", F32)),
    "lowp_half_softmax_plus_one": (
        "half-only exact attention dividing by Σ_j e_ij + 1 (softmax₁)",
        _att("plus_one", HALF)),
    "lowp_f32_dropout_left_on": (
        "float32-only exact attention with attention dropout p = 0.1 (global RNG) active at "
        "inference", _att("dropout", F32)),
    "lowp_half_dropout_left_on": (
        "half-only exact attention with attention dropout p = 0.1 active at inference",
        _att("dropout", HALF)),
    "lowp_f32_batch_heads_swapped": (
        "float32-only exact attention reading keys and values with the batch and heads axes "
        "swapped (an (H, B) buffer read as (B, H))", _att("batch_heads_swapped", F32)),
    "lowp_half_batch_heads_swapped": (
        "half-only exact attention reading keys and values with batch and heads swapped",
        _att("batch_heads_swapped", HALF)),
    "lowp_half_exp_in_half": (
        "half-only exact attention claiming half_in_float32 whose unshifted exp(s) is "
        "evaluated in the half type (overflow: inf/inf)", _att("exp_in_half", HALF)),
    "lowp_f32_backward_atomic": (
        "float32-only exact attention claiming a deterministic backward whose ∂L/∂v = PᵀG is "
        "accumulated in a call-dependent order (atomic adds)", _att("atomic", F32)),
    "lowp_f32_jvp_weights_constant": (
        "float32-only exact attention: right backward, forward-mode rule dO = P·dV (weights "
        "held constant)", _att("jvp_constant", F32)),
    "lowp_f32_backward_no_inv_sqrt_d": (
        "float32-only exact attention whose hand-written backward leaves the 1/√d out of "
        "∂L/∂q and ∂L/∂k", _att("no_inv_sqrt_d", F32)),
    "lowp_f32_backward_unshifted": (
        "float32-only exact attention whose backward recomputes exp(s)/Σexp(s) without the row "
        "maximum: inf/inf at large scores, finite forward", _att("unshifted", F32)),
    "lowp_f32_packed_state_not_reset": (
        "float32-only Taylor linear attention whose varlen form continues each packed sequence "
        "from the previous one's final state", _forms("packed_no_reset")),
    "lowp_f32_state_keeps_every_token": (
        "float32-only Taylor linear attention whose stateful/step state keeps every token's "
        "running sums (grows with T)", _forms("state_every_token")),
    "lowp_f32_dk_times_1_001": (
        "Taylor linear attention taking float64 and float32 (declared features) whose float32 "
        "backward's ∂L/∂k is 1.001 times the true one; float64 right",
        lambda name: [make_float32_backward_target(name, DK_FACTOR)]),
    "lowp_f32_delta_dk_times_1_001": (
        "float32-only Gated DeltaNet (torch, declared L2 features) whose backward's ∂L/∂k is "
        "1.001 times the true one",
        lambda name: [make_float32_delta_target(name, DK_FACTOR)]),
}

#: Black-box feature-map mutants (catalogue family ``feature_map``): name -> (description, make).
LOWP_MAP_MUTANTS: dict[str, tuple[str, Callable[[str], list[Target]]]] = {
    "blackbox_positive_float32_ignores_seed": (
        "black-box SM⁺ map computing in float32, drawing W from a global generator the seed "
        "does not reach", _map("float32", global_rng=True)),
    "blackbox_positive_float16_ignores_seed": (
        "black-box SM⁺ map computing in float16, drawing W from a global generator",
        _map("float16", global_rng=True)),
    "blackbox_positive_float32_repeated_rows": (
        "black-box SM⁺ map computing in float32 whose 16 features use 8 random rows twice",
        _map("float32", repeated_rows=True)),
    "blackbox_positive_float16_repeated_rows": (
        "black-box SM⁺ map computing in float16 whose 16 features use 8 random rows twice",
        _map("float16", repeated_rows=True)),
    "blackbox_positive_float16": (
        "black-box SM⁺ map claiming positive features, computing exp(Wx − ‖x‖²/2) in float16: "
        "0 below e^(−17) (underflow)", _map("float16")),
}

#: The properties each is written for (``family::test``).
LOWP_PATH_KILLERS: dict[str, tuple[str, ...]] = {
    "lowp_f32_mask_admits_next": (f"{_AI}past_outputs_ignore_the_future",
                                  f"{_G}attention_gradient_locality"),
    "lowp_half_mask_admits_next": (f"{_AI}past_outputs_ignore_the_future",),
    "lowp_f32_key_position_bias": (f"{_AI}permutation_equivariance",),
    "lowp_half_key_position_bias": (f"{_AI}permutation_equivariance",),
    "lowp_f32_softmax_plus_one": (f"{_AI}partition_of_unity",
                                  f"{_AI}outputs_are_convex_combinations_of_visible_values"),
    "lowp_half_softmax_plus_one": (f"{_AI}partition_of_unity",
                                   f"{_AI}outputs_are_convex_combinations_of_visible_values"),
    "lowp_f32_dropout_left_on": (f"{_AI}same_seed_gives_same_output",),
    "lowp_half_dropout_left_on": (f"{_AI}same_seed_gives_same_output",),
    "lowp_f32_batch_heads_swapped": (f"{_AI}batch_elements_and_heads_are_independent",
                                     f"{_G}attention_gradients_batch_and_head_independent"),
    "lowp_half_batch_heads_swapped": (f"{_AI}batch_elements_and_heads_are_independent",),
    "lowp_half_exp_in_half": (f"{_AI}outputs_stay_finite_across_input_scales",),
    "lowp_f32_backward_atomic": (f"{_G}attention_backward_is_deterministic",),
    "lowp_f32_jvp_weights_constant": (f"{_G}forward_mode_matches_reverse_mode_attention",),
    "lowp_f32_backward_no_inv_sqrt_d": (f"{_G}gradcheck_float64_attention",),
    "lowp_f32_backward_unshifted": (f"{_G}attention_gradients_finite_where_outputs_are",),
    "lowp_f32_packed_state_not_reset": (f"{_F}packed_sequences_equal_separate_runs",),
    "lowp_f32_state_keeps_every_token": (f"{_F}state_size_does_not_grow_with_length",),
    "lowp_f32_dk_times_1_001": (f"{_G}low_precision_gradients_near_float64",),
    "lowp_f32_delta_dk_times_1_001": (
        "gated_forms::test_gated_low_precision_gradients_near_float64",),
    "blackbox_positive_float32_ignores_seed": (f"{_B}same_seed_gives_the_same_draw",),
    "blackbox_positive_float16_ignores_seed": (f"{_B}same_seed_gives_the_same_draw",),
    "blackbox_positive_float32_repeated_rows": (f"{_B}random_features_are_distinct",),
    "blackbox_positive_float16_repeated_rows": (f"{_B}random_features_are_distinct",),
    "blackbox_positive_float16": (f"{_B}claimed_sign_of_features",),
}

#: The correct twins: the same code with the defect off (every path of the skeletons).
LOWP_PATH_CONTROLS: dict[str, Callable[[], list[Target]]] = {
    "lowp_f32_exact": lambda: [make_target("control:lowp_f32_exact", "none", F32)],
    "lowp_half_exact": lambda: [make_target("control:lowp_half_exact", "none", HALF)],
    "lowp_f32_exact_custom_backward": lambda: [
        make_target("control:lowp_f32_exact_custom_backward", "custom", F32)],
    "lowp_f32_taylor_varlen": lambda: [make_forms_target("control:lowp_f32_taylor_varlen")],
    "lowp_taylor_f64_f32": lambda: [
        make_float32_backward_target("control:lowp_taylor_f64_f32")],
    "lowp_f32_delta": lambda: [make_float32_delta_target("control:lowp_f32_delta")],
}


def __getattr__(attr: str) -> list[Target]:
    """``<mutant name>`` / ``control_<twin>``: the targets."""
    if attr in LOWP_PATH_MUTANTS:
        return LOWP_PATH_MUTANTS[attr][1](f"mutant:{attr}")
    if attr in LOWP_MAP_MUTANTS:
        return LOWP_MAP_MUTANTS[attr][1](f"mutant:{attr}")
    if attr.startswith("control_") and attr.removeprefix("control_") in LOWP_PATH_CONTROLS:
        return LOWP_PATH_CONTROLS[attr.removeprefix("control_")]()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
