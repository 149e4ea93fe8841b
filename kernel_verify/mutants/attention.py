"""Broken attention implementations (docs/math.md §8–§9), black-box ``AttentionTarget`` mutants.

The correct skeletons are FAVOR+ (positive softmax features ``exp(wᵀx − ‖x‖²/2)/√m`` with
``x = q·d^(-1/4)``, frequencies ``W ~ N(0, I)`` drawn from ``seed``) and exact softmax attention;
each mutant changes one thing. Inputs are float64 ``(batch, heads, n, d)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from kernel_verify.impls.attention_checks import check_attention_inputs
from kernel_verify.impls.numpy.attention import log_linear_attention
from kernel_verify.mutants.base import named
from kernel_verify.properties.protocol import AttentionTarget
from kernel_verify.verify import seeds

M_DEFAULT = 64
TINY = float(np.finfo(np.float64).tiny)
# The mutants validate their inputs like the correct code (one defect each) and claim it; the
# one that does not validate (attention_propagates_nan) breaks that claim.
ALL = frozenset({"causal", "noncausal", "positive_weights", "approximates_softmax",
                 "validates_input"})
EXACT = frozenset({"causal", "noncausal", "positive_weights", "validates_input"})
CAUSAL_ONLY = frozenset({"causal", "positive_weights", "approximates_softmax", "validates_input"})


def _freqs(seed: int, d: int, m: int, global_rng: bool = False) -> np.ndarray:
    """The frequencies drawn from ``seed`` — or (``global_rng``, a defect) from a generator the
    seed does not reach, as code that draws from a library's global random state does."""
    if global_rng:
        return np.random.default_rng().standard_normal((m, d))
    return seeds.rng(seed).standard_normal((m, d))


def log_favor(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``log φ(x) = Wx − ‖x‖²/2 − ½ log m`` (x already pre-scaled), in ``x``'s dtype (the
    constant is cast first: a float64 scalar would promote a float32 computation)."""
    half_log_m = x.dtype.type(0.5 * np.log(w.shape[0]))
    return x @ w.T - 0.5 * np.sum(x * x, axis=-1, keepdims=True) - half_log_m


def _plain(fq: np.ndarray, fk: np.ndarray, v: np.ndarray, causal: bool,
           normalise: bool = True, den_eps: float = 0.0, den_floor: float = 0.0) -> np.ndarray:
    """Plain linear attention ``φ(Q)(φ(K)ᵀV) / φ(Q)(φ(K)ᵀ1)``; ``den_floor``: the denominator
    clamped from below (``clamp_min``, as much published code does), so features that all
    underflow give an output of 0 instead of 0/0 = NaN."""
    a = fq @ np.swapaxes(fk, -1, -2)
    if causal:
        a = np.tril(a)
    num = a @ v
    if not normalise:
        return num
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / np.maximum(a.sum(axis=-1, keepdims=True) + den_eps, den_floor)


def _softmax(scores: np.ndarray, v: np.ndarray, global_max: bool = False) -> np.ndarray:
    shift = scores.max() if global_max else scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - shift)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (e / e.sum(axis=-1, keepdims=True)) @ v


def _scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])


#: Score of a masked position: a large finite negative, as most published code uses (``-inf``
#: would make a row with no visible key NaN; this way such a row attends every key uniformly,
#: which is what a finite mask gives in practice).
MASKED = -1e30


def _mask(n: int, offset: int) -> np.ndarray:
    """True where key j is visible from query i: ``j ≤ i + offset``."""
    return np.tril(np.ones((n, n), dtype=bool), k=offset)


def _block_mask(n: int, block: int, leaky: int | None) -> np.ndarray:
    """The causal mask ``j ≤ i`` built block by block (``block`` queries at a time, as tiled
    kernels do); ``leaky``: the index of the block whose diagonal tile is left unmasked (each of
    its queries sees every key of its own block, the later ones included)."""
    mask = _mask(n, 0)
    if leaky is not None:
        lo, hi = leaky * block, min((leaky + 1) * block, n)
        mask[lo:hi, lo:hi] = True
    return mask


#: Tile of :func:`exact_softmax`'s blocked mask (``block_leak``).
BLOCK = 4


def exact_softmax(q, k, v, *, causal, seed=0, mask_offset=0, global_max=False, bias=0.0,
                  ignore_causal=False, force_causal=False, roll_heads=False, leaky_block=None,
                  **_):
    """Exact softmax attention with the switches the mutants flip; ``leaky_block``: the causal
    mask built in :data:`BLOCK`-query tiles with that tile's diagonal block left unmasked."""
    if roll_heads:
        k, v = np.roll(k, 1, axis=1), np.roll(v, 1, axis=1)
    s = _scores(q, k)
    n = s.shape[-1]
    if bias:
        pos = np.arange(n)
        s = s - bias * np.abs(pos[:, None] - pos[None, :])
    if (causal and not ignore_causal) or force_causal:
        mask = (_block_mask(n, BLOCK, leaky_block) if leaky_block is not None
                else _mask(n, mask_offset))
        s = np.where(mask, s, MASKED)
    with np.errstate(invalid="ignore", under="ignore"):
        return _softmax(s, v, global_max)


def favor(q, k, v, *, causal, seed=0, m=M_DEFAULT, prescale=True, key_shift="none",
          query_shift="row", eps_after_shift=0.0, normalise=True, den_eps=0.0,
          den_floor=0.0, dtype=np.float64, global_rng=False, **_):
    """FAVOR+ with the switches the mutants flip (plain feature path after the shifts).

    ``key_shift``: ``"none"`` (keys unshifted), ``"per_key"`` (max over each key's features:
    does not cancel), ``"sequence"`` (max over the whole sequence: leaks in causal mode),
    ``"batch"`` (max over everything: couples batch elements and heads).
    ``"log_space"``: no shift at all, the stable log-space kernel of :mod:`impls` (correct).
    ``query_shift``: ``"row"`` (max over each query's features: cancels) or ``"sequence"``.
    ``global_rng``: frequencies drawn without the seed (see :func:`_freqs`)."""
    d = q.shape[-1]
    w = _freqs(seed, d, m, global_rng).astype(dtype)
    s = d**-0.25 if prescale else 1.0
    lq = log_favor((q * s).astype(dtype), w)
    lk = log_favor((k * s).astype(dtype), w)
    if key_shift == "log_space":  # the correct stable path (impls.numpy.attention)
        out = log_linear_attention(lq, lk, v.astype(dtype), causal=causal)
        return np.asarray(out, dtype=np.float64)
    shifts = {
        "none": 0.0,
        "per_key": lambda a: a.max(axis=-1, keepdims=True),
        "row": lambda a: a.max(axis=-1, keepdims=True),
        "sequence": lambda a: a.max(axis=(-2, -1), keepdims=True),
        "batch": lambda a: a.max(),
    }
    ks, qs = shifts[key_shift], shifts[query_shift]
    lk = lk - (ks(lk) if callable(ks) else ks)
    lq = lq - qs(lq)
    fq, fk = np.exp(lq) + eps_after_shift, np.exp(lk) + eps_after_shift
    out = _plain(fq, fk, v.astype(dtype), causal, normalise, den_eps, den_floor)
    return np.asarray(out, dtype=np.float64)


def favor_zeroing_first_key(q, k, v, *, causal, seed=0, **kw):
    """FAVOR+ on the stable log-space path (right outputs) that then zeroes the first key of the
    caller's ``k`` in place, as linear-attention-transformer 0.19.1's ``linear_attn(q, k, v,
    kv_mask=...)`` overwrites ``k`` and ``v``."""
    out = favor(q, k, v, causal=causal, seed=seed, key_shift="log_space", **kw)
    k[..., 0, :] = 0.0
    return out


#: The block of keys whose tail :func:`favor_tail_read_past_the_end` reads unmasked.
TAIL_BLOCK = 4


def favor_tail_read_past_the_end(q, k, v, *, causal, seed=0, **kw):
    """FAVOR+ on the stable path (right outputs) that also reads ``v``'s last block of
    :data:`TAIL_BLOCK` rows as a full block from the memory after ``v`` wherever that memory
    belongs to the same allocation (``v`` a view into a larger buffer), multiplying the rows
    past the end by zero features — as a Triton kernel whose tail ``tl.load`` lacks its mask:
    exact while that memory holds finite numbers (``0·x = 0``), NaN where it holds NaN."""
    out = favor(q, k, v, causal=causal, seed=seed, key_shift="log_space", **kw)
    pad = (-v.shape[-2] % TAIL_BLOCK or TAIL_BLOCK) * v.shape[-1]
    base = v.base if isinstance(v.base, np.ndarray) else None
    if base is None or not v.flags.c_contiguous:
        return out
    start = v.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    room = base.nbytes - start - v.nbytes
    if start < 0 or room < pad * v.itemsize:
        return out
    flat = np.lib.stride_tricks.as_strided(v, shape=(v.size + pad,), strides=(v.itemsize,))
    past = np.array(flat[v.size:])  # the rows after the end, as an unmasked load reads them
    return out + 0.0 * past.sum()


def keys_aligned_to_values(q, k, v, *, causal, seed=0, **_):
    """Exact softmax attention that checks finiteness only (``ValueError`` naming the argument)
    and aligns the keys to the values' length, ``k[..., :len(v), :]`` (as code slicing a cache to
    the values it holds does): a ``v`` with fewer rows than ``k`` silently drops keys."""
    for name, a in (("q", q), ("k", k), ("v", v)):
        if not np.isfinite(np.asarray(a)).all():
            raise ValueError(f"{name} has non-finite entries")
    n = min(k.shape[-2], v.shape[-2])
    return exact_softmax(q, k[..., :n, :], v[..., :n, :], causal=causal, seed=seed)


def running_mean(q, k, v, *, causal, seed=0, **_):
    """Fully collapsed causal attention: row i is the mean of ``v_0 … v_i`` (uniform weights,
    the limit of a feature map whose stabiliser ε swamps every feature)."""
    n = v.shape[-2]
    return np.cumsum(v, axis=-2) / np.arange(1, n + 1)[:, None]


def nystromformer(q, k, v, *, causal=False, seed=0, landmarks=4, iterations=3,
                  couple_batch=False, **_):
    """Nyströmformer (Xiong et al. 2021; docs/math.md §8): segment-mean landmarks, ``Z ≈ A_S⁺`` by
    the cubic iteration from ``Z₀ = Aᵀ/(‖A‖₁‖A‖_∞)`` — per matrix, or (``couple_batch``) with
    the norms maximised over the whole batch, as some published code does."""
    d, n = q.shape[-1], q.shape[-2]
    s = d**-0.25
    qs, ks = q * s, k * s
    segs = np.array_split(np.arange(n), min(landmarks, n))
    ql = np.stack([qs[..., g, :].mean(axis=-2) for g in segs], axis=-2)
    kl = np.stack([ks[..., g, :].mean(axis=-2) for g in segs], axis=-2)

    def sm(a: np.ndarray) -> np.ndarray:
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    f = sm(qs @ np.swapaxes(kl, -1, -2))
    a = sm(ql @ np.swapaxes(kl, -1, -2))
    b = sm(ql @ np.swapaxes(ks, -1, -2))
    norm1 = np.abs(a).sum(axis=-2).max(axis=-1)  # max column sum
    norm_inf = np.abs(a).sum(axis=-1).max(axis=-1)  # max row sum
    if couple_batch:
        norm1, norm_inf = norm1.max(), norm_inf.max()
    z = np.swapaxes(a, -1, -2) / (np.asarray(norm1) * np.asarray(norm_inf))[..., None, None]
    eye = np.eye(a.shape[-1])
    for _ in range(iterations):
        az = a @ z
        z = 0.25 * z @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az)))
    return f @ (z @ (b @ v))


def _target(name: str, fn: Callable, claims: frozenset[str], validate: bool = True,
            call_seconds: float | None = None, **fixed) -> AttentionTarget:
    def attention(q, k, v, *, causal, seed=0, **kw):
        # Inputs are validated like the correct code does: each mutant has one defect only.
        if validate:
            check_attention_inputs(q, k, v, causal=causal, names=("q", "k", "v"),
                                   backend="numpy")
        return fn(q, k, v, causal=causal, seed=seed, **{**fixed, **kw})

    return AttentionTarget(f"mutant:{name}", attention, claims, call_seconds=call_seconds)


#: The cost a slow library declares (fla's kernels under the interpreter): the ci profiles then
#: run few random examples of each property, and only the fixed layouts reach longer sequences.
SLOW = 0.1


@functools.cache
def _scale_grad_function():
    import torch

    class ScaleGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, factor):
            ctx.factor = factor
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return g * ctx.factor, None

    return ScaleGrad


def scale_gradient(x: Any, factor: float) -> Any:
    """``x`` unchanged in the forward pass; the gradient reaching it multiplied by ``factor``
    (a defect of a backward pass, injected without touching the forward)."""
    return _scale_grad_function().apply(x, factor)


#: fla's attention targets, loaded as ``kernel-verify check`` loads an adapter.
FLA_SPEC = "kernel_verify.adapters.fla:attention_targets"


def fla_dk_scaled(factor: float, name: str) -> list[AttentionTarget]:
    """fla's real ``chunk_linear_attn`` (the adapter's target, Triton interpreter) with the
    gradient reaching ``k`` multiplied by ``factor`` (forward unchanged): the kernel's backward
    ``dk`` scaled, since the feature map in front of it is linear in its cotangent. ``factor =
    1``: the correct twin (the same wrapper, nothing scaled)."""
    import dataclasses

    from kernel_verify.properties.loader import load_targets

    # the adapter as a user points the suite at it (module:attribute), not a layer import
    base = next(t for t in load_targets(FLA_SPEC) if t.name.startswith("fla.chunk_linear_attn"))

    def scaled(fn):
        def wrapped(q, k, v, *args, **kw):
            return fn(q, scale_gradient(k, factor), v, *args, **kw)

        return wrapped

    def step(state, q_t, k_t, v_t, **kw):
        return base.step(state, q_t, scale_gradient(k_t, factor), v_t, **kw)

    return [dataclasses.replace(base, name=name, attention=scaled(base.attention),
                                stateful=scaled(base.stateful), varlen=scaled(base.varlen),
                                step=step)]


#: name -> (what is wrong, ``make(name)``: the target, named ``mutant:<name>``).
ATTENTION_MUTANTS: dict[str, tuple[str, Callable[[str], AttentionTarget]]] = {
    "causal_mask_leaks_next_key": (
        "causal softmax mask j ≤ i+1 (off by one: each row sees the next key)",
        named(_target, exact_softmax, EXACT, mask_offset=1)),
    "causal_mask_excludes_diagonal": (
        "causal softmax mask j < i (off by one: row i misses its own key; row 0 is empty)",
        named(_target, exact_softmax, EXACT, mask_offset=-1)),
    "causal_flag_ignored": (
        "causal=True silently computes non-causal attention",
        named(_target, exact_softmax, EXACT, ignore_causal=True)),
    "noncausal_applies_mask": (
        "causal=False still applies the causal mask",
        named(_target, exact_softmax, EXACT, force_causal=True)),
    "softmax_global_max_shift": (
        "softmax stabilised by the max over the whole tensor (x - x.max(), no axis): "
        "rows, heads and batch elements underflow together",
        named(_target, exact_softmax, EXACT, global_max=True)),
    "heads_rolled": (
        "keys/values of head h taken from head h−1 (a wrong reshape)",
        named(_target, exact_softmax, EXACT, roll_heads=True)),
    "relative_position_bias": (
        "a distance penalty −0.1|i−j| added to the scores while claiming permutation "
        "equivariance (non-causal)",
        named(_target, exact_softmax, EXACT, bias=0.1)),
    "attention_propagates_nan": (
        "exact softmax attention without input validation: NaN/Inf inputs give NaN outputs",
        named(_target, exact_softmax, EXACT, validate=False)),
    "favor_zeroes_callers_keys": (
        "FAVOR+ (stable path, right outputs) that zeroes the first key of the caller's k in "
        "place after computing, as linear-attention-transformer 0.19.1's linear_attn "
        "overwrites k and v",
        named(_target, favor_zeroing_first_key, ALL)),
    "favor_tail_read_past_the_end": (
        "FAVOR+ (stable path, right outputs) that reads v's last block of 4 rows as a full "
        "block from the memory after v when that memory exists (a Triton tail load without its "
        "mask): exact on finite memory, NaN on NaN",
        named(_target, favor_tail_read_past_the_end, ALL)),
    "favor_unnormalised": (
        "FAVOR+ without the D̂⁻¹ normalisation",
        named(_target, favor, ALL, normalise=False)),
    "favor_denominator_eps": (
        "FAVOR+ dividing by D̂ + 1e-6 (ε added to the denominator)",
        named(_target, favor, ALL, den_eps=1e-6)),
    "favor_denominator_clamped": (
        "FAVOR+ dividing by max(D̂, 1e-3) (the denominator clamped from below: exact wherever "
        "D̂ ≥ 1e-3, as at every unit-scale input)",
        named(_target, favor, ALL, den_floor=1e-3)),
    "favor_per_key_shift": (
        "FAVOR+ stabiliser subtracting each key's own max (a per-key shift does not cancel)",
        named(_target, favor, ALL, key_shift="per_key")),
    "favor_eps_after_shift": (
        "FAVOR+ with ε = 1e-4 added after the stabilising shift (biases towards uniform "
        "attention at large scale)",
        named(_target, favor, ALL, key_shift="batch", eps_after_shift=1e-4)),
    "favor_sequence_shift_causal": (
        "FAVOR+ key shift = max over the whole sequence in causal mode (future keys leak "
        "through underflow)",
        named(_target, favor, ALL, key_shift="sequence")),
    "favor_query_sequence_shift": (
        "FAVOR+ query shift = max over all queries of the sequence instead of per query "
        "(denominator clamped at the smallest normal)",
        named(_target, favor, ALL, query_shift="sequence", den_floor=TINY)),
    "favor_batch_shift": (
        "FAVOR+ key shift = max over batch, heads and keys (couples batch elements; "
        "denominator clamped at the smallest normal)",
        named(_target, favor, ALL, key_shift="batch", den_floor=TINY)),
    "favor_float32_inside": (
        "FAVOR+ silently computed in float32 inside a float64 interface",
        named(_target, favor, ALL, key_shift="log_space", dtype=np.float32)),
    "favor_missing_prescale": (
        "FAVOR+ without the d^(-1/4) pre-scaling (estimates exp(qᵀk), not exp(qᵀk/√d))",
        named(_target, favor, ALL, key_shift="log_space", prescale=False)),
    "favor_ignores_seed": (
        "FAVOR+ (stable log-space path) drawing its frequencies from a global generator the "
        "seed does not reach: two calls with the same seed use different features",
        named(_target, favor, ALL, key_shift="log_space", global_rng=True)),
    "keys_aligned_to_values": (
        "exact softmax attention validating finiteness but not shapes, slicing k to v's length:"
        " a v with fewer rows than k silently drops keys (claims validates_input)",
        named(_target, keys_aligned_to_values, EXACT, validate=False)),
    "causal_collapsed_to_running_mean": (
        "causal-only linear attention collapsed to uniform weights: row i returns the running "
        "mean of v_0 … v_i (claims only causal)",
        named(_target, running_mean, CAUSAL_ONLY)),
    "nystromformer_batch_coupled": (
        "Nyströmformer whose pseudo-inverse initialisation Z₀ uses norms over the whole batch",
        named(_target, nystromformer, frozenset(), couple_batch=True)),
    "causal_mask_leaks_in_second_block": (
        f"causal softmax mask built in tiles of {BLOCK} queries with the second tile's diagonal "
        "block left unmasked: rows 4-7 see the later keys of their own tile (wrong only from "
        "T = 6 on); a slow target (call_seconds) gets few random draws",
        named(_target, exact_softmax, EXACT, call_seconds=SLOW, leaky_block=1)),
    "fla_chunk_linear_attn_dk_scaled": (
        "fla's real chunk_linear_attn (Triton interpreter, float32 only) with its backward's "
        "dk scaled by 1.1 (forward unchanged)",
        lambda name: fla_dk_scaled(1.1, f"mutant:{name}")[0]),
}

_F = "attention_identities::test_"
#: The property each attention mutant is written for (``family::test``; the catalogue's default,
#: the whole family, for those not listed). A kill counts as intended only through one of these,
#: by a property assertion (:mod:`kernel_verify.mutants.kills`).
ATTENTION_KILLERS: dict[str, tuple[str, ...]] = {
    "causal_mask_leaks_next_key": (f"{_F}past_outputs_ignore_the_future",),
    # row 0 has no visible key: with a finite mask it attends every key (the future included)
    "causal_mask_excludes_diagonal": (f"{_F}past_outputs_ignore_the_future",),
    "causal_flag_ignored": (f"{_F}past_outputs_ignore_the_future",),
    "noncausal_applies_mask": (f"{_F}permutation_equivariance",),
    "softmax_global_max_shift": (f"{_F}batch_elements_and_heads_are_independent",),
    "heads_rolled": (f"{_F}batch_elements_and_heads_are_independent",),
    "relative_position_bias": (f"{_F}permutation_equivariance",),
    "attention_propagates_nan": (f"{_F}non_finite_input_is_rejected",),
    "favor_zeroes_callers_keys": (
        "inputs_unchanged::test_attention_leaves_its_inputs_unchanged",),
    "favor_tail_read_past_the_end": (
        "inputs_unchanged::test_attention_leaves_its_inputs_unchanged",),
    "favor_unnormalised": (f"{_F}partition_of_unity",
                           f"{_F}outputs_are_convex_combinations_of_visible_values"),
    "favor_denominator_eps": (f"{_F}partition_of_unity",
                              f"{_F}outputs_are_convex_combinations_of_visible_values"),
    "favor_denominator_clamped": (f"{_F}partition_of_unity",),
    "favor_per_key_shift": (f"{_F}error_to_softmax_attention_falls_as_m_grows",),
    "favor_eps_after_shift": (f"{_F}large_scale_keeps_the_argmax_value",),
    "favor_sequence_shift_causal": (f"{_F}past_outputs_ignore_the_future",),
    "favor_query_sequence_shift": (f"{_F}past_outputs_ignore_the_future",),
    "favor_batch_shift": (f"{_F}batch_elements_and_heads_are_independent",),
    "favor_missing_prescale": (f"{_F}error_to_softmax_attention_falls_as_m_grows",),
    "favor_ignores_seed": (f"{_F}same_seed_gives_same_output",),
    "keys_aligned_to_values": (f"{_F}mismatched_shapes_are_rejected",),
    "causal_collapsed_to_running_mean": (f"{_F}large_scale_keeps_the_argmax_value",),
    "nystromformer_batch_coupled": (f"{_F}batch_elements_and_heads_are_independent",),
    "causal_mask_leaks_in_second_block": (f"{_F}past_outputs_ignore_the_future",),
    # a float32-only target: its gradients are judged against a float64 evaluation of its
    # declared features, not only its own float32 differences (test_gradcheck_float64_attention
    # in float32 passes it); the state-gradient property fails it at the layout T = 63 too
    "fla_chunk_linear_attn_dk_scaled": (
        "declared_features::test_gradients_meet_declared_features",
        "attention_forms::test_gradients_flow_through_the_state"),
}
