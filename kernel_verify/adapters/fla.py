"""flash-linear-attention (``fla-core``): its Triton attention kernels, run under Triton's
interpreter on a CPU, and its feature-map modules.

**Attention kernels** (``fla.ops``; layout ``(B, T, H, D)``, the ``BTHD`` layout of
:class:`AttentionTarget`; causal only). Each is a target with its feature map, torch float32:

* linear attention ``chunk_linear_attn``, ``fused_chunk_linear_attn``,
  ``fused_recurrent_linear_attn`` with ``normalize=True`` on the features of fla's own
  ``TaylorFeatureMap(d)`` (Based's second-order Taylor map, ``φ(q)ᵀφ(k) = 1 + t + t²/2``,
  ``t = qᵀk/√d``, always ≥ 1/2, so the weights are positive): ``o_i = Σ_(j≤i) (sφ_i)ᵀφ_j v_j
  / (Σ_(j≤i) (sφ_i)ᵀφ_j + 1e-10)`` with fla's default scale ``s = m^(−1/2)`` (``m`` the number
  of features; it cancels in the ratio). These offer every form fla has: the state in and out
  (``initial_state``, ``output_final_state``: fla's state with ``normalize=True`` is the pair
  ``(S = Σ_j φ_j v_jᵀ (B, H, m, d_v), z = Σ_j φ_j (B, 1, H, m))``), one token at a time (the
  same kernel at T = 1 from the state) and packed sequences (``cu_seqlens``; batch 1, one
  state per sequence). fla fixes the chunk size inside the kernels (64 for ``chunk``), so there
  is no ``chunked(chunk_size=…)`` form;
* Based ``parallel_based`` and ``fused_chunk_based`` (``use_norm=True``): weights
  ``1 + s + s²/2``, ``s = qᵀk/√d``, normaliser ``z + 1e-6`` — the same Taylor kernel, computed
  inside the kernel (no state, no forms);
* ReBased ``parallel_rebased`` (fla's defaults ``use_scale=True``, ``use_normalize=True``,
  ``eps=1e-5``): weights ``s²``, normaliser ``z + 1e-5``; its feature map is
  ``φ(x) = vec(xxᵀ)/√d`` (the ReBased layer's learned affine map before it is the identity
  here).

``features(x, seed)`` gives each target's exact float64 features (the white-box extras of the
forms protocol), ``state_sums`` the linear-attention state as ``(S, z)``. All targets claim
``causal``, ``positive_weights``, ``differentiable`` (fla's hand-written backward passes) and
``deterministic_backward`` (under the interpreter programs run one after another: GPU atomics'
ordering is not exercised). ``parallel_rebased`` declares its partition-of-unity properties as
known failures (its ``1e-5`` normaliser shift; see the conformance page). The shape check
(q, k, v agree) is the adapter's (:func:`check_shapes`): fla's wrappers have none.
Not float64: fla's kernels accumulate in ``tl.float32`` (and allocate float32 outputs) whatever
the input dtype, so float64 inputs give float32-accurate results; the suite's float64 bounds do
not apply and the targets do not declare float64.

**Under Triton's interpreter** (:mod:`kernel_verify.adapters._triton_interpreter`): importing
this module sets ``TRITON_INTERPRET=1`` when ``triton`` is not yet imported (``kernel-verify
check`` runs the suite in a fresh subprocess that imports the adapter first); calling a kernel
target in a process that imported triton without it raises a RuntimeError that says so. The two
workarounds (the autotuner's timing; loop variables with ``.to``) and one change of speed (no
re-patching of ``triton.language`` per helper call) change no kernel's arithmetic.
The interpreter executes the kernel's algorithm — indexing, masks, chunk boundaries, state
passing, the backward mathematics — in NumPy on a CPU; GPU rounding (TF32, tensor-core
accumulation order) is not exercised.

**Feature-map modules** (``fla.modules.feature_map``, plain torch), compared with the registry
formula they implement (white-box, no random parameters; docs/math.md §5, §6):

* ``TaylorFeatureMap(head_dim)``: ``[1, z, z_i²/√2, (z_i z_j)_(i<j)]``, ``z = x·d^(−1/4)``, the
  second-order Taylor map of Based, ``φ(x)ᵀφ(y) = 1 + t + t²/2``, ``t = xᵀy/√d`` (registry
  ``taylor2_compressed``, kernel ``taylor`` of order 2);
* ``DPFPFeatureMap(head_dim, nu=4)``: ``concat_(j=1..ν) r ⊙ roll(r, j)``,
  ``r = [relu x, relu(−x)]`` (Schlag et al. 2021; registry ``dpfp`` at the library's ν = 4);
* ``ReLUFeatureMap()``: ``relu(x)`` (registry ``relu``, kernel ``relu_dot``).

* ``RebasedFeatureMap(head_dim)`` and ``HedgehogFeatureMap(head_dim)``
  (:mod:`kernel_verify.adapters._fla_feature_maps`): ReBased against the registry's ``rebased``
  (docs/math.md §21) with the module's γ, β set to seeded values; Hedgehog at its identity
  init against the registry's ``hedgehog`` (it computes one softmax over ``[2z, −2z]``: a
  finding). PolySketch's final non-negative step is measured there too (a finding, no target).

Not targets: the other modules (T2R, Hadamard, outer-product, the learned PolySketch sketches)
are learned layers without an exact kernel to compare with.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import numpy as np

from kernel_verify.adapters import _triton_interpreter as interp
from kernel_verify.adapters._fla_feature_maps import FEATURE_MAP_TARGETS as LEARNED_FEATURE_MAPS
from kernel_verify.adapters._fla_feature_maps import FINDINGS as FEATURE_MAP_FINDINGS
from kernel_verify.adapters._lazy import need
from kernel_verify.adapters.fla_gated import check_varlen, gated_targets
from kernel_verify.adapters.library import Finding, Library, Scope
from kernel_verify.properties.protocol import AttentionTarget, FeatureMapTarget

DPFP_NU = 4  # DPFPFeatureMap's default
#: fla's normaliser epsilons (added to the denominator): linear attention (utils.py), Based
#: (``parallel_based``/``fused_chunk_based``), ReBased (``parallel_rebased`` default ``eps``).
EPS = {"linear_attn": 1e-10, "based": 1e-6, "rebased": 1e-5}

if "triton" not in sys.modules:  # before anything imports triton (the check's subprocess)
    interp.enable()


def no_params(rng: np.random.Generator, d: int, m: int, config: Mapping[str, Any]) -> dict:
    """Deterministic maps draw nothing."""
    return {}


@cache
def _module(name: str, d: int):
    fm = need("fla", "modules.feature_map")
    if name == "TaylorFeatureMap":
        return fm.TaylorFeatureMap(d)
    if name == "DPFPFeatureMap":
        return fm.DPFPFeatureMap(d, nu=DPFP_NU)
    return getattr(fm, name)()


def module_fn(name: str):
    """``torch_fn(x, params, config)``: the library module ``name`` applied to ``x``."""

    def fn(x, params: Mapping[str, Any], config: Mapping[str, Any]):
        import torch

        with torch.no_grad():
            return _module(name, x.shape[-1])(x)

    return fn


# ---------------------------------------------------------------- kernels under the interpreter
@cache
def ops() -> dict[str, Callable[..., Any]]:
    """fla's attention kernels, imported under Triton's interpreter with the two workarounds of
    :mod:`~kernel_verify.adapters._triton_interpreter` applied (once per process)."""
    try:
        interp.enable()
    except interp.TritonAlreadyImported as err:
        raise RuntimeError(f"fla kernel targets: {err}") from None
    la = need("fla", "ops.linear_attn")
    based = need("fla", "ops.based")
    rebased = need("fla", "ops.rebased")
    interp.patch_autotuner()
    interp.patch_nested_lang()
    interp.patch_kernel_modules("fla.")
    return {"chunk_linear_attn": la.chunk_linear_attn,
            "fused_chunk_linear_attn": la.fused_chunk_linear_attn,
            "fused_recurrent_linear_attn": la.fused_recurrent_linear_attn,
            "parallel_based": based.parallel_based,
            "fused_chunk_based": based.fused_chunk_based,
            "parallel_rebased": rebased.parallel_rebased}


def _causal_only(name: str, causal: bool) -> None:
    if not causal:
        raise ValueError(f"{name} is causal only (fla's kernels have no non-causal mode); "
                         "causal must be True")


def check_shapes(name: str, q, k, v) -> None:
    """The adapter's own shape check (BTHD): q and k ``(B, T, H, d)`` alike, v ``(B, T, H, d_v)``
    with the same ``B, T, H``. fla's wrappers do not check this, and with fewer value rows than
    keys its linear-attention kernels write past the end of their output buffer (under the
    interpreter: glibc aborts the process, ``free(): invalid size``; see the conformance page),
    so a mismatch is refused here with a ValueError before any kernel runs."""
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"{name}: q, k, v must be 4-d (B, T, H, d) tensors, got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if tuple(k.shape) != tuple(q.shape):
        raise ValueError(f"{name}: k must have q's shape (B, T, H, d) = {tuple(q.shape)}, "
                         f"got {tuple(k.shape)}")
    if tuple(v.shape[:3]) != tuple(q.shape[:3]):
        raise ValueError(f"{name}: v must have q's (B, T, H) = {tuple(q.shape[:3])}, got "
                         f"{tuple(v.shape[:3])}")


def _taylor(x):
    """fla's ``TaylorFeatureMap(d)`` on ``x (…, d)`` (plain torch, differentiable)."""
    return _module("TaylorFeatureMap", x.shape[-1])(x)


def taylor_features(x: np.ndarray) -> np.ndarray:
    """Exact float64 Taylor features ``[1, x/d^¼, x_i²/(√2·√d), (x_i x_j)_(i<j)/√d]`` — the
    order of fla's ``TaylorFeatureMap`` (only inner products matter to the suite)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    iu = np.triu_indices(d, 1)
    outer = x[..., :, None] * x[..., None, :]
    return np.concatenate([np.ones_like(x[..., :1]), x / d**0.25,
                           np.diagonal(outer, axis1=-2, axis2=-1) / (np.sqrt(2.0) * d**0.5),
                           outer[..., iu[0], iu[1]] / d**0.5], axis=-1)


def square_features(x: np.ndarray) -> np.ndarray:
    """Exact float64 ReBased features ``vec(xxᵀ)/√d``: ``φ(q)ᵀφ(k) = (qᵀk)²/d = s²``."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    return (x[..., :, None] * x[..., None, :]).reshape(*x.shape[:-1], d * d) / d**0.5


def _state_in(state):
    return None if state is None else tuple(state)


def linear_attn_forms(kernel: str) -> dict[str, Callable[..., Any]]:
    """``attention``, ``stateful``, ``step`` and ``varlen`` of one fla linear-attention kernel
    on TaylorFeatureMap features (BTHD torch tensors; state ``(S (B, H, m, d_v), z (B, 1, H,
    m))``, fla's own format with ``normalize=True``)."""
    name = f"fla.{kernel}"

    def run(q, k, v, initial_state=None, cu_seqlens=None):
        check_shapes(name, q, k, v)
        fn = ops()[kernel]
        o, state = fn(_taylor(q), _taylor(k), v, initial_state=_state_in(initial_state),
                      output_final_state=True, normalize=True, cu_seqlens=cu_seqlens)
        return o, tuple(state)

    def attention(q, k, v, *, causal: bool, seed: int = 0):
        _causal_only(name, causal)
        return run(q, k, v)[0]

    def stateful(q, k, v, *, initial_state=None, seed: int = 0):
        return run(q, k, v, initial_state)

    def step(state, q_t, k_t, v_t, *, seed: int = 0):
        o, new = run(q_t[:, None], k_t[:, None], v_t[:, None], state)
        return new, o[:, 0]

    def varlen(q, k, v, *, cu_seqlens, initial_state=None, seed: int = 0):
        check_shapes(name, q, k, v)
        check_varlen(name, q, cu_seqlens, initial_state)
        return run(q, k, v, initial_state, cu_seqlens=cu_seqlens)

    return {"attention": attention, "stateful": stateful, "step": step, "varlen": varlen}


def linear_attn_state_sums(state: tuple) -> tuple[np.ndarray, np.ndarray]:
    """fla's ``(S (B, H, m, d_v), z (B, 1, H, m))`` as float64 ``(S, z (B, H, m))``."""
    s, z = state
    return (s.detach().to("cpu").double().numpy(), z.detach().to("cpu").double()[:, 0].numpy())


def parallel_attention(kernel: str) -> Callable[..., Any]:
    """``attention`` of a Based/ReBased kernel (BTHD torch tensors, fla's defaults)."""
    name = f"fla.{kernel}"

    def attention(q, k, v, *, causal: bool, seed: int = 0):
        _causal_only(name, causal)
        check_shapes(name, q, k, v)
        return ops()[kernel](q, k, v)

    return attention


def _bhtd_features(fn: Callable[[np.ndarray], np.ndarray]):
    def features(x: np.ndarray, seed: int) -> np.ndarray:
        return fn(x)

    return features


_EXACT = frozenset({"deterministic", "exact_finite", "psd_kernel"})
_ATTN = frozenset({"causal", "positive_weights", "differentiable", "deterministic_backward"})
#: parallel_rebased: known failures of the partition-of-unity properties (LIBRARY's findings).
REBASED_EPS = (
    "parallel_rebased divides by z + 1e-5 with z = Σ_(j≤i) (q_iᵀk_j)²/d: wherever z is small "
    "(q nearly orthogonal to the visible keys, small norms) the output is shrunk by z/(z + 1e-5) "
    "— with V ≡ 1 it is below 1, and 0 where q ⊥ every visible key")
REBASED_KNOWN = {"test_partition_of_unity": REBASED_EPS,
                 "test_outputs_are_convex_combinations_of_visible_values": REBASED_EPS,
                 # the kernel's z + 1e-5 normaliser is not in its declared features
                 "test_attention_meets_declared_features": REBASED_EPS,
                 "test_gradients_meet_declared_features": REBASED_EPS,
                 # float32 only: its gradients are compared with the declared formula's
                 # float64 gradient, which has no 1e-5 (∂L/∂q₀ is 0 there, the kernel's ~1e-3)
                 "test_low_precision_gradients_near_float64": REBASED_EPS}
#: Seconds of one kernel call under the interpreter at the suite's largest sizes (B = H = 3,
#: T = 12, d = 6): measured 0.04–0.10 s of CPU per call (the six kernels, 2-core machine; B = H
#: = 1 costs a fifth of it: one program per batch element and head). Declared as the target's
#: ``call_seconds``, so the ci profile runs fewer Hypothesis examples of each property on these
#: kernels (kernel_verify.properties.profiles.examples_for_cost) and each verdict says so.
CALL_SECONDS = 0.1
_ATTN_KW: dict[str, Any] = {"backends": ("torch",), "dtypes": ("float32",), "layout": "BTHD",
                            "call_seconds": CALL_SECONDS}


#: The block sizes along time inside each kernel's forward (the layouts of the forms, packed and
#: identity properties cross them: ``T = C − 1, C, C + 1, 2C + 1``; kernel_verify.properties.
#: layouts). ``chunk_linear_attn``: ``chunk_simple_gla``'s ``chunk_size = 64``;
#: ``fused_chunk_linear_attn``: ``min(64, max(16, next_pow2(T)))``, so 64 from T = 33 on;
#: ``fused_chunk_based``: ``BT = 16``; ``parallel_based``/``parallel_rebased``: query blocks
#: ``BTL = 128`` swept in key blocks ``BTS = 32``. ``fused_recurrent_linear_attn`` runs one token
#: at a time (no block along time: the suite's default layouts apply).
CHUNK_SIZES: dict[str, tuple[int, ...] | None] = {
    "chunk_linear_attn": (64,), "fused_chunk_linear_attn": (64,),
    "fused_recurrent_linear_attn": None, "parallel_based": (32, 128),
    "fused_chunk_based": (16,), "parallel_rebased": (32, 128)}


def _linear_attn_target(kernel: str) -> AttentionTarget:
    forms = linear_attn_forms(kernel)
    return AttentionTarget(f"fla.{kernel}+TaylorFeatureMap", forms["attention"], _ATTN,
                           stateful=forms["stateful"], step=forms["step"],
                           varlen=forms["varlen"], features=_bhtd_features(taylor_features),
                           state_sums=linear_attn_state_sums,
                           chunk_sizes=CHUNK_SIZES[kernel], **_ATTN_KW)


#: The attention kernels (names as targets carry them, without the ``fla.`` prefix).
KERNELS = ("chunk_linear_attn", "fused_chunk_linear_attn", "fused_recurrent_linear_attn",
           "parallel_based", "fused_chunk_based", "parallel_rebased")

attention_targets = [
    *(_linear_attn_target(k) for k in KERNELS[:3]),
    AttentionTarget("fla.parallel_based", parallel_attention("parallel_based"), _ATTN,
                    features=_bhtd_features(taylor_features),
                    chunk_sizes=CHUNK_SIZES["parallel_based"], **_ATTN_KW),
    AttentionTarget("fla.fused_chunk_based", parallel_attention("fused_chunk_based"), _ATTN,
                    features=_bhtd_features(taylor_features),
                    chunk_sizes=CHUNK_SIZES["fused_chunk_based"], **_ATTN_KW),
    AttentionTarget("fla.parallel_rebased", parallel_attention("parallel_rebased"), _ATTN,
                    features=_bhtd_features(square_features), known_failures=REBASED_KNOWN,
                    chunk_sizes=CHUNK_SIZES["parallel_rebased"], **_ATTN_KW),
]

feature_map_targets = [
    FeatureMapTarget("fla.TaylorFeatureMap", "taylor", _EXACT,
                     kernel_params={"order": 2}, config={"order": 2}, draw=no_params,
                     torch_fn=module_fn("TaylorFeatureMap"), formula="taylor2_compressed"),
    FeatureMapTarget("fla.DPFPFeatureMap", "dpfp", _EXACT | {"nonnegative"},
                     kernel_params={"nu": DPFP_NU}, config={"nu": DPFP_NU}, draw=no_params,
                     torch_fn=module_fn("DPFPFeatureMap"), formula="dpfp"),
    FeatureMapTarget("fla.ReLUFeatureMap", "relu_dot", _EXACT | {"nonnegative"},
                     draw=no_params, torch_fn=module_fn("ReLUFeatureMap"), formula="relu"),
    *LEARNED_FEATURE_MAPS,  # RebasedFeatureMap, HedgehogFeatureMap (_fla_feature_maps.py)
]

#: gated kernels (simple GLA, GLA, retention) as GatedAttentionTargets: adapters/fla_gated.py
targets = [*feature_map_targets, *attention_targets, *gated_targets()]


# ---------------------------------------------------------------------- the library's record
# What is known about the library (kernel_verify.adapters.library): the conformance page's text,
# the confirmed findings (its known failures derive from them) and their measurements.
_RIGHT = (
    "**Attention kernels** (float32, Triton interpreter: NumPy on a CPU, GPU rounding not "
    "exercised). `chunk_linear_attn`, `fused_chunk_linear_attn` and "
    "`fused_recurrent_linear_attn` (on fla's `TaylorFeatureMap`), `parallel_based`, "
    "`fused_chunk_based` and `parallel_rebased`, each verdict per target in the table below: "
    "causality, the same output for the same input, independence of batch elements and "
    "heads, finiteness over the input-scale sweep, and for the linear-attention and Based "
    "kernels partition of unity and convex combinations of the visible values. The three "
    "linear-attention kernels' "
    "state (`initial_state`, `output_final_state`, the pair (S, z) of `normalize=True`), "
    "one-token steps from the state and packed sequences (`cu_seqlens`) agree with the "
    "full causal run: split at every drawn point, the final state continues like the "
    "recurrence for every length, prefill then decode equals the causal prefix, packed "
    "equals separate runs, and the state does not grow with T. **Chunk boundaries**: each "
    "kernel declares the block sizes it works in along time (`chunk_sizes`: 64 for "
    "`chunk_linear_attn` and `fused_chunk_linear_attn`, 16 for `fused_chunk_based`, 32 "
    "and 128 for the parallel kernels; `fused_recurrent_linear_attn` runs one token at a "
    "time and gets the suite's default 4 and 16), and every forms, packed and identity "
    "property runs fixed layouts around them before its random draws (T = C − 1, C, "
    "C + 1, 2C + 1 — 63, 64, 65, 129 for the chunk kernels — with splits, causal cuts and "
    "packed boundaries at C − 1, C, C + 1; d = 2), whatever `call_seconds` cuts from the "
    "random search: every verdict of those properties in the table includes them. The "
    "measurement below (`python -m kernel_verify.adapters._fla_confirm fla_kernels_exact`"
    ", d = d_v = 16, T = 1, 63, 65 with `--quick`, also 64 and 128 without; run when "
    "this page was written) compares every kernel at a wider d "
    "with the exact formula within its derived float32 rounding bound, the linear-"
    "attention kernels also split with the state carried and packed, and the gradients "
    "of fla's hand-written backward passes with float64 autograd of the formula, within "
    "a derived first-order bound (the bound's size relative to the gradient is printed: "
    "componentwise worst case, far above the error measured). fla's kernels accumulate in "
    "float32 whatever the input dtype, so the targets declare float32 only; the gradient "
    "properties judge them in float32, and against a float64 evaluation of the declared "
    "features where the table says so. "
    "**Feature maps**: `TaylorFeatureMap` is exactly the second-order Taylor map of Based "
    "(φ(q)ᵀφ(k) = 1 + t + t²/2, t = qᵀk/√d) and matches the mpmath reference feature by "
    "feature; `DPFPFeatureMap` (ν = 4) and `ReLUFeatureMap` match their formulas exactly. "
    "`RebasedFeatureMap` (γ, β set to seeded values) is ReBased's (x̃ᵀỹ)²/d with its layer "
    "norm's eps = 1e-5 inside the root, feature by feature within the derived float32 bound "
    "(float64 and half inputs: see the finding); `HedgehogFeatureMap` and PolySketch's "
    "non-negative step do not compute the maps they name (findings). "
    "**Gated kernels** (`kernel_verify/adapters/fla_gated.py`, docs/math.md §16): "
    "`chunk_simple_gla`, `fused_recurrent_simple_gla`, `parallel_simple_gla`, `chunk_gla`, "
    "`fused_recurrent_gla`, `chunk_retention`, `fused_recurrent_retention` and "
    "`parallel_retention` run the gated forms properties (properties/test_gated_forms.py: "
    "every form against the exact gated recurrence within the derived float32 bound, with "
    "decays near 1, near 0, mixed and runs of strong decay; split with the state carried, "
    "prefill then decode, packed sequences with their gates, state size, and the gradients "
    "w.r.t. q, k, v and the log-gates against float64 closed forms), on layouts that cross "
    "the kernels' 64-token block (T = 65, 129, 63); the measurement below "
    "(`python -m kernel_verify.adapters._fla_confirm fla_gated_exact`) repeats it at "
    "d = 4 with each kernel's second route in fla (chunk against fused recurrent, parallel "
    "against chunk). The chunk kernels' error grows with the in-chunk cumulative "
    "log-gate they sum in float32 (1.2e-4 at a run of g = −30 against 4e-7 for the "
    "fused recurrent kernel): within the derived bound, which charges it. "
    "**Delta-rule kernels** (Gated DeltaNet, KDA, Comba, RWKV-7, DeltaNet) and fla's own "
    "references of them have their own page and time budget: "
    "`kernel-verify check kernel_verify.adapters.fla_delta:targets` "
    "(reports/conformance/fla_delta.md).")
_FINDINGS = (
    Finding(
        "parallel_rebased: the 1e-5 added to the normaliser shrinks outputs towards 0",
        "fla_rebased_eps",
        "`parallel_rebased` returns o_i / (z_i + eps) with `eps = 1e-5` (its default), "
        "z_i = Σ_(j≤i) s_ij², s = q_iᵀk_j/√d. The weights s² are nonnegative and can all "
        "be small — a query nearly orthogonal to the keys it sees, small norms, the first "
        "positions — and then the output is shrunk by z_i/(z_i + 1e-5): with V ≡ 1 it is "
        "below 1 (0 where q ⊥ every visible key, where the normalised output is 0/0). The "
        "kernel computes z itself accurately: the float64 formula z/(z + 1e-5) predicts "
        "its output to rounding. The target declares the two partition-of-unity "
        "properties as known failures with this reason.",
        "Guard the denominator only against 0 instead of shifting it: "
        "`o / torch.where(z > 0, z, 1)[..., None]` (or `z.clamp_min(torch.finfo(z.dtype)"
        ".tiny)`), which keeps the outputs convex combinations whenever a weight is "
        "positive.",
        ("test_partition_of_unity", "test_outputs_are_convex_combinations_of_visible_values")),
    Finding(
        "Linear attention: fewer value rows than keys overwrite memory",
        "fla_shape_overflow",
        "`chunk_linear_attn` and `fused_recurrent_linear_attn` (and the shared "
        "`chunk_simple_gla`/`fused_recurrent_simple_gla` paths) check neither that k has "
        "q's shape nor that v has as many rows as q and k. With v of T − 1 rows the kernels "
        "write T rows into an output allocated like v: under Triton's interpreter the "
        "write lands past the buffer on the CPU heap and glibc aborts the process "
        "(`free(): invalid size`), which crashed a test worker in the first run of the "
        "suite; on a GPU it is an out-of-bounds write to device memory. The adapter now "
        "checks shapes itself (`fla.check_shapes`), so the suite's mismatched-shape "
        "property passes on the adapter's check, not fla's.",
        "Check shapes in the Python wrappers before launching: `if k.shape != q.shape or "
        "v.shape[:-1] != q.shape[:-1]: raise ValueError(...)` (the same check belongs in "
        "`parallel_based`/`parallel_rebased`, which read past v).",
        ()),
)
_EXPLAINED: dict[str, str] = {}
_SCOPE = Scope(
    ("fla.chunk_", "fla.fused_", "fla.parallel_"),
    interp.TAG,
    "fla's attention kernels are Triton code. Here they run under Triton's interpreter "
    "(`TRITON_INTERPRET=1`), which executes each kernel's algorithm — indexing, masks, chunk "
    "boundaries, state passing, the hand-written backward mathematics — program by program "
    "in NumPy on a CPU. Every verdict on a kernel target is about that algorithm in float32: "
    "GPU-specific behaviour (TF32 and tensor-core accumulation order, shared-memory races, "
    "the ordering of atomics, the block sizes a GPU's autotuner would pick) is not "
    "exercised, and the table says so beside each such verdict. Interpreter workarounds, "
    "none of which changes what a kernel computes "
    "(`kernel_verify/adapters/_triton_interpreter.py`, tested in "
    "`tests/test_adapter_fla.py`):",
    interp.WORKAROUNDS)
LIBRARY = Library(
    key="fla", title="flash-linear-attention (fla-core)", module="fla",
    dist="fla-core", extra="fla",
    dependencies=("triton", "einops"),
    right=_RIGHT,
    findings=(*_FINDINGS, *FEATURE_MAP_FINDINGS),
    explained=_EXPLAINED,
    measured=("fla_kernels_exact", "fla_gated_exact"),
    scope=_SCOPE,
    confirmations=("fla_kernels_exact",
                   "fla_rebased_eps",
                   "fla_shape_overflow",
                   "fla_gated_exact",
                   "fla_rebased_map",
                   "fla_hedgehog_joint_softmax",
                   "fla_polysketch_square"),
    confirm_module="kernel_verify.adapters._fla_confirm", confirm_in_subprocess=True,
)
